//! The gateway's one decision point: what happens to a tool call the model asks for, and
//! to a conversation whose history holds blocked calls. Everything else in the gateway only
//! finds calls in a provider's format and rewrites the answer.
//!
//! Behind a daemon, a call is decided in the client's session (the `carapace run` session
//! whose cgroup holds it): its switched-on rules apply, a call that runs is recorded there
//! (switching on what it triggers), an approve-mode call waits for the user's answer, and
//! every decision is in the audit ledger before the agent sees it (one that cannot be
//! recorded is refused). With a bare rule set (benchmarks) the rules alone decide.
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use super::history::{Conversation, Reading};
use super::peer;
use super::seen::{ClientDigest, SeenClean};
use crate::api::audit::{self as ledger, agent_of};
use crate::api::evaluate::{self, Args, Evaluated};
use crate::api::kernel_approval;
use crate::api::Daemon;
use crate::metrics::Layer;
use crate::session::approvals::Request;
use crate::session::db::StoreError;
use crate::session::state::{self, Caller, SessionRef};
use carapace_policy::engine::{
    self, Activation, Context, Decision, Extracted, HistoryReport, ToolCall,
};
use carapace_policy::rules::validate::mode_name;
use carapace_policy::rules::{Mode, RuleSet};

/// A history with up to this many calls not judged before is judged on the request's own
/// task.
const INLINE_CALLS: usize = 16;

/// Where the gateway gets the rules in force at the moment of each decision.
pub trait RuleSource: Send + Sync {
    fn rules(&self) -> Arc<RuleSet>;

    /// The daemon behind the rules, for sessions, approvals and the audit ledger; none for
    /// a bare rule set (then approve-mode calls are withheld and nothing is recorded).
    fn daemon(self: Arc<Self>) -> Option<Arc<Daemon>> {
        None
    }
}

impl RuleSource for Daemon {
    fn rules(&self) -> Arc<RuleSet> {
        Daemon::rules(self)
    }

    fn daemon(self: Arc<Self>) -> Option<Arc<Daemon>> {
        Some(self)
    }
}

/// A fixed rule set (benchmarks, and tests of the gateway without a daemon).
impl RuleSource for Arc<RuleSet> {
    fn rules(&self) -> Arc<RuleSet> {
        Arc::clone(self)
    }
}

/// The client of one connection, found once: who it is, the context its calls are checked
/// in, and its session.
#[derive(Clone, Debug)]
pub struct Client {
    pub peer: peer::Client,
    pub ctx: Context,
    /// `Err` when the session store could not be read: the client's calls are refused.
    pub session: Result<Option<SessionRef>, SessionUnknown>,
}

/// Why a client's session is not known. Shared (`Arc`) because every call of the
/// connection carries it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum SessionUnknown {
    #[error(transparent)]
    Store(Arc<StoreError>),
    #[error("the session lookup failed: {0}")]
    Task(#[source] Arc<tokio::task::JoinError>),
}

impl Client {
    /// A client of no session (tests, and clients of a gateway without a daemon).
    #[must_use]
    pub fn sessionless(peer: peer::Client) -> Self {
        Self {
            ctx: peer.context(),
            peer,
            session: Ok(None),
        }
    }

    fn session_id(&self) -> Option<String> {
        self.session
            .as_ref()
            .ok()
            .and_then(Option::as_ref)
            .map(|s| s.id.clone())
    }

    fn agent(&self) -> crate::audit::Agent {
        agent_of(self.peer.pid.unwrap_or(0), self.peer.uid)
    }
}

/// A tool call found in a model's answer, not yet passed on.
#[derive(Clone, Debug)]
pub struct PendingCall {
    /// Which call of the answer (the content block index, the tool call index, …).
    pub key: usize,
    pub tool: String,
    /// The input, or why it could not be read (refused: fail closed).
    pub input: Result<Value, UnreadableInput>,
}

