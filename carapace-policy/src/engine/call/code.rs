//! Code a tool runs (`executeCode {code}`, a notebook's `run_cell {source}`), as the shell
//! command line that would run it the same way, so that the shell analysis (interpreters'
//! inline code included) sees it: a notebook cell's `!cmd` lines, `%%bash` cells and
//! `IPython`'s shell aliases are shell; `%%writefile` writes its file; the rest is code for
//! the language's interpreter.
use super::quote;

/// How code of a language runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lang {
    Shell,
    /// `IPython`: Python with shell escapes and magics. Languages not known are taken as
    /// this, the kernel most notebooks and code tools run.
    Python,
    /// Another interpreter, by its command name, that takes code with `-e`.
    Other(&'static str),
}

fn lang(language: &str) -> Lang {
    let lang = language.trim().to_ascii_lowercase();
    let lang = lang.rsplit('/').next().unwrap_or(&lang);
    match lang {
        "bash" | "sh" | "shell" | "zsh" | "dash" | "console" | "terminal" | "system" | "!" => {
            Lang::Shell
        }
        "javascript" | "js" | "node" | "nodejs" | "typescript" | "ts" => Lang::Other("node"),
        "ruby" => Lang::Other("ruby"),
        "perl" => Lang::Other("perl"),
        "php" => Lang::Other("php"),
        "r" => Lang::Other("Rscript"),
        "lua" => Lang::Other("lua"),
        "julia" => Lang::Other("julia"),
        "powershell" | "pwsh" => Lang::Other("pwsh"),
        "deno" => Lang::Other("deno"),
        _ => Lang::Python,
    }
}

/// `IPython`'s default shell aliases: `cat ~/.netrc` in a cell runs `cat` (automagic).
const ALIASES: &[&str] = &[
    "cat", "cp", "ls", "mkdir", "mv", "rm", "rmdir", "less", "more", "man", "ldir", "lf", "lk",
    "lx",
];

/// The shell text that runs `code` written in `language` (a notebook's Python when
/// unknown).
pub(super) fn as_shell(code: &str, language: Option<&str>) -> String {
    let first = code.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let first = first.trim();
    // A cell magic makes the whole cell another language: `%%bash`, `%%script sh`.
    if let Some(magic) = first.strip_prefix("%%") {
        let body = code.split_once('\n').map_or("", |(_, b)| b);
        let mut words = magic.split_whitespace();
        let name = words.next().unwrap_or("");
        return match name {
            "writefile" | "file" => {
                let (append, path) = match words.next() {
                    Some("-a" | "--append") => (true, words.next().unwrap_or("")),
                    p => (false, p.unwrap_or("")),
                };
                let redirect = if append { ">>" } else { ">" };
                // IPython expands `~` in the file name.
                let path = match path.strip_prefix("~/") {
                    Some(rest) => format!("~/{}", quote(rest)),
                    None => quote(path),
                };
                format!("printf %s {} {redirect} {path}", quote(body))
            }
            "script" => run_in(body, words.next().unwrap_or("sh")),
            _ => run_in(body, name),
        };
    }
    run_in(code, language.unwrap_or("python"))
}

/// `body` run by `language`'s interpreter, or by the shell.
fn run_in(body: &str, language: &str) -> String {
    match lang(language) {
        Lang::Shell => body.to_owned(),
        Lang::Python => notebook_cell(body),
        Lang::Other(interpreter) => format!("{interpreter} -e {}", quote(body)),
    }
}

/// An `IPython` cell: shell escapes and line magics become shell lines, in order (`%cd`
/// moves the ones after it); what is left is Python.
fn notebook_cell(code: &str) -> String {
    let mut shell = Vec::new();
    let mut python = Vec::new();
    for line in code.lines() {
        match shell_line(line.trim_start()) {
            Some(cmd) => shell.push(cmd),
            None => python.push(line),
        }
    }
    let python = python.join("\n");
    if !python.trim().is_empty() {
        shell.push(format!("python3 -c {}", quote(&python)));
    }
    shell.join("\n")
}

/// The shell command a cell line runs, if it runs one: `!cmd`, `!!cmd`, `x = !cmd`,
/// `%sx cmd`, `%system cmd`, `%cd DIR`, `%run FILE`, `%load FILE`, an alias (`cat FILE`).
fn shell_line(line: &str) -> Option<String> {
    // `files = !ls ~/.ssh` assigns a shell command's output.
    let line = match line.split_once('=') {
        Some((name, rest))
            if !name.trim().is_empty()
                && name
                    .trim()
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && rest.trim_start().starts_with(['!', '%']) =>
        {
            rest.trim_start()
        }
        _ => line,
    };
    if let Some(cmd) = line.strip_prefix('!') {
        return Some(cmd.trim_start_matches('!').to_owned());
    }
    let Some(magic_line) = line.strip_prefix('%') else {
        let (word, rest) = line.split_once(' ')?;
        // `cat = 1` and `ls(x)` are Python.
        let python = rest.trim_start().starts_with(['=', '(', '.', '[', ','])
            || rest.trim_start().starts_with("in ");
        return (ALIASES.contains(&word) && !python).then(|| line.to_owned());
    };
    let (magic, rest) = magic_line
        .split_once(char::is_whitespace)
        .unwrap_or((magic_line, ""));
    let rest = rest.trim();
    Some(match magic {
        "sx" | "system" | "sc" => rest.to_owned(),
        "cd" | "pushd" => format!("cd {rest}"),
        "run" => format!("python3 {rest}"),
        "load" | "pycat" | "less" | "more" => format!("cat {rest}"),
        "env" => match rest.split_once(['=', ' ']) {
            Some((k, v)) => format!("export {k}={}", quote(v.trim())),
            None => return None,
        },
        m if ALIASES.contains(&m) => format!("{m} {rest}"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_split_into_shell_and_python() {
        assert_eq!(as_shell("!cat ~/.netrc", None), "cat ~/.netrc");
        assert_eq!(
            as_shell("x = 1\nfiles = !ls ~/.ssh\nprint(x)", None),
            "ls ~/.ssh\npython3 -c 'x = 1\nprint(x)'"
        );
        assert_eq!(as_shell("%%bash\ncat ~/.netrc\n", None), "cat ~/.netrc\n");
        assert_eq!(
            as_shell("%%writefile -a ~/.bashrc\nexport X=1\n", None),
            "printf %s 'export X=1\n' >> ~/.bashrc"
        );
        assert_eq!(as_shell("cat ~/.netrc", None), "cat ~/.netrc");
        assert_eq!(as_shell("cat = 3", None), "python3 -c 'cat = 3'");
        assert_eq!(as_shell("ls -la", Some("bash")), "ls -la");
        assert_eq!(
            as_shell("console.log(1)", Some("javascript")),
            "node -e 'console.log(1)'"
        );
    }
}
