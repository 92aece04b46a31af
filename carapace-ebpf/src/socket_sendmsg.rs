//! `socket_sendmsg`: a datagram sent with a destination address (`sendto`, `sendmsg`,
//! `sendmmsg`, io_uring sends) reaches that address without any `connect`, so the address is
//! judged here by the same rules as `socket_connect`. Sends on connected sockets carry no
//! address (their `connect` was judged) and cost one pointer read.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, AF_INET, AF_INET6, AF_UNIX};

use crate::{gate, globals, kread, maps::CONFIG, socket_connect, EACCES};

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
    let session = gate::current_session()?;
    let config = CONFIG.get(0)?;
    if (config.net_rule_ops | config.path_rule_ops) & op::NETWORK == 0 {
        return None;
    }
    let msg: *const u8 = ctx.arg(1);
    // The kernel copied the address into its own memory before this hook runs.
    let sockaddr: *const u8 = kread::read(msg, globals::msghdr_msg_name(), errsite::READ_SOCKADDR)?;
    if sockaddr.is_null() {
        return None;
    }
    let family: u16 = kread::read(sockaddr, 0, errsite::READ_SOCKADDR)?;
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
