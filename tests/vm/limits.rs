//! Session resource limits in the VM, whose cgroup v2 has the memory and pids controllers:
//! `carapace run --memory` gets a process that allocates past it OOM-killed, `--pids` makes
//! fork fail, each with a line on carapace's stderr and a `session-limit` ledger record; the
//! same commands without the limits succeed.
use std::process::{Command, Output};

use super::{guard, stderr, stdout};

/// Runs `python3 -c CODE` as an agent session of uid 1000 with extra `carapace run` flags.
fn python(flags: &[&str], code: &str) -> Output {
    let mut cmd = Command::new("carapace");
    cmd.arg("run")
        .args(flags)
        .args(["--", "python3", "-c", code])
        .current_dir("/tmp")
        .env("SUDO_UID", "1000")
        .env("SUDO_GID", "1000");
    let out = cmd.output().expect("run carapace");
    eprintln!(
        "carapace run {flags:?} → {:?}\nstdout: {}\nstderr: {}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    out
}

/// The session id in carapace's `carapace: session ID: …` limit line.
fn session_in(line_start: &str, err: &str) -> String {
    let line = err
        .lines()
        .find(|l| l.starts_with("carapace: session ") && l.contains(line_start))
        .unwrap_or_else(|| panic!("no `{line_start}` line on carapace's stderr:\n{err}"));
    line.trim_start_matches("carapace: session ")
        .split(':')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The ledger's `session-limit` records of session `id`.
fn limit_records(id: &str) -> Vec<serde_json::Value> {
    let out = Command::new("carapace")
        .args(["audit", "tail", "--json", "--session", id, "-n", "100"])
        .output()
        .expect("run carapace audit");
    assert!(out.status.success(), "audit tail: {}", stderr(&out));
    stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["kind"] == "session-limit")
        .collect()
}

/// Writes 200 MiB, then says so.
const ALLOCATE: &str = "b = b'x' * (200 << 20)\nprint('allocated', len(b) >> 20)";

#[test]
fn a_process_past_the_memory_limit_is_oom_killed_and_recorded() {
    let _g = guard();
    let out = python(&["--memory", "64M"], ALLOCATE);
    assert!(
        !stdout(&out).contains("allocated"),
        "python allocated past --memory 64M"
    );
    assert_eq!(
        out.status.code(),
        Some(128 + 9),
        "python must die of SIGKILL"
    );
    let err = stderr(&out);
    assert!(
        err.contains(": killed: memory limit 64 MiB reached (oom_kill "),
        "stderr:\n{err}"
    );
    let id = session_in("memory limit", &err);
    let records = limit_records(&id);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["risk"][0], "memory");
    assert!(
        records[0]["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("killed: memory limit 64 MiB reached (oom_kill ")),
        "{}",
        records[0]
    );

    let out = python(&[], ALLOCATE);
    assert!(out.status.success());
    assert_eq!(stdout(&out).trim(), "allocated 200");
    assert!(!stderr(&out).contains("memory limit"));
}

/// Forks up to 40 children that sleep a little; says how far it got.
const FORK_LOOP: &str = "import os, time
kids = 0
try:
    for _ in range(40):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        kids += 1
    print('forked', kids)
except OSError as e:
    print('refused after', kids, 'errno', e.errno)
";

#[test]
fn a_fork_loop_hits_the_pids_limit_and_is_recorded() {
    let _g = guard();
    let out = python(&["--pids", "20"], FORK_LOOP);
    let printed = stdout(&out);
    assert!(
        printed.starts_with("refused after ") && printed.trim_end().ends_with("errno 11"),
        "fork must fail with EAGAIN under --pids 20: {printed}"
    );
    let err = stderr(&out);
    assert!(
        err.contains(": fork refused: pids limit 20 reached (pids.events max "),
        "stderr:\n{err}"
    );
    let id = session_in("pids limit", &err);
    let records = limit_records(&id);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(records[0]["risk"][0], "pids");

    let out = python(&[], FORK_LOOP);
    assert_eq!(stdout(&out).trim(), "forked 40");
    assert!(!stderr(&out).contains("pids limit"));
}
