//! `carapace`: the command-line client. `run` puts a command into an agent session and runs
//! it with privileges dropped; `status` shows what the daemon enforces.
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tokio::signal::unix::{signal, SignalKind};
use tonic::transport::Channel;

use super::connect::connect;
use super::exit::exit_code;
use super::pty;
use carapace::api::proto::carapace_client::CarapaceClient;
use carapace::api::proto::{
    CreateSessionReply, CreateSessionRequest, Denial, EndSessionRequest, StatusRequest,
    WatchSessionRequest,
};
use carapace::paths::DEFAULT_SOCKET;
use carapace::sandbox::{landlock, limits, PrivDrop};

/// How long `run` keeps printing denials after the command exits (events can trail it).
const GRACE: Duration = Duration::from_millis(200);

const AFTER_HELP: &str = "\
carapace talks to the daemon, carapaced, which must be running as root:
  sudo carapaced

Examples:
  carapace run -- claude                      run an agent under guard
  sudo carapace run -- sh -c 'cat ~/.ssh/id_ed25519'
                                              root is dropped back to the sudo user first
  carapace status                             kernel layer state, rules, live sessions
  carapace approvals --watch                  answer what agents ask: carapace approve ID
  sudo carapace doctor                        what this machine can enforce, with fixes
  sudo carapace audit verify                  check the audit ledger for tampering";

/// Run AI agents under Carapace's guard and inspect the daemon.
#[derive(Debug, Parser)]
#[command(name = "carapace", version, after_help = AFTER_HELP)]
pub struct Args {
    /// The daemon's socket
    #[arg(long, global = true, value_name = "PATH", env = "CARAPACE_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command as an agent session
    ///
    /// The daemon creates a session cgroup and moves this process into it; everything the
    /// command starts, however it starts it, stays inside and is checked by the kernel layer.
    /// When run as root through sudo, the command runs as the sudo user. It never keeps
    /// capabilities and cannot gain privileges (`no_new_privs`). It starts in a session of
    /// its own (on a pseudo-terminal of its own when carapace runs on one), with its own IPC
    /// namespace (System V objects and POSIX queues of other processes out of sight) and an
    /// empty session keyring. Denials are printed as they happen; carapace exits with the
    /// command's status (128+N if killed by signal N).
    ///
    /// Where the daemon's kernel layer (BPF LSM) is unavailable but the kernel has Landlock,
    /// the command runs under a Landlock ruleset built from the daemon's block rules instead;
    /// carapace first prints which rules Landlock enforces, partly enforces, or cannot.
    #[command(
        after_help = "Examples:\n  carapace run -- claude\n  carapace run -- sh -c 'cat /etc/shadow'\n  \
                      sudo carapace run --timeout 30m --network loopback -- ./agent.sh\n  \
                      carapace run --memory 512M --pids 200 -- ./agent.sh\n  \
                      carapace run --shadow -- ./agent.sh     see what the rules would refuse\n  \
                      carapace run --profile ci -- ./agent.sh run under $CARAPACE_DATA_DIR/profiles/ci.yaml\n  \
                      carapace run --record -- ./agent.sh     propose an allow-list from what it touches"
    )]
    Run {
        /// Kill every process of the session after this long (e.g. 90, 30s, 5m, 1h); exits 124
        #[arg(long, value_name = "DURATION", value_parser = limits::parse_duration)]
        timeout: Option<Duration>,
        /// Most memory the session may use (e.g. 512M, 2G); past it the kernel's OOM killer
        /// kills a process of the session. Needs the cgroup v2 memory controller: refused
        /// (never ignored) where the daemon cannot set it. Default: no limit
        #[arg(long, value_name = "SIZE", value_parser = limits::parse_size)]
        memory: Option<u64>,
        /// Most processes and threads the session may have at once (e.g. 200); past it fork
        /// fails with EAGAIN. Needs the cgroup v2 pids controller. Default: no limit
        #[arg(long, value_name = "N", value_parser = limits::parse_pids)]
        pids: Option<u64>,
        /// Network for the command: `none` (a new network namespace without interfaces),
        /// `loopback` (the same with `lo` up) or `host`. none/loopback need root (sudo)
        #[arg(long, value_name = "MODE", default_value = "host")]
        network: limits::Network,
        /// Shadow mode: every rule is evaluated in every layer, and what it would refuse is
        /// printed and recorded in the audit ledger as `would-deny` instead of refused. The
        /// self-protection rules (Carapace's own files, socket and pins, leaving the session,
        /// private views, processes outside the session) still refuse. Without the kernel
        /// layer, the Landlock fallback cannot shadow and enforces as usual
        #[arg(long)]
        shadow: bool,
        /// Run under the named profile `$CARAPACE_DATA_DIR/profiles/NAME.yaml` instead of the
        /// main rule file, in every layer (the kernel too), while other sessions keep theirs.
        /// A profile is a rule file: the built-in packs its `builtin:` selects, its own rules,
        /// and always the self-protection packs and every `locked` rule of the main rules,
        /// which no profile can drop or weaken. The daemon validates it when the session
        /// starts (and on every reload) and refuses the session if it does not validate.
        /// `carapace rules check --profile NAME` checks one first
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// Record mode: what the command touches (files by action, programs, addresses and
        /// names) is recorded, and an allow-list rule file is proposed from it when it ends
        /// (`carapace record show|propose ID`)
        #[arg(long)]
        record: bool,
        /// The command and its arguments (put them after --)
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<OsString>,
    },
    /// Show the daemon's version, kernel layer state, rules and sessions
    Status,
    /// Check one tool call (or a batch) against the rules; prints the decision as JSON
    Check(super::check::CheckArgs),
    /// Scan a conversation transcript for past tool calls the rules block (Layer 0)
    ScanHistory(super::check::ScanArgs),
    /// Agent hooks (Claude Code, Codex CLI, Gemini CLI, Copilot CLI) and their installation
    #[command(subcommand, after_help = super::hook::EXAMPLES)]
    Hook(super::hook::HookCommand),
    /// Check, list, explain and test rules; make the daemon reload its rule file
    Rules(super::rules::RulesArgs),
    /// Sessions: their activated and disabled rules, approvals and history
    #[command(subcommand)]
    Session(super::session::SessionCommand),
    /// Pending approval requests (--watch: as they come and are answered)
    Approvals(super::session::ApprovalsArgs),
    /// Approve a pending request (a call, or all or some steps of a plan)
    Approve(super::session::AnswerArgs),
    /// Deny a pending request
    Deny(super::session::AnswerArgs),
    /// Submit a plan of tool calls for approval in one go
    Plan(super::session::PlanArgs),
    /// Propose rules from the corrections in a conversation transcript (LLM; never activated)
    Learn(super::learn::LearnArgs),
    /// Verify and read the audit ledger (every decision, denial, session and reload)
    Audit(super::audit::AuditArgs),
    /// Check what this machine can enforce, and how to fix what is missing
    Doctor(super::doctor::DoctorArgs),
    /// MCP servers: run one behind the tool-call check (`carapace mcp wrap -- SERVER_CMD…`)
    #[command(subcommand)]
    Mcp(super::mcp::McpCommand),
    /// Open the web console (sessions, approvals, audit timeline, rules) of a daemon started
    /// with `--console`: prints a login link, good once for two minutes, and opens it in the
    /// browser when there is a display
    Console(super::console::ConsoleArgs),
    /// Record sessions (`carapace run --record`): what they touched, and the allow-list
    /// proposed from it
    #[command(subcommand)]
    Record(super::record::RecordCommand),
}

