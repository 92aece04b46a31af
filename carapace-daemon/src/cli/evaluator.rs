//! Where a CLI front door gets its decisions: from the daemon (its rules, the session's
//! state) or, when asked or when the daemon is not running, from rules compiled here.
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tokio::net::UnixStream;
use tonic::transport::Channel;

use super::connect::connect;
use super::one_call::{self, OneCallError};
use carapace::api::proto::carapace_client::CarapaceClient;
use carapace::api::proto::{EvaluateReply, EvaluateRequest, ScanHistoryRequest};
use carapace::llm::review::Subject;
use carapace::llm::Reviewer;
use carapace::paths::DEFAULT_DATA_DIR;
use carapace_policy::engine::guardrail::{self, TaskAnswer};
use carapace_policy::engine::{
    self, Activation, CallError, Context, Decision, HistoryReport, Layer, ToolCall,
};
use carapace_policy::rules::RuleSet;

/// Which rules to evaluate with.
#[derive(Clone, Debug, clap::Args)]
pub struct Source {
    /// Evaluate locally with the built-in packs and this rule file (no daemon)
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Evaluate locally even if the daemon runs (built-in packs, plus
    /// `$CARAPACE_DATA_DIR/rules.yaml` when readable)
    #[arg(long)]
    pub local: bool,
    /// Working directory relative paths in the call resolve against (default: this one)
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
}

/// How to behave when the daemon cannot be reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Evaluate locally and say so on stderr (`carapace check`).
    Local,
    /// Fail: the caller turns that into a refusal (the hook).
    Fail,
}

/// The agent session a call belongs to, as the harness names it, and how long to wait
/// for an approval.
#[derive(Clone, Debug, Default)]
pub struct InSession {
    /// e.g. `claude-code`.
    pub agent: String,
    /// The harness's session id ("" for none).
    pub external_id: String,
    pub wait_seconds: u32,
}

/// A decision with what the daemon's session machinery added to it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Verdict {
    #[serde(flatten)]
    pub decision: Decision,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub approval_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub approval_status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub session_id: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub activated: Vec<String>,
    /// The guardrail profile's answer, when the rules declare it and the call is a task
    /// (`carapace check` then prints this instead).
    #[serde(skip)]
    pub task_answer: Option<TaskAnswer>,
}

impl Verdict {
    #[must_use]
    pub fn plain(decision: Decision) -> Self {
        Self {
            decision,
            approval_id: String::new(),
            approval_status: String::new(),
            session_id: String::new(),
            activated: Vec::new(),
            task_answer: None,
        }
    }
}

pub enum Evaluator {
    Local {
        /// Loaded once per process and kept to its end: freeing thousands of matchers just
        /// before `exit` was a measurable part of a one-call `hook --local`.
        rules: &'static RuleSet,
        ctx: Context,
    },
    Daemon {
        client: CarapaceClient<Channel>,
        cwd: String,
    },
    /// The daemon, for one call on its direct wire (the connection made when opening).
    OneCall {
        stream: Option<UnixStream>,
        socket: PathBuf,
        cwd: String,
    },
}

fn local_rules(file: Option<&Path>) -> anyhow::Result<RuleSet> {
    let default = std::env::var_os("CARAPACE_DATA_DIR")
        .map_or_else(|| PathBuf::from(DEFAULT_DATA_DIR), PathBuf::from)
        .join("rules.yaml");
    let path = match file {
        Some(p) => Some(p.to_path_buf()),
        None => std::fs::File::open(&default).is_ok().then_some(default),
    };
    RuleSet::load_for_layer1(path.as_deref(), &carapace::policy_host::options())
        .map_err(|d| anyhow::anyhow!("{d}"))
        .with_context(|| match &path {
            Some(p) => format!("the rules in {} do not validate", p.display()),
            None => "the built-in packs do not compile".to_owned(),
        })
}

impl Evaluator {
    pub async fn open(socket: &Path, source: &Source, fallback: Fallback) -> anyhow::Result<Self> {
        Self::open_as(socket, source, fallback, false).await
    }