/// Why a tool call's input could not be read.
#[derive(Clone, Debug, thiserror::Error)]
pub enum UnreadableInput {
    /// `arguments` is a string that is not JSON.
    #[error("{0}")]
    NotJson(#[source] Arc<serde_json::Error>),
    #[error("the call's args are not an object: {0}")]
    ArgsNotObject(Value),
    #[error("the finished item is not a call")]
    NotACall,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Replace the call by this text for the agent.
    Refuse(String),
}

/// Decides with the rules of `source`, in the agent's context.
#[derive(Clone)]
pub struct Gate {
    source: Arc<dyn RuleSource>,
    seen: Arc<SeenClean>,
}

impl Gate {
    #[must_use]
    pub fn new(source: Arc<dyn RuleSource>) -> Self {
        Self {
            source,
            seen: Arc::default(),
        }
    }

    pub(super) fn daemon(&self) -> Option<Arc<Daemon>> {
        Arc::clone(&self.source).daemon()
    }

    /// Finds the client's session: the `carapace run` session whose cgroup holds it.
    pub async fn client(&self, peer: peer::Client) -> Client {
        let Some(daemon) = self.daemon() else {
            return Client::sessionless(peer);
        };
        let ctx = peer.context();
        let (uid, cgroup) = (peer.uid.unwrap_or(u32::MAX), peer.cgroup.clone());
        let session = tokio::task::spawn_blocking(move || {
            let caller = Caller {
                uid,
                cgroup: cgroup.as_deref(),
            };
            state::resolve(&daemon.sessions, caller, "gateway", "")
                .map_err(|e| SessionUnknown::Store(Arc::new(e)))
        })
        .await
        .unwrap_or_else(|e| Err(SessionUnknown::Task(Arc::new(e))));
        if let Err(e) = &session {
            tracing::error!("gateway: cannot find the client's session: {e}");
        }
        Client { peer, ctx, session }
    }

    /// Layer 1 for one call, in the client's session; an approve-mode call waits for the
    /// user's answer (without a daemon it is withheld).
    pub async fn tool_call(&self, client: &Client, call: &PendingCall) -> Verdict {
        let started = Instant::now();
        let daemon = self.daemon();
        let input = match &call.input {
            Ok(input) => input.clone(),
            Err(why) => {
                tracing::warn!(tool = %call.tool, decision = "block", "gateway: unreadable tool input");
                let text = format!(
                    "[Carapace] The {} call was not run: its input could not be read ({why}), \
                     and Carapace does not pass on what it cannot check.",
                    call.tool
                );
                if let Some(daemon) = &daemon {
                    let status = tonic::Status::invalid_argument(why.to_string());
                    let event = Args::of("")
                        .recorded(client.agent(), client.session_id(), started.elapsed())
                        .event(Err(&status));
                    if let Err(e) = daemon.audit.record(event).await {
                        return Verdict::Refuse(format!("{text} ({})", e.message()));
                    }
                }
                return Verdict::Refuse(text);
            }
        };
        let tool_call = ToolCall {
            tool: call.tool.clone(),
            input,
        };
        let Some(daemon) = daemon else {
            let d = engine::check(
                &self.source.rules(),
                &tool_call,
                &client.ctx,
                &Activation::default(),
            );
            log(&d);
            return verdict(&d, "Approval through a gateway without a daemon is not available, so the call was withheld: ask the user to run it themselves or to change the rules.");
        };
        let args = Args::of(
            &serde_json::json!({"tool": tool_call.tool, "input": tool_call.input}).to_string(),
        );
        let ext = tool_call.extract(&client.ctx);
        let outcome = decide(&daemon, self.source.rules(), client, ext).await;
        if let Ok(ev) = &outcome {
            evaluate::count(
                &daemon,
                Layer::Gateway,
                &ev.checked.decision,
                started.elapsed(),
            );
        }
        let event = args
            .recorded(client.agent(), client.session_id(), started.elapsed())
            .event(outcome.as_ref().map(|ev| &ev.checked.decision));
        let event = crate::api::shadow::recorded(
            event,
            outcome.as_ref().is_ok_and(|ev| ev.would_deny.is_some()),
        );
        // Fail closed: the agent sees no decision the ledger does not hold.
        if let Err(e) = daemon.audit.record(event).await {
            return Verdict::Refuse(format!(
                "[Carapace] The {} call was not run: {}",
                call.tool,
                e.message()
            ));
        }
        match outcome {
            Ok(ev) => {
                log(&ev.checked.decision);
                verdict(&ev.checked.decision, "")
            }
            Err(e) => {
                tracing::error!(tool = %call.tool, "gateway: cannot decide: {}", e.message());
                Verdict::Refuse(format!(
                    "[Carapace] The {} call was not run: Carapace could not decide on it ({}).",
                    call.tool,
                    e.message()
                ))
            }
        }
    }

