//! What the policy core asks of the machine it runs on. Compiling rules resolves their
//! literal paths (links on the way, the files' inodes, bind mounts) and Layer 1 resolves the
//! paths of a call through symlinks and reads a repository's config; this crate does neither
//! itself but through a [`Host`], so that the daemon supplies the real file system and a
//! test can supply a made-up one.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The kind of file a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (`lstat`: not followed).
    Symlink,
    /// Devices, sockets, FIFOs.
    Other,
}

/// What `stat` tells of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// What kind of file it is.
    pub kind: FileKind,
    /// The device in the kernel's encoding (`MAJOR << 20 | MINOR`, as `s_dev` holds it; see
    /// [`kernel_dev`]): what the inode map's keys hold.
    pub dev: u64,
    /// The inode number.
    pub ino: u64,
    /// Size in bytes.
    pub len: u64,
}

impl From<&std::fs::Metadata> for FileInfo {
    /// What a `stat` the caller made says (the conversion does no I/O of its own).
    fn from(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        let t = meta.file_type();
        Self {
            kind: if t.is_symlink() {
                FileKind::Symlink
            } else if t.is_dir() {
                FileKind::Dir
            } else if t.is_file() {
                FileKind::File
            } else {
                FileKind::Other
            },
            dev: kernel_dev(meta.dev()),
            ino: meta.ino(),
            len: meta.len(),
        }
    }
}

/// The file system as the policy core sees it. Every method answers for the machine the
/// rules protect; `None` (or an error) means the path cannot be looked at, and the callers
/// fall back to the path as written.
pub trait Host: fmt::Debug + Send + Sync {
    /// `stat(2)`: follows symlinks.
    fn stat(&self, path: &Path) -> Option<FileInfo>;
    /// `lstat(2)`: a symlink is [`FileKind::Symlink`].
    fn lstat(&self, path: &Path) -> Option<FileInfo>;
    /// The target of a symlink, as stored (`readlink(2)`).
    fn read_link(&self, path: &Path) -> Option<PathBuf>;
    /// The absolute path with every symlink, `.` and `..` resolved (`realpath(3)`).
    fn canonicalize(&self, path: &Path) -> Option<PathBuf>;
    /// The whole file as UTF-8.
    fn read_to_string(&self, path: &Path) -> io::Result<String>;
}

/// The kernel's encoding of a device number (`MAJOR << 20 | MINOR`, as `s_dev` holds it)
/// from a `st_dev`, for [`FileInfo::dev`].
#[must_use]
pub fn kernel_dev(st_dev: u64) -> u64 {
    (u64::from(libc::major(st_dev)) << 20) | u64::from(libc::minor(st_dev))
}

/// The real file system, for the tests of this crate that are about resolving real paths
/// (the daemon's own is `carapace::policy_host::RealHost`; this is a copy, since the
/// daemon depends on this crate).
#[cfg(test)]
pub(crate) mod real {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use super::{FileInfo, Host};

    #[derive(Debug)]
    pub(crate) struct TestHost;

    /// The real file system as a shared host.
    pub(crate) fn host() -> Arc<dyn Host> {
        Arc::new(TestHost)
    }

    /// What the daemon compiles rules with (`carapace::policy_host::options`): this
    /// machine's homes, its resolver and its file system.
    pub(crate) fn options() -> crate::rules::Options {
        crate::rules::Options {
            homes: crate::rules::Homes::from_passwd(
                &TestHost,
                Path::new("/etc/passwd"),
                std::env::var("HOME").ok().as_deref(),
            ),
            resolver: resolve_dns,
            host: host(),
        }
    }

    fn resolve_dns(host: &str) -> Option<Vec<std::net::IpAddr>> {
        use std::net::ToSocketAddrs as _;
        let mut ips: Vec<_> = (host, 0).to_socket_addrs().ok()?.map(|a| a.ip()).collect();
        ips.sort();
        ips.dedup();
        (!ips.is_empty()).then_some(ips)
    }

    impl Host for TestHost {
        fn stat(&self, path: &Path) -> Option<FileInfo> {
            std::fs::metadata(path).ok().map(|m| FileInfo::from(&m))
        }
        fn lstat(&self, path: &Path) -> Option<FileInfo> {
            std::fs::symlink_metadata(path)
                .ok()
                .map(|m| FileInfo::from(&m))
        }
        fn read_link(&self, path: &Path) -> Option<PathBuf> {
            std::fs::read_link(path).ok()
        }
        fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
            std::fs::canonicalize(path).ok()
        }
        fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
            std::fs::read_to_string(path)
        }
    }
}
