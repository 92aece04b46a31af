//! The kernel's path automaton: path patterns that no map form can hold (`/home/*/.ssh/**`,
//! `/srv/**/secret-*.pem`, `re:` regexes) compiled into one deterministic automaton, whose
//! table the eBPF programs walk over the bytes of `d_path` (see `carapace_common::DfaHeader`).
//!
//! Every pattern is anchored at both ends of the path, so the programs need to look at the
//! state the last byte leads to and nothing else: its accepting entry lists the rules (and
//! exceptions) whose pattern matches the whole path. One automaton holds every pattern of a
//! rule set (a DFA is walked once whatever the number of patterns it holds); `regex-automata`
//! determinises and minimises it, and its byte classes keep the table's rows short.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use carapace_common::{RuleRef, DFA_CELLS, DFA_GROUPS, DFA_STATES, REFS_PER_KEY};
use regex_automata::{
    dfa::{dense, Automaton as _, StartKind},
    nfa::thompson,
    util::{primitives::StateID, start, syntax},
    Anchored, MatchKind,
};
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Repetition};

/// What a pattern means, before it is parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A glob's regex (globset's own translation, so the kernel and Layer 1 agree): it
    /// matches the whole path.
    Glob(String),
    /// A `re:` regex: like Layer 1's `Regex::is_match`, it matches when it matches anywhere
    /// in the path.
    Search(String),
}

/// Bytes the construction of one automaton may use: a few times what the largest automaton
/// the maps hold needs (`DFA_STATES` × 257 classes × 4 bytes), so that a pathological regex
/// fails fast instead of eating the daemon's memory and time.
const BUILD_LIMIT: usize = 8 << 20;

/// Any byte, any number of times: what a `re:` regex may have around its match.
fn any_bytes() -> Hir {
    let any = Hir::class(Class::Bytes(ClassBytes::new([ClassBytesRange::new(
        0, 0xff,
    )])));
    Hir::repetition(Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(any),
    })
}

/// The anchored-at-both-ends regular language of a pattern.
pub fn hir(source: &Source) -> Result<Hir, String> {
    // `utf8(false)`: a path is bytes, and a pattern may match bytes that are not UTF-8.
    let config = syntax::Config::new().utf8(false);
    match source {
        Source::Glob(regex) => {
            // globset compiles its regexes with `.` matching `\n`; so must we.
            syntax::parse_with(regex, &config.dot_matches_new_line(true))
                .map_err(|e| format!("glob regex `{regex}`: {e}"))
        }
        Source::Search(regex) => {
            let inner = syntax::parse_with(regex, &config)
                .map_err(|e| format!("regex `{regex}`: {}", first_line(&e.to_string())))?;
            Ok(Hir::concat(vec![any_bytes(), inner, any_bytes()]))
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().last().unwrap_or(s).trim()
}

/// A path automaton in the layout of the kernel maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathAutomaton {
    pub start: u32,
    /// Byte classes, the length of a row of `trans`.
    pub stride: u32,
    pub classes: [u8; 256],
    /// Row `s` holds the next state of state `s` for each byte class. State 0 is dead.
    pub trans: Vec<u32>,
    /// Accepting states → the refs of every pattern that matches a path ending there,
    /// sorted by rule.
    pub accept: BTreeMap<u32, Vec<RuleRef>>,
}

impl PathAutomaton {
    #[must_use]
    pub fn states(&self) -> usize {
        self.trans.len() / self.stride.max(1) as usize
    }

    /// The refs whose pattern matches `path`: the walk the eBPF programs do.
    #[must_use]
    pub fn matches(&self, path: &[u8]) -> &[RuleRef] {
        let mut state = self.start;
        for &b in path {
            let class = u32::from(self.classes[usize::from(b)]);
            state = self.trans[(state * self.stride + class) as usize];
            if state == 0 {
                return &[];
            }
        }
        self.accept.get(&state).map_or(&[], Vec::as_slice)
    }
}

/// Why a set of patterns does not fit the kernel's automaton.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// A pattern uses something a DFA cannot express.
    Unsupported(String),
    /// The automaton is larger than the kernel maps.
    TooLarge(String),
    /// More than `REFS_PER_KEY` rules match in one state.
    Crowded(Vec<RuleRef>),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unsupported(m) | Self::TooLarge(m) => f.write_str(m),
            Self::Crowded(refs) => write!(
                f,
                "{} rules match one path of the path automaton; the kernel holds at most \
                 {REFS_PER_KEY}",
                refs.len()
            ),
        }
    }
}

