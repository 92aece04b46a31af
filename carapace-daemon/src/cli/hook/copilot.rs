//! GitHub Copilot CLI's `preToolUse` protocol (1.0.102; its `copilot help config` and the
//! CLI's behaviour checked in tests/agents/): a hook configured under the camelCase event
//! name gets `{sessionId, timestamp, cwd, toolName, toolArgs}` — `toolArgs` an object (a
//! JSON string in older releases) — for the CLI's own tools (`bash {command}`,
//! `view {path}`, `create {path, file_text}`, `edit {path, old_str, new_str}`, `grep` and
//! `glob` over `paths`, …); an MCP server's tool is named `SERVER-TOOL` with no context
//! saying where the server's name ends: the servers the CLI loads are read from its MCP
//! configs (`$COPILOT_HOME` or `~/.copilot`, `mcp-config.json`; the project's `.mcp.json`,
//! `.copilot/mcp-config.json`, `.vscode/mcp.json`; and its own `github-mcp-server`), and a
//! tool of one of them is spelled `mcp__SERVER__TOOL`, as Claude Code and Codex spell it, so that rules written for MCP
//! tools meet it. A server Carapace cannot see keeps Copilot's name (its arguments are still
//! read for paths, commands and URLs).
//! Configured as `PreToolUse`, the hook gets the Claude-Code-shaped fields instead; both are
//! read.
//!
//! The answer is `{"permissionDecision": "deny"|"ask", "permissionDecisionReason": …}`: the
//! model gets "Denied by preToolUse hook: REASON"; an ask shows the CLI's own approval
//! prompt, and is a denial where nobody can answer it (`-p`).
use std::path::{Path, PathBuf};

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
    let cwd = event.get("cwd").and_then(Value::as_str).map(str::to_owned);
    let servers = mcp_servers(cwd.as_deref().map(Path::new));
    Ok(Some(HookCall {
        tool: mcp_name(tool, &servers).unwrap_or_else(|| tool.to_owned()),
        input,
        cwd,
        session_id: event
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    }))
}

/// The MCP server Copilot CLI brings itself.
const BUILTIN_SERVER: &str = "github-mcp-server";

/// The names of the MCP servers Copilot CLI loads, from the configs it reads.
fn mcp_servers(cwd: Option<&Path>) -> Vec<String> {
    let home = std::env::var_os("COPILOT_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".copilot")));
    let mut files: Vec<PathBuf> = home
        .map(|h| h.join("mcp-config.json"))
        .into_iter()
        .collect();
    if let Some(dir) = cwd {
        for name in [".mcp.json", ".copilot/mcp-config.json", ".vscode/mcp.json"] {
            files.push(dir.join(name));
        }
    }
    // Copilot's own GitHub server, whose tools are `github-mcp-server-TOOL`: named here, a
    // configured server called `github` cannot claim them.
    let mut names = vec![BUILTIN_SERVER.to_owned()];
    for file in files {
        // A missing or unreadable config names no server; the call is still checked.
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Ok(config) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        for key in ["mcpServers", "servers"] {
            if let Some(servers) = config.get(key).and_then(Value::as_object) {
                names.extend(servers.keys().cloned());
            }
        }
    }
    names
}

/// `SERVER-TOOL` as `mcp__SERVER__TOOL`, for the longest `SERVER` among `servers`.
fn mcp_name(tool: &str, servers: &[String]) -> Option<String> {
    servers
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let rest = tool.strip_prefix(s.as_str())?.strip_prefix('-')?;
            (!rest.is_empty()).then_some((s, rest))
        })
        .max_by_key(|(s, _)| s.len())
        .map(|(s, rest)| format!("mcp__{s}__{rest}"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_tools_are_spelled_as_the_other_agents_spell_them() {
        let servers = vec!["git".to_owned(), "git-hub".to_owned(), "files".to_owned()];
        assert_eq!(
            mcp_name("files-read_file", &servers).as_deref(),
            Some("mcp__files__read_file")
        );
        // The longest server name wins where one is a prefix of another.
        assert_eq!(
            mcp_name("git-hub-create_issue", &servers).as_deref(),
            Some("mcp__git-hub__create_issue")
        );
        assert_eq!(
            mcp_name("git-log", &servers).as_deref(),
            Some("mcp__git__log")
        );
        // The CLI's own GitHub server is always known, and outranks a configured `github`.
        let with_builtin = vec!["github".to_owned(), BUILTIN_SERVER.to_owned()];
        assert_eq!(
            mcp_name("github-mcp-server-get_me", &with_builtin).as_deref(),
            Some("mcp__github-mcp-server__get_me")
        );
        // The CLI's own tools, and servers it was not configured with, keep their names.
        assert_eq!(mcp_name("bash", &servers), None);
        assert_eq!(mcp_name("files-", &servers), None);
        assert_eq!(mcp_name("other-tool", &servers), None);
    }

    #[test]
    fn servers_come_from_the_user_and_project_configs() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join(".mcp.json"),
            r#"{"mcpServers": {"proj": {"command": "x"}}}"#,
        )
        .expect("write");
        std::fs::create_dir_all(dir.path().join(".vscode")).expect("mkdir");
        std::fs::write(
            dir.path().join(".vscode/mcp.json"),
            r#"{"servers": {"vs": {}}}"#,
        )
        .expect("write");
        std::fs::write(dir.path().join(".copilot-broken"), "{").expect("write");
        let names = mcp_servers(Some(dir.path()));
        assert!(names.contains(&"proj".to_owned()), "{names:?}");
        assert!(names.contains(&"vs".to_owned()), "{names:?}");
        assert!(names.contains(&BUILTIN_SERVER.to_owned()), "{names:?}");
    }
}
