//! `carapaced`, its composition root: read config.yaml and the rules, set up the cgroup root,
//! start the kernel layer (or say in one line why it cannot run), reload sessions, wire the
//! daemon's parts together and serve the API until SIGTERM / SIGINT. The client (`src/cli/`,
//! the `carapace` binary's own code) shares only `crate::paths` and `crate::config` with it.
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use crate::api::reload::{self, Loaded, RuleSource};
use crate::api::{self, Daemon};
use crate::audit::{self, AuditError, Ledger};
use crate::config::{self, Config};
use crate::gateway;
use crate::kernel::{Kernel, KernelSettings, KernelUnavailable};
use crate::llm::{self, Reviewer};
use crate::paths::{DEFAULT_DATA_DIR, DEFAULT_SOCKET};
use crate::session::cgroup::{CarapaceRoot, CgroupError, Hierarchy};
use crate::session::db::{Db, StoreError};
use crate::session::{SessionError, SessionManager};
use carapace_policy::rules::RuleSet;

/// Why carapaced stopped (at start, or when the API server failed). Each says what it was
/// doing; `main` logs it and exits with a failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    #[error("cannot create the data directory {}: {source}", dir.display())]
    DataDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the audit ledger: {0}")]
    OpenLedger(#[source] AuditError),
    #[error("cannot write the audit ledger: {0}")]
    WriteLedger(#[source] AuditError),
    #[error("cannot find the cgroup v2 hierarchy: {0}")]
    Hierarchy(#[source] CgroupError),
    #[error("cannot create the Carapace cgroup: {0}")]
    CgroupRoot(#[source] CgroupError),
    #[error("cannot open the session database: {0}")]
    SessionDb(#[source] StoreError),
    #[error("cannot load the session store: {0}")]
    SessionStore(#[source] SessionError),
    #[error("cannot set up the LLM client: {0}")]
    Llm(#[source] llm::LlmError),
    #[error(transparent)]
    Console(#[from] crate::console::StartError),
    #[error("cannot listen on {addr} for metrics: {source}")]
    Metrics {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A `--*-upstream` URL the gateway cannot use.
    #[error("--{flag}: {source}")]
    Upstream {
        flag: &'static str,
        #[source]
        source: gateway::UpstreamError,
    },
    #[error("cannot bind the gateway to {addr}: {source}")]
    GatewayBind {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the gateway's address: {0}")]
    GatewayAddress(#[source] std::io::Error),
    #[error(transparent)]
    Api(#[from] api::ApiError),
    #[error("the API server failed: {0}")]
    Serve(#[source] tonic::transport::Error),
}

/// bpffs directory where the kernel layer pins its programs and maps.
pub const PIN_DIR: &str = "/sys/fs/bpf/carapace";

const AFTER_HELP: &str = "\
Rules come from --rules FILE, else $CARAPACE_DATA_DIR/rules.yaml if it exists, else the
built-in packs. The model that reviews `llm_review` rules and plain-English triggers and
effects is set in the `llm:` section of $CARAPACE_DATA_DIR/config.yaml:
  llm: { provider: anthropic, model: claude-haiku-4-5, api_key_env: ANTHROPIC_API_KEY }
(provider openai covers any chat-completions server: Ollama, llama.cpp, vLLM; also
base_url, timeout_ms, max_concurrency). Without it, those rules get their `on_llm_error`. A rule file with errors is reported (file:line:column) and nothing starts.
The rule file is read again on SIGHUP, when it changes on disk (checked every second) and
on `carapace rules reload`; a file with errors is logged and the running rules stay.

Every decision, kernel denial, session change and rule reload is appended to the audit
ledger in $CARAPACE_DATA_DIR/audit/ (hash-chained, synced before the answer is given;
`carapace audit verify` checks it). A ledger that cannot be written refuses decisions.

The kernel layer (eBPF LSM) needs a kernel with `bpf` in its LSM list; without it carapaced
says so in one line and keeps serving Layers 0/1.

With --gateway, carapaced also serves the model-API gateway (Anthropic Messages, OpenAI
chat and Responses, Gemini generateContent): point an agent's ANTHROPIC_BASE_URL,
OPENAI_BASE_URL (with /v1) or GOOGLE_GEMINI_BASE_URL at it and every tool call the model
asks for is checked before the agent sees it, and conversations holding blocked calls are
refused. `carapace run` does that for its agent (Claude Code, Codex, Gemini CLI), keeps a
base URL you set yourself and says so, and says when an agent cannot use the gateway
(Copilot CLI). The agent's own API key passes through untouched and is never logged. Keep
it on loopback.

Examples:
  sudo carapaced
  sudo carapaced --gateway 127.0.0.1:8788
  sudo carapaced --rules ./rules.yaml --data-dir /tmp/carapace --socket /tmp/carapace.sock
  sudo carapaced --metrics 127.0.0.1:9464   # Prometheus metrics at http://127.0.0.1:9464/metrics
  sudo carapaced --console 127.0.0.1:8790   # then `carapace console` opens the web console
  carapace run -- claude        # in another terminal: run an agent under guard";

/// The Carapace daemon: guards AI agents with cgroup-scoped eBPF LSM rules.
#[derive(Debug, Parser)]
#[command(name = "carapaced", version, after_help = AFTER_HELP)]
pub struct Args {
    /// Directory for rules.yaml and the session store
    #[arg(long, value_name = "DIR", env = "CARAPACE_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    /// Unix socket to serve the API on
    #[arg(long, value_name = "PATH", env = "CARAPACE_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Rule file to load instead of `$CARAPACE_DATA_DIR/rules.yaml`
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Longest a call waits for the user's approval (seconds); unanswered requests then
    /// expire, which counts as a denial [default: `approvals.timeout_seconds` of config.yaml,
    /// else 300]
    #[arg(long, value_name = "SECS")]
    pub approval_timeout: Option<u64>,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (off by default; use a loopback
    /// address such as 127.0.0.1:9464 — rule ids and counts say what agents tried)
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve the console — sessions, approvals, the audit timeline and rules in a local web
    /// page — on this loopback address (off by default), e.g. 127.0.0.1:8790; open it with
    /// `carapace console` [default: `console.listen` of config.yaml]
    #[arg(long, value_name = "ADDR", value_parser = crate::console::parse_addr)]
    pub console: Option<std::net::SocketAddr>,
    /// Log lines for people (`human`) or one JSON object per line for log collectors
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "human")]
    pub log_format: LogFormat,
    /// Serve the model-API gateway on this address (off by default), e.g. 127.0.0.1:8788
    #[arg(long, value_name = "ADDR")]
    pub gateway: Option<std::net::SocketAddr>,
    /// Where the gateway sends Anthropic Messages API requests (/v1/messages…)
    #[arg(long, value_name = "URL", default_value = gateway::ANTHROPIC_UPSTREAM)]
    pub anthropic_upstream: String,
    /// Where the gateway sends `OpenAI` API requests (/v1/chat/completions, /v1/responses, …)
    #[arg(long, value_name = "URL", default_value = gateway::OPENAI_UPSTREAM)]
    pub openai_upstream: String,
    /// Where the gateway sends Gemini API requests (/v1beta/models/…:generateContent, …)
    #[arg(long, value_name = "URL", default_value = gateway::GEMINI_UPSTREAM)]
    pub gemini_upstream: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().init(),
        // Colour codes only for a terminal, not for log files and journals.
        LogFormat::Human => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
}

/// Entry point of the `carapaced` binary.
#[must_use]
pub fn main() -> ExitCode {
    let args = Args::parse();
    init_logging(args.log_format);
    // A broken config.yaml is reported (file:line:column) before anything is touched.
    let config = match config::load(&args.data_dir) {
        Ok(s) => s,
        Err(d) => {
            eprint!("{d}");
            eprintln!("carapaced: the config file has errors; nothing was started");
            return ExitCode::from(2);
        }
    };
    // Then the rules: a broken rule file stops everything too. The console's port, when
    // it is on, is a locked rule of its own.
    let mut source = RuleSource::new(&args.data_dir, args.rules.clone());
    // Carapace's own files where this daemon keeps them, whatever the packs name.
    let own = crate::own_files::OwnFiles::of_this_daemon(
        &args.data_dir,
        args.rules.as_deref(),
        &args.socket,
    );
    let ((origin, text), skipped) = own.locked_rules();
    for path in skipped {
        tracing::warn!(
            path = %path.display(),
            "a path of Carapace's own cannot be written as a rule pattern (glob characters or \
             quotes); sessions are not kept from it by the daemon's own-files rules"
        );
    }
    tracing::info!(
        own_rules = text.matches("\n  - id: ").count(),
        "Carapace's own files, where this daemon keeps them, are kept from sessions by locked rules"
    );
    source = source.with_locked(origin, text);
    if let Some(addr) = args.console.or(config.console) {
        let (origin, text) = crate::console::locked_rule(addr);
        source = source.with_locked(origin, text);
    }
    let rules = match load_rules(&source) {
        Ok(r) => r,
        Err(d) => {
            eprint!("{d}");
            eprintln!("carapaced: the rule file has errors; nothing was started");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("carapaced: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args, source, rules, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn load_rules(source: &RuleSource) -> Result<Loaded, carapace_policy::rules::Diagnostics> {
    let loaded = source.load()?;
    let count = loaded.rules.rules().len();
    if let Some(p) = &loaded.file {
        tracing::info!(file = %p.display(), rules = count, "rules loaded");
    } else {
        tracing::info!(rules = count, "built-in rules loaded");
    }
    for w in loaded.rules.warnings().warnings() {
        tracing::warn!("{w}");
    }
    Ok(loaded)
}

/// Starts (or adopts) the kernel layer for the sessions below `root`. When the kernel
/// refuses, logs exactly one warn line and returns why, in one line.
pub fn start_kernel(root: &CarapaceRoot, rules: &RuleSet) -> Result<Kernel, KernelUnavailable> {
    let settings = KernelSettings {
        pin_dir: PathBuf::from(PIN_DIR),
        cgroup_root_id: root.id,
        cgroup_root_level: root.level,
        cgroup_root: root.dir.clone(),
    };
    match Kernel::start(&settings, rules.kernel_image()) {
        Ok(kernel) => {
            tracing::info!("kernel layer enforcing: {}", kernel.status());
            Ok(kernel)
        }
        Err(e) => {
            tracing::warn!("kernel layer unavailable: {e}; Layers 0/1 only");
            if let Some(fix) = e.fix() {
                tracing::info!("to enable the kernel layer: {fix}");
            }
            Err(e)
        }
    }
}

fn create_data_dir(dir: &Path) -> Result<(), DaemonError> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|source| DaemonError::DataDir {
            dir: dir.to_path_buf(),
            source,
        })
}

/// Opens the audit ledger; a ledger that cannot be opened or whose end is damaged stops the
/// start (see `audit` for why).
async fn open_ledger(
    data_dir: &Path,
    acknowledge: audit::ledger::Acknowledge,
) -> Result<Arc<Ledger>, DaemonError> {
    let options = audit::Options {
        acknowledge,
        ..audit::Options::default()
    };
    let (ledger, recovery) = Ledger::open(data_dir, options).map_err(DaemonError::OpenLedger)?;
    let ledger = Arc::new(ledger);
    let seq = ledger
        .append(audit::ledger::opened_event(&recovery))
        .await
        .map_err(DaemonError::WriteLedger)?;
    // The head before this start, in the log too: a copy outside the ledger's directory
    // shows a later rewrite of the chain.
    tracing::info!(
        dir = %ledger.dir().display(),
        records = seq,
        previous_head_seq = recovery.head.seq,
        previous_head_hash = %recovery.head.hash,
        "audit ledger open"
    );
    Ok(ledger)
}

async fn run(
    args: Args,
    source: RuleSource,
    loaded: Loaded,
    config: Config,
) -> Result<(), DaemonError> {
    create_data_dir(&args.data_dir)?;
    let ledger = open_ledger(&args.data_dir, config.audit_acknowledge).await?;
    let hierarchy = Hierarchy::discover().map_err(DaemonError::Hierarchy)?;
    let root = CarapaceRoot::create(&hierarchy).map_err(DaemonError::CgroupRoot)?;
    tracing::info!(
        cgroup = %root.dir.display(),
        id = root.id,
        level = root.level,
        "session cgroups live below this cgroup"
    );
    let (mut kernel, unavailable) = match start_kernel(&root, &loaded.rules) {
        Ok(k) => (Some(k), None),
        Err(reason) => (None, Some(reason.to_string())),
    };
    let events = kernel.as_mut().and_then(Kernel::take_events);
    let touched = kernel.as_mut().and_then(Kernel::take_touched);
    let dns_maps = kernel.as_ref().and_then(Kernel::dns);
    let db = Db::open(&args.data_dir).map_err(DaemonError::SessionDb)?;
    let sessions = SessionManager::open(hierarchy, root, Arc::new(db), kernel)
        .map_err(DaemonError::SessionStore)?;
    // Rule indices may differ from those the pinned maps hold for adopted sessions.
    api::profiles::adopt(&sessions, &source, &loaded.rules);
    crate::session::state::sync_all(&sessions, &loaded.rules);
    let timeout = args
        .approval_timeout
        .map(|s| std::time::Duration::from_secs(s.max(1)))
        .or(config.approval_timeout)
        .unwrap_or(api::DEFAULT_APPROVAL_TIMEOUT);
    let reviewer = Arc::new(llm_reviewer(&args.data_dir, config.llm, &loaded.rules)?);
    let daemon = Arc::new(
        Daemon::new(loaded, source, Arc::new(sessions), unavailable)
            .with_approval_timeout(timeout)
            .with_reviewer(reviewer)
            .with_resolvers(crate::dns::SessionResolvers::new(config.dns, None)),
    );
    daemon.audit.attach(Arc::clone(&ledger));
    match crate::record::Recorder::open(&args.data_dir) {
        Ok(recorder) => {
            let _ = daemon.recorder.set(Arc::new(recorder));
            // Detached: it prunes as long as the daemon runs.
            drop(api::record::spawn_pruner(
                Arc::clone(&daemon),
                config.record.keep,
            ));
        }
        // Record sessions are then refused; everything else works.
        Err(e) => tracing::warn!("record mode unavailable: {e}"),
    }
    // Sessions' DNS reaches their resolvers only where the kernel redirects it.
    if let Some(maps) = dns_maps {
        let kernel_dns = Arc::new(crate::kernel::dns_maps::KernelDns(maps));
        daemon.resolvers.attach_proxies(kernel_dns.clone());
        daemon
            .resolvers
            .attach_kernel(kernel_dns.clone(), kernel_dns);
    }
    let _console = match args.console.or(config.console) {
        Some(addr) => Some(crate::console::start(&daemon, addr).await?),
        None => None,
    };
    let _metrics = match args.metrics {
        Some(addr) => Some(serve_metrics(Arc::clone(&daemon), addr).await?),
        None => None,
    };
    // Detached: the pump lives as long as the kernel's ring buffer.
    let _pump = events.map(|stream| api::spawn_denial_pump(Arc::clone(&daemon), stream));
    let _touched =
        touched.map(|stream| api::record::spawn_touched_pump(Arc::clone(&daemon), stream));
    let _reaper = api::spawn_reaper(Arc::clone(&daemon));
    // Resolvers for resumed sessions now, and for every session after a reload that needs them.
    let _resolvers = api::resolvers::spawn_keeper(Arc::clone(&daemon));
    let _watcher = reload::spawn_watcher(Arc::clone(&daemon), reload::WATCH_INTERVAL);
    // `hold: true` rules: opens of their files wait for a human (fanotify).
    let holder = crate::hold::Holder::start(&daemon);
    let gateway = start_gateway(&args, &daemon).await?;
    let listener = api::bind(&args.socket)?;
    tracing::info!(socket = %args.socket.display(), "serving");
    let result = api::serve(
        Arc::clone(&daemon),
        listener,
        shutdown_signal(Arc::clone(&daemon)),
    )
    .await;
    // Every open still held is denied, never left to the group's closing (which allows).
    if let Some(holder) = &holder {
        holder.stop(&daemon);
    }
    if let Err(e) = std::fs::remove_file(&args.socket) {
        tracing::warn!("cannot remove {}: {e}", args.socket.display());
    }
    ledger.close();
    if let Some(gateway) = gateway {
        gateway.abort();
    }
    result.map_err(DaemonError::Serve)?;
    tracing::info!("stopped; live sessions are resumed at next start");
    Ok(())
}

/// The LLM reviewer for the `llm:` section of `$CARAPACE_DATA_DIR/config.yaml`; says in the
/// log which rules fall back to `on_llm_error` when there is none.
fn llm_reviewer(
    data_dir: &Path,
    model: Option<llm::LlmConfig>,
    rules: &RuleSet,
) -> Result<Reviewer, DaemonError> {
    let file = data_dir.join(config::FILE_NAME);
    let reviewer = Reviewer::new(model, &file.display().to_string()).map_err(DaemonError::Llm)?;
    let needing: Vec<&str> = rules
        .rules()
        .iter()
        .filter(|r| r.needs_llm())
        .map(|r| r.id.as_str())
        .collect();
    if reviewer.available() {
        tracing::info!("LLM review: {}", reviewer.describe());
    } else if !needing.is_empty() {
        tracing::warn!(
            "{} rule(s) need LLM review ({}) but {}; their `on_llm_error` mode applies",
            needing.len(),
            needing.join(", "),
            reviewer.describe()
        );
    }
    Ok(reviewer)
}

/// Binds `addr` and serves `/metrics` there.
async fn serve_metrics(
    daemon: Arc<Daemon>,
    addr: std::net::SocketAddr,
) -> Result<tokio::task::JoinHandle<()>, DaemonError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| DaemonError::Metrics { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    if !bound.ip().is_loopback() {
        tracing::warn!("the metrics endpoint {bound} is reachable from other machines");
    }
    tracing::info!("metrics endpoint listening on http://{bound}/metrics");
    let render = Arc::new(move || daemon.render_metrics());
    Ok(crate::metrics::http::spawn(listener, render))
}

/// Binds and starts the model-API gateway when `--gateway` asks for it.
async fn start_gateway(
    args: &Args,
    daemon: &Arc<Daemon>,
) -> Result<Option<tokio::task::JoinHandle<()>>, DaemonError> {
    let Some(addr) = args.gateway else {
        return Ok(None);
    };
    let upstream = |url: &str, flag: &'static str| {
        gateway::Upstream::parse(url).map_err(|source| DaemonError::Upstream { flag, source })
    };
    let config = gateway::Config {
        anthropic: upstream(&args.anthropic_upstream, "anthropic-upstream")?,
        openai: upstream(&args.openai_upstream, "openai-upstream")?,
        gemini: upstream(&args.gemini_upstream, "gemini-upstream")?,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| DaemonError::GatewayBind { addr, source })?;
    let bound = listener.local_addr().map_err(DaemonError::GatewayAddress)?;
    if !bound.ip().is_loopback() {
        tracing::warn!(
            "the gateway listens on {bound}, beyond loopback: other machines can use it"
        );
    }
    daemon.set_gateway(format!("http://{bound}"));
    tracing::info!(address = %bound, "gateway listening on http://{bound}");
    let gate =
        gateway::refusal::Gate::new(Arc::clone(daemon) as Arc<dyn gateway::refusal::RuleSource>);
    Ok(Some(tokio::spawn(gateway::serve(
        listener,
        config,
        gate,
        std::future::pending(),
    ))))
}

/// Resolves on SIGTERM or SIGINT; reloads the rules on SIGHUP.
async fn shutdown_signal(daemon: Arc<Daemon>) {
    use tokio::signal::unix::{signal, SignalKind};
    let streams = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    );
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = streams else {
        tracing::error!("cannot install signal handlers; stop carapaced with SIGKILL");
        return std::future::pending().await;
    };
    loop {
        tokio::select! {
            _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); return; }
            _ = int.recv() => { tracing::info!("SIGINT: shutting down"); return; }
            _ = hup.recv() => {
                // Its own task, so that a slow reload (host name lookups) never delays a
                // SIGTERM.
                let daemon = Arc::clone(&daemon);
                tokio::spawn(async move { daemon.reload("SIGHUP").await });
            }
        }
    }
}
