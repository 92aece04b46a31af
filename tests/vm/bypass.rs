//! Bypass attempts against the kernel floor (issue 9): each test is an attack an agent with a
//! shell could try, run as uid 1000 inside `carapace run`, and asserts that the protected
//! file, binary or address stays out of reach (EACCES), with a control showing that the
//! mechanism itself works in the VM (so the test could fail). The last test runs benign
//! workloads and asserts that they meet no denial at all.

use std::{
    fs,
    net::UdpSocket,
    os::unix::{fs::PermissionsExt as _, net::UnixListener},
    path::Path,
};

use super::{agent, assert_denied_line, guard, py_errno, stderr, stdout, HardLink};

/// Files made before the daemon compiles the rules (called by `fixture` before it restarts
/// the daemon): a file deeper in a protected tree with a hard link and a symlink to it from
/// an unprotected directory, and a container-runtime socket.
pub(crate) fn before_rules() {
    fs::create_dir_all("/srv/secret/deep").expect("create /srv/secret/deep");
    fs::set_permissions("/srv/secret/deep", fs::Permissions::from_mode(0o777)).expect("chmod");
    fs::write("/srv/secret/deep/pre.txt", "fixture\n").expect("write pre.txt");
    fs::set_permissions(
        "/srv/secret/deep/pre.txt",
        fs::Permissions::from_mode(0o666),
    )
    .expect("chmod pre.txt");
    let _ = fs::remove_file("/srv/open/pre-hardlink.txt");
    fs::hard_link("/srv/secret/deep/pre.txt", "/srv/open/pre-hardlink.txt").expect("hard link");
    let _ = fs::remove_file("/srv/open/pre-symlink");
    std::os::unix::fs::symlink("/srv/secret/a.txt", "/srv/open/pre-symlink").expect("symlink");
    let _ = fs::remove_file("/run/docker.sock");
    let listener = UnixListener::bind("/run/docker.sock").expect("bind /run/docker.sock");
    fs::set_permissions("/run/docker.sock", fs::Permissions::from_mode(0o777)).expect("chmod");
    // The runtime's socket lives as long as the VM, as a real one would.
    std::mem::forget(listener);
}

/// Writes a root-owned helper script for the agent to run.
fn script(path: &str, text: &str) {
    fs::write(path, text).unwrap_or_else(|e| panic!("write {path}: {e}"));
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).expect("chmod script");
}

fn assert_no_secret(out: &std::process::Output) {
    assert!(
        !stdout(out).contains("fixture"),
        "the protected content leaked:\n{}",
        stdout(out)
    );
}

#[test]
fn hard_links_into_a_protected_tree_are_denied() {
    let _g = guard();
    // Made by root before the rules loaded, to a file deep in a prefix-rule tree.
    let out = agent("cat /srv/open/pre-hardlink.txt");
    assert_no_secret(&out);
    assert_denied_line(
        &out,
        "blocked read of /srv/open/pre-hardlink.txt (rule secret-dir",
    );

    // Made by root after the rules loaded, to a file that existed when they loaded.
    let link = "/srv/open/post-hardlink.txt";
    let _link = HardLink::new("/srv/secret/a.txt", link);
    let out = agent(&format!("cat {link}"));
    assert_no_secret(&out);
    assert_denied_line(&out, &format!("blocked read of {link} (rule secret-dir"));

    // Made by the agent, to files old and new, with the kernel's own protected_hardlinks
    // switched off (as on hosts without systemd's default): only Carapace stands in the way.
    let sysctl = "/proc/sys/fs/protected_hardlinks";
    let before = fs::read_to_string(sysctl).expect("read protected_hardlinks");
    fs::write(sysctl, "0").expect("protected_hardlinks=0");
    fs::write("/srv/secret/late.txt", "fixture\n").expect("write late.txt");
    fs::set_permissions("/srv/secret/late.txt", fs::Permissions::from_mode(0o666))
        .expect("chmod late.txt");
    for f in [
        "/tmp/agent-link-a",
        "/tmp/agent-link-late",
        "/tmp/moved-late",
    ] {
        let _ = fs::remove_file(f);
    }
    let out = agent(
        "ln /srv/secret/a.txt /tmp/agent-link-a; echo ln-a=$?; cat /tmp/agent-link-a; \
         ln /srv/secret/late.txt /tmp/agent-link-late; echo ln-late=$?; cat /tmp/agent-link-late; \
         mv /srv/secret/late.txt /tmp/moved-late; echo mv=$?; cat /tmp/moved-late; \
         mv /srv/secret/deep /tmp/moved-deep; echo mvdir=$?",
    );
    fs::write(sysctl, before.trim()).expect("restore protected_hardlinks");
    assert_no_secret(&out);
    for step in ["ln-a", "ln-late", "mv", "mvdir"] {
        assert!(
            !stdout(&out).contains(&format!("{step}=0")),
            "{step} must be refused:\n{}",
            stdout(&out)
        );
    }
    assert!(Path::new("/srv/secret/late.txt").exists());
    assert!(Path::new("/srv/secret/deep/pre.txt").exists());
}

