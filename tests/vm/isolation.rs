//! No acting through processes outside the session (issue 23, point 5): unix sockets whose
//! listener is outside (`unix: outside-session` in tests/fixtures/kernel-rules.yaml, with
//! `/srv/allowed-socks/**` and Carapace's own socket excepted), ptrace and its relatives on
//! processes outside, and typing into terminals. Each attack runs as uid 1000 in a session;
//! each has its control: the session's own objects, the listed ones, or the same call from
//! outside the session.

use std::{
    fs,
    os::unix::{
        fs::PermissionsExt as _,
        net::{UnixDatagram, UnixListener},
        process::CommandExt as _,
    },
    process::{Child, Command, Stdio},
};

use super::{agent, assert_denied_line, errnos, guard, py_errno, stdout};

fn listener(path: &str) -> UnixListener {
    let _ = fs::remove_file(path);
    let l = UnixListener::bind(path).expect("bind unix socket");
    fs::set_permissions(path, fs::Permissions::from_mode(0o777)).expect("chmod socket");
    l
}

fn connect(path: &str) -> String {
    py_errno(&format!(
        "socket.socket(socket.AF_UNIX).connect(\"{path}\")"
    ))
}

#[test]
fn a_listener_outside_the_session_is_refused_its_own_and_listed_ones_are_not() {
    let _g = guard();
    fs::create_dir_all("/srv/allowed-socks").expect("mkdir");
    let _outside = listener("/tmp/outside.sock");
    let _allowed = listener("/srv/allowed-socks/ok.sock");

    let out = agent(&connect("/tmp/outside.sock"));
    assert_eq!(
        stdout(&out).trim(),
        "13",
        "a listener made outside the session"
    );
    assert_denied_line(
        &out,
        "blocked connect of /tmp/outside.sock (rule outside-listeners",
    );
    // Spelled otherwise: relative, through a symlink the agent makes.
    let out = agent(&format!(
        "cd /tmp && {} && ln -sf /tmp/outside.sock /tmp/o-link.sock && {}",
        connect("outside.sock"),
        connect("/tmp/o-link.sock")
    ));
    assert_eq!(
        stdout(&out).split_whitespace().collect::<Vec<_>>(),
        ["13", "13"]
    );

    // Controls: a listed socket, Carapace's own, and one the session made itself.
    let out = agent(&connect("/srv/allowed-socks/ok.sock"));
    assert_eq!(stdout(&out).trim(), "0", "an excepted socket");
    let out = agent(&connect("/run/carapace/carapace.sock"));
    assert_eq!(stdout(&out).trim(), "0", "Carapace's own socket");
    let out = agent(
        "python3 -c 'import socket,os\n\
         p=\"/tmp/mine-%d.sock\" % os.getpid()\n\
         l=socket.socket(socket.AF_UNIX); l.bind(p); l.listen(1)\n\
         socket.socket(socket.AF_UNIX).connect(p); print(0)\n\
         a=socket.socket(socket.AF_UNIX); a.bind(\"\\0mine-%d\" % os.getpid()); a.listen(1)\n\
         socket.socket(socket.AF_UNIX).connect(\"\\0mine-%d\" % os.getpid()); print(0)\n\
         os.unlink(p)'",
    );
    assert_eq!(
        stdout(&out).split_whitespace().collect::<Vec<_>>(),
        ["0", "0"],
        "the session's own listeners, by path and abstract"
    );
    // Outside the session the same connect works.
    assert!(std::os::unix::net::UnixStream::connect("/tmp/outside.sock").is_ok());
}

