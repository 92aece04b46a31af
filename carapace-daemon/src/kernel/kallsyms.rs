//! Kernel symbol addresses from /proc/kallsyms, for the path cache (see the programs'
//! `path_cache`): the dcache's `rename_lock` and the mount table's `mount_lock`, whose
//! sequence counts change with every rename and every mount change.

use std::fs;
use std::sync::Arc;

/// Why the path cache stays off on this kernel (logged, and shown by `carapace status`).
#[derive(Debug, Clone, thiserror::Error)]
pub enum PathCacheOff {
    /// A hook the cache needs to stay honest is missing.
    #[error("this kernel has no {0} LSM hook")]
    NoHook(&'static str),
    /// Shared: the loader keeps the reason and hands out copies.
    #[error("cannot read /proc/kallsyms: {0}")]
    Kallsyms(#[source] Arc<std::io::Error>),
    #[error(
        "/proc/kallsyms hides addresses (kernel.kptr_restrict is 2, or the daemon lacks \
         CAP_SYSLOG)"
    )]
    AddressesHidden,
    #[error(
        "/proc/kallsyms lists no rename_lock and mount_lock data symbols (a kernel built \
         without CONFIG_KALLSYMS_ALL)"
    )]
    NoLockSymbols,
}

/// The addresses of `rename_lock` and `mount_lock`, or why the path cache stays off.
pub fn path_cache_locks() -> Result<(u64, u64), PathCacheOff> {
    let text =
        fs::read_to_string("/proc/kallsyms").map_err(|e| PathCacheOff::Kallsyms(Arc::new(e)))?;
    locks_in(&text)
}

fn locks_in(text: &str) -> Result<(u64, u64), PathCacheOff> {
    let (mut rename, mut mount) = (None, None);
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(addr), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        // Data symbols only: a function of the same name would not hold a seqlock.
        if !matches!(kind, "D" | "d" | "B" | "b") || fields.next().is_some() {
            continue;
        }
        let slot = match name {
            "rename_lock" => &mut rename,
            "mount_lock" => &mut mount,
            _ => continue,
        };
        if let Ok(addr) = u64::from_str_radix(addr, 16) {
            slot.get_or_insert(addr);
        }
    }
    match (rename, mount) {
        (Some(0), _) | (_, Some(0)) => Err(PathCacheOff::AddressesHidden),
        (Some(r), Some(m)) => Ok((r, m)),
        _ => Err(PathCacheOff::NoLockSymbols),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_both_locks_among_data_symbols() {
        let text = "ffffffff81000000 T _stext\n\
                    ffffffff82a0c040 D rename_lock\n\
                    ffffffff82a0c080 t rename_lock_helper\n\
                    ffffffff82b10000 b mount_lock\n\
                    ffffffffc0000000 t mount_lock\t[somemodule]\n";
        assert_eq!(
            locks_in(text).ok(),
            Some((0xffff_ffff_82a0_c040, 0xffff_ffff_82b1_0000))
        );
    }

    #[test]
    fn hidden_addresses_turn_the_cache_off() {
        let text = "0000000000000000 D rename_lock\n0000000000000000 b mount_lock\n";
        let e = locks_in(text).unwrap_err();
        assert!(matches!(e, PathCacheOff::AddressesHidden), "{e:?}");
        assert!(e.to_string().contains("kptr_restrict"));
    }

    #[test]
    fn functions_do_not_count() {
        let text = "ffffffff82a0c040 T rename_lock\nffffffff82b10000 b mount_lock\n";
        let e = locks_in(text).unwrap_err();
        assert!(matches!(e, PathCacheOff::NoLockSymbols), "{e:?}");
        assert!(e.to_string().contains("CONFIG_KALLSYMS_ALL"));
    }
}
