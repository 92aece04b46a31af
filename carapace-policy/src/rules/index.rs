//! Which rules' path patterns a path meets, in a few hash lookups per path (its full text,
//! each directory prefix, its basename) instead of one comparison per pattern and per home
//! directory that `~` expanded to. Layer 1 checks every rule on every call, so this is what
//! keeps a decision within its microsecond budget as packs and accounts grow.
use std::collections::HashMap;
use std::sync::OnceLock;

/// The index's maps: looked up several times per path of every call, so with a hash much
/// cheaper than `SipHash` (their keys come from rules, and a lookup adds nothing to them).
type Map = HashMap<String, Vec<u32>, foldhash::fast::RandomState>;

use super::model::Cond;
use aho_corasick::{AhoCorasick, AhoCorasickKind};
use carapace_common::op;
use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};

use super::pattern::{build_glob, GlobMatch, KernelForm, PathPattern, WrittenGlob};
use super::shape::Shape;
use super::Rule;

#[derive(Clone, Debug, Default)]
pub struct PathIndex {
    exact: Map,
    /// Keys end with `/`.
    prefix: Map,
    name: Map,
    /// Path endings (`**/DIRS/NAME`, [`Shape::Suffix`]); keys start with `/`.
    suffix: Map,
    /// The last names of `suffix`'s keys: a path whose name is not among them needs no
    /// lookup there.
    suffix_names: Map,
    /// Name endings (`**/*.pem`, [`Shape::Extension`]); keys start with `.`.
    extension: Map,
    /// The longest key of `prefix`: longer prefixes of a path need no lookup.
    longest_prefix: usize,
    /// Per rule: its top-level condition is a path match held (at least partly) here.
    indexed: Vec<bool>,
    /// Per rule: a path match it requires below the top level (`all: [{path: …}, …]`) is
    /// held here, so a call none of whose paths meets it is settled without evaluating
    /// the rule.
    guarded: Vec<bool>,
    /// The globs the forms cannot hold (`~/.aws/cred*`, `**/*.pem`), each with its rule.
    globs: Vec<(Glob, u32)>,
    /// The globs of every rule in one set per kind of operation (`op::*` bit, in
    /// [`OP_BITS`] order) and one for any ([`ANY`], last): a path is run through the set of
    /// its operation once, instead of through each rule's own. Each set is built when
    /// first used (a one-call loader needs one or two), or by [`PathIndex::build_all`].
    sets: [OnceLock<Globs>; OP_BITS.len() + 1],
    /// `**/DIRS/**` globs ([`Shape::Within`]): a path meets one when it contains `/DIRS/`
    /// (a relative path, when it starts with `DIRS/`), all looked for in one pass.
    within: Within,
    /// `DIR/NAME*` globs ([`Shape::Entry`]) by `DIR/`: names and rules.
    entry: HashMap<String, Vec<(String, u32)>, foldhash::fast::RandomState>,
    /// Per rule: it also has patterns neither the forms nor `globs` hold (regexes), to
    /// test one by one.
    slow: Vec<bool>,
    /// Every glob (each `~` expansion) of the indexed rules' patterns, sorted, with its
    /// rule: a path written as a glob names the ones whose language meets its own.
    expanded: Vec<(String, u32)>,
    /// Per rule: [`Rule::ops`], which every decision needs for every rule.
    ops: Vec<u32>,
}

/// The `/DIRS/` of every `**/DIRS/**` glob, with their rules, in one automaton.
#[derive(Clone, Debug, Default)]
struct Within {
    needles: Vec<(String, Vec<u32>)>,
    automaton: Option<AhoCorasick>,
}

impl Within {
    fn add(&mut self, inner: String, id: u32) {
        match self.needles.iter_mut().find(|(n, _)| *n == inner) {
            Some((_, ids)) if ids.last() == Some(&id) => {}
            Some((_, ids)) => ids.push(id),
            None => self.needles.push((inner, vec![id])),
        }
    }

    fn build(&mut self) {
        // A set of literals this small always builds; should it not, every path would
        // have to be checked against every needle, which `mark` then does.
        // Every needle starts with `/`, which every path is full of: a prefilter on first
        // bytes would stop at each one, so the automaton walks the path alone.
        self.automaton = AhoCorasick::builder()
            .kind(Some(AhoCorasickKind::DFA))
            .prefilter(false)
            .build(self.needles.iter().map(|(n, _)| n))
            .ok();
    }

