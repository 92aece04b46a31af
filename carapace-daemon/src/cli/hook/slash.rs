//! `/carapace …` typed in Claude Code: the hook receives it as a `UserPromptSubmit` event and
//! answers it itself. The prompt is then withheld from the model (`decision: block`) and the
//! answer shown to the user only, so the model never sees or writes these commands.
//!
//! The daemon still decides who may loosen what: under `carapace run` the hook runs inside
//! the session's cgroup, where disable / enable / reset / approve are refused like any other
//! agent request; the user then runs `carapace session …` in another terminal.
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};

use super::AGENT;
use crate::cli::connect::connect;
use carapace::api::proto::{
    AnswerApprovalRequest, GetSessionRequest, ListApprovalsRequest, ResetSessionRequest,
    SetSessionRuleRequest,
};

const USAGE: &str = "\
/carapace rules              the session's activated and disabled rules
/carapace disable RULE       switch a rule off for this session
/carapace enable RULE        switch it back on
/carapace reset              forget the session's rule state, approvals and history
/carapace approvals          pending approval requests
/carapace approve ID [STEPS] approve a request (a plan: all steps, or e.g. 1-3,5)
/carapace deny ID            deny a request";

/// What a parsed `/carapace` prompt asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slash {
    Help,
    Rules,
    Disable(String),
    Enable(String),
    Reset,
    Approvals,
    Approve(String, String),
    Deny(String),
}

/// A `/carapace` prompt that is no command; shown with the usage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown /carapace command\n{USAGE}")]
pub struct UnknownCommand;

/// Parses a prompt; `None` when it is not a `/carapace` command at all.
#[must_use]
pub fn parse(prompt: &str) -> Option<Result<Slash, UnknownCommand>> {
    let rest = prompt.trim().strip_prefix("/carapace")?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let words: Vec<&str> = rest.split_whitespace().collect();
    Some(match words.as_slice() {
        [] | ["help"] => Ok(Slash::Help),
        ["rules" | "status" | "show"] => Ok(Slash::Rules),
        ["disable", rule] => Ok(Slash::Disable((*rule).to_owned())),
        ["enable", rule] => Ok(Slash::Enable((*rule).to_owned())),
        ["reset"] => Ok(Slash::Reset),
        ["approvals"] => Ok(Slash::Approvals),
        ["approve", id] => Ok(Slash::Approve((*id).to_owned(), String::new())),
        ["approve", id, steps] => Ok(Slash::Approve((*id).to_owned(), (*steps).to_owned())),
        ["deny", id] => Ok(Slash::Deny((*id).to_owned())),
        _ => Err(UnknownCommand),
    })
}

/// Handles a `UserPromptSubmit` event: `None` when the input is another event (the caller
/// goes on), `Some({})` for ordinary prompts, and for `/carapace …` the answer shown to the
/// user with the prompt withheld from the model.
pub async fn user_prompt(socket: &Path, text: &str) -> Option<Value> {
    let event: Value = serde_json::from_str(text).ok()?;
    if event.get("hook_event_name").and_then(Value::as_str) != Some("UserPromptSubmit") {
        return None;
    }
    let prompt = event.get("prompt").and_then(Value::as_str).unwrap_or("");
    let command = match parse(prompt) {
        None => return Some(json!({})),
        Some(Err(usage)) => return Some(shown(&usage.to_string())),
        Some(Ok(c)) => c,
    };
    let external = event
        .get("session_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let answer = run(socket, &command, external)
        .await
        .unwrap_or_else(|e| format!("carapace: {e:#}"));
    Some(shown(&answer))
}

fn shown(text: &str) -> Value {
    json!({ "decision": "block", "reason": text })
}

async fn run(socket: &Path, command: &Slash, external: &str) -> anyhow::Result<String> {
    if *command == Slash::Help {
        return Ok(USAGE.to_owned());
    }
    let mut client = connect(socket).await?;
    let failed =
        |what: &'static str| move |s: tonic::Status| anyhow::anyhow!("{what}: {}", s.message());
    let get = GetSessionRequest {
        agent: AGENT.into(),
        external_id: external.into(),
        ..GetSessionRequest::default()
    };
    Ok(match command {
        Slash::Help => USAGE.to_owned(),
        Slash::Rules => {
            let s = client
                .get_session(get)
                .await
                .map_err(failed("cannot read the session"))?
                .into_inner();
            let mut out = format!("session {}\n", s.id);
            if s.rules.is_empty() {
                out.push_str("no session rules switched on or off");
            }
            for r in &s.rules {
                let _ = writeln!(out, "{} {} ({})", r.state, r.rule_id, r.reason);
            }
            out
        }
        Slash::Disable(rule) | Slash::Enable(rule) => {
            let disabled = matches!(command, Slash::Disable(_));
            client
                .set_session_rule(SetSessionRuleRequest {
                    rule_id: rule.clone(),
                    disabled,
                    agent: AGENT.into(),
                    external_id: external.into(),
                    ..SetSessionRuleRequest::default()
                })
                .await
                .map_err(failed("refused"))?;
            format!(
                "rule {rule} {} for this session",
                if disabled { "disabled" } else { "enabled" }
            )
        }
        Slash::Reset => {
            client
                .reset_session(ResetSessionRequest {
                    agent: AGENT.into(),
                    external_id: external.into(),
                    ..ResetSessionRequest::default()
                })
                .await
                .map_err(failed("refused"))?;
            "session reset".to_owned()
        }
        Slash::Approvals => {
            let list = client
                .list_approvals(ListApprovalsRequest {})
                .await
                .map_err(failed("cannot list approvals"))?
                .into_inner()
                .approvals;
            if list.is_empty() {
                "no pending approval requests".to_owned()
            } else {
                list.iter()
                    .map(|a| format!("{} {} {}", a.id, a.kind, a.summary))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        }
        Slash::Approve(..) | Slash::Deny(_) => {
            let (id, approve, steps) = match command {
                Slash::Approve(id, steps) => (id, true, steps.clone()),
                Slash::Deny(id) => (id, false, String::new()),
                _ => unreachable!("matched above"),
            };
            let a = client
                .answer_approval(AnswerApprovalRequest {
                    approval_id: id.clone(),
                    approve,
                    steps,
                    once: false,
                })
                .await
                .map_err(failed("refused"))?
                .into_inner();
            format!("{} {}", a.id, a.status)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn commands() {
        assert_eq!(parse("hello"), None);
        assert_eq!(parse("/carapacex"), None);
        assert_eq!(parse(" /carapace "), Some(Ok(Slash::Help)));
        assert_eq!(
            parse("/carapace disable no-write-after-web"),
            Some(Ok(Slash::Disable("no-write-after-web".into())))
        );
        assert_eq!(
            parse("/carapace approve ap-1 1-3"),
            Some(Ok(Slash::Approve("ap-1".into(), "1-3".into())))
        );
        assert!(matches!(parse("/carapace disable"), Some(Err(_))));
    }

    proptest! {
        #[test]
        fn parsing_never_panics(prompt in ".{0,80}") {
            let _ = parse(&prompt);
        }
    }
}
