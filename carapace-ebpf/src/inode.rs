//! What the programs read of a dentry: its inode identity, as the inode map keys it, and
//! its name, as the basename map keys it.

use carapace_common::{errsite, InodeKey, NAME_MAX};

use crate::{globals, kread};

#[inline(always)]
pub fn of_dentry(dentry: *const u8) -> Option<InodeKey> {
    of_inode(kread::read(
        dentry,
        globals::dentry_d_inode(),
        errsite::READ_INODE,
    )?)
}

/// The identity of the inode a `struct file *` is open on.
#[inline(always)]
pub fn of_file(file: *const u8) -> Option<InodeKey> {
    of_inode(kread::read(
        file,
        globals::file_f_inode(),
        errsite::READ_INODE,
    )?)
}

/// The identity of the inode a `struct file *` is open on, if a fanotify group still asks
/// for permission events on opens of it (`carapace_common::FS_OPEN_PERMS` in its
/// `i_fsnotify_mask`): the marks of a `carapaced` that died are gone with it.
#[inline(always)]
pub fn held_file(file: *const u8) -> Option<InodeKey> {
    let inode = kread::read::<*const u8>(file, globals::file_f_inode(), errsite::READ_INODE)?;
    if inode.is_null() {
        return None;
    }
    let mask = kread::read::<u32>(inode, globals::inode_i_fsnotify_mask(), errsite::READ_INODE)?;
    if mask & carapace_common::FS_OPEN_PERMS == 0 {
        return None;
    }
    of_inode(inode)
}

/// An inode's identity (device, number); `None` for a negative dentry's null inode.
#[inline(always)]
fn of_inode(inode: *const u8) -> Option<InodeKey> {
    if inode.is_null() {
        return None;
    }
    let ino = kread::read::<u64>(inode, globals::inode_i_ino(), errsite::READ_INODE)?;
    let sb = kread::read::<*const u8>(inode, globals::inode_i_sb(), errsite::READ_INODE)?;
    let dev = kread::read::<u32>(sb, globals::sb_s_dev(), errsite::READ_INODE)?;
    Some(InodeKey {
        dev: u64::from(dev),
        ino,
    })
}

/// The dentry's name into `name` (zero-tailed); false when it cannot be read or fills the
/// buffer (it may have been cut short, and no basename rule is that long).
#[inline(always)]
pub fn name_of(dentry: *const u8, name: &mut [u8; NAME_MAX]) -> bool {
    kread::zero_words(name);
    let d_name = dentry.wrapping_add(globals::dentry_d_name());
    let Some(ptr) = kread::read::<*const u8>(d_name, globals::qstr_name(), errsite::READ_INODE)
    else {
        return false;
    };
    matches!(kread::read_str(ptr, name, errsite::READ_INODE), Some(n) if n < NAME_MAX)
}
