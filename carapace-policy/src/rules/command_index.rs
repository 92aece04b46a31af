//! Rules that match on commands, indexed so that a call pays for the rules its commands can
//! meet and no others:
//!
//! - the `re:` patterns of every `command:` rule in one regex set: each command line of a
//!   call is run through it once, instead of through each rule's regexes one after the other
//!   (a Bash call carries several command lines, so this was most of what a shell command
//!   cost after its parse). Loaders of one call (`hook --local`) build no set: building it
//!   costs more than the one call saves, and each rule's regex is tried first by its
//!   literals (see `lazy_regex`), rarely built. A line holding none of the literals one of
//!   which every match of each pattern contains (`lazy_regex`'s) skips the set: most lines
//!   of a call (`cargo test`, `git status`) meet no command rule, and looking for the
//!   literals costs a fraction of the set's automaton;
//! - the programs `run:` rules name, in a hash map: a command whose program no such rule
//!   names costs one lookup (two for a name with a `-`, `.` or digit, whose stem may hold
//!   prefixes), and only the commands of named programs are read as their tool reads them
//!   (`canon::invocation`).
use std::collections::HashMap;

use aho_corasick::AhoCorasick;
use regex::RegexSet;

/// Keys are program names and subcommand words the packs wrote: a fast hash (`SipHash`'s
/// protection against chosen keys buys nothing for keys fixed at load).
type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

use super::lazy_regex::LazyRegex;
use super::model::{Cond, TextPattern};
use super::run::{RunMatch, Word};
use super::Rule;
use crate::engine::shell::canon;

/// The `run:` items filed under one name, as (rule, item).
#[derive(Clone, Debug, Default)]
struct Slot {
    /// Items naming this program whose subcommand starts with no plain word.
    exact: Vec<(u32, u32)>,
    /// Items naming this program, by the plain word their subcommand starts with (`push`):
    /// a command meets only those of its own subcommand.
    by_verb: Map<Vec<(u32, u32)>>,
    /// The same for items that compare without case (`ignore-case`), by the word in lower
    /// case: `git config` meets the case-blind `config` items and `git status` none.
    by_folded_verb: Map<Vec<(u32, u32)>>,
    /// Items naming a prefix whose stem this is, with the prefix.
    prefixed: Vec<(String, u32, u32)>,
}

/// A program name up to its first `-`, `.` or digit (`python3.12` → `python`,
/// `git-credential-store` → `git`): where prefixes are filed, so that a plain name (`cat`,
/// `cargo`) is looked up once and a name with a separator once more.
fn stem(name: &str) -> &str {
    name.split(|c: char| c == '-' || c == '.' || c.is_ascii_digit())
        .next()
        .unwrap_or(name)
}

#[derive(Clone, Debug, Default)]
pub struct CommandIndex {
    set: Option<RegexSet>,
    /// The literals of every pattern of `set`, when each has them: a line with none of
    /// them matches no pattern.
    prefilter: Option<AhoCorasick>,
    /// Per pattern of `set`: its rule.
    owner: Vec<u32>,
    /// Per rule: its top-level condition is a command match held entirely here.
    indexed: Vec<bool>,
    /// Program name → the `run:` items that name it; a prefix (`git-credential-*`) is filed
    /// under its stem (`git`, see [`stem`]).
    programs: Map<Slot>,
    /// Per rule: its `run:` items (empty for others).
    runs: Vec<Vec<RunMatch>>,
}

/// A command match held by the index: the `re:` patterns and `run:` items of a rule whose
/// whole condition is `command:` and/or `run:` (several under `any:`).
fn command_parts(rule: &Rule) -> Option<(Vec<&LazyRegex>, Vec<&RunMatch>)> {
    fn add<'r>(
        cond: &'r Cond,
        regexes: &mut Vec<&'r LazyRegex>,
        runs: &mut Vec<&'r RunMatch>,
    ) -> bool {
        match cond {
            Cond::Command(patterns) => patterns.iter().all(|p| match p {
                TextPattern::Regex { regex, .. } => {
                    regexes.push(regex);
                    true
                }
                _ => false,
            }),
            Cond::Run(items) => {
                runs.extend(items);
                true
            }
            Cond::Any(conds) => conds.iter().all(|c| add(c, regexes, runs)),
            _ => false,
        }
    }
    let (Some(cond), None) = (&rule.cond, &rule.effect) else {
        return None;
    };
    let (mut regexes, mut runs) = (Vec::new(), Vec::new());
    add(cond, &mut regexes, &mut runs).then_some((regexes, runs))
}

