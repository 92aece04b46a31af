//! The `llm:` section of `$CARAPACE_DATA_DIR/config.yaml`: which model reviews what rules
//! cannot decide alone (`crate::llm`), and which `carapace learn` asks. No section (or no
//! file) means LLM review is unavailable, and every rule that needs it falls back to its
//! `on_llm_error` mode.
//!
//! ```yaml
//! llm:
//!   provider: openai            # openai (any chat-completions server) | anthropic
//!   base_url: http://127.0.0.1:11434/v1
//!   model: llama3.1
//!   api_key_env: OPENAI_API_KEY # the variable holding the key (never the key itself)
//!   timeout_ms: 10000
//!   max_concurrency: 4
//! ```
use std::time::Duration;

use carapace_policy::rules::diag::{did_you_mean, Sink};
use carapace_policy::rules::yaml::{Node, NodeKind, Span};

const LLM_KEYS: &[&str] = &[
    "provider",
    "base_url",
    "model",
    "api_key_env",
    "timeout_ms",
    "max_concurrency",
];
const PROVIDERS: &[&str] = &["openai", "anthropic"];

/// Default time a review may take before the rule's `on_llm_error` applies.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_CONCURRENCY: usize = 4;
/// A tool call waits for its review; minutes-long timeouts would stall the agent.
const MAX_TIMEOUT_MS: u64 = 300_000;
const MAX_CONCURRENCY: u64 = 256;

/// Which wire protocol the model server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// `POST {base_url}/chat/completions` with `response_format: json_schema`
    /// (`OpenAI`, and local servers such as Ollama, llama.cpp and vLLM).
    OpenAi,
    /// `POST {base_url}/v1/messages` with a forced tool call for structured output.
    Anthropic,
}

impl Provider {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    #[must_use]
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAi => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmConfig {
    pub provider: Provider,
    /// Without a trailing `/`.
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable that holds the API key; `None` for servers that
    /// need none (local models).
    pub api_key_env: Option<String>,
    pub timeout: Duration,
    pub max_concurrency: usize,
}

impl LlmConfig {
    /// The API key, read from the configured variable at each use so a rotated key takes
    /// effect without a restart. Never logged.
    #[must_use]
    pub fn api_key(&self) -> Option<String> {
        self.api_key_env
            .as_deref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| !k.is_empty())
    }
}

/// Reads the `llm:` mapping; problems go to `sink` at their position. `None` when it is
/// empty or has errors.
pub(crate) fn parse(node: &Node, sink: &mut Sink) -> Option<LlmConfig> {
    if !super::section(node, "llm", LLM_KEYS, "provider: openai", sink) {
        return None;
    }
    let provider = match text(node, "provider", sink) {
        Some((p, _)) if p == "openai" => Some(Provider::OpenAi),
        Some((p, _)) if p == "anthropic" => Some(Provider::Anthropic),
        Some((p, span)) => {
            sink.error(
                span,
                None,
                format!("unknown provider `{p}`"),
                &format!(
                    "{} (`openai` also covers Ollama, llama.cpp and vLLM)",
                    did_you_mean(&p, PROVIDERS)
                ),
            );
            None
        }
        None => {
            sink.error(
                node.span,
                None,
                "`llm` needs a `provider`".into(),
                "add `provider: openai` or `provider: anthropic`",
            );
            None
        }
    };
    let model = text(node, "model", sink).map(|(m, _)| m);
    if model.is_none() && node.get("model").is_none() {
        sink.error(
            node.span,
            None,
            "`llm` needs a `model`".into(),
            "add e.g. `model: claude-haiku-4-5` or the name your local server uses",
        );
    }
    let base_url = match text(node, "base_url", sink) {
        Some((url, span)) => {
            if url.starts_with("http://") || url.starts_with("https://") {
                Some(url.trim_end_matches('/').to_owned())
            } else {
                sink.error(
                    span,
                    None,
                    format!("`base_url` `{url}` is not an http:// or https:// URL"),
                    "write e.g. `base_url: http://127.0.0.1:11434/v1`",
                );
                None
            }
        }
        None => provider.map(|p| p.default_base_url().to_owned()),
    };
    let api_key_env = text(node, "api_key_env", sink).and_then(|(v, span)| {
        let ok = !v.is_empty()
            && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !v.starts_with(|c: char| c.is_ascii_digit());
        if ok {
            Some(v)
        } else {
            sink.error(
                span,
                None,
                format!("`api_key_env` `{v}` is not an environment variable name"),
                "name the variable that holds the key (e.g. `ANTHROPIC_API_KEY`), not the key",
            );
            None
        }
    });
    let timeout_ms = number(node, "timeout_ms", 1, MAX_TIMEOUT_MS, sink);
    let concurrency = number(node, "max_concurrency", 1, MAX_CONCURRENCY, sink);
    Some(LlmConfig {
        provider: provider?,
        base_url: base_url?,
        model: model?,
        api_key_env,
        timeout: timeout_ms.map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        max_concurrency: concurrency.map_or(DEFAULT_CONCURRENCY, |n| n as usize),
    })
}

