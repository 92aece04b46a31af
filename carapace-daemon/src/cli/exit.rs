//! The exit status `carapace` passes on for a command it ran (`carapace run`'s agent,
//! `carapace mcp wrap`'s server), shell style.

/// The command's exit code, or 128+N when signal N killed it.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        (None, None) => 1,
    }
}
