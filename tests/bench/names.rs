//! Network by name on the host (issue 19's benchmark): the latency a session's resolver
//! adds to a lookup over a loopback upstream, and what the server-name proxy of `tls: sni`
//! rules costs: added latency to a connection's first answer, and throughput. The same
//! components carapaced runs (`carapace::dns::Resolver`, `carapace::sni::SniProxy`) over
//! real loopback sockets; what the kernel adds to redirect a connect is not in these
//! figures. Run by `cargo xtask bench`.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use carapace::api::proto::Denial;
use carapace::dns::{
    boot_time_ns, DenialSink, Handler, Learned, RecentDenials, RefuseWith, Resolver, RulesInForce,
    Upstream,
};
use carapace::sni::{Limits, Protocol, Redirected, SniProxy};
use carapace_policy::engine::Activation;
use carapace_policy::rules::{Homes, Options, RuleSet};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// A `ClientHello` as OpenSSL 3.0 writes it for github.com (517 bytes).
const HELLO: &[u8] = include_bytes!("../fixtures/tls/openssl-client-hello-github.com.bin");
const RULES: &str = "version: 1
builtin: none
rules:
  - id: egress
    block: { host: \"*\" }
    except: [github.com, bench.test]
    tls: sni
";
const LOOKUPS: usize = 5_000;
const CONNECTS: usize = 2_000;
/// Bytes sent through the proxy per throughput run.
const VOLUME: u64 = 2 << 30;

struct Fixed(Arc<RuleSet>);

impl RulesInForce for Fixed {
    fn current(&self) -> Result<(Arc<RuleSet>, Activation), carapace::dns::RulesUnavailable> {
        Ok((Arc::clone(&self.0), Activation::default()))
    }
}

struct Refusals;

impl DenialSink for Refusals {
    fn refused(&self, d: Denial) {
        panic!(
            "the bench's names are allowed, yet {} was refused",
            d.subject
        );
    }
}

fn rules() -> anyhow::Result<Arc<RuleSet>> {
    let opts = Options {
        homes: Homes::fixed(["/home/bench"]),
        resolver: |_| None,
        host: carapace::policy_host::shared(),
    };
    RuleSet::parse_with("bench.yaml", RULES, &opts)
        .map(Arc::new)
        .map_err(|d| anyhow::anyhow!("{d}"))
}

fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    let i = (sorted.len().saturating_sub(1) * per_mille).div_ceil(1000);
    sorted[i.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn report(label: &str, direct: &mut [Duration], through: &mut [Duration]) {
    direct.sort_unstable();
    through.sort_unstable();
    let (d50, t50) = (percentile(direct, 500), percentile(through, 500));
    println!(
        "{label}: direct p50 {:.1} µs p99 {:.1} µs; through carapaced p50 {:.1} µs p99 {:.1} µs; added p50 {:.1} µs",
        micros(d50),
        micros(percentile(direct, 990)),
        micros(t50),
        micros(percentile(through, 990)),
        micros(t50.saturating_sub(d50)),
    );
}

// ---- the resolver ----

/// A query for `bench.test` A with id `id`.
fn query(id: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in ["bench", "test"] {
        q.push(u8::try_from(label.len()).unwrap_or(0));
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// An upstream that answers every query (the bench's one question) with 203.0.113.7,
/// TTL 60.
async fn upstream() -> anyhow::Result<SocketAddr> {
    let socket = UdpSocket::bind("127.0.0.1:0").await?;
    let addr = socket.local_addr()?;
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            let Some(q) = buf.get(..n).filter(|q| q.len() > 12) else {
                continue;
            };
            let mut a = q.to_vec();
            a[2] = 0x80 | (q[2] & 1);
            a[3] = 0x80;
            a[6..8].copy_from_slice(&1u16.to_be_bytes());
            a[8..12].copy_from_slice(&[0; 4]);
            a.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 203, 0, 113, 7]);
            let _ = socket.send_to(&a, from).await;
        }
    });
    Ok(addr)
}

async fn lookup(client: &UdpSocket, to: SocketAddr, id: u16) -> anyhow::Result<Duration> {
    let mut buf = [0u8; 512];
    let start = Instant::now();
    client.send_to(&query(id), to).await?;
    let n = tokio::time::timeout(Duration::from_secs(2), client.recv(&mut buf))
        .await
        .context("no answer in 2 s")??;
    let took = start.elapsed();
    anyhow::ensure!(n > 12 && buf[..2] == id.to_be_bytes(), "a wrong answer");
    // The response code: the low four bits of the fourth byte.
    let rcode = buf[3] % 16;
    anyhow::ensure!(rcode == 0, "the lookup failed (rcode {rcode})");
    Ok(took)
}

