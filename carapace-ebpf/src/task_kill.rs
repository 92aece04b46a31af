//! `task_kill`: no signal from a session reaches `carapaced` (any thread of it), whether sent
//! by `kill`, `tgkill`, `pidfd_send_signal` or `sigqueue`.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, subject};

use crate::{event::Subject, gate, globals, guard, kread};

#[lsm(hook = "task_kill")]
pub fn task_kill(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(4);
    if previous != 0 {
        return previous;
    }
    try_task_kill(&ctx).unwrap_or(0)
}

fn try_task_kill(ctx: &LsmContext) -> Option<i32> {
    let session = gate::current_session()?;
    let daemon = globals::daemon_tgid();
    let sig: i32 = ctx.arg(2);
    // Signal 0 only asks whether the process exists.
    if daemon == 0 || sig == 0 {
        return None;
    }
    let target: *const u8 = ctx.arg(0);
    // A tgid that cannot be read may be the daemon's: fail closed.
    let tgid = kread::read::<i32>(target, globals::task_tgid(), errsite::READ_TASK)
        .map_or(daemon, |t| t as u32);
    if tgid != daemon {
        return None;
    }
    Some(guard::deny(
        &session,
        op::SIGNAL,
        &Subject::bare(subject::TASK, tgid),
    ))
}
