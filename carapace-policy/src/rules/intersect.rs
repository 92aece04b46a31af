//! Whether two path languages meet: a path the agent wrote as a glob, or with parts the
//! analysis could not know (`~/.ss?/id_*`, `/var/lib/carapac*/rules.yaml`), names a
//! protected file when some path matches both it and the rule's pattern — not when the
//! glob's text happens to match the pattern's text. Both are compiled to DFAs over bytes
//! and walked together, breadth first, over the byte classes that tell their states apart.
//!
//! Answers are exact within a budget of state pairs; past it, or when a language cannot be
//! compiled, they say "meet" (the rule's mode decides, rather than an evasion passing).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, LazyLock, Mutex};

use regex_automata::{
    dfa::{dense, Automaton as _, StartKind},
    nfa::thompson,
    util::{primitives::StateID, start},
    Anchored, MatchKind,
};

use super::compile::dfa::{hir, Source};

/// Bytes of NFA and DFA one language may take: a written glob or one rule pattern.
const SIZE_LIMIT: usize = 1 << 20;
/// State pairs one walk may visit.
const PAIR_LIMIT: usize = 20_000;

/// A path language: the whole path must match.
#[derive(Debug)]
pub struct Lang {
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
}

impl Lang {
    /// The language of a glob's or a `re:` pattern's regex; `None` when it cannot be
    /// compiled within the limits.
    #[must_use]
    pub fn of(source: &Source) -> Option<Self> {
        let hir = hir(source).ok()?;
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .which_captures(thompson::WhichCaptures::None)
                    .nfa_size_limit(Some(SIZE_LIMIT)),
            )
            .build_from_hir(&hir)
            .ok()?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .byte_classes(true)
                    .dfa_size_limit(Some(SIZE_LIMIT))
                    .determinize_size_limit(Some(SIZE_LIMIT)),
            )
            .build_from_nfa(&nfa)
            .ok()?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .ok()?;
        Some(Self { dfa, start })
    }

    /// Whether the whole of `path` is in the language.
    #[must_use]
    pub fn accepts(&self, path: &[u8]) -> bool {
        let mut state = self.start;
        for &b in path {
            state = self.dfa.next_state(state, b);
            if self.stuck(state) {
                return false;
            }
        }
        self.accepts_here(state)
    }

    /// The state after `bytes`, `None` once no path with that beginning can match.
    fn state_after(&self, bytes: &[u8]) -> Option<StateID> {
        let mut state = self.start;
        for &b in bytes {
            state = self.dfa.next_state(state, b);
            if self.stuck(state) {
                return None;
            }
        }
        Some(state)
    }

    fn accepts_here(&self, state: StateID) -> bool {
        self.dfa.is_match_state(self.dfa.next_eoi_state(state))
    }

    fn stuck(&self, state: StateID) -> bool {
        self.dfa.is_dead_state(state) || self.dfa.is_quit_state(state)
    }
}

/// Whether some path is in both languages (or the walk ran out of budget).
#[must_use]
pub fn meet(a: &Lang, b: &Lang) -> bool {
    // One byte per pair of classes: bytes in the same class of both DFAs lead both to the
    // same states.
    let (ca, cb) = (a.dfa.byte_classes(), b.dfa.byte_classes());
    let mut seen_classes = HashSet::new();
    let bytes: Vec<u8> = (0..=u8::MAX)
        .filter(|&byte| seen_classes.insert((ca.get(byte), cb.get(byte))))
        .collect();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::new();
    seen.insert((a.start, b.start));
    queue.push_back((a.start, b.start));
    while let Some((x, y)) = queue.pop_front() {
        if a.accepts_here(x) && b.accepts_here(y) {
            return true;
        }
        for &byte in &bytes {
            let (nx, ny) = (a.dfa.next_state(x, byte), b.dfa.next_state(y, byte));
            if a.stuck(nx) || b.stuck(ny) || !seen.insert((nx, ny)) {
                continue;
            }
            if seen.len() > PAIR_LIMIT {
                return true;
            }
            queue.push_back((nx, ny));
        }
    }
    false
}

