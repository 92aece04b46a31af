//! The network's other doors (issue 23, point 4): an address family a protocol takes for
//! another (UDP and raw IPv4 sockets send to an `AF_UNSPEC` address as to an IPv4 one), and
//! routes set by hand after the destination was judged (IPv4 source-route options, IPv6
//! routing headers), by `setsockopt` and as ancillary data. tests/fixtures/kernel-rules.yaml
//! blocks 127.66.0.0/16 (`blocked-cidr`).

use std::process::Command;

use super::{agent, assert_denied_line, errnos, guard, stdout};

/// A Python script printing `name=errno` per attempt (0: it worked).
const ATTEMPTS: &str = r#"
import ctypes, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, f):
    try:
        f(); print(f"{name}=0", flush=True)
    except OSError as e:
        print(f"{name}={e.errno}", flush=True)
def unspec_sendto():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    addr = struct.pack("=H", 0) + struct.pack(">H", 5555) + socket.inet_aton("127.66.1.1") + bytes(8)
    if libc.sendto(s.fileno(), b"leak", 4, 0, addr, len(addr)) < 0:
        e = ctypes.get_errno(); raise OSError(e, "sendto")
# A loose source route through 127.0.0.1 (type 0x83, length 7, pointer 4), one NOP after.
LSRR = bytes([0x83, 7, 4]) + socket.inet_aton("127.0.0.1") + bytes([1])
def ip_options():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).setsockopt(socket.IPPROTO_IP, 4, LSRR)
def retopts():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendmsg([b"x"], [(socket.IPPROTO_IP, 7, LSRR)], 0, ("127.0.0.1", 9))
RTHDR = bytes([0, 2, 2, 1, 0, 0, 0, 0]) + socket.inet_pton(socket.AF_INET6, "::1")
def rthdr():
    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).setsockopt(socket.IPPROTO_IPV6, 57, RTHDR)
def rthdr_cmsg():
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.sendmsg([b"x"], [(socket.IPPROTO_IPV6, 57, RTHDR)], 0, ("::1", 9))
def plain_udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))
def pktinfo():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendmsg([b"x"], [(socket.IPPROTO_IP, 8, bytes(12))], 0, ("127.0.0.1", 9))
for name, f in [("unspec_sendto", unspec_sendto), ("ip_options", ip_options),
                ("retopts", retopts), ("rthdr", rthdr), ("rthdr_cmsg", rthdr_cmsg),
                ("plain_udp", plain_udp), ("pktinfo", pktinfo)]:
    attempt(name, f)
"#;

fn errno<'a>(all: &'a [(String, String)], name: &str) -> &'a str {
    all.iter()
        .find(|(n, _)| n == name)
        .map_or("missing", |(_, e)| e.as_str())
}

#[test]
fn other_families_and_routes_set_by_hand_are_refused() {
    let _g = guard();
    std::fs::write(std::env::temp_dir().join("doors.py"), ATTEMPTS).expect("write script");
    // The shape works: outside a session an AF_UNSPEC datagram reaches the IPv4 address.
    let receiver = std::net::UdpSocket::bind("127.66.1.1:5555").expect("bind 127.66.1.1");
    receiver
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("timeout");
    let outside = Command::new("python3")
        .arg(std::env::temp_dir().join("doors.py"))
        .output()
        .expect("run outside");
    let outside = errnos(&String::from_utf8_lossy(&outside.stdout));
    let mut buf = [0u8; 16];
    let got = receiver.recv(&mut buf).expect("the datagram arrives");
    assert_eq!(&buf[..got], b"leak", "AF_UNSPEC is sent as IPv4");
    for name in [
        "unspec_sendto",
        "ip_options",
        "retopts",
        "plain_udp",
        "pktinfo",
    ] {
        assert_eq!(
            errno(&outside, name),
            "0",
            "{name} outside a session: {outside:?}"
        );
    }
    for name in ["rthdr", "rthdr_cmsg"] {
        assert_ne!(
            errno(&outside, name),
            "13",
            "{name} outside: the kernel's own answer"
        );
    }

    let out = agent(&format!(
        "python3 {}",
        std::env::temp_dir().join("doors.py").display()
    ));
    let inside = errnos(&stdout(&out));
    for name in [
        "unspec_sendto",
        "ip_options",
        "retopts",
        "rthdr",
        "rthdr_cmsg",
    ] {
        assert_eq!(
            errno(&inside, name),
            "13",
            "{name} in a session: {inside:?}"
        );
    }
    for name in ["plain_udp", "pktinfo"] {
        assert_eq!(errno(&inside, name), "0", "{name} in a session: {inside:?}");
    }
    assert_denied_line(
        &out,
        "blocked network of 127.66.1.1:5555 (rule blocked-cidr",
    );
    assert_denied_line(
        &out,
        "blocked source routing of a socket (IP_OPTIONS) (rule self-protection: agents may not route",
    );
    assert_denied_line(&out, "blocked source routing of a socket (IP_RETOPTS)");
    assert_denied_line(&out, "blocked source routing of a socket (IPV6_RTHDR)");
}
