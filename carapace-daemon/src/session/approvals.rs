//! Approval requests: an approve-mode call (or a plan with gated steps) waits for the user.
//!
//! Requests live in the session database, so they survive a daemon restart; callers that
//! wait are woken through a broadcast channel, which also feeds `carapace approvals --watch`
//! and UIs. A request nobody answers in time expires, and expiry counts as a denial.
//!
//! Approval fatigue: within a session, a request identical to an earlier one (same
//! [`Request::key`]) is not asked again. While the first is pending, the new one joins it
//! (its `asked` count goes up and every waiter gets the one answer); once the user denied
//! it, the new one is denied at once; once approved for the session, the operation passes
//! before any request is made (`state::check`). An approval for one call only ("once")
//! answers that request alone: the next identical call asks again. Expiry is nobody's
//! answer and answers nothing else. `carapace session reset` forgets all of it.
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use super::db::{self, ApprovalRow, ApprovalStatus, Db, StoreError};

/// Events kept for slow watchers.
const EVENT_BUFFER: usize = 256;

/// A rule that gates an operation, as shown to the user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateRule {
    pub id: String,
    pub mode: String,
    pub message: String,
    /// What of the call the rule matched (`write /tmp/x`): the operation an exception
    /// would name. Empty for kernel requests (their operation is `Request::kernel`) and in
    /// requests stored before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub matched: String,
}

/// One step of a plan, pre-evaluated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    /// 1-based.
    pub n: u32,
    pub summary: String,
    pub signature: String,
    /// block | approve | warn | log | allow
    pub decision: String,
    pub rules: Vec<GateRule>,
}

impl PlanStep {
    #[must_use]
    pub fn gated(&self) -> bool {
        self.decision == "approve"
    }
}

/// What the user is asked, as stored in the `request` column.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The uid that asked (the session owner, or the caller for sessionless checks).
    pub requester_uid: u32,
    pub summary: String,
    #[serde(default)]
    pub signature: String,
    #[serde(default)]
    pub rules: Vec<GateRule>,
    #[serde(default)]
    pub steps: Vec<PlanStep>,
    /// What makes two requests identical (see [`Request::identity`]); set by
    /// [`Approvals::request`], cleared by a session reset.
    #[serde(default)]
    pub key: String,
    /// How many times this request was asked (identical requests joined it).
    #[serde(default)]
    pub asked: u32,
    /// For a request the kernel's refusal filed (kind `kernel`): the operation that the
    /// approval lets through for the session (`api::kernel_approval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelOperation>,
    /// For a tool call (kind `call`): the operations of the call that approve-mode kernel
    /// rules cover, written as the session's kernel exceptions when the call is approved,
    /// so the command the agent then runs is not refused and asked again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_ops: Vec<KernelOperation>,
}

/// An operation an approve-mode kernel rule refused: a path and its `op::*` bits, or (with
/// `addr`) a connect to an address and port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelOperation {
    pub path: String,
    pub ops: u32,
    /// The address of a connect (`path` is then empty); absent in path requests, and in
    /// requests stored before addresses could be approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<std::net::IpAddr>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub port: u16,
    /// The file (device, inode, as the kernel keys them) `path` named when the kernel
    /// refused it: the approval covers that file only, even if another is put at the path
    /// before the human answers. Absent for calls and for rows stored before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<[u64; 2]>,
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes the field by reference"
)]
fn is_zero(port: &u16) -> bool {
    *port == 0
}

impl Request {
    /// Two requests of a session are identical when they are of the same kind, ask for
    /// the same operations and are gated by the same rules: the operations' signatures
    /// (the normalised tool, action and target of each call, see
    /// `Extracted::signature`; for a plan, its steps' in order) and the set of gating rule
    /// ids (order and repeats do not matter). The summary, messages and requester are
    /// left out: they follow from these.
    #[must_use]
    pub fn identity(&self, kind: &str) -> String {
        use sha2::{Digest as _, Sha256};
        let mut rules: Vec<&str> = self
            .rules
            .iter()
            .chain(self.steps.iter().flat_map(|s| s.rules.iter()))
            .map(|r| r.id.as_str())
            .collect();
        rules.sort_unstable();
        rules.dedup();
        let mut h = Sha256::new();
        h.update(kind.as_bytes());
        h.update([0]);
        h.update(self.signature.as_bytes());
        for step in &self.steps {
            h.update([1]);
            h.update(step.signature.as_bytes());
            h.update(step.decision.as_bytes());
        }
        for rule in rules {
            h.update([2]);
            h.update(rule.as_bytes());
        }
        crate::audit::record::hex(&h.finalize())
    }
}

