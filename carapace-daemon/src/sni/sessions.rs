//! Which sessions have a server-name proxy: those whose rules check server names
//! (`tls: sni`), started with their resolver and stopped with it. The kernel sends the
//! session's connects to ports 443 and 80 of its learned addresses to the proxy's port
//! ([`ProxyRegistry::set_proxy`]) and tells it, per accepted connection, where it first
//! meant to go ([`ProxyRegistry::destination`]). Without the kernel layer no proxy runs:
//! nothing would be redirected to it, and nothing could say where a connection was going.
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::proxy::{Limits, Protocol, Redirected, SniProxy};
// The defining modules, not `crate::dns` (see `proxy`).
use crate::dns::handler::{DenialSink, RulesInForce};
use crate::dns::learned::Learned;
use crate::kernel::map_error::MapsError;

/// Connections served at once per session; past this, new ones are closed (fail closed)
/// rather than queued, so a flood cannot hold the daemon's memory.
const MAX_CONNECTIONS: usize = 512;
/// Pause after an accept error (out of descriptors, typically).
const ERROR_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// The kernel's side of the proxies: where each session's listens, and where each
/// connection it accepts first meant to go.
pub trait ProxyRegistry: Send + Sync {
    /// Session `session_cgroup`'s proxy listens on `port` (TCP, loopback).
    fn set_proxy(&self, session_cgroup: u64, port: u16) -> Result<(), MapsError>;
    fn clear_proxy(&self, session_cgroup: u64);
    /// Where the connection from `peer` was going before the kernel redirected it, once:
    /// the record is taken.
    fn destination(&self, peer: SocketAddr) -> Option<SocketAddr>;
}

struct Running {
    cgroup: u64,
    port: u16,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// What one session's proxy needs from the daemon.
pub struct SessionParts {
    pub rules: Arc<dyn RulesInForce>,
    pub denials: Arc<dyn DenialSink>,
    pub learned: Arc<Learned>,
}

/// The daemon's server-name proxies, one per session whose rules check names.
#[derive(Default)]
pub struct SessionProxies {
    kernel: OnceLock<Arc<dyn ProxyRegistry>>,
    running: Mutex<HashMap<String, Running>>,
}

impl SessionProxies {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Plugs the kernel in (once; later calls are ignored).
    pub fn attach_kernel(&self, registry: Arc<dyn ProxyRegistry>) {
        let _ = self.kernel.set(registry);
    }

    /// The port of session `id`'s proxy, if it has one.
    #[must_use]
    pub fn port(&self, id: &str) -> Option<u16> {
        self.lock().get(id).map(|r| r.port)
    }

    /// Starts session `id`'s proxy unless it has one or the kernel is not attached; the
    /// kernel is told its port once it listens.
    pub async fn start(
        &self,
        id: &str,
        cgroup: u64,
        parts: SessionParts,
    ) -> io::Result<Option<u16>> {
        if let Some(port) = self.port(id) {
            return Ok(Some(port));
        }
        let Some(registry) = self.kernel.get().cloned() else {
            return Ok(None);
        };
        let v4 = TcpListener::bind((IpAddr::V4(Ipv4Addr::LOCALHOST), 0)).await?;
        let port = v4.local_addr()?.port();
        let mut listeners = vec![v4];
        // IPv6 loopback where the machine has it; a connect to `[::1]` fails otherwise,
        // which is a refusal (fail closed).
        if let Ok(v6) = TcpListener::bind((IpAddr::V6(Ipv6Addr::LOCALHOST), port)).await {
            listeners.push(v6);
        }
        let proxy = Arc::new(SniProxy {
            rules: parts.rules,
            denials: parts.denials,
            limits: Limits::default(),
            recent: crate::dns::handler::RecentDenials::default(),
        });
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let tasks = listeners
            .into_iter()
            .map(|listener| {
                tokio::spawn(serve(
                    listener,
                    Session {
                        id: id.to_owned(),
                        cgroup,
                        proxy: Arc::clone(&proxy),
                        registry: Arc::clone(&registry),
                        learned: Arc::clone(&parts.learned),
                        permits: Arc::clone(&permits),
                    },
                ))
            })
            .collect();
        let previous = self.lock().insert(
            id.to_owned(),
            Running {
                cgroup,
                port,
                tasks,
            },
        );
        drop(previous);
        registry.set_proxy(cgroup, port).map_err(io::Error::other)?;
        tracing::info!(session = %id, port, "server-name proxy listening");
        Ok(Some(port))
    }

    /// Stops session `id`'s proxy; the kernel stops redirecting its connects.
    pub fn stop(&self, id: &str) {
        let Some(running) = self.lock().remove(id) else {
            return;
        };
        if let Some(registry) = self.kernel.get() {
            registry.clear_proxy(running.cgroup);
        }
    }
}

struct Session {
    id: String,
    cgroup: u64,
    proxy: Arc<SniProxy>,
    registry: Arc<dyn ProxyRegistry>,
    learned: Arc<Learned>,
    permits: Arc<Semaphore>,
}

async fn serve(listener: TcpListener, session: Session) {
    let session = Arc::new(session);
    let mut open = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            Some(_) = open.join_next(), if !open.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(session = %session.id, "server-name proxy: accept: {e}");
                tokio::time::sleep(ERROR_PAUSE).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&session.permits).try_acquire_owned() else {
            continue;
        };
        let session = Arc::clone(&session);
        open.spawn(async move {
            one(stream, peer, &session).await;
            drop(permit);
        });
    }
}

/// One accepted connection: where it was going (the kernel's record), then the proxy.
async fn one(stream: TcpStream, peer: SocketAddr, session: &Session) {
    // Only the kernel's redirect leaves a record: a connection made to the port directly
    // (by the session or anyone else) has none and is closed.
    let Some(destination) = session.registry.destination(peer) else {
        tracing::debug!(session = %session.id, %peer, "server-name proxy: no redirected connect from this peer");
        return;
    };
    let to = Redirected {
        session_id: session.id.clone(),
        destination,
        learned_name: session.learned.lookup(session.cgroup, destination.ip()),
        protocol: Protocol::for_port(destination.port()),
    };
    let outcome = session.proxy.serve(stream, &to).await;
    tracing::debug!(session = %session.id, %destination, "server-name proxy: {outcome:?}");
}
