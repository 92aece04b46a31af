//! Shared helpers for integration tests: start a `carapaced` on a private socket and data
//! directory (stopped by a drop guard), and run the `carapace` CLI against it.
//!
//! Helpers panic with a message that says what went wrong, so a failing test keeps its
//! context.
pub mod agent_cli;
pub mod anthropic;
pub mod cdp;
pub mod gemini;
pub mod http;
pub mod loopback;
pub mod openai;

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a daemon may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Whether the tests run as root (the host tests that create cgroups need it).
#[must_use]
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A running `carapaced`, stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Daemon {
    child: Option<Child>,
    pub data_dir: PathBuf,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts `bin` with `--data-dir DIR/data --socket DIR/run/carapace.sock` plus `extra`
    /// and waits until it serves.
    #[must_use]
    pub fn start(bin: &Path, dir: &Path, extra: &[&str]) -> Self {
        let data_dir = dir.join("data");
        let socket = dir.join("run").join("carapace.sock");
        Self::start_with(bin, &data_dir, &socket, extra)
    }

    /// Like [`Daemon::start`] with extra environment variables (e.g. the HOME whose `~` the
    /// rules should expand to).
    #[must_use]
    pub fn start_env(bin: &Path, dir: &Path, extra: &[&str], env: &[(&str, &OsStr)]) -> Self {
        let data_dir = dir.join("data");
        let socket = dir.join("run").join("carapace.sock");
        Self::start_with_env(bin, &data_dir, &socket, extra, env)
    }

    /// Like [`Daemon::start`] with explicit paths (to restart on the same state).
    #[must_use]
    pub fn start_with(bin: &Path, data_dir: &Path, socket: &Path, extra: &[&str]) -> Self {
        Self::start_with_env(bin, data_dir, socket, extra, &[])
    }

    fn start_with_env(
        bin: &Path,
        data_dir: &Path,
        socket: &Path,
        extra: &[&str],
        env: &[(&str, &OsStr)],
    ) -> Self {
        // One log per start, next to the data directory, so a restart keeps the first log.
        let log = (1..10_000)
            .map(|n| data_dir.with_file_name(format!("carapaced-{n}.log")))
            .find(|p| !p.exists())
            .unwrap_or_else(|| data_dir.with_file_name("carapaced.log"));
        let child = spawn_logged(
            Command::new(bin)
                .arg("--data-dir")
                .arg(data_dir)
                .arg("--socket")
                .arg(socket)
                .args(extra)
                .envs(env.iter().copied())
                .env("NO_COLOR", "1")
                .env("RUST_LOG", "info"),
            &log,
        );
        let mut daemon = Self {
            child: Some(child),
            data_dir: data_dir.to_path_buf(),
            socket: socket.to_path_buf(),
            log,
        };
        daemon.wait_serving();
        daemon
    }

    fn wait_serving(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if self.log_text().contains("serving") && self.socket.exists() {
                return;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "carapaced exited ({status}) before serving; its log:\n{}",
                        self.log_text()
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "carapaced did not serve {} within {START_TIMEOUT:?}; its log:\n{}",
                self.socket.display(),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The daemon's pid while it runs (to signal it).
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Everything the daemon logged so far.
    #[must_use]
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The URL of the gateway a daemon started with `--gateway ADDR` says it serves.
    #[must_use]
    pub fn gateway_url(&self) -> String {
        let log = self.log_text();
        log.lines()
            .find_map(|l| l.split("gateway listening on ").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("the daemon did not say where the gateway listens:\n{log}"))
            .to_owned()
    }

    /// Sends SIGTERM and waits for the daemon to exit (SIGKILL after 5 s).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) on the pid of a child we spawned and have not reaped yet.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Spawns `cmd` with stdout and stderr appended to `log`.
fn spawn_logged(cmd: &mut Command, log: &Path) -> Child {
    if let Some(dir) = log.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    }
    let file =
        fs::File::create(log).unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
    let err = file
        .try_clone()
        .unwrap_or_else(|e| panic!("cannot duplicate the log handle: {e}"));
    cmd.stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// Runs the CLI `bin` against `socket` with `args` and extra environment; waits for it.
#[must_use]
pub fn cli<I, S>(bin: &Path, socket: &Path, args: I, env: &[(&str, &str)]) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    cli_command(bin, socket, args, env)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()))
}

/// The CLI command, not yet started (for tests that run it in the background).
#[must_use]
pub fn cli_command<I, S>(bin: &Path, socket: &Path, args: I, env: &[(&str, &str)]) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(bin);
    cmd.arg("--socket")
        .arg(socket)
        .args(args)
        .stdin(Stdio::null());
    // Tests decide about sudo themselves.
    cmd.env_remove("SUDO_UID").env_remove("SUDO_GID");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Text of an output stream, for assertions.
#[must_use]
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether `text` holds `<name>:<line>:<column>` with numeric line and column.
#[must_use]
pub fn has_file_line_column(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let rest = &text[at + name.len()..];
        let mut parts = rest.splitn(3, ':');
        let (Some(""), Some(line), Some(col)) = (parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        let col_digits = col.chars().take_while(char::is_ascii_digit).count();
        !line.is_empty() && line.chars().all(|c| c.is_ascii_digit()) && col_digits > 0
    })
}

#[cfg(test)]
mod tests {
    use super::has_file_line_column;

    #[test]
    fn file_line_column() {
        assert!(has_file_line_column(
            "/d/rules.yaml:3:14: error: x",
            "rules.yaml"
        ));
        assert!(!has_file_line_column("/d/rules.yaml: error", "rules.yaml"));
        assert!(!has_file_line_column("rules.yaml:a:1", "rules.yaml"));
    }
}
