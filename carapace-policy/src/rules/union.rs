//! Named profiles down to the kernel (`carapace run --profile NAME`): the kernel has one
//! rule table for every session, so it gets ONE image compiled over the main rule set and
//! every profile in use, and each session picks its rules with the bits of its
//! `SessionState`.
//!
//! The main set's rules come first, in their order, so they keep the kernel indices (and
//! flags) they have in the main set's own image: sessions without a profile see no change.
//! A profile's rules that the main set does not hold (same source, id and effect) follow as
//! copies marked [`Rule::per_session`], which compile without `RULE_ALWAYS_ON`. A session
//! of profile P then gets:
//! - `disabled` bits for the main set's rules P does not hold (locked rules never, nor those
//!   that hold in shadow sessions: a profile holds them all, `RuleSet::load_profile`);
//! - `activated` bits for P's copies that are always on in P (no trigger);
//! - for the rules its triggers switch on, the union index of P's rule of that id
//!   ([`ProfileBits::index`]), so a trigger switches on the profile's own rule.
use std::collections::BTreeMap;

use super::compile::kernel::{compile_with, Purpose};
use super::{Diagnostics, Rule, RuleSet, Trigger};
use crate::host::Host;

/// The kernel side of the profiles in use.
#[derive(Debug)]
pub struct Union {
    /// Every rule of the image (main set first); used for the image and to name the rule of
    /// a kernel event (`RuleSet::by_kernel_index`), never for Layer 1.
    pub set: RuleSet,
    /// Each profile's session bits, by profile name.
    pub bits: BTreeMap<String, ProfileBits>,
}

/// What a session of one profile writes into its `SessionState`, in union indices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileBits {
    /// The profile's own always-on rules.
    pub activated: Vec<u32>,
    /// The main set's rules the profile does not hold.
    pub disabled: Vec<u32>,
    /// The union index of each of the profile's kernel rules, by id (triggers and
    /// `carapace session disable` name rules by id).
    pub index: BTreeMap<String, u32>,
}

/// Whether two compiled rules are the same rule: same origin and id, and nothing a rule file
/// could change on a built-in rule (its mode, its exceptions) differs.
fn same(a: &Rule, b: &Rule) -> bool {
    let excepts = |r: &Rule| {
        r.except
            .iter()
            .map(|p| p.source().to_owned())
            .collect::<Vec<_>>()
    };
    a.source == b.source
        && a.id == b.id
        && a.id_hash == b.id_hash
        && a.mode == b.mode
        && a.locked == b.locked
        && a.actions == b.actions
        && excepts(a) == excepts(b)
        && format!("{:?}", a.except_net) == format!("{:?}", b.except_net)
}

