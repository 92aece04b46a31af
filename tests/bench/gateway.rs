//! Latency the model-API gateway adds to a non-blocked streaming answer: the same streamed
//! Messages API request, sent to a loopback upstream directly and through the gateway (Layer 0
//! over the history, Layer 1 over the answer's tool call, built-in packs), alternating, over
//! kept-alive connections. Reports the time to the answer's first and last byte and the
//! difference of the medians. Run by `cargo xtask bench`.
//!
//! Two ways the upstream sends an answer:
//! - **burst**: all of its events at once. The gateway's work on every event adds up in the
//!   time to the last byte (upstream, gateway and client share one worker thread), so this
//!   is the gateway's CPU per answer more than what an agent waits.
//! - **paced**: one event every [`GAP`], as a model sends them while it generates (real
//!   models are slower still, 10–50 ms an event). The gateway relays each event before the
//!   next comes, so the added time to the last byte is what an agent waits: the request's
//!   handling plus one event's relay.
//!
//! `GATEWAY_ROUNDS` (default 2,000 burst, 200 paced requests a path) and `GATEWAY_PACING`
//! (`burst`, `paced`, default both) choose less; `GATEWAY_ONLY=direct|via` sends only one
//! path's requests (for counting instructions under callgrind: the difference of two runs
//! is the gateway's).
//!
//! The bench uses the daemon's allocator: the gateway allocates per request and per event,
//! and the system allocator's costs are not the ones `carapaced` has.
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use carapace::gateway::{self, refusal};
use carapace_policy::rules::RuleSet;
use carapace_tests::anthropic::{Block, MessagesServer};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BURST_ROUNDS: usize = 2_000;
const PACED_ROUNDS: usize = 200;
/// Between two events of a paced answer (tokio's timer rounds it up to the millisecond).
const GAP: Duration = Duration::from_millis(1);

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(base: &str) -> anyhow::Result<Sender> {
    let authority = base.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&authority)
        .await
        .with_context(|| format!("cannot connect to {authority}"))?;
    stream.set_nodelay(true)?;
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

/// The times until the first and the last byte of one answer.
#[derive(Clone, Copy)]
struct Timing {
    first: Duration,
    last: Duration,
}

/// One request; its timing and the answer.
async fn once(sender: &mut Sender, body: &str) -> anyhow::Result<(Timing, Vec<u8>)> {
    sender.ready().await?;
    let request = hyper::Request::post("/v1/messages")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("x-api-key", "sk-ant-bench")
        .header("anthropic-version", "2023-06-01")
        .body(Full::new(Bytes::from(body.to_owned())))?;
    let start = Instant::now();
    let mut answer = sender.send_request(request).await?.into_body();
    let mut bytes = Vec::new();
    let mut first = None;
    while let Some(frame) = answer.frame().await {
        if let Ok(data) = frame?.into_data() {
            first.get_or_insert_with(|| start.elapsed());
            bytes.extend_from_slice(&data);
        }
    }
    let last = start.elapsed();
    let timing = Timing {
        first: first.unwrap_or(last),
        last,
    };
    Ok((timing, bytes))
}

fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    let i = (sorted.len().saturating_sub(1) * per_mille).div_ceil(1000);
    sorted[i.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Which paths send requests (`GATEWAY_ONLY`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Paths {
    Both,
    Direct,
    Via,
}

/// How the upstream streams, and how many requests a path.
#[derive(Clone, Copy)]
struct Pacing {
    name: &'static str,
    gap: Duration,
    rounds: usize,
}

/// The median and 99th percentile of a path's times, and the added ones.
struct Summary {
    p50: Duration,
    p99: Duration,
}

fn summary(times: &mut [Duration]) -> Option<Summary> {
    if times.is_empty() {
        return None;
    }
    times.sort_unstable();
    Some(Summary {
        p50: percentile(times, 500),
        p99: percentile(times, 990),
    })
}

/// "direct p50 … / p99 …; through the gateway …; added …" for one of the two instants.
fn line(what: &str, direct: &mut [Duration], via: &mut [Duration]) -> String {
    match (summary(direct), summary(via)) {
        (Some(d), Some(v)) => format!(
            "{what}: direct p50 {:.0} µs / p99 {:.0} µs; through the gateway p50 {:.0} µs / p99 {:.0} µs; \
             added p50 {:.0} µs, p99 {:.0} µs",
            micros(d.p50),
            micros(d.p99),
            micros(v.p50),
            micros(v.p99),
            micros(v.p50.saturating_sub(d.p50)),
            micros(v.p99.saturating_sub(d.p99)),
        ),
        (Some(s), None) | (None, Some(s)) => format!(
            "{what}: p50 {:.0} µs / p99 {:.0} µs (one path only)",
            micros(s.p50),
            micros(s.p99)
        ),
        (None, None) => format!("{what}: no requests"),
    }
}

async fn measure(
    label: &str,
    past_calls: usize,
    turn: Vec<Block>,
    pacing: Pacing,
    paths: Paths,
) -> anyhow::Result<()> {
    let upstream = MessagesServer::scripted(vec![turn]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let gateway_url = format!("http://{}", listener.local_addr()?);
    let config = gateway::Config {
        anthropic: gateway::Upstream::parse(&upstream.base_url()).map_err(anyhow::Error::msg)?,
        openai: gateway::Upstream::parse(gateway::OPENAI_UPSTREAM).map_err(anyhow::Error::msg)?,
        gemini: gateway::Upstream::parse(gateway::GEMINI_UPSTREAM).map_err(anyhow::Error::msg)?,
    };
    let rules: Arc<RuleSet> = Arc::new(RuleSet::builtin(&carapace::policy_host::options()));
    let gate = refusal::Gate::new(Arc::new(rules) as Arc<dyn refusal::RuleSource>);
    tokio::spawn(gateway::serve(
        listener,
        config,
        gate,
        std::future::pending(),
    ));

    // A conversation with past calls, so Layer 0 has work to do.
    let mut messages = vec![json!({"role": "user", "content": "tidy up the project"})];
    let commands = ["ls -la", "git status", "cargo test", "grep -rn TODO src"];
    for i in 0..past_calls {
        let command = format!("{} # {i}", commands[i % commands.len()]);
        let id = format!("toolu_{i}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": "ok"}]}));
    }
    let body = json!({"model": "claude-bench", "max_tokens": 1000, "stream": true,
                      "messages": messages})
    .to_string();

    let mut direct = connect(&upstream.base_url()).await?;
    let mut via = connect(&gateway_url).await?;
    // The first answers, all at once, are compared: the gateway must not change what it
    // lets through (ids and timings aside, the answers are the same length).
    let (_, a) = once(&mut direct, &body).await?;
    let (_, b) = once(&mut via, &body).await?;
    anyhow::ensure!(
        a.len() == b.len(),
        "the gateway changed a non-blocked answer ({} bytes vs {})",
        b.len(),
        a.len()
    );
    upstream.pace(pacing.gap);
    let (mut direct_times, mut via_times) = (Vec::new(), Vec::new());
    for _ in 0..pacing.rounds {
        if paths != Paths::Via {
            direct_times.push(once(&mut direct, &body).await?.0);
        }
        if paths != Paths::Direct {
            via_times.push(once(&mut via, &body).await?.0);
        }
    }
    let (mut direct_first, mut direct_last): (Vec<_>, Vec<_>) =
        direct_times.iter().map(|t| (t.first, t.last)).unzip();
    let (mut via_first, mut via_last): (Vec<_>, Vec<_>) =
        via_times.iter().map(|t| (t.first, t.last)).unzip();
    println!(
        "gateway, {} streamed answer ({label}, {past_calls} past calls, {} bytes, {} requests a path):\n  {}\n  {}",
        pacing.name,
        a.len(),
        pacing.rounds,
        line("first byte", &mut direct_first, &mut via_first),
        line("last byte", &mut direct_last, &mut via_last),
    );
    Ok(())
}

fn rounds(default: usize) -> anyhow::Result<usize> {
    match std::env::var("GATEWAY_ROUNDS") {
        Ok(n) => n
            .parse()
            .with_context(|| format!("GATEWAY_ROUNDS={n} is not a count")),
        Err(_) => Ok(default),
    }
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let paths = match std::env::var("GATEWAY_ONLY").as_deref() {
        Err(_) | Ok("") => Paths::Both,
        Ok("direct") => Paths::Direct,
        Ok("via") => Paths::Via,
        Ok(other) => anyhow::bail!("GATEWAY_ONLY={other}: direct or via"),
    };
    let mut pacings = Vec::new();
    let chosen = std::env::var("GATEWAY_PACING").unwrap_or_default();
    if chosen.is_empty() || chosen == "burst" {
        pacings.push(Pacing {
            name: "burst",
            gap: Duration::ZERO,
            rounds: rounds(BURST_ROUNDS)?,
        });
    }
    if chosen.is_empty() || chosen == "paced" {
        pacings.push(Pacing {
            name: "paced",
            gap: GAP,
            rounds: rounds(PACED_ROUNDS)?,
        });
    }
    anyhow::ensure!(
        !pacings.is_empty(),
        "GATEWAY_PACING={chosen}: burst or paced"
    );
    let text = "Here is what I found in the project. ".repeat(20);
    let cases = [
        ("text only", 4, vec![Block::text(&text)]),
        ("text only", 200, vec![Block::text(&text)]),
        (
            "text and one allowed tool call",
            4,
            vec![
                Block::text("Let me run the tests."),
                Block::tool_use(
                    "toolu_run",
                    "Bash",
                    json!({"command": "cargo test --workspace"}),
                ),
            ],
        ),
    ];
    runtime.block_on(async {
        for pacing in pacings {
            for (label, past_calls, turn) in &cases {
                measure(label, *past_calls, turn.clone(), pacing, paths).await?;
            }
        }
        Ok(())
    })
}
