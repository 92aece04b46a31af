//! Gemini CLI's `BeforeTool` protocol (0.61: `bundle/docs/hooks/reference.md` in
//! `@google/gemini-cli`, and the hook runner in its bundle): the event is `{session_id,
//! transcript_path, cwd, hook_event_name: "BeforeTool", timestamp, tool_name, tool_input}`,
//! with `mcp_context {server_name, tool_name, …}` for an MCP server's tool; the tools keep
//! Gemini's own names and arguments (`run_shell_command {command, dir_path}`,
//! `read_file {file_path}`, `write_file`, `replace`, `web_fetch {prompt}`, …).
//!
//! The answer is Gemini's, not Claude Code's: `{"decision": "deny", "reason": …}` refuses
//! the call (the model gets "Tool execution blocked: REASON" as its error), `"ask"` makes
//! Gemini ask the user even in --yolo mode, `systemMessage` is shown to the user. Gemini
//! ignores a Claude-Code-shaped `hookSpecificOutput.permissionDecision`, and runs the call
//! when a hook exits with a status other than 0 or 2.
//!
//! An `"ask"` where nobody can answer (`-p`, no terminal, CI) is never given: the CLI would
//! wait for the answer forever, the call neither run nor refused (the scheduler turns a hook's
//! ask into a forced confirmation, past the check that makes its own policy's asks an error
//! in headless mode). There an approve-mode call is refused with how to approve it;
//! [`gemini_mode`](super::gemini_mode) tells the two modes apart.
use serde_json::{json, Value};

use super::HookCall;
use carapace_policy::engine::Decision;
use carapace_policy::rules::Mode;

/// How Gemini CLI sessions are named in the daemon.
pub const AGENT: &str = "gemini";

pub(super) fn call(event: &Value) -> anyhow::Result<Option<HookCall>> {
    let Some(mut call) = super::pre_tool_use_call(event, "BeforeTool")? else {
        return Ok(None);
    };
    // Gemini names an MCP tool `mcp_SERVER_TOOL` (or `SERVER__TOOL`), ambiguous when the
    // names hold `_`; its context says which is which. Spelled the way Claude Code and Codex
    // spell it, the tool meets the rules written for MCP tools.
    let mcp = event.get("mcp_context");
    let part = |k: &str| {
        mcp.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    if let (Some(server), Some(tool)) = (part("server_name"), part("tool_name")) {
        call.tool = format!("mcp__{server}__{tool}");
    }
    Ok(Some(call))
}

pub(super) fn deny(reason: &str) -> Value {
    json!({ "decision": "deny", "reason": reason })
}

/// Carapace's decision in Gemini CLI's terms. `approval_id` names the request the daemon
/// parked for an approve-mode call ("" when there is none); `can_ask` says whether the CLI
/// can put a question to its user, asked only for such a call.
pub(super) fn answer(d: &Decision, approval_id: &str, can_ask: impl FnOnce() -> bool) -> Value {
    match d.decision {
        Mode::Block => deny(&d.message),
        // Gemini shows the system message with its confirmation prompt.
        Mode::Approve if can_ask() => json!({ "decision": "ask", "systemMessage": d.message }),
        Mode::Approve => deny(&super::needs_approval(
            &d.message,
            approval_id,
            "Gemini CLI is running non-interactively (-p, no terminal, or CI), where nobody can \
             answer its confirmation prompt",
        )),
        Mode::Warn => json!({ "systemMessage": d.message }),
        Mode::Allow | Mode::Log => json!({}),
    }
}
