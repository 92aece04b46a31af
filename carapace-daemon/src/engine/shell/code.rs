//! Interpreters (`python`, `node`, `perl`, …): script files are read and executed; inline
//! code is text, and its string literals are read conservatively: paths become reads (writes
//! or deletes when the call around them says so), URLs network operations, and strings
//! handed to `system`/`popen`/`exec`-like calls are walked as shell commands.
use base64::Engine as _;

use super::super::operation::Context;
use super::args;
use super::commands::path_like;
use super::flow::Reach;
use super::home_paths;
use super::walk::{Feed, Walker};
use crate::rules::Action;

/// Calls whose string argument is a shell command.
const SHELL_CALLS: &[&str] = &[
    "system(",
    "popen(",
    "exec(",
    "execSync(",
    "spawnSync(",
    "spawn(",
    "check_output(",
    "check_call(",
    "call(",
    "run(",
    "Popen(",
    "getoutput(",
    "getstatusoutput(",
    "shell_exec(",
    "passthru(",
    "proc_open(",
    "qx(",
    "%x(",
    "capture2(",
    "capture3(",
    "execFile(",
    "execFileSync(",
    "system ",
    "exec ",
    "Command(",
];
/// Calls that delete the path they are given.
const DELETE_CALLS: &[&str] = &[
    "remove(",
    "unlink(",
    "rmtree(",
    "rmdir(",
    "unlinkSync(",
    "rmSync(",
    "rmdirSync(",
    "removedirs(",
    "rm(",
    "rm_rf(",
    "rm_r(",
    "delete(",
    "unlink ",
];
/// Calls that write the path they are given.
const WRITE_CALLS: &[&str] = &[
    "writeFile(",
    "writeFileSync(",
    "appendFile(",
    "appendFileSync(",
    "write_text(",
    "write_bytes(",
    "createWriteStream(",
    "copyfile(",
    "copy(",
    "copy2(",
    "move(",
    "rename(",
    "renameSync(",
    "copyFileSync(",
    "chmod(",
    "chown(",
    "symlink(",
    "symlinkSync(",
    "makedirs(",
    "mkdir(",
    "mkdirSync(",
    "touch(",
    "file_put_contents(",
    "IO.write(",
    "File.write(",
];

