//! The console's port (issue 20): with `console:` in config.yaml, the daemon adds a locked
//! rule that the kernel answers — a process inside a session cannot even connect to the
//! console (EACCES), while the same connect outside a session works. The rule file of the
//! VM (tests/fixtures/kernel-rules.yaml) has `builtin: none` and says nothing of it.
use std::{fs, net::TcpStream, path::Path};

use super::{agent, guard, py_errno, restart_daemon, stderr, stdout};

const CONFIG: &str = "/var/lib/carapace/config.yaml";
const PORT: u16 = 8790;

/// Puts the console in config.yaml for the test and takes it out again afterwards (the
/// daemon restarted both times), so other tests keep the daemon they expect.
struct WithConsole;

impl WithConsole {
    fn start() -> Self {
        assert!(!Path::new(CONFIG).exists(), "{CONFIG} exists already");
        fs::write(CONFIG, format!("console:\n  listen: 127.0.0.1:{PORT}\n")).expect("write config");
        restart_daemon(false);
        Self
    }
}

impl Drop for WithConsole {
    fn drop(&mut self) {
        let _ = fs::remove_file(CONFIG);
        restart_daemon(false);
    }
}

#[test]
fn a_session_cannot_connect_to_the_console() {
    let _g = guard();
    let _console = WithConsole::start();
    // Outside a session the console answers (without a login: 401, but it answers).
    TcpStream::connect(("127.0.0.1", PORT)).expect("connect to the console from outside");

    let out = agent(&py_errno(&format!(
        "socket.create_connection((\"127.0.0.1\", {PORT}), timeout=5)"
    )));
    assert_eq!(
        stdout(&out).trim(),
        "13",
        "a session's connect must get EACCES from the kernel; stderr: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("carapace-console"),
        "carapace run names the rule: {}",
        stderr(&out)
    );
    // Another loopback port is not the console's.
    let listener = std::net::TcpListener::bind(("127.0.0.1", PORT + 1)).expect("bind");
    let out = agent(&py_errno(&format!(
        "socket.create_connection((\"127.0.0.1\", {}), timeout=5)",
        PORT + 1
    )));
    assert_eq!(stdout(&out).trim(), "0", "stderr: {}", stderr(&out));
    drop(listener);
}
