//! Data flow from the network to code: bytes a command fetched (curl, wget, nc, ssh, a
//! `/dev/tcp` redirect, a `git clone`) are followed through pipes, files written, `tee`,
//! process substitutions and `$(…)`; when they reach a shell or an interpreter as code —
//! on its stdin, as its script file, through `-c`/`-e`, `eval`, `source`, `xargs`, or by
//! running the file itself — that is "running downloaded code", whatever the spelling of
//! the shell (absolute path, `env`, `busybox`, `sudo`) or the order of the steps.
//!
//! What the analysis found is written as a canonical command line, `curl | INTERPRETER`
//! for code on stdin and `INTERPRETER <(curl)` for a script, so that command rules match
//! the fact rather than one spelling of it (the `remote-code` pack's rules do).

use super::super::normalize;
use super::super::operation::Context;
use super::commands::is_shell;
use super::walk::Walker;

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
            | "lftp"
            | "tftp"
            | "ssh"
    )
}

/// Stands in the value of a `$(…)` whose output came from the network, so that the
/// command it becomes part of (`sh -c "$(curl …)"`, `eval`) can tell. A private-use
/// character: no real value holds it.
pub(super) const DOWNLOADED: &str = "\u{e000}downloaded\u{e000}";

/// Where downloaded bytes went so far in one call's analysis.
#[derive(Debug, Default)]
pub(super) struct Flow {
    /// Files (and, ending in `/`, trees) written with downloaded bytes.
    pub downloads: Vec<String>,
    /// Descriptors opened on `/dev/tcp` or `/dev/udp` (`exec 3<>/dev/tcp/…`).
    pub net_fds: Vec<String>,
    /// The command being run read a file of `downloads` (its output is downloaded bytes).
    pub read_download: bool,
}

/// How downloaded bytes reach the code runner.
#[derive(Clone, Copy)]
pub(super) enum Reach {
    /// As its stdin.
    Stdin,
    /// As its script: a file, `-c`, `eval`, `source`.
    Script,
}

impl Walker<'_> {
    /// Records that `raw` (a file) now holds downloaded bytes.
    pub(super) fn downloaded_to(&mut self, raw: &str, ctx: &Context) {
        if let Some(p) = normalize::path(raw, ctx) {
            if !self.flow.downloads.contains(&p) {
                self.flow.downloads.push(p);
            }
        }
    }

    /// Records that the tree `raw` (a clone) holds downloaded files.
    pub(super) fn downloaded_tree(&mut self, raw: &str, ctx: &Context) {
        if let Some(p) = normalize::path(raw, ctx) {
            self.flow
                .downloads
                .push(format!("{}/", p.trim_end_matches('/')));
        }
    }

    /// Whether the file `raw` holds downloaded bytes (written so earlier in the command, in
    /// a cloned tree, or a process substitution fed by a download).
    pub(super) fn is_download(&self, raw: &str, ctx: &Context) -> bool {
        self.fd_feed(raw).is_some_and(|f| f.downloaded)
            || normalize::path(raw, ctx).is_some_and(|p| self.holds_download(&p))
    }

    /// [`Self::is_download`] of a normalised path.
    pub(super) fn holds_download(&self, path: &str) -> bool {
        self.flow
            .downloads
            .iter()
            .any(|d| d == path || (d.ends_with('/') && path.starts_with(d.as_str())))
    }

    /// Downloaded bytes reach `runner` (a shell or interpreter, by its family name) as code.
    /// Interpreters other than shells are written with their code on stdin, the form the
    /// pack's rule names them in.
    pub(super) fn runs_download(&mut self, runner: &str, reach: Reach) {
        let line = match reach {
            Reach::Script if is_shell(runner) => format!("{runner} <(curl)"),
            _ => format!("curl | {runner}"),
        };
        self.out.command(line);
    }

    /// `runs_download` when `code` (a `-c` string, `eval`'s words) holds a download.
    pub(super) fn code_from_download(&mut self, runner: &str, code: &str) {
        if code.contains(DOWNLOADED) {
            self.runs_download(runner, Reach::Script);
        }
    }
}
