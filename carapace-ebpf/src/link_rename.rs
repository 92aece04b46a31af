//! `inode_link` and `inode_rename`: a session may not give a protected file a new name. A
//! hard link or a move out of a protected tree would let later opens under the new path slip
//! past path rules, for files whose inode the daemon did not record (made after the rules
//! loaded). The file and each of its ancestors (bounded) are looked up in the inode map,
//! where the daemon records the files and directories of every protected tree.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, path_op, subject, PATH_MAX};

use crate::{
    event::{self, Subject},
    gate::{self, Session},
    globals, inode, kread,
    maps::{CONFIG, SCRATCH},
    matcher::{self, Verdict},
};

/// Ancestors looked at above the file; deeper protected trees are still matched by path on
/// every open, this bound only limits which new names are refused.
const MAX_DEPTH: usize = 32;

#[lsm(hook = "inode_link")]
pub fn inode_link(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    // inode_link(old_dentry, dir, new_dentry)
    crate::verdict(check_rename(ctx.arg(0), path_op::LINK_FROM))
}

#[lsm(hook = "inode_rename")]
pub fn inode_rename(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(4);
    if previous != 0 {
        return previous;
    }
    // inode_rename(old_dir, old_dentry, new_dir, new_dentry); an exchange calls it both ways.
    crate::verdict(check_rename(ctx.arg(1), path_op::RENAME_FROM))
}

fn check_rename(dentry: *const u8, kind: u32) -> Option<i32> {
    let session = gate::current_session()?;
    let config = CONFIG.get(0)?;
    let ops = config.path_rule_ops & op::IDENTITY;
    if ops == 0 {
        return None;
    }
    let verdict = protected(dentry, ops)?;
    event::denial(deny(
        &session,
        verdict,
        &Subject::named(subject::PATH, None, kind),
        dentry,
    ))
}

/// The first rule in force that protects `dentry` or one of its ancestors by inode.
#[inline(always)]
fn protected(dentry: *const u8, ops: u32) -> Option<Verdict> {
    let mut d = dentry;
    for _ in 0..MAX_DEPTH {
        if let Some(key) = inode::of_dentry(d) {
            if let Some(v) = matcher::check_inode(&key, ops) {
                return Some(v);
            }
        }
        let parent: *const u8 = kread::read(d, globals::dentry_d_parent(), errsite::READ_INODE)?;
        // The root of a filesystem is its own parent.
        if parent.is_null() || parent == d {
            return None;
        }
        d = parent;
    }
    None
}

/// Reports the denial of `what` (its kind and detail) with the file's name (a dentry has no
/// full path at hand); true when it stands (see `event::emit`; unreported, it stands).
pub fn deny(session: &Session, verdict: Verdict, what: &Subject<'_>, dentry: *const u8) -> bool {
    let Some(scratch) = SCRATCH.get_ptr_mut(0) else {
        return true;
    };
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let scratch = unsafe { &mut *scratch };
    kread::zero_words(&mut scratch.key.data);
    let d_name = dentry.wrapping_add(globals::dentry_d_name());
    if let Some(name) = kread::read::<*const u8>(d_name, globals::qstr_name(), errsite::READ_INODE)
    {
        let _ = kread::read_str(
            name,
            &mut scratch.key.data[..PATH_MAX / 2],
            errsite::READ_INODE,
        );
    }
    let subject = Subject::named(what.kind, Some(&scratch.key.data), what.detail);
    event::emit(session, verdict, &subject)
}