    /// Like [`Evaluator::open`], for a process that makes one call: the daemon is asked on
    /// its direct wire, without an HTTP/2 connection (a later call, or a daemon that
    /// predates the wire, goes over gRPC).
    pub async fn open_for_one_call(
        socket: &Path,
        source: &Source,
        fallback: Fallback,
    ) -> anyhow::Result<Self> {
        Self::open_as(socket, source, fallback, true).await
    }

    async fn open_as(
        socket: &Path,
        source: &Source,
        fallback: Fallback,
        one_call: bool,
    ) -> anyhow::Result<Self> {
        let cwd = match &source.cwd {
            Some(c) => {
                std::path::absolute(c).with_context(|| format!("bad --cwd {}", c.display()))?
            }
            None => std::env::current_dir().context("cannot read the working directory")?,
        }
        .display()
        .to_string();
        let local = |cwd: String| -> anyhow::Result<Self> {
            let rules: &'static RuleSet =
                Box::leak(Box::new(local_rules(source.rules.as_deref())?));
            let ctx = Context {
                cwd,
                ..carapace::policy_host::current_context()
            };
            Ok(Self::Local { rules, ctx })
        };
        if source.local || source.rules.is_some() {
            return local(cwd);
        }
        // Not there: the gRPC connection below fails the same way, and says so.
        if one_call {
            if let Ok(stream) = UnixStream::connect(socket).await {
                return Ok(Self::OneCall {
                    stream: Some(stream),
                    socket: socket.to_path_buf(),
                    cwd,
                });
            }
        }
        match connect(socket).await {
            Ok(client) => Ok(Self::Daemon { client, cwd }),
            Err(e) if fallback == Fallback::Local => {
                eprintln!("carapace: {e:#}; evaluating locally with the built-in packs");
                local(cwd)
            }
            Err(e) => Err(e),
        }
    }

    /// Layer 1 for one call (the JSON shapes of [`ToolCall::from_json`]); `cwd` overrides
    /// the working directory for this call.
    pub async fn check(
        &mut self,
        call: &serde_json::Value,
        cwd: Option<&str>,
    ) -> anyhow::Result<Decision> {
        self.check_in(call, cwd, &InSession::default())
            .await
            .map(|v| v.decision)
    }

    /// Like [`Evaluator::check`], in the agent's session, possibly waiting for the user's
    /// answer to an approval request. Local evaluation has no sessions.
    pub async fn check_in(
        &mut self,
        call: &serde_json::Value,
        cwd: Option<&str>,
        session: &InSession,
    ) -> anyhow::Result<Verdict> {
        match self {
            Self::Local { rules, ctx } => {
                let answers = guardrail::answers(rules, call);
                let call = match ToolCall::from_json(call) {
                    Ok(c) => c,
                    Err(CallError::UnknownTask(task)) if answers => {
                        let d = guardrail::unsupported(&task);
                        return Ok(Verdict {
                            task_answer: Some(TaskAnswer::of(&d)),
                            ..Verdict::plain(d)
                        });
                    }
                    Err(e) => return Err(e.into()),
                };
                let ctx = match cwd {
                    Some(c) if c.starts_with('/') => Context {
                        cwd: c.to_owned(),
                        ..ctx.clone()
                    },
                    _ => ctx.clone(),
                };
                let ext = call.extract(&ctx);
                let d = engine::evaluate(rules, &ext, &Activation::default(), Layer::ToolCall);
                let with_answer = |d: Decision| Verdict {
                    task_answer: answers.then(|| TaskAnswer::of(&d)),
                    ..Verdict::plain(d)
                };
                if !Reviewer::needed(rules) {
                    return Ok(with_answer(d));
                }
                // The model and its key stay with the daemon: here, rules it would decide get
                // their `on_llm_error` mode, as in a daemon without a model.
                let local = Reviewer::unavailable(
                    "local evaluation does not ask a model; run carapaced with an `llm:` section",
                );
                let subject = Subject::new(&call, &ext);
                Ok(with_answer(
                    local
                        .review_decision("local", rules, &Activation::default(), &subject, d)
                        .await,
                ))
            }
            Self::Daemon {
                client,
                cwd: default_cwd,
            } => {
                let req = evaluate_request(call, cwd.unwrap_or(default_cwd), session);
                verdict(grpc_evaluate(client, req).await?)
            }
            Self::OneCall {
                stream,
                cwd: default_cwd,
                ..
            } => {
                let req = evaluate_request(call, cwd.unwrap_or(default_cwd), session);
                let answered = match stream.take() {
                    Some(stream) => one_call::evaluate(stream, &req).await,
                    None => Err(OneCallError::Unanswered(
                        std::io::ErrorKind::NotConnected.into(),
                    )),
                };
                let reply = match answered {
                    Ok(reply) => reply,
                    Err(OneCallError::Refused(message)) => {
                        anyhow::bail!("the daemon could not evaluate the call: {message}")
                    }
                    Err(_) => {
                        // The wire was not understood or broke: ask over gRPC from now on.
                        let (client, _) = self.daemon().await?;
                        grpc_evaluate(client, req).await?
                    }
                };
                verdict(reply)
            }
        }
    }