/// `carapace hook …` alone: the same global option and the same `hook` subcommand as
/// [`Args`], without the other subcommands. The hook starts once per tool call, and
/// building every subcommand's help text was a fifth of its start-up.
#[derive(Debug, Parser)]
#[command(name = "carapace")]
struct HookArgs {
    #[arg(long, global = true, value_name = "PATH", env = "CARAPACE_SOCKET", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    #[command(subcommand)]
    command: HookOnly,
}

#[derive(Debug, Subcommand)]
enum HookOnly {
    #[command(subcommand, after_help = super::hook::EXAMPLES)]
    Hook(super::hook::HookCommand),
}

/// The arguments: a hook's through [`HookArgs`]; anything else (and any error or request
/// for help, so that messages name every subcommand) through the full parser.
fn parse_args<I>(argv: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = OsString> + Clone,
{
    if let Ok(HookArgs { socket, command }) = HookArgs::try_parse_from(argv.clone()) {
        let HookOnly::Hook(hook) = command;
        return Ok(Args {
            socket,
            command: Command::Hook(hook),
        });
    }
    Args::try_parse_from(argv)
}

/// Exits with `status` and no message when printing fails because the reader of stdout
/// went away (`print!` panics then); every other panic is reported as usual.
fn quiet_on_closed_stdout(status: i32) {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout")
            && message.ends_with(&format!("(os error {})", libc::EPIPE))
        {
            std::process::exit(status);
        }
        report(info);
    }));
}