    fn mark(&self, path: &str, set: &mut impl FnMut(Option<&[u32]>)) {
        if self.needles.is_empty() {
            return;
        }
        let rooted;
        let hay = if path.starts_with('/') {
            path
        } else {
            rooted = format!("/{path}");
            &rooted
        };
        match &self.automaton {
            Some(ac) => {
                for m in ac.find_overlapping_iter(hay) {
                    set(self
                        .needles
                        .get(m.pattern().as_usize())
                        .map(|(_, ids)| &ids[..]));
                }
            }
            None => {
                for (needle, ids) in &self.needles {
                    if hay.contains(needle.as_str()) {
                        set(Some(ids));
                    }
                }
            }
        }
    }
}

/// Globs of several rules, in one set.
#[derive(Clone, Debug, Default)]
struct Globs {
    set: Matchers,
    /// Per glob of `set`: its rule.
    rule: Vec<u32>,
}

#[derive(Clone, Debug)]
enum Matchers {
    Set(GlobSet),
    Each(Vec<GlobMatcher>),
}

impl Default for Matchers {
    fn default() -> Self {
        Self::Set(GlobSet::empty())
    }
}

/// The operation bits that get a glob set of their own; `ANY` is the set of every glob.
const OP_BITS: [u32; 5] = [op::READ, op::WRITE, op::DELETE, op::EXEC, op::NETWORK];
const ANY: u32 = op::ALL;

/// The patterns of a rule's top-level path condition, if that is what it matches on.
#[must_use]
pub fn top_level_paths(rule: &Rule) -> Option<&[PathPattern]> {
    match (&rule.cond, &rule.effect) {
        (Some(Cond::Path(patterns)), None) => Some(patterns),
        _ => None,
    }
}

/// The patterns of a path condition the rule cannot match without, below its top level:
/// the first path condition of an `all:` (nested `all:`s included). `any:` and `not:` make
/// none required.
fn required_paths(rule: &Rule) -> Option<&[PathPattern]> {
    fn within(cond: &Cond) -> Option<&[PathPattern]> {
        match cond {
            Cond::Path(patterns) => Some(patterns),
            Cond::All(conds) => conds.iter().find_map(within),
            _ => None,
        }
    }
    match (&rule.cond, &rule.effect) {
        (Some(cond @ Cond::All(_)), None) => within(cond),
        _ => None,
    }
}

fn forms(p: &PathPattern) -> Option<&[KernelForm]> {
    match p {
        PathPattern::Glob {
            matcher: GlobMatch::Forms(forms),
            ..
        } => Some(forms),
        _ => None,
    }
}

fn add(map: &mut Map, key: &str, id: u32) {
    let ids = map.entry(key.to_owned()).or_default();
    if ids.last() != Some(&id) {
        ids.push(id);
    }
}

