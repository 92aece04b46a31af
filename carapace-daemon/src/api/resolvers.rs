//! The daemon's side of the session resolvers (`crate::dns`): each query is judged by the
//! rules in force at that moment with the session's activation state, and each refused
//! lookup goes to the audit ledger and the session's watchers like a kernel denial.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use super::{audit, Daemon, SessionEvent};
use crate::api::proto::Denial;
use crate::dns::{DenialSink, RulesInForce, RulesUnavailable};
use carapace_policy::engine::names::needs_resolver;
use carapace_policy::engine::Activation;
use carapace_policy::rules::{Cond, Mode, RuleSet};

/// The rules of one session's queries. Weak: a resolver must not keep a stopped daemon.
struct SessionRules {
    daemon: Weak<Daemon>,
    session_id: String,
}

impl RulesInForce for SessionRules {
    fn current(&self) -> Result<(Arc<RuleSet>, Activation), RulesUnavailable> {
        let daemon = self.daemon.upgrade().ok_or(RulesUnavailable::Stopping)?;
        let activation = crate::session::state::activation(&daemon.sessions, &self.session_id)
            .map_err(|e| RulesUnavailable::SessionState(Box::new(e)))?;
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
            "refused {} of {}",
            d.operation,
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

/// The `block` network rules that speak of host names (in their match or an exception).
fn rules_naming_hosts(rules: &RuleSet) -> Vec<&str> {
    rules
        .rules()
        .iter()
        .filter(|r| r.mode == Mode::Block)
        .filter(|r| {
            let own = matches!(&r.cond, Some(Cond::Net(net)) if net.names().next().is_some());
            own || r.except_net.iter().any(|e| e.names().next().is_some())
        })
        .map(|r| r.id.as_str())
        .collect()
}

/// What the rules by name lose without the kernel layer, once per daemon: nothing
/// redirects a session's DNS to its resolver, and the Landlock fallback of `carapace run`
/// sees TCP ports, never names or addresses.
fn warn_names_unenforced(daemon: &Daemon) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let Some(reason) = &daemon.kernel_unavailable else {
        return;
    };
    let rules = daemon.rules();
    let named = rules_naming_hosts(&rules);
    if named.is_empty() || WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    tracing::warn!(
        "kernel layer unavailable ({reason}): rules naming hosts ({}) are enforced by name \
         in Layer 1 only; sessions' DNS is not screened, and the Landlock fallback restricts \
         TCP ports, never names or addresses",
        named.join(", ")
    );
}

/// Brings resolvers in line with the live sessions and the rules in force: a resolver for
/// each session that needs one (after a reload brought name rules, or for sessions resumed
/// at start), none for sessions that ended.
pub async fn sync(daemon: &Arc<Daemon>) {
    warn_names_unenforced(daemon);
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

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_policy::rules::{Homes, Options};

    #[test]
    fn the_rules_that_name_hosts_are_found_in_matches_and_exceptions() {
        let text = "version: 1
builtin: none
rules:
  - id: egress
    block: { host: \"*\", port: 443 }
    except: [\"*.github.com\"]
  - id: no-paste
    block: { host: pastebin.com }
  - id: by-address
    block: { cidr: 10.0.0.0/8 }
  - id: warned
    warn: { host: example.org }
";
        let opts = Options {
            homes: Homes::fixed(["/home/a"]),
            resolver: |_| None,
            host: crate::policy_host::shared(),
        };
        let set = RuleSet::parse_with("t.yaml", text, &opts).unwrap();
        assert_eq!(rules_naming_hosts(&set), ["egress", "no-paste"]);
    }
}
