//! Processes outside the session are out of the agent's reach through every door the
//! kernel leaves to plain file modes and uids: signals, resource limits, priority and
//! scheduling, their `/proc` files, the user's terminal, and their IPC objects. Each attack
//! is refused inside a session, works for the same uid outside it, and works inside the
//! session on the session's own processes.

use std::{
    fs,
    os::unix::process::CommandExt as _,
    process::{Child, Command, Stdio},
};

use super::{agent, assert_denied_line, errnos, guard, stdout};

/// A child killed when dropped.
struct Held(Child);

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process of uid 1000 outside any session (the user's), with a secret on its command
/// line; it ignores SIGUSR1 so that the control's signal leaves it running.
fn neighbour() -> Held {
    let child = Command::new("python3")
        .args([
            "-c",
            "import signal,time\nsignal.signal(signal.SIGUSR1, signal.SIG_IGN)\ntime.sleep(300)",
            "--api-token=ARGV-SECRET",
        ])
        .uid(1000)
        .gid(1000)
        .current_dir("/tmp")
        .stdout(Stdio::null())
        .spawn()
        .expect("start the neighbour");
    Held(child)
}

/// Acts on process `$1` in every way `name=errno` lines report; the signal last, since it
/// ends a process that does not ignore it.
const ACT_ON: &str = r#"python3 - "$1" <<'EOF'
import ctypes, os, resource, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
def ioprio():
    if libc.syscall(251, 1, pid, (2 << 13) | 4) != 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
def write(name, value):
    with open(f"/proc/{pid}/{name}", "w") as f:
        f.write(value)
def read(name):
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read()
attacks = [
    ("prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (64, 64))),
    ("nice", lambda: os.setpriority(os.PRIO_PROCESS, pid, 15)),
    ("ioprio", ioprio),
    ("affinity", lambda: os.sched_setaffinity(pid, {0})),
    ("oom", lambda: write("oom_score_adj", "900")),
    ("cmdline", lambda: read("cmdline")),
    ("mountinfo", lambda: read("mountinfo")),
    ("exists", lambda: os.kill(pid, 0)),
    ("stat", lambda: read("stat")),
    ("status", lambda: read("status")),
    ("oom_read", lambda: read("oom_score_adj")),
    ("cgroup", lambda: read("cgroup")),
    ("listing", lambda: os.listdir(f"/proc/{pid}")),
    ("kill", lambda: os.kill(pid, signal.SIGUSR1)),
]
for name, act in attacks:
    try:
        act(); print(f"{name}=0")
    except OSError as e:
        print(f"{name}={e.errno}")
EOF"#;

/// What a session may still do to a process outside it: ask whether it exists, and read
/// what `ps` and `top` show.
const STILL_ALLOWED: [&str; 6] = ["exists", "stat", "status", "oom_read", "cgroup", "listing"];

#[test]
fn processes_outside_the_session_cannot_be_signalled_limited_or_read() {
    let _g = guard();
    let neighbour = neighbour();
    let pid = neighbour.0.id();
    let out = agent(&format!("set -- {pid}\n{ACT_ON}"));
    let inside = errnos(&stdout(&out));
    assert_eq!(inside.len(), 14, "every attack ran: {inside:?}");
    for (name, errno) in &inside {
        let want = if STILL_ALLOWED.contains(&name.as_str()) {
            "0"
        } else {
            "13"
        };
        assert_eq!(errno, want, "{name} on the user's process from a session");
    }
    for line in [
        format!("blocked kill of process {pid} outside the session (rule self-protection: agents may not signal processes outside"),
        format!("blocked limits or priority change of process {pid} outside the session (rule self-protection:"),
        format!("blocked write of /proc/{pid}/oom_score_adj (rule self-protection: agents may not read or change the files of processes outside"),
        format!("blocked read of /proc/{pid}/mountinfo (rule self-protection:"),
    ] {
        assert_denied_line(&out, &line);
    }
    // `ps` reads every process's command line: refused without a line each.
    assert!(
        !super::stderr(&out).contains("cmdline"),
        "a command line read is refused quietly"
    );
    // Control: the same uid outside a session may do all of it.
    let outside = Command::new("bash")
        .args(["-c", ACT_ON, "act", &pid.to_string()])
        .uid(1000)
        .gid(1000)
        .output()
        .expect("run outside");
    let outside = errnos(&String::from_utf8_lossy(&outside.stdout));
    assert_eq!(outside.len(), 14, "{outside:?}");
    assert!(
        outside.iter().all(|(_, e)| e == "0"),
        "outside the session: {outside:?}"
    );
    // And the session may on its own processes.
    let out = agent(&format!("sleep 60 & set -- $!\n{ACT_ON}"));
    let own = errnos(&stdout(&out));
    assert_eq!(own.len(), 14, "{own:?}");
    assert!(
        own.iter().all(|(_, e)| e == "0"),
        "the session's own: {own:?}"
    );
}

/// A "user's shell" outside the session: leads a session on a terminal of its own and
/// prints the terminal's name.
fn users_terminal() -> (Held, String) {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import os,fcntl,termios,time\nm,s=os.openpty()\nos.setsid()\n\
             fcntl.ioctl(s,termios.TIOCSCTTY,0)\nprint(os.ttyname(s),flush=True)\ntime.sleep(300)",
        ])
        .uid(1000)
        .gid(1000)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the user's terminal");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("piped")),
        &mut line,
    )
    .expect("read the terminal's name");
    let name = line.trim().to_owned();
    assert!(name.starts_with("/dev/pts/"), "{name}");
    (Held(child), name)
}

