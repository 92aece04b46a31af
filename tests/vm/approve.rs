//! Approve mode in the kernel (issue 20): the fixture's `approve-drafts` rule refuses every
//! operation on /srv/drafts in the kernel and files an approval request for the exact
//! operation; the agent's message says a human is asked and to retry. An approval lets the
//! retry in the same session through (that operation only, that session only); a denial
//! keeps it refused; an expired request refuses as a denial does.
use std::{
    fs,
    io::Read as _,
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Child, Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

use super::{agent, guard, restart_daemon, session_command, stderr, stdout};

const CONFIG: &str = "/var/lib/carapace/config.yaml";
const DRAFTS: &str = "/srv/drafts";
/// Long enough for the test to find and answer a request under TCG, short enough to wait
/// out once.
const TIMEOUT_SECS: u64 = 20;

/// A short approval timeout in config.yaml for the test, taken out again afterwards (the
/// daemon restarted both times), so other tests keep the daemon they expect.
struct WithTimeout;

impl WithTimeout {
    fn start() -> Self {
        assert!(!Path::new(CONFIG).exists(), "{CONFIG} exists already");
        fs::write(
            CONFIG,
            format!("approvals:\n  timeout_seconds: {TIMEOUT_SECS}\n"),
        )
        .expect("write config");
        restart_daemon(false);
        Self
    }
}

impl Drop for WithTimeout {
    fn drop(&mut self) {
        let _ = fs::remove_file(CONFIG);
        restart_daemon(false);
    }
}

fn draft(name: &str) -> String {
    let path = format!("{DRAFTS}/{name}");
    fs::create_dir_all(DRAFTS).expect("create drafts");
    fs::set_permissions(DRAFTS, fs::Permissions::from_mode(0o777)).expect("chmod drafts");
    fs::write(&path, format!("draft {name}\n")).expect("write draft");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod draft");
    path
}

/// An agent session that reads `path`, waits for `go` to exist (made by the test once it
/// has answered), and reads it again: the retry, in the same session.
fn read_twice(path: &str, go: &str) -> Child {
    let _ = fs::remove_file(go);
    let script = format!(
        "cat {path}; echo first=$?; \
         for _ in $(seq 1200); do [ -e {go} ] && break; sleep 0.1; done; \
         cat {path}; echo second=$?; \
         echo more >> {path}; echo write=$?"
    );
    session_command(&["bash", "-c", &script], Some(1000))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agent")
}

fn finish(mut child: Child) -> Output {
    let mut out = String::new();
    let mut err = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read stdout");
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read stderr");
    let status = child.wait().expect("agent exits");
    eprintln!("agent → {status:?}\nstdout: {out}\nstderr: {err}");
    Output {
        status,
        stdout: out.into_bytes(),
        stderr: err.into_bytes(),
    }
}

/// The pending approval requests, as `carapace approvals --json` lists them.
fn pending() -> Vec<serde_json::Value> {
    let out = Command::new("carapace")
        .args(["approvals", "--json"])
        .output()
        .expect("carapace approvals");
    assert!(out.status.success(), "approvals: {}", stderr(&out));
    stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The id of the pending kernel request for `phrase` (e.g. `read of /srv/drafts/a`), once
/// the kernel's refusal has filed it.
fn request_for(phrase: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(a) = pending().into_iter().find(|a| {
            a["kind"] == "kernel" && a["summary"].as_str().is_some_and(|s| s.starts_with(phrase))
        }) {
            assert_eq!(a["rules"][0]["id"], "approve-drafts", "{a}");
            return a["id"].as_str().expect("id").to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no kernel request for `{phrase}`: {:?}",
            pending()
        );
        thread::sleep(Duration::from_millis(200));
    }
}

fn answer(verb: &str, id: &str) {
    let out = Command::new("carapace")
        .args([verb, id])
        .output()
        .expect("carapace approve/deny");
    assert!(
        out.status.success(),
        "carapace {verb} {id}: {}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn approve_mode_refuses_until_a_human_approves_the_retry() {
    let _g = guard();
    let _timeout = WithTimeout::start();

    // Approved: the retry in the same session reads the file; a write is another operation.
    let path = draft("approved.txt");
    let go = "/tmp/approve-go-1";
    let child = read_twice(&path, go);
    let id = request_for(&format!("read of {path}"));
    answer("approve", &id);
    fs::write(go, "").expect("go");
    let out = finish(child);
    let text = stdout(&out);
    assert!(text.contains("first=1"), "first read refused:\n{text}");
    assert!(
        text.contains("draft approved.txt") && text.contains("second=0"),
        "the approved retry reads the file:\n{text}"
    );
    assert!(
        text.contains("write=1"),
        "a write was not approved:\n{text}"
    );
    let err = stderr(&out);
    assert!(err.contains("Permission denied"), "EACCES:\n{err}");
    assert!(
        err.contains(&format!(
            "carapace: blocked read of {path} (rule approve-drafts: Drafts need a human's approval. Waiting for a human to approve it (request {id}"
        )),
        "the message says a human is asked:\n{err}"
    );
    assert!(err.contains("retry the same operation"), "{err}");
    // Another session has no such approval.
    let out = agent(&format!("cat {path}; echo status=$?"));
    assert!(stdout(&out).contains("status=1"), "{}", stdout(&out));

    // Denied: the retry stays refused and is told not to retry.
    let path = draft("denied.txt");
    let go = "/tmp/approve-go-2";
    let child = read_twice(&path, go);
    let id = request_for(&format!("read of {path}"));
    answer("deny", &id);
    fs::write(go, "").expect("go");
    let out = finish(child);
    let text = stdout(&out);
    assert!(
        text.contains("first=1") && text.contains("second=1"),
        "denied: both reads refused:\n{text}"
    );
    assert!(!text.contains("draft denied.txt"), "{text}");
    assert!(
        stderr(&out).contains("denied this operation earlier"),
        "the retry is answered by the denial:\n{}",
        stderr(&out)
    );

    // Expired: nobody answers within the timeout; the retry is refused.
    let path = draft("expired.txt");
    let go = "/tmp/approve-go-3";
    let child = read_twice(&path, go);
    let id = request_for(&format!("read of {path}"));
    let deadline = Instant::now() + Duration::from_secs(TIMEOUT_SECS * 4);
    while pending().iter().any(|a| a["id"] == id.as_str()) {
        assert!(Instant::now() < deadline, "request {id} never expired");
        thread::sleep(Duration::from_millis(500));
    }
    fs::write(go, "").expect("go");
    let out = finish(child);
    let text = stdout(&out);
    assert!(
        text.contains("first=1") && text.contains("second=1"),
        "expired: both reads refused:\n{text}"
    );
    assert!(!text.contains("draft expired.txt"), "{text}");
    let answered = Command::new("carapace")
        .args(["approve", &id])
        .output()
        .expect("carapace approve");
    assert!(
        !answered.status.success(),
        "an expired request cannot be approved any more"
    );
}
