//! Data flow from the network to code: bytes a command fetched (curl, wget, nc, ssh, a
//! `/dev/tcp` redirect, a `git clone`) are followed through pipes, files written, `tee`,
//! process substitutions and `$(…)`; when they reach a shell or an interpreter as code —
//! on its stdin, as its script file, through `-c`/`-e`, `eval`, `source`, `xargs`, or by
//! running the file itself — that is "running downloaded code", whatever the spelling of
//! the shell (absolute path, `env`, `busybox`, `sudo`) or the order of the steps.
//!
//! Taint is carried three ways: a stream ([`Feed::downloaded`](super::walk::Feed), and the
//! stdin a group, a loop or a `sh -c` passes on to the commands inside it, `Flow::stdin`),
//! a value (a private-use marker in the text of `$(curl …)` or of a line `read` from a
//! download) and a file (`Flow::downloads`, followed through copies, moves and unpacking).
//!
//! What the analysis found is written as a canonical command line, `curl | RUNNER` for
//! code on stdin (every shell is `sh`; interpreters by family name) and `sh <(curl)` for a
//! shell script, so that command rules match the fact rather than one spelling of it, and
//! never text that only mentions `curl | sh` (the `remote-code` pack's rules are anchored
//! on these lines).

use super::super::normalize;
use super::super::operation::Context;
use super::args;
use super::names::{family, is_interpreter, is_shell};
use super::taint::value_reaches;
pub(super) use super::taint::{is_stdin_path, Reach, STREAMED};
use super::walk::{Feed, Walker};
use crate::rules::Action;

/// Commands whose stdout carries bytes from the network.
pub(super) fn fetches(name: &str) -> bool {
    matches!(
        name,
        "curl"
            | "wget"
            | "nc"
            | "ncat"
            | "netcat"
            | "socat"
            | "http"
            | "https"
            | "xh"
            | "aria2c"
            | "websocat"
            | "grpcurl"
            | "ftp"
            | "telnet"
            | "lftp"
            | "tftp"
            | "ssh"
            | "wget2"
            | "lwp-request"
            | "lwp-download"
            | "GET"
            | "HEAD"
            | "POST"
            | "curlie"
            | "fetch"
            | "dig"
            | "host"
            | "nslookup"
            | "whois"
            // Text browsers print a page's source (`lynx -source`, `w3m -dump_source`).
            | "lynx"
            | "links"
            | "links2"
            | "elinks"
            | "w3m"
    )
}

/// Where a command given by its bare name is looked for when `PATH` is not known.
const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:~/bin:~/.local/bin";

