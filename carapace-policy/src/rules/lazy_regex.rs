//! A rule's `re:` patterns and path globs, checked when the rules load and compiled when
//! first matched.
//!
//! `carapace hook --local` and `check --local` load every pack for one call, and building
//! the matchers of a hundred Unicode-aware regexes was most of what such a call cost; most
//! of them never see a text in that call (a `Read` asks no command regex). Loading checks
//! the syntax (cheap: no automaton is built), so a malformed pattern is still reported with
//! its rule; the daemon and `rules check` compile them all up front (`RuleSet::compile_all`)
//! so that nothing else (a size limit) can fail later.
//!
//! Before it is compiled, a regex is tried with the literals every match of it starts (or
//! ends) with, when it has a short list of them (`\bcurl\b.*\|\s*sh` with `curl`, a key
//! format with its fixed prefix): a text with none of them cannot match, and most texts of
//! a call hold none of most rules' literals.

use std::fmt;
use std::sync::OnceLock;

use regex::Regex;

use super::needles::needles;

// `BUILTIN`: every `re:` pattern of rules/builtin/*.yaml with its literals, sorted.
include!(concat!(env!("OUT_DIR"), "/builtin_regexes.rs"));

pub struct LazyRegex {
    source: String,
    /// Literals one of which every match contains, when few enough to try first.
    needles: Option<Vec<Vec<u8>>>,
    compiled: OnceLock<Result<Regex, LazyError>>,
}

