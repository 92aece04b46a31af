//! Path patterns: separator-aware globs (`**` crosses `/`, `*` `?` `[..]` do not), `~` and
//! `$HOME` expanded for every account with a home, and `re:` regexes; plus the translation
//! of a glob into the forms the kernel maps can hold.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use super::lazy_regex::{LazyGlobSet, LazyRegex};
use crate::host::{FileKind, Host};
use globset::{Glob, GlobBuilder, GlobMatcher};

use super::intersect::{self, Lang};
use super::shape::{Shape, GLOB_META};
use crate::rules::compile::dfa::Source;
use std::rc::Rc;

/// Home directories `~` and `$HOME` expand to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Homes(Vec<String>);

impl Homes {
    /// Root and regular accounts (uid 0 or >= 1000) whose home exists, plus `home_env`.
    /// System accounts are left out: their homes (`/`, `/var/lib/…`, `/nonexistent`) would
    /// turn `~/.ssh/**` into patterns over system directories.
    #[must_use]
    pub fn from_passwd(host: &dyn Host, passwd: &Path, home_env: Option<&str>) -> Self {
        let text = host.read_to_string(passwd).unwrap_or_default();
        let mut homes = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split(':').collect();
            let (Some(uid), Some(home)) = (fields.get(2), fields.get(5)) else {
                continue;
            };
            let Ok(uid) = uid.parse::<u32>() else {
                continue;
            };
            if (uid == 0 || uid >= 1000)
                && uid != 65534
                && host
                    .stat(Path::new(home))
                    .is_some_and(|f| f.kind == FileKind::Dir)
            {
                homes.push((*home).to_owned());
            }
        }
        if let Some(home) = home_env.filter(|h| h.starts_with('/')) {
            homes.push(home.to_owned());
        }
        Self::fixed(homes)
    }

    /// Exactly these homes (tests, and callers that know better).
    #[must_use]
    pub fn fixed<I: IntoIterator<Item = S>, S: Into<String>>(homes: I) -> Self {
        let mut v: Vec<String> = homes
            .into_iter()
            .map(Into::into)
            .map(|h| normalize(&h))
            .filter(|h| h.starts_with('/') && h != "/")
            .collect();
        v.sort();
        v.dedup();
        Self(v)
    }

    /// The home directories, normalised, sorted and each once.
    #[must_use]
    pub fn list(&self) -> &[String] {
        &self.0
    }
}

/// Collapses `//` and drops a trailing `/`, as the kernel's `d_path` never yields either.
fn normalize(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    if out.len() > 1 && out.ends_with('/') {
        out.pop();
    }
    out
}

/// A path pattern as written, with its compiled matcher.
#[derive(Clone, Debug)]
pub enum PathPattern {
    /// A glob (`*` stays within one name, `**` crosses directories).
    Glob {
        /// As written in the rule.
        source: String,
        /// One glob per home directory for `~` patterns, else the pattern itself.
        expanded: Vec<String>,
        /// The expansions compiled for userspace matching.
        matcher: GlobMatch,
    },
    /// A regular expression searched for in the path (`re:`).
    Regex {
        /// As written in the rule.
        source: String,
        /// Compiled when first used.
        regex: LazyRegex,
    },
}

/// How a glob is matched in userspace.
#[derive(Clone, Debug)]
pub enum GlobMatch {
    /// Every expansion is an exact path, a `/dir/**` prefix or a `**/name` basename: string
    /// comparisons, no regex (most rules, and the Layer 1 latency budget, live here).
    Forms(Vec<KernelForm>),
    /// Every expansion has one of the shapes matched by string comparisons (`shape::Shape`).
    Shapes(Vec<Shape>),
    /// Globs neither of the above holds (brackets, braces, several `*` in one name), built
    /// into one matcher when first used: a one-call loader builds few of them.
    Set(LazyGlobSet),
}

impl GlobMatch {
    fn is_match(&self, path: &str) -> bool {
        match self {
            Self::Set(set) => set.is_match(path),
            Self::Forms(forms) => forms.iter().any(|f| f.matches(path)),
            Self::Shapes(shapes) => shapes.iter().any(|s| s.matches(path)),
        }
    }
}

/// What a pattern is wrong about, and what to do instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PatternError {
    pub message: String,
    pub hint: String,
}

