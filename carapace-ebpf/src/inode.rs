//! A dentry's inode identity, as the inode map keys it.

use carapace_common::{errsite, InodeKey};

use crate::{globals, kread};

#[inline(always)]
pub fn of_dentry(dentry: *const u8) -> Option<InodeKey> {
    let inode: *const u8 = kread::read(dentry, globals::dentry_d_inode(), errsite::READ_INODE)?;
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
