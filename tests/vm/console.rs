//! The console's port (issue 20): with `console:` in config.yaml, the daemon adds a locked
//! rule that the kernel answers — a process inside a session cannot even connect to the
//! console (EACCES), while the same connect outside a session works. The rule file of the
//! VM (tests/fixtures/kernel-rules.yaml) has `builtin: none` and says nothing of it.
use std::{fs, net::TcpStream, path::Path};

use super::{agent, guard, py_errno, restart_daemon, stderr, stdout};

const CONFIG: &str = "/var/lib/carapace/config.yaml";
pub(super) const PORT: u16 = 8790;

/// Puts the console in config.yaml for the test and takes it out again afterwards (the
/// daemon restarted both times), so other tests keep the daemon they expect.
pub(super) struct WithConsole;

impl WithConsole {
    pub(super) fn start() -> Self {
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

/// A visit of the console as the user (root, outside every session): logged in with the URL
/// `carapace console` prints, as a browser would.
pub(super) struct Visit {
    host: String,
    cookie: String,
}

impl Visit {
    pub(super) fn login() -> Self {
        let out = std::process::Command::new("carapace")
            .args(["console", "--no-open"])
            .output()
            .expect("run carapace console");
        let url = stdout(&out);
        let path = url
            .trim()
            .split_once("/login")
            .map(|(_, rest)| format!("/login{rest}"))
            .unwrap_or_else(|| panic!("no login URL: {url}{}", stderr(&out)));
        let host = format!("127.0.0.1:{PORT}");
        let (head, _) = carapace_tests::cdp::http_exchange(
            &host,
            &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
        .expect("log in");
        let cookie = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("set-cookie"))
            .and_then(|(_, v)| v.split(';').next())
            .map(|c| c.trim().to_owned())
            .unwrap_or_else(|| panic!("no cookie: {head}"));
        Self { host, cookie }
    }

    /// The feed's first event (`snapshot`): the sessions and the ledger's last records as
    /// the page starts with them.
    pub(super) fn snapshot(&self) -> serde_json::Value {
        use std::io::{Read as _, Write as _};
        let mut s = TcpStream::connect(&self.host).expect("connect to the console");
        s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .expect("timeout");
        write!(
            s,
            "GET /api/events HTTP/1.1\r\nHost: {}\r\nCookie: {}\r\n\r\n",
            self.host, self.cookie
        )
        .expect("ask for the feed");
        // The feed never ends: read until the snapshot's one data line is whole.
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            let text = String::from_utf8_lossy(&buf);
            if let Some((_, rest)) = text.split_once("event: snapshot\ndata: ") {
                if let Some((data, _)) = rest.split_once('\n') {
                    return serde_json::from_str(data)
                        .unwrap_or_else(|e| panic!("the snapshot is not JSON ({e}): {data}"));
                }
            }
            let n = s.read(&mut chunk).expect("read the feed");
            assert!(n > 0, "the feed ended: {text}");
            buf.extend_from_slice(&chunk[..n]);
        }
    }
}
