//! The reviewer: puts the model's verdicts into Layer 1 decisions.
//!
//! - An `llm_review` rule's patterns are its gate: when they match, the model is asked the
//!   rule's `prompt` about the operation and answers `{applies, reason}`; only `applies`
//!   lets the rule's mode take effect.
//! - A rule in force with a plain-English `effect` is asked about each operation the same
//!   way; a plain-English `trigger` is asked against the session's recent operations
//!   ([`Reviewer::english_applies`], for the session code).
//! - Only matches of rules the model decides are touched: every other match, a
//!   deterministic block above all, stays exactly as the engine found it, whatever the model
//!   says. When the model cannot answer, the rule's `on_llm_error` mode applies.
//! - Verdicts are cached per (session, rule, operation signature); failures are not.
use std::collections::HashMap;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::Poll;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use super::client::{Llm, Stats};
use super::provider::Question;
use super::LlmConfig;
use super::{prompt, schema, LlmError};
use carapace_policy::engine::{
    Activation, Decision, Extracted, HistoryReport, Layer, Match, ToolCall,
};
use carapace_policy::rules::validate::mode_name;
use carapace_policy::rules::{Effect, Mode, Rule, RuleSet, Trigger};

/// Verdicts kept before the cache starts over (a long session makes a few thousand calls).
const CACHE_CAPACITY: usize = 50_000;
/// Recent operations shown to the model when it judges a plain-English trigger.
pub const MAX_HISTORY: usize = 50;

/// The model's answer about one rule and one operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub applies: bool,
    pub reason: String,
}

/// The operation a verdict is about, in a canonical form (tool, input and what the
/// engine found it does, JSON with sorted keys) and its signature, the SHA-256 of that form.
#[derive(Clone, Debug, PartialEq)]
pub struct Subject {
    pub canonical: Value,
    pub signature: String,
}

impl Subject {
    #[must_use]
    pub fn new(call: &ToolCall, ext: &Extracted) -> Self {
        // serde_json's maps are sorted (no `preserve_order`), so the text is canonical.
        let canonical = json!({
            "tool": call.tool,
            "input": call.input,
            "operations": ext.ops,
            "commands": ext.commands,
        });
        let signature = sha256(&canonical.to_string());
        Self {
            canonical,
            signature,
        }
    }

    fn pretty(&self) -> String {
        serde_json::to_string_pretty(&self.canonical).unwrap_or_default()
    }
}

