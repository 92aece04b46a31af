//! The real Codex CLI (`codex exec`) against a loopback Responses API server.
//!
//! Facts these tests rely on (Codex CLI 0.169.0):
//! - A `model_providers` entry with `wire_api = "responses"` and `requires_openai_auth =
//!   false` makes the CLI stream `POST {base_url}/responses` and nothing else.
//! - A `function_call` item `exec_command {"cmd": …}` runs a shell command; the hook sees it
//!   as `tool_name: "Bash"`, `tool_input.command`. Commands run in a read-only sandbox
//!   (bubblewrap, bundled), so the allowed call reads rather than writes.
//! - Codex runs a config.toml hook only once the user trusted it (`hooks.state` in the
//!   user's config.toml); `carapace hook install codex` records that trust, so the CLI runs
//!   without `--dangerously-bypass-hook-trust` and an untrusted hook would be skipped.
//! - A deny reaches the model as the call's `function_call_output`, `Command blocked by
//!   PreToolUse hook: REASON. Command: …`, and the CLI logs the same line on stderr.
use std::path::Path;
use std::time::Duration;

use carapace_tests::agent_cli::{
    assert_refused_by_carapace, hermetic_command, installed_bin, read, run_with_deadline, Finished,
    Workspace, README_MARKER,
};
use carapace_tests::openai::{OpenAiServer, Turn};
use serde_json::json;

use super::{
    assert_finished_offline, assert_history_scan, assert_same_fields, install_hook, logged_inputs,
    script_hook, MCP_SERVER,
};

/// Where `cargo xtask setup` installs the CLI, under the cache directory's `carapace/`.
const INSTALLED_BIN: &str = "codex/node_modules/.bin/codex";

const TIMEOUT: Duration = Duration::from_mins(1);

/// The user's config before the hook is installed: the loopback provider, no telemetry or
/// update checks.
fn user_config(base_url: &str) -> String {
    format!(
        r#"# the test's own settings, as a user's config.toml would hold them
model = "gpt-5"
model_provider = "loopback"
check_for_update_on_startup = false

[model_providers.loopback]
name = "loopback"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "CARAPACE_TEST_KEY"
requires_openai_auth = false

[analytics]
enabled = false

[mcp_servers.files]
command = {mcp}
"#,
        mcp = json!(MCP_SERVER)
    )
}

#[test]
fn carapace_hook_refuses_secrets_and_lets_project_work_run() {
    let ws = Workspace::new();
    let key = ws.home().join(".ssh/id_ed25519");
    let server = OpenAiServer::scripted(vec![
        Turn::new("I will gather what I need.")
            .call(
                "call_ssh",
                "exec_command",
                json!({"cmd": "cat ~/.ssh/id_ed25519"}),
            )
            .call(
                "call_aws",
                "exec_command",
                json!({"cmd": "cat ~/.aws/credentials"}),
            )
            .call(
                "call_readme",
                "exec_command",
                json!({"cmd": "cat README.md"}),
            )
            // An MCP server's tool: Codex names it `mcp__files__read_file` to the hook.
            .call_in("mcp__files", "call_mcp", "read_file", json!({"path": key})),
        Turn::new("All done."),
    ]);
    let codex_home = ws.path("codex-home");
    let config = codex_home.join("config.toml");
    ws.write(&config, &user_config(&server.base_url()));
    install_hook("codex", &config);

    let run = run_codex(&ws, &server, &codex_home, &[]);
    let context = || {
        format!(
            "stdout:\n{}\nstderr:\n{}\nrequests: {:?}\nconfig:\n{}",
            run.stdout,
            run.stderr,
            paths(&server),
            read(&config)
        )
    };
    assert_finished_offline(&run, &server.unknown_requests(), &context);
    // Layer 0 reads the session Codex recorded: the refused calls are there, found again.
    assert_history_scan(
        &ws,
        &codex_home.join("sessions"),
        ".jsonl",
        4,
        &[
            ".ssh/id_ed25519",
            ".aws/credentials",
            "mcp__files__read_file",
        ],
        &context,
    );

    for (id, topic) in [("call_ssh", "ssh"), ("call_aws", "aws")] {
        let output = server
            .function_call_output(id)
            .unwrap_or_else(|| panic!("no function_call_output for {id}\n{}", context()));
        assert!(
            output.starts_with("Command blocked by PreToolUse hook: "),
            "{id} was not blocked by the hook: {output:?}\n{}",
            context()
        );
        assert_refused_by_carapace(id, &output, topic, &context);
        // The CLI's own log says the same.
        let reason = output
            .strip_prefix("Command blocked by PreToolUse hook: ")
            .unwrap_or_default();
        let first_words: String = reason.chars().take(40).collect();
        assert!(
            run.stderr.contains(&format!(
                "Command blocked by PreToolUse hook: {first_words}"
            )),
            "the CLI's output does not show the refusal of {id}\n{}",
            context()
        );
    }
    let mcp = server
        .function_call_output("call_mcp")
        .unwrap_or_else(|| panic!("no function_call_output for the MCP call\n{}", context()));
    let (_, reason) = mcp
        .split_once("blocked by PreToolUse hook: ")
        .unwrap_or_else(|| panic!("the MCP call was not blocked: {mcp:?}\n{}", context()));
    assert_refused_by_carapace("the MCP call", reason, "ssh", &context);
    let readme = server
        .function_call_output("call_readme")
        .unwrap_or_else(|| panic!("no function_call_output for the README\n{}", context()));
    assert!(
        readme.contains(README_MARKER),
        "reading the README did not run: {readme:?}\n{}",
        context()
    );
}

