//! MCP tools that wrap a command-line program (`mcp__git__git_push {remote, branch,
//! force}`, `mcp__docker__docker_run {image, privileged}`, `mcp__k8s__kubectl_get
//! {resource, name}`) are judged as the command line they run, so that every rule written
//! for the program's command line (the destructive-git pack, privileged containers, secrets
//! read with `kubectl`) covers the tool too. The line is rebuilt from the tool's name and
//! its fields; shell analysis then reads it as it reads any other.
//!
//! The fields of such servers follow the program's own options: a true boolean is the
//! option of its name (`forceWithLease` → `--force-with-lease`), a named string is an
//! option with a value, the repository's directory is where the line runs, and a few
//! fields name operands or a mode (`{mode: hard}` of `git_reset` is `--hard`, `{mode:
//! clear}` of `git_stash` is the `clear` subcommand). A field this reading gets wrong makes
//! a line no rule names; it cannot hide a field that one names.
use std::fmt::Write as _;

use serde_json::Value;

use super::{fields, quote, shell};
use crate::engine::operation::{Context, Extracted};

/// Programs whose command lines rules are written for, as a tool's name spells them.
const PROGRAMS: &[&str] = &[
    "git",
    "docker",
    "podman",
    "nerdctl",
    "kubectl",
    "helm",
    "gh",
    "systemctl",
    "crontab",
    "npm",
    "pip",
    "terraform",
    "aws",
    "gcloud",
    "az",
];

/// Servers that name version control without naming the program (`mcp__vcs__push`,
/// `mcp__source_control__reset`, `mcp__scm__…`): git's, as the program agents meet under
/// those names; their tools are read as git's. Matched on the server's words, joined.
const VCS_SERVERS: &[&str] = &[
    "vcs",
    "scm",
    "sourcecontrol",
    "versioncontrol",
    "revisioncontrol",
    "repo",
    "repos",
    "repository",
    "gitops",
];

/// Whether a server's name (lower case) names version control: `git`, or one of
/// [`VCS_SERVERS`] as a word or as all its words joined (`source_control`).
pub(super) fn names_vcs(server: &str) -> bool {
    vcs_words(&fields::words(server))
}

/// [`names_vcs`] of a server name already split into words.
pub(super) fn vcs_words(words: &[&str]) -> bool {
    words.iter().any(|w| *w == "git" || VCS_SERVERS.contains(w))
        || VCS_SERVERS.contains(&words.concat().as_str())
}

/// Fields naming the directory the program runs in (a repository's, most often).
const DIR_KEYS: &[&str] = &[
    "path",
    "repo_path",
    "repository_path",
    "repo_dir",
    "repository",
    "repo",
    "cwd",
    "directory",
    "dir",
    "working_dir",
    "working_directory",
    "workdir",
    "project_path",
];

/// Fields naming operands, in the order the programs take them (`git push REMOTE BRANCH`).
const OPERAND_KEYS: &[&str] = &[
    "remote",
    "repository_url",
    "url",
    "source",
    "target",
    "branch",
    "branch_name",
    "refspec",
    "refspecs",
    "ref",
    "commit",
    "revision",
    "name",
    "image",
    "resource",
    "unit",
    "service",
    "package",
    "packages",
    "files",
    "file",
    "paths",
    "pathspec",
];

/// Fields holding the program's own argument words, passed to it as they are
/// (`mcp__git__git {args: ["push", "--force"]}`).
const ARGV_KEYS: &[&str] = &[
    "args",
    "arguments",
    "argv",
    "git_args",
    "command_args",
    "options",
    "flags",
    "extra_args",
    "extra_flags",
    "extra_options",
];

/// Fields whose value is a mode of the subcommand.
const MODE_KEYS: &[&str] = &["mode", "operation", "action", "op"];

/// Fields holding the subcommand and what follows it, passed on first (`mcp__git__run
/// {command: "push --force", args: […]}`).
const LEADING_KEYS: &[&str] = &["command", "cmd", "subcommand", "git_command"];

