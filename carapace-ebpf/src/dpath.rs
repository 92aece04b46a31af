//! Spells a (dentry, mount) pair as the absolute path the current task sees, for the hooks
//! that judge a name but receive no `struct file`: `bpf_d_path` is allowed only on the
//! sleepable LSM hooks, and none of the `path_*` hooks (unlink, rename, link, mknod, …) is
//! one. This is the kernel's `prepend_path` walk: up the dentries to the mount's root, across
//! to the mount point in the parent mount, until the task's root or the namespace's root.
//!
//! One `bpf_loop` callback per component, so the verifier checks a component once whatever
//! the depth. The path is written backwards into `Scratch::spelled` and copied, zero-tailed,
//! into the scratch key, where `matcher::check_path` expects it.

use aya_ebpf::{
    cty::c_void,
    helpers::generated::{bpf_get_current_task, bpf_loop, bpf_probe_read_kernel},
};
use carapace_common::{errsite, PATH_MAX};

use crate::{globals, kread, maps::SCRATCH};

/// Components (and mount crossings) walked at most; a path of `PATH_MAX - 1` bytes has at
/// most half as many components. More is refused as too long (fail closed).
const MAX_STEPS: u32 = PATH_MAX as u32;

const GOING: u32 = 0;
const DONE: u32 = 1;
const TOO_LONG: u32 = 2;
const FAILED: u32 = 3;

/// What [`step`] reads and writes between components. Scalars only (kernel addresses as
/// numbers), as a `bpf_loop` context must be.
#[repr(C)]
struct Walk {
    dentry: u64,
    mnt: u64,
    root_dentry: u64,
    root_mnt: u64,
    /// The path so far is `spelled[pos..PATH_MAX]`.
    pos: u32,
    status: u32,
}

/// Why a pair could not be spelled.
pub enum Unspelled {
    /// Longer than `PATH_MAX - 1` bytes: the caller denies what a path rule could cover.
    TooLong,
    /// A kernel read failed (counted under `errsite::PATH_WALK`).
    Failed,
}

#[inline(always)]
fn read_u64(addr: u64) -> Option<u64> {
    kread::read::<u64>(addr as *const u8, 0, errsite::PATH_WALK)
}

/// One component or mount crossing, as a `bpf_loop` callback. 0 to go on, 1 to stop.
extern "C" fn step(_index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `Walk` on the caller's stack that `spell` passed to bpf_loop.
    let w = unsafe { &mut *ctx.cast::<Walk>() };
    match advance(w) {
        Some(GOING) => 0,
        Some(status) => {
            w.status = status;
            1
        }
        None => {
            w.status = FAILED;
            1
        }
    }
}

#[inline(always)]
fn advance(w: &mut Walk) -> Option<u32> {
    if w.dentry == w.root_dentry && w.mnt == w.root_mnt {
        return Some(DONE);
    }
    let mnt_root = read_u64(w.mnt.wrapping_add(globals::vfsmount_mnt_root() as u64))?;
    let parent = read_u64(w.dentry.wrapping_add(globals::dentry_d_parent() as u64))?;
    if w.dentry == mnt_root || w.dentry == parent {
        if w.dentry != mnt_root {
            // A file system's root that is not its mount's root: a disconnected dentry, as
            // far up as the kernel's own d_path gets.
            return Some(DONE);
        }
        let mount = w.mnt.wrapping_sub(globals::mount_mnt());
        let mnt_parent = read_u64(mount.wrapping_add(globals::mount_mnt_parent() as u64))?;
        if mnt_parent == mount || mnt_parent == 0 {
            return Some(DONE);
        }
        w.dentry = read_u64(mount.wrapping_add(globals::mount_mnt_mountpoint() as u64))?;
        w.mnt = mnt_parent.wrapping_add(globals::mount_mnt());
        return Some(GOING);
    }
    let d_name = w.dentry.wrapping_add(globals::dentry_d_name() as u64);
    let name = read_u64(d_name.wrapping_add(globals::qstr_name() as u64))?;
    let scratch = SCRATCH.get_ptr_mut(0)?;
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks. `raw` holds
    // PATH_MAX bytes and the helper writes at most that many.
    let n = unsafe { bpf_probe_read_kernel_str_into(&mut (*scratch).raw, name as *const c_void) };
    if n <= 1 {
        return None;
    }
    let len = (n - 1) as u32;
    // The component and its '/' must fit with the path at least one byte from the start.
    if w.pos < len + 2 {
        return Some(TOO_LONG);
    }
    let at = (w.pos - len) & (PATH_MAX as u32 - 1);
    let len = len & (PATH_MAX as u32 - 1);
    // SAFETY: `at` and `len` are each below PATH_MAX, so the copy stays inside the
    // 2 * PATH_MAX bytes of `spelled`; the source is the scratch's own `raw`.
    unsafe {
        let spelled = &mut (*scratch).spelled;
        bpf_probe_read_kernel(
            spelled.as_mut_ptr().add(at as usize).cast(),
            len,
            (*scratch).raw.as_ptr().cast(),
        );
        let slash = (at - 1) & (PATH_MAX as u32 - 1);
        spelled[slash as usize] = b'/';
        w.pos = slash;
    }
    w.dentry = parent;
    Some(GOING)
}