/// Entry point of the `carapace` binary.
#[must_use]
pub fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().collect::<Vec<_>>()) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    // A reader that stops early (`carapace scan-history … | head`) is not a crash; for a
    // hook or a check it leaves the caller without an answer, so those refuse by status.
    quiet_on_closed_stdout(
        if matches!(args.command, Command::Hook(_) | Command::Check(_)) {
            2
        } else {
            1
        },
    );
    // A hook or a check is one request and one answer, started once per tool call: a
    // second thread would only add its start-up to every call.
    let mut builder = match args.command {
        Command::Hook(_) | Command::Check(_) => tokio::runtime::Builder::new_current_thread(),
        _ => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        }
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("carapace: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match args.command {
            Command::Run {
                timeout,
                memory,
                pids,
                network,
                shadow,
                profile,
                record,
                command,
            } => {
                let limits = Limits {
                    timeout,
                    memory,
                    pids,
                    network,
                    shadow,
                    record,
                };
                run(&args.socket, command, limits, profile.unwrap_or_default()).await
            }
            Command::Status => status(&args.socket).await.map(|()| 0),
            Command::Check(check) => super::check::check(&args.socket, check).await,
            Command::ScanHistory(scan) => super::check::scan_history(&args.socket, scan).await,
            Command::Hook(hook) => super::hook::run(&args.socket, hook).await,
            Command::Rules(rules) => super::rules::run(&args.socket, rules).await,
            Command::Session(cmd) => super::session::session(&args.socket, cmd).await,
            Command::Approvals(a) => super::session::approvals(&args.socket, a).await,
            Command::Approve(a) => super::session::answer(&args.socket, a, true).await,
            Command::Deny(a) => super::session::answer(&args.socket, a, false).await,
            Command::Plan(p) => super::session::plan(&args.socket, p).await,
            Command::Learn(learn) => super::learn::learn(learn).await,
            Command::Audit(audit) => super::audit::run(audit).await,
            Command::Doctor(doctor) => super::doctor::run(&args.socket, doctor).await,
            Command::Mcp(mcp) => super::mcp::run(&args.socket, mcp).await,
            Command::Console(c) => super::console::run(&args.socket, c).await,
            Command::Record(r) => super::record::run(&args.socket, r).await,
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("carapace: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The line `run` prints for a denial.
#[must_use]
pub fn denial_line(d: &Denial) -> String {
    format!(
        "carapace: {} {} (rule {}: {})",
        if d.would_deny {
            "shadow mode, would have blocked"
        } else {
            "blocked"
        },
        carapace::api::denial::phrase(&d.operation, &d.subject),
        d.rule_id,
        d.message
    )
}

fn print_denial(d: &Denial) {
    eprintln!("{}", denial_line(d));
}

/// What `run` bounds the session by.
#[derive(Clone, Copy, Debug)]
struct Limits {
    timeout: Option<Duration>,
    /// Set by the daemon in the session cgroup.
    memory: Option<u64>,
    pids: Option<u64>,
    network: limits::Network,
    /// Shadow mode: refusals reported, not enforced (`--shadow`).
    shadow: bool,
    /// Record mode (`--record`).
    record: bool,
}

/// Exit status of a run whose time limit expired (as timeout(1)).
const TIMED_OUT: u8 = 124;

async fn run(
    socket: &Path,
    command: Vec<OsString>,
    limits: Limits,
    profile: String,
) -> anyhow::Result<u8> {
    let privs = PrivDrop::prepare().context("cannot work out whom to run the command as")?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if limits.network != limits::Network::Host && unsafe { libc::geteuid() } != 0 {
        anyhow::bail!(
            "--network none/loopback creates a network namespace, which needs root: run \
             `sudo carapace run --network …` (the command still runs as you)"
        );
    }
    let mut client = connect(socket).await?;
    let shown: Vec<String> = command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // From here on this process is inside the session cgroup.
    let session = client
        .create_session(CreateSessionRequest {
            command: shown,
            memory_max: limits.memory.unwrap_or(0),
            pids_max: limits.pids.unwrap_or(0),
            timeout_secs: limits.timeout.map_or(0, |d| d.as_secs()),
            shadow: limits.shadow,
            profile: profile.clone(),
            record: limits.record,
        })
        .await
        .map_err(|s| anyhow::anyhow!("the daemon refused a session: {}", s.message()))?
        .into_inner();
    if !profile.is_empty() {
        eprintln!(
            "carapace: session {} runs under profile {profile}",
            session.session_id
        );
    }
    if limits.shadow {
        eprintln!(
            "carapace: session {} in shadow mode: what the rules would refuse is reported \
             (\"would have blocked\"), not refused; self-protection still refuses",
            session.session_id
        );
    }
    let record = limits.record;
    if record {
        eprintln!(
            "carapace: session {} records what it touches; an allow-list is proposed when it \
             ends",
            session.session_id
        );
    }
    let code = match fallback_layer(&session) {
        Ok(landlock) => {
            let confine = Confinement {
                privs,
                landlock,
                limits,
                cgroup: PathBuf::from(&session.cgroup),
                gateway: session.gateway.clone(),
            };
            run_in_session(&mut client, &session.session_id, &command, confine).await
        }
        Err(e) => Err(e),
    };
    match client
        .end_session(EndSessionRequest {
            session_id: session.session_id.clone(),
        })
        .await
    {
        Ok(reply) => {
            for limit in &reply.get_ref().limits {
                eprintln!("carapace: session {}: {limit}", session.session_id);
            }
        }
        Err(e) => eprintln!(
            "carapace: cannot end session {} ({}); carapaced ends it once its processes are gone",
            session.session_id,
            e.message()
        ),
    }
    if record {
        proposal_summary(&mut client, &session.session_id).await;
    }
    code
}

/// After a record session: what the proposal holds, and how to review and save it.
async fn proposal_summary(
    client: &mut carapace::api::proto::carapace_client::CarapaceClient<tonic::transport::Channel>,
    id: &str,
) {
    let reply = client
        .record_propose(carapace::api::proto::RecordProposeRequest {
            session_id: id.to_owned(),
            ..Default::default()
        })
        .await;
    match reply {
        Ok(r) => {
            let r = r.into_inner();
            eprintln!(
                "carapace: session {id} recorded; proposed allow-list: reads of {} and writes \
                 of {} path(s) under {}, {} network host(s). Review it with `carapace record \
                 propose {id}`, save it with `--write NAME`",
                r.reads,
                r.writes,
                if r.roots.is_empty() {
                    "no guarded directory".to_owned()
                } else {
                    r.roots.join(", ")
                },
                r.hosts
            );
        }
        Err(e) => eprintln!(
            "carapace: session {id} recorded, but no allow-list could be proposed: {}",
            e.message()
        ),
    }
}

/// Without the daemon's kernel layer, the Landlock ruleset that stands in for it (reported on
/// stderr), or `None` (with a warning) where the kernel has no Landlock either. A ruleset
/// that cannot be built stops the run: the agent never runs with less than it was told.
fn fallback_layer(session: &CreateSessionReply) -> anyhow::Result<Option<landlock::Prepared>> {
    if session.kernel_enforcing {
        return Ok(None);
    }
    let roots: Vec<PathBuf> = [
        std::env::current_dir().ok(),
        std::env::var_os("HOME").map(PathBuf::from),
    ]
    .into_iter()
    .flatten()
    .collect();
    let prepared = landlock::prepare(&session.kernel_rules, &roots)
        .context("cannot build the Landlock ruleset that stands in for the kernel layer")?;
    match &prepared {
        Some(p) => {
            eprintln!(
                "carapace: warning: kernel layer unavailable ({}); Landlock enforces the file \
                 rules it can express instead",
                session.kernel_status
            );
            eprint!("{}", landlock::render(&p.report));
        }
        None => eprintln!(
            "carapace: warning: kernel layer unavailable ({}); running with Layers 0/1 only",
            session.kernel_status
        ),
    }
    Ok(prepared)
}

/// Everything that bounds the command besides the daemon.
struct Confinement {
    privs: PrivDrop,
    landlock: Option<landlock::Prepared>,
    limits: Limits,
    /// The session's cgroup directory, whose processes a timeout kills.
    cgroup: PathBuf,
    /// The daemon's model-API gateway ("" when off), for the agent's base URLs.
    gateway: String,
}

async fn run_in_session(
    client: &mut CarapaceClient<Channel>,
    session_id: &str,
    command: &[OsString],
    confine: Confinement,
) -> anyhow::Result<u8> {
    let Confinement {
        privs,
        landlock,
        limits,
        cgroup,
        gateway,
    } = confine;
    let mut denials = client
        .watch_session(WatchSessionRequest {
            session_id: session_id.to_owned(),
        })
        .await
        .map_err(|s| anyhow::anyhow!("cannot watch session {session_id}: {}", s.message()))?
        .into_inner();
    let (program, rest) = command.split_first().context("no command given")?;
    let terminal = pty::open()?;
    let mut cmd = agent_command(
        program,
        rest,
        &gateway,
        terminal.as_ref(),
        limits,
        privs,
        landlock,
    )?;
    // The command is in a session of its own, so a Ctrl-C at the caller's terminal (without
    // a relay) reaches carapace only: pass it to the command's process group, and report its
    // status instead of dying first.
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut winch = signal(SignalKind::window_change()).context("cannot handle SIGWINCH")?;
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("carapace: cannot run {}: {e}", program.to_string_lossy());
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            });
        }
    };
    // Our copies of the terminal's slave side go with the command's description.
    drop(cmd);
    let mut relay = terminal.map(pty::Terminal::relay).transpose()?;
    // SIGTERM / SIGHUP to carapace are passed on to the command, so that the session ends
    // through the command's exit and `EndSession`, not by leaving it behind.
    let (mut term, mut hup) = (
        signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
        signal(SignalKind::hangup()).context("cannot handle SIGHUP")?,
    );
    let timer = async {
        match limits.timeout {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timer);
    let mut timed_out = false;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status.context("cannot wait for the command")?,
            () = &mut timer, if !timed_out => {
                timed_out = true;
                kill_session(&cgroup, limits.timeout.unwrap_or_default()).await?;
            }
            _ = term.recv() => forward(libc::SIGTERM, child.id(), false),
            _ = hup.recv() => forward(libc::SIGHUP, child.id(), false),
            _ = interrupt.recv() => forward(libc::SIGINT, child.id(), true),
            _ = winch.recv() => {
                if let Some(r) = &relay {
                    r.follow_size();
                }
            }
            message = denials.message() => match message {
                Ok(Some(d)) => print_denial(&d),
                // The stream ended or failed: keep waiting for the command.
                Ok(None) | Err(_) => break child.wait().await.context("cannot wait for the command")?,
            },
        }
    };
    if let Some(r) = &mut relay {
        r.drain(GRACE).await;
    }
    // The user's terminal gets its settings back before carapace's last lines.
    drop(relay);
    let grace = tokio::time::sleep(GRACE);
    tokio::pin!(grace);
    loop {
        tokio::select! {
            () = &mut grace => break,
            message = denials.message() => match message {
                Ok(Some(d)) => print_denial(&d),
                Ok(None) | Err(_) => break,
            },
        }
    }
    Ok(if timed_out {
        TIMED_OUT
    } else {
        exit_code(status)
    })
}

