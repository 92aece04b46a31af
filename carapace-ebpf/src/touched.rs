//! Record mode (`carapace run --record`): what a record session's processes were allowed to
//! do — files opened by action (read, write, execute), names removed, made, renamed or
//! changed (the `path_*` hooks) and addresses connected to — goes to the daemon on the
//! `TOUCHED` ring buffer, which it turns into a proposed allow-list.
//!
//! Called only after a hook allowed the operation. Sessions that do not record pay one bit
//! test of the already-loaded `Config` while no session records anywhere (`has::RECORDING`),
//! and one session lookup while one does. `TOUCHED_SEEN` keeps each (file, actions) and
//! (address, port) of a session to one event, checked before the path is spelled, so a
//! loop over one file costs a map lookup per open, not a path walk.

use core::ptr::addr_of_mut;

use aya_ebpf::{
    bindings::path,
    helpers::{bpf_get_current_pid_tgid, generated as gen},
};
use carapace_common::{
    errsite, has, op, path_op, subject, Config, DenyEvent, PATH_MAX, SESSION_RECORD, TOUCHED_RULE,
};

use crate::{
    dpath,
    gate::{self, Session},
    globals, inode,
    maps::{count_error, CONFIG, SCRATCH, TOUCHED, TOUCHED_KEY, TOUCHED_SEEN},
};

const TASK_COMM_LEN: u32 = 16;

/// The session of the current task if it records; `None` at the cost of one bit test
/// while no session records.
#[inline(always)]
pub fn recording(config: &Config) -> Option<Session> {
    if config.has & has::RECORDING == 0 {
        return None;
    }
    let session = gate::member_session()?;
    (session.state.flags & SESSION_RECORD != 0).then_some(session)
}

/// Reports that the session opened `file` (a `struct file *` the hook received) for `ops`
/// (`op::*`), once per (file, ops). A subprogram: its path walk is verified once, not once
/// per way the open was allowed.
#[inline(never)]
pub fn open(cgroup: u64, session: u32, file: *const u8, ops: u32) {
    let Some(inode) = inode::of_file(file) else {
        return;
    };
    if !first_time(cgroup, inode.dev, inode.ino, ops, 0) {
        return;
    }
    let Some(mut entry) = TOUCHED.reserve::<DenyEvent>(0) else {
        count_error(errsite::RINGBUF_FULL);
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: `ev` points at a reserved, writable DenyEvent; the path is spelled straight
    // into it (what follows its NUL is not read), `f_path` at its offset from BTF.
    unsafe {
        fill(ev, cgroup, session, ops, subject::PATH, path_op::OPEN);
        addr_of_mut!((*ev).port).write_volatile(0);
        addr_of_mut!((*ev).family).write_volatile(0);
        let f_path = file.wrapping_add(globals::file_f_path());
        let n = gen::bpf_d_path(
            f_path as *mut path,
            addr_of_mut!((*ev).path).cast(),
            PATH_MAX as u32,
        );
        if n <= 0 {
            count_error(errsite::D_PATH);
            addr_of_mut!((*ev).path[0]).write_volatile(0);
        }
    }
    entry.submit(0);
}

/// Reports that a record session changed the name `dentry` under the mount `mnt` — removed,
/// made, linked, renamed, truncated, its mode or owner changed (`kind`, a `path_op`) — for
/// `ops`, the operations the hook judged, once per (name, ops, kind). Called after the hook
/// allowed it; spelled here, since `name_ops::judge` spells only names a rule covers. A
/// subprogram of scalars, so its path walk is verified once, not once per hook. The name is
/// known by its dentry until spelled: a dentry freed and reused for another name with the
/// same operation may go unreported, which leaves that name out of the proposal (refused
/// under it, never allowed by mistake).
#[inline(never)]
pub fn name(dentry: u64, mnt: u64, ops: u32, kind: u32) {
    let Some(config) = CONFIG.get(0) else {
        return;
    };
    let Some(session) = recording(config) else {
        return;
    };
    if !first_time(session.cgroup, dentry, mnt, ops, kind) {
        return;
    }
    if dpath::spell(dentry, mnt).is_err() {
        return;
    }
    let Some(scratch) = SCRATCH.get_ptr(0) else {
        return;
    };
    let Some(mut entry) = TOUCHED.reserve::<DenyEvent>(0) else {
        count_error(errsite::RINGBUF_FULL);
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: `ev` points at a reserved, writable DenyEvent; the scratch key holds the
    // spelled, zero-tailed path (per-CPU; programs do not nest on one CPU for these hooks).
    unsafe {
        fill(
            ev,
            session.cgroup,
            session.state.session,
            ops,
            subject::PATH,
            kind,
        );
        addr_of_mut!((*ev).port).write_volatile(0);
        addr_of_mut!((*ev).family).write_volatile(0);
        let copied = gen::bpf_probe_read_kernel(
            addr_of_mut!((*ev).path).cast(),
            PATH_MAX as u32,
            (&raw const (*scratch).key.data).cast(),
        );
        if copied != 0 {
            addr_of_mut!((*ev).path[0]).write_volatile(0);
        }
    }
    entry.submit(0);
}

/// Reports that the session connected to an address (`id0`, `id1`: its 16 bytes, IPv4-mapped
/// for IPv4, as two words) at `port_family` (`family << 16 | port`), once per (address,
/// port). A subprogram of scalars: inlined, its locals pushed `socket_connect`'s call chain
/// past the verifier's 512 bytes of stack on Linux 6.1.
#[inline(never)]
pub fn connect(cgroup: u64, session: u32, id0: u64, id1: u64, port_family: u32) {
    let port = port_family as u16;
    let family = (port_family >> 16) as u16;
    if !first_time(cgroup, id0, id1, op::NETWORK, u32::from(port)) {
        return;
    }
    let Some(mut entry) = TOUCHED.reserve::<DenyEvent>(0) else {
        count_error(errsite::RINGBUF_FULL);
        return;
    };
    let ev = entry.as_mut_ptr();
    // SAFETY: `ev` points at a reserved, writable DenyEvent.
    unsafe {
        fill(ev, cgroup, session, op::NETWORK, subject::INET, 0);
        addr_of_mut!((*ev).port).write_volatile(port);
        addr_of_mut!((*ev).family).write_volatile(family);
        #[expect(
            clippy::cast_ptr_alignment,
            reason = "`addr` is at offset 40 of the 8-aligned `DenyEvent`"
        )]
        let to = addr_of_mut!((*ev).addr).cast::<u64>();
        to.write_volatile(id0);
        to.add(1).write_volatile(id1);
        addr_of_mut!((*ev).path[0]).write_volatile(0);
    }
    entry.submit(0);
}

