//! Pushes a denial to the daemon through the `EVENTS` ring buffer.

use core::ptr::addr_of_mut;

use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel_buf, generated as gen};
use carapace_common::{errsite, DenyEvent, PATH_MAX};

const TASK_COMM_LEN: usize = 16;

use crate::{
    gate::Session,
    maps::{count_error, EVENTS},
    matcher::Verdict,
};

pub struct Subject<'a> {
    pub kind: u32,
    pub path: Option<&'a [u8; PATH_MAX]>,
    pub family: u16,
    pub port: u16,
    pub addr: [u8; 16],
    pub detail: u32,
}

impl<'a> Subject<'a> {
    /// A file or unix socket (`kind`), by path when there is one, with a `detail` number.
    pub const fn named(kind: u32, path: Option<&'a [u8; PATH_MAX]>, detail: u32) -> Self {
        Self {
            kind,
            path,
            family: 0,
            port: 0,
            addr: [0; 16],
            detail,
        }
    }

    /// A subject with no path or address, only a `detail` number.
    pub const fn bare(kind: u32, detail: u32) -> Self {
        Self {
            kind,
            path: None,
            family: 0,
            port: 0,
            addr: [0; 16],
            detail,
        }
    }
}

#[inline(always)]
pub fn emit(session: &Session, verdict: Verdict, subject: &Subject<'_>) {
    let Some(mut entry) = EVENTS.reserve::<DenyEvent>(0) else {
        count_error(errsite::RINGBUF_FULL);
        return;
    };
    let ev = entry.as_mut_ptr();
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: `ev` points at a reserved, writable DenyEvent in the ring buffer. Volatile
    // stores: plain ones of constant zeros become a `memset` call, a byte loop the verifier
    // walks again for every verdict source of its caller.
    unsafe {
        addr_of_mut!((*ev).session_cgroup).write_volatile(session.cgroup);
        addr_of_mut!((*ev).session).write_volatile(session.state.session);
        addr_of_mut!((*ev).pid).write_volatile(pid_tgid as u32);
        addr_of_mut!((*ev).tgid).write_volatile((pid_tgid >> 32) as u32);
        addr_of_mut!((*ev).rule).write_volatile(verdict.rule);
        addr_of_mut!((*ev).op).write_volatile(verdict.op);
        addr_of_mut!((*ev).subject).write_volatile(subject.kind);
        addr_of_mut!((*ev).port).write_volatile(subject.port);
        addr_of_mut!((*ev).family).write_volatile(subject.family);
        addr_of_mut!((*ev).detail).write_volatile(subject.detail);
        #[expect(
            clippy::cast_ptr_alignment,
            reason = "`addr` is at offset 40 of the 8-aligned `DenyEvent`"
        )]
        let addr = addr_of_mut!((*ev).addr).cast::<u64>();
        addr.write_volatile(word(&subject.addr, 0));
        addr.add(1).write_volatile(word(&subject.addr, 8));
        // Straight into the event: aya's wrapper zeroes a stack copy first (a `memset` call).
        let comm = addr_of_mut!((*ev).comm);
        if gen::bpf_get_current_comm(comm.cast(), TASK_COMM_LEN as u32) != 0 {
            comm.cast::<u8>().write_volatile(0);
        }
        match subject.path {
            Some(path) => {
                if bpf_probe_read_kernel_buf(path.as_ptr(), &mut (*ev).path).is_err() {
                    addr_of_mut!((*ev).path[0]).write_volatile(0);
                }
            }
            None => addr_of_mut!((*ev).path[0]).write_volatile(0),
        }
    }
    entry.submit(0);
}

/// Eight bytes of `bytes` from `at`, as one word (both fields are 8-byte aligned).
#[inline(always)]
fn word(bytes: &[u8; 16], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(w)
}
