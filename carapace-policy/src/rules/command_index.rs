//! The `re:` patterns of every rule that matches on command lines, in one regex set: each
//! command line of a call is run through it once, instead of through each rule's regexes
//! one after the other (a Bash call carries several command lines and the packs a dozen
//! such rules, so this was most of what a shell command cost after its parse). Loaders of
//! one call (`hook --local`) build no set: building it costs more than the one call saves,
//! and each rule's regex is tried first by its literals (see `lazy_regex`), rarely built.
use regex::RegexSet;

use super::model::{Cond, TextPattern};
use super::Rule;

#[derive(Clone, Debug, Default)]
pub struct CommandIndex {
    set: Option<RegexSet>,
    /// Per pattern of `set`: its rule.
    owner: Vec<u32>,
    /// Per rule: its top-level condition is a command match held entirely here.
    indexed: Vec<bool>,
}

/// The patterns of a rule whose whole condition is `command:` made of regexes.
fn command_regexes(rule: &Rule) -> Option<Vec<&str>> {
    let (Some(Cond::Command(patterns)), None) = (&rule.cond, &rule.effect) else {
        return None;
    };
    patterns
        .iter()
        .map(|p| match p {
            TextPattern::Regex { regex, .. } => Some(regex.as_str()),
            _ => None,
        })
        .collect()
}

impl CommandIndex {
    #[must_use]
    pub fn build(rules: &[Rule]) -> Self {
        let mut sources = Vec::new();
        let mut owner = Vec::new();
        let mut indexed = vec![false; rules.len()];
        for (i, rule) in rules.iter().enumerate() {
            if let Some(regexes) = command_regexes(rule) {
                indexed[i] = true;
                for r in regexes {
                    sources.push(r);
                    owner.push(i as u32);
                }
            }
        }
        match RegexSet::new(&sources) {
            Ok(set) if !sources.is_empty() => Self {
                set: Some(set),
                owner,
                indexed,
            },
            // Each regex compiled alone; should the set not (size limits), every rule is
            // matched on its own as before.
            _ => Self::default(),
        }
    }

    /// Whether rule `i` is matched through this index.
    #[must_use]
    pub fn indexed(&self, i: usize) -> bool {
        self.indexed.get(i).copied().unwrap_or(false)
    }

    /// Per rule: the first of `commands` one of its indexed patterns matches.
    #[must_use]
    pub fn first_matches(&self, rules: usize, commands: &[String]) -> Vec<Option<usize>> {
        let mut first = vec![None; rules];
        let Some(set) = &self.set else {
            return first;
        };
        for (c, command) in commands.iter().enumerate() {
            for p in &set.matches(command) {
                if let Some(f) = self.owner.get(p).and_then(|&r| first.get_mut(r as usize)) {
                    f.get_or_insert(c);
                }
            }
        }
        first
    }
}