/// Passes signal `sig` on to the command `pid` (`None`: reaped already), or to its process
/// group when `group` (it leads one: setsid), as a terminal would.
fn forward(sig: libc::c_int, pid: Option<u32>, group: bool) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) on our own child's pid (or the group it leads), which is not
        // reaped yet (we are still waiting for it), with a constant signal.
        unsafe {
            libc::kill(if group { -pid } else { pid }, sig);
        }
    }
}

/// The command as it starts: in a session of its own (on `terminal` when there is one),
/// with the gateway's base URLs, its network namespace, privileges dropped and Landlock.
fn agent_command(
    program: &OsString,
    rest: &[OsString],
    gateway: &str,
    terminal: Option<&pty::Terminal>,
    limits: Limits,
    privs: PrivDrop,
    landlock: Option<landlock::Prepared>,
) -> anyhow::Result<tokio::process::Command> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(rest);
    let plan = gateway_plan(gateway, program, |name| std::env::var(name).ok());
    for note in &plan.notes {
        eprintln!("{note}");
    }
    cmd.envs(plan.set);
    if let Some(t) = terminal {
        let [input, output, errors] = t.stdio().context("cannot set up the agent's terminal")?;
        cmd.stdin(input).stdout(output).stderr(errors);
    }
    let controlling = terminal.is_some();
    // SAFETY: setsid, ioctl, unshare, keyctl, PrivDrop::apply and Prepared::restrict_self only make
    // async-signal-safe system calls and do not allocate, as required between fork and exec.
    // Landlock comes after the drop, which sets the `no_new_privs` it needs.
    unsafe {
        cmd.pre_exec(move || {
            // A session of its own: no terminal of the caller's to type into (see `pty`).
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if controlling && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Namespaces need the capabilities the drop takes away.
            limits::isolate_network(limits.network)?;
            limits::isolate_ipc()?;
            privs.apply()?;
            // After the drop, so that the keyring is the user's (and counts on their quota).
            limits::own_keyring()?;
            match &landlock {
                Some(l) => l.restrict_self(),
                None => Ok(()),
            }
        });
    }
    Ok(cmd)
}

