use std::collections::BTreeMap;
use std::net::IpAddr;

use carapace_common::{
    op, NetRef, RuleRef, REFS_PER_KEY, REF_EXCEPT, RULE_ALWAYS_ON, RULE_APPROVE, RULE_HOLD,
};
use proptest::prelude::*;

use super::*;

fn fake_resolver(host: &str) -> Option<Vec<IpAddr>> {
    match host {
        "metadata.example.test" => {
            Some(vec!["192.0.2.7".parse().ok()?, "2001:db8::7".parse().ok()?])
        }
        _ => None,
    }
}

fn opts() -> Options {
    Options {
        homes: Homes::fixed(["/home/alice", "/root"]),
        resolver: fake_resolver,
        host: crate::host::real::host(),
    }
}

/// What the daemon compiles with: this machine's homes, its resolver and file system.
fn real_opts() -> Options {
    crate::host::real::options()
}

fn parse(text: &str) -> Result<RuleSet, Diagnostics> {
    RuleSet::parse_with("t.yaml", text, &opts())
}

fn ok(text: &str) -> RuleSet {
    match parse(text) {
        Ok(set) => set,
        Err(d) => panic!("rule text did not compile:\n{d}\n{text}"),
    }
}

fn errors(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("expected diagnostics for:\n{text}"),
        Err(d) => d.to_string(),
    }
}

/// A user file without built-in packs.
fn user(rules: &str) -> String {
    format!("version: 1\nbuiltin: none\nrules:\n{rules}")
}

/// Rules `r00`, `r01`, … with the given bodies.
fn rules_text<'a>(rules: impl Iterator<Item = (usize, &'a str)>) -> String {
    use std::fmt::Write;
    rules.fold(String::new(), |mut out, (i, body)| {
        let _ = writeln!(out, "  - id: r{i:02}\n{body}");
        out
    })
}

fn refs(rule: u32, flags: u32) -> Vec<RuleRef> {
    vec![RuleRef { rule, flags }]
}