/// Words of a server's tool name that say it runs the server's program, not which
/// subcommand (`mcp__git__execute`, `mcp__git__run_command`).
const VERBS: &[&str] = &[
    "run", "exec", "execute", "command", "cmd", "invoke", "call", "tool",
];

/// Modes that are options of the subcommand rather than subcommands of their own.
const MODE_OPTIONS: &[(&str, &str, &[&str])] = &[
    ("git", "reset", &["soft", "mixed", "hard", "merge", "keep"]),
    ("git", "branch", &["delete", "move", "copy", "list"]),
    ("git", "tag", &["delete", "list"]),
    ("git", "worktree", &[]),
    ("git", "clean", &["force", "dry-run"]),
    ("git", "push", &["delete", "mirror", "force", "all", "tags"]),
];

/// Boolean fields whose option has no long name the field could spell.
const SHORT_OPTIONS: &[(&str, &str, &str, &str)] = &[
    ("git", "clean", "directories", "-d"),
    ("git", "clean", "ignored", "-x"),
    ("git", "clean", "ignored_only", "-X"),
    ("git", "branch", "force_delete", "-D"),
];

/// Judges `tool` as the command line it wraps, when its name is of a known program.
pub(super) fn extract(tool: &str, input: &Value, ctx: &Context, out: &mut Extracted) {
    if let Some(line) = command_line(tool, input) {
        shell::extract(&line, ctx, out);
    }
}

/// `cd DIR && PROGRAM SUBCOMMAND OPTIONS OPERANDS` for a tool of a known program.
fn command_line(tool: &str, input: &Value) -> Option<String> {
    let (server, local) = tool.strip_prefix("mcp__")?.split_once("__")?;
    let words: Vec<String> = fields::words(local)
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let is_program = |w: &str| PROGRAMS.contains(&w);
    // `git_push` names its program; `mcp__git__push` leaves it to the server's name.
    let (program, sub) = if let Some(at) = words.iter().position(|w| is_program(w)) {
        (words[at].clone(), words[at + 1..].to_vec())
    } else {
        let server = server.to_ascii_lowercase();
        let server_words = fields::words(&server);
        let program = match server_words.iter().find(|w| is_program(w)) {
            Some(p) => (*p).to_owned(),
            None if names_vcs(&server) => "git".to_owned(),
            None => return None,
        };
        // `mcp__git__execute_command`: the tool's name says it runs the program, not how.
        let sub = words
            .into_iter()
            .filter(|w| !VERBS.contains(&w.as_str()))
            .collect();
        (program, sub)
    };
    // `branch_delete`, `delete_branch`: a mode of the subcommand spelled in the name.
    let (sub, modes) = name_modes(&program, sub);
    let sub = sub.join("-");
    let mut line = Line::default();
    for mode in modes {
        line.mode(&program, &sub, &mode);
    }
    let mut dir = None;
    for (key, value) in input.as_object()? {
        line.field(&program, &sub, &fields::snake(key), value, &mut dir, true);
    }
    let mut text = String::new();
    if let Some(dir) = dir {
        let _ = write!(text, "cd {} && ", quote(&dir));
    }
    text.push_str(&program);
    for word in sub.split('-').filter(|w| !w.is_empty()) {
        text.push(' ');
        text.push_str(word);
    }
    for word in line.finish() {
        text.push(' ');
        text.push_str(&word);
    }
    Some(text)
}

/// The words of a tool's name split into the subcommand and the modes of it the name
/// spells (`[delete, branch]` of git → `[branch]` and `[delete]`).
fn name_modes(program: &str, words: Vec<String>) -> (Vec<String>, Vec<String>) {
    let Some((_, sub, _)) = MODE_OPTIONS
        .iter()
        .find(|(p, s, _)| *p == program && words.iter().any(|w| w == s))
    else {
        return (words, Vec::new());
    };
    let modes_of = MODE_OPTIONS
        .iter()
        .filter(|(p, s, _)| *p == program && s == sub)
        .flat_map(|(.., m)| m.iter());
    let (modes, rest): (Vec<String>, Vec<String>) = words
        .into_iter()
        .partition(|w| w != sub && modes_of.clone().any(|m| m == w));
    // The subcommand first, whatever order the name had (`delete_branch`).
    let (first, others): (Vec<String>, Vec<String>) = rest.into_iter().partition(|w| w == sub);
    (first.into_iter().chain(others).collect(), modes)
}