fn text(node: &Node, key: &str, sink: &mut Sink) -> Option<(String, Span)> {
    let v = node.get(key)?;
    match &v.kind {
        NodeKind::Scalar { value, .. } if !v.is_null() => Some((value.clone(), v.span)),
        _ => {
            sink.error(
                v.span,
                None,
                format!("`llm.{key}` must be text, found {}", v.describe()),
                "write the value on the same line, e.g. `model: llama3.1`",
            );
            None
        }
    }
}

fn number(node: &Node, key: &str, min: u64, max: u64, sink: &mut Sink) -> Option<u64> {
    let v = node.get(key)?;
    match v.as_str().and_then(|s| s.parse::<u64>().ok()) {
        Some(n) if (min..=max).contains(&n) => Some(n),
        _ => {
            sink.error(
                v.span,
                None,
                format!("`llm.{key}` must be a whole number from {min} to {max}"),
                "",
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use carapace_policy::rules::Diagnostics;
    use proptest::prelude::*;

    use super::*;

    /// The `llm:` section as the one reader of the file reads it.
    fn parse(origin: &str, text: &str) -> Result<Option<LlmConfig>, Diagnostics> {
        crate::config::parse(origin, text).map(|c| c.llm)
    }

    fn errors(text: &str) -> String {
        parse("config.yaml", text).unwrap_err().to_string()
    }

    #[test]
    fn a_full_section_parses() {
        let c = parse(
            "config.yaml",
            "dns: { refuse_with: nxdomain }\nllm:\n  provider: anthropic\n  model: m\n  base_url: http://127.0.0.1:9/\n  api_key_env: MY_KEY\n  timeout_ms: 250\n  max_concurrency: 2\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.provider, Provider::Anthropic);
        assert_eq!(c.base_url, "http://127.0.0.1:9");
        assert_eq!(c.api_key_env.as_deref(), Some("MY_KEY"));
        assert_eq!(c.timeout, Duration::from_millis(250));
        assert_eq!(c.max_concurrency, 2);
    }

    #[test]
    fn defaults_and_absence() {
        let c = parse("c", "llm:\n  provider: openai\n  model: gpt-x\n")
            .unwrap()
            .unwrap();
        assert_eq!(c.base_url, "https://api.openai.com/v1");
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert_eq!(c.api_key_env, None);
        assert_eq!(parse("c", "").unwrap(), None);
        assert_eq!(parse("c", "dns: {}\n").unwrap(), None);
        assert_eq!(parse("c", "llm:\n").unwrap(), None);
    }

    #[test]
    fn errors_say_where_and_what_to_do() {
        let e = errors("llm:\n  provider: opneai\n  model: m\n");
        assert!(
            e.contains("config.yaml:2:13: error: unknown provider `opneai`"),
            "{e}"
        );
        assert!(e.contains("did you mean `openai`?"), "{e}");
        let e = errors("llm:\n  provider: openai\n  model: m\n  timout_ms: 5\n");
        assert!(
            e.contains("config.yaml:4:3") && e.contains("did you mean `timeout_ms`?"),
            "{e}"
        );
        let e = errors("llm:\n  provider: openai\n  model: m\n  api_key_env: sk-abc123\n");
        assert!(e.contains("not an environment variable name"), "{e}");
        let e = errors("llm:\n  provider: openai\n  model: m\n  timeout_ms: 0\n");
        assert!(e.contains("from 1 to"), "{e}");
        let e = errors("llm:\n  provider: openai\n");
        assert!(e.contains("needs a `model`"), "{e}");
        let e = errors("llm:\n  model: m\n  base_url: ftp://x\n");
        assert!(
            e.contains("needs a `provider`") && e.contains("ftp://x"),
            "{e}"
        );
        let e = errors("llm: [a]\n");
        assert!(e.contains("must be a mapping"), "{e}");
    }

    #[test]
    fn the_key_comes_from_the_named_variable() {
        let c = LlmConfig {
            provider: Provider::OpenAi,
            base_url: "http://x".into(),
            model: "m".into(),
            api_key_env: Some("CARAPACE_TEST_CONFIG_KEY_VAR".into()),
            timeout: DEFAULT_TIMEOUT,
            max_concurrency: 1,
        };
        assert_eq!(c.api_key(), None);
        // No other test reads or writes this variable.
        std::env::set_var("CARAPACE_TEST_CONFIG_KEY_VAR", "k-1");
        assert_eq!(c.api_key().as_deref(), Some("k-1"));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = parse("c", &text);
        }

        #[test]
        fn yaml_like_text_never_panics(parts in prop::collection::vec(prop::sample::select(vec![
            "llm:\n", "  provider: ", "openai", "anthropic", "  model: ", "m", "\n", "[", "]",
            "{", "}", "  timeout_ms: ", "99999999999999999999", "  base_url: ", "http://x", "~",
            "&a ", "*a", "- ", ": ",
        ]), 0..30)) {
            let _ = parse("c", &parts.concat());
        }
    }
}
