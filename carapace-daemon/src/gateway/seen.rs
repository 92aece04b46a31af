//! The past calls of a client's conversations that Layer 0 already found clean. Every
//! request to a model API carries the whole conversation, which grows by a few calls a
//! turn; judging all of it again made the gateway's cost grow with the conversation.
//!
//! Two kinds of digest (SHA-256) stand for verdicts, both under one rule set (a reload
//! forgets everything) and one client context (home, working directory, variables):
//! - a **message**'s bytes as the request carries them: a message found clean before is
//!   neither parsed nor judged again (most of a long conversation, each turn);
//! - a **call**'s tool, input and recorded working directory: a message whose bytes changed
//!   (clients move their cache markers between turns) still skips the calls judged before.
//!
//! What neither covers is the file system a path resolves on, which may have changed since
//! the call was first judged; that is what Layer 1 and the kernel judge when a call runs.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use carapace_policy::engine::transcript::Transcript;
use carapace_policy::engine::Context;
use carapace_policy::rules::RuleSet;
use sha2::{Digest, Sha256};

/// Digests kept at most; past that the set starts over (the next requests judge their
/// conversations whole once more).
const CAPACITY: usize = 1 << 16;

pub type Key = [u8; 32];

/// The digest of a client's context, which every key of that client starts from.
#[derive(Clone)]
pub struct ClientDigest(Sha256);

impl ClientDigest {
    #[must_use]
    pub fn of(ctx: &Context) -> Self {
        let mut client = Sha256::new();
        for part in [ctx.home.as_str(), ctx.cwd.as_str()] {
            field(&mut client, part.as_bytes());
        }
        for (name, value) in &ctx.env {
            field(&mut client, name.as_bytes());
            field(&mut client, value.as_bytes());
        }
        Self(client)
    }

    /// A digest of this client's, for one kind of key (no message key can equal a call's).
    fn start(&self, kind: u8) -> Sha256 {
        let mut h = self.0.clone();
        h.update([kind]);
        h
    }

    /// The key of a message of a conversation, by its bytes as the request holds them.
    #[must_use]
    pub fn message(&self, raw: &str) -> Key {
        let mut h = self.start(b'm');
        field(&mut h, raw.as_bytes());
        h.finalize().into()
    }

    /// The key of each call of `parsed`.
    #[must_use]
    pub fn calls(&self, parsed: &Transcript) -> Vec<Key> {
        parsed
            .calls
            .iter()
            .map(|past| {
                let mut h = self.start(b'c');
                field(&mut h, past.call.tool.as_bytes());
                field(
                    &mut h,
                    past.cwd.as_deref().unwrap_or("\u{0}none").as_bytes(),
                );
                // The input last, serialised straight into the digest (a long conversation
                // has hundreds of calls: no string for each), then its length.
                let mut input = Hashing { h: &mut h, len: 0 };
                let written = serde_json::to_writer(&mut input, &past.call.input).is_ok();
                let len = input.len;
                // Writing a `Value` to a digest cannot fail (no I/O, string keys); if it
                // ever did, the flag keeps the partial input from hashing like a whole one.
                h.update([u8::from(written)]);
                h.update(len.to_le_bytes());
                h.finalize().into()
            })
            .collect()
    }
}

#[derive(Default)]
pub struct SeenClean {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The rule set the digests were judged under.
    rules: Option<Arc<RuleSet>>,
    /// Each clean key, with the number of calls it stands for (a call's key: one).
    clean: HashMap<Key, u32>,
}

impl SeenClean {
    /// For each key, the number of calls it stands for if it was found clean before under
    /// `rules`.
    #[must_use]
    pub fn known(&self, rules: &Arc<RuleSet>, keys: &[Key]) -> Vec<Option<u32>> {
        let mut inner = self.lock();
        inner.reset_unless(rules);
        keys.iter().map(|k| inner.clean.get(k).copied()).collect()
    }

    /// Remembers the keys found clean under `rules`, each with the calls it stands for.
    pub fn learn(&self, rules: &Arc<RuleSet>, keys: impl IntoIterator<Item = (Key, u32)>) {
        let mut inner = self.lock();
        inner.reset_unless(rules);
        for (k, calls) in keys {
            if inner.clean.len() >= CAPACITY {
                inner.clean.clear();
            }
            inner.clean.insert(k, calls);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The set holds no invariant a panic elsewhere could break half-way.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    fn reset_unless(&mut self, rules: &Arc<RuleSet>) {
        if !self.rules.as_ref().is_some_and(|r| Arc::ptr_eq(r, rules)) {
            self.clean.clear();
            self.rules = Some(Arc::clone(rules));
        }
    }
}

/// Bytes written into a digest, counted.
struct Hashing<'h> {
    h: &'h mut Sha256,
    len: u64,
}

impl std::io::Write for Hashing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.h.update(buf);
        self.len += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A length-prefixed field, so that no two different sequences of fields hash alike.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_policy::engine::transcript;
    use serde_json::json;
    use std::collections::HashSet;

    fn ctx(home: &str) -> Context {
        Context {
            cwd: "/p".into(),
            home: home.into(),
            env: Vec::new(),
            host: None,
        }
    }

    fn calls(commands: &[&str]) -> Transcript {
        let blocks: Vec<_> = commands
            .iter()
            .map(
                |c| json!({"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": c}}),
            )
            .collect();
        transcript::from_value(&json!([{"role": "assistant", "content": blocks}]))
    }

    #[test]
    fn a_call_is_known_only_under_the_same_rules_and_client() {
        let rules = Arc::new(RuleSet::default());
        let seen = SeenClean::default();
        let t = calls(&["ls", "git status"]);
        let keys = ClientDigest::of(&ctx("/home/a")).calls(&t);
        assert_eq!(seen.known(&rules, &keys), [None, None]);
        seen.learn(&rules, [(keys[0], 1)]);
        assert_eq!(seen.known(&rules, &keys), [Some(1), None]);
        // Another client (another home) has its own verdicts.
        let other = ClientDigest::of(&ctx("/home/b")).calls(&t);
        assert_eq!(seen.known(&rules, &other), [None, None]);
        // A reload forgets everything.
        let reloaded = Arc::new(RuleSet::default());
        assert_eq!(seen.known(&reloaded, &keys), [None, None]);
        assert_eq!(seen.known(&rules, &keys), [None, None]);
    }

    #[test]
    fn the_input_is_hashed_as_its_serialisation() {
        let c = ctx("/home/a");
        let t = calls(&["echo \"a\\b\" é"]);
        let mut want = Sha256::new();
        for part in ["/home/a", "/p"] {
            field(&mut want, part.as_bytes());
        }
        want.update(b"c");
        for part in ["Bash", "\u{0}none"] {
            field(&mut want, part.as_bytes());
        }
        let input = t.calls[0].call.input.to_string();
        want.update(input.as_bytes());
        want.update([1]);
        want.update((input.len() as u64).to_le_bytes());
        let want: Key = want.finalize().into();
        assert_eq!(ClientDigest::of(&c).calls(&t), [want]);
    }

    #[test]
    fn keys_tell_calls_apart_by_tool_input_and_cwd() {
        let c = ctx("/home/a");
        let a = ClientDigest::of(&c).calls(&calls(&["ls", "ls ", "l", "s"]));
        let distinct: HashSet<_> = a.iter().collect();
        assert_eq!(distinct.len(), 4);
    }
}
