//! Kernel floor tests. They run inside the test VM (`cargo xtask test`, or by hand:
//! `cargo xtask vm --rules tests/fixtures/kernel-rules.yaml --include EXE:/opt/t -- /opt/t`)
//! as root, with `carapaced` already running on tests/fixtures/kernel-rules.yaml. Each test
//! runs an agent command through `carapace run` as uid 1000 and checks that the kernel
//! answered EACCES (and that `carapace run` printed the friendly line), and that the same
//! operation outside a session works.
#![cfg(target_os = "linux")]

mod bypass;

use std::{
    fs,
    io::{BufRead as _, BufReader},
    net::{TcpListener, TcpStream},
    os::unix::{fs::PermissionsExt as _, net::UnixListener},
    path::Path,
    process::{Command, Output, Stdio},
    sync::{Mutex, Once},
    thread,
    time::{Duration, Instant},
};

mod allowlist;
mod approve;
mod attach;
mod console;
mod dns;
mod hold;
mod isolation;
mod limits;
mod matcher;
mod names;
mod network_doors;
mod outside;
mod path_cache;
mod profiles;
mod record;
mod self_protection;
mod shadow;

const SOCKET: &str = "/run/carapace/carapace.sock";
const DAEMON_CMD: &str = "/run/carapace/daemon.cmd";

/// Tests share one daemon; those that restart it must not overlap with others.
static DAEMON: Mutex<()> = Mutex::new(());
static FIXTURE: Once = Once::new();

fn in_vm() -> bool {
    Path::new(DAEMON_CMD).exists()
}

/// Files the rules protect. The daemon records inodes of exact-path files when it compiles
/// the rules, so it is restarted once the files exist.
fn fixture() {
    FIXTURE.call_once(|| {
        for dir in [
            "/srv/secret",
            "/srv/data",
            "/srv/readonly",
            "/srv/open",
            "/srv/work",
            "/tmp/keys",
        ] {
            fs::create_dir_all(dir).expect("create fixture dir");
            fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).expect("chmod dir");
        }
        for (path, mode) in [
            ("/srv/secret/a.txt", 0o666),
            ("/srv/data/token.txt", 0o666),
            ("/srv/readonly/r.txt", 0o666),
            ("/srv/open/notes.txt", 0o666),
            ("/tmp/keys/forbidden.key", 0o666),
        ] {
            fs::write(path, "fixture\n").expect("write fixture");
            fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod fixture");
        }
        fs::copy("/bin/true", "/usr/local/bin/blocked-tool").expect("copy blocked-tool");
        fs::set_permissions(
            "/usr/local/bin/blocked-tool",
            fs::Permissions::from_mode(0o755),
        )
        .expect("chmod blocked-tool");
        bypass::before_rules();
        restart_daemon(false);
    });
}

/// Stops the daemon (SIGTERM, or SIGKILL when `kill`) and starts it again as the VM's init
/// did, waiting for its socket.
fn restart_daemon(kill: bool) {
    let cmd = fs::read_to_string(DAEMON_CMD).expect("daemon command line");
    let signal = if kill { libc::SIGKILL } else { libc::SIGTERM };
    for pid in daemon_pids() {
        // SAFETY: sending a signal to a pid read from /proc; no memory is involved.
        unsafe { libc::kill(pid, signal) };
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !daemon_pids().is_empty() {
        assert!(Instant::now() < deadline, "carapaced did not stop");
        thread::sleep(Duration::from_millis(50));
    }
    let _ = fs::remove_file(SOCKET);
    Command::new("sh")
        .arg("-c")
        .arg(format!("{} >>/var/log/carapaced.log 2>&1 &", cmd.trim()))
        .status()
        .expect("start carapaced");
    wait_for_socket();
}

/// Pids of running carapaced processes (the VM has no pgrep/pkill).
fn daemon_pids() -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|pid| {
            // A killed daemon stays a zombie until the VM's init reaps it; it is gone.
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.contains("(carapaced) ") && !s.contains("(carapaced) Z"))
        })
        .collect()
}