/// Kills every process of the session but this one, after its time limit ran out.
async fn kill_session(cgroup: &Path, limit: Duration) -> anyhow::Result<()> {
    let dir = cgroup.to_path_buf();
    let killed = tokio::task::spawn_blocking(move || {
        limits::kill_cgroup_except(&dir, std::process::id(), KILL_WAIT)
    })
    .await
    .context("the kill task failed")?
    .with_context(|| format!("cannot kill the processes of {}", cgroup.display()))?;
    eprintln!(
        "carapace: the session hit its time limit ({}s); killed its {killed} process(es)",
        limit.as_secs()
    );
    Ok(())
}

/// How long a timeout keeps killing the session's processes (they may fork meanwhile).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How `carapace run` points an agent at the daemon's gateway: the variables to set, and
/// what the user should know (a base URL of theirs kept, an agent the gateway cannot serve).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GatewayPlan {
    pub set: Vec<(&'static str, String)>,
    pub notes: Vec<String>,
}

/// The base-URL variables each provider's clients read, what the gateway puts in each, and
/// the daemon flag that names the upstream. Anthropic's SDKs (Claude Code) append
/// `/v1/messages`; `OpenAI`'s (Codex) expect the `/v1` in it; Gemini CLI appends
/// `/v1beta/models/…`.
const BASE_URLS: [(&str, &str, &str, &str); 3] = [
    (
        "ANTHROPIC_BASE_URL",
        "",
        "Anthropic",
        "--anthropic-upstream",
    ),
    ("OPENAI_BASE_URL", "/v1", "OpenAI", "--openai-upstream"),
    ("GOOGLE_GEMINI_BASE_URL", "", "Gemini", "--gemini-upstream"),
];

