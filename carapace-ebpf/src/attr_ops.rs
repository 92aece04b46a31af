//! The attribute hooks the `path_*` family lacks: times (`utimes`, `utimensat`, `futimens`,
//! `touch`) and extended attributes (`setxattr`, `removexattr`, POSIX ACLs), each judged as
//! a `write` of the file by the same matcher as opens.
//!
//! | hook | when | judged as |
//! |---|---|---|
//! | `inode_setattr` | the access or modification time alone is set | write (`path_op::UTIMES`) |
//! | `inode_setxattr`, `inode_removexattr` | any name | write (`path_op::XATTR`) |
//! | `inode_set_acl`, `inode_remove_acl` (6.2+; before, ACLs come as xattrs) | any ACL | write (`path_op::XATTR`) |
//! | `inode_getxattr` | a `user.*` or `trusted.*` name (data people and programs keep) | read (`path_op::XATTR_READ`) |
//!
//! Reads of `security.*` and `system.*` names are left alone: `ls -l` and `cp -a` read them
//! from every file, and they hold labels and ACLs, not data.
//!
//! Mode, owner and size changes also reach `inode_setattr`, but `path_chmod`,
//! `path_chown`, `path_truncate` and `file_open` judge those with their path already; this
//! hook leaves them alone so that each change is judged once.
//!
//! These hooks carry a dentry and no mount. The mount is found from the dentry's super
//! block: the task's root mount when the file is on the root's file system (the usual
//! case), else the first mount of that file system. Sessions may not mount, so a file
//! system mounted twice was mounted so from outside; the inode map still finds files the
//! rules protected by identity whichever mount the path is spelled through.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, path_op};

use crate::{dpath, gate, globals, kread, name_ops, EACCES};

/// `struct iattr::ia_valid` bits (include/linux/fs.h).
const ATTR_MODE: u32 = 1 << 0;
const ATTR_UID: u32 = 1 << 1;
const ATTR_GID: u32 = 1 << 2;
const ATTR_SIZE: u32 = 1 << 3;
const ATTR_ATIME: u32 = 1 << 4;
const ATTR_MTIME: u32 = 1 << 5;
const ATTR_OPEN: u32 = 1 << 15;
/// Changes another hook judges with the path in hand.
const JUDGED_ELSEWHERE: u32 = ATTR_MODE | ATTR_UID | ATTR_GID | ATTR_SIZE | ATTR_OPEN;

/// Linux 6.8 and later: `inode_setattr(idmap, dentry, attr)`.
#[lsm(hook = "inode_setattr")]
pub fn inode_setattr(ctx: LsmContext) -> i32 {
    setattr(&ctx, 1, 3)
}

/// Before Linux 6.8: `inode_setattr(dentry, attr)`. The loader attaches whichever of the
/// two this kernel declares.
#[lsm(hook = "inode_setattr")]
pub fn inode_setattr_v1(ctx: LsmContext) -> i32 {
    setattr(&ctx, 0, 2)
}

#[lsm(hook = "inode_setxattr")]
pub fn inode_setxattr(ctx: LsmContext) -> i32 {
    // inode_setxattr(idmap, dentry, name, value, size, flags)
    attribute(&ctx, 6)
}

#[lsm(hook = "inode_removexattr")]
pub fn inode_removexattr(ctx: LsmContext) -> i32 {
    // inode_removexattr(idmap, dentry, name)
    attribute(&ctx, 3)
}

#[lsm(hook = "inode_getxattr")]
pub fn inode_getxattr(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(2);
    if previous != 0 {
        return previous;
    }
    if !gate::in_session() || !holds_data(ctx.arg(1)) {
        return 0;
    }
    judge(ctx.arg(0), op::READ, path_op::XATTR_READ)
}

#[lsm(hook = "inode_set_acl")]
pub fn inode_set_acl(ctx: LsmContext) -> i32 {
    // inode_set_acl(idmap, dentry, acl_name, kacl)
    attribute(&ctx, 4)
}

