//! Routes set by hand. An IPv4 source-route option or an IPv6 routing header sends a packet
//! through addresses of the sender's choosing: the destination `socket_connect` and
//! `socket_sendmsg` judged is then only the first hop, or not on the path at all. While any
//! network rule is in force, a session may not set them — by `setsockopt` (`IP_OPTIONS`,
//! `IPV6_RTHDR`, RFC 2292's `IPV6_2292RTHDR` and `IPV6_2292PKTOPTIONS`) nor as ancillary
//! data of a send (`IP_RETOPTS`, `IP_OPTIONS`, `IPV6_RTHDR`, `IPV6_2292RTHDR`).

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, route_opt, subject, AF_INET, AF_INET6};

use crate::{event::Subject, gate, globals, guard, kread, maps::CONFIG};

/// Ancillary headers read at most; more than this on an IP socket is refused rather than
/// left unread (no program sends that many).
const MAX_CMSGS: u32 = 16;
/// `cmsghdr`: `size_t cmsg_len; int cmsg_level; int cmsg_type;`, then data, 8-aligned.
const CMSG_HDR: u64 = 16;
/// [`in_control`]'s answer when the ancillary data cannot be read to its end.
const UNREAD: u32 = u32::MAX;

#[lsm(hook = "socket_setsockopt")]
pub fn socket_setsockopt(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    // socket_setsockopt(sock, level, optname); the option first: every setsockopt passes.
    let level: i32 = ctx.arg(1);
    let name: i32 = ctx.arg(2);
    if !route_opt::sets_route(level as u32, name as u32) {
        return 0;
    }
    let Some(session) = gate::current_session() else {
        return 0;
    };
    if CONFIG
        .get(0)
        .is_none_or(|c| c.net_rule_ops & op::NETWORK == 0)
    {
        return 0;
    }
    let detail = ((level as u32) << 16) | (name as u32 & 0xffff);
    guard::deny(
        &session,
        op::ROUTE,
        &Subject::bare(subject::SOCKOPT, detail),
    )
}

/// The route-setting ancillary data of a message sent on the IP socket `sk` (a `struct sock
/// *`) as `level << 16 | type`, [`UNREAD`] when it cannot be read to its end, or 0. The
/// kernel copied the ancillary data into its own memory before the hook.
#[inline(never)]
pub fn in_control(sk: u64, msg: u64) -> u32 {
    let family = kread::read::<u16>(
        sk as *const u8,
        globals::sock_family(),
        errsite::READ_SOCKADDR,
    );
    if family != Some(AF_INET) && family != Some(AF_INET6) {
        return 0;
    }
    let msg = msg as *const u8;
    let control =
        kread::read::<u64>(msg, globals::msghdr_msg_control(), errsite::READ_SOCKADDR).unwrap_or(0);
    let len = kread::read::<u64>(
        msg,
        globals::msghdr_msg_controllen(),
        errsite::READ_SOCKADDR,
    )
    .unwrap_or(0);
    if control == 0 || len < CMSG_HDR {
        return 0;
    }
    let mut at: u64 = 0;
    for _ in 0..MAX_CMSGS {
        if at + CMSG_HDR > len {
            return 0;
        }
        let Some(hdr) = kread::read::<[u32; 4]>(
            control.wrapping_add(at) as *const u8,
            0,
            errsite::READ_SOCKADDR,
        ) else {
            return UNREAD;
        };
        if route_opt::carries_route(hdr[2], hdr[3]) {
            return (hdr[2] << 16) | (hdr[3] & 0xffff);
        }
        let cmsg_len = u64::from(hdr[0]) | (u64::from(hdr[1]) << 32);
        // The kernel stops at a header shorter than itself (CMSG_NXTHDR).
        if cmsg_len < CMSG_HDR {
            return 0;
        }
        at = at.saturating_add((cmsg_len + 7) & !7);
    }
    if at + CMSG_HDR > len {
        0
    } else {
        UNREAD
    }
}

/// Refuses a send that carries route-setting ancillary data (`found`, from [`in_control`]).
#[inline(always)]
pub fn deny(session: &gate::Session, found: u32) -> i32 {
    guard::deny(session, op::ROUTE, &Subject::bare(subject::SOCKOPT, found))
}