impl Walker<'_> {
    /// Records that `raw` (a file) now holds downloaded bytes.
    pub(super) fn downloaded_to(&mut self, raw: &str, ctx: &Context) {
        if let Some(p) = normalize::shell_path(raw, ctx) {
            if !self.flow.downloads.contains(&p) {
                self.flow.downloads.push(p);
            }
        }
    }

    /// Records that the tree `raw` (a clone) holds downloaded files.
    pub(super) fn downloaded_tree(&mut self, raw: &str, ctx: &Context) {
        if let Some(p) = normalize::shell_path(raw, ctx) {
            self.flow
                .downloads
                .push(format!("{}/", p.trim_end_matches('/')));
        }
    }

    /// Whether the file `raw` holds downloaded bytes (written so earlier in the command, in
    /// a cloned tree, or a process substitution fed by a download).
    pub(super) fn is_download(&self, raw: &str, ctx: &Context) -> bool {
        self.fd_feed(raw).is_some_and(|f| f.downloaded)
            || normalize::shell_path(raw, ctx).is_some_and(|p| self.holds_download(&p))
    }

    /// Whether the file `raw` names was itself saved from a download earlier in the line
    /// (`curl -o Makefile`), not merely put in a downloaded tree (a clone's).
    pub(super) fn is_downloaded_file(&self, raw: &str, ctx: &Context) -> bool {
        normalize::shell_path(raw, ctx).is_some_and(|p| self.flow.downloads.contains(&p))
    }

    /// [`Self::is_download`] of a normalised path.
    pub(super) fn holds_download(&self, path: &str) -> bool {
        self.flow
            .downloads
            .iter()
            .any(|d| d == path || (d.ends_with('/') && path.starts_with(d.as_str())))
    }

    /// Downloaded bytes reach `runner` (a shell or interpreter, by its family name) as code.
    /// Every shell is written `sh`; interpreters other than shells are written with their
    /// code on stdin, the form the pack's rule names them in.
    pub(super) fn runs_download(&mut self, runner: &str, reach: Reach) {
        let line = match reach {
            Reach::Script if is_shell(runner) => "sh <(curl)".to_owned(),
            _ if is_shell(runner) => "curl | sh".to_owned(),
            _ => format!("curl | {runner}"),
        };
        self.out.command(line);
    }

    /// `runs_download` when `code` (a `-c` string, `eval`'s words, a command word) holds a
    /// download.
    pub(super) fn code_from_download(&mut self, runner: &str, code: &str) {
        for reach in value_reaches(code) {
            self.runs_download(runner, reach);
        }
    }

    /// What a command given no stdin of its own reads: the enclosing shell's.
    pub(super) fn inherited_stdin(&self) -> Feed {
        Feed {
            text: self.stdin_text.clone(),
            downloaded: self.flow.stdin,
            ..Feed::default()
        }
    }

    /// Walks `f` in a shell (a group, a loop, a command and what it runs, the
    /// substitutions in a command's words) whose stdin is `stdin`; the enclosing one's is
    /// restored after. Its known text is kept too: every command inside may read it, and
    /// one that runs it (`{ eval "$(cat)"; } <<< '…'`) runs shell code.
    pub(super) fn with_stdin<T>(&mut self, stdin: &Feed, f: impl FnOnce(&mut Self) -> T) -> T {
        let outer = std::mem::replace(&mut self.flow.stdin, stdin.downloaded);
        let outer_text = std::mem::replace(&mut self.stdin_text, stdin.text.clone());
        let out = f(self);
        self.flow.stdin = outer;
        self.stdin_text = outer_text;
        out
    }

    /// A command run by its bare name that a download was written to on the way there
    /// (`curl … | sudo tee /usr/local/bin/t; t`).
    pub(super) fn on_path_download(&self, name: &str, ctx: &Context) -> bool {
        if self.flow.downloads.is_empty() || name.is_empty() {
            return false;
        }
        let path = ctx.var("PATH").unwrap_or(DEFAULT_PATH).to_owned();
        path.split(':')
            .filter(|dir| !dir.is_empty())
            .filter_map(|dir| normalize::shell_path(&format!("{dir}/{name}"), ctx))
            .any(|p| self.holds_download(&p))
    }

    /// A script file for `runner`: its own stdin (`sh /dev/stdin`, `gawk -f /dev/stdin`)
    /// or a downloaded file runs downloaded code.
    pub(super) fn script_source(&mut self, runner: &str, file: &str, stdin: &Feed, ctx: &Context) {
        if is_stdin_path(file) {
            if stdin.downloaded {
                self.runs_download(runner, Reach::Stdin);
            }
        } else if self.is_download(file, ctx) {
            self.runs_download(runner, Reach::Script);
        }
    }
}

/// Calls in awk, Python, Perl, Ruby, PHP and JavaScript that run a string as code or as a
/// shell command.
const EVAL_CALLS: &[&str] = &[
    "exec(",
    "eval(",
    "eval ",
    "execSync(",
    "system(",
    "system ",
    "Function(",
    "instance_eval",
    "class_eval",
    "runInThisContext(",
    "runInNewContext(",
    "popen(",
    "shell_exec(",
    "passthru(",
    "spawnSync(",
];

/// Whether `code` hands something other than a string literal to a call that runs it as
/// code (`exec(urlopen(…).read())`, `system($0)`, `eval get(…)`); literals are walked as
/// commands already, and `eval { … }` is Perl's `try`.
pub(super) fn evaluates_values(code: &str) -> bool {
    EVAL_CALLS.iter().any(|call| {
        code.match_indices(call).any(|(i, _)| {
            let after = code.get(i + call.len()..).unwrap_or("").trim_start();
            !after.is_empty() && !after.starts_with(['\'', '"', '`', '{', ')'])
        })
    })
}

/// Whether `code` fetches from the network itself (a URL literal).
pub(super) fn fetches_url(code: &str) -> bool {
    ["http://", "https://", "ftp://"]
        .iter()
        .any(|scheme| code.contains(scheme))
}

/// awk's `print | "sh"`: a pipe into a command string that names a shell or interpreter.
fn awk_pipes_to_runner(prog: &str) -> bool {
    prog.match_indices('|').any(|(i, _)| {
        let after = prog.get(i + 1..).unwrap_or("").trim_start();
        let Some(quoted) = after.strip_prefix('"') else {
            return false;
        };
        let command = quoted.split('"').next().unwrap_or("");
        let runner = command.split_whitespace().next().map_or("", family);
        is_shell(runner) || is_interpreter(runner)
    })
}

