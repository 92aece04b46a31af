//! Self-protection (issue 9): what a session may never do, whatever its privileges and
//! whatever the rule file says (tests/fixtures/kernel-rules.yaml has `builtin: none`).
//!
//! An agent normally runs without capabilities, so most of these would already fail by DAC
//! or capability checks. To show that the *kernel hooks* answer, the attacks run as root
//! with every capability: a root Python process moves itself into a live session's cgroup
//! from outside (nothing stops that) and then attacks; the same script outside the session
//! must not be refused by Carapace.

use std::{
    collections::BTreeMap,
    fs,
    io::Read as _,
    path::PathBuf,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use super::{daemon_pids, guard, session_command};

const EACCES: &str = "13";
const SCRIPT: &str = include_str!("self_protection.py");

/// A session held open by `carapace run -- sleep N` (uid 1000), with its cgroup directory.
struct HeldSession {
    run: Child,
    sleeper: i32,
    cgroup: PathBuf,
}

impl HeldSession {
    fn start(marker: u32) -> Self {
        let run = session_command(&["sleep", &marker.to_string()], Some(1000))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start carapace run");
        let deadline = Instant::now() + Duration::from_secs(30);
        let sleeper = loop {
            if let Some(pid) = pid_with_cmdline(&["sleep", &marker.to_string()]) {
                break pid;
            }
            assert!(
                Instant::now() < deadline,
                "the session's sleep never started"
            );
            thread::sleep(Duration::from_millis(50));
        };
        let cgroup = cgroup_dir(sleeper);
        assert!(
            cgroup.to_string_lossy().contains("/carapace/"),
            "sleep runs in a session cgroup: {}",
            cgroup.display()
        );
        Self {
            run,
            sleeper,
            cgroup,
        }
    }

    /// Ends the session; returns what `carapace run` printed on stderr.
    fn finish(mut self) -> String {
        // Denials reach `carapace run` through the daemon's ring buffer, a moment later.
        thread::sleep(Duration::from_secs(2));
        // SAFETY: a signal to a pid this test found; no memory is involved.
        unsafe { libc::kill(self.sleeper, libc::SIGTERM) };
        let mut err = String::new();
        if let Some(mut stderr) = self.run.stderr.take() {
            let _ = stderr.read_to_string(&mut err);
        }
        let _ = self.run.wait();
        eprintln!("carapace run stderr:\n{err}");
        err
    }
}

/// The pid of a process whose argv is exactly `argv`.
fn pid_with_cmdline(argv: &[&str]) -> Option<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .find(|pid| fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
}

/// The cgroup v2 directory of `pid`.
fn cgroup_dir(pid: i32) -> PathBuf {
    let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("read /proc/PID/cgroup");
    let rel = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("a cgroup v2 line");
    PathBuf::from(format!("/sys/fs/cgroup{rel}"))
}

fn mounted(dir: &str) -> bool {
    fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|m| m.lines().any(|l| l.split(' ').nth(4) == Some(dir)))
}

/// Mount points and files the attacks use, made fresh by root outside any session.
fn prepare() {
    for dir in ["/mnt/sp-keep", "/mnt/sp-new", "/mnt/sp-target"] {
        fs::create_dir_all(dir).expect("create mount point");
    }
    if !mounted("/mnt/sp-keep") {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "none", "/mnt/sp-keep"])
            .status()
            .expect("run mount");
        assert!(ok.success(), "mount a tmpfs at /mnt/sp-keep");
    }
    fs::create_dir_all("/mnt/sp-keep/old").expect("create put_old");
    fs::create_dir_all("/usr/local/sbin").expect("create /usr/local/sbin");
    fs::write("/usr/local/sbin/carapaced", "not the daemon\n").expect("write fixture");
    fs::write(std::env::temp_dir().join("self_protection.py"), SCRIPT).expect("write script");
}

