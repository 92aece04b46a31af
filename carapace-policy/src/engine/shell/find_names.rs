//! Which names a `find` expression can select, as globs of the last path name.
//!
//! `find` goes into every directory, hidden ones included, so what it selects is the start
//! directory's whole tree unless a test narrows the last name. Only tests that must hold
//! for an entry to be selected narrow it: a `-name` under `!`/`-not` selects everything
//! else, and each `-o` branch selects on its own (`\( -name a -o -name b \) -delete`
//! deletes both kinds). Whole-path tests (`-path`, `-regex`) are not read as names: they
//! leave the last name open. The answer over-approximates: parentheses are read as if
//! they were not there, which can only add branches.

/// The last-name globs a find expression can select, one per branch of its top-level
/// `-o`; `None` where a branch leaves the name open (every entry).
#[cfg(test)]
pub(super) fn names(expr: &[String]) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = Vec::new();
    for branch in branches(expr) {
        if !out.contains(&branch.name) {
            out.push(branch.name);
        }
    }
    out
}

/// Where each top-level `-o` of a find expression is (outside parentheses and outside the
/// command of an `-exec`): the actions of one side act on that side's entries alone
/// (`-path '*/.git' -prune -o -name '*.orig' -delete` deletes no `.git`).
pub(super) fn top_level_splits(expr: &[String]) -> Vec<usize> {
    let mut splits = Vec::new();
    let mut depth = 0usize;
    let mut in_exec = false;
    for (i, w) in expr.iter().enumerate() {
        if in_exec {
            in_exec = !(w == ";" || w == "+");
            continue;
        }
        match w.as_str() {
            "-exec" | "-execdir" | "-ok" | "-okdir" => in_exec = true,
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            "-o" | "-or" if depth == 0 => splits.push(i),
            _ => {}
        }
    }
    splits
}

/// What one `-o` branch of a find expression selects: a last name (`-name`), and the whole
/// path's pattern where a `-path`/`-wholename` test must hold (in find's language, where
/// `*` and `?` cross `/`; caseless ones already spelled in both cases).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Branch {
    pub name: Option<String>,
    pub path: Option<String>,
}

/// The branches of a find expression's top-level `-o` (at least one).
pub(super) fn branches(expr: &[String]) -> Vec<Branch> {
    let mut out: Vec<Branch> = Vec::new();
    for branch in expr.split(|w| w == "-o" || w == "-or") {
        let selected = Branch {
            name: branch_name(branch),
            path: branch_path(branch),
        };
        if !out.contains(&selected) {
            out.push(selected);
        }
    }
    if out.is_empty() {
        out.push(Branch {
            name: None,
            path: None,
        });
    }
    out
}

/// The first positive whole-path glob test of one `-a` chain (`-path`, `-wholename`,
/// `-ipath`, `-iwholename`): every test in a chain must hold, so it bounds what is selected.
fn branch_path(branch: &[String]) -> Option<String> {
    let mut negated = false;
    let mut i = 0;
    while let Some(w) = branch.get(i) {
        match w.as_str() {
            "!" | "-not" => {
                negated = !negated;
                i += 1;
                continue;
            }
            "-path" | "-wholename" | "-ipath" | "-iwholename" => {
                let pattern = branch.get(i + 1)?;
                if !negated && !pattern.is_empty() {
                    return Some(if w.starts_with("-i") {
                        super::globopts::caseless(pattern)
                    } else {
                        pattern.clone()
                    });
                }
                i += 2;
            }
            _ => i += 1,
        }
        negated = false;
    }
    None
}

/// A `-path` pattern as the globs of Layer 1 (one to three): find's `*` and `?` match any
/// characters, `/` and a leading dot included, so a name holding one may stand for several
/// names — written [`FIND_DEPTH`] before it (it may begin further up), after the last (it
/// may go on below), and between its ends (`.ssh?id_rsa` is `.ssh/id_rsa` too).
/// Over-approximates, as a walk must.
///
/// [`FIND_DEPTH`]: crate::rules::intersect::FIND_DEPTH
pub(super) fn path_globs(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    for split in [false, true] {
        let (glob, open_end) = path_glob(pattern, split);
        // Leading names of wildcards may be none at all (`*/.aws/*` is `./.aws/x` from
        // `.`): that reading written out too, a literal tree the rules see whole.
        let shallow = glob
            .strip_prefix(crate::rules::intersect::FIND_DEPTH)
            .and_then(|g| g.strip_prefix('/'))
            .map(str::to_owned);
        for glob in [
            open_end.then(|| format!("{glob}/**")),
            Some(glob),
            shallow
                .as_ref()
                .filter(|_| open_end)
                .map(|g| format!("{g}/**")),
            shallow.clone(),
        ]
        .into_iter()
        .flatten()
        {
            if !out.contains(&glob) {
                out.push(glob);
            }
        }
    }
    out
}

