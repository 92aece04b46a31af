//! The machine's resolver, asked on the agent's behalf. The daemon runs outside every
//! session cgroup, so its own queries are not redirected back to itself.
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::timeout;

/// How long one UDP attempt waits (glibc's default `timeout:5` is longer; an agent's tool
/// waits for us, and a second server gets its turn sooner).
pub const UDP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a TCP exchange (connect, write, read) may take.
const TCP_TIMEOUT: Duration = Duration::from_secs(4);
/// Largest DNS message: the TCP length prefix is 16 bits.
const MAX_MESSAGE: usize = 65_535;

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("no upstream nameserver answered in time")]
    Timeout,
    #[error("upstream nameserver {server}: {source}")]
    Io {
        server: SocketAddr,
        #[source]
        source: io::Error,
    },
}

/// Nameservers to forward to, in order.
#[derive(Clone, Debug)]
pub struct Upstream {
    servers: Vec<SocketAddr>,
    udp_timeout: Duration,
}

impl Upstream {
    /// `servers` (port 53 unless given); none means the local resolver, as glibc assumes.
    #[must_use]
    pub fn new(servers: Vec<SocketAddr>, udp_timeout: Duration) -> Self {
        let servers = if servers.is_empty() {
            vec![SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 53)]
        } else {
            servers
        };
        Self {
            servers,
            udp_timeout,
        }
    }

    /// The `nameserver` lines of resolv.conf text.
    #[must_use]
    pub fn from_resolv_conf(text: &str) -> Self {
        let servers = text
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("nameserver")).then_some(())?;
                // `fe80::1%eth0`: the zone is dropped, link-local upstreams are rare.
                let addr = words.next()?.split('%').next()?;
                addr.parse::<IpAddr>().ok()
            })
            .map(|ip| SocketAddr::new(ip, 53))
            .collect();
        Self::new(servers, UDP_TIMEOUT)
    }

    /// The machine's `/etc/resolv.conf` (read once per resolver start).
    #[must_use]
    pub fn system() -> Self {
        let text = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_else(|e| {
            tracing::warn!("cannot read /etc/resolv.conf ({e}); asking 127.0.0.1:53");
            String::new()
        });
        Self::from_resolv_conf(&text)
    }

    #[must_use]
    pub fn servers(&self) -> &[SocketAddr] {
        &self.servers
    }

    /// Asks `query` over UDP, once more on the next server if the first does not answer in
    /// time; `accept` tells an answer to this query from a stray datagram. A truncated answer
    /// (`truncated` says which) is asked again over TCP of the same server.
    pub async fn exchange(
        &self,
        query: &[u8],
        accept: impl Fn(&[u8]) -> bool,
        truncated: impl Fn(&[u8]) -> bool,
    ) -> Result<Vec<u8>, UpstreamError> {
        let mut last = UpstreamError::Timeout;
        for attempt in 0..2 {
            let server = self.servers[attempt % self.servers.len()];
            match self.udp(server, query, &accept).await {
                Ok(answer) if truncated(&answer) => return tcp(server, query).await,
                Ok(answer) => return Ok(answer),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn udp(
        &self,
        server: SocketAddr,
        query: &[u8],
        accept: &impl Fn(&[u8]) -> bool,
    ) -> Result<Vec<u8>, UpstreamError> {
        let io = |source| UpstreamError::Io { server, source };
        let local: SocketAddr = if server.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        // A fresh socket (random port) per query, connected: only the server's datagrams
        // reach it, and an off-path forger must guess the port as well as the id.
        let socket = UdpSocket::bind(local).await.map_err(io)?;
        socket.connect(server).await.map_err(io)?;
        socket.send(query).await.map_err(io)?;
        let mut buf = vec![0; MAX_MESSAGE];
        let wait = async {
            loop {
                let n = socket.recv(&mut buf).await?;
                if accept(&buf[..n]) {
                    return Ok::<_, io::Error>(buf[..n].to_vec());
                }
            }
        };
        match timeout(self.udp_timeout, wait).await {
            Ok(answer) => answer.map_err(io),
            Err(_) => Err(UpstreamError::Timeout),
        }
    }
}

/// One query over TCP (RFC 7766 framing: a 16-bit length, then the message).
async fn tcp(server: SocketAddr, query: &[u8]) -> Result<Vec<u8>, UpstreamError> {
    let io = |source| UpstreamError::Io { server, source };
    let len = u16::try_from(query.len()).map_err(|_| {
        io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "query too long",
        ))
    })?;
    let exchange = async {
        let mut stream = TcpStream::connect(server).await?;
        let mut framed = Vec::with_capacity(query.len() + 2);
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(query);
        stream.write_all(&framed).await?;
        let n = stream.read_u16().await?;
        let mut answer = vec![0; usize::from(n)];
        stream.read_exact(&mut answer).await?;
        Ok::<_, io::Error>(answer)
    };
    match timeout(TCP_TIMEOUT, exchange).await {
        Ok(answer) => answer.map_err(io),
        Err(_) => Err(UpstreamError::Timeout),
    }
}
