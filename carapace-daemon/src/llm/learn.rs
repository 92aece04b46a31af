//! Learning from a transcript (the stop-hook learning agent of the reference design): the
//! user's messages (where corrections are) and the agent's tool calls go to the model as
//! untrusted data; it proposes rules; each proposal becomes rule YAML that must pass the
//! project's validator to be shown. Nothing is ever activated here: the user reviews the
//! YAML and adds what they want to their rule file.
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::Value;

use super::provider::Question;
use super::review::Reviewer;
use super::{prompt, schema, LlmError};
use carapace_policy::engine::transcript;
use carapace_policy::rules::{Options, RuleSet};

/// Largest conversation excerpt sent to the model.
const MAX_CONVERSATION: usize = 64 << 10;
const MAX_DEPTH: usize = 32;

/// A proposal as the model gives it.
#[derive(Clone, Debug, Deserialize)]
struct Proposal {
    id: String,
    description: String,
    mode: String,
    tool: Vec<String>,
    path: Vec<String>,
    command: Vec<String>,
    content: Vec<String>,
    llm_review: bool,
    prompt: String,
}

/// What `learn` found: rule YAML that validates, and why other proposals were dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Learned {
    /// A complete rule file (`version: 1`, `builtin: none`, `rules:`), or empty when no
    /// proposal survived.
    pub yaml: String,
    pub proposed: usize,
    pub rejected: Vec<String>,
}

/// The conversation as lines the model reads: `USER: …` for the user's own words (tool
/// results excluded) and `TOOL CALL: …` for the agent's calls, in order.
#[must_use]
pub fn conversation(text: &str) -> String {
    let mut lines = Vec::new();
    let values: Vec<Value> = match serde_json::from_str::<Value>(text.trim()) {
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .filter_map(|l| serde_json::from_str(l.trim()).ok())
            .collect(),
    };
    for v in &values {
        user_messages(v, &mut lines, 0);
    }
    for c in transcript::parse(text).calls {
        lines.push(format!("TOOL CALL: {} {}", c.call.tool, c.call.input));
    }
    let mut out = lines.join("\n");
    if out.len() > MAX_CONVERSATION {
        let mut end = MAX_CONVERSATION;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

/// Messages with `role: user` (any wrapper around them, as in Claude Code JSONL), text only.
fn user_messages(v: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(o) => {
            if o.get("role").and_then(Value::as_str) == Some("user") {
                let text = match o.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(blocks)) => blocks
                        .iter()
                        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                        .filter_map(|b| b.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => String::new(),
                };
                if !text.trim().is_empty() {
                    out.push(format!("USER: {}", text.trim()));
                }
                return;
            }
            for child in o.values() {
                user_messages(child, out, depth + 1);
            }
        }
        Value::Array(items) => {
            for item in items {
                user_messages(item, out, depth + 1);
            }
        }
        _ => {}
    }
}

impl Reviewer {
    /// Proposes rules from the corrections in `transcript_text`. Never activates them.
    pub async fn learn(&self, transcript_text: &str) -> Result<Learned, LlmError> {
        let llm = self.llm()?;
        let tag = prompt::fresh_tag();
        let user = format!(
            "Below is a conversation between a user and an AI agent. Find the places where \
             the user corrected or stopped the agent (\"don't touch that\", \"never push to \
             main\", \"why did you delete …\"). For each, propose one Carapace rule that \
             would have caught the agent's action before it ran: `tool` lists tool names \
             (e.g. Bash, Write, Edit), `path` path globs (`**` crosses directories, `~` is the \
             home), `command` globs over a shell command line (`*` crosses everything), \
             `content` substrings of the tool input; leave lists empty when not needed, but \
             give at least one of path, command or content. `mode` is block, approve, warn or \
             log. When only a reader can tell (\"changes that weaken authentication\"), set \
             `llm_review` to true and put the question in `prompt`; otherwise false and \"\". \
             `id` is short, lower-case, words joined by `-`. Propose nothing when there is no \
             correction.\n\n{}",
            prompt::data(
                &tag,
                "The conversation (untrusted)",
                &conversation(transcript_text)
            )
        );
        let answer = llm
            .ask(&Question {
                system: prompt::HIERARCHY.to_owned(),
                user,
                schema: schema::proposals(),
            })
            .await?;
        let proposals: Vec<Proposal> = answer
            .get("rules")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| LlmError::Malformed(e.to_string()))?
            .unwrap_or_default();
        Ok(to_yaml(&proposals))
    }
}

