//! The programs are attached only while a session runs: with none, no process on the machine
//! pays for a trampoline on its opens, and the first session attaches them again before its
//! process enters the cgroup.

use std::{
    fs,
    path::Path,
    process::Stdio,
    thread,
    time::{Duration, Instant},
};

use super::{agent, guard, py_errno, session_command, stderr, stdout};

const LINKS: &str = "/sys/fs/bpf/carapace/links";

/// BPF trampolines in the kernel: one per hook with programs attached (this VM runs no other
/// BPF). A detached hook's trampoline goes after an RCU grace period, seconds under TCG.
fn trampolines() -> usize {
    fs::read_to_string("/proc/kallsyms")
        .expect("read /proc/kallsyms")
        .lines()
        // The JIT's images carry the `[bpf]` module tag; the kernel's own functions named
        // bpf_trampoline_* do not.
        .filter(|l| l.contains(" bpf_trampoline_") && l.ends_with("[bpf]"))
        .count()
}

fn pinned_links() -> usize {
    fs::read_dir(LINKS).map_or(0, Iterator::count)
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: not after {timeout:?} (links pinned: {}, trampolines: {})",
            pinned_links(),
            trampolines()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// A read the test rules block, from a new session: EACCES from `cat` and from Python.
fn secret_read_denied(which: &str) {
    let out = agent("cat /srv/secret/a.txt");
    assert!(
        stderr(&out).contains("Permission denied"),
        "{which}: cat read the file: {}",
        stdout(&out)
    );
    let out = agent(&py_errno("open(\"/srv/secret/a.txt\").read()"));
    assert_eq!(stdout(&out).trim(), "13", "{which}: python open()");
}

fn detached() {
    // Earlier tests' sessions end as their `carapace run` exits.
    wait_for(
        "links unpinned with no session",
        Duration::from_secs(30),
        || pinned_links() == 0,
    );
    wait_for(
        "the kernel dropped the trampolines",
        Duration::from_secs(90),
        || trampolines() == 0,
    );
}

#[test]
fn programs_are_attached_only_while_a_session_runs() {
    let _g = guard();
    detached();

    let stop = Path::new("/tmp/attach-test-stop");
    let _ = fs::remove_file(stop);
    let wait = format!("until [ -e {} ]; do sleep 0.1; done", stop.display());
    let mut session = session_command(&["bash", "-c", &wait], Some(1000))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a session");
    wait_for(
        "links pinned for the session",
        Duration::from_secs(30),
        || Path::new(LINKS).join("file_open").exists(),
    );
    assert!(
        trampolines() > 0,
        "a running session has its hooks attached"
    );
    // A second session while the first runs is enforced too.
    secret_read_denied("a second session");
    assert!(
        Path::new(LINKS).join("file_open").exists(),
        "the second session's end leaves the first one's programs attached"
    );

    // Ending the last session detaches everything.
    fs::write(stop, "").expect("create the stop file");
    assert!(session.wait().expect("the session ends").success());
    detached();

    // The next session attaches them again before its process runs.
    secret_read_denied("the first session after a detach");
}

#[test]
fn an_empty_session_cgroup_no_session_owns_is_removed_at_start() {
    let _g = guard();
    detached();
    // What a daemon killed while creating a session leaves: a cgroup with no record. Kept,
    // it would keep the programs attached for good.
    let orphan = Path::new("/sys/fs/cgroup/carapace/s-0-orphan");
    fs::create_dir(orphan).expect("create an orphan session cgroup");
    super::restart_daemon(false);
    assert!(!orphan.exists(), "the orphan cgroup is removed");
    detached();
    secret_read_denied("the first session after the restart");
}
