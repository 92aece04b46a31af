//! What the API writes to the audit ledger for each request, and when a failure to write
//! refuses the request.
//!
//! - `Evaluate` / `ScanHistory`: the answer is given only once its record is on disk; when
//!   the ledger cannot take it, the caller gets `UNAVAILABLE` and no decision (hooks treat
//!   that as a denial).
//! - `CreateSession`: the same — a session the ledger does not know of is ended again.
//! - Kernel denials, `EndSession`, the reaper and rule reloads: these have already taken
//!   effect when they are recorded; a write failure is logged and counted (and shows in
//!   `carapace status`), not undone.
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tonic::Status;

use super::proto::Denial;
use super::Peer;
use crate::audit::redact::{self, redact};
use crate::audit::{Agent, Event, Kind, Ledger, RuleRef};
use carapace_policy::engine::{Decision, HistoryReport};
use carapace_policy::rules::validate::mode_name;

/// The ledger's decision for a refusal a shadow session (`carapace run --shadow`) recorded
/// instead of applying: the operation ran.
pub const WOULD_DENY: &str = "would-deny";

/// The ledger the daemon records into, attached once at start.
#[derive(Default)]
pub struct AuditLog {
    ledger: OnceLock<Arc<Ledger>>,
}

impl AuditLog {
    /// Attaches the ledger (once; later calls are ignored).
    pub fn attach(&self, ledger: Arc<Ledger>) {
        let _ = self.ledger.set(ledger);
    }

    #[must_use]
    pub fn ledger(&self) -> Option<&Arc<Ledger>> {
        self.ledger.get()
    }

    /// Records `event`; `UNAVAILABLE` when it could not be (or no ledger is attached).
    pub async fn record(&self, event: Event) -> Result<u64, Status> {
        let Some(ledger) = self.ledger.get() else {
            return Err(Status::unavailable(
                "the decision could not be recorded: carapaced has no audit ledger",
            ));
        };
        ledger.append(event).await.map_err(|e| {
            tracing::error!("refusing to answer unrecorded: {e}");
            Status::unavailable(format!("the decision could not be recorded: {e}"))
        })
    }

    /// Queues an event whose effect already happened without waiting for it (kernel
    /// denials can come in floods: they are then written in batches, in order); a failure
    /// is logged.
    pub fn note_detached(&self, event: Event) {
        let kind = event.kind;
        let Some(ledger) = self.ledger.get() else {
            tracing::error!("cannot record {kind:?}: carapaced has no audit ledger");
            return;
        };
        let done = ledger.append_queued(event);
        tokio::spawn(async move {
            if let Err(e) = done.await {
                tracing::error!("cannot record {kind:?} in the audit ledger: {e}");
            }
        });
    }

    /// Records an event whose effect already happened: failures are logged, not returned.
    pub async fn note(&self, event: Event) {
        let kind = event.kind;
        if let Err(e) = self.record(event).await {
            tracing::error!(
                "cannot record {kind:?} in the audit ledger: {}",
                e.message()
            );
        }
    }
}

/// The Carapace session a peer runs in: the first path component below the sessions' root.
#[must_use]
pub fn session_of(root_rel: &str, peer: &Peer) -> Option<String> {
    let rest = peer
        .cgroup
        .as_deref()?
        .strip_prefix(root_rel.trim_end_matches('/'))?
        .strip_prefix('/')?;
    rest.split('/')
        .next()
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The peer as the ledger shows it (its command from `/proc/PID/comm`).
#[must_use]
pub fn agent(peer: &Peer) -> Agent {
    agent_of(peer.pid, Some(peer.uid))
}

/// Process `pid` of user `uid` as the ledger shows it (pid 0: unknown, no command).
#[must_use]
pub fn agent_of(pid: u32, uid: Option<u32>) -> Agent {
    let command = (pid != 0)
        .then(|| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok())
        .flatten()
        .map(|c| redact(c.trim_end()).into_owned())
        .unwrap_or_default();
    Agent { pid, uid, command }
}

/// The error class of a refused request (its gRPC code, in words).
#[must_use]
pub fn error_class(status: &Status) -> String {
    match status.code() {
        tonic::Code::InvalidArgument => "invalid-argument",
        tonic::Code::PermissionDenied => "permission-denied",
        tonic::Code::NotFound => "not-found",
        tonic::Code::Unavailable => "unavailable",
        _ => "internal",
    }
    .to_owned()
}

/// `purpose` of the call, or the description Claude Code's tools carry in their input.
#[must_use]
pub fn purpose(call: &serde_json::Value) -> Option<String> {
    let text = call
        .get("purpose")
        .and_then(serde_json::Value::as_str)
        .or_else(|| {
            ["input", "tool_input"]
                .iter()
                .find_map(|k| call.get(*k))
                .and_then(|i| i.get("description"))
                .and_then(serde_json::Value::as_str)
        })?;
    redact::field(text)
}

fn rules_of(d: &Decision) -> Vec<RuleRef> {
    d.matches
        .iter()
        .map(|m| RuleRef {
            id: m.id.clone(),
            mode: mode_name(m.mode).to_owned(),
            matched: redact(&m.matched).into_owned(),
        })
        .collect()
}

/// Risk flags: the actions the call performs, and whether its arguments hold a secret.
fn risk_of(d: &Decision, args_secret: bool) -> Vec<String> {
    let mut flags: Vec<String> = d
        .operations
        .iter()
        .filter_map(|o| o.action.map(|a| a.name().to_owned()))
        .collect();
    flags.sort_unstable();
    flags.dedup();
    if args_secret {
        flags.push("secret-in-arguments".to_owned());
    }
    if d.matches.iter().any(|m| m.kernel) {
        flags.push("kernel-rule".to_owned());
    }
    flags
}

/// What one `Evaluate` request is recorded as.
pub struct Evaluated<'a> {
    /// The caller (see [`agent`]).
    pub agent: Agent,
    pub session: Option<String>,
    pub agent_session: &'a str,
    pub args_sha256: String,
    pub args_secret: bool,
    pub purpose: Option<String>,
    pub elapsed: Duration,
}

