//! The hooks' protocols on the shapes each agent documents and sends (samples taken from the
//! pinned CLIs' live hook input), their answers for every mode, and failure: whatever the
//! input, a hook answers and never lets a call through because of its own trouble.
use std::path::Path;

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use carapace_policy::engine::Decision;
use carapace_policy::rules::Mode;

const AGENTS: [Agent; 5] = [
    Agent::ClaudeCode { grant: false },
    Agent::ClaudeCode { grant: true },
    Agent::Codex,
    Agent::Gemini,
    Agent::Copilot,
];

/// A sample hook input of a pinned CLI (tests/fixtures/, kept true to the live CLI by the
/// `agents` test).
fn sample(text: &str) -> Value {
    serde_json::from_str(text).expect("the sample is JSON")
}

/// What Codex CLI 0.169.0 sends its `PreToolUse` hook for `exec_command {"cmd": …}`.
fn codex_event(command: &str) -> Value {
    let mut event = sample(include_str!(
        "../../../../tests/fixtures/codex/pretooluse-bash.json"
    ));
    event["tool_input"] = json!({ "command": command });
    event
}

/// What Codex CLI 0.169.0 sends its `PreToolUse` hook for its `apply_patch` tool: a patch
/// that adds `path`.
fn codex_patch_event(path: &str) -> Value {
    let mut event = sample(include_str!(
        "../../../../tests/fixtures/codex/pretooluse-apply-patch.json"
    ));
    event["tool_input"]["command"] = json!(format!(
        "*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch\n"
    ));
    event
}

/// What Gemini CLI 0.61.0 sends its `BeforeTool` hook.
fn gemini_event(tool: &str, input: Value) -> Value {
    let mut event = sample(include_str!(
        "../../../../tests/fixtures/gemini/beforetool-shell.json"
    ));
    event["tool_name"] = json!(tool);
    event["tool_input"] = input;
    event
}

/// What GitHub Copilot CLI 1.0.102 sends its `preToolUse` hook for `bash {command}`.
fn copilot_event(args: Value) -> Value {
    let mut event = sample(include_str!(
        "../../../../tests/fixtures/copilot/pretooluse-bash.json"
    ));
    event["toolArgs"] = args;
    event
}

#[test]
fn copilot_events_read_with_their_arguments_as_object_or_text() {
    let args = json!({"command": "cat ~/.ssh/id_rsa", "description": "show key"});
    let call = Agent::Copilot
        .call(&copilot_event(args.clone()))
        .unwrap()
        .expect("a tool call");
    assert_eq!(
        call,
        HookCall {
            tool: "bash".into(),
            input: args.clone(),
            cwd: Some("/home/alice/project".into()),
            session_id: "bfa5365e-1bf5-45aa-9450-0e9880a0fe3e".into(),
        }
    );
    let text = Agent::Copilot
        .call(&copilot_event(json!(args.to_string())))
        .unwrap()
        .expect("a tool call");
    assert_eq!(text.input, args);
    assert!(Agent::Copilot
        .call(&copilot_event(json!("{not json")))
        .is_err());
    // Configured as `PreToolUse`, Copilot sends Claude Code's field names.
    let pascal = Agent::Copilot
        .call(&codex_event("ls"))
        .unwrap()
        .expect("a tool call");
    assert_eq!(pascal.tool, "Bash");
}

#[test]
fn codex_events_read_as_claude_code_shaped_calls() {
    let call = Agent::Codex
        .call(&codex_event("cat ~/.ssh/id_ed25519"))
        .unwrap()
        .expect("a tool call");
    assert_eq!(
        call,
        HookCall {
            tool: "Bash".into(),
            input: json!({"command": "cat ~/.ssh/id_ed25519"}),
            cwd: Some("/home/alice/project".into()),
            session_id: "01a21884-bf4f-7a80-bb78-d8df25fa9b98".into(),
        }
    );
    let mut other = codex_event("true");
    other["hook_event_name"] = json!("PostToolUse");
    assert_eq!(Agent::Codex.call(&other).unwrap(), None);
}

#[test]
fn gemini_mcp_tools_are_named_as_the_rules_name_them() {
    let mut event = gemini_event("mcp_files_read_text", json!({"path": "/etc/shadow"}));
    event["mcp_context"] = json!({"server_name": "files", "tool_name": "read_text",
                                   "command": "npx", "args": ["files-server"]});
    let call = Agent::Gemini.call(&event).unwrap().expect("a tool call");
    assert_eq!(call.tool, "mcp__files__read_text");
    assert_eq!(call.input, json!({"path": "/etc/shadow"}));
    // Without the context the name is kept as Gemini wrote it.
    let plain = gemini_event("read_file", json!({"file_path": "a"}));
    let call = Agent::Gemini.call(&plain).unwrap().expect("a tool call");
    assert_eq!(call.tool, "read_file");
    assert_eq!(call.session_id, "7445abf9-cf40-4488-9d5e-ff5511118311");
    // Claude Code's event name is not Gemini's.
    let mut claude = plain;
    claude["hook_event_name"] = json!("PreToolUse");
    assert_eq!(Agent::Gemini.call(&claude).unwrap(), None);
}

