//! Shadow mode in the kernel (issue 20 item 5): in a `carapace run --shadow` session a read
//! the fixture's rules block succeeds, carapace prints "would have blocked" and the ledger
//! records a `would-deny` kernel record with the rule; the self-protection rules still
//! refuse (EACCES) in the same session; and an agent inside a session cannot start a shadow
//! session to get out of its rules. The console shows the kernel's would-deny with the
//! session in shadow mode.
use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    process::{Command, Output},
    thread,
    time::{Duration, Instant},
};

use super::{agent, guard, stderr, stdout};

/// A file the self-protection pack's `carapace-data` rule covers (every action), readable
/// by everyone as far as file modes go, so that only Carapace refuses it.
const PROBE_DIR: &str = "/etc/carapace";
const PROBE: &str = "/etc/carapace/shadow-probe.txt";

/// `carapace run --shadow -- bash -c SCRIPT` as uid 1000, in /tmp.
fn shadow_agent(script: &str) -> Output {
    let out = Command::new("carapace")
        .args(["run", "--shadow", "--", "bash", "-c", script])
        .current_dir("/tmp")
        .env("SUDO_UID", "1000")
        .env("SUDO_GID", "1000")
        .output()
        .expect("run carapace");
    eprintln!(
        "shadow agent `{script}` → {:?}\nstdout: {}\nstderr: {}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    out
}

/// The session id `carapace run --shadow` announced on stderr.
fn session_id(out: &Output) -> String {
    let err = stderr(out);
    err.lines()
        .find_map(|l| {
            l.strip_prefix("carapace: session ")
                .and_then(|rest| rest.split_once(" in shadow mode"))
                .map(|(id, _)| id.to_owned())
        })
        .unwrap_or_else(|| panic!("no shadow-mode line on stderr:\n{err}"))
}

/// The kernel records of session `id` in the ledger, once `n` are there (the denial pump
/// writes them as the events arrive, a moment after the operation).
fn kernel_records(id: &str, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new("carapace")
            .args(["audit", "tail", "--json", "--session", id, "-n", "200"])
            .output()
            .expect("run carapace audit");
        assert!(out.status.success(), "audit tail: {}", stderr(&out));
        let found: Vec<serde_json::Value> = stdout(&out)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|r| r["kind"] == "kernel-denial")
            .collect();
        if found.len() >= n || Instant::now() > deadline {
            return found;
        }
        thread::sleep(Duration::from_millis(200));
    }
}

fn rule_of(record: &serde_json::Value) -> &str {
    record["rules"][0]["id"].as_str().unwrap_or_default()
}

#[test]
fn a_blocked_read_succeeds_in_a_shadow_session_and_is_recorded_as_would_deny() {
    let _g = guard();
    let out = shadow_agent(
        "cat /srv/secret/a.txt; echo read=$?; \
         python3 -c 'print(open(\"/srv/data/token.txt\").read().strip())'",
    );
    assert!(out.status.success(), "the agent ran through");
    let text = stdout(&out);
    assert!(
        text.contains("fixture\nread=0"),
        "cat read the file:\n{text}"
    );
    assert!(
        text.lines().filter(|l| *l == "fixture").count() == 2,
        "python read the token file too:\n{text}"
    );
    super::assert_denied_line(
        &out,
        "carapace: shadow mode, would have blocked read of /srv/secret/a.txt (rule secret-dir: The secret directory is off limits)",
    );
    let id = session_id(&out);
    let records = kernel_records(&id, 2);
    let would: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["decision"] == "would-deny")
        .collect();
    assert!(
        would.iter().any(|r| rule_of(r) == "secret-dir"),
        "a would-deny record of secret-dir: {records:#?}"
    );
    assert!(
        would.iter().any(|r| rule_of(r) == "token-file"),
        "a would-deny record of token-file: {records:#?}"
    );
    assert!(
        records.iter().all(|r| r["decision"] == "would-deny"),
        "nothing was refused: {records:#?}"
    );

    // The same read in an ordinary session is still refused: the shadow session's flag is
    // its own.
    let out = agent("cat /srv/secret/a.txt; echo read=$?");
    assert!(stdout(&out).contains("read=1"), "{}", stdout(&out));
    super::assert_denied_line(&out, "carapace: blocked read of /srv/secret/a.txt");
}

