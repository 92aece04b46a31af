//! The home directory as inline code spells it rather than writes it out:
//! `os.environ["HOME"]`, `Path.home()`, `os.homedir()`, `process.env.HOME`, `ENV["HOME"]`,
//! `$ENV{HOME}`, `Dir.home`, `os.getenv("HOME")`, `pwd.getpwuid(…).pw_dir`,
//! `os.userInfo().homedir`, `$_SERVER["HOME"]`, `ENVIRON["HOME"]`, `Deno.env.get("HOME")`,
//! … `code_eval` builds paths from them; a name joined after them that is not known
//! leaves the rest unknown, spelled `**`.

use std::sync::LazyLock;

use regex::Regex;

/// Expressions for the user's home directory, in the languages agents write one-liners in.
static HOME_EXPR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"(?:os\.)?environ\s*\[\s*['"]HOME['"]\s*\]"#,
        r#"|(?:os\.)?environ\.get\(\s*['"]HOME['"][^)]*\)"#,
        // Python's and Lua's `os.getenv`, R's `Sys.getenv`, C's and PHP's `getenv`.
        r#"|(?:os\.|Sys\.)?getenv\(\s*['"]HOME['"][^)]*\)"#,
        // Through the module under any name (`import pathlib as pl; pl.Path.home()`).
        r"|(?:[A-Za-z_]\w*\.)?Path\.home\(\)",
        r"|(?:[A-Za-z_]\w*\.)?homedir\(\)",
        r"|process\.env\.HOME\b",
        r#"|process\.env\[\s*['"]HOME['"]\s*\]"#,
        r#"|ENV\s*\[\s*['"]HOME['"]\s*\]"#,
        r#"|ENV\.fetch\(\s*['"]HOME['"]\s*\)"#,
        r#"|\$ENV\{\s*['"]?HOME['"]?\s*\}"#,
        r"|Dir\.home\b",
        r#"|(?:os\.path\.)?expanduser\(\s*['"]~['"]\s*\)"#,
        r"|(?:pwd\.)?getpw(?:uid|nam)\((?:[^()]|\([^()]*\))*\)\.pw_dir\b",
        r"|(?:os\.)?userInfo\(\)\.homedir\b",
        r#"|Deno\.env\.get\(\s*['"]HOME['"]\s*\)"#,
        r"|Deno\.env\.toObject\(\)\.HOME\b",
        r"|Bun\.env\.HOME\b",
        r#"|Bun\.env\[\s*['"]HOME['"]\s*\]"#,
        r#"|\$_(?:SERVER|ENV)\s*\[\s*['"]HOME['"]\s*\]"#,
        r#"|posix_getpw(?:uid|nam)\((?:[^()]|\([^()]*\))*\)\s*\[\s*['"]dir['"]\s*\]"#,
        r"|Etc\.getpw(?:uid|nam)(?:\((?:[^()]|\([^()]*\))*\))?\.dir\b",
        r#"|ENVIRON\s*\[\s*['"]HOME['"]\s*\]"#,
        r#"|File\.expand_path\(\s*['"]~['"]\s*\)"#,
        r"|\$HOME\b",
        r"|\(\s*getpw(?:uid|nam)\((?:[^()]|\([^()]*\))*\)\s*\)\s*\[\s*7\s*\]",
        r"|(?:pwd\.)?getpw(?:uid|nam)\((?:[^()]|\([^()]*\))*\)\s*\[\s*5\s*\]",
        r"|File::HomeDir->my_home\b",
    ))
    .expect("a valid regex")
});

/// The user's name, from which code may build the home directory (`"/home/" +
/// getpass.getuser()`): the value is not known here, so a path built with it is one whose
/// target could not be determined.
static USER_EXPR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?:getpass\.)?getuser\(\)",
        r"|(?:os\.)?getlogin\(\)",
        r#"|(?:os\.)?environ\s*\[\s*['"](?:USER|LOGNAME)['"]\s*\]"#,
        r#"|(?:os\.|Sys\.)?getenv\(\s*['"](?:USER|LOGNAME)['"][^)]*\)"#,
        r"|process\.env\.(?:USER|LOGNAME)\b",
        r"|(?:os\.)?userInfo\(\)\.username\b",
        r#"|ENV\s*\[\s*['"](?:USER|LOGNAME)['"]\s*\]"#,
        r#"|\$ENV\{\s*['"]?(?:USER|LOGNAME)['"]?\s*\}"#,
        r"|Etc\.getlogin\b",
        r"|get_current_user\(\)",
        r"|\$USER\b",
    ))
    .expect("a valid regex")
});

/// Where the user's name is spelled in `code`, as (start, end), in order.
pub(super) fn user_sources(code: &str) -> Vec<(usize, usize)> {
    USER_EXPR
        .find_iter(code)
        .take(1024)
        .map(|m| (m.start(), m.end()))
        .collect()
}

/// Where the home directory's spellings stand in `code`, as (start, end), in order.
pub(super) fn home_sources(code: &str) -> Vec<(usize, usize)> {
    HOME_EXPR
        .find_iter(code)
        .take(1024)
        .map(|m| (m.start(), m.end()))
        .collect()
}

#[cfg(test)]
mod tests {

    /// The paths built from the home directory (not the bare directory), with `**` for
    /// an unknown rest.
    fn paths(code: &str) -> Vec<String> {
        super::super::code_eval::sites(code, &[])
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.value)
            .filter(|v| v.home && v.text != "~")
            .map(|v| {
                if v.complete {
                    v.text
                } else {
                    format!("{}/**", v.text.trim_end_matches('/'))
                }
            })
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
