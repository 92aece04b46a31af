//! The real Gemini CLI (`gemini -p`) against a loopback Gemini API server.
//!
//! Facts these tests rely on (Gemini CLI 0.61.0):
//! - With `GEMINI_API_KEY`, `GOOGLE_GEMINI_BASE_URL` and `-m gemini-2.5-pro` (without `-m`
//!   it first asks a routing model) the CLI only streams
//!   `POST /v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse`.
//! - In `-p` mode the shell tool is offered only with `--yolo`, which also runs every call
//!   without asking: the hook alone refuses.
//! - `functionCall` parts with an `id` get `functionResponse` parts with the same id; a
//!   hook's deny becomes `response.error` "Tool execution blocked: REASON", and the CLI
//!   prints "Error executing tool NAME: Tool execution blocked: REASON" on stderr.
//! - `read_file` outside the workspace is refused by the CLI itself before any hook, so
//!   the secrets are asked for with the shell.
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use carapace_tests::agent_cli::{
    assert_refused_by_carapace, hermetic_command, installed_bin, read, run_with_deadline, Finished,
    Workspace, README_MARKER,
};
use carapace_tests::gemini::{GeminiServer, Part};
use carapace_tests::Daemon;
use serde_json::{json, Value};

use super::{
    assert_finished_offline, assert_history_scan, assert_same_fields, install_hook, logged_inputs,
    script_hook, CARAPACED, MCP_SERVER,
};

/// Where `cargo xtask setup` installs the CLI, under the cache directory's `carapace/`.
const INSTALLED_BIN: &str = "gemini/node_modules/.bin/gemini";

const TIMEOUT: Duration = Duration::from_mins(1);

/// The user's settings before the hook is installed: API-key auth, no telemetry, usage
/// statistics or update checks.
const USER_SETTINGS: &str = r#"{
  "security": { "auth": { "selectedType": "gemini-api-key" } },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "general": { "disableAutoUpdate": true, "disableUpdateNag": true }
}
"#;

#[test]
fn carapace_hook_refuses_secrets_and_lets_project_work_run() {
    let ws = Workspace::new();
    let readme = ws.project().join("README.md");
    let server = GeminiServer::scripted(vec![
        vec![
            Part::text("I will gather what I need."),
            Part::call(
                "c_ssh",
                "run_shell_command",
                json!({"command": "cat ~/.ssh/id_ed25519"}),
            ),
            Part::call(
                "c_aws",
                "run_shell_command",
                json!({"command": "cat ~/.aws/credentials"}),
            ),
            Part::call("c_readme", "read_file", json!({"file_path": readme})),
            Part::call(
                "c_echo",
                "run_shell_command",
                json!({"command": "echo hello > note.txt"}),
            ),
            // An MCP server's tool, as Gemini names it to the model and to the hook.
            Part::call(
                "c_mcp",
                "mcp_files_read_file",
                json!({"path": ws.home().join(".ssh/id_ed25519")}),
            ),
        ],
        vec![Part::text("All done.")],
    ]);
    let settings = ws.home().join(".gemini/settings.json");
    let mut user: Value = serde_json::from_str(USER_SETTINGS).unwrap_or(Value::Null);
    user["mcpServers"] = json!({"files": {"command": MCP_SERVER}});
    ws.write(&settings, &user.to_string());
    install_hook("gemini", &settings);

    let run = run_gemini(&ws, &server);
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
        &ws.home().join(".gemini/tmp"),
        ".jsonl",
        5,
        &[".ssh/id_ed25519", ".aws/credentials", "read_file"],
        &context,
    );

    let response = |id: &str| {
        server
            .function_response(id)
            .unwrap_or_else(|| panic!("no functionResponse for {id}\n{}", context()))
    };
    for (id, topic) in [("c_ssh", "ssh"), ("c_aws", "aws")] {
        let r = response(id);
        let error = r["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{id} was not refused: {r}\n{}", context()));
        let reason = error
            .strip_prefix("Tool execution blocked: ")
            .unwrap_or_else(|| {
                panic!("{id} was not blocked by the hook: {error:?}\n{}", context())
            });
        assert_refused_by_carapace(id, reason, topic, &context);
        assert!(
            run.stderr.contains(&format!(
                "Error executing tool run_shell_command: Tool execution blocked: {reason}"
            )),
            "the CLI's output does not show the refusal of {id}\n{}",
            context()
        );
    }
    let mcp = response("c_mcp");
    let reason = mcp["error"]
        .as_str()
        .and_then(|e| e.strip_prefix("Tool execution blocked: "))
        .unwrap_or_else(|| panic!("the MCP call was not blocked: {mcp}\n{}", context()));
    assert_refused_by_carapace("the MCP call", reason, "ssh", &context);
    let readme = response("c_readme");
    assert_eq!(readme["error"], Value::Null, "{readme}\n{}", context());
    assert!(
        readme.to_string().contains(README_MARKER),
        "{readme}\n{}",
        context()
    );
    let echo = response("c_echo");
    assert_eq!(echo["error"], Value::Null, "{echo}\n{}", context());
    assert_eq!(read(&ws.project().join("note.txt")), "hello\n");
}

