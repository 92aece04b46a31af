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

mod audit;
mod console;
mod dns;
mod front_doors;
mod gateway;
mod gateway_openai;
mod guardrail;
mod hold;
mod landlock;
mod limits;
mod llm_review;
mod mcp;
mod profiles;
mod record;
mod rules_allow;
mod sessions;
mod shadow;
mod terminal;

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

/// The ids of the daemon's `carapace run` sessions, as `carapace session list --json` says.
fn run_session_ids(d: &Daemon) -> Vec<String> {
    run_session_ids_at(&d.socket).unwrap_or_else(|e| panic!("{e}; log:\n{}", d.log_text()))
}

fn run_session_ids_at(socket: &Path) -> Result<Vec<String>, String> {
    let out = cli(
        Path::new(CARAPACE),
        socket,
        ["session", "list", "--json"],
        &[],
    );
    if !out.status.success() {
        return Err(format!("session list failed: {}", text(&out.stderr)));
    }
    let list: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("session list printed no JSON ({e}): {}", text(&out.stdout)))?;
    Ok(list
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["kind"] == "run")
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect())
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
        // Landlock stands in where the kernel has it (see landlock.rs).
        let fallback = if carapace::sandbox::landlock::sys::abi().is_some() {
            "Landlock enforces the file rules it can express instead"
        } else {
            "running with Layers 0/1 only"
        };
        assert!(stderr.contains(fallback), "stderr:\n{stderr}");
    }
    let out = carapace(&d, &["run", "--", "sh", "-c", "kill -9 $$"], &[]);
    assert_eq!(out.status.code(), Some(137), "killed by SIGKILL is 128+9");
    // Both sessions ended.
    assert!(
        run_session_ids(&d).is_empty(),
        "sessions left: {:?}",
        run_session_ids(&d)
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
        !data_dir.join("carapace.db").exists(),
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
        if let Some(id) = run_session_ids_at(&socket)
            .ok()
            .and_then(|ids| ids.into_iter().next())
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
        run_session_ids(&second),
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
        run_session_ids(&second).is_empty(),
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
        while !done(run_session_ids(&d).len()) {
            assert!(Instant::now() < deadline, "{what}; log:\n{}", d.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for("no session appeared", &|n| n == 1);
    // SIGKILL: carapace cannot end its session; the command finishes on its own.
    run.kill()
        .unwrap_or_else(|e| panic!("cannot kill carapace run: {e}"));
    let _ = run.wait();
    // The reaper logs after the session is gone from the list: wait for both.
    wait_for("the empty session was not reaped", &|n| {
        n == 0 && d.log_text().contains("processes are all gone")
    });
}

// ---- carapace rules ---------------------------------------------------------------------

const BROKEN_RULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/broken-rules");
const DEMO_RULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../rules/examples/demo.yaml");

/// Runs `carapace rules ARGS` with a private data directory (never the machine's rule file)
/// and a socket nobody serves: only `reload` may talk to a daemon.
fn rules_cli(dir: &Path, args: &[&str]) -> std::process::Output {
    let data_dir = dir.to_string_lossy().into_owned();
    let mut all = vec!["rules"];
    all.extend_from_slice(args);
    cli(
        Path::new(CARAPACE),
        &dir.join("absent.sock"),
        &all,
        &[("CARAPACE_DATA_DIR", data_dir.as_str())],
    )
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}):\n{}\nstderr:\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

#[test]
fn rules_check_reports_each_broken_file_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
    let mut files: Vec<_> = fs::read_dir(BROKEN_RULES)
        .unwrap_or_else(|e| panic!("cannot list {BROKEN_RULES}: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "only {} broken rule files", files.len());
    for file in &files {
        let name = file.display().to_string();
        let source = fs::read_to_string(file).unwrap_or_else(|e| panic!("cannot read {name}: {e}"));
        let (position, expected) = source
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .and_then(|l| l.split_once(' '))
            .unwrap_or_else(|| panic!("{name}: first line must be `# expect: LINE:COL TEXT`"));
        let out = rules_cli(dir.path(), &["check", &name]);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{name} passed the check:\n{stdout}"
        );
        let lines: Vec<&str> = stdout.lines().collect();
        let first = lines
            .iter()
            .position(|l| l.contains(": error: "))
            .unwrap_or_else(|| panic!("{name}: no error reported:\n{stdout}"));
        assert!(
            lines[first].starts_with(&format!("{name}:{position}: error: ")),
            "{name}: the first error must be at {position}:\n{stdout}"
        );
        let diagnostic = lines[first..lines.len().min(first + 2)].join("\n");
        assert!(
            diagnostic.contains(expected),
            "{name}: the first error must say `{expected}`:\n{stdout}"
        );
        assert!(
            diagnostic.contains("\n  hint: "),
            "{name}: no hint:\n{stdout}"
        );
    }
}

#[test]
fn rules_check_accepts_valid_files_and_defaults_to_the_builtin_packs() {
    let locked = locked_pack();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
    let out = rules_cli(dir.path(), &["check", DEMO_RULES]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!(
            "ok, {} rules ({} from built-in packs), {} enforced in the kernel",
            3 + locked.rules,
            locked.rules,
            3 + locked.kernel
        )),
        "{stdout}"
    );
    // No FILE and no $CARAPACE_DATA_DIR/rules.yaml: the built-in packs, as the daemon does.
    let out = rules_cli(dir.path(), &["check"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("built-in packs: ok, "), "{stdout}");
    // With one: that file.
    fs::write(
        dir.path().join("rules.yaml"),
        "version: 1\nbuiltin: none\nrules:\n  - block: \"/srv/x\"\n    mode: often\n",
    )
    .unwrap_or_else(|e| panic!("cannot write rules.yaml: {e}"));
    let out = rules_cli(dir.path(), &["check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(has_file_line_column(&stdout, "rules.yaml"), "{stdout}");
}

#[test]
fn rules_list_and_explain_json_on_the_demo() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
    let out = rules_cli(dir.path(), &["list", "--rules", DEMO_RULES, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let all = json(&out);
    let all = all
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {all}"));
    // The locked self-protection pack is in force despite the demo's `builtin: none`.
    let locked: Vec<&serde_json::Value> = all
        .iter()
        .filter(|r| r["source"] == "builtin:self-protection")
        .collect();
    assert!(
        !locked.is_empty() && locked.iter().all(|r| r["locked"] == true),
        "{all:?}"
    );
    let list: Vec<serde_json::Value> = all
        .iter()
        .filter(|r| r["source"] != "builtin:self-protection")
        .cloned()
        .collect();
    let ids: Vec<&str> = list.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(
        ids,
        [
            "demo-protect-ssh",
            "demo-protect-aws",
            "demo-block-exfil-net"
        ]
    );
    assert_eq!(list[0]["mode"], "block");
    assert_eq!(list[0]["locked"], false);
    assert_eq!(
        list[0]["layers"],
        serde_json::json!(["kernel", "userspace"])
    );
    assert!(
        list[0]["source"]
            .as_str()
            .is_some_and(|s| s.ends_with("demo.yaml")),
        "{list:?}"
    );

    let out = rules_cli(dir.path(), &["explain", "--rules", DEMO_RULES, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let explained: Vec<serde_json::Value> = json(&out)
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["source"] != "builtin:self-protection")
        .cloned()
        .collect();
    let explained = serde_json::Value::Array(explained);
    let ssh = &explained[0]["kernel"];
    assert_eq!(ssh["matches"][0]["kind"], "directory prefix", "{explained}");
    assert_eq!(ssh["matches"][0]["value"], "/home/agent/.ssh/");
    assert_eq!(
        ssh["ops"],
        serde_json::json!(["read", "write", "execute", "delete", "network"])
    );
    let net = &explained[2]["kernel"];
    assert_eq!(net["matches"][0]["kind"], "address block", "{explained}");
    assert_eq!(net["matches"][0]["value"], "127.66.0.0/16");
    assert_eq!(net["ops"], serde_json::json!(["network"]));
    assert_eq!(explained[2]["userspace_reason"], serde_json::Value::Null);

    // One rule, as text; and a userspace-only built-in one says why.
    let out = rules_cli(
        dir.path(),
        &["explain", "demo-protect-aws", "--rules", DEMO_RULES],
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("kernel matches directory prefix `/home/agent/.aws/`"),
        "{stdout}"
    );
    let out = rules_cli(
        dir.path(),
        &["explain", "no-such-rule", "--rules", DEMO_RULES],
    );
    assert_eq!(out.status.code(), Some(1));
    let out = rules_cli(dir.path(), &["explain", "--json"]);
    let all = json(&out);
    let userspace: Vec<&serde_json::Value> = all
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {all}"))
        .iter()
        .filter(|r| r["kernel"].is_null())
        .collect();
    assert!(
        userspace.iter().all(|r| r["userspace_reason"]
            .as_str()
            .is_some_and(|s| !s.is_empty())),
        "every userspace-only rule must say why: {all}"
    );
}

#[test]
fn rules_test_reports_matching_rules_and_exits_2_on_block() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot create a temp dir: {e}"));
    let run = |target: &str, op: &str| {
        rules_cli(
            dir.path(),
            &["test", "--rules", DEMO_RULES, target, "--op", op],
        )
    };
    let out = run("/home/agent/.ssh/id_ed25519", "read");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("demo-protect-ssh"), "{stdout}");
    assert!(stdout.contains("decision: block"), "{stdout}");
    let out = run("/home/agent/notes.txt", "write");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("decision: allow"));
    let out = run("127.66.1.2:443", "network");
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("demo-block-exfil-net"), "{stdout}");
    assert_eq!(run("127.67.0.1:443", "network").status.code(), Some(0));
    assert_eq!(run("127.66.0.1", "network").status.code(), Some(2));
    let out = run("relative/path", "read");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("not an absolute path"));
}

