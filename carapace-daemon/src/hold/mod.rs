//! `hold: true` (issue 20): opens of the files an approve-mode hold rule names wait for a
//! human's answer instead of being refused for a retry. The daemon marks those files for
//! `fanotify` permission events (`FAN_OPEN_PERM`, which an exec's open raises too); the
//! kernel's LSM programs, which run before fanotify, let the hold rules' opens of marked
//! files through to it (`RULE_HOLD` and the `HELD_INODES` map, written only once the marks
//! are in place, and the inode's own fsnotify mask, gone with the marks when the daemon
//! dies). Without fanotify the rules refuse and retry as approve mode does.
//!
//! fanotify reports every process's opens of a marked file: those of processes outside a
//! session the rule is in force for are allowed at once, in the reader, which never waits.
//! A session's open files the same `kernel` approval request the refusal would (plus
//! "held: the program is waiting"), joined with identical ones (fatigue), and is answered
//! with `FAN_ALLOW` or `FAN_DENY` (the open then fails with `EPERM`) when a human answers
//! or the approval timeout passes; each held open waits in a task of its own. When the
//! daemon stops, every open still held is denied (closing the group would allow them).
mod files;
mod request;

use std::collections::HashMap;
use std::os::fd::{AsRawFd as _, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use nix::sys::fanotify::{
    EventFFlags, Fanotify, FanotifyEvent, FanotifyResponse, InitFlags, MarkFlags, MaskFlags,
    Response,
};
use tokio::io::unix::AsyncFd;

pub use files::{files_of, held, HeldRule, MAX_FILES};
pub use request::{held_ops, request};

use carapace_common::InodeKey;

use crate::api::Daemon;
use crate::session::db::ApprovalStatus;

/// The listener: the fanotify group, the opens it holds, and its tasks.
pub struct Holder {
    inner: Arc<Inner>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

struct Inner {
    group: AsyncFd<Fanotify>,
    /// Opens held, by their event's file descriptor: whoever takes one out answers it.
    pending: Mutex<HashMap<RawFd, FanotifyEvent>>,
    /// The rule that holds each marked file. The marks are on files, not names: an open of
    /// a marked file under another name (a hard link made later, outside the pattern) is
    /// judged by the rule that marked it.
    marked: Mutex<HashMap<InodeKey, String>>,
    stopping: AtomicBool,
}

impl Inner {
    /// Answers the held open `fd`, unless it was answered already (at shutdown).
    fn answer(&self, fd: RawFd, allow: bool) {
        let taken = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&fd);
        if let Some(event) = taken {
            self.respond(&event, allow);
        }
    }

    /// Stops holding: every open held now is denied, and every one read later too (closing
    /// the group would allow them). Returns how many were denied now.
    fn deny_all(&self) -> usize {
        self.stopping.store(true, Ordering::SeqCst);
        let held: Vec<FanotifyEvent> = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, e)| e)
            .collect();
        for event in &held {
            self.respond(event, false);
        }
        held.len()
    }

    /// Writes the response for `event` (its file descriptor is closed when it drops).
    fn respond(&self, event: &FanotifyEvent, allow: bool) {
        let Some(fd) = event.fd() else { return };
        let response = if allow {
            Response::FAN_ALLOW
        } else {
            Response::FAN_DENY
        };
        if let Err(e) = self
            .group
            .get_ref()
            .write_response(FanotifyResponse::new(fd, response))
        {
            tracing::warn!("cannot answer a held open: {e}");
        }
    }
}

