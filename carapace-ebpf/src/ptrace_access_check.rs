//! `ptrace_access_check`: a session may not trace `carapaced` nor read or write its memory
//! (`ptrace`, `/proc/PID/mem`, `process_vm_readv`/`writev`, `/proc/PID/environ`, …).

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, subject};

use crate::{event::Subject, gate, globals, guard, kread};

#[lsm(hook = "ptrace_access_check")]
pub fn ptrace_access_check(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(2);
    if previous != 0 {
        return previous;
    }
    try_ptrace(&ctx).unwrap_or(0)
}

fn try_ptrace(ctx: &LsmContext) -> Option<i32> {
    let session = gate::current_session()?;
    let daemon = globals::daemon_tgid();
    if daemon == 0 {
        return None;
    }
    let child: *const u8 = ctx.arg(0);
    let tgid = kread::read::<i32>(child, globals::task_tgid(), errsite::READ_TASK)
        .map_or(daemon, |t| t as u32);
    if tgid != daemon {
        return None;
    }
    Some(guard::deny(
        &session,
        op::PTRACE,
        &Subject::bare(subject::TASK, tgid),
    ))
}
