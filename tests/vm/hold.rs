//! `hold: true` in the kernel (issue 20): the fixture's `hold-drafts` rule is approve mode
//! on /srv/held, held. For the files there when the daemon loads the rules, the LSM
//! programs let a session's open through to the daemon's fanotify listener, which holds it
//! until a human answers: the process waits (no EACCES, no retry), an approval lets the
//! same open go on, a denial or an expiry fails it with EPERM. A process outside the
//! session is not held. An exec is held the same way (its open of the program raises the
//! same permission event). A file created after the load is not marked: the kernel refuses
//! it until approved, as approve mode without hold does.
use std::{
    fs,
    io::Read as _,
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use super::{guard, restart_daemon, session_command, stderr, stdout};

const CONFIG: &str = "/var/lib/carapace/config.yaml";
const HELD: &str = "/srv/held";
/// Long enough to find and answer a request under TCG, short enough to wait out once.
const TIMEOUT_SECS: u64 = 20;

/// The held files, made before the daemon restarts with a short approval timeout (the
/// marks are set at load); the config is taken out again afterwards.
struct Setup;

impl Setup {
    fn start() -> Self {
        fs::create_dir_all(HELD).expect("create held dir");
        fs::set_permissions(HELD, fs::Permissions::from_mode(0o777)).expect("chmod");
        for f in ["approved.txt", "denied.txt", "expired.txt"] {
            let path = format!("{HELD}/{f}");
            fs::write(&path, format!("held {f}\n")).expect("write held file");
            fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod");
        }
        let tool = format!("{HELD}/tool");
        fs::copy("/bin/echo", &tool).expect("copy a program into the held dir");
        fs::set_permissions(&tool, fs::Permissions::from_mode(0o755)).expect("chmod");
        let _ = fs::remove_file(format!("{HELD}/late.txt"));
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

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = fs::remove_file(CONFIG);
        restart_daemon(false);
    }
}

/// A session of uid 1000 that reads `path` once and says how it went.
fn read_in_session(path: &str) -> Child {
    run_in_session(&format!("cat {path}"))
}

/// A session of uid 1000 that runs `command` once and says how it went.
fn run_in_session(command: &str) -> Child {
    session_command(
        &["bash", "-c", &format!("{command}; echo status=$?")],
        Some(1000),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start agent")
}

fn finish(mut child: Child) -> (String, String) {
    let (mut out, mut err) = (String::new(), String::new());
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
    (out, err)
}

/// The pending request whose summary names `path`, once filed.
fn request_for(path: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new("carapace")
            .args(["approvals", "--json"])
            .output()
            .expect("carapace approvals");
        if let Some(a) = stdout(&out)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|a| a["summary"].as_str().is_some_and(|s| s.contains(path)))
        {
            return a;
        }
        assert!(Instant::now() < deadline, "no request for {path}");
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
fn hold_holds_an_open_until_the_answer() {
    let _g = guard();
    let _setup = Setup::start();

    // Approved: the open waits, then goes on; the program reads the file, no retry.
    let path = format!("{HELD}/approved.txt");
    let mut child = read_in_session(&path);
    let request = request_for(&path);
    assert_eq!(request["kind"], "kernel", "{request}");
    assert_eq!(request["rules"][0]["id"], "hold-drafts", "{request}");
    assert!(
        request["summary"]
            .as_str()
            .is_some_and(|s| s.contains("held: the program is waiting")),
        "{request}"
    );
    thread::sleep(Duration::from_secs(2));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the session's open is held while the request waits"
    );
    // Outside the session the same file opens at once.
    let outside = Command::new("timeout")
        .args(["10", "cat", &path])
        .output()
        .expect("cat outside");
    assert_eq!(stdout(&outside), "held approved.txt\n", "not held outside");
    answer("approve", request["id"].as_str().expect("id"));
    let (out, err) = finish(child);
    assert!(
        out.contains("held approved.txt") && out.contains("status=0"),
        "the held open goes on once approved:\n{out}\n{err}"
    );
    assert!(
        !err.contains("blocked read"),
        "held, not refused by the kernel:\n{err}"
    );

    // An exec is held as an open is: the program starts once approved.
    let tool = format!("{HELD}/tool");
    let mut child = run_in_session(&format!("{tool} ran-the-held-tool"));
    let request = request_for(&tool);
    thread::sleep(Duration::from_secs(2));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the session's exec is held while the request waits"
    );
    answer("approve", request["id"].as_str().expect("id"));
    let (out, err) = finish(child);
    assert!(
        out.contains("ran-the-held-tool") && out.contains("status=0"),
        "the held exec goes on once approved:\n{out}\n{err}"
    );

    // Denied: the open fails with EPERM.
    let path = format!("{HELD}/denied.txt");
    let child = read_in_session(&path);
    let request = request_for(&path);
    answer("deny", request["id"].as_str().expect("id"));
    let (out, err) = finish(child);
    assert!(
        out.contains("status=1") && !out.contains("held denied.txt"),
        "denied:\n{out}"
    );
    assert!(err.contains("Operation not permitted"), "EPERM:\n{err}");

    // Expired: nobody answers; the open fails when the timeout passes.
    let path = format!("{HELD}/expired.txt");
    let started = Instant::now();
    let child = read_in_session(&path);
    request_for(&path);
    let (out, err) = finish(child);
    assert!(
        out.contains("status=1") && !out.contains("held expired.txt"),
        "expired:\n{out}\n{err}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(TIMEOUT_SECS - 2),
        "held until the timeout: {:?}",
        started.elapsed()
    );

    // A file made after the load is not marked: the kernel refuses it (EACCES) until
    // approved, and the agent is told to retry.
    let late = format!("{HELD}/late.txt");
    fs::write(&late, "late\n").expect("write late");
    fs::set_permissions(&late, fs::Permissions::from_mode(0o666)).expect("chmod");
    let (out, err) = finish(read_in_session(&late));
    assert!(out.contains("status=1"), "refused:\n{out}");
    assert!(err.contains("Permission denied"), "EACCES:\n{err}");
    assert!(err.contains("retry the same operation"), "{err}");
}
