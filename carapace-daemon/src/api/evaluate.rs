//! `Evaluate` and `ScanHistory`: Layers 1 and 0 over gRPC, in the caller's context (its
//! uid's home, its working directory), never in the daemon's.
use tonic::Status;

use super::proto::{EvaluateReply, HistoryFinding, RuleMatch, ScanHistoryReply};
use super::Peer;
use crate::engine::{self, Activation, Context, Decision, ToolCall};
use crate::llm::review::Subject;
use crate::llm::Reviewer;
use crate::rules::{validate::mode_name, RuleSet};

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
) -> Result<EvaluateReply, Status> {
    let (decision, _) = decide(rules, peer, call_json, cwd)?;
    log_decision(peer, &decision);
    Ok(reply(&decision))
}

/// The deterministic decision for a tool call, and the call's canonical form for the LLM
/// reviewer (which may refine the matches of rules it decides) when a rule needs one.
pub fn decide(
    rules: &RuleSet,
    peer: &Peer,
    call_json: &str,
    cwd: &str,
) -> Result<(Decision, Option<Subject>), Status> {
    if call_json.len() > MAX_INPUT {
        return Err(Status::invalid_argument(
            "the tool call is larger than 32 MiB",
        ));
    }
    let value: serde_json::Value = serde_json::from_str(call_json)
        .map_err(|e| Status::invalid_argument(format!("the tool call is not JSON: {e}")))?;
    let call = ToolCall::from_json(&value).map_err(|e| Status::invalid_argument(e.to_string()))?;
    let ctx = peer_context(peer, cwd);
    let ext = call.extract(&ctx);
    let decision = engine::evaluate(rules, &ext, &Activation::default(), engine::Layer::ToolCall);
    let subject = Reviewer::needed(rules).then(|| Subject::new(&call, &ext));
    Ok((decision, subject))
}

/// Logs decisions that warn, ask or block.
pub fn log_decision(peer: &Peer, decision: &Decision) {
    if decision.decision >= crate::rules::Mode::Warn {
        tracing::info!(
            pid = peer.pid,
            uid = peer.uid,
            tool = %decision.tool,
            decision = mode_name(decision.decision),
            "{}",
            decision.message
        );
    }
}

pub fn scan_history(
    rules: &RuleSet,
    peer: &Peer,
    transcript: &str,
    cwd: &str,
) -> Result<ScanHistoryReply, Status> {
    if transcript.len() > MAX_INPUT {
        return Err(Status::invalid_argument(
            "the transcript is larger than 32 MiB",
        ));
    }
    let ctx = peer_context(peer, cwd);
    let report = engine::scan_history(rules, transcript, &ctx, &Activation::default());
    let report = crate::llm::review::unreviewed_history(rules, report);
    if !report.clean() {
        tracing::warn!(pid = peer.pid, uid = peer.uid, "{}", report.message);
    }
    Ok(ScanHistoryReply {
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
    })
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
