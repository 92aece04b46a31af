//! Which processes are on the other end of a loopback TCP connection, and whether any of
//! them runs inside an agent session.
//!
//! TCP has no `SO_PEERCRED`; on loopback both ends live in this network namespace, so the
//! client's socket is in `/proc/net/tcp` (or `tcp6`) with local = the peer's address and
//! remote = the console's, and its inode leads to the processes that hold it
//! (`/proc/PID/fd/* → socket:[INODE]`). Every holder must be outside the sessions' cgroups;
//! anything that cannot be found or read refuses the connection (fail closed).
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// What the console decides about a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every process holding the client's socket is outside the sessions.
    Outside { pids: Vec<u32> },
    /// A process inside an agent session holds it.
    Agent { pid: u32 },
    /// The owner could not be determined (socket not found, process gone, unreadable).
    Unknown(String),
}

/// One row of `/proc/net/tcp{,6}`: the socket's two ends and its inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub inode: u64,
}

/// An address as the kernel prints it: the IP as 32-bit words in host byte order, each
/// `%08X`, then `:` and the port in `%04X`.
fn parse_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = ip.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(w, 16).ok()?.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The rows of a `/proc/net/tcp{,6}` text (the header and malformed lines are skipped).
#[must_use]
pub fn parse_table(text: &str) -> Vec<Row> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some(Row {
                local: parse_addr(f.get(1)?)?,
                remote: parse_addr(f.get(2)?)?,
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// IPv4 peers show in `tcp6` as `::ffff:a.b.c.d` when the listener is dual-stack.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let canon = |s: SocketAddr| match s.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(s, |v4| SocketAddr::new(IpAddr::V4(v4), s.port())),
        IpAddr::V4(_) => s,
    };
    canon(a) == canon(b)
}

/// The inode of the client's socket of connection `peer` → `server`.
#[must_use]
pub fn client_inode(rows: &[Row], peer: SocketAddr, server: SocketAddr) -> Option<u64> {
    rows.iter()
        .find(|r| same(r.local, peer) && same(r.remote, server))
        .map(|r| r.inode)
        .filter(|i| *i != 0)
}

/// Processes (by `/proc` below `proc_root`) with an fd on socket `inode`.
#[must_use]
pub fn holders(proc_root: &Path, inode: u64) -> Vec<u32> {
    let target = format!("socket:[{inode}]");
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_dir(proc_root.join(pid.to_string()).join("fd")).is_ok_and(|fds| {
                fds.filter_map(Result::ok).any(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str())
                })
            })
        })
        .collect()
}

/// Decides about connection `peer` → `server`; `in_session` says whether a cgroup
/// (hierarchy-relative) is inside the agent sessions.
pub fn judge(peer: SocketAddr, server: SocketAddr, in_session: impl Fn(&str) -> bool) -> Verdict {
    if !peer.ip().is_loopback() && !is_mapped_loopback(peer.ip()) {
        return Verdict::Unknown(format!("{peer} is not a loopback address"));
    }
    let mut rows = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            rows.extend(parse_table(&text));
        }
    }
    let Some(inode) = client_inode(&rows, peer, server) else {
        return Verdict::Unknown(format!("no socket of {peer} in /proc/net/tcp"));
    };
    let pids = holders(Path::new("/proc"), inode);
    if pids.is_empty() {
        return Verdict::Unknown(format!("no process holds the socket of {peer}"));
    }
    for &pid in &pids {
        match crate::session::cgroup::process_cgroup(pid) {
            Ok(c) if in_session(&c) => return Verdict::Agent { pid },
            Ok(_) => {}
            Err(e) => return Verdict::Unknown(format!("pid {pid}: {e}")),
        }
    }
    Verdict::Outside { pids }
}

fn is_mapped_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        IpAddr::V4(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Little-endian words, as on the machines Carapace runs on (x86-64, arm64).
    #[cfg(target_endian = "little")]
    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1092 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:D431 0100007F:1092 01 00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 20 4 30 10 -1
   2: garbage
";

    #[test]
    #[cfg(target_endian = "little")]
    fn finds_the_clients_socket() {
        let rows = parse_table(TABLE);
        assert_eq!(rows.len(), 2);
        let server: SocketAddr = "127.0.0.1:4242".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:54321".parse().unwrap();
        assert_eq!(rows[1].local, peer);
        assert_eq!(client_inode(&rows, peer, server), Some(777));
        let other: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(client_inode(&rows, other, server), None);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn reads_ipv6_rows() {
        let t = "h\n 0: 00000000000000000000000001000000:1092 00000000000000000000000001000000:D431 01 0:0 0:0 0 0 0 99\n";
        let rows = parse_table(t);
        assert_eq!(rows[0].local, "[::1]:4242".parse().unwrap());
        assert_eq!(rows[0].inode, 99);
    }

    #[test]
    fn a_real_loopback_connection_is_traced_to_this_process() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(server).unwrap();
        let peer = client.local_addr().unwrap();
        let me = std::process::id();
        match judge(peer, server, |_| false) {
            Verdict::Outside { pids } => assert!(pids.contains(&me), "{pids:?}"),
            v => panic!("{v:?}"),
        }
        // Every cgroup counted as a session's: refused.
        assert!(matches!(
            judge(peer, server, |_| true),
            Verdict::Agent { .. }
        ));
        // A connection that does not exist cannot be vouched for.
        let gone: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert!(matches!(
            judge(gone, server, |_| false),
            Verdict::Unknown(_)
        ));
    }

    proptest! {
        #[test]
        fn the_table_parser_never_panics(text in "(.{0,120}\n){0,4}") {
            let _ = parse_table(&text);
        }

        #[test]
        fn addresses_round_trip(a in any::<u32>(), port in any::<u16>()) {
            let ip = Ipv4Addr::from(a);
            let word = u32::from_ne_bytes(ip.octets());
            let text = format!("{word:08X}:{port:04X}");
            prop_assert_eq!(parse_addr(&text), Some(SocketAddr::new(IpAddr::V4(ip), port)));
        }
    }
}