/// Writes `content` to `path` through a rename, as editors do (never seen half-written).
fn replace_file(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, content).unwrap_or_else(|e| panic!("cannot write {}: {e}", tmp.display()));
    fs::rename(&tmp, path).unwrap_or_else(|e| panic!("cannot rename to {}: {e}", path.display()));
}

/// Rewrites `path` in place with `content` (padded to the same size) and its old mtime, so
/// that the daemon's file watcher sees no change: only SIGHUP or the RPC can reload it.
fn replace_unnoticed(path: &Path, content: &str) {
    let old = fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let size = usize::try_from(old.len()).unwrap_or(usize::MAX);
    assert!(
        content.len() < size,
        "the new content must be shorter than the old"
    );
    let padded = format!("{content}#{}\n", "-".repeat(size - content.len() - 2));
    let modified = old
        .modified()
        .unwrap_or_else(|e| panic!("no mtime for {}: {e}", path.display()));
    fs::write(path, &padded).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    let file = fs::File::options()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    file.set_modified(modified)
        .unwrap_or_else(|e| panic!("cannot restore the mtime of {}: {e}", path.display()));
}

/// The locked self-protection pack, in force in every rule file (even `builtin: none`).
struct Locked {
    rules: usize,
    /// Of them, enforced in the kernel.
    kernel: usize,
}

