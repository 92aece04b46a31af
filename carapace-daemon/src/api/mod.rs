//! The gRPC API (tonic) on a Unix socket, and who may call what.
//!
//! Peer identity comes from the socket — `SO_PEERCRED` as tonic's [`UdsConnectInfo`], and the
//! peer's cgroup from `/proc/PID/cgroup` — never from request fields. A peer inside
//! `<cgroup2>/carapace/…` is an agent.
pub mod allow;
pub mod audit;
pub mod deadline;
pub mod denial;
pub mod direct;
mod doors;
pub mod evaluate;
pub mod kernel_approval;
pub mod kernel_rules;
pub mod profiles;
pub mod proto;
pub mod record;
pub mod reload;
pub mod resolvers;
pub mod sessions;
pub mod shadow;

use std::fs;
use std::future::Future;
use std::io;
use std::os::unix::fs::{
    DirBuilderExt as _, FileTypeExt as _, MetadataExt as _, PermissionsExt as _,
};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tokio::net::UnixListener;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::transport::server::UdsConnectInfo;
use tonic::{Request, Response, Status};

use self::proto::carapace_server::{Carapace, CarapaceServer};
use self::proto::{
    allow_from_denial_request, AllowFromDenialReply, AllowFromDenialRequest, AnswerApprovalRequest,
    Approval as ApprovalMsg, ConsoleUrlReply, ConsoleUrlRequest, CreateSessionReply,
    CreateSessionRequest, Denial, EndSessionReply, EndSessionRequest, EvaluateReply,
    EvaluateRequest, GetSessionRequest, ListApprovalsReply, ListApprovalsRequest,
    ListSessionsReply, ListSessionsRequest, PlanReply, PlanRequest, ReloadRulesReply,
    ReloadRulesRequest, ResetSessionRequest, ScanHistoryReply, ScanHistoryRequest, SessionDetail,
    SessionInfo, SetSessionRuleRequest, StatusReply, StatusRequest, WatchApprovalsRequest,
    WatchSessionRequest,
};
use self::reload::{Fingerprint, Loaded, RuleSource};
use crate::io_error::IoError;
use crate::kernel::EventStream;
use crate::llm::Reviewer;
use crate::session::approvals::Approvals;
use crate::session::cgroup;
use crate::session::resources::LimitHit;
use crate::session::state as session_state;
use crate::session::{NewSession, SessionError, SessionManager, SessionRecord};
use carapace_policy::rules::RuleSet;

/// Denials buffered per watcher before the slowest one starts losing some.
const EVENT_BUFFER: usize = 1024;

/// Something that happened to a session, fanned out to its watchers.
#[derive(Clone, Debug)]
pub enum SessionEvent {
    Denial(Denial),
    Ended(String),
    /// The daemon is stopping: watchers close their streams so that the server's graceful
    /// shutdown does not wait for agents that run for hours.
    Shutdown,
}

/// What the request handlers share.
pub struct Daemon {
    /// The rules in force; a reload swaps the whole set at once (see [`Daemon::rules`]).
    rules: RwLock<Arc<RuleSet>>,
    /// Where the rules are read from on reload.
    source: RuleSource,
    /// The file the rules in force came from (`None`: the built-in packs only).
    rules_file: Mutex<Option<PathBuf>>,
    /// Serialises reloads and remembers the fingerprint of the last file read.
    reload_state: tokio::sync::Mutex<Option<Fingerprint>>,
    /// Successful reloads since start.
    reloads: AtomicU64,
    pub sessions: Arc<SessionManager>,
    /// Why the kernel layer is not running, if it is not.
    pub kernel_unavailable: Option<String>,
    pub events: broadcast::Sender<SessionEvent>,
    /// Pending approval requests and their waiters.
    pub approvals: Arc<Approvals>,
    /// Longest a caller waits for the user's answer; unanswered requests then expire.
    pub approval_timeout: std::time::Duration,
    /// Decides `llm_review` rules and plain-English triggers and effects (see
    /// [`Daemon::with_reviewer`]).
    reviewer: Arc<Reviewer>,
    /// The audit ledger (attached at start; without it decisions are refused).
    pub audit: audit::AuditLog,
    pub metrics: crate::metrics::Metrics,
    /// The model-API gateway's base URL (`http://127.0.0.1:PORT`), once it listens.
    gateway: std::sync::OnceLock<String>,
    /// The record store (`carapace run --record`), once the data directory is known.
    pub recorder: std::sync::OnceLock<Arc<crate::record::Recorder>>,
    /// The console's logins, once it listens (`carapaced --console`).
    console: std::sync::OnceLock<Arc<crate::console::auth::Access>>,
    /// Session time limits (`carapace run --timeout`).
    pub deadlines: deadline::Deadlines,
    /// The sessions' DNS resolvers (network rules by name, see `crate::dns`).
    pub resolvers: crate::dns::SessionResolvers,
    /// Signalled when a reload swapped the rules in (resolvers may be needed now).
    pub rules_changed: tokio::sync::Notify,
    /// Signalled with `rules_changed`, for the hold listener (`crate::hold`) to mark the
    /// files of the new rules (a `Notify` wakes one waiter).
    pub holds_changed: tokio::sync::Notify,
}

/// Default of `carapaced --approval-timeout`.
pub const DEFAULT_APPROVAL_TIMEOUT: std::time::Duration = std::time::Duration::from_mins(5);

impl Daemon {
    #[must_use]
    pub fn new(
        loaded: Loaded,
        source: RuleSource,
        sessions: Arc<SessionManager>,
        kernel_unavailable: Option<String>,
    ) -> Self {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let approvals = Arc::new(Approvals::new(Arc::clone(sessions.db())));
        Self {
            rules: RwLock::new(Arc::new(loaded.rules)),
            source,
            rules_file: Mutex::new(loaded.file),
            reload_state: tokio::sync::Mutex::new(loaded.fingerprint),
            reloads: AtomicU64::new(0),
            sessions,
            kernel_unavailable,
            events,
            approvals,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            reviewer: Arc::new(Reviewer::unavailable("no LLM reviewer was set up")),
            audit: audit::AuditLog::default(),
            metrics: crate::metrics::Metrics::default(),
            gateway: std::sync::OnceLock::new(),
            recorder: std::sync::OnceLock::new(),
            console: std::sync::OnceLock::new(),
            deadlines: deadline::Deadlines::default(),
            resolvers: crate::dns::SessionResolvers::default(),
            rules_changed: tokio::sync::Notify::new(),
            holds_changed: tokio::sync::Notify::new(),
        }
    }