/// A call an approve-mode rule holds (the built-in `secrets-written-to-files`), in `gemini
/// -p` where nobody can answer a confirmation prompt: Carapace's hook refuses it, saying it
/// needs a human's approval and how to give it, instead of asking (an ask there leaves the
/// CLI waiting forever: the deadline then fails the test); the other call runs.
#[test]
fn approval_without_a_user_to_ask_is_a_refusal_not_a_hang() {
    let ws = Workspace::new();
    let server = GeminiServer::scripted(vec![
        vec![
            Part::call(
                "c_secret",
                "run_shell_command",
                json!({"command": "echo 'STRIPE_KEY=sk_live_abcdefghijklmnopqrstuvwx' > stripe.env"}),
            ),
            Part::call(
                "c_echo",
                "run_shell_command",
                json!({"command": "echo hello > note.txt"}),
            ),
        ],
        vec![Part::text("All done.")],
    ]);
    let settings = ws.home().join(".gemini/settings.json");
    ws.write(&settings, USER_SETTINGS);
    install_hook("gemini", &settings);

    let run = run_gemini(&ws, &server);
    let context = || {
        format!(
            "stdout:\n{}\nstderr:\n{}\nrequests: {:?}",
            run.stdout,
            run.stderr,
            paths(&server)
        )
    };
    assert_finished_offline(&run, &server.unknown_requests(), &context);
    let held = server
        .function_response("c_secret")
        .unwrap_or_else(|| panic!("no functionResponse for the held call\n{}", context()));
    let reason = held["error"]
        .as_str()
        .and_then(|e| e.strip_prefix("Tool execution blocked: "))
        .unwrap_or_else(|| panic!("the held call was not refused: {held}\n{}", context()));
    for words in [
        "Carapace",
        "needs a human's approval",
        "carapace approve",
        "console",
    ] {
        assert!(
            reason.contains(words),
            "the refusal does not say {words:?}: {reason:?}\n{}",
            context()
        );
    }
    assert!(
        run.stderr.contains(&format!(
            "Error executing tool run_shell_command: Tool execution blocked: {reason}"
        )),
        "the CLI's output does not show the refusal\n{}",
        context()
    );
    assert!(!ws.project().join("stripe.env").exists(), "{}", context());
    let echo = server
        .function_response("c_echo")
        .unwrap_or_else(|| panic!("no functionResponse for the other call\n{}", context()));
    assert_eq!(echo["error"], Value::Null, "{echo}\n{}", context());
    assert_eq!(read(&ws.project().join("note.txt")), "hello\n");
}

/// `gemini -p` in the project, hermetically: a cleared environment, the throwaway HOME
/// (whose .gemini/settings.json holds the hook), a dummy key.
fn run_gemini(ws: &Workspace, server: &GeminiServer) -> Finished {
    run_with_deadline(ws, &mut gemini_command(ws, server), TIMEOUT, || {
        format!("requests seen: {:?}", paths(server))
    })
}

