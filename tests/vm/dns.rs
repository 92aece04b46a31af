//! Network rules by name, in the kernel (issue 19). Rule `names-allowlist` (every address
//! on port 8093 except what `allowed.carapace.test` resolves to) of
//! tests/fixtures/kernel-rules.yaml. The VM has no network: this test serves DNS itself on
//! 127.0.0.53:53, the nameserver the VM's /etc/resolv.conf names (tests/vm-init/init.sh),
//! with the names on addresses of 192.0.2.0/24 (TEST-NET-1, added to `lo`).
//!
//! A session's lookups (glibc's resolver in Python, which sends to 127.0.0.53) go to its
//! resolver in carapaced, redirected by the kernel; the resolver asks this server, and the
//! address it answered for the allowed name is the only one of the allow-list the session
//! may connect to. (Refused names are tested against a real resolver on the host,
//! tests/host/dns.rs, and in carapace-daemon's `dns` tests.)
use std::net::UdpSocket;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::{agent, assert_denied_line, guard, listen, py_connect, stdout};

/// The names this server knows, and their addresses.
const NAMES: [(&str, [u8; 4]); 2] = [
    ("allowed.carapace.test", [192, 0, 2, 10]),
    ("other.carapace.test", [192, 0, 2, 11]),
];

/// The question's name (dotted) and where the question ends, of a DNS query.
fn question(query: &[u8]) -> Option<(String, usize)> {
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    // QTYPE and QCLASS.
    Some((labels.join("."), at + 4))
}

/// The answer to `query`: an A record for a known name asked for its A record, an empty
/// answer for its other types, NXDOMAIN for other names.
fn answer(query: &[u8]) -> Option<Vec<u8>> {
    let (name, end) = question(query)?;
    let qtype = u16::from_be_bytes([*query.get(end - 4)?, *query.get(end - 3)?]);
    let mut out = query.get(..end)?.to_vec();
    // QR, opcode 0, RD copied, RA.
    out[2] = 0x80 | (query[2] & 0x01);
    out[3] = 0x80;
    // No authority or additional records (a client may have sent an OPT record).
    out[8..12].copy_from_slice(&[0, 0, 0, 0]);
    match NAMES.iter().find(|(n, _)| *n == name) {
        Some((_, addr)) if qtype == 1 => {
            out[6..8].copy_from_slice(&1u16.to_be_bytes());
            // The name by pointer to the question, A, IN, TTL 60, four bytes.
            out.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
            out.extend_from_slice(addr);
        }
        Some(_) => out[6..8].copy_from_slice(&[0, 0]),
        None => {
            out[6..8].copy_from_slice(&[0, 0]);
            out[3] |= 3;
        }
    }
    Some(out)
}

/// Serves DNS on 127.0.0.53:53 until dropped.
struct Upstream {
    stop: Arc<AtomicBool>,
}

impl Upstream {
    fn start() -> Self {
        let socket = UdpSocket::bind("127.0.0.53:53").expect("bind 127.0.0.53:53");
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("read timeout");
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while !s.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                if let Some(reply) = answer(&buf[..n]) {
                    let _ = socket.send_to(&reply, from);
                }
            }
        });
        Self { stop }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn add_addresses() {
    for (_, addr) in NAMES {
        let cidr = format!("{}.{}.{}.{}/32", addr[0], addr[1], addr[2], addr[3]);
        // Already there from an earlier run of the test: fine.
        let _ = Command::new("ip")
            .args(["addr", "add", &cidr, "dev", "lo"])
            .status();
    }
}

/// Python that resolves `name` and connects to its first address on port 8093: prints the
/// address and the connect's errno, or the lookup's error.
fn resolve_and_connect(name: &str) -> String {
    format!(
        "python3 -c 'import socket\ntry:\n    a = socket.getaddrinfo(\"{name}\", 8093, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]\nexcept OSError as e:\n    print(\"lookup\", e.errno)\n    raise SystemExit\ntry:\n    socket.create_connection((a, 8093), timeout=5)\n    print(a, 0)\nexcept OSError as e:\n    print(a, e.errno)'"
    )
}

#[test]
fn an_allow_list_by_name_admits_the_addresses_the_session_looked_up_and_nothing_else() {
    let _g = guard();
    add_addresses();
    let _upstream = Upstream::start();
    let _allowed = listen("192.0.2.10:8093");
    let _other = listen("192.0.2.11:8093");

    // Resolved through the session's resolver, then connected: the learned address.
    let out = agent(&resolve_and_connect("allowed.carapace.test"));
    assert_eq!(
        stdout(&out).trim(),
        "192.0.2.10 0",
        "the allowed name connects"
    );

    // Another name resolves (the rule limits port 8093 only, so the lookup is answered),
    // but its address is no exception: the kernel refuses the connect.
    let out = agent(&resolve_and_connect("other.carapace.test"));
    assert_eq!(
        stdout(&out).trim(),
        "192.0.2.11 13",
        "a name not listed is refused"
    );
    assert_denied_line(&out, "rule names-allowlist");

    // An address written out, never looked up in this session: refused, even the one the
    // allowed name has (a new session has learned nothing yet).
    let out = agent(&py_connect("AF_INET", "192.0.2.10", 8093));
    assert_eq!(
        stdout(&out).trim(),
        "13",
        "a direct connect to an unlearned address"
    );

    // Outside a session, the same lookups go to the upstream directly, and connects work.
    let out = Command::new("bash")
        .args(["-c", &resolve_and_connect("other.carapace.test")])
        .output()
        .expect("run python");
    assert_eq!(stdout(&out).trim(), "192.0.2.11 0", "outside a session");
}