impl Walker<'_> {
    /// Whether a filter's input (its stdin or its files) holds downloaded bytes.
    fn input_downloaded(&self, files: &[&str], stdin: &Feed, ctx: &Context) -> bool {
        stdin.downloaded || files.iter().any(|f| self.is_download(f, ctx))
    }

    /// `sed e` of a download runs it line by line.
    pub(super) fn sed_runs_input(
        &mut self,
        scripts: &[&str],
        files: &[&str],
        stdin: &Feed,
        ctx: &Context,
    ) {
        if scripts.iter().any(|s| super::sed::executes(s))
            && self.input_downloaded(files, stdin, ctx)
        {
            self.runs_download("sh", Reach::Stdin);
        }
    }

    /// `awk '{system($0)}'` or `awk '{print | "sh"}'` of a download runs it.
    pub(super) fn awk_runs_input(
        &mut self,
        prog: &str,
        files: &[&str],
        stdin: &Feed,
        ctx: &Context,
    ) {
        if (evaluates_values(prog) || awk_pipes_to_runner(prog))
            && self.input_downloaded(files, stdin, ctx)
        {
            self.runs_download("sh", Reach::Stdin);
        }
    }

    /// GNU parallel: with no command, each input line (or `:::` argument) is a command; with one, input lines
    /// become its arguments (a runner's code or script, as for `xargs`).
    pub(super) fn parallel(
        &mut self,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: &Feed,
    ) -> Feed {
        let o = args::parse(
            args,
            &[
                "-j",
                "--jobs",
                "-N",
                "-n",
                "--max-args",
                "-L",
                "--max-lines",
                "-S",
                "--sshlogin",
                "-d",
                "--delimiter",
                "-a",
                "--arg-file",
                "-I",
                "--colsep",
                "-C",
                "--halt",
                "--delay",
                "--timeout",
                "--joblog",
                "--results",
                "--tmpdir",
                "--workdir",
                "-E",
                "--env",
                "--tagstring",
                "--block",
                "--retries",
            ],
            true,
        );
        for f in o.values(&["-a", "--arg-file"]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        let command: Vec<String> = o
            .rest
            .iter()
            .take_while(|a| !a.starts_with(":::"))
            .cloned()
            .collect();
        let from_files = o
            .values(&["-a", "--arg-file"])
            .iter()
            .any(|f| self.is_download(f, ctx));
        if stdin.downloaded || from_files {
            match command.first().map(|c| family(c)) {
                None => self.runs_download("sh", Reach::Stdin),
                Some(r) if is_shell(r) || is_interpreter(r) => {
                    self.runs_download(r, Reach::Script);
                    self.runs_download(r, Reach::Stdin);
                }
                Some(_) => {}
            }
        }
        // `::: A B` gives the arguments on the line (`:::: FILE` in a file): with no
        // command each is a command line, else each fills `{}` or is appended.
        let mut inputs = Vec::new();
        let mut files = false;
        for a in o.rest.iter().skip(command.len()) {
            match a.as_str() {
                ":::" | ":::+" => files = false,
                "::::" | "::::+" => files = true,
                f if files => self.path_op(Action::Read, f, ctx, None),
                v => inputs.push(v),
            }
        }
        let piped = if o.rest.len() == command.len() {
            self.parallel_fed(&o.values(&["-a", "--arg-file"]), stdin, ctx)
        } else {
            Vec::new()
        };
        inputs.extend(piped.iter().map(String::as_str));
        if command.is_empty() {
            for line in inputs.into_iter().take(MAX_INPUTS) {
                self.script(line, &mut ctx.clone(), depth + 1);
            }
            return Feed::default();
        }
        if inputs.is_empty() {
            return self.run(&command, ctx, depth + 1, Feed::default());
        }
        let mut feed = Feed::default();
        // parallel hands the command's words, joined, to a shell (`parallel 'cat {}' :::
        // F` runs `cat F`), each input quoted.
        let line = command.join(" ");
        for input in inputs.into_iter().take(MAX_INPUTS) {
            let quoted = super::quote::shell_quote(input);
            let filled = line.contains("{}");
            let mut line = line.replace("{}", &quoted);
            if !filled {
                line.push(' ');
                line.push_str(&quoted);
            }
            feed.extend(self.script(&line, &mut ctx.clone(), depth + 1));
        }
        feed
    }

    /// The inputs of a `parallel` line without `:::`: the lines of its `-a` files (a
    /// process substitution, a file written earlier), or else of stdin, as xargs reads
    /// them (`echo FILE | parallel cat`); a listed name stands for any entry.
    fn parallel_fed(&self, arg_files: &[&str], stdin: &Feed, ctx: &Context) -> Vec<String> {
        let sources: Vec<Feed> = if arg_files.is_empty() {
            vec![stdin.clone()]
        } else {
            arg_files
                .iter()
                .filter_map(|f| self.file_feed(f, ctx))
                .collect()
        };
        sources
            .iter()
            .flat_map(|source| {
                source
                    .text
                    .iter()
                    .flat_map(|t| super::items::xargs_items(t, Some('\n')))
                    .chain(source.names.iter().cloned())
            })
            .collect()
    }
}

/// The `:::` arguments of one `parallel` line walked (each is one more command).
const MAX_INPUTS: usize = 16;

/// Whether a command line is one [`Walker::runs_download`] records (a pipeline is never
/// one simple command's words, so no command line of the agent's reads so).
pub(super) fn is_download_run(line: &str) -> bool {
    line == "sh <(curl)" || line.starts_with("curl | ")
}