/// How many names deep a written directory's unknown entries are judged
/// ([`names_entries_of`]).
const ENTRY_DEPTH: usize = 3;

/// [`names_entries_of`] for a rule's pattern, answered once per (pattern, directory): each
/// answer is a few automata built and intersected, and an agent names the same directories
/// call after call (`grep -rn … src/`).
#[must_use]
pub fn rule_names_entries_of(source: &Source, rule: &Lang, dir: &str) -> bool {
    static CACHE: LazyLock<Mutex<HashMap<(Source, String), bool>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    const MAX_CACHED: usize = 4096;
    let key = (source.clone(), dir.to_owned());
    if let Some(known) = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&key)
    {
        return *known;
    }
    let answer = names_entries_of(rule, dir);
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if cache.len() >= MAX_CACHED {
        cache.clear();
    }
    cache.insert(key, answer);
    answer
}

/// Whether `rule` names some entry of directory `dir` (absolute, written out), at most
/// [`ENTRY_DEPTH`] names below it, because of what `dir` is: no entry as deep below a
/// made-up directory is in it. A directory moved, copied or linked into place may hold
/// anything; rules that name files by their directory (`**/*.git/hooks/pre-receive` for
/// `remote.git/hooks`, `**/.git/hooks/**` for `.git`, `~/.bashrc` for `~`) see what it
/// could hold, rules that name a file wherever it is (`**/.env`) do not.
#[must_use]
pub fn names_entries_of(rule: &Lang, dir: &str) -> bool {
    const MADE_UP: &str = "/\x00";
    let dir = dir.trim_end_matches('/');
    let Some(here) = rule.state_after(format!("{dir}/").as_bytes()) else {
        return false;
    };
    // The same state as below a made-up directory: the same entries are named.
    if rule.state_after(b"/\0/") == Some(here) {
        return false;
    }
    let below = |base: &str, depth: usize| {
        Lang::of(&Source::Glob(format!("^{base}(?:/[^/]+){{{depth}}}$")))
    };
    let base = regex_syntax::escape(dir);
    (1..=ENTRY_DEPTH).any(|depth| match (below(&base, depth), below(MADE_UP, depth)) {
        (Some(mine), Some(made_up)) => meet(&mine, rule) && !meet(&made_up, rule),
        _ => true,
    })
}

/// The language of a rule's pattern, compiled once per process (rule sets are reloaded,
/// their patterns mostly the same): `None` when it cannot be compiled.
#[must_use]
pub fn rule_lang(source: &Source) -> Option<Arc<Lang>> {
    static CACHE: LazyLock<Mutex<HashMap<Source, Option<Arc<Lang>>>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(source.clone())
        .or_insert_with(|| Lang::of(source).map(Arc::new))
        .clone()
}

/// Whether a rule's pattern covers a whole tree (`DIR/**`): it takes in any two names at
/// the end of some path it matches. Answered once per pattern.
#[must_use]
pub fn protects_a_tree(source: &Source) -> bool {
    static CACHE: LazyLock<Mutex<HashMap<Source, bool>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    static TAIL: LazyLock<Option<Lang>> =
        LazyLock::new(|| Lang::of(&Source::Glob(r"^(?:.*/)?\x00/\x00$".to_owned())));
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *cache
        .entry(source.clone())
        .or_insert_with(|| match (rule_lang(source), TAIL.as_ref()) {
            (Some(rule), Some(tail)) => meet(&rule, tail),
            _ => false,
        })
}

/// Whether some one name is both selected by `find -name FOUND` (its fnmatch reading: a
/// leading wildcard takes in a leading dot) and matched by a rule's name (the language of
/// one name of a rule glob). Answers "meet" when either cannot be read.
#[must_use]
pub fn found_name_meets(found: &str, rule_name: &Source) -> bool {
    let mut regex = String::from("^");
    if name_regex(found, &mut regex, true).is_none() {
        return true;
    }
    regex.push('$');
    match (Lang::of(&Source::Glob(regex)), Lang::of(rule_name)) {
        (Some(found), Some(rule)) => meet(&found, &rule),
        _ => true,
    }
}