fn key(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn mapped(v4: [u8; 4]) -> [u8; 16] {
    std::net::Ipv4Addr::from(v4).to_ipv6_mapped().octets()
}

fn userspace_reason(set: &RuleSet, id: &str) -> String {
    match &set
        .by_id(id)
        .unwrap_or_else(|| panic!("no rule {id}"))
        .enforcement
    {
        Enforcement::Userspace(reason) => reason.clone(),
        Enforcement::Kernel => panic!("rule {id} compiled to the kernel"),
        Enforcement::Unplanned => panic!("rule {id} was not planned"),
    }
}

// ---- short forms, ids, modes ----

#[test]
fn short_forms_set_mode_and_pattern() {
    let set = ok(&user(
        "  - block: \"~/.env\"\n  - approve: \"/srv/**\"\n  - warn: \"**/x\"\n  - log: \"/var/log/**\"\n  - allow: \"/tmp/**\"\n",
    ));
    let modes: Vec<(&str, Mode)> = set
        .rules()
        .iter()
        .map(|r| (r.id.as_str(), r.mode))
        .collect();
    assert_eq!(
        modes,
        [
            ("block-home-env", Mode::Block),
            ("approve-srv", Mode::Approve),
            ("warn-x", Mode::Warn),
            ("log-var-log", Mode::Log),
            ("allow-tmp", Mode::Allow)
        ]
    );
    assert!(set
        .by_id("block-home-env")
        .is_some_and(|r| r.kernel_index == Some(0)));
    // An approve rule on paths reaches the kernel, flagged: refused until approved.
    let approve = set.by_id("approve-srv").expect("approve-srv");
    assert_eq!(approve.enforcement, Enforcement::Kernel);
    assert_eq!(approve.kernel_index, Some(1));
    assert_eq!(
        set.kernel_image().rules[1].flags & RULE_APPROVE,
        RULE_APPROVE
    );
    assert_eq!(
        set.kernel_image().rules[0].flags & RULE_APPROVE,
        0,
        "a block rule is not approvable"
    );
    assert!(userspace_reason(&set, "warn-x").contains("mode `warn`"));
    assert!(userspace_reason(&set, "allow-tmp").contains("mode `allow`"));
    assert_eq!(set.kernel_image().rules.len(), 2);
    assert_eq!(set.rules()[0].message, "blocked by rule `block-home-env`");
}

#[test]
fn approve_rules_reach_the_kernel_on_paths_and_addresses() {
    let set = ok(&user(
        "  - id: drafts\n    approve: \"/srv/drafts/**\"\n    actions: [write]\n  - id: api\n    approve: { host: \"127.0.0.9\", port: 8080 }\n  - id: after-web\n    trigger: { after: { actions: [network] } }\n    effect: { actions: [write], path: \"/srv/work/**\" }\n    mode: approve\n",
    ));
    let drafts = set.by_id("drafts").expect("drafts");
    let index = drafts.kernel_index.expect("drafts in the kernel") as usize;
    let meta = set.kernel_image().rules[index];
    assert_eq!(meta.flags & RULE_APPROVE, RULE_APPROVE);
    assert_eq!(meta.ops, op::WRITE);
    // An address and port, flagged the same way: the approval is an exception for them.
    let api = set.by_id("api").expect("api");
    let meta = set.kernel_image().rules[api.kernel_index.expect("api in the kernel") as usize];
    assert_eq!(meta.flags & RULE_APPROVE, RULE_APPROVE);
    assert_eq!(meta.ops, op::NETWORK);
    // A session rule's effect on paths is approvable too, once its trigger fires.
    let after = set.by_id("after-web").expect("after-web");
    let meta = set.kernel_image().rules[after.kernel_index.expect("after-web") as usize];
    assert_eq!(meta.flags, RULE_APPROVE, "not always on, approvable");
}

#[test]
fn hold_is_for_approve_rules_on_files() {
    let set = ok(&user(
        "  - id: drafts\n    approve: \"/srv/drafts/**\"\n    hold: true\n  - id: plain\n    approve: \"/srv/plain/**\"\n",
    ));
    let drafts = set.by_id("drafts").expect("drafts");
    assert!(drafts.hold);
    let meta = set.kernel_image().rules[drafts.kernel_index.expect("in the kernel") as usize];
    assert_eq!(
        meta.flags & (RULE_APPROVE | RULE_HOLD),
        RULE_APPROVE | RULE_HOLD
    );
    let plain = set.by_id("plain").expect("plain");
    assert!(!plain.hold);
    let meta = set.kernel_image().rules[plain.kernel_index.expect("in the kernel") as usize];
    assert_eq!(meta.flags & RULE_HOLD, 0, "no hold without `hold: true`");
    // `hold: false` is the default written out.
    assert!(!ok(&user("  - approve: /srv/a\n    hold: false\n")).rules()[0].hold);

    // Every misuse is an error at the `hold` key (line 6 of the file, column 11).
    let block = errors(&user("  - id: b\n    block: /srv/a\n    hold: true\n"));
    assert!(block.contains("mode `block` asks none"), "{block}");
    assert!(block.contains(":6:11"), "file:line:column: {block}");
    let command = errors(&user(
        "  - id: c\n    mode: approve\n    match: { command: \"deploy *\" }\n    hold: true\n",
    ));
    assert!(command.contains("needs a rule on paths only"), "{command}");
    let net = errors(&user(
        "  - id: n\n    approve: { host: \"127.0.0.9\" }\n    hold: true\n",
    ));
    assert!(net.contains("needs a rule on paths only"), "{net}");
    let regex = errors(&user(
        "  - id: r\n    approve: \"re:^/srv/.*\"\n    hold: true\n",
    ));
    assert!(regex.contains("cannot be listed"), "{regex}");
    assert!(regex.contains("write it as a glob"), "{regex}");
    let delete = errors(&user(
        "  - id: d\n    approve: /srv/a\n    actions: [delete]\n    hold: true\n",
    ));
    assert!(delete.contains("open nothing"), "{delete}");
    let trigger = errors(&user(
        "  - id: t\n    approve: /srv/a\n    trigger: always\n    hold: true\n",
    ));
    assert!(
        trigger.contains("`trigger` cannot be combined with `hold`"),
        "{trigger}"
    );
    let not_bool = errors(&user(
        "  - id: x\n    approve: /srv/a\n    hold: yes please\n",
    ));
    assert!(not_bool.contains("hold"), "{not_bool}");
}

#[test]
fn mode_and_action_keys_are_aliases() {
    let set = ok(&user(
        "  - id: a\n    mode: warn\n    match: { path: \"/a/**\" }\n  - id: b\n    action: block\n    match: { path: \"/b/**\" }\n",
    ));
    assert_eq!(set.by_id("a").map(|r| r.mode), Some(Mode::Warn));
    assert_eq!(
        set.by_id("b").map(|r| (r.mode, r.kernel_index)),
        Some((Mode::Block, Some(0)))
    );
    assert_eq!(
        set.kernel_image().prefix.get(&key("/b/")),
        Some(&refs(0, 0))
    );
}

#[test]
fn colliding_derived_ids_get_order_independent_suffixes() {
    let a = ok(&user(
        "  - block: \"**/.env\"\n  - block: \"**/.env\"\n    actions: [read]\n",
    ));
    let b = ok(&user(
        "  - block: \"**/.env\"\n    actions: [read]\n  - block: \"**/.env\"\n",
    ));
    let ids = |s: &RuleSet| {
        let mut v: Vec<(String, Vec<Action>)> = s
            .rules()
            .iter()
            .map(|r| (r.id.clone(), r.actions.clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids(&a), ids(&b));
    assert!(a.rules().iter().all(|r| r.id.starts_with("block-env-")));
    let dup = errors(&user("  - block: \"**/.env\"\n  - block: \"**/.env\"\n"));
    assert!(
        dup.contains("the same rule is already given at t.yaml:4:5"),
        "{dup}"
    );
}

#[test]
fn explicit_ids_must_be_unique() {
    let e = errors(&user(
        "  - id: x\n    block: \"/a\"\n  - id: x\n    block: \"/b\"\n",
    ));
    assert!(
        e.contains("t.yaml:6:5: error: rule id `x` is already used at t.yaml:4:5 (rule `x`)"),
        "{e}"
    );
    assert!(e.contains("hint: rule ids must be unique"));
    let e = errors(&user("  - id: \"bad id!\"\n    block: \"/a\"\n"));
    assert!(e.contains("invalid rule id"), "{e}");
}

#[test]
fn a_bare_short_form_sets_only_the_mode() {
    let set = ok(&user(
        "  - id: a\n    approve:\n    match: { path: \"/srv/**\", tool: Write }\n",
    ));
    assert_eq!(set.by_id("a").map(|r| r.mode), Some(Mode::Approve));
}

#[test]
fn optional_fields_are_kept() {
    let set = ok(&user(
        "  - id: r\n    block: \"/a/**\"\n    message: hi\n    category: c\n    description: d\n    locked: true\n",
    ));
    let r = set.by_id("r").unwrap();
    assert_eq!(
        (
            r.message.as_str(),
            r.category.as_deref(),
            r.description.as_deref(),
            r.locked
        ),
        ("hi", Some("c"), Some("d"), true)
    );
    assert_eq!(r.source, "t.yaml");
    assert_eq!(r.span.line, 4);
}

// ---- kernel forms ----

#[test]
fn path_forms_compile_to_kernel_maps() {
    let set = ok(&user(
        "  - id: exact\n    block: \"/srv/data/token.txt\"\n  - id: dir\n    block: \"/srv/secret/**\"\n    actions: [read]\n  - id: name\n    block: \"**/forbidden.key\"\n  - id: exec\n    block: \"/usr/local/bin/tool\"\n    actions: [execute]\n",
    ));
    let img = set.kernel_image();
    assert_eq!(
        img.exact.get(&key("/srv/data/token.txt")),
        Some(&refs(0, 0))
    );
    assert_eq!(img.prefix.get(&key("/srv/secret/")), Some(&refs(1, 0)));
    assert_eq!(img.names.get(&key("forbidden.key")), Some(&refs(2, 0)));
    assert_eq!(
        img.exact.get(&key("/usr/local/bin/tool")),
        Some(&refs(3, 0))
    );
    let ops: Vec<u32> = img.rules.iter().map(|m| m.ops).collect();
    // An exec rule denies reads too (a copy or `ld.so FILE` would run the bytes).
    assert_eq!(ops, [op::ALL, op::READ, op::ALL, op::EXEC | op::READ]);
    assert!(img.rules.iter().all(|m| m.flags == RULE_ALWAYS_ON));
    assert_eq!(img.config.path_rule_ops, op::ALL);
    assert_eq!(img.config.net_rule_ops, 0);
    assert_eq!(set.by_kernel_index(2).map(|r| r.id.as_str()), Some("name"));
}

#[test]
fn home_patterns_compile_for_every_home() {
    let set = ok(&user("  - id: ssh\n    block: \"~/.ssh/**\"\n"));
    let keys: Vec<&[u8]> = set
        .kernel_image()
        .prefix
        .keys()
        .map(Vec::as_slice)
        .collect();
    assert_eq!(
        keys,
        [b"/home/alice/.ssh/".as_slice(), b"/root/.ssh/".as_slice()]
    );
}

#[test]
fn home_patterns_without_homes_warn() {
    let options = Options {
        homes: Homes::fixed(Vec::<String>::new()),
        resolver: fake_resolver,
        host: crate::host::real::host(),
    };
    let set = RuleSet::parse_with(
        "t.yaml",
        &user("  - id: ssh\n    block: \"~/.ssh/**\"\n"),
        &options,
    )
    .unwrap();
    assert!(
        set.warnings()
            .to_string()
            .contains("t.yaml:5:12: warning: `~/.ssh/**` matches nothing"),
        "{}",
        set.warnings()
    );
}

#[test]
fn exceptions_do_not_follow_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("id_rsa");
    std::fs::write(&secret, "x").unwrap();
    let planted = dir.path().join("known_hosts");
    std::os::unix::fs::symlink(&secret, &planted).unwrap();
    let d = dir.path().display();
    let set = ok(&user(&format!(
        "  - id: dir\n    block: \"{d}/**\"\n    except: \"{}\"\n",
        planted.display()
    )));
    let img = set.kernel_image();
    assert!(img.inodes.is_empty());
    assert_eq!(img.exact.len(), 1);
    assert_eq!(
        img.exact.get(planted.to_str().unwrap().as_bytes()),
        Some(&refs(0, REF_EXCEPT))
    );
}

#[test]
fn patterns_beyond_the_map_forms_compile_to_the_path_automaton() {
    let set = ok(&user(
        "  - id: star\n    block: \"/etc/*\"\n  - id: mid\n    block: \"/home/*/.ssh/**\"\n  - id: suffix\n    block: \"**/*.pem\"\n  - id: deep\n    block: \"/x/**/y\"\n  - id: re\n    block: \"re:^/proc/[0-9]+/environ$\"\n",
    ));
    for id in ["star", "mid", "suffix", "deep", "re"] {
        let rule = set.by_id(id).unwrap();
        assert_eq!(rule.enforcement, Enforcement::Kernel, "{id}");
    }
    let img = set.kernel_image();
    assert_eq!(img.rules.len(), 5);
    assert_eq!(img.config.path_rule_ops, op::ALL);
    assert!(img.exact.is_empty() && img.prefix.is_empty() && img.names.is_empty());
    // Patterns anchored at the root in one automaton, floating ones (`**/…`, `re:`) in another.
    assert_eq!(img.dfa.len(), 2);
    let rule_of = |p: &str| -> Vec<u32> {
        crate::rules::compile::dfa::matches_all(&img.dfa, p.as_bytes())
            .iter()
            .map(|r| r.rule)
            .collect()
    };
    assert_eq!(rule_of("/etc/passwd"), [0]);
    assert!(rule_of("/etc/x/y").is_empty());
    assert_eq!(rule_of("/home/bob/.ssh/id_rsa"), [1]);
    assert_eq!(rule_of("/srv/tls/key.pem"), [2]);
    assert_eq!(rule_of("/x/a/b/y"), [3]);
    assert_eq!(rule_of("/proc/42/environ"), [4]);
    assert!(rule_of("/proc/42/environx").is_empty());
    // The userspace matcher agrees.
    assert_eq!(set.matches_path("/proc/42/environ", op::READ).len(), 1);
    assert_eq!(set.matches_path("/home/bob/.ssh/id_rsa", op::READ).len(), 1);
    assert_eq!(set.matches_path("/etc/x/y", op::READ).len(), 0);
}

#[test]
fn what_no_automaton_can_decide_stays_in_userspace_with_a_reason() {
    let set = ok(&user(
        "  - id: word\n    block: \"re:\\\\bsecret\\\\b\"\n  - id: ascii\n    block: \"re:(?-u:\\\\b)secret\"\n",
    ));
    assert!(
        userspace_reason(&set, "word").contains("Unicode word boundary"),
        "{}",
        userspace_reason(&set, "word")
    );
    assert_eq!(set.by_id("ascii").unwrap().enforcement, Enforcement::Kernel);
}

#[test]
fn an_automaton_too_large_for_the_maps_refuses_the_rule_set() {
    let text = user("  - id: counted\n    block: \"re:[ab][a-z]{12}$\"\n");
    let diags = parse(&text).expect_err("refused");
    let text = diags.to_string();
    assert!(
        text.contains("path automaton cannot hold the patterns of rules t.yaml:counted"),
        "{text}"
    );
}

#[test]
fn exceptions_compile_with_the_except_flag() {
    let set = ok(&user(
        "  - id: env\n    block: \"**/.env\"\n    except: \"**/.env.example\"\n",
    ));
    let img = set.kernel_image();
    assert_eq!(img.names.get(&key(".env")), Some(&refs(0, 0)));
    assert_eq!(
        img.names.get(&key(".env.example")),
        Some(&refs(0, REF_EXCEPT))
    );
}

#[test]
fn an_exception_the_kernel_cannot_hold_keeps_the_rule_in_userspace() {
    let set = ok(&user(
        "  - id: ssh\n    block: \"/srv/keys/**\"\n    except: [\"re:\\\\bpub\\\\b\"]\n",
    ));
    assert!(userspace_reason(&set, "ssh").contains("exception"));
    assert!(set.kernel_image().prefix.is_empty());
    assert_eq!(set.matches_path("/srv/keys/a", op::READ).len(), 1);
    assert!(set.matches_path("/srv/keys/a.pub", op::READ).is_empty());
}

#[test]
fn automaton_exceptions_carry_the_except_flag() {
    let set = ok(&user(
        "  - id: ssh\n    block: \"/srv/keys/**\"\n    except: [\"/srv/keys/*.pub\"]\n",
    ));
    let img = set.kernel_image();
    assert_eq!(img.prefix.get(&key("/srv/keys/")), Some(&refs(0, 0)));
    let dfa = &img.dfa[0];
    assert_eq!(dfa.matches(b"/srv/keys/a.pub"), refs(0, REF_EXCEPT));
    assert!(dfa.matches(b"/srv/keys/a").is_empty());
}

#[test]
fn prefixes_carry_the_refs_of_shorter_prefixes() {
    let set = ok(&user(
        "  - id: srv\n    block: \"/srv/**\"\n  - id: deep\n    block: \"/srv/a/b/**\"\n  - id: other\n    block: \"/srvx/**\"\n",
    ));
    let img = set.kernel_image();
    assert_eq!(img.prefix.get(&key("/srv/")), Some(&refs(0, 0)));
    assert_eq!(
        img.prefix.get(&key("/srv/a/b/")),
        Some(&vec![
            RuleRef { rule: 0, flags: 0 },
            RuleRef { rule: 1, flags: 0 }
        ])
    );
    assert_eq!(img.prefix.get(&key("/srvx/")), Some(&refs(2, 0)));
}

#[test]
fn copy_and_move_keep_their_names_but_map_to_kernel_ops() {
    let set = ok(&user("  - id: c\n    block: \"/a/**\"\n    actions: [copy]\n  - id: m\n    block: \"/b/**\"\n    actions: [move]\n"));
    assert_eq!(
        set.by_id("c").map(|r| r.actions.clone()),
        Some(vec![Action::Copy])
    );
    let ops: Vec<u32> = set.kernel_image().rules.iter().map(|m| m.ops).collect();
    assert_eq!(ops, [op::READ | op::WRITE, op::WRITE | op::DELETE]);
    assert_eq!(
        set.kernel_image().config.path_rule_ops,
        op::READ | op::WRITE | op::DELETE
    );
}

#[test]
fn existing_files_are_protected_by_inode_too() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    std::fs::write(&file, "x").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let set = ok(&user(&format!(
        "  - id: f\n    block: \"{}\"\n",
        link.display()
    )));
    let meta = std::fs::metadata(&file).unwrap();
    let dev = (u64::from(libc::major(meta.dev())) << 20) | u64::from(libc::minor(meta.dev()));
    let img = set.kernel_image();
    assert_eq!(img.inodes.get(&(dev, meta.ino())), Some(&refs(0, 0)));
    let target = std::fs::canonicalize(&file).unwrap();
    assert!(img.exact.contains_key(target.to_str().unwrap().as_bytes()));
    assert!(img.exact.contains_key(link.to_str().unwrap().as_bytes()));
}

#[test]
fn an_exact_rule_on_a_directory_records_no_inode() {
    // The programs look a renamed file's ancestors up in the inode map: a directory's inode
    // there would protect everything below it (`/home` in the destructive pack would refuse
    // every rename in every home).
    let dir = tempfile::tempdir().unwrap();
    let set = ok(&user(&format!(
        "  - id: d\n    block: \"{}\"\n    actions: [delete]\n",
        dir.path().display()
    )));
    assert!(set.kernel_image().inodes.is_empty());
    assert!(set
        .kernel_image()
        .exact
        .contains_key(dir.path().to_str().unwrap().as_bytes()));
}

#[test]
fn triggered_rules_are_not_always_on() {
    let set = ok(&user(
        "  - id: t\n    block: \"/srv/**\"\n    trigger: { after: { actions: [network], tool: [WebFetch] } }\n  - id: a\n    block: \"/x/**\"\n    trigger: always\n",
    ));
    let flags: Vec<u32> = set.kernel_image().rules.iter().map(|m| m.flags).collect();
    assert_eq!(flags, [0, RULE_ALWAYS_ON]);
}

#[test]
fn advanced_forms_are_validated_and_kept_in_userspace() {
    let set = ok(&user(
        r#"  - id: proc-environ
    match: { path: "re:/proc/\\d+/environ", tool: [Bash, Read] }
    mode: block
  - id: symlink-into-etc
    all: [ { command: "re:ln\\s+-s" }, { path: "/etc/**" } ]
    mode: block
  - id: evil
    match: { content: "evil.example" }
    mode: warn
  - id: review
    match: { path: "/srv/auth/**" }
    llm_review: true
    prompt: "Does this change weaken authentication?"
    mode: block
  - id: no-write-after-web
    trigger: { after: { actions: [network], tool: [WebFetch, WebSearch] } }
    effect: { actions: [write, delete, network] }
    mode: approve
  - id: plain
    trigger: "after the agent reads a web page"
    effect: "writes outside the project"
    mode: block
  - id: not-tmp
    not: { path: "/tmp/**" }
    mode: log
  - id: path-only-match
    match: { path: "/srv/m/**" }
    mode: block
"#,
    ));
    assert!(
        matches!(set.by_id("proc-environ").and_then(|r| r.cond.as_ref()), Some(Cond::All(c)) if c.len() == 2)
    );
    assert!(userspace_reason(&set, "symlink-into-etc").contains("`command`"));
    assert!(userspace_reason(&set, "proc-environ").contains("`tool`"));
    assert!(userspace_reason(&set, "not-tmp").contains("mode `log`"));
    assert!(userspace_reason(&set, "review").contains("LLM review"));
    assert!(userspace_reason(&set, "no-write-after-web").contains("names no path"));
    assert!(
        userspace_reason(&set, "plain").contains("plain-English trigger")
            || userspace_reason(&set, "plain").contains("effects")
    );
    assert!(matches!(
        set.by_id("plain").and_then(|r| r.trigger.as_ref()),
        Some(Trigger::English(_))
    ));
    assert!(matches!(
        set.by_id("not-tmp").and_then(|r| r.cond.as_ref()),
        Some(Cond::Not(_))
    ));
    assert_eq!(
        set.by_id("path-only-match").and_then(|r| r.kernel_index),
        Some(0)
    );
    assert_eq!(
        set.by_id("review").and_then(|r| r.prompt.as_deref()),
        Some("Does this change weaken authentication?")
    );
}

// ---- network ----

#[test]
fn network_rules_compile_to_lpm_entries() {
    let set = ok(&user(
        r#"  - id: hp
    block: { host: "127.0.0.2", port: 8081 }
  - id: v4
    block: { cidr: "127.66.0.0/16" }
  - id: v6
    block: { cidr: "::1/128", port: 8082 }
  - id: port
    block: { port: 25 }
  - id: name
    block: { host: metadata.example.test }
"#,
    ));
    let img = set.kernel_image();
    let r = |rule, port| NetRef {
        rule,
        port,
        pad: 0,
        flags: 0,
    };
    let any = (0u32, [0u8; 16]);
    assert_eq!(img.nets.get(&any), Some(&vec![r(3, 25)]));
    assert_eq!(
        img.nets.get(&(128, mapped([127, 0, 0, 2]))),
        Some(&vec![r(0, 8081), r(3, 25)])
    );
    assert_eq!(
        img.nets.get(&(112, mapped([127, 66, 0, 0]))),
        Some(&vec![r(1, 0), r(3, 25)])
    );
    let lo6: [u8; 16] = "::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
    assert_eq!(img.nets.get(&(128, lo6)), Some(&vec![r(2, 8082), r(3, 25)]));
    assert_eq!(
        img.nets.get(&(128, mapped([192, 0, 2, 7]))),
        Some(&vec![r(3, 25), r(4, 0)])
    );
    assert!(img.rules.iter().all(|m| m.ops == op::NETWORK));
    assert_eq!(img.config.net_rule_ops, op::NETWORK);
    assert_eq!(img.config.path_rule_ops, 0);
    let v4: IpAddr = "127.66.3.4".parse().unwrap();
    assert_eq!(set.matches_net(v4, 1).len(), 1);
    assert!(set
        .matches_net("127.0.0.2".parse().unwrap(), 8080)
        .is_empty());
}

#[test]
fn nets_carry_covering_prefixes() {
    let set = ok(&user("  - id: wide\n    block: { cidr: \"10.0.0.0/8\" }\n  - id: narrow\n    block: { cidr: \"10.1.0.0/16\", port: 22 }\n"));
    let img = set.kernel_image();
    let narrow = img.nets.get(&(112, mapped([10, 1, 0, 0]))).unwrap();
    assert_eq!(narrow.iter().map(|r| r.rule).collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn unresolvable_hosts_warn_and_reach_the_kernel_with_no_address() {
    let set = ok(&user("  - id: nx\n    block: { host: nowhere.invalid }\n  - id: wild\n    block: { host: \"*.nowhere.invalid\", port: 443 }\n"));
    // A rule index and no address entry: the kernel refuses what the session resolvers
    // learn for the names (`engine::names::blocked_by`), never every address.
    for id in ["nx", "wild"] {
        let rule = set.by_id(id).unwrap();
        assert_eq!(rule.enforcement, Enforcement::Kernel, "{id}");
        assert!(rule.kernel_index.is_some(), "{id}");
    }
    let img = set.kernel_image();
    assert!(img.nets.is_empty(), "{:?}", img.nets);
    assert_eq!(img.config.net_rule_ops, op::NETWORK);
    let w = set.warnings().to_string();
    assert!(
        w.contains("t.yaml:5:20: warning: host `nowhere.invalid` does not resolve; the kernel refuses only the addresses a session's resolver hands out for it"),
        "{w}"
    );
}

#[test]
fn unix_socket_paths_are_network_path_rules() {
    let set = ok(&user(
        "  - id: sock\n    block: \"/run/blocked.sock\"\n    actions: [network]\n",
    ));
    assert_eq!(
        set.kernel_image().exact.get(&key("/run/blocked.sock")),
        Some(&refs(0, 0))
    );
    assert_eq!(set.kernel_image().config.path_rule_ops, op::NETWORK);
}

#[test]
fn network_allow_lists_compile_to_a_default_deny_with_allow_entries() {
    let set = ok(&user(
        r#"  - id: egress
    block: { host: "*" }
    except:
      - 10.1.2.3
      - 192.168.0.0/16
      - { cidr: "::1/128", port: 8080 }
      - metadata.example.test
"#,
    ));
    let mut img = set.kernel_image().clone();
    // The allow-list's own entries (the guards it brings against encrypted DNS are
    // `engine::names`' tests').
    for refs in img.nets.values_mut() {
        refs.retain(|r| r.rule == 0);
    }
    let r = |port, flags| NetRef {
        rule: 0,
        port,
        pad: 0,
        flags,
    };
    assert_eq!(img.nets.get(&(0, [0; 16])), Some(&vec![r(0, 0)]));
    assert_eq!(
        img.nets.get(&(128, mapped([10, 1, 2, 3]))),
        Some(&vec![r(0, 0), r(0, REF_EXCEPT)])
    );
    assert_eq!(
        img.nets.get(&(112, mapped([192, 168, 0, 0]))),
        Some(&vec![r(0, 0), r(0, REF_EXCEPT)])
    );
    let lo6: [u8; 16] = "::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
    assert_eq!(
        img.nets.get(&(128, lo6)),
        Some(&vec![r(0, 0), r(8080, REF_EXCEPT)])
    );
    // The host name is allowed in the kernel by what it resolved to.
    assert_eq!(
        img.nets.get(&(128, mapped([192, 0, 2, 7]))),
        Some(&vec![r(0, 0), r(0, REF_EXCEPT)])
    );
    assert_eq!(
        set.by_id("egress").unwrap().enforcement,
        Enforcement::Kernel
    );
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert!(set.matches_net(ip("10.1.2.3"), 443).is_empty());
    assert!(set.matches_net(ip("192.168.7.7"), 22).is_empty());
    assert!(set.matches_net(ip("::1"), 8080).is_empty());
    assert!(set.matches_net(ip("192.0.2.7"), 443).is_empty());
    for denied in [
        ("10.1.2.4", 443),
        ("::1", 8081),
        ("8.8.8.8", 53),
        ("::2", 1),
    ] {
        assert_eq!(
            set.matches_net(ip(denied.0), denied.1).len(),
            1,
            "{denied:?}"
        );
    }
}

#[test]
fn network_exceptions_are_validated_at_their_position() {
    let e = errors(&user(
        "  - block: { port: 443 }\n    except: [ \"a b\", /srv/x, { path: /x }, \"*\", 3 ]\n",
    ));
    for want in [
        "t.yaml:5:15: error: invalid host `a b`",
        "t.yaml:5:22: error: `/srv/x` looks like a path",
        "t.yaml:5:32: error: unknown network exception key `path`",
        "t.yaml:5:44: error: an exception of every address leaves nothing to block",
        "t.yaml:5:49: warning: allowed host `3` does not resolve; the kernel will refuse",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}

#[test]
fn wildcard_hosts_name_subdomains_and_are_matched_by_name() {
    use crate::engine::{check, Activation, Context, ToolCall};
    let set = ok(&user(
        "  - id: no-ngrok\n    block: { host: \"*.ngrok.io\" }\n  - id: egress\n    block: { host: \"*\" }\n    except: [\"*.github.io\"]\n",
    ));
    let warnings = set.warnings().to_string();
    assert!(
        warnings.contains("`*.ngrok.io` has no fixed addresses"),
        "{warnings}"
    );
    assert!(
        warnings.contains("allowed host `*.github.io` has no fixed addresses"),
        "{warnings}"
    );
    let ctx = Context {
        cwd: "/home/alice".into(),
        home: "/home/alice".into(),
        env: Vec::new(),
        host: None,
    };
    let decide = |url: &str| {
        let call =
            ToolCall::from_json(&serde_json::json!({"tool": "WebFetch", "input": {"url": url}}))
                .expect("a call");
        let d = check(&set, &call, &ctx, &Activation::default());
        let mut ids: Vec<String> = d.matches.iter().map(|m| m.id.clone()).collect();
        ids.sort();
        ids
    };
    assert_eq!(decide("https://abc.ngrok.io/x"), ["egress", "no-ngrok"]);
    assert_eq!(decide("https://ngrok.io/"), ["egress"]);
    assert!(decide("https://me.github.io/").is_empty());
    assert_eq!(decide("https://github.io/"), ["egress"]);
    for bad in ["\"*.\"", "\"**.x.com\"", "\"a.*.com\"", "\"*x.com\""] {
        let e = errors(&user(&format!("  - block: {{ host: {bad} }}\n")));
        assert!(e.contains("invalid host"), "{bad}: {e}");
    }
}

// ---- limits ----

#[test]
fn too_many_refs_under_one_key_is_reported() {
    let rules = rules_text((0..=REFS_PER_KEY).map(|i| (i, "    block: \"**/same\"")));
    let e = errors(&user(&rules));
    assert!(
        e.contains(
            "kernel key name `same` needs 9 rule references; the kernel holds at most 8 per key"
        ),
        "{e}"
    );
}

#[test]
fn too_long_values_are_reported_with_the_limit() {
    let long = format!("/{}", "a".repeat(300));
    let e = errors(&user(&format!("  - id: long\n    block: \"{long}\"\n")));
    assert!(
        e.contains("is 301 bytes; the kernel limit is 255 (rule `long`)"),
        "{e}"
    );
    let name = "n".repeat(64);
    let e = errors(&user(&format!("  - id: name\n    block: \"**/{name}\"\n")));
    assert!(
        e.contains("is 64 bytes; the kernel limit is 63 (rule `name`)"),
        "{e}"
    );
}

// ---- diagnostics ----

#[test]
fn every_problem_is_reported_at_once_with_positions_and_hints() {
    let text = "version: 2\nbuiltn: all\nrules:\n  - block: \"/a\"\n    actoins: [read]\n  - id: b\n    block: \"/b/**\"\n    actions: [raed]\n  - id: c\n    mode: blok\n    match: { path: \"/c\" }\n";
    let e = errors(text);
    for want in [
        "t.yaml:1:10: error: unsupported version `2`",
        "t.yaml:2:1: error: unknown top-level key `builtn`",
        "hint: did you mean `builtin`?",
        "t.yaml:5:5: error: unknown rule key `actoins` (rule `block-a`)",
        "hint: did you mean `actions`?",
        "t.yaml:8:15: error: unknown action `raed` (rule `b`)",
        "hint: did you mean `read`?",
        "t.yaml:10:11: error: unknown mode `blok` (rule `c`)",
        "hint: did you mean `block`?",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}

#[test]
fn a_regex_too_big_to_build_is_refused_where_rules_load() {
    let text =
        "version: 1\nbuiltin: none\nrules:\n  - block: { command: \"re:\\\\w{1000}{1000}\" }\n";
    assert!(errors(text).contains("cannot be built"));
}

#[test]
fn structural_errors() {
    let cases: &[(&str, &str)] = &[
        ("", "the rule file is empty"),
        ("- a\n", "expected a mapping with `version`"),
        ("rules: []\n", "missing `version`"),
        (
            "version: 1\nbuiltin: [credentals]\n",
            "unknown built-in pack `credentals`",
        ),
        ("version: 1\nbuiltin: 3\n", "`builtin` must be"),
        ("version: 1\nrules: {}\n", "`rules` must be a list"),
        ("version: 1\nrules: [3]\n", "a rule must be a mapping"),
        (
            "version: 1\nrules:\n  - id: x\n",
            "the rule matches nothing",
        ),
        (
            "version: 1\nrules:\n  - id: x\n    mode: block\n",
            "the rule matches nothing",
        ),
        (
            "version: 1\nrules:\n  - block: /a\n    warn: /b\n",
            "found several short forms",
        ),
        (
            "version: 1\nrules:\n  - block: /a\n    mode: warn\n",
            "the mode is set twice",
        ),
        ("version: 1\nrules:\n  - block: .env\n", "is relative"),
        ("version: 1\nrules:\n  - block: \"re:(\"\n", "invalid regex"),
        (
            "version: 1\nrules:\n  - block: { cidr: 10.0.0.0/33 }\n",
            "invalid CIDR block",
        ),
        (
            "version: 1\nrules:\n  - block: { port: 70000 }\n",
            "invalid port",
        ),
        (
            "version: 1\nrules:\n  - block: { port: 0 }\n",
            "port 0 is not a port",
        ),
        (
            "version: 1\nrules:\n  - block: { host: \"a b\" }\n",
            "invalid host",
        ),
        (
            "version: 1\nrules:\n  - block: { cidr: 10.0.0.0/8 }\n    except: /x\n",
            "`/x` looks like a path; the exceptions of a network rule are hosts",
        ),
        (
            "version: 1\nrules:\n  - block: { cidr: 10.0.0.0/8 }\n    actions: [read]\n",
            "does not apply to a network match",
        ),
        (
            "version: 1\nrules:\n  - block: /a\n    locked: maybe\n",
            "`locked` must be `true` or `false`",
        ),
        (
            "version: 1\nrules:\n  - block: /a\n    prompt: hi\n",
            "`prompt` is only used by an LLM review",
        ),
        (
            "version: 1\nrules:\n  - block: /a\n    actions: []\n",
            "`actions` is empty",
        ),
        (
            "version: 1\nrules:\n  - mode: block\n    match: { pth: /a }\n",
            "unknown match key `pth`",
        ),
        (
            "version: 1\nrules:\n  - mode: block\n    match: {}\n",
            "empty match",
        ),
        (
            "version: 1\nrules:\n  - mode: block\n    all: {}\n",
            "`all` has the wrong shape",
        ),
        (
            "version: 1\nrules:\n  - mode: block\n    effect: { actions: [write] }\n",
            "`effect` needs a `trigger`",
        ),
        (
            "version: 1\nrules:\n  - mode: block\n    trigger: { before: x }\n    effect: x\n",
            "unknown trigger key `before`",
        ),
        (
            "version: 1\nrules:\n  - &a { block: /a }\n  - *a\n",
            "YAML aliases",
        ),
        ("version: 1\nversion: 1\n", "`version` is given twice"),
        (
            "version: 1\n---\nversion: 1\n",
            "more than one YAML document",
        ),
    ];
    for (text, want) in cases {
        let e = errors(text);
        assert!(e.contains(want), "missing `{want}` for {text:?}:\n{e}");
    }
}

#[test]
fn yaml_syntax_errors_have_a_position() {
    let e = errors("version: 1\nrules:\n  - block: \"/a\n");
    assert!(e.starts_with("t.yaml:"), "{e}");
    assert!(e.contains("error: YAML syntax:"), "{e}");
    assert!(e.contains("hint: fix the YAML syntax"), "{e}");
}

#[test]
fn load_reports_unreadable_files() {
    let e = RuleSet::load(Path::new("/nonexistent/rules.yaml"), &real_opts()).unwrap_err();
    assert!(e
        .to_string()
        .starts_with("/nonexistent/rules.yaml:1:1: error: cannot read"));
}

// ---- tls: sni ----

#[test]
fn tls_sni_is_taken_on_block_rules_that_name_hosts() {
    let set = ok("version: 1\nbuiltin: none\nrules:\n  - id: egress\n    block: { host: \"*\" }\n    except: [github.com]\n    tls: sni\n  - id: paste\n    block: { host: \"*.pastebin.com\" }\n    tls: sni\n  - id: plain\n    block: { host: evil.example }\n");
    let on: Vec<(&str, bool)> = set
        .rules()
        .iter()
        .map(|r| (r.id.as_str(), r.tls.is_some()))
        .collect();
    // The allow-list's derived encrypted-DNS rules check server names as it does.
    assert_eq!(
        on,
        [
            ("egress", true),
            ("paste", true),
            ("plain", false),
            ("egress/encrypted-dns", true),
            ("egress/dns-over-tls", true)
        ]
    );
}

#[test]
fn tls_errors_say_where_and_what_to_write() {
    let e = errors(
        r#"version: 1
builtin: none
rules:
  - id: typo
    block: { host: github.com }
    tls: snii
  - id: no-names
    block: { cidr: 10.0.0.0/8 }
    tls: sni
  - id: bare-allow-list
    block: { host: "*" }
    except: [10.1.0.0/16]
    tls: sni
  - id: paths
    block: "/etc/**"
    tls: sni
  - id: logged
    log: { host: github.com }
    tls: sni
  - id: listed
    block: { host: github.com }
    tls: [sni]
"#,
    );
    for want in [
        "t.yaml:6:10: error: unknown `tls` check `snii`",
        "t.yaml:9:10: error: `tls: sni` checks host names, and this rule names none",
        "t.yaml:13:10: error: `tls: sni` checks host names, and this rule names none",
        "t.yaml:16:10: error: `tls: sni` checks host names, and this rule names none",
        "t.yaml:19:10: error: `tls: sni` refuses connections, which only a `block` rule does",
        "t.yaml:22:10: error: `tls` must be a word",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
    assert!(e.contains("did you mean `sni`"), "{e}");
}

// ---- guardrail profile ----

#[test]
fn the_guardrail_profile_holds_every_rule_to_its_contract() {
    let text = r#"version: 1
profile: guardrail
builtin: none
rules:
  - block: "/etc/**"
  - id: R_IO_FILESYSTEM_01
    block: "/a"
  - id: R_SAFETY_001
    category: INTEGRITY
    match: { content: x }
  - id: R_SAFETY_002
    warn: "/b"
  - id: R_CONFIRMATION_001
    mode: log
    match: { tool: [FILE_DELETE] }
  - id: R_OPERATIONS_001
    match: { path: "/c" }
    llm_review: true
    prompt: p
  - id: R_INTEGRITY_001
    trigger: always
    effect: { actions: [write] }
"#;
    let e = errors(text);
    for want in [
        "t.yaml:5:5: error: every rule of the guardrail profile needs an `id`",
        "t.yaml:6:9: error: guardrail rule ids are `R_<CATEGORY>_<NNN>`: `01` is not a zero-padded",
        "t.yaml:9:15: error: category `INTEGRITY` differs from the id's category `SAFETY`",
        "t.yaml:12:5: error: guardrail rules pass or fail; mode `warn`",
        "t.yaml:14:11: error: a CONFIRMATION rule never rejects nor logs; mode `log`",
        "t.yaml:18:17: error: `llm_review` is not allowed in the guardrail profile",
        "t.yaml:21:14: error: `trigger` is not allowed in the guardrail profile",
        "t.yaml:22:15: error: `effect` is not allowed in the guardrail profile",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}

#[test]
fn guardrail_categories_come_from_ids_and_confirmation_rules_ask() {
    let set = ok("version: 1\nprofile: guardrail\nbuiltin: none\nrules:\n  - id: R_CONFIRMATION_002\n    match: { tool: [DOWNLOAD_FILE] }\n  - id: R_IO_NETWORK_004\n    block: { cidr: 10.0.0.0/8 }\n");
    assert_eq!(set.profile(), Some(crate::rules::Profile::Guardrail));
    let c = set.by_id("R_CONFIRMATION_002").unwrap();
    assert_eq!(
        (c.mode, c.category.as_deref()),
        (Mode::Approve, Some("CONFIRMATION"))
    );
    let n = set.by_id("R_IO_NETWORK_004").unwrap();
    assert_eq!(
        (n.mode, n.category.as_deref()),
        (Mode::Block, Some("IO_NETWORK"))
    );
    // Without the profile, the same ids are plain ids and nothing is implied.
    let plain = ok(&user(
        "  - id: R_CONFIRMATION_002\n    match: { tool: [DOWNLOAD_FILE] }\n",
    ));
    assert_eq!(plain.profile(), None);
    assert_eq!(plain.by_id("R_CONFIRMATION_002").unwrap().mode, Mode::Block);
}

// ---- packs and fixtures ----

fn workspace_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Which directories of everyday work a rename or symlink may carry, with every built-in
/// pack on: none of them lies inside a pattern, while a pattern's own directories do.
#[test]
fn builtin_packs_leave_everyday_directories_movable() {
    let all = ok("version: 1\nbuiltin: all\n");
    let dfa = &all.kernel_image().dfa;
    let inside = |dir: &str| -> Vec<String> {
        let image = all.kernel_image();
        dfa.iter()
            .flat_map(|a| a.inside(dir.as_bytes()))
            .filter_map(|r| {
                image.rules.get(r.rule as usize)?;
                all.by_kernel_index(r.rule).map(|rule| rule.id.clone())
            })
            .collect()
    };
    for dir in [
        "/home/alice/project",
        "/home/alice/project/src",
        "/home/alice/project/node_modules/.staging/left-pad",
        "/home/alice/project/target/debug/build",
        "/home/alice/project/.venv/lib",
        "/home/alice/project/.git/objects/ab",
        "/home/alice/.cache/pip",
        "/tmp/build-1234",
        "/home/alice/project/keys",
    ] {
        let got = inside(dir);
        assert!(got.is_empty(), "{dir} is inside {got:?}");
    }
    for dir in [
        "/home/alice/project/.vscode",
        "/home/alice/project/.claude",
        "/home/alice/project/.git/hooks",
        "/home/alice/project/.git",
    ] {
        assert!(!inside(dir).is_empty(), "{dir} must be inside a pattern");
    }
}

#[test]
fn builtin_packs_compile_without_warnings() {
    let set = ok("version: 1\n");
    assert!(set.warnings().0.is_empty(), "{}", set.warnings());
    for pack in builtin::DEFAULT {
        let source = format!("builtin:{pack}");
        assert!(
            set.rules().iter().any(|r| r.source == source),
            "{pack} has no rules"
        );
    }
    // Opt-in packs are off unless asked for, and `all` means every pack.
    assert!(set
        .rules()
        .iter()
        .all(|r| r.source != "builtin:internal-network"));
    let all = ok("version: 1\nbuiltin: all\n");
    assert!(all.warnings().0.is_empty(), "{}", all.warnings());
    for pack in builtin::NAMES {
        let source = format!("builtin:{pack}");
        assert!(
            all.rules().iter().any(|r| r.source == source),
            "{pack} has no rules"
        );
    }
    // The packs fit the path automata with half of each left for the user's own patterns.
    let dfa = &all.kernel_image().dfa;
    let sizes: Vec<(usize, usize)> = dfa.iter().map(|a| (a.states(), a.trans.len())).collect();
    eprintln!("built-in packs: path automata of (states, transitions) {sizes:?}");
    assert!(dfa.len() <= carapace_common::DFA_GROUPS, "{sizes:?}");
    assert!(
        sizes
            .iter()
            .all(|&(states, cells)| states < carapace_common::DFA_STATES / 2
                && cells < carapace_common::DFA_CELLS / 2),
        "{sizes:?}"
    );
    let none = ok("version: 1\nbuiltin: none\n");
    assert!(none.rules().is_empty());
    let one = ok("version: 1\nbuiltin: [network]\n");
    assert!(one.rules().iter().all(|r| r.source == "builtin:network"));
    assert!(set
        .by_id("ssh-private-keys")
        .is_some_and(|r| r.kernel_index.is_some()));
    assert!(!RuleSet::builtin(&real_opts()).rules().is_empty());
    let clash =
        errors("version: 1\nbuiltin: [network]\nrules:\n  - id: cloud-metadata\n    block: /x\n");
    assert!(
        clash.contains("rule id `cloud-metadata` is already used at builtin:network:"),
        "{clash}"
    );
}

// The packs' fixtures run through the whole of Layer 1: see `engine::tests`.

#[test]
fn kernel_test_rules_compile_entirely_to_the_kernel() {
    let text = workspace_file("tests/fixtures/kernel-rules.yaml");
    let set = RuleSet::parse_with("kernel-rules.yaml", &text, &opts()).unwrap();
    // Every rule of the file (each has an explicit id), none dropped.
    let written = text
        .lines()
        .filter(|l| l.trim_start().starts_with("- id:"))
        .count();
    assert!(written >= 10, "{written}");
    assert_eq!(set.rules().len(), written);
    assert!(
        set.rules()
            .iter()
            .all(|r| r.enforcement == Enforcement::Kernel),
        "{:?}",
        set.rules()
    );
    let img = set.kernel_image();
    let idx = |id: &str| set.by_id(id).and_then(|r| r.kernel_index).unwrap();
    // Every prefix also carries the root prefix's `unix: outside-session` rule (its own
    // operation, `op::OUTSIDE`), as any prefix carries the shorter ones above it.
    let outside = RuleRef {
        rule: idx("outside-listeners"),
        flags: 0,
    };
    let prefix = |p: &str| {
        img.prefix.get(&key(p)).map(|r| {
            r.iter()
                .copied()
                .filter(|r| *r != outside)
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(img.rules[outside.rule as usize].ops, op::OUTSIDE);
    assert_eq!(prefix("/srv/secret/"), Some(refs(idx("secret-dir"), 0)));
    assert_eq!(
        img.exact.get(&key("/srv/data/token.txt")),
        Some(&refs(idx("token-file"), 0))
    );
    assert_eq!(
        img.names.get(&key("forbidden.key")),
        Some(&refs(idx("forbidden-key"), 0))
    );
    assert_eq!(
        prefix("/srv/readonly/"),
        Some(refs(idx("readonly-tree"), 0))
    );
    assert_eq!(
        img.rules[idx("blocked-tool") as usize].ops,
        op::EXEC | op::READ
    );
    assert_eq!(img.rules[idx("readonly-tree") as usize].ops, op::WRITE);
    assert_eq!(
        img.exact.get(&key("/run/blocked.sock")),
        Some(&refs(idx("blocked-unix"), 0))
    );
    // The three blocked-* keys, the metadata address, the allow-list's every-address key
    // plus two exceptions (its `::1` shares blocked-v6's key), and approve-api's address.
    assert_eq!(img.nets.len(), 8);
    assert!(img.nets[&(128, mapped([127, 0, 0, 77]))]
        .iter()
        .any(|r| r.rule == idx("approve-api") && r.port == 7777));
    let allow = idx("egress-allowlist");
    assert!(img.nets[&(0, [0; 16])]
        .iter()
        .any(|r| r.rule == allow && r.port == 8090 && r.flags == 0));
    assert!(img.nets[&(128, mapped([127, 0, 0, 3]))]
        .iter()
        .any(|r| r.rule == allow && r.flags == REF_EXCEPT));
    assert!(set
        .rules()
        .iter()
        .all(|r| !r.id_derived && !r.message.is_empty()));
}

#[test]
fn demo_rules_compile() {
    let set = RuleSet::parse_with(
        "demo.yaml",
        &workspace_file("rules/examples/demo.yaml"),
        &opts(),
    )
    .unwrap();
    assert_eq!(set.kernel_image().rules.len(), 3);
    assert!(set
        .kernel_image()
        .prefix
        .contains_key(&key("/home/agent/.ssh/")));
}

// ---- properties ----

/// The image with kernel indices replaced by the index of the rule's id in sorted order, so
/// two images of the same rules in a different order compare equal.
fn normalised(set: &RuleSet) -> (KernelImage, Vec<String>) {
    let mut ids: Vec<&Rule> = set
        .rules()
        .iter()
        .filter(|r| r.kernel_index.is_some())
        .collect();
    ids.sort_by(|a, b| a.id.cmp(&b.id));
    let remap: BTreeMap<u32, u32> = ids
        .iter()
        .enumerate()
        .filter_map(|(n, r)| r.kernel_index.map(|k| (k, n as u32)))
        .collect();
    let mut img = set.kernel_image().clone();
    let old = img.rules.clone();
    for (k, n) in &remap {
        img.rules[*n as usize] = old[*k as usize];
    }
    let fix = |v: &mut Vec<RuleRef>| {
        for r in v.iter_mut() {
            r.rule = remap[&r.rule];
        }
        v.sort_by_key(|r| (r.rule, r.flags));
    };
    img.exact.values_mut().for_each(fix);
    img.prefix.values_mut().for_each(fix);
    img.names.values_mut().for_each(fix);
    img.inodes.values_mut().for_each(fix);
    img.ancestors.values_mut().for_each(fix);
    for v in img.nets.values_mut() {
        for r in v.iter_mut() {
            r.rule = remap[&r.rule];
        }
        v.sort_by_key(|r| (r.rule, r.port, r.flags));
    }
    // The automata are a function of their patterns: rebuilt from the renumbered ones.
    for (_, r) in &mut img.automaton {
        r.rule = remap[&r.rule];
    }
    img.automaton.sort_by(|(a, x), (b, y)| {
        (x.rule, x.flags, format!("{a:?}")).cmp(&(y.rule, y.flags, format!("{b:?}")))
    });
    img.dfa = crate::rules::compile::dfa::build(&img.automaton).expect("it was built once");
    (img, ids.iter().map(|r| r.id.clone()).collect())
}

fn rule_strategy() -> impl Strategy<Value = String> {
    let path = prop::sample::select(vec![
        "/srv/**",
        "/srv/a/**",
        "/srv/a/b/**",
        "/etc/passwd",
        "**/id_rsa",
        "**/.env",
        "~/.ssh/**",
        "/etc/*",
        "re:^/proc",
        "**/*.pem",
    ]);
    let net = prop::sample::select(vec![
        "{ cidr: \"10.0.0.0/8\" }",
        "{ cidr: \"10.1.0.0/16\", port: 22 }",
        "{ host: \"127.0.0.2\", port: 80 }",
        "{ port: 25 }",
        "{ cidr: \"fd00::/8\" }",
    ]);
    let mode = prop::sample::select(vec!["block", "block", "warn"]);
    let actions = prop::sample::select(vec![
        "",
        "\n    actions: [read]",
        "\n    actions: [write, delete]",
        "\n    actions: [move]",
    ]);
    let except = prop::sample::select(vec![
        "",
        "\n    except: \"**/.env.example\"",
        "\n    except: \"/srv/a/pub/**\"",
    ]);
    prop_oneof![
        (mode.clone(), path, actions, except)
            .prop_map(|(m, p, a, e)| format!("    {m}: \"{p}\"{a}{e}")),
        (mode, net).prop_map(|(m, n)| format!("    {m}: {n}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = parse(&text);
    }

    #[test]
    fn yaml_like_text_never_panics(
        parts in prop::collection::vec(prop::sample::select(vec![
            "version: 1\n", "builtin: none\n", "builtin: [x]\n", "rules:\n", "  - ", "block: ", "\"/a/**\"",
            "{ host: ", "[", "]", "{", "}", ", ", "port: 99999", "cidr: ::/0", "except: ", "actions: [read]",
            "\n    ", "\n", "match: ", "all: ", "not: ", "&a ", "*a", "~", "re:(", "- ", ": ", "\"", "'",
            "trigger: ", "effect: ", "id: x", "mode: ", "llm_review: true",
        ]), 0..40)
    ) {
        let _ = parse(&parts.concat());
    }

    #[test]
    fn rule_order_does_not_change_the_image(
        rules in prop::collection::vec(rule_strategy(), 1..8),
        seed in any::<u64>(),
    ) {
        let mut shuffled: Vec<(usize, String)> = rules.iter().cloned().enumerate().collect();
        // A deterministic shuffle from the seed (ids stay attached to their rules).
        shuffled.sort_by_key(|(i, _)| (*i as u64 ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let forward = rules_text(rules.iter().enumerate().map(|(i, r)| (i, r.as_str())));
        let backward = rules_text(shuffled.iter().map(|(i, r)| (*i, r.as_str())));
        let a = parse(&user(&forward));
        let b = parse(&user(&backward));
        match (a, b) {
            (Ok(a), Ok(b)) => prop_assert_eq!(normalised(&a), normalised(&b)),
            (Err(a), Err(b)) => {
                let mut x: Vec<String> = a.0.iter().map(|d| d.message.clone()).collect();
                let mut y: Vec<String> = b.0.iter().map(|d| d.message.clone()).collect();
                x.sort();
                y.sort();
                prop_assert_eq!(x.len(), y.len());
            }
            (a, b) => prop_assert!(false, "one order compiled, the other did not: {:?} / {:?}", a.is_ok(), b.is_ok()),
        }
    }
}

/// Scale check against the "compile 10,000 rules" budget; run with `--ignored --nocapture`
/// (in release mode for a meaningful figure).
#[test]
#[ignore = "timing, not a correctness test"]
fn ten_thousand_rules() {
    let bodies: Vec<String> = (0..10_000)
        .map(|i| match i % 4 {
            0 => format!("    block: \"/srv/data/{i}/**\""),
            1 => format!("    block: \"**/id_rsa{i}\"\n    actions: [read]"),
            2 => format!(
                "    block: {{ cidr: \"10.{}.{}.0/24\" }}",
                i / 256 % 256,
                i % 256
            ),
            _ => "    warn: \"/etc/*\"".to_owned(),
        })
        .collect();
    let body = rules_text(bodies.iter().enumerate().map(|(i, b)| (i, b.as_str())));
    let start = std::time::Instant::now();
    let set = ok(&user(&body));
    eprintln!(
        "10,000 rules: {:?}, {} kernel rules",
        start.elapsed(),
        set.kernel_image().rules.len()
    );
}

#[test]
fn session_rules_with_a_structured_effect_reach_the_kernel_switched_off() {
    let set = ok(&user(concat!(
        "  - id: after-web\n",
        "    trigger: { after: { actions: [network] } }\n",
        "    effect: { actions: [write], path: \"/srv/work/**\" }\n",
        "    mode: block\n",
        "  - id: no-path\n",
        "    trigger: { after: { actions: [network] } }\n",
        "    effect: { actions: [write] }\n",
        "    mode: block\n",
        "  - id: english\n",
        "    trigger: always\n",
        "    effect: \"anything that spends money\"\n",
        "    mode: block\n",
    )));
    let rule = set.by_id("after-web").unwrap_or_else(|| panic!("no rule"));
    let index = rule
        .kernel_index
        .unwrap_or_else(|| panic!("not in the kernel"));
    let meta = set.kernel_image().rules[index as usize];
    assert_eq!(meta.ops, op::WRITE);
    assert_eq!(
        meta.flags & carapace_common::RULE_ALWAYS_ON,
        0,
        "off until a session's trigger switches it on"
    );
    assert!(userspace_reason(&set, "no-path").contains("names no path"));
    assert!(userspace_reason(&set, "english").contains("LLM"));
}

#[test]
fn a_rule_file_cannot_switch_the_locked_self_protection_pack_off() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, user("  - block: \"/srv/x\"\n")).expect("write rule file");
    let set = RuleSet::load(&file, &real_opts()).expect("rule file compiles");
    let pack = builtin::text("self-protection").expect("pack text");
    let locked: Vec<&Rule> = set
        .rules()
        .iter()
        .filter(|r| r.source == "builtin:self-protection")
        .collect();
    for id in [
        "carapace-data",
        "carapace-runtime",
        "carapace-binaries",
        "carapace-kernel-state",
    ] {
        assert!(pack.contains(id), "{id} is in the pack");
        let rule = locked
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("{id} is in force despite `builtin: none`"));
        assert!(rule.locked, "{id} is locked");
        assert!(rule.kernel_index.is_some(), "{id} reaches the kernel");
    }
    assert_eq!(
        set.rules().len(),
        locked.len() + 1,
        "the file's rule and the pack"
    );
    // Only the locked pack: `builtin: none` still leaves the other packs out.
    assert!(set
        .rules()
        .iter()
        .all(|r| r.source == "builtin:self-protection" || !r.source.starts_with("builtin:")));
    // Text compiled as it is (tests, learned rules) is not widened.
    assert!(ok(&user("  - block: \"/srv/x\"\n")).rules().len() == 1);
}

// ---- unix: outside-session ----

#[test]
fn outside_session_rules_compile_to_the_root_prefix_with_their_exceptions() {
    let set = ok(&user(
        "  - id: outside\n    block: { unix: outside-session }\n    except: [\"/run/carapace/**\", \"/dev/log\"]\n  - id: secret\n    block: \"/srv/secret/**\"\n",
    ));
    let img = set.kernel_image();
    assert_eq!(img.rules[0].ops, op::OUTSIDE, "its own operation only");
    assert_eq!(img.config.path_rule_ops, op::ALL | op::OUTSIDE);
    let root = img.prefix.get(&key("/")).expect("the root prefix");
    assert_eq!(root, &refs(0, 0));
    assert!(img
        .prefix
        .get(&key("/run/carapace/"))
        .is_some_and(|r| r.contains(&RuleRef {
            rule: 0,
            flags: REF_EXCEPT
        })));
    assert!(img
        .exact
        .get(&key("/dev/log"))
        .is_some_and(|r| r.contains(&RuleRef {
            rule: 0,
            flags: REF_EXCEPT
        })));
    assert_eq!(
        set.by_id("outside").map(|r| r.enforcement.clone()),
        Some(Enforcement::Kernel)
    );
    // Layer 1 never matches it: who made a socket is not in a tool call.
    let rule = set.by_id("outside").expect("rule");
    assert!(matches!(rule.cond, Some(Cond::OutsideListener)));
}

#[test]
fn outside_session_rules_stand_alone_and_block() {
    let e = errors(&user("  - block: { unix: everyone }\n"));
    assert!(e.contains("unknown unix socket selector `everyone`"), "{e}");
    assert!(e.contains("hint: write `unix: outside-session`"), "{e}");
    let e = errors(&user("  - approve: { unix: outside-session }\n"));
    assert!(e.contains("mode `approve` cannot apply"), "{e}");
    let e = errors(&user(
        "  - block: { unix: outside-session }\n    actions: [network]\n",
    ));
    assert!(e.contains("`actions` does not apply"), "{e}");
    let e = errors(&user(
        "  - match: { unix: outside-session, command: \"ssh *\" }\n",
    ));
    assert!(e.contains("cannot be combined with other matches"), "{e}");
    let e = errors(&user(
        "  - any: [{ unix: outside-session }, { path: /x }]\n",
    ));
    assert!(e.contains("cannot be combined"), "{e}");
}

#[test]
fn the_outside_session_pack_is_on_by_default() {
    let set = ok("version: 1\n");
    assert!(set.by_id("outside-listeners").is_some());
    let set = ok("version: 1\nbuiltin: [credentials]\n");
    assert!(set.by_id("outside-listeners").is_none());
}

// ---- view: chroot, user-namespace ----

#[test]
fn view_rules_reach_the_kernel_config_with_no_map_entries() {
    let set = ok(&user(
        "  - id: secret\n    block: \"/srv/secret/**\"\n  - id: views\n    block: { view: [chroot, user-namespace] }\n  - id: again\n    block: { view: chroot }\n",
    ));
    let img = set.kernel_image();
    assert_eq!(img.rules[1].ops, op::CHROOT | op::USERNS);
    assert_eq!(
        img.config.chroot_rule, 2,
        "the first rule that refuses it, plus one"
    );
    assert_eq!(img.config.userns_rule, 2);
    assert_eq!(
        img.config.path_rule_ops,
        op::ALL,
        "no path entries of its own"
    );
    assert!(img.exact.is_empty() && img.names.is_empty());
    let rule = set.by_id("views").expect("rule");
    assert_eq!(rule.enforcement, Enforcement::Kernel);
    assert!(matches!(rule.cond, Some(Cond::View(_))));
    // Without one, nothing is refused.
    let img = ok(&user("  - block: \"/srv/x\"\n")).kernel_image().clone();
    assert_eq!((img.config.chroot_rule, img.config.userns_rule), (0, 0));
}

#[test]
fn view_rules_stand_alone_and_block() {
    let e = errors(&user("  - block: { view: [chroot, pid-namespace] }\n"));
    assert!(e.contains("unknown view `pid-namespace`"), "{e}");
    assert!(e.contains("hint: write `view: chroot`"), "{e}");
    let e = errors(&user("  - warn: { view: chroot }\n"));
    assert!(e.contains("mode `warn` cannot apply"), "{e}");
    let e = errors(&user("  - block: { view: chroot }\n    except: [/srv]\n"));
    assert!(
        e.contains("`except` does not apply to a `view:` rule"),
        "{e}"
    );
    let e = errors(&user(
        "  - block: { view: chroot }\n    trigger: { after: { actions: [network] } }\n",
    ));
    assert!(e.contains("`trigger` does not apply"), "{e}");
    let e = errors(&user("  - match: { view: chroot, path: /srv }\n"));
    assert!(e.contains("cannot be combined with other matches"), "{e}");
}

#[test]
fn the_private_views_pack_is_on_by_default() {
    let set = ok("version: 1\n");
    let img = set.kernel_image();
    let index = set
        .by_id("private-views")
        .and_then(|r| r.kernel_index)
        .expect("in the kernel");
    assert_eq!(img.config.chroot_rule, index + 1);
    assert_eq!(img.config.userns_rule, index + 1);
    let set = ok("version: 1\nbuiltin: [credentials]\n");
    assert!(set.by_id("private-views").is_none());
}

/// A directory many rules lie below, made a link (a dotfiles-managed `~/.config`), is a key
/// every one of those rules would reference: capped, not an error that stops the daemon.
#[test]
fn a_linked_directory_under_many_rules_fits_the_kernel() {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("dots/config");
    std::fs::create_dir_all(&real).expect("mkdir");
    let link = dir.path().join(".config");
    std::os::unix::fs::symlink(&real, &link).expect("link");
    let mut text = String::from("version: 1\nbuiltin: none\nrules:\n");
    for i in 0..2 * carapace_common::REFS_PER_KEY {
        let _ = std::fmt::Write::write_fmt(
            &mut text,
            format_args!(
                "  - id: r{i}\n    block: \"{}/app{i}/**\"\n    actions: [write]\n",
                link.display()
            ),
        );
    }
    let set = ok(&text);
    let image = set.kernel_image();
    let key = link.display().to_string().into_bytes();
    let refs = image.exact.get(&key).expect("the link is a key");
    assert_eq!(refs.len(), carapace_common::REFS_PER_KEY, "{refs:?}");
    assert!(image.link_keys.contains(&key));
}

/// Every regex of the built-in packs is found in the table `build.rs` makes (so a one-call
/// loader parses none), with the literals parsing it would find.
#[test]
fn builtin_regexes_come_parsed_from_the_build() {
    let all = ok("version: 1\nbuiltin: all\n");
    let mut found = Vec::new();
    for rule in all.rules() {
        super::prebuild::regexes_of(rule, &mut found);
    }
    assert!(found.len() > 50, "{} regexes", found.len());
    for regex in found {
        assert!(
            super::lazy_regex::is_builtin(regex.as_str()),
            "`{}` was not in the build's table",
            regex.as_str()
        );
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(regex.as_str())
            .expect("parses");
        assert_eq!(
            regex.literals(),
            super::needles::needles(&hir).as_deref(),
            "{}",
            regex.as_str()
        );
    }
}

/// A one-call loader builds a glob set (the rule's own, the index's per operation) only when
/// a path needs it; the answers are those of the loader that builds them all first.
#[test]
fn one_call_loads_build_glob_sets_when_first_needed() {
    let text = user(
        "  - { id: brace, block: \"/srv/{a,b}/*.key\", actions: [read] }\n  \
         - { id: class, block: \"/srv/[xy]z/**\", actions: [write] }\n",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, &text).expect("write rules");
    let lazy = RuleSet::load_for_layer1(Some(&file), &opts()).expect("compiles");
    let eager = parse(&text).expect("compiles");
    let built = |set: &RuleSet| {
        set.rules()
            .iter()
            .filter_map(|r| match r.cond.as_ref() {
                Some(Cond::Path(p)) => Some(p),
                _ => None,
            })
            .flatten()
            .filter(|p| matches!(p, PathPattern::Glob { matcher: pattern::GlobMatch::Set(s), .. } if s.is_built()))
            .count()
    };
    assert_eq!(built(&lazy), 0, "nothing built before a call");
    assert_eq!(built(&eager), 2, "the daemon's loader builds every set");
    assert_eq!(lazy.path_index().sets_built(), 0);
    assert_eq!(eager.path_index().sets_built(), 6);
    for (path, op, expected) in [
        ("/srv/a/x.key", op::READ, "brace"),
        ("/srv/c/x.key", op::READ, ""),
        ("/srv/xz/deep/f", op::WRITE, "class"),
        ("/srv/zz/f", op::WRITE, ""),
    ] {
        let ids = |set: &RuleSet| -> Vec<String> {
            set.matches_path(path, op)
                .iter()
                .map(|r| r.id.clone())
                .collect()
        };
        assert_eq!(ids(&lazy), ids(&eager), "{path}");
        // The one-call loader adds the locked packs: compare the two rules by id.
        let hits = |set: &RuleSet| {
            let mut hits = vec![false; set.rules().len()];
            set.path_index().mark(path, op, &mut hits);
            let mut ids: Vec<&str> = set
                .rules()
                .iter()
                .zip(hits)
                .filter(|(r, hit)| *hit && ["brace", "class"].contains(&r.id.as_str()))
                .map(|(r, _)| r.id.as_str())
                .collect();
            ids.sort_unstable();
            ids.join(",")
        };
        assert_eq!(hits(&lazy), expected, "{path}");
        assert_eq!(hits(&eager), expected, "{path}");
    }
    assert_eq!(built(&lazy), 2);
    assert_eq!(
        lazy.path_index().sets_built(),
        2,
        "the read and the write sets"
    );
}

/// A one-call load plans no rule for the kernel, and says for a matched rule what the
/// daemon's load says of it.
#[test]
fn one_call_loads_plan_a_rule_for_the_kernel_when_asked() {
    let lazy = RuleSet::load_for_layer1(None, &opts()).expect("the packs compile");
    let eager = RuleSet::builtin(&opts());
    assert!(lazy
        .rules()
        .iter()
        .all(|r| r.enforcement == Enforcement::Unplanned));
    assert!(lazy.kernel_image().rules.is_empty());
    let mut kernel = 0;
    for rule in eager.rules() {
        let other = lazy.by_id(&rule.id).expect("the same rules");
        assert_eq!(
            other.kernel_enforced(),
            rule.kernel_enforced(),
            "{}",
            rule.id
        );
        kernel += usize::from(rule.kernel_enforced());
    }
    assert!(kernel > 10 && kernel < eager.rules().len(), "{kernel}");
}

/// An allow-list's base (every address) is flagged so that DNS to a session's resolver gets
/// past it in the kernel; a rule naming addresses is not, and still refuses port 53 there.
#[test]
fn allow_list_bases_are_flagged_for_the_resolver() {
    let set = ok(&user(
        "  - { id: egress, block: { host: \"*\" }, except: [10.1.2.3] }\n  \
         - { id: meta, block: { host: 169.254.169.254 } }\n  \
         - { id: v4, block: { cidr: 0.0.0.0/0, port: 8093 } }\n",
    ));
    let flags = |id: &str| {
        let index = set
            .by_id(id)
            .and_then(|r| r.kernel_index)
            .expect("in the kernel");
        set.kernel_image().rules[index as usize].flags
    };
    assert_eq!(
        flags("egress"),
        RULE_ALWAYS_ON | carapace_common::RULE_EVERY_ADDRESS
    );
    assert_eq!(flags("meta"), RULE_ALWAYS_ON);
    assert_eq!(
        flags("v4"),
        RULE_ALWAYS_ON | carapace_common::RULE_EVERY_ADDRESS
    );
}

// ---- structured command rules (`run:`) ----

/// The ids of the rules of `rules` that the Bash command `command` matches.
fn run_hits(rules: &RuleSet, command: &str) -> Vec<String> {
    let ctx = crate::engine::Context {
        cwd: "/home/alice/project".into(),
        home: "/home/alice".into(),
        env: Vec::new(),
        host: None,
    };
    let mut ext = crate::engine::Extracted::new("Bash");
    crate::engine::shell::extract(command, &ctx, &mut ext);
    rules
        .rules()
        .iter()
        .filter(|r| crate::engine::evaluate::rule_matches(r, &ext).is_some())
        .map(|r| r.id.clone())
        .collect()
}

#[test]
fn run_items_match_what_the_tool_reads_not_the_text() {
    let set = ok(&user(
        "  - id: raw\n    block:\n      run: { program: [kubectl, oc], subcommand: [config, view], any-option: [--raw] }\n\
         \x20 - id: secrets\n    block:\n      run:\n        program: kubectl\n        subcommand: [get]\n        operand: [\"re:^secrets?$\"]\n        option-value: { --output: [yaml, \"json*\"] }\n        ignore-case: true\n\
         \x20 - id: force\n    approve:\n      run: { program: git, subcommand: [push], all-options: [--force], no-option: [--set-upstream], max-operands: 1 }\n\
         \x20 - id: runner\n    block:\n      run: { program: op, subcommand: [run], runs: [printenv] }\n\
         \x20 - id: creds\n    block:\n      run: { program: \"git-credential-*\", subcommand: [get] }\n",
    ));
    for (command, want) in [
        ("kubectl config view --raw", &["raw"][..]),
        ("kubecolor --context prod config view --raw=1", &["raw"]),
        ("kubectl config --kubeconfig x view --raw", &["raw"]),
        ("kubectl config view --raw=false", &[]),
        ("kubectl config view", &[]),
        ("kubectl get -o yaml SECRETS", &["secrets"]),
        (
            "kubectl -n prod get secret -ojsonpath={.data}",
            &["secrets"],
        ),
        ("kubectl get secret -o wide", &[]),
        ("kubectl get pods -o yaml", &[]),
        ("git push -f origin", &["force"]),
        ("git -C /srv/r push origin --force", &["force"]),
        ("git push -fu origin", &[]),
        ("git push --force origin main", &[]),
        ("git push -nf origin", &[]),
        ("op run --env-file .env -- printenv", &["runner"]),
        ("op run -- npm run printenv", &[]),
        ("git-credential-store get", &["creds"]),
        ("sudo env A=1 /usr/bin/git-credential-cache get", &["creds"]),
    ] {
        assert_eq!(run_hits(&set, command), want, "{command}");
    }
}

#[test]
fn run_items_are_validated_like_the_rest_of_the_language() {
    let e = errors(&user(
        "  - id: a\n    block:\n      run: { program: git, subcommand: [push], any-options: [--force] }\n\
         \x20 - id: b\n    block:\n      run: { subcommand: [push] }\n\
         \x20 - id: c\n    block:\n      run: { program: git, subcommand: [push], any-option: [-f, --force-with] }\n\
         \x20 - id: d\n    block:\n      run: { program: \"/usr/bin/*git\", max-operands: two }\n\
         \x20 - id: e\n    block:\n      run: [ { program: gh, option-value: [--method] }, \"gh\" ]\n",
    ));
    for want in [
        "t.yaml:6:48: error: unknown `run` key `any-options` (rule `a`)",
        "hint: did you mean `any-option`?",
        "t.yaml:9:14: error: a `run` item needs a `program` (rule `b`)",
        "error: `git` reads `-f` as `--force`; the matcher sees that name (rule `c`)",
        "hint: write `--force`",
        "error: `git` reads `--force-with` as `--force-with-lease`",
        "error: invalid program name `/usr/bin/*git` (rule `d`)",
        "error: `max-operands` must be a whole number (rule `d`)",
        "error: `option-value` must be a mapping, found a list (rule `e`)",
        "error: each `run` item must be a mapping, found a scalar (rule `e`)",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}
