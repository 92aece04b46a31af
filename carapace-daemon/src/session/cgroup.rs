//! cgroup v2 plumbing: find the cgroup2 mount, create the Carapace root (`<mount>/carapace`, the
//! parent of every session cgroup) and the session cgroups below it, move processes in, kill
//! and remove them.
//!
//! On hybrid hosts the cgroup2 hierarchy is mounted at `/sys/fs/cgroup/unified`, so the mount
//! point is always read from `/proc/self/mountinfo`, never assumed.
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::io_error::IoError;

/// Name of the directory below the cgroup2 mount that holds every session cgroup.
pub const ROOT_NAME: &str = "carapace";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CgroupError {
    #[error("no cgroup2 file system is mounted (looked in {mountinfo})")]
    NoCgroup2 { mountinfo: PathBuf },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("cgroup {path} still has processes after being killed")]
    Busy { path: PathBuf },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |source| IoError::new(action, path, source).into()
}

/// Where the cgroup2 hierarchy is mounted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    /// Mount point, e.g. `/sys/fs/cgroup` or `/sys/fs/cgroup/unified`.
    pub mount: PathBuf,
    /// The mount's root within the hierarchy (mountinfo's 4th field), usually `/`.
    pub root: String,
}

impl Hierarchy {
    /// Reads the first cgroup2 mount from `/proc/self/mountinfo`.
    pub fn discover() -> Result<Self, CgroupError> {
        let path = Path::new("/proc/self/mountinfo");
        let text = fs::read_to_string(path).map_err(io_err("read", path))?;
        parse_mountinfo(&text).ok_or_else(|| CgroupError::NoCgroup2 {
            mountinfo: path.into(),
        })
    }
}

/// Finds the first cgroup2 mount in mountinfo text.
#[must_use]
pub fn parse_mountinfo(text: &str) -> Option<Hierarchy> {
    crate::host::mounts(text)
        .find(|m| m.fstype == "cgroup2")
        .map(|m| Hierarchy {
            mount: PathBuf::from(m.mount_point),
            root: m.root,
        })
}

/// `<mount>/carapace`: the parent of every session cgroup.
#[derive(Clone, Debug)]
pub struct CarapaceRoot {
    pub dir: PathBuf,
    /// Path relative to the hierarchy's root as `/proc/PID/cgroup` shows it, e.g. `/carapace`.
    pub rel: String,
    /// cgroup id, which is the directory's inode number.
    pub id: u64,
    /// Depth below the hierarchy root (the root is level 0).
    pub level: u32,
}