/// The user's answer, as stored in the `answer` column.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// Plan steps approved (empty for a call, or a denied plan).
    #[serde(default)]
    pub approved_steps: Vec<u32>,
    #[serde(default)]
    pub reason: String,
    /// Approved for this one call only: the operation is not remembered for the session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub once: bool,
}

/// An approval request with its parsed request and answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    pub row: ApprovalRow,
    pub request: Request,
    pub answer: Answer,
}

impl Approval {
    fn from_row(row: ApprovalRow) -> Self {
        let request = serde_json::from_str(&row.request).unwrap_or_default();
        let answer = serde_json::from_str(&row.answer).unwrap_or_default();
        Self {
            row,
            request,
            answer,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    #[error("no approval request {0}")]
    NotFound(String),
    #[error("approval request {id} is already {status}")]
    NotPending { id: String, status: &'static str },
    #[error("bad step list {0:?}: {1}")]
    BadSteps(String, #[source] BadStep),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Pending approvals and their waiters.
pub struct Approvals {
    db: Arc<Db>,
    events: broadcast::Sender<Approval>,
    /// Serialises "find an identical request, else park a new one", so two identical
    /// calls at once make one request.
    parking: Mutex<()>,
}

/// How a request is approved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// This call only; the next identical call asks again.
    Once,
    /// The operation passes for the rest of the session.
    Session,
}

impl Approvals {
    #[must_use]
    pub fn new(db: Arc<Db>) -> Self {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        Self {
            db,
            events,
            parking: Mutex::new(()),
        }
    }

    /// Every new request and every answer, as they happen.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<Approval> {
        self.events.subscribe()
    }

    /// Parks a request; `kind` is `call` or `plan`. In a session, an identical request
    /// pending is joined and one the user denied answers at once (see the module doc): the
    /// approval returned is then that one (pending, or denied).
    pub fn request(
        &self,
        session: Option<&str>,
        kind: &str,
        request: &Request,
    ) -> Result<Approval, StoreError> {
        let mut request = request.clone();
        request.key = request.identity(kind);
        request.asked = 1;
        let _parked = self.parking.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(session) = session {
            if let Some(earlier) = self.identical(session, &request.key)? {
                return Ok(earlier);
            }
        }
        let request = &request;
        let row = ApprovalRow {
            id: new_id(),
            session_id: session.map(str::to_owned),
            kind: kind.to_owned(),
            created: db::now(),
            status: ApprovalStatus::Pending,
            request: serde_json::to_string(request).unwrap_or_default(),
            answer: String::new(),
            decided_at: None,
            decided_by: None,
        };
        self.db.insert_approval(&row)?;
        let approval = Approval::from_row(row);
        tracing::info!(approval = %approval.row.id, session = ?session, kind, "approval requested: {}", request.summary);
        let _ = self.events.send(approval.clone());
        Ok(approval)
    }

    /// Whether a human approved a request identical to `request` earlier in `session`. A
    /// held open asks again at every open (the kernel lets held files through to the
    /// listener whatever was approved): an approved one is not asked about twice.
    pub fn approved_earlier(
        &self,
        session: &str,
        kind: &str,
        request: &Request,
    ) -> Result<bool, StoreError> {
        let key = request.identity(kind);
        Ok(self
            .db
            .session_approvals(session)?
            .into_iter()
            .map(Approval::from_row)
            .any(|a| a.request.key == key && a.row.status == ApprovalStatus::Approved))
    }

    /// The answer an identical earlier request of `session` gives (see the module doc).
    fn identical(&self, session: &str, key: &str) -> Result<Option<Approval>, StoreError> {
        let earlier: Vec<Approval> = self
            .db
            .session_approvals(session)?
            .into_iter()
            .map(Approval::from_row)
            .filter(|a| a.request.key == key)
            .collect();
        if let Some(mut pending) = earlier
            .iter()
            .find(|a| a.row.status == ApprovalStatus::Pending)
            .cloned()
        {
            pending.request.asked = pending.request.asked.saturating_add(1);
            let text = serde_json::to_string(&pending.request).unwrap_or_default();
            if self.db.update_pending_request(&pending.row.id, &text)? {
                pending.row.request = text;
                tracing::info!(approval = %pending.row.id, session, asked = pending.request.asked, "identical request joins the pending one");
                let _ = self.events.send(pending.clone());
                return Ok(Some(pending));
            }
            // Answered in between: that answer is the earlier one below.
        }
        Ok(earlier
            .into_iter()
            .rev()
            .find(|a| a.row.status == ApprovalStatus::Denied)
            .inspect(|a| {
                tracing::info!(approval = %a.row.id, session, "identical request denied earlier in the session");
            }))
    }

    pub fn get(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        Ok(self.db.approval(id)?.map(Approval::from_row))
    }

    pub fn pending(&self) -> Result<Vec<Approval>, StoreError> {
        Ok(self
            .db
            .pending_approvals()?
            .into_iter()
            .map(Approval::from_row)
            .collect())
    }

    /// Answers a pending request. Approving a call for the session remembers its
    /// signature; approving a plan (all of it, or the steps `steps` names, e.g. `1-3,5`)
    /// remembers the signatures of the approved gated steps; [`Scope::Once`] remembers
    /// nothing. Authorization is the caller's business.
    pub fn answer(
        &self,
        id: &str,
        approve: bool,
        steps: &str,
        scope: Scope,
        by_uid: u32,
    ) -> Result<Approval, AnswerError> {
        let current = self
            .get(id)?
            .ok_or_else(|| AnswerError::NotFound(id.into()))?;
        if current.row.status != ApprovalStatus::Pending {
            return Err(AnswerError::NotPending {
                id: id.into(),
                status: current.row.status.name(),
            });
        }
        let request = &current.request;
        let mut answer = Answer::default();
        let mut remember = Vec::new();
        if approve {
            if current.row.kind == "plan" {
                let n = u32::try_from(request.steps.len()).unwrap_or(u32::MAX);
                let chosen = if steps.trim().is_empty() || steps.trim() == "all" {
                    (1..=n).collect()
                } else {
                    parse_steps(steps, n).map_err(|e| AnswerError::BadSteps(steps.into(), e))?
                };
                answer.approved_steps = chosen.iter().copied().collect();
                if let Some(session) = &current.row.session_id {
                    remember.extend(
                        request
                            .steps
                            .iter()
                            .filter(|s| s.gated() && chosen.contains(&s.n))
                            .map(|s| (session.clone(), s.signature.clone())),
                    );
                }
            } else if let Some(session) = &current.row.session_id {
                remember.push((session.clone(), request.signature.clone()));
            }
        } else {
            answer.reason = format!("denied by uid {by_uid}");
        }
        if approve && scope == Scope::Once {
            answer.once = true;
            remember.clear();
        }
        let status = if approve {
            ApprovalStatus::Approved
        } else {
            ApprovalStatus::Denied
        };
        let text = serde_json::to_string(&answer).unwrap_or_default();
        if !self
            .db
            .answer_approval(id, status, &text, by_uid, &remember)?
        {
            // Answered (or expired) in between.
            let now = self
                .get(id)?
                .map_or(ApprovalStatus::Denied, |a| a.row.status);
            return Err(AnswerError::NotPending {
                id: id.into(),
                status: now.name(),
            });
        }
        let answered = self
            .get(id)?
            .ok_or_else(|| AnswerError::NotFound(id.into()))?;
        tracing::info!(
            approval = id,
            uid = by_uid,
            "approval request {}",
            status.name()
        );
        let _ = self.events.send(answered.clone());
        Ok(answered)
    }

    /// Waits until request `id` is answered, or `timeout` passes — then it expires, which
    /// counts as a denial. Returns the final state.
    pub async fn wait(&self, id: &str, timeout: Duration) -> Result<Approval, AnswerError> {
        // Subscribe before reading, so an answer in between is not missed.
        let mut events = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let current = self
                .get(id)?
                .ok_or_else(|| AnswerError::NotFound(id.into()))?;
            if current.row.status != ApprovalStatus::Pending {
                return Ok(current);
            }
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Ok(_) | Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(broadcast::error::RecvError::Closed)) | Err(_) => {
                    self.expire(id)?;
                    return self
                        .get(id)?
                        .ok_or_else(|| AnswerError::NotFound(id.into()));
                }
            }
        }
    }

