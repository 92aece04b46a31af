//! Tcl code (`tclsh`, `wish`, `expect`): its words need no quotes, so the string literals
//! the other languages' reading looks for say little. Its commands that reach files or run
//! programs are rewritten as the shell commands with the same effect, and the shell walk
//! reads those: `exec cat F` is `cat F`, `open F w` is `: >> F`, `file delete -force D` is
//! `rm -rf D`, `set f [open F]` is `f=$(cat F)`, `$env(HOME)` is `${HOME}`, `[file join a
//! b]` is `$(echo a/b)`. Braced words may be bodies (`proc`, `if`, `foreach`, `catch`),
//! so each is also read as code; any other command becomes `:` with its words, so that
//! the substitutions in them are still walked and nothing else happens.

/// Deepest nesting of braces and brackets read; deeper code is left to the string reading.
const MAX_DEPTH: usize = 8;
/// Longest code rewritten (inline Tcl is short; a longer script is left to that reading).
const MAX_LEN: usize = 16 * 1024;

/// `code` as a shell script with the effects of its file and program commands.
pub(super) fn as_shell(code: &str) -> String {
    let mut out = String::new();
    if code.len() <= MAX_LEN {
        script(code, 0, &mut out);
    }
    out
}

/// The commands of a script, one shell line each.
fn script(code: &str, depth: usize, out: &mut String) {
    if depth > MAX_DEPTH {
        return;
    }
    for words in commands(code) {
        let line = command(&words, depth, out);
        if !line.is_empty() {
            out.push_str(&line);
            out.push('\n');
        }
    }
}

/// A word as written: braced (`{…}`, literal) or not (quoted or bare, with `$` and `[…]`
/// substitution).
#[derive(Debug)]
enum Word<'a> {
    Braced(&'a str),
    Subst(&'a str),
}

impl Word<'_> {
    fn text(&self) -> &str {
        match self {
            Word::Braced(t) | Word::Subst(t) => t,
        }
    }
}

/// The commands of `code`, split at newlines and `;` outside braces, brackets and quotes;
/// comments dropped.
fn commands(code: &str) -> Vec<Vec<Word<'_>>> {
    let b = code.as_bytes();
    let mut all = Vec::new();
    let mut words = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\r' => i += 1,
            b'\\' if b.get(i + 1) == Some(&b'\n') => i += 2,
            b'\n' | b';' => {
                if !words.is_empty() {
                    all.push(std::mem::take(&mut words));
                }
                i += 1;
            }
            b'#' if words.is_empty() => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'{' => {
                let end = closing(b, i, b'{', b'}');
                words.push(Word::Braced(code.get(i + 1..end).unwrap_or("")));
                i = end + 1;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j = match b[j] {
                        b'\\' => j + 2,
                        b'[' => closing(b, j, b'[', b']') + 1,
                        _ => j + 1,
                    };
                }
                words.push(Word::Subst(code.get(i + 1..j.min(b.len())).unwrap_or("")));
                i = j + 1;
            }
            _ => {
                let mut j = i;
                while j < b.len() && !matches!(b[j], b' ' | b'\t' | b'\r' | b'\n' | b';') {
                    j = match b[j] {
                        b'\\' => j + 2,
                        b'[' => closing(b, j, b'[', b']') + 1,
                        _ => j + 1,
                    };
                }
                let j = j.min(b.len());
                words.push(Word::Subst(code.get(i..j).unwrap_or("")));
                i = j;
            }
        }
    }
    if !words.is_empty() {
        all.push(words);
    }
    all
}

/// Where the bracket opening at `open` closes (the end of the text when it does not).
fn closing(b: &[u8], open: usize, left: u8, right: u8) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            c if c == left => depth += 1,
            c if c == right => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// One command as a shell line (empty when it does nothing the shell walk would see).
