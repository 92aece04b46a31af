//! sed scripts as Layer 1 reads them: which commands reach files (`r`, `w`, `s///w`) and
//! which run text as a shell command (`e`, `s///e`). One reader for the data-flow analysis
//! (a download run by `sed e`) and the script walk (files read and written).

/// Whether a sed script runs text as commands: GNU sed's `e` command, or the `e` flag of
/// `s///` (the pattern space after the substitution is run).
pub(super) fn executes(script: &str) -> bool {
    script
        .lines()
        .any(|line| commands(line).iter().any(|(cmd, _)| *cmd == 'e'))
}

/// The file and command arguments of one line of a sed script, as (command, argument):
/// commands split at `;` except those whose argument runs to the end of the line (`r`,
/// `w`, `e`, …), addresses (`1`, `$`, `/re/`, `1,5`, `!`) skipped; `s///w FILE` too.
pub(super) fn commands(line: &str) -> Vec<(char, &str)> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() && out.len() < 64 {
        rest = skip_address(rest.trim_start_matches([' ', '\t', ';', '{', '}']));
        let mut chars = rest.chars();
        let Some(cmd) = chars.next() else { break };
        let after = chars.as_str();
        match cmd {
            'r' | 'R' | 'w' | 'W' | 'e' => {
                out.push((cmd, after.trim()));
                break;
            }
            's' | 'y' => {
                let (flags, tail) = substitution_flags(after);
                if let Some(file) = flags.find('w').map(|i| &flags[i + 1..]) {
                    out.push(('w', file.trim()));
                    break;
                }
                if flags.contains('e') {
                    // The pattern space, once substituted, is run: what is known of it is
                    // the replacement (all of it for `s/.*/COMMAND/e`).
                    out.push(('e', replacement(after)));
                }
                rest = tail;
            }
            _ => rest = after.split_once(';').map_or("", |(_, t)| t),
        }
    }
    out
}

/// Skips a sed address (`1`, `$`, `/re/`, `\%re%`, `1,5`, `1~2`, `!`).
fn skip_address(mut s: &str) -> &str {
    for _ in 0..4 {
        s = s.trim_start_matches(|c: char| {
            c.is_ascii_digit() || matches!(c, '$' | ',' | '~' | '!' | '+' | ' ')
        });
        if let Some(re) = s.strip_prefix('/') {
            s = re.split_once('/').map_or("", |(_, t)| t);
        } else if let Some(re) = s.strip_prefix('\\') {
            let mut chars = re.chars();
            let Some(delim) = chars.next() else { return "" };
            s = chars.as_str().split_once(delim).map_or("", |(_, t)| t);
        } else {
            break;
        }
    }
    s
}

/// `s/a/b/FLAGS` → `b`, as written (escapes of the delimiter kept).
fn replacement(after: &str) -> &str {
    let mut chars = after.char_indices();
    let Some((_, delim)) = chars.next() else {
        return "";
    };
    let mut start = None;
    let mut escaped = false;
    for (i, c) in chars {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == delim {
            match start {
                None => start = Some(i + c.len_utf8()),
                Some(s) => return after.get(s..i).unwrap_or(""),
            }
        }
    }
    ""
}

/// `s/a/b/FLAGS;rest` → (FLAGS, rest).
fn substitution_flags(after: &str) -> (&str, &str) {
    let mut chars = after.char_indices();
    let Some((_, delim)) = chars.next() else {
        return ("", "");
    };
    let mut seen = 0;
    let mut escaped = false;
    for (i, c) in chars {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == delim {
            seen += 1;
            if seen == 2 {
                let tail = &after[i + c.len_utf8()..];
                return match tail.find(';') {
                    Some(j) if !tail[..j].contains('w') => (&tail[..j], &tail[j + 1..]),
                    _ => (tail, ""),
                };
            }
        }
    }
    ("", "")
}
