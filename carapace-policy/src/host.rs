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
    File,
    Dir,
    Symlink,
    /// Devices, sockets, FIFOs.
    Other,
}

/// What `stat` tells of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub kind: FileKind,
    /// The device in the kernel's encoding (`MAJOR << 20 | MINOR`, as `s_dev` holds it; see
    /// [`kernel_dev`]): what the inode map's keys hold.
    pub dev: u64,
    pub ino: u64,
    /// Size in bytes.
    pub len: u64,
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