#[test]
fn symlink_made_before_the_rules_is_denied() {
    let _g = guard();
    let out = agent("cat /srv/open/pre-symlink");
    assert_no_secret(&out);
    assert_denied_line(&out, "blocked read of /srv/secret/a.txt (rule secret-dir");
}

#[test]
fn reopen_through_proc_self_fd_and_dev_fd_is_denied() {
    let _g = guard();
    if !Path::new("/dev/fd").exists() {
        std::os::unix::fs::symlink("/proc/self/fd", "/dev/fd").expect("link /dev/fd");
    }
    // An O_PATH descriptor opens nothing (no file_open), so the agent gets one; reopening it
    // through /proc or /dev/fd is a real open of the protected file.
    for dir in ["/proc/self/fd", "/dev/fd"] {
        let out = agent(&py_errno(&format!(
            "fd = os.open(\"/srv/secret/a.txt\", os.O_PATH); print(\"opath\", fd); \
             open(\"{dir}/%d\" % fd).read()"
        )));
        assert!(stdout(&out).contains("opath"), "O_PATH itself works");
        assert!(stdout(&out).trim_end().ends_with("13"), "{dir} reopen");
        assert_denied_line(&out, "blocked read of /srv/secret/a.txt (rule secret-dir");
    }
    // An inherited descriptor reopened by name.
    let out = agent("exec 3</srv/open/notes.txt; cat /proc/self/fd/3 >/dev/null && echo reopen-ok");
    assert!(stdout(&out).contains("reopen-ok"), "the mechanism works");
}

#[test]
fn o_path_directory_and_openat_are_denied() {
    let _g = guard();
    let out = agent(&py_errno(
        "d = os.open(\"/srv/secret\", os.O_PATH | os.O_DIRECTORY); \
         os.open(\"a.txt\", os.O_RDONLY, dir_fd=d)",
    ));
    assert_eq!(stdout(&out).trim(), "13");
    let out = agent(&py_errno(
        "d = os.open(\"/srv/open\", os.O_PATH | os.O_DIRECTORY); \
         os.open(\"../secret/deep/pre.txt\", os.O_RDONLY, dir_fd=d)",
    ));
    assert_eq!(stdout(&out).trim(), "13");
    assert_denied_line(
        &out,
        "blocked read of /srv/secret/deep/pre.txt (rule secret-dir",
    );
    let out = agent(&py_errno(
        "d = os.open(\"/srv/open\", os.O_PATH | os.O_DIRECTORY); \
         os.open(\"notes.txt\", os.O_RDONLY, dir_fd=d)",
    ));
    assert_eq!(stdout(&out).trim(), "0", "openat of an open file works");
}

