//! What the cgroup `sock_addr` programs share: the DNS redirection (`dns_redirect`) and the
//! server-name redirection (`sni_redirect`) both rewrite a destination to a loopback port
//! of carapaced and remember, by socket cookie, where the socket meant to go.
use aya_ebpf::{helpers::bpf_get_socket_cookie, programs::SockAddrContext};
use carapace_common::{OrigDst, LOOPBACK4, LOOPBACK6};

use crate::maps::ORIG_DST;

/// Let the operation go on (with the address as the program left it).
pub const PROCEED: i32 = 1;

/// `127.0.0.1` as `user_ip4` holds it.
pub const LOOPBACK4_WORD: u32 = u32::from_ne_bytes(LOOPBACK4);

/// `::ffff:0:0/96` as the first three words of `user_ip6`.
const MAPPED_PREFIX: [u32; 3] = [0, 0, u32::from_ne_bytes([0, 0, 0xff, 0xff])];

/// `::ffff:127.0.0.1`.
pub const MAPPED_LOOPBACK4: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];

/// Word by word: a comparison of arrays may become a `memcmp` call, which BPF has not.
#[inline(always)]
pub fn same(a: [u32; 4], b: [u32; 4]) -> bool {
    a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3]
}

/// An IPv6 address as the four words of `user_ip6`.
#[inline(always)]
pub fn words_of(addr: &[u8; 16]) -> [u32; 4] {
    [
        u32::from_ne_bytes([addr[0], addr[1], addr[2], addr[3]]),
        u32::from_ne_bytes([addr[4], addr[5], addr[6], addr[7]]),
        u32::from_ne_bytes([addr[8], addr[9], addr[10], addr[11]]),
        u32::from_ne_bytes([addr[12], addr[13], addr[14], addr[15]]),
    ]
}

/// `user_port` as the kernel stores it: the port in network byte order in its low half.
#[inline(always)]
pub fn wire_port(port: u16) -> u32 {
    u32::from(port.to_be())
}

#[inline(always)]
pub fn remember(ctx: &SockAddrContext, orig: &OrigDst) {
    // SAFETY: the context is the program's own `bpf_sock_addr`.
    let cookie = unsafe { bpf_get_socket_cookie(ctx.sock_addr.cast()) };
    // Should the map refuse (it evicts rather than fills), the reply keeps the resolver's
    // address and the process's resolver drops it: a failed lookup, not a leak.
    let _ = ORIG_DST.insert(&cookie, orig, 0);
}

/// The loopback address a redirected IPv6 destination (as `user_ip6` words) goes to: an
/// IPv4-mapped one to the IPv4 loopback, mapped the same way, so the socket stays an IPv4
/// one on the wire; any other to `::1`.
#[inline(always)]
pub fn target6(words: [u32; 4]) -> [u8; 16] {
    let mapped = words[0] == MAPPED_PREFIX[0]
        && words[1] == MAPPED_PREFIX[1]
        && words[2] == MAPPED_PREFIX[2];
    if mapped {
        MAPPED_LOOPBACK4
    } else {
        LOOPBACK6
    }
}