impl PathPattern {
    /// Compiles the pattern `source`, `~` expanded to each of `homes`.
    pub(crate) fn parse(source: &str, homes: &Homes) -> Result<Self, PatternError> {
        let err = |message: String, hint: &str| PatternError {
            message,
            hint: hint.to_owned(),
        };
        if source.trim().is_empty() {
            return Err(err(
                "empty path pattern".into(),
                "write a path such as `/etc/**`",
            ));
        }
        if source.contains('\0') {
            return Err(err("path pattern contains a NUL byte".into(), "remove it"));
        }
        if let Some(re) = source.strip_prefix("re:") {
            return LazyRegex::new(re)
                .map(|regex| Self::Regex {
                    source: source.to_owned(),
                    regex,
                })
                .map_err(|e| {
                    err(
                        format!("invalid regex `{re}`: {e}"),
                        "fix the regular expression (Rust regex syntax)",
                    )
                });
        }
        let expanded = expand_home(source, homes)?;
        for glob in &expanded {
            if !(glob.starts_with('/') || glob.starts_with("**")) {
                let hint =
                    format!("write `**/{glob}` to match it in any directory, or an absolute path");
                return Err(err(format!("path pattern `{source}` is relative"), &hint));
            }
            // Paths are normalised before they are matched (and `d_path` never yields `.` or
            // `..`), so such a pattern would silently never match.
            if glob.split('/').any(|c| c == "." || c == "..") {
                return Err(err(
                    format!("path pattern `{source}` has a `.` or `..` component"),
                    "write the normalised path",
                ));
            }
        }
        if let Ok(forms) = expanded.iter().map(|g| kernel_form(g)).collect() {
            return Ok(Self::Glob {
                source: source.to_owned(),
                expanded,
                matcher: GlobMatch::Forms(forms),
            });
        }
        if let Some(shapes) = expanded.iter().map(|g| Shape::of(g)).collect() {
            // Only what globset accepts gets a shape (brackets, braces and backslashes
            // never do), so no error is lost by not building the set.
            return Ok(Self::Glob {
                source: source.to_owned(),
                expanded,
                matcher: GlobMatch::Shapes(shapes),
            });
        }
        let globs = expanded
            .iter()
            .map(|glob| build_glob(glob))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                err(
                    format!("invalid glob `{source}`: {e}"),
                    "check the brackets and braces",
                )
            })?;
        let matcher = LazyGlobSet::new(globs);
        Ok(Self::Glob {
            source: source.to_owned(),
            expanded,
            matcher: GlobMatch::Set(matcher),
        })
    }

    /// The pattern as written, for messages.
    #[must_use]
    pub fn source(&self) -> &str {
        match self {
            Self::Glob { source, .. } | Self::Regex { source, .. } => source,
        }
    }

    /// Whether `path` (absolute, normalised) matches. Regexes search the whole path
    /// (unanchored unless the pattern anchors itself).
    #[must_use]
    pub fn matches(&self, path: &str) -> bool {
        match self {
            Self::Glob { matcher, .. } => matcher.is_match(path),
            Self::Regex { regex, .. } => regex.is_match(path),
        }
    }

    /// Layer 1's reading of a rule pattern against an operation's path: `path` matches;
    /// or (`whole_dir`, for writes and deletes) `path` is a directory whose every entry the
    /// pattern matches (`~/.ssh` for `~/.ssh/**`: deleting or moving it changes them all);
    /// or `path` is written as a glob (`~/.aws/cred*`, left unexpanded because Layer 1
    /// does not list directories; `dir/**` for a recursive read) that could name a path the
    /// pattern names.
    #[must_use]
    pub fn covers(&self, path: &str, whole_dir: bool) -> bool {
        let entry = whole_dir.then(|| any_entry(path));
        let written = written_glob(path).map(|w| w.bringing_entries(whole_dir));
        self.covers_with(path, entry.as_deref(), written.as_ref())
    }

    /// [`PathPattern::covers`] with what depends only on `path` prepared by the caller, so
    /// that one operation tested against many patterns prepares it once: `entry`
    /// ([`any_entry`], when the whole directory counts) and the written glob
    /// ([`written_glob`]).
    #[must_use]
    pub(crate) fn covers_with(
        &self,
        path: &str,
        entry: Option<&str>,
        written: Option<&WrittenGlob>,
    ) -> bool {
        if self.matches(path) || entry.is_some_and(|e| self.matches(e)) {
            return true;
        }
        let Some(written) = written else {
            return false;
        };
        match self {
            Self::Glob { expanded, .. } => expanded.iter().any(|e| written.names(e)),
            Self::Regex { regex, .. } => written.names_search(regex.as_str()),
        }
    }

    /// An exception's reading: `path` matches, or every entry of directory `path` does, or
    /// `path` is what lies below an excepted path (`~/.ssh/id_ed25519.pub/**`: a copy or a
    /// link of the public key may be a directory's, and is the key's when it is a file;
    /// the rule keeps anything from being put under an excepted name). A glob path is
    /// exempt only when the exception matches it as written.
    #[must_use]
    pub(crate) fn exempts(&self, path: &str) -> bool {
        self.matches(path)
            || self.matches(&any_entry(path))
            || ["/**", "/*"]
                .iter()
                .any(|t| path.strip_suffix(t).is_some_and(|p| self.matches(p)))
    }

    /// The kernel forms of this pattern, or why the kernel cannot match it exactly.
    pub(crate) fn kernel_forms(&self) -> Result<Vec<KernelForm>, NoKernelForm> {
        match self {
            Self::Regex { source, .. } => Err(NoKernelForm::Regex(source.clone())),
            Self::Glob { expanded, .. } => expanded.iter().map(|g| kernel_form(g)).collect(),
        }
    }
}

