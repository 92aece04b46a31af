//! `socket_sendmsg`: a datagram sent with a destination address (`sendto`, `sendmsg`,
//! `sendmmsg`, `io_uring` sends) reaches that address without any `connect`, so the address is
//! judged here by the same rules as `socket_connect` — an `AF_UNSPEC` address on an IPv4
//! socket as the IPv4 address the protocol takes it for. Sends on connected sockets carry no
//! address (their `connect` was judged). Ancillary data that routes the packet by hand is
//! refused (`route_opts`).

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, AF_INET, AF_INET6, AF_UNIX, AF_UNSPEC};

use crate::{
    gate, globals, kread, maps::CONFIG, resolver_peer, route_opts, socket_connect, EACCES,
};

#[lsm(hook = "socket_sendmsg")]
pub fn socket_sendmsg(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    // A constant verdict: the verifier bounds the program exit value.
    if try_sendmsg(&ctx).is_some() {
        -EACCES
    } else {
        0
    }
}

fn try_sendmsg(ctx: &LsmContext) -> Option<i32> {
    let msg: u64 = ctx.arg(1);
    let Some(session) = gate::current_session() else {
        // Outside every session: only a session's resolver is out of reach.
        return resolver_peer::foreign_send(msg).then_some(-EACCES);
    };
    let config = CONFIG.get(0)?;
    if (config.net_rule_ops | config.path_rule_ops) & op::NETWORK == 0 {
        return None;
    }
    let sock: *const u8 = ctx.arg(0);
    let sk = kread::read::<u64>(sock, globals::socket_sk(), errsite::READ_SOCKADDR).unwrap_or(0);
    if config.net_rule_ops & op::NETWORK != 0 {
        let found = route_opts::in_control(sk, msg);
        if found != 0 {
            return Some(route_opts::deny(&session, found));
        }
    }
    // The kernel copied the address into its own memory before this hook runs.
    let sockaddr: *const u8 = kread::read(
        msg as *const u8,
        globals::msghdr_msg_name(),
        errsite::READ_SOCKADDR,
    )?;
    if sockaddr.is_null() {
        return None;
    }
    let mut family: u16 = kread::read(sockaddr, 0, errsite::READ_SOCKADDR)?;
    if family == AF_UNSPEC && ipv4_socket(sk) {
        // UDP and raw IPv4 sockets send to an `AF_UNSPEC` address as to an IPv4 one.
        family = AF_INET;
    }
    // Another session's resolver (this session's is its own to ask).
    if resolver_peer::foreign_resolver(sockaddr as u64, family) {
        return Some(-EACCES);
    }
    match family {
        AF_INET | AF_INET6 if config.net_rule_ops & op::NETWORK != 0 => {
            socket_connect::inet(&session, sockaddr, family)
        }
        AF_UNIX if config.path_rule_ops & op::NETWORK != 0 => {
            socket_connect::unix(&session, sockaddr)
        }
        _ => None,
    }
}

/// Whether `sk` (a `struct sock *`) is an IPv4 socket; unreadable counts as one (the
/// address is then judged, fail closed).
#[inline(always)]
fn ipv4_socket(sk: u64) -> bool {
    kread::read::<u16>(
        sk as *const u8,
        globals::sock_family(),
        errsite::READ_SOCKADDR,
    )
    .is_none_or(|f| f == AF_INET)
}
