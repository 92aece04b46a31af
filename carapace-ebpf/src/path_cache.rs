//! Remembers which opened paths no rule mentions, so that opening one again inside a session
//! costs an array lookup instead of `bpf_d_path`, the key copies and every rule lookup.
//!
//! An entry says "this dentry, reached through this mount and seen from this root, matched no
//! path, basename or inode entry and no automaton state" — a fact about the path and the rule
//! maps, not about a session, so it holds for every session. It is trusted only while
//! nothing that fact depends on can have changed:
//! - the dentry's own path and its ancestors' names: the dcache's `rename_lock` sequence,
//!   bumped by every rename (`d_move`, `d_exchange`), is the one recorded;
//! - where the mount hangs: `mount_lock`'s sequence, bumped by every change of the mount tree;
//! - the root the path is seen from: part of the entry, and a chroot anywhere bumps
//!   `cache_gen::KERNEL`;
//! - the rule maps: the daemon bumps `cache_gen::RULES` after every write;
//! - the dentry itself: a dentry freed and allocated again for another file is instantiated
//!   again, and `d_instantiate` drops its entry before it can be opened.
//!
//! Both sequences are read before the path is resolved and judged, so a change during the
//! check leaves an entry that no later open accepts. Only "no rule of a file operation
//! found" is cached: a path some such rule names is judged in full every time (session
//! state, exceptions, operations); a rule of none (`unix: outside-session`, whose root
//! prefix every path falls under) can never deny an open.

use core::intrinsics::{atomic_xadd, AtomicOrdering};

use aya_ebpf::{
    helpers::{bpf_probe_read_kernel, generated::bpf_get_current_task_btf},
    macros::lsm,
    programs::LsmContext,
    EbpfContext as _,
};
use carapace_common::{cache_gen, errsite};

use crate::{
    globals, kread,
    maps::{CachedPath, PATH_CACHE, PATH_CACHE_BITS, PATH_CACHE_GEN},
};

/// Fills `id` with what identifies the path of `file` now; false when the cache is off or a
/// rename or mount change is under way (an odd sequence).
///
/// `file` must be the hook's own `struct file *`: the pointers are read with direct loads,
/// which the verifier allows (and turns into fault-safe ones) only on pointers it knows the
/// type of; they cost a fraction of a `bpf_probe_read_kernel` call each. They are stored
/// with volatile writes and read back as plain numbers: the verifier refuses arithmetic on a
/// pointer, as the checksum does.
#[inline(always)]
pub fn identify(file: *const u8, id: &mut CachedPath) -> bool {
    let (rename_lock, mount_lock) = (globals::rename_lock(), globals::mount_lock());
    if rename_lock == 0 || mount_lock == 0 {
        return false;
    }
    let Some((rename_seq, mount_seq)) =
        kread::sequences(rename_lock, mount_lock, errsite::READ_INODE)
    else {
        return false;
    };
    if (rename_seq | mount_seq) & 1 != 0 {
        return false;
    }
    let (Some(rules_gen), Some(kernel_gen)) = (
        PATH_CACHE_GEN.get(cache_gen::RULES),
        PATH_CACHE_GEN.get(cache_gen::KERNEL),
    ) else {
        return false;
    };
    let f_path = file.wrapping_add(globals::file_f_path());
    // SAFETY: a trusted task pointer from the helper.
    let task = unsafe { bpf_get_current_task_btf() }
        .cast::<u8>()
        .cast_const();
    // SAFETY: offsets from the running kernel's BTF, on typed kernel pointers (see above).
    unsafe {
        let fs = kread::load::<*const u8>(task, globals::task_fs());
        let root = fs.wrapping_add(globals::fs_root());
        store(&mut id.dentry, kread::load(f_path, globals::path_dentry()));
        store(&mut id.mnt, kread::load(f_path, globals::path_mnt()));
        store(&mut id.inode, kread::load(file, globals::file_f_inode()));
        store(
            &mut id.root_dentry,
            kread::load(root, globals::path_dentry()),
        );
        store(&mut id.root_mnt, kread::load(root, globals::path_mnt()));
    }
    store(&mut id.rules_gen, *rules_gen);
    store(&mut id.kernel_gen, *kernel_gen);
    store(
        &mut id.seqs,
        (u64::from(rename_seq) << 32) | u64::from(mount_seq),
    );
    let check = checksum(id);
    store(&mut id.check, check);
    true
}

/// A store the compiler may not fold into later reads of the same field.
#[inline(always)]
fn store(field: &mut u64, value: u64) {
    // SAFETY: a valid, aligned field.
    unsafe { core::ptr::write_volatile(field, value) };
}

#[inline(always)]
fn load(field: &u64) -> u64 {
    // SAFETY: a valid, aligned field.
    unsafe { core::ptr::read_volatile(field) }
}

/// The slot of `dentry`: a direct-mapped table, so a lookup is an array access the JIT
/// inlines, not a hash map helper call.
#[inline(always)]
fn slot(id: &CachedPath) -> u32 {
    slot_of(load(&id.dentry))
}

