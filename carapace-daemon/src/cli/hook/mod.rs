//! Agent hooks: `carapace hook claude-code|codex|gemini|copilot` speaks each agent's tool-call hook
//! protocol (one module per agent says how its events read and how its answers are
//! written), and `carapace hook install AGENT` merges the hook into the agent's config.
//!
//! One flow serves every agent: read the event, check the call like `carapace check` does,
//! answer in the agent's terms. The hook never lets a call through because of its own
//! failure: no daemon, bad input or any error is a refusal with the reason, in the form each
//! agent honours (Claude Code, Codex and Gemini CLI run a call whose hook crashed or answered
//! what they cannot read; Copilot CLI refuses it).
use std::io::Read as _;
use std::path::Path;

use anyhow::Context as _;
use serde_json::{json, Value};

use super::evaluator::{Evaluator, Fallback, InSession, Source, Verdict};

mod claude_code;
mod codex;
mod copilot;
mod gemini;
mod gemini_mode;
mod install;
mod slash;

pub use claude_code::AGENT;

/// `carapace hook --help`'s examples: one an agent.
pub const EXAMPLES: &str = "\
Examples:
  carapace hook install claude-code     add the hook to ~/.claude/settings.json
  carapace hook install codex           to ~/.codex/config.toml (trust recorded)
  carapace hook install gemini          to ~/.gemini/settings.json
  carapace hook install copilot         to ~/.copilot/settings.json
  carapace hook install codex --uninstall
  echo '{\"hook_event_name\":\"BeforeTool\",\"tool_name\":\"run_shell_command\",
         \"tool_input\":{\"command\":\"cat ~/.ssh/id_rsa\"}}' | carapace hook gemini --local
                                        what Gemini CLI would be told";

/// Largest hook input read (a tool call with a big file write).
const MAX_INPUT: u64 = 32 << 20;

#[derive(Debug, clap::Subcommand)]
pub enum HookCommand {
    /// Claude Code `PreToolUse` hook: reads the event on stdin, prints the decision
    ///
    /// Blocked calls are denied with Carapace's message (Claude shows it to the model),
    /// approve-mode rules become "ask", calls no rule stops are left to Claude Code's own
    /// permission settings (or allowed outright with --grant). Any failure — the daemon
    /// unreachable, input that is not a `PreToolUse` event — denies the call.
    #[command(after_help = "\
Install it with `carapace hook install claude-code`, or add to settings.json:
  {\"hooks\":{\"PreToolUse\":[{\"matcher\":\"*\",\"hooks\":[{\"type\":\"command\",
    \"command\":\"carapace hook claude-code\"}]}]}}")]
    ClaudeCode {
        /// Answer "allow" for calls Carapace allows, which skips Claude Code's own
        /// permission prompts for them
        #[arg(long)]
        grant: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Codex CLI `PreToolUse` hook: reads the event on stdin, prints the decision
    ///
    /// Blocked calls are denied with Carapace's message (Codex shows it to the model as the
    /// call's output). Codex's `PreToolUse` cannot ask the user, so approve-mode rules deny
    /// too, saying the call needs approval (with --wait the hook first waits for
    /// `carapace approve ID`). Warnings are shown to the user. Any failure denies the call.
    #[command(after_help = "\
Install it with `carapace hook install codex`, or add to ~/.codex/config.toml:
  [[hooks.PreToolUse]]
  matcher = \"*\"
  [[hooks.PreToolUse.hooks]]
  type = \"command\"
  command = \"carapace hook codex\"
Codex runs a hook only once it is trusted; the installer records that trust in the user's
config.toml (added by hand, trust it with /hooks in codex).")]
    Codex {
        #[command(flatten)]
        common: Common,
    },
    /// Gemini CLI `BeforeTool` hook: reads the event on stdin, prints the decision
    ///
    /// Blocked calls are denied with Carapace's message (Gemini shows it to the model as the
    /// call's error), approve-mode rules make Gemini ask the user — or, where nobody can
    /// answer (`gemini -p`, no terminal, CI), deny saying how to approve (with --wait the hook
    /// first waits for `carapace approve ID`). Warnings are shown to the user. Any failure
    /// denies the call.
    #[command(after_help = "\
Install it with `carapace hook install gemini`, or add to ~/.gemini/settings.json:
  {\"hooks\":{\"BeforeTool\":[{\"matcher\":\".*\",\"hooks\":[{\"type\":\"command\",
    \"command\":\"carapace hook gemini\"}]}]}}")]
    Gemini {
        #[command(flatten)]
        common: Common,
    },
    /// GitHub Copilot CLI `preToolUse` hook: reads the event on stdin, prints the decision
    ///
    /// Blocked calls are denied with Carapace's message (Copilot shows it to the model as the
    /// call's result), approve-mode rules make Copilot ask the user (a denial in `-p` mode,
    /// where nobody can answer). Any failure denies the call.
    #[command(after_help = "\