impl PathIndex {
    #[must_use]
    pub fn build(rules: &[Rule]) -> Self {
        let mut globs: Vec<(Glob, u32)> = Vec::new();
        let mut index = Self {
            indexed: vec![false; rules.len()],
            guarded: vec![false; rules.len()],
            slow: vec![false; rules.len()],
            ops: rules.iter().map(Rule::ops).collect(),
            ..Self::default()
        };
        for (i, rule) in rules.iter().enumerate() {
            let patterns = if let Some(patterns) = top_level_paths(rule) {
                index.indexed[i] = true;
                patterns
            } else if let Some(patterns) = required_paths(rule) {
                index.guarded[i] = true;
                patterns
            } else {
                continue;
            };
            let id = i as u32;
            for p in patterns {
                if let PathPattern::Glob { expanded, .. } = p {
                    index
                        .expanded
                        .extend(expanded.iter().map(|e| (e.clone(), id)));
                }
                let Some(forms) = forms(p) else {
                    match p {
                        PathPattern::Glob {
                            expanded,
                            matcher: GlobMatch::Set(_) | GlobMatch::Shapes(_),
                            ..
                        } => {
                            for glob in expanded {
                                match Shape::of(glob) {
                                    Some(Shape::Entry { dir, name }) => {
                                        index.entry.entry(dir).or_default().push((name, id));
                                        continue;
                                    }
                                    Some(Shape::Extension(ext)) => {
                                        add(&mut index.extension, &ext, id);
                                        continue;
                                    }
                                    Some(Shape::Suffix { whole, suffix }) => {
                                        add(&mut index.exact, &whole, id);
                                        add(&mut index.suffix, &suffix, id);
                                        let name = suffix.rsplit('/').next().unwrap_or("");
                                        add(&mut index.suffix_names, name, id);
                                        continue;
                                    }
                                    Some(Shape::Within { inner, .. }) => {
                                        index.within.add(inner, id);
                                        continue;
                                    }
                                    None => {}
                                }
                                match build_glob(glob) {
                                    Ok(g) => globs.push((g, id)),
                                    Err(_) => index.slow[i] = true,
                                }
                            }
                        }
                        _ => index.slow[i] = true,
                    }
                    continue;
                };
                for f in forms {
                    let (map, key) = match f {
                        KernelForm::Exact(k) => (&mut index.exact, k),
                        KernelForm::Prefix(k) => (&mut index.prefix, k),
                        KernelForm::Name(k) => (&mut index.name, k),
                    };
                    add(map, key, id);
                }
            }
        }
        index.within.build();
        index.expanded.sort_unstable();
        index.longest_prefix = index.prefix.keys().map(String::len).max().unwrap_or(0);
        index.globs = globs;
        index
    }

    /// Builds every glob set now: for loaders that serve many calls.
    pub fn build_all(&self) {
        for slot in 0..self.sets.len() {
            self.set(slot);
        }
    }

    #[cfg(test)]
    pub(crate) fn sets_built(&self) -> usize {
        self.sets.iter().filter(|s| s.get().is_some()).count()
    }

    /// The glob set of slot `slot` ([`PathIndex::sets`]), built if it was not.
    fn set(&self, slot: usize) -> &Globs {
        self.sets[slot].get_or_init(|| {
            let bits = OP_BITS.get(slot).copied().unwrap_or(ANY);
            let (chosen, rule): (Vec<&Glob>, Vec<u32>) = self
                .globs
                .iter()
                .filter(|(_, id)| {
                    let ops = self.ops[*id as usize];
                    bits == ANY || ops == 0 || ops & bits != 0
                })
                .map(|(g, id)| (g, *id))
                .unzip();
            let mut set = GlobSetBuilder::new();
            for g in &chosen {
                set.add((*g).clone());
            }
            // Each glob parsed alone, so a set of them fails only on a size limit (thousands
            // of rules): then each glob is matched on its own, slower but the same answer.
            let set = set.build().map_or_else(
                |_| Matchers::Each(chosen.iter().map(|g| g.compile_matcher()).collect()),
                Matchers::Set,
            );
            Globs { set, rule }
        })
    }

    /// Whether rule `i` is matched through this index (its top-level condition is a path).
    #[must_use]
    pub fn indexed(&self, i: usize) -> bool {
        self.indexed.get(i).copied().unwrap_or(false)
    }

    /// Whether rule `i` cannot match a call whose paths this index marked no hit for: its
    /// top-level path condition, or one it requires, is held here whole (no pattern to
    /// test one by one).
    #[must_use]
    pub fn settles(&self, i: usize) -> bool {
        (self.indexed(i) || self.guarded.get(i).copied().unwrap_or(false)) && !self.slow(i)
    }

    /// Whether rule `i` has patterns to test one by one besides its indexed ones.
    #[must_use]
    pub fn slow(&self, i: usize) -> bool {
        self.slow.get(i).copied().unwrap_or(false)
    }

    /// [`Rule::ops`] of rule `i`, computed once.
    #[must_use]
    pub fn ops(&self, i: usize) -> Option<u32> {
        self.ops.get(i).copied()
    }

