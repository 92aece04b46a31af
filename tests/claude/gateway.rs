//! The real Claude Code CLI pointed at Carapace's model-API gateway (`ANTHROPIC_BASE_URL`),
//! with no Carapace hook: the gateway alone must keep a forbidden call from the CLI.
use std::path::Path;

use carapace_tests::anthropic::Block;
use carapace_tests::{is_root, Daemon};
use serde_json::{json, Value};

use super::{read, run_claude, script, Workspace, CARAPACED};

#[test]
fn gateway_keeps_a_forbidden_streamed_call_from_the_cli_and_lets_an_allowed_one_run() {
    if !is_root() {
        eprintln!("gateway: skipped, needs root (the daemon creates cgroups)");
        return;
    }
    let ws = Workspace::new();
    let server = script(vec![
        Block::text("I will gather what I need."),
        Block::tool_use(
            "toolu_ssh_key",
            "Bash",
            json!({"command": "cat ~/.ssh/id_rsa > stolen.txt", "description": "Copy the key"}),
        ),
        Block::tool_use(
            "toolu_echo",
            "Bash",
            json!({"command": "echo hello > note.txt", "description": "Write a note"}),
        ),
    ]);
    let home = ws.home();
    let daemon = Daemon::start_env(
        Path::new(CARAPACED),
        &ws.path("carapace"),
        &[
            "--gateway",
            "127.0.0.1:0",
            "--anthropic-upstream",
            &server.base_url(),
        ],
        &[("HOME", home.as_os_str())],
    );
    let log = daemon.log_text();
    let gateway = log
        .lines()
        .find_map(|l| l.split("gateway listening on ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the daemon did not say where the gateway listens:\n{log}"))
        .to_owned();
    // A hook that decides nothing: the settings' permissions allow Bash, so without the
    // gateway the CLI would run both calls.
    let settings = super::settings(&ws, "true");
    let run = run_claude(&ws, &server, &settings, &[("ANTHROPIC_BASE_URL", &gateway)]);
    let context = || {
        format!(
            "output: {:#}\nstderr:\n{}\ndaemon log:\n{}",
            run.result,
            run.stderr,
            daemon.log_text()
        )
    };

    // The allowed call ran; the forbidden one never reached the CLI.
    assert_eq!(
        read(&ws.project().join("note.txt")),
        "hello\n",
        "{}",
        context()
    );
    assert!(!ws.project().join("stolen.txt").exists(), "{}", context());
    assert!(server.tool_result("toolu_echo").is_some(), "{}", context());
    assert!(
        server.tool_result("toolu_ssh_key").is_none(),
        "{}",
        context()
    );
    // Every request went through the gateway, and the CLI's next request carries the
    // refusal where the forbidden call was: the model is told why.
    let requests = server.message_requests();
    assert!(requests.len() >= 2, "{}", context());
    let refusal = requests
        .iter()
        .filter_map(|r| r["messages"].as_array())
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .find(|t| t.contains("[Carapace]"))
        .unwrap_or_else(|| panic!("no refusal in the conversation; {}", context()))
        .to_owned();
    assert!(refusal.contains("Bash call was not run"), "{refusal}");
    assert!(refusal.contains("[rule ssh-"), "{refusal}");
    let no_forbidden_call = requests
        .iter()
        .filter_map(|r| r["messages"].as_array())
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .all(|b: &Value| b["id"] != "toolu_ssh_key");
    assert!(no_forbidden_call, "{}", context());
    assert!(
        daemon.log_text().contains("gateway: tool call"),
        "{}",
        context()
    );
}
