//! Shell command lines → operations. The agent's command is hostile input: it is parsed with
//! a real shell grammar (`brush-parser`; the plain everyday line by `plain`, into the same
//! tree), every construct that runs code is walked (pipes, lists, subshells, compound
//! commands, functions, `$(…)`, backticks, process substitution, here-docs), wrappers are
//! unwrapped (`sh -c`, `eval`, `sudo`, `xargs`, `find -exec`, …), encoded payloads piped
//! into interpreters are decoded and walked again, and anything that cannot be understood
//! fails closed through `Extracted::unparsable`.
//!
//! The parser recurses once per nesting level and would overflow the stack (an abort, not a
//! panic) on `$($($(…)))` a thousand deep, so nesting is measured before parsing and any
//! command line that is not light (`parse::light`: short, shallow, no here-doc) is walked on
//! a thread with a generous stack. The parser has also been seen to loop forever (see
//! `parse::program`), so the caller waits for that thread only so long; a thread that never
//! comes back is counted, and once a few are stuck every call fails closed at once rather
//! than piling up more. Light command lines, the everyday ones, are walked on the caller's
//! thread; a parser panic becomes an error either way.
//!
//! What each command does is data: `table` holds an entry per command (its options that take
//! a value, which options and operands name paths read / written / executed, what it wraps
//! or prints), walked by one interpreter; commands whose effect is code (`find -exec`,
//! `xargs`, `sh -c`, interpreters) name a handler from the entry. `commands` runs one
//! command (functions, aliases, downloads, then the table) and holds the methods handlers
//! share; `names` says what a command word is.
mod args;
mod builds;
pub(crate) mod canon;
mod code;
mod code_env;
mod code_eval;
mod code_refs;
mod commands;
mod declare;
mod fetch;
mod find_names;
mod flow;
mod gitconfig;
mod globopts;
mod home_paths;
mod installs;
mod items;
mod line;
mod locate;
mod names;
mod net;
mod opt_commands;
mod param;
mod parse;
mod pipe_writes;
mod plain;
mod printf;
mod quote;
mod remote_pkg;
mod resolve;
mod sed;
mod stop;
mod sysctl;
mod table;
mod taint;
mod tcl;
mod textops;
mod vars;
mod walk;
mod word;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use super::normalize;
use super::operation::{Context, Extracted};

/// `sh -c "sh -c '…'"` and friends, each a fresh parse.
const MAX_DEPTH: usize = 8;
/// Simple commands and words walked in one call, so that brace expansion and substitution
/// fan-out cannot make one call expensive.
const MAX_WORK: usize = 10_000;
/// The walk's own stack; the nesting limit keeps real use far below it.
const STACK_SIZE: usize = 64 << 20;
/// Walks of one command line, one per `CDPATH` entry a `cd` may land in, at most.
const MAX_CD_CHOICES: usize = 8;
/// How long one command line may take to analyse (real ones take milliseconds).
const DEADLINE: Duration = Duration::from_secs(5);
/// Analyses that overran their deadline and are still running; past this many, refuse.
const MAX_STUCK: usize = 4;

static STUCK: AtomicUsize = AtomicUsize::new(0);

/// What a variable in the environment a tool call gives its command makes run (`{command,
/// env: {BASH_ENV: F}}`): a command line, a script sourced, files loaded as code, read as
/// the shell's own `NAME=VALUE` is. Other variables cost one name match.
pub(crate) fn environment(name: &str, value: &str, ctx: &Context, out: &mut Extracted) {
    if opt_commands::makes_run(name) {
        extract(&format!("{name}={}", quote::shell_quote(value)), ctx, out);
    }
}