impl CommandIndex {
    /// The index of `rules`; `with_regexes: false` leaves the regex set out (a one-call
    /// load), and rules with `re:` patterns are then matched one by one.
    #[must_use]
    pub fn build(rules: &[Rule], with_regexes: bool) -> Self {
        let mut sources = Vec::new();
        // Every pattern's literals, or `None` once a pattern has none.
        let mut literals: Option<Vec<&[u8]>> = Some(Vec::new());
        let mut out = Self {
            indexed: vec![false; rules.len()],
            runs: vec![Vec::new(); rules.len()],
            ..Self::default()
        };
        for (i, rule) in rules.iter().enumerate() {
            let Some((regexes, runs)) = command_parts(rule) else {
                continue;
            };
            if !regexes.is_empty() && !with_regexes {
                continue;
            }
            out.indexed[i] = true;
            for r in regexes {
                sources.push(r.as_str());
                literals = literals.and_then(|mut all| {
                    all.extend(r.literals()?.iter().map(Vec::as_slice));
                    Some(all)
                });
                out.owner.push(i as u32);
            }
            for (j, item) in runs.iter().enumerate() {
                for p in &item.programs {
                    let at = (i as u32, j as u32);
                    if let Some(prefix) = p.strip_suffix('*') {
                        out.programs
                            .entry(stem(prefix).to_owned())
                            .or_default()
                            .prefixed
                            .push((prefix.to_owned(), at.0, at.1));
                        continue;
                    }
                    let slot = out.programs.entry(p.clone()).or_default();
                    let first = item.subcommand.first();
                    if let Some(verb) = first.and_then(Word::literal) {
                        slot.by_verb.entry(verb.to_owned()).or_default().push(at);
                    } else if let Some(folded) = first.and_then(Word::folded_literal) {
                        slot.by_folded_verb.entry(folded).or_default().push(at);
                    } else {
                        slot.exact.push(at);
                    }
                }
            }
            out.runs[i] = runs.into_iter().cloned().collect();
        }
        if sources.is_empty() {
            return out;
        }
        match RegexSet::new(&sources) {
            Ok(set) => Self {
                set: Some(set),
                // Without it every line goes through the set, as before.
                prefilter: literals.and_then(|l| AhoCorasick::new(l).ok()),
                ..out
            },
            // Each regex compiled alone; should the set not (size limits), every rule is
            // matched on its own as before.
            Err(_) => Self::default(),
        }
    }

    /// The index without its prefilter: every line through the regex set.
    #[cfg(test)]
    pub(crate) fn without_prefilter(&self) -> Self {
        Self {
            prefilter: None,
            ..self.clone()
        }
    }

    /// Whether the regex set has a prefilter.
    #[cfg(test)]
    pub(crate) fn has_prefilter(&self) -> bool {
        self.prefilter.is_some()
    }

    /// Whether rule `i` is matched through this index.
    #[must_use]
    pub fn indexed(&self, i: usize) -> bool {
        self.indexed.get(i).copied().unwrap_or(false)
    }

    /// Per rule: what of `commands` (lines) or `argvs` (words) it matches first, as a
    /// witness (``command `…` ``).
    #[must_use]
    pub fn first_matches(
        &self,
        rules: usize,
        commands: &[String],
        argvs: &[Vec<String>],
    ) -> Vec<Option<String>> {
        let mut first: Vec<Option<String>> = vec![None; rules];
        if let Some(set) = &self.set {
            for command in commands {
                if self
                    .prefilter
                    .as_ref()
                    .is_some_and(|literals| !literals.is_match(command))
                {
                    continue;
                }
                for p in &set.matches(command) {
                    if let Some(f) = self.owner.get(p).and_then(|&r| first.get_mut(r as usize)) {
                        f.get_or_insert_with(|| witness(command));
                    }
                }
            }
        }
        if self.programs.is_empty() {
            return first;
        }
        for argv in argvs {
            let Some((base, rest)) = argv.split_first() else {
                continue;
            };
            let program = canon::program(base, rest);
            let slot = self.programs.get(program);
            let stem_slot = Some(stem(program))
                .filter(|s| *s != program)
                .and_then(|s| self.programs.get(s));
            let named = slot.map_or(&[][..], |s| s.exact.as_slice());
            let by_prefix = slot
                .into_iter()
                .chain(stem_slot)
                .flat_map(|s| &s.prefixed)
                .filter(|(p, _, _)| program.starts_with(p.as_str()))
                .map(|(_, r, j)| (*r, *j));
            let mut candidates = named.iter().copied().chain(by_prefix).peekable();
            let verbs = slot.map(|s| &s.by_verb).filter(|v| !v.is_empty());
            let folded_verbs = slot.map(|s| &s.by_folded_verb).filter(|v| !v.is_empty());
            if candidates.peek().is_none() && verbs.is_none() && folded_verbs.is_none() {
                continue;
            }
            // Read as the tool reads it once, for every item that names the program.
            let Some(inv) = canon::invocation(base, rest) else {
                continue;
            };
            // The subcommand's first word is among the operands up to the first that is
            // surely one (those before may be options' values).
            let mut by_verb: Vec<(u32, u32)> = Vec::new();
            if verbs.is_some() || folded_verbs.is_some() {
                for (word, maybe_value) in inv.operands() {
                    if let Some(verbs) = verbs {
                        by_verb.extend(verbs.get(word).into_iter().flatten().copied());
                    }
                    if let Some(folded) = folded_verbs {
                        let lower = if word.bytes().any(|b| b.is_ascii_uppercase()) {
                            std::borrow::Cow::Owned(word.to_ascii_lowercase())
                        } else {
                            std::borrow::Cow::Borrowed(word)
                        };
                        by_verb.extend(folded.get(lower.as_ref()).into_iter().flatten().copied());
                    }
                    if !maybe_value {
                        break;
                    }
                }
            }
            let candidates = candidates.chain(by_verb);
            for (r, j) in candidates {
                let Some(slot) = first.get_mut(r as usize) else {
                    continue;
                };
                if slot.is_some() {
                    continue;
                }
                let hit = self
                    .runs
                    .get(r as usize)
                    .and_then(|items| items.get(j as usize))
                    .is_some_and(|item| item.matches(&inv));
                if hit {
                    *slot = Some(witness(&argv.join(" ")));
                }
            }
        }
        first
    }
}

/// What a command rule reports it matched.
pub(crate) fn witness(command: &str) -> String {
    format!("command `{}`", crate::engine::shorten(command, 120))
}
