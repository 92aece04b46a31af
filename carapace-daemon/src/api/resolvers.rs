//! The daemon's side of the session resolvers (`crate::dns`): each query is judged by the
//! rules in force at that moment with the session's activation state, and each refused
//! lookup goes to the audit ledger and the session's watchers like a kernel denial.
use std::sync::{Arc, Weak};

use super::{audit, Daemon, SessionEvent};
use crate::api::proto::Denial;
use crate::dns::{DenialSink, RulesInForce};
use carapace_policy::engine::names::needs_resolver;
use carapace_policy::engine::Activation;
use carapace_policy::rules::RuleSet;

/// The rules of one session's queries. Weak: a resolver must not keep a stopped daemon.
struct SessionRules {
    daemon: Weak<Daemon>,
    session_id: String,
}

impl RulesInForce for SessionRules {
    fn current(&self) -> Result<(Arc<RuleSet>, Activation), String> {
        let daemon = self
            .daemon
            .upgrade()
            .ok_or_else(|| "the daemon is stopping".to_owned())?;
        let activation = crate::session::state::activation(&daemon.sessions, &self.session_id)
            .map_err(|e| format!("cannot read the session's rule state: {e}"))?;
        Ok((daemon.rules(), activation))
    }
}

struct Denials {
    daemon: Weak<Daemon>,
}

impl DenialSink for Denials {
    fn refused(&self, d: Denial) {
        let Some(daemon) = self.daemon.upgrade() else {
            return;
        };
        tracing::warn!(
            session = %d.session_id,
            rule = %d.rule_id,
            "refused lookup of {}",
            crate::audit::redact::redact(&d.subject)
        );
        daemon.metrics.lookup_refused();
        daemon.audit.note_detached(audit::lookup_refused(&d));
        // No receiver is fine: nobody watches that session right now.
        let _ = daemon.events.send(SessionEvent::Denial(d));
    }
}

/// The addresses session `cgroup`'s resolver handed out that are still allowed, for
/// `carapace status`.
#[must_use]
pub fn learned(daemon: &Daemon, cgroup: u64) -> Vec<super::proto::LearnedAddress> {
    let now = crate::dns::boot_time_ns();
    daemon
        .resolvers
        .learned()
        .list(cgroup)
        .into_iter()
        .map(|e| super::proto::LearnedAddress {
            address: e.addr.to_string(),
            name: e.name,
            expires_in_secs: e.expires_at_boot_ns.saturating_sub(now) / 1_000_000_000,
        })
        .collect()
}

/// Starts session `id`'s resolver if the rules in force need one. A resolver that cannot
/// start is logged, not fatal: the kernel keeps refusing names it never learned.
pub async fn start_if_needed(daemon: &Arc<Daemon>, id: &str, cgroup: u64) -> Option<u16> {
    if !needs_resolver(&daemon.rules()) {
        return None;
    }
    let rules = Arc::new(SessionRules {
        daemon: Arc::downgrade(daemon),
        session_id: id.to_owned(),
    });
    let denials = Arc::new(Denials {
        daemon: Arc::downgrade(daemon),
    });
    match daemon.resolvers.start(id, cgroup, rules, denials).await {
        Ok(port) => Some(port),
        Err(e) => {
            tracing::error!(session = %id, "{e}");
            None
        }
    }
}

/// Brings resolvers in line with the live sessions and the rules in force: a resolver for
/// each session that needs one (after a reload brought name rules, or for sessions resumed
/// at start), none for sessions that ended.
pub async fn sync(daemon: &Arc<Daemon>) {
    let live = daemon.sessions.list();
    for id in daemon.resolvers.sessions() {
        if !live.iter().any(|s| s.id == id) {
            daemon.resolvers.stop(&id);
        }
    }
    for session in live {
        start_if_needed(daemon, &session.id, session.cgroup_id).await;
    }
}

/// Keeps resolvers in line (see [`sync`]) at start and after each reload.
#[must_use = "the task runs forever; keep or detach its handle"]
pub fn spawn_keeper(daemon: Arc<Daemon>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            sync(&daemon).await;
            daemon.rules_changed.notified().await;
        }
    })
}
