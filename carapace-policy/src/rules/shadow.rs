//! Shadow sessions (`carapace run --shadow`): every rule is evaluated and what it would
//! refuse is reported, not refused — except the rules that keep a session from switching
//! Carapace off or from reaching the machine around the rules. Shadow mode must never be a
//! way to turn self-protection off, so those hold in shadow sessions as in any other.
use carapace_common::op;

use super::Rule;

/// Rule sources whose rules hold in shadow sessions: the self-protection pack (Carapace's
/// own files, pins and socket), the views a session could reach protected files through
/// under other names (`chroot`, user namespaces), and the sockets of processes outside the
/// session (a user's systemd manager would start processes outside the session's cgroup).
const HELD_PACKS: &[&str] = &[
    "builtin:self-protection",
    "builtin:private-views",
    "builtin:outside-session",
];

/// Prefix of the run-time packs the daemon writes about its own endpoints (its console's
/// port): locked self-protection like the pack.
const DAEMON_PACKS: &str = "daemon:";

/// Operations whose refusal always holds, whatever rule refuses them (a user's own
/// `view:` or `unix: outside-session` rule stands in for a pack left out).
const HELD_OPS: u32 = op::CHROOT | op::USERNS | op::OUTSIDE;

/// Whether a rule from `source` (`builtin:<pack>`, `daemon:<what>` or a rule file's path)
/// holds in shadow sessions (see the module's documentation).
#[must_use]
pub fn holds_by_source(source: &str) -> bool {
    HELD_PACKS.contains(&source) || source.starts_with(DAEMON_PACKS)
}

impl Rule {
    /// Whether the rule refuses in shadow sessions too.
    #[must_use]
    pub fn holds_in_shadow(&self) -> bool {
        holds_by_source(&self.source) || self.ops() & HELD_OPS != 0
    }
}

#[cfg(test)]
mod tests {
    use super::holds_by_source;
    use crate::rules::{Options, RuleSet};

    fn opts() -> Options {
        Options {
            homes: crate::rules::Homes::fixed(["/home/u"]),
            resolver: |_| None,
            host: crate::host::real::host(),
        }
    }

    #[test]
    fn self_protection_views_and_outside_hold_while_other_packs_are_shadowed() {
        let set = RuleSet::builtin(&opts());
        let held: Vec<&str> = set
            .rules()
            .iter()
            .filter(|r| r.holds_in_shadow())
            .map(|r| r.source.as_str())
            .collect();
        assert!(held.contains(&"builtin:self-protection"), "{held:?}");
        assert!(held.contains(&"builtin:private-views"), "{held:?}");
        assert!(held.contains(&"builtin:outside-session"), "{held:?}");
        let creds = set
            .rules()
            .iter()
            .find(|r| r.source == "builtin:credentials")
            .expect("the credentials pack has rules");
        assert!(!creds.holds_in_shadow(), "{}", creds.id);
        assert!(holds_by_source("daemon:console"));
        assert!(!holds_by_source("/var/lib/carapace/rules.yaml"));
    }

    #[test]
    fn a_users_own_chroot_rule_holds_too() {
        let text = "version: 1\nbuiltin: none\nrules:\n  - id: my-chroot\n    block: { view: chroot }\n  - id: my-env\n    block: \"/srv/**/.env\"\n";
        let set = RuleSet::parse_with("/r.yaml", text, &opts()).unwrap_or_else(|d| panic!("{d}"));
        let rule = |id: &str| set.rules().iter().find(|r| r.id == id).unwrap();
        assert!(rule("my-chroot").holds_in_shadow());
        assert!(!rule("my-env").holds_in_shadow());
    }

    #[test]
    fn the_kernel_image_marks_the_rules_that_hold() {
        let set = RuleSet::builtin(&opts());
        let image = set.kernel_image();
        let mut seen = (0, 0);
        for rule in set.rules() {
            let Some(index) = rule.kernel_index else {
                continue;
            };
            let flags = image.rules[index as usize].flags;
            let marked = flags & carapace_common::RULE_NO_SHADOW != 0;
            assert_eq!(marked, rule.holds_in_shadow(), "{}", rule.id);
            if marked {
                seen.0 += 1;
            } else {
                seen.1 += 1;
            }
        }
        assert!(
            seen.0 > 0 && seen.1 > 0,
            "held / shadowed kernel rules: {seen:?}"
        );
    }
}
