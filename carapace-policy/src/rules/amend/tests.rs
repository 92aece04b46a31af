use proptest::prelude::*;

use super::*;
use crate::rules::Homes;

fn opts() -> Options {
    Options {
        homes: Homes::fixed(["/home/alice", "/root"]),
        resolver: |_| None,
        host: crate::host::real::host(),
    }
}

const ORIGIN: &str = "/etc/carapace/rules.yaml";

fn note() -> Note {
    Note {
        when: "2026-11-27 11:00 UTC".into(),
        session: Some("s-1234".into()),
        from: "ledger record 7".into(),
    }
}

fn propose_in(text: &str, rule: &str, target: &Target) -> Result<Proposal, AmendError> {
    let rules = RuleSet::load_text(ORIGIN, text, &opts()).expect("the old file loads");
    propose(
        &rules,
        &RuleFile {
            origin: ORIGIN,
            text: Some(text),
        },
        rule,
        target,
        &note(),
        &opts(),
    )
}

fn read(path: &str) -> Target {
    Target::Path {
        action: Action::Read,
        path: path.into(),
    }
}

/// The lines the diff adds and removes.
fn changed(p: &Proposal) -> (Vec<String>, Vec<String>) {
    let lines = |sign: char| {
        p.diff
            .lines()
            .filter(|l| l.starts_with(sign) && !l.starts_with("+++") && !l.starts_with("---"))
            .map(|l| l[1..].to_owned())
            .collect::<Vec<_>>()
    };
    (lines('+'), lines('-'))
}

