//! Host-level integration tests: a real `carapaced` on a private socket and data directory,
//! driven through the real `carapace` CLI.
//!
//! They need root (the daemon creates cgroups below `<cgroup2>/carapace` and moves processes)
//! and are skipped with a note otherwise. On the project's machines the kernel refuses BPF LSM
//! programs, so the daemon runs with the kernel layer unavailable; tests that depend on that
//! say so. The binaries are this package's `carapaced-under-test` / `carapace-under-test`,
//! which call the same entry points as the shipped ones and are built by `cargo test`.
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use carapace_tests::{cli, cli_command, has_file_line_column, is_root, text, Daemon};

const CARAPACED: &str = env!("CARGO_BIN_EXE_carapaced-under-test");
const CARAPACE: &str = env!("CARGO_BIN_EXE_carapace-under-test");

const UNAVAILABLE_LOG: &str = "kernel layer unavailable:";
const UNAVAILABLE_WARNING: &str = "carapace: warning: kernel layer unavailable (";

/// Skips (returns `None`) unless root; otherwise a fresh temporary directory.
fn setup(test: &str) -> Option<tempfile::TempDir> {
    if !is_root() {
        eprintln!("{test}: skipped, needs root (creates cgroups)");
        return None;
    }
    Some(tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}")))
}

fn daemon(dir: &Path) -> Daemon {
    Daemon::start(Path::new(CARAPACED), dir, &[])
}

fn carapace(d: &Daemon, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    cli(Path::new(CARAPACE), &d.socket, args, env)
}

fn kernel_enforcing(d: &Daemon) -> bool {
    d.log_text().contains("kernel layer enforcing")
}

fn sessions_json(d: &Daemon) -> serde_like::Sessions {
    let path = d.data_dir.join("sessions.json");
    let raw =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_like::parse(&raw)
}

/// Just enough of sessions.json for assertions, without a JSON dependency: the ids.
mod serde_like {
    pub struct Sessions {
        pub ids: Vec<String>,
    }

    pub fn parse(raw: &str) -> Sessions {
        let ids = raw
            .lines()
            .filter_map(|l| l.trim().strip_prefix("\"id\": \""))
            .filter_map(|rest| rest.split('"').next())
            .map(str::to_owned)
            .collect();
        Sessions { ids }
    }
}

#[test]
fn daemon_starts_without_kernel_layer_and_reports_status() {
    let Some(dir) = setup("daemon_starts_without_kernel_layer_and_reports_status") else {
        return;
    };
    let d = daemon(dir.path());
    let log = d.log_text();
    if !kernel_enforcing(&d) {
        assert_eq!(
            log.matches(UNAVAILABLE_LOG).count(),
            1,
            "the kernel-unavailable line must appear exactly once; log:\n{log}"
        );
        assert!(log.contains("; Layers 0/1 only"), "log:\n{log}");
    }
    let socket_mode = fs::metadata(&d.socket).map(|m| {
        use std::os::unix::fs::PermissionsExt as _;
        m.permissions().mode() & 0o777
    });
    assert_eq!(
        socket_mode.ok(),
        Some(0o666),
        "the socket must be connectable by every user"
    );

    let out = carapace(&d, &["status"], &[]);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "carapace status failed: {}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains(concat!("carapaced ", env!("CARGO_PKG_VERSION"))),
        "{stdout}"
    );
    assert!(stdout.contains("kernel layer: "), "{stdout}");
    assert!(stdout.contains("rules: "), "{stdout}");
    assert!(stdout.contains("sessions: 0"), "{stdout}");
}

#[test]
fn run_exits_with_the_commands_status_and_warns_without_kernel() {
    let Some(dir) = setup("run_exits_with_the_commands_status_and_warns_without_kernel") else {
        return;
    };
    let d = daemon(dir.path());
    let out = carapace(&d, &["run", "--", "sh", "-c", "exit 7"], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "stderr:\n{stderr}");
    if !kernel_enforcing(&d) {
        assert_eq!(
            stderr.matches(UNAVAILABLE_WARNING).count(),
            1,
            "stderr:\n{stderr}"
        );
        assert!(
            stderr.contains("running with Layers 0/1 only"),
            "stderr:\n{stderr}"
        );
    }
    let out = carapace(&d, &["run", "--", "sh", "-c", "kill -9 $$"], &[]);
    assert_eq!(out.status.code(), Some(137), "killed by SIGKILL is 128+9");
    // Both sessions ended.
    assert!(
        sessions_json(&d).ids.is_empty(),
        "sessions left: {:?}",
        sessions_json(&d).ids
    );
}

