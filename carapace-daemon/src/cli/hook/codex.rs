//! Codex CLI's `PreToolUse` protocol, as its 0.169 binary carries it (the JSON schemas
//! `pre-tool-use.command.input` / `.output` embedded in `@openai/codex-linux-x64`, and the
//! CLI's behaviour checked in tests/agents/): the event is Claude-Code-shaped — shell calls
//! arrive as `tool_name: "Bash"` with `tool_input.command`, patches as `apply_patch`, MCP
//! tools as `mcp__SERVER__TOOL` with their arguments — plus `turn_id`, `model` and
//! `permission_mode`.
//!
//! The answer differs from Claude Code's where it matters: Codex honours only
//! `permissionDecision: "deny"` (with a non-empty reason). It treats `ask`, and `allow`
//! without `updatedInput`, as a failed hook — and runs the call. So an approve-mode rule
//! must deny here, and an allowed call gets no decision at all. The model then sees
//! `Command blocked by PreToolUse hook: REASON. Command: …` as the call's output.
use serde_json::{json, Value};

use super::HookCall;
use carapace_policy::engine::Decision;
use carapace_policy::rules::Mode;

/// How Codex sessions are named in the daemon.
pub const AGENT: &str = "codex";

pub(super) fn call(event: &Value) -> anyhow::Result<Option<HookCall>> {
    super::pre_tool_use_call(event, "PreToolUse")
}

pub(super) fn deny(reason: &str) -> Value {
    // Codex runs a call whose hook denied it without a reason.
    let reason = if reason.trim().is_empty() {
        "Carapace refused this call."
    } else {
        reason
    };
    json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    })
}

/// Carapace's decision in Codex's terms.
/// `approval_id` names the request the daemon parked for an approve-mode call ("" when
/// there is none, as with local evaluation).
pub(super) fn answer(d: &Decision, approval_id: &str) -> Value {
    match d.decision {
        Mode::Block => deny(&d.message),
        // Still pending after any --wait: Codex cannot ask, so the call is refused with
        // what the user can do about it.
        Mode::Approve => deny(&super::needs_approval(
            &d.message,
            approval_id,
            "Codex hooks cannot ask for it",
        )),
        // Shown to the user as a warning; the call runs.
        Mode::Warn => json!({ "systemMessage": d.message }),
        Mode::Allow | Mode::Log => json!({}),
    }
}
