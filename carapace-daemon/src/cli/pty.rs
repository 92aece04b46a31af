//! The agent's own terminal. `carapace run` starts the command in a new session (`setsid`),
//! so it has no controlling terminal of the user's: nothing it runs can open `/dev/tty` and
//! type into the shell that started it (`TIOCSTI`, which the kernel layer refuses too, or
//! simply by reading the keys meant for it after it exits). When carapace itself runs on a
//! terminal, the command gets a pseudo-terminal of its own instead, and carapace relays
//! bytes between the two: the user's keys (Ctrl-C included) reach the agent's terminal,
//! whose line discipline turns them into signals for the agent alone; what the agent writes
//! reaches the user's screen; window size changes follow.

use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsRawFd as _, BorrowedFd, OwnedFd};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use nix::pty::{openpty, Winsize};
use nix::sys::termios::{self, SetArg, Termios};

/// A pseudo-terminal made for the command, not relaying yet.
pub struct Terminal {
    master: OwnedFd,
    slave: OwnedFd,
    /// The user's terminal settings, given back when the relay ends.
    outer: Termios,
}

/// Whether fd `fd` of this process is a terminal.
fn is_terminal(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor number.
    unsafe { libc::isatty(fd) == 1 }
}

/// The window size of the terminal at `fd`, if it has one.
fn window_size(fd: BorrowedFd<'_>) -> Option<Winsize> {
    let mut size = Winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `struct winsize` through the pointer, which is ours.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &raw mut size) };
    (r == 0).then_some(size)
}

fn stdin() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process.
    unsafe { BorrowedFd::borrow_raw(0) }
}

/// A terminal for the command when carapace's stdin and stdout are terminals (a user at
/// a shell); `None` otherwise — pipes and files need no relay, and setsid alone keeps the
/// command away from any terminal of the caller's.
pub fn open() -> anyhow::Result<Option<Terminal>> {
    if !is_terminal(0) || !is_terminal(1) {
        return Ok(None);
    }
    let outer = termios::tcgetattr(stdin()).context("cannot read the terminal's settings")?;
    let size = window_size(stdin());
    // The agent's terminal starts with the user's settings and size.
    let pty = openpty(size.as_ref(), Some(&outer)).context("cannot open a pseudo-terminal")?;
    Ok(Some(Terminal {
        master: pty.master,
        slave: pty.slave,
        outer,
    }))
}

impl Terminal {
    /// stdin, stdout and stderr for the command: the terminal's slave side.
    pub fn stdio(&self) -> io::Result<[Stdio; 3]> {
        Ok([
            Stdio::from(self.slave.try_clone()?),
            Stdio::from(self.slave.try_clone()?),
            Stdio::from(self.slave.try_clone()?),
        ])
    }

    /// Once the command runs (holding its copies of the slave side): puts the user's
    /// terminal in raw mode, so that keys go to the agent's terminal as typed, and relays.
    pub fn relay(self) -> anyhow::Result<Relay> {
        let Self {
            master,
            slave,
            outer,
        } = self;
        // The master reads end-of-file (EIO) only once no one holds the slave side.
        drop(slave);
        let mut raw = outer.clone();
        termios::cfmakeraw(&mut raw);
        // Output processing stays on: carapace's own lines (denials) keep their line breaks.
        raw.output_flags = outer.output_flags;
        // Made before the switch: from there on, an error gives the user's terminal back
        // (`Drop`).
        let mut relay = Relay {
            resize: master.try_clone()?,
            outer,
            drained: None,
        };
        termios::tcsetattr(stdin(), SetArg::TCSANOW, &raw)
            .context("cannot put the terminal in raw mode")?;
        let to_agent = File::from(master.try_clone()?);
        let from_agent = File::from(master);
        let keys = File::from(stdin().try_clone_to_owned()?);
        // SAFETY: fd 1 stays open for the life of the process.
        let screen = File::from(unsafe { BorrowedFd::borrow_raw(1) }.try_clone_to_owned()?);
        std::thread::spawn(move || pump(keys, to_agent));
        let (done, drained) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            pump(from_agent, screen);
            let _ = done.send(());
        });
        relay.drained = Some(drained);
        Ok(relay)
    }
}

/// Copies until end of file or an error (EIO on the master once the agent's side closed).
fn pump(mut from: File, mut to: File) {
    let mut buf = [0u8; 4096];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
                    return;
                }
            }
        }
    }
}

/// A running relay; dropping it gives the user's terminal its settings back.
pub struct Relay {
    resize: OwnedFd,
    outer: Termios,
    drained: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Relay {
    /// Gives the agent's terminal the user's new window size (on SIGWINCH); the kernel
    /// signals the agent's foreground processes.
    pub fn follow_size(&self) {
        if let Some(size) = window_size(stdin()) {
            // SAFETY: TIOCSWINSZ reads one `struct winsize` from the pointer, which is ours.
            unsafe { libc::ioctl(self.resize.as_raw_fd(), libc::TIOCSWINSZ, &raw const size) };
        }
    }

    /// Waits up to `wait` for the rest of the command's output: processes it left behind
    /// may keep its terminal open for longer.
    pub async fn drain(&mut self, wait: Duration) {
        if let Some(drained) = self.drained.take() {
            let _ = tokio::time::timeout(wait, drained).await;
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(stdin(), SetArg::TCSANOW, &self.outer);
    }
}
