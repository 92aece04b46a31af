//! `Evaluate` and `ScanHistory`: Layers 1 and 0 over gRPC, in the caller's context (its
//! uid's home, its working directory), never in the daemon's. Each answer is given only
//! after its audit record is on disk (see [`super::audit`]).
use std::time::Instant;

use tonic::Status;

use super::audit::{self as record, Evaluated};
use super::proto::{
    EvaluateReply, EvaluateRequest, HistoryFinding, RuleMatch, ScanHistoryReply, ScanHistoryRequest,
};
use super::{Daemon, Peer};
use crate::audit::{record::sha256_hex, redact};
use crate::engine::{self, Activation, Context, Decision, HistoryReport, ToolCall};
use crate::rules::{validate::mode_name, RuleSet};

/// The `Evaluate` RPC: decide, record, then answer.
pub async fn handle_evaluate(
    daemon: &Daemon,
    peer: Peer,
    mut req: EvaluateRequest,
) -> Result<EvaluateReply, Status> {
    let rules = daemon.rules();
    let agent_session = std::mem::take(&mut req.session_id);
    let started = Instant::now();
    let peer2 = peer.clone();
    let (outcome, args) = tokio::task::spawn_blocking(move || {
        let outcome = evaluate(&rules, &peer2, &req.call_json, &req.cwd);
        (outcome, Args::of(&req.call_json))
    })
    .await
    .map_err(|e| Status::internal(format!("evaluation task failed: {e}")))?;
    let elapsed = started.elapsed();
    let event = args
        .record(daemon, &peer, &agent_session, elapsed)
        .event(outcome.as_ref());
    daemon.audit.record(event).await?;
    match outcome {
        Ok(decision) => {
            count(daemon, "tool-call", &decision, elapsed);
            Ok(reply(&decision))
        }
        Err(status) => {
            daemon.metrics.rejected();
            Err(status)
        }
    }
}

/// The `ScanHistory` RPC: scan, record, then answer.
pub async fn handle_scan_history(
    daemon: &Daemon,
    peer: Peer,
    req: ScanHistoryRequest,
) -> Result<ScanHistoryReply, Status> {
    let rules = daemon.rules();
    let started = Instant::now();
    let peer2 = peer.clone();
    let (outcome, args) = tokio::task::spawn_blocking(move || {
        let outcome = scan_history(&rules, &peer2, &req.transcript, &req.cwd);
        (outcome, Args::of(&req.transcript))
    })
    .await
    .map_err(|e| Status::internal(format!("history scan task failed: {e}")))?;
    let elapsed = started.elapsed();
    let event = record::scanned(args.record(daemon, &peer, "", elapsed), outcome.as_ref());
    daemon.audit.record(event).await?;
    match outcome {
        Ok(report) => {
            let worst = report.findings.iter().map(|(_, d)| d.decision).max();
            let mode = mode_name(worst.unwrap_or(crate::rules::Mode::Allow));
            daemon.metrics.decision(
                "history",
                mode,
                report
                    .findings
                    .iter()
                    .flat_map(|(_, d)| d.matches.iter())
                    .map(|m| (m.id.as_str(), mode_name(m.mode))),
                elapsed,
            );
            Ok(history_reply(report))
        }
        Err(status) => {
            daemon.metrics.rejected();
            Err(status)
        }
    }
}

fn count(daemon: &Daemon, layer: &str, d: &Decision, elapsed: std::time::Duration) {
    daemon.metrics.decision(
        layer,
        mode_name(d.decision),
        d.matches.iter().map(|m| (m.id.as_str(), mode_name(m.mode))),
        elapsed,
    );
}

/// What the ledger keeps of a request's input: its hash, whether it holds a secret, and
/// its (redacted) purpose — never the input itself.
struct Args {
    sha256: String,
    secret: bool,
    purpose: Option<String>,
}

impl Args {
    fn of(input: &str) -> Self {
        Self {
            sha256: sha256_hex(input.as_bytes()),
            secret: redact::has_secret(input),
            purpose: serde_json::from_str(input)
                .ok()
                .and_then(|v| record::purpose(&v)),
        }
    }