impl PathPattern {
    /// What the kernel's path automaton matches this pattern with: each expansion of a glob
    /// (shown as the expansion) or the regex.
    pub(crate) fn automaton_sources(&self) -> Result<Vec<(String, Source)>, BadGlob> {
        match self {
            Self::Regex { source, regex } => Ok(vec![(
                source.clone(),
                Source::Search(regex.as_str().to_owned()),
            )]),
            Self::Glob { expanded, .. } => expanded
                .iter()
                .map(|g| {
                    build_glob(g)
                        .map(|glob| (g.clone(), Source::Glob(glob.regex().to_owned())))
                        .map_err(|source| BadGlob {
                            glob: g.clone(),
                            source,
                        })
                })
                .collect(),
        }
    }
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.source())
    }
}

/// A made-up entry of directory `dir` standing for all of them: NUL never occurs in a
/// path, so a pattern that matches it matches every entry.
#[must_use]
pub(crate) fn any_entry(dir: &str) -> String {
    let dir = dir.trim_end_matches('/');
    let mut entry = String::with_capacity(dir.len() + 2);
    entry.push_str(dir);
    entry.push_str("/\0");
    entry
}

/// A path written with glob characters (`src/**`, `~/.aws/cred*`), compiled to test
/// which rule patterns it could name.
#[derive(Clone)]
pub(crate) struct WrittenGlob {
    glob: String,
    /// The text before the first glob character: a pattern that does not start with it
    /// cannot match, which spares the glob test for nearly every pattern (the homes of
    /// other accounts, other trees) and usually its compilation too.
    literal: usize,
    matcher: std::cell::OnceCell<Option<GlobMatcher>>,
    /// Its language, for patterns its text does not match (`intersect`).
    lang: std::cell::OnceCell<Option<Rc<Lang>>>,
    /// Its language as written, a last name of wildcards included (`lang` reads that one as
    /// the directory's entries as a whole), for rule paths without wildcards.
    written_lang: std::cell::OnceCell<Option<Rc<Lang>>>,
    /// A tree written, copied or moved into place (not read): it may bring entries the
    /// rules bind to its directory (`**/*.git/hooks/pre-receive` for `remote.git/hooks/**`).
    brings_entries: bool,
}

impl WrittenGlob {
    /// The same glob, as the path of a write, delete or move (`yes`) or of a read.
    #[must_use]
    pub(crate) fn bringing_entries(mut self, yes: bool) -> Self {
        self.brings_entries = yes;
        self
    }

    /// Whether it is a tree written, copied or moved into place.
    #[must_use]
    pub(crate) fn brings_entries(&self) -> bool {
        self.brings_entries
    }

    /// The text before its first glob character: every pattern it names starts with it.
    #[must_use]
    pub fn literal(&self) -> &str {
        &self.glob[..self.literal]
    }

    #[must_use]
    pub fn is_match(&self, pattern: &str) -> bool {
        if !pattern.starts_with(&self.glob[..self.literal]) {
            return false;
        }
        self.matcher
            .get_or_init(|| build_glob(&self.glob).ok().map(|g| g.compile_matcher()))
            .as_ref()
            .is_some_and(|m| m.is_match(pattern))
    }

    /// Whether it names some path the rule glob `pattern` matches: `~/.ss?/id_*` names
    /// files of `~/.ssh/**`, `/proj/.en?` names `**/.env`.
    #[must_use]
    pub fn names(&self, pattern: &str) -> bool {
        let fixed = pattern.find(GLOB_START).unwrap_or(pattern.len());
        if !intersect::literals_meet(self.literal(), &pattern[..fixed]) {
            return false;
        }
        if self.is_match(pattern) {
            return true;
        }
        // A rule path without wildcards (`~/.aws/credentials`) is named when the glob, read
        // as the shell reads it, matches that path: the text match above takes bash's
        // extended patterns and find's depth (`~/+(**)/.aws/*`, `~/@(.aws)/*`) as plain
        // text, and `meets` reads a last name of wildcards alone as the directory's entries
        // as a whole, which names only the trees protected there.
        if fixed == pattern.len()
            && intersect::extglob_at(pattern).is_none()
            && self.accepts(pattern)
        {
            return true;
        }
        let Some(source) = rule_glob_source(pattern) else {
            return false;
        };
        self.meets(&source, Some(pattern))
    }

    /// Whether the shell's reading of the glob as written matches `path`; a glob whose
    /// language cannot be built matches everything (the rule's mode decides).
    fn accepts(&self, path: &str) -> bool {
        self.written_lang
            .get_or_init(|| {
                Lang::of(&Source::Glob(intersect::shell_glob_regex(&self.glob)?)).map(Rc::new)
            })
            .as_ref()
            .is_none_or(|lang| lang.accepts(path.as_bytes()))
    }

