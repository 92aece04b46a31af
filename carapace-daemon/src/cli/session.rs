//! `carapace session …`, `carapace approvals`, `carapace approve|deny` and `carapace plan`:
//! the user's side of sessions and approvals. Everything here goes through the daemon,
//! which refuses the loosening commands to processes inside a session.
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tokio_stream::StreamExt as _;

use super::connect::connect;
use carapace::api::proto::{
    AnswerApprovalRequest, Approval, GetSessionRequest, ListApprovalsRequest, ListSessionsRequest,
    PlanReply, PlanRequest, ResetSessionRequest, SessionDetail, SetSessionRuleRequest,
    WatchApprovalsRequest,
};

/// Largest plan file read.
const MAX_PLAN: u64 = 32 << 20;

#[derive(Debug, clap::Subcommand)]
#[command(after_help = "\
Sessions are `carapace run` sessions (their cgroup) and agent sessions named by a harness
(e.g. Claude Code's session id, through `carapace hook claude-code`). A session remembers
the rules its triggers switched on, the rules you switched off, the operations you approved
and what ran. Processes inside a session can look, never loosen.

Examples:
  carapace session list
  carapace session show s-1763900000-1a2b3c4d --history 20
  carapace session disable s-1763900000-1a2b3c4d no-write-after-web
  carapace session reset a-0123456789abcdef")]
pub enum SessionCommand {
    /// Every session you own (root: all)
    List {
        #[arg(long)]
        json: bool,
    },
    /// One session: rule state, approvals, recent operations
    Show {
        id: String,
        /// How many recent operations to show
        #[arg(long, value_name = "N", default_value_t = 10)]
        history: u32,
        #[arg(long)]
        json: bool,
    },
    /// The session's activated and disabled rules
    Rules { id: String },
    /// Switch a rule off for this session (locked rules cannot be)
    Disable { id: String, rule: String },
    /// Switch a rule you disabled back on
    Enable { id: String, rule: String },
    /// Forget what the session accumulated: activated and disabled rules, approvals, history
    Reset { id: String },
}

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  carapace approvals                 pending requests
  carapace approvals --watch         print requests and answers as they happen
  carapace approve ap-1a2b3c4d
  carapace approve ap-1a2b3c4d --steps 1-3,5     a subset of a plan
  carapace deny ap-1a2b3c4d")]
pub struct ApprovalsArgs {
    /// Keep printing new requests and answers
    #[arg(long)]
    pub watch: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct AnswerArgs {
    /// The approval request's id (see `carapace approvals`)
    pub id: String,
    /// For a plan: the steps to approve, e.g. `1-3,5` (default: all)
    #[arg(long, value_name = "LIST")]
    pub steps: Option<String>,
    /// Approve this call only: the same call later in the session asks again (by default
    /// an approval stands for the rest of the session)
    #[arg(long)]
    pub once: bool,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "\
FILE holds the plan's steps in order: a JSON array of tool calls, or one call per line
(JSONL), in any shape `carapace check` accepts. Every step is checked as it would run,
earlier steps switching session rules on for later ones. No step gated: approved at once.
Otherwise one approval request lists the gated steps and the rules that gate them.

Exit status: 0 approved, 2 refused (a step is blocked, the user denied, or nobody answered
in time), 3 waiting for the user's answer, 1 error.

Examples:
  carapace plan steps.json --session my-agent-1
  carapace plan steps.jsonl --session my-agent-1 --wait 300")]
pub struct PlanArgs {
    /// The plan (`-` for stdin)
    pub file: PathBuf,
    /// The agent session the plan belongs to (the harness's session id)
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    #[arg(long, value_name = "NAME", default_value = "agent")]
    pub agent: String,
    /// Wait up to SECS for the user's answer
    #[arg(long, value_name = "SECS", default_missing_value = "300", num_args = 0..=1)]
    pub wait: Option<u32>,
    /// Working directory relative paths resolve against (default: this one)
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

fn rpc_error(what: &str) -> impl FnOnce(tonic::Status) -> anyhow::Error + '_ {
    move |s| anyhow::anyhow!("{what}: {}", s.message())
}

pub async fn session(socket: &Path, command: SessionCommand) -> anyhow::Result<u8> {
    let mut client = connect(socket).await?;
    match command {
        SessionCommand::List { json } => {
            let reply = client
                .list_sessions(ListSessionsRequest {})
                .await
                .map_err(rpc_error("cannot list sessions"))?
                .into_inner();
            if json {
                println!("{}", sessions_json(&reply.sessions));
            } else if reply.sessions.is_empty() {
                println!("no sessions");
            } else {
                for s in &reply.sessions {
                    println!("{}", one_line(s));
                }
            }
        }
        SessionCommand::Show { id, history, json } => {
            let s = client
                .get_session(GetSessionRequest {
                    session_id: id,
                    history,
                    ..GetSessionRequest::default()
                })
                .await
                .map_err(rpc_error("cannot read the session"))?
                .into_inner();
            if json {
                println!("{}", session_json(&s));
            } else {
                print!("{}", show(&s));
            }
        }
        SessionCommand::Rules { id } => {
            let s = client
                .get_session(GetSessionRequest {
                    session_id: id,
                    ..GetSessionRequest::default()
                })
                .await
                .map_err(rpc_error("cannot read the session"))?
                .into_inner();
            print!("{}", rule_lines(&s));
        }
        SessionCommand::Disable { id, rule } => {
            set_rule(&mut client, id, rule, true).await?;
        }
        SessionCommand::Enable { id, rule } => {
            set_rule(&mut client, id, rule, false).await?;
        }
        SessionCommand::Reset { id } => {
            let s = client
                .reset_session(ResetSessionRequest {
                    session_id: id,
                    ..ResetSessionRequest::default()
                })
                .await
                .map_err(rpc_error("cannot reset the session"))?
                .into_inner();
            println!("carapace: session {} reset", s.id);
        }
    }
    Ok(0)
}

async fn set_rule(
    client: &mut carapace::api::proto::carapace_client::CarapaceClient<tonic::transport::Channel>,
    id: String,
    rule: String,
    disabled: bool,
) -> anyhow::Result<()> {
    let what = if disabled { "disable" } else { "enable" };
    let s = client
        .set_session_rule(SetSessionRuleRequest {
            session_id: id,
            rule_id: rule.clone(),
            disabled,
            ..SetSessionRuleRequest::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot {what} rule {rule}: {}", e.message()))?
        .into_inner();
    println!("carapace: rule {rule} {what}d for session {}", s.id);
    Ok(())
}

fn one_line(s: &SessionDetail) -> String {
    let what = if s.kind == "run" {
        s.command.join(" ")
    } else {
        format!("{} {}", s.agent, s.external_id)
    };
    let count = |state: &str| s.rules.iter().filter(|r| r.state == state).count();
    format!(
        "{}  {:<5} uid {:<6} {} activated, {} disabled, {} approved  {}{}{}",
        s.id,
        s.kind,
        s.owner_uid,
        count("activated"),
        count("disabled"),
        s.approved_operations,
        what,
        if s.shadow { "  [shadow mode]" } else { "" },
        if s.profile.is_empty() {
            String::new()
        } else {
            format!("  [profile {}]", s.profile)
        }
    )
}

fn rule_lines(s: &SessionDetail) -> String {
    if s.rules.is_empty() {
        return "no session rules switched on or off\n".into();
    }
    s.rules.iter().fold(String::new(), |mut out, r| {
        let _ = writeln!(out, "{:<9} {}  ({})", r.state, r.rule_id, r.reason);
        out
    })
}

fn show(s: &SessionDetail) -> String {
    let mut out = format!("{}\n", one_line(s));
    if !s.cgroup.is_empty() {
        let _ = writeln!(out, "cgroup: {}", s.cgroup);
    }
    out.push_str("rules:\n");
    for line in rule_lines(s).lines() {
        let _ = writeln!(out, "  {line}");
    }
    if !s.approvals.is_empty() {
        out.push_str("approvals:\n");
        for a in &s.approvals {
            let _ = writeln!(out, "  {} {} {}", a.id, a.status, a.summary);
        }
    }
    if !s.history.is_empty() {
        out.push_str("recent operations:\n");
        for h in &s.history {
            let _ = writeln!(out, "  {:<7} {}", h.decision, h.summary);
        }
    }
    out
}

fn session_json(s: &SessionDetail) -> serde_json::Value {
    serde_json::json!({
        "id": s.id,
        "kind": s.kind,
        "owner_uid": s.owner_uid,
        "created": s.created,
        "command": s.command,
        "agent": s.agent,
        "external_id": s.external_id,
        "cgroup": s.cgroup,
        "shadow": s.shadow,
        "profile": s.profile,
        "rules": s.rules.iter().map(|r| serde_json::json!({
            "rule_id": r.rule_id, "state": r.state, "since": r.since, "reason": r.reason,
        })).collect::<Vec<_>>(),
        "approved_operations": s.approved_operations,
        "history": s.history.iter().map(|h| serde_json::json!({
            "at": h.at, "tool": h.tool, "summary": h.summary, "decision": h.decision,
        })).collect::<Vec<_>>(),
        "approvals": s.approvals.iter().map(approval_json).collect::<Vec<_>>(),
    })
}

fn sessions_json(list: &[SessionDetail]) -> serde_json::Value {
    serde_json::Value::Array(list.iter().map(session_json).collect())
}

fn approval_json(a: &Approval) -> serde_json::Value {
    let rules = |rules: &[carapace::api::proto::ApprovalRule]| {
        rules
            .iter()
            .map(|r| serde_json::json!({"id": r.id, "mode": r.mode, "message": r.message}))
            .collect::<Vec<_>>()
    };
    serde_json::json!({
        "id": a.id,
        "session_id": a.session_id,
        "kind": a.kind,
        "status": a.status,
        "created": a.created,
        "summary": a.summary,
        "rules": rules(&a.rules),
        "steps": a.steps.iter().map(|s| serde_json::json!({
            "n": s.n, "summary": s.summary, "decision": s.decision, "rules": rules(&s.rules),
        })).collect::<Vec<_>>(),
        "approved_steps": a.approved_steps,
        "requester_uid": a.requester_uid,
        "decided_by": a.decided_by,
        "asked": a.asked,
        "once": a.once,
    })
}

/// The approval prompt, as the user reads it.
fn prompt(a: &Approval) -> String {
    let mut out = format!("{} [{}] {}\n", a.id, a.status, a.summary);
    if a.asked > 1 {
        let _ = writeln!(out, "  asked {} times", a.asked);
    }
    if !a.session_id.is_empty() {
        let _ = writeln!(out, "  session {}", a.session_id);
    }
    for r in &a.rules {
        let _ = writeln!(out, "  rule {}: {}", r.id, r.message);
    }
    for s in &a.steps {
        let mark = match s.decision.as_str() {
            "approve" => "needs approval",
            "block" => "BLOCKED",
            _ => "ok",
        };
        let _ = writeln!(out, "  {}. {} — {mark}", s.n, s.summary);
        for r in &s.rules {
            let _ = writeln!(out, "       rule {}: {}", r.id, r.message);
        }
    }
    if a.status == "pending" {
        let plan = if a.kind == "plan" {
            format!(" | carapace approve {} --steps 1-3", a.id)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  answer: carapace approve {id}{plan} | carapace deny {id}",
            id = a.id
        );
    }
    out
}

pub async fn approvals(socket: &Path, args: ApprovalsArgs) -> anyhow::Result<u8> {
    let mut client = connect(socket).await?;
    let pending = client
        .list_approvals(ListApprovalsRequest {})
        .await
        .map_err(rpc_error("cannot list approvals"))?
        .into_inner()
        .approvals;
    let print = |a: &Approval| {
        if args.json {
            println!("{}", approval_json(a));
        } else {
            print!("{}", prompt(a));
        }
    };
    if pending.is_empty() && !args.json && !args.watch {
        println!("no pending approval requests");
    }
    pending.iter().for_each(print);
    if args.watch {
        let mut stream = client
            .watch_approvals(WatchApprovalsRequest {})
            .await
            .map_err(rpc_error("cannot watch approvals"))?
            .into_inner();
        while let Some(a) = stream.next().await {
            let a = a.map_err(rpc_error("the approval stream failed"))?;
            print(&a);
        }
    }
    Ok(0)
}

pub async fn answer(socket: &Path, args: AnswerArgs, approve: bool) -> anyhow::Result<u8> {
    let mut client = connect(socket).await?;
    let a = client
        .answer_approval(AnswerApprovalRequest {
            approval_id: args.id.clone(),
            approve,
            steps: args.steps.unwrap_or_default(),
            once: args.once,
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot answer {}: {}", args.id, e.message()))?
        .into_inner();
    if a.kind == "plan" && approve {
        println!("carapace: {} approved (steps {:?})", a.id, a.approved_steps);
    } else {
        println!("carapace: {} {}", a.id, a.status);
    }
    Ok(0)
}

/// Reads a plan: a JSON array of calls, or JSONL.
fn read_plan(path: &Path) -> anyhow::Result<Vec<String>> {
    let mut text = String::new();
    if path == Path::new("-") {
        std::io::stdin()
            .take(MAX_PLAN)
            .read_to_string(&mut text)
            .context("cannot read the plan from stdin")?;
    } else {
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_PLAN).read_to_string(&mut text))
            .with_context(|| format!("cannot read {}", path.display()))?;
    }
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        let steps: Vec<serde_json::Value> = serde_json::from_str(trimmed)
            .with_context(|| format!("{}: not a JSON array of tool calls", path.display()))?;
        return Ok(steps.iter().map(serde_json::Value::to_string).collect());
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str::<serde_json::Value>(l)
                .map(|v| v.to_string())
                .with_context(|| format!("{}:{}: not valid JSON", path.display(), n + 1))
        })
        .collect()
}

fn plan_text(r: &PlanReply) -> String {
    let mut out = format!("{}\n", r.message);
    for s in &r.steps {
        let mark = match s.decision.as_str() {
            "approve" if r.approved_steps.contains(&s.n) => "approved",
            "approve" => "needs approval",
            "block" => "BLOCKED",
            _ => "ok",
        };
        let _ = writeln!(out, "  {}. {} — {mark}", s.n, s.summary);
        for rule in &s.rules {
            let _ = writeln!(out, "       rule {}: {}", rule.id, rule.message);
        }
    }
    out
}

pub async fn plan(socket: &Path, args: PlanArgs) -> anyhow::Result<u8> {
    let steps = read_plan(&args.file)?;
    let cwd = match &args.cwd {
        Some(c) => std::path::absolute(c).with_context(|| format!("bad --cwd {}", c.display()))?,
        None => std::env::current_dir().context("cannot read the working directory")?,
    };
    let mut client = connect(socket).await?;
    let reply = client
        .request_plan_approval(PlanRequest {
            steps_json: steps,
            cwd: cwd.display().to_string(),
            session_id: args.session.unwrap_or_default(),
            agent: args.agent,
            wait_seconds: args.wait.unwrap_or(0),
        })
        .await
        .map_err(rpc_error("the daemon could not check the plan"))?
        .into_inner();
    if args.json {
        let v = serde_json::json!({
            "status": reply.status,
            "approval_id": reply.approval_id,
            "approved_steps": reply.approved_steps,
            "session_id": reply.session_id,
            "message": reply.message,
            "steps": reply.steps.iter().map(|s| serde_json::json!({
                "n": s.n, "summary": s.summary, "decision": s.decision,
                "rules": s.rules.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        println!("{v}");
    } else {
        print!("{}", plan_text(&reply));
    }
    Ok(match reply.status.as_str() {
        "approved" => 0,
        "block" | "denied" | "expired" => 2,
        _ => 3,
    })
}
