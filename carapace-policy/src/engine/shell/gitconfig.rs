//! Where `git push origin` goes: the remote's URL from the repository's own config, so that
//! host rules see the host rather than a network operation to nowhere. Read from the real
//! filesystem (only when the context has a host), bounded in size, and best effort: a
//! remote that cannot be found stays a network operation without a host.
use std::path::{Path, PathBuf};

use crate::engine::operation::Context;
use crate::host::{FileKind, Host};

/// Configs larger than this are not read (a repository's config is a few hundred bytes).
const MAX_CONFIG: u64 = 256 * 1024;
/// Directories walked up from the working directory looking for `.git`.
const MAX_UP: usize = 64;

/// The URL `git push`/`fetch`/`pull` (`push` tells which) would use for `remote` — a name, or
/// `None` for the current branch's default — in the repository containing `cwd`.
pub(super) fn remote_url(
    host: &dyn Host,
    cwd: &str,
    remote: Option<&str>,
    push: bool,
) -> Option<String> {
    let git_dir = find_git_dir(host, Path::new(cwd))?;
    let common = read_small(host, &git_dir.join("commondir"))
        .map_or_else(|| git_dir.clone(), |c| git_dir.join(c.trim()));
    let config = Config::parse(&read_small(host, &common.join("config"))?);
    let name = if let Some(r) = remote {
        r.to_owned()
    } else {
        let head = read_small(host, &git_dir.join("HEAD")).unwrap_or_default();
        let branch = head.trim().strip_prefix("ref: refs/heads/").unwrap_or("");
        let branch_key = |k: &str| config.get(&format!("branch.{branch}.{k}"));
        (push.then(|| branch_key("pushremote")).flatten())
            .or_else(|| push.then(|| config.get("remote.pushdefault")).flatten())
            .or_else(|| branch_key("remote"))
            .unwrap_or("origin")
            .to_owned()
    };
    let url = (push
        .then(|| config.get(&format!("remote.{name}.pushurl")))
        .flatten())
    .or_else(|| config.get(&format!("remote.{name}.url")))?;
    Some(config.rewrite(url, push))
}

fn find_git_dir(host: &dyn Host, cwd: &Path) -> Option<PathBuf> {
    let mut dir = Some(cwd);
    for _ in 0..MAX_UP {
        let d = dir?;
        let dot_git = d.join(".git");
        if host.stat(&dot_git).is_some_and(|f| f.kind == FileKind::Dir) {
            return Some(dot_git);
        }
        // A worktree or submodule: `.git` is a file naming the real git dir.
        if let Some(text) = read_small(host, &dot_git) {
            let target = text.trim().strip_prefix("gitdir:")?.trim().to_owned();
            return Some(d.join(target));
        }
        dir = d.parent();
    }
    None
}

fn read_small(host: &dyn Host, path: &Path) -> Option<String> {
    let file = host.stat(path)?;
    if file.kind != FileKind::File || file.len > MAX_CONFIG {
        return None;
    }
    host.read_to_string(path).ok()
}

/// Just enough of git's config format: `[section "sub"]` headers, `key = value` lines,
/// comments, quoted values. Keys are `section.sub.key`, section and key lowercased.
struct Config {
    entries: Vec<(String, String)>,
}

impl Config {
    fn parse(text: &str) -> Self {
        let mut entries = Vec::new();
        let mut section = String::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with(['#', ';']) {
                continue;
            }
            let mut line = line;
            if let Some(header) = line.strip_prefix('[') {
                let (header, rest) = header.split_once(']').unwrap_or((header, ""));
                section = match header.split_once(char::is_whitespace) {
                    Some((name, sub)) => {
                        format!(
                            "{}.{}",
                            name.to_ascii_lowercase(),
                            sub.trim().trim_matches('"')
                        )
                    }
                    None => header.to_ascii_lowercase(),
                };
                // `[core] hooksPath = …`: a key may follow the header on its line.
                line = rest.trim();
                if line.is_empty() || line.starts_with(['#', ';']) {
                    continue;
                }
            }
            let (key, value) = line.split_once('=').unwrap_or((line, "true"));
            entries.push((
                format!("{section}.{}", key.trim().to_ascii_lowercase()),
                unquote(value.trim()),
            ));
        }
        Self { entries }
    }

    /// The last value of `key` (git's rule for single-valued keys).
    fn get(&self, key: &str) -> Option<&str> {
        let (section_key, name) = key.rsplit_once('.')?;
        let key = format!("{section_key}.{}", name.to_ascii_lowercase());
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(&key))
            .map(|(_, v)| v.as_str())
    }

    /// `url.BASE.insteadOf` / `pushInsteadOf`: the longest matching prefix is replaced.
    fn rewrite(&self, url: &str, push: bool) -> String {
        let mut best: Option<(&str, &str)> = None;
        for (k, v) in &self.entries {
            let Some(rest) = k.strip_prefix("url.") else {
                continue;
            };
            let (base, kind) = rest.rsplit_once('.').unwrap_or((rest, ""));
            let applies = kind == "insteadof" || (push && kind == "pushinsteadof");
            if applies && url.starts_with(v.as_str()) && best.is_none_or(|(_, b)| v.len() > b.len())
            {
                best = Some((base, v));
            }
        }
        match best {
            Some((base, prefix)) => format!("{base}{}", &url[prefix.len()..]),
            None => url.to_owned(),
        }
    }
}

