//! Paths inline code builds from the home directory rather than writes out:
//! `os.path.join(os.environ["HOME"], ".aws", "credentials")`, `Path.home() / ".ssh" /
//! "id_rsa"`, `os.homedir() + "/.aws/credentials"`, `process.env.HOME + …`,
//! `ENV["HOME"] + …`, `$ENV{HOME} . …`, `Dir.home`, `os.getenv("HOME")`. The literals that
//! follow such an expression, joined only by the punctuation of a path join (`,` `+` `/`
//! `.` and the join calls themselves), are the path's names; a name that is not a literal
//! (a variable) leaves the rest unknown, which is spelled `**` so that the path is matched
//! as a glob against the rules' patterns.

use std::sync::LazyLock;

use regex::Regex;

/// Expressions for the user's home directory, in the languages agents write one-liners in.
static HOME_EXPR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"os\.environ\s*\[\s*['"]HOME['"]\s*\]"#,
        r#"|os\.environ\.get\(\s*['"]HOME['"][^)]*\)"#,
        r#"|(?:os\.)?getenv\(\s*['"]HOME['"]\s*\)"#,
        r"|(?:pathlib\.)?Path\.home\(\)",
        r"|(?:os\.)?homedir\(\)",
        r"|process\.env\.HOME\b",
        r#"|process\.env\[\s*['"]HOME['"]\s*\]"#,
        r#"|ENV\s*\[\s*['"]HOME['"]\s*\]"#,
        r#"|ENV\.fetch\(\s*['"]HOME['"]\s*\)"#,
        r#"|\$ENV\{\s*['"]?HOME['"]?\s*\}"#,
        r"|Dir\.home\b",
        r#"|(?:os\.path\.)?expanduser\(\s*['"]~['"]\s*\)"#,
    ))
    .expect("a valid regex")
});

