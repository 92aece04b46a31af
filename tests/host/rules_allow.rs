//! "Allow this from now on" through the real daemon and CLI: a refused read turned into a
//! rule change (`carapace rules allow --from-denial SEQ`), shown, then written and reloaded;
//! the retry passes, everything else stays refused, and a locked rule is never changed.
use std::path::Path;

use carapace_tests::{cli, text, Daemon};

use super::{setup, CARAPACE, CARAPACED};

fn check(d: &Daemon, path: &str) -> i32 {
    let call = serde_json::json!({"tool": "Read", "input": {"file_path": path}}).to_string();
    let out = cli(
        Path::new(CARAPACE),
        &d.socket,
        ["check", "--json", &call],
        &[],
    );
    out.status.code().unwrap_or(-1)
}

/// The seq of the latest `evaluate` record that rule `rule` blocked.
fn denial_seq(d: &Daemon, rule: &str) -> u64 {
    let data = d.data_dir.display().to_string();
    let out = cli(
        Path::new(CARAPACE),
        &d.socket,
        ["audit", "--data-dir", &data, "tail", "--json", "-n", "50"],
        &[],
    );
    text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| {
            r["decision"] == "block"
                && r["rules"]
                    .as_array()
                    .is_some_and(|rs| rs.iter().any(|x| x["id"] == rule))
        })
        .filter_map(|r| r["seq"].as_u64())
        .next_back()
        .unwrap_or_else(|| panic!("no denial by {rule} in the ledger: {}", text(&out.stdout)))
}

#[test]
fn a_denial_becomes_a_rule_and_only_that_operation_passes() {
    let Some(dir) = setup("a_denial_becomes_a_rule_and_only_that_operation_passes") else {
        return;
    };
    let secret = dir.path().join("secret");
    let rules = dir.path().join("rules.yaml");
    let original = format!(
        "# the team's rules\nversion: 1\nrules:\n  - id: team-secrets   # keep\n    block: \"{}/**\"\n    message: \"team secrets stay here\"\n",
        secret.display()
    );
    std::fs::write(&rules, &original).unwrap_or_else(|e| panic!("{e}"));
    let rules_arg = rules.display().to_string();
    let d = Daemon::start(Path::new(CARAPACED), dir.path(), &["--rules", &rules_arg]);
    let wanted = format!("{}/ci.token", secret.display());
    let other = format!("{}/prod.token", secret.display());
    assert_eq!(check(&d, &wanted), 2, "refused at first");
    let seq = denial_seq(&d, "team-secrets");
    let allow = |args: &[&str]| {
        let seq = seq.to_string();
        let mut all = vec!["rules", "allow", "--from-denial", &seq];
        all.extend_from_slice(args);
        cli(Path::new(CARAPACE), &d.socket, &all, &[])
    };

    // Shown, not written.
    let out = allow(&[]);
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{shown}{}", text(&out.stderr));
    assert!(
        shown.contains(&format!("+      - \"{wanted}\"")) && shown.contains("safety check"),
        "{shown}"
    );
    assert_eq!(
        std::fs::read_to_string(&rules).unwrap_or_default(),
        original
    );

    // Written and reloaded: the retry passes, the sibling and the built-in rules still refuse.
    let out = allow(&["--write"]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let now = std::fs::read_to_string(&rules).unwrap_or_default();
    assert!(
        now.starts_with(original.trim_end()),
        "only lines added:\n{now}"
    );
    assert!(
        now.contains(&format!("ledger record {seq}")) && now.contains("allowed from now on"),
        "{now}"
    );
    assert_eq!(check(&d, &wanted), 0, "the retry passes");
    assert_eq!(check(&d, &other), 2, "the rest of the tree stays refused");
    assert_eq!(
        check(&d, "/root/.aws/credentials"),
        2,
        "built-in rules unchanged"
    );
    let log = d.log_text();
    assert!(log.contains("rules reloaded"), "{log}");

    // A locked rule: refused, the file untouched.
    assert_eq!(check(&d, "/root/.ssh/id_rsa"), 2);
    let locked = denial_seq(&d, "ssh-private-keys").to_string();
    let out = cli(
        Path::new(CARAPACE),
        &d.socket,
        [
            "rules",
            "allow",
            "--from-denial",
            &locked,
            "--rule",
            "ssh-private-keys",
            "--write",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("locked"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&rules).unwrap_or_default(), now);

    // A must-block case of the packs needs --confirm.
    assert_eq!(check(&d, "/root/.aws/config"), 2);
    let aws = denial_seq(&d, "aws-credentials").to_string();
    let aws_allow = |extra: &[&str]| {
        let mut all = vec![
            "rules",
            "allow",
            "--from-denial",
            &aws,
            "--rule",
            "aws-credentials",
            "--write",
        ];
        all.extend_from_slice(extra);
        cli(Path::new(CARAPACE), &d.socket, &all, &[])
    };
    let out = aws_allow(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("must-block"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(check(&d, "/root/.aws/config"), 2, "not written");
    let out = aws_allow(&["--confirm"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("MUST-BLOCK rules/fixtures/credentials.yaml:"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(check(&d, "/root/.aws/config"), 0);
    assert_eq!(check(&d, "/root/.aws/credentials"), 2, "only that file");
}

/// A tool call waiting for approval offers the same: the exception names the file the call
/// writes (what the gating rule matched), and once written the same call is not asked again.
#[test]
fn a_waiting_tool_call_becomes_a_rule() {
    let Some(dir) = setup("a_waiting_tool_call_becomes_a_rule") else {
        return;
    };
    let drafts = dir.path().join("drafts");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(
        &rules,
        format!(
            "version: 1\nrules:\n  - id: ask-drafts\n    approve: \"{}/**\"\n    actions: [write]\n    message: \"drafts need a look\"\n",
            drafts.display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rules_arg = rules.display().to_string();
    let d = Daemon::start(Path::new(CARAPACED), dir.path(), &["--rules", &rules_arg]);
    let wanted = format!("{}/note.md", drafts.display());
    let write = |path: &str| {
        let call =
            serde_json::json!({"tool": "Write", "input": {"file_path": path, "content": "x"}})
                .to_string();
        let out = cli(
            Path::new(CARAPACE),
            &d.socket,
            ["check", "--session", "w1", "--json", &call],
            &[],
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out.status.code().unwrap_or(-1), v)
    };
    let (code, v) = write(&wanted);
    assert_eq!(code, 3, "the write waits for approval: {v}");
    let id = v["approval_id"].as_str().unwrap_or_default().to_owned();
    assert!(id.starts_with("ap-"), "{v}");

    let allow = |extra: &[&str]| {
        let mut all = vec!["rules", "allow", "--approval", &id];
        all.extend_from_slice(extra);
        cli(Path::new(CARAPACE), &d.socket, &all, &[])
    };
    let out = allow(&[]);
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{shown}{}", text(&out.stderr));
    assert!(shown.contains(&format!("+      - \"{wanted}\"")), "{shown}");
    let out = allow(&["--write"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(write(&wanted).0, 0, "the same write passes from now on");
    assert_eq!(
        write(&format!("{}/other.md", drafts.display())).0,
        3,
        "another draft is still asked"
    );
}