fn decision(mode: Mode, message: &str) -> Verdict {
    Verdict::plain(Decision {
        decision: mode,
        tool: "Bash".into(),
        message: message.into(),
        matches: Vec::new(),
        operations: Vec::new(),
    })
}

#[test]
fn answers_in_each_agents_terms() {
    let block = decision(Mode::Block, "no keys");
    let approve = Verdict {
        approval_id: "a1b2".into(),
        ..decision(Mode::Approve, "needs a look")
    };
    let warn = decision(Mode::Warn, "careful");
    let allow = decision(Mode::Allow, "fine");

    let codex = Agent::Codex;
    assert_eq!(
        codex.answer(&block)["hookSpecificOutput"],
        json!({"hookEventName": "PreToolUse", "permissionDecision": "deny",
               "permissionDecisionReason": "no keys"})
    );
    // Codex cannot ask: approval is a deny that says how to approve.
    let out = codex.answer(&approve);
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
    let reason = out["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(reason.starts_with("needs a look"), "{reason}");
    assert!(reason.contains("carapace approve a1b2"), "{reason}");
    // Codex treats `allow` without updatedInput as a failed hook: no decision at all.
    assert_eq!(codex.answer(&warn), json!({"systemMessage": "careful"}));
    assert_eq!(codex.answer(&allow), json!({}));
    // A deny without a reason is a failed hook to Codex, which then runs the call.
    assert_eq!(
        codex.deny(" ")["hookSpecificOutput"]["permissionDecisionReason"],
        "Carapace refused this call."
    );

    let gemini = Agent::Gemini;
    assert_eq!(
        gemini.answer(&block),
        json!({"decision": "deny", "reason": "no keys"})
    );
    // Gemini asks where its user can answer…
    assert_eq!(
        gemini::answer(&approve.decision, &approve.approval_id, || true),
        json!({"decision": "ask", "systemMessage": "needs a look"})
    );
    // …and elsewhere (`gemini -p`) refuses, saying how to approve: an ask would hang it.
    let out = gemini::answer(&approve.decision, &approve.approval_id, || false);
    assert_eq!(out["decision"], "deny");
    let reason = out["reason"].as_str().unwrap();
    assert!(reason.starts_with("needs a look"), "{reason}");
    assert!(reason.contains("needs a human's approval"), "{reason}");
    assert!(reason.contains("carapace approve a1b2"), "{reason}");
    assert!(reason.contains("console"), "{reason}");
    let out = gemini::answer(&approve.decision, "", || false);
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .contains("carapace approvals"),
        "{out}"
    );
    // Whether the CLI can ask is looked at only for an approve-mode call.
    assert_eq!(
        gemini::answer(&block.decision, "", || unreachable!()),
        json!({"decision": "deny", "reason": "no keys"})
    );
    assert_eq!(gemini.answer(&warn), json!({"systemMessage": "careful"}));
    assert_eq!(gemini.answer(&allow), json!({}));

    let copilot = Agent::Copilot;
    assert_eq!(
        copilot.answer(&block),
        json!({"permissionDecision": "deny", "permissionDecisionReason": "no keys"})
    );
    assert_eq!(
        copilot.answer(&approve),
        json!({"permissionDecision": "ask", "permissionDecisionReason": "needs a look"})
    );
    assert_eq!(copilot.answer(&warn), json!({}));
    assert_eq!(copilot.answer(&allow), json!({}));

    let claude = Agent::ClaudeCode { grant: false };
    assert_eq!(
        claude.answer(&approve)["hookSpecificOutput"]["permissionDecision"],
        "ask"
    );
    assert_eq!(claude.answer(&allow), json!({}));
    let granted = Agent::ClaudeCode { grant: true };
    assert_eq!(
        granted.answer(&allow)["hookSpecificOutput"]["permissionDecision"],
        "allow"
    );
}

/// Whether `out` is the agent's refusal, with a reason.
fn is_denial(agent: Agent, out: &Value) -> bool {
    let reason = match agent {
        Agent::ClaudeCode { .. } | Agent::Codex => {
            let h = &out["hookSpecificOutput"];
            (h["permissionDecision"] == "deny").then(|| &h["permissionDecisionReason"])
        }
        Agent::Gemini => (out["decision"] == "deny").then(|| &out["reason"]),
        Agent::Copilot => {
            (out["permissionDecision"] == "deny").then(|| &out["permissionDecisionReason"])
        }
    };
    reason
        .and_then(Value::as_str)
        .is_some_and(|r| !r.trim().is_empty())
}

