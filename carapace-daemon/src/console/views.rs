//! What the console's page shows, as JSON: sessions, approvals, rules, ledger records and
//! the ledger's verification — each filtered to what the visitor's uid may see (its own
//! sessions and requests; root sees everything), as the gRPC API does.
use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::api::proto::SessionDetail;
use crate::api::{sessions, Daemon, Peer};
use crate::audit::record::Record;
use crate::session::approvals::Approval;
use carapace_policy::rules::validate::mode_name;
use carapace_policy::rules::{Enforcement, RuleSet};

/// The API's view of the console's visitor: a human outside every session (the
/// connection was checked), with the uid the login URL was made for.
#[must_use]
pub fn peer(uid: u32, pid: u32) -> Peer {
    Peer {
        uid,
        gid: 0,
        pid,
        cgroup: None,
        agent: false,
    }
}

fn session(d: &SessionDetail) -> Value {
    let rules = |state: &str| -> Vec<Value> {
        d.rules
            .iter()
            .filter(|r| r.state == state)
            .map(|r| json!({"id": r.rule_id, "since": r.since, "reason": r.reason}))
            .collect()
    };
    json!({
        "id": d.id,
        "kind": d.kind,
        "agent": if d.kind == "run" { "carapace run".to_owned() } else { d.agent.clone() },
        "external_id": d.external_id,
        "command": d.command,
        "owner_uid": d.owner_uid,
        "created": d.created,
        "activated": rules("activated"),
        "disabled": rules("disabled"),
        "approved_operations": d.approved_operations,
        "shadow": d.shadow,
        "profile": d.profile,
        "record": d.record,
    })
}

/// The sessions `peer` may see.
pub fn sessions(daemon: &Daemon, peer: &Peer) -> Result<Value, tonic::Status> {
    Ok(Value::Array(
        sessions::list(daemon, peer)?.iter().map(session).collect(),
    ))
}

/// The record sessions (`carapace run --record`) whose records `uid` may read — its own;
/// root's, all — ended ones included, newest first: the page offers each one's proposal
/// for review after the session is gone.
#[must_use]
pub fn recordings(daemon: &Daemon, uid: u32) -> Value {
    let Some(recorder) = daemon.recorder.get() else {
        return json!([]);
    };
    Value::Array(
        recorder
            .list()
            .into_iter()
            .filter(|m| uid == 0 || m.owner_uid == uid)
            .map(|m| {
                json!({
                    "id": m.id,
                    "command": m.command,
                    "owner_uid": m.owner_uid,
                    "started": m.started,
                    "live": daemon.sessions.get(&m.id).is_some(),
                })
            })
            .collect(),
    )
}

/// The session ids `peer` may see (for filtering records).
pub fn session_ids(daemon: &Daemon, peer: &Peer) -> BTreeSet<String> {
    sessions::list(daemon, peer)
        .map(|l| l.into_iter().map(|d| d.id).collect())
        .unwrap_or_default()
}

/// Whether `uid` may see approval `a`.
#[must_use]
pub fn may_see(uid: u32, a: &Approval) -> bool {
    uid == 0 || a.request.requester_uid == uid
}

/// An approval as the page shows it: the operation and the rules that gate it, not the
/// raw call.
#[must_use]
pub fn approval(a: &Approval) -> Value {
    let rules = |rules: &[crate::session::approvals::GateRule]| -> Vec<Value> {
        rules
            .iter()
            .map(|r| json!({"id": r.id, "mode": r.mode, "message": r.message}))
            .collect()
    };
    json!({
        "id": a.row.id,
        "session_id": a.row.session_id,
        "kind": a.row.kind,
        "status": a.row.status.name(),
        "created": a.row.created,
        "operation": a.request.summary,
        "rules": rules(&a.request.rules),
        "steps": a.request.steps.iter().map(|s| json!({
            "n": s.n, "operation": s.summary, "decision": s.decision, "rules": rules(&s.rules),
        })).collect::<Vec<_>>(),
        "asked": a.request.asked.max(1),
        "requester_uid": a.request.requester_uid,
        "decided_by": a.row.decided_by,
        "once": a.answer.once,
        "reason": a.answer.reason,
    })
}