impl Holder {
    /// Starts the listener; says once why not when fanotify cannot start (the hold rules
    /// then refuse and retry where the kernel layer runs).
    #[must_use]
    pub fn start(daemon: &Arc<Daemon>) -> Option<Self> {
        // Started even when no rule holds yet (a reload may bring hold rules), and without
        // the kernel layer: there fanotify is the only kernel check of these files.
        let group = match Fanotify::init(
            InitFlags::FAN_CLASS_CONTENT | InitFlags::FAN_CLOEXEC | InitFlags::FAN_NONBLOCK,
            EventFFlags::O_RDONLY | EventFFlags::O_CLOEXEC | EventFFlags::O_LARGEFILE,
        )
        .map_err(std::io::Error::from)
        .and_then(|g| {
            // SAFETY: the group owns its descriptor and moves into the `AsyncFd`, which
            // keeps it open until it is deregistered on drop; nothing else closes it.
            unsafe { AsyncFd::register(g) }.map_err(|e| e.into_parts().1)
        }) {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(
                    "hold rules cannot hold opens (fanotify: {e}); they refuse until approved \
                     and the agent retries"
                );
                // A previous daemon's list: its marks are gone, so the kernel refuses those
                // files already; cleared so the map says what is true.
                if let Err(e) = daemon.sessions.set_held(&[]) {
                    tracing::warn!("cannot clear the held files in the kernel: {e}");
                }
                return None;
            }
        };
        let inner = Arc::new(Inner {
            group,
            pending: Mutex::new(HashMap::new()),
            marked: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
        });
        mark(&inner, daemon);
        let reader = tokio::spawn(read(Arc::clone(&inner), Arc::clone(daemon)));
        let remarker = {
            let (inner, daemon) = (Arc::clone(&inner), Arc::clone(daemon));
            tokio::spawn(async move {
                loop {
                    daemon.holds_changed.notified().await;
                    mark(&inner, &daemon);
                }
            })
        };
        Some(Self {
            inner,
            tasks: vec![reader, remarker],
        })
    }

    /// Denies every open still held, lets the kernel refuse the hold rules' files again,
    /// and closes the group.
    pub fn stop(&self, daemon: &Daemon) {
        // First, so that no open read from here on is held.
        self.inner.stopping.store(true, Ordering::SeqCst);
        for t in &self.tasks {
            t.abort();
        }
        let denied = self.inner.deny_all();
        if denied > 0 {
            tracing::info!("stopping: {denied} held open(s) denied");
        }
        if let Err(e) = daemon.sessions.set_held(&[]) {
            tracing::warn!("cannot clear the held files in the kernel: {e}");
        }
    }
}

impl Drop for Holder {
    /// Fail closed on any way out: closing the group would allow what it holds.
    fn drop(&mut self) {
        self.inner.deny_all();
    }
}

/// (Re)marks the files the hold rules name now and tells the kernel which are held. Marks
/// go first and the kernel map after, so that no file is let through to a group that does
/// not hold it.
fn mark(inner: &Inner, daemon: &Daemon) {
    let group = inner.group.get_ref();
    // Old marks out: a file no rule holds now must not wait.
    if let Err(e) = group.mark(
        MarkFlags::FAN_MARK_FLUSH,
        MaskFlags::empty(),
        nix::fcntl::AT_FDCWD,
        None::<&str>,
    ) {
        tracing::warn!("cannot clear the fanotify marks: {e}");
    }
    let mut keys = Vec::new();
    let mut by_file = HashMap::new();
    for rule in held(&daemon.rules()) {
        let mut marked = Vec::new();
        for file in &rule.files {
            match group
                .mark(
                    MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_DONT_FOLLOW,
                    MaskFlags::FAN_OPEN_PERM,
                    nix::fcntl::AT_FDCWD,
                    Some(file.as_str()),
                )
                .map_err(std::io::Error::from)
                .and_then(|()| request::file_key(file))
            {
                Ok(k) => {
                    keys.push(k);
                    by_file.insert(k, rule.rule.clone());
                    marked.push(file.as_str());
                }
                Err(e) => tracing::warn!(rule = %rule.rule, "cannot hold {file}: {e}"),
            }
        }
        tracing::info!(
            rule = %rule.rule,
            "hold: opens of {} file(s) wait for a human ({}); files created under the \
             pattern later refuse until approved and the agent retries",
            marked.len(),
            marked.join(", ")
        );
    }
    *inner.marked.lock().unwrap_or_else(PoisonError::into_inner) = by_file;
    match daemon.sessions.set_held(&keys) {
        // Without the kernel layer (`false`) nothing refuses first: the marks alone hold.
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot tell the kernel which files are held (they refuse): {e}"),
    }
}

