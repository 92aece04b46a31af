//! One session's resolver: UDP and TCP on 127.0.0.1 (and `[::1]` where IPv6 loopback exists),
//! all on one port, so the kernel rewrites a query's destination to one port whatever the
//! protocol. Work is bounded: queries in flight and TCP connections per resolver, message
//! sizes, and idle connections.
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::handler::Handler;

/// Queries answered at once per session: a flood waits (TCP) or is dropped (UDP; clients
/// retry) instead of filling the daemon with tasks and upstream sockets.
const MAX_IN_FLIGHT: usize = 64;
/// TCP connections served at once per session.
const MAX_CONNECTIONS: usize = 16;
/// A TCP connection with no query for this long is closed (RFC 7766 suggests seconds).
const IDLE: Duration = Duration::from_secs(10);
/// Largest query taken: a question is at most 255 bytes of name plus EDNS options.
const MAX_QUERY: usize = 4096;
/// Pause after a socket error, so that one that persists does not spin a core.
const ERROR_PAUSE: Duration = Duration::from_millis(50);
/// Tries at finding a port free for UDP and TCP on every loopback.
const BIND_TRIES: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum ResolverError {
    #[error("cannot bind the session's resolver on loopback: {0}")]
    Bind(#[source] io::Error),
    #[error("no port was free for UDP and TCP alike after {BIND_TRIES} tries")]
    NoPort,
}

/// A running resolver. Dropping it (or [`ResolverHandle::stop`]) stops its tasks and
/// closes its sockets.
pub struct ResolverHandle {
    port: u16,
    ipv6: bool,
    tasks: Vec<JoinHandle<()>>,
}

impl ResolverHandle {
    /// The port it listens on, UDP and TCP, on every loopback address it bound.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether it listens on `[::1]` too.
    #[must_use]
    pub fn ipv6(&self) -> bool {
        self.ipv6
    }

    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for ResolverHandle {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

struct Sockets {
    udp: Vec<UdpSocket>,
    tcp: Vec<TcpListener>,
}

/// Binds UDP then TCP on `port` (0: any) of IPv4 loopback, then both on IPv6 loopback if
/// the machine has it. `Ok(None)`: the port was taken for one of them; try another.
async fn bind_all(port: u16) -> Result<Option<(u16, Sockets)>, io::Error> {
    let v4 = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let udp = match UdpSocket::bind((v4, port)).await {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => return Ok(None),
        Err(e) => return Err(e),
    };
    let port = udp.local_addr()?.port();
    let mut sockets = Sockets {
        udp: vec![udp],
        tcp: Vec::new(),
    };
    match TcpListener::bind((v4, port)).await {
        Ok(l) => sockets.tcp.push(l),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => return Ok(None),
        Err(e) => return Err(e),
    }
    let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    match UdpSocket::bind((v6, port)).await {
        Ok(s) => sockets.udp.push(s),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => return Ok(None),
        // No IPv6 loopback on this machine (disabled, or a container without it).
        Err(_) => return Ok(Some((port, sockets))),
    }
    match TcpListener::bind((v6, port)).await {
        Ok(l) => sockets.tcp.push(l),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => return Ok(None),
        Err(e) => return Err(e),
    }
    Ok(Some((port, sockets)))
}

/// Starts resolvers.
pub struct Resolver;

impl Resolver {
    /// Binds one port on loopback and serves `handler`'s session on it until the handle is
    /// dropped. Must be called inside a tokio runtime.
    pub async fn start(handler: Arc<Handler>) -> Result<ResolverHandle, ResolverError> {
        let mut bound = None;
        for _ in 0..BIND_TRIES {
            if let Some(found) = bind_all(0).await.map_err(ResolverError::Bind)? {
                bound = Some(found);
                break;
            }
        }
        let (port, sockets) = bound.ok_or(ResolverError::NoPort)?;
        let ipv6 = sockets.udp.len() > 1 && sockets.tcp.len() > 1;
        let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let mut tasks = Vec::new();
        for socket in sockets.udp {
            tasks.push(tokio::spawn(serve_udp(
                Arc::new(socket),
                Arc::clone(&handler),
                Arc::clone(&in_flight),
            )));
        }
        for listener in sockets.tcp {
            tasks.push(tokio::spawn(serve_tcp(
                listener,
                Arc::clone(&handler),
                Arc::clone(&connections),
            )));
        }
        tracing::info!(session = %handler.session_id, port, ipv6, "session resolver listening");
        Ok(ResolverHandle { port, ipv6, tasks })
    }
}

async fn serve_udp(socket: Arc<UdpSocket>, handler: Arc<Handler>, in_flight: Arc<Semaphore>) {
    // One byte more than the largest query taken, to tell an oversized one apart.
    let mut buf = vec![0; MAX_QUERY + 1];
    let mut answers = tokio::task::JoinSet::new();
    loop {
        let received = tokio::select! {
            r = socket.recv_from(&mut buf) => r,
            // Reap finished answers so the set does not grow.
            Some(_) = answers.join_next(), if !answers.is_empty() => continue,
        };
        let (n, from) = match received {
            Ok(r) => r,
            Err(e) => {
                // A transient error (e.g. out of memory for buffers): keep serving, but do not
                // spin on one that persists.
                tracing::debug!("session resolver: UDP receive: {e}");
                tokio::time::sleep(ERROR_PAUSE).await;
                continue;
            }
        };
        if n > MAX_QUERY {
            continue;
        }
        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
            continue;
        };
        let query = buf[..n].to_vec();
        let (socket, handler) = (Arc::clone(&socket), Arc::clone(&handler));
        // Answers run in the resolver's set: aborting the resolver aborts them too.
        answers.spawn(async move {
            if let Some(reply) = handler.answer(&query, true).await {
                let _ = socket.send_to(&reply, from).await;
            }
            drop(permit);
        });
    }
}

async fn serve_tcp(listener: TcpListener, handler: Arc<Handler>, connections: Arc<Semaphore>) {
    let mut open = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            Some(_) = open.join_next(), if !open.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, typically: let some close before accepting again.
                tracing::debug!("session resolver: TCP accept: {e}");
                tokio::time::sleep(ERROR_PAUSE).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            // Too many connections: closing this one is the answer.
            continue;
        };
        let handler = Arc::clone(&handler);
        open.spawn(async move {
            if let Err(e) = serve_connection(stream, &handler).await {
                tracing::debug!("session resolver: TCP connection: {e}");
            }
            drop(permit);
        });
    }
}

/// Queries one after the other on one connection (RFC 7766 framing), until the client
/// closes it, idles, or sends something too long to be a query.
async fn serve_connection(mut stream: TcpStream, handler: &Handler) -> io::Result<()> {
    loop {
        let len = match tokio::time::timeout(IDLE, stream.read_u16()).await {
            Ok(Ok(len)) => usize::from(len),
            Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        };
        if len > MAX_QUERY {
            return Ok(());
        }
        let mut query = vec![0; len];
        match tokio::time::timeout(IDLE, stream.read_exact(&mut query)).await {
            Ok(r) => r?,
            Err(_) => return Ok(()),
        };
        let Some(reply) = handler.answer(&query, false).await else {
            continue;
        };
        let Ok(n) = u16::try_from(reply.len()) else {
            return Ok(());
        };
        let mut framed = Vec::with_capacity(reply.len() + 2);
        framed.extend_from_slice(&n.to_be_bytes());
        framed.extend_from_slice(&reply);
        stream.write_all(&framed).await?;
    }
}

impl std::fmt::Debug for ResolverHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolverHandle")
            .field("port", &self.port)
            .field("ipv6", &self.ipv6)
            .finish_non_exhaustive()
    }
}
