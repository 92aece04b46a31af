//! Landlock's access rights as the kernel numbers them (include/uapi/linux/landlock.h) and the
//! ABI query. The grants are computed on these plain bit sets; the `landlock` crate builds
//! and applies the ruleset from them (`super::prepare`).

/// Filesystem access rights (`LANDLOCK_ACCESS_FS_*`).
pub mod fs {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    /// ABI 2.
    pub const REFER: u64 = 1 << 13;
    /// ABI 3.
    pub const TRUNCATE: u64 = 1 << 14;
    /// ABI 5.
    pub const IOCTL_DEV: u64 = 1 << 15;

    pub const MAKE_ANY: u64 =
        MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM;
    pub const REMOVE_ANY: u64 = REMOVE_DIR | REMOVE_FILE;
    /// The rights a rule on a file (not a directory) may carry.
    pub const ON_FILES: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;

    /// Every filesystem right the given ABI knows.
    #[must_use]
    pub fn known(abi: u32) -> u64 {
        let mut all = (1 << 13) - 1;
        if abi >= 2 {
            all |= REFER;
        }
        if abi >= 3 {
            all |= TRUNCATE;
        }
        if abi >= 5 {
            all |= IOCTL_DEV;
        }
        all
    }
}

/// Network access rights (`LANDLOCK_ACCESS_NET_*`, ABI 4).
pub mod net {
    pub const CONNECT_TCP: u64 = 1 << 1;
}

const CREATE_RULESET_VERSION: u32 = 1 << 0;

/// The Landlock ABI version of the running kernel; `None` when Landlock is not built in or
/// not in the kernel's LSM list. (The `landlock` crate adapts to the ABI but does not tell
/// which it is; the report and `carapace status` name it.)
#[must_use]
pub fn abi() -> Option<u32> {
    // SAFETY: with a null attribute and size 0, the VERSION flag only queries the ABI.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(r).ok().filter(|v| *v > 0)
}
