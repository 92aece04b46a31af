//! The answer to a tool call: the strictest mode among every matched rule, each match with
//! its id, mode, layer and message, and one friendly message for the agent.
use serde::{Deserialize, Serialize};

use super::operation::Operation;
use crate::rules::Mode;

/// Where a match was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    /// Layer 0: a past tool call in the conversation history.
    History,
    /// Layer 1: a tool call about to run.
    ToolCall,
}

/// One rule that matched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Match {
    /// The rule's id (or a pseudo-rule's, such as `UNPARSABLE_RULE`).
    pub id: String,
    /// The rule's mode for this call (its mode for an unknown target where that applies).
    pub mode: Mode,
    /// Whether a call about to run or a past one matched.
    pub layer: Layer,
    /// The rule's friendly message for the agent.
    pub message: String,
    /// `builtin:<pack>` or the rule file.
    pub source: String,
    /// What in the call matched, e.g. `read /home/u/.ssh/id_rsa`.
    pub matched: String,
    /// The kernel enforces this rule too (whatever slips past Layer 1 still gets EACCES).
    pub kernel: bool,
}

/// Id of the pseudo-rule that refuses input Carapace cannot understand (fail closed).
pub const UNPARSABLE_RULE: &str = "carapace-unparsable-input";

/// The rules' answer to one tool call, what the hook, the API and the gateway pass on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The strictest mode among the matches; `allow` when none.
    pub decision: Mode,
    /// The tool's name as the agent gave it.
    pub tool: String,
    /// For the agent: what was refused, by which rule, and what to do instead.
    pub message: String,
    /// Every rule that matched, strictest first (see [`Decision::from_matches`]).
    pub matches: Vec<Match>,
    /// What the call was found to do, shown with the decision (`carapace check`, audit).
    pub operations: Vec<Operation>,
}

impl Decision {
    /// Exit status of `carapace check`: 0 allow (log and warn included), 2 blocked,
    /// 3 approval required.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self.decision {
            Mode::Block => 2,
            Mode::Approve => 3,
            Mode::Allow | Mode::Log | Mode::Warn => 0,
        }
    }

    /// Builds the decision from every match (in rule order, which is deterministic).
    #[must_use]
    pub fn from_matches(tool: &str, mut matches: Vec<Match>, operations: Vec<Operation>) -> Self {
        // Strictest first, then by id: the answer (and the rule its message names) does not
        // depend on the order rules were written in.
        matches.sort_by(|a, b| b.mode.cmp(&a.mode).then_with(|| a.id.cmp(&b.id)));
        let decision = matches.first().map_or(Mode::Allow, |m| m.mode);
        let message = friendly(tool, decision, &matches);
        Self {
            decision,
            tool: tool.to_owned(),
            message,
            matches,
            operations,
        }
    }

    /// The user approved this operation (`how` says when): approve-mode matches no longer
    /// hold it back; anything stricter still does.
    #[must_use]
    pub fn approved(mut self, how: &str) -> Self {
        if self.decision != Mode::Approve {
            return self;
        }
        self.decision = self
            .matches
            .iter()
            .map(|m| m.mode)
            .filter(|m| *m != Mode::Approve)
            .max()
            .unwrap_or(Mode::Allow);
        let ids: Vec<&str> = self
            .matches
            .iter()
            .filter(|m| m.mode == Mode::Approve)
            .map(|m| m.id.as_str())
            .collect();
        self.message = format!(
            "Carapace allows this {} call: the user approved it ({how}) [rule {}]",
            self.tool,
            ids.join(", ")
        );
        self
    }
}

fn friendly(tool: &str, decision: Mode, matches: &[Match]) -> String {
    let Some(top) = matches.first() else {
        return format!("Carapace allows this {tool} call.");
    };
    let verb = match decision {
        Mode::Block => "blocked",
        Mode::Approve => "needs your user's approval for",
        Mode::Warn => "warns about",
        Mode::Log => "logged",
        Mode::Allow => "allows",
    };
    let mut out = format!(
        "Carapace {verb} this {tool} call ({}): {} [rule {}]",
        top.matched, top.message, top.id
    );
    let others: Vec<&str> = matches[1..]
        .iter()
        .filter(|m| m.mode == decision)
        .map(|m| m.id.as_str())
        .collect();
    if !others.is_empty() {
        out.push_str(" — also matched: ");
        out.push_str(&others.join(", "));
    }
    match decision {
        Mode::Block if top.kernel => out.push_str(
            ". Do not retry it another way (the kernel refuses it too); choose a different \
             approach or ask the user.",
        ),
        Mode::Block => out.push_str(
            ". Do not retry it another way; choose a different approach or ask the user.",
        ),
        Mode::Approve => out.push_str(". Wait for the user's answer before going on."),
        _ => {}
    }
    out
}
