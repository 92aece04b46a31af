//! Server names of shared addresses (`tls: sni` rules): a session whose rules check them
//! has a proxy in carapaced (`SNI_PROXIES`), and its TCP connects to ports 443 and 80 of
//! addresses its resolver handed out (`LEARNED`) go there instead, from the same cgroup
//! `sock_addr` programs as the DNS redirection (`dns_redirect`, which calls in here). The
//! address first meant is kept by socket cookie (`ORIG_DST`), then, once the connect has
//! picked the client's port, by the client's address and port (`SNI_PEERS`, by `sni_peer`,
//! a `sock_ops` program): the proxy's accepted socket knows its peer, not the client
//! socket's cookie.
//!
//! Datagrams to those ports of those addresses (QUIC, which carries its server name
//! encrypted with keys any reader can derive, but which the proxy does not read) are
//! refused: clients fall back to TCP. The LSM hooks ran before these programs and judged
//! the address the process wrote.

use aya_ebpf::{
    bindings::{bpf_sock_addr, BPF_SOCK_OPS_TCP_CONNECT_CB},
    helpers::bpf_get_socket_cookie,
    macros::sock_ops,
    programs::{SockAddrContext, SockOpsContext},
};
use carapace_common::{
    op, subject, LearnedKey, OrigDst, SniPeerKey, AF_INET, AF_INET6, DNS_PORT, HTTPS_PORT,
    HTTP_PORT, RULE_DATAGRAM_BY_NAME,
};

use crate::{
    event::{self, Subject},
    gate,
    maps::{LEARNED, ORIG_DST, SNI_PEERS, SNI_PROXIES},
    matcher::Verdict,
    sock_addr::{remember, target6, wire_port, words_of, LOOPBACK4_WORD, PROCEED},
};

/// Refuse the operation (`EPERM` to the caller).
const REFUSE: i32 = 0;
const SOCK_STREAM: u32 = 1;

/// The port of the session's server-name proxy, when a connect or datagram to `user_port`
/// (as `bpf_sock_addr` holds it) of `addr` (IPv4 mapped) is to be checked by name.
#[inline(always)]
fn proxy_for(user_port: u32, addr: [u8; 16]) -> Option<u32> {
    if user_port != wire_port(HTTPS_PORT) && user_port != wire_port(HTTP_PORT) {
        return None;
    }
    let cgroup = gate::session_cgroup()?;
    // SAFETY: map values live as long as the map; read by copy.
    let proxy = unsafe { SNI_PROXIES.get(&cgroup) }.copied()?;
    if proxy == 0 || proxy > u32::from(u16::MAX) {
        return None;
    }
    let key = LearnedKey { cgroup, addr };
    // SAFETY: as above; only presence is read.
    unsafe { LEARNED.get(&key) }?;
    Some(wire_port(proxy as u16))
}

#[inline(always)]
fn mapped4(ip4: u32) -> [u8; 16] {
    let b = ip4.to_ne_bytes();
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, b[0], b[1], b[2], b[3],
    ]
}

#[inline(always)]
fn bytes6(words: [u32; 4]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..4].copy_from_slice(&words[0].to_ne_bytes());
    out[4..8].copy_from_slice(&words[1].to_ne_bytes());
    out[8..12].copy_from_slice(&words[2].to_ne_bytes());
    out[12..].copy_from_slice(&words[3].to_ne_bytes());
    out
}

/// Refuses a datagram (or a UDP connect) to `addr` (IPv4 mapped), port `user_port` as
/// `bpf_sock_addr` holds it, and tells the daemon, which names the address the session
/// looked up: without the event the program would see only its `EPERM`.
#[inline(always)]
fn refuse_datagram(user_port: u32, addr: [u8; 16], family: u16) -> i32 {
    if let Some(session) = gate::member_session() {
        let subject = Subject {
            kind: subject::INET,
            path: None,
            family,
            port: u16::from_be(user_port as u16),
            addr,
            detail: 0,
        };
        let verdict = Verdict {
            rule: RULE_DATAGRAM_BY_NAME,
            op: op::NETWORK,
        };
        event::emit(&session, verdict, &subject);
    }
    REFUSE
}

/// `connect4`: a TCP connect to a checked address goes to the proxy; a UDP one is refused.
#[inline(always)]
pub fn connect4(ctx: &SockAddrContext) -> i32 {
    // SAFETY: the kernel passes a valid `bpf_sock_addr` for the program's lifetime.
    let sa: &mut bpf_sock_addr = unsafe { &mut *ctx.sock_addr };
    let Some(proxy) = proxy_for(sa.user_port, mapped4(sa.user_ip4)) else {
        return PROCEED;
    };
    if sa.type_ != SOCK_STREAM {
        return refuse_datagram(sa.user_port, mapped4(sa.user_ip4), AF_INET);
    }
    let mut orig = OrigDst {
        port: sa.user_port as u16,
        family: AF_INET,
        ..OrigDst::default()
    };
    orig.addr[..4].copy_from_slice(&sa.user_ip4.to_ne_bytes());
    remember(ctx, &orig);
    sa.user_ip4 = LOOPBACK4_WORD;
    sa.user_port = proxy;
    PROCEED
}

