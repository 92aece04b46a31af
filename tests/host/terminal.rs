//! `carapace run` keeps the agent away from the caller's terminal (issue 23, point 5): the
//! command runs in a session of its own, and when carapace runs on a terminal the command
//! gets a pseudo-terminal of its own, relayed to the caller's. The caller here is a real
//! interactive setup: a pseudo-terminal made by the test, carapace's controlling terminal.
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use carapace_tests::{cli_command, Daemon};

use super::{setup, CARAPACE, CARAPACED};

/// A terminal pair: (master, slave, the slave's device name).
fn terminal() -> (OwnedFd, OwnedFd, String) {
    let (mut master, mut slave) = (-1, -1);
    let mut name = [0 as libc::c_char; 64];
    // SAFETY: openpty writes two descriptors and a NUL-terminated name into our buffers
    // (64 bytes is more than any /dev/pts/N).
    let r = unsafe {
        libc::openpty(
            &raw mut master,
            &raw mut slave,
            name.as_mut_ptr(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned two fresh descriptors we now own; `name` is NUL-terminated.
    unsafe {
        (
            OwnedFd::from_raw_fd(master),
            OwnedFd::from_raw_fd(slave),
            std::ffi::CStr::from_ptr(name.as_ptr())
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// Starts carapace as a shell on `slave` would: a session leader with `slave` as its
/// controlling terminal; its stdin and stdout are the terminal when `on_terminal`, pipes
/// otherwise.
fn start(d: &Daemon, slave: &OwnedFd, on_terminal: bool, script: &str) -> Child {
    let mut cmd = cli_command(
        Path::new(CARAPACE),
        &d.socket,
        ["run", "--", "sh", "-c", script],
        &[],
    );
    let tty = slave.as_raw_fd();
    if on_terminal {
        let io = || Stdio::from(slave.try_clone().expect("dup the terminal"));
        cmd.stdin(io()).stdout(io()).stderr(io());
    } else {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    }
    // SAFETY: setsid and ioctl are async-signal-safe and allocate nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 || libc::ioctl(tty, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("start carapace run")
}

/// Reads the terminal's master side in a thread, handing over chunks.
fn reader(master: &OwnedFd) -> mpsc::Receiver<String> {
    let mut file = File::from(master.try_clone().expect("dup master"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = file.read(&mut buf) {
            if n == 0
                || tx
                    .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                    .is_err()
            {
                return;
            }
        }
    });
    rx
}

/// Collects output until it contains `want` (or a minute passes).
fn until(rx: &mpsc::Receiver<String>, seen: &mut String, want: &str) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while !seen.contains(want) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(chunk) => seen.push_str(&chunk),
            Err(e) => panic!("no `{want}` on the terminal ({e}); it shows:\n{seen}"),
        }
    }
}

/// ICANON of the terminal at `fd`: on at a shell prompt, off while a relay has it raw.
fn canonical(fd: &OwnedFd) -> bool {
    // SAFETY: tcgetattr fills the zeroed termios we own.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        assert_eq!(libc::tcgetattr(fd.as_raw_fd(), &raw mut t), 0);
        t.c_lflag & libc::ICANON != 0
    }
}

const REPORT: &str = "echo \"tty=$(tty) sid=$(cut -d' ' -f6 /proc/$$/stat)\"";

#[test]
fn an_agent_on_a_terminal_gets_one_of_its_own() {
    let Some(dir) = setup("an_agent_on_a_terminal_gets_one_of_its_own") else {
        return;
    };
    let d = Daemon::start(Path::new(CARAPACED), dir.path(), &[]);
    let (master, slave, outer) = terminal();
    let rx = reader(&master);
    let script = format!("{REPORT}; read line; echo \"got:$line\"; exit 3");
    let mut child = start(&d, &slave, true, &script);
    let carapace_sid = child.id().to_string();
    let mut seen = String::new();
    until(&rx, &mut seen, "sid=");
    until(&rx, &mut seen, "\n");
    let line = seen
        .lines()
        .find(|l| l.contains("tty="))
        .unwrap_or_default()
        .trim_end()
        .to_owned();
    assert!(
        line.contains("tty=/dev/pts/") && !line.contains(&format!("tty={outer} ")),
        "the agent's terminal is not the caller's ({outer}): {line}"
    );
    assert!(
        line.contains("sid=") && !line.ends_with(&format!("sid={carapace_sid}")),
        "the agent runs in a session of its own: {line}"
    );
    assert!(
        !canonical(&slave),
        "the caller's terminal relays raw keys meanwhile"
    );
    // Keys typed at the caller's terminal reach the agent, through its terminal's line
    // discipline (a carriage return ends the line, as a user's Enter does).
    let mut keys = File::from(master.try_clone().expect("dup master"));
    keys.write_all(b"hello\r").expect("type");
    until(&rx, &mut seen, "got:hello");
    let status = child.wait().expect("wait for carapace");
    assert_eq!(
        status.code(),
        Some(3),
        "carapace exits with the agent's status"
    );
    assert!(
        canonical(&slave),
        "the caller's terminal got its settings back"
    );
}

#[test]
fn an_agent_without_a_terminal_cannot_reach_the_callers() {
    let Some(dir) = setup("an_agent_without_a_terminal_cannot_reach_the_callers") else {
        return;
    };
    let d = Daemon::start(Path::new(CARAPACED), dir.path(), &[]);
    let (_master, slave, _) = terminal();
    // carapace's controlling terminal is the caller's, but its output goes to pipes: the
    // agent gets no terminal, and cannot open the caller's through /dev/tty.
    let script = format!("{REPORT}; echo probe > /dev/tty && echo reached || echo unreachable");
    let child = start(&d, &slave, false, &script);
    let carapace_sid = child.id().to_string();
    let out = child.wait_with_output().expect("wait for carapace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("tty=not a tty"), "{stdout}");
    assert!(
        !stdout.contains(&format!("sid={carapace_sid}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains("unreachable"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}
