//! Latency the model-API gateway adds to a non-blocked streaming answer: the same streamed
//! Messages API request, sent to a loopback upstream directly and through the gateway (Layer 0
//! over the history, Layer 1 over the answer's tool call, built-in packs), alternating, over
//! kept-alive connections. Reports the time to the answer's last byte and the difference of
//! the medians. Run by `cargo xtask bench`.
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use carapace::gateway::{self, refusal};
use carapace_policy::rules::RuleSet;
use carapace_tests::anthropic::{Block, MessagesServer};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use serde_json::json;

const ROUNDS: usize = 2_000;

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

/// One request; the time until the last byte of the answer, and the answer.
async fn once(sender: &mut Sender, body: &str) -> anyhow::Result<(Duration, Bytes)> {
    sender.ready().await?;
    let request = hyper::Request::post("/v1/messages")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("x-api-key", "sk-ant-bench")
        .header("anthropic-version", "2023-06-01")
        .body(Full::new(Bytes::from(body.to_owned())))?;
    let start = Instant::now();
    let response = sender.send_request(request).await?;
    let bytes = response.into_body().collect().await?.to_bytes();
    Ok((start.elapsed(), bytes))
}

fn percentile(sorted: &[Duration], per_mille: usize) -> Duration {
    let i = (sorted.len().saturating_sub(1) * per_mille).div_ceil(1000);
    sorted[i.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

async fn measure(label: &str, past_calls: usize, turn: Vec<Block>) -> anyhow::Result<()> {
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
    let (_, a) = once(&mut direct, &body).await?;
    let (_, b) = once(&mut via, &body).await?;
    anyhow::ensure!(
        a.len() == b.len(),
        "the gateway changed a non-blocked answer ({} bytes vs {})",
        b.len(),
        a.len()
    );
    let (mut times_direct, mut times_via) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        times_direct.push(once(&mut direct, &body).await?.0);
        times_via.push(once(&mut via, &body).await?.0);
    }
    times_direct.sort_unstable();
    times_via.sort_unstable();
    let (d50, v50) = (percentile(&times_direct, 500), percentile(&times_via, 500));
    let (d99, v99) = (percentile(&times_direct, 990), percentile(&times_via, 990));
    println!(
        "gateway, streamed answer ({label}, {past_calls} past calls, {} bytes): direct p50 {:.0} µs / p99 {:.0} µs; \
         through the gateway p50 {:.0} µs / p99 {:.0} µs; added p50 {:.0} µs, p99 {:.0} µs \
         ({ROUNDS} requests each)",
        a.len(),
        micros(d50),
        micros(d99),
        micros(v50),
        micros(v99),
        micros(v50.saturating_sub(d50)),
        micros(v99.saturating_sub(d99)),
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        measure(
            "text only",
            4,
            vec![Block::text(
                &"Here is what I found in the project. ".repeat(20),
            )],
        )
        .await?;
        measure(
            "text only",
            200,
            vec![Block::text(
                &"Here is what I found in the project. ".repeat(20),
            )],
        )
        .await?;
        measure(
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
        )
        .await
    })
}
