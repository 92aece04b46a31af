//! Layers 0 and 1: what a tool call does (`call`, `shell`, `normalize` → `operation`), and
//! which rules it meets (`evaluate` → `decision`). Deterministic and order-independent:
//! every rule is checked, the strictest mode wins.
pub(crate) mod call;
pub(crate) mod decision;
pub(crate) mod evaluate;
pub mod guardrail;
pub(crate) mod hostname;
pub(crate) mod invocation;
pub mod names;
pub(crate) mod normalize;
pub(crate) mod operation;
pub(crate) mod patch;
pub mod shell;
pub mod transcript;

pub use call::{CallError, ToolCall};
pub use decision::{Decision, Layer, Match};
pub use evaluate::{evaluate, fired_triggers, Activation};
pub use operation::{Context, Extracted, Operation};

use crate::rules::RuleSet;

/// `s` cut to at most `max` bytes (on a character boundary), with `…` when cut: for messages
/// that quote what a call or a server said.
#[must_use]
pub fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Checks one tool call (Layer 1).
#[must_use]
pub fn check(rules: &RuleSet, call: &ToolCall, ctx: &Context, activation: &Activation) -> Decision {
    let ext = call.extract(ctx);
    let matches = evaluate::matches(rules, &ext, activation, Layer::ToolCall);
    Decision::from_matches(&ext.tool, matches, ext.ops)
}

/// What Layer 0 found in a transcript.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HistoryReport {
    /// How many past calls the transcript holds (those judged before included).
    pub tool_calls: usize,
    /// Blocked past calls: their position among the transcript's calls, and the decision.
    pub findings: Vec<(usize, Decision)>,
    /// "bad agent detected: …", or empty when the history is clean.
    pub message: String,
}

impl HistoryReport {
    /// No past call is blocked: the session may go on.
    #[must_use]
    pub fn clean(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Layer 0: every past tool call of `transcript`, checked as if it were made now. Parts of
/// the transcript that cannot be read count as findings (fail closed).
#[must_use]
pub fn scan_history(
    rules: &RuleSet,
    transcript: &str,
    ctx: &Context,
    activation: &Activation,
) -> HistoryReport {
    scan_transcript(
        rules,
        &transcript::parse(transcript),
        ctx,
        activation,
        |_| false,
    )
}

/// [`scan_history`] over a transcript already read, skipping the calls `judged_clean` says
/// were found clean before (under the same rules and context): a conversation grows by a
/// few calls per turn, and only those need judging.
#[must_use]
pub fn scan_transcript(
    rules: &RuleSet,
    parsed: &transcript::Transcript,
    ctx: &Context,
    activation: &Activation,
    judged_clean: impl Fn(usize) -> bool,
) -> HistoryReport {
    let mut findings = Vec::new();
    for (i, past) in parsed.calls.iter().enumerate() {
        if judged_clean(i) {
            continue;
        }
        let ctx = match &past.cwd {
            Some(cwd) if cwd.starts_with('/') => Context {
                cwd: cwd.clone(),
                ..ctx.clone()
            },
            _ => ctx.clone(),
        };
        let ext = past.call.extract(&ctx);
        let d = evaluate(rules, &ext, activation, Layer::History);
        if d.decision == crate::rules::Mode::Block {
            findings.push((i, d));
        }
    }
    if !parsed.unreadable.is_empty() {
        let mut ext = Extracted::new("transcript");
        for why in &parsed.unreadable {
            ext.unparsable(format!("the transcript could not be read ({why})"));
        }
        findings.push((
            parsed.calls.len(),
            evaluate(rules, &ext, activation, Layer::History),
        ));
    }
    HistoryReport::new(parsed.calls.len(), findings)
}

impl HistoryReport {
    /// The report for `findings` among `tool_calls` past calls, with its message.
    #[must_use]
    pub fn new(tool_calls: usize, findings: Vec<(usize, Decision)>) -> Self {
        let message = if findings.is_empty() {
            String::new()
        } else {
            let listed: Vec<String> = findings
                .iter()
                .map(|(i, d)| {
                    let top = d.matches.first();
                    format!(
                        "#{} {} ({}) [rule {}]",
                        i + 1,
                        d.tool,
                        top.map_or("", |m| m.matched.as_str()),
                        top.map_or("", |m| m.id.as_str())
                    )
                })
                .collect();
            format!(
                "bad agent detected: the conversation already holds {} tool call(s) that \
                 Carapace blocks: {}. Start a new session; do not continue this one.",
                findings.len(),
                listed.join("; ")
            )
        };
        Self {
            tool_calls,
            findings,
            message,
        }
    }
}

/// Case files (the packs' fixtures, the corpus): run by the tests, and replayed against a
/// proposed rule change (`rules::amend`).
pub(crate) mod cases;
#[cfg(test)]
mod run_spelling_tests;
#[cfg(test)]
mod spelling_tests;
#[cfg(test)]
mod tests;