#[test]
fn abstract_and_datagram_listeners_outside_the_session_are_refused() {
    let _g = guard();
    // An abstract listener (as X11's or a container shim's), made by root outside.
    let abstract_listener = Command::new("python3")
        .arg("-c")
        .arg(
            "import socket,sys,time\n\
             l=socket.socket(socket.AF_UNIX); l.bind(\"\\0carapace-outside\"); l.listen(4)\n\
             print(\"ready\", flush=True); time.sleep(120)",
        )
        .stdout(Stdio::piped())
        .spawn()
        .expect("start an abstract listener");
    let mut abstract_listener = Held(abstract_listener);
    wait_ready(&mut abstract_listener.0);
    let out = agent(&connect("\\0carapace-outside"));
    assert_eq!(stdout(&out).trim(), "13", "an abstract listener outside");
    assert_denied_line(
        &out,
        "blocked connect of @carapace-outside (rule outside-listeners",
    );
    let _ = fs::remove_file("/tmp/outside.dgram");
    let _dgram = UnixDatagram::bind("/tmp/outside.dgram").expect("bind datagram socket");
    fs::set_permissions("/tmp/outside.dgram", fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = agent(&py_errno(
        "socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b\"x\", \"/tmp/outside.dgram\")",
    ));
    assert_eq!(stdout(&out).trim(), "13", "a datagram to a socket outside");
    // Control: from outside the session both answer.
    let probe = Command::new("python3")
        .arg("-c")
        .arg(
            "import socket\n\
             socket.socket(socket.AF_UNIX).connect(\"\\0carapace-outside\")\n\
             socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b\"x\", \"/tmp/outside.dgram\")\n\
             print(0)",
        )
        .output()
        .expect("probe outside");
    assert_eq!(String::from_utf8_lossy(&probe.stdout).trim(), "0");
}

#[test]
fn a_socket_made_after_the_rules_loaded_is_judged_by_its_path() {
    let _g = guard();
    // `late-socket` names a path in the excepted directory: only the path rule answers. The
    // listener appears after the daemon loaded its rules (no inode recorded), and the agent
    // reaches it through a symlink (the address it writes names no protected path).
    fs::create_dir_all("/srv/allowed-socks").expect("mkdir");
    let _late = listener("/srv/allowed-socks/late.sock");
    let out = agent(&format!(
        "ln -sf /srv/allowed-socks/late.sock /tmp/late-link.sock && {}",
        connect("/tmp/late-link.sock")
    ));
    assert_eq!(stdout(&out).trim(), "13");
    assert_denied_line(
        &out,
        "blocked network of /srv/allowed-socks/late.sock (rule late-socket",
    );
    assert!(std::os::unix::net::UnixStream::connect("/srv/allowed-socks/late.sock").is_ok());
}

/// A child killed when dropped.
struct Held(Child);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_ready(child: &mut Child) {
    use std::io::BufRead as _;
    let out = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .expect("read the child's first line");
    assert_eq!(line.trim(), "ready");
}

/// A process of uid 1000 outside any session: what the agent would like to reach into.
fn neighbour() -> Held {
    let child = Command::new("sleep")
        .arg("300")
        .uid(1000)
        .gid(1000)
        .env("NEIGHBOUR_SECRET", "s3cret")
        .current_dir("/tmp")
        .stdout(Stdio::null())
        .spawn()
        .expect("start the neighbour");
    Held(child)
}

/// Attacks on process `pid`, one errno per line: environ, an open descriptor, cwd link, mem, ptrace
/// attach, process_vm_readv, pidfd_getfd.
fn reach_into(pid: u32) -> String {
    format!(
        r#"python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
pid = {pid}
def sc(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    if r < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return r
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
def vm_read():
    buf = ctypes.create_string_buffer(8)
    local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
    remote = iovec(0x400000, 8)
    r = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if r < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
def getfd():
    pidfd = sc(434, pid, 0)
    sc(438, pidfd, 0, 0)
def attach():
    sc(101, 16, pid, 0, 0)
    # PTRACE_DETACH needs the tracee stopped (else ESRCH): wait for the attach's stop.
    os.waitpid(pid, 0x40000000)
    sc(101, 17, pid, 0, 0)
attacks = [
    ("environ", lambda: open(f"/proc/{{pid}}/environ", "rb").read()),
    ("fd", lambda: open(f"/proc/{{pid}}/fd/1", "rb")),
    ("cwd", lambda: os.listdir(f"/proc/{{pid}}/cwd/")),
    ("mem", lambda: open(f"/proc/{{pid}}/mem", "rb")),
    ("ptrace", attach),
    ("vm_read", vm_read),
    ("pidfd_getfd", getfd),
]
for name, f in attacks:
    try:
        f(); print(f"{{name}}=0")
    except OSError as e:
        print(f"{{name}}={{e.errno}}")
EOF"#
    )
}

#[test]
fn processes_outside_the_session_cannot_be_traced_or_read() {
    let _g = guard();
    // Yama would refuse a non-child attach on its own (EPERM); this test is about Carapace.
    let _ = fs::write("/proc/sys/kernel/yama/ptrace_scope", "0");
    let neighbour = neighbour();
    let pid = neighbour.0.id();
    let out = agent(&reach_into(pid));
    let inside = errnos(&stdout(&out));
    assert_eq!(inside.len(), 7, "every attack ran: {inside:?}");
    for (name, errno) in &inside {
        // process_vm_readv and (on 6.1) pidfd_getfd turn the hook's EACCES into EPERM
        // themselves; the control below shows the refusal is the session's.
        let refused =
            errno == "13" || (errno == "1" && (name == "vm_read" || name == "pidfd_getfd"));
        assert!(
            refused,
            "{name} on a process outside the session: errno {errno}"
        );
    }
    assert_denied_line(
        &out,
        &format!("blocked ptrace of process {pid} outside the session (rule self-protection:"),
    );
    // Controls: the same uid outside the session may; the session's own child may be read.
    let outside = Command::new("bash")
        .arg("-c")
        .arg(reach_into(pid))
        .uid(1000)
        .gid(1000)
        .output()
        .expect("run outside");
    let outside = errnos(&String::from_utf8_lossy(&outside.stdout));
    for (name, errno) in &outside {
        // process_vm_readv of an unmapped address fails with EFAULT, not a refusal.
        assert!(
            errno == "0" || errno == "14",
            "{name} outside the session: {errno}"
        );
    }
    let out = agent(
        // The child's environment reads empty while it is between fork and exec: wait
        // (bounded) until its own variable shows, so the control cannot pass or fail by timing.
        "MARK=own sleep 30 & kid=$!; \
         for _ in $(seq 100); do tr '\\0' '\\n' </proc/$kid/environ | grep -qx MARK=own && break; sleep 0.1; done; \
         tr '\\0' '\\n' </proc/$kid/environ | grep -qx MARK=own && echo 0; \
         ls /proc/$kid/cwd/ >/dev/null && echo 0; kill $kid",
    );
    assert_eq!(
        stdout(&out).split_whitespace().collect::<Vec<_>>(),
        ["0", "0"],
        "the session's own processes"
    );
}

#[test]
fn an_agent_cannot_type_into_a_terminal() {
    let _g = guard();
    // Since 6.2 TIOCSTI is off unless this says otherwise; the control needs it on.
    let _ = fs::write("/proc/sys/dev/tty/legacy_tiocsti", "1");
    let script = "python3 -c 'import os,fcntl,termios,struct\n\
        m,s=os.openpty()\n\
        for name,cmd,arg in ((\"winsz\",termios.TIOCGWINSZ,bytes(8)),(\"sti\",termios.TIOCSTI,b\"x\"),(\"linux\",0x541c,bytes([3]))):\n\
        \x20   try:\n\
        \x20       fcntl.ioctl(s,cmd,arg); print(name+\"=0\")\n\
        \x20   except OSError as e:\n\
        \x20       print(name+\"=\"+str(e.errno))'";
    let out = agent(script);
    let inside = errnos(&stdout(&out));
    assert_eq!(
        inside,
        [
            ("winsz".to_owned(), "0".to_owned()),
            ("sti".to_owned(), "13".to_owned()),
            ("linux".to_owned(), "13".to_owned())
        ],
        "other terminal ioctls work; TIOCSTI and TIOCLINUX are refused"
    );
    assert_denied_line(
        &out,
        "blocked typing into a terminal (TIOCSTI) (rule self-protection: agents may not type",
    );
    // Outside the session, root may push input (the kernel's own rule).
    let outside = Command::new("bash")
        .arg("-c")
        .arg(script)
        .output()
        .expect("run outside");
    let outside = errnos(&String::from_utf8_lossy(&outside.stdout));
    assert_eq!(
        outside.get(1).map(|(_, e)| e.as_str()),
        Some("0"),
        "{outside:?}"
    );
}

/// Makes a user and mount namespace, then chroots to /srv inside it and reads a protected
/// file under its new name; `step=errno` lines.
const VIEWS_SCRIPT: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
    print(f"unshare={ctypes.get_errno()}")
    raise SystemExit
print("unshare=0")
try:
    os.chroot("/srv")
    print("chroot=0")
except OSError as e:
    print(f"chroot={e.errno}")
    raise SystemExit
try:
    print("read=0", open("/secret/a.txt").read().strip())
except OSError as e:
    print(f"read={e.errno}")
"#;

#[test]
fn private_views_are_refused_unless_the_session_turns_their_rule_off() {
    let _g = guard();
    fs::write("/tmp/views.py", VIEWS_SCRIPT).expect("write script");
    // In a session: the user namespace is refused (no-userns).
    let out = agent("python3 /tmp/views.py");
    assert_eq!(
        errnos(&stdout(&out)),
        [("unshare".to_owned(), "13".to_owned())]
    );
    assert_denied_line(
        &out,
        "blocked creation of a user namespace (rule no-userns: Agents may not make user namespaces)",
    );
    // A session with no-userns turned off by the user may make one; chroot stays refused
    // (no-chroot), so the protected file is not reached under another name.
    let _ = fs::remove_file("/tmp/views-sid");
    let _ = fs::remove_file("/tmp/views-go");
    let read = r#"{"tool":"Read","input":{"file_path":"/tmp/x"}}"#;
    let child = super::session_command(
        &[
            "bash",
            "-c",
            &format!(
                "carapace check --json '{read}' | sed -n 's/.*\"session_id\": \"\\([^\"]*\\)\".*/\\1/p' \
                 > /tmp/views-sid.tmp; mv /tmp/views-sid.tmp /tmp/views-sid; \
                 while [ ! -e /tmp/views-go ]; do sleep 0.1; done; python3 /tmp/views.py"
            ),
        ],
        Some(1000),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start session");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let sid = loop {
        if let Ok(s) = fs::read_to_string("/tmp/views-sid") {
            break s.trim().to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "no session id");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(sid.starts_with("s-"), "session id: {sid:?}");
    let disable = Command::new("carapace")
        .args(["session", "disable", &sid, "no-userns"])
        .output()
        .expect("carapace session disable");
    assert!(disable.status.success(), "{disable:?}");
    fs::write("/tmp/views-go", "").expect("go");
    let out = child.wait_with_output().expect("session output");
    assert_eq!(
        errnos(&stdout(&out)),
        [
            ("unshare".to_owned(), "0".to_owned()),
            ("chroot".to_owned(), "13".to_owned())
        ],
        "{}",
        super::stderr(&out)
    );
    assert_denied_line(
        &out,
        "blocked chroot into /srv (rule no-chroot: Agents may not change their root)",
    );
    // Outside a session both work (the script runs as root there).
    let outside = Command::new("python3")
        .arg("/tmp/views.py")
        .output()
        .expect("run outside");
    let outside = errnos(&String::from_utf8_lossy(&outside.stdout));
    assert_eq!(
        outside.first().map(|(_, e)| e.as_str()),
        Some("0"),
        "{outside:?}"
    );
    assert!(
        outside.iter().any(|(k, e)| k == "chroot" && e == "0"),
        "{outside:?}"
    );
}
