//! Approve mode in the kernel: an approve-mode path rule refuses in the kernel (EACCES), and
//! the refusal files an approval request for the exact operation (path and action). When a
//! human approves it — `carapace approve`, the console, the slash command: all answer
//! through `sessions::answer` — the operation becomes an exception for that session in the
//! kernel's `APPROVED_PATHS` map, so the agent's retry passes. A denial or an expiry writes
//! nothing: the retry is refused again (and, denied, answered at once by the fatigue rule).
//!
//! In the kernel an approval stands for the rest of the session even when given "once": the
//! kernel cannot tell the retry from the next identical open.
use std::sync::Arc;

use carapace_common::{op, subject, DenyEvent};
use carapace_policy::rules::{Mode, Rule};

use super::proto::Denial;
use super::Daemon;
use crate::session::approvals::{Approval, GateRule, KernelOperation, Request};
use crate::session::db::ApprovalStatus;

/// The kind of the approval requests the kernel's refusals file.
pub const KIND: &str = "kernel";

/// The request a refusal by `rule` stands for, if the rule is an approve-mode rule and the
/// event names a path that can be written as a map key again (UTF-8, no NUL).
#[must_use]
pub fn request_of(event: &DenyEvent, rule: &Rule, d: &Denial, owner_uid: u32) -> Option<Request> {
    if rule.mode != Mode::Approve || event.subject != subject::PATH {
        return None;
    }
    let end = event.path.iter().position(|b| *b == 0)?;
    let path = std::str::from_utf8(&event.path[..end]).ok()?;
    if path.is_empty() {
        return None;
    }
    // Executing a file reads it too (the exec open, the loader): an approved exec is both.
    let ops = if event.op & op::EXEC != 0 {
        event.op | op::READ
    } else {
        event.op
    };
    let phrase = super::denial::phrase(&d.operation, path);
    Some(Request {
        requester_uid: owner_uid,
        summary: format!("{phrase} (refused by the kernel until approved; the agent retries)"),
        signature: format!("kernel {ops:#x} {path}"),
        rules: vec![GateRule {
            id: rule.id.clone(),
            mode: "approve".into(),
            message: rule.message.clone(),
        }],
        kernel: Some(KernelOperation {
            path: path.to_owned(),
            ops,
        }),
        ..Request::default()
    })
}

/// What the agent reads after the rule's message: that a human is asked and to retry, or
/// that a human already said no.
#[must_use]
pub fn advice(approval: &Approval) -> String {
    let id = &approval.row.id;
    match approval.row.status {
        ApprovalStatus::Denied => {
            "A human denied this operation earlier in this session; do not retry it.".into()
        }
        ApprovalStatus::Approved => {
            format!("Request {id} was approved; retry the operation.")
        }
        _ => format!(
            "Waiting for a human to approve it (request {id}: `carapace approve {id}`); \
             retry the same operation once it is approved."
        ),
    }
}

/// Files the request for `event` (see [`request_of`]) and adds what to do to `d`'s
/// message. A new request expires after the daemon's approval timeout, which counts as a
/// denial; an identical pending one is joined (fatigue), a denied one answers at once.
pub async fn file(daemon: &Arc<Daemon>, event: &DenyEvent, rule: &Rule, d: &mut Denial) {
    let Some(record) = daemon.sessions.get(&d.session_id) else {
        return;
    };
    let Some(request) = request_of(event, rule, d, record.owner_uid) else {
        return;
    };
    let (approvals, session) = (Arc::clone(&daemon.approvals), d.session_id.clone());
    let filed =
        tokio::task::spawn_blocking(move || approvals.request(Some(&session), KIND, &request))
            .await;
    let approval = match filed {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => {
            tracing::warn!(session = %d.session_id, "cannot file the approval request: {e}");
            return;
        }
        Err(e) => {
            tracing::warn!(session = %d.session_id, "cannot file the approval request: {e}");
            return;
        }
    };
    d.message = format!("{} {}", with_stop(&d.message), advice(&approval));
    // Nobody waits on it in a call: expire it after the timeout, as a waiting call would.
    if approval.row.status == ApprovalStatus::Pending && approval.request.asked <= 1 {
        let (approvals, timeout) = (Arc::clone(&daemon.approvals), daemon.approval_timeout);
        let id = approval.row.id.clone();
        tokio::spawn(async move {
            if let Err(e) = approvals.wait(&id, timeout).await {
                tracing::warn!(approval = %id, "cannot expire the approval request: {e}");
            }
        });
    }
}

/// `message` ending in a full stop, so that the advice reads as a sentence after it.
fn with_stop(message: &str) -> String {
    let m = message.trim_end();
    if m.ends_with(['.', '!', '?']) {
        m.to_owned()
    } else {
        format!("{m}.")
    }
}

