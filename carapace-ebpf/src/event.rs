//! Pushes a denial to the daemon through the `EVENTS` ring buffer.

use core::ptr::addr_of_mut;

use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel_buf, generated as gen};
use carapace_common::{
    errsite, DenyEvent, EVENT_WOULD_DENY, MAX_RULES, PATH_MAX, RULE_NO_SHADOW, SESSION_SHADOW,
};

const TASK_COMM_LEN: usize = 16;

use crate::{
    gate::Session,
    maps::{count_error, EVENTS, RULES},
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

/// Reports the denial `verdict` of `subject`; true when it stands, false when the session
/// is in shadow mode and the rule may be shadowed: the event then says "would deny" and the
/// hook allows. The one place a rule's denial becomes the hook's answer, so shadow mode
/// covers every hook alike; the self-protection guards and the unmatchable-path denial
/// name no rule index and always stand.
#[inline(always)]
pub fn emit(session: &Session, verdict: Verdict, subject: &Subject<'_>) -> bool {
    let shadowed = shadowed(session, verdict.rule);
    let op = if shadowed {
        verdict.op | EVENT_WOULD_DENY
    } else {
        verdict.op
    };
    let Some(mut entry) = EVENTS.reserve::<DenyEvent>(0) else {
        count_error(errsite::RINGBUF_FULL);
        return !shadowed;
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
        addr_of_mut!((*ev).op).write_volatile(op);
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
    !shadowed
}

/// Whether a denial by `rule` only reports in `session`: a shadow session, and a rule of
/// the rule set (not a guard's pseudo-rule) that does not hold in shadow sessions too.
#[inline(always)]
fn shadowed(session: &Session, rule: u32) -> bool {
    session.state.flags & SESSION_SHADOW != 0
        && rule < MAX_RULES as u32
        && RULES
            .get(rule)
            .is_some_and(|meta| meta.flags & RULE_NO_SHADOW == 0)
}

/// The check's answer to a denial [`emit`] reported: `Some(-EACCES)` when it stands, else
/// `None` (allowed). Never `Some(0)`: every `Some` the checks return is then the same
/// constant, which keeps LLVM from carrying the answer in a register it also uses for
/// pointers (the verifier refused such a shift on 6.12).
#[inline(always)]
pub const fn denial(stands: bool) -> Option<i32> {
    if stands {
        Some(-crate::EACCES)
    } else {
        None
    }
}

/// The hook's answer to a denial [`emit`] reported: -EACCES when it stands, else 0.
#[inline(always)]
pub const fn answer(stands: bool) -> i32 {
    if stands {
        -crate::EACCES
    } else {
        0
    }
}

/// Eight bytes of `bytes` from `at`, as one word (both fields are 8-byte aligned).
#[inline(always)]
fn word(bytes: &[u8; 16], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(w)
}