fn no_daemon() -> Common {
    Common {
        wait: None,
        source: Source {
            rules: None,
            local: false,
            cwd: None,
        },
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn every_failure_of_its_own_is_a_refusal() {
    let missing = Path::new("/nonexistent/carapace.sock");
    let rt = runtime();
    for agent in AGENTS {
        let event = match agent {
            Agent::Gemini => gemini_event("run_shell_command", json!({"command": "ls"})),
            Agent::Copilot => copilot_event(json!({"command": "ls"})),
            _ => codex_event("ls"),
        };
        for input in [
            // The daemon is not running.
            event.to_string(),
            "not json".into(),
            "[1, 2]".into(),
            "{}".into(),
            r#"{"tool_name": 7}"#.into(),
        ] {
            let out = rt.block_on(answer_event(missing, agent, &no_daemon(), &input));
            assert!(is_denial(agent, &out), "{agent:?} {input}: {out}");
        }
    }
    let long = "x".repeat(usize::try_from(MAX_INPUT).unwrap() + 1);
    assert!(matches!(
        read_input(long.as_bytes()),
        Err(BadInput::TooLarge)
    ));
}

#[test]
fn local_evaluation_refuses_a_secret_and_lets_work_run() {
    // The built-in packs only: a rules.yaml of the machine's cannot change the outcome.
    let dir = tempfile::tempdir().expect("a temp dir");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, "version: 1\n").expect("write rules");
    let local = Common {
        wait: None,
        source: Source {
            rules: Some(rules),
            local: true,
            cwd: None,
        },
    };
    let rt = runtime();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let cases = [
        (
            Agent::Codex,
            codex_event("cat /root/.ssh/id_ed25519"),
            codex_event("ls -la"),
        ),
        (
            Agent::Codex,
            codex_patch_event(&format!("{home}/.bashrc")),
            codex_patch_event("notes.txt"),
        ),
        (
            Agent::Gemini,
            gemini_event(
                "run_shell_command",
                json!({"command": "cat id_rsa",
                                                      "dir_path": "/root/.ssh"}),
            ),
            gemini_event(
                "read_file",
                json!({"file_path": "/home/alice/project/README.md"}),
            ),
        ),
        (
            Agent::Copilot,
            copilot_event(json!({"command": "cat /root/.aws/credentials"})),
            copilot_event(json!({"command": "cargo build", "description": "build"})),
        ),
    ];
    for (agent, secret, work) in cases {
        let out = rt.block_on(answer_event(
            Path::new("/nonexistent"),
            agent,
            &local,
            &secret.to_string(),
        ));
        assert!(is_denial(agent, &out), "{agent:?}: {out}");
        assert!(out.to_string().contains("Carapace blocked"), "{out}");
        let out = rt.block_on(answer_event(
            Path::new("/nonexistent"),
            agent,
            &local,
            &work.to_string(),
        ));
        assert_eq!(out, json!({}), "{agent:?}");
    }
}

/// Hook events with the protocols' field names and anything as values.
fn arb_event() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,12}".prop_map(Value::String),
        prop::sample::select(vec!["PreToolUse", "BeforeTool", "Bash", "mcp_x_y", ""])
            .prop_map(|s| json!(s)),
    ];
    let value = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    let key = prop::sample::select(vec![
        "toolName",
        "toolArgs",
        "hook_event_name",
        "tool_name",
        "tool_input",
        "cwd",
        "session_id",
        "mcp_context",
        "server_name",
        "other",
    ]);
    prop_oneof![
        value.clone(),
        prop::collection::btree_map(key, value, 0..7)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.into(), v)).collect())),
    ]
}

proptest! {
    /// Whatever an agent sends, reading the call never panics, and a call it reads names
    /// its tool as the event does (or as Gemini's MCP context does).
    #[test]
    fn reading_any_event_never_panics(event in arb_event()) {
        for agent in AGENTS {
            if let Ok(Some(call)) = agent.call(&event) {
                let named = match agent {
                    Agent::Copilot if event.get("toolName").is_some() => event["toolName"].as_str(),
                    _ => event["tool_name"].as_str(),
                };
                prop_assert!(named == Some(call.tool.as_str()) || call.tool.starts_with("mcp__"));
            }
        }
    }

    /// Any text on stdin gets an answer in the agent's shape; text that is not a tool
    /// event of the agent's is refused unless it is another event (nothing to decide).
    #[test]
    fn any_input_is_answered_without_the_daemon(text in ".{0,40}") {
        let rt = runtime();
        for agent in [Agent::Codex, Agent::Gemini, Agent::Copilot] {
            let out = rt.block_on(answer_event(
                Path::new("/nonexistent"), agent, &no_daemon(), &text));
            prop_assert!(is_denial(agent, &out) || out == json!({}), "{}", out);
        }
    }
}