fn wait_for_socket() {
    let deadline = Instant::now() + Duration::from_mins(4);
    while std::os::unix::net::UnixStream::connect(SOCKET).is_err() {
        assert!(
            Instant::now() < deadline,
            "carapaced did not come back; log:\n{}",
            fs::read_to_string("/var/log/carapaced.log").unwrap_or_default()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `script` with bash as an agent session of uid 1000 (as `sudo carapace run` would).
fn agent(script: &str) -> Output {
    agent_as(script, Some(1000))
}

/// `carapace run -- ARGV…` in /tmp as `sudo` run by `uid` would start it (root's own session
/// when `None`).
fn session_command(argv: &[&str], uid: Option<u32>) -> Command {
    let mut cmd = Command::new("carapace");
    cmd.arg("run").arg("--").args(argv).current_dir("/tmp");
    cmd.env_remove("SUDO_UID").env_remove("SUDO_GID");
    if let Some(uid) = uid {
        cmd.env("SUDO_UID", uid.to_string())
            .env("SUDO_GID", uid.to_string());
    }
    cmd
}

fn agent_as(script: &str, uid: Option<u32>) -> Output {
    let out = session_command(&["bash", "-c", script], uid)
        .output()
        .expect("run carapace");
    eprintln!(
        "agent `{script}` → {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Python one-liner that prints the errno of an operation (0 when it worked).
fn py_errno(body: &str) -> String {
    format!(
        "python3 -c 'import errno,socket,os\ntry:\n    {body}\n    print(0)\nexcept OSError as e:\n    print(e.errno)'"
    )
}

/// `name=errno` lines (as the attack scripts print them), in order.
fn errnos(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn assert_denied_line(out: &Output, line: &str) {
    let err = stderr(out);
    assert!(
        err.contains(line),
        "expected `{line}` on carapace's stderr, got:\n{err}"
    );
}

/// A hard link made by root for one test, removed when it drops. A link left behind would
/// change later tests: the daemon records the inode of every file under a protected tree,
/// so a file with one name inside a tree is that tree's rule's under all its names (a
/// profile's `/srv/open/**` rule would then refuse `/srv/secret/a.txt` too).
#[must_use]
struct HardLink(&'static str);

impl HardLink {
    fn new(target: &str, link: &'static str) -> Self {
        let _ = fs::remove_file(link);
        fs::hard_link(target, link).unwrap_or_else(|e| panic!("hard link {link}: {e}"));
        Self(link)
    }
}

impl Drop for HardLink {
    fn drop(&mut self) {
        let _ = fs::remove_file(self.0);
    }
}

fn guard() -> std::sync::MutexGuard<'static, ()> {
    assert!(in_vm(), "these tests run inside the VM: cargo xtask test");
    let g = DAEMON
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    fixture();
    g
}

#[test]
fn read_under_blocked_prefix_is_denied_for_cat_and_python() {
    let _g = guard();
    let out = agent("cat /srv/secret/a.txt");
    assert!(!out.status.success(), "cat must fail");
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains("Permission denied"),
        "cat must see EACCES"
    );
    assert_denied_line(
        &out,
        "carapace: blocked read of /srv/secret/a.txt (rule secret-dir: The secret directory is off limits)",
    );

    let out = agent(&py_errno("open(\"/srv/secret/a.txt\").read()"));
    assert_eq!(stdout(&out).trim(), "13", "python open() must get EACCES");

    // Outside any session the same read works.
    assert_eq!(
        fs::read_to_string("/srv/secret/a.txt").expect("read outside"),
        "fixture\n"
    );
}

#[test]
fn symlink_to_protected_file_is_denied() {
    let _g = guard();
    let out = agent("ln -sf /srv/secret/a.txt /tmp/via-symlink && cat /tmp/via-symlink");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("Permission denied"));
    assert_denied_line(&out, "blocked read of /srv/secret/a.txt (rule secret-dir");
}

#[test]
fn hard_link_made_after_rules_loaded_is_denied() {
    let _g = guard();
    // Made by root outside the session, after the daemon compiled the rules.
    let link = "/srv/open/token-link.txt";
    let _link = HardLink::new("/srv/data/token.txt", link);
    let out = agent(&format!("cat {link}"));
    assert!(!out.status.success(), "read through a hard link must fail");
    assert!(stderr(&out).contains("Permission denied"));
    assert_denied_line(
        &out,
        &format!("blocked read of {link} (rule token-file: API tokens are off limits)"),
    );
    let out = agent("cat /srv/data/token.txt");
    assert!(!out.status.success());
}

#[test]
fn basename_rule_matches_anywhere() {
    let _g = guard();
    let out = agent("cat /tmp/keys/forbidden.key");
    assert!(!out.status.success());
    assert_denied_line(
        &out,
        "blocked read of /tmp/keys/forbidden.key (rule forbidden-key",
    );
}

#[test]
fn write_only_rule_blocks_writes_and_allows_reads() {
    let _g = guard();
    let out = agent("cat /srv/readonly/r.txt");
    assert!(out.status.success(), "reading a write-protected file works");
    assert_eq!(stdout(&out), "fixture\n");
    let out = agent("echo more >> /srv/readonly/r.txt");
    assert!(!out.status.success(), "appending must fail");
    assert!(stderr(&out).contains("Permission denied"));
    assert_denied_line(&out, "blocked write of /srv/readonly/r.txt (rule readonly-tree: This tree is read-only for agents)");
    assert_eq!(
        fs::read_to_string("/srv/readonly/r.txt").expect("read"),
        "fixture\n"
    );
    // Unprotected files stay writable.
    let out = agent("echo more >> /srv/open/notes.txt && cat /srv/open/notes.txt");
    assert!(out.status.success());
}

#[test]
fn exec_of_blocked_binary_is_denied() {
    let _g = guard();
    let out = agent("/usr/local/bin/blocked-tool; echo status=$?");
    assert!(
        stdout(&out).contains("status=126"),
        "exec must fail with EACCES (126)"
    );
    // The exec open is judged by file_open before bprm_check_security, and an exec rule
    // also denies reads, so the line may name the read (the exec still fails with 126).
    assert_denied_line(&out, " of /usr/local/bin/blocked-tool (rule blocked-tool");
    let out = agent(&py_errno(
        "os.execv(\"/usr/local/bin/blocked-tool\", [\"x\"])",
    ));
    assert_eq!(stdout(&out).trim(), "13");
    // Reading it is denied too: a copy, a memfd or `ld.so FILE` would run its bytes.
    let out = agent("cat /usr/local/bin/blocked-tool > /dev/null || echo read-denied");
    assert!(stdout(&out).contains("read-denied"));
    assert_denied_line(
        &out,
        "blocked read of /usr/local/bin/blocked-tool (rule blocked-tool",
    );
    assert!(Command::new("/usr/local/bin/blocked-tool")
        .status()
        .expect("exec outside")
        .success());
}

fn listen(addr: &str) -> TcpListener {
    TcpListener::bind(addr).unwrap_or_else(|e| panic!("listen on {addr}: {e}"))
}

fn py_connect(family: &str, host: &str, port: u16) -> String {
    py_errno(&format!(
        "socket.socket(socket.{family}).connect((\"{host}\", {port}))"
    ))
}

#[test]
fn connect_to_blocked_ipv4_port_and_cidr_is_denied() {
    let _g = guard();
    let _a = listen("127.0.0.2:8081");
    let _b = listen("127.0.0.2:8083");
    let _c = listen("127.66.1.1:9000");

    let out = agent(&py_connect("AF_INET", "127.0.0.2", 8081));
    assert_eq!(stdout(&out).trim(), "13", "blocked host:port");
    assert_denied_line(
        &out,
        "blocked network of 127.0.0.2:8081 (rule blocked-host-port: That service is off limits)",
    );

    let out = agent(&py_connect("AF_INET", "127.0.0.2", 8083));
    assert_eq!(
        stdout(&out).trim(),
        "0",
        "another port of the same host is allowed"
    );

    let out = agent(&py_connect("AF_INET", "127.66.1.1", 9000));
    assert_eq!(stdout(&out).trim(), "13", "blocked CIDR");
    assert_denied_line(&out, "(rule blocked-cidr: That network is off limits)");

    // IPv4-mapped IPv6 reaches the same IPv4 rule.
    let out = agent(&py_connect("AF_INET6", "::ffff:127.0.0.2", 8081));
    assert_eq!(stdout(&out).trim(), "13", "IPv4-mapped IPv6");

    assert!(
        TcpStream::connect("127.0.0.2:8081").is_ok(),
        "outside a session it connects"
    );
    assert!(TcpStream::connect("127.66.1.1:9000").is_ok());
}

#[test]
fn connect_to_blocked_ipv6_is_denied() {
    let _g = guard();
    let _a = listen("[::1]:8082");
    let _b = listen("[::1]:8084");
    let out = agent(&py_connect("AF_INET6", "::1", 8082));
    assert_eq!(stdout(&out).trim(), "13");
    assert_denied_line(&out, "blocked network of [::1]:8082 (rule blocked-v6");
    let out = agent(&py_connect("AF_INET6", "::1", 8084));
    assert_eq!(stdout(&out).trim(), "0");
    assert!(TcpStream::connect("[::1]:8082").is_ok());
}

#[test]
fn connect_to_blocked_unix_socket_is_denied() {
    let _g = guard();
    let _ = fs::remove_file("/run/blocked.sock");
    let _l = UnixListener::bind("/run/blocked.sock").expect("bind unix socket");
    fs::set_permissions("/run/blocked.sock", fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = agent(&py_errno(
        "socket.socket(socket.AF_UNIX).connect(\"/run/blocked.sock\")",
    ));
    assert_eq!(stdout(&out).trim(), "13");
    assert_denied_line(
        &out,
        "blocked network of /run/blocked.sock (rule blocked-unix",
    );
    assert!(std::os::unix::net::UnixStream::connect("/run/blocked.sock").is_ok());
}

#[test]
fn grandchild_in_nested_cgroup_is_still_blocked() {
    let _g = guard();
    // The agent itself may not move (self-protection, see self_protection.rs), so root moves
    // it from outside into a cgroup nested in its session, as a delegated setup could.
    let _ = fs::remove_file("/tmp/nested-agent.pid");
    let child = session_command(
        &[
            "bash",
            "-c",
            "echo $$ > /tmp/nested-agent.pid; \
             for _ in $(seq 200); do grep -q nested /proc/self/cgroup && break; sleep 0.05; done; \
             grep -q nested /proc/self/cgroup && echo moved; \
             bash -c 'bash -c \"cat /srv/secret/a.txt\"'",
        ],
        Some(1000),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start agent");
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        if let Some(pid) = fs::read_to_string("/tmp/nested-agent.pid")
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the agent never started");
        thread::sleep(Duration::from_millis(50));
    };
    let cgroup = fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("agent cgroup");
    let rel = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("cgroup v2 line");
    let nested = format!("/sys/fs/cgroup{rel}/nested");
    fs::create_dir_all(&nested).expect("create nested cgroup");
    fs::write(format!("{nested}/cgroup.procs"), pid.to_string()).expect("move the agent");
    let out = child.wait_with_output().expect("agent exits");
    assert!(
        stdout(&out).contains("moved"),
        "the shell must have moved into the nested cgroup"
    );
    assert!(
        !stdout(&out).contains("fixture"),
        "the grandchild must not read the file"
    );
    assert!(stderr(&out).contains("Permission denied"));
}

#[test]
fn blocks_hold_while_the_daemon_is_killed_and_restarted() {
    let _g = guard();
    let mut child = session_command(
        &[
            "bash",
            "-c",
            "for i in $(seq 1 60); do if cat /srv/secret/a.txt >/dev/null 2>&1; then echo ALLOWED; else echo denied; fi; sleep 0.1; done",
        ],
        Some(1000),
    )
    .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start agent");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    // Killed once the session runs (its first attempt answered), not while it is created.
    let first = lines.next().and_then(Result::ok);
    let reader = thread::spawn(move || {
        first
            .into_iter()
            .chain(lines.map_while(Result::ok))
            .collect::<Vec<_>>()
    });
    restart_daemon(true);
    let status = child.wait().expect("agent exits");
    let lines = reader.join().expect("reader");
    assert!(status.success(), "the agent ran to completion");
    assert_eq!(lines.len(), 60, "every attempt reported: {lines:?}");
    assert!(
        lines.iter().all(|l| l == "denied"),
        "a read got through: {lines:?}"
    );
}

#[test]
fn a_session_rule_switched_on_in_layer_1_reaches_the_kernel() {
    let _g = guard();
    let write = py_errno("open(\"/srv/work/out.txt\", \"w\").write(\"x\")");
    // The same write from a Python one-liner, before and after a network read reported to
    // Layer 1: the second never passes through Layer 1, and the kernel refuses it. Plain
    // http: the fixture's `names-sni` allow-list refuses every other name on port 443, and a
    // refused read switches nothing on.
    let web = r#"{"tool":"WebFetch","input":{"url":"http://example.com/","prompt":"read"}}"#;
    let out = agent(&format!(
        "{write}; carapace check --json '{web}' | grep -c no-write-after-web; {write}"
    ));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        ["0", "1", "13"],
        "write allowed, rule switched on by the web read, then EACCES:\n{}",
        stderr(&out)
    );
    assert_denied_line(
        &out,
        "blocked write of /srv/work/out.txt (rule no-write-after-web",
    );
    // A new session starts with the rule off.
    let out = agent(&write);
    assert_eq!(stdout(&out).trim(), "0", "{}", stderr(&out));
}

#[test]
fn an_agent_cannot_loosen_its_own_session() {
    let _g = guard();
    let read = r#"{"tool":"Read","input":{"file_path":"/tmp/x"}}"#;
    let out = agent(&format!(
        "sid=$(carapace check --json '{read}' | sed -n 's/.*\"session_id\": \"\\([^\"]*\\)\".*/\\1/p'); \
         echo sid=$sid; \
         carapace session disable \"$sid\" no-write-after-web; echo disable=$?; \
         carapace session reset \"$sid\"; echo reset=$?; \
         carapace rules reload; echo reload=$?"
    ));
    let text = stdout(&out);
    assert!(
        text.contains("sid=s-"),
        "the agent sees its session:\n{text}"
    );
    for name in ["disable", "reset", "reload"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("{name}=")) && l != format!("{name}=0")),
            "{name} must fail from inside:\n{text}\n{}",
            stderr(&out)
        );
    }
    assert!(
        stderr(&out).contains("processes inside a Carapace session cannot"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn doctor_reports_a_kernel_that_enforces() {
    let _g = guard();
    let out = Command::new("carapace")
        .args(["doctor", "--json"])
        .output()
        .expect("run carapace doctor");
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("doctor prints JSON");
    let checks = report["checks"].as_array().cloned().unwrap_or_default();
    let failed: Vec<&serde_json::Value> = checks
        .iter()
        .filter(|c| c["required"] == true && c["status"] != "ok")
        .collect();
    assert!(
        failed.is_empty(),
        "required checks failed in the VM: {failed:#?}"
    );
    let bpf = checks
        .iter()
        .find(|c| c["name"] == "bpf-lsm")
        .expect("a bpf-lsm check");
    assert_eq!(bpf["status"], "ok", "{bpf}");
    assert!(out.status.success(), "{}", stderr(&out));
}
