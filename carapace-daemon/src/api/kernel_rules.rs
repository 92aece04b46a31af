//! The rules in the kernel's terms ([`KernelRule`]), sent with each new session so that
//! `carapace run` can build a fallback kernel layer (Landlock) from exactly the rule set the
//! daemon runs when the daemon's own layer is unavailable.
use crate::api::proto::{KernelRule, NetForm};
use carapace_policy::rules::compile::kernel::{plan, rule_ops, Plan};
use carapace_policy::rules::model::Cidr;
use carapace_policy::rules::pattern::KernelForm;
use carapace_policy::rules::{Cond, Mode, Rule, RuleSet, Trigger};

/// Every `block` rule, with its kernel forms or why the kernel cannot match it.
#[must_use]
pub fn kernel_rules(set: &RuleSet) -> Vec<KernelRule> {
    set.rules()
        .iter()
        .filter(|r| r.mode == Mode::Block)
        .map(|rule| {
            let mut out = KernelRule {
                id: rule.id.clone(),
                message: rule.message.clone(),
                ops: rule_ops(rule),
                triggered: !matches!(rule.trigger, None | Some(Trigger::Always)),
                ..KernelRule::default()
            };
            if rule.source == crate::own_files::SOURCE {
                // Landlock can only withhold from a protected path's parent directories
                // the rights it withholds below them: a data dir in /tmp/x or a log in the
                // home would close those to every new file of the session.
                out.userspace_reason = "the daemon's own files outside the default places: \
                    Landlock would close their parent directories to new files; the eBPF \
                    layer and Layer 1 keep them"
                    .into();
                return out;
            }
            match plan(rule) {
                Ok(Plan::Path {
                    automata,
                    except_automata,
                    ..
                }) if !automata.is_empty() || !except_automata.is_empty() => {
                    let pattern = automata.iter().chain(&except_automata).map(|a| &a.pattern);
                    out.userspace_reason = format!(
                        "pattern `{}` needs the eBPF layer's path automaton; Landlock grants \
                         access by directory and file, not by pattern",
                        pattern.take(1).cloned().collect::<String>()
                    );
                }
                Ok(Plan::Path { forms, excepts, .. }) => {
                    for form in forms {
                        match form {
                            KernelForm::Exact(p) => out.exact.push(p),
                            KernelForm::Prefix(p) => out.prefixes.push(p),
                            KernelForm::Name(n) => out.names.push(n),
                        }
                    }
                    for form in excepts {
                        match form {
                            KernelForm::Exact(p) => out.except_exact.push(p),
                            KernelForm::Prefix(p) => out.except_prefixes.push(p),
                            KernelForm::Name(n) => out.except_names.push(n),
                        }
                    }
                }
                Ok(Plan::Net { .. }) if names_hosts(rule) => {
                    out.userspace_reason = "it matches host names, which only the eBPF layer \
                        follows (a session's lookups go to its resolver there); Landlock sees \
                        TCP ports, never names or addresses"
                        .into();
                }
                Ok(Plan::Net { entries, excepts }) => {
                    let form = |(cidr, port): (Cidr, u16)| NetForm {
                        cidr: format!(
                            "{}/{}",
                            std::net::Ipv6Addr::from(cidr.addr),
                            cidr.prefix_len
                        ),
                        port: u32::from(port),
                    };
                    out.net = entries.into_iter().map(form).collect();
                    out.except_net = excepts.into_iter().map(form).collect();
                }
                Ok(Plan::View { .. }) => {
                    out.userspace_reason = "Landlock cannot refuse chroot or user namespaces \
                        (it judges files by identity whatever the root, and refuses mounts)"
                        .into();
                }
                Err(reason) => out.userspace_reason = reason.to_string(),
            }
            out
        })
        .collect()
}

/// Whether a network rule speaks of host names, in its match or an exception.
fn names_hosts(rule: &Rule) -> bool {
    let own = matches!(&rule.cond, Some(Cond::Net(net)) if net.names().next().is_some());
    own || rule.except_net.iter().any(|e| e.names().next().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_policy::rules::{Homes, Options};

    #[test]
    fn block_rules_carry_their_kernel_forms() {
        let text = r#"
version: 1
builtin: none
rules:
  - block: "~/.ssh/**"
  - block: "**/.env"
    except: "/srv/app/.env"
  - block: "/etc/**"
    actions: [write]
  - warn: "/tmp/x"
  - block: "re:^/proc/\\d+/environ$"
  - block: { port: 25 }
  - block: { host: "*.pastebin.com" }
  - block: { host: "*", port: 443 }
    except: [github.com]
"#;
        let opts = Options {
            homes: Homes::fixed(["/home/a"]),
            resolver: |_| None,
            host: crate::policy_host::shared(),
        };
        let set = RuleSet::parse_with("t.yaml", text, &opts).unwrap();
        let rules = kernel_rules(&set);
        assert_eq!(rules.len(), 7, "the warn rule is not a kernel rule");
        assert_eq!(rules[0].prefixes, ["/home/a/.ssh/"]);
        assert_eq!(rules[0].ops, carapace_common::op::ALL);
        assert_eq!(rules[1].names, [".env"]);
        assert_eq!(rules[1].except_exact, ["/srv/app/.env"]);
        assert_eq!(rules[2].ops, carapace_common::op::WRITE);
        assert!(
            rules[3].userspace_reason.contains("path automaton"),
            "{:?}",
            rules[3]
        );
        assert_eq!(rules[4].net.len(), 1);
        assert_eq!(rules[4].net[0].cidr, "::/0");
        assert_eq!(rules[4].net[0].port, 25);
        // Names, in the match or an exception: Landlock cannot follow them, and says so
        // rather than refuse the whole port.
        for r in &rules[5..] {
            assert!(r.userspace_reason.contains("host names"), "{r:?}");
            assert!(r.net.is_empty() && r.except_net.is_empty(), "{r:?}");
        }
    }
}
