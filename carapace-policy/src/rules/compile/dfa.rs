//! The kernel's path automata: path patterns that no map form can hold (`/home/*/.ssh/**`,
//! `/srv/**/secret-*.pem`, `re:` regexes) compiled into deterministic automata, whose
//! tables the eBPF programs walk over the bytes of `d_path` (see `carapace_common::DfaHeader`).
//!
//! Every pattern is anchored at the start of the path. Most are anchored at its end too, and
//! the state the last byte leads to lists the rules (and exceptions) whose pattern matches the
//! whole path. Patterns ending in `/**` and `re:` regexes match as soon as a prefix of the
//! path does: their matches are listed on the states reached on the way
//! ([`PathAutomaton::early`]) and gathered by the walk, so no state has to remember them —
//! remembering would multiply the states by two per pattern. Patterns anchored at the root
//! and floating ones (`**/…`, regexes) are built apart for the same reason. `regex-automata`
//! determinises and minimises each automaton, and its byte classes keep the rows short.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use carapace_common::{RuleRef, DFA_CELLS, DFA_GROUPS, DFA_STATES, REFS_PER_KEY, REF_EXCEPT};
use regex_automata::{
    dfa::{dense, Automaton as _, StartKind},
    nfa::thompson,
    util::{primitives::StateID, start, syntax},
    Anchored, MatchKind,
};
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Repetition};

/// What a pattern means, before it is parsed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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

/// Why a pattern has no path automaton.
#[derive(Debug, thiserror::Error)]
pub enum HirError {
    /// globset's regex for a glob does not parse as a byte regex.
    #[error("glob regex `{regex}`: {source}")]
    Glob {
        /// globset's translation of the glob.
        regex: String,
        /// The parser's complaint.
        #[source]
        source: Box<regex_syntax::Error>,
    },
    /// A `re:` regex does not parse (the message's first line: the rest draws the span).
    #[error("regex `{regex}`: {}", first_line(&source.to_string()))]
    Search {
        /// The regex, as written after `re:`.
        regex: String,
        /// The parser's complaint.
        #[source]
        source: Box<regex_syntax::Error>,
    },
    /// The regex uses a Unicode word boundary, which a byte automaton cannot express.
    #[error("{UNICODE_WORD_BOUNDARY}")]
    UnicodeWordBoundary,
}

impl HirError {
    fn glob(regex: &str) -> impl FnOnce(regex_syntax::Error) -> Self + '_ {
        move |e| Self::Glob {
            regex: regex.to_owned(),
            source: Box::new(e),
        }
    }

    fn search(regex: &str) -> impl FnOnce(regex_syntax::Error) -> Self + '_ {
        move |e| Self::Search {
            regex: regex.to_owned(),
            source: Box::new(e),
        }
    }
}