/// `codex exec` in the project with the config in `codex_home`, hermetically: a cleared
/// environment, the throwaway HOME, a dummy key.
fn run_codex(ws: &Workspace, server: &OpenAiServer, codex_home: &Path, extra: &[&str]) -> Finished {
    let mut cmd = hermetic_command(&installed_bin("CARAPACE_CODEX_BIN", INSTALLED_BIN), ws);
    cmd.args(["exec", "--skip-git-repo-check"])
        .args(extra)
        .arg("-C")
        .arg(ws.project())
        .arg("Please do the task.")
        .env("CODEX_HOME", codex_home)
        .env("CARAPACE_TEST_KEY", "sk-loopback-dummy");
    run_with_deadline(ws, &mut cmd, TIMEOUT, || {
        format!("requests seen: {:?}", paths(server))
    })
}

/// Pins Codex's side of the protocol with a hook that is not Carapace's: what it sends a
/// hook, that the JSON deny blocks the call with its reason, and that a hook that crashes
/// lets the call run — why Carapace's hook answers deny on every failure of its own.
#[test]
fn cli_treats_a_script_hooks_answers_as_carapace_relies_on() {
    let ws = Workspace::new();
    let server = OpenAiServer::scripted(vec![
        Turn::new("Checking.")
            .call(
                "call_ssh",
                "exec_command",
                json!({"cmd": "cat ~/.ssh/id_ed25519"}),
            )
            .call(
                "call_aws",
                "exec_command",
                json!({"cmd": "cat ~/.aws/credentials"}),
            ),
        Turn::new("All done."),
    ]);
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "script-hook: no keys"}});
    let (script, log) = script_hook(&ws, &deny, None);
    let codex_home = ws.path("codex-home");
    let config = format!(
        "{}\n[[hooks.PreToolUse]]\nmatcher = \"*\"\n\n[[hooks.PreToolUse.hooks]]\n\
         type = \"command\"\ncommand = {}\n",
        user_config(&server.base_url()),
        json!(script.to_string_lossy())
    );
    ws.write(&codex_home.join("config.toml"), &config);
    // The script is nobody's trusted hook: this run bypasses trust.
    let run = run_codex(
        &ws,
        &server,
        &codex_home,
        &["--dangerously-bypass-hook-trust"],
    );
    let context = || format!("stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert_finished_offline(&run, &server.unknown_requests(), &context);
    assert_eq!(
        server.function_call_output("call_ssh").as_deref(),
        Some("Command blocked by PreToolUse hook: script-hook: no keys. Command: cat ~/.ssh/id_ed25519"),
        "{}",
        context()
    );
    let aws = server.function_call_output("call_aws").unwrap_or_default();
    assert!(
        aws.contains("AKIAFAKEFORCARAPACE"),
        "a crashed hook no longer lets the call run: {aws:?}\n{}",
        context()
    );

    let inputs = logged_inputs(&log);
    assert_eq!(inputs.len(), 2, "{inputs:#?}");
    let ssh = inputs
        .iter()
        .find(|i| i["tool_use_id"] == "call_ssh")
        .unwrap_or_else(|| panic!("no hook input for the ssh call: {inputs:#?}"));
    assert_eq!(ssh["hook_event_name"], "PreToolUse");
    assert_eq!(ssh["tool_name"], "Bash");
    assert_eq!(ssh["tool_input"]["command"], "cat ~/.ssh/id_ed25519");
    assert_eq!(ssh["cwd"], ws.project().to_string_lossy().as_ref());
    assert_same_fields(ssh, "codex/pretooluse-bash.json", "tool_input");
}

fn paths(server: &OpenAiServer) -> Vec<String> {
    server.requests().iter().map(|r| r.path.clone()).collect()
}
