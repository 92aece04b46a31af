//! The two wire protocols: how a question with an expected answer schema becomes a request,
//! and where the structured answer sits in the response. Non-streaming only.
use serde_json::{json, Value};

use super::schema::Schema;
use super::LlmError;
use super::{LlmConfig, Provider};

/// Anthropic API version header the request shape follows.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Room for the structured answer (verdicts are short; rule proposals are longer).
const MAX_TOKENS: u32 = 2048;

/// One question: system instructions, the user message (with any untrusted data already
/// delimited inside it) and the answer's schema.
#[derive(Clone, Debug)]
pub struct Question {
    pub system: String,
    pub user: String,
    pub schema: Schema,
}

/// URL, headers and body of the request for `q`. `key` goes in the provider's auth header.
#[must_use]
pub fn request(
    config: &LlmConfig,
    key: Option<&str>,
    q: &Question,
) -> (String, Vec<(&'static str, String)>, Value) {
    match config.provider {
        Provider::OpenAi => {
            let mut headers = Vec::new();
            if let Some(k) = key {
                headers.push(("authorization", format!("Bearer {k}")));
            }
            let body = json!({
                "model": config.model,
                "stream": false,
                "temperature": 0,
                "messages": [
                    {"role": "system", "content": q.system},
                    {"role": "user", "content": q.user},
                ],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": q.schema.name,
                        "description": q.schema.description,
                        "strict": true,
                        "schema": q.schema.schema,
                    }
                }
            });
            (
                format!("{}/chat/completions", config.base_url),
                headers,
                body,
            )
        }
        Provider::Anthropic => {
            let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
            if let Some(k) = key {
                headers.push(("x-api-key", k.to_owned()));
            }
            let body = json!({
                "model": config.model,
                "max_tokens": MAX_TOKENS,
                "stream": false,
                "temperature": 0,
                "system": q.system,
                "messages": [{"role": "user", "content": q.user}],
                "tools": [{
                    "name": q.schema.name,
                    "description": q.schema.description,
                    "input_schema": q.schema.schema,
                }],
                "tool_choice": {"type": "tool", "name": q.schema.name},
            });
            // `base_url` names the API root; accept it with or without the `/v1` suffix.
            let root = config.base_url.trim_end_matches("/v1");
            (format!("{root}/v1/messages"), headers, body)
        }
    }
}

/// The structured answer inside a successful response body. `Malformed` when the body is
/// not the provider's shape or the answer is not JSON (a retry may help); schema checking
/// is the caller's.
pub fn answer(provider: Provider, body: &[u8], schema: &Schema) -> Result<Value, LlmError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::Malformed(format!("the response is not JSON: {e}")))?;
    match provider {
        Provider::OpenAi => {
            let msg = v
                .pointer("/choices/0/message")
                .ok_or_else(|| LlmError::Malformed("no `choices[0].message`".into()))?;
            if let Some(refusal) = msg.get("refusal").and_then(Value::as_str) {
                return Err(LlmError::Malformed(format!("the model refused: {refusal}")));
            }
            let content = msg
                .get("content")
                .and_then(Value::as_str)
                .ok_or_else(|| LlmError::Malformed("no text in `choices[0].message`".into()))?;
            serde_json::from_str(strip_fence(content)).map_err(|e| {
                LlmError::Malformed(format!(
                    "the answer is not JSON ({e}): {}",
                    excerpt(content)
                ))
            })
        }
        Provider::Anthropic => v
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|b| {
                b.get("type").and_then(Value::as_str) == Some("tool_use")
                    && b.get("name").and_then(Value::as_str) == Some(schema.name)
            })
            .and_then(|b| b.get("input").cloned())
            .ok_or_else(|| {
                LlmError::Malformed(format!("no `{}` tool_use block in the answer", schema.name))
            }),
    }
}

/// Local models sometimes wrap JSON in a Markdown fence despite the schema.
fn strip_fence(s: &str) -> &str {
    let t = s.trim();
    t.strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .and_then(|r| r.strip_suffix("```"))
        .map_or(t, str::trim)
}

/// The start of a body, for error messages (never the request, which may hold secrets).
#[must_use]
pub fn excerpt(s: &str) -> String {
    carapace_policy::engine::shorten(s.trim(), 200)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::llm::schema;

    proptest! {
        /// Whatever a server sends back, reading it never panics.
        #[test]
        fn any_body_is_read_without_panicking(body in prop::collection::vec(any::<u8>(), 0..300),
                                              text in "\\PC{0,200}") {
            let s = schema::verdict();
            for p in [Provider::OpenAi, Provider::Anthropic] {
                let _ = answer(p, &body, &s);
                let _ = answer(p, text.as_bytes(), &s);
                let wrapped = json!({"choices": [{"message": {"content": text}}],
                                     "content": [{"type": "tool_use", "name": "rule_verdict", "input": text}]});
                let _ = answer(p, wrapped.to_string().as_bytes(), &s);
            }
        }
    }

    #[test]
    fn fenced_json_is_accepted() {
        let body = json!({"choices": [{"message": {"content": "```json\n{\"applies\": true, \"reason\": \"r\"}\n```"}}]});
        let v = answer(
            Provider::OpenAi,
            body.to_string().as_bytes(),
            &schema::verdict(),
        )
        .unwrap();
        assert_eq!(v["applies"], json!(true));
    }
}
