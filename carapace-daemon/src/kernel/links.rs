//! Helpers the LSM programs' loader and the DNS redirection programs share: pinning a link
//! so that enforcement never lapses across a restart.
//! Their own module so that `dns_programs` depends on them and not on the loader that
//! drives it.
use std::{fs, io, path::Path};

use aya::programs::links::{FdLink, PinnedLink};

/// Pins `link` at `path`; an older link pinned there is removed only after the new one is
/// attached and pinned. Returns the pinned link (its file descriptor still open) and whether
/// an older link was replaced.
pub(super) fn pin_replacing(link: FdLink, path: &Path) -> io::Result<(PinnedLink, bool)> {
    // bpffs refuses names with a dot, so no `.new` suffix.
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let staging = path.with_file_name(format!("{name}_new_{}", std::process::id()));
    let _ = fs::remove_file(&staging);
    let pinned = link
        .pin(&staging)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let replaced = path.exists();
    if replaced {
        // Unpinning the old link detaches the previous daemon's program; ours is in force.
        fs::remove_file(path)?;
    }
    fs::rename(&staging, path)?;
    Ok((pinned, replaced))
}