/// Opens terminal `$1` (`theirs=`), then terminals of the session's own: a new one
/// (`new=`), and one a process of the session leads (`led=`).
const OPEN_TERMINALS: &str = r#"python3 - "$1" <<'EOF'
import fcntl, os, sys, termios, time
def report(name, act):
    try:
        os.close(act()); print(f"{name}=0")
    except OSError as e:
        print(f"{name}={e.errno}")
report("theirs", lambda: os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY))
m, s = os.openpty()
report("new", lambda: os.open(os.ttyname(s), os.O_RDWR | os.O_NOCTTY))
r, w = os.pipe()
kid = os.fork()
if kid == 0:
    os.setsid(); fcntl.ioctl(s, termios.TIOCSCTTY, 0); os.write(w, b"x"); time.sleep(30); os._exit(0)
os.read(r, 1)
report("led", lambda: os.open(os.ttyname(s), os.O_RDWR | os.O_NOCTTY))
os.kill(kid, 9)
EOF"#;

#[test]
fn the_users_terminal_is_out_of_reach_the_sessions_own_are_not() {
    let _g = guard();
    let (_user, tty) = users_terminal();
    let out = agent(&format!("set -- {tty}\n{OPEN_TERMINALS}"));
    assert_eq!(
        errnos(&stdout(&out)),
        [("theirs", "13"), ("new", "0"), ("led", "0")].map(|(a, b)| (a.to_owned(), b.to_owned())),
    );
    assert_denied_line(
        &out,
        &format!(
            "blocked write of {tty} (rule self-protection: agents may not open a terminal outside"
        ),
    );
    let outside = Command::new("bash")
        .args(["-c", OPEN_TERMINALS, "open", &tty])
        .uid(1000)
        .gid(1000)
        .output()
        .expect("run outside");
    assert!(
        String::from_utf8_lossy(&outside.stdout).starts_with("theirs=0\n"),
        "the same uid outside a session opens it: {outside:?}"
    );
}

/// The user's IPC objects, made outside the session: a System V shared memory segment
/// (key 0x5ca1ab1e) and a POSIX message queue (`/carapace-user`), both mode 0666.
const MAKE_IPC: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
assert libc.shmget(0x5ca1ab1e, 4096, 0o1000 | 0o666) >= 0, ctypes.get_errno()
os.umask(0)
assert libc.mq_open(b"/carapace-user", os.O_CREAT | os.O_RDWR, 0o666, None) >= 0, ctypes.get_errno()
"#;

/// `shm=` (the user's segment by key), `mqueue=` (the user's queue through `/dev/mqueue`),
/// `own=` (a queue of the session's own namespace).
const REACH_IPC: &str = r#"python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.shmget(0x5ca1ab1e, 0, 0)
print(f"shm={0 if r >= 0 else ctypes.get_errno()}")
try:
    os.close(os.open("/dev/mqueue/carapace-user", os.O_RDWR)); print("mqueue=0")
except OSError as e:
    print(f"mqueue={e.errno}")
r = libc.mq_open(b"/carapace-own", os.O_CREAT | os.O_RDWR, 0o600, None)
print(f"own={0 if r >= 0 else ctypes.get_errno()}")
libc.mq_unlink(b"/carapace-own")
EOF"#;

#[test]
fn ipc_objects_outside_the_session_are_out_of_sight() {
    let _g = guard();
    let _ = fs::create_dir_all("/dev/mqueue");
    if !fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .contains(" /dev/mqueue ")
    {
        let status = Command::new("mount")
            .args(["-t", "mqueue", "mqueue", "/dev/mqueue"])
            .status()
            .expect("mount mqueue");
        assert!(status.success());
    }
    let made = Command::new("python3")
        .args(["-c", MAKE_IPC])
        .status()
        .expect("make the user's IPC objects");
    assert!(made.success());
    let out = agent(REACH_IPC);
    // The segment is not in the session's namespace at all (ENOENT); the host's queue is
    // refused by the kernel layer; the session's own queue works.
    assert_eq!(
        errnos(&stdout(&out)),
        [("shm", "2"), ("mqueue", "13"), ("own", "0")].map(|(a, b)| (a.to_owned(), b.to_owned())),
    );
    assert_denied_line(
        &out,
        "blocked write of /dev/mqueue/carapace-user (rule self-protection: agents may not use message queues",
    );
    let outside = Command::new("bash")
        .args(["-c", REACH_IPC])
        .uid(1000)
        .gid(1000)
        .output()
        .expect("run outside");
    assert_eq!(
        errnos(&String::from_utf8_lossy(&outside.stdout)),
        [("shm", "0"), ("mqueue", "0"), ("own", "0")].map(|(a, b)| (a.to_owned(), b.to_owned())),
        "outside the session"
    );
}