    fn expire(&self, id: &str) -> Result<(), StoreError> {
        let answer = serde_json::to_string(&Answer {
            reason: "nobody answered in time".into(),
            ..Answer::default()
        })
        .unwrap_or_default();
        if self
            .db
            .answer_approval(id, ApprovalStatus::Expired, &answer, 0, &[])?
        {
            tracing::info!(approval = id, "approval request expired");
            if let Some(a) = self.get(id)? {
                let _ = self.events.send(a);
            }
        }
        Ok(())
    }

    /// Expires pending requests older than `max_age` (their callers gave up long ago).
    pub fn expire_older_than(&self, max_age: Duration) -> Result<usize, StoreError> {
        let cutoff = db::now().saturating_sub(max_age.as_secs());
        let mut n = 0;
        for a in self.db.pending_approvals()? {
            if a.created < cutoff {
                self.expire(&a.id)?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// What is wrong with one item of a step list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadStep {
    #[error("empty item; write e.g. `1-3,5`")]
    Empty,
    #[error("`{part}` is not a range of steps within 1-{n}")]
    OutOfRange { part: String, n: u32 },
    #[error("`{0}` is not a step number")]
    NotANumber(String),
}

/// Parses a step list such as `1-3,5` against a plan of `n` steps.
pub fn parse_steps(text: &str, n: u32) -> Result<BTreeSet<u32>, BadStep> {
    let mut out = BTreeSet::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(BadStep::Empty);
        }
        let (lo, hi) = if let Some((a, b)) = part.split_once('-') {
            (step_number(a)?, step_number(b)?)
        } else {
            let v = step_number(part)?;
            (v, v)
        };
        if lo == 0 || lo > hi || hi > n {
            return Err(BadStep::OutOfRange {
                part: part.to_owned(),
                n,
            });
        }
        out.extend(lo..=hi);
    }
    Ok(out)
}

fn step_number(s: &str) -> Result<u32, BadStep> {
    s.trim()
        .parse::<u32>()
        .map_err(|_| BadStep::NotANumber(s.trim().to_owned()))
}

/// `ap-<8 random hex digits>`: short enough to type in `carapace approve`.
fn new_id() -> String {
    format!("ap-{:08x}", super::random_u32())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn step_lists() {
        assert_eq!(
            parse_steps("1-3,5", 6)
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            [1, 2, 3, 5]
        );
        assert_eq!(parse_steps(" 2 ", 2).unwrap().len(), 1);
        for bad in ["", "0", "7", "3-1", "1-", "a", "1,,2", "-2"] {
            assert!(parse_steps(bad, 6).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn step_lists_never_panic_and_stay_in_range(text in ".{0,40}", n in 0u32..50) {
            if let Ok(steps) = parse_steps(&text, n) {
                prop_assert!(steps.iter().all(|s| (1..=n).contains(s)));
            }
        }
    }

    fn store() -> (tempfile::TempDir, Arc<Db>) {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(dir.path()).unwrap());
        db.agent_session("a-1", 1000, "claude-code", "x").unwrap();
        (dir, db)
    }

    fn plan() -> Request {
        let step = |n: u32, decision: &str| PlanStep {
            n,
            summary: format!("step {n}"),
            signature: format!("sig-{n}"),
            decision: decision.into(),
            rules: Vec::new(),
        };
        Request {
            requester_uid: 1000,
            summary: "plan".into(),
            steps: vec![step(1, "allow"), step(2, "approve"), step(3, "approve")],
            ..Request::default()
        }
    }

    #[test]
    fn approving_part_of_a_plan_remembers_only_those_gated_steps() {
        let (_dir, db) = store();
        let approvals = Approvals::new(Arc::clone(&db));
        let a = approvals.request(Some("a-1"), "plan", &plan()).unwrap();
        let done = approvals
            .answer(&a.row.id, true, "1-2", Scope::Session, 1000)
            .unwrap();
        assert_eq!(done.row.status, ApprovalStatus::Approved);
        assert_eq!(done.answer.approved_steps, [1, 2]);
        assert!(db.is_approved("a-1", "sig-2").unwrap());
        assert!(!db.is_approved("a-1", "sig-3").unwrap());
        assert!(!db.is_approved("a-1", "sig-1").unwrap(), "not gated");
        // A second answer is refused.
        assert!(matches!(
            approvals.answer(&a.row.id, false, "", Scope::Session, 1000),
            Err(AnswerError::NotPending { .. })
        ));
    }

    #[test]
    fn a_bad_step_list_answers_nothing() {
        let (_dir, db) = store();
        let approvals = Approvals::new(Arc::clone(&db));
        let a = approvals.request(Some("a-1"), "plan", &plan()).unwrap();
        assert!(matches!(
            approvals.answer(&a.row.id, true, "2-9", Scope::Session, 1000),
            Err(AnswerError::BadSteps(..))
        ));
        assert_eq!(
            approvals.get(&a.row.id).unwrap().unwrap().row.status,
            ApprovalStatus::Pending
        );
    }

    #[tokio::test]
    async fn a_waiter_gets_the_answer_or_expires() {
        let (_dir, db) = store();
        let approvals = Arc::new(Approvals::new(Arc::clone(&db)));
        let call = Request {
            requester_uid: 1000,
            summary: "write /x".into(),
            signature: "sig-w".into(),
            ..Request::default()
        };
        let a = approvals.request(Some("a-1"), "call", &call).unwrap();
        let waiter = {
            let approvals = Arc::clone(&approvals);
            let id = a.row.id.clone();
            tokio::spawn(async move { approvals.wait(&id, Duration::from_secs(30)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        approvals
            .answer(&a.row.id, true, "", Scope::Session, 1000)
            .unwrap();
        let got = waiter.await.unwrap().unwrap();
        assert_eq!(got.row.status, ApprovalStatus::Approved);
        assert!(db.is_approved("a-1", "sig-w").unwrap());

        let b = approvals.request(Some("a-1"), "call", &call).unwrap();
        let got = approvals
            .wait(&b.row.id, Duration::from_millis(100))
            .await
            .unwrap();
        assert_eq!(got.row.status, ApprovalStatus::Expired);
        // Too late now.
        assert!(approvals
            .answer(&b.row.id, true, "", Scope::Session, 1000)
            .is_err());
    }

    fn call(signature: &str, rules: &[&str]) -> Request {
        Request {
            requester_uid: 1000,
            summary: format!("write {signature}"),
            signature: signature.into(),
            rules: rules
                .iter()
                .map(|id| GateRule {
                    id: (*id).into(),
                    mode: "approve".into(),
                    message: format!("{id} says ask"),
                    matched: String::new(),
                })
                .collect(),
            ..Request::default()
        }
    }

    #[test]
    fn identical_means_same_kind_operations_and_rules() {
        let a = call("sig-w", &["r1", "r2"]);
        let mut reordered = call("sig-w", &["r2", "r1", "r2"]);
        reordered.summary = "said differently".into();
        reordered.rules[0].message = "another message".into();
        assert_eq!(a.identity("call"), reordered.identity("call"));
        assert_ne!(a.identity("call"), a.identity("plan"));
        assert_ne!(
            a.identity("call"),
            call("sig-x", &["r1", "r2"]).identity("call")
        );
        assert_ne!(a.identity("call"), call("sig-w", &["r1"]).identity("call"));
        let p = plan();
        let mut other = plan();
        other.steps[2].signature = "sig-other".into();
        assert_ne!(p.identity("plan"), other.identity("plan"));
    }

    #[test]
    fn an_identical_pending_request_is_joined_and_counted() {
        let (_dir, db) = store();
        db.agent_session("a-2", 1000, "claude-code", "y").unwrap();
        let approvals = Approvals::new(Arc::clone(&db));
        let mut events = approvals.subscribe();
        let first = approvals
            .request(Some("a-1"), "call", &call("sig-w", &["r1"]))
            .unwrap();
        assert_eq!(first.request.asked, 1);
        let again = approvals
            .request(Some("a-1"), "call", &call("sig-w", &["r1"]))
            .unwrap();
        assert_eq!(again.row.id, first.row.id, "joined, not asked again");
        assert_eq!(again.request.asked, 2);
        assert_eq!(
            approvals.get(&first.row.id).unwrap().unwrap().request.asked,
            2
        );
        assert_eq!(approvals.pending().unwrap().len(), 1);
        let _ = events.try_recv();
        assert_eq!(
            events.try_recv().unwrap().request.asked,
            2,
            "watchers see the count"
        );
        // Another session, another operation or other rules: a request of its own.
        for (session, req) in [
            ("a-2", call("sig-w", &["r1"])),
            ("a-1", call("sig-x", &["r1"])),
            ("a-1", call("sig-w", &["r1", "r9"])),
        ] {
            let other = approvals.request(Some(session), "call", &req).unwrap();
            assert_ne!(other.row.id, first.row.id, "{session} {req:?}");
        }
        // Without a session nothing is shared.
        let a = approvals
            .request(None, "call", &call("sig-w", &["r1"]))
            .unwrap();
        let b = approvals
            .request(None, "call", &call("sig-w", &["r1"]))
            .unwrap();
        assert_ne!(a.row.id, b.row.id);
    }

    #[test]
    fn the_first_answer_stands_for_identical_requests_of_the_session() {
        let (_dir, db) = store();
        let approvals = Approvals::new(Arc::clone(&db));
        let req = call("sig-w", &["r1"]);
        // Denied: the same request is denied at once, without asking.
        let a = approvals.request(Some("a-1"), "call", &req).unwrap();
        approvals
            .answer(&a.row.id, false, "", Scope::Session, 1000)
            .unwrap();
        let again = approvals.request(Some("a-1"), "call", &req).unwrap();
        assert_eq!(again.row.id, a.row.id);
        assert_eq!(again.row.status, ApprovalStatus::Denied);
        assert!(approvals.pending().unwrap().is_empty());
        // A reset forgets it.
        db.reset("a-1", 1000).unwrap();
        let fresh = approvals.request(Some("a-1"), "call", &req).unwrap();
        assert_eq!(fresh.row.status, ApprovalStatus::Pending);
        assert_ne!(fresh.row.id, a.row.id);
        // Approved once: nothing remembered, the next identical call asks again.
        let done = approvals
            .answer(&fresh.row.id, true, "", Scope::Once, 1000)
            .unwrap();
        assert!(done.answer.once);
        assert!(!db.is_approved("a-1", "sig-w").unwrap());
        let next = approvals.request(Some("a-1"), "call", &req).unwrap();
        assert_eq!(next.row.status, ApprovalStatus::Pending);
        assert_ne!(next.row.id, fresh.row.id);
        // Expired is nobody's answer: the next one asks again too.
        approvals.expire(&next.row.id).unwrap();
        let after = approvals.request(Some("a-1"), "call", &req).unwrap();
        assert_eq!(after.row.status, ApprovalStatus::Pending);
        assert_ne!(after.row.id, next.row.id);
    }

    #[tokio::test]
    async fn every_waiter_of_a_joined_request_gets_the_one_answer() {
        let (_dir, db) = store();
        let approvals = Arc::new(Approvals::new(Arc::clone(&db)));
        let req = call("sig-w", &["r1"]);
        let mut waiters = Vec::new();
        for _ in 0..3 {
            let a = approvals.request(Some("a-1"), "call", &req).unwrap();
            let approvals = Arc::clone(&approvals);
            waiters.push(tokio::spawn(async move {
                approvals.wait(&a.row.id, Duration::from_secs(30)).await
            }));
        }
        let pending = approvals.pending().unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].request.asked, 3);
        approvals
            .answer(&pending[0].row.id, true, "", Scope::Session, 1000)
            .unwrap();
        for w in waiters {
            assert_eq!(
                w.await.unwrap().unwrap().row.status,
                ApprovalStatus::Approved
            );
        }
        assert!(db.is_approved("a-1", "sig-w").unwrap());
    }
}