/// Writes the exception an approved kernel request stands for. Called after the answer is
/// stored; a failure is logged, and the operation then stays refused (fail closed).
pub fn apply(daemon: &Daemon, approval: &Approval) {
    if approval.row.kind != KIND || approval.row.status != ApprovalStatus::Approved {
        return;
    }
    let (Some(session), Some(k)) = (&approval.row.session_id, &approval.request.kernel) else {
        return;
    };
    match daemon
        .sessions
        .approve_kernel_path(session, k.path.as_bytes(), k.ops)
    {
        Ok(true) => tracing::info!(
            approval = %approval.row.id,
            session = %session,
            "kernel exception written: {:#x} on {}",
            k.ops,
            crate::audit::redact::redact(&k.path)
        ),
        Ok(false) => tracing::warn!(
            approval = %approval.row.id,
            session = %session,
            "approved, but the session or the kernel layer is gone: nothing to write"
        ),
        Err(e) => tracing::warn!(
            approval = %approval.row.id,
            session = %session,
            "approved, but the kernel exception cannot be written (the operation stays refused): {e}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_common::PATH_MAX;

    fn event(path: &[u8], bit: u32) -> DenyEvent {
        let mut e = DenyEvent {
            session_cgroup: 99,
            session: 1,
            pid: 10,
            tgid: 10,
            rule: 0,
            op: bit,
            subject: subject::PATH,
            port: 0,
            family: 0,
            detail: 0,
            addr: [0; 16],
            comm: [0; 16],
            path: [0; PATH_MAX],
        };
        e.path[..path.len()].copy_from_slice(path);
        e
    }

    fn rules(yaml: &str) -> carapace_policy::rules::RuleSet {
        carapace_policy::rules::RuleSet::parse_with(
            "rules.yaml",
            yaml,
            &crate::policy_host::options(),
        )
        .expect("valid rules")
    }

    #[test]
    fn approve_rules_file_the_exact_operation() {
        let set = rules(
            "version: 1\nbuiltin: none\nrules:\n  - id: drafts\n    approve: \"/srv/drafts/**\"\n    message: Drafts need a human\n  - id: secret\n    block: \"/srv/secret/**\"\n",
        );
        let drafts = set.by_id("drafts").expect("drafts");
        let e = event(b"/srv/drafts/a.txt", op::READ);
        let d = super::super::denial::denial_from_event(&e, "s-1", Some(("drafts", "m")));
        let r = request_of(&e, drafts, &d, 1000).expect("a request");
        let asked = r.kernel.as_ref().expect("kernel operation");
        assert_eq!(
            (asked.path.as_str(), asked.ops),
            ("/srv/drafts/a.txt", op::READ)
        );
        assert_eq!(r.requester_uid, 1000);
        assert!(
            r.summary.starts_with("read of /srv/drafts/a.txt"),
            "{}",
            r.summary
        );
        assert_eq!(r.rules[0].id, "drafts");
        // Another path or action is another request.
        let write = request_of(&event(b"/srv/drafts/a.txt", op::WRITE), drafts, &d, 1000)
            .expect("a request");
        assert_ne!(write.identity(KIND), r.identity(KIND));
        // An exec approval covers the reads an exec makes.
        let exec =
            request_of(&event(b"/srv/drafts/run", op::EXEC), drafts, &d, 1000).expect("a request");
        assert_eq!(exec.kernel.map(|k| k.ops), Some(op::EXEC | op::READ));
        // A block rule files nothing; nor does a path that is not UTF-8.
        let secret = set.by_id("secret").expect("secret");
        assert!(request_of(&event(b"/srv/secret/a", op::READ), secret, &d, 1000).is_none());
        assert!(request_of(&event(b"/srv/drafts/\xff", op::READ), drafts, &d, 1000).is_none());
    }

    #[test]
    fn advice_says_to_wait_and_retry_or_not() {
        let mut a = Approval {
            row: crate::session::db::ApprovalRow {
                id: "ap-1".into(),
                session_id: Some("s-1".into()),
                kind: KIND.into(),
                created: 0,
                status: ApprovalStatus::Pending,
                request: String::new(),
                answer: String::new(),
                decided_at: None,
                decided_by: None,
            },
            request: Request::default(),
            answer: crate::session::approvals::Answer::default(),
        };
        let pending = advice(&a);
        assert!(pending.contains("Waiting for a human"), "{pending}");
        assert!(pending.contains("carapace approve ap-1"), "{pending}");
        assert!(pending.contains("retry"), "{pending}");
        a.row.status = ApprovalStatus::Denied;
        assert!(advice(&a).contains("do not retry"));
        assert_eq!(with_stop("Drafts need a human"), "Drafts need a human.");
        assert_eq!(with_stop("Done!"), "Done!");
    }
}