fn command(words: &[Word<'_>], depth: usize, out: &mut String) -> String {
    // Braced words may be bodies of code: read each as a script too.
    for w in words {
        if let Word::Braced(body) = w {
            script(body, depth + 1, out);
        }
    }
    let arg = |w: &Word<'_>| shell_word(w, depth);
    let Some(name) = words.first().map(Word::text) else {
        return String::new();
    };
    let rest = &words[1..];
    let args = |from: usize| -> Vec<String> {
        rest.iter()
            .skip(from)
            .filter(|w| !w.text().starts_with('-') || w.text() == "-")
            .map(arg)
            .collect()
    };
    match name.trim_start_matches("::") {
        "exec" => {
            let words: Vec<String> = rest
                .iter()
                .filter(|w| {
                    let t = w.text();
                    !(matches!(t, "&" | "--" | "-ignorestderr" | "-keepnewline") || t.contains('@'))
                })
                .map(|w| redirection(w.text()).unwrap_or_else(|| arg(w)))
                .collect();
            words.join(" ")
        }
        "open" => {
            let Some(target) = rest.first() else {
                return String::new();
            };
            if let Some(pipe) = target.text().strip_prefix('|') {
                return script_line(pipe, depth);
            }
            let mode = rest.get(1).map_or("", Word::text);
            let writes = mode.contains(['w', 'a', '+'])
                || ["WRONLY", "RDWR", "CREAT", "APPEND", "TRUNC"]
                    .iter()
                    .any(|m| mode.contains(m));
            let path = arg(target);
            if writes {
                format!(": >> {path}")
            } else {
                format!("cat {path}")
            }
        }
        // `eval A B…`, `uplevel ?LEVEL? A…`: the words joined are a script.
        "eval" | "uplevel" => {
            let words: Vec<&str> = rest
                .iter()
                .map(Word::text)
                .skip_while(|w| {
                    name.ends_with("uplevel") && (w.starts_with('#') || w.parse::<u32>().is_ok())
                })
                .collect();
            script(&words.join(" "), depth + 1, out);
            String::new()
        }
        "source" => rest
            .last()
            .map_or_else(String::new, |p| format!("cat {}", arg(p))),
        "cd" => rest
            .first()
            .map_or_else(String::new, |p| format!("cd {}", arg(p))),
        "set" | "variable" if rest.len() == 2 => {
            let name = rest[0].text();
            if name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') && !name.is_empty() {
                format!("{name}={}", arg(&rest[1]))
            } else {
                String::new()
            }
        }
        "file" => file(rest, &args),
        "glob" => format!("echo {}", args(0).join(" ")),
        _ => {
            let words: Vec<String> = words.iter().map(arg).collect();
            format!(": {}", words.join(" "))
        }
    }
}

/// `file SUBCOMMAND …`: the subcommands that change or name files.
fn file(rest: &[Word<'_>], args: &dyn Fn(usize) -> Vec<String>) -> String {
    let Some(sub) = rest.first().map(Word::text) else {
        return String::new();
    };
    let ops = args(1);
    match sub {
        "delete" => format!("rm -rf -- {}", ops.join(" ")),
        "copy" => format!("cp -r -- {}", ops.join(" ")),
        "rename" => format!("mv -- {}", ops.join(" ")),
        "mkdir" => format!("mkdir -p -- {}", ops.join(" ")),
        "link" => match ops.as_slice() {
            [link, target] => format!("ln -s -- {target} {link}"),
            _ => String::new(),
        },
        "join" => format!("echo {}", ops.join("/")),
        "normalize" | "nativename" | "dirname" | "tail" | "rootname" => {
            format!("echo {}", ops.join(" "))
        }
        _ => format!(": {}", ops.join(" ")),
    }
}

/// An `exec` pipe or redirection word (`|`, `>`, `>>`, `2>`, `<`, `>/tmp/f`) as the
/// shell's, its file quoted.
fn redirection(text: &str) -> Option<String> {
    if matches!(text, "|" | "|&") {
        return Some(text.to_owned());
    }
    let op_len = ["2>>", "2>", ">>", ">", "<"]
        .iter()
        .find(|op| text.starts_with(*op))?
        .len();
    let (op, file) = text.split_at(op_len);
    if file.is_empty() {
        return Some(op.to_owned());
    }
    Some(format!("{op}{}", shell_word(&Word::Subst(file), MAX_DEPTH)))
}

/// A line of Tcl words (an `open "|cmd …"` pipe) as a shell line.
fn script_line(text: &str, depth: usize) -> String {
    let mut out = String::new();
    let words = commands(text).into_iter().next().unwrap_or_default();
    let words: Vec<String> = words.iter().map(|w| shell_word(w, depth)).collect();
    out.push_str(&words.join(" "));
    out
}

/// A Tcl word as one shell word with the same value: braced text single-quoted; other text
/// double-quoted with its variables as the shell's (`$env(HOME)` → `${HOME}`) and its
/// bracketed commands as `$(…)`. A leading `~` stays outside the quotes (Tcl 8 expands it
/// in file names, as the shell does).
fn shell_word(word: &Word<'_>, depth: usize) -> String {
    let text = word.text();
    let (tilde, body) = match text.strip_prefix('~') {
        Some(rest) => {
            let user_end = rest.find('/').unwrap_or(rest.len());
            let user = &rest[..user_end];
            if user.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                (format!("~{user}"), &rest[user_end..])
            } else {
                (String::new(), text)
            }
        }
        None => (String::new(), text),
    };
    let mut out = tilde;
    match word {
        Word::Braced(_) => {
            out.push('\'');
            out.push_str(&body.replace('\'', "'\\''"));
            out.push('\'');
        }
        Word::Subst(_) => {
            out.push('"');
            substituted(body, depth, &mut out);
            out.push('"');
        }
    }
    out
}