Install it with `carapace hook install copilot`, or add to ~/.copilot/settings.json:
  {\"hooks\":{\"preToolUse\":[{\"type\":\"command\",\"bash\":\"carapace hook copilot\"}]}}")]
    Copilot {
        #[command(flatten)]
        common: Common,
    },
    /// Add the hook to an agent's config (or remove it), keeping everything already there
    Install(install::InstallArgs),
}

/// What every agent's hook takes.
#[derive(Clone, Debug, clap::Args)]
pub struct Common {
    /// For approve-mode rules, wait up to SECS for `carapace approve ID` (the answer is
    /// then remembered for the session)
    #[arg(long, value_name = "SECS")]
    wait: Option<u32>,
    #[command(flatten)]
    source: Source,
}

/// The agents whose hook protocol Carapace speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agent {
    ClaudeCode { grant: bool },
    Codex,
    Gemini,
    Copilot,
}

/// A tool call as an agent's hook event describes it.
#[derive(Clone, Debug, PartialEq)]
struct HookCall {
    tool: String,
    input: Value,
    cwd: Option<String>,
    /// The agent's session id ("" when the event has none).
    session_id: String,
}

impl Agent {
    /// How sessions of this agent are named in the daemon.
    fn name(self) -> &'static str {
        match self {
            Self::ClaudeCode { .. } => claude_code::AGENT,
            Self::Codex => codex::AGENT,
            Self::Gemini => gemini::AGENT,
            Self::Copilot => copilot::AGENT,
        }
    }

    /// The call an event asks about; `None` for an event that is no tool call's.
    fn call(self, event: &Value) -> anyhow::Result<Option<HookCall>> {
        match self {
            Self::ClaudeCode { .. } => claude_code::call(event),
            Self::Codex => codex::call(event),
            Self::Gemini => gemini::call(event),
            Self::Copilot => copilot::call(event),
        }
    }

    fn answer(self, v: &Verdict) -> Value {
        match self {
            Self::ClaudeCode { grant } => claude_code::answer(&v.decision, grant),
            Self::Codex => codex::answer(&v.decision, &v.approval_id),
            Self::Gemini => gemini::answer(&v.decision, &v.approval_id, gemini_mode::can_ask),
            Self::Copilot => copilot::answer(&v.decision),
        }
    }

    fn deny(self, reason: &str) -> Value {
        match self {
            Self::ClaudeCode { .. } => claude_code::deny(reason),
            Self::Codex => codex::deny(reason),
            Self::Gemini => gemini::deny(reason),
            Self::Copilot => copilot::deny(reason),
        }
    }
}

pub async fn run(socket: &Path, command: HookCommand) -> anyhow::Result<u8> {
    let (agent, common) = match command {
        HookCommand::ClaudeCode { grant, common } => (Agent::ClaudeCode { grant }, common),
        HookCommand::Codex { common } => (Agent::Codex, common),
        HookCommand::Gemini { common } => (Agent::Gemini, common),
        HookCommand::Copilot { common } => (Agent::Copilot, common),
        HookCommand::Install(args) => return install::run(socket, &args),
    };
    let out = respond(socket, agent, &common).await;
    println!("{out}");
    Ok(0)
}

