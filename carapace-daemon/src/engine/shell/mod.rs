//! Shell command lines → operations. The agent's command is hostile input: it is parsed with
//! a real shell grammar (`brush-parser`), every construct that runs code is walked (pipes,
//! lists, subshells, compound commands, functions, `$(…)`, backticks, process substitution,
//! here-docs), wrappers are unwrapped (`sh -c`, `eval`, `sudo`, `xargs`, `find -exec`, …),
//! encoded payloads piped into interpreters are decoded and walked again, and anything that
//! cannot be understood fails closed through [`Extracted::unparsable`].
//!
//! The parser recurses once per nesting level and would overflow the stack (an abort, not a
//! panic) on `$($($(…)))` a thousand deep, so nesting is measured before parsing and the
//! whole walk runs on a thread with a generous stack, which also turns a parser panic into
//! an error instead of a dead daemon.
mod args;
mod code;
mod commands;
mod net;
mod parse;
mod walk;
mod word;

#[cfg(test)]
mod tests;

use super::normalize;
use super::operation::{Context, Extracted};

/// `sh -c "sh -c '…'"` and friends, each a fresh parse.
const MAX_DEPTH: usize = 8;
/// Simple commands and words walked in one call, so that brace expansion and substitution
/// fan-out cannot make one call expensive.
const MAX_WORK: usize = 10_000;
/// The walk's own stack; the nesting limit keeps real use far below it.
const STACK_SIZE: usize = 64 << 20;

/// Extracts what the shell command line `command` does, with paths relative to `ctx`.
pub fn extract(command: &str, ctx: &Context, out: &mut Extracted) {
    let command = normalize::text(command);
    out.command(command.trim());
    out.command(command.split_whitespace().collect::<Vec<_>>().join(" "));
    out.text(command.as_str());
    for decoded in normalize::decode_payloads(&command) {
        out.text(decoded);
    }
    let finished = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("shell-extract".into())
            .stack_size(STACK_SIZE)
            .spawn_scoped(scope, || {
                let mut ctx = ctx.clone();
                walk::Walker::new(out).script(&command, &mut ctx, 0);
            })
            .map(|handle| handle.join().is_ok())
    });
    match finished {
        Ok(true) => {}
        Ok(false) => out.unparsable("the shell command could not be analysed (analyser fault)"),
        Err(e) => out.unparsable(format!(
            "the shell command could not be analysed (no thread: {e})"
        )),
    }
}
