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
use std::net::{TcpListener, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::{agent, assert_denied_line, guard, listen, py_connect, session_command, stdout};

/// The names this server knows, their addresses and TTLs.
const NAMES: [(&str, [u8; 4], u8); 8] = [
    ("allowed.carapace.test", [192, 0, 2, 10], 60),
    ("other.carapace.test", [192, 0, 2, 11], 60),
    // Refused on port 8094 by rule `names-blocked-port`.
    ("ported.carapace.test", [192, 0, 2, 12], 60),
    // Allowed (below allowed.carapace.test), kept the shortest time the resolver keeps.
    ("brief.allowed.carapace.test", [192, 0, 2, 13], 1),
    // Refused at lookup by rule `names-blocked`; known here for lookups outside a session.
    ("x.blocked.carapace.test", [192, 0, 2, 14], 60),
    // One address, two names: port 443 is open to the first only (rule `names-sni`,
    // `tls: sni`), which the server name a client asks for tells apart.
    ("shared.carapace.test", [192, 0, 2, 20], 60),
    ("blocked-sni.carapace.test", [192, 0, 2, 20], 60),
    // Port 80 is closed to requests for blocked-http.carapace.test (rule `names-sni-http`),
    // which the Host of a plain HTTP request tells apart.
    ("http.carapace.test", [192, 0, 2, 21], 60),
];

/// The names this server knows an IPv6 address of (AAAA), with the address's text.
const NAMES6: [(&str, [u8; 16], &str); 1] = [(
    "shared.carapace.test",
    [
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20,
    ],
    "2001:db8::20",
)];

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

/// The answer to `query`: an A (AAAA) record for a known name asked for its A (AAAA)
/// record, an empty answer for its other types, NXDOMAIN for other names.
fn answer(query: &[u8]) -> Option<Vec<u8>> {
    let (name, end) = question(query)?;
    let qtype = u16::from_be_bytes([*query.get(end - 4)?, *query.get(end - 3)?]);
    let mut out = query.get(..end)?.to_vec();
    // QR, opcode 0, RD copied, RA.
    out[2] = 0x80 | (query[2] & 0x01);
    out[3] = 0x80;
    // No authority or additional records (a client may have sent an OPT record).
    out[8..12].copy_from_slice(&[0, 0, 0, 0]);
    if qtype == 28 {
        if let Some((_, addr, _)) = NAMES6.iter().find(|(n, _, _)| *n == name) {
            out[6..8].copy_from_slice(&1u16.to_be_bytes());
            out.extend_from_slice(&[0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16]);
            out.extend_from_slice(addr);
            return Some(out);
        }
    }
    match NAMES.iter().find(|(n, _, _)| *n == name) {
        Some((_, addr, ttl)) if qtype == 1 => {
            out[6..8].copy_from_slice(&1u16.to_be_bytes());
            // The name by pointer to the question, A, IN, the TTL, four bytes.
            out.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, *ttl, 0, 4]);
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
/// Joined on drop, so that its socket is closed before the next test binds the address.
struct Upstream {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Upstream {
    fn start() -> Self {
        let socket = UdpSocket::bind("127.0.0.53:53").expect("bind 127.0.0.53:53");
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("read timeout");
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::spawn(move || {
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
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn add_addresses() {
    let addrs = NAMES.iter().map(|(_, addr, _)| *addr).chain([ROGUE]);
    for addr in addrs {
        let cidr = format!("{}.{}.{}.{}/32", addr[0], addr[1], addr[2], addr[3]);
        // Already there from an earlier test ("File exists"): fine.
        let _ = Command::new("ip")
            .args(["addr", "add", &cidr, "dev", "lo"])
            .stderr(std::process::Stdio::null())
            .status();
    }
    // Loopback addresses skip duplicate detection, and the VM's busybox `ip` has no `nodad`.
    for (_, _, text) in NAMES6 {
        let _ = Command::new("ip")
            .args(["-6", "addr", "add", &format!("{text}/128"), "dev", "lo"])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Python that resolves `name` and connects to its first address on port 8093: prints the
/// address and the connect's errno, or the lookup's error.
fn resolve_and_connect(name: &str) -> String {
    resolve_and_connect_to(name, 8093)
}

/// [`resolve_and_connect`] on `port`.
fn resolve_and_connect_to(name: &str, port: u16) -> String {
    format!(
        "python3 -c 'import socket\ntry:\n    a = socket.getaddrinfo(\"{name}\", {port}, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]\nexcept OSError as e:\n    print(\"lookup\", e.errno)\n    raise SystemExit\ntry:\n    socket.create_connection((a, {port}), timeout=5)\n    print(a, 0)\nexcept OSError as e:\n    print(a, e.errno)'"
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

/// An address no session should reach: a DNS server other than the session's, listening
/// for UDP and TCP on port 53 and counting what reaches it (it would answer 203.0.113.1).
const ROGUE: [u8; 4] = [192, 0, 2, 53];

/// Joined on drop, like [`Upstream`].
struct Rogue {
    stop: Arc<AtomicBool>,
    reached: Arc<AtomicUsize>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Rogue {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let reached = Arc::new(AtomicUsize::new(0));
        let udp = UdpSocket::bind("192.0.2.53:53").expect("bind 192.0.2.53:53 (udp)");
        udp.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("read timeout");
        let tcp = TcpListener::bind("192.0.2.53:53").expect("bind 192.0.2.53:53 (tcp)");
        tcp.set_nonblocking(true).expect("nonblocking");
        let (s, r) = (stop.clone(), reached.clone());
        let thread = thread::spawn(move || {
            let mut buf = [0u8; 1500];
            while !s.load(Ordering::Relaxed) {
                if let Ok((n, from)) = udp.recv_from(&mut buf) {
                    r.fetch_add(1, Ordering::Relaxed);
                    if let Some(mut reply) = answer(&buf[..n]) {
                        // Whatever the name, a different address: a leak shows.
                        let len = reply.len();
                        if len >= 4 && reply[6..8] == [0, 1] {
                            reply[len - 4..].copy_from_slice(&[203, 0, 113, 1]);
                        }
                        let _ = udp.send_to(&reply, from);
                    }
                }
                if tcp.accept().is_ok() {
                    r.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Self {
            stop,
            reached,
            thread: Some(thread),
        }
    }

    fn reached(&self) -> usize {
        self.reached.load(Ordering::Relaxed)
    }
}

impl Drop for Rogue {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Asks `server`:53 for the A record of `name` over `udp` or `tcp` by hand (no resolver
/// library, so nothing but the kernel decides where it goes). Prints the transport, the
/// response code and the first address (`-` for none), or `error ERRNO`.
const ASK: &str = r#"
import socket, struct, sys
transport, server, name = sys.argv[1:4]
q = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
for label in name.split("."):
    q += bytes([len(label)]) + label.encode()
q += b"\0" + struct.pack(">HH", 1, 1)
try:
    if transport == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.sendto(q, (server, 53))
        data, peer = s.recvfrom(4096)
        # The reply must seem to come from where the query went.
        assert peer == (server, 53), peer
    else:
        s = socket.create_connection((server, 53), timeout=5)
        s.sendall(struct.pack(">H", len(q)) + q)
        head = b""
        while len(head) < 2:
            head += s.recv(2 - len(head))
        n = struct.unpack(">H", head)[0]
        data = b""
        while len(data) < n:
            data += s.recv(n - len(data))
except OSError as e:
    print("error", e.errno)
    raise SystemExit
count = struct.unpack(">H", data[6:8])[0]
print(transport, data[3] & 0xF, socket.inet_ntoa(data[-4:]) if count else "-")
"#;

fn ask(transport: &str, server: &str, name: &str) -> String {
    format!("python3 /tmp/dns_ask.py {transport} {server} {name}")
}

#[test]
fn queries_sent_straight_to_another_server_reach_the_sessions_resolver_over_udp_and_tcp() {
    let _g = guard();
    add_addresses();
    std::fs::write("/tmp/dns_ask.py", ASK).expect("write the query script");
    let _upstream = Upstream::start();
    let rogue = Rogue::start();

    // Allowed: answered by the session's resolver (from the upstream), not by the server
    // asked; the UDP reply reads as coming from the server asked.
    let out = agent(&format!(
        "{}; {}",
        ask("udp", "192.0.2.53", "allowed.carapace.test"),
        ask("tcp", "192.0.2.53", "allowed.carapace.test")
    ));
    assert_eq!(
        stdout(&out).trim(),
        "udp 0 192.0.2.10\ntcp 0 192.0.2.10",
        "answered by the session's resolver"
    );
    // Refused at lookup (REFUSED, the default `dns: refuse_with`), with a denial that
    // names the name, over both transports.
    let out = agent(&format!(
        "{}; {}",
        ask("udp", "192.0.2.53", "x.blocked.carapace.test"),
        ask("tcp", "192.0.2.53", "x.blocked.carapace.test")
    ));
    assert_eq!(stdout(&out).trim(), "udp 5 -\ntcp 5 -", "REFUSED");
    assert_denied_line(
        &out,
        "blocked resolve of x.blocked.carapace.test (rule names-blocked: Blocked names are not resolved)",
    );
    assert_eq!(
        rogue.reached(),
        0,
        "nothing of the session reached the other server"
    );

    // Through the system's resolver (glibc, 127.0.0.53): refused the same way.
    let out = agent(&resolve_and_connect("x.blocked.carapace.test"));
    assert!(
        stdout(&out).starts_with("lookup "),
        "a refused name has no address: {}",
        stdout(&out)
    );

    // Outside a session the same questions go where they are sent, and are answered.
    let out = Command::new("bash")
        .args([
            "-c",
            &format!(
                "{}; {}",
                ask("udp", "192.0.2.53", "x.blocked.carapace.test"),
                ask("udp", "127.0.0.53", "x.blocked.carapace.test")
            ),
        ])
        .output()
        .expect("run python");
    assert_eq!(
        stdout(&out).trim(),
        "udp 0 203.0.113.1\nudp 0 192.0.2.14",
        "outside a session"
    );
    assert_eq!(rogue.reached(), 1);
}

#[test]
fn a_name_refused_on_some_ports_is_answered_and_its_addresses_refused_there_by_name() {
    let _g = guard();
    add_addresses();
    let _upstream = Upstream::start();
    let _closed = listen("192.0.2.12:8094");
    let _open = listen("192.0.2.12:8095");

    // One session: the lookup is answered, the kernel refuses port 8094 of the address
    // by the rule, naming the name, and leaves the other ports alone.
    let out = agent(&format!(
        "{}; {}",
        resolve_and_connect_to("ported.carapace.test", 8094),
        resolve_and_connect_to("ported.carapace.test", 8095)
    ));
    assert_eq!(
        stdout(&out).trim(),
        "192.0.2.12 13\n192.0.2.12 0",
        "port 8094 refused, 8095 open"
    );
    assert_denied_line(
        &out,
        "blocked network of 192.0.2.12:8094 (ported.carapace.test) (rule names-blocked-port: ported.carapace.test is closed on port 8094)",
    );

    // Outside a session: untouched.
    let out = Command::new("bash")
        .args(["-c", &resolve_and_connect_to("ported.carapace.test", 8094)])
        .output()
        .expect("run python");
    assert_eq!(stdout(&out).trim(), "192.0.2.12 0", "outside a session");
}

#[test]
fn a_learned_address_expires_with_its_ttl() {
    let _g = guard();
    add_addresses();
    let _upstream = Upstream::start();
    let _listener = listen("192.0.2.13:8093");
    // TTL 1 is kept 5 s, plus 30 s for connects that began in time: 35 s after the answer
    // the allow-list refuses the address again, in the same session.
    let out = agent(&format!(
        "{}; sleep 36; {}",
        resolve_and_connect("brief.allowed.carapace.test"),
        py_connect("AF_INET", "192.0.2.13", 8093)
    ));
    assert_eq!(
        stdout(&out).trim(),
        "192.0.2.13 0\n13",
        "allowed while learned, refused once expired"
    );
}

/// Resolves argv[1] (its IPv6 address when argv[3] is `6`), connects to port 443 of it,
/// sends a TLS ClientHello asking for server name argv[2] (`-`: none) and `ping`, and prints
/// the address, what came back (`reply TEXT` or `closed`, or `error ERRNO`) and how many
/// bytes it sent. Built by hand: the VM's Python has no TLS library, and the server need
/// not complete a handshake. With argv[3] `http`: port 80 and a plain HTTP/1.1 request
/// whose Host is argv[2], then `ping`.
const HELLO: &str = r#"
import socket, struct, sys
name, sni, mode = sys.argv[1], sys.argv[2], sys.argv[3]
family = socket.AF_INET6 if mode == "6" else socket.AF_INET
port = 80 if mode == "http" else 443
ext = b""
if sni != "-":
    n = sni.encode()
    entry = b"\x00" + struct.pack(">H", len(n)) + n
    names = struct.pack(">H", len(entry)) + entry
    ext += struct.pack(">HH", 0, len(names)) + names
ext += struct.pack(">HH", 0x2B, 3) + b"\x02\x03\x04"
body = b"\x03\x03" + bytes(32) + b"\x00" + struct.pack(">H", 2) + b"\x13\x01" + b"\x01\x00"
body += struct.pack(">H", len(ext)) + ext
hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
sent = b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs + b"ping"
if mode == "http":
    sent = ("GET / HTTP/1.1\r\nHost: %s\r\n\r\nping" % sni).encode()
try:
    a = socket.getaddrinfo(name, port, family, socket.SOCK_STREAM)[0][4][0]
except OSError as e:
    print("lookup", e.errno)
    raise SystemExit
try:
    s = socket.create_connection((a, port), timeout=5)
    s.sendall(sent)
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    print(a, "reply " + data.decode().strip() if data else "closed", len(sent))
except OSError as e:
    print(a, "error", e.errno, len(sent))
"#;

/// A server (on 192.0.2.20:443 unless told) that reads a connection until `ping` and
/// answers `pong N` (N: the bytes it read). Joined on drop.
struct Pong {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Pong {
    fn start() -> Self {
        Self::on("192.0.2.20:443")
    }

    fn on(addr: &str) -> Self {
        use std::io::{Read as _, Write as _};
        let listener = TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while !got.ends_with(b"ping") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = conn.write_all(format!("pong {}\n", got.len()).as_bytes());
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Pong {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn hello(name: &str, sni: &str) -> String {
    hello_as(name, sni, "4")
}

/// [`hello`] over IPv6 (`mode` 6) or plain HTTP (`http`, `sni` the Host).
fn hello_as(name: &str, sni: &str, mode: &str) -> String {
    format!("python3 /tmp/sni_hello.py {name} {sni} {mode}")
}

/// The ledger's `server-name-refused` records, as `carapace audit tail` shows them.
fn server_name_refusals() -> Vec<String> {
    let out = Command::new("carapace")
        .args(["audit", "tail", "--json", "-n", "500"])
        .output()
        .expect("run carapace audit");
    assert!(out.status.success(), "audit tail: {}", super::stderr(&out));
    stdout(&out)
        .lines()
        .filter(|l| l.contains("\"server-name-refused\""))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_shared_address_opens_to_the_allowed_server_name_only() {
    let _g = guard();
    add_addresses();
    std::fs::write("/tmp/sni_hello.py", HELLO).expect("write the ClientHello script");
    let _upstream = Upstream::start();
    let _server = Pong::start();
    let before = server_name_refusals().len();

    // One session: shared.carapace.test resolves to 192.0.2.20, an exception for it on
    // port 443. A ClientHello asking for it reaches the server through carapaced's proxy,
    // and the answer comes back; one asking for blocked-sni.carapace.test (on the address
    // of the allowed name, as a program that looked up one name and asks the server for
    // another would), or for no name, is closed, with the denial naming the address's name
    // and the name asked for. blocked-sni.carapace.test itself resolves to the same
    // address (the rule limits port 443, so the lookup is answered): refused the same way.
    let out = agent(&format!(
        "{}; {}; {}; {}",
        hello("shared.carapace.test", "shared.carapace.test"),
        hello("shared.carapace.test", "blocked-sni.carapace.test"),
        hello("shared.carapace.test", "-"),
        hello("blocked-sni.carapace.test", "blocked-sni.carapace.test"),
    ));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "four connects:\n{text}\n{}",
        super::stderr(&out)
    );
    let sent = lines[0].rsplit(' ').next().unwrap_or_default();
    assert_eq!(
        lines[0],
        format!("192.0.2.20 reply pong {sent} {sent}"),
        "the allowed name's bytes reach the server whole, and its answer comes back"
    );
    for (line, what) in [
        (lines[1], "another name on the allowed name's address"),
        (lines[2], "no name"),
        (lines[3], "the other name"),
    ] {
        assert!(
            line.starts_with("192.0.2.20 closed ") || line.starts_with("192.0.2.20 error 104 "),
            "{what} is refused: {line}"
        );
    }
    assert_denied_line(
        &out,
        "blocked network of 192.0.2.20:443 (shared.carapace.test, server name blocked-sni.carapace.test) (rule names-sni: Only shared.carapace.test is served on port 443)",
    );
    assert_denied_line(
        &out,
        "blocked network of 192.0.2.20:443 (shared.carapace.test, no server name) (rule names-sni:",
    );
    assert_denied_line(
        &out,
        "blocked network of 192.0.2.20:443 (blocked-sni.carapace.test, server name blocked-sni.carapace.test) (rule names-sni:",
    );
    let records = server_name_refusals();
    assert!(
        records[before.min(records.len())..].iter().any(|r| r
            .contains("shared.carapace.test, server name blocked-sni.carapace.test")
            && r.contains("names-sni")),
        "the ledger names both names and the rule:\n{}",
        records.join("\n")
    );

    // Outside a session the same connect is not redirected nor judged: the blocked name
    // reaches the server.
    let out = Command::new("bash")
        .args([
            "-c",
            &hello("blocked-sni.carapace.test", "blocked-sni.carapace.test"),
        ])
        .output()
        .expect("run python");
    let line = stdout(&out);
    let sent = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        line.trim(),
        format!("192.0.2.20 reply pong {sent} {sent}"),
        "outside a session"
    );
}

#[test]
fn the_http_host_and_ipv6_connects_are_checked_by_name_too() {
    let _g = guard();
    add_addresses();
    std::fs::write("/tmp/sni_hello.py", HELLO).expect("write the ClientHello script");
    let _upstream = Upstream::start();
    let _http = Pong::on("192.0.2.21:80");
    let _v6 = Pong::on("[2001:db8::20]:443");

    // One session. Port 80 of http.carapace.test's address, which its lookup taught the
    // session: a request whose Host is that name reaches the server; one for
    // blocked-http.carapace.test is closed by the proxy, naming both names. Over IPv6
    // (connect6), shared.carapace.test's AAAA address: its own server name passes, another
    // is refused, as over IPv4.
    let out = agent(&format!(
        "{}; {}; {}; {}",
        hello_as("http.carapace.test", "http.carapace.test", "http"),
        hello_as("http.carapace.test", "blocked-http.carapace.test", "http"),
        hello_as("shared.carapace.test", "shared.carapace.test", "6"),
        hello_as("shared.carapace.test", "blocked-sni.carapace.test", "6"),
    ));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        4,
        "four connects:\n{text}\n{}",
        super::stderr(&out)
    );
    let sent = |line: &str| line.rsplit(' ').next().unwrap_or_default().to_owned();
    assert_eq!(
        lines[0],
        format!("192.0.2.21 reply pong {0} {0}", sent(lines[0])),
        "the request for the name looked up reaches the server whole"
    );
    assert!(
        lines[1].starts_with("192.0.2.21 closed ") || lines[1].starts_with("192.0.2.21 error 104 "),
        "another Host is refused: {}",
        lines[1]
    );
    assert_eq!(
        lines[2],
        format!("2001:db8::20 reply pong {0} {0}", sent(lines[2])),
        "over IPv6, the name looked up reaches the server whole"
    );
    assert!(
        lines[3].starts_with("2001:db8::20 closed ")
            || lines[3].starts_with("2001:db8::20 error 104 "),
        "over IPv6, another server name is refused: {}",
        lines[3]
    );
    assert_denied_line(
        &out,
        "blocked network of 192.0.2.21:80 (http.carapace.test, server name blocked-http.carapace.test) (rule names-sni-http: blocked-http.carapace.test is not served)",
    );
    assert_denied_line(
        &out,
        "blocked network of [2001:db8::20]:443 (shared.carapace.test, server name blocked-sni.carapace.test) (rule names-sni:",
    );
}

/// The session's key in `LEARNED` is not known here; keys of a cgroup no session has, as
/// many as the map holds twice over, push every other entry out of the LRU map.
fn flood_learned() {
    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    const BPF_OBJ_GET: libc::c_long = 7;
    // `carapace_common::Learned`: expiry, count, 8 exception rules, count, 8 blocks.
    const VALUE: usize = 16 + 4 * 8 + 8 * 8;
    let path = std::ffi::CString::new("/sys/fs/bpf/carapace/maps/LEARNED").expect("path");
    let mut attr = [0u64; 16];
    attr[0] = path.as_ptr() as u64;
    // SAFETY: `attr` is a zeroed `bpf_attr` of 128 bytes with `pathname` set, and lives
    // through the call.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, BPF_OBJ_GET, attr.as_mut_ptr(), 128) };
    assert!(fd >= 0, "open LEARNED: {}", std::io::Error::last_os_error());
    let value = [0u8; VALUE];
    for i in 0u64..2 * 65_536 {
        let mut key = [0u8; 24];
        key[..8].copy_from_slice(&u64::MAX.to_ne_bytes());
        key[8..16].copy_from_slice(&i.to_ne_bytes());
        let mut attr = [0u64; 16];
        attr[0] = fd as u64;
        attr[1] = key.as_ptr() as u64;
        attr[2] = value.as_ptr() as u64;
        // SAFETY: `map_fd`, `key` and `value` of a zeroed `bpf_attr`, buffers of the map's
        // key and value sizes, alive through the call.
        let rc =
            unsafe { libc::syscall(libc::SYS_bpf, BPF_MAP_UPDATE_ELEM, attr.as_mut_ptr(), 128) };
        assert_eq!(rc, 0, "update LEARNED: {}", std::io::Error::last_os_error());
    }
    // SAFETY: the descriptor opened above, closed once.
    unsafe { libc::close(fd as i32) };
}

/// Waits for `path` to exist (written by the session), up to 30 s.
fn wait_for(path: &str) {
    for _ in 0..300 {
        if std::path::Path::new(path).exists() {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
    panic!("{path} never appeared");
}

#[test]
fn a_refusal_by_name_survives_a_full_map_of_learned_addresses_and_a_reload() {
    let _g = guard();
    add_addresses();
    let upstream = Upstream::start();
    let _closed = listen("192.0.2.12:8094");
    let marks = [
        "/tmp/names-resolved",
        "/tmp/names-flooded",
        "/tmp/names-checked",
        "/tmp/names-reloaded",
    ];
    for m in marks {
        let _ = std::fs::remove_file(m);
    }
    let wait = |m: &str| format!("while [ ! -e {m} ]; do sleep 0.1; done");
    // The session looks ported.carapace.test up (answered: the rule closes port 8094
    // only) and is refused there. Then the map of learned exceptions is flooded past its
    // size, and later the rules are reloaded: the address stays refused on that port by the
    // rule, though the session never looks the name up again.
    let script = format!(
        "{}; touch {}; {}; {}; touch {}; {}; {}",
        resolve_and_connect_to("ported.carapace.test", 8094),
        marks[0],
        wait(marks[1]),
        py_connect("AF_INET", "192.0.2.12", 8094),
        marks[2],
        wait(marks[3]),
        py_connect("AF_INET", "192.0.2.12", 8094),
    );
    let child = session_command(&["bash", "-c", &script], Some(1000))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run carapace");
    wait_for(marks[0]);
    flood_learned();
    std::fs::write(marks[1], "").expect("mark");
    wait_for(marks[2]);
    let reload = Command::new("carapace")
        .args(["rules", "reload"])
        .status()
        .expect("reload");
    assert!(reload.success(), "carapace rules reload");
    std::fs::write(marks[3], "").expect("mark");
    let out = child.wait_with_output().expect("wait for the session");
    // The reload resolved the rules' `except:` names through this test's server: load
    // again without it, so that later tests see the rules as the daemon first loaded them.
    drop(upstream);
    let reload = Command::new("carapace")
        .args(["rules", "reload"])
        .status()
        .expect("reload");
    assert!(
        reload.success(),
        "carapace rules reload without the test's DNS server"
    );
    eprintln!("stdout: {}\nstderr: {}", stdout(&out), super::stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "192.0.2.12 13\n13\n13",
        "refused after the lookup, after the flood and after the reload"
    );
    assert_denied_line(
        &out,
        "blocked network of 192.0.2.12:8094 (ported.carapace.test) (rule names-blocked-port:",
    );
}

/// Sends a UDP datagram to port 443 of argv[1]'s address (after looking it up), with and
/// without `connect`, and prints `sendto ERRNO` and `connect ERRNO` (0: it went).
const DATAGRAM: &str = r#"
import socket, sys
a = socket.getaddrinfo(sys.argv[1], 443, socket.AF_INET, socket.SOCK_DGRAM)[0][4][0]
for how in ("sendto", "connect"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        if how == "sendto":
            s.sendto(b"quic", (a, 443))
        else:
            s.connect((a, 443))
            s.send(b"quic")
        print(how, 0)
    except OSError as e:
        print(how, e.errno)
"#;

#[test]
fn a_datagram_to_an_address_checked_by_server_name_is_refused_with_a_denial_naming_it() {
    let _g = guard();
    add_addresses();
    std::fs::write("/tmp/datagram.py", DATAGRAM).expect("write the datagram script");
    let _upstream = Upstream::start();

    // QUIC carries its server name where the proxy does not read it: to an address the
    // session checks by name on port 443, UDP is refused (EPERM from the sock_addr
    // programs), and the session hears why, with the name it looked up.
    let out = agent("python3 /tmp/datagram.py shared.carapace.test");
    assert_eq!(stdout(&out).trim(), "sendto 1\nconnect 1", "both refused");
    assert_denied_line(
        &out,
        "blocked network of 192.0.2.20:443 (shared.carapace.test) (rule server-name-datagram: this session's rules check the server name",
    );

    // Outside a session the datagram goes.
    let out = Command::new("python3")
        .args(["/tmp/datagram.py", "shared.carapace.test"])
        .output()
        .expect("run python");
    assert_eq!(
        stdout(&out).trim(),
        "sendto 0\nconnect 0",
        "outside a session"
    );
}

/// Asks 127.0.0.1 (`::1` when argv[3] is `6`, `0.0.0.0` when `any`) port argv[2] for the
/// A record of argv[4] over argv[1] (`udp` or `tcp`), straight to that port: prints the
/// transport, the response code and the first address, or `error ERRNO`, or `silent`.
const ASK_PORT: &str = r#"
import socket, struct, sys
transport, port, where, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
host = {"6": "::1", "any": "0.0.0.0"}.get(where, "127.0.0.1")
family = socket.AF_INET6 if where == "6" else socket.AF_INET
q = struct.pack(">HHHHHH", 0x4343, 0x0100, 1, 0, 0, 0)
for label in name.split("."):
    q += bytes([len(label)]) + label.encode()
q += b"\0" + struct.pack(">HH", 1, 1)
try:
    if transport == "udp":
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.sendto(q, (host, port))
        data = s.recv(4096)
    else:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect((host, port))
        s.sendall(struct.pack(">H", len(q)) + q)
        head = s.recv(2)
        data = s.recv(struct.unpack(">H", head)[0])
except socket.timeout:
    print(transport, "silent")
    raise SystemExit
except OSError as e:
    print(transport, "error", e.errno)
    raise SystemExit
count = struct.unpack(">H", data[6:8])[0]
print(transport, data[3] & 0xF, socket.inet_ntoa(data[-4:]) if count else "-")
"#;

/// The ports of the session resolvers `carapace status` lists (one line each).
fn resolver_ports() -> Vec<u16> {
    let out = Command::new("carapace")
        .arg("status")
        .output()
        .expect("carapace status");
    stdout(&out)
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("DNS: resolver on 127.0.0.1:")?
                .split(',')
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn a_sessions_resolver_answers_that_session_only() {
    let _g = guard();
    add_addresses();
    std::fs::write("/tmp/dns_ask_port.py", ASK_PORT).expect("write the query script");
    let (ready, go) = ("/tmp/peer-ready", "/tmp/peer-go");
    let _ = std::fs::remove_file(ready);
    let _ = std::fs::remove_file(go);
    let _upstream = Upstream::start();
    let _allowed = listen("192.0.2.10:8093");
    // The session waits while others ask its resolver, then connects to the allowed name's
    // address without looking it up (refused unless someone's query taught it), then asks
    // its resolver itself, straight to the port (its own: answered), and connects again.
    let script = format!(
        "touch {ready}; while [ ! -e {go} ]; do sleep 0.05; done; {}; port=$(cat {go}); \
         python3 /tmp/dns_ask_port.py udp $port 4 allowed.carapace.test; {}",
        py_connect("AF_INET", "192.0.2.10", 8093),
        py_connect("AF_INET", "192.0.2.10", 8093),
    );
    let session = session_command(&["bash", "-c", &script], None)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the session");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let port = loop {
        if std::path::Path::new(ready).exists() {
            if let [port] = resolver_ports()[..] {
                break port;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no session resolver came up"
        );
        thread::sleep(Duration::from_millis(100));
    };
    let ask_port = |transport: &str, at: &str| {
        format!("python3 /tmp/dns_ask_port.py {transport} {port} {at} allowed.carapace.test")
    };
    // Outside every session (this test, root): refused by the kernel, nothing reaches the
    // resolver, over UDP and TCP, to IPv4 and IPv6 loopback and to the unspecified address.
    for (transport, at) in [
        ("udp", "4"),
        ("tcp", "4"),
        ("udp", "6"),
        ("tcp", "6"),
        ("udp", "any"),
    ] {
        let out = Command::new("bash")
            .args(["-c", &ask_port(transport, at)])
            .output()
            .expect("run python");
        assert_eq!(
            stdout(&out).trim(),
            format!("{transport} error 13"),
            "a query from outside the session over {transport} to {at}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // From another session: refused too.
    let out = agent(&format!(
        "{}; {}",
        ask_port("udp", "4"),
        ask_port("tcp", "4")
    ));
    assert_eq!(
        stdout(&out).trim(),
        "udp error 13\ntcp error 13",
        "a query from another session"
    );
    std::fs::write(go, port.to_string()).expect("let the session go on");
    let out = session.wait_with_output().expect("the session");
    assert_eq!(
        stdout(&out).trim(),
        "13\nudp 0 192.0.2.10\n0",
        "the session learned nothing from the others' queries, and its own direct query is \
         answered: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
