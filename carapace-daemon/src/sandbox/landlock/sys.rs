//! The Landlock system calls and constants (include/uapi/linux/landlock.h), used raw so that
//! the one call made between fork and exec, [`Ruleset::restrict_self`], is a bare syscall.
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

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
const RULE_PATH_BENEATH: libc::c_int = 1;
const RULE_NET_PORT: libc::c_int = 2;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// The Landlock ABI version of the running kernel; `None` when Landlock is not built in or
/// not in the kernel's LSM list.
#[must_use]
pub fn abi() -> Option<u32> {
    // SAFETY: with a null attribute and size 0, the VERSION flag only queries the ABI.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(r).ok().filter(|v| *v > 0)
}

/// A ruleset under construction, then applied with [`Ruleset::restrict_self`].
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
}

impl Ruleset {
    /// A ruleset that handles (denies unless granted) `fs_rights` and `net_rights`.
    pub fn new(abi: u32, fs_rights: u64, net_rights: u64) -> io::Result<Self> {
        let attr = RulesetAttr {
            handled_access_fs: fs_rights,
            handled_access_net: net_rights,
        };
        // Kernels before ABI 4 know only the first field; the size tells them which.
        let size = if abi >= 4 {
            std::mem::size_of::<RulesetAttr>()
        } else {
            std::mem::size_of::<u64>()
        };
        // SAFETY: `attr` is a valid ruleset attribute of at least `size` bytes that outlives
        // the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::from_ref(&attr),
                size,
                0u32,
            )
        };
        let fd = i32::try_from(r)
            .ok()
            .filter(|fd| *fd >= 0)
            .ok_or_else(io::Error::last_os_error)?;
        // SAFETY: the kernel just returned this new file descriptor (close-on-exec); nothing
        // else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Grants `rights` on `path` and everything beneath it (path resolved as given, the last
    /// component not followed if it is a symlink).
    pub fn allow_path(&self, path: &CStr, rights: u64) -> io::Result<()> {
        // SAFETY: `path` is NUL-terminated; O_PATH opens no file content.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned here only.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let attr = PathBeneathAttr {
            allowed_access: rights,
            parent_fd: fd.as_raw_fd(),
        };
        // SAFETY: `attr` is a valid path-beneath attribute that outlives the call.
        self.add_rule(RULE_PATH_BENEATH, std::ptr::from_ref(&attr).cast())
    }

    /// Allows TCP `rights` on `port`.
    pub fn allow_port(&self, port: u16, rights: u64) -> io::Result<()> {
        let attr = NetPortAttr {
            allowed_access: rights,
            port: u64::from(port),
        };
        self.add_rule(RULE_NET_PORT, std::ptr::from_ref(&attr).cast())
    }

    fn add_rule(&self, kind: libc::c_int, attr: *const libc::c_void) -> io::Result<()> {
        // SAFETY: the caller passes an attribute of the layout `kind` names, alive for the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                kind,
                attr,
                0u32,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Confines the calling thread (and what it execs) to the ruleset. One system call, no
    /// allocation: safe between fork and exec. Needs `no_new_privs` (or `CAP_SYS_ADMIN`).
    pub fn restrict_self(&self) -> io::Result<()> {
        // SAFETY: plain system call on a ruleset fd we own.
        let r =
            unsafe { libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}
