//! DNS of a session goes to its own resolver in carapaced (cgroup `sock_addr` programs,
//! attached to the Carapace root cgroup, so every session and whatever it nests below).
//!
//! A `connect` or a datagram to port 53 of any address, IPv4 or IPv6, from a task of a
//! session that has a resolver (`RESOLVERS`) is sent to that resolver on loopback instead;
//! the address first meant is kept by socket cookie, and a reply read from the resolver is
//! shown as coming from it, since resolvers drop answers from an address they did not ask.
//! `socket_connect` and `socket_sendmsg` let such connects and datagrams through: the LSM
//! hooks run before these programs and see the address the process wrote.
//!
//! These are not trampoline programs: they return 1 (go on) in every case, after rewriting
//! or not. The names the resolver refuses and the addresses it learns are the daemon's
//! business; what reaches the kernel is which addresses a session may connect to
//! (`matcher::check_net`, the `LEARNED` map).

use aya_ebpf::{
    bindings::bpf_sock_addr, helpers::bpf_get_socket_cookie, macros::cgroup_sock_addr,
    programs::SockAddrContext,
};
use carapace_common::{OrigDst, AF_INET, AF_INET6, DNS_PORT, LOOPBACK4, LOOPBACK6};

use crate::{
    gate,
    maps::{ORIG_DST, RESOLVERS},
    sni_redirect,
    sock_addr::{remember, same, target6, wire_port, words_of, MAPPED_LOOPBACK4, PROCEED},
};

// Each program also serves the server-name check (`sni_redirect`), on ports 443 and 80:
// never port 53, so at most one of the two rewrites an address.

#[cgroup_sock_addr(connect4)]
pub fn dns_connect4(ctx: SockAddrContext) -> i32 {
    redirect4(&ctx);
    sni_redirect::connect4(&ctx)
}

#[cgroup_sock_addr(sendmsg4)]
pub fn dns_sendmsg4(ctx: SockAddrContext) -> i32 {
    redirect4(&ctx);
    sni_redirect::sendmsg4(&ctx)
}

#[cgroup_sock_addr(connect6)]
pub fn dns_connect6(ctx: SockAddrContext) -> i32 {
    redirect6(&ctx);
    sni_redirect::connect6(&ctx)
}

#[cgroup_sock_addr(sendmsg6)]
pub fn dns_sendmsg6(ctx: SockAddrContext) -> i32 {
    redirect6(&ctx);
    sni_redirect::sendmsg6(&ctx)
}

#[cgroup_sock_addr(recvmsg4)]
pub fn dns_recvmsg4(ctx: SockAddrContext) -> i32 {
    restore4(&ctx);
    PROCEED
}

#[cgroup_sock_addr(recvmsg6)]
pub fn dns_recvmsg6(ctx: SockAddrContext) -> i32 {
    restore6(&ctx);
    PROCEED
}

/// The port of the current task's session resolver (host byte order), if it has one.
#[inline(always)]
fn resolver_port() -> Option<u16> {
    let cgroup = gate::session_cgroup()?;
    // SAFETY: map values live as long as the map.
    let port = unsafe { RESOLVERS.get(&cgroup) }?;
    u16::try_from(*port).ok().filter(|p| *p != 0)
}

/// For a DNS connect or datagram of a session with a resolver: the resolver's port, and
/// the record of where the socket meant to go (address to be filled in).
#[inline(always)]
fn dns_target(sa: &bpf_sock_addr, family: u16) -> Option<(u16, OrigDst)> {
    if sa.user_port != wire_port(DNS_PORT) {
        return None;
    }
    let port = resolver_port()?;
    let orig = OrigDst {
        port: DNS_PORT.to_be(),
        family,
        ..OrigDst::default()
    };
    Some((port, orig))
}

#[inline(always)]
fn redirect4(ctx: &SockAddrContext) {
    // SAFETY: the kernel passes a valid `bpf_sock_addr` for the program's lifetime.
    let sa: &mut bpf_sock_addr = unsafe { &mut *ctx.sock_addr };
    let Some((port, mut orig)) = dns_target(sa, AF_INET) else {
        return;
    };
    orig.addr[..4].copy_from_slice(&sa.user_ip4.to_ne_bytes());
    remember(ctx, &orig);
    sa.user_ip4 = u32::from_ne_bytes(LOOPBACK4);
    sa.user_port = wire_port(port);
}

#[inline(always)]
fn redirect6(ctx: &SockAddrContext) {
    // SAFETY: as in `redirect4`.
    let sa: &mut bpf_sock_addr = unsafe { &mut *ctx.sock_addr };
    let Some((port, mut orig)) = dns_target(sa, AF_INET6) else {
        return;
    };
    let words = [
        sa.user_ip6[0],
        sa.user_ip6[1],
        sa.user_ip6[2],
        sa.user_ip6[3],
    ];
    orig.addr[..4].copy_from_slice(&words[0].to_ne_bytes());
    orig.addr[4..8].copy_from_slice(&words[1].to_ne_bytes());
    orig.addr[8..12].copy_from_slice(&words[2].to_ne_bytes());
    orig.addr[12..].copy_from_slice(&words[3].to_ne_bytes());
    remember(ctx, &orig);
    let target = words_of(&target6(words));
    sa.user_ip6[0] = target[0];
    sa.user_ip6[1] = target[1];
    sa.user_ip6[2] = target[2];
    sa.user_ip6[3] = target[3];
    sa.user_port = wire_port(port);
}

/// Where the socket meant to go, if its DNS traffic was redirected and the datagram comes
/// from the resolver it went to.
#[inline(always)]
fn original(ctx: &SockAddrContext, from_port: u32) -> Option<OrigDst> {
    let port = resolver_port()?;
    if from_port != wire_port(port) {
        return None;
    }
    // SAFETY: as in `remember`.
    let cookie = unsafe { bpf_get_socket_cookie(ctx.sock_addr.cast()) };
    // SAFETY: map values live as long as the map; read by copy.
    unsafe { ORIG_DST.get(&cookie) }.copied()
}

#[inline(always)]
fn restore4(ctx: &SockAddrContext) {
    // SAFETY: as in `redirect4`.
    let sa: &mut bpf_sock_addr = unsafe { &mut *ctx.sock_addr };
    if sa.user_ip4 != u32::from_ne_bytes(LOOPBACK4) {
        return;
    }
    let Some(orig) = original(ctx, sa.user_port) else {
        return;
    };
    if orig.family == AF_INET {
        sa.user_ip4 = u32::from_ne_bytes([orig.addr[0], orig.addr[1], orig.addr[2], orig.addr[3]]);
        sa.user_port = u32::from(orig.port);
    }
}

#[inline(always)]
fn restore6(ctx: &SockAddrContext) {
    // SAFETY: as in `redirect4`.
    let sa: &mut bpf_sock_addr = unsafe { &mut *ctx.sock_addr };
    let from = [
        sa.user_ip6[0],
        sa.user_ip6[1],
        sa.user_ip6[2],
        sa.user_ip6[3],
    ];
    if !same(from, words_of(&LOOPBACK6)) && !same(from, words_of(&MAPPED_LOOPBACK4)) {
        return;
    }
    let Some(orig) = original(ctx, sa.user_port) else {
        return;
    };
    if orig.family != AF_INET6 {
        return;
    }
    let back = words_of(&orig.addr);
    sa.user_ip6[0] = back[0];
    sa.user_ip6[1] = back[1];
    sa.user_ip6[2] = back[2];
    sa.user_ip6[3] = back[3];
    sa.user_port = u32::from(orig.port);
}