fn locked_pack() -> Locked {
    // The pack on its own: its text, without the default packs a file gets.
    let text = carapace_policy::rules::builtin::text("self-protection")
        .unwrap_or_default()
        .replacen("version: 1\n", "version: 1\nbuiltin: none\n", 1);
    let set = carapace_policy::rules::RuleSet::parse_with(
        "builtin:self-protection",
        &text,
        &carapace::policy_host::options(),
    )
    .unwrap_or_else(|e| panic!("the self-protection pack compiles: {e}"));
    Locked {
        rules: set.rules().len(),
        kernel: set
            .rules()
            .iter()
            .filter(|r| r.kernel_index.is_some())
            .count(),
    }
}

/// How many locked rules daemon `d` added for its own files (`own_files`): they count among
/// the rules in force beside the locked pack's.
fn own_rules(d: &Daemon) -> usize {
    let log = d.log_text();
    log.lines()
        .find(|l| l.contains("are kept from sessions by locked rules"))
        .and_then(|l| l.split("own_rules=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the daemon did not say how many own-files rules; log:\n{log}"))
}

/// A valid rule file with `n` path rules and, of the built-in packs, only the locked one.
fn rule_file(n: usize) -> String {
    let mut s = String::from("version: 1\nbuiltin: none\nrules:\n");
    for i in 0..n {
        use std::fmt::Write as _;
        let _ = write!(s, "  - id: r{i}\n    block: \"/srv/reload-test/{i}/**\"\n");
    }
    s
}

