//! One query from a session: decide by name, ask upstream, screen and learn the answer, or
//! refuse with a denial. The steps that read untrusted bytes ([`Handler::screen_query`],
//! [`Handler::screen_answer`]) are synchronous and take the rules as arguments, so tests
//! and the fuzzer reach them without sockets.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use carapace_policy::engine::names::{self, NameVerdict};
use carapace_policy::engine::Activation;
use carapace_policy::rules::RuleSet;
use hickory_proto::op::ResponseCode;

use super::learned::{expiry, Learned, LearnedAddress, Learner};
use super::upstream::Upstream;
use super::wire::{self, Parsed, Question};
use crate::api::proto::Denial;
use crate::config::dns::RefuseWith;

/// Where the rules of each query come from: the daemon's rules at that moment (a reload
/// applies at once) with the session's activation state.
pub trait RulesInForce: Send + Sync {
    fn current(&self) -> Result<(Arc<RuleSet>, Activation), RulesUnavailable>;
}

/// Why the rules of a query cannot be read (the query fails closed).
#[derive(Debug, thiserror::Error)]
pub enum RulesUnavailable {
    #[error("the daemon is stopping")]
    Stopping,
    /// The session store could not be read (its own error type stays with the session).
    #[error("cannot read the session's rule state: {0}")]
    SessionState(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Where refused lookups go: the audit ledger and the session's watchers, in the daemon.
pub trait DenialSink: Send + Sync {
    fn refused(&self, denial: Denial);
}

/// The operation a refused lookup reports (`Denial::operation`).
pub const OPERATION: &str = "resolve";
/// The layer a refused lookup reports (`Denial::layer`).
pub const LAYER: &str = "dns";
/// What a denial says of an answer that pointed an allowed name at a private address.
pub const PRIVATE_ANSWER: &str = "answer points to a private address";
/// What a denial says of an answer that served an allowed name under a refused one.
pub const ALIAS_OF: &str = "an alias of";

/// The first step of a query.
#[derive(Debug)]
pub enum Step {
    /// Answer with these bytes (a refusal, or an error the query earned).
    Reply(Vec<u8>),
    /// Refused by a rule: answer with `reply` and report `rule_id`'s denial.
    Refuse {
        reply: Vec<u8>,
        name: String,
        rule_id: String,
        message: String,
    },
    /// Allowed: ask upstream. `excepted` are the kernel indices of the rules excepting it.
    Forward {
        question: Question,
        excepted: Vec<u32>,
    },
    Drop,
}

/// The outcome of an upstream answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Screened {
    /// Pass the answer on; learn these addresses (with their expiry in boot-time ns, the
    /// rules excepting them and those refusing them).
    Pass(Vec<LearnedAddress>),
    /// Ask again over TCP: the client's UDP cannot take the whole answer.
    Truncate,
    Refuse {
        reply: Vec<u8>,
        rule_id: String,
        message: String,
    },
    /// The answer could not be read or checked: SERVFAIL.
    Fail(Vec<u8>),
}

/// How long a refusal of the same name by the same rule is not reported again.
const QUIET: Duration = Duration::from_secs(10);
/// Refusals remembered for [`QUIET`]; past this many, older ones are forgotten.
const MAX_RECENT: usize = 1024;

/// Refusals reported lately. One `curl` asks for A and AAAA and retries each, and an agent
/// in a loop asks again and again: each would be a ledger record and a line for the user
/// otherwise. The answer is refused every time; only the report is spared.
#[derive(Default)]
pub struct RecentDenials(Mutex<HashMap<(String, String), Instant>>);

impl RecentDenials {
    /// Whether (`name`, `rule_id`) was not reported in the last [`QUIET`]; marks it reported.
    pub(crate) fn first(&self, name: &str, rule_id: &str) -> bool {
        let now = Instant::now();
        let mut recent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.len() >= MAX_RECENT {
            recent.retain(|_, at| now.duration_since(*at) < QUIET);
            if recent.len() >= MAX_RECENT {
                // A flood of distinct names: report them all again rather than grow.
                recent.clear();
            }
        }
        let key = (name.to_owned(), rule_id.to_owned());
        match recent.get(&key) {
            Some(at) if now.duration_since(*at) < QUIET => false,
            _ => {
                recent.insert(key, now);
                true
            }
        }
    }
}

/// A session's query handling.
pub struct Handler {
    pub session_id: String,
    pub session_cgroup: u64,
    pub rules: Arc<dyn RulesInForce>,
    pub upstream: Upstream,
    pub refuse_with: RefuseWith,
    pub learned: Arc<Learned>,
    /// The kernel's map, when the kernel layer runs.
    pub kernel: Option<Arc<dyn Learner>>,
    pub denials: Arc<dyn DenialSink>,
    pub recent: RecentDenials,
    /// Now on `CLOCK_BOOTTIME` (injectable so tests can check expiries exactly).
    pub clock: fn() -> u64,
}

impl Handler {
    fn refusal_code(&self) -> ResponseCode {
        match self.refuse_with {
            RefuseWith::Refused => ResponseCode::Refused,
            RefuseWith::NxDomain => ResponseCode::NXDomain,
        }
    }

    /// Reads a query and decides its name.
    #[must_use]
    pub fn screen_query(
        bytes: &[u8],
        rules: &RuleSet,
        activation: &Activation,
        refuse: ResponseCode,
    ) -> Step {
        let question = match wire::parse_query(bytes) {
            Parsed::Question(q) => q,
            Parsed::Reply(reply) => return Step::Reply(reply),
            Parsed::Drop => return Step::Drop,
        };
        match names::verdict(rules, activation, &question.name) {
            NameVerdict::Allowed { excepted } => Step::Forward { question, excepted },
            NameVerdict::Refused { rule_id, message } => Step::Refuse {
                reply: question.error(refuse),
                name: question.name,
                rule_id,
                message,
            },
        }
    }