impl Walker<'_> {
    #[expect(
        clippy::too_many_lines,
        reason = "the per-language option table is most of it"
    )]
    pub fn interpreter(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: &Feed,
    ) -> Feed {
        let (valued, code_flags, file_flags): (&[&str], &[&str], &[&str]) = match name {
            "python" => (&["-c", "-m", "-W", "-X", "-Q"], &["-c"], &[]),
            "node" | "nodejs" => (
                &[
                    "-e",
                    "--eval",
                    "-p",
                    "--print",
                    "-r",
                    "--require",
                    "--import",
                    "--loader",
                    "--experimental-loader",
                    "--input-type",
                    "-C",
                    "--conditions",
                    "--env-file",
                    "--title",
                    "--inspect-port",
                ],
                &["-e", "--eval", "-p", "--print"],
                &["--env-file", "-r", "--require", "--import"],
            ),
            "perl" => (
                &["-e", "-E", "-I", "-M", "-m", "-x", "-C"],
                &["-e", "-E"],
                &[],
            ),
            "ruby" | "irb" => (&["-e", "-r", "-I", "-C", "-E", "-F", "-W"], &["-e"], &[]),
            "php" => (
                &[
                    "-r", "-f", "-c", "-d", "-B", "-R", "-F", "-E", "-t", "-z", "-S",
                ],
                &["-r", "-B", "-R", "-E"],
                &["-f", "-F"],
            ),
            "lua" | "luajit" => (&["-e", "-l"], &["-e"], &[]),
            "Rscript" | "osascript" | "tclsh" | "julia" => (&["-e", "-E"], &["-e", "-E"], &[]),
            "deno" | "bun" => (
                &[
                    "-e",
                    "--eval",
                    "--config",
                    "-c",
                    "--import-map",
                    "--env-file",
                ],
                &["-e", "--eval"],
                &["--config", "-c", "--import-map", "--env-file"],
            ),
            _ => (&[], &[], &[]),
        };
        if matches!(name, "pwsh" | "powershell") {
            self.powershell(args, ctx, depth);
            return Feed::default();
        }
        let o = args::parse(args, valued, true);
        for f in o.values(file_flags) {
            self.path_op(Action::Read, f, ctx, None);
            if name == "php" {
                self.path_op(Action::Execute, f, ctx, None);
            }
        }
        let codes = o.values(code_flags);
        let mut rest = o.rest;
        // deno run FILE / bun run FILE / deno eval CODE.
        if matches!(name, "deno" | "bun") {
            match rest.first().map(String::as_str) {
                Some("eval" | "-e") => {
                    if let Some(c) = rest.get(1) {
                        self.code(c, ctx, depth);
                    }
                    return Feed::default();
                }
                Some("run" | "x" | "exec" | "test") => rest = &rest[1..],
                _ => {}
            }
            // Options of the subcommand come before the file.
            while rest.first().is_some_and(|a| a.starts_with('-')) {
                rest = &rest[1..];
            }
        }
        let module = o.value(&["-m"]).filter(|_| name == "python");
        let mut script_args = rest;
        if !codes.is_empty() {
            for c in codes {
                self.code_from_download(name, c);
                self.code(c, ctx, depth);
            }
        } else if module.is_some() || (!o.values(file_flags).is_empty() && name == "php") {
            // python -m MODULE ARGS…: the arguments follow.
        } else if let Some((script, after)) = rest.split_first().filter(|(s, _)| *s != "-") {
            self.path_op(Action::Read, script, ctx, None);
            self.path_op(Action::Execute, script, ctx, None);
            if self.is_download(script, ctx) {
                self.runs_download(name, Reach::Script);
            }
            if let Some(feed) = self.fd_feed(script) {
                self.code(&feed.joined(), ctx, depth);
            }
            script_args = after;
        } else {
            if stdin.downloaded {
                self.runs_download(name, Reach::Stdin);
            }
            let code = stdin.joined();
            if !code.is_empty() {
                self.code(&code, ctx, depth);
            }
            script_args = rest.get(1..).unwrap_or(&[]);
        }
        // perl -i edits the files it is given.
        let edits = name == "perl" && o.has(&["-i"]);
        for a in script_args {
            if edits {
                self.path_op(Action::Read, a, ctx, None);
                self.path_op(Action::Write, a, ctx, None);
            } else if path_like(a) {
                self.path_op(Action::Read, a, ctx, None);
            }
        }
        Feed::default()
    }

    /// PowerShell takes single-dash long options in any case; `-Command` takes the rest of
    /// the line. Its aliases (cat, rm, curl, …) read like shell commands but its syntax does
    /// not parse as one, so the code's words are taken as they come.
    fn powershell(&mut self, args: &[String], ctx: &mut Context, depth: usize) {
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            let next = args.get(i).map(String::as_str);
            let code = match a.to_ascii_lowercase().as_str() {
                "-command" | "-c" => {
                    let code = args[i..].join(" ");
                    i = args.len();
                    Some(code)
                }
                "-encodedcommand" | "-enc" | "-e" | "-ec" => {
                    i += 1;
                    next.and_then(utf16_base64)
                }
                "-file" | "-f" => {
                    i += 1;
                    if let Some(f) = next {
                        self.path_op(Action::Read, f, ctx, None);
                        self.path_op(Action::Execute, f, ctx, None);
                    }
                    None
                }
                "-executionpolicy" | "-ep" | "-workingdirectory" | "-wd" | "-configurationname"
                | "-outputformat" | "-of" | "-inputformat" | "-if" | "-settingsfile" => {
                    i += 1;
                    None
                }
                f if f.starts_with('-') => None,
                _ => {
                    self.path_op(Action::Read, a, ctx, None);
                    self.path_op(Action::Execute, a, ctx, None);
                    break;
                }
            };
            if let Some(code) = code {
                self.code(&code, ctx, depth);
                self.rough(&code, ctx, depth);
            }
        }
    }

    /// Inline code of any language: text for content rules, and the literals it carries.
    pub fn code(&mut self, code: &str, ctx: &mut Context, depth: usize) {
        self.out.text(code);
        if !self.spend(1) {
            return;
        }
        let literals = literals(code);
        let spans: Vec<(usize, usize, &str)> = literals
            .iter()
            .map(|l| (l.start, l.end, l.value.as_str()))
            .collect();
        let mut parts = Vec::new();
        for home in home_paths::home_paths(code, &spans) {
            let before = code
                .get(floor_boundary(code, home.start.saturating_sub(64))..home.start)
                .unwrap_or("");
            // The call that takes the path stands before the join that builds it.
            let mut before = before.trim_end();
            for join in [
                "os.path.join(",
                "path.join(",
                "File.join(",
                "join(",
                "Path(",
            ] {
                before = before.strip_suffix(join).unwrap_or(before).trim_end();
            }
            let action = call_action(before, code, &literals, home.end);
            self.path_op(action, &home.path, ctx, None);
            parts.extend(home.parts);
        }
        for lit in literals.iter().filter(|l| !parts.contains(&l.start)) {
            if !self.spend(1) {
                return;
            }
            let before = code
                .get(floor_boundary(code, lit.start.saturating_sub(48))..lit.start)
                .unwrap_or("");
            let before_trim = before.trim_end();
            let value = lit.value.as_str();
            if lit.quote == '`' || SHELL_CALLS.iter().any(|c| before_trim.ends_with(c)) {
                self.script(value, &mut ctx.clone(), depth + 1);
                continue;
            }
            if value.contains("://") {
                self.url_op(value.trim(), None);
                continue;
            }
            // An address written alone is where the code connects
            // (`socket.create_connection(('169.254.169.254', 80))`, `{host: '…'}`).
            if value.parse::<std::net::IpAddr>().is_ok() {
                self.host_op(value, None, None);
                continue;
            }
            // Perl's open(F, ">/path") and friends carry the mode in the string.
            let (mode_write, path) = match value
                .strip_prefix(">>")
                .or_else(|| value.strip_prefix('>'))
                .or_else(|| value.strip_prefix("+<"))
            {
                Some(p) => (true, p.trim_start()),
                None => (
                    false,
                    value.strip_prefix('<').map_or(value, str::trim_start),
                ),
            };
            let looks_like_path = (path.starts_with('/')
                || path.starts_with('~')
                || path.starts_with("./")
                || path.starts_with("../")
                || path.starts_with("$HOME"))
                && !path.contains(['\n', '\0'])
                && path.len() < 4096;
            if !looks_like_path {
                continue;
            }
            let action = if mode_write || before_trim.ends_with('>') {
                Action::Write
            } else {
                call_action(before, code, &literals, lit.end)
            };
            self.path_op(action, path, ctx, None);
        }
    }
}

