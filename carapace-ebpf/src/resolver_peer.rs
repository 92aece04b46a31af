//! A session's resolver answers its session only. It listens on a loopback port that any
//! process of the machine could send to directly; a query from another session or from
//! outside every session would have names learned into the session (opening addresses
//! for it) or probe its allow-list. The session's own queries reach the resolver by the
//! `dns_redirect` rewrite, which runs after the LSM hooks: the hooks see the address the
//! process wrote (port 53 of some server), never the resolver's port. So a connect or a
//! datagram whose written destination is a resolver's port on loopback is refused unless
//! the caller is in that resolver's session (which may ask its resolver directly).
//!
//! Checked for every task, in sessions or not, but only as far as a loopback or
//! unspecified address (which the kernel sends to loopback): one map lookup then.

use carapace_common::{errsite, AF_INET, AF_INET6, AF_UNSPEC};

use crate::{gate, globals, kread, maps::RESOLVER_PORTS};

/// Whether a connect or datagram of the current task to `sockaddr` (a kernel copy of a
/// `sockaddr_in`/`sockaddr_in6`, `family` already read) goes to the resolver of a session
/// the task is not in. Unreadable addresses are left to the other checks.
#[inline(never)]
pub fn foreign_resolver(sockaddr: u64, family: u16) -> bool {
    let at = sockaddr as *const u8;
    let local = match family {
        AF_INET => kread::read::<[u8; 4]>(at, 4, errsite::READ_SOCKADDR)
            .is_some_and(|a| a[0] == 127 || a == [0; 4]),
        AF_INET6 => {
            kread::read::<[u8; 16]>(at, 8, errsite::READ_SOCKADDR).is_some_and(|a| local6(&a))
        }
        _ => false,
    };
    if !local {
        return false;
    }
    let Some(port) = kread::read::<u16>(at, 2, errsite::READ_SOCKADDR) else {
        return false;
    };
    // SAFETY: map values live as long as the map; read by copy.
    let Some(owner) = (unsafe { RESOLVER_PORTS.get(&u32::from(u16::from_be(port))) }).copied()
    else {
        return false;
    };
    gate::session_cgroup() != Some(owner)
}

/// Whether a datagram sent with destination address (`msg`, a `struct msghdr *` whose
/// address the kernel has copied) goes to a session's resolver from a task outside that
/// session. `AF_UNSPEC` is read as IPv4 whatever the socket: refusing more is safe here.
#[inline(never)]
pub fn foreign_send(msg: u64) -> bool {
    let Some(sockaddr) = kread::read::<u64>(
        msg as *const u8,
        globals::msghdr_msg_name(),
        errsite::READ_SOCKADDR,
    ) else {
        return false;
    };
    if sockaddr == 0 {
        return false;
    }
    match kread::read::<u16>(sockaddr as *const u8, 0, errsite::READ_SOCKADDR) {
        Some(AF_UNSPEC) => foreign_resolver(sockaddr, AF_INET),
        Some(family) => foreign_resolver(sockaddr, family),
        None => false,
    }
}

/// `::1`, `::`, or an IPv4-mapped loopback or unspecified address.
#[inline(always)]
fn local6(a: &[u8; 16]) -> bool {
    let mut i = 0;
    while i < 10 {
        if a[i] != 0 {
            return false;
        }
        i += 1;
    }
    match (a[10], a[11]) {
        (0, 0) => a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] <= 1,
        (0xff, 0xff) => a[12] == 127 || (a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] == 0),
        _ => false,
    }
}
