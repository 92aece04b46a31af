//! A session may not act on processes outside it: signal them (`task_kill`: `kill`,
//! `tgkill`, `pidfd_send_signal`, `sigqueue`), or change their resource limits, priority,
//! scheduling or memory placement (`task_setrlimit`, `task_setnice`, `task_setioprio`,
//! `task_setscheduler`, `task_movememory`). A process outside the session (the user's
//! shell, editor, servers, `carapaced`) runs with the user's authority: an agent that could
//! kill it, lower its file limit to 3 or starve it could break it or the floor itself.
//! Signal 0 only asks whether a process exists and stays allowed.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, subject};

use crate::{event::Subject, gate, globals, guard, kread, EACCES};

#[lsm(hook = "task_kill")]
pub fn task_kill(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(4);
    if previous != 0 {
        return previous;
    }
    // task_kill(p, info, sig, cred)
    let sig: i32 = ctx.arg(2);
    if sig == 0 {
        return 0;
    }
    refuse(ctx.arg(0), op::SIGNAL)
}

#[lsm(hook = "task_setrlimit")]
pub fn task_setrlimit(ctx: LsmContext) -> i32 {
    // task_setrlimit(p, resource, new_rlim)
    control(&ctx, 3)
}

#[lsm(hook = "task_setnice")]
pub fn task_setnice(ctx: LsmContext) -> i32 {
    // task_setnice(p, nice)
    control(&ctx, 2)
}

#[lsm(hook = "task_setioprio")]
pub fn task_setioprio(ctx: LsmContext) -> i32 {
    // task_setioprio(p, ioprio)
    control(&ctx, 2)
}

#[lsm(hook = "task_setscheduler")]
pub fn task_setscheduler(ctx: LsmContext) -> i32 {
    // task_setscheduler(p)
    control(&ctx, 1)
}

#[lsm(hook = "task_movememory")]
pub fn task_movememory(ctx: LsmContext) -> i32 {
    // task_movememory(p)
    control(&ctx, 1)
}

/// A hook whose first parameter is the target task and `previous_arg` the previous verdict.
#[inline(always)]
fn control(ctx: &LsmContext, previous_arg: usize) -> i32 {
    let previous: i32 = ctx.arg(previous_arg);
    if previous != 0 {
        return previous;
    }
    refuse(ctx.arg(0), op::TASK_CONTROL)
}

/// The hook's verdict as a constant the verifier can bound.
#[inline(always)]
fn refuse(target: u64, op: u32) -> i32 {
    if outside(target, op) {
        -EACCES
    } else {
        0
    }
}

/// Whether `op` on `target` (a `struct task_struct *`) is refused, reported: the caller is
/// in a session and the target is not. A subprogram shared by the hooks.
#[inline(never)]
fn outside(target: u64, op: u32) -> bool {
    let Some(session) = gate::current_session() else {
        return false;
    };
    if gate::task_within(target, session.cgroup) {
        return false;
    }
    let daemon = globals::daemon_tgid();
    // A tgid that cannot be read may be the daemon's: reported as it.
    let tgid = kread::read::<i32>(
        target as *const u8,
        globals::task_tgid(),
        errsite::READ_TASK,
    )
    .map_or(daemon, |t| t as u32);
    let kind = if tgid == daemon && daemon != 0 {
        subject::TASK
    } else {
        subject::PROCESS
    };
    guard::deny(&session, op, &Subject::bare(kind, tgid));
    true
}
