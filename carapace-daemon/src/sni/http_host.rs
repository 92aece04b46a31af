//! The server an HTTP/1 request asks for: its `Host` header, and the authority of an
//! absolute or `CONNECT` request target, which a server reads instead (RFC 9112 §3.2.2).
//! The request head is untrusted and bounded. Anything a strict server would refuse, or
//! read otherwise than this reader (bare LF, folded lines, two `Host` headers, a target
//! and a `Host` that disagree), is malformed, so that the name checked is the one served.

use super::server_name::host_name;
use super::Reading;

/// Longest request head taken (request line and headers).
pub const MAX_HEAD: usize = 8 * 1024;

/// Reads the request head at the start of `bytes`: `Done(Some(name))` for a request that
/// names a server by host name, `Done(None)` for one that names none (HTTP/1.0 without
/// `Host`) or names an IP address.
#[must_use]
pub fn read_request_host(bytes: &[u8]) -> Reading<Option<String>> {
    let window = &bytes[..bytes.len().min(MAX_HEAD)];
    let Some(end) = window.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if bytes.len() >= MAX_HEAD {
            Reading::Malformed("a request head longer than 8 KiB")
        } else {
            Reading::More
        };
    };
    match parse_head(&window[..end]) {
        Ok(name) => Reading::Done(name),
        Err(why) => Reading::Malformed(why),
    }
}

/// What an authority (`host[:port]`) names: a host name, or nothing (an IP literal).
enum Authority {
    Name(String),
    Address,
}

fn parse_head(head: &[u8]) -> Result<Option<String>, &'static str> {
    if head
        .iter()
        .any(|b| !(b.is_ascii_graphic() || matches!(b, b' ' | b'\t' | b'\r' | b'\n')))
    {
        return Err("a request head byte outside visible ASCII");
    }
    let mut lines = Vec::new();
    let mut rest = head;
    while let Some(i) = rest.windows(2).position(|w| w == b"\r\n") {
        lines.push(&rest[..i]);
        rest = &rest[i + 2..];
    }
    lines.push(rest);
    if lines
        .iter()
        .any(|l| l.contains(&b'\r') || l.contains(&b'\n'))
    {
        return Err("a bare CR or LF in the request head");
    }
    let (request, headers) = lines.split_first().ok_or("an empty request head")?;
    let target = request_target(request)?;
    let mut host = None;
    for line in headers {
        if matches!(line.first(), Some(b' ' | b'\t')) {
            return Err("a folded header line");
        }
        let colon = line
            .iter()
            .position(|b| *b == b':')
            .ok_or("a header line without a colon")?;
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.is_empty() || !name.iter().copied().all(is_tchar) {
            return Err("a header name that is not a token");
        }
        if name.eq_ignore_ascii_case(b"host") {
            if host.is_some() {
                return Err("two Host headers");
            }
            host = Some(value.trim_ascii());
        }
    }
    let host = match host {
        // An empty Host goes with a target that names no server (RFC 9112 §3.2).
        Some([]) | None => None,
        Some(v) => Some(authority(v)?),
    };
    let named = match (target, host) {
        (Some(t), Some(h)) => {
            if !same(&t, &h) {
                return Err("the request target and Host name different servers");
            }
            Some(t)
        }
        (Some(one), None) | (None, Some(one)) => Some(one),
        (None, None) => None,
    };
    Ok(match named {
        Some(Authority::Name(n)) => Some(n),
        Some(Authority::Address) | None => None,
    })
}

fn same(a: &Authority, b: &Authority) -> bool {
    match (a, b) {
        (Authority::Name(x), Authority::Name(y)) => x == y,
        (Authority::Address, Authority::Address) => true,
        _ => false,
    }
}

/// The request line `METHOD SP target SP HTTP/1.x`, and the server its target names.
fn request_target(line: &[u8]) -> Result<Option<Authority>, &'static str> {
    let mut parts = line.split(|b| *b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not an HTTP/1 request line");
    };
    if method.is_empty() || !method.iter().copied().all(is_tchar) {
        return Err("a request method that is not a token");
    }
    if version != b"HTTP/1.1" && version != b"HTTP/1.0" {
        return Err("not an HTTP/1.0 or HTTP/1.1 request");
    }
    if target.is_empty() || target.contains(&b'\t') {
        return Err("an empty request target");
    }
    if method == b"CONNECT" {
        return authority(target).map(Some);
    }
    if target[0] == b'/' || target == b"*" {
        return Ok(None);
    }
    // Absolute form: scheme "://" authority [path].
    let sep = target
        .windows(3)
        .position(|w| w == b"://")
        .ok_or("a request target of no known form")?;
    let scheme = &target[..sep];
    if scheme.is_empty()
        || !scheme
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b))
    {
        return Err("a request target of no known form");
    }
    let after = &target[sep + 3..];
    let end = after
        .iter()
        .position(|b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(after.len());
    authority(&after[..end]).map(Some)
}

/// `host[:port]` (a bracketed IPv6 literal, an IPv4 literal, or a host name); user info
/// (`user@host`) is refused: clients do not send it, and it hides the host from a reader.
fn authority(bytes: &[u8]) -> Result<Authority, &'static str> {
    if bytes.contains(&b'@') {
        return Err("user info in an authority");
    }
    let host = if let Some(v6) = bytes.strip_prefix(b"[") {
        let close = v6
            .iter()
            .position(|b| *b == b']')
            .ok_or("an unclosed IPv6 literal")?;
        port(&v6[close + 1..])?;
        let text = std::str::from_utf8(&v6[..close]).map_err(|_| "an IPv6 literal")?;
        text.parse::<std::net::Ipv6Addr>()
            .map_err(|_| "a bracketed host that is not an IPv6 address")?;
        return Ok(Authority::Address);
    } else {
        match bytes.iter().rposition(|b| *b == b':') {
            Some(i) => {
                port(&bytes[i..])?;
                &bytes[..i]
            }
            None => bytes,
        }
    };
    if let Ok(text) = std::str::from_utf8(host) {
        if text.parse::<std::net::Ipv4Addr>().is_ok() {
            return Ok(Authority::Address);
        }
    }
    host_name(host)
        .map(Authority::Name)
        .ok_or("a host that is not a host name")
}

/// Empty, or `:` and 1 to 5 digits.
fn port(bytes: &[u8]) -> Result<(), &'static str> {
    match bytes.split_first() {
        None => Ok(()),
        Some((b':', digits))
            if (1..=5).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) =>
        {
            Ok(())
        }
        Some(_) => Err("a port that is not a number"),
    }
}

/// RFC 9110 §5.6.2 token characters.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
