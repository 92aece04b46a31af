//! Which sessions have a resolver: started when a session is created (or a reload brings
//! rules that need one), stopped when it ends. The kernel learns where each listens through
//! a [`ResolverRegistry`] and what each handed out through a [`Learner`], once the daemon
//! attaches them ([`SessionResolvers::attach_kernel`]); without the kernel layer resolvers
//! still run (harmless: nothing sends them queries, or only tools pointed at them).
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use super::handler::{DenialSink, Handler, RulesInForce};
use super::learned::{boot_time_ns, Learned, Learner};
use super::server::{Resolver, ResolverError, ResolverHandle};
use super::upstream::Upstream;
use crate::config::dns::DnsSettings;
use crate::kernel::map_error::MapsError;

/// Tells the kernel where a session's DNS queries go. Implemented by the kernel side: its
/// `sock_addr` programs rewrite the destination of every DNS query (UDP and TCP port 53) of
/// the session's cgroup to `127.0.0.1:port` (`[::1]:port` for IPv6).
pub trait ResolverRegistry: Send + Sync {
    /// Session `session_cgroup`'s resolver listens on `port` (UDP and TCP, loopback).
    fn set_resolver(&self, session_cgroup: u64, port: u16) -> Result<(), MapsError>;
    /// The session ended or no longer has a resolver: forget its port and learned addresses.
    fn clear_resolver(&self, session_cgroup: u64);
}

struct Running {
    cgroup: u64,
    handle: ResolverHandle,
}

/// The daemon's resolvers, one per session that needs one.
pub struct SessionResolvers {
    settings: DnsSettings,
    learned: Arc<Learned>,
    /// Fixed nameservers (tests); `None`: `/etc/resolv.conf`, read at each start.
    upstream: Option<Upstream>,
    kernel: OnceLock<(Arc<dyn ResolverRegistry>, Arc<dyn Learner>)>,
    running: Mutex<HashMap<String, Running>>,
    /// Server-name proxies of sessions whose rules check names (`tls: sni`), started and
    /// stopped with their resolvers.
    proxies: crate::sni::SessionProxies,
}

impl Default for SessionResolvers {
    fn default() -> Self {
        Self::new(DnsSettings::default(), None)
    }
}

impl SessionResolvers {
    #[must_use]
    pub fn new(settings: DnsSettings, upstream: Option<Upstream>) -> Self {
        Self {
            settings,
            learned: Arc::new(Learned::default()),
            upstream,
            kernel: OnceLock::new(),
            running: Mutex::new(HashMap::new()),
            proxies: crate::sni::SessionProxies::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Plugs the kernel in (once; later calls are ignored). Resolvers started before are
    /// registered at once.
    pub fn attach_kernel(&self, registry: Arc<dyn ResolverRegistry>, learner: Arc<dyn Learner>) {
        if self.kernel.set((registry, learner)).is_err() {
            return;
        }
        if let Some((registry, _)) = self.kernel.get() {
            for (id, r) in self.lock().iter() {
                if let Err(e) = registry.set_resolver(r.cgroup, r.handle.port()) {
                    tracing::warn!(session = %id, "cannot point the session's DNS at its resolver: {e:#}");
                }
            }
        }
    }

    /// Plugs the kernel's side of the server-name proxies in (once), before sessions start.
    pub fn attach_proxies(&self, registry: Arc<dyn crate::sni::ProxyRegistry>) {
        self.proxies.attach_kernel(registry);
    }

    /// The port of session `id`'s server-name proxy, if it has one.
    #[must_use]
    pub fn proxy_port(&self, id: &str) -> Option<u16> {
        self.proxies.port(id)
    }

    /// Addresses handed out, per session cgroup.
    #[must_use]
    pub fn learned(&self) -> &Arc<Learned> {
        &self.learned
    }

    /// The port of session `id`'s resolver, if it has one.
    #[must_use]
    pub fn port(&self, id: &str) -> Option<u16> {
        self.lock().get(id).map(|r| r.handle.port())
    }

    /// Starts session `id`'s resolver, unless it has one; returns its port. The kernel is
    /// told after the sockets listen, so no redirected query finds the port closed.
    pub async fn start(
        &self,
        id: &str,
        cgroup: u64,
        rules: Arc<dyn RulesInForce>,
        denials: Arc<dyn DenialSink>,
    ) -> Result<u16, ResolverError> {
        self.start_proxy_if_needed(id, cgroup, &rules, &denials)
            .await;
        if let Some(port) = self.port(id) {
            return Ok(port);
        }
        let handler = Handler {
            session_id: id.to_owned(),
            session_cgroup: cgroup,
            rules,
            upstream: self.upstream.clone().unwrap_or_else(Upstream::system),
            refuse_with: self.settings.refuse_with,
            learned: Arc::clone(&self.learned),
            kernel: self.kernel.get().map(|(_, l)| Arc::clone(l)),
            denials,
            recent: super::handler::RecentDenials::default(),
            clock: boot_time_ns,
        };
        let handle = Resolver::start(Arc::new(handler)).await?;
        let port = handle.port();
        let previous = self
            .lock()
            .insert(id.to_owned(), Running { cgroup, handle });
        // Two starts raced: the later one serves, the earlier one's sockets close.
        drop(previous);
        if let Some((registry, _)) = self.kernel.get() {
            if let Err(e) = registry.set_resolver(cgroup, port) {
                tracing::warn!(session = %id, "cannot point the session's DNS at its resolver: {e:#}");
            }
        }
        Ok(port)
    }

    /// Starts session `id`'s server-name proxy if its rules check names and it has none
    /// (a reload may bring such a rule to a running session). Before the resolver is told
    /// to the kernel: an address learned for a session with a proxy is recorded for it.
    /// A proxy that cannot start is logged: the session's connects then go where they
    /// were meant, checked by address only.
    async fn start_proxy_if_needed(
        &self,
        id: &str,
        cgroup: u64,
        rules: &Arc<dyn RulesInForce>,
        denials: &Arc<dyn DenialSink>,
    ) {
        let needed = rules
            .current()
            .is_ok_and(|(set, _)| carapace_policy::engine::names::needs_sni_check(&set));
        if !needed || self.proxies.port(id).is_some() {
            return;
        }
        let parts = crate::sni::SessionParts {
            rules: Arc::clone(rules),
            denials: Arc::clone(denials),
            learned: Arc::clone(&self.learned),
        };
        if let Err(e) = self.proxies.start(id, cgroup, parts).await {
            tracing::error!(session = %id, "cannot start the session's server-name proxy: {e}");
        }
    }

    /// Stops session `id`'s resolver (and server-name proxy) and forgets what it learned.
    pub fn stop(&self, id: &str) {
        self.proxies.stop(id);
        let Some(running) = self.lock().remove(id) else {
            return;
        };
        if let Some((registry, _)) = self.kernel.get() {
            registry.clear_resolver(running.cgroup);
        }
        self.learned.forget(running.cgroup);
        tracing::info!(session = %id, "session resolver stopped");
    }

    /// Sessions that have a resolver.
    #[must_use]
    pub fn sessions(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }
}