const UNICODE_WORD_BOUNDARY: &str = "a Unicode word boundary (`\\b`) cannot be decided one \
     byte at a time; write `(?-u:\\b)` for an ASCII one";

/// Whether one pattern can be compiled into a path automaton at all (the reason if not);
/// whether the rule set's automaton fits the maps is decided by [`build`].
pub fn check(source: &Source) -> Result<(), String> {
    let hir = hir(source)?;
    if hir.properties().look_set().contains_word_unicode() {
        return Err(UNICODE_WORD_BOUNDARY.into());
    }
    Ok(())
}

fn build_error(e: &dyn std::fmt::Display) -> BuildError {
    let text = e.to_string();
    if text.contains("Unicode word boundar") {
        BuildError::Unsupported(UNICODE_WORD_BOUNDARY.into())
    } else {
        BuildError::TooLarge(format!("the path automaton cannot be built: {text}"))
    }
}

fn determinize(hirs: &[Hir]) -> Result<dense::DFA<Vec<u32>>, BuildError> {
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .utf8(false)
                .which_captures(thompson::WhichCaptures::None)
                .nfa_size_limit(Some(BUILD_LIMIT)),
        )
        .build_many_from_hir(hirs)
        .map_err(|e| build_error(&e))?;
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .byte_classes(true)
                .minimize(true)
                .dfa_size_limit(Some(BUILD_LIMIT))
                .determinize_size_limit(Some(BUILD_LIMIT)),
        )
        .build_from_nfa(&nfa)
        .map_err(|e| build_error(&e))
}

/// Builds the automata of `patterns` (source, the ref a match yields): as few as hold them,
/// at most `DFA_GROUPS`. Patterns that look for a name anywhere in the path multiply each
/// other's states, so one automaton for everything can be far larger than a few side by
/// side. A rule's patterns and exceptions may land in different automata: the programs
/// gather the refs of every automaton before judging. Patterns are packed in order, a new
/// automaton started when the next one does not fit the current one.
pub fn build(patterns: &[(Source, RuleRef)]) -> Result<Vec<PathAutomaton>, BuildError> {
    // The common case first: everything in one automaton.
    match build_one(patterns) {
        Ok(a) => return Ok(a.into_iter().collect()),
        Err(BuildError::Unsupported(m)) => return Err(BuildError::Unsupported(m)),
        Err(_) => {}
    }
    let mut done: Vec<PathAutomaton> = Vec::new();
    let mut current: Vec<(Source, RuleRef)> = Vec::new();
    let mut built: Option<PathAutomaton> = None;
    for pattern in patterns {
        let mut candidate = current.clone();
        candidate.push(pattern.clone());
        match build_one(&candidate) {
            Ok(a) => {
                current = candidate;
                built = a;
            }
            Err(e) if current.is_empty() => return Err(e),
            Err(BuildError::Unsupported(m)) => return Err(BuildError::Unsupported(m)),
            Err(_) => {
                done.extend(built.take());
                if done.len() >= DFA_GROUPS {
                    return Err(BuildError::TooLarge(format!(
                        "the rule set's {} path patterns need more than {DFA_GROUPS} \
                         automata of {DFA_STATES} states",
                        patterns.len()
                    )));
                }
                current = vec![pattern.clone()];
                built = build_one(&current)?;
            }
        }
    }
    done.extend(built);
    Ok(done)
}