    fn record<'a>(
        self,
        daemon: &Daemon,
        peer: &'a Peer,
        agent_session: &'a str,
        elapsed: std::time::Duration,
    ) -> Evaluated<'a> {
        Evaluated {
            peer,
            session: record::session_of(&daemon.sessions.root().rel, peer),
            agent_session,
            args_sha256: self.sha256,
            args_secret: self.secret,
            purpose: self.purpose,
            elapsed,
        }
    }
}

/// Largest tool call or transcript accepted (a transcript of a long session is a few MiB).
pub const MAX_INPUT: usize = 32 << 20;

/// The agent's context: the request's cwd when absolute, else the peer's own.
#[must_use]
pub fn peer_context(peer: &Peer, cwd: &str) -> Context {
    let cwd = if cwd.starts_with('/') {
        cwd.to_owned()
    } else {
        std::fs::read_link(format!("/proc/{}/cwd", peer.pid))
            .map_or_else(|_| "/".to_owned(), |p| p.display().to_string())
    };
    Context::for_user(peer.uid, &cwd)
}

pub fn evaluate(
    rules: &RuleSet,
    peer: &Peer,
    call_json: &str,
    cwd: &str,
) -> Result<Decision, Status> {
    if call_json.len() > MAX_INPUT {
        return Err(Status::invalid_argument(
            "the tool call is larger than 32 MiB",
        ));
    }
    let value: serde_json::Value = serde_json::from_str(call_json)
        .map_err(|e| Status::invalid_argument(format!("the tool call is not JSON: {e}")))?;
    let call = ToolCall::from_json(&value).map_err(|e| Status::invalid_argument(e.to_string()))?;
    let ctx = peer_context(peer, cwd);
    let decision = engine::check(rules, &call, &ctx, &Activation::default());
    if decision.decision >= crate::rules::Mode::Warn {
        tracing::info!(
            pid = peer.pid,
            uid = peer.uid,
            tool = %decision.tool,
            decision = mode_name(decision.decision),
            "{}",
            redact::redact(&decision.message)
        );
    }
    Ok(decision)
}

pub fn scan_history(
    rules: &RuleSet,
    peer: &Peer,
    transcript: &str,
    cwd: &str,
) -> Result<HistoryReport, Status> {
    if transcript.len() > MAX_INPUT {
        return Err(Status::invalid_argument(
            "the transcript is larger than 32 MiB",
        ));
    }
    let ctx = peer_context(peer, cwd);
    let report = engine::scan_history(rules, transcript, &ctx, &Activation::default());
    if !report.clean() {
        tracing::warn!(
            pid = peer.pid,
            uid = peer.uid,
            "{}",
            redact::redact(&report.message)
        );
    }
    Ok(report)
}

#[must_use]
pub fn history_reply(report: HistoryReport) -> ScanHistoryReply {
    ScanHistoryReply {
        tool_calls: report.tool_calls as u32,
        findings: report
            .findings
            .iter()
            .map(|(i, d)| HistoryFinding {
                index: *i as u32,
                decision: Some(reply(d)),
            })
            .collect(),
        message: report.message,
    }
}

#[must_use]
pub fn reply(d: &Decision) -> EvaluateReply {
    EvaluateReply {
        decision: mode_name(d.decision).to_owned(),
        message: d.message.clone(),
        matches: d
            .matches
            .iter()
            .map(|m| RuleMatch {
                id: m.id.clone(),
                mode: mode_name(m.mode).to_owned(),
                layer: match m.layer {
                    engine::Layer::History => "history",
                    engine::Layer::ToolCall => "tool-call",
                }
                .to_owned(),
                message: m.message.clone(),
                source: m.source.clone(),
                matched: m.matched.clone(),
                kernel: m.kernel,
            })
            .collect(),
        decision_json: serde_json::to_string(d).unwrap_or_default(),
    }
}
