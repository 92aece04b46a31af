//! `carapaced`: load the rules, set up the cgroup root, start the kernel layer (or say in one
//! line why it cannot run), reload sessions and serve the API until SIGTERM / SIGINT.
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;

use crate::api::reload::{self, Loaded, RuleSource};
use crate::api::{self, Daemon};
use crate::gateway;
use crate::kernel::{Kernel, KernelSettings};
use crate::rules::RuleSet;
use crate::session::cgroup::{CarapaceRoot, Hierarchy};
use crate::session::SessionManager;

/// Default data directory (rules.yaml, sessions.json).
pub const DEFAULT_DATA_DIR: &str = "/var/lib/carapace";
/// Default API socket.
pub const DEFAULT_SOCKET: &str = "/run/carapace/carapace.sock";
/// bpffs directory where the kernel layer pins its programs and maps.
pub const PIN_DIR: &str = "/sys/fs/bpf/carapace";

const AFTER_HELP: &str = "\
Rules come from --rules FILE, else $CARAPACE_DATA_DIR/rules.yaml if it exists, else the
built-in packs. A rule file with errors is reported (file:line:column) and nothing starts.
The rule file is read again on SIGHUP, when it changes on disk (checked every second) and
on `carapace rules reload`; a file with errors is logged and the running rules stay.

The kernel layer (eBPF LSM) needs a kernel with `bpf` in its LSM list; without it carapaced
says so in one line and keeps serving Layers 0/1.

With --gateway, carapaced also serves the model-API gateway: point an agent's
ANTHROPIC_BASE_URL (or OPENAI_BASE_URL, with /v1) at it and every tool call the model asks
for is checked before the agent sees it, and conversations holding blocked calls are
refused. `carapace run` does that for its agent. The agent's own API key passes through
untouched and is never logged. Keep it on loopback.

Examples:
  sudo carapaced
  sudo carapaced --gateway 127.0.0.1:8788
  sudo carapaced --rules ./rules.yaml --data-dir /tmp/carapace --socket /tmp/carapace.sock
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
    /// Serve the model-API gateway on this address (off by default), e.g. 127.0.0.1:8788
    #[arg(long, value_name = "ADDR")]
    pub gateway: Option<std::net::SocketAddr>,
    /// Where the gateway sends Anthropic Messages API requests (/v1/messages…)
    #[arg(long, value_name = "URL", default_value = gateway::ANTHROPIC_UPSTREAM)]
    pub anthropic_upstream: String,
    /// Where the gateway sends `OpenAI` API requests (/v1/chat/completions, /v1/responses, …)
    #[arg(long, value_name = "URL", default_value = gateway::OPENAI_UPSTREAM)]
    pub openai_upstream: String,
}

/// Entry point of the `carapaced` binary.
#[must_use]
pub fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal, not for log files and journals.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    // Rules first: a broken rule file stops everything before anything is touched.
    let source = RuleSource::new(&args.data_dir, args.rules.clone());
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
    match runtime.block_on(run(args, source, rules)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_rules(source: &RuleSource) -> Result<Loaded, crate::rules::Diagnostics> {
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
pub fn start_kernel(root: &CarapaceRoot, rules: &RuleSet) -> Result<Kernel, String> {
    let settings = KernelSettings {
        pin_dir: PathBuf::from(PIN_DIR),
        cgroup_root_id: root.id,
        cgroup_root_level: root.level,
    };
    match Kernel::start(&settings, rules.kernel_image()) {
        Ok(kernel) => {
            tracing::info!("kernel layer enforcing: {}", kernel.status());
            Ok(kernel)
        }
        Err(e) => {
            tracing::warn!("kernel layer unavailable: {}; Layers 0/1 only", e.reason);
            Err(e.reason)
        }
    }
}

fn create_data_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .with_context(|| format!("cannot create the data directory {}", dir.display()))
}

async fn run(args: Args, source: RuleSource, loaded: Loaded) -> anyhow::Result<()> {
    create_data_dir(&args.data_dir)?;
    let hierarchy = Hierarchy::discover().context("cannot find the cgroup v2 hierarchy")?;
    let root = CarapaceRoot::create(&hierarchy).context("cannot create the Carapace cgroup")?;
    tracing::info!(
        cgroup = %root.dir.display(),
        id = root.id,
        level = root.level,
        "session cgroups live below this cgroup"
    );
    let (mut kernel, unavailable) = match start_kernel(&root, &loaded.rules) {
        Ok(k) => (Some(k), None),
        Err(reason) => (None, Some(reason)),
    };
    let events = kernel.as_mut().and_then(Kernel::take_events);
    let sessions = SessionManager::open(hierarchy, root, &args.data_dir, kernel)
        .context("cannot load the session store")?;
    let daemon = Arc::new(Daemon::new(loaded, source, Arc::new(sessions), unavailable));
    // Detached: the pump lives as long as the kernel's ring buffer.
    let _pump = events.map(|stream| api::spawn_denial_pump(Arc::clone(&daemon), stream));
    let _reaper = api::spawn_reaper(Arc::clone(&daemon));
    let _watcher = reload::spawn_watcher(Arc::clone(&daemon), reload::WATCH_INTERVAL);
    let gateway = start_gateway(&args, &daemon).await?;
    let listener = api::bind(&args.socket)?;
    tracing::info!(socket = %args.socket.display(), "serving");
    let result = api::serve(
        Arc::clone(&daemon),
        listener,
        shutdown_signal(Arc::clone(&daemon)),
    )
    .await;
    if let Err(e) = std::fs::remove_file(&args.socket) {
        tracing::warn!("cannot remove {}: {e}", args.socket.display());
    }
    if let Some(gateway) = gateway {
        gateway.abort();
    }
    result.context("the API server failed")?;
    tracing::info!("stopped; live sessions are resumed at next start");
    Ok(())
}

/// Binds and starts the model-API gateway when `--gateway` asks for it.
async fn start_gateway(
    args: &Args,
    daemon: &Arc<Daemon>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(addr) = args.gateway else {
        return Ok(None);
    };
    let upstream = |url: &str, flag: &str| {
        gateway::Upstream::parse(url).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
    };
    let config = gateway::Config {
        anthropic: upstream(&args.anthropic_upstream, "anthropic-upstream")?,
        openai: upstream(&args.openai_upstream, "openai-upstream")?,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot bind the gateway to {addr}"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the gateway's address")?;
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