    /// Uses `resolvers` for the sessions' DNS (settings, upstream).
    #[must_use]
    pub fn with_resolvers(mut self, resolvers: crate::dns::SessionResolvers) -> Self {
        self.resolvers = resolvers;
        self
    }

    /// Uses `reviewer` for rules the model decides (by default: none, so those rules get
    /// their `on_llm_error` mode).
    #[must_use]
    pub fn with_reviewer(mut self, reviewer: Arc<Reviewer>) -> Self {
        self.reviewer = reviewer;
        self
    }

    #[must_use]
    pub fn reviewer(&self) -> &Arc<Reviewer> {
        &self.reviewer
    }

    /// The reviewer's state and counters, as `Status` reports them.
    #[must_use]
    pub fn llm_status(&self) -> proto::LlmStatus {
        let s = self.reviewer.stats();
        proto::LlmStatus {
            available: self.reviewer.available(),
            description: self.reviewer.describe(),
            calls: s.calls,
            failures: s.failures,
            retries: s.retries,
            latency_us_total: s.latency_us_total,
            cache_hits: s.cache_hits,
        }
    }

    /// Sets how long callers wait for approvals (see [`Daemon::approval_timeout`]).
    #[must_use]
    pub fn with_approval_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.approval_timeout = timeout;
        self
    }

    /// The rules in force. Callers keep the `Arc` for the whole of one decision, so a reload
    /// in the middle never mixes two rule sets in one answer.
    #[must_use]
    pub fn rules(&self) -> Arc<RuleSet> {
        Arc::clone(&self.rules.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The file the rules in force came from (`None`: the built-in packs only).
    #[must_use]
    pub fn rules_file(&self) -> Option<PathBuf> {
        self.rules_file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_rules_file(&self, file: Option<PathBuf>) {
        *self
            .rules_file
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = file;
    }

    /// The model-API gateway's base URL, empty when it is off.
    #[must_use]
    pub fn gateway(&self) -> &str {
        self.gateway.get().map_or("", String::as_str)
    }

    /// Records where the gateway listens (once, at start).
    pub fn set_gateway(&self, url: String) {
        let _ = self.gateway.set(url);
    }

    /// Records the console's logins (once, at start).
    pub fn set_console(&self, access: Arc<crate::console::auth::Access>) {
        let _ = self.console.set(access);
    }

    /// Successful reloads since start.
    #[must_use]
    pub fn reloads(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// The metrics page: the counters plus the ledger's and the sessions' gauges.
    #[must_use]
    #[expect(
        clippy::cast_precision_loss,
        reason = "gauge values are counts far below 2^52"
    )]
    pub fn render_metrics(&self) -> String {
        let (records, failures) = self.ledger_counts();
        let llm = self.reviewer.stats();
        self.metrics.render(&[
            (
                "carapace_ledger_records",
                "Records in the audit ledger.",
                records as f64,
            ),
            (
                "carapace_ledger_write_failures",
                "Audit ledger writes that failed since start (each refused a decision).",
                failures as f64,
            ),
            (
                "carapace_sessions",
                "Live agent sessions.",
                self.sessions.list().len() as f64,
            ),
            (
                "carapace_rules",
                "Rules in force.",
                self.rules().rules().len() as f64,
            ),
            (
                "carapace_approvals_pending",
                "Approval requests waiting for the user.",
                self.approvals.pending().map_or(0, |p| p.len()) as f64,
            ),
            (
                "carapace_llm_calls_total",
                "Requests sent to the LLM reviewer's model (retries included).",
                llm.calls as f64,
            ),
            (
                "carapace_llm_failures_total",
                "LLM reviews without a usable answer (the rule's on_llm_error applied).",
                llm.failures as f64,
            ),
            (
                "carapace_llm_cache_hits_total",
                "LLM verdicts answered from the per-session cache.",
                llm.cache_hits as f64,
            ),
            (
                "carapace_llm_seconds_total",
                "Time spent waiting for the model.",
                llm.latency_us_total as f64 / 1e6,
            ),
        ])
    }

    fn ledger_counts(&self) -> (u64, u64) {
        self.audit.ledger().map_or((0, 0), |l| {
            let stats = l.stats();
            (
                stats.last_seq.load(Ordering::Relaxed),
                stats.failures.load(Ordering::Relaxed),
            )
        })
    }

    fn kernel_state(&self) -> (bool, String) {
        match (&self.kernel_unavailable, self.sessions.kernel_status()) {
            (None, Some(status)) => (true, status),
            (Some(reason), _) => (false, reason.clone()),
            (None, None) => (false, "kernel layer not started".to_owned()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("another carapaced already serves {0}")]
    InUse(PathBuf),
    #[error(
        "the socket directory {0} is not owned by this user or others can write it; use a directory only root can write"
    )]
    UnsafeDir(PathBuf),
}

/// Binds the API socket: creates its directory (mode 0755) before binding, removes a stale
/// socket file, binds, and makes the socket connectable by every local user (0666) —
/// authorization is by peer identity, per request.
pub fn bind(path: &Path) -> Result<UnixListener, ApiError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(IoError::at("create directory", dir))?;
        // Someone else who can write the directory could swap the socket for their own.
        let meta = fs::metadata(dir).map_err(IoError::at("stat", dir))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let owner_ok = meta.uid() == unsafe { libc::geteuid() };
        let mode = meta.permissions().mode();
        if !owner_ok || (mode & 0o022 != 0 && mode & 0o1000 == 0) {
            return Err(ApiError::UnsafeDir(dir.into()));
        }
    }
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(ApiError::InUse(path.into()));
            }
            fs::remove_file(path).map_err(IoError::at("remove stale socket", path))?;
        }
        Ok(_) => {
            return Err(IoError::new(
                "replace (not a socket)",
                path,
                io::ErrorKind::AlreadyExists.into(),
            )
            .into())
        }
        Err(_) => {}
    }
    let listener = UnixListener::bind(path).map_err(IoError::at("bind", path))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o666))
        .map_err(IoError::at("chmod", path))?;
    Ok(listener)
}

