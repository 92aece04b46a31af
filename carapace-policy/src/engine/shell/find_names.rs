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
pub(super) fn names(expr: &[String]) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = Vec::new();
    for branch in expr.split(|w| w == "-o" || w == "-or") {
        let name = branch_name(branch);
        if !out.contains(&name) {
            out.push(name);
        }
    }
    if out.is_empty() {
        out.push(None);
    }
    out
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
}
