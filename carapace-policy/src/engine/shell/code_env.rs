//! Environment variables that inline code sets for the programs it starts: Python's
//! `os.environ['GIT_SSH_COMMAND'] = '…'`, `subprocess.run(…, env={'PAGER': '…'})` and
//! `dict(os.environ, GIT_CONFIG_COUNT='1')`, `os.putenv`, Node's `process.env.X = '…'` and
//! `{env: {X: '…'}}`, Ruby's `ENV['X'] = '…'` and `system({'X' => '…'}, …)`, Perl's
//! `$ENV{X} = '…'`, PHP's `putenv('X=…')`, R's `Sys.setenv(X = '…')`. The value of a variable
//! a program runs (`GIT_SSH_COMMAND`, `PAGER`, `BASH_ENV`, `LD_PRELOAD`…) is the command it
//! makes run, and git's config variables are the config git gets: the caller reads them as
//! the shell's own assignments.
//!
//! The reading is textual and language-blind: a watched name, then an assignment mark (`=`,
//! `:`, `=>`, or a `,` between a call's two arguments), then a string or a bare word. A name
//! not watched is never read: everyday code (`NODE_ENV`, `PATH`) costs one scan of its
//! capitalised words.

use super::opt_commands::acts_on_variable;

/// Most assignments one piece of code is read for.
const MAX_ASSIGNMENTS: usize = 32;

/// The `(name, value)` pairs `code` gives the environment of the programs it starts, for
/// the variables a program acts on ([`acts_on_variable`]), in the order written.
pub(super) fn assignments(code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() && out.len() < MAX_ASSIGNMENTS {
        // Every watched name starts with a capital: other words are skipped unread.
        if !bytes[i].is_ascii_uppercase() || (i > 0 && is_name_byte(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_name_byte(bytes[i]) {
            i += 1;
        }
        let name = &code[start..i];
        if !acts_on_variable(name) {
            continue;
        }
        if let Some(value) = value_after(code, start, i) {
            out.push((name.to_owned(), value));
        }
    }
    out
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The value assigned to the name at `start..end` of `code`, when an assignment follows it.
fn value_after(code: &str, start: usize, end: usize) -> Option<String> {
    let bytes = code.as_bytes();
    let quote_before = start
        .checked_sub(1)
        .map(|i| bytes[i])
        .filter(|b| matches!(b, b'\'' | b'"'));
    // `putenv("NAME=VALUE")`, `Sys.setenv("NAME=VALUE")`: the rest of the string.
    if let (Some(q), Some(b'=')) = (quote_before, bytes.get(end)) {
        let rest = &code[end + 1..];
        return rest
            .find(char::from(q))
            .map(|close| rest[..close].to_owned());
    }
    let mut i = end;
    // The name's closing quote and bracket (`['NAME']`, `{NAME}`, `"NAME"`).
    while matches!(bytes.get(i), Some(b'\'' | b'"' | b']' | b'}' | b')')) {
        i += 1;
    }
    i = skip_blanks(bytes, i);
    match (bytes.get(i), bytes.get(i + 1)) {
        (Some(b'='), Some(b'>')) => i += 2,
        (Some(b'='), Some(b'=')) => return None,
        (Some(b'=' | b':' | b','), _) => i += 1,
        _ => return None,
    }
    i = skip_blanks(bytes, i);
    string_at(code, i)
}

fn skip_blanks(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

/// The string literal (`'…'`, `"…"`, backslash escapes undone) or bare word (`1`,
/// `true`) at `at`.
fn string_at(code: &str, at: usize) -> Option<String> {
    let rest = code.get(at..)?;
    let mut chars = rest.chars();
    let first = chars.next()?;
    if matches!(first, '\'' | '"' | '`') {
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.push(chars.next()?),
                c if c == first => return Some(value),
                c => value.push(c),
            }
        }
        return None;
    }
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-'))
        .collect();
    (!word.is_empty()).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::assignments;

    fn read(code: &str) -> Vec<(String, String)> {
        assignments(code)
    }

    fn pair(name: &str, value: &str) -> (String, String) {
        (name.to_owned(), value.to_owned())
    }

    #[test]
    fn each_language_s_spelling_is_read() {
        let ssh = pair("GIT_SSH_COMMAND", "cat ~/.ssh/id_rsa");
        for code in [
            "import os;os.environ['GIT_SSH_COMMAND']='cat ~/.ssh/id_rsa';os.system('git fetch')",
            "os.environ[\"GIT_SSH_COMMAND\"] = \"cat ~/.ssh/id_rsa\"",
            "subprocess.run('git fetch', shell=True, env={'GIT_SSH_COMMAND': 'cat ~/.ssh/id_rsa'})",
            "e = dict(os.environ, GIT_SSH_COMMAND='cat ~/.ssh/id_rsa')",
            "os.putenv('GIT_SSH_COMMAND', 'cat ~/.ssh/id_rsa')",
            "os.environ.setdefault('GIT_SSH_COMMAND', 'cat ~/.ssh/id_rsa')",
            "process.env.GIT_SSH_COMMAND='cat ~/.ssh/id_rsa'",
            "execSync('git fetch', {env: {GIT_SSH_COMMAND: 'cat ~/.ssh/id_rsa'}})",
            "ENV['GIT_SSH_COMMAND'] = 'cat ~/.ssh/id_rsa'",
            "system({'GIT_SSH_COMMAND' => 'cat ~/.ssh/id_rsa'}, 'git fetch')",
            "$ENV{GIT_SSH_COMMAND}='cat ~/.ssh/id_rsa'; system('git fetch')",
            "putenv(\"GIT_SSH_COMMAND=cat ~/.ssh/id_rsa\"); system(\"git fetch\");",
            "Sys.setenv(GIT_SSH_COMMAND = 'cat ~/.ssh/id_rsa')",
        ] {
            assert_eq!(read(code), vec![ssh.clone()], "{code}");
        }
        assert_eq!(
            read("env={'GIT_CONFIG_COUNT': 1, 'GIT_CONFIG_KEY_0': 'core.hooksPath', 'GIT_CONFIG_VALUE_0': '/tmp/h'}"),
            vec![
                pair("GIT_CONFIG_COUNT", "1"),
                pair("GIT_CONFIG_KEY_0", "core.hooksPath"),
                pair("GIT_CONFIG_VALUE_0", "/tmp/h"),
            ]
        );
    }

    #[test]
    fn reads_and_other_variables_are_not_assignments() {
        for code in [
            "print(os.environ.get('PAGER'))",
            "if os.environ['EDITOR'] == 'vim': pass",
            "os.environ['NODE_ENV'] = 'test'",
            "process.env.PATH = '/usr/bin'",
            "print('GIT_SSH_COMMAND')",
            "open('/tmp/x').read()",
        ] {
            assert!(read(code).is_empty(), "{code}: {:?}", read(code));
        }
    }
}