#[test]
fn relative_paths_from_odd_working_directories_are_denied() {
    let _g = guard();
    let attempts = [
        "cd /srv/secret && cat a.txt",
        "cd /srv/secret/deep && cat ../a.txt",
        "cd / && cat srv//secret/./a.txt",
        "cd /srv/open && cat ../secret/../secret/a.txt",
        "cd /proc/self/root/srv && cat secret/a.txt",
        "cat /proc/self/root/srv/secret/a.txt",
        "cd /srv/secret && cat /proc/self/cwd/a.txt",
    ];
    for a in attempts {
        let out = agent(a);
        assert_no_secret(&out);
        assert!(!out.status.success(), "`{a}` must fail");
        assert_denied_line(&out, "blocked read of /srv/secret/a.txt (rule secret-dir");
    }
}

#[test]
fn mount_namespaces_and_chroot_do_not_expose_protected_files() {
    let _g = guard();
    // A bind mount of the protected tree in a new user + mount namespace.
    let out = agent(
        "unshare -Urm sh -c 'mount --bind /srv/secret /mnt && echo mounted; \
         cat /mnt/a.txt; cat /mnt/deep/pre.txt'; echo done",
    );
    assert!(stdout(&out).contains("done"));
    assert_no_secret(&out);
    // chroot above the protected tree changes every path the kernel reports.
    script(
        "/tmp/chroot-attack.py",
        r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
    print("unshare", ctypes.get_errno())
    raise SystemExit
try:
    os.chroot("/srv")
except OSError as e:
    print("chroot", e.errno)
    raise SystemExit
for p in ["/secret/a.txt", "/secret/deep/pre.txt", "/open/pre-hardlink.txt", "/open/notes.txt"]:
    try:
        open(p).read()
        print(p, 0)
    except OSError as e:
        print(p, e.errno)
"#,
    );
    let out = agent("python3 /tmp/chroot-attack.py");
    let text = stdout(&out);
    assert_no_secret(&out);
    // A private root would let every path be spelled otherwise: the chroot itself is
    // refused, in a user namespace too, where it needs no privilege of the host's.
    assert!(
        text.starts_with("unshare") || text.trim() == "chroot 13",
        "chroot must be refused with EACCES:\n{text}"
    );
    if !text.starts_with("unshare") {
        assert_denied_line(
            &out,
            "blocked chroot into /srv (rule no-chroot: Agents may not change their root)",
        );
    }
    // Outside a session the same script's chroot works.
    let outside = std::process::Command::new("python3")
        .arg("/tmp/chroot-attack.py")
        .output()
        .expect("run outside");
    assert!(
        String::from_utf8_lossy(&outside.stdout).contains("/open/notes.txt 0"),
        "the chroot works outside a session: {outside:?}"
    );
}

#[test]
fn copies_renames_and_loader_runs_of_a_blocked_binary_cannot_run() {
    let _g = guard();
    for f in ["/tmp/bt-copy", "/tmp/bt-sym"] {
        let _ = fs::remove_file(f);
    }
    let out = agent(
        "cp /usr/local/bin/blocked-tool /tmp/bt-copy; echo cp=$?; /tmp/bt-copy; echo copy=$?",
    );
    assert!(stdout(&out).contains("cp=1"), "the copy needs a read");
    assert!(!stdout(&out).contains("copy=0"), "the copy must not run");
    let out = agent("ln -s /usr/local/bin/blocked-tool /tmp/bt-sym; /tmp/bt-sym; echo sym=$?");
    assert!(stdout(&out).contains("sym=126"));
    // A hard link behaves like a rename: same inode, new name.
    let renamed = "/usr/local/bin/renamed-tool";
    let _renamed = HardLink::new("/usr/local/bin/blocked-tool", renamed);
    let out = agent(&format!("{renamed}; echo renamed=$?"));
    assert!(stdout(&out).contains("renamed=126"));
    assert_denied_line(&out, &format!(" of {renamed} (rule blocked-tool"));
    // The dynamic loader maps the binary with plain reads, never an exec of it.
    let out = agent("/lib64/ld-linux-x86-64.so.2 /usr/local/bin/blocked-tool; echo ldso=$?");
    assert!(!stdout(&out).contains("ldso=0"), "ld.so must not run it");
    let out = agent("/lib64/ld-linux-x86-64.so.2 /usr/bin/true; echo ldso=$?");
    assert!(stdout(&out).contains("ldso=0"), "ld.so runs other binaries");
    // memfd: the bytes must be read first.
    script(
        "/tmp/memfd-exec.py",
        r#"import os, sys
try:
    data = open(sys.argv[1], "rb").read()
except OSError as e:
    print("read", e.errno)
    raise SystemExit(3)
fd = os.memfd_create("x")
os.write(fd, data)
os.execv("/proc/self/fd/%d" % fd, ["x"])
"#,
    );
    let out = agent("python3 /tmp/memfd-exec.py /usr/local/bin/blocked-tool; echo memfd=$?");
    assert!(stdout(&out).contains("read 13"), "{}", stdout(&out));
    let out = agent("python3 /tmp/memfd-exec.py /usr/bin/true; echo memfd=$?");
    assert!(
        stdout(&out).contains("memfd=0"),
        "memfd exec works in the VM"
    );
}