const USER_FILE: &str = "\
# my rules
version: 1
builtin: [credentials]   # only this pack
rules:
  # secrets of the project
  - id: project-secrets
    block: \"/srv/app/secrets/**\"
    message: \"no\"   # trailing comment

  - id: env-files
    block: \"**/.env\"
    except:
      - \"**/.env.example\"
    # after the list
  - { id: flow-rule, block: \"/srv/flow/**\" }
  - id: scalar-except
    block: \"/srv/s/**\"
    except: \"/srv/s/public\"
  - id: egress
    block: { host: \"*\" }
    except: [api.github.com]
";

#[test]
fn parses_what_decisions_record() {
    assert_eq!(
        Target::parse("read /home/u/.ssh/id_rsa").unwrap(),
        read("/home/u/.ssh/id_rsa")
    );
    assert_eq!(
        Target::parse("rename onto /etc/passwd").unwrap(),
        Target::Path {
            action: Action::Write,
            path: "/etc/passwd".into()
        }
    );
    assert_eq!(
        Target::parse("network 140.82.112.5:443 (api.github.com)").unwrap(),
        Target::Net {
            host: "140.82.112.5".into(),
            port: Some(443)
        }
    );
    assert_eq!(
        Target::parse("network [::1]:8080").unwrap(),
        Target::Net {
            host: "::1".into(),
            port: Some(8080)
        }
    );
    assert_eq!(
        Target::parse("network Example.COM").unwrap(),
        Target::Net {
            host: "example.com".into(),
            port: None
        }
    );
    for bad in [
        "command `rm -rf /`",
        "tool WebFetch",
        "content matching `x`",
        "chroot into /srv",
        "",
    ] {
        assert!(
            matches!(Target::parse(bad), Err(AmendError::NotAnOperation(_))),
            "{bad}"
        );
    }
}

#[test]
fn a_rule_of_the_file_gets_the_exact_path_in_its_own_list() {
    let p = propose_in(
        USER_FILE,
        "project-secrets",
        &read("/srv/app/secrets/db.key"),
    )
    .unwrap();
    let (added, removed) = changed(&p);
    assert!(removed.is_empty(), "{}", p.diff);
    assert_eq!(
        added,
        vec![
            "    # 2026-11-27 11:00 UTC: allowed from now on: read /srv/app/secrets/db.key, refused by `project-secrets` in session s-1234 (ledger record 7)".to_owned(),
            "    except:".to_owned(),
            "      - \"/srv/app/secrets/db.key\"".to_owned(),
        ],
        "{}",
        p.diff
    );
    // Added after the rule's last line, before the blank line and the next rule.
    assert!(p
        .new_text
        .contains("message: \"no\"   # trailing comment\n    # 2026"));
    // Comments elsewhere are kept; only lines were added.
    for line in USER_FILE.lines() {
        assert!(p.new_text.contains(line), "{line}");
    }
    // Exactly that path: a sibling stays blocked.
    let new = RuleSet::load_text(ORIGIN, &p.new_text, &opts()).unwrap();
    let rule = new.by_id("project-secrets").unwrap();
    assert!(!rule.matches_path("/srv/app/secrets/db.key", carapace_common::op::READ));
    assert!(rule.matches_path("/srv/app/secrets/other.key", carapace_common::op::READ));
    assert!(rule.matches_path("/srv/app/secrets/db.key2", carapace_common::op::READ));
}

#[test]
fn an_existing_list_grows_by_one_item_and_a_comment() {
    let p = propose_in(USER_FILE, "env-files", &read("/home/alice/p/.env")).unwrap();
    let (added, removed) = changed(&p);
    assert!(removed.is_empty(), "{}", p.diff);
    assert_eq!(added.len(), 2, "{}", p.diff);
    assert!(added[0].starts_with("      # 2026-11-27"), "{}", p.diff);
    assert_eq!(added[1], "      - \"/home/alice/p/.env\"");
    assert!(p
        .new_text
        .contains("      - \"**/.env.example\"\n      # 2026"));
}

#[test]
fn one_line_forms_change_one_line() {
    let p = propose_in(USER_FILE, "flow-rule", &read("/srv/flow/a")).unwrap();
    let (added, removed) = changed(&p);
    assert_eq!(
        removed,
        vec!["  - { id: flow-rule, block: \"/srv/flow/**\" }"]
    );
    assert_eq!(
        added[1],
        "  - { id: flow-rule, block: \"/srv/flow/**\", except: [\"/srv/flow/a\"] }"
    );

    let p = propose_in(USER_FILE, "scalar-except", &read("/srv/s/b")).unwrap();
    let (added, _) = changed(&p);
    assert_eq!(
        added[1], "    except: [\"/srv/s/public\", \"/srv/s/b\"]",
        "{}",
        p.diff
    );

    let target = Target::Net {
        host: "203.0.113.7".into(),
        port: Some(8443),
    };
    let p = propose_in(USER_FILE, "egress", &target).unwrap();
    let (added, _) = changed(&p);
    assert_eq!(
        added[1], "    except: [api.github.com, { host: \"203.0.113.7\", port: 8443 }]",
        "{}",
        p.diff
    );
    let new = RuleSet::load_text(ORIGIN, &p.new_text, &opts()).unwrap();
    let ip = "203.0.113.7".parse().unwrap();
    assert!(new.matches_net(ip, 8443).is_empty());
    assert!(!new.matches_net(ip, 8444).is_empty(), "only that port");
}

#[test]
fn a_builtin_rule_gets_an_entry_in_exceptions() {
    let target = read("/home/alice/.aws/sso/cache/mine.json");
    let p = propose_in(USER_FILE, "aws-credentials", &target).unwrap();
    let (added, removed) = changed(&p);
    assert!(removed.is_empty(), "{}", p.diff);
    assert_eq!(added[0], "exceptions:");
    assert_eq!(added[2], "  - rule: \"aws-credentials\"");
    assert_eq!(p.source, "builtin:credentials");
    let new = RuleSet::load_text(ORIGIN, &p.new_text, &opts()).unwrap();
    let rule = new.by_id("aws-credentials").unwrap();
    assert!(!rule.matches_path(
        "/home/alice/.aws/sso/cache/mine.json",
        carapace_common::op::READ
    ));
    assert!(rule.matches_path(
        "/home/alice/.aws/sso/cache/other.json",
        carapace_common::op::READ
    ));

    // A second one for the same rule joins its entry; another rule gets its own.
    let rules = RuleSet::load_text(ORIGIN, &p.new_text, &opts()).unwrap();
    let file = RuleFile {
        origin: ORIGIN,
        text: Some(&p.new_text),
    };
    let q = propose(
        &rules,
        &file,
        "aws-credentials",
        &read("/root/.aws/sso/x"),
        &note(),
        &opts(),
    )
    .unwrap();
    let (added, removed) = changed(&q);
    assert!(removed.is_empty(), "{}", q.diff);
    assert_eq!(added.len(), 2, "{}", q.diff);
    assert_eq!(added[1], "      - \"/root/.aws/sso/x\"", "{}", q.diff);
    let r = propose(
        &rules,
        &file,
        "netrc",
        &read("/home/alice/.netrc"),
        &note(),
        &opts(),
    )
    .unwrap();
    let (added, removed) = changed(&r);
    assert!(removed.is_empty(), "{}", r.diff);
    assert_eq!(added[1], "  - rule: \"netrc\"", "{}", r.diff);
}

#[test]
fn no_file_yet_means_a_new_one_on_the_default_packs() {
    let rules = RuleSet::load_text("builtin", "version: 1\n", &opts()).unwrap();
    let p = propose(
        &rules,
        &RuleFile {
            origin: ORIGIN,
            text: None,
        },
        "aws-credentials",
        &read("/home/alice/.aws/config"),
        &note(),
        &opts(),
    )
    .unwrap();
    assert!(
        p.new_text.starts_with("version: 1\nexceptions:\n"),
        "{}",
        p.new_text
    );
}

#[test]
fn locked_rules_are_refused_and_cannot_be_excepted_by_hand() {
    // Locked in its pack (credentials), and every self-protection rule.
    let err = propose_in(
        USER_FILE,
        "ssh-private-keys",
        &read("/home/alice/.ssh/id_rsa"),
    );
    assert!(matches!(err, Err(AmendError::Locked(_))), "{err:?}");
    assert!(err
        .unwrap_err()
        .to_string()
        .contains("no rule file can weaken it"));
    let id = RuleSet::load_text(ORIGIN, USER_FILE, &opts())
        .unwrap()
        .rules()
        .iter()
        .find(|r| r.locked && r.source == "builtin:self-protection")
        .map(|r| r.id.clone())
        .expect("the self-protection pack is always in force");
    let err2 = propose_in(USER_FILE, &id, &read("/etc/carapace/rules.yaml"));
    assert!(matches!(err2, Err(AmendError::Locked(_))), "{err2:?}");
    let by_hand = format!("{USER_FILE}exceptions:\n  - rule: {id}\n    except: [\"/x\"]\n");
    let diags = RuleSet::load_text(ORIGIN, &by_hand, &opts()).unwrap_err();
    assert!(diags.to_string().contains("is locked"), "{diags}");
}

#[test]
fn what_an_exception_cannot_name_is_refused() {
    let text = "version: 1\nbuiltin: none\nrules:\n  - id: no-rm\n    block: { command: \"rm -rf *\" }\n  - id: views\n    block: { view: chroot }\n";
    let err = propose_in(
        text,
        "no-rm",
        &Target::Net {
            host: "a.example".into(),
            port: None,
        },
    );
    assert!(
        matches!(err, Err(AmendError::NoException { .. })),
        "{err:?}"
    );
    let err = propose_in(text, "views", &read("/srv"));
    assert!(
        matches!(err, Err(AmendError::NoException { .. })),
        "{err:?}"
    );
    assert!(matches!(
        propose_in(text, "nope", &read("/x")),
        Err(AmendError::UnknownRule(_))
    ));
}

#[test]
fn odd_paths_become_anchored_regexes() {
    let text = "version: 1\nbuiltin: none\nrules:\n  - id: srv\n    block: \"/srv/**\"\n";
    let p = propose_in(text, "srv", &read("/srv/a[1]*.txt")).unwrap();
    assert!(p.exception.starts_with("\"re:^"), "{}", p.exception);
    let new = RuleSet::load_text(ORIGIN, &p.new_text, &opts()).unwrap();
    let rule = new.by_id("srv").unwrap();
    assert!(!rule.matches_path("/srv/a[1]*.txt", carapace_common::op::READ));
    assert!(rule.matches_path("/srv/a1x.txt", carapace_common::op::READ));
}

#[test]
fn the_override_key_is_validated() {
    for (text, want) in [
        ("version: 1\nexceptions:\n  - rule: nope\n    except: [\"/x\"]\n", "no rule `nope`"),
        ("version: 1\nexceptions: 3\n", "must be a list"),
        ("version: 1\nexceptions:\n  - rule: netrc\n", "needs `rule`"),
        ("version: 1\nexceptions:\n  - rule: netrc\n    except: [\"relative\"]\n", "relative"),
        ("version: 1\nrules:\n  - id: mine\n    block: /x/**\nexceptions:\n  - rule: mine\n    except: [\"/x/y\"]\n", "not a built-in rule"),
    ] {
        let diags = RuleSet::load_text(ORIGIN, text, &opts()).unwrap_err().to_string();
        assert!(diags.contains(want), "{text}: {diags}");
        assert!(diags.contains(&format!("{ORIGIN}:")), "{diags}");
    }
}

#[test]
fn the_safety_check_lists_a_must_block_fixture_the_change_unblocks() {
    // `/home/alice/.aws/credentials` is a must-block case of the credentials pack.
    let p = propose_in(
        USER_FILE,
        "aws-credentials",
        &read("/home/alice/.aws/credentials"),
    )
    .unwrap();
    let history = vec![
        HistoryOp {
            label: "ledger record 3".into(),
            target: read("/home/alice/.aws/credentials"),
        },
        HistoryOp {
            label: "ledger record 4".into(),
            target: read("/home/alice/.aws/config"),
        },
    ];
    let r = replay(ORIGIN, &p.old_text, &p.new_text, &history, &opts()).unwrap();
    assert!(r.unblocks_fixture(), "{r:?}");
    assert!(r.newly_allowed.iter().any(|n| n.must_block
        && n.origin == "rules/fixtures/credentials.yaml:29"
        && n.what.contains(".aws/credentials")));
    assert!(r.fixtures_checked > 300, "{}", r.fixtures_checked);
    // From the history, the one operation: not the other key.
    let from_history: Vec<_> = r.newly_allowed.iter().filter(|n| !n.must_block).collect();
    assert_eq!(from_history.len(), 1, "{r:?}");
    assert_eq!(from_history[0].origin, "ledger record 3");

    // A path no fixture names unblocks none.
    let p = propose_in(
        USER_FILE,
        "aws-credentials",
        &read("/home/alice/.aws/sso/mine"),
    )
    .unwrap();
    let r = replay(ORIGIN, &p.old_text, &p.new_text, &[], &opts()).unwrap();
    assert!(!r.unblocks_fixture(), "{r:?}");
    assert!(r.newly_allowed.is_empty(), "{r:?}");
}

fn arb_file() -> impl Strategy<Value = String> {
    let comment = prop_oneof![
        Just(String::new()),
        Just("  # c".to_owned()),
        Just(" #x".to_owned())
    ];
    let path = prop_oneof![
        Just("/srv/a/**"),
        Just("**/.env"),
        Just("/srv/b/c"),
        Just("~/.cfg/**")
    ];
    let except = prop_oneof![
        Just(String::new()),
        Just("\n    except: \"/srv/a/keep\"".to_owned()),
        Just("\n    except: [\"/srv/a/k1\", '/srv/a/k2']".to_owned()),
        Just("\n    except:\n      - /srv/a/k3\n      # note\n      - \"/srv/a/k4\"".to_owned()),
        Just("\n    except:\n    - /srv/a/k5".to_owned()),
        Just("\n    except: []".to_owned()),
    ];
    let message = prop_oneof![
        Just(String::new()),
        Just("\n    message: \"m\"".to_owned()),
        Just("\n    message: |\n      line one\n      # not a comment\n".to_owned()),
        Just("\n    message: >\n      folded\n".to_owned()),
    ];
    let rule =
        (path, except, message, comment.clone(), any::<bool>()).prop_map(|(p, e, m, c, flow)| {
            if flow {
                format!("  - {{ block: \"{p}\" }}{c}\n")
            } else {
                format!("  - block: \"{p}\"{c}{e}{m}\n")
            }
        });
    (
        prop::collection::vec(rule, 1..4),
        any::<bool>(),
        comment,
        prop_oneof![
            Just(String::new()),
            Just(
                "exceptions:\n  - rule: aws-credentials\n    except: [\"/root/.aws/k\"]\n"
                    .to_owned()
            ),
            Just("exceptions: []\n".to_owned()),
        ],
    )
        .prop_map(|(rules, blank, c, ex)| {
            let sep = if blank { "\n" } else { "" };
            format!(
                "version: 1{c}\nbuiltin: [credentials]\nrules:\n{}{sep}{ex}",
                rules.join(sep)
            )
        })
}

fn arb_target() -> impl Strategy<Value = (String, Target)> {
    prop_oneof![
        "[a-z0-9._*\\[\\] -]{1,12}"
            .prop_map(|name| ("file".to_owned(), read(&format!("/srv/a/{name}")))),
        "[a-z0-9._-]{1,12}".prop_map(|name| ("file".to_owned(), read(&format!("/srv/b/c{name}")))),
        "[a-z0-9._-]{1,12}".prop_map(|name| ("file".to_owned(), read(&format!("/x/{name}/.env")))),
        "[a-z0-9_-]{1,12}".prop_map(|name| (
            "builtin".to_owned(),
            read(&format!("/home/alice/.aws/sso/{name}"))
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Any valid rule file and any operation a rule refuses: either a valid file whose
    /// only change is the exception and that allows the operation, or a clear refusal.
    #[test]
    fn an_edit_is_valid_and_allows_exactly_the_operation_or_refused(
        text in arb_file(),
        (kind, target) in arb_target(),
    ) {
        let Ok(rules) = RuleSet::load_text(ORIGIN, &text, &opts()) else {
            // Not a valid file to begin with (e.g. a derived id twice): nothing to check.
            return Ok(());
        };
        let Target::Path { path, .. } = &target else { unreachable!() };
        let Some(rule) = rules
            .matches_path(path, carapace_common::op::READ)
            .into_iter()
            .find(|r| (kind == "builtin") == r.source.starts_with("builtin:"))
            .map(|r| r.id.clone())
        else {
            return Ok(());
        };
        let file = RuleFile { origin: ORIGIN, text: Some(&text) };
        match propose(&rules, &file, &rule, &target, &note(), &opts()) {
            Ok(p) => {
                let new = RuleSet::load_text(ORIGIN, &p.new_text, &opts());
                prop_assert!(new.is_ok(), "{}\n{:?}", p.new_text, new.err());
                let new = new.unwrap();
                let old_rule = rules.by_id(&rule).unwrap();
                let new_rule = same_rule(&rules, &new, old_rule).unwrap();
                prop_assert!(
                    !new_rule.matches_path(path, carapace_common::op::READ),
                    "{}", p.new_text
                );
                // Exactly that path: one beside it is still refused.
                let beside = format!("{path}.other");
                prop_assert!(new_rule.matches_path(&beside, carapace_common::op::READ)
                    || !old_rule.matches_path(&beside, carapace_common::op::READ), "{}", beside);
                prop_assert!(new.rules().len() == rules.rules().len());
                // Every old line is still there, in order.
                let mut rest = p.new_text.lines();
                for line in text.lines().filter(|l| !l.contains('{') && !l.contains("except: ")) {
                    prop_assert!(rest.any(|l| l == line), "lost {line:?} in\n{}", p.new_text);
                }
            }
            // Clear refusals: an unusual layout, or a path the exception cannot name exactly.
            Err(AmendError::Edit(why)) => prop_assert!(!why.to_string().is_empty()),
            Err(AmendError::NotAllowed(what)) => prop_assert!(what.ends_with(' '), "{what}"),
            Err(e) => prop_assert!(false, "unexpected refusal {e} for\n{text}"),
        }
    }
}
