//! Session time limits (`carapace run --timeout D`) as the daemon keeps them.
//!
//! `carapace run` kills its session's processes itself when the time is up (and exits 124).
//! The daemon keeps the same deadline so that the limit holds when that client is gone — an
//! agent can kill its own `carapace run`, which runs as the same user: a little after the
//! deadline ([`BACKSTOP`]) it ends any session still alive. Either way the ledger gets a
//! `session-limit` record. Deadlines live in memory only: a restarted daemon forgets them.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::{audit, Daemon, SessionEvent};

/// How long after the deadline the daemon ends a session its client did not end.
pub const BACKSTOP: Duration = Duration::from_secs(10);

/// The time limit of each session that has one.
#[derive(Default)]
pub struct Deadlines {
    limits: Mutex<HashMap<String, (Instant, Duration)>>,
}

impl Deadlines {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Duration)>> {
        self.limits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets session `id`'s limit; `Some(limit)` when it had one and it ran out.
    pub fn take_expired(&self, id: &str) -> Option<Duration> {
        let (started, limit) = self.lock().remove(id)?;
        (started.elapsed() >= limit).then_some(limit)
    }
}

/// The ledger line of an expired time limit.
#[must_use]
pub fn expired_message(limit: Duration, by_daemon: bool) -> String {
    let who = if by_daemon {
        "; carapace run did not end the session, so carapaced killed it"
    } else {
        ""
    };
    format!("killed: time limit {}s reached{who}", limit.as_secs())
}

/// Starts session `id`'s clock: at `limit` + [`BACKSTOP`], a session still alive is ended.
pub fn start(daemon: &Arc<Daemon>, id: String, limit: Duration) {
    daemon
        .deadlines
        .lock()
        .insert(id.clone(), (Instant::now(), limit));
    let daemon = Arc::clone(daemon);
    tokio::spawn(async move {
        tokio::time::sleep(limit + BACKSTOP).await;
        if daemon.sessions.get(&id).is_none() || daemon.deadlines.take_expired(&id).is_none() {
            return;
        }
        tracing::warn!(session = %id, "time limit of {}s reached and the session is still alive; ending it", limit.as_secs());
        let sessions = Arc::clone(&daemon.sessions);
        let id2 = id.clone();
        let hits = match tokio::task::spawn_blocking(move || sessions.end(&id2, true)).await {
            Ok(Ok(hits)) => hits,
            Ok(Err(e)) => {
                tracing::error!(session = %id, "cannot end the session past its time limit: {e}");
                return;
            }
            Err(e) => {
                tracing::error!(session = %id, "the task ending the session failed: {e}");
                return;
            }
        };
        super::release(&daemon, &id);
        let message = expired_message(limit, true);
        daemon
            .audit
            .note(audit::limit_reached(&id, "time", &message))
            .await;
        super::record_limits(&daemon, &id, &hits).await;
        let event = audit::session_changed(
            crate::audit::Kind::SessionEnded,
            &id,
            None,
            &[],
            "time limit",
        );
        daemon.audit.note(event).await;
        let _ = daemon.events.send(SessionEvent::Ended(id));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_expired_limits_are_reported_and_each_once() {
        let d = Deadlines::default();
        d.lock()
            .insert("a".into(), (Instant::now(), Duration::ZERO));
        d.lock()
            .insert("b".into(), (Instant::now(), Duration::from_hours(1)));
        assert_eq!(d.take_expired("a"), Some(Duration::ZERO));
        assert_eq!(d.take_expired("a"), None);
        assert_eq!(d.take_expired("b"), None);
        assert_eq!(d.take_expired("c"), None);
        assert_eq!(
            expired_message(Duration::from_secs(30), false),
            "killed: time limit 30s reached"
        );
    }
}
