//! What the running kernel offers Carapace: the LSM list, BTF, bpffs, the cgroup v2 mount and
//! the Landlock ABI. Read by `carapace doctor` and the `Status` RPC.
use std::path::Path;

use crate::kernel::unavailable::KernelUnavailable;

/// The active LSMs, in order (`/sys/kernel/security/lsm`).
pub const LSM_FILE: &str = "/sys/kernel/security/lsm";
/// The kernel's own BTF, needed to read struct offsets for the eBPF programs.
pub const BTF_FILE: &str = "/sys/kernel/btf/vmlinux";
/// Where bpffs is expected.
pub const BPFFS_DIR: &str = "/sys/fs/bpf";

/// `landlock_create_ruleset` flag that asks for the ABI version instead of a ruleset.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// The Landlock ABI version, or why there is none (`ENOSYS`: not built in; `EOPNOTSUPP`:
/// built in but not enabled at boot).
pub fn landlock_abi() -> Result<u32, std::io::Error> {
    // SAFETY: landlock_create_ruleset with a NULL attribute pointer, size 0 and the VERSION
    // flag only returns a number (or -1 and errno); it reads and writes no memory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as u32)
    }
}

/// The active LSMs (`None` when securityfs cannot be read).
#[must_use]
pub fn lsm_list() -> Option<Vec<String>> {
    let text = std::fs::read_to_string(LSM_FILE).ok()?;
    Some(parse_lsm_list(&text))
}

