//! The real Claude Code CLI, offline, with Carapace as its `PreToolUse` hook.
//!
//! A loopback Messages API server (`carapace_tests::anthropic`) plays the model: its first
//! reply asks for tool calls, its second ends the turn. The CLI runs each call past the hook of
//! the settings file, then sends the results back in its next request, where the test reads
//! them. The CLI is the pinned npm package that `cargo xtask setup` installs; `cargo xtask test`
//! passes its path in `CARAPACE_CLAUDE_BIN`.
//!
//! Facts these tests rely on (Claude Code 2.1.330):
//! - With `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` the CLI only sends streaming
//!   `POST /v1/messages?beta=true`; without it, it also sends `GET /api/hello` at start-up and
//!   carries on after a 404.
//! - `-p` mode refuses a call that neither a hook nor a `permissions.allow` entry allows
//!   (except commands it deems read-only, like `echo`), so the settings allow the tools and the
//!   hook alone decides what is refused; a hook's deny wins over `permissions.allow`.
//! - A hook's `deny` or `ask` (there is nobody to ask in `-p` mode) lists the call in the
//!   output's `permission_denials` and sends an `is_error` `tool_result` to the model: the
//!   reason prefixed with `PreToolUse:<Tool> hook error: ` for a deny, the bare reason for an
//!   ask. A hook that exits with status 2 denies too, with `[<command>]: <stderr>` as reason.
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod gateway;

use carapace_tests::agent_cli::{
    assert_refused_by_carapace, hermetic_command, installed_bin, read, run_with_deadline,
    shell_quote, Workspace, README_MARKER,
};
use carapace_tests::anthropic::{tool_result_text, Block, MessagesServer};
use carapace_tests::{is_root, Daemon};
use serde_json::{json, Value};

const CARAPACE: &str = env!("CARGO_BIN_EXE_carapace-under-test");
const CARAPACED: &str = env!("CARGO_BIN_EXE_carapaced-under-test");

/// The CLI is killed after this long; a hung hook or a reply it cannot parse would otherwise
/// hang the test run.
const CLI_TIMEOUT: Duration = Duration::from_mins(2);

/// Where `cargo xtask setup` installs the CLI, under the cache directory's `carapace/`.
const INSTALLED_BIN: &str = "claude-code/node_modules/.bin/claude";

/// Settings whose `PreToolUse` hook runs `command` for every tool, and which allow every
/// tool the model asks for, so the hook is the only thing that refuses.
fn settings(ws: &Workspace, command: &str) -> PathBuf {
    let settings = json!({
        "permissions": { "allow": ["Bash", "Read", "Write", "Edit"] },
        "hooks": {
            "PreToolUse": [{
                "matcher": "*",
                "hooks": [{ "type": "command", "command": command, "timeout": 60 }],
            }],
        },
    });
    let path = ws.path("settings.json");
    ws.write(&path, &settings.to_string());
    path
}

/// The CLI's `--output-format json` result and its stderr.
struct Run {
    result: Value,
    stderr: String,
}

impl Run {
    /// The `tool_use_id`s of `permission_denials`, sorted.
    fn denied_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.result["permission_denials"]
            .as_array()
            .unwrap_or_else(|| panic!("no permission_denials in {:#}", self.result))
            .iter()
            .filter_map(|d| d["tool_use_id"].as_str().map(str::to_owned))
            .collect();
        ids.sort();
        ids
    }
}

/// Runs `claude -p` in the project against `server` with `settings`, hermetically: a cleared
/// environment, the throwaway HOME, a dummy key, no telemetry or other traffic.
fn run_claude(
    ws: &Workspace,
    server: &MessagesServer,
    settings: &Path,
    env: &[(&str, &str)],
) -> Run {
    fs::create_dir_all(ws.project()).unwrap_or_else(|e| panic!("cannot create project: {e}"));
    let mut cmd = hermetic_command(&installed_bin("CARAPACE_CLAUDE_BIN", INSTALLED_BIN), ws);
    cmd.args([
        "-p",
        "Please do the task.",
        "--output-format",
        "json",
        "--settings",
    ])
    .arg(settings)
    .env("ANTHROPIC_BASE_URL", server.base_url())
    .env("ANTHROPIC_API_KEY", "sk-ant-loopback-dummy")
    .env("DISABLE_TELEMETRY", "1")
    .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    .envs(env.iter().copied());
    let finished = run_with_deadline(ws, &mut cmd, CLI_TIMEOUT, || {
        let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
        format!("requests seen: {paths:?}")
    });
    let (status, stdout, stderr) = (finished.status, finished.stdout, finished.stderr);
    assert!(
        status.success(),
        "the Claude Code CLI failed ({status}); stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let result: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("the CLI's output is not JSON ({e}); stdout:\n{stdout}\nstderr:\n{stderr}")
    });
    assert_eq!(
        result["is_error"], false,
        "the CLI reports an error: {result:#}\nstderr:\n{stderr}"
    );
    assert!(
        server.unknown_requests().is_empty(),
        "the CLI called endpoints the loopback server does not serve: {:?}",
        server.unknown_requests()
    );
    Run { result, stderr }
}

