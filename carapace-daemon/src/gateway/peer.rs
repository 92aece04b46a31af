//! Who is on the other end of a loopback TCP connection: the kernel's socket tables
//! (`/proc/net/tcp`, `/proc/net/tcp6`) list each socket's two addresses and its owner's uid,
//! so the client's uid (whose home `~` means) is read there, never from the request; the
//! socket's inode then leads to the process holding it (`/proc/PID/fd`), and so to its
//! cgroup — the `carapace run` session the agent runs in, if any.
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use carapace_policy::engine::Context;

/// The process on the client's end of a connection, as far as the kernel tells.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Client {
    pub uid: Option<u32>,
    /// A process holding the client's socket (the first found: a socket shared across a
    /// fork belongs to processes of the same session anyway).
    pub pid: Option<u32>,
    /// Its hierarchy-relative cgroup v2 path.
    pub cgroup: Option<String>,
}

impl Client {
    /// Finds the client of the connection `client` → `server`.
    #[must_use]
    pub fn find(client: SocketAddr, server: SocketAddr) -> Self {
        let Some(socket) = client_socket(client, server) else {
            return Self::default();
        };
        let pid = socket.inode.filter(|i| *i != 0).and_then(pid_holding);
        let cgroup = pid.and_then(|p| crate::session::cgroup::process_cgroup(p).ok());
        Self {
            uid: Some(socket.uid),
            pid,
            cgroup,
        }
    }

    /// The context to check the client's calls in: its user's home, working directory
    /// `/` (the gateway cannot know the agent's), or `/` for both when the owner is unknown.
    #[must_use]
    pub fn context(&self) -> Context {
        match self.uid {
            Some(uid) => crate::policy_host::context_for_user(uid, "/"),
            None => Context {
                cwd: "/".into(),
                home: "/".into(),
                env: Vec::new(),
                host: Some(crate::policy_host::shared()),
            },
        }
    }
}

/// The uid owning the client's socket of the connection `client` → `server`.
#[must_use]
pub fn client_uid(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    client_socket(client, server).map(|s| s.uid)
}

/// One socket of the kernel's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Socket {
    uid: u32,
    /// `None` when the field is unreadable; 0 for a socket no process holds any more.
    inode: Option<u64>,
}

fn client_socket(client: SocketAddr, server: SocketAddr) -> Option<Socket> {
    let table = match client.ip() {
        IpAddr::V4(_) => "/proc/net/tcp",
        IpAddr::V6(_) => "/proc/net/tcp6",
    };
    let text = std::fs::read_to_string(table).ok()?;
    find_socket(&text, client, server)
}

fn find_socket(table: &str, client: SocketAddr, server: SocketAddr) -> Option<Socket> {
    let (local, remote) = (encode(client), encode(server));
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (l, r, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        if !(l.eq_ignore_ascii_case(&local) && r.eq_ignore_ascii_case(&remote)) {
            return None;
        }
        Some(Socket {
            uid: uid.parse().ok()?,
            inode: fields.get(9).and_then(|i| i.parse().ok()),
        })
    })
}

/// The first process with a descriptor on socket `inode`.
fn pid_holding(inode: u64) -> Option<u32> {
    let target = format!("socket:[{inode}]");
    let procs = std::fs::read_dir("/proc").ok()?;
    procs.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let fds = std::fs::read_dir(entry.path().join("fd")).ok()?;
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str()))
            .then_some(pid)
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
        let found = Client::find(client, server);
        assert_eq!(found.uid, Some(me));
        assert_eq!(found.pid, Some(std::process::id()));
        assert_eq!(
            found.cgroup,
            crate::session::cgroup::process_cgroup(std::process::id()).ok()
        );
        // The reverse direction is the server's accepted socket, not the client's.
        let wrong: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(client_uid(wrong, server), None);
        assert_eq!(Client::find(wrong, server), Client::default());
    }

    proptest::proptest! {
        #[test]
        fn any_table_text_is_read_without_panicking(text in ".{0,400}", port in 1u16..) {
            let a = SocketAddr::from(([127, 0, 0, 1], port));
            let _ = find_socket(&text, a, a);
        }
    }

    #[test]
    fn garbage_tables_find_nothing() {
        let a: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert_eq!(find_socket("header\n1 2\n\n x y z", a, a), None);
    }
}
