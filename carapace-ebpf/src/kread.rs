//! Reads of kernel memory at offsets known only at load time.

use aya_ebpf::helpers::{bpf_probe_read_kernel, generated::bpf_probe_read_kernel_str};

use crate::maps::count_error;

/// Reads a `T` at `base + offset`, counting a failure at `site`.
#[inline(always)]
pub fn read<T>(base: *const u8, offset: usize, site: u32) -> Option<T> {
    // SAFETY: bpf_probe_read_kernel checks the address; a bad one returns an error.
    match unsafe { bpf_probe_read_kernel(base.wrapping_add(offset).cast::<T>()) } {
        Ok(v) => Some(v),
        Err(_) => {
            count_error(site);
            None
        }
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

/// Zeroes a buffer whose length is a multiple of 8 and which is 8-byte aligned.
#[inline(always)]
pub fn zero_words(buf: &mut [u8]) {
    let words = buf.len() / 8;
    let ptr = buf.as_mut_ptr().cast::<u64>();
    for i in 0..words {
        // SAFETY: i < len / 8 and callers pass 8-byte aligned buffers.
        unsafe { ptr.add(i).write(0) };
    }
}

/// Clears every byte from `len` on: `bpf_d_path` leaves garbage after the terminating NUL,
/// which would spoil hash and LPM lookups.
#[inline(always)]
pub fn zero_tail(buf: &mut [u8; carapace_common::PATH_MAX], len: usize) {
    let ptr = buf.as_mut_ptr().cast::<u64>();
    for w in 0..carapace_common::PATH_MAX / 8 {
        let start = w * 8;
        // SAFETY: w < PATH_MAX / 8; the buffer is 8-byte aligned (see maps::Scratch).
        let word = unsafe { ptr.add(w) };
        if start >= len {
            // SAFETY: as above.
            unsafe { word.write(0) };
        } else if start + 8 > len {
            let keep = (len - start) as u32 * 8;
            // SAFETY: as above.
            unsafe { word.write(word.read() & ((1u64 << keep) - 1)) };
        }
    }
}
