//! `hold: true` on the host (issue 20): fanotify works here as root even though the kernel
//! refuses BPF LSM programs, so the daemon's listener holds a session's opens of a hold
//! rule's files until the answer. A session's open waits (the process is still running),
//! an approval lets the same open go on, a denial and an expiry fail it with EPERM, and a
//! process outside the session opens the file at once.
use std::fs;
use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{carapace, setup, CARAPACE, CARAPACED};
use carapace_tests::{cli_command, text, Daemon};

/// Short enough to wait out once, long enough to answer under load.
const TIMEOUT_SECS: u64 = 8;

fn start(dir: &Path) -> (Daemon, String) {
    let held = dir.join("held");
    fs::create_dir_all(&held).expect("mkdir");
    for d in [dir, held.as_path()] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    for f in ["approved.txt", "denied.txt", "expired.txt"] {
        fs::write(held.join(f), format!("content of {f}\n")).expect("write");
        fs::set_permissions(held.join(f), fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let rules = dir.join("rules.yaml");
    fs::write(
        &rules,
        format!(
            "version: 1\nbuiltin: none\nrules:\n  - id: held-drafts\n    approve: \"{}/**\"\n    hold: true\n    message: Drafts need a human's approval\n",
            held.display()
        ),
    )
    .expect("write rules");
    let timeout = TIMEOUT_SECS.to_string();
    let d = Daemon::start(
        Path::new(CARAPACED),
        dir,
        &[
            "--rules",
            &rules.to_string_lossy(),
            "--approval-timeout",
            &timeout,
        ],
    );
    (d, held.display().to_string())
}

/// A session that reads `path` once and says how it went.
fn read_in_session(d: &Daemon, path: &str) -> Child {
    cli_command(
        Path::new(CARAPACE),
        &d.socket,
        [
            "run",
            "--",
            "sh",
            "-c",
            &format!("cat {path}; echo status=$?"),
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start the session")
}

/// The pending request whose summary names `path`, once filed.
fn request_for(d: &Daemon, path: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = carapace(d, &["approvals", "--json"], &[]);
        if let Some(a) = text(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|a| a["summary"].as_str().is_some_and(|s| s.contains(path)))
        {
            return a;
        }
        assert!(
            Instant::now() < deadline,
            "no request for {path}; log:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
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
    child.wait().expect("the session ends");
    (out, err)
}

#[test]
fn a_held_open_waits_for_the_answer() {
    let Some(dir) = setup("a_held_open_waits_for_the_answer") else {
        return;
    };
    let (d, held) = start(dir.path());
    assert!(
        d.log_text()
            .contains("hold: opens of 3 file(s) wait for a human"),
        "the daemon marks the rule's files; log:\n{}",
        d.log_text()
    );

    // Approved: the open waits, then goes on and the program reads the file.
    let path = format!("{held}/approved.txt");
    let mut child = read_in_session(&d, &path);
    let request = request_for(&d, &path);
    assert_eq!(request["kind"], "kernel", "{request}");
    assert_eq!(request["rules"][0]["id"], "held-drafts", "{request}");
    let summary = request["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("held: the program is waiting"),
        "{summary}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "the session's open is held while the request waits"
    );
    // A process outside the session is not held.
    let outside = Command::new("timeout")
        .args(["5", "cat", &path])
        .output()
        .expect("cat outside");
    assert_eq!(
        text(&outside.stdout),
        "content of approved.txt\n",
        "outside the session the open goes on at once"
    );
    let id = request["id"].as_str().expect("id");
    let out = carapace(&d, &["approve", id], &[]);
    assert!(out.status.success(), "approve: {}", text(&out.stderr));
    let (out, err) = finish(child);
    assert!(
        out.contains("content of approved.txt") && out.contains("status=0"),
        "the held open goes on once approved:\n{out}\n{err}"
    );

    // Denied: the open fails with EPERM.
    let path = format!("{held}/denied.txt");
    let child = read_in_session(&d, &path);
    let request = request_for(&d, &path);
    let out = carapace(&d, &["deny", request["id"].as_str().expect("id")], &[]);
    assert!(out.status.success(), "deny: {}", text(&out.stderr));
    let (out, err) = finish(child);
    assert!(
        out.contains("status=1") && !out.contains("content of"),
        "denied:\n{out}"
    );
    assert!(err.contains("Operation not permitted"), "EPERM:\n{err}");

    // Expired: nobody answers; the open fails once the timeout passes.
    let path = format!("{held}/expired.txt");
    let started = Instant::now();
    let child = read_in_session(&d, &path);
    request_for(&d, &path);
    let (out, err) = finish(child);
    assert!(
        out.contains("status=1") && !out.contains("content of"),
        "expired:\n{out}\n{err}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(TIMEOUT_SECS - 1),
        "held until the timeout: {:?}",
        started.elapsed()
    );
}

/// A daemon that stops denies every open it still holds (closing the fanotify group would
/// allow them): the waiting program fails with EPERM instead of reading the file.
#[test]
fn stopping_the_daemon_denies_the_held_opens() {
    let Some(dir) = setup("stopping_the_daemon_denies_the_held_opens") else {
        return;
    };
    let (mut d, held) = start(dir.path());
    let path = format!("{held}/approved.txt");
    let child = read_in_session(&d, &path);
    request_for(&d, &path);
    d.stop();
    let (out, err) = finish(child);
    assert!(
        !out.contains("content of") && err.contains("Operation not permitted"),
        "the held open is denied when the daemon stops:\n{out}\n{err}\nlog:\n{}",
        d.log_text()
    );
    assert!(
        d.log_text().contains("held open(s) denied"),
        "log:\n{}",
        d.log_text()
    );
}

/// A new name for a held file, made after the rules loaded and outside the rule's pattern
/// (a hard link, as an agent would make to dodge a path rule), is held all the same: the
/// hold is on the file, not on its name.
#[test]
fn a_held_file_is_held_under_a_name_made_later() {
    let Some(dir) = setup("a_held_file_is_held_under_a_name_made_later") else {
        return;
    };
    let (d, held) = start(dir.path());
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).expect("mkdir");
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o755)).expect("chmod");
    let alias = elsewhere.join("alias.txt");
    fs::hard_link(format!("{held}/denied.txt"), &alias).expect("link");
    let alias = alias.display().to_string();
    let child = read_in_session(&d, &alias);
    let request = request_for(&d, &dir.path().display().to_string());
    let out = carapace(&d, &["deny", request["id"].as_str().expect("id")], &[]);
    assert!(out.status.success(), "deny: {}", text(&out.stderr));
    let (out, err) = finish(child);
    assert!(
        out.contains("status=1") && !out.contains("content of"),
        "the link's open was held and denied:\n{out}\n{err}"
    );
    assert!(err.contains("Operation not permitted"), "EPERM:\n{err}");
}