/// One reading of [`path_globs`]: each wildcard name as one name, or (`split`) as its
/// two ends with any names between; and whether the last name may go on below.
fn path_glob(pattern: &str, split: bool) -> (String, bool) {
    use crate::rules::intersect::FIND_DEPTH;
    let wild = |c: char| matches!(c, '*' | '?');
    let mut out: Vec<String> = Vec::new();
    let push = |out: &mut Vec<String>, name: String| {
        if !(name == FIND_DEPTH && out.last().is_some_and(|l| l == FIND_DEPTH)) {
            out.push(name);
        }
    };
    let names: Vec<&str> = pattern.split('/').collect();
    let mut open_end = false;
    for (i, name) in names.iter().enumerate() {
        let (Some(first), Some(last)) = (name.find(wild), name.rfind(wild)) else {
            push(&mut out, (*name).to_owned());
            continue;
        };
        let (prefix, suffix) = (&name[..first], &name[last + 1..]);
        if prefix.is_empty() {
            push(&mut out, FIND_DEPTH.to_owned());
        }
        if split && !suffix.is_empty() {
            if !prefix.is_empty() {
                push(&mut out, format!("{prefix}*"));
            }
            push(&mut out, FIND_DEPTH.to_owned());
            push(&mut out, format!("*{suffix}"));
        } else if name.chars().any(|c| !wild(c)) {
            push(&mut out, (*name).to_owned());
        }
        if suffix.is_empty() {
            if i + 1 == names.len() {
                open_end = true;
            } else {
                push(&mut out, FIND_DEPTH.to_owned());
            }
        }
    }
    // What lies below a name is its tree (`DIR/**`), as for a walk of the start
    // directory: a delete of it is the tree's, not a claim on every name in it.
    if out.last().is_some_and(|l| l == FIND_DEPTH) && out.len() > 1 {
        out.pop();
        out.push("**".to_owned());
        open_end = false;
    }
    let open_end = open_end && out.last().is_none_or(|l| l != FIND_DEPTH);
    let glob = out.join("/");
    (glob, open_end)
}

/// The name test that selects in one `-a` chain: its first positive `-name`/`-iname` with
/// a pattern of one name (every test in a chain must hold, so any one of them bounds it).
fn branch_name(branch: &[String]) -> Option<String> {
    let mut negated = false;
    let mut i = 0;
    while let Some(w) = branch.get(i) {
        match w.as_str() {
            "!" | "-not" => {
                negated = !negated;
                i += 1;
                continue;
            }
            "-name" | "-iname" => {
                let pattern = branch.get(i + 1)?;
                if !negated && !pattern.contains('/') && !pattern.is_empty() {
                    return Some(if w == "-iname" {
                        super::globopts::caseless(pattern)
                    } else {
                        pattern.clone()
                    });
                }
                i += 2;
            }
            "-path" | "-wholename" | "-regex" | "-ipath" | "-iwholename" | "-iregex" => {
                // A whole-path test names the last name only when it ends in one written
                // out (`*/hooks/pre-commit`, `.*pre-commit`): its wildcards cross `/`.
                // The `-i` tests match either case.
                let caseless = w.starts_with("-i");
                let test = if caseless {
                    w.replacen("-i", "-", 1)
                } else {
                    w.clone()
                };
                let name = branch.get(i + 1).and_then(|p| last_name(&test, p));
                if let Some(name) = name.filter(|_| !negated) {
                    return Some(if caseless {
                        super::globopts::caseless(&name)
                    } else {
                        name
                    });
                }
                i += 2;
            }
            _ => i += 1,
        }
        negated = false;
    }
    None
}

/// The name a whole-path test's pattern ends with: after its last `/` (`*/.git/hooks`:
/// `hooks`), or, where a wildcard that may cross `/` comes last, any name ending in the
/// text after it (`*hooks`: `*hooks`); for a `-regex` of the form `.*NAME` or `.*/NAME`,
/// `*NAME` or `NAME`. `None` when that end has other wildcards or is empty.
fn last_name(test: &str, pattern: &str) -> Option<String> {
    if test == "-regex" {
        let rest = pattern.strip_prefix(".*")?.trim_end_matches('$');
        let (whole, rest) = match rest.rsplit_once('/') {
            // Only a `.*` may come before the last name's `/`: literal names.
            Some((dirs, name)) if dirs.is_empty() || literal_regex(dirs).is_some() => (true, name),
            Some(_) => return None,
            None => (false, rest),
        };
        let literal = literal_regex(rest).filter(|l| !l.is_empty())?;
        return Some(if whole {
            literal
        } else {
            format!("*{literal}")
        });
    }
    let tail = pattern.rsplit('/').next().unwrap_or(pattern);
    if tail.is_empty() {
        return None;
    }
    if !tail.contains(['*', '?', '[', '\\']) {
        return Some(tail.to_owned());
    }
    let end = &tail[tail.rfind('*')? + 1..];
    (!end.is_empty() && !end.contains(['?', '[', '\\'])).then(|| format!("*{end}"))
}