/// The pending approvals `uid` may see.
pub fn approvals(daemon: &Daemon, uid: u32) -> Result<Value, tonic::Status> {
    let pending = daemon
        .approvals
        .pending()
        .map_err(|e| tonic::Status::internal(e.to_string()))?;
    Ok(Value::Array(
        pending
            .iter()
            .filter(|a| may_see(uid, a))
            .map(approval)
            .collect(),
    ))
}

/// Every rule in force: its mode, message, where it came from and which layers enforce it.
#[must_use]
pub fn rules(rules: &RuleSet) -> Value {
    Value::Array(
        rules
            .rules()
            .iter()
            .map(|r| {
                let (kernel, why_not) = match &r.enforcement {
                    Enforcement::Kernel => (true, String::new()),
                    Enforcement::Userspace(reason) => (false, reason.clone()),
                    Enforcement::Unplanned => (r.kernel_enforced(), String::new()),
                };
                let mut layers = vec!["history", "tool-call"];
                if kernel {
                    layers.push("kernel");
                }
                json!({
                    "id": r.id,
                    "mode": mode_name(r.mode),
                    "message": r.message,
                    "source": r.source,
                    "line": r.span.line,
                    "locked": r.locked,
                    "category": r.category,
                    "layers": layers,
                    "kernel_note": why_not,
                    "session_rule": r.trigger.is_some() || r.effect.is_some(),
                })
            })
            .collect(),
    )
}

/// Whether a record is one `uid` may see: root sees all; others the records of their
/// sessions and their own processes'.
#[must_use]
pub fn may_see_record(uid: u32, visible: &BTreeSet<String>, r: &Record) -> bool {
    uid == 0
        || r.event
            .session
            .as_ref()
            .is_some_and(|s| visible.contains(s))
        || r.event.agent.as_ref().and_then(|a| a.uid) == Some(uid)
}

/// The ledger's state: verified (records, last hash) or the first problem.
#[must_use]
pub fn verification(dir: Option<&std::path::Path>) -> Value {
    let Some(dir) = dir else {
        return json!({"ok": false, "problem": "carapaced has no audit ledger"});
    };
    match crate::audit::verify::verify(dir) {
        Ok(report) => json!({
            "ok": true,
            "records": report.records,
            "segments": report.segments,
            "last_hash": report.last_hash,
            "notes": report.notes,
        }),
        Err(problem) => json!({"ok": false, "problem": problem.to_string()}),
    }
}

/// The last `max` records of the ledger in `dir`, oldest first (what the timeline starts
/// with; later ones arrive live). Unreadable or damaged lines are skipped here: the
/// verification says what is wrong with them.
#[must_use]
pub fn tail(dir: &std::path::Path, max: usize) -> Vec<Record> {
    let Ok(segments) = crate::audit::files::segments(dir) else {
        return Vec::new();
    };
    let mut out: Vec<Record> = Vec::new();
    for (_, path) in segments.iter().rev() {
        let Ok(lines) = crate::audit::files::lines(path) else {
            continue;
        };
        let mut records: Vec<Record> = lines
            .iter()
            .filter(|l| l.complete)
            .filter_map(|l| crate::audit::record::decode(&l.bytes).ok())
            .map(|p| p.record)
            .collect();
        records.append(&mut out);
        out = records;
        if out.len() >= max {
            break;
        }
    }
    let skip = out.len().saturating_sub(max);
    out.split_off(skip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_newest_records_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, _) =
            crate::audit::Ledger::open(dir.path(), crate::audit::Options::default()).unwrap();
        for _ in 0..5 {
            ledger
                .append_blocking(crate::audit::Event::new(crate::audit::Kind::Evaluate))
                .unwrap();
        }
        let audit = ledger.dir().to_owned();
        ledger.close();
        let seqs: Vec<u64> = tail(&audit, 3).iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [3, 4, 5]);
        assert_eq!(tail(&audit, 50).len(), 5);
        let v = verification(Some(&audit));
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["records"], 5);
    }
}
