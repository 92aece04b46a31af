//! The taint the data-flow analysis carries ([`super::flow`]): the markers a downloaded
//! value holds, how downloaded bytes reach a runner, and where they went so far. Plain
//! data, apart from the walk that carries it (which keeps a [`Flow`] in its state).

/// Stands in the value of a `$(…)` whose output came from the network, so that the
/// command it becomes part of (`sh -c "$(curl …)"`, `eval`) can tell. A private-use
/// character: no real value holds it.
pub(super) const DOWNLOADED: &str = "\u{e000}downloaded\u{e000}";

/// Stands in a line `read` from a downloaded stream: `eval "$line"` in a `while read` loop
/// runs the stream line by line, as a shell reading its stdin would.
pub(super) const STREAMED: &str = "\u{e000}streamed\u{e000}";

/// How a value carrying a download marker would reach a runner, if it does.
pub(super) fn value_reach(value: &str) -> Option<Reach> {
    value_reaches(value).next()
}

/// Every way a value's download markers reach a runner: a stream read whole into a value
/// (`eval "$(cat)"` under a pipe) is both a script and the stream.
pub(super) fn value_reaches(value: &str) -> impl Iterator<Item = Reach> + '_ {
    [(DOWNLOADED, Reach::Script), (STREAMED, Reach::Stdin)]
        .into_iter()
        .filter(|(marker, _)| value.contains(marker))
        .map(|(_, reach)| reach)
}

/// Names a program reads its own stdin through, as a script file.
pub(super) fn is_stdin_path(path: &str) -> bool {
    matches!(
        path,
        "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" | "/dev/fd/stdin"
    )
}

/// Where downloaded bytes went so far in one call's analysis.
#[derive(Debug, Default)]
pub(super) struct Flow {
    /// Files (and, ending in `/`, trees) written with downloaded bytes.
    pub downloads: Vec<String>,
    /// Descriptors that read downloaded bytes: opened on `/dev/tcp` (`exec 3<>/dev/tcp/…`),
    /// on a downloaded file or on a process substitution fed by a download.
    pub download_fds: Vec<String>,
    /// The stdin of the shell being walked carries downloaded bytes (a group, loop, `sh -c`
    /// or wrapper fed by a download): a command given no other stdin inherits it.
    pub stdin: bool,
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
