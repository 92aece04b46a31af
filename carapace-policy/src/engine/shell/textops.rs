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
    }
}