#[test]
fn child_runs_in_the_session_cgroup_without_privileges() {
    let Some(dir) = setup("child_runs_in_the_session_cgroup_without_privileges") else {
        return;
    };
    let d = daemon(dir.path());
    let script = "cat /proc/self/cgroup; cat /proc/self/status";
    let out = carapace(
        &d,
        &["run", "--", "sh", "-c", script],
        &[("SUDO_UID", "1000"), ("SUDO_GID", "1000")],
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "run failed; stderr:\n{stderr}\nstdout:\n{stdout}"
    );
    let cgroup = stdout
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_else(|| panic!("no cgroup v2 line in:\n{stdout}"));
    let session = cgroup
        .strip_prefix("/carapace/")
        .unwrap_or_else(|| panic!("child not inside <cgroup2>/carapace/: {cgroup}"));
    assert!(
        session.starts_with("s-") && !session.contains('/'),
        "cgroup {cgroup}"
    );
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map_or_else(
                || panic!("no {name} in /proc/self/status:\n{stdout}"),
                |v| v.split_whitespace().collect::<Vec<_>>(),
            )
    };
    assert_eq!(field("NoNewPrivs:"), ["1"]);
    assert_eq!(field("CapEff:"), ["0000000000000000"]);
    assert_eq!(field("CapPrm:"), ["0000000000000000"]);
    assert_eq!(field("CapBnd:"), ["0000000000000000"]);
    assert_eq!(field("CapAmb:"), ["0000000000000000"]);
    assert_eq!(field("Uid:"), ["1000", "1000", "1000", "1000"]);
    assert_eq!(field("Gid:"), ["1000", "1000", "1000", "1000"]);
    // The session cgroup is gone once the run is over.
    let hierarchy = carapace::session::cgroup::Hierarchy::discover()
        .unwrap_or_else(|e| panic!("cannot find the cgroup2 mount: {e}"));
    let session_dir = hierarchy.mount.join("carapace").join(session);
    assert!(
        !session_dir.exists(),
        "{} was not removed",
        session_dir.display()
    );
}

#[test]
fn an_agent_cannot_create_a_session() {
    let Some(dir) = setup("an_agent_cannot_create_a_session") else {
        return;
    };
    let d = daemon(dir.path());
    let socket = d.socket.to_string_lossy().into_owned();
    let out = carapace(
        &d,
        &[
            "run",
            "--",
            CARAPACE,
            "--socket",
            socket.as_str(),
            "run",
            "--",
            "true",
        ],
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the nested run must fail; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("cannot create sessions"),
        "stderr:\n{stderr}"
    );
}

#[test]
fn run_refuses_to_start_without_the_daemon() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
    let socket = dir.path().join("absent.sock");
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let out = cli(
        Path::new(CARAPACE),
        &socket,
        ["run", "--", "sh", "-c", &script],
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("sudo carapaced"),
        "the error must say how to start it:\n{stderr}"
    );
    assert!(!marker.exists(), "the command ran unguarded");
}