/// The hook's whole stdout for the event on stdin.
async fn respond(socket: &Path, agent: Agent, common: &Common) -> Value {
    match read_input(std::io::stdin()) {
        Ok(text) => answer_event(socket, agent, common, &text).await,
        Err(reason) => agent.deny(&reason.to_string()),
    }
}

/// The hook's whole stdout for one event.
async fn answer_event(socket: &Path, agent: Agent, common: &Common, text: &str) -> Value {
    if matches!(agent, Agent::ClaudeCode { .. }) {
        if let Some(out) = slash::user_prompt(socket, text).await {
            return out;
        }
    }
    match decide(socket, agent, common, text).await {
        Ok(Some(verdict)) => agent.answer(&verdict),
        // Not a tool call's event: nothing to decide.
        Ok(None) => json!({}),
        Err(e) => agent.deny(&format!(
            "Carapace could not check this call, so it is refused: {e:#}. Ask the user to check \
             `carapace status` (is `sudo carapaced` running?)."
        )),
    }
}

/// Why the hook refuses an event it could not take in; the text is the refusal's reason.
#[derive(Debug, thiserror::Error)]
enum BadInput {
    #[error("Carapace could not read the hook input ({0}), so the call is refused.")]
    Read(#[source] std::io::Error),
    #[error("Carapace refuses tool calls larger than 32 MiB.")]
    TooLarge,
}

/// The event text, at most [`MAX_INPUT`] bytes; the refusal's reason otherwise.
fn read_input(input: impl std::io::Read) -> Result<String, BadInput> {
    let mut text = String::new();
    if let Err(e) = input.take(MAX_INPUT + 1).read_to_string(&mut text) {
        return Err(BadInput::Read(e));
    }
    if text.len() as u64 > MAX_INPUT {
        return Err(BadInput::TooLarge);
    }
    Ok(text)
}

async fn decide(
    socket: &Path,
    agent: Agent,
    common: &Common,
    text: &str,
) -> anyhow::Result<Option<Verdict>> {
    let event: Value = serde_json::from_str(text).context("the hook input is not JSON")?;
    let Some(call) = agent.call(&event)? else {
        return Ok(None);
    };
    let mut eval = Evaluator::open_for_one_call(socket, &common.source, Fallback::Fail).await?;
    let session = InSession {
        agent: agent.name().into(),
        external_id: call.session_id,
        wait_seconds: common.wait.unwrap_or(0),
    };
    let call_json = json!({ "tool": call.tool, "input": call.input });
    eval.check_in(&call_json, call.cwd.as_deref(), &session)
        .await
        .map(Some)
}

/// The fields Claude Code, Codex and Gemini CLI share (and Copilot CLI sends when its hook
/// is configured as `PreToolUse`): `hook_event_name` (when present), `tool_name`,
/// `tool_input`, `cwd`, `session_id`. `None` for another event.
fn pre_tool_use_call(event: &Value, event_name: &str) -> anyhow::Result<Option<HookCall>> {
    let name = event.get("hook_event_name").and_then(Value::as_str);
    if name.is_some_and(|n| n != event_name) {
        return Ok(None);
    }
    let tool = event
        .get("tool_name")
        .and_then(Value::as_str)
        .context("the hook input has no tool_name")?;
    Ok(Some(HookCall {
        tool: tool.to_owned(),
        input: event.get("tool_input").cloned().unwrap_or(Value::Null),
        cwd: event.get("cwd").and_then(Value::as_str).map(str::to_owned),
        session_id: event
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    }))
}

/// The refusal of an approve-mode call where the agent cannot ask its user (`why`): the
/// rule's message, then what the user can do about it. `approval_id` names the request the
/// daemon parked ("" when there is none, as with local evaluation).
fn needs_approval(message: &str, approval_id: &str, why: &str) -> String {
    let how = if approval_id.is_empty() {
        "`carapace approvals`, then `carapace approve ID`".to_owned()
    } else {
        format!("`carapace approve {approval_id}`")
    };
    format!(
        "{message} This call needs a human's approval, and {why}: ask the user to approve it \
         ({how}, or in the Carapace console) and try again, or to run it themselves."
    )
}

fn shell_quote(s: &str) -> String {
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests;
