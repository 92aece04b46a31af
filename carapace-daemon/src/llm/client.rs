//! One question to the configured model → one answer checked against its schema. A
//! malformed answer is asked again once; the whole exchange (retry included) has the
//! configured timeout; at most `max_concurrency` exchanges run at once, others wait (the
//! wait counts against the timeout too, so a flood of calls degrades to `on_llm_error`
//! instead of piling up).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::Semaphore;

use super::http::Http;
use super::provider::{self, Question};
use super::LlmConfig;
use super::{schema, LlmError};

/// Counters, for `carapace status` and logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// HTTP requests sent to the model (retries included).
    pub calls: u64,
    /// Exchanges that ended without a usable answer.
    pub failures: u64,
    /// Malformed answers that were asked again.
    pub retries: u64,
    /// Total wall time of the exchanges, in microseconds.
    pub latency_us_total: u64,
    /// Verdicts answered from the cache instead of the model.
    pub cache_hits: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    calls: AtomicU64,
    failures: AtomicU64,
    retries: AtomicU64,
    latency_us: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            calls: self.calls.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            latency_us_total: self.latency_us.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug)]
pub struct Llm {
    config: LlmConfig,
    http: Http,
    permits: Arc<Semaphore>,
    pub(crate) counters: Counters,
}

impl Llm {
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        Ok(Self {
            permits: Arc::new(Semaphore::new(config.max_concurrency)),
            http: Http::new()?,
            config,
            counters: Counters::default(),
        })
    }

    #[must_use]
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    #[must_use]
    pub fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    /// Asks `q`; the answer matches `q.schema`.
    pub async fn ask(&self, q: &Question) -> Result<Value, LlmError> {
        let start = Instant::now();
        let limit = self.config.timeout;
        let result = match tokio::time::timeout(limit, self.exchange(q)).await {
            Ok(r) => r,
            Err(_) => Err(LlmError::Timeout(limit)),
        };
        let us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.counters.latency_us.fetch_add(us, Ordering::Relaxed);
        if let Err(e) = &result {
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                provider = self.config.provider.name(),
                model = %self.config.model,
                "LLM review failed: {e}"
            );
        }
        result
    }

    async fn exchange(&self, q: &Question) -> Result<Value, LlmError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| LlmError::Transport("the daemon is stopping".into()))?;
        let key = match &self.config.api_key_env {
            Some(var) => Some(
                self.config
                    .api_key()
                    .ok_or_else(|| LlmError::MissingKey(var.clone()))?,
            ),
            None => None,
        };
        match self.once(q, key.as_deref()).await {
            Err(LlmError::Malformed(why)) => {
                self.counters.retries.fetch_add(1, Ordering::Relaxed);
                tracing::info!("the model's answer was malformed ({why}); asking once more");
                let again = Question {
                    system: format!(
                        "{}\n\nYour previous answer was rejected: {why}. Answer again with \
                         exactly the requested structure.",
                        q.system
                    ),
                    ..q.clone()
                };
                self.once(&again, key.as_deref()).await
            }
            other => other,
        }
    }

    async fn once(&self, q: &Question, key: Option<&str>) -> Result<Value, LlmError> {
        let (url, headers, body) = provider::request(&self.config, key, q);
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        let reply = self.http.post_json(&url, &headers, &body).await?;
        if !(200..300).contains(&reply.status) {
            let mut body = String::from_utf8_lossy(&reply.body).into_owned();
            // Error bodies end up in logs and in the agent's message; a server that echoes
            // the key (e.g. "invalid key sk-…") must not leak it there.
            if let Some(k) = key.filter(|k| !k.is_empty()) {
                body = body.replace(k, "[redacted]");
            }
            return Err(LlmError::Http {
                status: reply.status,
                body: provider::excerpt(&body),
            });
        }
        let answer = provider::answer(self.config.provider, &reply.body, &q.schema)?;
        schema::check(&q.schema.schema, &answer).map_err(|e| LlmError::Malformed(e.to_string()))?;
        Ok(answer)
    }
}
