//! Session administration, approvals and plans over gRPC, and who may do what.
//!
//! Anyone may look at their own sessions and request approvals. Only the human may loosen
//! anything: approving, denying, switching rules off or on, resetting. A caller inside any
//! agent cgroup is refused all of those, whatever uid it runs as; identity comes from the
//! socket ([`Peer`]), never from the request.
use tonic::Status;

use super::evaluate::{gate_rules, parse_call, peer_context, session_of};
use super::proto::{
    Approval as ApprovalMsg, ApprovalRule, HistoryItem, PlanReply, PlanRequest, PlanStepInfo,
    SessionDetail, SessionRule,
};
use super::{Daemon, Peer};
use crate::session::approvals::{Approval, GateRule, PlanStep, Request};
use crate::session::db::{ApprovalStatus, RuleState};
use crate::session::state::{self, SessionRef};
use carapace_policy::engine::{self, Layer};
use carapace_policy::rules::{validate::mode_name, Mode, RuleSet};

/// Most steps a plan may have.
pub const MAX_PLAN_STEPS: usize = 200;

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

/// Refuses agents (`what` completes "processes inside a Carapace session cannot …") and
/// anyone but `owner` and root.
pub fn authorize_human(peer: &Peer, owner: u32, what: &str) -> Result<(), Status> {
    if peer.agent {
        tracing::warn!(
            pid = peer.pid,
            uid = peer.uid,
            "a process inside a session tried to {what}; refused"
        );
        return Err(Status::permission_denied(format!(
            "processes inside a Carapace session cannot {what}; the user does that from \
             outside the session (another terminal)"
        )));
    }
    if peer.uid != owner && peer.uid != 0 {
        return Err(Status::permission_denied(format!(
            "only uid {owner} (the owner) or root may {what}"
        )));
    }
    Ok(())
}

/// A session by id — or, when `id` is empty, the session `agent` / `external` name for
/// this caller — visible to its owner and root.
pub fn lookup(
    daemon: &Daemon,
    peer: &Peer,
    id: &str,
    agent: &str,
    external: &str,
) -> Result<SessionRef, Status> {
    if id.is_empty() {
        return session_of(daemon, peer, agent, external)?.ok_or_else(|| {
            Status::invalid_argument("name a session: its id, or the agent's own session id")
        });
    }
    let owner = daemon
        .sessions
        .db()
        .owner_of(id)
        .map_err(internal)?
        .ok_or_else(|| {
            Status::not_found(format!("no session {id} (see `carapace session list`)"))
        })?;
    if peer.uid != owner && peer.uid != 0 {
        return Err(Status::permission_denied(format!(
            "session {id} belongs to another user"
        )));
    }
    Ok(SessionRef {
        id: id.to_owned(),
        owner_uid: owner,
    })
}

/// Everything about one session; `history` most recent operations.
pub fn detail(daemon: &Daemon, id: &str, history: u32) -> Result<SessionDetail, Status> {
    let db = daemon.sessions.db();
    let mut d = SessionDetail {
        id: id.to_owned(),
        ..SessionDetail::default()
    };
    if let Some(run) = daemon.sessions.get(id) {
        d.kind = "run".into();
        d.shadow = run.shadow();
        d.profile.clone_from(&run.profile);
        d.record = run.records();
        d.owner_uid = run.owner_uid;
        d.created = run.created;
        d.command = run.command;
        d.cgroup = run.cgroup.display().to_string();
    } else if let Some(a) = db
        .agent_sessions()
        .map_err(internal)?
        .into_iter()
        .find(|a| a.id == id)
    {
        d.kind = "agent".into();
        d.owner_uid = a.owner_uid;
        d.created = a.created;
        d.agent = a.agent;
        d.external_id = a.external_id;
    } else {
        return Err(Status::not_found(format!("no session {id}")));
    }
    d.rules = db
        .rule_states(id)
        .map_err(internal)?
        .into_iter()
        .map(|(rule_id, state, since, reason)| SessionRule {
            rule_id,
            state: match state {
                RuleState::Activated => "activated",
                RuleState::Disabled => "disabled",
            }
            .into(),
            since,
            reason,
        })
        .collect();
    d.approved_operations = db.approved_count(id).map_err(internal)?;
    if history > 0 {
        d.history = db
            .history(id, history)
            .map_err(internal)?
            .into_iter()
            .map(|h| HistoryItem {
                at: h.at,
                tool: h.tool,
                summary: h.summary,
                decision: h.decision,
            })
            .collect();
    }
    d.approvals = db
        .session_approvals(id)
        .map_err(internal)?
        .into_iter()
        .filter_map(|row| daemon.approvals.get(&row.id).ok().flatten())
        .map(|a| approval_msg(&a))
        .collect();
    Ok(d)
}