#[test]
fn interpreters_are_held_to_the_same_rules() {
    let _g = guard();
    let out = agent(&py_errno(
        "import subprocess; print(subprocess.run([\"cat\", \"/srv/secret/a.txt\"]).returncode); \
         open(\"/srv/secret/deep/pre.txt\").read()",
    ));
    assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), ["1", "13"]);
    let out = agent(
        r#"bash -c 'echo "$(</srv/secret/a.txt)"'; sh -c 'read l < /srv/secret/a.txt; echo "$l"'"#,
    );
    assert_no_secret(&out);
    assert!(stderr(&out).contains("Permission denied"));
    assert!(
        Path::new("/usr/bin/perl").exists(),
        "perl is missing from the VM image (cargo xtask setup installs it)"
    );
    {
        let out = agent(
            r#"perl -e 'open(my $f, "<", "/srv/secret/a.txt") or print 0+$!, "\n"; print <$f>'"#,
        );
        assert_eq!(stdout(&out).trim(), "13");
        let out =
            agent(r#"perl -e 'open(my $f, "<", "/srv/open/notes.txt") or die; print "ok\n"'"#);
        assert_eq!(stdout(&out).trim(), "ok", "perl runs in the VM");
    }
}

/// io_uring from Python through ctypes: setup, the two rings, one IORING_OP_OPENAT.
const IO_URING_OPEN: &str = r#"import ctypes, mmap, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 4, params)
if fd < 0:
    print("setup", ctypes.get_errno())
    raise SystemExit
sq_entries, cq_entries = struct.unpack_from("II", params, 0)
sq_off = struct.unpack_from("IIIIIIII", params, 40)
cq_off = struct.unpack_from("IIIIIIII", params, 80)
sq = mmap.mmap(fd, sq_off[6] + sq_entries * 4, offset=0)
cq = mmap.mmap(fd, cq_off[5] + cq_entries * 16, offset=0x8000000)
sqes = mmap.mmap(fd, sq_entries * 64, offset=0x10000000)
path = ctypes.create_string_buffer(sys.argv[1].encode())
sqe = struct.pack("<BBHiQQIIQ", 18, 0, 0, -100, 0, ctypes.addressof(path), 0, 0, 7)
sqes[0:len(sqe)] = sqe
tail = struct.unpack_from("I", sq, sq_off[1])[0]
mask = struct.unpack_from("I", sq, sq_off[2])[0]
struct.pack_into("I", sq, sq_off[6] + (tail & mask) * 4, 0)
struct.pack_into("I", sq, sq_off[1], tail + 1)
if libc.syscall(426, fd, 1, 1, 1, None, 0) < 0:
    print("enter", ctypes.get_errno())
    raise SystemExit
head = struct.unpack_from("I", cq, cq_off[0])[0]
cmask = struct.unpack_from("I", cq, cq_off[2])[0]
user, res = struct.unpack_from("<Qi", cq, cq_off[5] + (head & cmask) * 16)
print("res", res)
"#;