/// Reads the group's events until the daemon stops.
async fn read(inner: Arc<Inner>, daemon: Arc<Daemon>) {
    loop {
        let mut ready = match inner.group.readable().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("fanotify: {e}");
                return;
            }
        };
        let events = match ready.try_io(|g| g.get_ref().read_events().map_err(Into::into)) {
            Ok(Ok(events)) => events,
            Ok(Err(e)) => {
                tracing::warn!("cannot read fanotify events: {e}");
                continue;
            }
            Err(_would_block) => continue,
        };
        for event in events {
            dispatch(&inner, &daemon, event);
        }
    }
}

/// Allows at once what no session's hold rule asks about; holds the rest in a task each.
fn dispatch(inner: &Arc<Inner>, daemon: &Arc<Daemon>, event: FanotifyEvent) {
    if !event.mask().contains(MaskFlags::FAN_OPEN_PERM) {
        return;
    }
    let Some(fd) = event.fd().map(|f| f.as_raw_fd()) else {
        return;
    };
    let session = u32::try_from(event.pid())
        .ok()
        .filter(|pid| *pid != std::process::id())
        .and_then(|pid| crate::session::cgroup::process_cgroup(pid).ok())
        .and_then(|cgroup| daemon.sessions.session_of_cgroup(&cgroup));
    let Some(session) = session else {
        inner.respond(&event, true);
        return;
    };
    if inner.stopping.load(Ordering::SeqCst) {
        inner.respond(&event, false);
        return;
    }
    inner
        .pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(fd, event);
    let (inner, daemon) = (Arc::clone(inner), Arc::clone(daemon));
    tokio::spawn(async move {
        let allow = decide(&inner, &daemon, &session, fd).await;
        inner.answer(fd, allow);
    });
}

/// Whether the held open `fd` of a process of `session` may go on: no hold rule in force
/// for the session covers the file, or a human approves (now or earlier in the session).
async fn decide(inner: &Inner, daemon: &Arc<Daemon>, session: &str, fd: RawFd) -> bool {
    let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{fd}")) else {
        return false;
    };
    let Some(path) = path.to_str().map(str::to_owned) else {
        return false;
    };
    let Ok(file) = request::file_key(&format!("/proc/self/fd/{fd}")) else {
        return false;
    };
    let rules = daemon.rules();
    let activation = match crate::session::state::activation(&daemon.sessions, session) {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(
                session,
                "cannot read the session's rules; the open is denied: {e}"
            );
            return false;
        }
    };
    let marked_by = inner
        .marked
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&file)
        .cloned();
    let Some(rule) = rules.rules().iter().find(|r| {
        r.hold
            && activation.applies(r)
            && (r.matches_path(&path, held_ops(r)) || marked_by.as_deref() == Some(r.id.as_str()))
    }) else {
        return true;
    };
    let Some(record) = daemon.sessions.get(session) else {
        return true;
    };
    let req = request(rule, &path, held_ops(rule), file, record.owner_uid);
    let (approvals, sid) = (Arc::clone(&daemon.approvals), session.to_owned());
    let filed = tokio::task::spawn_blocking(move || {
        if approvals.approved_earlier(&sid, crate::api::kernel_approval::KIND, &req)? {
            return Ok(None);
        }
        approvals
            .request(Some(&sid), crate::api::kernel_approval::KIND, &req)
            .map(Some)
    })
    .await;
    let approval = match filed {
        Ok(Ok(None)) => return true,
        Ok(Ok(Some(a))) => a,
        Ok(Err(e)) => {
            tracing::warn!(
                session,
                "cannot file the approval request; the open is denied: {e}"
            );
            return false;
        }
        Err(e) => {
            tracing::warn!(
                session,
                "cannot file the approval request; the open is denied: {e}"
            );
            return false;
        }
    };
    let answered = if approval.row.status == ApprovalStatus::Pending {
        match daemon
            .approvals
            .wait(&approval.row.id, daemon.approval_timeout)
            .await
        {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(approval = %approval.row.id, "held open denied: {e}");
                return false;
            }
        }
    } else {
        approval
    };
    let allow = answered.row.status == ApprovalStatus::Approved;
    tracing::info!(
        approval = %answered.row.id,
        session,
        "held open of {} {}",
        crate::audit::redact::redact(&path),
        if allow { "allowed" } else { "denied (EPERM)" }
    );
    allow
}
