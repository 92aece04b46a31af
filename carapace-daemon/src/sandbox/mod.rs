//! What the agent's process gives up before it execs: root's identity (back to the `sudo`
//! user), every capability, and the ability to gain privileges again (`no_new_privs`).
//!
//! [`PrivDrop::prepare`] does everything that allocates or reads files *before* fork;
//! [`PrivDrop::apply`] runs in the child between fork and exec (`pre_exec`) and only makes
//! async-signal-safe system calls.
pub mod landlock;
pub mod limits;

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3` (include/uapi/linux/capability.h).
const CAP_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    #[error("{var} is not a number: {value:?}")]
    BadEnv { var: &'static str, value: String },
}

/// The identity the agent runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// A prepared privilege drop.
#[derive(Clone, Debug)]
pub struct PrivDrop {
    /// Running as root (euid 0): capabilities must go.
    root: bool,
    /// Switch to this user (from `SUDO_UID` / `SUDO_GID`) when running as root.
    target: Option<Target>,
    /// Highest capability number of the running kernel.
    last_cap: u32,
}

impl PrivDrop {
    /// Reads the current identity, `SUDO_UID`/`SUDO_GID` and the kernel's last capability.
    pub fn prepare() -> Result<Self, SandboxError> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let target = if root { sudo_target()? } else { None };
        let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            // Unknown: cover every capability a 64-bit mask can name.
            .unwrap_or(63);
        Ok(Self {
            root,
            target,
            last_cap,
        })
    }

    #[must_use]
    pub fn target(&self) -> Option<&Target> {
        self.target.as_ref()
    }

    /// Drops privileges in the current process. Meant for `pre_exec`: it does not allocate.
    ///
    /// Order matters: groups and gid first (they need `CAP_SETGID`), then the bounding set
    /// (needs `CAP_SETPCAP`), ambient and inheritable sets, then the uid (needs
    /// `CAP_SETUID`, so the effective set cannot be emptied before it; leaving uid 0 empties
    /// the permitted and effective sets anyway), then every set is cleared explicitly — which
    /// also covers staying root without `SUDO_UID`.
    pub fn apply(&self) -> io::Result<()> {
        if self.root {
            if let Some(t) = &self.target {
                // SAFETY: the pointer and length describe `t.groups`, which outlives the call;
                // gid_t is u32 on Linux.
                check(unsafe { libc::setgroups(t.groups.len(), t.groups.as_ptr()) })?;
                // SAFETY: plain system call with integer arguments.
                check(unsafe { libc::setresgid(t.gid, t.gid, t.gid) })?;
            }
            for cap in 0..=self.last_cap {
                // SAFETY: prctl with integer arguments; PR_CAPBSET_DROP only changes this
                // process's bounding set.
                let r = unsafe {
                    libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0)
                };
                // EINVAL: the kernel does not know this capability; nothing to drop.
                if r != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                    return Err(io::Error::last_os_error());
                }
            }
            // SAFETY: prctl with integer arguments.
            let r = unsafe {
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_CLEAR_ALL,
                    0,
                    0,
                    0,
                )
            };
            // EINVAL: a kernel without ambient capabilities (< 4.3) has none to clear.
            if r != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                return Err(io::Error::last_os_error());
            }
            if let Some(t) = &self.target {
                // SAFETY: plain system call with integer arguments.
                check(unsafe { libc::setresuid(t.uid, t.uid, t.uid) })?;
            }
            clear_capabilities()?;
        }
        // SAFETY: prctl with integer arguments.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Empties the effective, permitted and inheritable sets of the calling thread.
fn clear_capabilities() -> io::Result<()> {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset(2) reads a v3 header and two data structs, which is exactly what the
    // pointers refer to; both live across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capset,
            std::ptr::from_mut(&mut header),
            data.as_ptr(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn env_id(var: &'static str) -> Result<Option<u32>, SandboxError> {
    match std::env::var(var) {
        Ok(value) => value
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| SandboxError::BadEnv { var, value }),
        Err(_) => Ok(None),
    }
}

/// The user `sudo` ran us for, with their supplementary groups.
fn sudo_target() -> Result<Option<Target>, SandboxError> {
    let (Some(uid), Some(gid)) = (env_id("SUDO_UID")?, env_id("SUDO_GID")?) else {
        return Ok(None);
    };
    if uid == 0 {
        return Ok(None);
    }
    Ok(Some(Target {
        uid,
        gid,
        groups: groups_of(uid, gid),
    }))
}

/// Supplementary groups of `uid` from the group database; just `[gid]` if unknown.
fn groups_of(uid: u32, gid: u32) -> Vec<u32> {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten();
    let groups = user.and_then(|u| {
        let name = std::ffi::CString::new(u.name).ok()?;
        nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(gid)).ok()
    });
    match groups {
        Some(g) if !g.is_empty() => g.into_iter().map(nix::unistd::Gid::as_raw).collect(),
        _ => vec![gid],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_user_gets_just_their_group() {
        // A uid that no passwd database has.
        assert_eq!(groups_of(3_999_999_999, 4242), vec![4242]);
    }

    #[test]
    fn apply_in_a_child_sets_no_new_privs() {
        use std::os::unix::process::CommandExt as _;
        let privs = PrivDrop {
            root: false,
            target: None,
            last_cap: 40,
        };
        let mut cmd = std::process::Command::new("grep");
        cmd.args(["NoNewPrivs", "/proc/self/status"]);
        // SAFETY: apply only makes async-signal-safe system calls and does not allocate.
        unsafe {
            cmd.pre_exec(move || privs.apply());
        }
        let out = cmd.output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("NoNewPrivs:\t1"));
    }
}