/// Serves the API until `shutdown` resolves.
pub async fn serve(
    daemon: Arc<Daemon>,
    listener: UnixListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let events = daemon.events.clone();
    let shutdown = async move {
        shutdown.await;
        let _ = events.send(SessionEvent::Shutdown);
    };
    // Connections reach tonic through the doors, which answer direct-wire clients themselves.
    let service = Service { daemon };
    let (to_grpc, grpc) = mpsc::channel(64);
    let doors = tokio::spawn(doors::accept(listener, service.clone(), to_grpc));
    let served = tonic::transport::Server::builder()
        .add_service(CarapaceServer::new(service))
        .serve_with_incoming_shutdown(ReceiverStream::new(grpc), shutdown)
        .await;
    doors.abort();
    served
}

/// Drains the kernel's denials: logs each and sends it to the session's watchers.
#[must_use = "the task runs until the denial stream ends; keep or detach its handle"]
pub fn spawn_denial_pump(
    daemon: Arc<Daemon>,
    mut stream: EventStream,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(mut event) = stream.next().await {
            // A shadow session's report: the flag comes off the operation bits the rest reads.
            let would_deny = event.would_deny();
            event.op = event.operation();
            let session_id = daemon
                .sessions
                .id_of_number(event.session)
                .unwrap_or_else(|| format!("#{}", event.session));
            let rules = daemon.kernel_rule_set();
            let found = rules.by_kernel_index(event.rule);
            let rule = found.map(|r| (r.id.as_str(), r.message.as_str()));
            let mut d = denial::denial_from_event(&event, &session_id, rule);
            d.would_deny = would_deny;
            // "connect of 140.82.112.5:443 (api.github.com)": the name the session resolved.
            let learned = denial::inet_addr(&event)
                .and_then(|a| daemon.resolvers.learned().lookup(event.session_cgroup, a));
            if let Some(name) = learned {
                d.subject = format!("{} ({name})", d.subject);
            }
            // An approve-mode rule refused: a human is asked (told the name too, when the
            // session resolved one), and the agent told to retry.
            // Not for a shadow session: the operation ran, there is nothing to approve.
            if let Some(r) = found.filter(|r| r.mode == carapace_policy::rules::Mode::Approve) {
                if !would_deny {
                    kernel_approval::file(&daemon, &event, r, &mut d).await;
                }
            }
            tracing::warn!(
                session = %d.session_id,
                pid = d.pid,
                comm = %d.comm,
                rule = %d.rule_id,
                "{} {}",
                if would_deny { "would block (shadow mode)" } else { "blocked" },
                denial::phrase(&d.operation, &crate::audit::redact::redact(&d.subject))
            );
            if !would_deny {
                daemon.metrics.kernel_denial(&d.rule_id);
            }
            daemon.audit.note_detached(audit::denied(&d));
            // No receiver is fine: nobody watches that session right now.
            let _ = daemon.events.send(SessionEvent::Denial(d));
        }
        tracing::warn!("the kernel's denial stream ended");
    })
}

/// How often sessions without processes are looked for.
const REAP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Periodically ends sessions whose processes are all gone, so that a `carapace run` that was
/// killed (and could not call `EndSession`) does not leave its session behind.
#[must_use = "the task runs forever; keep or detach its handle"]
pub fn spawn_reaper(daemon: Arc<Daemon>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(REAP_INTERVAL);
        loop {
            tick.tick().await;
            let sessions = Arc::clone(&daemon.sessions);
            let Ok(ended) = tokio::task::spawn_blocking(move || {
                let ended = sessions.reap_empty();
                sessions.detach_when_idle(crate::session::DETACH_AFTER);
                ended
            })
            .await
            else {
                continue;
            };
            for (id, hits) in ended {
                tracing::info!(session = %id, "ended a session whose processes are all gone");
                release(&daemon, &id);
                if let Some(limit) = daemon.deadlines.take_expired(&id) {
                    let message = deadline::expired_message(limit, false);
                    daemon
                        .audit
                        .note(audit::limit_reached(&id, "time", &message))
                        .await;
                }
                record_limits(&daemon, &id, &hits).await;
                let event = audit::session_changed(
                    crate::audit::Kind::SessionEnded,
                    &id,
                    None,
                    &[],
                    "its processes are all gone",
                );
                daemon.audit.note(event).await;
                let _ = daemon.events.send(SessionEvent::Ended(id));
            }
            // Requests whose caller stopped waiting long ago: expired means denied.
            let (approvals, max_age) = (Arc::clone(&daemon.approvals), daemon.approval_timeout);
            let expired =
                tokio::task::spawn_blocking(move || approvals.expire_older_than(max_age * 2)).await;
            if let Ok(Err(e)) = expired {
                tracing::warn!("cannot expire old approval requests: {e}");
            }
        }
    })
}

/// What an ended session held besides its cgroup: its resolver, and its record's open file
/// (closed and synced). Every way a session ends calls it.
pub fn release(daemon: &Arc<Daemon>, id: &str) {
    daemon.resolvers.stop(id);
    record::close(daemon, id);
}

/// Writes the limits a session ran into to the ledger (and the daemon's log).
pub async fn record_limits(
    daemon: &Daemon,
    id: &str,
    hits: &[crate::session::resources::LimitHit],
) {
    for hit in hits {
        let message = hit.message();
        tracing::warn!(session = %id, "{message}");
        daemon
            .audit
            .note(audit::limit_reached(id, hit.resource(), &message))
            .await;
    }
}

