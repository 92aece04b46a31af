//! Reads of kernel memory at offsets known only at load time.

use core::mem::MaybeUninit;

use aya_ebpf::helpers::{bpf_probe_read_kernel, generated::bpf_probe_read_kernel_str};

use carapace_common::kfunc;

use crate::{globals, maps::count_error};

/// Reads a `T` at `base + offset`, counting a failure at `site`.
#[inline(always)]
pub fn read<T>(base: *const u8, offset: usize, site: u32) -> Option<T> {
    // SAFETY: bpf_probe_read_kernel checks the address; a bad one returns an error.
    if let Ok(v) = unsafe { bpf_probe_read_kernel(base.wrapping_add(offset).cast::<T>()) } {
        Some(v)
    } else {
        count_error(site);
        None
    }
}

/// Loads a `T` at `base + offset` directly, for `base` a pointer whose kernel type the
/// verifier knows (a hook argument, or a pointer loaded from one this way): it checks the
/// offset against the type and makes the load fault-safe (a bad address reads as zero).
/// Far cheaper than a `bpf_probe_read_kernel` call.
///
/// # Safety
/// `offset` must be that of a member of `base`'s type, from the running kernel's BTF.
#[inline(always)]
pub unsafe fn load<T: Copy>(base: *const u8, offset: usize) -> T {
    // SAFETY: per the contract; the verifier rejects a load it cannot prove safe.
    unsafe { core::ptr::read_volatile(base.wrapping_add(offset).cast::<T>()) }
}

/// The sequence counts of the kernel's `seqlock_t`s at `a` and `b` (a seqlock's first
/// member, lockdep or not). Where the kernel has `bpf_rdonly_cast`, direct loads through the
/// pointers it types (the verifier inlines the call to a register move: a few instructions
/// where `bpf_probe_read_kernel` costs ~45); elsewhere that helper. Both at once, so that the
/// choice is read and taken once.
#[inline(always)]
pub fn sequences(a: u64, b: u64, site: u32) -> Option<(u32, u32)> {
    let btf_id = globals::btf_seqcount();
    // A load-time constant: the verifier walks one branch only, so the placeholders left
    // as register moves on older kernels are never reached (see `carapace_common::kfunc`).
    if btf_id == 0 {
        return Some((
            read::<u32>(a as *const u8, 0, site)?,
            read::<u32>(b as *const u8, 0, site)?,
        ));
    }
    Some((cast_load(a, btf_id), cast_load(b, btf_id)))
}

#[inline(always)]
fn cast_load(addr: u64, btf_id: u32) -> u32 {
    let seqcount: *const u32;
    // SAFETY: the daemon rewrote the placeholder into `bpf_rdonly_cast(addr, btf_id)`, a
    // call that clobbers r0-r5 like any other; it returns `addr` typed as an untrusted
    // `struct seqcount *`, on which the verifier allows (fault-safe) loads of its members.
    unsafe {
        core::arch::asm!(
            ".8byte {call}",
            call = const kfunc::RDONLY_CAST_PLACEHOLDER,
            in("r1") addr,
            in("r2") u64::from(btf_id),
            lateout("r0") seqcount,
            lateout("r1") _,
            lateout("r2") _,
            lateout("r3") _,
            lateout("r4") _,
            lateout("r5") _,
            options(nostack, readonly),
        );
        core::ptr::read_volatile(seqcount)
    }
}

/// Copies a NUL-terminated kernel string into `dst`; returns the bytes written with the NUL.
#[inline(always)]
pub fn read_str(src: *const u8, dst: &mut [u8], site: u32) -> Option<usize> {
    // SAFETY: the helper bounds the write by dst.len() and checks the source address.
    let n =
        unsafe { bpf_probe_read_kernel_str(dst.as_mut_ptr().cast(), dst.len() as u32, src.cast()) };
    if n <= 0 {
        count_error(site);
        return None;
    }
    Some(n as usize)
}

/// Zeroes a buffer whose length is a multiple of 8 and which is 8-byte aligned. Volatile
/// stores: LLVM would turn plain ones into a call to `memset`, a byte loop the verifier
/// walks byte by byte, again for every state its caller reaches it in.
#[inline(always)]
pub fn zero_words(buf: &mut [u8]) {
    let words = buf.len() / 8;
    #[expect(
        clippy::cast_ptr_alignment,
        reason = "callers pass 8-byte aligned buffers"
    )]
    let ptr = buf.as_mut_ptr().cast::<u64>();
    for i in 0..words {
        // SAFETY: i < len / 8 and callers pass 8-byte aligned buffers.
        unsafe { ptr.add(i).write_volatile(0) };
    }
}

/// Zeroes `buf` in place with one store per word and returns it. Not an array built and
/// copied: LLVM turns the zeroing or copying of known zeros into a call to `memset`, a byte
/// loop the verifier walks again for every state of its caller.
#[inline(always)]
pub fn zero_in_place<const N: usize>(buf: &mut MaybeUninit<[u64; N]>) -> &mut [u64; N] {
    let ptr = buf.as_mut_ptr().cast::<u64>();
    for i in 0..N {
        // SAFETY: i < N, inside the array.
        unsafe { ptr.add(i).write_volatile(0) };
    }
    // SAFETY: every word was written above.
    unsafe { buf.assume_init_mut() }
}

/// The bytes of a word buffer.
#[inline(always)]
pub fn bytes_of<const N: usize>(words: &mut [u64; N]) -> &mut [u8] {
    // SAFETY: any byte pattern is a valid u64 and the slice covers exactly the array.
    unsafe { core::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), N * 8) }
}