    /// [`any_entry`] of its directory, when it is a directory without wildcards followed by
    /// a last name of wildcards alone.
    #[must_use]
    pub(crate) fn every_entry(&self) -> Option<String> {
        let (dir, last) = self.glob.rsplit_once('/')?;
        (every_name(last) && !has_glob_start(dir) && intersect::extglob_at(dir).is_none())
            .then(|| any_entry(dir))
    }

    /// Whether it names some path the `re:` pattern `regex` finds a match in.
    #[must_use]
    pub(crate) fn names_search(&self, regex: &str) -> bool {
        self.meets(&Source::Search(regex.to_owned()), None)
    }

    /// Whether the name `find` looks for (the one right after its walk) can be `root`, the
    /// last name of a protected tree's root: `find . -name hooks` may find `.git/hooks`.
    fn finds_tree_root(&self, root: Option<&str>) -> bool {
        let Some(root) = root else {
            return false;
        };
        let Some((_, after)) = self
            .glob
            .split_once(intersect::FIND_DEPTH)
            .and_then(|(_, rest)| rest.split_once('/'))
        else {
            return false;
        };
        let found = after.split('/').next().unwrap_or(after);
        // Every name (`-name '*'`) is the whole walk, read as the shell's like a walk
        // without a name test (`find . -delete`, `rm -rf .`).
        if every_name(found) {
            return false;
        }
        build_glob(root).map_or(true, |g| {
            intersect::found_name_meets(found, &Source::Glob(g.regex().to_owned()))
        })
    }

    /// Whether some path of the rule (`pattern`: its glob, when it is one) is named.
    fn meets(&self, rule: &Source, pattern: Option<&str>) -> bool {
        let root = pattern.and_then(tree_root_name);
        // find's walk into hidden directories is judged against rules that name files (a
        // hook, `settings.json`, a key), not against whole protected trees: every name
        // find could look for lies in `.claude/hooks/**`, and `find . -name __pycache__
        // -exec rm -rf {} +` is not aimed there. Against a tree the walk is the shell's,
        // unless the name found can be the tree's root (`-name hooks`, `-name 'hook*'` for
        // `**/.git/hooks/**`): then the walk goes into hidden directories to reach it.
        if self.glob.contains(intersect::FIND_DEPTH)
            && intersect::protects_a_tree(rule)
            && !self.finds_tree_root(root)
        {
            return written_glob(&self.glob.replace(intersect::FIND_DEPTH, "**"))
                .map(|w| w.bringing_entries(self.brings_entries))
                .is_none_or(|shallow| shallow.meets(rule, None));
        }
        // A tree (`src/**`) or a directory's entries (`build/*`) stand for every entry: one
        // literal path, run through the rule's automaton, with no automaton of its own.
        if let Some(entry) = self.every_entry() {
            let dir = entry.strip_suffix("/\0").unwrap_or(&entry);
            return intersect::rule_lang(rule).is_none_or(|theirs| {
                theirs.accepts(entry.as_bytes())
                    || (self.brings_entries
                        && pattern.is_none_or(|p| {
                            // Patterns below its text are named as its text matches them.
                            !p.starts_with(self.literal()) && may_name_entries_of(p, dir)
                        })
                        && intersect::rule_names_entries_of(rule, &theirs, dir))
            });
        }
        let mine = self.lang.get_or_init(|| {
            // A last name of wildcards alone (`build/*`, `src/**`) stands for every entry,
            // as a plain directory does (`any_entry`): it names the trees protected there,
            // not each floating name (`**/.env`) some entry might have.
            let glob = match self.glob.rsplit_once('/') {
                Some((dir, last)) if every_name(last) => any_entry(dir),
                _ => self.glob.clone(),
            };
            Lang::of(&Source::Glob(intersect::shell_glob_regex(&glob)?)).map(Rc::new)
        });
        // A language that cannot be compiled (too large) names everything: the rule's mode
        // decides rather than a glob crafted to be too large passing.
        match (mine, intersect::rule_lang(rule)) {
            (Some(mine), Some(theirs)) => intersect::meet(mine, &theirs),
            _ => true,
        }
    }
}

/// The regex of a rule's glob, built once per process: every written tree (`cp -r`,
/// `grep -r`) asks it of the patterns that start with wildcards.
fn rule_glob_source(pattern: &str) -> Option<Source> {
    static CACHE: LazyLock<Mutex<HashMap<String, Option<Source>>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(source) = cache.get(pattern) {
        return source.clone();
    }
    let source = build_glob(pattern)
        .ok()
        .map(|g| Source::Glob(g.regex().to_owned()));
    cache.insert(pattern.to_owned(), source.clone());
    source
}

/// Whether rule glob `pattern` can name entries of `dir` because of what `dir` is
/// ([`intersect::names_entries_of`]), as far as its text tells: a pattern that starts
/// with `**/` does only when some name of `dir` can be one of the pattern's directories.
/// Most patterns are settled here, before any automaton is built.
fn may_name_entries_of(pattern: &str, dir: &str) -> bool {
    let Some(rest) = pattern.strip_prefix("**/") else {
        return true;
    };
    let mut dirs: Vec<&str> = rest.split('/').collect();
    dirs.pop();
    dirs.iter().any(|d| {
        *d != "**"
            && dir
                .split('/')
                .any(|name| !name.is_empty() && name_may_match(d, name))
    })
}

