//! Network allow-lists in the kernel: rule `egress-allowlist` of
//! tests/fixtures/kernel-rules.yaml blocks every address on port 8090 except 127.0.0.3,
//! 127.0.9.0/24 and [::1] (on 8090). A connect to an unlisted address gets EACCES from
//! the kernel (a Python one-liner: Layer 1 never sees it); listed ones connect.
use std::net::TcpStream;

use super::{agent, assert_denied_line, guard, listen, py_connect, stdout};

#[test]
fn connects_outside_a_network_allow_list_are_denied_and_listed_ones_work() {
    let _g = guard();
    let _unlisted = listen("127.0.0.4:8090");
    let _other_port = listen("127.0.0.4:8091");
    let _listed = listen("127.0.0.3:8090");
    let _in_block = listen("127.0.9.9:8090");
    let _v6 = listen("[::1]:8090");

    let out = agent(&py_connect("AF_INET", "127.0.0.4", 8090));
    assert_eq!(stdout(&out).trim(), "13", "an unlisted address is refused");
    assert_denied_line(
        &out,
        "blocked network of 127.0.0.4:8090 (rule egress-allowlist: Only allow-listed hosts are \
         reachable on port 8090)",
    );
    // IPv4-mapped IPv6 is the same address.
    let out = agent(&py_connect("AF_INET6", "::ffff:127.0.0.4", 8090));
    assert_eq!(
        stdout(&out).trim(),
        "13",
        "IPv4-mapped IPv6 of an unlisted address"
    );

    for (family, host) in [
        ("AF_INET", "127.0.0.3"),
        ("AF_INET", "127.0.9.9"),
        ("AF_INET6", "::1"),
        ("AF_INET6", "::ffff:127.0.0.3"),
    ] {
        let out = agent(&py_connect(family, host, 8090));
        assert_eq!(stdout(&out).trim(), "0", "listed {host} connects");
    }
    let out = agent(&py_connect("AF_INET", "127.0.0.4", 8091));
    assert_eq!(stdout(&out).trim(), "0", "the rule covers port 8090 only");

    assert!(
        TcpStream::connect("127.0.0.4:8090").is_ok(),
        "outside a session it connects"
    );
}