/// Runs the attack script (inside the session cgroup `cgroup`, or outside with `None`);
/// returns attack name → errno.
fn attack(cgroup: Option<&PathBuf>, daemon: i32) -> BTreeMap<String, String> {
    let where_ = cgroup.map_or_else(|| "-".to_owned(), |c| c.display().to_string());
    let out = Command::new("python3")
        .arg(std::env::temp_dir().join("self_protection.py"))
        .args([where_, daemon.to_string()])
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "attacks ({}):\n{stdout}{}",
        cgroup.map_or("outside", |_| "inside"),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the attack script ran to the end");
    stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn the_daemon() -> i32 {
    let pids = daemon_pids();
    assert_eq!(pids.len(), 1, "one carapaced runs: {pids:?}");
    pids[0]
}

#[test]
fn a_root_process_in_a_session_cannot_switch_carapace_off() {
    let _g = guard();
    prepare();
    let daemon = the_daemon();
    let session = HeldSession::start(4242);
    let inside = attack(Some(&session.cgroup), daemon);
    let err = session.finish();

    let expected = [
        ("kill", format!("blocked kill of carapaced (pid {daemon}) (rule self-protection: agents may not signal")),
        // The daemon's /proc files are refused at the open, before procfs asks ptrace.
        ("ptrace", format!("blocked read of /proc/{daemon}/environ (rule self-protection:")),
        ("bpf_map_create", "blocked use of bpf(BPF_MAP_CREATE) (rule self-protection: agents may not use bpf()".to_owned()),
        ("bpf_obj_get", "blocked use of bpf(BPF_OBJ_GET) (rule self-protection:".to_owned()),
        ("mount", "blocked mount of none (rule self-protection: agents may not mount".to_owned()),
        ("move_mount", "blocked mount of a mount tree (move_mount) (rule self-protection:".to_owned()),
        ("pivot_root", "blocked mount of a new root file system (pivot_root) (rule self-protection:".to_owned()),
        ("umount", "blocked unmount of a mounted file system (rule self-protection:".to_owned()),
        ("finit_module", "blocked load of a kernel module (rule self-protection: agents may not load kernel modules)".to_owned()),
        ("init_module", "blocked load of a kernel module (rule self-protection:".to_owned()),
        ("clone_into_cgroup", "blocked clone of a process into another cgroup (CLONE_INTO_CGROUP) (rule self-protection:".to_owned()),
        ("write_daemon_binary", "blocked write of /usr/local/sbin/carapaced (rule carapace-binaries:".to_owned()),
        ("read_data_dir", "blocked read of /var/lib/carapace (rule carapace-data:".to_owned()),
        ("leave_cgroup", "blocked write of /sys/fs/cgroup/cgroup.procs (rule self-protection: agents may not move processes out".to_owned()),
        ("unpin", "blocked delete of /sys/fs/bpf/carapace/links/file_open (rule ".to_owned()),
        ("rename_pins", "blocked rename of /sys/fs/bpf/carapace (rule ".to_owned()),
        ("core_pattern", "blocked write of /proc/sys/kernel/core_pattern (rule kernel-knobs: Kernel settings".to_owned()),
        ("modprobe", "blocked write of /proc/sys/kernel/modprobe (rule kernel-knobs:".to_owned()),
    ];
    let mut failures = Vec::new();
    for (name, line) in &expected {
        match inside.get(*name).map(String::as_str) {
            Some(EACCES) => {}
            other => failures.push(format!(
                "{name}: errno {other:?} inside the session, want EACCES"
            )),
        }
        if !err.contains(&format!("carapace: {line}")) {
            failures.push(format!("{name}: no `carapace: {line}` line"));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\nstderr:\n{err}",
        failures.join("\n")
    );
    assert!(the_daemon() == daemon, "the daemon survived");
    assert!(mounted("/mnt/sp-keep"), "the tmpfs is still mounted");
}

#[test]
fn the_same_calls_outside_a_session_are_not_refused_by_carapace() {
    let _g = guard();
    prepare();
    let daemon = the_daemon();
    let outside = attack(None, daemon);
    // Each either works or fails for its own reason (not a module; move_mount onto the
    // initramfs root file system is EBUSY), never EACCES.
    for name in [
        "kill",
        "ptrace",
        "bpf_map_create",
        "bpf_obj_get",
        "mount",
        "move_mount",
        "umount",
        "finit_module",
        "init_module",
        "clone_into_cgroup",
        "write_daemon_binary",
        "read_data_dir",
        "leave_cgroup",
        "core_pattern",
        "modprobe",
    ] {
        let errno = outside.get(name).map(String::as_str);
        assert!(
            errno.is_some() && errno != Some(EACCES),
            "{name}: {errno:?} outside"
        );
    }
    for name in [
        "kill",
        "ptrace",
        "bpf_map_create",
        "bpf_obj_get",
        "mount",
        "umount",
        "clone_into_cgroup",
        "write_daemon_binary",
        "read_data_dir",
        "leave_cgroup",
    ] {
        assert_eq!(
            outside.get(name).map(String::as_str),
            Some("0"),
            "{name} works outside"
        );
    }
    assert!(the_daemon() == daemon, "SIGCONT left the daemon running");
}

#[test]
fn an_agent_cannot_move_itself_even_within_its_session() {
    let _g = guard();
    // Root without capabilities (no SUDO_UID): the cgroup files are root-owned, so only
    // Carapace stands in the way. Within the session the locked rule on the cgroup tree
    // refuses; out of it, the cgroup guard does.
    let script = "cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); \
                  mkdir -p $cg/nested; echo $$ > $cg/nested/cgroup.procs; echo nested=$?; \
                  echo $$ > /sys/fs/cgroup/cgroup.procs; echo root=$?; \
                  sed -n 's/^0:://p' /proc/self/cgroup";
    let out = super::agent_as(script, None);
    let text = super::stdout(&out);
    assert!(text.contains("nested=1"), "{text}");
    assert!(text.contains("root=1"), "{text}");
    assert!(
        !text.contains("nested\n"),
        "still in the session's own cgroup: {text}"
    );
    super::assert_denied_line(&out, "(rule carapace-kernel-state:");
    super::assert_denied_line(
        &out,
        "blocked write of /sys/fs/cgroup/cgroup.procs (rule self-protection:",
    );
}

#[test]
fn unpinning_the_programs_does_not_detach_them() {
    let _g = guard();
    // Root outside any session removes a pin while a session runs: the daemon holds its
    // links, so the programs stay attached and a second session is still judged.
    let session = HeldSession::start(4343);
    let pin = "/sys/fs/bpf/carapace/links/file_open";
    assert!(
        std::path::Path::new(pin).exists(),
        "the link is pinned while a session runs"
    );
    std::fs::remove_file(pin).expect("remove the pin from outside");
    let out = super::agent("cat /srv/secret/a.txt");
    assert!(!out.status.success(), "the read is still refused");
    super::assert_denied_line(&out, "blocked read of /srv/secret/a.txt (rule secret-dir");
    session.finish();
}

/// The data directory of [`a_daemon_with_its_own_data_dir_keeps_it_from_sessions`].
const ALT_DATA: &str = "/srv/carapace-alt-data";

/// The VM's daemon restarted with `--data-dir ALT_DATA` for one test, and restarted as it
/// was afterwards (daemon.cmd is how every restart starts it).
struct AltDataDir {
    cmd: String,
}

impl AltDataDir {
    fn start() -> Self {
        let cmd = fs::read_to_string(super::DAEMON_CMD).expect("daemon command line");
        let default = "--data-dir /var/lib/carapace";
        assert!(cmd.contains(default), "{cmd}");
        fs::create_dir_all(format!("{ALT_DATA}/profiles")).expect("create the data dir");
        // A profile that selects no pack, written before the daemon starts: compiled at
        // start, and its sessions must be kept out all the same.
        fs::write(
            format!("{ALT_DATA}/profiles/none.yaml"),
            "version: 1\nbuiltin: none\nrules: []\n",
        )
        .expect("write the profile");
        fs::write(
            super::DAEMON_CMD,
            cmd.replace(default, &format!("--data-dir {ALT_DATA}")),
        )
        .expect("write daemon.cmd");
        super::restart_daemon(false);
        Self { cmd }
    }
}

impl Drop for AltDataDir {
    fn drop(&mut self) {
        let _ = fs::write(super::DAEMON_CMD, &self.cmd);
        super::restart_daemon(false);
    }
}

/// A daemon started with `--data-dir` elsewhere than the self-protection pack's
/// /var/lib/carapace: a root process of a session (no DAC in the way) cannot write a
/// profile there nor read the audit ledger, in a main session and in a session of a profile
/// that selects no pack; the kernel refuses (EACCES) and names the daemon's own rule.
/// Outside a session both work.
#[test]
fn a_daemon_with_its_own_data_dir_keeps_it_from_sessions() {
    let _g = guard();
    let _alt = AltDataDir::start();
    let profile = format!("{ALT_DATA}/profiles/lax.yaml");
    let ledger = format!("{ALT_DATA}/audit/ledger-000001.jsonl");
    assert!(
        fs::metadata(&ledger).is_ok(),
        "the daemon keeps its ledger in {ALT_DATA}"
    );
    // The profile was compiled into the kernel image at start (issue 20: up front).
    let status = Command::new("carapace")
        .arg("status")
        .output()
        .expect("status");
    let said = super::stdout(&status);
    assert!(said.contains("profiles loaded: none"), "{said}");
    let script = format!(
        "{}; {}",
        super::py_errno(&format!("open(\"{profile}\", \"w\").write(\"x\")")),
        super::py_errno(&format!("open(\"{ledger}\").read(1)")),
    );
    for run_args in [&[][..], &["--profile", "none"][..]] {
        let out = Command::new("carapace")
            .arg("run")
            .args(run_args)
            .arg("--")
            .args(["bash", "-c", &script])
            .current_dir("/tmp")
            .env_remove("SUDO_UID")
            .env_remove("SUDO_GID")
            .output()
            .expect("run carapace");
        let (said, err) = (super::stdout(&out), super::stderr(&out));
        assert_eq!(
            said.lines().collect::<Vec<_>>(),
            [EACCES, EACCES],
            "{run_args:?}: the write and the read get EACCES; stderr: {err}"
        );
        for line in [
            // A new file is refused at its creation (`path_mknod`): "blocked create of".
            format!(" of {profile} (rule carapace-own-data-dir:"),
            format!("blocked read of {ledger} (rule carapace-own-data-dir:"),
        ] {
            assert!(err.contains(&line), "{run_args:?}: no `{line}` in: {err}");
        }
        assert!(!std::path::Path::new(&profile).exists());
    }
    // Outside a session root reads and writes there.
    fs::read(&ledger).expect("read the ledger outside a session");
    fs::write(&profile, "version: 1\n").expect("write outside a session");
    fs::remove_file(&profile).expect("remove it again");
}