/// The plan for running `program` with the gateway at `gateway` (empty: off), given the
/// caller's environment (`var`).
#[must_use]
pub fn gateway_plan(
    gateway: &str,
    program: &std::ffi::OsStr,
    var: impl Fn(&str) -> Option<String>,
) -> GatewayPlan {
    let mut plan = GatewayPlan::default();
    if gateway.is_empty() {
        return plan;
    }
    for (name, suffix, provider, flag) in BASE_URLS {
        let ours = format!("{gateway}{suffix}");
        match var(name) {
            Some(theirs) if !theirs.is_empty() && theirs != ours => plan.notes.push(format!(
                "carapace: {name} is already set, so it is kept: the agent's {provider} API                  traffic does not pass the gateway (its tool calls are still checked by the                  hook and the kernel layer). To check it there too, start carapaced with                  {flag} set to that URL and unset {name}."
            )),
            _ => plan.set.push((name, ours)),
        }
    }
    let name = std::path::Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "copilot" {
        plan.notes.push(
            "carapace: GitHub Copilot CLI talks to GitHub's Copilot service, which the gateway              does not serve: its tool calls are checked by its hook (carapace hook install              copilot) and by the kernel layer, not by the gateway."
                .to_owned(),
        );
    }
    plan
}

async fn status(socket: &Path) -> anyhow::Result<()> {
    let mut client = connect(socket).await?;
    let s = client
        .status(StatusRequest {})
        .await
        .map_err(|s| anyhow::anyhow!("status failed: {}", s.message()))?
        .into_inner();
    println!("carapaced {}", s.version);
    if s.kernel_enforcing {
        println!("kernel layer: enforcing ({})", s.kernel_status);
    } else {
        println!(
            "kernel layer: unavailable ({}); Layers 0/1 only",
            s.kernel_status
        );
    }
    let from = if s.rules_file.is_empty() {
        "the built-in packs"
    } else {
        &s.rules_file
    };
    println!(
        "rules: {} ({} compiled for the kernel layer) from {from}; reloaded {} times",
        s.rules, s.kernel_rules, s.rules_reloads
    );
    for line in profile_lines(&s) {
        println!("{line}");
    }
    if let Some(llm) = &s.llm {
        println!("{}", llm_line(llm));
    }
    for line in super::audit::status_lines(&s) {
        println!("{line}");
    }
    if s.gateway.is_empty() {
        println!("model-API gateway: off (start carapaced with --gateway 127.0.0.1:PORT)");
    } else {
        println!("model-API gateway: {}", s.gateway);
    }
    println!(
        "approvals: {} pending{}",
        s.approvals_pending,
        if s.approvals_pending > 0 {
            " (answer with `carapace approvals`, then `carapace approve ID` or `carapace deny ID`)"
        } else {
            ""
        }
    );
    println!("sessions: {}", s.sessions.len());
    for session in &s.sessions {
        println!(
            "  {}  uid {}  {}  {}",
            session.id,
            session.owner_uid,
            session.cgroup,
            session.command.join(" ")
        );
        if session.shadow {
            println!("    shadow mode: refusals recorded as would-deny, not enforced");
        }
        if !session.profile.is_empty() {
            println!("    profile: {}", session.profile);
        }
        for line in resolver_lines(session) {
            println!("    {line}");
        }
    }
    Ok(())
}

