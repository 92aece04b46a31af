//! Text filters whose output Layer 1 computes when their input is known, so that a name
//! spelled through them (`$(echo CREDENTIALS | tr A-Z a-z)`) is the name the shell uses.

/// Characters a set may expand to, at most (`\0-\377` is 256).
const MAX_SET: usize = 512;

/// `tr SET1 SET2`, `tr -d SET`, `tr -s …` (squeezing is left out: it only shortens runs).
pub(super) fn tr(input: &str, args: &[String]) -> String {
    let mut delete = false;
    let mut complement = false;
    let mut sets = Vec::new();
    for a in args {
        match a.as_str() {
            s if s.starts_with('-') && s.len() > 1 && sets.is_empty() => {
                delete |= s.contains('d');
                complement |= s.contains(['c', 'C']);
            }
            s => sets.push(expand_set(s)),
        }
    }
    let Some(first) = sets.first() else {
        return input.to_owned();
    };
    let in_first = |c: char| first.contains(&c) != complement;
    if delete {
        return input.chars().filter(|&c| !in_first(c)).collect();
    }
    let Some(second) = sets.get(1).filter(|s| !s.is_empty() && !complement) else {
        return input.to_owned();
    };
    input
        .chars()
        .map(|c| match first.iter().position(|&f| f == c) {
            // A shorter second set repeats its last character.
            Some(i) => second.get(i).or(second.last()).copied().unwrap_or(c),
            None => c,
        })
        .collect()
}

/// What `sed SCRIPT…` prints of `input`, as far as plain substitutions tell: each
/// `s/OLD/NEW/[g]` whose two sides are plain text is applied; every other command and
/// pattern leaves the text as it was (the text stands for what it prints).
pub(super) fn sed(input: &str, scripts: &[&str]) -> String {
    let mut text = input.to_owned();
    for command in scripts
        .iter()
        .flat_map(|s| s.split(['\n', ';']))
        .take(MAX_SED_COMMANDS)
    {
        if let Some((old, new, global)) = plain_substitution(command.trim()) {
            text = text
                .lines()
                .map(|line| {
                    if global {
                        line.replace(&old, &new)
                    } else {
                        line.replacen(&old, &new, 1)
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
        }
    }
    text
}

/// Substitution commands one sed call is read for, at most.
const MAX_SED_COMMANDS: usize = 64;

/// `s/OLD/NEW/FLAGS` with plain text on both sides (any delimiter).
fn plain_substitution(command: &str) -> Option<(String, String, bool)> {
    let rest = command.strip_prefix('s')?;
    let delim = rest.chars().next()?;
    let mut parts = rest[delim.len_utf8()..].split(delim);
    let (old, new, flags) = (parts.next()?, parts.next()?, parts.next()?);
    let plain = |t: &str, special: &[char]| !t.contains(special) && !t.contains('\\');
    (plain(old, &['.', '[', ']', '*', '^', '$']) && !old.is_empty() && plain(new, &['&']))
        .then(|| (old.to_owned(), new.to_owned(), flags.contains('g')))
}

/// A `tr` set: ranges (`a-z`), classes (`[:upper:]`) and backslash escapes.
fn expand_set(set: &str) -> Vec<char> {
    let chars: Vec<char> = set.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() && out.len() < MAX_SET {
        let rest: String = chars[i..].iter().take(10).collect();
        if let Some(class) = ["[:lower:]", "[:upper:]", "[:digit:]", "[:alpha:]"]
            .iter()
            .find(|c| rest.starts_with(**c))
        {
            let range = match *class {
                "[:lower:]" => 'a'..='z',
                "[:upper:]" => 'A'..='Z',
                "[:digit:]" => '0'..='9',
                _ => 'A'..='z',
            };
            out.extend(range.filter(char::is_ascii_alphanumeric));
            i += class.len();
            continue;
        }
        let c = match chars[i] {
            '\\' if i + 1 < chars.len() => {
                i += 1;
                match chars[i] {
                    'n' => '\n',
                    't' => '\t',
                    c => c,
                }
            }
            c => c,
        };
        if chars.get(i + 1) == Some(&'-') && i + 2 < chars.len() {
            let end = chars[i + 2];
            if c <= end {
                out.extend((c..=end).take(MAX_SET));
            }
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn translations() {
        assert_eq!(tr("CREDENTIALS", &args(&["A-Z", "a-z"])), "credentials");
        assert_eq!(tr("Netrc", &args(&["[:upper:]", "[:lower:]"])), "netrc");
        assert_eq!(tr("c-r-e-d", &args(&["-d", "-"])), "cred");
        assert_eq!(tr("x_aws", &args(&["_", "."])), "x.aws");
        assert_eq!(tr("abc", &args(&["-cd", "b"])), "b");
        assert_eq!(tr("abc", &args(&[])), "abc");
        assert_eq!(
            sed("cat ~/.aws/credXntials", &["s/X/e/"]),
            "cat ~/.aws/credentials"
        );
        assert_eq!(sed("a.a.a", &["s|a|b|g"]), "b.b.b");
        assert_eq!(sed("abc", &["s/a.c/x/", "y/a/b/"]), "abc");
    }
}
