//! The `path_*` hooks: every change of a name or of what a name holds, judged by the same
//! matcher as opens, on the path the task sees (`dpath`), with the operation it is:
//!
//! | hook | refused | judged as |
//! |---|---|---|
//! | `path_unlink`, `path_rmdir` | the name removed | `op::REMOVE` (delete, write) |
//! | `path_mknod` (`O_CREAT`, mknod), `path_mkdir`, `path_symlink` | the name made | `op::CREATE` (write) |
//! | `path_link` | the file linked / the new name | `op::IDENTITY` / `op::CREATE` |
//! | `path_rename` | the old name / the new name | `op::IDENTITY` / `op::CREATE`, plus `op::REMOVE` over an existing file; both `op::IDENTITY` for `RENAME_EXCHANGE` |
//! | `path_truncate`, `path_chmod`, `path_chown` | the file | write |
//!
//! A change of a name that can be a directory (mkdir, rmdir, unlink of what may be a
//! symlink to one, symlink, rename) is also judged for the name with a `/` after it, so that
//! a directory made, moved or removed where a protected tree's root would be (`/srv/secret`
//! for `/srv/secret/**`, `.git/hooks` for `**/.git/hooks/**`) is refused like a file in it.
//! mknod and a hard link's new name never make a directory and are judged once.
//!
//! `path_mknod` runs before `O_CREAT` makes the file (`may_o_create`), so a refused
//! creation leaves nothing behind. `open(O_TRUNC)` is judged by `file_open` as a write.
//!
//! What a record session was allowed to change here goes to its record (`touched::name`).

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{
    errsite, op, path_op, subject, PATH_MAX, RENAME_EXCHANGE, RULE_PATH_TOO_LONG,
};

use crate::{
    dpath::{self, Unspelled},
    event::{self, Subject},
    gate, globals, inode, kread,
    maps::{CONFIG, SCRATCH},
    matcher::{self, Object, PathSubject, Verdict},
    touched, EACCES,
};

/// `judge` flags. `BELOW`: judge the name with a trailing `/` too (a directory in a
/// protected tree's place). `CARRIES`: the name may carry a whole directory (a rename or a
/// symlink), whose files would come to lie under protected names: refuse it where it is a
/// directory above protected paths (`ANCESTORS`) or inside a pattern (`DFA_LIVE`).
const BELOW: u32 = 1;
const CARRIES: u32 = 2;

#[lsm(hook = "path_unlink")]
pub fn path_unlink(ctx: LsmContext) -> i32 {
    // path_unlink(dir, dentry)
    name_in_dir(&ctx, 2, op::REMOVE, BELOW, path_op::UNLINK)
}

#[lsm(hook = "path_rmdir")]
pub fn path_rmdir(ctx: LsmContext) -> i32 {
    // path_rmdir(dir, dentry)
    name_in_dir(&ctx, 2, op::REMOVE, BELOW, path_op::RMDIR)
}

#[lsm(hook = "path_mkdir")]
pub fn path_mkdir(ctx: LsmContext) -> i32 {
    // path_mkdir(dir, dentry, mode)
    name_in_dir(&ctx, 3, op::CREATE, BELOW, path_op::MKDIR)
}

#[lsm(hook = "path_mknod")]
pub fn path_mknod(ctx: LsmContext) -> i32 {
    // path_mknod(dir, dentry, mode, dev): mknod(2) and the creation of `O_CREAT`. Never a
    // directory, so not judged as one (`BELOW`): one matcher pass per new file.
    name_in_dir(&ctx, 4, op::CREATE, 0, path_op::CREATE)
}

#[lsm(hook = "path_symlink")]
pub fn path_symlink(ctx: LsmContext) -> i32 {
    // path_symlink(dir, dentry, old_name): the link's own name is judged; what it points
    // to is judged when something opens through it.
    name_in_dir(&ctx, 3, op::CREATE, BELOW | CARRIES, path_op::SYMLINK)
}

#[lsm(hook = "path_truncate")]
pub fn path_truncate(ctx: LsmContext) -> i32 {
    // path_truncate(path): truncate(2), and on kernels before 6.2 ftruncate and O_TRUNC.
    whole_path(&ctx, 1, path_op::TRUNCATE)
}