    /// Reads the upstream answer to an allowed question: refuses it when an address would
    /// open a private range the rules keep closed (rebinding), else names what to learn.
    #[must_use]
    pub fn screen_answer(
        question: &Question,
        answer: &[u8],
        over_udp: bool,
        excepted: &[u32],
        (rules, activation): (&RuleSet, &Activation),
        (now, refuse): (u64, ResponseCode),
    ) -> Screened {
        let Ok(read) = wire::read_answer(question, answer) else {
            return Screened::Fail(question.error(ResponseCode::ServFail));
        };
        // An allowed name served under a name a rule refuses: the addresses are that
        // name's as much as the question's.
        for alias in &read.aliases {
            if let NameVerdict::Refused { rule_id, message } =
                names::alias_verdict(rules, activation, alias)
            {
                return Screened::Refuse {
                    reply: question.error(refuse),
                    rule_id,
                    message: format!("{ALIAS_OF} {alias}: {message}"),
                };
            }
        }
        let mut blocked = Vec::new();
        let mut refused_for = Vec::new();
        for name in std::iter::once(&question.name).chain(&read.aliases) {
            let by = names::blocked_by(rules, name);
            if !by.is_empty() && !refused_for.contains(name) {
                refused_for.push(name.clone());
            }
            blocked.extend(by);
        }
        blocked.sort_unstable();
        blocked.dedup();
        let every = read
            .addresses
            .iter()
            .map(|a| a.addr)
            .chain(read.other_addresses.iter().copied());
        for addr in every {
            if let Some(rule) =
                names::private_answer_refused(rules, activation, &question.name, addr)
            {
                return Screened::Refuse {
                    reply: question.error(refuse),
                    rule_id: rule.id.clone(),
                    message: format!("{PRIVATE_ANSWER} ({addr}): {}", rule.message),
                };
            }
        }
        if over_udp && answer.len() > question.udp_payload {
            return Screened::Truncate;
        }
        Screened::Pass(
            read.addresses
                .iter()
                .map(|a| LearnedAddress {
                    addr: a.addr,
                    name: question.name.clone(),
                    expires_at_boot_ns: expiry(now, a.ttl),
                    excepted: excepted.to_vec(),
                    blocked: blocked.clone(),
                    refused_for: refused_for.clone(),
                })
                .collect(),
        )
    }

    /// Answers one query (`None`: no answer at all).
    pub async fn answer(&self, bytes: &[u8], over_udp: bool) -> Option<Vec<u8>> {
        let rules = Arc::clone(&self.rules);
        let current = tokio::task::spawn_blocking(move || rules.current()).await;
        let (rules, activation) = match current {
            Ok(Ok(current)) => current,
            Ok(Err(e)) => return self.fail(bytes, &e.to_string()),
            Err(e) => return self.fail(bytes, &e.to_string()),
        };
        let (question, excepted) =
            match Self::screen_query(bytes, &rules, &activation, self.refusal_code()) {
                Step::Reply(reply) => return Some(reply),
                Step::Drop => return None,
                Step::Refuse {
                    reply,
                    name,
                    rule_id,
                    message,
                } => {
                    self.deny(name, rule_id, message);
                    return Some(reply);
                }
                Step::Forward { question, excepted } => (question, excepted),
            };
        let answer = self
            .upstream
            .exchange(
                bytes,
                |a| wire::read_answer(&question, a).is_ok(),
                |a| wire::read_answer(&question, a).is_ok_and(|r| r.truncated),
            )
            .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                tracing::info!(session = %self.session_id, name = %question.name, "lookup failed: {e}");
                return Some(question.error(ResponseCode::ServFail));
            }
        };
        let now = (self.clock)();
        match Self::screen_answer(
            &question,
            &answer,
            over_udp,
            &excepted,
            (&rules, &activation),
            (now, self.refusal_code()),
        ) {
            Screened::Pass(learned) => {
                for entry in learned {
                    if let Some(kernel) = &self.kernel {
                        if let Err(e) = kernel.learn(self.session_cgroup, &entry) {
                            tracing::warn!(session = %self.session_id, name = %question.name, "{e:#}");
                            // An address handed out without its refusals would be open
                            // where they close it.
                            if !entry.blocked.is_empty() {
                                return Some(question.error(ResponseCode::ServFail));
                            }
                        }
                    }
                    self.learned.record(self.session_cgroup, entry, now);
                }
                Some(answer)
            }
            Screened::Truncate => Some(question.truncated()),
            Screened::Refuse {
                reply,
                rule_id,
                message,
            } => {
                self.deny(question.name, rule_id, message);
                Some(reply)
            }
            Screened::Fail(reply) => Some(reply),
        }
    }

    /// The rules could not be read: no name is judged, so none is resolved.
    fn fail(&self, bytes: &[u8], why: &str) -> Option<Vec<u8>> {
        tracing::error!(session = %self.session_id, "cannot judge a lookup: {why}");
        match wire::parse_query(bytes) {
            Parsed::Question(q) => Some(q.error(ResponseCode::ServFail)),
            Parsed::Reply(reply) => Some(reply),
            Parsed::Drop => None,
        }
    }

    fn deny(&self, name: String, rule_id: String, message: String) {
        if !self.recent.first(&name, &rule_id) {
            return;
        }
        self.denials.refused(Denial {
            session_id: self.session_id.clone(),
            // A datagram does not say which process sent it.
            pid: 0,
            comm: String::new(),
            operation: OPERATION.to_owned(),
            subject: name,
            rule_id,
            message,
            would_deny: false,
            layer: LAYER.to_owned(),
        });
    }
}