/// A rough glob match of one name: exact text, or one `*` between a fixed start and end;
/// any other glob may match.
fn name_may_match(glob: &str, name: &str) -> bool {
    if !glob.contains(GLOB_START) {
        return glob == name;
    }
    match glob.split_once('*') {
        Some((start, end)) if !start.contains(GLOB_START) && !end.contains(GLOB_START) => {
            name.len() >= start.len() + end.len() && name.starts_with(start) && name.ends_with(end)
        }
        _ => true,
    }
}

/// The last name of the directory a rule glob protects whole (`hooks` for
/// `**/.git/hooks/**`); `None` for a pattern that is not `DIR/**`.
fn tree_root_name(pattern: &str) -> Option<&str> {
    let root = pattern.strip_suffix("/**")?;
    let name = root.rsplit('/').next().unwrap_or(root);
    (!name.is_empty()).then_some(name)
}

/// A last name that stands for a directory's entries as a whole: wildcards alone (`*`,
/// `**`).
fn every_name(last: &str) -> bool {
    !last.is_empty() && last.bytes().all(|b| b == b'*')
}

/// `path` with each name that is a negation alone (`!(src|Cargo.toml)`, with `shopt -s
/// extglob`) written `*`: every entry but a few, which is what `*` stands for too, and
/// read as it is (`rm -rf !(src)` names the directory's entries, not every floating name
/// some entry might have). `None` when it has none.
fn negations_as_star(path: &str) -> Option<String> {
    let lone = |name: &str| {
        name.strip_prefix("!(")
            .and_then(|r| r.strip_suffix(')'))
            .is_some_and(|inner| !inner.contains(['(', ')', '/']))
    };
    if !path.split('/').any(lone) {
        return None;
    }
    let names: Vec<&str> = path
        .split('/')
        .map(|n| if lone(n) { "*" } else { n })
        .collect();
    Some(names.join("/"))
}

/// Where a glob's fixed text ends.
const GLOB_START: [char; 5] = ['*', '?', '[', '{', '\\'];

/// Whether `s` holds one of [`GLOB_START`] (all ASCII, so a byte scan finds them).
fn has_glob_start(s: &str) -> bool {
    s.bytes()
        .any(|b| matches!(b, b'*' | b'?' | b'[' | b'{' | b'\\'))
}

/// A path written with glob characters, compiled to match the patterns it could name;
/// `None` for a plain path or one that is not a valid glob.
#[must_use]
pub(crate) fn written_glob(path: &str) -> Option<WrittenGlob> {
    // Nearly every path has none of the bytes a glob needs (an extglob has its `(`): one
    // fast scan settles it.
    if memchr::memchr3(b'*', b'?', b'[', path.as_bytes()).is_none()
        && memchr::memchr(b'(', path.as_bytes()).is_none()
    {
        return None;
    }
    let starred = negations_as_star(path);
    let path = starred.as_deref().unwrap_or(path);
    let bytes = path.as_bytes();
    let wildcard = memchr::memchr3(b'*', b'?', b'[', bytes).is_some();
    let extglob = intersect::extglob_at(path);
    if !(wildcard || extglob.is_some()) || !valid_glob(path) {
        return None;
    }
    let literal = bytes
        .iter()
        .position(|b| GLOB_START.contains(&char::from(*b)))
        .into_iter()
        .chain(extglob)
        .min()
        .unwrap_or(path.len());
    Some(WrittenGlob {
        glob: path.to_owned(),
        literal,
        matcher: std::cell::OnceCell::new(),
        lang: std::cell::OnceCell::new(),
        written_lang: std::cell::OnceCell::new(),
        brings_entries: false,
    })
}

/// Whether `glob` is a glob `globset` accepts. Only brackets, braces and backslashes can
/// make it refuse one (unclosed or unopened, a bad range, a dangling escape), so a path
/// without them (`src/**`, `~/.aws/cred*`: nearly every one) needs no parse to tell.
fn valid_glob(glob: &str) -> bool {
    !glob
        .bytes()
        .any(|b| matches!(b, b'[' | b']' | b'{' | b'}' | b'\\'))
        || build_glob(glob).is_ok()
}

