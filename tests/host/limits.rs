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
