//! `Evaluate` and `ScanHistory`: Layers 1 and 0 over gRPC, in the caller's context (its
//! uid's home, its working directory), never in the daemon's. Each answer is given only
//! after its audit record is on disk (see [`super::audit`]).
use std::fmt::Write as _;
use std::time::Instant;

use tonic::Status;

use super::audit::{self as record, Evaluated as Recorded};
use super::proto::{
    EvaluateReply, EvaluateRequest, HistoryFinding, RuleMatch, ScanHistoryReply, ScanHistoryRequest,
};
use super::{Daemon, Peer};
use crate::audit::{record::sha256_hex, redact};
use crate::llm::review::{Aspect, Subject, MAX_HISTORY};
use crate::llm::Reviewer;
use crate::metrics::Layer;
use crate::session::approvals::{Approval, GateRule, Request};
use crate::session::db::{ApprovalStatus, RuleState};
use crate::session::state::{self, Caller, Checked, SessionRef};
use carapace_policy::engine::guardrail::{self, TaskAnswer};
use carapace_policy::engine::{
    self, Activation, Context, Decision, Extracted, HistoryReport, ToolCall,
};
use carapace_policy::rules::Trigger;
use carapace_policy::rules::{validate::mode_name, Mode, RuleSet};

/// Records an evaluation in the audit ledger (the answer waits for it: a decision that
/// cannot be recorded is refused) and counts it in the metrics.
pub async fn record_evaluation(
    daemon: &Daemon,
    peer: &Peer,
    agent_session: &str,
    args: Args,
    elapsed: std::time::Duration,
    outcome: Result<&Decision, &Status>,
    would_deny: bool,
) -> Result<(), Status> {
    let event = args
        .record(daemon, peer, agent_session, elapsed)
        .event(outcome);
    let event = super::shadow::recorded(event, would_deny && outcome.is_ok());
    daemon.audit.record(event).await?;
    match outcome {
        Ok(decision) => count(daemon, Layer::ToolCall, decision, elapsed),
        Err(_) => daemon.metrics.rejected(),
    }
    Ok(())
}

