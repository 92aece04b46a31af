//! The real GitHub Copilot CLI (`copilot -p`) against a loopback Responses API server.
//!
//! Facts these tests rely on (Copilot CLI 1.0.102):
//! - `COPILOT_OFFLINE=true` with `COPILOT_PROVIDER_BASE_URL` (its own model provider, BYOK),
//!   `COPILOT_PROVIDER_WIRE_API=responses` and `COPILOT_MODEL` makes it stream
//!   `POST {base_url}/responses` and skip GitHub sign-in, telemetry and updates.
//! - `-p` mode needs `--allow-all-tools`, so the hook alone refuses.
//! - Its `bash {command}` tool runs a command; the hook gets `toolName: "bash"`,
//!   `toolArgs: {command, description}`.
//! - A deny reaches the model as the call's `function_call_output` "Denied by preToolUse
//!   hook: REASON", and the CLI prints the same under the call on stdout. A hook that
//!   crashes denies the call too ("… (hook errored)"), unlike in the other agents.
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
const INSTALLED_BIN: &str = "copilot/node_modules/.bin/copilot";

const TIMEOUT: Duration = Duration::from_mins(1);

/// The user's settings before the hook is installed.
const USER_SETTINGS: &str = "{\n  \"banner\": \"never\",\n  \"autoUpdate\": false\n}\n";

#[test]
fn carapace_hook_refuses_secrets_and_lets_project_work_run() {
    let ws = Workspace::new();
    let server = OpenAiServer::scripted(vec![
        Turn::new("I will gather what I need.")
            .call(
                "call_ssh",
                "bash",
                json!({"command": "cat ~/.ssh/id_ed25519", "description": "Show the key"}),
            )
            .call(
                "call_aws",
                "bash",
                json!({"command": "cat ~/.aws/credentials", "description": "Show AWS"}),
            )
            .call(
                "call_readme",
                "view",
                json!({"path": ws.project().join("README.md")}),
            )
            .call(
                "call_echo",
                "bash",
                json!({"command": "echo hello > note.txt", "description": "Note"}),
            )
            // An MCP server's tool: Copilot names it `files-read_file`, with no context.
            .call(
                "call_mcp",
                "files-read_file",
                json!({"path": ws.home().join(".ssh/id_ed25519")}),
            ),
        Turn::new("All done."),
    ]);
    let settings = ws.home().join(".copilot/settings.json");
    ws.write(&settings, USER_SETTINGS);
    ws.write(
        &ws.home().join(".copilot/mcp-config.json"),
        &json!({"mcpServers": {"files": {"type": "local", "command": MCP_SERVER,
                                          "args": [], "tools": ["*"]}}})
        .to_string(),
    );
    install_hook("copilot", &settings);

    let run = run_copilot(&ws, &server);
    let context = || {
        format!(
            "stdout:\n{}\nstderr:\n{}\nrequests: {:?}\nsettings:\n{}",
            run.stdout,
            run.stderr,
            paths(&server),
            read(&settings)
        )
    };
    assert_finished_offline(&run, &server.unknown_requests(), &context);
    // Layer 0 reads the session the CLI recorded: the refused calls are there, found again.
    assert_history_scan(
        &ws,
        &ws.home().join(".copilot/session-state"),
        "events.jsonl",
        5,
        &[".ssh/id_ed25519", ".aws/credentials", "read_file"],
        &context,
    );

    for (id, topic) in [
        ("call_ssh", "ssh"),
        ("call_aws", "aws"),
        ("call_mcp", "ssh"),
    ] {
        let output = server
            .function_call_output(id)
            .unwrap_or_else(|| panic!("no function_call_output for {id}\n{}", context()));
        let reason = output
            .strip_prefix("Denied by preToolUse hook: ")
            .unwrap_or_else(|| {
                panic!("{id} was not denied by the hook: {output:?}\n{}", context())
            });
        assert_refused_by_carapace(id, reason, topic, &context);
        // Copilot's `files-read_file` is named as rules for MCP tools name it.
        let mcp_named = id != "call_mcp" || reason.contains("mcp__files__read_file");
        assert!(mcp_named, "{reason}\n{}", context());
        // The CLI wraps long lines: the reason's start is on the line of the denial.
        let first_words: String = reason.chars().take(30).collect();
        assert!(
            run.stdout
                .contains(&format!("Denied by preToolUse hook: {first_words}")),
            "the CLI's output does not show the refusal of {id}\n{}",
            context()
        );
    }
    let readme = server
        .function_call_output("call_readme")
        .unwrap_or_else(|| panic!("no function_call_output for the README\n{}", context()));
    assert!(readme.contains(README_MARKER), "{readme:?}\n{}", context());
    assert!(
        server.function_call_output("call_echo").is_some(),
        "{}",
        context()
    );
    assert_eq!(
        read(&ws.project().join("note.txt")),
        "hello\n",
        "{}",
        context()
    );
}