#[test]
fn malformed_rules_file_stops_the_daemon_with_file_line_column() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
    let rules = dir.path().join("rules.yaml");
    fs::write(
        &rules,
        "version: 1\nrules:\n  - block: [unclosed\n    mode: sometimes\n",
    )
    .unwrap_or_else(|e| panic!("cannot write {}: {e}", rules.display()));
    let data_dir = dir.path().join("data");
    let mut child = std::process::Command::new(CARAPACED)
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("--socket")
        .arg(dir.path().join("run/carapace.sock"))
        .arg("--rules")
        .arg(&rules)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run carapaced: {e}"));
    // If it accepts the file it serves forever: give it a deadline instead of hanging.
    let deadline = Instant::now() + Duration::from_secs(15);
    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().ok().flatten().is_none() {
        let _ = child.kill();
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("carapaced: {e}"));
    let stderr = text(&out.stderr);
    assert!(
        !out.status.success(),
        "carapaced accepted a broken rule file; stderr:\n{stderr}"
    );
    assert!(
        has_file_line_column(&stderr, "rules.yaml"),
        "diagnostics must name rules.yaml:LINE:COLUMN; stderr:\n{stderr}"
    );
    assert!(
        !dir.path().join("run/carapace.sock").exists(),
        "it must not serve"
    );
    assert!(
        !data_dir.join("sessions.json").exists(),
        "it must not touch its state"
    );
}

#[test]
fn a_restarted_daemon_keeps_a_live_session() {
    let Some(dir) = setup("a_restarted_daemon_keeps_a_live_session") else {
        return;
    };
    let mut first = daemon(dir.path());
    let (data_dir, socket) = (first.data_dir.clone(), first.socket.clone());
    let release = dir.path().join("release");
    let started = dir.path().join("started");
    let script = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.05; done",
        started.display(),
        release.display()
    );
    let run = cli_command(
        Path::new(CARAPACE),
        &socket,
        ["run", "--", "sh", "-c", &script],
        &[],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap_or_else(|e| panic!("cannot start carapace run: {e}"));

    let deadline = Instant::now() + Duration::from_secs(10);
    // Wait for the command itself, not just the session: `carapace run` still talks to the
    // daemon between the two, and a daemon gone then makes it give up (and end the session).
    let id = loop {
        if let Some(id) = fs::read_to_string(data_dir.join("sessions.json"))
            .ok()
            .and_then(|raw| serde_like::parse(&raw).ids.into_iter().next())
            .filter(|_| started.exists())
        {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "no session appeared; log:\n{}",
            first.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    first.stop();

    let second = Daemon::start_with(Path::new(CARAPACED), &data_dir, &socket, &[]);
    assert_eq!(
        sessions_json(&second).ids,
        std::slice::from_ref(&id),
        "log:\n{}",
        second.log_text()
    );
    assert!(
        second.log_text().contains("resumed session"),
        "log:\n{}",
        second.log_text()
    );
    let status = carapace(&second, &["status"], &[]);
    assert!(
        text(&status.stdout).contains(&id),
        "status:\n{}",
        text(&status.stdout)
    );

    fs::write(&release, "").unwrap_or_else(|e| panic!("cannot write {}: {e}", release.display()));
    let out = run
        .wait_with_output()
        .unwrap_or_else(|e| panic!("carapace run: {e}"));
    assert!(out.status.success(), "run failed: {}", text(&out.stderr));
    // The second daemon ended the session it resumed.
    assert!(
        sessions_json(&second).ids.is_empty(),
        "log:\n{}",
        second.log_text()
    );
}

#[test]
fn a_session_left_behind_by_a_killed_run_is_reaped() {
    let Some(dir) = setup("a_session_left_behind_by_a_killed_run_is_reaped") else {
        return;
    };
    let d = daemon(dir.path());
    let mut run = cli_command(
        Path::new(CARAPACE),
        &d.socket,
        ["run", "--", "sh", "-c", "sleep 1"],
        &[],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap_or_else(|e| panic!("cannot start carapace run: {e}"));
    let wait_for = |what: &str, done: &dyn Fn(usize) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(15);
        while !done(sessions_json(&d).ids.len()) {
            assert!(Instant::now() < deadline, "{what}; log:\n{}", d.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for("no session appeared", &|n| n == 1);
    // SIGKILL: carapace cannot end its session; the command finishes on its own.
    run.kill()
        .unwrap_or_else(|e| panic!("cannot kill carapace run: {e}"));
    let _ = run.wait();
    wait_for("the empty session was not reaped", &|n| n == 0);
    assert!(
        d.log_text().contains("processes are all gone"),
        "log:\n{}",
        d.log_text()
    );
}
