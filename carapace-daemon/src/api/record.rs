//! Record mode in the daemon (`carapace run --record`, see `crate::record`): the record of a
//! session starts with it, the kernel's touched events and the session's tool calls that
//! run fill it, and `RecordShow` / `RecordPropose` read it.

use std::sync::Arc;

use carapace_policy::engine::Extracted;
use tonic::Status;

use super::proto::{RecordProposeReply, RecordProposeRequest, RecordShowReply, RecordShowRequest};
use super::{Daemon, Peer};
use crate::kernel::EventStream;
use crate::record::{self, convert, profiles, propose, RecordError, Recorder, SessionMeta};
use crate::session::SessionRecord;

fn recorder(daemon: &Daemon) -> Result<&Arc<Recorder>, Status> {
    daemon
        .recorder
        .get()
        .ok_or_else(|| Status::unavailable("this daemon keeps no records (no data directory)"))
}

/// Starts the record of a session created with `record` (before its reply, so before the
/// agent runs).
pub fn start(daemon: &Daemon, session: &SessionRecord) -> Result<(), Status> {
    recorder(daemon)?
        .start(&SessionMeta {
            id: session.id.clone(),
            command: session.command.clone(),
            owner_uid: session.owner_uid,
            started: session.created,
        })
        .map_err(|e| Status::internal(e.to_string()))
}

/// Records what a tool call of session `id` that runs touches, if the session records.
/// A store failure is logged, never a reason to refuse the call: the proposal then simply
/// lacks it (and blocks it).
pub fn note_call(daemon: &Daemon, id: &str, ext: &Extracted) {
    if !daemon.sessions.get(id).is_some_and(|s| s.records()) {
        return;
    }
    let Some(rec) = daemon.recorder.get() else {
        return;
    };
    if let Err(e) = rec.note(id, convert::from_call(ext)) {
        tracing::warn!(session = id, "record: {e}");
    }
}

/// Ends the record of session `id`, which just ended (see `Recorder::close`): off the
/// runtime, as it syncs the file. A session without a record costs a path lookup.
pub fn close(daemon: &Arc<Daemon>, id: &str) {
    let Some(rec) = daemon.recorder.get().map(Arc::clone) else {
        return;
    };
    let id = id.to_owned();
    // Detached: nothing waits for the sync; a failure only loses the ended line's date.
    drop(tokio::task::spawn_blocking(move || {
        if let Err(e) = rec.close(&id, crate::session::db::now()) {
            tracing::warn!(session = %id, "record: cannot close the record: {e}");
        }
    }));
}

/// How often records of ended sessions are looked at for pruning.
const PRUNE_INTERVAL: std::time::Duration = std::time::Duration::from_hours(1);

/// Deletes the records of sessions that ended more than `keep` ago (config.yaml's
/// `record.keep_days`), at start and then hourly.
#[must_use = "the task runs forever; keep or detach its handle"]
pub fn spawn_pruner(daemon: Arc<Daemon>, keep: std::time::Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PRUNE_INTERVAL);
        loop {
            tick.tick().await;
            let Some(rec) = daemon.recorder.get().map(Arc::clone) else {
                return;
            };
            let d = Arc::clone(&daemon);
            let pruned = tokio::task::spawn_blocking(move || {
                rec.prune(keep, |id| d.sessions.get(id).is_some())
            })
            .await;
            match pruned {
                Ok(Ok(ids)) if !ids.is_empty() => tracing::info!(
                    "record: deleted the records of {} sessions that ended more than {} days ago",
                    ids.len(),
                    keep.as_secs() / 86_400
                ),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!("record: cannot prune old records: {e}"),
                Err(e) => tracing::warn!("record: the pruning task failed: {e}"),
            }
        }
    })
}

/// Drains the kernel's touched events (a ring buffer apart from the denials') into the
/// sessions' records, naming addresses by what the session's resolver handed them out for.
#[must_use = "the task runs until the stream ends; keep or detach its handle"]
pub fn spawn_touched_pump(
    daemon: Arc<Daemon>,
    mut stream: EventStream,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            let Some(id) = daemon.sessions.id_of_number(event.session) else {
                continue;
            };
            let Some(rec) = daemon.recorder.get() else {
                continue;
            };
            let name = (event.subject == carapace_common::subject::INET)
                .then(|| convert::inet_addr(&event))
                .and_then(|a| daemon.resolvers.learned().lookup(event.session_cgroup, a));
            if let Err(e) = rec.note(&id, convert::from_event(&event, name)) {
                tracing::warn!(session = %id, "record: {e}");
            }
        }
        tracing::warn!("the kernel's touched stream ended");
    })
}

