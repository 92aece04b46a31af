//! "Allow this from now on": a refused (or approval-gated) operation turned into the
//! smallest change of the user's rule file (`carapace_policy::rules::amend`), shown with
//! the safety check, and — when the user says so — written and reloaded.
//!
//! The same offer serves the CLI (`carapace rules allow`, over gRPC) and the console. A
//! change that would let through a must-block case of the built-in packs is written only
//! with an explicit confirmation: refusing it outright would make a deliberate choice
//! (a deploy key the user wants the agent to read) impossible, and writing it silently would
//! hide what it gives away; the list shows exactly which cases it opens.
use std::path::{Path, PathBuf};

use carapace_common::op;
use carapace_policy::rules::amend::{self, HistoryOp, Note, Proposal, Replay, RuleFile, Target};
use carapace_policy::rules::Action;
use serde_json::{json, Value};

use super::reload::Outcome;
use super::Daemon;
use crate::audit::record::Record;
use crate::audit::{Event, Kind};

/// Where the refused operation is recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// An audit ledger record (a kernel denial, a refused or gated tool call), by seq.
    Record(u64),
    /// An approval request, by id.
    Approval(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Record(seq) => write!(f, "ledger record {seq}"),
            Self::Approval(id) => write!(f, "approval {id}"),
        }
    }
}

/// Why no change was offered or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AllowError {
    #[error("carapaced has no audit ledger to read the denial from")]
    NoLedger,
    #[error("{0} was not found")]
    NotFound(String),
    #[error("{0} is not a refusal or an approval request of a rule")]
    NotRefused(String),
    #[error("rule `{rule}` did not refuse {from}")]
    NoSuchMatch { rule: String, from: String },
    #[error(transparent)]
    Amend(#[from] amend::AmendError),
    #[error("cannot read the rule file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the change would also allow {0} must-block case(s) of the built-in packs; confirm it \
         explicitly to write it"
    )]
    NeedsConfirmation(usize),
    #[error("cannot write the rule file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the daemon did not take the changed file (the previous one was put back):\n{0}")]
    Reload(String),
    #[error("the check failed: {0}")]
    Task(String),
}

/// The change offered for one refusal, and what the safety check found.
#[derive(Clone, Debug)]
pub struct Offer {
    pub from: Origin,
    pub session: Option<String>,
    pub file: PathBuf,
    pub proposal: Proposal,
    pub replay: Replay,
}

impl Offer {
    /// As the console and `carapace rules allow --json` show it.
    #[must_use]
    pub fn to_json(&self) -> Value {
        json!({
            "from": self.from.to_string(),
            "session": self.session,
            "file": self.file.display().to_string(),
            "rule": self.proposal.rule,
            "source": self.proposal.source,
            "operation": self.proposal.target.describe(),
            "exception": self.proposal.exception,
            "diff": self.proposal.diff,
            "notes": self.proposal.notes,
            "fixtures_checked": self.replay.fixtures_checked,
            "history_checked": self.replay.history_checked,
            "newly_allowed": self.replay.newly_allowed,
            "needs_confirmation": self.replay.unblocks_fixture(),
        })
    }

    /// For a terminal: the diff, notes and the safety check.
    #[must_use]
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = format!(
            "Allow {} from now on: an exception to rule `{}` ({}) in {}\n\n{}",
            self.proposal.target.describe(),
            self.proposal.rule,
            self.proposal.source,
            self.file.display(),
            self.proposal.diff
        );
        for n in &self.proposal.notes {
            let _ = write!(out, "\nnote: {n}");
        }
        let _ = write!(
            out,
            "\nsafety check: {} must-block case(s) of the built-in packs and {} operation(s) of \
             the session's history replayed; ",
            self.replay.fixtures_checked, self.replay.history_checked
        );
        if self.replay.newly_allowed.is_empty() {
            out.push_str("nothing else would be allowed.\n");
        } else {
            let _ = writeln!(
                out,
                "{} would newly be allowed:",
                self.replay.newly_allowed.len()
            );
            for n in &self.replay.newly_allowed {
                let tag = if n.must_block { "MUST-BLOCK " } else { "" };
                let _ = writeln!(out, "  {tag}{} (was {}): {}", n.origin, n.was, n.what);
            }
        }
        out
    }
}