/// The caller, as the kernel identifies it.
#[derive(Clone, Debug)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
    /// Hierarchy-relative cgroup v2 path, if it could be read.
    pub cgroup: Option<String>,
    /// Inside a Carapace session (or of unknown cgroup: fail closed).
    pub agent: bool,
}

#[derive(Clone)]
struct Service {
    daemon: Arc<Daemon>,
}

impl Service {
    fn peer<T>(&self, request: &Request<T>) -> Result<Peer, Status> {
        let cred = request
            .extensions()
            .get::<UdsConnectInfo>()
            .and_then(|info| info.peer_cred)
            .ok_or_else(|| Status::unauthenticated("peer credentials are unavailable"))?;
        self.peer_of(cred)
    }

    /// The caller behind a socket's credentials: its cgroup says whether it is an agent.
    fn peer_of(&self, cred: tokio::net::unix::UCred) -> Result<Peer, Status> {
        let pid = cred
            .pid()
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| Status::unauthenticated("peer pid is unavailable"))?;
        let cgroup = cgroup::process_cgroup(pid).ok();
        let agent = cgroup
            .as_deref()
            .is_none_or(|c| self.daemon.sessions.root().contains(c));
        Ok(Peer {
            uid: cred.uid(),
            gid: cred.gid(),
            pid,
            cgroup,
            agent,
        })
    }

    fn owned_session(&self, peer: &Peer, id: &str) -> Result<SessionRecord, Status> {
        let record = self
            .daemon
            .sessions
            .get(id)
            .ok_or_else(|| Status::not_found(format!("no session {id}")))?;
        let root_outside = peer.uid == 0 && !peer.agent;
        if peer.uid != record.owner_uid && !root_outside {
            return Err(Status::permission_denied(format!(
                "session {id} belongs to another user"
            )));
        }
        Ok(record)
    }
}

fn session_status(e: &SessionError) -> Status {
    match e {
        SessionError::NotFound(_) => Status::not_found(e.to_string()),
        SessionError::Limits(crate::session::resources::LimitError::Unavailable { .. }) => {
            Status::failed_precondition(e.to_string())
        }
        _ => Status::internal(e.to_string()),
    }
}

fn blocking_failed(e: &tokio::task::JoinError) -> Status {
    Status::internal(format!("session task failed: {e}"))
}

/// Sends the denials of session `id` from `events` to `tx` until the session ends, the
/// watcher goes away or the daemon stops.
async fn forward_session_events(
    mut events: broadcast::Receiver<SessionEvent>,
    id: String,
    tx: mpsc::Sender<Result<Denial, Status>>,
) {
    loop {
        let event = tokio::select! {
            () = tx.closed() => return,
            event = events.recv() => event,
        };
        match event {
            Ok(SessionEvent::Denial(d)) if d.session_id == id => {
                if tx.send(Ok(d)).await.is_err() {
                    return;
                }
            }
            Ok(SessionEvent::Ended(ended)) if ended == id => return,
            Ok(SessionEvent::Shutdown) | Err(broadcast::error::RecvError::Closed) => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(session = %id, "a watcher fell behind and missed {n} denials");
            }
        }
    }
}

