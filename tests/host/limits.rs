//! Session limits of `carapace run`: `--timeout` kills every process of the session, and
//! `--network none|loopback` cuts the command off the host's network.
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use carapace_tests::text;

use super::{carapace, daemon, run_session_ids, setup};

#[test]
fn a_timeout_kills_the_whole_session_and_exits_124() {
    let Some(dir) = setup("a_timeout_kills_the_whole_session_and_exits_124") else {
        return;
    };
    let d = daemon(dir.path());
    let marker = dir.path().join("survived");
    // A background process in its own session (setsid) must die too.
    let script = format!(
        "setsid sh -c 'sleep 4; touch {m}' & sleep 30; echo not-killed",
        m = marker.display()
    );
    let started = Instant::now();
    let out = carapace(
        &d,
        &["run", "--timeout", "1s", "--", "sh", "-c", &script],
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "stderr:\n{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        stderr.contains("carapace: the session hit its time limit (1s); killed its"),
        "stderr:\n{stderr}"
    );
    assert!(!text(&out.stdout).contains("not-killed"));
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        !marker.exists(),
        "the setsid'd background process outlived the timeout"
    );
    assert!(run_session_ids(&d).is_empty());
}

/// A python3 one-liner that connects to 127.0.0.1:PORT and prints `connected` or the error.
fn connect_script(port: u16) -> String {
    format!(
        "import socket\ntry:\n  socket.create_connection(('127.0.0.1', {port}), timeout=3)\n  \
         print('connected')\nexcept OSError as e:\n  print('refused', e)\n"
    )
}

#[test]
fn network_none_and_loopback_cut_the_host_network_off() {
    let Some(dir) = setup("network_none_and_loopback_cut_the_host_network_off") else {
        return;
    };
    if !Path::new("/usr/bin/python3").exists() {
        eprintln!("skipped: needs /usr/bin/python3");
        return;
    }
    let d = daemon(dir.path());
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback listener");
    let port = listener.local_addr().expect("local addr").port();
    let host_script = connect_script(port);

    let out = carapace(&d, &["run", "--", "python3", "-c", &host_script], &[]);
    assert!(
        text(&out.stdout).contains("connected"),
        "the host network works without --network; stderr:\n{}",
        text(&out.stderr)
    );
    for mode in ["none", "loopback"] {
        let out = carapace(
            &d,
            &[
                "run",
                "--network",
                mode,
                "--",
                "python3",
                "-c",
                &host_script,
            ],
            &[],
        );
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("refused"),
            "--network {mode} must not reach the host's 127.0.0.1:{port}; stdout:\n{stdout}\nstderr:\n{}",
            text(&out.stderr)
        );
    }
    // Inside `loopback`, the command's own loopback server is reachable; inside `none` not.
    let own =
        "import socket\ns = socket.socket()\ntry:\n  s.bind(('127.0.0.1', 0)); s.listen()\n  \
               socket.create_connection(s.getsockname(), timeout=3)\n  print('own: connected')\n\
               except OSError as e:\n  print('own: refused', e)\n";
    let out = carapace(
        &d,
        &["run", "--network", "loopback", "--", "python3", "-c", own],
        &[],
    );
    assert!(
        text(&out.stdout).contains("own: connected"),
        "{}",
        text(&out.stdout)
    );
    let out = carapace(
        &d,
        &["run", "--network", "none", "--", "python3", "-c", own],
        &[],
    );
    assert!(
        text(&out.stdout).contains("own: refused"),
        "{}",
        text(&out.stdout)
    );
    drop(listener);
}

/// Whether the cgroup v2 hierarchy of this machine offers `controller`.
fn cgroup2_offers(controller: &str) -> bool {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    carapace::session::cgroup::parse_mountinfo(&mountinfo).is_some_and(|h| {
        std::fs::read_to_string(h.mount.join("cgroup.controllers"))
            .is_ok_and(|t| t.split_whitespace().any(|c| c == controller))
    })
}