/// `connect6`: as `connect4`; an IPv4-mapped destination goes to the proxy's IPv4 address,
/// mapped the same way.
#[inline(always)]
pub fn connect6(ctx: &SockAddrContext) -> i32 {
    // SAFETY: as in `connect4`.
    let sa: &mut bpf_sock_addr = unsafe { &mut *ctx.sock_addr };
    let words = [
        sa.user_ip6[0],
        sa.user_ip6[1],
        sa.user_ip6[2],
        sa.user_ip6[3],
    ];
    let addr = bytes6(words);
    let Some(proxy) = proxy_for(sa.user_port, addr) else {
        return PROCEED;
    };
    if sa.type_ != SOCK_STREAM {
        return refuse_datagram(sa.user_port, addr, AF_INET6);
    }
    let orig = OrigDst {
        addr,
        port: sa.user_port as u16,
        family: AF_INET6,
        pad: 0,
    };
    remember(ctx, &orig);
    let target = words_of(&target6(words));
    sa.user_ip6[0] = target[0];
    sa.user_ip6[1] = target[1];
    sa.user_ip6[2] = target[2];
    sa.user_ip6[3] = target[3];
    sa.user_port = proxy;
    PROCEED
}

/// `sendmsg4`: a datagram to a checked address and port is refused.
#[inline(always)]
pub fn sendmsg4(ctx: &SockAddrContext) -> i32 {
    // SAFETY: as in `connect4`.
    let sa: &bpf_sock_addr = unsafe { &*ctx.sock_addr };
    let addr = mapped4(sa.user_ip4);
    match proxy_for(sa.user_port, addr) {
        Some(_) => refuse_datagram(sa.user_port, addr, AF_INET),
        None => PROCEED,
    }
}

/// `sendmsg6`: as `sendmsg4`.
#[inline(always)]
pub fn sendmsg6(ctx: &SockAddrContext) -> i32 {
    // SAFETY: as in `connect4`.
    let sa: &bpf_sock_addr = unsafe { &*ctx.sock_addr };
    let words = [
        sa.user_ip6[0],
        sa.user_ip6[1],
        sa.user_ip6[2],
        sa.user_ip6[3],
    ];
    let addr = bytes6(words);
    match proxy_for(sa.user_port, addr) {
        Some(_) => refuse_datagram(sa.user_port, addr, AF_INET6),
        None => PROCEED,
    }
}

/// Once a redirected connect has its client port (`TCP_CONNECT_CB`, before the SYN), the
/// destination first meant moves from the socket's cookie to its address and port, where
/// the proxy finds it.
#[sock_ops]
pub fn sni_peer(ctx: SockOpsContext) -> u32 {
    if ctx.op() == BPF_SOCK_OPS_TCP_CONNECT_CB {
        let _ = record_peer(&ctx);
    }
    1
}

/// One field of the `bpf_sock_ops` context, loaded at its own offset: the verifier refuses
/// a load through a context pointer the program moved, which the compiler makes of loads it
/// merges across branches (`ctx + 28`, then a load from it).
macro_rules! ops_field {
    ($ctx:expr, $($field:tt)+) => {
        // SAFETY: the context is the program's own `bpf_sock_ops`, valid while it runs.
        unsafe { core::ptr::read_volatile(&raw const (*$ctx.ops).$($field)+) }
    };
}

#[inline(always)]
fn record_peer(ctx: &SockOpsContext) -> Option<()> {
    // Every field first, unconditionally, each by its own load.
    let family = ops_field!(ctx, family);
    let ip4 = ops_field!(ctx, local_ip4);
    let ip6 = [
        ops_field!(ctx, local_ip6[0]),
        ops_field!(ctx, local_ip6[1]),
        ops_field!(ctx, local_ip6[2]),
        ops_field!(ctx, local_ip6[3]),
    ];
    let port = ops_field!(ctx, local_port);
    // SAFETY: the context is the program's own `bpf_sock_ops`.
    let cookie = unsafe { bpf_get_socket_cookie(ctx.ops.cast()) };
    // SAFETY: map values live as long as the map; read by copy.
    let orig = unsafe { ORIG_DST.get(&cookie) }.copied()?;
    // DNS over TCP, redirected to the resolver: not the proxy's.
    if orig.port == DNS_PORT.to_be() {
        return None;
    }
    let addr = if family == u32::from(AF_INET) {
        mapped4(ip4)
    } else {
        bytes6(ip6)
    };
    let key = SniPeerKey {
        addr,
        port: port as u16,
        pad: 0,
        pad2: 0,
    };
    SNI_PEERS.insert(&key, &orig, 0).ok()?;
    let _ = ORIG_DST.remove(&cookie);
    Some(())
}
