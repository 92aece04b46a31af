//! Signals by I/O. `F_SETOWN` / `F_SETOWN_EX` (`fcntl`) and `FIOSETOWN` / `SIOCSPGRP`
//! (`ioctl`) name the process the kernel signals when a file is ready, and `F_SETSIG` picks
//! the signal (`SIGKILL` included): a signal `task_kill` never sees, sent with the setter's
//! uid. In a session the owner may only be none, the caller's own process or thread, or its
//! own process group; another process of the session cannot be named either (the kernel
//! offers no lookup from a pid number on every kernel this runs on), which nothing an agent
//! runs is known to need.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user},
    macros::lsm,
    programs::LsmContext,
};
use carapace_common::{op, subject};

use crate::{event::Subject, gate, guard, EACCES};

/// `fcntl` commands (include/uapi/asm-generic/fcntl.h) and `f_owner_ex` types.
const F_SETOWN: u32 = 8;
const F_SETOWN_EX: u32 = 15;
const F_OWNER_PGRP: i32 = 2;

#[lsm(hook = "file_fcntl")]
pub fn file_fcntl(ctx: LsmContext) -> i32 {
    // file_fcntl(file, cmd, arg)
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    let cmd: u32 = ctx.arg(1);
    let arg: u64 = ctx.arg(2);
    let owner = match cmd {
        // A pid, or a process group as its negative.
        F_SETOWN => i64::from(arg as i32),
        F_SETOWN_EX => {
            // SAFETY: the helper checks the user address; `struct f_owner_ex` is two ints.
            match unsafe { bpf_probe_read_user(arg as *const [i32; 2]) } {
                Ok([kind, pid]) if kind == F_OWNER_PGRP => -i64::from(pid),
                Ok([_, pid]) => i64::from(pid),
                // Unreadable: the kernel's own copy fails the same way.
                Err(_) => return 0,
            }
        }
        _ => return 0,
    };
    verdict(owner)
}

/// `FIOSETOWN` / `SIOCSPGRP`: `arg` points at the owner (a pid, or a group as its negative).
#[inline(always)]
pub fn ioctl_owner(arg: u64) -> i32 {
    // SAFETY: the helper checks the user address.
    match unsafe { bpf_probe_read_user(arg as *const i32) } {
        Ok(owner) => verdict(i64::from(owner)),
        Err(_) => 0,
    }
}

#[inline(always)]
fn verdict(owner: i64) -> i32 {
    if foreign(owner) {
        -EACCES
    } else {
        0
    }
}

/// Whether `owner` is someone else than the caller (reported), the caller being in a
/// session. A subprogram.
#[inline(never)]
fn foreign(owner: i64) -> bool {
    if owner == 0 {
        return false;
    }
    let Some(session) = gate::current_session() else {
        return false;
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    let (tgid, thread) = (
        i64::from((pid_tgid >> 32) as u32),
        i64::from(pid_tgid as u32),
    );
    if owner == tgid || owner == thread || owner == -tgid {
        return false;
    }
    guard::deny(
        &session,
        op::SIGNAL,
        &Subject::bare(subject::PROCESS, owner.unsigned_abs() as u32),
    );
    true
}
