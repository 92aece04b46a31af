//! The operation classifier: `{operation_type, categories, description, confidence}` for a
//! tool call, with the operation types of the personal-agent design
//! ([`schema::OPERATION_TYPES`]). Hints from tool manifests or per-skill settings and the
//! tools whose schema says what they do are answered here without a model call; anything
//! else (a shell command, a skill the agent wrote itself, an MCP tool) is asked of the model
//! and cached per session like verdicts.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::provider::Question;
use super::review::{Reviewer, Subject};
use super::{prompt, schema, LlmError};
use carapace_policy::engine::ToolCall;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    /// One of [`schema::OPERATION_TYPES`].
    pub operation_type: String,
    /// e.g. `finance`, `email`, `documents`.
    pub categories: Vec<String>,
    pub description: String,
    /// 0 to 1.
    pub confidence: f64,
    /// Who decided: `hint`, `tool` (known tool schema) or `model`.
    #[serde(default)]
    pub source: String,
}

/// Operation types declared ahead of time, by tool name (exact, or a prefix ending in `*`
/// such as `mcp__gmail__*`): from tool manifests or a skill's `carapace.yaml`.
#[derive(Clone, Debug, Default)]
pub struct Hints(pub BTreeMap<String, String>);

impl Hints {
    fn lookup(&self, tool: &str) -> Option<&str> {
        if let Some(t) = self.0.get(tool) {
            return Some(t);
        }
        self.0
            .iter()
            .filter_map(|(k, v)| Some((k.strip_suffix('*')?, v)))
            .filter(|(prefix, _)| tool.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, v)| v.as_str())
    }
}

/// What a tool does when its name says it all (Claude Code's tools, the guardrail tasks).
fn known_tool(tool: &str) -> Option<(&'static str, &'static str)> {
    Some(match tool {
        "Read" | "Glob" | "Grep" | "LS" | "NotebookRead" | "FILE_READ" => {
            ("read_local", "reads local files")
        }
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "FILE_WRITE" | "FILE_DELETE"
        | "FOLDER_CREATE" => ("write_local", "changes local files"),
        "WebFetch" | "WebSearch" | "INTERNET_SEARCH" | "WEB_SCRAPE" | "DOWNLOAD_FILE" => {
            ("read_external", "reads content from the internet")
        }
        "API_REQUEST" => ("write_external", "sends a request to an external API"),
        "SYSTEM_COMMAND" | "RUN_TOOL" | "APPLICATION_OPEN" => ("execute", "runs a program"),
        _ => return None,
    })
}

impl Reviewer {
    /// Classifies `call` (whose canonical form is `subject`): from `hints`, from the tool's
    /// name when it is a known tool, else by asking the model.
    pub async fn classify(
        &self,
        session: &str,
        call: &ToolCall,
        subject: &Subject,
        hints: &Hints,
    ) -> Result<Classification, LlmError> {
        if let Some(t) = hints.lookup(&call.tool) {
            if schema::OPERATION_TYPES.contains(&t) {
                return Ok(Classification {
                    operation_type: t.to_owned(),
                    categories: Vec::new(),
                    description: format!("{} (declared by its manifest)", call.tool),
                    confidence: 1.0,
                    source: "hint".into(),
                });
            }
        }
        if let Some((t, what)) = known_tool(&call.tool) {
            return Ok(Classification {
                operation_type: t.to_owned(),
                categories: Vec::new(),
                description: format!("{} {what}", call.tool),
                confidence: 1.0,
                source: "tool".into(),
            });
        }
        let answer: Value = self
            .cached_classification(session, subject, || {
                let tag = prompt::fresh_tag();
                let user = format!(
                    "Classify what the operation below does. operation_type is one of: {}. \
                     read_sensitive / write_sensitive are for personal data (finances, \
                     documents, health, messages); credential_access for fetching passwords, \
                     keys or tokens; memory_* for the agent's persistent memory files; \
                     skill_modify for creating or changing the agent's skills. categories are \
                     short lower-case topics (e.g. finance, email). confidence is 0 to 1.\n\n{}",
                    schema::OPERATION_TYPES.join(", "),
                    prompt::data(&tag, "The operation (untrusted)", &subject_text(subject))
                );
                Question {
                    system: prompt::HIERARCHY.to_owned(),
                    user,
                    schema: schema::classification(),
                }
            })
            .await?;
        let mut c: Classification =
            serde_json::from_value(answer).map_err(|e| LlmError::Malformed(e.to_string()))?;
        c.source = "model".into();
        Ok(c)
    }
}

fn subject_text(subject: &Subject) -> String {
    serde_json::to_string_pretty(&subject.canonical).unwrap_or_default()
}
