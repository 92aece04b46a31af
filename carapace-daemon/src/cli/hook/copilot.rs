//! GitHub Copilot CLI's `preToolUse` protocol (1.0.102; its `copilot help config` and the
//! CLI's behaviour checked in tests/agents/): a hook configured under the camelCase event
//! name gets `{sessionId, timestamp, cwd, toolName, toolArgs}` — `toolArgs` an object (a
//! JSON string in older releases) — for the CLI's own tools (`bash {command}`,
//! `view {path}`, `create {path, file_text}`, `edit {path, old_str, new_str}`, `grep` and
//! `glob` over `paths`, …); an MCP server's tool is named `SERVER-TOOL` with no context
//! saying where the server's name ends, so it keeps that name (its arguments are still read
//! for paths, commands and URLs, but a rule naming `mcp__SERVER__TOOL` does not see it).
//! Configured as `PreToolUse`, the hook gets the Claude-Code-shaped fields instead; both are
//! read.
//!
//! The answer is `{"permissionDecision": "deny"|"ask", "permissionDecisionReason": …}`: the
//! model gets "Denied by preToolUse hook: REASON"; an ask shows the CLI's own approval
//! prompt, and is a denial where nobody can answer it (`-p`).
use anyhow::Context as _;
use serde_json::{json, Value};

use super::HookCall;
use carapace_policy::engine::Decision;
use carapace_policy::rules::Mode;

/// How Copilot CLI sessions are named in the daemon.
pub const AGENT: &str = "copilot";

pub(super) fn call(event: &Value) -> anyhow::Result<Option<HookCall>> {
    let Some(tool) = event.get("toolName") else {
        return super::pre_tool_use_call(event, "PreToolUse");
    };
    let tool = tool
        .as_str()
        .context("the hook input's toolName is not a string")?;
    let input = match event.get("toolArgs") {
        Some(Value::String(text)) => {
            serde_json::from_str(text).context("the hook input's toolArgs is not JSON")?
        }
        Some(args) => args.clone(),
        None => Value::Null,
    };
    Ok(Some(HookCall {
        tool: tool.to_owned(),
        input,
        cwd: event.get("cwd").and_then(Value::as_str).map(str::to_owned),
        session_id: event
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    }))
}

pub(super) fn deny(reason: &str) -> Value {
    decision_json("deny", reason)
}

fn decision_json(decision: &str, reason: &str) -> Value {
    json!({ "permissionDecision": decision, "permissionDecisionReason": reason })
}

/// Carapace's decision in Copilot CLI's terms. Its hooks have no way to show a warning and
/// let the call run, so a warn-mode call runs without a word to the user.
pub(super) fn answer(d: &Decision) -> Value {
    match d.decision {
        Mode::Block => deny(&d.message),
        Mode::Approve => decision_json("ask", &d.message),
        Mode::Warn | Mode::Allow | Mode::Log => json!({}),
    }
}
