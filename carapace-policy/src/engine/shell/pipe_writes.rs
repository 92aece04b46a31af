//! Code that opens a shell for writing and writes its commands into it: Perl's
//! `open(F, "|sh")` / `open(my $fh, '|-', 'sh')` then `print F "CMD"`, Python's
//! `os.popen('sh', 'w').write(CMD)`, Ruby's `IO.popen("sh", "w") { |p| p.puts CMD }`,
//! Node's `spawn('sh').stdin.write(CMD)`. What is written there is the shell's script.

use super::names;

/// Calls that start a program with a pipe to it.
const PIPE_OPENS: &[&str] = &["open", "popen", "Popen", "spawn", "exec("];

/// Calls and statements that write to a handle or a process's input.
const WRITES: &[&str] = &[
    "print ",
    "print(",
    "print{",
    "printf ",
    "printf(",
    "say ",
    "syswrite",
    ".write(",
    ".puts",
    ".print(",
    ".printf(",
    ".communicate(",
    "input=",
    ".stdin.write(",
    ".end(",
    "<<",
];

/// Whether `code` starts a shell with a pipe it writes to: a string literal whose first
/// word (after Perl's `|`, and past `env`) is a shell, a call that opens a pipe, and a
/// write somewhere in the code.
pub(super) fn opens_shell_for_writing(code: &str) -> bool {
    if !PIPE_OPENS.iter().any(|o| code.contains(o)) || !WRITES.iter().any(|w| code.contains(w)) {
        return false;
    }
    let mut after_env = false;
    for literal in literals(code) {
        let text = literal.trim_start_matches(['|', ' ']).trim_start();
        let mut words = text.split_whitespace();
        let Some(mut first) = words.next() else {
            continue;
        };
        if names::family(first) == "env" {
            let Some(next) = words.next() else {
                after_env = true;
                continue;
            };
            first = next;
        }
        let shell = names::is_shell(names::family(first));
        if shell && (after_env || literal.starts_with('|') || words.next().is_none()) {
            return true;
        }
        after_env = false;
    }
    false
}

/// Whether the statement that ends in `before` writes the value that follows it.
pub(super) fn written_here(before: &str) -> bool {
    let statement = before.rsplit([';', '\n']).next().unwrap_or(before);
    WRITES.iter().any(|w| statement.contains(w))
}

/// The contents of the code's simple string literals (`'…'`, `"…"`), escapes kept.
fn literals(code: &str) -> impl Iterator<Item = &str> {
    let mut rest = code;
    std::iter::from_fn(move || {
        let start = rest.find(['\'', '"'])?;
        let quote = rest.as_bytes()[start];
        let body = &rest[start + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, b) in body.bytes().enumerate() {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == quote {
                end = Some(i);
                break;
            }
        }
        let end = end?;
        rest = &body[end + 1..];
        Some(&body[..end])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_opened_for_writing() {
        for code in [
            r#"open(F, "|sh"); print F "x";"#,
            r#"open(S, "| bash -s"); print S "x";"#,
            r#"open(my $fh, "|-", "sh") or die; print $fh "x""#,
            r#"open my $s, "|-", "/usr/bin/env", "bash"; print {$s} "x""#,
            "import os; p=os.popen('sh','w'); p.write('x')",
            r#"IO.popen("sh", "w") { |p| p.puts "x" }"#,
            "const p = require('child_process').spawn('bash'); p.stdin.write('x')",
        ] {
            assert!(opens_shell_for_writing(code), "{code}");
        }
        for code in [
            r#"open(F, "|sort"); print F "x";"#,
            r#"open(my $fh, "|-", "gzip -c > out.gz"); print $fh "x""#,
            r#"open(F, "<", "sh.txt"); print <F>;"#,
            "import os; p=os.popen('sort','w'); p.write('x')",
            "print('sh')",
            r#"system("sh", "-c", "make"); print "done""#,
        ] {
            assert!(!opens_shell_for_writing(code), "{code}");
        }
    }

    #[test]
    fn the_written_statement() {
        assert!(written_here("open(F, \"|sh\"); print F "));
        assert!(written_here("p.write("));
        assert!(!written_here("print F 1; system("));
    }
}