pub(super) fn build_glob(glob: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

/// Expands a leading `~` / `$HOME` / `${HOME}` into one pattern per home.
fn expand_home(source: &str, homes: &Homes) -> Result<Vec<String>, PatternError> {
    let rest = ["$HOME", "${HOME}", "~"].iter().find_map(|p| {
        source
            .strip_prefix(p)
            .filter(|r| r.is_empty() || r.starts_with('/'))
    });
    if let Some(rest) = rest {
        return Ok(homes
            .list()
            .iter()
            .map(|h| normalize(&format!("{h}{rest}")))
            .collect());
    }
    if source.starts_with('~') {
        return Err(PatternError {
            message: format!("`~user` in `{source}` is not supported"),
            hint: "write `~/…` (every account's home) or the absolute path".into(),
        });
    }
    if source.contains("$HOME") || source.contains("${HOME}") {
        return Err(PatternError {
            message: format!("`$HOME` in `{source}` is only expanded at the start"),
            hint: "start the pattern with `$HOME/` or `~/`".into(),
        });
    }
    Ok(vec![if source.starts_with('/') {
        normalize(source)
    } else {
        source.to_owned()
    }])
}

/// A glob the kernel maps can hold exactly.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelForm {
    /// The whole path.
    Exact(String),
    /// A directory prefix ending in `/`: everything below it (not the directory itself,
    /// which is what the glob `dir/**` means too).
    Prefix(String),
    /// A basename anywhere.
    Name(String),
}

impl KernelForm {
    /// The same answer as the glob this form came from (checked by a property test).
    #[must_use]
    pub fn matches(&self, path: &str) -> bool {
        match self {
            Self::Exact(p) => path == p,
            Self::Prefix(p) => path.starts_with(p.as_str()),
            Self::Name(n) => {
                path == n
                    || path
                        .strip_suffix(n.as_str())
                        .is_some_and(|rest| rest.ends_with('/'))
            }
        }
    }
}

/// Why a pattern has no map form in the kernel (it may still have a path automaton).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoKernelForm {
    #[error("pattern `{0}` is a regex, matched in userspace only")]
    Regex(String),
    #[error(
        "pattern `{0}` is a basename suffix; the kernel matches exact names, prefixes and \
         basenames so far"
    )]
    BasenameSuffix(String),
    #[error(
        "pattern `{0}` has wildcards the kernel maps cannot express (only an exact path, \
         `/dir/**` and `**/name` compile to the kernel so far)"
    )]
    Wildcards(String),
}

/// A glob expansion globset refuses.
#[derive(Debug, thiserror::Error)]
#[error("glob `{glob}`: {source}")]
pub struct BadGlob {
    /// The expansion refused.
    pub glob: String,
    /// Why globset refuses it.
    #[source]
    pub source: globset::Error,
}

fn kernel_form(glob: &str) -> Result<KernelForm, NoKernelForm> {
    let literal = |s: &str| !s.contains(GLOB_META);
    if literal(glob) && glob.starts_with('/') {
        return Ok(KernelForm::Exact(glob.to_owned()));
    }
    if let Some(dir) = glob.strip_suffix("/**") {
        if literal(dir) && (dir.is_empty() || dir.starts_with('/')) && !dir.contains("**") {
            return Ok(KernelForm::Prefix(format!("{dir}/")));
        }
    }
    if let Some(name) = glob.strip_prefix("**/") {
        if literal(name) && !name.contains('/') && !name.is_empty() {
            return Ok(KernelForm::Name(name.to_owned()));
        }
        if name.starts_with("*.") && literal(&name[2..]) && !name.contains('/') {
            return Err(NoKernelForm::BasenameSuffix(glob.to_owned()));
        }
    }
    Err(NoKernelForm::Wildcards(glob.to_owned()))
}

