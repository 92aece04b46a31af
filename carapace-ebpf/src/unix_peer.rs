//! `unix_stream_connect` and `unix_may_send`: the unix socket a session's process reaches,
//! once the kernel has resolved the address to the listening socket (`other`).
//!
//! - A listener the session made itself is its own business: binding a name is a creation
//!   the `path_mknod` hook judged, so no protected path can be one of them.
//! - A listener made outside the session is judged by the path it is bound to, spelled as
//!   the task sees it (`dpath`), for `network` path rules and for `unix: outside-session`
//!   (`op::OUTSIDE`, with its exceptions): the address as the task wrote it (which
//!   `socket_connect` judges) may be relative or go through a symlink or a bind mount, and a
//!   socket made after the rules loaded has no inode in the maps. The inode the daemon
//!   recorded for a protected socket path is checked too.
//! - An abstract listener (`@name`) outside the session has no path: it is refused under
//!   `unix: outside-session`, whose exceptions are paths.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, subject, UNIX_PATH_MAX};

use crate::{
    event::{self, Subject},
    gate, globals, inode, kread, link_rename,
    maps::{CONFIG, SCRATCH},
    matcher::{self, Object, PathSubject, Verdict},
    name_ops,
};

#[lsm(hook = "unix_stream_connect")]
pub fn unix_stream_connect(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    // unix_stream_connect(sock, other, newsk): `other` is the listening socket.
    crate::verdict(check_peer(ctx.arg(1)))
}

#[lsm(hook = "unix_may_send")]
pub fn unix_may_send(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(2);
    if previous != 0 {
        return previous;
    }
    // unix_may_send(sock, other) takes `struct socket`s.
    let other: *const u8 = ctx.arg(1);
    let Some(sk) = kread::read::<*const u8>(other, globals::socket_sk(), errsite::READ_SOCKADDR)
    else {
        return 0;
    };
    crate::verdict(check_peer(sk))
}

fn check_peer(sk: *const u8) -> Option<i32> {
    let session = gate::current_session()?;
    let config = CONFIG.get(0)?;
    let ops = config.path_rule_ops & (op::NETWORK | op::OUTSIDE);
    if ops == 0 || sk.is_null() {
        return None;
    }
    // `struct unix_sock` starts with its `struct sock`; its bound path (no dentry for
    // abstract and unnamed sockets).
    let path = sk.wrapping_add(globals::unix_sock_path());
    let dentry =
        kread::read::<u64>(path, globals::path_dentry(), errsite::READ_SOCKADDR).unwrap_or(0);
    if dentry != 0 && ops & op::NETWORK != 0 {
        if let Some(stands) = refused_by_inode(dentry) {
            return event::denial(stands);
        }
    }
    if gate::socket_within(sk as u64, session.cgroup) {
        return None;
    }
    let mnt = kread::read::<u64>(path, globals::path_mnt(), errsite::READ_SOCKADDR).unwrap_or(0);
    let packed = if dentry != 0 && mnt != 0 {
        name_ops::judge(dentry, mnt, ops, 0)
    } else if ops & op::OUTSIDE != 0 {
        abstract_peer(sk)
    } else {
        0
    };
    if packed == 0 {
        return None;
    }
    event::denial(report(packed))
}

/// Whether the socket file at `dentry` is one the daemon recorded for a `network` rule;
/// reports the refusal: `Some(true)` when it stands, `Some(false)` when only reported (see
/// `event::emit`). A subprogram of its own: inlined, its frame made the deepest call
/// chain (through `name_ops::judge`) too large for 6.1's verifier.
#[inline(never)]
fn refused_by_inode(dentry: u64) -> Option<bool> {
    let verdict = inode::of_dentry(dentry as *const u8)
        .and_then(|k| matcher::check_inode(&k, op::NETWORK))?;
    let Some(session) = gate::member_session() else {
        return Some(true);
    };
    Some(link_rename::deny(
        &session,
        verdict,
        &Subject::named(subject::UNIX, None, 0),
        dentry as *const u8,
    ))
}

/// Judges an abstract (or unreadable) listener outside the session: as the root of the path
/// space, which `unix: outside-session` covers and no exception names; then leaves the
/// socket's name (`\0name`, shown as `@name`) in the scratch key for the event.
#[inline(never)]
fn abstract_peer(sk: *const u8) -> u64 {
    let Some(scratch) = SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let scratch = unsafe { &mut *scratch };
    kread::zero_words(&mut scratch.key.data);
    scratch.key.data[0] = b'/';
    let Some(config) = CONFIG.get(0) else {
        return 0;
    };
    let mut subject = PathSubject {
        scratch,
        len: 1,
        has_name: false,
        inode: None,
        ancestors: false,
        live: false,
        object: Object::None,
    };
    let Some(verdict) = matcher::check_path(&mut subject, config, op::OUTSIDE) else {
        return 0;
    };
    let data = &mut subject.scratch.key.data;
    data[0] = 0;
    // unix_sock->addr->name: a `struct sockaddr_un` after the family.
    let name = kread::read::<u64>(sk, globals::unix_sock_addr(), errsite::READ_SOCKADDR)
        .filter(|a| *a != 0)
        .map(|a| (a as *const u8).wrapping_add(globals::unix_address_name() + 2));
    if let Some(name) = name {
        // SAFETY: bpf_probe_read_kernel checks the address; the destination is the key's
        // first UNIX_PATH_MAX bytes (the name's NUL first byte is read again, harmlessly).
        unsafe {
            aya_ebpf::helpers::generated::bpf_probe_read_kernel(
                data.as_mut_ptr().cast(),
                UNIX_PATH_MAX as u32,
                name.cast(),
            );
        }
    }
    (u64::from(verdict.rule) << 32) | u64::from(verdict.op)
}

/// Reports the refusal of a packed verdict on the socket left in the scratch key; true when
/// it stands (see `event::emit`; unreported, it stands).
#[inline(never)]
fn report(packed: u64) -> bool {
    let (Some(session), Some(scratch)) = (gate::member_session(), SCRATCH.get_ptr(0)) else {
        return true;
    };
    let verdict = Verdict {
        rule: (packed >> 32) as u32,
        op: packed as u32,
    };
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let path = unsafe { &(*scratch).key.data };
    event::emit(
        &session,
        verdict,
        &Subject::named(subject::UNIX, Some(path), 0),
    )
}
