//! `file_ioctl` (and `file_ioctl_compat`, Linux 6.8+, for 32-bit callers).
//!
//! A session may not type into a terminal. `TIOCSTI` pushes bytes into a terminal's input
//! as if typed, and `TIOCLINUX` pastes the console's selection: the shell reading that
//! terminal — the user's, outside the session — would run them with the user's authority.
//! Refused on every terminal, whatever the rules; nothing an agent does needs either.
//!
//! Setting the owner of a file's I/O signals (`FIOSETOWN`, `SIOCSPGRP`) is judged as
//! `fcntl(F_SETOWN)` is (`sigio`).
//!
//! Inode flags (`chattr`: `FS_IOC_SETFLAGS`, `FS_IOC_FSSETXATTR`) are a write of the file,
//! judged by the rules like one: the kernel lets the owner change them through a descriptor
//! opened read-only, so the open's own judgement does not cover them.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{
    errsite, op, path_op, subject, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR, FS_IOC_SETFLAGS,
    TIOCLINUX, TIOCSTI,
};

use crate::{event::Subject, gate, globals, guard, kread, name_ops, sigio, EACCES};

/// `ioctl`s that name the owner of a file's I/O signals (see `sigio`).
const FIOSETOWN: u32 = 0x8901;
const SIOCSPGRP: u32 = 0x8902;

#[lsm(hook = "file_ioctl")]
pub fn file_ioctl(ctx: LsmContext) -> i32 {
    judge(&ctx)
}

#[lsm(hook = "file_ioctl_compat")]
pub fn file_ioctl_compat(ctx: LsmContext) -> i32 {
    judge(&ctx)
}

/// Both hooks take (file, cmd, arg).
#[inline(always)]
fn judge(ctx: &LsmContext) -> i32 {
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    // The command first: every ioctl on the machine passes here.
    let cmd: u32 = ctx.arg(1);
    if cmd == FS_IOC_SETFLAGS || cmd == FS_IOC32_SETFLAGS || cmd == FS_IOC_FSSETXATTR {
        return inode_flags(ctx.arg(0));
    }
    if cmd == FIOSETOWN || cmd == SIOCSPGRP {
        return sigio::ioctl_owner(ctx.arg(2));
    }
    if cmd != TIOCSTI && cmd != TIOCLINUX {
        return 0;
    }
    let Some(session) = gate::current_session() else {
        return 0;
    };
    guard::deny(&session, op::TTY_INPUT, &Subject::bare(subject::TTY, cmd))
}

/// Judges an inode flag change of `file` as a write of its path.
#[inline(always)]
fn inode_flags(file: *const u8) -> i32 {
    if !gate::in_session() {
        return 0;
    }
    let path = file.wrapping_add(globals::file_f_path());
    let Some(mnt) = name_ops::mount_of(path) else {
        return -EACCES;
    };
    let Some(dentry) = kread::read::<u64>(path, globals::path_dentry(), errsite::PATH_WALK) else {
        return -EACCES;
    };
    if name_ops::refused(dentry, mnt, op::WRITE, 0, path_op::INODE_FLAGS) {
        -EACCES
    } else {
        0
    }
}
