//! Every `content:` pattern of every rule (regexes and substrings) in one regex set, used as
//! a filter: each text a call carries is run through the set once, and a text that no
//! pattern of the set matches needs none of them tried on it. Almost no text an agent
//! writes or sends holds a secret or a fork bomb, so this spares the packs' content
//! regexes one by one on every text (they were a quarter of a file write's decision).
//! Loaders of one call build no set, as for [`super::command_index`].
use regex::RegexSet;

use super::model::{Cond, Effect, TextPattern};
use super::Rule;

#[derive(Clone, Debug, Default)]
pub struct ContentIndex {
    set: Option<RegexSet>,
}

/// The pattern as a regex of the set; globs are left to be matched on their own.
fn as_regex(p: &TextPattern) -> Option<String> {
    match p {
        TextPattern::Regex { regex, .. } => Some(regex.as_str().to_owned()),
        TextPattern::Substring(s) => Some(regex::escape(s)),
        TextPattern::Glob { .. } => None,
    }
}

/// Whether the set answers for `p` ([`ContentIndex::may_match`]).
#[must_use]
pub fn indexed(p: &TextPattern) -> bool {
    !matches!(p, TextPattern::Glob { .. })
}

fn content_patterns<'r>(cond: &'r Cond, out: &mut Vec<&'r TextPattern>) {
    match cond {
        Cond::Content(patterns) => out.extend(patterns),
        Cond::All(conds) | Cond::Any(conds) => {
            for c in conds {
                content_patterns(c, out);
            }
        }
        Cond::Not(c) => content_patterns(c, out),
        _ => {}
    }
}

impl ContentIndex {
    #[must_use]
    pub fn build(rules: &[Rule]) -> Self {
        let mut patterns = Vec::new();
        for rule in rules {
            if let Some(c) = &rule.cond {
                content_patterns(c, &mut patterns);
            }
            if let Some(Effect::Actions { cond: Some(c), .. }) = &rule.effect {
                content_patterns(c, &mut patterns);
            }
        }
        let mut sources: Vec<String> = patterns.into_iter().filter_map(as_regex).collect();
        sources.sort_unstable();
        sources.dedup();
        // Each regex compiled alone; should the set not (size limits), every pattern is
        // tried on its own as before.
        let set = (!sources.is_empty())
            .then(|| RegexSet::new(&sources).ok())
            .flatten();
        Self { set }
    }

    /// Whether some indexed pattern could match `text`: `false` means none does.
    #[must_use]
    pub fn may_match(&self, text: &str) -> bool {
        self.set.as_ref().is_none_or(|s| s.is_match(text))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::rules::{Homes, Options, RuleSet};

    fn builtin() -> &'static RuleSet {
        static RULES: std::sync::OnceLock<RuleSet> = std::sync::OnceLock::new();
        RULES.get_or_init(|| {
            RuleSet::parse_with(
                "t",
                "version: 1\nbuiltin: all\n",
                &Options {
                    homes: Homes::fixed(["/home/alice"]),
                    resolver: |_| None,
                    host: crate::host::real::host(),
                },
            )
            .expect("the packs compile")
        })
    }

    proptest! {
        /// A text the set rules out matches no indexed content pattern of the packs.
        #[test]
        fn a_text_the_set_rules_out_matches_no_pattern(
            text in prop_oneof![
                ".{0,60}",
                "(AKIA[0-9A-Z]{16}|ghp_[a-z0-9]{36}|:\\(\\)\\{ :\\|:& \\};:|hookspath = x| )*",
            ],
        ) {
            let rules = builtin();
            check(rules, &text)?;
        }
    }

    fn check(rules: &RuleSet, text: &str) -> Result<(), TestCaseError> {
        if rules.content_index().may_match(text) {
            return Ok(());
        }
        for rule in rules.rules() {
            let mut patterns = Vec::new();
            if let Some(c) = &rule.cond {
                super::content_patterns(c, &mut patterns);
            }
            for p in patterns.into_iter().filter(|p| super::indexed(p)) {
                prop_assert!(!p.matches(text), "rule {} pattern {}", rule.id, p.source());
            }
        }
        Ok(())
    }

    #[test]
    fn the_packs_secrets_and_fork_bombs_pass_the_filter() {
        let rules = builtin();
        let index = rules.content_index();
        assert!(index.set.is_some());
        assert!(index.may_match("key = AKIAABCDEFGHIJKLMNOP"));
        assert!(index.may_match(":(){ :|:& };:"));
        assert!(!index.may_match("pub fn f() {}\n"));
    }
}