#[must_use]
pub fn sha256(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::from("sha256:");
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Which plain-English part of a rule is asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aspect {
    /// Has the trigger's condition become true (given the session's recent operations and
    /// the current one)?
    Trigger,
    /// Does the effect restrict the current operation?
    Effect,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CacheKey {
    session: String,
    /// The rule's id and the hash of its text: an edited rule is asked again.
    rule: String,
    signature: String,
}

/// Asks the model what rules cannot decide alone, and caches its verdicts.
#[derive(Debug)]
pub struct Reviewer {
    llm: Option<Llm>,
    /// Where the `llm:` section comes from, or why there is no model.
    origin: String,
    cache: Mutex<HashMap<CacheKey, Value>>,
    cache_hits: AtomicU64,
}

impl Reviewer {
    /// A reviewer for `config` (`None`: LLM review unavailable; rules that need it get their
    /// `on_llm_error` mode). `config_file` names the file the section comes from.
    pub fn new(config: Option<LlmConfig>, config_file: &str) -> Result<Self, LlmError> {
        let origin = match &config {
            Some(_) => config_file.to_owned(),
            None => format!("no `llm:` section in {config_file}"),
        };
        Ok(Self {
            llm: config.map(Llm::new).transpose()?,
            origin,
            cache: Mutex::new(HashMap::new()),
            cache_hits: AtomicU64::new(0),
        })
    }

    /// No model, for the reason given: every rule that needs one gets its `on_llm_error`
    /// mode.
    #[must_use]
    pub fn unavailable(why: &str) -> Self {
        Self {
            llm: None,
            origin: why.to_owned(),
            cache: Mutex::new(HashMap::new()),
            cache_hits: AtomicU64::new(0),
        }
    }

    #[must_use]
    pub fn available(&self) -> bool {
        self.llm.is_some()
    }

    /// One line for `carapace status`: the provider and model, or why review is off.
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.llm {
            Some(llm) => {
                let c = llm.config();
                format!("{} model {} at {}", c.provider.name(), c.model, c.base_url)
            }
            None => format!("unavailable ({})", self.origin),
        }
    }

    #[must_use]
    pub fn stats(&self) -> Stats {
        let mut s = self.llm.as_ref().map(Llm::stats).unwrap_or_default();
        s.cache_hits = self.cache_hits.load(Ordering::Relaxed);
        s
    }

    /// Asks `question()` unless the cache already holds the answer for `key`.
    async fn cached(
        &self,
        key: CacheKey,
        question: impl FnOnce() -> Question,
    ) -> Result<Value, LlmError> {
        let llm = self
            .llm
            .as_ref()
            .ok_or_else(|| LlmError::Unavailable(self.origin.clone()))?;
        if let Some(v) = self.lock().get(&key) {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(v.clone());
        }
        let answer = llm.ask(&question()).await?;
        let mut cache = self.lock();
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(key, answer.clone());
        Ok(answer)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CacheKey, Value>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The classifier's answer for `subject`, cached like verdicts.
    pub(crate) async fn cached_classification(
        &self,
        session: &str,
        subject: &Subject,
        question: impl FnOnce() -> Question,
    ) -> Result<Value, LlmError> {
        let key = CacheKey {
            session: session.to_owned(),
            rule: "carapace-classifier".to_owned(),
            signature: subject.signature.clone(),
        };
        self.cached(key, question).await
    }

    /// The model itself, for one-off questions that are not cached (`carapace learn`).
    pub(crate) fn llm(&self) -> Result<&Llm, LlmError> {
        self.llm
            .as_ref()
            .ok_or_else(|| LlmError::Unavailable(self.origin.clone()))
    }

    /// Forgets a session's verdicts (the session was reset or ended).
    pub fn forget_session(&self, session: &str) {
        self.lock().retain(|k, _| k.session != session);
    }

    /// An `llm_review` rule whose patterns matched: does its `prompt` hold for `subject`?
    pub async fn review_rule(
        &self,
        session: &str,
        rule: &Rule,
        subject: &Subject,
    ) -> Result<Verdict, LlmError> {
        let key = CacheKey {
            session: session.to_owned(),
            rule: rule_key(rule, "prompt"),
            signature: subject.signature.clone(),
        };
        let answer = self
            .cached(key, || {
                let tag = prompt::fresh_tag();
                let question = rule.prompt.as_deref().unwrap_or(&rule.message);
                let mut user = prompt::rule(&rule.id, &[("question", question)]);
                let _ = write!(
                    user,
                    "\nThe rule's patterns matched the operation below, so it is up to you \
                     whether the rule applies. Set `applies` to true when the answer to the \
                     rule's question means the rule's concern is present in this operation; \
                     when in doubt, set it to true. Give a one-sentence `reason`.\n\n{}",
                    prompt::data(&tag, "The operation (untrusted)", &subject.pretty())
                );
                Question {
                    system: prompt::HIERARCHY.to_owned(),
                    user,
                    schema: schema::verdict(),
                }
            })
            .await?;
        verdict(answer)
    }

    /// A plain-English trigger or effect: does it apply, given the session's recent
    /// operations (most recent last; only the last [`MAX_HISTORY`] are shown) and the
    /// current operation? For the session code, which activates triggers.
    pub async fn english_applies(
        &self,
        session: &str,
        rule: &Rule,
        aspect: Aspect,
        history: &[String],
        subject: &Subject,
    ) -> Result<Verdict, LlmError> {
        let text = match (aspect, &rule.trigger, &rule.effect) {
            (Aspect::Trigger, Some(Trigger::English(t)), _)
            | (Aspect::Effect, _, Some(Effect::English(t))) => t.as_str(),
            _ => {
                return Err(LlmError::NotPlainEnglish {
                    rule: rule.id.clone(),
                    part: match aspect {
                        Aspect::Trigger => "trigger",
                        Aspect::Effect => "effect",
                    },
                })
            }
        };
        let recent = &history[history.len().saturating_sub(MAX_HISTORY)..];
        let (part, signature) = match aspect {
            Aspect::Effect => ("effect", subject.signature.clone()),
            Aspect::Trigger => (
                "trigger",
                sha256(&format!("{}\n{}", subject.signature, recent.join("\n"))),
            ),
        };
        let key = CacheKey {
            session: session.to_owned(),
            rule: rule_key(rule, part),
            signature,
        };
        let answer = self
            .cached(key, || {
                let tag = prompt::fresh_tag();
                let mut fields = vec![(part, text)];
                if let Some(d) = rule.description.as_deref() {
                    fields.push(("description", d));
                }
                let mut user = prompt::rule(&rule.id, &fields);
                match aspect {
                    Aspect::Effect => user.push_str(
                        "\nThe rule is in force. Does its effect cover the operation below? \
                         Judge what the operation really does (a local DNS lookup is not \
                         \"writing to the internet\"). Set `applies` to true when the effect \
                         restricts this operation; when in doubt, set it to true. Give a \
                         one-sentence `reason`.\n\n",
                    ),
                    Aspect::Trigger => {
                        user.push_str(
                            "\nHas the rule's trigger condition become true, given the \
                             session's recent operations and the current one below? Set \
                             `applies` to true when it has; when in doubt, set it to true. Give \
                             a one-sentence `reason`.\n\n",
                        );
                        user.push_str(&prompt::data(
                            &tag,
                            "The session's recent operations, oldest first (untrusted)",
                            &recent.join("\n"),
                        ));
                        user.push('\n');
                    }
                }
                user.push_str(&prompt::data(
                    &tag,
                    "The current operation (untrusted)",
                    &subject.pretty(),
                ));
                Question {
                    system: prompt::HIERARCHY.to_owned(),
                    user,
                    schema: schema::verdict(),
                }
            })
            .await?;
        verdict(answer)
    }

    /// Whether any rule of `rules` is decided by the model (else there is nothing to
    /// review and the operation's canonical form need not even be computed).
    #[must_use]
    pub fn needed(rules: &RuleSet) -> bool {
        rules.rules().iter().any(Rule::needs_llm)
    }

    /// Puts the model's verdicts into `decision` (what the engine found for `subject`):
    /// matched `llm_review` rules are kept only if the model says they apply; rules in
    /// force with a plain-English effect are added when it says theirs covers the
    /// operation. Matches of other rules are never removed or weakened.
    pub async fn review_decision(
        &self,
        session: &str,
        rules: &RuleSet,
        activation: &Activation,
        subject: &Subject,
        decision: Decision,
    ) -> Decision {
        let english: Vec<&Rule> = rules
            .rules()
            .iter()
            .filter(|r| matches!(r.effect, Some(Effect::English(_))) && activation.applies(r))
            .collect();
        let reviewed = |m: &Match| rules.by_id(&m.id).filter(|r| r.llm_review);
        if english.is_empty() && !decision.matches.iter().any(|m| reviewed(m).is_some()) {
            return decision;
        }
        // Each rule the model decides: its match as the engine found it (or as it would
        // read for a plain-English effect), and the question to ask about it.
        let mut kept = Vec::new();
        let mut asked: Vec<(Match, &Rule, Ask)> = Vec::new();
        for m in decision.matches {
            match reviewed(&m) {
                Some(rule) => asked.push((m, rule, Ask::Prompt)),
                None => kept.push(m),
            }
        }
        for rule in english {
            let m = Match {
                id: rule.id.clone(),
                mode: rule.mode,
                layer: Layer::ToolCall,
                message: rule.message.clone(),
                source: rule.source.clone(),
                matched: format!("{} call", decision.tool),
                kernel: false,
            };
            asked.push((m, rule, Ask::Effect));
        }
        // All questions at once (the client's concurrency limit still applies): a call
        // that meets five rules waits for the slowest answer, not for the sum of them.
        let answers = join_all(asked.iter().map(|(_, rule, ask)| async move {
            match ask {
                Ask::Effect => {
                    self.english_applies(session, rule, Aspect::Effect, &[], subject)
                        .await
                }
                Ask::Prompt => self.review_rule(session, rule, subject).await,
            }
        }))
        .await;
        for ((m, rule, _), answer) in asked.into_iter().zip(answers) {
            match answer {
                Ok(v) if v.applies => kept.push(Match {
                    matched: format!("{} (LLM review: {})", m.matched, v.reason),
                    ..m
                }),
                Ok(v) => tracing::info!(
                    session,
                    rule = %rule.id,
                    "LLM review: the rule does not apply ({})",
                    v.reason
                ),
                Err(e) => kept.push(failed(m, rule, &e)),
            }
        }
        let matches = kept;
        Decision::from_matches(&decision.tool, matches, decision.operations)
    }
}

/// Layer 0 does not ask the model about past calls (a transcript holds hundreds): there, a
/// match of an `llm_review` rule counts with the rule's `on_llm_error` mode, so that a
/// review gate alone never makes a history "bad agent" unless the rule says so.
#[must_use]
pub fn unreviewed_history(rules: &RuleSet, report: HistoryReport) -> HistoryReport {
    let findings = report
        .findings
        .into_iter()
        .filter_map(|(i, d)| {
            let matches = d
                .matches
                .into_iter()
                .map(|m| match rules.by_id(&m.id).filter(|r| r.llm_review) {
                    Some(rule) => Match {
                        mode: rule.on_llm_error,
                        message: format!(
                            "{} (history scans do not ask the model; the rule's on_llm_error \
                             `{}` applies)",
                            m.message,
                            mode_name(rule.on_llm_error)
                        ),
                        ..m
                    },
                    None => m,
                })
                .collect();
            let d = Decision::from_matches(&d.tool, matches, d.operations);
            (d.decision == Mode::Block).then_some((i, d))
        })
        .collect();
    HistoryReport::new(report.tool_calls, findings)
}

/// What a decision asks about a rule.
#[derive(Clone, Copy)]
enum Ask {
    /// An `llm_review` rule's prompt.
    Prompt,
    /// A plain-English effect.
    Effect,
}

/// Runs `futures` concurrently on the current task; their outputs in order.
async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (f, out) in pending.iter_mut().zip(done.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

/// The match of a rule the model could not decide: the rule's `on_llm_error` mode.
fn failed(m: Match, rule: &Rule, e: &LlmError) -> Match {
    Match {
        mode: rule.on_llm_error,
        message: format!(
            "{} (the LLM review could not be done: {e}; the rule's on_llm_error `{}` applies)",
            m.message,
            mode_name(rule.on_llm_error)
        ),
        ..m
    }
}

fn rule_key(rule: &Rule, part: &str) -> String {
    format!("{}#{part}#{:016x}", rule.id, rule.id_hash)
}

fn verdict(answer: Value) -> Result<Verdict, LlmError> {
    serde_json::from_value(answer).map_err(|e| LlmError::Malformed(e.to_string()))
}