/// `rules: N (` from `carapace status`.
fn status_rules(d: &Daemon) -> Option<usize> {
    let out = carapace(d, &["status"], &[]);
    text(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("rules: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
}

fn wait_for(d: &Daemon, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "{what}; log:\n{}", d.log_text());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn daemon_with_rules(dir: &Path, rules: &Path) -> Daemon {
    let rules = rules.to_string_lossy().into_owned();
    Daemon::start(Path::new(CARAPACED), dir, &["--rules", rules.as_str()])
}

#[test]
fn the_daemon_reloads_a_changed_rule_file_and_keeps_its_rules_when_broken() {
    let locked = locked_pack();
    let Some(dir) = setup("the_daemon_reloads_a_changed_rule_file_and_keeps_its_rules_when_broken")
    else {
        return;
    };
    let rules = dir.path().join("rules.yaml");
    replace_file(&rules, &rule_file(2));
    let d = daemon_with_rules(dir.path(), &rules);
    let own = own_rules(&d);
    let locked = Locked {
        rules: locked.rules + own,
        kernel: locked.kernel + own,
    };
    assert_eq!(
        status_rules(&d),
        Some(2 + locked.rules),
        "log:\n{}",
        d.log_text()
    );

    replace_file(&rules, &rule_file(5));
    wait_for(&d, "the changed file was not picked up", || {
        status_rules(&d) == Some(5 + locked.rules)
    });
    assert!(d
        .log_text()
        .contains("the rule file changed: rules reloaded"));

    replace_file(
        &rules,
        "version: 1\nbuiltin: none\nrules:\n  - block: \"/srv/[x\"\n",
    );
    wait_for(&d, "the broken file was not reported", || {
        d.log_text().contains("the previous rules stay in force")
    });
    let log = d.log_text();
    assert!(has_file_line_column(&log, "rules.yaml"), "log:\n{log}");
    assert_eq!(
        status_rules(&d),
        Some(5 + locked.rules),
        "the old rules must stay; log:\n{log}"
    );
    // Reported once, not every second.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        d.log_text()
            .matches("the previous rules stay in force")
            .count(),
        1,
        "log:\n{}",
        d.log_text()
    );
}

#[test]
fn sighup_reloads_the_rules() {
    let locked = locked_pack();
    let Some(dir) = setup("sighup_reloads_the_rules") else {
        return;
    };
    let rules = dir.path().join("rules.yaml");
    replace_file(&rules, &rule_file(4));
    let d = daemon_with_rules(dir.path(), &rules);
    let own = own_rules(&d);
    let locked = Locked {
        rules: locked.rules + own,
        kernel: locked.kernel + own,
    };
    assert_eq!(
        status_rules(&d),
        Some(4 + locked.rules),
        "log:\n{}",
        d.log_text()
    );
    replace_unnoticed(&rules, &rule_file(1));
    // The watcher must not have noticed: the change is SIGHUP's to make.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        status_rules(&d),
        Some(4 + locked.rules),
        "log:\n{}",
        d.log_text()
    );
    let pid = d
        .pid()
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or_else(|| panic!("the daemon has no pid"));
    // SAFETY: kill(2) on the pid of the daemon this test started and has not reaped.
    unsafe {
        libc::kill(pid, libc::SIGHUP);
    }
    wait_for(&d, "SIGHUP did not reload", || {
        status_rules(&d) == Some(1 + locked.rules)
    });
    assert!(d.log_text().contains("SIGHUP: rules reloaded"));
    assert!(
        text(&carapace(&d, &["status"], &[]).stdout).contains("reloaded 1 times"),
        "log:\n{}",
        d.log_text()
    );
}