/// `bpf_probe_read_kernel_str` into a whole buffer; the bytes written with the NUL, or < 0.
///
/// # Safety
/// `src` is a kernel address (the helper checks it).
#[inline(always)]
unsafe fn bpf_probe_read_kernel_str_into(dst: &mut [u8; PATH_MAX], src: *const c_void) -> i64 {
    // SAFETY: the helper bounds its write by the buffer's length.
    unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_kernel_str(
            dst.as_mut_ptr().cast(),
            PATH_MAX as u32,
            src,
        )
    }
}

/// Writes the absolute path of `dentry` reached through the `struct vfsmount` at `mnt` into
/// the scratch key (zero-tailed) and returns its length without the NUL.
#[inline(never)]
pub fn spell(dentry: u64, mnt: u64) -> Result<u32, Unspelled> {
    let (root_dentry, root_mnt) = task_root().ok_or(Unspelled::Failed)?;
    let mut w = Walk {
        dentry,
        mnt,
        root_dentry,
        root_mnt,
        pos: PATH_MAX as u32,
        status: GOING,
    };
    // SAFETY: `step` has the callback signature bpf_loop expects and only touches `w`.
    unsafe {
        bpf_loop(
            MAX_STEPS,
            step as *mut c_void,
            core::ptr::from_mut(&mut w).cast::<c_void>(),
            0,
        );
    }
    match w.status {
        DONE => {}
        FAILED => return Err(Unspelled::Failed),
        // Out of steps counts as too long: fail closed.
        _ => return Err(Unspelled::TooLong),
    }
    let scratch = SCRATCH.get_ptr_mut(0).ok_or(Unspelled::Failed)?;
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let scratch = unsafe { &mut *scratch };
    kread::zero_words(&mut scratch.key.data);
    let pos = w.pos & (PATH_MAX as u32 - 1);
    if w.pos >= PATH_MAX as u32 {
        // Nothing above the root: the path is "/".
        scratch.key.data[0] = b'/';
        return Ok(1);
    }
    let len = (PATH_MAX as u32 - pos) & (PATH_MAX as u32 - 1);
    // SAFETY: `pos` and `len` are below PATH_MAX: the read stays inside `spelled` and the
    // write inside the PATH_MAX-byte key, whose last byte stays the NUL (len < PATH_MAX).
    unsafe {
        bpf_probe_read_kernel(
            scratch.key.data.as_mut_ptr().cast(),
            len,
            scratch.spelled.as_ptr().add(pos as usize).cast(),
        );
    }
    Ok(len)
}

/// The current task's root (`fs->root`) as (dentry, vfsmount) addresses.
#[inline(always)]
pub fn task_root() -> Option<(u64, u64)> {
    // SAFETY: a helper without arguments.
    let task = unsafe { bpf_get_current_task() } as *const u8;
    let fs = kread::read::<*const u8>(task, globals::task_fs(), errsite::PATH_WALK)?;
    let root = fs.wrapping_add(globals::fs_root());
    let dentry = kread::read::<u64>(root, globals::path_dentry(), errsite::PATH_WALK)?;
    let mnt = kread::read::<u64>(root, globals::path_mnt(), errsite::PATH_WALK)?;
    Some((dentry, mnt))
}
