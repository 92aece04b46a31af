//! `ptrace_access_check`: a session may not reach into any process outside it — trace it,
//! read or write its memory (`/proc/PID/mem`, `process_vm_readv`/`writev`), take its
//! descriptors (`pidfd_getfd`, `/proc/PID/fd/N`), read its environment, or open through its
//! `cwd` and `root` links. Every one of those asks `ptrace_may_access` first. A process
//! outside the session (the user's shell, an editor, `carapaced`) works with the user's
//! authority, not the agent's rules; the session's own processes stay open to its debuggers.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, subject};

use crate::{event::Subject, gate, globals, guard, kread, EACCES};

/// `PTRACE_MODE_NOAUDIT`: the caller only asks, to decide what to show (`/proc/PID/stat`'s
/// addresses for `ps`); refused quietly, as the kernel's own checks do.
const MODE_NOAUDIT: u32 = 0x04;

#[lsm(hook = "ptrace_access_check")]
pub fn ptrace_access_check(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(2);
    if previous != 0 {
        return previous;
    }
    crate::verdict(try_ptrace(&ctx))
}

fn try_ptrace(ctx: &LsmContext) -> Option<i32> {
    let session = gate::current_session()?;
    // ptrace_access_check(child, mode)
    let child: u64 = ctx.arg(0);
    let mode: u32 = ctx.arg(1);
    if gate::task_within(child, session.cgroup) {
        return None;
    }
    if mode & MODE_NOAUDIT != 0 {
        return Some(-EACCES);
    }
    let tgid = kread::read::<i32>(child as *const u8, globals::task_tgid(), errsite::READ_TASK)
        .map_or(0, |t| t as u32);
    let kind = if tgid == globals::daemon_tgid() {
        subject::TASK
    } else {
        subject::PROCESS
    };
    Some(guard::deny(
        &session,
        op::PTRACE,
        &Subject::bare(kind, tgid),
    ))
}