impl CarapaceRoot {
    /// Creates `<mount>/carapace` if needed (root-owned, mode 0755) and reads its id.
    pub fn create(hierarchy: &Hierarchy) -> Result<Self, CgroupError> {
        let dir = hierarchy.mount.join(ROOT_NAME);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err("create", &dir)(e)),
        }
        let id = cgroup_id(&dir)?;
        let rel = rel_path(&hierarchy.root, ROOT_NAME);
        let level = level_of(&rel);
        Ok(Self {
            dir,
            rel,
            id,
            level,
        })
    }

    /// Whether a process whose `0::` cgroup line reads `cgroup` is inside a session (an agent).
    #[must_use]
    pub fn contains(&self, cgroup: &str) -> bool {
        is_below(&self.rel, cgroup)
    }

    /// Directory of session `name`.
    #[must_use]
    pub fn session_dir(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Whether no process and no cgroup is left below the root: nothing for the kernel
    /// programs to act on. Anything unreadable counts as occupied.
    #[must_use]
    pub fn is_vacant(&self) -> bool {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return false;
        };
        for entry in entries {
            match entry.and_then(|e| e.file_type()) {
                Ok(t) if t.is_dir() => return false,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        is_empty(&self.dir)
    }
}

fn rel_path(root: &str, name: &str) -> String {
    let root = root.trim_end_matches('/');
    format!("{root}/{name}")
}

/// Depth of a hierarchy-relative path: `/` is 0, `/carapace` is 1.
#[must_use]
pub fn level_of(rel: &str) -> u32 {
    rel.split('/').filter(|c| !c.is_empty()).count() as u32
}

/// `cgroup` is `dir` or a descendant of it (both hierarchy-relative).
#[must_use]
pub fn is_below(dir: &str, cgroup: &str) -> bool {
    cgroup == dir
        || cgroup
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The cgroup id of a cgroup directory: its inode number on cgroupfs.
pub fn cgroup_id(dir: &Path) -> Result<u64, CgroupError> {
    Ok(fs::metadata(dir).map_err(io_err("stat", dir))?.ino())
}

/// The cgroup v2 path of a process (the `0::` line of `/proc/PID/cgroup`).
pub fn process_cgroup(pid: u32) -> Result<String, CgroupError> {
    let path = PathBuf::from(format!("/proc/{pid}/cgroup"));
    let text = fs::read_to_string(&path).map_err(io_err("read", &path))?;
    parse_proc_cgroup(&text).ok_or_else(|| {
        IoError::new(
            "find the cgroup v2 line in",
            path,
            io::ErrorKind::NotFound.into(),
        )
        .into()
    })
}

/// Extracts the cgroup v2 path from `/proc/PID/cgroup` text.
#[must_use]
pub fn parse_proc_cgroup(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("0::")).map(|p| {
        // A deleted cgroup shows as "/path (deleted)".
        p.strip_suffix(" (deleted)").unwrap_or(p).to_owned()
    })
}

/// Creates a session cgroup; returns its id.
pub fn create_session(dir: &Path) -> Result<u64, CgroupError> {
    fs::create_dir(dir).map_err(io_err("create", dir))?;
    cgroup_id(dir)
}

/// Moves a process (all its threads) into the cgroup at `dir`.
pub fn move_process(dir: &Path, pid: u32) -> Result<(), CgroupError> {
    let procs = dir.join("cgroup.procs");
    fs::write(&procs, pid.to_string()).map_err(io_err("write", &procs))
}

/// The cgroup directory of a hierarchy-relative path.
#[must_use]
pub fn dir_of(hierarchy: &Hierarchy, rel: &str) -> PathBuf {
    let root = hierarchy.root.trim_end_matches('/');
    let below = rel
        .strip_prefix(root)
        .unwrap_or(rel)
        .trim_start_matches('/');
    hierarchy.mount.join(below)
}

/// Whether the cgroup tree at `dir` exists and has no process (`populated 0` in
/// `cgroup.events`). A cgroup that cannot be read counts as not empty.
#[must_use]
pub fn is_empty(dir: &Path) -> bool {
    fs::read_to_string(dir.join("cgroup.events"))
        .is_ok_and(|t| t.lines().any(|l| l.trim() == "populated 0"))
}

fn pids(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Kills every process of the cgroup tree at `dir` and removes it.
///
/// Uses `cgroup.kill` (Linux 5.14+) and falls back to SIGKILL per process; waits up to
/// `wait` for the tree to empty.
pub fn kill_and_remove(dir: &Path, wait: Duration) -> Result<(), CgroupError> {
    if !dir.exists() {
        return Ok(());
    }
    let kill = dir.join("cgroup.kill");
    if kill.exists() {
        fs::write(&kill, "1").map_err(io_err("write", &kill))?;
    } else {
        kill_tree(dir);
    }
    let deadline = Instant::now() + wait;
    loop {
        match remove_tree(dir) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(match e.raw_os_error() {
                    Some(libc::EBUSY) => CgroupError::Busy { path: dir.into() },
                    _ => io_err("remove", dir)(e),
                });
            }
            Err(_) => {
                if !kill.exists() {
                    kill_tree(dir);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn kill_tree(dir: &Path) {
    for pid in pids(dir) {
        // SAFETY: kill(2) with a pid read from cgroup.procs and a constant signal; no memory
        // is involved. A pid that already exited only yields ESRCH.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    for child in subdirs(dir) {
        kill_tree(&child);
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes a cgroup directory and its child cgroups, deepest first.
fn remove_tree(dir: &Path) -> io::Result<()> {
    for child in subdirs(dir) {
        remove_tree(&child)?;
    }
    match fs::remove_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
25 1 0:23 / /sys rw,nosuid shared:7 - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
32 30 0:28 / /sys/fs/cgroup/systemd rw shared:11 - cgroup cgroup rw,xattr,name=systemd
";

    #[test]
    fn finds_hybrid_unified_mount() {
        let h = parse_mountinfo(HYBRID);
        assert_eq!(
            h,
            Some(Hierarchy {
                mount: "/sys/fs/cgroup/unified".into(),
                root: "/".into()
            })
        );
    }

    #[test]
    fn finds_mount_with_root_and_escapes() {
        let text = "41 31 0:38 /a\\040b /mnt/c\\040g rw - cgroup2 cgroup2 rw\n";
        let h = parse_mountinfo(text);
        assert_eq!(
            h,
            Some(Hierarchy {
                mount: "/mnt/c g".into(),
                root: "/a b".into()
            })
        );
        assert_eq!(rel_path("/a b", ROOT_NAME), "/a b/carapace");
        assert_eq!(level_of("/a b/carapace"), 2);
        assert_eq!(level_of(&rel_path("/", ROOT_NAME)), 1);
        assert!(parse_mountinfo("1 2 0:1 / /sys rw - sysfs sysfs rw\n").is_none());
    }

    #[test]
    fn agent_detection() {
        assert!(is_below("/carapace", "/carapace/s-1"));
        assert!(is_below("/carapace", "/carapace/s-1/nested"));
        assert!(is_below("/carapace", "/carapace"));
        assert!(!is_below("/carapace", "/carapace-evil/x"));
        assert!(!is_below("/carapace", "/user.slice"));
    }

    #[test]
    fn proc_cgroup_line() {
        let text = "9:name=systemd:/\n0::/carapace/s-1 (deleted)\n";
        assert_eq!(parse_proc_cgroup(text).as_deref(), Some("/carapace/s-1"));
        assert_eq!(parse_proc_cgroup("1:cpu:/\n"), None);
    }

    #[test]
    fn dir_of_relative_path() {
        let h = Hierarchy {
            mount: "/sys/fs/cgroup".into(),
            root: "/".into(),
        };
        assert_eq!(
            dir_of(&h, "/user.slice/a"),
            PathBuf::from("/sys/fs/cgroup/user.slice/a")
        );
        assert_eq!(dir_of(&h, "/"), PathBuf::from("/sys/fs/cgroup/"));
    }
}