fn gemini_command(ws: &Workspace, server: &GeminiServer) -> Command {
    let mut cmd = hermetic_command(&installed_bin("CARAPACE_GEMINI_BIN", INSTALLED_BIN), ws);
    cmd.args([
        "-m",
        "gemini-2.5-pro",
        "--yolo",
        "-p",
        "Please do the task.",
    ])
    .env("GEMINI_API_KEY", "loopback-dummy")
    .env("GOOGLE_GEMINI_BASE_URL", server.base_url())
    .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    cmd
}

/// Pins Gemini's side of the protocol with a hook that is not Carapace's: what it sends a
/// hook, that `{"decision": "deny"}` blocks the call with its reason, that a
/// Claude-Code-shaped deny is ignored, and that a hook that crashes lets the call run — why
/// Carapace answers in Gemini's own form, and denies on every failure of its own.
#[test]
fn cli_treats_a_script_hooks_answers_as_carapace_relies_on() {
    let ws = Workspace::new();
    let readme = ws.project().join("README.md");
    let server = GeminiServer::scripted(vec![
        vec![
            Part::call(
                "c_ssh",
                "run_shell_command",
                json!({"command": "cat ~/.ssh/id_ed25519"}),
            ),
            Part::call(
                "c_aws",
                "run_shell_command",
                json!({"command": "cat ~/.aws/credentials"}),
            ),
            Part::call("c_readme", "read_file", json!({"file_path": readme})),
        ],
        vec![Part::text("All done.")],
    ]);
    let deny = json!({"decision": "deny", "reason": "script-hook: no keys"});
    let claude_deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "script-hook: claude form"}});
    let (script, log) = script_hook(&ws, &deny, Some(&claude_deny));
    let mut settings: Value = serde_json::from_str(USER_SETTINGS).unwrap_or(Value::Null);
    settings["hooks"] = json!({"BeforeTool": [{"matcher": ".*", "hooks": [
        {"type": "command", "command": script.to_string_lossy()}]}]});
    ws.write(
        &ws.home().join(".gemini/settings.json"),
        &settings.to_string(),
    );
    let run = run_gemini(&ws, &server);
    let context = || format!("stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert_finished_offline(&run, &server.unknown_requests(), &context);
    let response = |id: &str| {
        server
            .function_response(id)
            .unwrap_or_else(|| panic!("no functionResponse for {id}\n{}", context()))
    };
    assert_eq!(
        response("c_ssh")["error"],
        "Tool execution blocked: script-hook: no keys",
        "{}",
        context()
    );
    assert!(
        response("c_aws")
            .to_string()
            .contains("AKIAFAKEFORCARAPACE"),
        "a crashed hook no longer lets the call run\n{}",
        context()
    );
    assert!(
        response("c_readme").to_string().contains(README_MARKER),
        "Gemini now honours Claude Code's deny form\n{}",
        context()
    );

    let inputs = logged_inputs(&log);
    assert_eq!(inputs.len(), 3, "{inputs:#?}");
    let ssh = inputs
        .iter()
        .find(|i| i["tool_input"]["command"] == "cat ~/.ssh/id_ed25519")
        .unwrap_or_else(|| panic!("no hook input for the ssh call: {inputs:#?}"));
    assert_eq!(ssh["hook_event_name"], "BeforeTool");
    assert_eq!(ssh["tool_name"], "run_shell_command");
    assert_eq!(ssh["cwd"], ws.project().to_string_lossy().as_ref());
    assert_same_fields(ssh, "gemini/beforetool-shell.json", "tool_input");
}