type DenialStream = Pin<Box<dyn Stream<Item = Result<Denial, Status>> + Send + 'static>>;
type ApprovalStream = Pin<Box<dyn Stream<Item = Result<ApprovalMsg, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl Carapace for Service {
    async fn status(&self, _: Request<StatusRequest>) -> Result<Response<StatusReply>, Status> {
        let (kernel_enforcing, kernel_status) = self.daemon.kernel_state();
        let rule_set = self.daemon.rules();
        let rules = rule_set.rules();
        let sessions = self
            .daemon
            .sessions
            .list()
            .into_iter()
            .map(|s| SessionInfo {
                shadow: s.shadow(),
                profile: s.profile.clone(),
                record: s.records(),
                resolver_port: self.daemon.resolvers.port(&s.id).map_or(0, u32::from),
                learned: resolvers::learned(&self.daemon, s.cgroup_id),
                id: s.id,
                owner_uid: s.owner_uid,
                cgroup: s.cgroup.display().to_string(),
                cgroup_id: s.cgroup_id,
                command: s.command,
            })
            .collect();
        let kernel_rules = rules.iter().filter(|r| r.kernel_index.is_some()).count() as u32;
        // Layers 0 and 1 apply every rule; the kernel those it could compile.
        let rules_per_layer = [
            ("tool-call", rules.len() as u32),
            ("history", rules.len() as u32),
            ("kernel", if kernel_enforcing { kernel_rules } else { 0 }),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let (ledger_records, ledger_failures) = self.daemon.ledger_counts();
        let profiles = self.daemon.sessions.profiles();
        Ok(Response::new(StatusReply {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            kernel_enforcing,
            kernel_status,
            rules: rules.len() as u32,
            kernel_rules,
            landlock_abi: crate::host::landlock_abi().unwrap_or(0),
            rules_per_layer,
            denials_per_layer: self
                .daemon
                .metrics
                .denials_per_layer()
                .into_iter()
                .collect(),
            ledger_records,
            ledger_dir: self
                .daemon
                .audit
                .ledger()
                .map(|l| l.dir().display().to_string())
                .unwrap_or_default(),
            ledger_failures,
            sessions,
            rules_file: self
                .daemon
                .rules_file()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            rules_reloads: self.daemon.reloads(),
            llm: Some(self.daemon.llm_status()),
            approvals_pending: self
                .daemon
                .approvals
                .pending()
                .map_or(0, |p| p.len() as u32),
            gateway: self.daemon.gateway().to_owned(),
            profiles_loaded: profiles.names().map(str::to_owned).collect(),
            profiles_not_loaded: profiles
                .left_out()
                .iter()
                .map(|l| proto::ProfileNotLoaded {
                    name: l.name.clone(),
                    why: l.why.clone(),
                })
                .collect(),
        }))
    }

    async fn reload_rules(
        &self,
        request: Request<ReloadRulesRequest>,
    ) -> Result<Response<ReloadRulesReply>, Status> {
        let peer = self.peer(&request)?;
        if peer.agent {
            tracing::warn!(
                pid = peer.pid,
                uid = peer.uid,
                "an agent asked to reload the rules; refused"
            );
            return Err(Status::permission_denied(
                "processes inside a Carapace session cannot reload the rules",
            ));
        }
        // The file is root's; only root (or the daemon's own user) may make it take effect.
        // SAFETY: geteuid has no preconditions and cannot fail.
        let own = unsafe { libc::geteuid() };
        if peer.uid != 0 && peer.uid != own {
            return Err(Status::permission_denied(
                "only root can reload the rules (try `sudo carapace rules reload`)",
            ));
        }
        let outcome = self
            .daemon
            .reload(&format!("ReloadRules from pid {}", peer.pid))
            .await;
        Ok(Response::new(ReloadRulesReply {
            ok: outcome.ok,
            file: outcome.file,
            rules: outcome.rules,
            kernel_rules: outcome.kernel_rules,
            diagnostics: outcome.diagnostics,
        }))
    }

    async fn allow_from_denial(
        &self,
        request: Request<AllowFromDenialRequest>,
    ) -> Result<Response<AllowFromDenialReply>, Status> {
        let peer = self.peer(&request)?;
        if peer.agent {
            tracing::warn!(
                pid = peer.pid,
                "an agent asked to change the rules; refused"
            );
            return Err(Status::permission_denied(
                "processes inside a Carapace session cannot change the rules",
            ));
        }
        // The rule file and the ledger are root's, as for ReloadRules.
        // SAFETY: geteuid has no preconditions and cannot fail.
        let own = unsafe { libc::geteuid() };
        if peer.uid != 0 && peer.uid != own {
            return Err(Status::permission_denied(
                "only root can change the rules (try `sudo carapace rules allow`)",
            ));
        }
        let req = request.into_inner();
        let from = match req.from {
            Some(allow_from_denial_request::From::Record(seq)) => allow::Origin::Record(seq),
            Some(allow_from_denial_request::From::Approval(id)) => allow::Origin::Approval(id),
            None => {
                return Err(Status::invalid_argument(
                    "name a ledger record or an approval",
                ))
            }
        };
        let rule = (!req.rule.is_empty()).then_some(req.rule);
        let status = |e: allow::AllowError| match e {
            allow::AllowError::NotFound(_) => Status::not_found(e.to_string()),
            allow::AllowError::Write { .. }
            | allow::AllowError::Read { .. }
            | allow::AllowError::Task(_) => Status::internal(e.to_string()),
            _ => Status::failed_precondition(e.to_string()),
        };
        if req.write {
            let who = format!("uid {} (pid {})", peer.uid, peer.pid);
            let (offer, outcome) = allow::apply(&self.daemon, from, rule, req.confirm, &who)
                .await
                .map_err(status)?;
            let mut json = offer.to_json();
            json["reload"] = serde_json::json!({
                "ok": outcome.ok, "rules": outcome.rules, "kernel_rules": outcome.kernel_rules,
            });
            return Ok(Response::new(AllowFromDenialReply {
                offer_json: json.to_string(),
                text: offer.to_text(),
                written: true,
            }));
        }
        let d = Arc::clone(&self.daemon);
        let offer = tokio::task::spawn_blocking(move || allow::offer(&d, &from, rule.as_deref()))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(status)?;
        Ok(Response::new(AllowFromDenialReply {
            offer_json: offer.to_json().to_string(),
            text: offer.to_text(),
            written: false,
        }))
    }

    async fn create_session(
        &self,
        request: Request<CreateSessionRequest>,
    ) -> Result<Response<CreateSessionReply>, Status> {
        let peer = self.peer(&request)?;
        if peer.agent {
            tracing::warn!(
                pid = peer.pid,
                uid = peer.uid,
                "an agent asked for a new session; refused"
            );
            return Err(Status::permission_denied(
                "processes inside a Carapace session cannot create sessions",
            ));
        }
        let origin = peer.cgroup.clone().unwrap_or_default();
        let req = request.into_inner();
        // Who may choose a profile is who may ask for a session: never a process inside one
        // (refused above), so an agent cannot move itself to laxer rules.
        let (rule_bits, rules_lock) = if req.profile.is_empty() {
            ((Vec::new(), Vec::new()), None)
        } else {
            let (bits, lock) = self.daemon.prepare_profile(&req.profile).await?;
            ((bits.activated, bits.disabled), Some(lock))
        };
        let command = req.command;
        let new = NewSession {
            owner_uid: peer.uid,
            pid: peer.pid,
            origin,
            command: command.clone(),
            resources: crate::session::resources::Resources::from_request(
                req.memory_max,
                req.pids_max,
            ),
            // Who may ask for a shadow session is who may ask for a session: never a
            // process inside one (refused above), so an agent cannot shadow its own rules.
            // Likewise for record mode: an agent cannot start a record session to run
            // without its rules or to write the profile it will run under later.
            flags: if req.shadow {
                carapace_common::SESSION_SHADOW
            } else {
                0
            } | if req.record {
                carapace_common::SESSION_RECORD
            } else {
                0
            },
            profile: req.profile.clone(),
            rule_bits,
        };
        let sessions = Arc::clone(&self.daemon.sessions);
        let record = tokio::task::spawn_blocking(move || sessions.create(new))
            .await
            .map_err(|e| blocking_failed(&e))?
            .map_err(|e| {
                tracing::error!("cannot create a session: {e}");
                session_status(&e)
            })?;
        // Registered: the profile is in use now, so later rule changes keep it.
        drop(rules_lock);
        let event = audit::session_changed(
            crate::audit::Kind::SessionCreated,
            &record.id,
            Some(&peer),
            &command,
            if record.shadow() {
                "CreateSession (shadow mode: refusals recorded as would-deny, not enforced)"
            } else {
                "CreateSession"
            },
        );
        if let Err(status) = self.daemon.audit.record(event).await {
            // A session the ledger does not know of must not run.
            let (sessions, id) = (Arc::clone(&self.daemon.sessions), record.id.clone());
            let _ = tokio::task::spawn_blocking(move || sessions.end(&id, true)).await;
            return Err(status);
        }
        if record.records() {
            if let Err(status) = self::record::start(&self.daemon, &record) {
                let (sessions, id) = (Arc::clone(&self.daemon.sessions), record.id.clone());
                let _ = tokio::task::spawn_blocking(move || sessions.end(&id, true)).await;
                return Err(status);
            }
        }
        if req.timeout_secs > 0 {
            let limit = std::time::Duration::from_secs(req.timeout_secs);
            deadline::start(&self.daemon, record.id.clone(), limit);
        }
        // Before the reply: the session's first lookup must find its resolver listening.
        resolvers::start_if_needed(&self.daemon, &record.id, record.cgroup_id).await;
        let (kernel_enforcing, kernel_status) = self.daemon.kernel_state();
        // The fallback layer (Landlock) enforces the session's own rules.
        let kernel_rules =
            kernel_rules::kernel_rules(&self.daemon.rules_of_session(Some(&record.id)));
        Ok(Response::new(CreateSessionReply {
            session_id: record.id,
            cgroup: record.cgroup.display().to_string(),
            cgroup_id: record.cgroup_id,
            kernel_enforcing,
            kernel_status,
            kernel_rules,
            gateway: self.daemon.gateway().to_owned(),
        }))
    }

    type WatchSessionStream = DenialStream;

    async fn watch_session(
        &self,
        request: Request<WatchSessionRequest>,
    ) -> Result<Response<Self::WatchSessionStream>, Status> {
        let peer = self.peer(&request)?;
        let id = request.into_inner().session_id;
        self.owned_session(&peer, &id)?;
        let events = self.daemon.events.subscribe();
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(forward_session_events(events, id, tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn end_session(
        &self,
        request: Request<EndSessionRequest>,
    ) -> Result<Response<EndSessionReply>, Status> {
        let peer = self.peer(&request)?;
        let id = request.into_inner().session_id;
        let record = self.owned_session(&peer, &id)?;
        // An agent may end only its own session, and only as the session's leader (the
        // `carapace run` that created it): anything it spawned is a different pid.
        if peer.agent && peer.pid != record.leader_pid {
            return Err(Status::permission_denied(
                "only the process that created a session may end it from inside",
            ));
        }
        let sessions = Arc::clone(&self.daemon.sessions);
        let id2 = id.clone();
        let hits = tokio::task::spawn_blocking(move || sessions.end(&id2, true))
            .await
            .map_err(|e| blocking_failed(&e))?
            .map_err(|e| {
                tracing::error!(session = %id, "cannot end the session: {e}");
                session_status(&e)
            })?;
        let limits: Vec<String> = hits.iter().map(LimitHit::message).collect();
        if let Some(limit) = self.daemon.deadlines.take_expired(&id) {
            let message = deadline::expired_message(limit, false);
            self.daemon
                .audit
                .note(audit::limit_reached(&id, "time", &message))
                .await;
        }
        release(&self.daemon, &id);
        record_limits(&self.daemon, &id, &hits).await;
        let event = audit::session_changed(
            crate::audit::Kind::SessionEnded,
            &id,
            Some(&peer),
            &[],
            "EndSession",
        );
        self.daemon.audit.note(event).await;
        let _ = self.daemon.events.send(SessionEvent::Ended(id));
        Ok(Response::new(EndSessionReply { limits }))
    }

    async fn evaluate(
        &self,
        request: Request<EvaluateRequest>,
    ) -> Result<Response<EvaluateReply>, Status> {
        let peer = self.peer(&request)?;
        self.evaluate_reply(peer, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn list_sessions(
        &self,
        request: Request<ListSessionsRequest>,
    ) -> Result<Response<ListSessionsReply>, Status> {
        let peer = self.peer(&request)?;
        let daemon = Arc::clone(&self.daemon);
        let sessions = tokio::task::spawn_blocking(move || sessions::list(&daemon, &peer))
            .await
            .map_err(|e| blocking_failed(&e))??;
        Ok(Response::new(ListSessionsReply { sessions }))
    }

    async fn get_session(
        &self,
        request: Request<GetSessionRequest>,
    ) -> Result<Response<SessionDetail>, Status> {
        let peer = self.peer(&request)?;
        let req = request.into_inner();
        let daemon = Arc::clone(&self.daemon);
        tokio::task::spawn_blocking(move || {
            let s = sessions::lookup(
                &daemon,
                &peer,
                &req.session_id,
                &req.agent,
                &req.external_id,
            )?;
            sessions::detail(&daemon, &s.id, req.history.min(10_000))
        })
        .await
        .map_err(|e| blocking_failed(&e))?
        .map(Response::new)
    }

    async fn set_session_rule(
        &self,
        request: Request<SetSessionRuleRequest>,
    ) -> Result<Response<SessionDetail>, Status> {
        let peer = self.peer(&request)?;
        let req = request.into_inner();
        let daemon = Arc::clone(&self.daemon);
        let rules = self.daemon.rules_of_session(Some(&req.session_id));
        let who = peer.clone();
        let change = format!(
            "{} {}",
            if req.disabled { "disable" } else { "enable" },
            req.rule_id
        );
        let detail = tokio::task::spawn_blocking(move || {
            let s = sessions::lookup(
                &daemon,
                &peer,
                &req.session_id,
                &req.agent,
                &req.external_id,
            )?;
            let what = if req.disabled {
                "disable rules"
            } else {
                "enable rules"
            };
            sessions::authorize_human(&peer, s.owner_uid, what)?;
            session_state::set_disabled(
                &daemon.sessions,
                &rules,
                &s,
                &req.rule_id,
                req.disabled,
                peer.uid,
            )
            .map_err(|e| match e {
                session_state::RuleChangeError::Session(_) => Status::internal(e.to_string()),
                _ => Status::failed_precondition(e.to_string()),
            })?;
            sessions::detail(&daemon, &s.id, 0)
        })
        .await
        .map_err(|e| blocking_failed(&e))??;
        let event = audit::session_changed(
            crate::audit::Kind::SessionRulesChanged,
            &detail.id,
            Some(&who),
            &[],
            &change,
        );
        self.daemon.audit.note(event).await;
        Ok(Response::new(detail))
    }

    async fn reset_session(
        &self,
        request: Request<ResetSessionRequest>,
    ) -> Result<Response<SessionDetail>, Status> {
        let peer = self.peer(&request)?;
        let req = request.into_inner();
        let daemon = Arc::clone(&self.daemon);
        let rules = self.daemon.rules_of_session(Some(&req.session_id));
        let who = peer.clone();
        let detail = tokio::task::spawn_blocking(move || {
            let s = sessions::lookup(
                &daemon,
                &peer,
                &req.session_id,
                &req.agent,
                &req.external_id,
            )?;
            sessions::authorize_human(&peer, s.owner_uid, "reset sessions")?;
            session_state::reset(&daemon.sessions, &rules, &s, peer.uid)
                .map_err(|e| Status::internal(e.to_string()))?;
            // A reset session starts over with the model too.
            daemon.reviewer.forget_session(&s.id);
            sessions::detail(&daemon, &s.id, 0)
        })
        .await
        .map_err(|e| blocking_failed(&e))??;
        let event = audit::session_changed(
            crate::audit::Kind::SessionRulesChanged,
            &detail.id,
            Some(&who),
            &[],
            "reset",
        );
        self.daemon.audit.note(event).await;
        Ok(Response::new(detail))
    }

    async fn list_approvals(
        &self,
        request: Request<ListApprovalsRequest>,
    ) -> Result<Response<ListApprovalsReply>, Status> {
        let peer = self.peer(&request)?;
        let pending = self
            .daemon
            .approvals
            .pending()
            .map_err(|e| Status::internal(e.to_string()))?;
        let approvals = pending
            .iter()
            .filter(|a| peer.uid == 0 || a.request.requester_uid == peer.uid)
            .map(sessions::approval_msg)
            .collect();
        Ok(Response::new(ListApprovalsReply { approvals }))
    }

    type WatchApprovalsStream = ApprovalStream;

    async fn watch_approvals(
        &self,
        request: Request<WatchApprovalsRequest>,
    ) -> Result<Response<Self::WatchApprovalsStream>, Status> {
        let peer = self.peer(&request)?;
        let mut events = self.daemon.approvals.subscribe();
        let mut shutdown = self.daemon.events.subscribe();
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    () = tx.closed() => return,
                    e = shutdown.recv() => match e {
                        Ok(SessionEvent::Shutdown) | Err(broadcast::error::RecvError::Closed) => return,
                        _ => continue,
                    },
                    e = events.recv() => e,
                };
                match event {
                    Ok(a) if peer.uid == 0 || a.request.requester_uid == peer.uid => {
                        if tx.send(Ok(sessions::approval_msg(&a))).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn answer_approval(
        &self,
        request: Request<AnswerApprovalRequest>,
    ) -> Result<Response<ApprovalMsg>, Status> {
        let peer = self.peer(&request)?;
        let req = request.into_inner();
        let (daemon, who) = (Arc::clone(&self.daemon), peer.clone());
        let answered = tokio::task::spawn_blocking(move || {
            let scope = if req.once {
                crate::session::approvals::Scope::Once
            } else {
                crate::session::approvals::Scope::Session
            };
            sessions::answer(
                &daemon,
                &who,
                &req.approval_id,
                req.approve,
                &req.steps,
                scope,
            )
        })
        .await
        .map_err(|e| blocking_failed(&e))??;
        // Answered already: a ledger failure is logged and counted, not undone.
        self.daemon
            .audit
            .note(audit::approval_answered(&peer, &answered))
            .await;
        Ok(Response::new(sessions::approval_msg(&answered)))
    }

    async fn request_plan_approval(
        &self,
        request: Request<PlanRequest>,
    ) -> Result<Response<PlanReply>, Status> {
        let peer = self.peer(&request)?;
        let req = request.into_inner();
        let wait = std::time::Duration::from_secs(u64::from(req.wait_seconds))
            .min(self.daemon.approval_timeout);
        let daemon = Arc::clone(&self.daemon);
        let rules = self.daemon.rules_of_peer(&peer);
        let mut planned =
            tokio::task::spawn_blocking(move || sessions::plan(&daemon, &rules, &peer, &req))
                .await
                .map_err(|e| blocking_failed(&e))??;
        if let Some(pending) = planned.approval.as_ref().filter(|_| !wait.is_zero()) {
            let answer = self
                .daemon
                .approvals
                .wait(&pending.row.id, wait)
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
            planned.approval = Some(answer);
        }
        Ok(Response::new(sessions::plan_reply(&planned)))
    }

    async fn console_url(
        &self,
        request: Request<ConsoleUrlRequest>,
    ) -> Result<Response<ConsoleUrlReply>, Status> {
        let peer = self.peer(&request)?;
        if peer.agent {
            tracing::warn!(
                pid = peer.pid,
                uid = peer.uid,
                "a process inside a session asked for a console login; refused"
            );
            return Err(Status::permission_denied(
                "processes inside a Carapace session cannot open the console; the user does \
                 that from outside the session (another terminal)",
            ));
        }
        let access = self.daemon.console.get().ok_or_else(|| {
            Status::failed_precondition(
                "the console is off: start carapaced with `--console 127.0.0.1:PORT` (or set \
                 `console: { listen: 127.0.0.1:PORT }` in config.yaml)",
            )
        })?;
        let url = access
            .login_url(peer.uid)
            .map_err(|r| Status::internal(r.message()))?;
        tracing::info!(
            uid = peer.uid,
            pid = peer.pid,
            "console login URL handed out"
        );
        Ok(Response::new(ConsoleUrlReply { url }))
    }

    async fn record_show(
        &self,
        request: Request<proto::RecordShowRequest>,
    ) -> Result<Response<proto::RecordShowReply>, Status> {
        let peer = self.peer(&request)?;
        let req = request.into_inner();
        let daemon = Arc::clone(&self.daemon);
        tokio::task::spawn_blocking(move || record::show(&daemon, &peer, &req))
            .await
            .map_err(|e| blocking_failed(&e))?
            .map(Response::new)
    }

    async fn record_propose(
        &self,
        request: Request<proto::RecordProposeRequest>,
    ) -> Result<Response<proto::RecordProposeReply>, Status> {
        let peer = self.peer(&request)?;
        let req = request.into_inner();
        let daemon = Arc::clone(&self.daemon);
        // Compiling the proposal and replaying the packs' cases takes a while.
        tokio::task::spawn_blocking(move || record::propose(&daemon, &peer, &req))
            .await
            .map_err(|e| blocking_failed(&e))?
            .map(Response::new)
    }

    async fn scan_history(
        &self,
        request: Request<ScanHistoryRequest>,
    ) -> Result<Response<ScanHistoryReply>, Status> {
        let peer = self.peer(&request)?;
        evaluate::handle_scan_history(&self.daemon, peer, request.into_inner())
            .await
            .map(Response::new)
    }
}

impl Service {
    /// `Evaluate`, whichever door the request came in by (gRPC or the direct wire).
    async fn evaluate_reply(
        &self,
        peer: Peer,
        req: EvaluateRequest,
    ) -> Result<EvaluateReply, Status> {
        let started = std::time::Instant::now();
        let args = evaluate::Args::of(&req.call_json);
        let agent_session = req.session_id.clone();
        let audit_peer = peer.clone();
        let task = carapace_policy::engine::guardrail::answers_json(
            &self.daemon.rules_of_peer(&peer),
            &req.call_json,
        );
        let outcome = self.evaluate_in_session(peer, req).await;
        evaluate::record_evaluation(
            &self.daemon,
            &audit_peer,
            &agent_session,
            args,
            started.elapsed(),
            outcome.as_ref().map(|ev| &ev.checked.decision),
            outcome.as_ref().is_ok_and(|ev| ev.would_deny.is_some()),
        )
        .await?;
        outcome.map(|ev| {
            let mut reply = evaluate::evaluated_reply(&ev);
            if task {
                reply.task_answer = Some(evaluate::task_answer(&ev.checked.decision));
            }
            reply
        })
    }

    /// Layer 1 in the caller's session: check, LLM review, recording and triggers, and the
    /// wait for the user's answer when the call needs approval and the caller waits.
    async fn evaluate_in_session(
        &self,
        peer: Peer,
        req: EvaluateRequest,
    ) -> Result<evaluate::Evaluated, Status> {
        let rules = self.daemon.rules_of_peer(&peer);
        let wait = std::time::Duration::from_secs(u64::from(req.wait_seconds))
            .min(self.daemon.approval_timeout);
        // One rule set for the whole decision: check, LLM review, recording. Without a model
        // to ask, check and record run in one blocking task (one thread hop per call).
        let (daemon, rules2, peer2, req2) = (
            Arc::clone(&self.daemon),
            Arc::clone(&rules),
            peer.clone(),
            req.clone(),
        );
        let checked = tokio::task::spawn_blocking(move || {
            let (ev, for_review) = evaluate::check(&daemon, &rules2, &peer2, &req2)?;
            match for_review {
                Some(r) => Ok(Err((ev, r))),
                None => evaluate::settle(&daemon, &rules2, &peer2, &req2, ev, &[]).map(Ok),
            }
        })
        .await
        .map_err(|e| blocking_failed(&e))??;
        let mut ev = match checked {
            Ok(settled) => settled,
            Err((mut ev, for_review)) => {
                let fired =
                    evaluate::review(&self.daemon.reviewer, &rules, &mut ev, &for_review).await;
                let (daemon, rules2) = (Arc::clone(&self.daemon), Arc::clone(&rules));
                tokio::task::spawn_blocking(move || {
                    evaluate::settle(&daemon, &rules2, &peer, &req, ev, &fired)
                })
                .await
                .map_err(|e| blocking_failed(&e))??
            }
        };
        if let Some(pending) = ev.approval.as_ref().filter(|_| !wait.is_zero()) {
            let answer = self
                .daemon
                .approvals
                .wait(&pending.row.id, wait)
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
            let daemon = Arc::clone(&self.daemon);
            ev = tokio::task::spawn_blocking(move || {
                evaluate::answered(&daemon, &rules, &mut ev, answer).map(|()| ev)
            })
            .await
            .map_err(|e| blocking_failed(&e))??;
        }
        Ok(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(session: &str, subject: &str) -> Denial {
        Denial {
            session_id: session.into(),
            subject: subject.into(),
            operation: "read".into(),
            ..Denial::default()
        }
    }

    #[tokio::test]
    async fn watchers_get_their_sessions_denials_until_it_ends() {
        let (events, rx_events) = broadcast::channel(16);
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(forward_session_events(rx_events, "s-1".into(), tx));
        for event in [
            SessionEvent::Denial(denial("s-2", "/other")),
            SessionEvent::Denial(denial("s-1", "/a")),
            SessionEvent::Ended("s-2".into()),
            SessionEvent::Denial(denial("s-1", "/b")),
            SessionEvent::Ended("s-1".into()),
            SessionEvent::Denial(denial("s-1", "/after-end")),
        ] {
            events.send(event).unwrap();
        }
        let mut got = Vec::new();
        while let Some(d) = rx.recv().await {
            got.push(d.unwrap().subject);
        }
        assert_eq!(got, ["/a", "/b"]);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn watchers_stop_when_the_daemon_stops() {
        let (events, rx_events) = broadcast::channel(16);
        let (tx, mut rx) = mpsc::channel(16);
        let task = tokio::spawn(forward_session_events(rx_events, "s-1".into(), tx));
        events.send(SessionEvent::Shutdown).unwrap();
        assert!(rx.recv().await.is_none());
        task.await.unwrap();
    }
}