#[lsm(hook = "path_chmod")]
pub fn path_chmod(ctx: LsmContext) -> i32 {
    // path_chmod(path, mode): chmod, fchmod, fchmodat.
    whole_path(&ctx, 2, path_op::CHMOD)
}

#[lsm(hook = "path_chown")]
pub fn path_chown(ctx: LsmContext) -> i32 {
    // path_chown(path, uid, gid)
    whole_path(&ctx, 3, path_op::CHOWN)
}

#[lsm(hook = "path_link")]
pub fn path_link(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    if !gate::in_session() {
        return 0;
    }
    // path_link(old_dentry, new_dir, new_dentry): a link never crosses mounts (EXDEV), so
    // the old dentry is reached through the new directory's mount.
    let old: u64 = ctx.arg(0);
    let new_dir: *const u8 = ctx.arg(1);
    let new: u64 = ctx.arg(2);
    let Some(mnt) = mount_of(new_dir) else {
        return -EACCES;
    };
    if refused(old, mnt, op::IDENTITY, 0, path_op::LINK_FROM)
        || refused(new, mnt, op::CREATE, 0, path_op::LINK_ONTO)
    {
        -EACCES
    } else {
        touched::name(new, mnt, op::CREATE, path_op::LINK_ONTO);
        0
    }
}

#[lsm(hook = "path_rename")]
pub fn path_rename(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(5);
    if previous != 0 {
        return previous;
    }
    if !gate::in_session() {
        return 0;
    }
    // path_rename(old_dir, old_dentry, new_dir, new_dentry, flags)
    let old_dir: *const u8 = ctx.arg(0);
    let old: u64 = ctx.arg(1);
    let new_dir: *const u8 = ctx.arg(2);
    let new: u64 = ctx.arg(3);
    let flags: u32 = ctx.arg(4);
    let (Some(old_mnt), Some(new_mnt)) = (mount_of(old_dir), mount_of(new_dir)) else {
        return -EACCES;
    };
    let onto = if flags & RENAME_EXCHANGE != 0 {
        // Each name gets the other's file.
        op::IDENTITY
    } else if positive(new) {
        // The file there loses its name.
        op::CREATE | op::REMOVE
    } else {
        op::CREATE
    };
    if refused(
        old,
        old_mnt,
        op::IDENTITY,
        BELOW | CARRIES,
        path_op::RENAME_FROM,
    ) || refused(new, new_mnt, onto, BELOW | CARRIES, path_op::RENAME_ONTO)
    {
        -EACCES
    } else {
        touched::name(old, old_mnt, op::IDENTITY, path_op::RENAME_FROM);
        touched::name(new, new_mnt, onto, path_op::RENAME_ONTO);
        0
    }
}

/// A hook whose first two arguments are a directory (`struct path *`) and the dentry of a
/// name in it; `previous_arg` is the index of the previous program's verdict.
#[inline(always)]
fn name_in_dir(ctx: &LsmContext, previous_arg: usize, ops: u32, flags: u32, kind: u32) -> i32 {
    let previous: i32 = ctx.arg(previous_arg);
    if previous != 0 {
        return previous;
    }
    if !gate::in_session() {
        return 0;
    }
    let dir: *const u8 = ctx.arg(0);
    let dentry: u64 = ctx.arg(1);
    let Some(mnt) = mount_of(dir) else {
        return -EACCES;
    };
    if refused(dentry, mnt, ops, flags, kind) {
        -EACCES
    } else {
        touched::name(dentry, mnt, ops, kind);
        0
    }
}

/// A hook whose first argument is the `struct path *` of the file changed (a write).
#[inline(always)]
fn whole_path(ctx: &LsmContext, previous_arg: usize, kind: u32) -> i32 {
    let previous: i32 = ctx.arg(previous_arg);
    if previous != 0 {
        return previous;
    }
    if !gate::in_session() {
        return 0;
    }
    let path: *const u8 = ctx.arg(0);
    // One read after the other: as a pair, LLVM merged their failure paths into code that
    // reads a register some paths never set, which 6.1's verifier refuses.
    let Some(mnt) = mount_of(path) else {
        return -EACCES;
    };
    let Some(dentry) = kread::read::<u64>(path, globals::path_dentry(), errsite::PATH_WALK) else {
        return -EACCES;
    };
    if refused(dentry, mnt, op::WRITE, 0, kind) {
        -EACCES
    } else {
        touched::name(dentry, mnt, op::WRITE, kind);
        0
    }
}