/// The text a regex of literal characters stands for (`\.git` → `.git`); `None` for any
/// other regex.
fn literal_regex(regex: &str) -> Option<String> {
    let mut literal = String::new();
    let mut chars = regex.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.next() == Some('.') => literal.push('.'),
            '/' => literal.push('/'),
            c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => literal.push(c),
            _ => return None,
        }
    }
    Some(literal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn names_are_read_from_the_tests_that_select() {
        assert_eq!(names(&words("-name *.pyc -delete")), [Some("*.pyc".into())]);
        assert_eq!(names(&words("-type f -delete")), [None]);
        assert_eq!(names(&words("! -name *.txt -delete")), [None]);
        assert_eq!(names(&words("-not -name *.txt -delete")), [None]);
        assert_eq!(
            names(&words("( -name a -o -name b ) -delete")),
            [Some("a".into()), Some("b".into())]
        );
        assert_eq!(
            names(&words("-name a -o -type d")),
            [Some("a".into()), None]
        );
        assert_eq!(names(&words("-path */.aws/* -print")), [None]);
        assert_eq!(
            names(&words("-path */hooks/pre-commit")),
            [Some("pre-commit".into())]
        );
        assert_eq!(
            names(&words("-regex .*pre-commit -delete")),
            [Some("*pre-commit".into())]
        );
        assert_eq!(names(&words("-regex .*\\.pyc")), [Some("*.pyc".into())]);
        assert_eq!(names(&words("-regex .*.pyc")), [None]);
        assert_eq!(names(&words("-regex .*/x.*")), [None]);
        assert_eq!(names(&words("-regex .*/hooks")), [Some("hooks".into())]);
        assert_eq!(
            names(&words("-regex .*/\\.git/hooks$")),
            [Some("hooks".into())]
        );
        assert_eq!(names(&words("-regex .*x/.*/hooks")), [None]);
        assert_eq!(names(&words("-wholename *hooks")), [Some("*hooks".into())]);
        assert_eq!(names(&words("-path */hoo*")), [None]);
        assert_eq!(
            names(&words("-iregex .*/HOOKS")),
            [Some("[hH][oO][oO][kK][sS]".into())]
        );
        assert_eq!(
            names(&words("-iname ID_rsa")),
            [Some("[iI][dD]_[rR][sS][aA]".into())]
        );
        assert_eq!(names(&words("-iname [I]d")), [Some("[iI][dD]".into())]);
        assert_eq!(names(&words("! ! -name a")), [Some("a".into())]);
        assert_eq!(names(&[]), [None]);
    }

    #[test]
    fn actions_bind_to_their_side_of_a_top_level_or() {
        assert_eq!(
            top_level_splits(&words("-path */.git -prune -o -name *.orig -delete")),
            [3]
        );
        assert_eq!(
            top_level_splits(&words(
                "( -name a -o -name b ) -exec grep -o x {} ; -o -print"
            )),
            [13]
        );
    }

    #[test]
    fn whole_path_patterns_cross_names_where_find_does() {
        let d = crate::rules::intersect::FIND_DEPTH;
        assert_eq!(
            path_globs("*/.ssh/id_*"),
            [
                format!("{d}/.ssh/id_*/**"),
                format!("{d}/.ssh/id_*"),
                ".ssh/id_*/**".to_owned(),
                ".ssh/id_*".to_owned()
            ]
        );
        assert_eq!(
            path_globs("*/node_modules/*"),
            [format!("{d}/node_modules/**"), "node_modules/**".to_owned()]
        );
        assert_eq!(path_globs("./src/main.rs"), ["./src/main.rs"]);
        assert_eq!(
            path_globs("/root/.ssh?id_rsa"),
            [
                "/root/.ssh?id_rsa".to_owned(),
                format!("/root/.ssh*/{d}/*id_rsa")
            ]
        );
        assert_eq!(path_globs("*"), [d]);
        assert_eq!(path_globs("*x"), [format!("{d}/*x"), "*x".to_owned()]);
        assert_eq!(
            branches(&words("-path */x -o -name y")),
            [
                Branch {
                    name: Some("x".into()),
                    path: Some("*/x".into())
                },
                Branch {
                    name: Some("y".into()),
                    path: None
                },
            ]
        );
        assert_eq!(
            branches(&words("! -path */x")),
            [Branch {
                name: None,
                path: None
            }]
        );
    }
}