#[test]
fn io_uring_openat_is_denied() {
    let _g = guard();
    script("/tmp/uring-open.py", IO_URING_OPEN);
    let out = agent("python3 /tmp/uring-open.py /srv/open/notes.txt");
    let text = stdout(&out);
    assert!(
        text.starts_with("res ") && !text.contains("res -"),
        "an io_uring open of an open file works:\n{text}"
    );
    for p in ["/srv/secret/a.txt", "/srv/open/pre-hardlink.txt"] {
        let out = agent(&format!("python3 /tmp/uring-open.py {p}"));
        assert_eq!(stdout(&out).trim(), "res -13", "io_uring open of {p}");
    }
}

#[test]
fn ld_preload_does_not_change_the_verdict() {
    let _g = guard();
    let lib = "/usr/lib/x86_64-linux-gnu/libz.so.1";
    let out = agent(&format!(
        "LD_PRELOAD={lib} cat /srv/secret/a.txt; LD_PRELOAD={lib} /usr/local/bin/blocked-tool; echo st=$?"
    ));
    assert_no_secret(&out);
    assert!(stdout(&out).contains("st=126"));
    // A preload library inside a protected tree cannot even be loaded.
    fs::copy(lib, "/srv/secret/preload.so").expect("copy preload");
    let out = agent("LD_PRELOAD=/srv/secret/preload.so /usr/bin/true; echo st=$?");
    assert!(stderr(&out).contains("preload.so"), "ld.so reports it");
}