/// The regex of a path the agent wrote as a shell glob, read as the shell reads it: `*`,
/// `?` and `[…]` stay within a name and, like `**`, never match the leading `.` of a hidden
/// name (bash without `dotglob`; `find`'s recursion stands in as `**`, and a search for
/// build artifacts is not aimed at `.git/hooks`). Brace lists are alternatives. `None` for
/// a glob this cannot read (an unclosed bracket or brace).
#[must_use]
pub fn shell_glob_regex(glob: &str) -> Option<String> {
    let names: Vec<&str> = glob.split('/').collect();
    let mut out = String::from("^");
    let mut after_find = false;
    for (i, name) in names.iter().enumerate() {
        let last = i + 1 == names.len();
        if *name == FIND_DEPTH {
            // Any names, hidden ones too, each with its `/` when more follows.
            out.push_str(if last {
                "(?:[^/]+(?:/[^/]+)*)?"
            } else {
                "(?:[^/]+/)*"
            });
            after_find = true;
            continue;
        }
        if after_find {
            // find's `-name` is fnmatch without FNM_PERIOD: `*.pyc` takes in `.x.pyc`.
            name_regex(name, &mut out, true)?;
            after_find = false;
            if !last {
                out.push('/');
            }
            continue;
        }
        if *name == "**" {
            // Names that are not hidden, each with its `/` when more follows.
            out.push_str(if last {
                "(?:[^./][^/]*(?:/[^./][^/]*)*)?"
            } else {
                "(?:[^./][^/]*/)*"
            });
            continue;
        }
        name_regex(name, &mut out, false)?;
        if !last {
            out.push('/');
        }
    }
    out.push('$');
    Some(out)
}

/// One name of a shell glob as a regex (no `/`); `hidden` lets a leading wildcard match a
/// leading dot (`find -name`).
fn name_regex(name: &str, out: &mut String, hidden: bool) -> Option<()> {
    // bash's extended patterns (`@(ssh|aws)`, `!(x)`, with `shopt -s extglob`) are not read
    // here: such a name is any name; a hidden one too unless the pattern starts the name
    // without a dot of its own (bash's dot rule: `!(x)` lists no hidden names). An unknown
    // part (`UNKNOWN_NAME`) may be any name at all.
    if let Some(at) = extglob_at(name) {
        if let Some(()) = extglob_regex(name, at, out, hidden) {
            return Some(());
        }
        let any =
            hidden || at > 0 || name.contains(UNKNOWN_NAME) || name[at + 2..].starts_with('.');
        out.push_str(if any { "[^/]*" } else { "(?:[^./][^/]*)?" });
        return Some(());
    }
    let chars: Vec<char> = name.chars().collect();
    let mut i = 0;
    let mut depth = 0usize;
    while i < chars.len() {
        let first = i == 0 && !hidden;
        match chars[i] {
            '*' => {
                while chars.get(i + 1) == Some(&'*') {
                    i += 1;
                }
                out.push_str(if first { "(?:[^./][^/]*)?" } else { "[^/]*" });
            }
            '?' => out.push_str(if first { "[^./]" } else { "[^/]" }),
            '[' => {
                let end = class_end(&chars, i)?;
                let mut body = &chars[i + 1..end];
                let negated = matches!(body.first(), Some('!' | '^'));
                if negated {
                    body = &body[1..];
                }
                out.push_str(if negated { "[[^/" } else { "[[" });
                let mut j = 0;
                while j < body.len() {
                    if let Some(len) = posix_class_len(&body[j..]) {
                        // `[:lower:]` and the like: regex has the same ASCII classes.
                        out.extend(&body[j..j + len]);
                        j += len;
                        continue;
                    }
                    if body[j] == '-' {
                        out.push('-');
                    } else {
                        out.push_str(&regex_syntax::escape(&body[j].to_string()));
                    }
                    j += 1;
                }
                out.push_str(if first { "]&&[^./]]" } else { "]&&[^/]]" });
                i = end;
            }
            '{' => {
                depth += 1;
                out.push_str("(?:");
            }
            ',' if depth > 0 => out.push('|'),
            '}' if depth > 0 => {
                depth -= 1;
                out.push(')');
            }
            '\\' => {
                i += 1;
                out.push_str(&regex_syntax::escape(&chars.get(i)?.to_string()));
            }
            c => out.push_str(&regex_syntax::escape(&c.to_string())),
        }
        i += 1;
    }
    (depth == 0).then_some(())
}

