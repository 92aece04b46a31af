//! The gateway's one decision point: what happens to a tool call the model asks for, and
//! to a conversation whose history holds blocked calls. Everything else in the gateway only
//! finds calls in a provider's format and rewrites the answer.
use std::sync::Arc;

use serde_json::Value;

use crate::api::Daemon;
use crate::engine::{self, Activation, Context, ToolCall};
use crate::rules::validate::mode_name;
use crate::rules::{Mode, RuleSet};

/// Histories up to this size are scanned on the request's own task.
const INLINE_HISTORY: usize = 64 << 10;

/// Where the gateway gets the rules in force at the moment of each decision.
pub trait RuleSource: Send + Sync {
    fn rules(&self) -> Arc<RuleSet>;
}

impl RuleSource for Daemon {
    fn rules(&self) -> Arc<RuleSet> {
        Daemon::rules(self)
    }
}

/// A fixed rule set (benchmarks, and tests of the gateway without a daemon).
impl RuleSource for Arc<RuleSet> {
    fn rules(&self) -> Arc<RuleSet> {
        Arc::clone(self)
    }
}

/// A tool call found in a model's answer, not yet passed on.
#[derive(Clone, Debug)]
pub struct PendingCall {
    /// Which call of the answer (the content block index, the tool call index, …).
    pub key: usize,
    pub tool: String,
    /// The input, or why it could not be read (refused: fail closed).
    pub input: Result<Value, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Replace the call by this text for the agent.
    Refuse(String),
}

/// Decides with the rules of `source`, in the agent's context.
#[derive(Clone)]
pub struct Gate {
    source: Arc<dyn RuleSource>,
}

impl Gate {
    #[must_use]
    pub fn new(source: Arc<dyn RuleSource>) -> Self {
        Self { source }
    }

    /// Layer 1 for one call. Approve-mode calls are refused for now with a message saying
    /// approval is required; this is the place to wait for the user's answer instead.
    #[expect(
        clippy::unused_async,
        reason = "waiting for the user's approval (issue 6) will await here"
    )]
    pub async fn tool_call(&self, ctx: &Context, call: &PendingCall) -> Verdict {
        let input = match &call.input {
            Ok(input) => input.clone(),
            Err(why) => {
                tracing::warn!(tool = %call.tool, decision = "block", "gateway: unreadable tool input");
                return Verdict::Refuse(format!(
                    "[Carapace] The {} call was not run: its input could not be read ({why}), \
                     and Carapace does not pass on what it cannot check.",
                    call.tool
                ));
            }
        };
        let tool_call = ToolCall {
            tool: call.tool.clone(),
            input,
        };
        let d = engine::check(
            &self.source.rules(),
            &tool_call,
            ctx,
            &Activation::default(),
        );
        let rules: Vec<&str> = d.matches.iter().map(|m| m.id.as_str()).collect();
        if d.decision >= Mode::Warn {
            tracing::info!(
                tool = %d.tool,
                decision = mode_name(d.decision),
                rules = %rules.join(","),
                "gateway: tool call"
            );
        }
        match d.decision {
            Mode::Block => Verdict::Refuse(format!(
                "[Carapace] The {} call was not run. {}",
                d.tool, d.message
            )),
            Mode::Approve => Verdict::Refuse(format!(
                "[Carapace] The {} call was not run. {} Approval through the model-API \
                 gateway is not available yet, so the call was withheld: ask the user to run \
                 it themselves or to change the rules.",
                d.tool, d.message
            )),
            Mode::Warn | Mode::Log | Mode::Allow => Verdict::Pass,
        }
    }

    /// Layer 0 over a conversation's past calls: the "bad agent detected: …" message when
    /// the history holds blocked calls.
    pub async fn history(&self, ctx: &Context, transcript: String) -> Option<String> {
        let small = transcript.len() <= INLINE_HISTORY;
        let rules = self.source.rules();
        let scan = move |ctx: Context| {
            engine::scan_history(&rules, &transcript, &ctx, &Activation::default())
        };
        // A long conversation takes a while to scan: off the async workers then. A short one
        // costs less than the hand-over to a blocking thread and back.
        let report = if small {
            Ok(scan(ctx.clone()))
        } else {
            let ctx = ctx.clone();
            tokio::task::spawn_blocking(move || scan(ctx)).await
        };
        match report {
            Ok(r) if r.clean() => None,
            Ok(r) => {
                let rules: Vec<&str> = r
                    .findings
                    .iter()
                    .filter_map(|(_, d)| d.matches.first().map(|m| m.id.as_str()))
                    .collect();
                tracing::warn!(
                    decision = "block",
                    rules = %rules.join(","),
                    "gateway: the conversation's history holds blocked tool calls"
                );
                Some(r.message)
            }
            Err(e) => Some(format!(
                "bad agent detected: Carapace could not scan the conversation ({e})"
            )),
        }
    }
}