/// The `tool_result` the CLI sent back for `id`, with its text.
fn result_for(server: &MessagesServer, run: &Run, id: &str) -> (Value, String) {
    let block = server.tool_result(id).unwrap_or_else(|| {
        panic!(
            "the CLI sent no tool_result for {id}; output: {:#}\nstderr:\n{}",
            run.result, run.stderr
        )
    });
    let text = tool_result_text(&block);
    (block, text)
}

/// The model's script: one turn of tool calls, then a closing message.
fn script(calls: Vec<Block>) -> MessagesServer {
    MessagesServer::scripted(vec![calls, vec![Block::text("All done.")]])
}

/// A hook written as a shell script: it logs its stdin and denies, asks about or stays silent
/// on a call by a marker in it. It pins what the CLI sends to a hook and how it treats each
/// answer, independently of Carapace.
const SCRIPT_HOOK: &str = r#"#!/bin/sh
input=$(cat)
printf '%s\n' "$input" >> "$HOOK_LOG"
case "$input" in
  *id_rsa*) printf '%s' '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"script-hook: no keys"}}' ;;
  *credentials*) printf '%s' '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"script-hook: ask first"}}' ;;
  *) printf '%s' '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"script-hook: fine"}}' ;;
esac
"#;

#[test]
fn cli_applies_a_script_hooks_decisions() {
    let ws = Workspace::new();
    let hook = ws.path("hook.sh");
    ws.write(&hook, SCRIPT_HOOK);
    make_executable(&hook);
    let hook_log = ws.path("hook-input.jsonl");
    let settings = settings(&ws, &shell_quote(&hook.to_string_lossy()));
    let aws = ws.home().join(".aws/credentials");
    let server = script(vec![
        Block::text("Let me look around."),
        Block::tool_use(
            "toolu_deny_ssh",
            "Bash",
            json!({"command": "cat ~/.ssh/id_rsa", "description": "Show the key"}),
        ),
        Block::tool_use("toolu_ask_aws", "Read", json!({"file_path": aws})),
        Block::tool_use(
            "toolu_allow_echo",
            "Bash",
            json!({"command": "echo hello > note.txt", "description": "Write a note"}),
        ),
    ]);
    let log = hook_log.to_string_lossy();
    let run = run_claude(&ws, &server, &settings, &[("HOOK_LOG", &log)]);

    assert_eq!(run.denied_ids(), ["toolu_ask_aws", "toolu_deny_ssh"]);
    let (deny, text) = result_for(&server, &run, "toolu_deny_ssh");
    assert_eq!(deny["is_error"], true, "{deny}");
    assert_eq!(text, "PreToolUse:Bash hook error: script-hook: no keys");
    let (ask, text) = result_for(&server, &run, "toolu_ask_aws");
    assert_eq!(ask["is_error"], true, "{ask}");
    assert_eq!(text, "script-hook: ask first");
    let (allow, _) = result_for(&server, &run, "toolu_allow_echo");
    assert_ne!(allow["is_error"], true, "{allow}");
    assert_eq!(read(&ws.project().join("note.txt")), "hello\n");

    // What a hook receives: one JSON object a call.
    let inputs: Vec<Value> = read(&hook_log)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("hook input {l:?}: {e}")))
        .collect();
    assert_eq!(inputs.len(), 3, "{inputs:#?}");
    let bash = inputs
        .iter()
        .find(|i| i["tool_use_id"] == "toolu_deny_ssh")
        .unwrap_or_else(|| panic!("no hook input for the ssh call: {inputs:#?}"));
    assert_eq!(bash["hook_event_name"], "PreToolUse");
    assert_eq!(bash["tool_name"], "Bash");
    assert_eq!(bash["tool_input"]["command"], "cat ~/.ssh/id_rsa");
    assert_eq!(bash["cwd"], ws.project().to_string_lossy().as_ref());
    for field in ["session_id", "transcript_path", "permission_mode"] {
        assert!(bash[field].is_string(), "no {field} in {bash:#}");
    }
    let read_call = inputs
        .iter()
        .find(|i| i["tool_use_id"] == "toolu_ask_aws")
        .unwrap_or_else(|| panic!("no hook input for the read: {inputs:#?}"));
    assert_eq!(
        read_call["tool_input"]["file_path"],
        aws.to_string_lossy().as_ref()
    );

    // The samples under tests/fixtures/claude-code/ must stay true to the pinned CLI.
    for (live, sample) in [
        (bash, "pretooluse-bash.json"),
        (read_call, "pretooluse-read.json"),
    ] {
        let sample = fixture(sample);
        assert_eq!(keys(live), keys(&sample), "live hook input: {live:#}");
        assert_eq!(keys(&live["tool_input"]), keys(&sample["tool_input"]));
    }
}

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/claude-code")
        .join(name);
    serde_json::from_str(&read(&path))
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn keys(v: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = v
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

/// How the hook evaluates: with the built-in packs in-process, or through a daemon.
enum Evaluation {
    Local,
    Daemon(Daemon),
}

#[test]
fn carapace_hook_local_refuses_secrets_and_lets_project_work_run() {
    carapace_hook_scenario(&Workspace::new(), &Evaluation::Local);
}

#[test]
fn carapace_hook_with_daemon_refuses_secrets_and_lets_project_work_run() {
    // The daemon creates cgroups, like the host tests it needs root.
    if !is_root() {
        eprintln!("carapace_hook_with_daemon: skipped, needs root (the daemon creates cgroups)");
        return;
    }
    let ws = Workspace::new();
    // The rules' `~` is every account's home plus the evaluator's HOME; the throwaway HOME
    // stands in for the agent user's home, so the daemon gets it too.
    let home = ws.home();
    let daemon = Daemon::start_env(
        Path::new(CARAPACED),
        &ws.path("carapace"),
        &[],
        &[("HOME", home.as_os_str())],
    );
    carapace_hook_scenario(&ws, &Evaluation::Daemon(daemon));
}

/// The model asks for two secrets and two pieces of ordinary project work in one turn; the
/// hook (`carapace hook claude-code`) must refuse exactly the secrets, with its own message.
fn carapace_hook_scenario(ws: &Workspace, how: &Evaluation) {
    // The CLI runs with an empty data directory (`hermetic_command`), so a rules.yaml on
    // the machine cannot change the outcome.
    let mut hook = format!("{} hook claude-code", shell_quote(CARAPACE));
    let mut env: Vec<(&str, String)> = Vec::new();
    match how {
        Evaluation::Local => hook.push_str(" --local"),
        Evaluation::Daemon(d) => env.push(("CARAPACE_SOCKET", d.socket.to_string_lossy().into())),
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let settings = settings(ws, &hook);
    let aws = ws.home().join(".aws/credentials");
    let readme = ws.project().join("README.md");
    let server = script(vec![
        Block::text("I will gather what I need."),
        Block::tool_use(
            "toolu_ssh_key",
            "Bash",
            json!({"command": "cat ~/.ssh/id_rsa", "description": "Show the SSH key"}),
        ),
        Block::tool_use("toolu_aws_read", "Read", json!({"file_path": aws})),
        Block::tool_use(
            "toolu_echo",
            "Bash",
            json!({"command": "echo hello > note.txt", "description": "Write a note"}),
        ),
        Block::tool_use("toolu_readme", "Read", json!({"file_path": readme})),
    ]);
    let run = run_claude(ws, &server, &settings, &env);
    let context = || {
        let log = match how {
            Evaluation::Local => String::new(),
            Evaluation::Daemon(d) => d.log_text(),
        };
        format!(
            "output: {:#}\nstderr:\n{}\ndaemon log:\n{log}",
            run.result, run.stderr
        )
    };

    assert_eq!(
        run.denied_ids(),
        ["toolu_aws_read", "toolu_ssh_key"],
        "{}",
        context()
    );
    for (id, topic) in [("toolu_ssh_key", "ssh"), ("toolu_aws_read", "aws")] {
        let (block, text) = result_for(&server, &run, id);
        assert_eq!(block["is_error"], true, "{block}\n{}", context());
        assert_refused_by_carapace(id, &text, topic, &context);
    }

    let (echo, text) = result_for(&server, &run, "toolu_echo");
    assert_ne!(
        echo["is_error"],
        true,
        "echo was refused: {text:?}\n{}",
        context()
    );
    assert_eq!(read(&ws.project().join("note.txt")), "hello\n");
    let (readme_result, text) = result_for(&server, &run, "toolu_readme");
    assert_ne!(readme_result["is_error"], true, "{text:?}\n{}", context());
    assert!(text.contains(README_MARKER), "{text:?}");
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", path.display()));
}