impl Evaluated<'_> {
    /// The fields every evaluation record has; also whether the arguments hold a secret.
    fn base(self, kind: Kind, layer: &str) -> (Event, bool) {
        let mut e = Event::new(kind);
        e.session = self.session;
        e.agent_session = redact::field(self.agent_session);
        e.agent = Some(self.agent);
        e.purpose = self.purpose;
        e.args_sha256 = Some(self.args_sha256);
        e.layer = Some(layer.to_owned());
        e.elapsed_us = Some(self.elapsed.as_micros() as u64);
        (e, self.args_secret)
    }

    /// The record of one `Evaluate` request.
    #[must_use]
    pub fn event(self, outcome: Result<&Decision, &Status>) -> Event {
        let (mut e, secret) = self.base(Kind::Evaluate, "tool-call");
        match outcome {
            Ok(d) => with_decision(&mut e, d, secret),
            Err(status) => with_error(&mut e, status, secret),
        }
        e
    }
}

fn with_decision(e: &mut Event, d: &Decision, args_secret: bool) {
    e.tool = redact::field(&d.tool);
    e.decision = Some(mode_name(d.decision).to_owned());
    e.rules = rules_of(d);
    e.risk = risk_of(d, args_secret);
}

fn with_error(e: &mut Event, status: &Status, args_secret: bool) {
    e.decision = Some("error".to_owned());
    e.error = Some(error_class(status));
    e.detail = redact::field(status.message());
    if args_secret {
        e.risk.push("secret-in-arguments".to_owned());
    }
}

/// The record of one `ScanHistory` request: the strictest finding decides.
#[must_use]
pub fn scanned(base: Evaluated<'_>, outcome: Result<&HistoryReport, &Status>) -> Event {
    let (mut e, secret) = base.base(Kind::ScanHistory, "history");
    match outcome {
        Ok(report) => {
            let worst = report
                .findings
                .iter()
                .map(|(_, d)| d)
                .max_by_key(|d| d.decision);
            if let Some(d) = worst {
                with_decision(&mut e, d, secret);
            } else {
                e.decision = Some("allow".to_owned());
                if secret {
                    e.risk.push("secret-in-arguments".to_owned());
                }
            }
            e.tool = None;
            e.rules = report
                .findings
                .iter()
                .flat_map(|(_, d)| rules_of(d))
                .collect();
            e.rules
                .dedup_by(|a, b| a.id == b.id && a.matched == b.matched);
            e.detail = Some(format!(
                "{} tool calls, {} findings",
                report.tool_calls,
                report.findings.len()
            ));
        }
        Err(status) => with_error(&mut e, status, secret),
    }
    e
}

/// The record of a kernel denial.
#[must_use]
pub fn denied(d: &Denial) -> Event {
    let mut e = Event::new(Kind::KernelDenial);
    e.session = Some(d.session_id.clone());
    e.agent = Some(Agent {
        pid: d.pid,
        uid: None,
        command: redact(&d.comm).into_owned(),
    });
    e.decision = Some(if d.would_deny { WOULD_DENY } else { "block" }.to_owned());
    e.layer = Some("kernel".to_owned());
    e.rules = vec![RuleRef {
        id: d.rule_id.clone(),
        mode: "block".to_owned(),
        matched: redact(&format!("{} {}", d.operation, d.subject)).into_owned(),
    }];
    e.risk = vec![d.operation.clone()];
    e
}