/// The anchored-at-both-ends regular language of a pattern.
pub(crate) fn hir(source: &Source) -> Result<Hir, HirError> {
    // `utf8(false)`: a path is bytes, and a pattern may match bytes that are not UTF-8.
    let config = syntax::Config::new().utf8(false);
    match source {
        Source::Glob(regex) => {
            // globset compiles its regexes with `.` matching `\n`; so must we.
            syntax::parse_with(regex, &config.dot_matches_new_line(true))
                .map_err(HirError::glob(regex))
        }
        Source::Search(regex) => {
            let inner = syntax::parse_with(regex, &config).map_err(HirError::search(regex))?;
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
    /// The state a walk starts in, before the path's first byte.
    pub start: u32,
    /// Byte classes, the length of a row of `trans`.
    pub stride: u32,
    /// Each byte's class: bytes no pattern tells apart share one, which keeps rows short.
    pub classes: [u8; 256],
    /// Row `s` holds the next state of state `s` for each byte class. State 0 is dead.
    pub trans: Vec<u32>,
    /// Accepting states → the refs of every pattern that matches a path ending there,
    /// sorted by rule.
    pub accept: BTreeMap<u32, Vec<RuleRef>>,
    /// States → the refs of the early patterns (see `EARLY_BLOCKS`) that match the path
    /// read before the byte that led there: a walk gathers them on the way.
    pub early: BTreeMap<u32, Vec<RuleRef>>,
    /// The state after a directory no pattern goes on from (see
    /// `carapace_common::DfaHeader::neutral`): 0 for patterns anchored at the root.
    pub neutral: u32,
    /// States other than the dead and the neutral one → block refs (at most
    /// `REFS_PER_KEY`, lowest rules first) of patterns that some continuation of the path
    /// from there completes: what a directory ending there could bring along if it were
    /// moved or linked into place.
    pub live: BTreeMap<u32, Vec<RuleRef>>,
}

impl PathAutomaton {
    /// How many states `trans` holds (the dead one included), for the map's size.
    #[must_use]
    pub fn states(&self) -> usize {
        self.trans.len() / self.stride.max(1) as usize
    }

    /// The refs whose pattern matches `path`, sorted: the walk the eBPF programs do.
    #[must_use]
    pub fn matches(&self, path: &[u8]) -> Vec<RuleRef> {
        let mut found = BTreeSet::new();
        let mut state = self.start;
        for &b in path {
            let class = u32::from(self.classes[usize::from(b)]);
            state = self.trans[(state * self.stride + class) as usize];
            if let Some(refs) = self.early.get(&state) {
                found.extend(refs.iter().map(|r| (r.rule, r.flags)));
            }
            if state == 0 {
                break;
            }
        }
        if let Some(refs) = self.accept.get(&state) {
            found.extend(refs.iter().map(|r| (r.rule, r.flags)));
        }
        found
            .into_iter()
            .map(|(rule, flags)| RuleRef { rule, flags })
            .collect()
    }

    /// The block refs that files below directory `dir` could match if the directory were
    /// moved or linked into place there: the programs' walk of `dir` and `/`, judged by its
    /// live refs unless it ends dead or neutral.
    #[must_use]
    pub fn inside(&self, dir: &[u8]) -> Vec<RuleRef> {
        let mut state = self.start;
        for &b in dir.iter().chain(b"/") {
            let class = u32::from(self.classes[usize::from(b)]);
            state = self.trans[(state * self.stride + class) as usize];
            if state == 0 {
                return Vec::new();
            }
        }
        if state == self.neutral {
            return Vec::new();
        }
        self.live.get(&state).cloned().unwrap_or_default()
    }
}

/// What a walk of every automaton of a rule set finds, sorted: the programs' view.
#[cfg(test)]
#[must_use]
pub(crate) fn matches_all(automata: &[PathAutomaton], path: &[u8]) -> Vec<RuleRef> {
    let found: BTreeSet<(u32, u32)> = automata
        .iter()
        .flat_map(|a| a.matches(path))
        .map(|r| (r.rule, r.flags))
        .collect();
    found
        .into_iter()
        .map(|(rule, flags)| RuleRef { rule, flags })
        .collect()
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
pub fn check(source: &Source) -> Result<(), HirError> {
    let hir = hir(source)?;
    if hir.properties().look_set().contains_word_unicode() {
        return Err(HirError::UnicodeWordBoundary);
    }
    Ok(())
}

fn too_large(e: &dyn std::fmt::Display) -> BuildError {
    BuildError::TooLarge(format!("the path automaton cannot be built: {e}"))
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
        .map_err(|e| too_large(&e))?;
    // The one pattern a DFA cannot express whatever its size (regex-automata refuses it for
    // this very property of the NFA; its error has no kind to match on).
    if nfa.look_set_any().contains_word_unicode() {
        return Err(BuildError::Unsupported(UNICODE_WORD_BOUNDARY.into()));
    }
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
        .map_err(|e| too_large(&e))
}

/// Distinct rules whose block patterns a rule set's automata may match early (on entering a
/// state, see [`PathAutomaton::early`]): the programs judge them from one table of
/// `REFS_PER_KEY` refs. Further ones are matched at the end of the path like the rest.
pub(crate) const EARLY_BLOCKS: usize = REFS_PER_KEY;

/// Whether a pattern's regex may be matched early, and its regex for that: a glob ending in
/// `/**` (its regex ends in `.*$`) matches a path when a prefix of the path matches the rest,
/// and a `re:` regex when it matches anywhere. Matched at the end, each such pattern would
/// have every state of the automaton remember whether it already matched: with a few of
/// them, the automaton grows by their product (the built-in packs went from hundreds of
/// states to tens of thousands, and from milliseconds to minutes under emulation).
fn early_hir(source: &Source) -> Option<Result<Hir, HirError>> {
    let config = syntax::Config::new().utf8(false);
    match source {
        Source::Glob(regex) => {
            let head = regex.strip_suffix(".*$")?;
            Some(
                syntax::parse_with(head, &config.dot_matches_new_line(true))
                    .map_err(HirError::glob(regex)),
            )
        }
        Source::Search(regex) => Some(
            syntax::parse_with(regex, &config)
                .map(|inner| Hir::concat(vec![any_bytes(), inner]))
                .map_err(HirError::search(regex)),
        ),
    }
}

/// Whether a pattern can match starting anywhere in the path (after any directory): such
/// patterns track their progress from every position, and in one automaton with patterns
/// anchored at the root their states multiply; they are built apart.
fn floating(source: &Source) -> bool {
    match source {
        Source::Search(_) => true,
        Source::Glob(regex) => {
            let body = regex.trim_start_matches("(?-u)").trim_start_matches('^');
            body.starts_with("(?:/?|.*/)") || body.starts_with(".*")
        }
    }
}

/// One pattern as it goes into an automaton.
#[derive(Clone)]
struct Entry<'a> {
    source: &'a Source,
    r: RuleRef,
    early: bool,
}

/// Builds the automata of `patterns` (source, the ref a match yields): patterns anchored at
/// the root and patterns that float (`**/…`, `re:`) apart, each set split in halves while it
/// does not fit the maps, at most `DFA_GROUPS` automata in all. Exceptions that can be are
/// matched early; so are the block patterns of up to `EARLY_BLOCKS` rules.
pub fn build(patterns: &[(Source, RuleRef)]) -> Result<Vec<PathAutomaton>, BuildError> {
    // Determinising and minimising is most of a compile (seconds for every pack under the
    // fuzzer's instrumentation); a reload, or the next input of the rules fuzz target, that
    // keeps every path pattern gets the automata of the last build. One entry: no growth.
    static LAST: Mutex<Option<Built>> = Mutex::new(None);
    if let Some((known, built)) = LAST.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
        if known.as_slice() == patterns {
            return built.clone();
        }
    }
    let built = build_anew(patterns);
    *LAST.lock().unwrap_or_else(PoisonError::into_inner) = Some((patterns.to_vec(), built.clone()));
    built
}

/// Patterns, and what [`build`] made of them.
type Built = (
    Vec<(Source, RuleRef)>,
    Result<Vec<PathAutomaton>, BuildError>,
);

fn build_anew(patterns: &[(Source, RuleRef)]) -> Result<Vec<PathAutomaton>, BuildError> {
    let mut early_blocks: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut entries = Vec::with_capacity(patterns.len());
    for (source, r) in patterns {
        let can = matches!(source, Source::Search(_))
            || matches!(source, Source::Glob(g) if g.ends_with(".*$"));
        let early = can
            && (r.flags & REF_EXCEPT != 0 || {
                let key = (r.rule, r.flags);
                if early_blocks.len() < EARLY_BLOCKS {
                    early_blocks.insert(key);
                }
                early_blocks.contains(&key)
            });
        entries.push(Entry {
            source,
            r: *r,
            early,
        });
    }
    let (floating, rooted): (Vec<Entry<'_>>, Vec<Entry<'_>>) =
        entries.into_iter().partition(|e| floating(e.source));
    let mut done = Vec::new();
    for (set, floats) in [(rooted, false), (floating, true)] {
        build_split(&set, floats, &mut done)?;
    }
    Ok(done)
}

/// Builds `entries` into one automaton, or into two halves (recursively) when they do not
/// fit one.
fn build_split(
    entries: &[Entry<'_>],
    floats: bool,
    done: &mut Vec<PathAutomaton>,
) -> Result<(), BuildError> {
    if entries.is_empty() {
        return Ok(());
    }
    if done.len() >= DFA_GROUPS {
        return Err(BuildError::TooLarge(format!(
            "the rule set's path patterns need more than {DFA_GROUPS} automata of \
             {DFA_STATES} states"
        )));
    }
    match build_one(entries, floats) {
        Ok(a) => {
            done.push(a);
            Ok(())
        }
        Err(e @ BuildError::Unsupported(_)) => Err(e),
        Err(e) if entries.len() == 1 => Err(e),
        Err(_) => {
            let (a, b) = entries.split_at(entries.len() / 2);
            build_split(a, floats, done)?;
            build_split(b, floats, done)
        }
    }
}

/// Sorted, deduplicated refs of the patterns a match set names.
fn refs_of(entries: &[Entry<'_>], matched: impl Iterator<Item = usize>) -> Vec<RuleRef> {
    let refs: BTreeSet<(u32, u32)> = matched
        .map(|i| entries[i].r)
        .map(|r| (r.rule, r.flags))
        .collect();
    refs.into_iter()
        .map(|(rule, flags)| RuleRef { rule, flags })
        .collect()
}

/// Builds one automaton of `entries` (not empty).
fn build_one(entries: &[Entry<'_>], floats: bool) -> Result<PathAutomaton, BuildError> {
    let hirs = entries
        .iter()
        .map(|e| match e.early.then(|| early_hir(e.source)).flatten() {
            Some(h) => h,
            None => hir(e.source),
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| BuildError::Unsupported(e.to_string()))?;
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
            entries.len()
        ))
    };
    let start = dfa
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .map_err(|e| BuildError::Unsupported(format!("no start state: {e}")))?;
    // Dense renumbering: 0 is dead, the start state 1, the rest in breadth-first order.
    let mut index: BTreeMap<StateID, u32> = BTreeMap::new();
    let mut queue = VecDeque::new();
    let mut number = |id: StateID, queue: &mut VecDeque<StateID>| -> Result<u32, BuildError> {
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
        let n = index.len() as u32 + 1;
        if n as usize >= DFA_STATES || (n as usize + 1) * stride > DFA_CELLS {
            return Err(too_large(n as usize));
        }
        index.insert(id, n);
        queue.push_back(id);
        Ok(n)
    };
    let start_index = number(start, &mut queue)?;
    let mut trans = vec![0u32; stride];
    let mut accept = BTreeMap::new();
    let mut early = BTreeMap::new();
    let mut n = start_index;
    while let Some(id) = queue.pop_front() {
        for rep in &representative {
            let next = match rep {
                Some(b) => number(dfa.next_state(id, *b), &mut queue)?,
                None => 0,
            };
            trans.push(next);
        }
        // Match states report matches ending one byte before: for the early patterns (the
        // only ones without `$`), a prefix of the path read so far.
        if dfa.is_match_state(id) {
            let refs = refs_of(
                entries,
                (0..dfa.match_len(id)).map(|i| dfa.match_pattern(id, i).as_usize()),
            );
            early.insert(n, refs);
        }
        let eoi = dfa.next_eoi_state(id);
        if dfa.is_match_state(eoi) {
            let refs = refs_of(
                entries,
                (0..dfa.match_len(eoi)).map(|i| dfa.match_pattern(eoi, i).as_usize()),
            );
            if refs.len() > REFS_PER_KEY {
                return Err(BuildError::Crowded(refs));
            }
            accept.insert(n, refs);
        }
        n += 1;
    }
    let neutral = if floats {
        trans[start_index as usize * stride + usize::from(classes[usize::from(b'/')])]
    } else {
        0
    };
    let live = live_refs(&trans, stride, &accept, &early, neutral);
    Ok(PathAutomaton {
        start: start_index,
        stride: stride as u32,
        classes,
        trans,
        accept,
        early,
        neutral,
        live,
    })
}

/// For every state but the dead and the `neutral` one, the block refs of the patterns a
/// directory ending there is inside: those whose nearest completion is closer from that
/// state than from the neutral one. For patterns anchored at the root the neutral state is
/// the dead one, from which nothing completes, so every pattern still reachable counts; a
/// floating pattern is reachable from everywhere, and counts only where the path has made
/// progress in it (`.vscode/` towards `**/.vscode/tasks.json`; nothing towards `**/*.pem`).
/// One backward breadth-first search per block ref over the reversed transitions.
fn live_refs(
    trans: &[u32],
    stride: usize,
    accept: &BTreeMap<u32, Vec<RuleRef>>,
    early: &BTreeMap<u32, Vec<RuleRef>>,
    neutral: u32,
) -> BTreeMap<u32, Vec<RuleRef>> {
    let states = trans.len() / stride.max(1);
    let blocks: BTreeSet<(u32, u32)> = accept
        .values()
        .chain(early.values())
        .flatten()
        .filter(|r| r.flags & REF_EXCEPT == 0)
        .map(|r| (r.rule, r.flags))
        .collect();
    let mut from: Vec<Vec<u32>> = vec![Vec::new(); states];
    for s in 1..states {
        for &t in &trans[s * stride..(s + 1) * stride] {
            if t != 0 && t as usize != s {
                from[t as usize].push(s as u32);
            }
        }
    }
    let mut live: BTreeMap<u32, Vec<RuleRef>> = BTreeMap::new();
    let mut dist = vec![u32::MAX; states];
    let mut queue = VecDeque::new();
    for (rule, flags) in blocks {
        let r = RuleRef { rule, flags };
        dist.fill(u32::MAX);
        for (&state, refs) in accept.iter().chain(early.iter()) {
            if refs.contains(&r) && dist[state as usize] != 0 {
                dist[state as usize] = 0;
                queue.push_back(state as usize);
            }
        }
        while let Some(s) = queue.pop_front() {
            for &p in &from[s] {
                if dist[p as usize] == u32::MAX {
                    dist[p as usize] = dist[s] + 1;
                    queue.push_back(p as usize);
                }
            }
        }
        let bar = dist[neutral as usize];
        for (s, &d) in dist.iter().enumerate().skip(1) {
            if s as u32 != neutral && d < bar {
                let refs = live.entry(s as u32).or_default();
                if refs.len() < REFS_PER_KEY {
                    refs.push(r);
                }
            }
        }
    }
    live
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
    fn directories_inside_a_pattern_bring_its_refs_and_others_none() {
        let a = build(&[
            (glob("**/.vscode/tasks.json"), r(0)),
            (glob("**/*.pem"), r(1)),
            (Source::Search(r"/proc/\d+/environ".into()), r(2)),
            (glob("/srv/projects/**/secret-*.pem"), r(3)),
            (glob("/home/u/.ssh/id_*"), r(4)),
            (Source::Search(r"^/srv/vault/[0-9]+\.secret$".into()), r(5)),
            (
                glob("**/.vscode/keep/**"),
                RuleRef {
                    rule: 0,
                    flags: REF_EXCEPT,
                },
            ),
        ])
        .unwrap();
        let inside = |dir: &str| -> Vec<RuleRef> {
            let found: BTreeSet<(u32, u32)> = a
                .iter()
                .flat_map(|x| x.inside(dir.as_bytes()))
                .map(|r| (r.rule, r.flags))
                .collect();
            found
                .into_iter()
                .map(|(rule, flags)| RuleRef { rule, flags })
                .collect()
        };
        // A floating pattern's directory component, anywhere.
        assert_eq!(inside("/home/u/p/.vscode"), [r(0)]);
        assert_eq!(inside("/.vscode"), [r(0)]);
        assert_eq!(inside("/proc/12"), [r(2)]);
        // A directory a glob's `**` spans, and the fixed part of an anchored glob.
        assert_eq!(inside("/srv/projects/a/b"), [r(3)]);
        assert_eq!(inside("/home/u/.ssh"), [r(4)]);
        assert_eq!(inside("/home/u"), [r(4)]);
        // The fixed part of a regex anchored at the root.
        assert_eq!(inside("/srv/vault"), [r(5)]);
        // Ordinary directories bring nothing, whatever their names look like.
        for dir in [
            "/home/u/p",
            "/home/u/p/x.pem",
            "/home/u/p/vscode",
            "/srv/other",
            "/srv/vault/7",
            "/tmp/.vscodex",
            // `tasks.json` must sit in `.vscode` itself.
            "/home/u/p/.vscode/keep",
        ] {
            let got = inside(dir);
            assert!(got.is_empty(), "{dir}: {got:?}");
        }
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
        // The patterns anchored at the root in one, the floating ones in another.
        assert_eq!(a.len(), 2);
        let m = |p: &str| matches_all(&a, p.as_bytes());
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
        let states: usize = a.iter().map(PathAutomaton::states).sum();
        assert!(states < 512, "{states} states");
        for a in &a {
            assert_eq!(a.start, 1);
            assert_eq!(a.trans[..a.stride as usize], vec![0; a.stride as usize][..]);
        }
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
        assert!(matches!(e, HirError::UnicodeWordBoundary), "{e:?}");
        assert!(e.to_string().contains("Unicode word boundary"), "{e}");
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

    #[test]
    fn patterns_matched_on_the_way_do_not_multiply_states() {
        // Each of these, matched at the end, would double the states of every other.
        let names = [
            "node_modules",
            "fixtures",
            "test*",
            ".git/hooks",
            ".claude/hooks",
            ".cursor/rules",
            "vendor",
            "dist",
            "build",
            ".venv",
            "target",
            "__pycache__",
        ];
        let mut patterns: Vec<(Source, RuleRef)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let flags = if i % 2 == 0 { REF_EXCEPT } else { 0 };
                (
                    glob(&format!("**/{n}/**")),
                    RuleRef {
                        rule: i as u32,
                        flags,
                    },
                )
            })
            .collect();
        for (i, ext) in ["pem", "key", "p12", "kdbx"].iter().enumerate() {
            patterns.push((glob(&format!("**/*.{ext}")), r(100 + i as u32)));
        }
        let a = build(&patterns).unwrap();
        let states: usize = a.iter().map(PathAutomaton::states).sum();
        assert!(states < 400, "{states} states");
        let rules = |p: &str| -> Vec<u32> {
            matches_all(&a, p.as_bytes())
                .iter()
                .map(|r| r.rule)
                .collect()
        };
        assert_eq!(rules("/p/node_modules/x/.git/hooks/pre-commit"), [0, 3]);
        assert_eq!(rules("/p/.claude/hooks/a/tests/k.pem"), [2, 4, 100]);
        assert_eq!(rules("/p/.claude/hooksx/a"), Vec::<u32>::new());
        assert_eq!(rules("/srv/dist/build/a.key"), [7, 8, 101]);
        // More rules than the early table holds: the rest are matched at the end, still right.
        let many: Vec<(Source, RuleRef)> = (0..EARLY_BLOCKS as u32 + 3)
            .map(|i| (glob(&format!("/srv/d{i}/**")), r(i)))
            .collect();
        let a = build(&many).unwrap();
        for i in 0..EARLY_BLOCKS as u32 + 3 {
            assert_eq!(matches_all(&a, format!("/srv/d{i}/x/y").as_bytes()), [r(i)]);
        }
        let early: BTreeSet<u32> = a
            .iter()
            .flat_map(|a| a.early.values().flatten())
            .map(|r| r.rule)
            .collect();
        assert_eq!(early.len(), EARLY_BLOCKS);
    }

    const GLOBS: [&str; 4] = ["/a/*/.ssh/**", "/**/secret-*.pem", "**/b", "/a/{x,b}/*"];
    const REGEXES: [&str; 4] = ["a.b", "^/x", "(?i)SECRET", "\u{e9}$"];

    static COMBINED: std::sync::LazyLock<Vec<PathAutomaton>> = std::sync::LazyLock::new(|| {
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
        let all = build(&patterns).unwrap();
        assert_eq!(all.len(), 2);
        all
    });

    proptest::proptest! {
        /// The table walk answers like globset and the regex crate on the same patterns.
        #[test]
        fn walk_agrees_with_regex(path in "(/|a|b|\\.ssh|x|secret-|\\.pem|\\n|\u{e9}){0,12}") {
            let (globs, regexes, a) = (GLOBS, REGEXES, &*COMBINED);
            let got: Vec<u32> = matches_all(a, path.as_bytes()).iter().map(|r| r.rule).collect();
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
