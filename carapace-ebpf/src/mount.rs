//! `sb_mount`, `sb_umount`, `move_mount`, `sb_pivotroot`: a session changes no mount, with
//! the old or the new mount API and in any mount namespace (a bind mount could lay an
//! unprotected path over a protected file; an unmount could uncover one).

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, mount_kind, op, subject};

use crate::{event::Subject, gate, guard, kread, maps::SCRATCH};

#[lsm(hook = "sb_mount")]
pub fn sb_mount(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(5);
    if previous != 0 {
        return previous;
    }
    let Some(session) = gate::current_session() else {
        return 0;
    };
    let dev_name: *const u8 = ctx.arg(0);
    let mut subject = Subject::bare(subject::MOUNT, mount_kind::MOUNT);
    // The source (device, directory of a bind mount, or the file system's name) for the
    // message; a mount without one is denied all the same.
    if let Some(ptr) = SCRATCH.get_ptr_mut(0) {
        // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
        let scratch = unsafe { &mut *ptr };
        kread::zero_words(&mut scratch.key.data);
        if !dev_name.is_null()
            && kread::read_str(dev_name, &mut scratch.key.data, errsite::READ_INODE).is_some()
        {
            subject.path = Some(&scratch.key.data);
        }
    }
    guard::deny(&session, op::MOUNT, &subject)
}

#[lsm(hook = "sb_umount")]
pub fn sb_umount(ctx: LsmContext) -> i32 {
    deny_mount(&ctx, 2, op::UNMOUNT, mount_kind::UNMOUNT)
}

#[lsm(hook = "move_mount")]
pub fn move_mount(ctx: LsmContext) -> i32 {
    deny_mount(&ctx, 2, op::MOUNT, mount_kind::MOVE_MOUNT)
}

#[lsm(hook = "sb_pivotroot")]
pub fn sb_pivotroot(ctx: LsmContext) -> i32 {
    deny_mount(&ctx, 2, op::MOUNT, mount_kind::PIVOT_ROOT)
}

#[inline(always)]
fn deny_mount(ctx: &LsmContext, previous_arg: usize, op: u32, kind: u32) -> i32 {
    let previous: i32 = ctx.arg(previous_arg);
    if previous != 0 {
        return previous;
    }
    match gate::current_session() {
        Some(session) => guard::deny(&session, op, &Subject::bare(subject::MOUNT, kind)),
        None => 0,
    }
}
