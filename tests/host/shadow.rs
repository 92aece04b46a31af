//! Shadow sessions (`carapace run --shadow`, issue 20 item 5) at Layer 1, through the real
//! daemon and CLI: a call the rules block is answered allow from inside a shadow session and
//! recorded as `would-deny` with the rule; a self-protection rule still blocks; the session
//! shows as shadow in `status` and `session list`; and an agent inside a session cannot
//! start a shadow session of its own. The kernel's side is in tests/vm/shadow.rs.
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use carapace_tests::{cli_command, text, Daemon};

use super::{carapace, daemon, setup, CARAPACE};

const BLOCKED: &str = r#"{"tool":"Read","input":{"file_path":"/root/.ssh/id_ed25519"}}"#;
/// Carapace's own state: the self-protection pack, which holds in shadow sessions too.
const SELF: &str = r#"{"tool":"Read","input":{"file_path":"/var/lib/carapace/carapace.db"}}"#;

/// Every record of the ledger, as `carapace audit tail --json` prints them.
fn records(d: &Daemon) -> Vec<serde_json::Value> {
    let data = d.data_dir.to_str().expect("utf-8 data dir");
    let out = carapace(
        d,
        &["audit", "--data-dir", data, "tail", "--json", "-n", "1000"],
        &[],
    );
    assert!(out.status.success(), "audit tail: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad record {l}: {e}")))
        .collect()
}

/// `carapace check --json CALL` from inside a session started with `run_args`; (exit code of
/// the check as the session's command, its stdout).
fn check_inside(d: &Daemon, run_args: &[&str], call: &str) -> (Option<i32>, String, String) {
    let socket = d.socket.to_str().expect("utf-8 socket");
    let mut args = vec!["run"];
    args.extend_from_slice(run_args);
    args.extend_from_slice(&["--", CARAPACE, "--socket", socket, "check", "--json", call]);
    let out = carapace(d, &args, &[]);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_blocked_call_runs_in_a_shadow_session_and_is_recorded_as_would_deny() {
    let Some(dir) = setup("a_blocked_call_runs_in_a_shadow_session_and_is_recorded_as_would_deny")
    else {
        return;
    };
    let d = daemon(dir.path());
    // In an ordinary session the call is blocked.
    let (code, _, err) = check_inside(&d, &[], BLOCKED);
    assert_eq!(code, Some(2), "{err}");
    let (code, out, err) = check_inside(&d, &["--shadow"], BLOCKED);
    assert_eq!(code, Some(0), "allowed in shadow mode:\n{out}\n{err}");
    let decision: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    assert_eq!(decision["decision"], "allow", "{decision}");
    let message = decision["message"].as_str().unwrap_or_default();
    assert!(message.contains("shadow mode"), "{message}");
    assert!(
        err.contains("in shadow mode: what the rules would refuse is reported"),
        "carapace run says so:\n{err}"
    );

    let all = records(&d);
    let shadow_session = all
        .iter()
        .filter(|r| r["kind"] == "session-created")
        .nth(1)
        .map(|r| r["session"].clone())
        .expect("two sessions were created");
    let evals: Vec<&serde_json::Value> = all.iter().filter(|r| r["kind"] == "evaluate").collect();
    assert_eq!(evals.len(), 2, "{all:#?}");
    assert_eq!(evals[0]["decision"], "block", "{all:#?}");
    assert_eq!(evals[1]["decision"], "would-deny", "{all:#?}");
    assert_eq!(evals[1]["session"], shadow_session, "{all:#?}");
    let rules: Vec<&str> = evals[1]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str())
        .collect();
    let blocked_by: Vec<&str> = evals[0]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(!rules.is_empty(), "the record names the rules: {all:#?}");
    assert_eq!(rules, blocked_by, "the same rules as the real block");
}

#[test]
fn self_protection_still_blocks_in_a_shadow_session() {
    let Some(dir) = setup("self_protection_still_blocks_in_a_shadow_session") else {
        return;
    };
    let d = daemon(dir.path());
    let (code, out, err) = check_inside(&d, &["--shadow"], SELF);
    assert_eq!(code, Some(2), "still blocked:\n{out}\n{err}");
    assert!(out.contains("carapace-data"), "{out}");
    let all = records(&d);
    let eval = all
        .iter()
        .find(|r| r["kind"] == "evaluate")
        .unwrap_or_else(|| panic!("{all:#?}"));
    assert_eq!(eval["decision"], "block", "{all:#?}");
}

#[test]
fn status_and_session_list_show_a_shadow_session() {
    let Some(dir) = setup("status_and_session_list_show_a_shadow_session") else {
        return;
    };
    let d = daemon(dir.path());
    let mut held = cli_command(
        Path::new(CARAPACE),
        &d.socket,
        ["run", "--shadow", "--", "sleep", "20"],
        &[],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("start carapace run --shadow");
    let deadline = Instant::now() + Duration::from_secs(30);
    let list = loop {
        let out = carapace(&d, &["session", "list", "--json"], &[]);
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if list.as_array().is_some_and(|l| !l.is_empty()) {
            break list;
        }
        assert!(Instant::now() < deadline, "the session never appeared");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(list[0]["shadow"], true, "{list}");
    let status = text(&carapace(&d, &["status"], &[]).stdout);
    assert!(
        status.contains("shadow mode: refusals recorded as would-deny, not enforced"),
        "{status}"
    );
    let line = text(&carapace(&d, &["session", "list"], &[]).stdout);
    assert!(line.contains("[shadow mode]"), "{line}");
    let _ = held.kill();
    let _ = held.wait();
}

#[test]
fn an_agent_cannot_start_a_shadow_session() {
    let Some(dir) = setup("an_agent_cannot_start_a_shadow_session") else {
        return;
    };
    let d = daemon(dir.path());
    let socket = d.socket.to_str().expect("utf-8 socket");
    let out = carapace(
        &d,
        &[
            "run", "--", CARAPACE, "--socket", socket, "run", "--shadow", "--", CARAPACE,
            "--socket", socket, "check", "--json", BLOCKED,
        ],
        &[],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the nested run fails:\n{err}");
    assert!(err.contains("cannot create sessions"), "{err}");
    let all = records(&d);
    assert!(
        all.iter().all(|r| r["decision"] != "would-deny"),
        "nothing ran in shadow mode: {all:#?}"
    );
}