/// The record of a lookup a session's resolver refused (`crate::dns`): the name is the
/// subject, as a path is a kernel denial's.
#[must_use]
pub fn lookup_refused(d: &Denial) -> Event {
    // The server-name proxy reports through the same sink as the resolver.
    let kind = if d.layer == crate::sni::LAYER {
        Kind::ServerNameRefused
    } else {
        Kind::LookupRefused
    };
    let mut e = Event::new(kind);
    e.session = Some(d.session_id.clone());
    e.decision = Some("block".to_owned());
    e.layer = Some(d.layer.clone());
    e.rules = vec![RuleRef {
        id: d.rule_id.clone(),
        mode: "block".to_owned(),
        matched: redact(&format!("{} {}", d.operation, d.subject)).into_owned(),
    }];
    e.risk = vec![d.operation.clone()];
    e.detail = redact::field(&d.message);
    e
}

/// The record of a session created or ended.
#[must_use]
pub fn session_changed(
    kind: Kind,
    id: &str,
    peer: Option<&Peer>,
    command: &[String],
    why: &str,
) -> Event {
    let mut e = Event::new(kind);
    e.session = Some(id.to_owned());
    if let Some(peer) = peer {
        let mut a = agent(peer);
        if !command.is_empty() {
            a.command = redact(&command.join(" ")).into_owned();
        }
        e.agent = Some(a);
    }
    e.detail = redact::field(why);
    e
}

/// The record of a session that ran into a limit: `resource` is `memory`, `pids` or `time`.
#[must_use]
pub fn limit_reached(id: &str, resource: &str, message: &str) -> Event {
    let mut e = Event::new(Kind::SessionLimit);
    e.session = Some(id.to_owned());
    e.layer = Some("cgroup".to_owned());
    e.risk = vec![resource.to_owned()];
    e.detail = redact::field(message);
    e
}

/// The record of an approval answered: by whom (`peer`), what, and which rules gated it.
#[must_use]
pub fn approval_answered(peer: &Peer, a: &crate::session::approvals::Approval) -> Event {
    let mut e = Event::new(Kind::ApprovalAnswered);
    e.session.clone_from(&a.row.session_id);
    e.agent = Some(agent(peer));
    e.decision = Some(a.row.status.name().to_owned());
    e.rules = a
        .request
        .rules
        .iter()
        .chain(a.request.steps.iter().flat_map(|s| s.rules.iter()))
        .map(|r| RuleRef {
            id: r.id.clone(),
            mode: r.mode.clone(),
            matched: String::new(),
        })
        .collect();
    let steps = if a.answer.approved_steps.is_empty() {
        String::new()
    } else {
        format!(" steps {:?}", a.answer.approved_steps)
    };
    e.detail = redact::field(&format!(
        "{} {}{steps}: {}",
        a.row.kind, a.row.id, a.request.summary
    ));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(cgroup: Option<&str>) -> Peer {
        Peer {
            uid: 1000,
            gid: 1000,
            pid: std::process::id(),
            cgroup: cgroup.map(str::to_owned),
            agent: true,
        }
    }

    #[tokio::test]
    async fn a_decision_that_cannot_be_recorded_is_refused() {
        let log = AuditLog::default();
        let status = log.record(Event::new(Kind::Evaluate)).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable);

        let dir = tempfile::tempdir().unwrap();
        let options = crate::audit::Options {
            segment_bytes: 1,
            ..crate::audit::Options::default()
        };
        let (ledger, _) = Ledger::open(dir.path(), options).unwrap();
        let log = AuditLog::default();
        log.attach(Arc::new(ledger));
        assert_eq!(log.record(Event::new(Kind::Evaluate)).await.unwrap(), 1);
        // The next record starts a segment on a device that is always full.
        let next = crate::audit::files::audit_dir(dir.path()).join("ledger-000002.jsonl");
        std::os::unix::fs::symlink("/dev/full", next).unwrap();
        let status = log.record(Event::new(Kind::Evaluate)).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(
            status.message().contains("could not be recorded"),
            "{status:?}"
        );
    }

    #[test]
    fn sessions_come_from_the_cgroup_below_the_root() {
        assert_eq!(
            session_of("/carapace", &peer(Some("/carapace/s-1/nested"))).as_deref(),
            Some("s-1")
        );
        assert_eq!(session_of("/carapace", &peer(Some("/carapace"))), None);
        assert_eq!(session_of("/carapace", &peer(Some("/carapacex/s"))), None);
        assert_eq!(session_of("/carapace", &peer(None)), None);
    }

    #[test]
    fn purposes_are_redacted() {
        let call = serde_json::json!({
            "tool": "Bash",
            "input": {"command": "x", "description": "use token ghp_abcdefghijklmnopqrstuvwxyz0123456789"}
        });
        let p = purpose(&call).unwrap();
        assert!(p.starts_with("use token ") && !p.contains("ghp_"), "{p}");
        assert_eq!(
            purpose(&serde_json::json!({"purpose": "tidy up", "tool": "x"})).as_deref(),
            Some("tidy up")
        );
    }
}