/// `add=`, `search=` and `read=` lines: the user's key `carapace-user` (in `@u`) searched
/// for and read, then a key of the session's own (`own=`) added to `@s` and read back.
const KEYS: &str = r#"python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def keyctl(*args):
    r = libc.syscall(ctypes.c_long(250), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if r < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return r
def read(serial):
    buf = ctypes.create_string_buffer(64)
    n = keyctl(11, serial, buf, 64)
    return buf.raw[:n]
def report(name, act):
    try:
        print(f"{name}={act()}")
    except OSError as e:
        print(f"{name}=errno{e.errno}")
found = []
def search():
    found.append(keyctl(10, -4, b"user", b"carapace-user", 0))
    return "found"
report("search", search)
report("read", lambda: read(found[0]).decode() if found else read(int(os.environ.get("KEY", "0"))).decode())
def own():
    serial = libc.syscall(ctypes.c_long(248), b"user", b"agent-own", b"OWN", ctypes.c_long(3), ctypes.c_long(-3))
    if serial < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    return read(serial).decode()
report("own", own)
EOF"#;

/// Adds the user's key to the user keyring of uid 1000, outside any session; its serial.
fn users_key() -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import ctypes\nlibc=ctypes.CDLL(None,use_errno=True)\nlibc.syscall.restype=ctypes.c_long\n\
             print(libc.syscall(ctypes.c_long(248),b'user',b'carapace-user',b'KEYRING-SECRET',ctypes.c_long(14),ctypes.c_long(-4)))",
        ])
        .uid(1000)
        .gid(1000)
        .output()
        .expect("add the user's key");
    let serial = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(serial.parse::<i64>().is_ok_and(|s| s > 0), "{out:?}");
    serial
}

#[test]
fn the_users_kernel_keys_are_out_of_reach_the_sessions_own_are_not() {
    let _g = guard();
    let serial = users_key();
    let out = agent(&format!("export KEY={serial}\n{KEYS}"));
    let got = errnos(&stdout(&out));
    assert_eq!(got.len(), 3, "{got:?}");
    // Refused (EACCES), or not found where the kernel searches keyrings the session may not
    // look into (ENOKEY): either way the secret stays unread.
    for (name, value) in &got[..2] {
        assert!(
            value == "errno13" || value == "errno126",
            "{name} of the user's key from a session: {got:?}"
        );
    }
    assert_eq!(
        got[2],
        ("own".to_owned(), "OWN".to_owned()),
        "the session's own key"
    );
    assert_denied_line(
        &out,
        "outside the session (rule self-protection: agents may use only the kernel keys",
    );
    let outside = Command::new("bash")
        .args(["-c", KEYS])
        .uid(1000)
        .gid(1000)
        .output()
        .expect("run outside");
    let outside = errnos(&String::from_utf8_lossy(&outside.stdout));
    assert_eq!(
        outside.get(1).map(|(n, v)| (n.as_str(), v.as_str())),
        Some(("read", "KEYRING-SECRET")),
        "the same uid outside a session reads it: {outside:?}"
    );
}

/// Names process `$1` as the owner of a socket's I/O signals in three ways (`setown=`,
/// `setown_ex=`, `fiosetown=`), then the caller itself (`self=`).
const SIGIO_OWNER: &str = r#"python3 - "$1" <<'EOF'
import fcntl, os, socket, struct, sys
pid = int(sys.argv[1])
a, b = socket.socketpair()
r = a.fileno()
def report(name, act):
    try:
        act(); print(f"{name}=0")
    except OSError as e:
        print(f"{name}={e.errno}")
report("setown", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, pid))
report("setown_ex", lambda: fcntl.fcntl(r, 15, struct.pack("ii", 1, pid)))
report("fiosetown", lambda: fcntl.ioctl(r, 0x8901, struct.pack("i", pid)))
report("self", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, os.getpid()))
EOF"#;

#[test]
fn a_session_cannot_make_the_kernel_signal_a_process_outside_it() {
    let _g = guard();
    let neighbour = neighbour();
    let pid = neighbour.0.id();
    let out = agent(&format!("set -- {pid}\n{SIGIO_OWNER}"));
    assert_eq!(
        errnos(&stdout(&out)),
        [
            ("setown", "13"),
            ("setown_ex", "13"),
            ("fiosetown", "13"),
            ("self", "0")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned())),
        "F_SETOWN and its kin naming the user's process are refused, the caller itself is not"
    );
    assert_denied_line(
        &out,
        &format!("blocked kill of process {pid} outside the session (rule self-protection:"),
    );
    let outside = Command::new("bash")
        .args(["-c", SIGIO_OWNER, "owner", &pid.to_string()])
        .uid(1000)
        .gid(1000)
        .output()
        .expect("run outside");
    let outside = errnos(&String::from_utf8_lossy(&outside.stdout));
    assert!(
        outside.len() == 4 && outside.iter().all(|(_, e)| e == "0"),
        "outside a session: {outside:?}"
    );
}