/// Text allowed between the parts of one path: separators and the join calls.
static JOINER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:\s|[,+/.()]|join(?:path)?\(|resolve\(|File\.join\(|path\.join\(|os\.path\.join\()*$",
    )
    .expect("a valid regex")
});

/// One path built from the home directory: where its expression starts in the code, and
/// the path (`~/…`, with `**` for what is not a literal).
pub(super) struct HomePath {
    pub start: usize,
    /// Where its last literal closes (or its expression ends).
    pub end: usize,
    pub path: String,
    /// Where the literals it took its names from start: they are not paths of their own.
    pub parts: Vec<usize>,
}

/// Every home-built path in `code`. `literals` are the code's string literals as
/// (start, end, value), in order; `end` is the index of the closing quote.
pub(super) fn home_paths(code: &str, literals: &[(usize, usize, &str)]) -> Vec<HomePath> {
    let mut out = Vec::new();
    for m in HOME_EXPR.find_iter(code) {
        let mut names: Vec<String> = Vec::new();
        let mut parts = Vec::new();
        let mut at = m.end();
        // How the parts are joined, set by the first gap: arguments of a join call (`,`)
        // or an operator (`+`, `/`, Perl's `.`). A comma after an operator join, or a `)`
        // closing the call the expression stands in, ends the path: what follows is another
        // argument (`readFileSync(home + "/x", "utf8")`, `open(join(home, "x"), "a")`).
        let mut joined_by = None;
        let mut depth = 0i32;
        for &(start, end, value) in literals.iter().filter(|(s, _, _)| *s >= m.end()) {
            let gap = code.get(at..start).unwrap_or("");
            if !JOINER.is_match(gap) {
                break;
            }
            for c in gap.chars() {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            // A gap that opens a join call (`.joinpath(`) is followed by its arguments.
            let sep = if gap.contains('(') {
                Some(',')
            } else {
                [',', '+', '/', '.'].into_iter().find(|c| gap.contains(*c))
            };
            if depth < 0 || (joined_by.is_some() && sep != joined_by) {
                break;
            }
            joined_by = joined_by.or(sep);
            parts.push(start);
            names.extend(
                value
                    .split('/')
                    .filter(|n| !n.is_empty() && *n != "~")
                    .map(str::to_owned),
            );
            at = end + 1;
        }
        // The join goes on with something not a literal (`, name`, `+ f`): the rest of
        // the path is unknown.
        let unknown = continues_with_a_name(code.get(at..).unwrap_or(""));
        if names.is_empty() && !unknown {
            continue;
        }
        let mut path = String::from("~");
        for n in &names {
            path.push('/');
            path.push_str(n);
        }
        if unknown {
            path.push_str("/**");
        }
        out.push(HomePath {
            start: m.start(),
            end: at.saturating_sub(1),
            path,
            parts,
        });
    }
    out
}

/// Whether `rest` goes on joining a path with a name that is not a literal.
fn continues_with_a_name(rest: &str) -> bool {
    let rest = rest.trim_start();
    let after = match rest.chars().next() {
        Some(',' | '+' | '/') => &rest[1..],
        // Perl's concatenation: `$ENV{HOME} . $name`.
        Some('.') if rest[1..].trim_start().starts_with('$') => &rest[1..],
        _ => return false,
    };
    after
        .trim_start()
        .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '$')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(code: &str) -> Vec<String> {
        let lits = super::super::code::literal_spans(code);
        let spans: Vec<(usize, usize, &str)> =
            lits.iter().map(|(s, e, v)| (*s, *e, v.as_str())).collect();
        home_paths(code, &spans)
            .into_iter()
            .map(|h| h.path)
            .collect()
    }

    #[test]
    fn idioms_of_each_language() {
        for (code, want) in [
            (
                r#"open(os.path.join(os.environ["HOME"], ".aws", "credentials")).read()"#,
                "~/.aws/credentials",
            ),
            (
                r"open(os.path.join(os.getenv('HOME'), '.ssh/id_rsa'))",
                "~/.ssh/id_rsa",
            ),
            (
                r#"(Path.home() / ".aws" / "credentials").read_text()"#,
                "~/.aws/credentials",
            ),
            (
                r#"Path.home().joinpath(".ssh", "id_ed25519").read_bytes()"#,
                "~/.ssh/id_ed25519",
            ),
            (
                r#"fs.readFileSync(require("os").homedir() + "/.aws/credentials")"#,
                "~/.aws/credentials",
            ),
            (
                r"fs.readFileSync(path.join(os.homedir(), '.npmrc'))",
                "~/.npmrc",
            ),
            (
                r#"fs.readFileSync(process.env.HOME + "/.netrc")"#,
                "~/.netrc",
            ),
            (
                r#"puts File.read(ENV["HOME"] + "/.aws/credentials")"#,
                "~/.aws/credentials",
            ),
            (
                r#"File.read(File.join(Dir.home, ".ssh", "id_rsa"))"#,
                "~/.ssh/id_rsa",
            ),
            (
                r#"open(F, $ENV{HOME} . "/.aws/credentials")"#,
                "~/.aws/credentials",
            ),
            (r#"open(os.path.expanduser("~") + "/.netrc")"#, "~/.netrc"),
            (r#"open(os.path.join(os.environ["HOME"], name))"#, "~/**"),
            (
                r#"open(os.path.join(os.environ["HOME"], ".aws", f))"#,
                "~/.aws/**",
            ),
            (
                r#"fs.readFileSync(os.homedir() + "/.aws/credentials", "utf8")"#,
                "~/.aws/credentials",
            ),
            (
                r#"open(os.path.join(os.environ["HOME"], ".bashrc"), "a").write("x")"#,
                "~/.bashrc",
            ),
        ] {
            assert_eq!(paths(code), [want], "{code}");
        }
        assert!(paths(r#"print(os.environ["HOME"])"#).is_empty());
    }
}
