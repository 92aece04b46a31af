//! Telling one version of a file from the next without reading it (rule files and profiles
//! are reloaded when theirs changes).
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// What tells one version of a file from the next without reading it. Inode and device catch
/// editors that write a new file and rename it over the old one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

/// The file's fingerprint, or `None` when it cannot be looked at (absent, no permission).
#[must_use]
pub fn fingerprint(path: &Path) -> Option<Fingerprint> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Fingerprint {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
    })
}