/// The `ScanHistory` RPC: scan, record, then answer.
pub async fn handle_scan_history(
    daemon: &Daemon,
    peer: Peer,
    req: ScanHistoryRequest,
) -> Result<ScanHistoryReply, Status> {
    let rules = daemon.rules_of_peer(&peer);
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
            daemon.metrics.decision(
                Layer::History,
                worst.unwrap_or(carapace_policy::rules::Mode::Allow),
                report
                    .findings
                    .iter()
                    .flat_map(|(_, d)| d.matches.iter())
                    .map(|m| (m.id.as_str(), m.mode)),
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

pub(crate) fn count(daemon: &Daemon, layer: Layer, d: &Decision, elapsed: std::time::Duration) {
    daemon.metrics.decision(
        layer,
        d.decision,
        d.matches.iter().map(|m| (m.id.as_str(), m.mode)),
        elapsed,
    );
}

/// What the ledger keeps of a request's input: its hash, whether it holds a secret, and
/// its (redacted) purpose — never the input itself.
pub struct Args {
    sha256: String,
    secret: bool,
    purpose: Option<String>,
}

impl Args {
    #[must_use]
    pub fn of(input: &str) -> Self {
        Self {
            sha256: sha256_hex(input.as_bytes()),
            secret: redact::has_secret(input),
            purpose: serde_json::from_str(input)
                .ok()
                .and_then(|v| record::purpose(&v)),
        }
    }

    /// The ledger's record of a call, by a caller other than a gRPC peer (the gateway's
    /// clients).
    #[must_use]
    pub fn recorded(
        self,
        agent: crate::audit::Agent,
        session: Option<String>,
        elapsed: std::time::Duration,
    ) -> Recorded<'static> {
        Recorded {
            agent,
            session,
            agent_session: "",
            args_sha256: self.sha256,
            args_secret: self.secret,
            purpose: self.purpose,
            elapsed,
        }
    }

    fn record<'a>(
        self,
        daemon: &Daemon,
        peer: &'a Peer,
        agent_session: &'a str,
        elapsed: std::time::Duration,
    ) -> Recorded<'a> {
        Recorded {
            agent: record::agent(peer),
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
    crate::policy_host::context_for_user(peer.uid, &cwd)
}

/// A Layer-1 decision in its session, possibly waiting for the user.
pub struct Evaluated {
    pub checked: Checked,
    pub ext: Extracted,
    pub session: Option<SessionRef>,
    pub approval: Option<Approval>,
    pub activated: Vec<String>,
    /// In a shadow session: the decision the rules made and shadow mode did not apply.
    pub would_deny: Option<Mode>,
}

impl Evaluated {
    /// Shadow mode (`carapace run --shadow`): in a shadow session a refusal that no held
    /// rule makes becomes an allow, and `would_deny` keeps what it was.
    pub fn apply_shadow(&mut self, daemon: &Daemon) {
        let session = self.session.as_ref().map(|s| s.id.as_str());
        if let Some(would) = super::shadow::apply(daemon, session, &mut self.checked.decision) {
            self.would_deny = Some(would);
        }
    }
}

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

/// Parses a tool call the way every front door does.
pub fn parse_call(call_json: &str) -> Result<ToolCall, Status> {
    if call_json.len() > MAX_INPUT {
        return Err(Status::invalid_argument(
            "the tool call is larger than 32 MiB",
        ));
    }
    let value: serde_json::Value = serde_json::from_str(call_json)
        .map_err(|e| Status::invalid_argument(format!("the tool call is not JSON: {e}")))?;
    ToolCall::from_json(&value).map_err(|e| Status::invalid_argument(e.to_string()))
}

/// The session of a request (see [`state::resolve`]).
pub fn session_of(
    daemon: &Daemon,
    peer: &Peer,
    agent: &str,
    external: &str,
) -> Result<Option<SessionRef>, Status> {
    let caller = Caller {
        uid: peer.uid,
        cgroup: peer.cgroup.as_deref(),
    };
    state::resolve(&daemon.sessions, caller, agent, external).map_err(internal)
}

/// What the LLM reviewer needs to refine a decision: the call's canonical form, the key its
/// verdicts are cached under, and the session's recent operations (for plain-English
/// triggers).
pub struct ForReview {
    pub subject: Subject,
    pub cache_key: String,
    pub history: Vec<String>,
    /// The user approved this operation earlier in the session.
    pub approved_before: bool,
}

/// Phase 1 (blocking): the deterministic decision for one call in its session; with what the
/// LLM reviewer needs when a rule is decided by the model.
pub fn check(
    daemon: &Daemon,
    rules: &RuleSet,
    peer: &Peer,
    req: &EvaluateRequest,
) -> Result<(Evaluated, Option<ForReview>), Status> {
    // The guardrail profile rejects an unsupported task type by evaluation, not as an error.
    let (call, unsupported) = match parse_call(&req.call_json) {
        Ok(call) => (call, None),
        Err(status) => match guardrail::unsupported_type(rules, &req.call_json) {
            Some(task) => (
                ToolCall {
                    tool: task.clone(),
                    input: serde_json::Value::Null,
                },
                Some(task),
            ),
            None => return Err(status),
        },
    };
    let ctx = peer_context(peer, &req.cwd);
    let ext = call.extract(&ctx);
    let session = session_of(daemon, peer, &req.agent, &req.session_id)?;
    let mut checked =
        state::check(&daemon.sessions, rules, session.as_ref(), &ext).map_err(internal)?;
    if let Some(task) = &unsupported {
        checked.decision = guardrail::unsupported(task);
    }
    let review = if Reviewer::needed(rules) {
        let history = match &session {
            Some(s) => daemon
                .sessions
                .db()
                .history(&s.id, MAX_HISTORY as u32)
                .map_err(internal)?
                .into_iter()
                .map(|h| format!("{} {} ({})", h.tool, h.summary, h.decision))
                .collect(),
            None => Vec::new(),
        };
        // Verdicts are per session: the resolved session, else the caller's cgroup
        // and the harness's id, so two conversations never share an answer.
        let cache_key = session.as_ref().map_or_else(
            || {
                format!(
                    "{}|{}",
                    peer.cgroup.as_deref().unwrap_or(""),
                    req.session_id
                )
            },
            |s| s.id.clone(),
        );
        let approved_before = match &session {
            Some(s) => daemon
                .sessions
                .db()
                .is_approved(&s.id, checked.signature(&ext))
                .map_err(internal)?,
            None => false,
        };
        Some(ForReview {
            subject: Subject::new(&call, &ext),
            cache_key,
            history,
            approved_before,
        })
    } else {
        None
    };
    let ev = Evaluated {
        checked,
        ext,
        session,
        approval: None,
        activated: Vec::new(),
        would_deny: None,
    };
    Ok((ev, review))
}

/// Phase 2 (async): the model decides the rules that ask for it (see
/// [`Reviewer::review_decision`]); when the call is going to run in a session, it also
/// judges the plain-English triggers not yet switched on. Returns those that fired, with
/// the model's reason.
pub async fn review(
    reviewer: &Reviewer,
    rules: &RuleSet,
    ev: &mut Evaluated,
    r: &ForReview,
) -> Vec<(String, String)> {
    let activation = ev.checked.activation.clone();
    let decision = std::mem::replace(
        &mut ev.checked.decision,
        Decision::from_matches("", Vec::new(), Vec::new()),
    );
    let after_review = reviewer
        .review_decision(&r.cache_key, rules, &activation, &r.subject, decision)
        .await;
    // The model may have added approve matches: an operation the user approved earlier in
    // this session still passes.
    ev.checked.decision = if r.approved_before {
        after_review.approved("approved earlier in this session")
    } else {
        after_review
    };
    let runs = !matches!(ev.checked.decision.decision, Mode::Block | Mode::Approve);
    if ev.session.is_none() || !runs {
        return Vec::new();
    }
    let mut fired = Vec::new();
    for rule in rules.rules().iter().filter(|r| {
        matches!(r.trigger, Some(Trigger::English(_)))
            && !activation.activated.contains(&r.id)
            && !activation.disabled.contains(&r.id)
    }) {
        match reviewer
            .english_applies(&r.cache_key, rule, Aspect::Trigger, &r.history, &r.subject)
            .await
        {
            Ok(v) if v.applies => fired.push((rule.id.clone(), v.reason)),
            Ok(_) => {}
            // A trigger the model could not judge stays off; its on_llm_error is for the
            // rule's effect on an operation, and switching rules on from a failure would
            // turn every outage into session-wide approvals.
            Err(e) => tracing::warn!(rule = %rule.id, "cannot judge the trigger: {e}"),
        }
    }
    fired
}

/// Phase 3 (blocking): an `approve` decision parks an approval request (when the call has a
/// session, or the caller will wait); anything else is recorded in the session, switching
/// on the rules it triggers (structured triggers, and `fired` from the model).
pub fn settle(
    daemon: &Daemon,
    rules: &RuleSet,
    peer: &Peer,
    req: &EvaluateRequest,
    mut ev: Evaluated,
    fired: &[(String, String)],
) -> Result<Evaluated, Status> {
    // Before anything is recorded or asked: a shadow session's call runs.
    ev.apply_shadow(daemon);
    if let Some(s) = &ev.session {
        ev.activated =
            state::record(&daemon.sessions, rules, s, &ev.ext, &ev.checked).map_err(internal)?;
        let runs = !matches!(ev.checked.decision.decision, Mode::Block | Mode::Approve);
        if runs {
            super::record::note_call(daemon, &s.id, &ev.ext);
        }
        let mut switched = false;
        for (rule, why) in fired.iter().filter(|_| runs) {
            let reason = format!("{} (LLM review: {why})", ev.ext.tool);
            if daemon
                .sessions
                .db()
                .set_rule_state(&s.id, rule, RuleState::Activated, true, &reason)
                .map_err(internal)?
            {
                tracing::info!(session = %s.id, rule = %rule, "session rule switched on after {reason}");
                ev.activated.push(rule.clone());
                switched = true;
            }
        }
        if switched {
            state::sync_kernel(&daemon.sessions, rules, &s.id).map_err(internal)?;
        }
    }
    if ev.checked.decision.decision == Mode::Approve
        && (ev.session.is_some() || req.wait_seconds > 0)
    {
        let request = Request {
            requester_uid: ev.session.as_ref().map_or(peer.uid, |s| s.owner_uid),
            summary: ev.ext.summary(),
            signature: ev.checked.signature(&ev.ext).to_owned(),
            rules: gate_rules(&ev.checked.decision),
            kernel_ops: ev.session.as_ref().map_or_else(Vec::new, |_| {
                super::kernel_approval::call_operations(rules, &ev.checked.decision, &ev.ext)
            }),
            ..Request::default()
        };
        let session_id = ev.session.as_ref().map(|s| s.id.as_str());
        let approval = daemon
            .approvals
            .request(session_id, "call", &request)
            .map_err(internal)?;
        if approval.row.status == ApprovalStatus::Pending {
            ev.approval = Some(approval);
        } else {
            // The user already denied this very request in the session: that answer
            // stands (approval fatigue, see `session::approvals`).
            answered(daemon, rules, &mut ev, approval)?;
        }
    }
    let d = &ev.checked.decision;
    if d.decision >= Mode::Warn {
        tracing::info!(
            pid = peer.pid,
            uid = peer.uid,
            session = ev.session.as_ref().map_or("", |s| s.id.as_str()),
            tool = %d.tool,
            decision = mode_name(d.decision),
            "{}",
            redact::redact(&d.message)
        );
    }
    Ok(ev)
}

/// The user answered (or nobody did): an approved call runs — and is recorded, switching
/// on what it triggers; a denied or expired one is refused.
pub fn answered(
    daemon: &Daemon,
    rules: &RuleSet,
    ev: &mut Evaluated,
    approval: Approval,
) -> Result<(), Status> {
    let id = approval.row.id.clone();
    match approval.row.status {
        ApprovalStatus::Approved => {
            let d = ev.checked.decision.clone();
            ev.checked.decision = d.approved(&format!("approval {id}"));
            if let Some(s) = &ev.session {
                ev.activated = state::record(&daemon.sessions, rules, s, &ev.ext, &ev.checked)
                    .map_err(internal)?;
                super::record::note_call(daemon, &s.id, &ev.ext);
            }
        }
        ApprovalStatus::Pending => {}
        status @ (ApprovalStatus::Denied | ApprovalStatus::Expired) => {
            let d = &mut ev.checked.decision;
            let why = if status == ApprovalStatus::Denied {
                "the user denied it"
            } else {
                "nobody approved it in time"
            };
            d.decision = Mode::Block;
            d.message = format!(
                "Carapace blocked this {} call: {why} (approval {id}). Do not retry it; ask the \
                 user how to go on.",
                d.tool
            );
        }
    }
    ev.approval = Some(approval);
    Ok(())
}

/// The approve-mode rules of a decision, for the approval prompt.
#[must_use]
pub fn gate_rules(d: &Decision) -> Vec<GateRule> {
    d.matches
        .iter()
        .filter(|m| m.mode == Mode::Approve)
        .map(|m| GateRule {
            id: m.id.clone(),
            mode: mode_name(m.mode).to_owned(),
            message: m.message.clone(),
            // Redacted as the ledger is: the request is stored.
            matched: crate::audit::redact::redact(&m.matched).into_owned(),
        })
        .collect()
}

/// The guardrail profile's answer in the reply (see [`guardrail::answers_json`]).
#[must_use]
pub fn task_answer(d: &Decision) -> super::proto::TaskAnswer {
    let a = TaskAnswer::of(d);
    super::proto::TaskAnswer {
        approved: a.approved,
        failed_checks: a.failed_checks,
        required_confirmation: a.required_confirmation,
    }
}

/// The reply of an evaluation in a session.
#[must_use]
pub fn evaluated_reply(ev: &Evaluated) -> EvaluateReply {
    let mut r = reply(&ev.checked.decision);
    if let Some(a) = &ev.approval {
        r.approval_id.clone_from(&a.row.id);
        a.row.status.name().clone_into(&mut r.approval_status);
        if a.row.status == ApprovalStatus::Pending {
            let _ = write!(
                r.message,
                " (approval request {}: the user answers with `carapace approve {}` or \
                 `carapace deny {}`)",
                a.row.id, a.row.id, a.row.id
            );
        }
    }
    r.session_id = ev
        .session
        .as_ref()
        .map(|s| s.id.clone())
        .unwrap_or_default();
    r.activated.clone_from(&ev.activated);
    r.would_deny = super::shadow::reply_field(ev.would_deny);
    r
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
    let report = crate::llm::review::unreviewed_history(rules, report);
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
        ..EvaluateReply::default()
    }
}
