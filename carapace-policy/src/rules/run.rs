//! Structured command rules (`run:`): a program, its subcommand, the options that must or
//! must not be given, option values and operands — matched against the command as the tool
//! reads it (`engine::shell::canon::invocation`: long option names, values split off, unique
//! prefixes expanded, wrappers peeled), not against its text. So the order of options, their
//! spelling (`-fu`, `--force-with`, `--raw=1`) and the words between them never decide.
use super::text_pattern::TextPattern;
use crate::engine::invocation::{Arg, Invocation};

/// One `run:` item; every field given must hold.
#[derive(Clone, Debug, Default)]
pub struct RunMatch {
    /// Program names; a name ending in `*` is a prefix (`git-credential-*`).
    pub programs: Vec<String>,
    /// The leading operands, one pattern each (`[config, view]`).
    pub subcommand: Vec<Word>,
    /// At least one of these options is given (empty: no requirement).
    pub any_option: Vec<String>,
    /// Every one of these options is given.
    pub all_options: Vec<String>,
    /// None of these options is given.
    pub no_option: Vec<String>,
    /// Each option given with a value one of its patterns matches.
    pub option_values: Vec<(String, Vec<Word>)>,
    /// Some operand after the subcommand matches one of these.
    pub operand: Vec<Word>,
    /// No operand after the subcommand matches one of these.
    pub no_operand: Vec<Word>,
    /// The first word after `--` (the command a runner starts) matches one of these.
    pub runs: Vec<Word>,
    /// Every option given is one of these (`None`: any).
    pub only_options: Option<Vec<String>>,
    /// At most this many operands after the subcommand.
    pub max_operands: Option<usize>,
    /// Operands and values compared without case (the patterns were built so); the tool
    /// reads them so (kubectl resource types).
    pub ignore_case: bool,
}

/// A word pattern of a `run:` item: a glob or `re:`, compared as a string when it is a
/// plain word (most are: `push`, `config`), which costs a fraction of a glob match.
#[derive(Clone, Debug)]
pub struct Word {
    pattern: TextPattern,
    /// The pattern is this word (no glob syntax).
    literal: Option<String>,
    ignore_case: bool,
}

impl Word {
    /// The word pattern `pattern`, compared without case when `ignore_case`.
    #[must_use]
    pub(crate) fn new(pattern: TextPattern, ignore_case: bool) -> Self {
        let literal = match &pattern {
            TextPattern::Glob { source, .. }
                if !source.contains(['*', '?', '[', ']', '{', '}', '\\']) =>
            {
                Some(source.clone())
            }
            _ => None,
        };
        Self {
            pattern,
            literal,
            ignore_case,
        }
    }

    /// Whether `word` (one argument as the program receives it) matches.
    #[must_use]
    pub(crate) fn matches(&self, word: &str) -> bool {
        match &self.literal {
            Some(l) if self.ignore_case => l.eq_ignore_ascii_case(word),
            Some(l) => l == word,
            None => self.pattern.matches(word),
        }
    }

    /// The one word this matches, compared exactly (not a pattern, not without case).
    #[must_use]
    pub fn literal(&self) -> Option<&str> {
        self.literal.as_deref().filter(|_| !self.ignore_case)
    }

    /// The one word this matches without (ASCII) case, in lower case: every word it
    /// matches has this lower-case form.
    #[must_use]
    pub fn folded_literal(&self) -> Option<String> {
        self.literal
            .as_deref()
            .filter(|_| self.ignore_case)
            .map(str::to_ascii_lowercase)
    }

    /// The pattern behind the word, to build its matcher ahead of use or quote it.
    #[must_use]
    pub(crate) fn pattern(&self) -> &TextPattern {
        &self.pattern
    }
}

/// Whether `program` is named by `name` (`*` at the end: a prefix).
#[must_use]
pub fn names(name: &str, program: &str) -> bool {
    match name.strip_suffix('*') {
        Some(prefix) => program.starts_with(prefix),
        None => name == program,
    }
}

impl RunMatch {
    /// Whether the command `inv` is one this item describes.
    #[must_use]
    pub fn matches(&self, inv: &Invocation) -> bool {
        if !self.programs.iter().any(|p| names(p, &inv.program)) {
            return false;
        }
        let Some((after, start)) = self.subcommand_end(inv) else {
            return false;
        };
        let same = |a: &str, b: &str| {
            if self.ignore_case {
                a.eq_ignore_ascii_case(b)
            } else {
                a == b
            }
        };
        let given = |o: &str| inv.options().any(|(name, _)| same(name, o));
        if !self.any_option.is_empty() && !self.any_option.iter().any(|o| given(o)) {
            return false;
        }
        if !self.all_options.iter().all(|o| given(o)) || self.no_option.iter().any(|o| given(o)) {
            return false;
        }
        // The subcommand's own options: those before it (`git -c …`, `kubectl --context
        // …`) belong to the program.
        if let Some(only) = &self.only_options {
            let own = inv.args.get(start..).unwrap_or_default();
            // `--no-X` turns an option off (`--no-dry-run`, `--no-quiet`): it cannot make
            // the command do less than the form the rule describes, so it never excuses it.
            let foreign = own.iter().any(|a| match a {
                Arg::Option { name, .. } => {
                    !name.starts_with("--no-") && !only.iter().any(|o| same(o, name))
                }
                _ => false,
            });
            if foreign {
                return false;
            }
        }
        let values_ok = self.option_values.iter().all(|(name, patterns)| {
            inv.options().any(|(n, v)| {
                same(n, name) && v.is_some_and(|v| patterns.iter().any(|p| p.matches(v)))
            })
        });
        if !values_ok {
            return false;
        }
        let rest = || inv.operands().skip(after);
        if let Some(max) = self.max_operands {
            if rest().filter(|(_, maybe_value)| !maybe_value).count() > max {
                return false;
            }
        }
        // A word that may be an unknown option's value does not excuse the command: the
        // doubt leans towards the rule.
        if rest().any(|(word, maybe_value)| {
            !maybe_value && self.no_operand.iter().any(|p| p.matches(word))
        }) {
            return false;
        }
        if !self.runs.is_empty()
            && !inv
                .runs()
                .is_some_and(|w| self.runs.iter().any(|p| p.matches(w)))
        {
            return false;
        }
        self.operand.is_empty()
            || rest().any(|(word, _)| self.operand.iter().any(|p| p.matches(word)))
    }

    /// Every text pattern of the item (for building them ahead of use).
    pub fn patterns(&self) -> impl Iterator<Item = &TextPattern> {
        self.subcommand
            .iter()
            .chain(&self.operand)
            .chain(&self.runs)
            .chain(&self.no_operand)
            .chain(self.option_values.iter().flat_map(|(_, p)| p))
            .map(Word::pattern)
    }

    /// How many operands the subcommand takes up, if they are the subcommand, and where in
    /// the arguments it ends: each word of the path in turn, passing over words that may be
    /// an option's value (`gcloud --project P auth …`: is `P` the value? the spec does not
    /// say).
    fn subcommand_end(&self, inv: &Invocation) -> Option<(usize, usize)> {
        let mut path = self.subcommand.iter().peekable();
        let (mut used, mut start) = (0, 0);
        for (i, arg) in inv.args.iter().enumerate() {
            let Some(want) = path.peek() else {
                break;
            };
            let Arg::Operand { word, after_option } = arg else {
                continue;
            };
            used += 1;
            if want.matches(word) {
                path.next();
                start = i + 1;
            } else if !after_option {
                return None;
            }
        }
        path.peek().is_none().then_some((used, start))
    }
}
