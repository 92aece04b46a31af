//! Private views of the file system, refused in sessions under a `view:` rule (the built-in
//! pack `private-views` holds one): `chroot` (`path_chroot`, in `path_cache`) and new user
//! namespaces (`userns_create`, Linux 6.1+). Inside a user namespace, mount namespaces and
//! `chroot` need no host privilege; every path the hooks spell is relative to the task's
//! root, so a private root would let a protected file be reached under another name.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, path_op, subject, PATH_MAX};

use crate::{
    dpath,
    event::{self, Subject},
    gate::{self, Session},
    globals, kread,
    maps::{CONFIG, RULES, SCRATCH},
    matcher::Verdict,
};

#[lsm(hook = "userns_create")]
pub fn userns_create(ctx: LsmContext) -> i32 {
    // userns_create(cred)
    let previous: i32 = ctx.arg(1);
    if previous != 0 {
        return previous;
    }
    let Some(session) = gate::current_session() else {
        return 0;
    };
    let Some(verdict) = in_force(&session, op::USERNS) else {
        return 0;
    };
    event::answer(event::emit(
        &session,
        verdict,
        &Subject::bare(subject::NONE, 0),
    ))
}

/// Whether a `chroot` to `path` (a `struct path *`) is refused, reporting it if so.
#[inline(always)]
pub fn chroot_refused(path: *const u8) -> bool {
    let Some(session) = gate::current_session() else {
        return false;
    };
    let Some(verdict) = in_force(&session, op::CHROOT) else {
        return false;
    };
    let spelled = match (
        crate::name_ops::mount_of(path),
        kread::read::<u64>(path, globals::path_dentry(), errsite::PATH_WALK),
    ) {
        (Some(mnt), Some(dentry)) => dpath::spell(dentry, mnt).is_ok(),
        _ => false,
    };
    let scratch = SCRATCH.get_ptr(0);
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let new_root: Option<&[u8; PATH_MAX]> = scratch
        .filter(|_| spelled)
        .map(|s| unsafe { &(*s).key.data });
    event::emit(
        &session,
        verdict,
        &Subject::named(subject::PATH, new_root, path_op::CHROOT),
    )
}

/// The verdict of the `view:` rule that refuses `view` (`op::CHROOT` or `op::USERNS`), when
/// there is one and it is in force for the session.
#[inline(always)]
fn in_force(session: &Session, view: u32) -> Option<Verdict> {
    let config = CONFIG.get(0)?;
    let slot = if view == op::CHROOT {
        config.chroot_rule
    } else {
        config.userns_rule
    };
    let rule = slot.checked_sub(1)?;
    let meta = RULES.get(rule)?;
    session
        .state
        .is_active(rule, meta)
        .then_some(Verdict { rule, op: view })
}
