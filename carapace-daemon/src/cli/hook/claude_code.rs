//! Claude Code's `PreToolUse` protocol: the event on stdin (`tool_name`, `tool_input`, `cwd`,
//! `session_id`, and more fields than documented: read leniently), the decision on stdout as
//! `hookSpecificOutput.permissionDecision` allow | deny | ask with its reason. A deny reaches
//! the model as the call's error; an ask shows Claude Code's own permission prompt.
use serde_json::{json, Value};

use super::HookCall;
use carapace_policy::engine::Decision;
use carapace_policy::rules::Mode;

/// How agent sessions of this harness are named in the daemon.
pub const AGENT: &str = "claude-code";

pub(super) fn call(event: &Value) -> anyhow::Result<Option<HookCall>> {
    super::pre_tool_use_call(event, "PreToolUse")
}

pub(super) fn deny(reason: &str) -> Value {
    decision_json("deny", reason)
}

fn decision_json(decision: &str, reason: &str) -> Value {
    json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    })
}

/// Carapace's decision in Claude Code's terms.
pub(super) fn answer(d: &Decision, grant: bool) -> Value {
    match d.decision {
        Mode::Block => deny(&d.message),
        Mode::Approve => decision_json("ask", &d.message),
        Mode::Warn => {
            let mut v = if grant {
                decision_json("allow", &d.message)
            } else {
                json!({})
            };
            v["systemMessage"] = Value::String(d.message.clone());
            v
        }
        Mode::Allow | Mode::Log if grant => decision_json("allow", &d.message),
        Mode::Allow | Mode::Log => json!({}),
    }
}