fn status(e: &RecordError) -> Status {
    match e {
        RecordError::Unknown(_) => Status::not_found(e.to_string()),
        RecordError::BadId(_) => Status::invalid_argument(e.to_string()),
        _ => Status::internal(e.to_string()),
    }
}

/// The record of `id`, if `peer` may read it: its owner, or root outside any session.
fn readable(daemon: &Daemon, peer: &Peer, id: &str) -> Result<record::Recorded, Status> {
    let recorded = recorder(daemon)?.recorded(id).map_err(|e| status(&e))?;
    let owner = recorded.meta.as_ref().map_or(0, |m| m.owner_uid);
    let root_outside = peer.uid == 0 && !peer.agent;
    if peer.uid != owner && !root_outside {
        return Err(Status::permission_denied(format!(
            "the record of session {id} belongs to another user"
        )));
    }
    Ok(recorded)
}

pub fn show(
    daemon: &Daemon,
    peer: &Peer,
    req: &RecordShowRequest,
) -> Result<RecordShowReply, Status> {
    let recorded = readable(daemon, peer, &req.session_id)?;
    Ok(RecordShowReply {
        session_id: req.session_id.clone(),
        command: recorded.meta.map(|m| m.command).unwrap_or_default(),
        touched: recorded
            .items
            .iter()
            .map(record::Touched::describe)
            .collect(),
        truncated: recorded.truncated,
        live: daemon.sessions.get(&req.session_id).is_some(),
    })
}

/// `2026-11-27 11:02 UTC` for `secs` since the epoch.
fn minutes(secs: u64) -> String {
    let ts = crate::audit::record::rfc3339(secs, 0);
    format!("{} {} UTC", &ts[..10], &ts[11..16])
}

/// The proposal for a session's record, validated; saved as a profile when asked. Saving
/// is refused to every process inside a session (an agent must not write the rules it or
/// another agent runs under) and to users other than root and the daemon's own.
pub fn propose(
    daemon: &Daemon,
    peer: &Peer,
    req: &RecordProposeRequest,
) -> Result<RecordProposeReply, Status> {
    if !req.write_name.is_empty() {
        if peer.agent {
            tracing::warn!(pid = peer.pid, "an agent asked to write a profile; refused");
            return Err(Status::permission_denied(
                "processes inside a Carapace session cannot write profiles",
            ));
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let own = unsafe { libc::geteuid() };
        if peer.uid != 0 && peer.uid != own {
            return Err(Status::permission_denied(
                "only root can write profiles (try `sudo carapace record propose … --write`)",
            ));
        }
    }
    let recorded = readable(daemon, peer, &req.session_id)?;
    let opts = crate::policy_host::options();
    let meta = recorded.meta.clone().unwrap_or_default();
    let header = propose::Header {
        session: req.session_id.clone(),
        command: crate::audit::redact::redact(&meta.command.join(" ")).into_owned(),
        recorded: minutes(meta.started),
        proposed: minutes(crate::session::db::now()),
        truncated: recorded.truncated,
    };
    let proposal = propose::propose(&recorded, opts.homes.list(), &header, &opts)
        .map_err(|e| Status::failed_precondition(e.to_string()))?;
    let written = if req.write_name.is_empty() {
        String::new()
    } else {
        let rec = recorder(daemon)?;
        let path = profiles::write(rec.data_dir(), &req.write_name, &proposal.text, req.force)
            .map_err(|e| match e {
                profiles::ProfileError::Exists(_) => Status::already_exists(e.to_string()),
                profiles::ProfileError::BadName(_) => Status::invalid_argument(e.to_string()),
                _ => Status::internal(e.to_string()),
            })?;
        tracing::info!(
            session = %req.session_id,
            profile = %path.display(),
            uid = peer.uid,
            "record: proposal saved as a profile"
        );
        // A new rule set some session may run under: the ledger says who wrote it.
        let mut event = crate::audit::Event::new(crate::audit::Kind::RulesChanged);
        event.session = Some(req.session_id.clone());
        event.detail = crate::audit::redact::field(&format!(
            "uid {} (pid {}) saved the proposal of record session {} as profile {}",
            peer.uid,
            peer.pid,
            req.session_id,
            path.display()
        ));
        daemon.audit.note_detached(event);
        path.display().to_string()
    };
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Ok(RecordProposeReply {
        written,
        fixtures_checked: count(proposal.fixtures_checked),
        roots: proposal.plan.roots.iter().cloned().collect(),
        reads: count(proposal.plan.reads.len()),
        writes: count(proposal.plan.writes.len()),
        hosts: count(proposal.plan.hosts.len()),
        text: proposal.text,
    })
}
