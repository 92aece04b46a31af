//! The guardrail profile's answer to a task request (reference 002):
//! `{approved, failed_checks, required_confirmation}`. Every rule is evaluated; a task is
//! approved when no rule fails; CONFIRMATION rules (mode `approve`) never fail a task, they
//! only require confirmation.
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decision::{Decision, Layer, Match};
use crate::rules::{Mode, Profile, RuleSet};

/// Id of the pseudo-rule that rejects a task type the engine does not support.
pub(crate) const UNSUPPORTED_TASK_RULE: &str = "carapace-unsupported-task-type";

/// The answer the guardrail task API returns, in that API's field names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAnswer {
    /// `failed_checks` is empty.
    pub approved: bool,
    /// Ids of the rules the task fails, sorted.
    pub failed_checks: Vec<String>,
    /// A CONFIRMATION rule applies and nobody has confirmed yet.
    pub required_confirmation: bool,
}

impl TaskAnswer {
    /// The answer a decision gives: its block matches fail the task, its approve matches
    /// ask for confirmation unless the user already gave it.
    #[must_use]
    pub fn of(d: &Decision) -> Self {
        let mut failed_checks: Vec<String> = d
            .matches
            .iter()
            .filter(|m| m.mode == Mode::Block)
            .map(|m| m.id.clone())
            .collect();
        failed_checks.sort();
        failed_checks.dedup();
        // A decision below `approve` that still lists approve matches was confirmed by the
        // user (`Decision::approved`).
        let required_confirmation =
            d.decision >= Mode::Approve && d.matches.iter().any(|m| m.mode == Mode::Approve);
        Self {
            approved: failed_checks.is_empty(),
            failed_checks,
            required_confirmation,
        }
    }

    /// Exit status of `carapace check`: 2 rejected, 3 confirmation required, 0 approved.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        if !self.approved {
            2
        } else if self.required_confirmation {
            3
        } else {
            0
        }
    }
}

/// Whether a request is a task (`task_type` + `task_parameters`) rather than a tool call.
#[must_use]
pub(crate) fn is_task(request: &Value) -> bool {
    request.get("task_type").is_some()
}

/// Whether `rules` answer `request` in the guardrail shape: the rule file declares
/// `profile: guardrail` and the request is a task.
#[must_use]
pub fn answers(rules: &RuleSet, request: &Value) -> bool {
    rules.profile() == Some(Profile::Guardrail) && is_task(request)
}

/// [`answers`] for a request as JSON text; parses it only when the profile is declared.
#[must_use]
pub fn answers_json(rules: &RuleSet, request: &str) -> bool {
    rules.profile() == Some(Profile::Guardrail)
        && serde_json::from_str::<Value>(request).is_ok_and(|v| is_task(&v))
}

/// The task type of a request the guardrail profile rejects as unsupported (rather than
/// refusing to evaluate it), or `None`.
#[must_use]
pub fn unsupported_type(rules: &RuleSet, request: &str) -> Option<String> {
    if rules.profile() != Some(Profile::Guardrail) {
        return None;
    }
    let v: Value = serde_json::from_str(request).ok()?;
    match super::ToolCall::from_json(&v) {
        Err(super::CallError::UnknownTask(task)) => Some(task),
        _ => None,
    }
}

/// The rejection of a task whose type is not supported: in the guardrail profile, rule
/// evaluation itself rejects it (rather than an error).
#[must_use]
pub fn unsupported(task_type: &str) -> Decision {
    let m = Match {
        id: UNSUPPORTED_TASK_RULE.into(),
        mode: Mode::Block,
        layer: Layer::ToolCall,
        message: format!(
            "task type `{task_type}` is not supported; supported: {}",
            super::call::TASK_TYPES.join(", ")
        ),
        source: "carapace".into(),
        matched: format!("task type {task_type}"),
        kernel: false,
    };
    Decision::from_matches(task_type, vec![m], Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str, mode: Mode) -> Match {
        Match {
            id: id.into(),
            mode,
            layer: Layer::ToolCall,
            message: String::new(),
            source: String::new(),
            matched: String::new(),
            kernel: false,
        }
    }

    #[test]
    fn confirmation_never_rejects_and_failures_are_listed_once() {
        let d = Decision::from_matches(
            "FILE_DELETE",
            vec![
                m("R_SAFETY_001", Mode::Block),
                m("R_CONFIRMATION_001", Mode::Approve),
                m("R_IO_FILESYSTEM_001", Mode::Block),
                m("R_SAFETY_001", Mode::Block),
                m("some-log", Mode::Log),
            ],
            Vec::new(),
        );
        let a = TaskAnswer::of(&d);
        assert!(!a.approved);
        assert_eq!(a.failed_checks, ["R_IO_FILESYSTEM_001", "R_SAFETY_001"]);
        assert!(a.required_confirmation);
        assert_eq!(a.exit_code(), 2);

        let d = Decision::from_matches(
            "DOWNLOAD_FILE",
            vec![m("R_CONFIRMATION_001", Mode::Approve)],
            Vec::new(),
        );
        let a = TaskAnswer::of(&d);
        assert!(a.approved && a.required_confirmation && a.failed_checks.is_empty());
        assert_eq!(a.exit_code(), 3);
        // Once the user confirmed, confirmation is no longer required.
        let a = TaskAnswer::of(&d.approved("test"));
        assert!(a.approved && !a.required_confirmation);
        assert_eq!(a.exit_code(), 0);
    }

    #[test]
    fn unsupported_task_types_are_rejected_by_evaluation() {
        let a = TaskAnswer::of(&unsupported("FORMAT_DISK"));
        assert!(!a.approved);
        assert_eq!(a.failed_checks, [UNSUPPORTED_TASK_RULE]);
    }
}
