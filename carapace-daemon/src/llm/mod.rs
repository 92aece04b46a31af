//! LLM review: what rules cannot decide alone (an `llm_review` rule's `prompt`, a
//! plain-English `trigger` or `effect`, what an unknown tool does) is asked of a fast model,
//! only after a deterministic gate says so, and the answer can only tighten a decision.
//!
//! - the `llm:` section of `$CARAPACE_DATA_DIR/config.yaml` ([`LlmConfig`]) is read with the
//!   rest of the file (`crate::config::llm`).
//! - `http`, `provider`: OpenAI-compatible chat completions and the Anthropic Messages API
//!   over real HTTP, structured output (JSON schema / forced tool use), non-streaming.
//! - `schema`: the answers' schemas and their check on receipt.
//! - `client`: one question → one checked answer (retry on malformed output, timeout,
//!   concurrency limit, counters).
//! - `prompt`: the instruction hierarchy, and untrusted content as delimited data.
//! - `review`: `llm_review` rules in a decision, plain-English applicability, the verdict
//!   cache; `classify`: the operation classifier; `learn`: rules proposed from a transcript.
pub mod classify;
pub mod client;
pub mod http;
pub mod learn;
pub mod prompt;
pub mod provider;
pub mod review;
pub mod schema;

pub use crate::config::llm::{LlmConfig, Provider};
pub use client::{Llm, Stats};
pub use review::{Reviewer, Verdict};

use std::time::Duration;

/// Why a model could not give a usable answer; a rule's `on_llm_error` then applies.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// No model to ask; says why (e.g. no `llm:` section in config.yaml).
    #[error("LLM review is unavailable: {0}")]
    Unavailable(String),
    #[error("the API key variable `{0}` is not set or empty")]
    MissingKey(String),
    #[error("cannot reach the model: {0}")]
    Transport(String),
    #[error("the model server answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("the model's answer is malformed: {0}")]
    Malformed(String),
    #[error("rule `{rule}` has no plain-English {part}")]
    NotPlainEnglish { rule: String, part: &'static str },
}

#[cfg(test)]
mod tests;
