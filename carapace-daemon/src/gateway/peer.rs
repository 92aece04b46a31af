//! Who is on the other end of a loopback TCP connection: the kernel's socket tables
//! (`/proc/net/tcp`, `/proc/net/tcp6`) list each socket's two addresses and its owner's uid,
//! so the client's uid (whose home `~` means) is read there, never from the request.
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use crate::engine::Context;

/// The context to check a client's calls in: its user's home, working directory `/`
/// (the gateway cannot know the agent's), or `/` for both when the owner is unknown.
#[must_use]
pub fn context(client: SocketAddr, server: SocketAddr) -> Context {
    match client_uid(client, server) {
        Some(uid) => Context::for_user(uid, "/"),
        None => Context {
            cwd: "/".into(),
            home: "/".into(),
            env: Vec::new(),
            follow_symlinks: true,
        },
    }
}

/// The uid owning the client's socket of the connection `client` → `server`.
#[must_use]
pub fn client_uid(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let table = match client.ip() {
        IpAddr::V4(_) => "/proc/net/tcp",
        IpAddr::V6(_) => "/proc/net/tcp6",
    };
    let text = std::fs::read_to_string(table).ok()?;
    find_uid(&text, client, server)
}

fn find_uid(table: &str, client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let (local, remote) = (encode(client), encode(server));
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (l, r, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        (l.eq_ignore_ascii_case(&local) && r.eq_ignore_ascii_case(&remote))
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// An address as the tables spell it: the address as 32-bit words in host byte order, in
/// hex, then `:` and the port in hex.
fn encode(addr: SocketAddr) -> String {
    let octets: Vec<u8> = match addr.ip() {
        IpAddr::V4(ip) => ip.octets().to_vec(),
        IpAddr::V6(ip) => ip.octets().to_vec(),
    };
    let words = octets.chunks(4).fold(String::new(), |mut out, w| {
        let _ = write!(out, "{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
        out
    });
    format!("{words}:{:04X}", addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_owner_of_a_real_loopback_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let stream = std::net::TcpStream::connect(server).unwrap();
        let client = stream.local_addr().unwrap();
        // SAFETY: getuid has no preconditions and cannot fail.
        let me = unsafe { libc::getuid() };
        assert_eq!(client_uid(client, server), Some(me));
        // The reverse direction is the server's accepted socket, not the client's.
        let wrong: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(client_uid(wrong, server), None);
    }

    #[test]
    fn garbage_tables_find_nothing() {
        let a: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert_eq!(find_uid("header\n1 2\n\n x y z", a, a), None);
    }
}