    /// The daemon's gRPC client and the default working directory, connecting one for a
    /// one-call evaluator (a second call, a daemon that predates the direct wire, or what the
    /// wire does not carry).
    async fn daemon(&mut self) -> anyhow::Result<(&mut CarapaceClient<Channel>, &str)> {
        if let Self::OneCall { socket, cwd, .. } = self {
            let client = connect(socket).await?;
            *self = Self::Daemon {
                client,
                cwd: std::mem::take(cwd),
            };
        }
        match self {
            Self::Daemon { client, cwd } => Ok((client, cwd.as_str())),
            _ => anyhow::bail!("local evaluation has no daemon to ask"),
        }
    }

    /// Layer 0 over a whole transcript.
    pub async fn scan_history(&mut self, transcript: &str) -> anyhow::Result<HistoryReport> {
        if let Self::Local { rules, ctx } = self {
            return Ok(carapace::llm::review::unreviewed_history(
                rules,
                engine::scan_history(rules, transcript, ctx, &Activation::default()),
            ));
        }
        let (client, cwd) = self.daemon().await?;
        let cwd = cwd.to_owned();
        let reply = client
            .scan_history(ScanHistoryRequest {
                transcript: transcript.to_owned(),
                cwd,
            })
            .await
            .map_err(|s| {
                anyhow::anyhow!("the daemon could not scan the transcript: {}", s.message())
            })?
            .into_inner();
        let findings = reply
            .findings
            .into_iter()
            .map(|f| {
                let json = f.decision.map(|d| d.decision_json).unwrap_or_default();
                let d: Decision = serde_json::from_str(&json)
                    .context("the daemon's decision is not the JSON this carapace understands")?;
                Ok((f.index as usize, d))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(HistoryReport {
            tool_calls: reply.tool_calls as usize,
            findings,
            message: reply.message,
        })
    }
}

fn evaluate_request(call: &serde_json::Value, cwd: &str, session: &InSession) -> EvaluateRequest {
    EvaluateRequest {
        call_json: call.to_string(),
        cwd: cwd.to_owned(),
        session_id: session.external_id.clone(),
        agent: session.agent.clone(),
        wait_seconds: session.wait_seconds,
    }
}

async fn grpc_evaluate(
    client: &mut CarapaceClient<Channel>,
    req: EvaluateRequest,
) -> anyhow::Result<EvaluateReply> {
    Ok(client
        .evaluate(req)
        .await
        .map_err(|s| anyhow::anyhow!("the daemon could not evaluate the call: {}", s.message()))?
        .into_inner())
}

/// The daemon's answer, as the CLI shows it.
fn verdict(reply: EvaluateReply) -> anyhow::Result<Verdict> {
    let decision = serde_json::from_str(&reply.decision_json)
        .context("the daemon's decision is not the JSON this carapace understands")?;
    Ok(Verdict {
        decision,
        approval_id: reply.approval_id,
        approval_status: reply.approval_status,
        session_id: reply.session_id,
        activated: reply.activated,
        task_answer: reply.task_answer.map(|a| TaskAnswer {
            approved: a.approved,
            failed_checks: a.failed_checks,
            required_confirmation: a.required_confirmation,
        }),
    })
}