/// A name holding one of bash's extended patterns that lists what it matches (`@(build|
/// dist)`, `?(x)`, `*(ab)`, `+(a|b)`) and no other, as the regex of its alternatives, so
/// that `rm -rf @(build|dist)` names those two and no protected name. `None` for a
/// negation (`!(x)`: what it matches cannot be listed), Layer 1's own markers
/// ([`UNKNOWN_NAME`], [`FIND_DEPTH`]) and nested patterns: the caller reads those as any
/// name. Nothing is written to `out` unless it succeeds.
fn extglob_regex(name: &str, at: usize, out: &mut String, hidden: bool) -> Option<()> {
    if name.contains(UNKNOWN_NAME) || name.contains(FIND_DEPTH) {
        return None;
    }
    let op = name.as_bytes()[at];
    let quantifier = match op {
        b'@' => "",
        b'?' => "?",
        b'*' => "*",
        b'+' => "+",
        _ => return None,
    };
    let inner_start = at + 2;
    let close = inner_start + name[inner_start..].find(')')?;
    let inner = &name[inner_start..close];
    let (prefix, suffix) = (&name[..at], &name[close + 1..]);
    if inner.contains('(') || extglob_at(suffix).is_some() {
        return None;
    }
    let mut re = String::new();
    if !prefix.is_empty() {
        name_regex(prefix, &mut re, hidden)?;
    }
    re.push_str("(?:");
    for (i, alt) in inner.split('|').enumerate() {
        if i > 0 {
            re.push('|');
        }
        name_regex(alt, &mut re, hidden || !prefix.is_empty())?;
    }
    re.push(')');
    re.push_str(quantifier);
    if !suffix.is_empty() {
        name_regex(suffix, &mut re, true)?;
    }
    out.push_str(&re);
    Some(())
}

/// What Layer 1 writes for a part of a path whose value is not known (the output of a
/// command it cannot run, `~/.aws/$(ls ~/.aws)`): one name, any name, a hidden one included.
/// Written as bash's extended pattern so that every glob reader takes it as a wildcard.
pub const UNKNOWN_NAME: &str = "+(*)";

/// What Layer 1 writes for the directories `find` walks down: any names at any depth,
/// hidden ones too (find, unlike the shell's `**`, goes into `.git`), with the name after
/// it read as `find -name` reads it (a leading `*` matches a leading dot). Written as an
/// extended pattern so that every glob reader takes it as a wildcard, with a NUL in it so
/// that no path the agent writes is it: the agent's own `+(**)` is bash's one name
/// (`~/+(**)/README.md` is `~/*/README.md`), and a path holding a NUL names no file.
pub const FIND_DEPTH: &str = "+(\0**)";

/// Where the first of bash's extended patterns (`?(…)`, `*(…)`, `+(…)`, `@(…)`, `!(…)`)
/// opens in `text`.
#[must_use]
pub fn extglob_at(text: &str) -> Option<usize> {
    text.as_bytes()
        .windows(2)
        .position(|w| w[1] == b'(' && matches!(w[0], b'?' | b'*' | b'+' | b'@' | b'!'))
}

/// Where the bracket expression opening at `open` closes (a `]` right after the opening,
/// or after its `!`/`^`, is a member).
fn class_end(chars: &[char], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if matches!(chars.get(i), Some('!' | '^')) {
        i += 1;
    }
    if chars.get(i) == Some(&']') {
        i += 1;
    }
    while *chars.get(i)? != ']' {
        i += posix_class_len(&chars[i..]).unwrap_or(1);
    }
    Some(i)
}