struct Literal {
    start: usize,
    end: usize,
    quote: char,
    value: String,
}

/// String literals in code: `'…'`, `"…"` and `` `…` ``, with backslash escapes.
fn literals(code: &str) -> Vec<Literal> {
    let mut out = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if !matches!(c, '\'' | '"' | '`') {
            continue;
        }
        let mut value = String::new();
        let mut end = code.len();
        while let Some((j, d)) = chars.next() {
            if d == '\\' {
                if let Some((_, e)) = chars.next() {
                    value.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                }
                continue;
            }
            if d == c {
                end = j;
                break;
            }
            value.push(d);
        }
        out.push(Literal {
            start,
            end,
            quote: c,
            value,
        });
        if out.len() >= 4096 {
            break;
        }
    }
    out
}

/// What the call a path stands in does with it, from the code `before` it and what follows
/// its end (`end`: where its last literal closes): a delete, a write (by the call, or an
/// `open` mode right after the path), or a read.
fn call_action(before: &str, code: &str, literals: &[Literal], end: usize) -> Action {
    let before_trim = before.trim_end();
    if DELETE_CALLS.iter().any(|c| before_trim.ends_with(c)) {
        Action::Delete
    } else if WRITE_CALLS.iter().any(|c| before.contains(c))
        || write_mode_after(code, literals, end)
    {
        Action::Write
    } else {
        Action::Read
    }
}

/// `open('/x', 'w')`, `open(os.path.join(…), "a")`: the literal after the path, with only
/// a comma (and the closing of a join) between, is a mode that writes.
fn write_mode_after(code: &str, literals: &[Literal], end: usize) -> bool {
    let Some(next) = literals.iter().find(|l| l.start > end) else {
        return false;
    };
    let gap = code.get(end + 1..next.start).unwrap_or("");
    gap.trim()
        .trim_start_matches(')')
        .trim()
        .trim_start_matches(',')
        .trim()
        .is_empty()
        && gap.contains(',')
        && next.value.len() <= 4
        && (next.value.starts_with(['w', 'a', 'x']) || next.value.contains('+'))
}

/// The string literals of `code` as (start, end, value): for the tests of `home_paths`.
#[cfg(test)]
pub(super) fn literal_spans(code: &str) -> Vec<(usize, usize, String)> {
    literals(code)
        .into_iter()
        .map(|l| (l.start, l.end, l.value))
        .collect()
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// PowerShell's `-EncodedCommand`: base64 of UTF-16LE.
fn utf16_base64(s: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .ok()?;
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).ok()
}