/// Eight bytes of `bytes` from `at`, as one word.
#[inline(always)]
pub fn word(bytes: &[u8; 16], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_ne_bytes(w)
}

/// Whether (session `cgroup`, `id0`, `id1`, `ops`, `port`) was not reported yet (and is now
/// marked reported). The key is built in a per-CPU map value, not on the stack. A full map
/// forgets its oldest entry; a failed insert reports anyway (the daemon keeps each once).
#[inline(always)]
fn first_time(cgroup: u64, id0: u64, id1: u64, ops: u32, port: u32) -> bool {
    let Some(key) = TOUCHED_KEY.get_ptr_mut(0) else {
        return true;
    };
    // SAFETY: per-CPU value; programs do not nest on one CPU for these hooks.
    let key = unsafe {
        (*key).cgroup = cgroup;
        (*key).id0 = id0;
        (*key).id1 = id1;
        (*key).ops = ops;
        (*key).port = port;
        &*key
    };
    // SAFETY: only presence is read.
    if unsafe { TOUCHED_SEEN.get(key) }.is_some() {
        return false;
    }
    let _ = TOUCHED_SEEN.insert(key, &1, 0);
    true
}

/// The fields every touched event has.
///
/// # Safety
/// `ev` must point at a reserved, writable `DenyEvent`.
#[inline(always)]
unsafe fn fill(ev: *mut DenyEvent, cgroup: u64, session: u32, ops: u32, kind: u32, detail: u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: per the contract. Volatile stores, as in `event::emit`: plain stores of
    // constant zeros become a `memset` call.
    unsafe {
        addr_of_mut!((*ev).session_cgroup).write_volatile(cgroup);
        addr_of_mut!((*ev).session).write_volatile(session);
        addr_of_mut!((*ev).pid).write_volatile(pid_tgid as u32);
        addr_of_mut!((*ev).tgid).write_volatile((pid_tgid >> 32) as u32);
        addr_of_mut!((*ev).rule).write_volatile(TOUCHED_RULE);
        addr_of_mut!((*ev).op).write_volatile(ops);
        addr_of_mut!((*ev).subject).write_volatile(kind);
        addr_of_mut!((*ev).detail).write_volatile(detail);
        let comm = addr_of_mut!((*ev).comm);
        if gen::bpf_get_current_comm(comm.cast(), TASK_COMM_LEN) != 0 {
            comm.cast::<u8>().write_volatile(0);
        }
    }
}