    /// Sets `hits[i]` for every rule `i` with a glob pattern that `written` could name
    /// ([`WrittenGlob::names`]). Every glob is visited; most are settled by their fixed
    /// beginning, and paths written as globs are rare.
    pub fn mark_named_by(&self, written: &WrittenGlob, ops: u32, hits: &mut [bool]) {
        if written.every_entry().is_some() {
            // A tree or a directory's entries (`src/**`): the caller looks its stand-in
            // entry up like a path; here, the patterns below it, which start with its text.
            let literal = written.literal();
            let start = self.expanded.partition_point(|(e, _)| e.as_str() < literal);
            for (e, id) in self.expanded[start..]
                .iter()
                .take_while(|(e, _)| e.starts_with(literal))
            {
                if let Some(h) = hits.get_mut(*id as usize) {
                    *h = *h || written.is_match(e);
                }
            }
            // Patterns with wildcards before its text ends may still name entries of this
            // very directory (`**/*.git/hooks/pre-receive` for `remote.git/hooks/**`). Each
            // is an intersection of automata: only the rules that cover the operation at all
            // are tried (a read of a tree meets no write-only rule), and only for a tree
            // written or moved into place.
            if !written.brings_entries() {
                return;
            }
            for (e, id) in &self.expanded {
                let rule_ops = self.ops.get(*id as usize).copied().unwrap_or(0);
                if rule_ops != 0 && rule_ops & ops == 0 {
                    continue;
                }
                if let Some(h) = hits.get_mut(*id as usize) {
                    if !*h && !e.starts_with(literal) && written.names(e) {
                        *h = true;
                    }
                }
            }
            return;
        }
        for (e, id) in &self.expanded {
            if let Some(h) = hits.get_mut(*id as usize) {
                if !*h && written.names(e) {
                    *h = true;
                }
            }
        }
    }

    /// Sets `hits[i]` for every rule `i` with an indexed pattern matching `path`, among
    /// (at least) the rules covering operations `ops` (`op::*` bits; a rule covering none
    /// of them cannot match such an operation whatever its patterns).
    pub fn mark(&self, path: &str, ops: u32, hits: &mut [bool]) {
        let mut set = |ids: Option<&[u32]>| {
            for &id in ids.into_iter().flatten() {
                if let Some(h) = hits.get_mut(id as usize) {
                    *h = true;
                }
            }
        };
        set(self.exact.get(path).map(Vec::as_slice));
        let base = memchr::memrchr(b'/', path.as_bytes()).map_or(path, |at| &path[at + 1..]);
        let suffixes = self.suffix_names.contains_key(base);
        // Paths are short: a plain walk over their bytes beats a vectorised search per `/`.
        let slashes = path
            .bytes()
            .enumerate()
            .filter_map(|(at, b)| (b == b'/').then_some(at));
        for at in slashes {
            if at < self.longest_prefix {
                set(self.prefix.get(&path[..=at]).map(Vec::as_slice));
            } else if !suffixes {
                break;
            }
            if suffixes {
                set(self.suffix.get(&path[at..]).map(Vec::as_slice));
            }
        }
        if !self.globs.is_empty() {
            let slot = OP_BITS
                .iter()
                .position(|b| *b == ops)
                .unwrap_or(OP_BITS.len());
            let globs = self.set(slot);
            match &globs.set {
                Matchers::Set(s) => {
                    for g in s.matches(path) {
                        set(globs.rule.get(g..=g));
                    }
                }
                Matchers::Each(each) => {
                    for (m, id) in each.iter().zip(&globs.rule) {
                        if m.is_match(path) {
                            set(Some(std::slice::from_ref(id)));
                        }
                    }
                }
            }
        }
        self.within.mark(path, &mut set);
        if let Some(at) = path.rfind('/') {
            let name = &path[at + 1..];
            for (prefix, id) in self.entry.get(&path[..=at]).into_iter().flatten() {
                if name.starts_with(prefix.as_str()) {
                    set(Some(std::slice::from_ref(id)));
                }
            }
        }
        if !self.extension.is_empty() {
            for (at, _) in base.match_indices('.') {
                set(self.extension.get(&base[at..]).map(Vec::as_slice));
            }
        }
        set(self.name.get(base).map(Vec::as_slice));
        if base != path {
            // A name form also matches a path that is the bare name (see KernelForm::matches).
            set(self.name.get(path).map(Vec::as_slice));
        }
    }
}