#[test]
fn rules_reload_swaps_valid_rules_and_returns_the_errors_of_broken_ones() {
    let locked = locked_pack();
    let Some(dir) = setup("rules_reload_swaps_valid_rules_and_returns_the_errors_of_broken_ones")
    else {
        return;
    };
    let rules = dir.path().join("rules.yaml");
    replace_file(&rules, &rule_file(4));
    let d = daemon_with_rules(dir.path(), &rules);
    let own = own_rules(&d);
    let locked = Locked {
        rules: locked.rules + own,
        kernel: locked.kernel + own,
    };
    replace_unnoticed(&rules, &rule_file(3));
    let out = carapace(&d, &["rules", "reload"], &[]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!(
            "rules reloaded from {}: {} rules, 0 enforced in the kernel",
            rules.display(),
            3 + locked.rules
        )) || stdout.contains(&format!(
            ": {} rules, {} enforced in the kernel",
            3 + locked.rules,
            3 + locked.kernel
        )),
        "{stdout}"
    );
    assert_eq!(status_rules(&d), Some(3 + locked.rules));

    replace_file(
        &rules,
        "version: 1\nbuiltin: none\nrules:\n  - block: \"/srv/x\"\n    mode: often\n",
    );
    let out = carapace(&d, &["rules", "reload"], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:5:11: error: unknown mode `often`",
            rules.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "keeps its previous rules ({} rules",
            3 + locked.rules
        )),
        "{stderr}"
    );
    assert_eq!(status_rules(&d), Some(3 + locked.rules));
}

/// `carapace rules …` run by an agent (inside `carapace run`) against `d`.
fn rules_as_agent(d: &Daemon, args: &[&str]) -> std::process::Output {
    let socket = d.socket.to_string_lossy().into_owned();
    let mut words = vec!["run", "--", CARAPACE, "--socket", socket.as_str(), "rules"];
    words.extend_from_slice(args);
    carapace(d, &words, &[])
}

#[test]
fn an_agent_cannot_turn_a_denial_into_a_rule() {
    let Some(dir) = setup("an_agent_cannot_turn_a_denial_into_a_rule") else {
        return;
    };
    let d = daemon(dir.path());
    let out = rules_as_agent(&d, &["allow", "--from-denial", "1", "--write", "--confirm"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("processes inside a Carapace session cannot change the rules"),
        "stderr:\n{stderr}"
    );
    assert!(d
        .log_text()
        .contains("an agent asked to change the rules; refused"));
    assert_eq!(d.log_text().matches("rules reloaded").count(), 0);
}

#[test]
fn an_agent_cannot_reload_the_rules() {
    let Some(dir) = setup("an_agent_cannot_reload_the_rules") else {
        return;
    };
    let d = daemon(dir.path());
    let out = rules_as_agent(&d, &["reload"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains("processes inside a Carapace session cannot reload the rules"),
        "stderr:\n{stderr}"
    );
    assert!(d
        .log_text()
        .contains("an agent asked to reload the rules; refused"));
    assert_eq!(
        d.log_text().matches("rules reloaded").count(),
        0,
        "log:\n{}",
        d.log_text()
    );
}