/// The POSIX classes a bracket expression may hold (`[[:alpha:]]`), which regex knows too.
const POSIX_CLASSES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// The length of a `[:name:]` class at the start of `chars`, when it is one.
fn posix_class_len(chars: &[char]) -> Option<usize> {
    if chars.first() != Some(&'[') || chars.get(1) != Some(&':') {
        return None;
    }
    let rest: String = chars[2..].iter().take(8).collect();
    let name = POSIX_CLASSES
        .iter()
        .find(|n| rest.starts_with(&format!("{n}:]")))?;
    Some(name.len() + 4)
}

/// Whether the fixed beginnings of two patterns (their text before the first glob
/// character) allow a common path: one must begin the other.
#[must_use]
pub fn literals_meet(a: &str, b: &str) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::pattern::build_glob;

    fn glob(g: &str) -> Lang {
        Lang::of(&Source::Glob(build_glob(g).unwrap().regex().to_owned())).unwrap()
    }

    /// A path as the agent wrote it.
    fn shell(g: &str) -> Lang {
        Lang::of(&Source::Glob(shell_glob_regex(g).unwrap())).unwrap()
    }

    /// `g` with find's walk where it says `+(**)`.
    fn depth(g: &str) -> String {
        g.replace("+(**)", FIND_DEPTH)
    }

    #[test]
    fn globs_meet_where_a_path_matches_both() {
        assert!(meet(&shell("/root/.ss?/id_*"), &glob("/root/.ssh/**")));
        assert!(meet(
            &shell("/root/.moz*/firefox/*/logins.json"),
            &glob("/root/.mozilla/**")
        ));
        assert!(meet(&shell("/tmp/p/.en?"), &glob("**/.env")));
        assert!(meet(&shell("/tmp/p/.[e]nv"), &glob("**/.env")));
        assert!(meet(
            &shell("/root/.{ssh,aws}/id_rsa"),
            &glob("/root/.ssh/**")
        ));
        assert!(meet(
            &shell("/var/lib/carapac*/rules.yaml"),
            &glob("/var/lib/carapace/**")
        ));
        assert!(!meet(&shell("/root/.ss?/id_*"), &glob("/root/.aws/**")));
        assert!(!meet(&shell("/tmp/*.txt"), &glob("**/.env")));
        // `*` and `?` do not cross a `/`, and do not start a hidden name.
        assert!(!meet(&shell("/root/.ssh/*/x"), &glob("/root/.ssh/id_rsa")));
        assert!(!meet(&shell("/root/*/id_rsa"), &glob("/root/.ssh/**")));
        assert!(!meet(&shell("/p/**/*.pyc"), &glob("**/.git/hooks/**")));
        // find goes into hidden directories, and its `-name *.x` takes in hidden names.
        assert!(meet(
            &shell(&depth("/p/+(**)/pre-commit")),
            &glob("**/.git/hooks/**")
        ));
        assert!(meet(
            &shell(&depth("/p/+(**)/*.pyc")),
            &glob("**/.git/hooks/**")
        ));
        assert!(meet(&shell(&depth("/p/+(**)/*rc")), &glob("/p/.bashrc")));
        assert!(meet(&shell(&depth("/p/+(**)")), &glob("/p/.ssh/id_rsa")));
        assert!(!meet(
            &shell(&depth("/p/+(**)/*.pyc")),
            &glob("**/.git/hooks/pre-commit")
        ));
        assert!(!meet(&shell(&depth("/p/+(**)/*.pyc")), &glob("/q/**")));
        let tree =
            |g: &str| protects_a_tree(&Source::Glob(build_glob(g).unwrap().regex().to_owned()));
        assert!(tree("**/.git/hooks/**"));
        assert!(tree("/home/u/.ssh/**"));
        assert!(!tree("**/.env"));
        assert!(!tree("**/*.pem"));
        assert!(!tree("**/*.git/hooks/{pre-commit,update}"));
        assert!(!meet(&shell("/p/[.]env"), &glob("**/.env")));
        assert!(meet(&shell("/root/.ssh/**"), &glob("/root/.ssh/id_rsa")));
        assert!(meet(&shell("/p/**/id_rsa"), &glob("**/id_rsa")));
        assert!(meet(&shell("/p/[!x]d_rsa"), &glob("**/id_rsa")));
        // Extended patterns name any name, hidden ones too.
        assert!(meet(
            &shell("/root/.@(aws)/credentials"),
            &glob("/root/.aws/**")
        ));
        assert!(meet(
            &shell("/root/@(.ssh|x)/id_rsa"),
            &glob("/root/.ssh/**")
        ));
    }

    #[test]
    fn a_found_name_meets_a_rule_name_as_find_reads_it() {
        let name = |g: &str| Source::Glob(build_glob(g).unwrap().regex().to_owned());
        assert!(found_name_meets("hooks", &name("hooks")));
        assert!(found_name_meets("hook*", &name("hooks")));
        assert!(found_name_meets("*ks", &name("hooks")));
        assert!(found_name_meets("*", &name(".ssh")));
        assert!(found_name_meets("[hH][oO]oks", &name("hooks")));
        assert!(!found_name_meets("__pycache__", &name("hooks")));
        assert!(!found_name_meets("*.pyc", &name("hooks")));
        assert!(!found_name_meets("node_modules", &name(".husky")));
    }

    #[test]
    fn a_directory_names_the_entries_rules_bind_to_it() {
        let hook = glob("**/*.git/hooks/{pre-receive,update}");
        assert!(names_entries_of(&hook, "/srv/remote.git/hooks"));
        assert!(names_entries_of(&hook, "/srv/remote.git"));
        assert!(!names_entries_of(&hook, "/srv/remote"));
        assert!(!names_entries_of(&hook, "/tmp/x"));
        let tree = glob("**/.git/hooks/**");
        assert!(names_entries_of(&tree, "/p/.git"));
        assert!(!names_entries_of(&tree, "/p/src"));
        assert!(names_entries_of(&glob("/root/.bashrc"), "/root"));
        assert!(!names_entries_of(&glob("/root/.bashrc"), "/root/project"));
        // A name protected wherever it is is not bound to any directory.
        assert!(!names_entries_of(&glob("**/.env"), "/p"));
    }

    #[test]
    fn regexes_match_anywhere() {
        let re = Lang::of(&Source::Search(r"^/proc/\d+/environ$".into())).unwrap();
        assert!(meet(&glob("/proc/*/environ"), &re));
        assert!(!meet(&glob("/proc/*/status"), &re));
        let re = Lang::of(&Source::Search(r"\.pem$".into())).unwrap();
        assert!(meet(&glob("/srv/keys/server.p?m"), &re));
    }

    proptest::proptest! {
        /// For a literal path (a language of one), meeting a glob is matching it.
        #[test]
        fn a_literal_meets_a_glob_when_the_glob_matches_it(
            path in "(/[a-c.]{1,3}){1,4}",
            pattern in "(/([a-c.]{1,3}|\\*\\*|\\*|[a-c]\\?)){1,4}",
        ) {
            let matcher = build_glob(&pattern).unwrap().compile_matcher();
            let literal = Lang::of(&Source::Glob(regex_syntax::escape(&path))).unwrap();
            proptest::prop_assert_eq!(meet(&literal, &glob(&pattern)), matcher.is_match(&path));
        }

        /// Read as the shell reads it, a glob without hidden names meets a literal path
        /// exactly when globset (whose `*` also starts hidden names) matches it.
        #[test]
        fn shell_globs_agree_with_globset_on_visible_names(
            path in "(/[a-c][a-c.]{0,2}){1,4}",
            written in "(/([a-c][a-c.]{0,2}|\\*\\*|\\*|[a-c]\\?|\\?[a-c]|\\[ab\\]c)){1,4}",
        ) {
            let matcher = build_glob(&written).unwrap().compile_matcher();
            let literal = Lang::of(&Source::Glob(regex_syntax::escape(&path))).unwrap();
            proptest::prop_assert_eq!(meet(&literal, &shell(&written)), matcher.is_match(&path), "{} {}", written, path);
        }
    }
}