/// Compiles the image of `main` and `profiles` (name, rule set) together. Errors (the kernel
/// table is full, too many rules on one key, the automata too large) name the rules at
/// fault; the caller keeps the rules it had.
pub fn compile(
    main: &RuleSet,
    profiles: &[(&str, &RuleSet)],
    host: &dyn Host,
) -> Result<Union, Diagnostics> {
    let mut rules: Vec<Rule> = main.rules.clone();
    let main_len = rules.len();
    // For each profile, the union position of each of its rules.
    let mut positions: Vec<Vec<usize>> = Vec::with_capacity(profiles.len());
    for (_, set) in profiles {
        let mut own = Vec::with_capacity(set.rules.len());
        for rule in &set.rules {
            let found = rules.iter().position(|u| same(u, rule));
            let at = found.unwrap_or_else(|| {
                let mut copy = rule.clone();
                copy.per_session = true;
                rules.push(copy);
                rules.len() - 1
            });
            own.push(at);
        }
        positions.push(own);
    }
    let mut diags = Vec::new();
    let image = compile_with(&mut rules, &mut diags, Purpose::Kernel, host);
    let diags = super::sorted(diags);
    if diags.has_errors() {
        return Err(diags);
    }
    let mut bits = BTreeMap::new();
    for ((name, set), own) in profiles.iter().zip(&positions) {
        let mut b = ProfileBits::default();
        for (rule, &at) in set.rules.iter().zip(own) {
            let Some(index) = rules[at].kernel_index else {
                continue;
            };
            b.index.insert(rule.id.clone(), index);
            let always = matches!(rule.trigger, None | Some(Trigger::Always));
            if at >= main_len && always {
                b.activated.push(index);
            }
        }
        for (at, rule) in rules[..main_len].iter().enumerate() {
            if let Some(index) = rule.kernel_index {
                if !rule.locked && !own.contains(&at) {
                    b.disabled.push(index);
                }
            }
        }
        b.activated.sort_unstable();
        b.activated.dedup();
        bits.insert((*name).to_owned(), b);
    }
    Ok(Union {
        set: RuleSet {
            rules,
            image,
            warnings: diags,
            ..RuleSet::default()
        },
        bits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{Homes, Options};
    use carapace_common::{RuleMeta, SessionState, RULE_ALWAYS_ON};

    fn opts() -> Options {
        Options {
            homes: Homes::fixed(["/home/u"]),
            resolver: |_| None,
            host: crate::host::real::host(),
        }
    }

    fn set(text: &str) -> RuleSet {
        RuleSet::load_text("/main.yaml", text, &opts()).unwrap_or_else(|d| panic!("{d}"))
    }

    fn profile(name: &str, text: &str, main: &RuleSet) -> RuleSet {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, text).unwrap();
        RuleSet::load_profile(&path, &opts(), &[], main).unwrap_or_else(|d| panic!("{d}"))
    }

    /// Whether the session of `bits` (none: a main-set session) has union rule `index` on.
    fn on(u: &Union, bits: Option<&ProfileBits>, index: u32) -> bool {
        let mut s = SessionState::new(1);
        if let Some(b) = bits {
            for &i in &b.activated {
                SessionState::set_bit(&mut s.activated, i, true);
            }
            for &i in &b.disabled {
                SessionState::set_bit(&mut s.disabled, i, true);
            }
        }
        let meta: RuleMeta = u.set.kernel_image().rules[index as usize];
        s.is_active(index, &meta)
    }

    fn index(set: &RuleSet, id: &str) -> u32 {
        set.by_id(id)
            .and_then(|r| r.kernel_index)
            .unwrap_or_else(|| panic!("no kernel rule {id}"))
    }

    const MAIN: &str = "version: 1\nrules:\n  - id: no-srv\n    block: \"/srv/data/**\"\n  - id: keep-etc\n    locked: true\n    block: \"/etc/carapace-test/**\"\n";
    const OPEN: &str = "version: 1\nrules:\n  - id: no-home\n    block: \"/home/**\"\n    except: \"/home/u/project/**\"\n";

    /// A main file's own copy of a pack's rule (same id, its own exceptions) that profiles
    /// keep, beside a profile that loads that pack: both hold, the main one renamed (a
    /// duplicate id refused every such profile).
    #[test]
    fn a_main_copy_of_a_pack_rule_is_kept_beside_the_packs() {
        let main = set("version: 1\nbuiltin: none\nrules:\n  - id: outside-listeners\n    block: { unix: outside-session }\n    except: [\"/srv/socks/**\"]\n");
        let p = profile(
            "packs",
            "version: 1\nrules:\n  - id: no-home\n    block: \"/home/**\"\n",
            &main,
        );
        let ids: Vec<&str> = p.rules().iter().map(|r| r.id.as_str()).collect();
        assert!(ids.contains(&"outside-listeners"), "{ids:?}");
        assert!(ids.contains(&"outside-listeners@main"), "{ids:?}");
        assert!(compile(&main, &[("packs", &p)], &*opts().host).is_ok());
    }

    #[test]
    fn main_rules_keep_their_indices_and_profile_sessions_get_their_own_rules() {
        let main = set(MAIN);
        let p = profile("open", OPEN, &main);
        let u = compile(&main, &[("open", &p)], &*opts().host).unwrap();
        // Sessions without a profile see the main set's image unchanged.
        for rule in main.rules() {
            if let Some(i) = rule.kernel_index {
                assert_eq!(
                    u.set.by_kernel_index(i).map(|r| r.id.as_str()),
                    Some(rule.id.as_str())
                );
                assert_eq!(
                    u.set.kernel_image().rules[i as usize],
                    main.kernel_image().rules[i as usize]
                );
            }
        }
        let bits = &u.bits["open"];
        let no_srv = index(&main, "no-srv");
        let keep_etc = index(&main, "keep-etc");
        let no_home = bits.index["no-home"];
        assert!(no_home as usize >= main.kernel_image().rules.len());
        assert_eq!(
            u.set.kernel_image().rules[no_home as usize].flags & RULE_ALWAYS_ON,
            0,
            "a profile's rule is off unless a session switches it on"
        );
        // Main session: its rules, not the profile's.
        assert!(on(&u, None, no_srv));
        assert!(!on(&u, None, no_home));
        // Profile session: the profile's rules, not the main file's, but its locked rule.
        assert!(!on(&u, Some(bits), no_srv));
        assert!(on(&u, Some(bits), no_home));
        assert!(on(&u, Some(bits), keep_etc));
        assert_eq!(bits.index["keep-etc"], keep_etc);
        // The built-in packs both hold are shared, not copied, and stay on in both.
        let shared = main
            .rules()
            .iter()
            .find(|r| r.source == "builtin:self-protection" && r.kernel_index.is_some())
            .expect("a self-protection kernel rule");
        let i = shared.kernel_index.unwrap();
        assert_eq!(bits.index[&shared.id], i);
        assert!(on(&u, None, i) && on(&u, Some(bits), i));
    }

    #[test]
    fn two_profiles_share_the_packs_and_keep_their_own_rules_apart() {
        let main = set("version: 1\nbuiltin: none\nrules: []\n");
        let a = profile("a", OPEN, &main);
        let b = profile("b", OPEN, &main);
        let u = compile(&main, &[("a", &a), ("b", &b)], &*opts().host).unwrap();
        let (ba, bb) = (&u.bits["a"], &u.bits["b"]);
        // Each file's rule is its own (its source names it in messages) and on only in its
        // profile's sessions.
        let (ia, ib) = (ba.index["no-home"], bb.index["no-home"]);
        assert_ne!(ia, ib);
        assert!(on(&u, Some(ba), ia) && !on(&u, Some(ba), ib));
        assert!(on(&u, Some(bb), ib) && !on(&u, Some(bb), ia));
        // A pack both profiles hold and the main set (`builtin: none`) does not: one copy.
        let pack = a
            .rules()
            .iter()
            .find(|r| r.source == "builtin:credentials" && r.kernel_index.is_some())
            .expect("a credentials kernel rule");
        assert_eq!(ba.index[&pack.id], bb.index[&pack.id]);
        assert!(!on(&u, None, ba.index[&pack.id]));
    }

    #[test]
    fn a_profile_cannot_drop_or_weaken_self_protection_or_a_locked_rule() {
        let main = set(MAIN);
        // `builtin: none` still gets the always-on packs; the locked rule of the main file
        // comes along.
        let p = profile("bare", "version: 1\nbuiltin: none\nrules: []\n", &main);
        assert!(p.by_id("keep-etc").is_some_and(|r| r.locked));
        // So do the main rules that hold in shadow sessions (the ways around
        // self-protection: private views, processes outside the session).
        let held: Vec<&Rule> = main
            .rules()
            .iter()
            .filter(|r| r.holds_in_shadow())
            .collect();
        assert!(
            held.iter().any(|r| r.source == "builtin:outside-session"),
            "the main set has the outside-session pack"
        );
        for rule in held {
            assert!(
                p.rules().iter().any(|r| same(r, rule)),
                "{} is dropped",
                rule.id
            );
        }
        assert!(p
            .rules()
            .iter()
            .any(|r| r.source == "builtin:self-protection"));
        let u = compile(&main, &[("bare", &p)], &*opts().host).unwrap();
        let bits = &u.bits["bare"];
        for rule in main
            .rules()
            .iter()
            .filter(|r| r.locked || r.holds_in_shadow())
        {
            if let Some(i) = rule.kernel_index {
                assert!(!bits.disabled.contains(&i), "{} is dropped", rule.id);
                assert!(on(&u, Some(bits), i), "{} is off", rule.id);
            }
        }
        // Reusing the locked rule's id for a weaker rule is an error at its line.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weak.yaml");
        std::fs::write(
            &path,
            "version: 1\nrules:\n  - id: keep-etc\n    log: \"/etc/carapace-test/**\"\n",
        )
        .unwrap();
        let err = RuleSet::load_profile(&path, &opts(), &[], &main).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("weak.yaml:3:"), "{text}");
        assert!(text.contains("keep-etc"), "{text}");
        // Exceptions to a locked built-in rule are refused as in any rule file.
        let locked = main
            .rules()
            .iter()
            .find(|r| r.locked && r.source.starts_with("builtin:"))
            .expect("a locked built-in rule");
        std::fs::write(
            &path,
            format!(
                "version: 1\nexceptions:\n  - rule: {}\n    except: \"/tmp/x\"\n",
                locked.id
            ),
        )
        .unwrap();
        let err = RuleSet::load_profile(&path, &opts(), &[], &main).unwrap_err();
        assert!(err.to_string().contains("is locked"), "{err}");
    }

    #[test]
    fn a_profiles_triggered_rule_is_switched_on_by_its_own_index() {
        let main = set(MAIN);
        let text = "version: 1\nrules:\n  - id: no-write-after-web\n    trigger: { after: { actions: [network], tool: [WebFetch] } }\n    block: \"/home/**\"\n    actions: [write]\n";
        let p = profile("web", text, &main);
        let u = compile(&main, &[("web", &p)], &*opts().host).unwrap();
        let bits = &u.bits["web"];
        let i = bits.index["no-write-after-web"];
        assert!(
            !bits.activated.contains(&i),
            "triggered: off until it fires"
        );
        assert!(!on(&u, Some(bits), i));
        assert!(!on(&u, None, i), "nor is it on in the main set's sessions");
    }

    /// Loading profiles beside the main rules, and reloading them, swaps the kernel's rules
    /// without a moment where a key holds neither set (`KernelMaps::replace_image`): the
    /// main rules are the same rules at the same indices in the union, and a union compiled
    /// again is the same rules, so neither swap needs room for two copies of them. (Staged
    /// as copies, the default packs' keys overflowed the refs a key holds, and the swap
    /// fell back to one pass, refusing unrelated files for a moment.)
    #[test]
    fn profiles_load_and_reload_as_staged_swaps() {
        use crate::image::{except_slots, staging};
        use std::collections::BTreeSet;
        let main = set(MAIN);
        let a = profile("a", OPEN, &main);
        let b = profile(
            "b",
            "version: 1\nrules:\n  - id: no-srv-open\n    block: \"/srv/open/**\"\n",
            &main,
        );
        let u = compile(&main, &[("a", &a), ("b", &b)], &*opts().host).unwrap();
        let (old, new) = (main.kernel_image(), u.set.kernel_image());
        let slots = except_slots(old, &BTreeSet::new()).unwrap();
        assert!(staging(old, &slots, new).is_some(), "main → union");
        let again = compile(&main, &[("a", &a), ("b", &b)], &*opts().host).unwrap();
        let slots = except_slots(new, &BTreeSet::new()).unwrap();
        let s = staging(new, &slots, again.set.kernel_image()).expect("union → union");
        assert!(
            s.image.prefix == new.prefix,
            "every rule stays where it was"
        );
    }
}