#[test]
fn memory_and_pids_limits_are_refused_where_the_controllers_are_missing() {
    let Some(dir) = setup("memory_and_pids_limits_are_refused_where_the_controllers_are_missing")
    else {
        return;
    };
    let d = daemon(dir.path());
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    for (flag, value, controller) in [("--memory", "64M", "memory"), ("--pids", "20", "pids")] {
        if cgroup2_offers(controller) {
            eprintln!("skipped {flag}: this machine's cgroup v2 has the {controller} controller");
            continue;
        }
        let out = carapace(&d, &["run", flag, value, "--", "sh", "-c", &touch], &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
        assert!(
            stderr.contains("cannot limit the session's")
                && stderr.contains(&format!("({flag})"))
                && stderr.contains(&format!("has no {controller} controller"))
                && stderr.contains(&format!("Run without {flag}")),
            "the refusal must say what and why; stderr:\n{stderr}"
        );
        assert!(!marker.exists(), "the command ran despite {flag} {value}");
        assert!(
            run_session_ids(&d).is_empty(),
            "a refused session was left behind"
        );
    }
    // Without limits the same command runs.
    let out = carapace(&d, &["run", "--", "sh", "-c", &touch], &[]);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    assert!(marker.exists());
}

#[test]
fn bad_sizes_are_refused_before_any_session() {
    let Some(dir) = setup("bad_sizes_are_refused_before_any_session") else {
        return;
    };
    let d = daemon(dir.path());
    for (flag, value, says) in [
        ("--memory", "lots", "is not a size"),
        ("--memory", "12Q", "unknown unit"),
        ("--pids", "0", "at least 1"),
    ] {
        let out = carapace(&d, &["run", flag, value, "--", "true"], &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "stderr:\n{stderr}");
        assert!(stderr.contains(says), "{flag} {value}: {stderr}");
    }
    assert!(run_session_ids(&d).is_empty());
}

/// The ledger's `session-limit` records (`carapace audit tail --json`).
fn limit_records(d: &carapace_tests::Daemon) -> Vec<serde_json::Value> {
    let data = d.data_dir.to_str().expect("utf-8 data dir");
    let out = carapace(
        d,
        &["audit", "--data-dir", data, "tail", "--json", "-n", "1000"],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["kind"] == "session-limit")
        .collect()
}

#[test]
fn an_expired_timeout_is_in_the_ledger() {
    let Some(dir) = setup("an_expired_timeout_is_in_the_ledger") else {
        return;
    };
    let d = daemon(dir.path());
    let out = carapace(&d, &["run", "--timeout", "1s", "--", "sleep", "30"], &[]);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    let records = limit_records(&d);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["detail"], "killed: time limit 1s reached");
    assert_eq!(records[0]["risk"][0], "time");
    // A run that ends in time leaves no such record.
    let out = carapace(&d, &["run", "--timeout", "30s", "--", "true"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(limit_records(&d).len(), 1);
}

#[test]
fn the_daemon_ends_a_timed_out_session_whose_client_was_killed() {
    let Some(dir) = setup("the_daemon_ends_a_timed_out_session_whose_client_was_killed") else {
        return;
    };
    let d = daemon(dir.path());
    let marker = dir.path().join("outlived");
    let started = dir.path().join("started");
    let script = format!(
        "touch {}; sleep 20; touch {}",
        started.display(),
        marker.display()
    );
    let mut client = carapace_tests::cli_command(
        Path::new(super::CARAPACE),
        &d.socket,
        ["run", "--timeout", "1s", "--", "sh", "-c", &script],
        &[],
    )
    .spawn()
    .expect("start carapace run");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The agent kills its own `carapace run` (same user) before the time is up.
    client.kill().expect("kill carapace run");
    let _ = client.wait();
    let deadline = Instant::now() + Duration::from_secs(25);
    while !run_session_ids(&d).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the session outlived its time limit; log:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The record is written just after the session is gone.
    let mut records = limit_records(&d);
    while records.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        records = limit_records(&d);
    }
    assert_eq!(records.len(), 1, "{records:#?}");
    assert!(
        records[0]["detail"]
            .as_str()
            .is_some_and(|t| t.contains("carapaced killed it")),
        "{}",
        records[0]
    );
    std::thread::sleep(Duration::from_secs(9));
    assert!(!marker.exists(), "the agent outlived the session");
}
