//! A request's conversation as Layer 0 reads it: message by message, skipping the messages
//! (by their bytes) and the calls (by their content) found clean before, so that a turn of a
//! long conversation costs what is new in it, not the whole conversation again.
use std::sync::Arc;

use carapace_policy::engine::transcript::{self, Transcript};
use carapace_policy::rules::RuleSet;
use serde_json::value::RawValue;
use serde_json::Value;

use super::seen::{ClientDigest, Key, SeenClean};

/// The conversation field of a request.
#[derive(Debug)]
pub enum Conversation<'a> {
    /// A list of messages (items, contents), each as the body holds it.
    Items(Vec<&'a RawValue>),
    /// Anything else, read whole: a conversation that is not a list, or one taken from the
    /// whole request (a body the narrow reading refused).
    Whole(Value),
}

impl Conversation<'_> {
    /// The conversation as JSON text (for the audit ledger).
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Self::Items(items) => {
                let mut out = String::from("[");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(item.get());
                }
                out.push(']');
                out
            }
            Self::Whole(v) => v.to_string(),
        }
    }

    /// The conversation as a JSON value (tests compare it with the whole request's field).
    #[cfg(test)]
    #[must_use]
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.text()).unwrap_or(Value::Null)
    }
}

/// What is left to judge of a conversation.
pub struct Reading {
    /// The calls of the messages not found clean before.
    pub parsed: Transcript,
    /// Each call's number in the whole conversation (0-based), for the messages that name it.
    pub numbers: Vec<usize>,
    /// Each call's message among [`Reading::messages`], if it has one.
    pub owners: Vec<Option<usize>>,
    /// The messages read: key, calls, and whether all of it could be read.
    pub messages: Vec<(Key, u32, bool)>,
    /// Calls in the whole conversation.
    pub total: usize,
    /// Calls of messages found clean before (not read again).
    pub remembered: usize,
}

impl Reading {
    /// Reads the messages of `conversation` not found clean before under `rules`.
    #[must_use]
    pub fn of(
        conversation: &Conversation<'_>,
        client: &ClientDigest,
        seen: &SeenClean,
        rules: &Arc<RuleSet>,
    ) -> Self {
        let mut out = Self {
            parsed: Transcript::default(),
            numbers: Vec::new(),
            owners: Vec::new(),
            messages: Vec::new(),
            total: 0,
            remembered: 0,
        };
        match conversation {
            Conversation::Items(items) => {
                let keys: Vec<Key> = items.iter().map(|m| client.message(m.get())).collect();
                let known = seen.known(rules, &keys);
                for ((item, key), known) in items.iter().zip(keys).zip(known) {
                    if let Some(calls) = known {
                        out.total += calls as usize;
                        out.remembered += calls as usize;
                        continue;
                    }
                    let message = match serde_json::from_str::<Value>(item.get()) {
                        Ok(v) => transcript::from_item(&v),
                        // The body was read as JSON already; this cannot fail, and if it did
                        // the message is a finding, not a clean one.
                        Err(e) => Transcript {
                            calls: Vec::new(),
                            unreadable: vec![format!("a message: {e}")],
                        },
                    };
                    out.add(message, Some(key));
                }
            }
            Conversation::Whole(v) => out.add(transcript::from_value(v), None),
        }
        out
    }

    fn add(&mut self, message: Transcript, key: Option<Key>) {
        let owner = key.map(|key| {
            let calls = u32::try_from(message.calls.len()).unwrap_or(u32::MAX);
            self.messages
                .push((key, calls, message.unreadable.is_empty()));
            self.messages.len() - 1
        });
        for past in message.calls {
            self.numbers.push(self.total);
            self.owners.push(owner);
            self.total += 1;
            self.parsed.calls.push(past);
        }
        self.parsed.unreadable.extend(message.unreadable);
    }

    /// The keys to remember once the calls were judged: each call found clean, and each
    /// message wholly readable with no finding among its calls. `known` says which calls were
    /// not judged (found clean before); `found` holds the indices of the calls with a
    /// finding.
    pub fn clean_keys<'a>(
        &'a self,
        call_keys: &'a [Key],
        known: &'a [bool],
        found: &'a std::collections::HashSet<usize>,
    ) -> impl Iterator<Item = (Key, u32)> + 'a {
        let calls = call_keys
            .iter()
            .enumerate()
            .filter(|(i, _)| !known[*i] && !found.contains(i))
            .map(|(_, k)| (*k, 1));
        let dirty: std::collections::HashSet<usize> =
            found.iter().filter_map(|i| self.owners[*i]).collect();
        let messages = self
            .messages
            .iter()
            .enumerate()
            .filter(move |(m, (_, _, readable))| *readable && !dirty.contains(m))
            .map(|(_, (key, calls, _))| (*key, *calls));
        calls.chain(messages)
    }
}