/// The words after the subcommand, options first.
#[derive(Default)]
struct Line {
    subcommands: Vec<String>,
    /// The subcommand and its words, when a field gives them.
    leading: Vec<String>,
    /// Argument words the tool passes on as they are.
    argv: Vec<String>,
    options: Vec<String>,
    operands: Vec<(usize, String)>,
}

impl Line {
    /// One field of the input; an object under an options field (`options: {force: true}`)
    /// is read field by field, one level down.
    fn field(
        &mut self,
        program: &str,
        sub: &str,
        key: &str,
        value: &Value,
        dir: &mut Option<String>,
        top: bool,
    ) {
        if top && DIR_KEYS.contains(&key) && dir.is_none() {
            if let Some(d) = value.as_str().filter(|d| !d.trim().is_empty()) {
                *dir = Some(d.to_owned());
                return;
            }
        }
        if let (Value::Object(inner), true) = (value, top && ARGV_KEYS.contains(&key)) {
            for (k, v) in inner {
                self.field(program, sub, &fields::snake(k), v, dir, false);
            }
            return;
        }
        if MODE_KEYS.contains(&key) {
            if let Some(mode) = value.as_str() {
                self.mode(program, sub, mode);
                return;
            }
        }
        if LEADING_KEYS.contains(&key) {
            Self::words(value, &mut self.leading);
            return;
        }
        if ARGV_KEYS.contains(&key) {
            Self::words(value, &mut self.argv);
            return;
        }
        if let Some(rank) = OPERAND_KEYS.iter().position(|k| k == &key) {
            self.operands(rank, value);
            return;
        }
        self.option(program, sub, key, value);
    }

    fn mode(&mut self, program: &str, sub: &str, mode: &str) {
        let mode = fields::snake(mode).replace('_', "-");
        let is_option = MODE_OPTIONS
            .iter()
            .any(|(p, s, modes)| *p == program && *s == sub && modes.contains(&mode.as_str()));
        if is_option {
            self.options.push(format!("--{mode}"));
        } else {
            self.subcommands.push(quote(&mode));
        }
    }

    /// The program's own words: each word of a list, or a line of them, which the server
    /// splits as a shell would (or passes whole).
    fn words(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Array(items) => out.extend(items.iter().filter_map(Value::as_str).map(quote)),
            Value::String(s) => out.push(s.clone()),
            _ => {}
        }
    }

    fn operands(&mut self, rank: usize, value: &Value) {
        match value {
            Value::String(s) if !s.is_empty() => self.operands.push((rank, quote(s))),
            Value::Number(n) => self.operands.push((rank, n.to_string())),
            Value::Array(items) => {
                for s in items.iter().filter_map(Value::as_str) {
                    self.operands.push((rank, quote(s)));
                }
            }
            _ => {}
        }
    }

    fn option(&mut self, program: &str, sub: &str, key: &str, value: &Value) {
        let short = SHORT_OPTIONS
            .iter()
            .find(|(p, s, k, _)| *p == program && *s == sub && *k == key)
            .map(|(.., flag)| *flag);
        let long = format!("--{}", key.replace('_', "-"));
        // A server that coerces its inputs takes `"true"` or `1` for a true boolean too.
        let truthy = match value {
            Value::String(s) => ["true", "yes", "1"]
                .iter()
                .any(|t| s.eq_ignore_ascii_case(t)),
            Value::Number(n) => n.as_u64() == Some(1),
            _ => false,
        };
        if truthy {
            self.options.push(short.unwrap_or(&long).to_owned());
        }
        match value {
            Value::Bool(true) => self.options.push(short.unwrap_or(&long).to_owned()),
            Value::String(s) => self.options.push(format!("{long}={}", quote(s))),
            Value::Number(n) => self.options.push(format!("{long}={n}")),
            Value::Array(items) => {
                for s in items.iter().filter_map(Value::as_str) {
                    self.options.push(format!("{long}={}", quote(s)));
                }
            }
            Value::Bool(false) | Value::Null | Value::Object(_) => {}
        }
    }

    fn finish(mut self) -> Vec<String> {
        // Sorted, so that the order of a JSON object's keys never changes the line.
        self.options.sort();
        self.operands.sort_by_key(|(rank, _)| *rank);
        let mut words = self.leading;
        words.append(&mut self.subcommands);
        words.append(&mut self.argv);
        words.append(&mut self.options);
        if !self.operands.is_empty() {
            // Operands after `--` could never be read as options, whatever they spell.
            words.push("--".to_owned());
            words.extend(self.operands.into_iter().map(|(_, w)| w));
        }
        words
    }
}