#[test]
fn self_protection_still_refuses_in_a_shadow_session() {
    let _g = guard();
    fs::create_dir_all(PROBE_DIR).expect("create probe dir");
    fs::set_permissions(PROBE_DIR, fs::Permissions::from_mode(0o755)).expect("chmod dir");
    fs::write(PROBE, "probe\n").expect("write probe");
    fs::set_permissions(PROBE, fs::Permissions::from_mode(0o644)).expect("chmod probe");
    let out = shadow_agent(&format!(
        "cat {PROBE}; echo self=$?; cat /srv/secret/a.txt; echo rule=$?"
    ));
    let text = stdout(&out);
    assert!(
        text.contains("self=1") && !text.contains("probe"),
        "the self-protection rule refused:\n{text}"
    );
    assert!(
        text.contains("rule=0"),
        "the file rule was shadowed:\n{text}"
    );
    assert!(
        stderr(&out).contains("Permission denied"),
        "cat saw EACCES:\n{}",
        stderr(&out)
    );
    super::assert_denied_line(
        &out,
        &format!("carapace: blocked read of {PROBE} (rule carapace-data:"),
    );
    let id = session_id(&out);
    let records = kernel_records(&id, 2);
    assert!(
        records
            .iter()
            .any(|r| rule_of(r) == "carapace-data" && r["decision"] == "block"),
        "the self-protection refusal is a block: {records:#?}"
    );
    // Outside any session the probe is readable: the refusal was Carapace's.
    assert_eq!(fs::read_to_string(PROBE).expect("read probe"), "probe\n");
    let _ = fs::remove_file(PROBE);
}

#[test]
fn an_agent_cannot_start_a_shadow_session_to_escape_its_rules() {
    let _g = guard();
    let out = agent(
        "carapace run --shadow -- cat /srv/secret/a.txt; echo nested=$?; \
         cat /srv/secret/a.txt; echo direct=$?",
    );
    let text = stdout(&out);
    assert!(
        text.contains("nested=1") && text.contains("direct=1"),
        "{text}"
    );
    assert!(
        !text.contains("fixture"),
        "nothing read the secret:\n{text}"
    );
    assert!(
        stderr(&out).contains("processes inside a Carapace session cannot create sessions"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_console_shows_a_kernel_would_deny_of_a_shadow_session() {
    let _g = guard();
    let _console = super::console::WithConsole::start();
    let gate = "/tmp/shadow-console-done";
    let _ = fs::remove_file(gate);
    let script =
        format!("cat /srv/secret/a.txt >/dev/null; while [ ! -e {gate} ]; do sleep 0.1; done");
    let session = thread::spawn(move || shadow_agent(&script));
    let visit = super::console::Visit::login();
    // The session, live, in shadow mode; its kernel would-deny in the records (the denial
    // pump writes it a moment after the read).
    let deadline = Instant::now() + Duration::from_secs(60);
    let (snapshot, id) = loop {
        let snapshot = visit.snapshot();
        let id = snapshot["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| {
                s["shadow"] == true
                    && s["command"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|a| a.as_str().is_some_and(|a| a.contains(gate)))
                    })
            })
            .and_then(|s| s["id"].as_str())
            .map(str::to_owned);
        let seen = id.as_ref().is_some_and(|id| {
            snapshot["records"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["session"] == id.as_str() && r["kind"] == "kernel-denial")
        });
        if seen || Instant::now() > deadline {
            break (snapshot, id.unwrap_or_default());
        }
        thread::sleep(Duration::from_millis(500));
    };
    fs::write(gate, "").expect("open the gate");
    let out = session.join().expect("the shadow session");
    assert!(out.status.success(), "the agent ran through");
    assert_eq!(
        session_id(&out),
        id,
        "the console's shadow session: {snapshot:#}"
    );
    let records: Vec<&serde_json::Value> = snapshot["records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["session"] == id.as_str() && r["kind"] == "kernel-denial")
        .collect();
    assert!(
        records.iter().any(|r| r["decision"] == "would-deny"
            && r["layer"] == "kernel"
            && rule_of(r) == "secret-dir"),
        "a kernel would-deny of secret-dir in the console's records: {records:#?}"
    );
    assert!(
        records.iter().all(|r| r["decision"] == "would-deny"),
        "nothing was refused: {records:#?}"
    );
    let _ = fs::remove_file(gate);
}