/// The named profiles in the kernel image, and those that are not with why (indented).
fn profile_lines(s: &carapace::api::proto::StatusReply) -> Vec<String> {
    let mut out = Vec::new();
    if !s.profiles_loaded.is_empty() {
        out.push(format!("profiles loaded: {}", s.profiles_loaded.join(", ")));
    }
    for p in &s.profiles_not_loaded {
        out.push(format!("profile `{}` not loaded:", p.name));
        out.extend(p.why.lines().map(|l| format!("  {l}")));
    }
    out
}

/// Most learned addresses `carapace status` lists per session.
const LEARNED_SHOWN: usize = 20;

/// A session's resolver and the addresses it handed out (none when it has no resolver).
#[must_use]
pub fn resolver_lines(s: &carapace::api::proto::SessionInfo) -> Vec<String> {
    if s.resolver_port == 0 {
        return Vec::new();
    }
    let mut out = vec![format!(
        "DNS: resolver on 127.0.0.1:{}, {} address{} handed out",
        s.resolver_port,
        s.learned.len(),
        if s.learned.len() == 1 { "" } else { "es" }
    )];
    out.extend(s.learned.iter().take(LEARNED_SHOWN).map(|l| {
        format!(
            "  {}  {}  ({} s left)",
            l.address, l.name, l.expires_in_secs
        )
    }));
    if s.learned.len() > LEARNED_SHOWN {
        out.push(format!("  … and {} more", s.learned.len() - LEARNED_SHOWN));
    }
    out
}