#[cfg(test)]
fn line_of(tool: &str, input: &str) -> Option<String> {
    let input: Value = serde_json::from_str(input).ok()?;
    command_line(tool, &input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_program_becomes_its_command_line() {
        let cases = [
            (
                "mcp__git__git_push",
                r#"{"path": "/work/app", "remote": "origin", "branch": "main", "force": true}"#,
                "cd /work/app && git push --force -- origin main",
            ),
            (
                "mcp__git__push",
                r#"{"forceWithLease": true, "branch": "main"}"#,
                "git push --force-with-lease -- main",
            ),
            (
                "mcp__git__git_reset",
                r#"{"mode": "hard", "target": "HEAD~3"}"#,
                "git reset --hard -- 'HEAD~3'",
            ),
            (
                "mcp__git__git_stash",
                r#"{"mode": "clear"}"#,
                "git stash clear",
            ),
            (
                "mcp__git__git_clean",
                r#"{"force": true, "directories": true, "ignored": true, "dryRun": false}"#,
                "git clean --force -d -x",
            ),
            (
                "mcp__docker__docker_run",
                r#"{"image": "alpine", "privileged": true}"#,
                "docker run --privileged -- alpine",
            ),
        ];
        for (tool, input, want) in cases {
            assert_eq!(
                line_of(tool, input).as_deref(),
                Some(want),
                "{tool} {input}"
            );
        }
        // A tool of no known program, or not an MCP tool, is left to the generic reading.
        assert_eq!(
            line_of("mcp__github__create_issue", r#"{"title": "x"}"#),
            None
        );
        assert_eq!(line_of("git_push", r#"{"force": true}"#), None);
    }

    #[test]
    fn values_cannot_become_options_or_commands() {
        let line = line_of(
            "mcp__git__git_push",
            r#"{"remote": "--upload-pack=touch /tmp/x", "branch": "a; rm -rf ~", "note": "$(id)"}"#,
        )
        .expect("a git tool");
        assert_eq!(
            line,
            "git push --note='$(id)' -- '--upload-pack=touch /tmp/x' 'a; rm -rf ~'"
        );
    }

    proptest::proptest! {
        /// Whatever a field holds, the line keeps it one word, after `--` for an operand,
        /// and reading the line never fails on it.
        #[test]
        fn any_value_stays_one_word(remote in ".{0,40}", note in ".{0,40}") {
            let input = serde_json::json!({"remote": remote, "note": note, "force": true});
            let line = command_line("mcp__git__git_push", &input).expect("a git tool");
            if !remote.is_empty() {
                let operand = format!("-- {}", quote(&remote));
                proptest::prop_assert!(line.ends_with(&operand), "{}", line);
            }
            let mut out = Extracted::default();
            shell::extract(&line, &Context::default(), &mut out);
            let canon = out.commands.first();
            proptest::prop_assert!(
                canon.is_some_and(|c| c.starts_with("git push")),
                "{} → {:?}", line, canon
            );
        }
    }
}