#[test]
fn metadata_address_spellings_are_one_address() {
    let _g = guard();
    // inet_aton forms, all the same four bytes; connect fails with EACCES for each.
    let v4 = [
        "169.254.169.254",
        "2852039166",
        "0xa9fea9fe",
        "0251.0376.0251.0376",
        "169.254.43518",
        "0xa9.0xfe.0xa9.0xfe",
    ];
    let list = v4.map(|s| format!("\"{s}\"")).join(", ");
    let out = agent(&format!(
        "python3 -c 'import socket
for h in [{list}]:
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((h, 80)); e = 0
    except OSError as x:
        e = x.errno
    print(h, socket.inet_aton(h).hex(), e)
for h in [\"::ffff:169.254.169.254\", \"::ffff:a9fe:a9fe\"]:
    s = socket.socket(socket.AF_INET6); s.settimeout(2)
    try:
        s.connect((h, 80)); e = 0
    except OSError as x:
        e = x.errno
    print(h, e)
s = socket.socket(); s.settimeout(2)
try:
    s.connect((\"169.254.169.253\", 80)); e = 0
except OSError as x:
    e = x.errno
print(\"neighbour\", e)'"
    ));
    let text = stdout(&out);
    for h in v4 {
        assert!(
            text.contains(&format!("{h} a9fea9fe 13")),
            "{h} is 169.254.169.254 and denied:\n{text}"
        );
    }
    for h in ["::ffff:169.254.169.254", "::ffff:a9fe:a9fe"] {
        assert!(text.contains(&format!("{h} 13")), "{h}:\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("neighbour") && !l.ends_with(" 13")),
        "the next address is not the rule's:\n{text}"
    );
    assert_denied_line(&out, "blocked network of 169.254.169.254:80 (rule metadata");
    let out = agent("curl -s -m 3 http://2852039166/latest/meta-data/; echo curl=$?");
    assert!(stdout(&out).contains("curl=7"), "curl cannot connect");
    assert_denied_line(&out, "blocked network of 169.254.169.254:80 (rule metadata");
}

#[test]
fn udp_sendto_without_connect_is_denied() {
    let _g = guard();
    let open = UdpSocket::bind("127.0.0.2:8083").expect("bind udp 8083");
    let blocked = UdpSocket::bind("127.0.0.2:8081").expect("bind udp 8081");
    blocked
        .set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .expect("timeout");
    let out = agent(&py_errno(
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.sendto(b\"open\", (\"127.0.0.2\", 8083)); print(\"sent\"); \
         s.sendto(b\"leak\", (\"127.0.0.2\", 8081))",
    ));
    assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), ["sent", "13"]);
    assert_denied_line(
        &out,
        "blocked network of 127.0.0.2:8081 (rule blocked-host-port",
    );
    let mut buf = [0u8; 16];
    assert!(blocked.recv(&mut buf).is_err(), "nothing reached the port");
    let n = open.recv(&mut buf).expect("the open port got its datagram");
    assert_eq!(&buf[..n], b"open");
    let out = agent(&py_errno(
        "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); \
         s.sendto(b\"x\", (\"::ffff:169.254.169.254\", 53))",
    ));
    assert_eq!(stdout(&out).trim(), "13", "IPv4-mapped sendto");
    let out = agent(&py_errno(
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         s.sendmsg([b\"x\"], [], 0, (\"2852039166\", 53))",
    ));
    assert_eq!(stdout(&out).trim(), "13", "sendmsg with an address");
}

#[test]
fn container_runtime_socket_is_denied_however_it_is_spelled() {
    let _g = guard();
    let _ = fs::remove_file("/tmp/d.sock");
    let spellings = [
        ("/", "/run/docker.sock"),
        ("/run", "docker.sock"),
        ("/", "run//docker.sock"),
        ("/tmp", "../run/./docker.sock"),
        ("/", "/proc/self/root/run/docker.sock"),
        ("/", "/tmp/d.sock"),
    ];
    for (cwd, path) in spellings {
        let out = agent(&format!(
            "ln -sf /run/docker.sock /tmp/d.sock; {}",
            py_errno(&format!(
                "os.chdir(\"{cwd}\"); socket.socket(socket.AF_UNIX).connect(\"{path}\")"
            ))
        ));
        assert_eq!(stdout(&out).trim(), "13", "{path} from {cwd}");
    }
    assert!(std::os::unix::net::UnixStream::connect("/run/docker.sock").is_ok());
}

#[test]
fn paths_at_and_over_the_kernel_limit() {
    let _g = guard();
    // PATH_MAX is 256 with the NUL: a 255-byte path is matched, a 256-byte one fails closed.
    let base = "/tmp/long";
    let _ = fs::remove_dir_all(base);
    let mut dir = base.to_owned();
    while dir.len() < 200 {
        dir.push_str("/dddddddddddddddddddd");
    }
    fs::create_dir_all(&dir).expect("create long dirs");
    let at = format!("{dir}/{}", "a".repeat(255 - dir.len() - 1));
    let over = format!("{dir}/{}", "b".repeat(256 - dir.len() - 1));
    assert_eq!((at.len(), over.len()), (255, 256));
    for p in [&at, &over] {
        fs::write(p, "long\n").expect("write long file");
        fs::set_permissions(p, fs::Permissions::from_mode(0o666)).expect("chmod");
    }
    let out = agent(&format!("cat {at}"));
    assert_eq!(
        stdout(&out),
        "long\n",
        "a path at the limit is matched, not refused"
    );
    let out = agent(&format!("cat {over}; cd {dir} && cat ./b*"));
    assert!(stdout(&out).is_empty(), "over the limit fails closed");
    assert!(stderr(&out).contains("path-too-long"), "{}", stderr(&out));
    // A protected file reached through a path over the limit stays protected.
    let deep = format!("/srv/secret/{}", "e".repeat(250));
    fs::create_dir_all(&deep).expect("deep secret dir");
    fs::write(format!("{deep}/x"), "fixture\n").expect("deep secret");
    let out = agent(&format!("cd {deep} && cat x"));
    assert_no_secret(&out);
}

const DOUBLE_FORK: &str = r#"import os, time
out = "/tmp/pyfork.out"
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        try:
            open("/srv/secret/a.txt").read()
            r = "0"
        except OSError as e:
            r = str(e.errno)
        open(out, "w").write(r)
    os._exit(0)
os.waitpid(pid, 0)
for _ in range(100):
    if os.path.exists(out) and open(out).read():
        break
    time.sleep(0.1)
print("grandchild", open(out).read())
"#;

#[test]
fn setsid_and_double_fork_stay_in_the_session() {
    let _g = guard();
    for f in ["/tmp/dfork.out", "/tmp/pyfork.out"] {
        let _ = fs::remove_file(f);
    }
    let out = agent(
        "setsid bash -c '( (cat /srv/secret/a.txt; echo done) >/tmp/dfork.out 2>&1 & )'; \
         for i in $(seq 1 100); do grep -q done /tmp/dfork.out 2>/dev/null && break; sleep 0.1; done; \
         cat /tmp/dfork.out",
    );
    assert_no_secret(&out);
    assert!(
        stdout(&out).contains("Permission denied"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).contains("done"));
    script("/tmp/double-fork.py", DOUBLE_FORK);
    let out = agent("python3 /tmp/double-fork.py");
    assert_eq!(stdout(&out).trim(), "grandchild 13");
}

/// Builds a minimal pure-Python wheel (a zip with its metadata and RECORD) into a directory:
/// a local package mirror for `pip install --no-index --find-links`.
const MAKE_WHEEL: &str = r#"import base64, hashlib, os, sys, zipfile
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
info = "hello_carapace-1.0.dist-info"
files = {
    "hello_carapace/__init__.py": "def greet():\n    return 'hello from a local wheel'\n",
    info + "/METADATA": "Metadata-Version: 2.1\nName: hello-carapace\nVersion: 1.0\n",
    info + "/WHEEL": "Wheel-Version: 1.0\nGenerator: carapace-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
record.append(info + "/RECORD,,")
with zipfile.ZipFile(os.path.join(out, "hello_carapace-1.0-py3-none-any.whl"), "w") as z:
    for path, text in files.items():
        z.writestr(path, text)
    z.writestr(info + "/RECORD", "\n".join(record) + "\n")
"#;

const PIP_WHEEL: &str = "/usr/share/python-wheels/pip-23.0.1-py3-none-any.whl";

#[test]
fn benign_workloads_run_with_zero_denials() {
    let _g = guard();
    let root = "/tmp/benign";
    let _ = fs::remove_dir_all(root);
    fs::create_dir_all(root).expect("create benign dir");
    fs::set_permissions(root, fs::Permissions::from_mode(0o777)).expect("chmod");
    script("/tmp/make-wheel.py", MAKE_WHEEL);
    // Both are in the VM image when the host has them (`cargo xtask setup` installs them).
    for tool in ["/usr/bin/git", PIP_WHEEL] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing from the VM image"
        );
    }
    let mut steps = vec![
        "set -e; export HOME=/tmp/benign/home; mkdir -p $HOME; cd /tmp/benign".to_owned(),
        "mkdir -p proj/calc && cd proj".to_owned(),
        r"printf 'def add(a, b):\n    return a + b\n' > calc/__init__.py".to_owned(),
        r"printf 'import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n' > test_calc.py".to_owned(),
        "python3 -m unittest 2>&1 | tail -1".to_owned(),
    ];
    steps.push(
            "git init -q . && git add -A && git -c user.name=agent -c user.email=agent@example.com \
             commit -q -m first && echo commits=$(git log --oneline | wc -l) && git status --short | wc -l"
            .to_owned(),
    );
    steps.push(format!(
            "python3 /tmp/make-wheel.py /tmp/benign/mirror && \
             python3 {PIP_WHEEL}/pip install -q --no-cache-dir --disable-pip-version-check \
             --no-index --find-links /tmp/benign/mirror --target /tmp/benign/site hello-carapace && \
             PYTHONPATH=/tmp/benign/site python3 -c 'import hello_carapace; print(hello_carapace.greet())'"
    ));
    steps.push("echo all-done".to_owned());
    let out = agent(&steps.join("\n"));
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "benign workload failed:\n{text}\n{}",
        stderr(&out)
    );
    assert!(text.contains("OK"), "unittest passed:\n{text}");
    assert!(text.contains("commits=1"), "git commit and log:\n{text}");
    assert!(
        text.contains("hello from a local wheel"),
        "pip install:\n{text}"
    );
    assert!(text.contains("all-done"));
    assert!(
        !stderr(&out).contains("carapace: blocked"),
        "a benign workload met a denial:\n{}",
        stderr(&out)
    );
}