/// Extracts what the shell command line `command` does, with paths relative to `ctx`.
pub fn extract(command: &str, ctx: &Context, out: &mut Extracted) {
    let command = normalize::text(command);
    out.command(command.trim());
    out.command(normalize::words(&command));
    out.text(command.as_str());
    for decoded in normalize::decode_payloads(&command) {
        out.text(decoded);
    }
    // Most command lines are short and flat: analysed right here, they cost no hand-off
    // between threads (which was most of a decision's time). The walk escalates to an
    // analysis thread at the first text that is not light, including text it finds inside
    // (`sh -c`, decoded payloads).
    let mut found = Extracted::default();
    let inline = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        walk_every_cd(&command, ctx, true, &mut found)
    }));
    match inline {
        Ok(false) => {
            out.merge(found);
            return;
        }
        Ok(true) => {}
        // The parser unwraps in places: fail closed.
        Err(_) => {
            out.unparsable("the shell command could not be analysed (analyser fault)");
            return;
        }
    }
    if STUCK.load(Ordering::Relaxed) >= MAX_STUCK {
        out.unparsable("the shell command was not analysed: earlier analyses are still stuck");
        return;
    }
    let Some(worker) = Worker::take() else {
        out.unparsable("the shell command could not be analysed (no analysis thread)");
        return;
    };
    let abandoned = Arc::new(Mutex::new(false));
    if worker
        .jobs
        .send((command, ctx.clone(), Arc::clone(&abandoned)))
        .is_err()
    {
        out.unparsable("the shell command could not be analysed (analyser fault)");
        return;
    }
    match worker.results.recv_timeout(DEADLINE) {
        Ok(found) => {
            out.merge(found);
            worker.put_back();
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let mut gave_up = abandoned.lock().unwrap_or_else(PoisonError::into_inner);
            if let Ok(found) = worker.results.try_recv() {
                // It finished just now.
                drop(gave_up);
                out.merge(found);
                worker.put_back();
                return;
            }
            // The worker is never reused: it uncounts itself and exits if it ever ends.
            *gave_up = true;
            STUCK.fetch_add(1, Ordering::Relaxed);
            out.unparsable(format!(
                "the shell command took longer than {}s to analyse",
                DEADLINE.as_secs()
            ));
        }
        // The worker panicked (the parser unwraps in places): fail closed; it is gone.
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            out.unparsable("the shell command could not be analysed (analyser fault)");
        }
    }
}

/// Walks `command` once per directory a `cd NAME` under a `CDPATH` of several entries may
/// land in (`CDPATH=/tmp:~ cd .ssh`): which entry holds NAME is the file system's to say
/// when the command runs, so the rest of the command is judged in each. Every `cd` of one
/// walk takes the same entry (the `pick`th, bounded). Returns whether an inline walk met
/// text that must be walked on an analysis thread.
fn walk_every_cd(command: &str, ctx: &Context, inline: bool, out: &mut Extracted) -> bool {
    let mut choices = 1;
    let mut pick = 0;
    while pick < choices {
        let mut found = Extracted::default();
        let mut walker = if inline {
            walk::Walker::inline(&mut found)
        } else {
            walk::Walker::new(&mut found)
        };
        walker.cd_pick = pick;
        walker.script(command, &mut ctx.clone(), 0);
        if walker.escalate {
            return true;
        }
        if walker.cd_choices > MAX_CD_CHOICES && pick == 0 {
            // Each directory more is one walk more: past the bound, fail closed rather
            // than judge the command in some of them only.
            walker.out.unparsable(format!(
                "a cd may land in more than {MAX_CD_CHOICES} directories of CDPATH"
            ));
        }
        choices = walker.cd_choices.clamp(1, MAX_CD_CHOICES);
        // Reasons the text could not be analysed are the same in every walk: once each.
        let reasons = std::mem::take(&mut found.unparsable);
        out.merge(found);
        for why in reasons {
            if !out.unparsable.contains(&why) {
                out.unparsable.push(why);
            }
        }
        pick += 1;
    }
    false
}

type Job = (String, Context, Arc<Mutex<bool>>);

/// A long-lived analysis thread with a big stack. Spawning one per command cost more than
/// the analysis itself (tens of microseconds); idle workers wait in a pool instead.
struct Worker {
    jobs: mpsc::Sender<Job>,
    results: mpsc::Receiver<Extracted>,
}

static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

impl Worker {
    fn take() -> Option<Self> {
        if let Some(w) = IDLE.lock().unwrap_or_else(PoisonError::into_inner).pop() {
            return Some(w);
        }
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (result_tx, results) = mpsc::channel();
        std::thread::Builder::new()
            .name("shell-extract".into())
            .stack_size(STACK_SIZE)
            .spawn(move || {
                while let Ok((command, ctx, abandoned)) = job_rx.recv() {
                    let mut found = Extracted::default();
                    walk_every_cd(&command, &ctx, false, &mut found);
                    let abandoned = abandoned.lock().unwrap_or_else(PoisonError::into_inner);
                    if *abandoned {
                        STUCK.fetch_sub(1, Ordering::Relaxed);
                        return;
                    }
                    // The caller holds the receiver while `abandoned` is false and we hold
                    // the lock.
                    if result_tx.send(found).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(Self { jobs, results })
    }

    fn put_back(self) {
        IDLE.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self);
    }
}