/// The change for `from` (`rule`: which of the rules that refused it; the strictest when
/// `None`). Blocking: reads the ledger and compiles rule sets.
pub fn offer(daemon: &Daemon, from: &Origin, rule: Option<&str>) -> Result<Offer, AllowError> {
    let (session, refused) = match from {
        Origin::Record(seq) => refusal_of_record(daemon, *seq)?,
        Origin::Approval(id) => refusal_of_approval(daemon, id)?,
    };
    let rules = daemon.rules();
    let others: Vec<String> = refused
        .iter()
        .map(|(id, _)| id.clone())
        .filter(|id| Some(id.as_str()) != rule)
        .collect();
    // No exception lifts a locked rule, so nothing allows an operation one of them refused.
    if let Some(locked) = refused
        .iter()
        .map(|(id, _)| id)
        .find(|id| rules.by_id(id).is_some_and(|r| r.locked))
    {
        return Err(amend::AmendError::Locked(locked.clone()).into());
    }
    let (rule_id, target) =
        match rule {
            Some(r) => refused.into_iter().find(|(id, _)| id == r).ok_or_else(|| {
                AllowError::NoSuchMatch {
                    rule: r.to_owned(),
                    from: from.to_string(),
                }
            })?,
            None => refused
                .into_iter()
                .next()
                .ok_or_else(|| AllowError::NotRefused(from.to_string()))?,
        };
    let target = target?;
    let path = daemon.source.path.clone();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(AllowError::Read { path, source }),
    };
    let origin = path.display().to_string();
    let opts = crate::policy_host::options();
    let note = Note {
        when: now_minutes(),
        session: session.clone(),
        from: from.to_string(),
    };
    let mut proposal = amend::propose(
        &rules,
        &RuleFile {
            origin: &origin,
            text: text.as_deref(),
        },
        &rule_id,
        &target,
        &note,
        &opts,
    )?;
    let also: Vec<&String> = others.iter().filter(|id| **id != rule_id).collect();
    if !also.is_empty() {
        proposal.notes.push(format!(
            "also refused by {}: allow it under each of them (`--rule`) for the operation to pass",
            also.iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let history = session
        .as_deref()
        .map(|s| session_history(daemon, s))
        .unwrap_or_default();
    let replay = amend::replay(
        &origin,
        &proposal.old_text,
        &proposal.new_text,
        &history,
        &opts,
    )?;
    Ok(Offer {
        from: from.clone(),
        session,
        file: path,
        proposal,
        replay,
    })
}

/// Writes the offered change (made again now, so it applies to the file as it is), reloads
/// the rules and records both in the ledger. `who` names the user for the record.
pub async fn apply(
    daemon: &std::sync::Arc<Daemon>,
    from: Origin,
    rule: Option<String>,
    confirm: bool,
    who: &str,
) -> Result<(Offer, Outcome), AllowError> {
    let d = std::sync::Arc::clone(daemon);
    let offer = tokio::task::spawn_blocking(move || offer(&d, &from, rule.as_deref()))
        .await
        .map_err(|e| AllowError::Task(e.to_string()))??;
    let must_block = offer
        .replay
        .newly_allowed
        .iter()
        .filter(|n| n.must_block)
        .count();
    if must_block > 0 && !confirm {
        return Err(AllowError::NeedsConfirmation(must_block));
    }
    write_file(&offer.file, &offer.proposal.new_text)?;
    let mut event = Event::new(Kind::RulesChanged);
    event.session.clone_from(&offer.session);
    event.decision = Some("allow".to_owned());
    event.rules = vec![crate::audit::record::RuleRef {
        id: offer.proposal.rule.clone(),
        mode: "allow".to_owned(),
        matched: crate::audit::redact::redact(&offer.proposal.target.describe()).into_owned(),
    }];
    event.detail = crate::audit::redact::field(&format!(
        "{who}: exception {} added to rule `{}` in {} ({}); {} newly allowed, {must_block} \
         must-block{}",
        offer.proposal.exception,
        offer.proposal.rule,
        offer.file.display(),
        offer.from,
        offer.replay.newly_allowed.len(),
        if must_block > 0 { ", confirmed" } else { "" }
    ));
    daemon.audit.note(event).await;
    let outcome = daemon
        .reload(&format!("{who} allowed {} from now on", offer.from))
        .await;
    if !outcome.ok {
        // Put the file back as it was, so the file and the rules in force agree again.
        let old = &offer.proposal.old_text;
        if let Err(e) = write_file(&offer.file, old) {
            tracing::error!("cannot put the rule file back: {e}");
        }
        return Err(AllowError::Reload(outcome.diagnostics));
    }
    Ok((offer, outcome))
}

/// Replaces the file by a complete new one (written beside it, synced, renamed over it), so
/// the watcher and a crash never see it half-written; the old file's mode is kept.
fn write_file(path: &Path, text: &str) -> Result<(), AllowError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::os::unix::fs::PermissionsExt as _;
    let err = |source| AllowError::Write {
        path: path.to_owned(),
        source,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.carapace-new"));
    let mode = std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o7777);
    // A leftover of an earlier attempt that died half-way is ours to replace.
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(err)
}

/// `2026-11-27 11:02 UTC`.
fn now_minutes() -> String {
    let ts = crate::audit::record::now_rfc3339();
    format!("{} {} UTC", &ts[..10], &ts[11..16])
}

/// Every rule a record's refusal names, with its operation (or why it has none).
type Refused = Vec<(String, Result<Target, amend::AmendError>)>;

fn refused_by(record: &Record) -> Refused {
    let mut rules: Vec<_> = record
        .event
        .rules
        .iter()
        .filter(|r| r.mode == "block" || r.mode == "approve")
        .collect();
    // The strictest first: a block is what refused the operation.
    rules.sort_by_key(|r| r.mode != "block");
    rules
        .into_iter()
        .map(|r| (r.id.clone(), Target::parse(&r.matched)))
        .collect()
}

fn refusal_of_record(daemon: &Daemon, seq: u64) -> Result<(Option<String>, Refused), AllowError> {
    let dir = daemon
        .audit
        .ledger()
        .ok_or(AllowError::NoLedger)?
        .dir()
        .to_owned();
    let record = records(&dir)
        .into_iter()
        .find(|r| r.seq == seq)
        .ok_or_else(|| AllowError::NotFound(format!("ledger record {seq}")))?;
    let refused = matches!(record.event.decision.as_deref(), Some("block" | "approve"));
    if !refused {
        return Err(AllowError::NotRefused(format!("ledger record {seq}")));
    }
    // An agent session a harness names (a hook's `--session`) is recorded as such.
    let session = record
        .event
        .session
        .clone()
        .or_else(|| record.event.agent_session.clone());
    Ok((session, refused_by(&record)))
}

fn refusal_of_approval(daemon: &Daemon, id: &str) -> Result<(Option<String>, Refused), AllowError> {
    let a = daemon
        .approvals
        .get(id)
        .map_err(|e| AllowError::Task(e.to_string()))?
        .ok_or_else(|| AllowError::NotFound(format!("approval {id}")))?;
    let ops: Vec<Target> = a
        .request
        .kernel
        .iter()
        .chain(&a.request.kernel_ops)
        .filter_map(kernel_target)
        .collect();
    // A kernel request names its operation; a tool call's rules say what of it they
    // matched, as a ledger record's do.
    let refused = a
        .request
        .rules
        .iter()
        .map(|r| {
            let target = match ops.first() {
                Some(op) => Ok(op.clone()),
                None if !r.matched.is_empty() => Target::parse(&r.matched),
                None => Err(amend::AmendError::NotAnOperation(a.request.summary.clone())),
            };
            (r.id.clone(), target)
        })
        .collect();
    Ok((a.row.session_id.clone(), refused))
}

/// A kernel approval's operation: the path and its strongest action, or the address.
fn kernel_target(k: &crate::session::approvals::KernelOperation) -> Option<Target> {
    if let Some(addr) = k.addr {
        return Some(Target::Net {
            host: addr.to_string(),
            port: (k.port != 0).then_some(k.port),
        });
    }
    let action = [
        (op::EXEC, Action::Execute),
        (op::DELETE, Action::Delete),
        (op::WRITE, Action::Write),
        (op::READ, Action::Read),
        (op::NETWORK, Action::Network),
    ]
    .into_iter()
    .find(|(bit, _)| k.ops & bit != 0)
    .map(|(_, a)| a)?;
    (!k.path.is_empty()).then(|| Target::Path {
        action,
        path: k.path.clone(),
    })
}

/// The operations of `session` that a rule refused or gated, as the ledger has them.
fn session_history(daemon: &Daemon, session: &str) -> Vec<HistoryOp> {
    let Some(dir) = daemon.audit.ledger().map(|l| l.dir().to_owned()) else {
        return Vec::new();
    };
    let mut out: Vec<HistoryOp> = Vec::new();
    for r in records(&dir) {
        let of_session = r.event.session.as_deref() == Some(session)
            || (r.event.session.is_none() && r.event.agent_session.as_deref() == Some(session));
        if !of_session || !matches!(r.event.decision.as_deref(), Some("block" | "approve")) {
            continue;
        }
        for (_, target) in refused_by(&r) {
            if let Ok(target) = target {
                if !out.iter().any(|h| h.target == target) {
                    out.push(HistoryOp {
                        label: format!("ledger record {}", r.seq),
                        target,
                    });
                }
            }
        }
    }
    out
}

/// Every readable record of the ledger, oldest first.
fn records(dir: &Path) -> Vec<Record> {
    crate::console::views::tail(dir, usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::RuleRef;
    use crate::session::approvals::KernelOperation;

    fn rule(id: &str, mode: &str, matched: &str) -> RuleRef {
        RuleRef {
            id: id.into(),
            mode: mode.into(),
            matched: matched.into(),
        }
    }

    #[test]
    fn the_blocking_rule_comes_first_and_warnings_are_left_out() {
        let mut event = Event::new(Kind::Evaluate);
        event.decision = Some("block".into());
        event.rules = vec![
            rule("asks", "approve", "write /srv/a"),
            rule("warns", "warn", "write /srv/a"),
            rule("blocks", "block", "write /srv/a"),
            rule("cmd", "block", "command `rm -rf /`"),
        ];
        let record = Record {
            seq: 1,
            ts: String::new(),
            event,
            prev: String::new(),
        };
        let refused = refused_by(&record);
        let ids: Vec<&str> = refused.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["blocks", "cmd", "asks"]);
        assert!(refused[0].1.is_ok());
        assert!(refused[1].1.is_err(), "a command names no operation");
    }

    #[test]
    fn a_kernel_request_names_its_operation() {
        let path = KernelOperation {
            path: "/srv/drafts/a.txt".into(),
            ops: op::READ | op::WRITE,
            ..KernelOperation::default()
        };
        assert_eq!(
            kernel_target(&path),
            Some(Target::Path {
                action: Action::Write,
                path: "/srv/drafts/a.txt".into()
            })
        );
        let addr = KernelOperation {
            addr: Some("192.0.2.7".parse().unwrap()),
            port: 443,
            ..KernelOperation::default()
        };
        assert_eq!(
            kernel_target(&addr),
            Some(Target::Net {
                host: "192.0.2.7".into(),
                port: Some(443)
            })
        );
        assert_eq!(kernel_target(&KernelOperation::default()), None);
    }

    #[test]
    fn the_file_is_replaced_whole_and_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.yaml");
        std::fs::write(&path, "version: 1\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_file(&path, "version: 1\nrules: []\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "version: 1\nrules: []\n"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left behind");
    }
}