/// Every session `peer` may see (its own; root sees all).
pub fn list(daemon: &Daemon, peer: &Peer) -> Result<Vec<SessionDetail>, Status> {
    let mut ids: Vec<(u32, String)> = daemon
        .sessions
        .list()
        .into_iter()
        .map(|r| (r.owner_uid, r.id))
        .collect();
    ids.extend(
        daemon
            .sessions
            .db()
            .agent_sessions()
            .map_err(internal)?
            .into_iter()
            .map(|a| (a.owner_uid, a.id)),
    );
    ids.into_iter()
        .filter(|(owner, _)| *owner == peer.uid || peer.uid == 0)
        .map(|(_, id)| detail(daemon, &id, 0))
        .collect()
}

fn rules_msg(rules: &[GateRule]) -> Vec<ApprovalRule> {
    rules
        .iter()
        .map(|r| ApprovalRule {
            id: r.id.clone(),
            mode: r.mode.clone(),
            message: r.message.clone(),
        })
        .collect()
}

fn step_msg(s: &PlanStep) -> PlanStepInfo {
    PlanStepInfo {
        n: s.n,
        summary: s.summary.clone(),
        decision: s.decision.clone(),
        rules: rules_msg(&s.rules),
    }
}

#[must_use]
pub fn approval_msg(a: &Approval) -> ApprovalMsg {
    ApprovalMsg {
        id: a.row.id.clone(),
        session_id: a.row.session_id.clone().unwrap_or_default(),
        kind: a.row.kind.clone(),
        status: a.row.status.name().to_owned(),
        created: a.row.created,
        summary: a.request.summary.clone(),
        rules: rules_msg(&a.request.rules),
        steps: a.request.steps.iter().map(step_msg).collect(),
        approved_steps: a.answer.approved_steps.clone(),
        asked: a.request.asked.max(1),
        once: a.answer.once,
        requester_uid: a.request.requester_uid,
        decided_by: a.row.decided_by,
    }
}

/// Answers an approval: only a human outside every session, owning the request (or root).
pub fn answer(
    daemon: &Daemon,
    peer: &Peer,
    id: &str,
    approve: bool,
    steps: &str,
    scope: crate::session::approvals::Scope,
) -> Result<Approval, Status> {
    let current = daemon
        .approvals
        .get(id)
        .map_err(internal)?
        .ok_or_else(|| Status::not_found(format!("no approval request {id}")))?;
    let what = if approve {
        "approve requests"
    } else {
        "deny requests"
    };
    authorize_human(peer, current.request.requester_uid, what)?;
    let answered = daemon
        .approvals
        .answer(id, approve, steps, scope, peer.uid)
        .map_err(|e| match e {
            crate::session::approvals::AnswerError::NotFound(_) => Status::not_found(e.to_string()),
            crate::session::approvals::AnswerError::Store(_) => internal(e),
            _ => Status::failed_precondition(e.to_string()),
        })?;
    // Before the answer returns: the human's "approved" means the retry passes now.
    super::kernel_approval::apply(daemon, &answered);
    Ok(answered)
}

/// A plan, pre-evaluated step by step with the session's rule state as it will be when the
/// step runs (earlier steps may switch rules on).
pub struct Planned {
    pub session: Option<SessionRef>,
    pub steps: Vec<PlanStep>,
    pub approval: Option<Approval>,
}