#[lsm(hook = "inode_remove_acl")]
pub fn inode_remove_acl(ctx: LsmContext) -> i32 {
    // inode_remove_acl(idmap, dentry, acl_name)
    attribute(&ctx, 3)
}

/// `inode_setattr` with the dentry at `dentry_arg`, the `struct iattr *` after it and the
/// previous program's verdict at `previous_arg`.
#[inline(always)]
fn setattr(ctx: &LsmContext, dentry_arg: usize, previous_arg: usize) -> i32 {
    let previous: i32 = ctx.arg(previous_arg);
    if previous != 0 {
        return previous;
    }
    if !gate::in_session() {
        return 0;
    }
    let attr: *const u8 = ctx.arg(dentry_arg + 1);
    // `ia_valid` is the first member of `struct iattr`.
    let Some(valid) = kread::read::<u32>(attr, 0, errsite::PATH_WALK) else {
        return -EACCES;
    };
    if valid & (ATTR_ATIME | ATTR_MTIME) == 0 || valid & JUDGED_ELSEWHERE != 0 {
        return 0;
    }
    judge(ctx.arg(dentry_arg), op::WRITE, path_op::UTIMES)
}

/// An extended-attribute hook: the dentry second, the previous verdict at `previous_arg`.
#[inline(always)]
fn attribute(ctx: &LsmContext, previous_arg: usize) -> i32 {
    let previous: i32 = ctx.arg(previous_arg);
    if previous != 0 {
        return previous;
    }
    if !gate::in_session() {
        return 0;
    }
    judge(ctx.arg(1), op::WRITE, path_op::XATTR)
}

/// Whether the attribute `name` (a kernel string) is in a namespace that holds data:
/// `user.` or `trusted.`. Unreadable counts as one (fail closed).
#[inline(always)]
fn holds_data(name: *const u8) -> bool {
    let mut buf = core::mem::MaybeUninit::uninit();
    let word = kread::zero_in_place::<1>(&mut buf);
    if kread::read_str(name, kread::bytes_of(word), errsite::READ_INODE).is_none() {
        return true;
    }
    let bytes = word[0].to_ne_bytes();
    bytes.starts_with(b"user.") || bytes == *b"trusted."
}

/// Judges `ops` on `dentry` and reports a refusal with `kind`.
#[inline(always)]
fn judge(dentry: u64, ops: u32, kind: u32) -> i32 {
    let Some(mnt) = mount_of_dentry(dentry) else {
        return -EACCES;
    };
    if name_ops::refused(dentry, mnt, ops, 0, kind) {
        -EACCES
    } else {
        0
    }
}

/// A `struct vfsmount *` the dentry can be spelled through: the task's root mount when it
/// is of the dentry's file system, else the file system's first mount.
#[inline(never)]
fn mount_of_dentry(dentry: u64) -> Option<u64> {
    let sb = kread::read::<u64>(
        dentry as *const u8,
        globals::dentry_d_sb(),
        errsite::PATH_WALK,
    )?;
    let (_, root_mnt) = dpath::task_root()?;
    let root_sb = kread::read::<u64>(
        root_mnt as *const u8,
        globals::vfsmount_mnt_sb(),
        errsite::PATH_WALK,
    )?;
    if root_sb == sb {
        return Some(root_mnt);
    }
    // `s_mounts` is a list head through each mount's `mnt_instance` (empty: itself), or
    // from Linux 6.18 a pointer to the first mount (empty: null; the offset is then 0).
    let head = sb.wrapping_add(globals::sb_s_mounts());
    let first = kread::read::<u64>(head as *const u8, 0, errsite::PATH_WALK)?;
    if first == head || first == 0 {
        return None;
    }
    let mount = first.wrapping_sub(globals::mount_mnt_instance());
    Some(mount.wrapping_add(globals::mount_mnt()))
}