/// Where `path` leads after symlinks, when that differs: its deepest existing directory
/// resolved, the names below it that do not exist yet appended (`~/.config/autostart` when
/// `~/.config` is a link and `autostart` is still to be made).
#[must_use]
pub(crate) fn symlink_target(host: &dyn Host, path: &str) -> Option<PathBuf> {
    let mut existing = std::path::Path::new(path);
    let mut missing = Vec::new();
    let mut canonical = loop {
        if let Some(c) = host.canonicalize(existing) {
            break c;
        }
        missing.push(existing.file_name()?);
        existing = existing.parent()?;
    };
    for name in missing.iter().rev() {
        canonical.push(name);
    }
    (canonical.as_os_str() != path).then_some(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(s: &str) -> PathPattern {
        PathPattern::parse(s, &Homes::fixed(["/home/a", "/root"])).unwrap()
    }

    #[test]
    fn double_star_crosses_separators_single_star_does_not() {
        let p = pat("/srv/**");
        assert!(p.matches("/srv/a/b/c"));
        assert!(!p.matches("/srvx/a"));
        let p = pat("/srv/*");
        assert!(p.matches("/srv/a"));
        assert!(!p.matches("/srv/a/b"));
        let p = pat("**/.env");
        assert!(p.matches("/x/y/.env"));
        assert!(p.matches("/.env"));
        assert!(!p.matches("/x/.envrc"));
        assert!(pat("/a/?").matches("/a/b"));
        assert!(!pat("/a/?").matches("/a//"));
        assert!(pat("/a/[bc]").matches("/a/c"));
    }

    proptest::proptest! {
        /// The literal-prefix shortcut of a written glob never changes its answer.
        #[test]
        fn written_glob_prefix_filter_is_exact(
            written in "(/[a-c.]{0,3}){1,4}(/\\*\\*|/\\*|\\*|/[ab]\\?|/\\{a,b\\}\\*)",
            pattern in "(/([a-c.]{0,3}|\\*\\*|\\*)){1,5}",
        ) {
            if let Some(w) = written_glob(&written) {
                let full = build_glob(&written).unwrap().compile_matcher();
                proptest::prop_assert_eq!(w.is_match(&written), full.is_match(&written));
                proptest::prop_assert_eq!(w.is_match(&pattern), full.is_match(&pattern));
            }
        }
    }

    proptest::proptest! {
        /// The shortcut of [`valid_glob`] answers what parsing the glob answers.
        #[test]
        fn valid_glob_agrees_with_globset(glob in "[a/*?,.\\[\\]{}\\\\!-]{0,12}") {
            proptest::prop_assert_eq!(valid_glob(&glob), build_glob(&glob).is_ok(), "{}", glob);
        }
    }

    /// One name of a path as a shell glob that bash matches against it (`pick` chooses):
    /// wildcards, a bracket class, one of bash's extended patterns, a brace list. A hidden
    /// name keeps its dot in front, as bash requires.
    fn name_as_glob(name: &str, pick: usize) -> String {
        let (dot, body) = match name.strip_prefix('.') {
            Some(body) => (".", body),
            None => ("", name),
        };
        let Some(first) = body.chars().next() else {
            return name.to_owned();
        };
        let rest = &body[first.len_utf8()..];
        match pick % 12 {
            0 => name.to_owned(),
            1 => format!("{dot}*"),
            2 => format!("{dot}{first}*"),
            3 => format!("{dot}{}", "?".repeat(body.chars().count())),
            4 => format!("{dot}[{first}]{rest}"),
            5 => format!("@({name})"),
            6 => format!("@(zz|{name})"),
            7 => format!("+({name})"),
            8 => format!("?({name})"),
            9 => format!("*({name})"),
            // Braces alone make no glob (a tool's path is read as written): with a `*`.
            10 => format!("{dot}{{{body},zz}}*"),
            _ => format!("{dot}{first}[[:print:]]*"),
        }
    }

    proptest::proptest! {
        /// A glob that matches a protected path, read as the shell reads it, is judged as
        /// reaching it: exact-file, basename and `dir/**` rules alike, whatever the glob's
        /// spelling of each name and with any depth (`**`, find's `+(**)`) put in front of
        /// any name. A basename rule (`**/id_rsa`) is not reached by a last name of
        /// wildcards alone (`~/.ssh/*` stands for the directory's entries as a whole, which
        /// the directory's own rule names).
        #[test]
        fn a_glob_matching_a_protected_path_reaches_it(
            which in 0usize..3,
            picks in proptest::collection::vec(0usize..12, 6),
            depth_at in 0usize..8,
            depth in 0usize..3,
        ) {
            let (rule, path) = [
                ("~/.aws/credentials", "/home/a/.aws/credentials"),
                ("**/id_rsa", "/home/a/.ssh/id_rsa"),
                ("~/.gnupg/**", "/home/a/.gnupg/private-keys-v1.d/k.key"),
            ][which];
            let names: Vec<&str> = path.split('/').skip(1).collect();
            let mut glob = String::new();
            for (i, name) in names.iter().enumerate() {
                if i == depth_at {
                    let find = format!("/{}", intersect::FIND_DEPTH);
                    glob.push_str(["", "/**", find.as_str()][depth]);
                }
                let last = i + 1 == names.len();
                let mut pick = picks[i % picks.len()];
                // The first two names stay as written: the home the rule expands to.
                if i < 2 || (last && which == 1 && matches!(pick % 12, 1)) {
                    pick = 0;
                }
                glob.push('/');
                glob.push_str(&name_as_glob(name, pick));
            }
            proptest::prop_assert!(pat(rule).covers(&glob, false), "{} does not reach {}", glob, rule);
        }
    }

    #[test]
    fn a_glob_reaches_exact_files_through_extended_patterns_and_depth() {
        let creds = pat("~/.aws/credentials");
        let depth = |g: &str| g.replace("+(**)", intersect::FIND_DEPTH);
        for glob in [
            "/home/a/+(**)/.aws/**",
            "/home/a/+(**)/.aws/*",
            "/home/a/@(.aws|.azure)/*",
            "/home/a/+(.aws)/**",
            "/root/?(.aws)/*",
        ] {
            assert!(creds.covers(&depth(glob), false), "{glob}");
        }
        // Look-alikes: the same shapes elsewhere, or a name the path does not have.
        for glob in [
            "/home/a/project/+(**)/*",
            "/home/a/@(.aws)/config*",
            "/home/a/@(.azure|.gcp)/*",
            "/home/a/+(**)/.aws/cache/*",
        ] {
            assert!(!creds.covers(&depth(glob), false), "{glob}");
        }
        // The agent's own `+(**)` is one name that is not hidden (bash), not find's walk.
        assert!(!creds.covers("/home/a/+(**)/.aws/*", false));
        assert!(!pat("~/.ssh/**").covers("/home/a/+(**)/README.md", false));
    }

    #[test]
    fn covers_directories_and_written_globs() {
        let p = pat("/home/a/.ssh/**");
        assert!(!p.covers("/home/a/.ssh", false));
        assert!(p.covers("/home/a/.ssh", true));
        assert!(p.covers("/home/a/**", false));
        assert!(!pat("/home/a/.ssh/**").covers("/home/a/project/**", false));
        assert!(pat("/home/a/.aws/credentials").covers("/home/a/.aws/cred*", false));
        assert!(!pat("/home/a/.aws/credentials").exempts("/home/a/.aws/cred*"));
        // Below an excepted file: the file's, whatever reads it as a tree.
        assert!(pat("/home/a/.ssh/*.pub").exempts("/home/a/.ssh/k.pub/**"));
        assert!(pat("/home/a/.ssh/*.pub").exempts("/home/a/.ssh/*.pub/*"));
        assert!(!pat("/home/a/.ssh/*.pub").exempts("/home/a/.ssh/**"));
        assert!(!pat("/home/a/.ssh/*.pub").exempts("/home/a/.ssh/k.pub/../id_rsa"));
        assert!(!pat("**/.env").covers("/home/a/project/**", true));
    }

    #[test]
    fn home_expands_for_every_account() {
        let p = pat("~/.ssh/**");
        assert!(p.matches("/home/a/.ssh/id_rsa"));
        assert!(p.matches("/root/.ssh/config"));
        assert!(!p.matches("/home/b/.ssh/id_rsa"));
        assert!(pat("$HOME/.netrc").matches("/root/.netrc"));
        assert!(pat("${HOME}/.netrc").matches("/home/a/.netrc"));
    }

    #[test]
    fn passwd_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let alice = dir.path().join("alice");
        std::fs::create_dir(&alice).unwrap();
        let passwd = dir.path().join("passwd");
        std::fs::write(
            &passwd,
            format!(
                "root:x:0:0::/nonexistent-root:/bin/sh\ndaemon:x:1:1::{d}:/bin/false\nalice:x:1000:1000::{a}:/bin/sh\nbroken\n",
                d = dir.path().display(),
                a = alice.display()
            ),
        )
        .unwrap();
        let homes = Homes::from_passwd(&crate::host::real::TestHost, &passwd, Some("/home/me"));
        assert_eq!(
            homes.list(),
            ["/home/me".to_owned(), alice.display().to_string()]
        );
    }

    #[test]
    fn bad_patterns_are_refused() {
        let h = Homes::fixed(["/root"]);
        for bad in [
            "", ".env", "*.pem", "~bob/x", "/x/$HOME", "re:(", "/a/[", "a\0b", "/a/../b", "/a/./b",
        ] {
            assert!(PathPattern::parse(bad, &h).is_err(), "{bad}");
        }
        assert!(PathPattern::parse("re:/proc/\\d+/environ", &h).is_ok());
    }

    #[test]
    fn kernel_forms() {
        let f = |s: &str| pat(s).kernel_forms();
        assert_eq!(
            f("/etc/shadow"),
            Ok(vec![KernelForm::Exact("/etc/shadow".into())])
        );
        assert_eq!(f("/etc//x/"), Ok(vec![KernelForm::Exact("/etc/x".into())]));
        assert_eq!(
            f("/srv/secret/**"),
            Ok(vec![KernelForm::Prefix("/srv/secret/".into())])
        );
        assert_eq!(f("**/id_rsa"), Ok(vec![KernelForm::Name("id_rsa".into())]));
        assert_eq!(
            f("~/.aws/**"),
            Ok(vec![
                KernelForm::Prefix("/home/a/.aws/".into()),
                KernelForm::Prefix("/root/.aws/".into())
            ])
        );
        for userspace in [
            "/etc/*",
            "/home/*/.ssh/**",
            "**/*.pem",
            "/x/**/y",
            "re:^/x",
            "**",
        ] {
            assert!(f(userspace).is_err(), "{userspace}");
        }
    }

    proptest::proptest! {
        #[test]
        fn forms_match_like_their_globs(
            pattern in proptest::sample::select(vec![
                "/etc/passwd", "/srv/**", "/srv/a/**", "/**", "**/id_rsa", "**/.env", "/a",
            ]),
            path in "(/|a|b|srv|etc|passwd|id_rsa|\\.env|x){0,8}",
        ) {
            let fast = pat(pattern);
            let glob = build_glob(pattern).unwrap().compile_matcher();
            let is_fast = matches!(fast, PathPattern::Glob { matcher: GlobMatch::Forms(_), .. });
            proptest::prop_assert!(is_fast);
            proptest::prop_assert_eq!(fast.matches(&path), glob.is_match(&path), "{} on {}", pattern, path);
        }
    }
}