pub fn plan(
    daemon: &Daemon,
    rules: &RuleSet,
    peer: &Peer,
    req: &PlanRequest,
) -> Result<Planned, Status> {
    if req.steps_json.is_empty() {
        return Err(Status::invalid_argument("the plan has no steps"));
    }
    if req.steps_json.len() > MAX_PLAN_STEPS {
        return Err(Status::invalid_argument(format!(
            "the plan has more than {MAX_PLAN_STEPS} steps; split it"
        )));
    }
    let ctx = peer_context(peer, &req.cwd);
    let session = session_of(daemon, peer, &req.agent, &req.session_id)?;
    let mut simulated = match &session {
        Some(s) => state::activation(&daemon.sessions, &s.id).map_err(internal)?,
        None => engine::Activation::default(),
    };
    let mut steps = Vec::new();
    for (i, json) in req.steps_json.iter().enumerate() {
        let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let call = parse_call(json)
            .map_err(|e| Status::invalid_argument(format!("step {n}: {}", e.message())))?;
        let ext = call.extract(&ctx);
        let mut d = engine::evaluate(rules, &ext, &simulated, Layer::ToolCall);
        let signature = ext.signature();
        if d.decision == Mode::Approve {
            if let Some(s) = &session {
                if daemon
                    .sessions
                    .db()
                    .is_approved(&s.id, &signature)
                    .map_err(internal)?
                {
                    d = d.approved("approved earlier in this session");
                }
            }
        }
        if !matches!(d.decision, Mode::Block | Mode::Approve) {
            for (rule, _) in engine::fired_triggers(rules, &ext, &simulated) {
                simulated.activated.insert(rule.id.clone());
            }
        }
        let shown = if d.decision == Mode::Block {
            d.matches
                .iter()
                .filter(|m| m.mode == Mode::Block)
                .map(|m| GateRule {
                    id: m.id.clone(),
                    mode: "block".into(),
                    message: m.message.clone(),
                    matched: crate::audit::redact::redact(&m.matched).into_owned(),
                })
                .collect()
        } else {
            gate_rules(&d)
        };
        steps.push(PlanStep {
            n,
            summary: ext.summary(),
            signature,
            decision: mode_name(d.decision).to_owned(),
            rules: shown,
        });
    }
    let mut planned = Planned {
        session,
        steps,
        approval: None,
    };
    let blocked = planned.steps.iter().any(|s| s.decision == "block");
    if !blocked && planned.steps.iter().any(PlanStep::gated) {
        let gated: Vec<String> = planned
            .steps
            .iter()
            .filter(|s| s.gated())
            .map(|s| s.n.to_string())
            .collect();
        let request = Request {
            requester_uid: planned.session.as_ref().map_or(peer.uid, |s| s.owner_uid),
            summary: format!(
                "plan of {} steps; steps {} need approval",
                planned.steps.len(),
                gated.join(", ")
            ),
            steps: planned.steps.clone(),
            ..Request::default()
        };
        let session_id = planned.session.as_ref().map(|s| s.id.as_str());
        planned.approval = Some(
            daemon
                .approvals
                .request(session_id, "plan", &request)
                .map_err(internal)?,
        );
    }
    Ok(planned)
}

/// The reply to a plan, after waiting (or not) for the user.
#[must_use]
pub fn plan_reply(planned: &Planned) -> PlanReply {
    let steps: Vec<PlanStepInfo> = planned.steps.iter().map(step_msg).collect();
    let session_id = planned
        .session
        .as_ref()
        .map(|s| s.id.clone())
        .unwrap_or_default();
    if let Some(bad) = planned.steps.iter().find(|s| s.decision == "block") {
        let rule = bad.rules.first().map_or("", |r| r.id.as_str());
        return PlanReply {
            status: "block".into(),
            steps,
            message: format!(
                "Carapace refuses this plan: step {} ({}) is blocked by rule {rule}, which no \
                 approval can lift. Remove or change that step and submit the plan again.",
                bad.n, bad.summary
            ),
            session_id,
            ..PlanReply::default()
        };
    }
    let Some(a) = &planned.approval else {
        return PlanReply {
            status: "approved".into(),
            approved_steps: planned.steps.iter().map(|s| s.n).collect(),
            steps,
            message: "Carapace approves this plan: no step needs the user's approval.".into(),
            session_id,
            ..PlanReply::default()
        };
    };
    let (status, message) = match a.row.status {
        ApprovalStatus::Pending => (
            "approve",
            format!(
                "The plan needs the user's approval (request {id}: `carapace approve {id}` for \
                 all, `carapace approve {id} --steps 1-3` for some, `carapace deny {id}`). Wait \
                 for the answer before starting.",
                id = a.row.id
            ),
        ),
        ApprovalStatus::Approved => (
            "approved",
            format!(
                "The user approved steps {:?} of the plan. Follow it; anything else needs a new \
                 approval.",
                a.answer.approved_steps
            ),
        ),
        ApprovalStatus::Denied => ("denied", "The user denied the plan. Do not run it.".into()),
        ApprovalStatus::Expired => (
            "expired",
            "Nobody approved the plan in time. Do not run it.".into(),
        ),
    };
    PlanReply {
        status: status.into(),
        approval_id: a.row.id.clone(),
        steps,
        approved_steps: a.answer.approved_steps.clone(),
        message,
        session_id,
    }
}