/// Builds one automaton of `patterns`; `None` when there are none.
fn build_one(patterns: &[(Source, RuleRef)]) -> Result<Option<PathAutomaton>, BuildError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let hirs = patterns
        .iter()
        .map(|(s, _)| hir(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(BuildError::Unsupported)?;
    let dfa = determinize(&hirs)?;

    let byte_classes = dfa.byte_classes();
    // The last class is end-of-input, which the programs never feed.
    let stride = byte_classes.alphabet_len() - 1;
    let mut classes = [0u8; 256];
    let mut representative = vec![None; stride];
    for b in 0..=255u8 {
        let c = byte_classes.get(b);
        classes[usize::from(b)] = c;
        representative[usize::from(c)].get_or_insert(b);
    }

    let too_large = |states: usize| {
        BuildError::TooLarge(format!(
            "the path automaton of the rule set's {} pattern(s) needs more than {states} \
             states of {stride} byte classes; the kernel holds {DFA_STATES} states and \
             {DFA_CELLS} transitions",
            patterns.len()
        ))
    };
    let start = dfa
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .map_err(|e| BuildError::Unsupported(format!("no start state: {e}")))?;
    // Dense renumbering: 0 is dead, the start state 1, the rest in breadth-first order.
    let mut index: BTreeMap<StateID, u32> = BTreeMap::new();
    let mut order: Vec<StateID> = Vec::new();
    let mut queue = VecDeque::new();
    let number = |id: StateID,
                  index: &mut BTreeMap<StateID, u32>,
                  order: &mut Vec<StateID>,
                  queue: &mut VecDeque<StateID>|
     -> Result<u32, BuildError> {
        if dfa.is_dead_state(id) {
            return Ok(0);
        }
        if dfa.is_quit_state(id) {
            return Err(BuildError::Unsupported(
                "the path automaton would have to give up on some byte".into(),
            ));
        }
        if let Some(&n) = index.get(&id) {
            return Ok(n);
        }
        let n = order.len() as u32 + 1;
        if n as usize >= DFA_STATES || (n as usize + 1) * stride > DFA_CELLS {
            return Err(too_large(n as usize));
        }
        index.insert(id, n);
        order.push(id);
        queue.push_back(id);
        Ok(n)
    };
    let start_index = number(start, &mut index, &mut order, &mut queue)?;
    let mut trans = vec![0u32; stride];
    let mut accept = BTreeMap::new();
    while let Some(id) = queue.pop_front() {
        let n = index[&id];
        let mut row = Vec::with_capacity(stride);
        for rep in &representative {
            let next = match rep {
                Some(b) => number(dfa.next_state(id, *b), &mut index, &mut order, &mut queue)?,
                None => 0,
            };
            row.push(next);
        }
        debug_assert_eq!(trans.len(), n as usize * stride);
        trans.extend(row);
        let eoi = dfa.next_eoi_state(id);
        if dfa.is_match_state(eoi) {
            let refs: BTreeSet<(u32, u32)> = (0..dfa.match_len(eoi))
                .map(|i| patterns[dfa.match_pattern(eoi, i).as_usize()].1)
                .map(|r| (r.rule, r.flags))
                .collect();
            let refs: Vec<RuleRef> = refs
                .into_iter()
                .map(|(rule, flags)| RuleRef { rule, flags })
                .collect();
            if refs.len() > REFS_PER_KEY {
                return Err(BuildError::Crowded(refs));
            }
            accept.insert(n, refs);
        }
    }
    Ok(Some(PathAutomaton {
        start: start_index,
        stride: stride as u32,
        classes,
        trans,
        accept,
    }))
}

#[cfg(test)]
mod tests {
    use carapace_common::REF_EXCEPT;

    use super::*;

    fn glob(g: &str) -> Source {
        let glob = globset::GlobBuilder::new(g)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .unwrap();
        Source::Glob(glob.regex().to_owned())
    }

    fn r(rule: u32) -> RuleRef {
        RuleRef { rule, flags: 0 }
    }

    #[test]
    fn globs_and_regexes_share_one_automaton() {
        let a = build(&[
            (glob("/home/*/.ssh/**"), r(0)),
            (glob("/srv/**/secret-*.pem"), r(1)),
            (Source::Search(r"/proc/\d+/environ".into()), r(2)),
            (
                glob("/home/*/.ssh/known_hosts"),
                RuleRef {
                    rule: 0,
                    flags: REF_EXCEPT,
                },
            ),
        ])
        .unwrap();
        assert_eq!(a.len(), 1);
        let a = &a[0];
        let m = |p: &str| a.matches(p.as_bytes()).to_vec();
        assert_eq!(m("/home/a/.ssh/id_rsa"), [r(0)]);
        assert_eq!(m("/home/a/.ssh/sub/x"), [r(0)]);
        assert_eq!(m("/home/a/b/.ssh/id_rsa"), []);
        assert_eq!(m("/home/a/.ssh"), []);
        assert_eq!(
            m("/home/a/.ssh/known_hosts"),
            [
                r(0),
                RuleRef {
                    rule: 0,
                    flags: REF_EXCEPT
                }
            ]
        );
        assert_eq!(m("/srv/secret-1.pem"), [r(1)]);
        assert_eq!(m("/srv/a/b/secret-x.pem"), [r(1)]);
        assert_eq!(m("/srv/a/secret-x.pem.bak"), []);
        assert_eq!(m("/proc/12/environ"), [r(2)]);
        assert_eq!(m("/x/proc/1/environ/y"), [r(2)]);
        assert_eq!(m("/proc/self/environ"), []);
        // Unicode `\d` is most of them.
        assert!(a.states() < 512, "{} states", a.states());
        assert_eq!(a.start, 1);
        assert_eq!(a.trans[..a.stride as usize], vec![0; a.stride as usize][..]);
    }

    #[test]
    fn regexes_match_bytes_that_are_not_utf8() {
        let a = build(&[(Source::Search("secret".into()), r(0))]).unwrap();
        let a = &a[0];
        assert_eq!(a.matches(b"/tmp/\xff\xfe/secret"), [r(0)]);
        assert_eq!(a.matches(b"/tmp/\xff"), []);
    }

    #[test]
    fn impossible_and_oversized_patterns_are_refused_precisely() {
        let e = check(&Source::Search(r"\bkey\b".into())).unwrap_err();
        assert!(e.contains("Unicode word boundary"), "{e}");
        assert!(check(&Source::Search(r"(?-u:\b)key".into())).is_ok());
        let e = build(&[(Source::Search(r"\bkey".into()), r(0))]).unwrap_err();
        assert!(
            matches!(&e, BuildError::Unsupported(m) if m.contains("`(?-u:\\b)`")),
            "{e:?}"
        );
        // Remembering the byte 13 bytes back needs 2^13 states.
        let e = build(&[(Source::Search("(?-u)[ab].{12}$".into()), r(0))]).unwrap_err();
        assert!(
            matches!(&e, BuildError::TooLarge(m) if m.contains("the kernel holds")),
            "{e:?}"
        );
        // More rules than a state can list match the same paths: a second automaton.
        let crowded: Vec<_> = (0..=REFS_PER_KEY as u32)
            .map(|i| (glob("/x/*/y"), r(i)))
            .collect();
        let two = build(&crowded).unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(
            two[0].matches(b"/x/a/y").len() + two[1].matches(b"/x/a/y").len(),
            9
        );
        assert_eq!(build(&[]), Ok(vec![]));
        // Rules that do not fit one automaton together get one each: each remembers which
        // of its two bytes came 11 back (2^11 states), together they remember one of three
        // classes per position (3^11).
        let counted = |class: &str| Source::Search(format!("(?-u)[{class}].{{10}}$"));
        let two = build(&[(counted("ab"), r(0)), (counted("cd"), r(1))]).unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(two[0].matches(b"/xa0123456789"), [r(0)]);
        assert_eq!(two[1].matches(b"/xc0123456789"), [r(1)]);
        assert!(two[1].matches(b"/xa0123456789").is_empty());
    }

    const GLOBS: [&str; 4] = ["/a/*/.ssh/**", "/**/secret-*.pem", "**/b", "/a/{x,b}/*"];
    const REGEXES: [&str; 4] = ["a.b", "^/x", "(?i)SECRET", "\u{e9}$"];

    static COMBINED: std::sync::LazyLock<PathAutomaton> = std::sync::LazyLock::new(|| {
        let mut patterns: Vec<(Source, RuleRef)> = GLOBS
            .iter()
            .enumerate()
            .map(|(i, g)| (glob(g), r(i as u32)))
            .collect();
        patterns.extend(
            REGEXES
                .iter()
                .enumerate()
                .map(|(i, re)| (Source::Search((*re).into()), r(10 + i as u32))),
        );
        let mut all = build(&patterns).unwrap();
        assert_eq!(all.len(), 1);
        all.remove(0)
    });

    proptest::proptest! {
        /// The table walk answers like globset and the regex crate on the same patterns.
        #[test]
        fn walk_agrees_with_regex(path in "(/|a|b|\\.ssh|x|secret-|\\.pem|\\n|\u{e9}){0,12}") {
            let (globs, regexes, a) = (GLOBS, REGEXES, &*COMBINED);
            let got: Vec<u32> = a.matches(path.as_bytes()).iter().map(|r| r.rule).collect();
            let mut want = Vec::new();
            for (i, g) in globs.iter().enumerate() {
                let m = globset::GlobBuilder::new(g).literal_separator(true).build().unwrap().compile_matcher();
                if m.is_match(&path) {
                    want.push(i as u32);
                }
            }
            for (i, re) in regexes.iter().enumerate() {
                if regex::Regex::new(re).unwrap().is_match(&path) {
                    want.push(10 + i as u32);
                }
            }
            proptest::prop_assert_eq!(got, want, "{:?}", path);
        }
    }
}