/// One line about the LLM reviewer: what it uses and what it cost so far.
#[must_use]
pub fn llm_line(llm: &carapace::api::proto::LlmStatus) -> String {
    if !llm.available {
        return format!("LLM review: {}", llm.description);
    }
    let answered = llm.calls.saturating_sub(llm.retries).max(1);
    format!(
        "LLM review: {}; {} model call(s), {} cache hit(s), {} failure(s), {} retry(ies), \
         mean latency {} ms",
        llm.description,
        llm.calls,
        llm.cache_hits,
        llm.failures,
        llm.retries,
        llm.latency_us_total / answered / 1000
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;

    use super::*;

    #[test]
    fn status_lists_a_sessions_resolver_and_what_it_handed_out() {
        use carapace::api::proto::{LearnedAddress, SessionInfo};
        let mut s = SessionInfo::default();
        assert!(resolver_lines(&s).is_empty(), "no resolver, no line");
        s.resolver_port = 40_000;
        s.learned = (0..22)
            .map(|i| LearnedAddress {
                address: format!("192.0.2.{i}"),
                name: "api.github.com".into(),
                expires_in_secs: 85,
            })
            .collect();
        let lines = resolver_lines(&s);
        assert_eq!(
            lines[0],
            "DNS: resolver on 127.0.0.1:40000, 22 addresses handed out"
        );
        assert_eq!(lines[1], "  192.0.2.0  api.github.com  (85 s left)");
        assert_eq!(lines.len(), 1 + LEARNED_SHOWN + 1);
        assert_eq!(lines.last().map(String::as_str), Some("  … and 2 more"));
    }

    /// The hook's own parser reads every hook command line as the full one does, and leaves
    /// everything else (other commands, help, mistakes) to it.
    #[test]
    fn the_hooks_parser_agrees_with_the_full_one() {
        let argv = |s: &str| -> Vec<OsString> { s.split(' ').map(OsString::from).collect() };
        for line in [
            "carapace hook claude-code",
            "carapace --socket /tmp/s.sock hook claude-code",
            "carapace hook claude-code --socket /tmp/s.sock --grant",
            "carapace hook claude-code --local --wait 30",
            "carapace hook claude-code --rules /etc/r.yaml --cwd /srv",
            "carapace hook install claude-code --project",
            "carapace hook install claude-code --settings x.json --hook-args --local",
            "carapace hook codex",
            "carapace hook codex --local --wait 5",
            "carapace hook gemini --rules /etc/r.yaml",
            "carapace hook install codex --project",
            "carapace hook install gemini --uninstall",
            "carapace hook copilot --wait 10",
            "carapace hook install copilot --project --hook-args --local",
        ] {
            let full = Args::try_parse_from(argv(line)).expect(line);
            let hot = HookArgs::try_parse_from(argv(line)).expect(line);
            let hot = Args {
                socket: hot.socket,
                command: match hot.command {
                    HookOnly::Hook(h) => Command::Hook(h),
                },
            };
            assert_eq!(format!("{hot:?}"), format!("{full:?}"), "{line}");
            let parsed = parse_args(argv(line)).expect(line);
            assert_eq!(format!("{parsed:?}"), format!("{full:?}"), "{line}");
        }
        for line in [
            "carapace status",
            "carapace --socket /tmp/s.sock check --local --json {}",
            "carapace run -- hook claude-code",
        ] {
            let full = Args::try_parse_from(argv(line)).expect(line);
            let parsed = parse_args(argv(line)).expect(line);
            assert_eq!(format!("{parsed:?}"), format!("{full:?}"), "{line}");
        }
        for line in [
            "carapace hook claude-code --nope",
            "carapace hook codex --grant",
            "carapace hook install cursor",
            "carapace hook --help",
            "carapace",
        ] {
            let full = Args::try_parse_from(argv(line)).expect_err(line);
            let parsed = parse_args(argv(line)).expect_err(line);
            assert_eq!(parsed.to_string(), full.to_string(), "{line}");
        }
    }

    #[test]
    fn denial_lines() {
        let d = Denial {
            operation: "read".into(),
            subject: "/home/u/.ssh/id_ed25519".into(),
            rule_id: "protect-ssh-keys".into(),
            message: "SSH keys are off limits".into(),
            ..Denial::default()
        };
        assert_eq!(
            denial_line(&d),
            "carapace: blocked read of /home/u/.ssh/id_ed25519 \
             (rule protect-ssh-keys: SSH keys are off limits)"
        );
        let shadowed = Denial {
            would_deny: true,
            ..d
        };
        assert_eq!(
            denial_line(&shadowed),
            "carapace: shadow mode, would have blocked read of /home/u/.ssh/id_ed25519 \
             (rule protect-ssh-keys: SSH keys are off limits)"
        );
    }

    #[test]
    fn gateway_variables() {
        let none = |_: &str| None;
        let claude = std::ffi::OsStr::new("/usr/bin/claude");
        assert_eq!(gateway_plan("", claude, none), GatewayPlan::default());
        let g = "http://127.0.0.1:8788";
        let plan = gateway_plan(g, claude, none);
        assert_eq!(
            plan.set,
            [
                ("ANTHROPIC_BASE_URL", g.to_owned()),
                ("OPENAI_BASE_URL", format!("{g}/v1")),
                ("GOOGLE_GEMINI_BASE_URL", g.to_owned()),
            ]
        );
        assert!(plan.notes.is_empty());
        // A base URL the user set is kept, and said so; the same URL as ours is no news.
        let plan = gateway_plan(g, claude, |name| match name {
            "ANTHROPIC_BASE_URL" => Some("https://proxy.corp.example".into()),
            "OPENAI_BASE_URL" => Some(format!("{g}/v1")),
            _ => None,
        });
        assert!(!plan.set.iter().any(|(n, _)| *n == "ANTHROPIC_BASE_URL"));
        assert_eq!(plan.notes.len(), 1);
        assert!(
            plan.notes[0].contains("ANTHROPIC_BASE_URL is already set")
                && plan.notes[0].contains("--anthropic-upstream")
                && !plan.notes[0].contains("proxy.corp"),
            "{:?}",
            plan.notes
        );
        // Copilot cannot be pointed at the gateway: said, not hidden.
        let plan = gateway_plan(g, std::ffi::OsStr::new("copilot"), none);
        assert!(plan.notes.iter().any(|n| n.contains("Copilot")), "{plan:?}");
    }

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code(std::process::ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(
            exit_code(std::process::ExitStatus::from_raw(libc::SIGKILL)),
            137
        );
    }

    #[test]
    fn run_takes_everything_after_dashes() {
        let args = Args::try_parse_from(["carapace", "run", "--", "sh", "-c", "exit 7"]).unwrap();
        let Command::Run { command, .. } = args.command else {
            panic!("not run")
        };
        assert_eq!(command, ["sh", "-c", "exit 7"]);
        let args = Args::try_parse_from(["carapace", "run", "ls", "-la"]).unwrap();
        let Command::Run { command, .. } = args.command else {
            panic!("not run")
        };
        assert_eq!(command, ["ls", "-la"]);
    }
}