/// The text of a substituting word, for inside a shell double-quoted string.
fn substituted(text: &str, depth: usize, out: &mut String) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'[' => {
                let end = closing(b, i, b'[', b']');
                let inner = text.get(i + 1..end).unwrap_or("");
                let mut sub = String::new();
                if depth < MAX_DEPTH {
                    script(inner, depth + 1, &mut sub);
                }
                out.push_str("$(");
                out.push_str(sub.trim_end());
                out.push(')');
                i = end + 1;
            }
            b'$' => {
                let rest = text.get(i + 1..).unwrap_or("");
                let rest = rest.strip_prefix("::").unwrap_or(rest);
                let skipped = text.len() - i - 1 - rest.len();
                if let Some(name) = rest.strip_prefix("env(").and_then(|r| r.split_once(')')) {
                    out.push_str("${");
                    out.push_str(name.0);
                    out.push('}');
                    i += 1 + skipped + 4 + name.0.len() + 1;
                } else {
                    out.push('$');
                    i += 1 + skipped;
                }
            }
            b'\\' => {
                if let Some(&c) = b.get(i + 1) {
                    if matches!(c, b'"' | b'\\' | b'$' | b'`') {
                        out.push('\\');
                    }
                    out.push(char::from(c));
                }
                i += 2;
            }
            b'"' | b'`' => {
                out.push('\\');
                out.push(char::from(b[i]));
                i += 1;
            }
            _ => {
                let next = text[i..]
                    .find(['[', '$', '\\', '"', '`'])
                    .map_or(text.len(), |n| i + n);
                out.push_str(&text[i..next]);
                i = next;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::as_shell;

    #[test]
    fn file_and_program_commands_become_the_shell_commands() {
        let cases = [
            ("exec cat /x/.netrc", "\"cat\" \"/x/.netrc\""),
            ("file delete -force ~/.ssh", "rm -rf -- ~\"/.ssh\""),
            (
                "set f [open $env(HOME)/.netrc r]",
                "f=\"$(cat \"${HOME}/.netrc\")\"",
            ),
            ("open {/x/a b} a", ": >> '/x/a b'"),
            ("puts [file join a b]", ": \"puts\" \"$(echo \"a\"/\"b\")\""),
        ];
        for (tcl, want) in cases {
            // A braced word is also read as a body first (`: "/x/a" "b"`): the last line
            // is the command's own.
            assert_eq!(as_shell(tcl).lines().last(), Some(want), "{tcl}");
        }
        assert_eq!(
            as_shell("proc f {} { exec rm -rf /x }\nf").lines().next(),
            Some("\"rm\" \"-rf\" \"/x\"")
        );
    }
}
