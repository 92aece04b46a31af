//! Network rules by name through the real daemon: a session whose rules hold an allow-list
//! gets a DNS resolver of its own; a lookup it refuses reaches the ledger and the session's
//! `carapace run`; the resolver goes when the session ends. The kernel's redirection of the
//! session's queries is not part of this (the project's machines refuse BPF LSM): the test
//! asks the resolver's port itself.
use std::net::UdpSocket;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use carapace_tests::{cli, cli_command, text, Daemon};

use super::{setup, CARAPACE, CARAPACED};

const RULES: &str = "version: 1
builtin: none
rules:
  - id: egress
    block: { host: \"*\" }
    except: [example.com]
    message: only example.com
";

/// A DNS query for `name` (type A, recursion desired), written out by hand.
fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(u8::try_from(label.len()).expect("a short label"));
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// The answer's (id, RCODE), or `None` when nothing came back within a second.
fn ask(port: u16, name: &str) -> Option<(u16, u8)> {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(1)))
        .expect("a timeout");
    socket
        .send_to(&query(0x4242, name), ("127.0.0.1", port))
        .expect("send");
    let mut buf = [0u8; 512];
    let n = socket.recv(&mut buf).ok()?;
    (n >= 4).then(|| (u16::from_be_bytes([buf[0], buf[1]]), buf[3] & 0x0f))
}

/// The resolver port `carapace status` shows for the only session, once it shows one.
fn resolver_port(d: &Daemon) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = cli(Path::new(CARAPACE), &d.socket, ["status"], &[]);
        let status = text(&out.stdout);
        let port = status.lines().find_map(|l| {
            l.trim()
                .strip_prefix("DNS: resolver on 127.0.0.1:")?
                .split(',')
                .next()?
                .parse()
                .ok()
        });
        if let Some(port) = port {
            return port;
        }
        assert!(
            Instant::now() < deadline,
            "no resolver in the status:\n{status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_allow_list_session_gets_a_resolver_that_refuses_unlisted_names() {
    let Some(dir) = setup("an_allow_list_session_gets_a_resolver_that_refuses_unlisted_names")
    else {
        return;
    };
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).expect("write the rules");
    let d = Daemon::start(
        Path::new(CARAPACED),
        dir.path(),
        &["--rules", rules.to_str().expect("utf-8")],
    );
    let (started, done) = (dir.path().join("started"), dir.path().join("done"));
    // The command runs once `carapace run` watches the session: a denial from then on
    // reaches it.
    let script = format!(
        "touch {0}; for _ in $(seq 600); do [ -e {1} ] && break; sleep 0.05; done",
        started.display(),
        done.display()
    );
    let agent = cli_command(
        Path::new(CARAPACE),
        &d.socket,
        ["run", "--", "sh", "-c", &script],
        &[],
    )
    .stderr(Stdio::piped())
    .spawn()
    .expect("start carapace run");
    let port = resolver_port(&d);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !started.exists() {
        assert!(
            Instant::now() < deadline,
            "the session's command did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // REFUSED (5), with the query's id.
    assert_eq!(ask(port, "unlisted.example.org"), Some((0x4242, 5)));
    // The session's `carapace run` hears of it, as of a kernel denial.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&done, "").expect("let the agent finish");
    let out = agent.wait_with_output().expect("carapace run");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("blocked resolve of unlisted.example.org (rule egress: only example.com)"),
        "{stderr}"
    );
    // The ledger has it.
    let data = d.data_dir.to_str().expect("utf-8 data dir");
    let tail = cli(
        Path::new(CARAPACE),
        &d.socket,
        ["audit", "--data-dir", data, "tail", "--json"],
        &[],
    );
    let refused: Vec<serde_json::Value> = text(&tail.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["kind"] == "lookup-refused")
        .collect();
    assert_eq!(refused.len(), 1, "{}", text(&tail.stdout));
    assert_eq!(refused[0]["rules"][0]["id"], "egress", "{}", refused[0]);
    assert_eq!(refused[0]["layer"], "dns", "{}", refused[0]);
    // The session ended: so did its resolver.
    let deadline = Instant::now() + Duration::from_secs(10);
    while ask(port, "unlisted.example.org").is_some() {
        assert!(
            Instant::now() < deadline,
            "the resolver outlived its session"
        );
    }
}