/// Why a `re:` pattern or a glob set cannot be used, shown by the last line of the
/// library's message: the line that says what is wrong (the ones before draw the pattern).
#[derive(Debug, Clone, thiserror::Error)]
pub enum LazyError {
    /// The regex does not parse.
    #[error("{}", last_line(&.0.to_string()))]
    Syntax(#[source] Box<regex_syntax::Error>),
    /// The regex parses but cannot be built (its automaton would exceed the size limit).
    #[error("{}", last_line(&.0.to_string()))]
    Regex(#[source] regex::Error),
    /// The glob set cannot be built.
    #[error("{}", last_line(&.0.to_string()))]
    GlobSet(#[source] globset::Error),
}

impl LazyRegex {
    /// A pattern whose syntax `regex` accepts; the error says what is wrong otherwise.
    pub fn new(source: &str) -> Result<Self, LazyError> {
        // The built-in packs' patterns were parsed, and their literals found, when the crate
        // was built (`build.rs`): a one-call loader does not parse a hundred regexes again.
        if let Ok(i) = BUILTIN.binary_search_by(|(known, _)| (*known).cmp(source)) {
            return Ok(Self {
                source: source.to_owned(),
                needles: BUILTIN[i]
                    .1
                    .map(|list| list.iter().map(|n| n.to_vec()).collect()),
                compiled: OnceLock::new(),
            });
        }
        let hir = regex_syntax::ParserBuilder::new()
            .nest_limit(NEST_LIMIT)
            .build()
            .parse(source)
            .map_err(|e| LazyError::Syntax(Box::new(e)))?;
        Ok(Self {
            source: source.to_owned(),
            needles: needles(&hir),
            compiled: OnceLock::new(),
        })
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The literals one of which every match contains (tried before the regex is
    /// compiled, and by the command index before its regex set).
    pub(crate) fn literals(&self) -> Option<&[Vec<u8>]> {
        self.needles.as_deref()
    }

    /// The compiled regex, or why it cannot be built (its automaton would exceed the size
    /// limit).
    pub fn compile(&self) -> Result<&Regex, &LazyError> {
        self.compiled
            .get_or_init(|| Regex::new(&self.source).map_err(LazyError::Regex))
            .as_ref()
    }

    /// Whether `text` matches. A pattern that cannot be built matches everything, so that
    /// a rule whose pattern cannot be checked refuses rather than lets through. Only the
    /// one-call loaders ever get here with such a pattern: the daemon and `rules check`
    /// compile every pattern first and refuse the file, naming the rule.
    #[must_use]
    pub fn is_match(&self, text: &str) -> bool {
        if self.compiled.get().is_none() {
            if let Some(needles) = &self.needles {
                let hay = text.as_bytes();
                if !needles
                    .iter()
                    .any(|n| memchr::memmem::find(hay, n).is_some())
                {
                    return false;
                }
            }
        }
        self.compile().map_or(true, |r| r.is_match(text))
    }
}

/// A `command:` or `tool:` glob, whose matcher (a regex underneath) is built when first used.
#[derive(Clone, Debug)]
pub struct LazyGlob {
    glob: globset::Glob,
    matcher: OnceLock<globset::GlobMatcher>,
}

impl LazyGlob {
    #[must_use]
    pub fn new(glob: globset::Glob) -> Self {
        Self {
            glob,
            matcher: OnceLock::new(),
        }
    }

    #[must_use]
    pub fn is_match(&self, text: &str) -> bool {
        self.matcher
            .get_or_init(|| self.glob.compile_matcher())
            .is_match(text)
    }
}

/// A path pattern's globs (one per home `~` stands for), checked when the rules load and
/// built into one matcher when first used.
pub struct LazyGlobSet {
    globs: Vec<globset::Glob>,
    set: OnceLock<Result<globset::GlobSet, LazyError>>,
}

impl LazyGlobSet {
    /// Globs that parsed: building their matcher can then only fail on a size limit.
    #[must_use]
    pub fn new(globs: Vec<globset::Glob>) -> Self {
        Self {
            globs,
            set: OnceLock::new(),
        }
    }

    /// The matcher, or why it cannot be built.
    pub fn compile(&self) -> Result<&globset::GlobSet, &LazyError> {
        self.set
            .get_or_init(|| {
                let mut builder = globset::GlobSetBuilder::new();
                for g in &self.globs {
                    builder.add(g.clone());
                }
                builder.build().map_err(LazyError::GlobSet)
            })
            .as_ref()
    }

    #[cfg(test)]
    pub(crate) fn is_built(&self) -> bool {
        self.set.get().is_some()
    }

    /// Whether `path` matches. A set that cannot be built matches everything, as a regex
    /// that cannot ([`LazyRegex::is_match`]); the daemon and `rules check` build every set
    /// first and refuse the file.
    #[must_use]
    pub fn is_match(&self, path: &str) -> bool {
        self.compile().map_or(true, |s| s.is_match(path))
    }
}

impl Clone for LazyGlobSet {
    fn clone(&self) -> Self {
        let set = OnceLock::new();
        if let Some(done) = self.set.get() {
            let _ = set.set(done.clone());
        }
        Self {
            globs: self.globs.clone(),
            set,
        }
    }
}

impl fmt::Debug for LazyGlobSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let globs: Vec<&str> = self.globs.iter().map(globset::Glob::glob).collect();
        f.debug_tuple("LazyGlobSet").field(&globs).finish()
    }
}

/// Whether `source` is a pattern of the built-in packs, parsed when the crate was built.
#[cfg(test)]
pub(crate) fn is_builtin(source: &str) -> bool {
    BUILTIN
        .binary_search_by(|(known, _)| (*known).cmp(source))
        .is_ok()
}

/// `regex`'s own default nesting limit, so that what loads here is what `Regex::new` parses.
const NEST_LIMIT: u32 = super::needles::NEST_LIMIT;

fn last_line(message: &str) -> String {
    message.lines().last().unwrap_or_default().trim().to_owned()
}

impl Clone for LazyRegex {
    fn clone(&self) -> Self {
        let compiled = OnceLock::new();
        if let Some(done) = self.compiled.get() {
            // A clone of a compiled regex shares its automaton (`Regex` is reference-counted).
            let _ = compiled.set(done.clone());
        }
        Self {
            source: self.source.clone(),
            needles: self.needles.clone(),
            compiled,
        }
    }
}

impl fmt::Debug for LazyRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LazyRegex").field(&self.source).finish()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Regexes built from literals, classes, repetition, alternation, anchors and
    /// case-insensitivity: the shapes rule patterns are made of.
    fn pattern() -> impl Strategy<Value = String> {
        let atom = prop_oneof![
            "[a-c]{1,3}",
            Just(".".to_owned()),
            Just(r"\s".to_owned()),
            Just(r"\w+".to_owned()),
            Just(r"\b".to_owned()),
            Just("[ab]".to_owned()),
            Just("^".to_owned()),
            Just("$".to_owned()),
            Just("(?i)".to_owned()),
        ];
        atom.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(|v| v.concat()),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("(?:{a}|{b})")),
                (inner.clone(), 0..3_u8).prop_map(|(a, k)| match k {
                    0 => format!("(?:{a})*"),
                    1 => format!("(?:{a})?"),
                    _ => format!("(?:{a}){{1,2}}"),
                }),
            ]
        })
    }

    proptest! {
        /// The literal check only ever skips texts the regex does not match.
        #[test]
        fn the_literals_never_hide_a_match(re in pattern(), text in "[abcAB \n.]{0,12}") {
            let Ok(expected) = Regex::new(&re) else { return Ok(()) };
            let lazy = LazyRegex::new(&re).expect("parses when Regex::new does");
            prop_assert_eq!(lazy.is_match(&text), expected.is_match(&text), "{}", re);
        }
    }

    #[test]
    fn syntax_errors_are_found_without_compiling() {
        assert!(LazyRegex::new("a(b").is_err());
        assert!(LazyRegex::new(r"\p{Nope}").is_err());
        let r = LazyRegex::new(r"^curl\s+.*\|\s*sh$").expect("valid");
        assert!(r.compiled.get().is_none());
        assert!(r.is_match("curl x | sh"));
        assert!(!r.is_match("curl x"));
    }

    #[test]
    fn a_pattern_too_big_to_build_matches_everything() {
        // Parses, but its automaton exceeds the default size limit.
        let r = LazyRegex::new(r"\w{1000}{1000}").expect("the syntax is fine");
        assert!(r.compile().is_err());
        assert!(r.is_match("anything"));
    }

    #[test]
    fn texts_without_the_literals_are_not_compiled_for() {
        let r = LazyRegex::new(r"(?i)\bcurl\b.*\|\s*(ba)?sh").expect("valid");
        assert!(r.needles.is_some());
        assert!(!r.is_match("cargo build --release"));
        assert!(r.compiled.get().is_none());
        assert!(r.is_match("CURL -s x | bash"));
        // A literal inside: the fork bomb's `()`.
        let bomb = LazyRegex::new(r"(\w+|:)\s*\(\)\s*\{").expect("valid");
        assert_eq!(bomb.needles, Some(vec![b"()".to_vec()]));
        assert!(!bomb.is_match("cat /tmp/x"));
        assert!(bomb.compiled.get().is_none());
        assert!(bomb.is_match(":(){ :|:& };:"));
        // No literal every match has: compiled for any text.
        let any = LazyRegex::new(r"\w+\s|^\d").expect("valid");
        assert!(any.needles.is_none());
        assert!(any.is_match("key value"));
    }

    #[test]
    fn clones_keep_what_was_compiled() {
        let r = LazyRegex::new("ab+").expect("valid");
        assert!(r.is_match("abb"));
        assert!(r.clone().compiled.get().is_some());
    }
}
