//! Leaving the session's cgroup through a cgroup file system: opening `cgroup.procs`,
//! `cgroup.threads` or (cgroup v1) `tasks` for writing anywhere but inside the session's own
//! cgroup tree. Checked by `file_open` on write opens only, in every session whatever its
//! rules, and the name is compared only on a cgroup file system, so ordinary writes pay two
//! reads.

use carapace_common::{errsite, op, path_op, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC};

use crate::{gate::Session, globals, guard, kread};

/// cgroup levels walked up from a `cgroup.procs` file looking for the session's cgroup;
/// deeper trees are denied (fail closed).
const MAX_DEPTH: usize = 16;

/// `Some(-EACCES)` when opening `file` for writing would let the caller move a process out
/// of its session.
///
/// A subprogram: the exits of the ancestor walk merge at its return instead of each
/// carrying on through the rule matcher that follows it in `file_open`, which took 6.1's
/// verifier past its limit (E2BIG) when the two were one inlined body.
#[inline(never)]
pub fn check(session: &Session, file: *const u8) -> Option<i32> {
    let inode = kread::read::<*const u8>(file, globals::file_f_inode(), errsite::READ_INODE)?;
    let sb = kread::read::<*const u8>(inode, globals::inode_i_sb(), errsite::READ_INODE)?;
    let magic = kread::read::<u64>(sb, globals::sb_s_magic(), errsite::READ_INODE)?;
    if magic != CGROUP2_SUPER_MAGIC && magic != CGROUP_SUPER_MAGIC {
        return None;
    }
    let f_path = file.wrapping_add(globals::file_f_path());
    let dentry = kread::read::<*const u8>(f_path, globals::path_dentry(), errsite::READ_INODE)?;
    if !is_migration_file(dentry) {
        return None;
    }
    // On cgroup2 a directory's inode number is its cgroup id: a file below the session's
    // own cgroup moves processes within the session, which is allowed here (rules on the
    // cgroup tree may still refuse it). cgroup v1 hierarchies never hold the session.
    if magic == CGROUP2_SUPER_MAGIC && under_cgroup(dentry, session.cgroup) {
        return None;
    }
    Some(guard::deny_file(session, op::WRITE, file, path_op::OPEN))
}

/// Whether the dentry's name is `cgroup.procs`, `cgroup.threads` or `tasks`.
#[inline(always)]
fn is_migration_file(dentry: *const u8) -> bool {
    let d_name = dentry.wrapping_add(globals::dentry_d_name());
    let Some(ptr) = kread::read::<*const u8>(d_name, globals::qstr_name(), errsite::READ_INODE)
    else {
        // Unreadable: treat it as one, fail closed.
        return true;
    };
    let mut buf = core::mem::MaybeUninit::uninit();
    let name = kread::zero_in_place::<2>(&mut buf);
    if kread::read_str(ptr, kread::bytes_of(name), errsite::READ_INODE).is_none() {
        return true;
    }
    *name == words(b"cgroup.procs\0\0\0\0")
        || *name == words(b"cgroup.threads\0\0")
        || *name == words(b"tasks\0\0\0\0\0\0\0\0\0\0\0")
}

/// Whether one of `dentry`'s ancestors is the directory of cgroup `cgroup`.
#[inline(always)]
fn under_cgroup(dentry: *const u8, cgroup: u64) -> bool {
    let mut d = dentry;
    for _ in 0..MAX_DEPTH {
        let Some(parent) =
            kread::read::<*const u8>(d, globals::dentry_d_parent(), errsite::READ_INODE)
        else {
            return false;
        };
        if parent.is_null() || parent == d {
            return false;
        }
        d = parent;
        let Some(inode) =
            kread::read::<*const u8>(d, globals::dentry_d_inode(), errsite::READ_INODE)
        else {
            return false;
        };
        if kread::read::<u64>(inode, globals::inode_i_ino(), errsite::READ_INODE) == Some(cgroup) {
            return true;
        }
    }
    false
}

#[inline(always)]
const fn words(name: &[u8; 16]) -> [u64; 2] {
    let mut lo = [0; 8];
    let mut hi = [0; 8];
    let mut i = 0;
    while i < 8 {
        lo[i] = name[i];
        hi[i] = name[8 + i];
        i += 1;
    }
    [u64::from_ne_bytes(lo), u64::from_ne_bytes(hi)]
}