/// `copilot -p` in the project, hermetically: a cleared environment, the throwaway HOME
/// (whose .copilot/settings.json holds the hook), the loopback server as its own provider.
fn run_copilot(ws: &Workspace, server: &OpenAiServer) -> Finished {
    let mut cmd = hermetic_command(&installed_bin("CARAPACE_COPILOT_BIN", INSTALLED_BIN), ws);
    cmd.args(["-p", "Please do the task.", "--allow-all-tools"])
        .env("COPILOT_OFFLINE", "true")
        .env(
            "COPILOT_PROVIDER_BASE_URL",
            format!("{}/v1", server.base_url()),
        )
        .env("COPILOT_PROVIDER_WIRE_API", "responses")
        .env("COPILOT_PROVIDER_API_KEY", "loopback-dummy")
        .env("COPILOT_MODEL", "gpt-5")
        .env("COPILOT_AUTO_UPDATE", "false");
    run_with_deadline(ws, &mut cmd, TIMEOUT, || {
        format!("requests seen: {:?}", paths(server))
    })
}

/// Pins Copilot's side of the protocol with a hook that is not Carapace's: what it sends a
/// hook, that `permissionDecision: "deny"` blocks the call with its reason, and that —
/// unlike the other agents — it refuses a call whose hook crashed.
#[test]
fn cli_treats_a_script_hooks_answers_as_carapace_relies_on() {
    let ws = Workspace::new();
    let server = OpenAiServer::scripted(vec![
        Turn::new("Checking.")
            .call(
                "call_ssh",
                "bash",
                json!({"command": "cat ~/.ssh/id_ed25519", "description": "Show the key"}),
            )
            .call(
                "call_aws",
                "bash",
                json!({"command": "cat ~/.aws/credentials", "description": "Show AWS"}),
            ),
        Turn::new("All done."),
    ]);
    let deny =
        json!({"permissionDecision": "deny", "permissionDecisionReason": "script-hook: no keys"});
    let (script, log) = script_hook(&ws, &deny, None);
    let settings = json!({"banner": "never", "autoUpdate": false, "hooks": {"preToolUse": [
        {"type": "command", "bash": script.to_string_lossy()}]}});
    ws.write(
        &ws.home().join(".copilot/settings.json"),
        &settings.to_string(),
    );
    let run = run_copilot(&ws, &server);
    let context = || format!("stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert_finished_offline(&run, &server.unknown_requests(), &context);
    assert_eq!(
        server.function_call_output("call_ssh").as_deref(),
        Some("Denied by preToolUse hook: script-hook: no keys"),
        "{}",
        context()
    );
    let aws = server.function_call_output("call_aws").unwrap_or_default();
    assert!(
        aws.starts_with("Denied by preToolUse hook") && aws.contains("hook errored"),
        "a crashed hook no longer stops the call: {aws:?}\n{}",
        context()
    );
    assert!(!aws.contains("FAKE"), "{aws:?}");

    let inputs = logged_inputs(&log);
    assert_eq!(inputs.len(), 2, "{inputs:#?}");
    let ssh = inputs
        .iter()
        .find(|i| i["toolArgs"]["command"] == "cat ~/.ssh/id_ed25519")
        .unwrap_or_else(|| panic!("no hook input for the ssh call: {inputs:#?}"));
    assert_eq!(ssh["toolName"], "bash");
    assert_eq!(ssh["cwd"], ws.project().to_string_lossy().as_ref());
    assert_same_fields(ssh, "copilot/pretooluse-bash.json", "toolArgs");
}

fn paths(server: &OpenAiServer) -> Vec<String> {
    server.requests().iter().map(|r| r.path.clone()).collect()
}