fn unquote(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut quoted = false;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => out.extend(chars.next()),
            '#' | ';' if !quoted => break,
            c => out.push(c),
        }
    }
    out.trim_end().to_owned()
}

/// Config git is given for one command other than by `-c`, as `KEY=VALUE` the way `-c`
/// takes it: `GIT_CONFIG_COUNT` with `GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`,
/// `GIT_CONFIG_PARAMETERS` (how `git -c` hands its config to the git it runs), and
/// `--config-env=KEY=VAR` (the value is VAR's; unknown, it is empty, so that a rule on the
/// key alone still applies). Nothing is allocated when none of them is set.
pub(super) fn given(ctx: &Context, config_env: &[&str]) -> Vec<String> {
    if config_env.is_empty() && !names_git_config(ctx) {
        return Vec::new();
    }
    given_looked_up(ctx, config_env)
}

/// [`given`] by looking each variable up.
fn given_looked_up(ctx: &Context, config_env: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(count) = ctx.var("GIT_CONFIG_COUNT") {
        // git reads at most COUNT pairs; an unreadable count (`$n`) reads what is there.
        let count = count.trim().parse::<usize>().unwrap_or(MAX_ENV_PAIRS);
        for i in 0..count.min(MAX_ENV_PAIRS) {
            let Some(key) = ctx.var(&format!("GIT_CONFIG_KEY_{i}")) else {
                continue;
            };
            let value = ctx.var(&format!("GIT_CONFIG_VALUE_{i}")).unwrap_or("");
            out.push(format!("{key}={value}"));
        }
    }
    if let Some(params) = ctx.var("GIT_CONFIG_PARAMETERS") {
        out.extend(parameters(params));
    }
    for spec in config_env {
        if let Some((key, var)) = spec.rsplit_once('=') {
            out.push(format!("{key}={}", ctx.var(var).unwrap_or("")));
        }
    }
    out
}

/// Whether a variable of `ctx` could be one of git's `GIT_CONFIG*` (named so, or a nameref
/// by that name): when none is, every `GIT_CONFIG*` lookup finds nothing, and one pass over
/// the variables replaces the two each lookup makes (its nameref, then its value) for the
/// six names git reads, on every git command.
fn names_git_config(ctx: &Context) -> bool {
    ctx.env.iter().any(|(k, _)| {
        k.strip_prefix("declare -n ")
            .unwrap_or(k)
            .starts_with("GIT_CONFIG")
    })
}

/// Pairs read from `GIT_CONFIG_COUNT` at most (git's own limit is `INT_MAX`; a line names a
/// handful).
const MAX_ENV_PAIRS: usize = 64;

/// `GIT_CONFIG_PARAMETERS`: shell-quoted entries, `'key'='value'` (or, from older gits,
/// `'key=value'`), separated by spaces.
fn parameters(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut entry = String::new();
    let mut quoted = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => quoted = !quoted,
            '\\' if !quoted => entry.extend(chars.next()),
            c if c.is_whitespace() && !quoted => {
                if !entry.is_empty() {
                    out.push(std::mem::take(&mut entry));
                }
            }
            c => entry.push(c),
        }
    }
    if !entry.is_empty() {
        out.push(entry);
    }
    out
}

const CONFIG_FILE_VARS: [&str; 3] = ["GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG"];

/// The config files git reads for one command beyond the repository's own: those the
/// environment names (`GIT_CONFIG_GLOBAL`, `GIT_CONFIG_SYSTEM`, `GIT_CONFIG`) and the
/// `include.path`/`includeIf.*.path` entries of `config` (`-c` and the environment).
pub(super) fn config_files<'a>(
    ctx: &'a Context,
    config: impl Iterator<Item = &'a str>,
) -> Vec<&'a str> {
    let names: &[&str] = if names_git_config(ctx) {
        &CONFIG_FILE_VARS
    } else {
        &[]
    };
    let from_env = names.iter().filter_map(|v| ctx.var(v));
    let included = config.filter_map(|kv| {
        let (key, value) = kv.split_once('=')?;
        let key = key.to_ascii_lowercase();
        let last = key.rsplit_once('.').map(|(_, n)| n);
        (key == "include.path" || (key.starts_with("includeif.") && last == Some("path")))
            .then_some(value)
    });
    from_env
        .chain(included)
        .filter(|p| !p.is_empty() && *p != "/dev/null")
        .collect()
}