/// The `struct vfsmount *` of a `struct path *`.
#[inline(always)]
pub fn mount_of(path: *const u8) -> Option<u64> {
    kread::read::<u64>(path, globals::path_mnt(), errsite::PATH_WALK)
}

/// Whether a dentry has a file (not a name about to be made).
#[inline(always)]
fn positive(dentry: u64) -> bool {
    kread::read::<u64>(
        dentry as *const u8,
        globals::dentry_d_inode(),
        errsite::PATH_WALK,
    )
    .is_none_or(|inode| inode != 0)
}

/// Judges `ops` on the name and reports a refusal with `kind`; true when refused.
#[inline(always)]
pub fn refused(dentry: u64, mnt: u64, ops: u32, flags: u32, kind: u32) -> bool {
    let verdict = judge(dentry, mnt, ops, flags);
    if verdict == 0 {
        return false;
    }
    report(verdict, kind)
}

/// Packs a verdict into the scalar a subprogram can return: the rule in the high half, the
/// operation bit in the low one (never 0: a verdict always names an operation).
#[inline(always)]
fn pack(v: Verdict) -> u64 {
    (u64::from(v.rule) << 32) | u64::from(v.op)
}

/// Judges `ops` on the path of `dentry` under the mount `mnt` (and, with the `flags`
/// `BELOW` and `CARRIES`, as above); a packed [`Verdict`], or 0 to allow. A subprogram
/// returning a scalar: the verifier checks it once per hook instead of once per caller state.
#[inline(never)]
pub fn judge(dentry: u64, mnt: u64, ops: u32, flags: u32) -> u64 {
    let Some(config) = CONFIG.get(0) else {
        return 0;
    };
    let ops = ops & config.path_rule_ops;
    if ops == 0 {
        return 0;
    }
    let len = match dpath::spell(dentry, mnt) {
        Ok(len) => len as usize,
        // Unmatchable names are refused for what a path rule covers, as `file_open` does.
        Err(Unspelled::TooLong | Unspelled::Failed) => {
            return pack(Verdict {
                rule: RULE_PATH_TOO_LONG,
                op: ops & ops.wrapping_neg(),
            })
        }
    };
    let Some(scratch) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let scratch = unsafe { &mut *scratch };
    let has_name = config.has & carapace_common::has::NAMES != 0
        && inode::name_of(dentry as *const u8, &mut scratch.name);
    let inode = if config.has & carapace_common::has::INODES != 0 {
        inode::of_dentry(dentry as *const u8)
    } else {
        None
    };
    let mut subject = PathSubject {
        scratch,
        len: len & (PATH_MAX - 1),
        has_name,
        inode,
        ancestors: flags & CARRIES != 0,
        live: false,
        object: Object::Dentry(dentry as *const u8),
    };
    if let Some(v) = matcher::check_path(&mut subject, config, ops) {
        return pack(v);
    }
    if flags & BELOW == 0 || len + 1 >= PATH_MAX || len <= 1 {
        return 0;
    }
    let at = len & (PATH_MAX - 1);
    subject.scratch.key.data[at] = b'/';
    subject.len = (len + 1) & (PATH_MAX - 1);
    subject.has_name = false;
    subject.inode = None;
    subject.object = Object::None;
    subject.ancestors = false;
    subject.live = flags & CARRIES != 0;
    let verdict = matcher::check_path(&mut subject, config, ops);
    // The message names the path itself.
    subject.scratch.key.data[at] = 0;
    verdict.map_or(0, pack)
}

/// Reports a refusal of `kind` on the path left in the scratch key; true when it stands
/// (see `event::emit`; unreported, it stands).
#[inline(never)]
pub fn report(verdict: u64, kind: u32) -> bool {
    let (Some(session), Some(scratch)) = (gate::member_session(), SCRATCH.get_ptr(0)) else {
        return true;
    };
    let verdict = Verdict {
        rule: (verdict >> 32) as u32,
        op: verdict as u32,
    };
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let path = unsafe { &(*scratch).key.data };
    event::emit(
        &session,
        verdict,
        &Subject::named(subject::PATH, Some(path), kind),
    )
}
