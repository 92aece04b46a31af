//! Arbitrary bytes as the first bytes of a connection the server-name check reads: as a
//! TLS `ClientHello` and as an HTTP/1 request head. Neither reader may panic or hang, and a
//! name either reads is a host name the rules can judge (what the proxy compares is what
//! the server reads).
#![no_main]

use carapace::sni::{read_client_hello, read_request_host, Reading};
use libfuzzer_sys::fuzz_target;

fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        })
}

fuzz_target!(|data: &[u8]| {
    if let Reading::Done(hello) = read_client_hello(data) {
        assert!(hello.server_name.as_deref().is_none_or(is_host_name));
    }
    if let Reading::Done(Some(host)) = read_request_host(data) {
        assert!(is_host_name(&host), "{host:?}");
    }
});