fn to_yaml(proposals: &[Proposal]) -> Learned {
    let mut learned = Learned {
        proposed: proposals.len(),
        ..Learned::default()
    };
    let mut kept = Vec::new();
    for p in proposals {
        let rule = rule_yaml(p);
        // Each proposal alone must validate, so one bad proposal does not hide the others.
        let file = format!("version: 1\nbuiltin: none\nrules:\n{rule}");
        let opts = Options {
            resolver: |_| None,
            ..crate::policy_host::options()
        };
        match RuleSet::parse_with("proposal", &file, &opts) {
            Ok(_) => kept.push(rule),
            Err(d) => learned.rejected.push(format!(
                "{}: {}",
                p.id,
                d.errors()
                    .map(|e| e.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
        }
    }
    if !kept.is_empty() {
        learned.yaml = format!("version: 1\nbuiltin: none\nrules:\n{}", kept.join(""));
        // Several proposals together must validate too (e.g. unique ids).
        if let Err(d) = RuleSet::parse_with(
            "proposals",
            &learned.yaml,
            &Options {
                resolver: |_| None,
                ..crate::policy_host::options()
            },
        ) {
            learned.rejected.push(format!("together: {d}"));
            learned.yaml.clear();
        }
    }
    learned
}

/// One proposal as a rule-list item. Strings are written as JSON strings, which are valid
/// YAML double-quoted scalars, so no model text can change the YAML's structure.
fn rule_yaml(p: &Proposal) -> String {
    let q = |s: &str| Value::String(s.to_owned()).to_string();
    let list = |items: &[String]| {
        let quoted: Vec<String> = items.iter().map(|s| q(s)).collect();
        format!("[{}]", quoted.join(", "))
    };
    let id: String =
        p.id.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
    let id = id.trim_matches('-');
    let mut out = format!(
        "  - id: {}\n",
        q(if id.is_empty() { "learned-rule" } else { id })
    );
    let _ = writeln!(out, "    description: {}", q(&p.description));
    let mut conds = Vec::new();
    for (key, items) in [
        ("tool", &p.tool),
        ("path", &p.path),
        ("command", &p.command),
        ("content", &p.content),
    ] {
        if !items.is_empty() {
            conds.push(format!("{key}: {}", list(items)));
        }
    }
    let _ = writeln!(out, "    match: {{ {} }}", conds.join(", "));
    let _ = writeln!(out, "    mode: {}", q(&p.mode));
    if p.llm_review {
        out.push_str("    llm_review: true\n");
        let _ = writeln!(out, "    prompt: {}", q(&p.prompt));
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn proposal(id: &str, path: &[&str]) -> Proposal {
        Proposal {
            id: id.into(),
            description: "d: \"quoted\"\nnext line".into(),
            mode: "block".into(),
            tool: vec![],
            path: path.iter().map(|s| (*s).to_owned()).collect(),
            command: vec![],
            content: vec![],
            llm_review: false,
            prompt: String::new(),
        }
    }

    #[test]
    fn valid_proposals_become_yaml_and_invalid_ones_are_reported() {
        let learned = to_yaml(&[
            proposal("Protect Prod Config", &["/srv/prod/**"]),
            proposal("nothing", &[]),
        ]);
        assert_eq!(learned.proposed, 2);
        assert!(
            learned.yaml.contains("id: \"protect-prod-config\""),
            "{}",
            learned.yaml
        );
        assert!(!learned.yaml.contains("nothing"));
        assert_eq!(learned.rejected.len(), 1, "{:?}", learned.rejected);
        assert!(RuleSet::parse_with("x", &learned.yaml, &crate::policy_host::options()).is_ok());
    }

    #[test]
    fn conversations_keep_user_words_and_tool_calls() {
        let t = r#"{"messages": [
            {"role": "user", "content": "tidy the repo"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "1", "name": "Bash", "input": {"command": "rm -rf build"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "1", "content": "ok"}, {"type": "text", "text": "never delete build/"}]}
        ]}"#;
        let c = conversation(t);
        assert!(c.contains("USER: tidy the repo"), "{c}");
        assert!(c.contains("USER: never delete build/"), "{c}");
        assert!(!c.contains("USER: ok"), "{c}");
        assert!(c.contains("TOOL CALL: Bash"), "{c}");
    }

    proptest! {
        /// Whatever the model proposes, the YAML either validates or is dropped.
        #[test]
        fn any_proposal_yields_valid_yaml_or_nothing(
            id in "\\PC{0,20}", desc in "\\PC{0,40}", path in "\\PC{0,30}",
            cmd in "\\PC{0,30}", mode in prop::sample::select(vec!["block", "warn", "bogus"]),
            review in any::<bool>(), prompt_text in "\\PC{0,30}",
        ) {
            let p = Proposal {
                id, description: desc, mode: mode.into(), tool: vec![], path: vec![path],
                command: vec![cmd], content: vec![], llm_review: review, prompt: prompt_text,
            };
            let learned = to_yaml(&[p]);
            if !learned.yaml.is_empty() {
                prop_assert!(RuleSet::parse_with("x", &learned.yaml, &crate::policy_host::options()).is_ok());
            }
        }

        #[test]
        fn any_transcript_text_never_panics(text in "\\PC{0,300}") {
            let _ = conversation(&text);
        }
    }
}