/// Pins why Carapace never answers "ask" in `gemini -p`: a hook's ask there leaves the CLI
/// waiting for a confirmation nobody can give — the call neither runs nor is refused, no
/// answer goes back to the model, the process does not end.
#[test]
fn cli_waits_forever_on_a_hooks_ask_in_headless_mode() {
    let ws = Workspace::new();
    let readme = ws.project().join("README.md");
    let server = GeminiServer::scripted(vec![
        vec![Part::call(
            "c_readme",
            "read_file",
            json!({"file_path": readme}),
        )],
        vec![Part::text("All done.")],
    ]);
    let deny = json!({"decision": "deny", "reason": "script-hook: no keys"});
    let ask = json!({"decision": "ask", "systemMessage": "script-hook: asks"});
    let (script, log) = script_hook(&ws, &deny, Some(&ask));
    let mut settings: Value = serde_json::from_str(USER_SETTINGS).unwrap_or(Value::Null);
    settings["hooks"] = json!({"BeforeTool": [{"matcher": ".*", "hooks": [
        {"type": "command", "command": script.to_string_lossy()}]}]});
    ws.write(
        &ws.home().join(".gemini/settings.json"),
        &settings.to_string(),
    );
    let mut child = gemini_command(&ws, &server)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start gemini: {e}"));
    let t0 = std::time::Instant::now();
    while !log.exists() && t0.elapsed() < TIMEOUT {
        std::thread::sleep(Duration::from_millis(100));
    }
    // Long enough for a call that is going anywhere to have run and been reported.
    std::thread::sleep(Duration::from_secs(5));
    let exited = child.try_wait().ok().flatten();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        log.exists(),
        "the hook was never called: {:?}",
        paths(&server)
    );
    assert_eq!(
        exited, None,
        "gemini -p no longer waits on a hook's ask: Carapace could ask there again"
    );
    assert!(server.function_response("c_readme").is_none());
    assert_eq!(server.requests().len(), 1, "{:?}", paths(&server));
}

fn paths(server: &GeminiServer) -> Vec<String> {
    server.requests().iter().map(|r| r.path.clone()).collect()
}

/// The gateway (`carapaced --gateway`) between the real Gemini CLI and its model API, with no
/// hook installed: the forbidden `functionCall` is replaced by Carapace's refusal before the
/// CLI sees it, so it never runs; the allowed one in the same answer runs.
#[test]
fn gateway_refuses_forbidden_calls_before_the_cli_sees_them() {
    if !carapace_tests::is_root() {
        eprintln!("gateway test skipped: carapaced needs root (cgroups)");
        return;
    }
    let ws = Workspace::new();
    let readme = ws.project().join("README.md");
    let server = GeminiServer::scripted(vec![
        vec![
            Part::text("I will gather what I need."),
            Part::call(
                "c_ssh",
                "run_shell_command",
                json!({"command": "cat ~/.ssh/id_ed25519"}),
            ),
            Part::call("c_readme", "read_file", json!({"file_path": readme})),
        ],
        vec![Part::text("All done.")],
    ]);
    let data = ws.path("carapaced");
    std::fs::create_dir_all(&data).unwrap_or_else(|e| panic!("cannot create {data:?}: {e}"));
    let daemon = Daemon::start(
        Path::new(CARAPACED),
        &data,
        &[
            "--gateway",
            "127.0.0.1:0",
            "--gemini-upstream",
            &server.base_url(),
        ],
    );
    let gateway = daemon.gateway_url();
    ws.write(&ws.home().join(".gemini/settings.json"), USER_SETTINGS);

    let mut cmd = hermetic_command(&installed_bin("CARAPACE_GEMINI_BIN", INSTALLED_BIN), &ws);
    cmd.args([
        "-m",
        "gemini-2.5-pro",
        "--yolo",
        "-p",
        "Please do the task.",
    ])
    .env("GEMINI_API_KEY", "loopback-dummy")
    .env("GOOGLE_GEMINI_BASE_URL", &gateway)
    .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    let run = run_with_deadline(&ws, &mut cmd, TIMEOUT, || {
        format!("requests seen: {:?}", paths(&server))
    });
    let context = || {
        format!(
            "stdout:\n{}\nstderr:\n{}\nrequests: {:?}\ndaemon log:\n{}",
            run.stdout,
            run.stderr,
            paths(&server),
            daemon.log_text()
        )
    };
    assert_finished_offline(&run, &server.unknown_requests(), &context);
    assert!(
        server.function_response("c_ssh").is_none(),
        "the forbidden call reached the CLI and ran\n{}",
        context()
    );
    assert!(
        run.stdout.contains("[Carapace]") && run.stdout.contains("run_shell_command"),
        "the CLI does not show Carapace's refusal\n{}",
        context()
    );
    let readme = server
        .function_response("c_readme")
        .unwrap_or_else(|| panic!("the allowed call did not run\n{}", context()));
    assert!(
        readme.to_string().contains(README_MARKER),
        "{readme}\n{}",
        context()
    );
}