/// `lockdown,capability,landlock,yama` → its names.
#[must_use]
pub fn parse_lsm_list(text: &str) -> Vec<String> {
    text.trim()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The `lsm=` boot parameter that enables BPF LSM while keeping the LSMs now active.
#[must_use]
pub fn lsm_boot_parameter(current: &[String]) -> String {
    let mut list: Vec<&str> = current.iter().map(String::as_str).collect();
    if !list.contains(&"bpf") {
        list.push("bpf");
    }
    format!("lsm={}", list.join(","))
}

/// The active LSMs, reading them through a private securityfs mount when securityfs is not
/// mounted (the mount lives in a thread's own mount namespace and vanishes with it, so the
/// host is left as it was). Needs root for the fallback.
#[must_use]
pub fn lsm_list_any() -> Option<Vec<String>> {
    lsm_list().or_else(|| {
        std::thread::spawn(|| {
            use nix::mount::{mount, MsFlags};
            // CLONE_NEWNS implies CLONE_FS: only this thread moves to the new namespace.
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).ok()?;
            mount(
                None::<&str>,
                "/",
                None::<&str>,
                MsFlags::MS_REC | MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .ok()?;
            mount(
                Some("securityfs"),
                "/sys/kernel/security",
                Some("securityfs"),
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                None::<&str>,
            )
            .ok()?;
            lsm_list()
        })
        .join()
        .ok()
        .flatten()
    })
}

/// Loads (and at once unloads) a minimal BPF LSM program for `file_open` that allows
/// everything, without attaching it: whether this kernel accepts BPF LSM programs at all.
/// Needs root (`CAP_BPF` + `CAP_SYS_ADMIN`). The error says why not, in one line.
pub fn probe_bpf_lsm() -> Result<(), KernelUnavailable> {
    /// How the refusals name the probe.
    const PROBE: &str = "minimal file_open probe";
    const BPF_PROG_LOAD: libc::c_long = 5;
    const BPF_PROG_TYPE_LSM: u32 = 29;
    const BPF_LSM_MAC: u32 = 27;
    let btf = std::fs::read(BTF_FILE).map_err(|source| KernelUnavailable::NoBtf { source })?;
    let attach_btf_id = crate::kernel::btf::func_id(&btf, b"bpf_lsm_file_open")
        .map_err(|source| KernelUnavailable::BtfUnreadable {
            what: BTF_FILE,
            source,
        })?
        .ok_or(KernelUnavailable::NoLsmHooks)?;
    // r0 = 0; exit
    let insns: [u8; 16] = [0xb7, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
    let license = b"GPL\0";
    let mut log = vec![0u8; 4096];
    let mut attr = [0u8; 128];
    let put32 = |attr: &mut [u8; 128], at: usize, v: u32| {
        attr[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    };
    let put64 = |attr: &mut [u8; 128], at: usize, v: u64| {
        attr[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    };
    // union bpf_attr, BPF_PROG_LOAD member offsets (include/uapi/linux/bpf.h).
    put32(&mut attr, 0, BPF_PROG_TYPE_LSM);
    put32(&mut attr, 4, 2);
    put64(&mut attr, 8, insns.as_ptr() as u64);
    put64(&mut attr, 16, license.as_ptr() as u64);
    put32(&mut attr, 24, 1);
    put32(&mut attr, 28, log.len() as u32);
    put64(&mut attr, 32, log.as_mut_ptr() as u64);
    attr[48..56].copy_from_slice(b"cp_probe");
    put32(&mut attr, 68, BPF_LSM_MAC);
    put32(&mut attr, 108, attach_btf_id);
    // SAFETY: bpf(2) reads `attr` (128 bytes, all pointers in it valid for the call: insns,
    // license and the log buffer, whose length is given) and writes only into the log.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            attr.as_mut_ptr(),
            attr.len() as libc::c_uint,
        )
    };
    if fd >= 0 {
        // SAFETY: closing the program fd the kernel just returned to us, once.
        unsafe { libc::close(fd as libc::c_int) };
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
    let verifier = String::from_utf8_lossy(&log[..end]).trim().to_owned();
    let program = PROBE.to_owned();
    Err(
        if err.raw_os_error() == Some(libc::EPERM) && verifier.is_empty() {
            KernelUnavailable::TrampolinesRefused { program }
        } else {
            KernelUnavailable::Rejected {
                program,
                error: err,
                log: verifier,
            }
        },
    )
}

/// One line of `/proc/self/mountinfo` (proc(5)), the fields Carapace reads, unescaped. The
/// one parser of that file: `doctor` looks for bpffs and cgroup2 with it, the daemon for
/// the cgroup2 hierarchy (`session::cgroup`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The mount's root within its file system (4th field), usually `/`.
    pub root: String,
    /// Where it is mounted (5th field).
    pub mount_point: String,
    /// The file system type (first field after the ` - ` separator).
    pub fstype: String,
}

/// The mounts of `/proc/self/mountinfo` text, in order; malformed lines are skipped.
pub fn mounts(mountinfo: &str) -> impl Iterator<Item = Mount> + '_ {
    mountinfo.lines().filter_map(|line| {
        // id parent major:minor root mount-point options [optional fields…] - fstype source …
        let (left, right) = line.split_once(" - ")?;
        let mut fields = left.split_ascii_whitespace();
        let root = unescape(fields.nth(3)?);
        let mount_point = unescape(fields.next()?);
        let fstype = right.split_ascii_whitespace().next()?.to_owned();
        Some(Mount {
            root,
            mount_point,
            fstype,
        })
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space, …).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let digits = std::str::from_utf8(&bytes[i + 1..i + 4]).ok();
            if let Some(v) = digits.and_then(|d| u8::from_str_radix(d, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Mount points of a file system type, from `/proc/self/mountinfo` text.
#[must_use]
pub fn mounts_of(mountinfo: &str, fstype: &str) -> Vec<String> {
    mounts(mountinfo)
        .filter(|m| m.fstype == fstype)
        .map(|m| m.mount_point)
        .collect()
}

/// Whether `path` is a file that exists and can be read.
#[must_use]
pub fn readable(path: &Path) -> bool {
    std::fs::File::open(path).is_ok()
}

/// The kernel release (`uname -r`) as (major, minor) and the full string.
#[must_use]
pub fn kernel_release() -> Option<(u32, u32, String)> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let release = release.trim().to_owned();
    let mut parts = release.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor, release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_parameter_keeps_the_current_list() {
        let current = parse_lsm_list("lockdown,capability,landlock,yama,apparmor\n");
        assert_eq!(
            lsm_boot_parameter(&current),
            "lsm=lockdown,capability,landlock,yama,apparmor,bpf"
        );
        let with_bpf = parse_lsm_list("capability,bpf");
        assert_eq!(lsm_boot_parameter(&with_bpf), "lsm=capability,bpf");
    }

    #[test]
    fn mounts_by_type() {
        let info = "\
25 30 0:23 / /sys rw,nosuid - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
40 25 0:33 / /sys/fs/bpf rw - bpf bpf rw
41 25 0:34 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory";
        assert_eq!(mounts_of(info, "cgroup2"), ["/sys/fs/cgroup/unified"]);
        assert_eq!(mounts_of(info, "bpf"), ["/sys/fs/bpf"]);
        assert!(mounts_of(info, "tmpfs").is_empty());
    }

    #[test]
    fn mount_fields_are_unescaped() {
        let info =
            "41 31 0:38 /a\\040b /mnt/c\\040g rw shared:3 - cgroup2 cgroup2 rw\nbroken line\n";
        let all: Vec<Mount> = mounts(info).collect();
        assert_eq!(
            all,
            [Mount {
                root: "/a b".into(),
                mount_point: "/mnt/c g".into(),
                fstype: "cgroup2".into(),
            }]
        );
        assert_eq!(unescape("no\\escape\\09"), "no\\escape\\09");
    }

    #[test]
    fn landlock_probe_answers() {
        // Either a version or an errno; never a panic. On the project's hosts it is >= 1.
        match landlock_abi() {
            Ok(v) => assert!(v >= 1),
            Err(e) => assert!(e.raw_os_error().is_some()),
        }
    }
}