async fn resolver_latency() -> anyhow::Result<()> {
    let upstream_addr = upstream().await?;
    let handler = Handler {
        session_id: "bench".into(),
        session_cgroup: 1,
        rules: Arc::new(Fixed(rules()?)),
        upstream: Upstream::new(vec![upstream_addr], Duration::from_secs(1)),
        refuse_with: RefuseWith::Refused,
        learned: Arc::new(Learned::default()),
        kernel: None,
        denials: Arc::new(Refusals),
        recent: RecentDenials::default(),
        clock: boot_time_ns,
    };
    let resolver = Resolver::start(Arc::new(handler)).await?;
    let resolver_addr: SocketAddr = ([127, 0, 0, 1], resolver.port()).into();
    let client = UdpSocket::bind("127.0.0.1:0").await?;
    let (mut direct, mut through) = (Vec::new(), Vec::new());
    for i in 0..LOOKUPS {
        let id = u16::try_from(i % 65_536).unwrap_or(0);
        direct.push(lookup(&client, upstream_addr, id).await?);
        through.push(lookup(&client, resolver_addr, id).await?);
    }
    report(
        &format!("lookup ({LOOKUPS} UDP queries, A bench.test)"),
        &mut direct,
        &mut through,
    );
    Ok(())
}

// ---- the server-name proxy ----

/// A TLS-ish server: reads the `ClientHello`, answers one byte, then counts what follows
/// until the client closes and answers the count (8 bytes).
async fn tls_server() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut hello = vec![0; HELLO.len()];
                if s.read_exact(&mut hello).await.is_err() || s.write_all(b"!").await.is_err() {
                    return;
                }
                let mut buf = vec![0u8; 256 * 1024];
                let mut count = 0u64;
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    count += n as u64;
                }
                let _ = s.write_all(&count.to_be_bytes()).await;
            });
        }
    });
    Ok(addr)
}

/// The proxy of one session on loopback, every connection toward `destination`: what
/// carapaced runs behind the kernel's redirect.
async fn proxy(destination: SocketAddr) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let proxy = Arc::new(SniProxy {
        rules: Arc::new(Fixed(rules()?)),
        denials: Arc::new(Refusals),
        limits: Limits::default(),
        recent: carapace::dns::RecentDenials::default(),
    });
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let proxy = Arc::clone(&proxy);
            tokio::spawn(async move {
                let to = Redirected {
                    session_id: "bench".into(),
                    destination,
                    learned_name: Some("github.com".into()),
                    protocol: Protocol::Tls,
                };
                proxy.serve(s, &to).await
            });
        }
    });
    Ok(addr)
}

/// Connect, send the `ClientHello`, wait for the server's first byte.
async fn first_answer(to: SocketAddr) -> anyhow::Result<(Duration, TcpStream)> {
    let start = Instant::now();
    let mut s = TcpStream::connect(to).await?;
    s.set_nodelay(true)?;
    s.write_all(HELLO).await?;
    let mut one = [0u8; 1];
    s.read_exact(&mut one).await?;
    Ok((start.elapsed(), s))
}

async fn connect_latency(server: SocketAddr, proxied: SocketAddr) -> anyhow::Result<()> {
    let (mut direct, mut through) = (Vec::new(), Vec::new());
    for _ in 0..CONNECTS {
        direct.push(first_answer(server).await?.0);
        through.push(first_answer(proxied).await?.0);
    }
    report(
        &format!("connect + ClientHello + first byte back ({CONNECTS} connections)"),
        &mut direct,
        &mut through,
    );
    Ok(())
}

/// Sends `VOLUME` bytes after the `ClientHello`; bytes per second until the server's count.
#[expect(
    clippy::cast_precision_loss,
    reason = "a few GiB, far below 2^52: exact in f64"
)]
async fn throughput(to: SocketAddr) -> anyhow::Result<f64> {
    let (_, mut s) = first_answer(to).await?;
    let chunk = vec![0x5au8; 256 * 1024];
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < VOLUME {
        s.write_all(&chunk).await?;
        sent += chunk.len() as u64;
    }
    s.shutdown().await?;
    let mut count = [0u8; 8];
    s.read_exact(&mut count).await?;
    let took = start.elapsed();
    anyhow::ensure!(u64::from_be_bytes(count) == sent, "bytes lost on the way");
    Ok(sent as f64 / took.as_secs_f64())
}

async fn proxy_figures() -> anyhow::Result<()> {
    let server = tls_server().await?;
    let proxied = proxy(server).await?;
    connect_latency(server, proxied).await?;
    let mut direct = Vec::new();
    let mut through = Vec::new();
    for _ in 0..3 {
        direct.push(throughput(server).await?);
        through.push(throughput(proxied).await?);
    }
    let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max) / 1e9;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2] / 1e9
    };
    println!(
        "throughput ({} GiB one way, 3 runs): direct median {:.2} GB/s (best {:.2}); through the proxy median {:.2} GB/s (best {:.2})",
        VOLUME >> 30,
        median(&mut direct.clone()),
        best(&direct),
        median(&mut through.clone()),
        best(&through),
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    // Two workers: the proxy's two copy directions and the bench's client may run at once,
    // as carapaced's runtime lets them.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        resolver_latency().await?;
        proxy_figures().await
    })
}
