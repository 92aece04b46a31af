//! Equivalent spellings of one call never change Layer 1's decision, against every built-in
//! pack: a forge tool's verb, field names and ref forms; a force push of the current branch
//! however git is told it; a file a tool names in any of the shapes tools name files.
use proptest::prelude::*;
use serde_json::{json, Value};

use super::{check, Activation, Context, ToolCall};
use crate::rules::{Homes, Mode, Options, RuleSet};

fn rules() -> RuleSet {
    let opts = Options {
        homes: Homes::fixed(["/home/alice"]),
        resolver: |_| None,
        host: crate::host::real::host(),
    };
    RuleSet::parse_with("t", "version: 1\n", &opts).expect("the built-in packs compile")
}

fn decide(rules: &RuleSet, call: &Value) -> Mode {
    let ctx = Context {
        cwd: "/home/alice/project".into(),
        home: "/home/alice".into(),
        env: Vec::new(),
        host: None,
    };
    let call = ToolCall::from_json(call).expect("a call");
    check(rules, &call, &ctx, &Activation::default()).decision
}

/// `snake_case`, `camelCase`, `PascalCase` and `kebab-case` of the same words.
fn spelled(words: &[&str], style: usize) -> String {
    let cap = |w: &str| {
        let mut c = w.chars();
        c.next()
            .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
            .unwrap_or_default()
    };
    match style % 4 {
        0 => words.join("_"),
        1 => words
            .iter()
            .enumerate()
            .map(|(i, w)| if i == 0 { (*w).to_owned() } else { cap(w) })
            .collect(),
        2 => words.iter().map(|w| cap(w)).collect(),
        _ => words.join("-"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A forge tool deleting a shared branch waits for approval whatever its verb, its
    /// name's and fields' spelling, the ref's form or the server; a feature branch passes.
    #[test]
    fn forge_branch_deletes_in_any_spelling(
        verb in prop::sample::select(vec!["delete", "remove", "purge", "drop", "wipe", "erase", "destroy"]),
        style in 0usize..4,
        key_style in 0usize..4,
        form in prop::sample::select(vec!["main", "heads/main", "refs/heads/main"]),
        server in prop::sample::select(vec!["github", "gitlab", "gitea", "code_host"]),
        shared in any::<bool>(),
    ) {
        let rules = rules();
        let tool = format!("mcp__{server}__{}", spelled(&[verb, "branch"], style));
        let branch = if shared { form.to_owned() } else { form.replace("main", "feature/x") };
        let mut input = serde_json::Map::new();
        input.insert(spelled(&["owner"], key_style), json!("alice"));
        input.insert(spelled(&["repo"], key_style), json!("project"));
        input.insert(spelled(&["branch", "name"], key_style), json!(branch));
        let want = if shared { Mode::Approve } else { Mode::Allow };
        prop_assert_eq!(decide(&rules, &json!({"tool": tool, "input": input})), want);
    }

    /// A force push of the current branch, however it is named and forced, waits for
    /// approval; the same push to a named feature branch passes.
    #[test]
    fn force_pushes_of_the_current_branch_in_any_spelling(
        force in prop::sample::select(vec!["-f", "--force", "--force-with-lease", "-fu", "--force-if-includes --force-with-lease"]),
        head in prop::sample::select(vec!["HEAD", "@"]),
        flags_last in any::<bool>(),
        feature in any::<bool>(),
    ) {
        let rules = rules();
        let target = if feature { format!("{head}:feature/x") } else { head.to_owned() };
        let line = if flags_last {
            format!("git push origin {target} {force}")
        } else {
            format!("git push {force} origin {target}")
        };
        let want = if feature { Mode::Allow } else { Mode::Approve };
        prop_assert_eq!(decide(&rules, &json!({"tool": "Bash", "input": {"command": line}})), want);
    }

    /// A file an MCP tool reads or writes is the same file however the call names it: a
    /// path, a one-item list, a plural field, a file URI, a base directory with a relative
    /// path, a nested request object.
    #[test]
    fn a_file_named_in_any_shape_is_the_same_file(
        shape in 0usize..7,
        write in any::<bool>(),
        protected in any::<bool>(),
    ) {
        let rules = rules();
        let (rel, abs) = if protected {
            (".bashrc", "/home/alice/.bashrc")
        } else {
            ("project/notes.md", "/home/alice/project/notes.md")
        };
        let tool = if write { "mcp__fs__write_file" } else { "mcp__fs__read_file" };
        let mut input = match shape {
            0 => json!({"path": abs}),
            1 => json!({"path": [abs]}),
            2 => json!({"paths": abs}),
            3 => json!({"uri": format!("file://{abs}")}),
            4 => json!({"root": "/home/alice", "path": rel}),
            5 => json!({"request": {"path": abs}}),
            _ => json!({"base_dir": "~", "relative_path": rel}),
        };
        if write {
            input["content"] = json!("x");
        }
        let call = json!({"tool": tool, "input": input});
        let direct = json!({"tool": tool, "input": if write { json!({"path": abs, "content": "x"}) } else { json!({"path": abs}) }});
        prop_assert_eq!(decide(&rules, &call), decide(&rules, &direct));
        if protected && write {
            prop_assert_eq!(decide(&rules, &call), Mode::Block);
        }
    }
}
