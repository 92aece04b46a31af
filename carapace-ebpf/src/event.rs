//! Pushes a denial to the daemon through the `EVENTS` ring buffer.

use aya_ebpf::helpers::{
    bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_probe_read_kernel_buf,
};
use carapace_common::{errsite, DenyEvent, PATH_MAX};

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

impl Subject<'_> {
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
    // SAFETY: `ev` points at a reserved, writable DenyEvent in the ring buffer.
    unsafe {
        (*ev).session_cgroup = session.cgroup;
        (*ev).session = session.state.session;
        (*ev).pid = pid_tgid as u32;
        (*ev).tgid = (pid_tgid >> 32) as u32;
        (*ev).rule = verdict.rule;
        (*ev).op = verdict.op;
        (*ev).subject = subject.kind;
        (*ev).port = subject.port;
        (*ev).family = subject.family;
        (*ev).detail = subject.detail;
        (*ev).addr = subject.addr;
        (*ev).comm = bpf_get_current_comm().unwrap_or([0; 16]);
        match subject.path {
            Some(path) => {
                if bpf_probe_read_kernel_buf(path.as_ptr(), &mut (*ev).path).is_err() {
                    (*ev).path[0] = 0;
                }
            }
            None => (*ev).path[0] = 0,
        }
    }
    entry.submit(0);
}