    /// Layer 0 over a conversation's past calls: the "bad agent detected: …" message when
    /// the history holds blocked calls (recorded in the audit ledger).
    pub async fn history(
        &self,
        client: &Client,
        conversation: &Conversation<'_>,
    ) -> Option<String> {
        let started = Instant::now();
        let rules = self.source.rules();
        let digest = ClientDigest::of(&client.ctx);
        let reading = Reading::of(conversation, &digest, &self.seen, &rules);
        let keys = digest.calls(&reading.parsed);
        let known: Vec<bool> = self
            .seen
            .known(&rules, &keys)
            .iter()
            .map(Option::is_some)
            .collect();
        let new = known.iter().filter(|k| !**k).count();
        let remembered = reading.remembered + (keys.len() - new);
        let scan = {
            let rules = Arc::clone(&rules);
            move |ctx: Context, reading: Reading| {
                let report = engine::scan_transcript(
                    &rules,
                    &reading.parsed,
                    &ctx,
                    &Activation::default(),
                    |i| known.get(i).copied().unwrap_or(false),
                );
                (report, known, reading)
            }
        };
        // Many new calls take a while to judge: off the async workers then. A few cost less
        // than the hand-over to a blocking thread and back.
        let report = if new <= INLINE_CALLS {
            Ok(scan(client.ctx.clone(), reading))
        } else {
            let ctx = client.ctx.clone();
            tokio::task::spawn_blocking(move || scan(ctx, reading)).await
        };
        let report = report.map(|(r, known, reading)| {
            let found: std::collections::HashSet<usize> =
                r.findings.iter().map(|(i, _)| *i).collect();
            self.seen
                .learn(&rules, reading.clean_keys(&keys, &known, &found));
            // Calls are named by their number in the whole conversation (the unreadable
            // parts' finding comes after the last call).
            let findings = r
                .findings
                .into_iter()
                .map(|(i, d)| (reading.numbers.get(i).copied().unwrap_or(reading.total), d))
                .collect();
            HistoryReport::new(reading.total, findings)
        });
        if let Some(daemon) = self.daemon() {
            daemon.metrics.history_calls(new, remembered);
            if let Ok(r) = &report {
                let mode = if r.clean() { Mode::Allow } else { Mode::Block };
                let rules = r
                    .findings
                    .iter()
                    .flat_map(|(_, d)| d.matches.iter().map(|m| (m.id.as_str(), m.mode)));
                daemon
                    .metrics
                    .decision(Layer::GatewayHistory, mode, rules, started.elapsed());
            }
        }
        let message = match &report {
            Ok(r) if r.clean() => return None,
            Ok(r) => {
                let rules: Vec<&str> = r
                    .findings
                    .iter()
                    .filter_map(|(_, d)| d.matches.first().map(|m| m.id.as_str()))
                    .collect();
                tracing::warn!(
                    decision = "block",
                    rules = %rules.join(","),
                    "gateway: the conversation's history holds blocked tool calls"
                );
                r.message.clone()
            }
            Err(e) => format!("bad agent detected: Carapace could not scan the conversation ({e})"),
        };
        if let Some(daemon) = self.daemon() {
            let args = Args::of(&conversation.text());
            let status;
            let outcome: Result<&HistoryReport, &tonic::Status> = match &report {
                Ok(r) => Ok(r),
                Err(e) => {
                    status = tonic::Status::internal(e.to_string());
                    Err(&status)
                }
            };
            let base = args.recorded(client.agent(), client.session_id(), started.elapsed());
            if let Err(e) = daemon.audit.record(ledger::scanned(base, outcome)).await {
                tracing::error!("gateway: refusal not recorded: {}", e.message());
            }
        }
        Some(message)
    }
}

/// The decision on one call in the client's session: checked with the session's rules,
/// recorded there, and — for approve mode — the user's answer awaited.
async fn decide(
    daemon: &Arc<Daemon>,
    rules: Arc<RuleSet>,
    client: &Client,
    ext: Extracted,
) -> Result<Evaluated, tonic::Status> {
    let session = client
        .session
        .clone()
        .map_err(|e| tonic::Status::unavailable(format!("the client's session is unknown: {e}")))?;
    // A session of a named profile is judged by its profile's rules.
    let rules = match &session {
        Some(s) => daemon.rules_of_session(Some(&s.id)),
        None => rules,
    };
    let requester_uid = session
        .as_ref()
        .map(|s| s.owner_uid)
        .or(client.peer.uid)
        // Nobody known asked: only root may answer.
        .unwrap_or(0);
    let (d, r) = (Arc::clone(daemon), Arc::clone(&rules));
    let mut ev = blocking(move || {
        let internal = |e: &dyn std::fmt::Display| tonic::Status::internal(e.to_string());
        let checked =
            state::check(&d.sessions, &r, session.as_ref(), &ext).map_err(|e| internal(&e))?;
        let mut ev = Evaluated {
            checked,
            ext,
            session,
            approval: None,
            activated: Vec::new(),
            would_deny: None,
        };
        ev.apply_shadow(&d);
        if let Some(s) = &ev.session {
            ev.activated = state::record(&d.sessions, &r, s, &ev.ext, &ev.checked)
                .map_err(|e| internal(&e))?;
        }
        if ev.checked.decision.decision == Mode::Approve {
            let request = Request {
                requester_uid,
                summary: ev.ext.summary(),
                signature: ev.checked.signature(&ev.ext).to_owned(),
                rules: evaluate::gate_rules(&ev.checked.decision),
                // Approving the call lifts the kernel's approve rules for what it names, as
                // for a hook's call (`api::kernel_approval`): the command then runs once.
                kernel_ops: ev.session.as_ref().map_or_else(Vec::new, |_| {
                    kernel_approval::call_operations(&r, &ev.checked.decision, &ev.ext)
                }),
                ..Request::default()
            };
            let session_id = ev.session.as_ref().map(|s| s.id.as_str());
            ev.approval = Some(
                d.approvals
                    .request(session_id, "call", &request)
                    .map_err(|e| internal(&e))?,
            );
        }
        Ok(ev)
    })
    .await?;
    let Some(pending) = ev.approval.clone() else {
        return Ok(ev);
    };
    tracing::info!(approval = %pending.row.id, tool = %ev.ext.tool, "gateway: waiting for the user's approval");
    let answer = daemon
        .approvals
        .wait(&pending.row.id, daemon.approval_timeout)
        .await
        .map_err(|e| tonic::Status::internal(e.to_string()))?;
    let d = Arc::clone(daemon);
    blocking(move || evaluate::answered(&d, &rules, &mut ev, answer).map(|()| ev)).await
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, tonic::Status> + Send + 'static,
) -> Result<T, tonic::Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| tonic::Status::internal(format!("the decision task failed: {e}")))?
}

fn log(d: &Decision) {
    if d.decision >= Mode::Warn {
        let rules: Vec<&str> = d.matches.iter().map(|m| m.id.as_str()).collect();
        tracing::info!(
            tool = %d.tool,
            decision = mode_name(d.decision),
            rules = %rules.join(","),
            "gateway: tool call"
        );
    }
}

/// What the agent gets for a decision; `pending` ends the text of an approve decision
/// nobody answered.
fn verdict(d: &Decision, pending: &str) -> Verdict {
    match d.decision {
        Mode::Block => Verdict::Refuse(format!(
            "[Carapace] The {} call was not run. {}",
            d.tool, d.message
        )),
        Mode::Approve => Verdict::Refuse(
            format!(
                "[Carapace] The {} call was not run. {} {pending}",
                d.tool, d.message
            )
            .trim_end()
            .to_owned(),
        ),
        Mode::Warn | Mode::Log | Mode::Allow => Verdict::Pass,
    }
}