/// Every `KEY=VALUE` of a config file's text (for a file git is told to read).
pub(super) fn entries(text: &str) -> Vec<String> {
    Config::parse(text)
        .entries
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// A config file git is told to read, from the real file system (bounded).
pub(super) fn read_file(host: &dyn Host, path: &Path) -> Option<String> {
    read_small(host, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::real::host;

    fn repo(config: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap();
        std::fs::write(dir.path().join(".git/config"), config).unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        dir
    }

    #[test]
    fn finds_the_remote_url_from_any_subdirectory() {
        let r = repo(
            "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@github.com:me/x.git\n\
             [remote \"leak\"]\n\tURL = \"https://paste.example/x\" ; comment\n\
             \tpushurl = https://push.example/x\n[branch \"main\"]\n\tremote = leak\n",
        );
        let cwd = r.path().join("src/deep");
        let cwd = cwd.to_str().unwrap();
        assert_eq!(
            remote_url(&*host(), cwd, Some("origin"), true).as_deref(),
            Some("git@github.com:me/x.git")
        );
        assert_eq!(
            remote_url(&*host(), cwd, Some("leak"), false).as_deref(),
            Some("https://paste.example/x")
        );
        assert_eq!(
            remote_url(&*host(), cwd, Some("leak"), true).as_deref(),
            Some("https://push.example/x")
        );
        // No remote named: the branch's.
        assert_eq!(
            remote_url(&*host(), cwd, None, false).as_deref(),
            Some("https://paste.example/x")
        );
        assert_eq!(remote_url(&*host(), cwd, Some("nope"), true), None);
    }

    #[test]
    fn worktrees_and_url_rewrites() {
        let main = repo(
            "[remote \"origin\"]\n\turl = gh:me/x\n[url \"https://evil.example/\"]\n\tinsteadOf = gh:\n",
        );
        let wt_git = main.path().join(".git/worktrees/wt");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        std::fs::write(wt_git.join("HEAD"), "ref: refs/heads/feature\n").unwrap();
        let wt = tempfile::tempdir().unwrap();
        std::fs::write(
            wt.path().join(".git"),
            format!("gitdir: {}\n", wt_git.display()),
        )
        .unwrap();
        assert_eq!(
            remote_url(&*host(), wt.path().to_str().unwrap(), None, true).as_deref(),
            Some("https://evil.example/me/x")
        );
    }

    proptest::proptest! {
        /// Skipping the lookups when no variable is named `GIT_CONFIG*` finds what the
        /// lookups find, namerefs included.
        #[test]
        fn the_git_config_shortcut_finds_what_the_lookups_find(
            vars in proptest::collection::vec((
                proptest::prop_oneof![
                    proptest::strategy::Just("GIT_CONFIG_COUNT"),
                    proptest::strategy::Just("GIT_CONFIG_KEY_0"),
                    proptest::strategy::Just("GIT_CONFIG_VALUE_0"),
                    proptest::strategy::Just("GIT_CONFIG_PARAMETERS"),
                    proptest::strategy::Just("GIT_CONFIG_GLOBAL"),
                    proptest::strategy::Just("GIT_CONFIG"),
                    proptest::strategy::Just("GIT_DIR"),
                    proptest::strategy::Just("PATH"),
                    proptest::strategy::Just("X"),
                    proptest::strategy::Just("declare -n GIT_CONFIG_COUNT"),
                    proptest::strategy::Just("declare -n GIT_CONFIG_GLOBAL"),
                    proptest::strategy::Just("declare -n X"),
                ],
                proptest::prop_oneof![
                    proptest::strategy::Just("1"),
                    proptest::strategy::Just("core.pager"),
                    proptest::strategy::Just("less"),
                    proptest::strategy::Just("/tmp/c"),
                    proptest::strategy::Just("X"),
                    proptest::strategy::Just("HOME"),
                    proptest::strategy::Just("GIT_CONFIG_GLOBAL"),
                    proptest::strategy::Just("'a'='b'"),
                ],
            ), 0..6),
        ) {
            let ctx = Context {
                env: vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                ..Context::default()
            };
            proptest::prop_assert_eq!(given(&ctx, &[]), given_looked_up(&ctx, &[]));
            let looked_up: Vec<&str> = CONFIG_FILE_VARS
                .iter()
                .filter_map(|v| ctx.var(v))
                .filter(|p| !p.is_empty() && *p != "/dev/null")
                .collect();
            proptest::prop_assert_eq!(config_files(&ctx, std::iter::empty()), looked_up);
        }

        #[test]
        fn any_config_text_parses(text in "\\PC{0,400}") {
            let c = Config::parse(&text);
            let _ = c.get("remote.origin.url");
            let _ = c.rewrite("gh:x", true);
        }
    }
}
