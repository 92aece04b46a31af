//! The Claude Code hook adapter: `carapace hook claude-code` speaks the `PreToolUse` protocol
//! (JSON on stdin, a JSON decision on stdout), and `carapace hook install claude-code`
//! merges it into a settings.json. The hook never lets a call through because of its own
//! failure: no daemon, bad input or any error is a `deny` with the reason.
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{json, Map, Value};

use super::evaluator::{Evaluator, Fallback, InSession, Source};
use carapace_policy::engine::Decision;
use carapace_policy::rules::Mode;

/// How agent sessions of this harness are named in the daemon.
pub const AGENT: &str = "claude-code";

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
        /// For approve-mode rules, wait up to SECS for `carapace approve ID` instead of
        /// letting Claude Code ask (the answer is then remembered for the session)
        #[arg(long, value_name = "SECS")]
        wait: Option<u32>,
        #[command(flatten)]
        source: Source,
    },
    /// Add the hook to a Claude Code settings.json, keeping everything already there
    Install {
        #[command(subcommand)]
        agent: InstallTarget,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum InstallTarget {
    /// Claude Code: ~/.claude/settings.json (--user, the default) or
    /// ./.claude/settings.json (--project)
    ClaudeCode {
        /// This project only (.claude/settings.json in the working directory)
        #[arg(long, conflicts_with_all = ["user", "settings"])]
        project: bool,
        /// Every session of this user (~/.claude/settings.json)
        #[arg(long)]
        user: bool,
        /// Write this settings file instead
        #[arg(long, value_name = "FILE", conflicts_with = "user")]
        settings: Option<PathBuf>,
        /// Extra arguments for the hook command (e.g. "--rules /path/rules.yaml")
        #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
        hook_args: Option<String>,
    },
}

pub async fn run(socket: &Path, command: HookCommand) -> anyhow::Result<u8> {
    match command {
        HookCommand::ClaudeCode {
            grant,
            wait,
            source,
        } => {
            let out = claude_code(socket, &source, grant, wait.unwrap_or(0)).await;
            println!("{out}");
            Ok(0)
        }
        HookCommand::Install {
            agent:
                InstallTarget::ClaudeCode {
                    project,
                    user: _,
                    settings,
                    hook_args,
                },
        } => {
            let path = match settings {
                Some(p) => p,
                None if project => PathBuf::from(".claude/settings.json"),
                None => {
                    let home = std::env::var_os("HOME").context("HOME is not set")?;
                    PathBuf::from(home).join(".claude/settings.json")
                }
            };
            let exe = std::env::current_exe().context("cannot find the carapace binary")?;
            let mut command = format!(
                "{} hook claude-code",
                shell_quote(&exe.display().to_string())
            );
            if let Some(extra) = hook_args {
                command.push(' ');
                command.push_str(&extra);
            }
            let changed = install(&path, &command)?;
            if changed {
                println!(
                    "carapace: added to {}: a PreToolUse hook (every tool call is checked \
                     before it runs) and a UserPromptSubmit hook (your own `/carapace …` \
                     commands)",
                    path.display()
                );
            } else {
                println!(
                    "carapace: {} already runs the hook; nothing changed",
                    path.display()
                );
            }
            let evaluates_locally = command.contains("--local") || command.contains("--rules");
            if !evaluates_locally && std::os::unix::net::UnixStream::connect(socket).is_err() {
                eprintln!(
                    "carapace: warning: no daemon answers on {}; until `sudo carapaced` runs, \
                     the hook denies every tool call (it fails closed). To check calls without \
                     the daemon, install with --hook-args --local",
                    socket.display()
                );
            }
            Ok(0)
        }
    }
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

/// The hook's whole stdout for one event.
async fn claude_code(socket: &Path, source: &Source, grant: bool, wait: u32) -> Value {
    let mut text = String::new();
    if let Err(e) = std::io::stdin()
        .take(MAX_INPUT + 1)
        .read_to_string(&mut text)
    {
        return deny(&format!(
            "Carapace could not read the hook input ({e}), so the call is refused."
        ));
    }
    if text.len() as u64 > MAX_INPUT {
        return deny("Carapace refuses tool calls larger than 32 MiB.");
    }
    if let Some(out) = super::slash::user_prompt(socket, &text).await {
        return out;
    }
    match decide(socket, source, &text, wait).await {
        Ok(Some(decision)) => answer(&decision, grant),
        // Not a PreToolUse event: nothing to decide.
        Ok(None) => json!({}),
        Err(e) => deny(&format!(
            "Carapace could not check this call, so it is refused: {e:#}. Ask the user to check \
             `carapace status` (is `sudo carapaced` running?)."
        )),
    }
}

async fn decide(
    socket: &Path,
    source: &Source,
    text: &str,
    wait: u32,
) -> anyhow::Result<Option<Decision>> {
    let event: Value = serde_json::from_str(text).context("the hook input is not JSON")?;
    let name = event.get("hook_event_name").and_then(Value::as_str);
    if name.is_some_and(|n| n != "PreToolUse") {
        return Ok(None);
    }
    let tool = event
        .get("tool_name")
        .and_then(Value::as_str)
        .context("the hook input has no tool_name")?;
    let input = event.get("tool_input").cloned().unwrap_or(Value::Null);
    let cwd = event.get("cwd").and_then(Value::as_str);
    let mut eval = Evaluator::open(socket, source, Fallback::Fail).await?;
    let call = json!({ "tool": tool, "input": input });
    let session = InSession {
        agent: AGENT.into(),
        external_id: event
            .get("session_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        wait_seconds: wait,
    };
    eval.check_in(&call, cwd, &session)
        .await
        .map(|v| Some(v.decision))
}

fn deny(reason: &str) -> Value {
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
#[must_use]
pub fn answer(d: &Decision, grant: bool) -> Value {
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

/// Whether a hooks entry already runs Carapace's Claude Code hook.
fn runs_carapace(entry: &Value) -> bool {
    entry
        .get("hooks")
        .and_then(Value::as_array)
        .is_some_and(|hooks| {
            hooks.iter().any(|h| {
                h.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(|c| c.contains("hook claude-code") && c.contains("carapace"))
            })
        })
}

/// Merges the hook into the settings file at `path` (created if missing); returns whether
/// it changed anything. The file is replaced atomically; invalid JSON is never overwritten.
pub fn install(path: &Path, command: &str) -> anyhow::Result<bool> {
    let mut settings: Value = match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => json!({}),
        Ok(text) => serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not valid JSON; fix it first (it was left untouched)",
                path.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let root = settings
        .as_object_mut()
        .with_context(|| format!("{} is not a JSON object", path.display()))?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let hooks = hooks
        .as_object_mut()
        .with_context(|| format!("`hooks` in {} is not an object", path.display()))?;
    // PreToolUse checks every call; UserPromptSubmit carries the user's `/carapace …`
    // commands (the user, not the model, types those).
    let mut changed = false;
    for event in ["PreToolUse", "UserPromptSubmit"] {
        let list = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()));
        let list = list
            .as_array_mut()
            .with_context(|| format!("`hooks.{event}` in {} is not a list", path.display()))?;
        if !list.iter().any(runs_carapace) {
            let mut entry = json!({ "hooks": [ { "type": "command", "command": command } ] });
            if event == "PreToolUse" {
                entry["matcher"] = json!("*");
            }
            list.push(entry);
            changed = true;
        }
    }
    if !changed {
        return Ok(false);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = path.with_extension("json.carapace-tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&settings)? + "\n")
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_merges_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".claude/settings.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            r#"{"model":"x","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"other"}]}],"Stop":[]}}"#,
        )
        .unwrap();
        assert!(install(&path, "/usr/bin/carapace hook claude-code").unwrap());
        assert!(!install(&path, "/usr/bin/carapace hook claude-code").unwrap());
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["model"], "x");
        assert_eq!(v["hooks"]["Stop"], json!([]));
        let pre = v["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0]["hooks"][0]["command"], "other");
        assert_eq!(
            pre[1]["hooks"][0]["command"],
            "/usr/bin/carapace hook claude-code"
        );
    }

    #[test]
    fn install_never_overwrites_broken_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{ broken").unwrap();
        assert!(install(&path, "carapace hook claude-code").is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ broken");
    }
}