#[inline(always)]
fn slot_of(dentry: u64) -> u32 {
    (dentry.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - PATH_CACHE_BITS)) as u32
}

/// Whether the cache holds `id` as a path no rule mentions.
#[inline(always)]
pub fn is_clean(id: &CachedPath) -> bool {
    let Some(e) = PATH_CACHE.get(slot(id)) else {
        return false;
    };
    // Read field by field while another CPU may be writing the slot: a torn copy fails the
    // checksum.
    load(&e.dentry) == load(&id.dentry)
        && load(&e.mnt) == load(&id.mnt)
        && load(&e.root_dentry) == load(&id.root_dentry)
        && load(&e.root_mnt) == load(&id.root_mnt)
        && load(&e.inode) == load(&id.inode)
        && load(&e.rules_gen) == load(&id.rules_gen)
        && load(&e.kernel_gen) == load(&id.kernel_gen)
        && load(&e.seqs) == load(&id.seqs)
        && load(&e.check) == load(&id.check)
}

/// Records `id` (identified before the check) as a path no rule mentions, in place of
/// whatever held its slot.
#[inline(always)]
pub fn remember_clean(id: &CachedPath) {
    let Some(e) = PATH_CACHE.get_ptr_mut(slot(id)) else {
        return;
    };
    // SAFETY: a map value; concurrent writers of one slot can only leave a torn entry, which
    // the checksum refuses.
    let e = unsafe { &mut *e };
    store(&mut e.check, 0);
    store(&mut e.dentry, load(&id.dentry));
    store(&mut e.mnt, load(&id.mnt));
    store(&mut e.root_dentry, load(&id.root_dentry));
    store(&mut e.root_mnt, load(&id.root_mnt));
    store(&mut e.inode, load(&id.inode));
    store(&mut e.rules_gen, load(&id.rules_gen));
    store(&mut e.kernel_gen, load(&id.kernel_gen));
    store(&mut e.seqs, load(&id.seqs));
    store(&mut e.check, load(&id.check));
}

/// Mixes every field, so that a slot read while another CPU wrote it, or written by two at
/// once, is not taken for a valid entry: a sum with an odd multiplier of its own per field,
/// so that fields taken from two entries sum to the checksum of neither unless their
/// differences cancel out modulo 2^64. Two instructions a field where a hash round took
/// five, on the path every cached open runs.
#[inline(always)]
fn checksum(id: &CachedPath) -> u64 {
    let h = load(&id.dentry)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(load(&id.mnt).wrapping_mul(0xc2b2_ae3d_27d4_eb4f))
        .wrapping_add(load(&id.root_dentry).wrapping_mul(0x1656_67b1_9e37_79f9))
        .wrapping_add(load(&id.root_mnt).wrapping_mul(0x85eb_ca77_c2b2_ae63))
        .wrapping_add(load(&id.inode).wrapping_mul(0x27d4_eb2f_1656_67c5))
        .wrapping_add(load(&id.rules_gen).wrapping_mul(0xff51_afd7_ed55_8ccd))
        .wrapping_add(load(&id.kernel_gen).wrapping_mul(0xc4ce_b9fe_1a85_ec53))
        .wrapping_add(load(&id.seqs).wrapping_mul(0x9fb2_1c65_1e98_df25));
    // Zero marks a slot emptied by `d_instantiate`.
    h | 1
}

/// A dentry about to be given an inode may be the memory of a freed one with an entry:
/// drop it before the new file can be opened. Every task, not only sessions'.
#[lsm(hook = "d_instantiate")]
pub fn d_instantiate(ctx: LsmContext) -> i32 {
    // The argument as a number: read from the context by the helper, because a plain load
    // types it as a dentry pointer, on which 6.1's verifier allows no multiplication.
    // SAFETY: the context holds the hook's arguments, 8 bytes each.
    let Ok(dentry) = (unsafe { bpf_probe_read_kernel(ctx.as_ptr().cast::<u64>()) }) else {
        return 0;
    };
    if let Some(e) = PATH_CACHE.get_ptr_mut(slot_of(dentry)) {
        // SAFETY: a map value; a zero checksum matches no identity (see `checksum`).
        unsafe {
            if core::ptr::read_volatile(&raw const (*e).dentry) == dentry {
                core::ptr::write_volatile(&raw mut (*e).check, 0);
            }
        }
    }
    0
}

/// A task changing its root sees every path differently: no entry made before holds. The
/// same hook refuses a chroot from a session under a `view: chroot` rule (`view`); it is attached
/// with the path cache off too.
#[lsm(hook = "path_chroot")]
pub fn path_chroot(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(1);
    if let Some(gen) = PATH_CACHE_GEN.get_ptr_mut(cache_gen::KERNEL) {
        // SAFETY: an aligned u64 map value that lives as long as the map. Atomic (BPF's
        // `lock xadd`; the target has no `AtomicU64::fetch_add`), so that concurrent chroots
        // cannot lose a bump.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(gen, 1) };
    }
    if previous != 0 {
        return previous;
    }
    if crate::view::chroot_refused(ctx.arg(0)) {
        -crate::EACCES
    } else {
        0
    }
}
