//! `socket_connect`: IPv4, IPv6 (IPv4-mapped addresses fold into IPv4 entries) and unix
//! socket paths.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{
    errsite, has, op, subject, AF_INET, AF_INET6, AF_UNIX, DNS_PORT, SESSION_RECORD, UNIX_PATH_MAX,
};

use crate::{
    event::{self, Subject},
    gate::{self, Session},
    kread,
    maps::{CONFIG, RESOLVERS, SCRATCH},
    matcher::{self, Object, PathSubject},
    resolver_peer, touched, EACCES,
};

#[lsm(hook = "socket_connect")]
pub fn socket_connect(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    try_connect(&ctx).unwrap_or(0)
}

fn try_connect(ctx: &LsmContext) -> Option<i32> {
    let sockaddr: *const u8 = ctx.arg(1);
    let family: u16 = kread::read(sockaddr, 0, errsite::READ_SOCKADDR)?;
    // Any task, in a session or not: a session's resolver is its session's alone.
    if resolver_peer::foreign_resolver(sockaddr as u64, family) {
        return Some(-EACCES);
    }
    let session = gate::current_session()?;
    let config = CONFIG.get(0)?;
    match family {
        // A record session reports its connects even where no rule names an address.
        AF_INET | AF_INET6
            if config.net_rule_ops & op::NETWORK != 0 || config.has & has::RECORDING != 0 =>
        {
            inet(&session, sockaddr, family)
        }
        AF_UNIX if config.path_rule_ops & op::NETWORK != 0 => unix(&session, sockaddr),
        _ => None,
    }
}

/// Inlined: a BPF subprogram's return value reaches the program exit unbounded, and the
/// verifier wants an LSM verdict in [-4095, 0].
#[inline(always)]
pub fn inet(session: &Session, sockaddr: *const u8, family: u16) -> Option<i32> {
    let port = u16::from_be(kread::read::<u16>(sockaddr, 2, errsite::READ_SOCKADDR)?);
    let addr = if family == AF_INET {
        let v4: [u8; 4] = kread::read(sockaddr, 4, errsite::READ_SOCKADDR)?;
        let mut mapped = [0u8; 16];
        mapped[10] = 0xff;
        mapped[11] = 0xff;
        mapped[12] = v4[0];
        mapped[13] = v4[1];
        mapped[14] = v4[2];
        mapped[15] = v4[3];
        mapped
    } else {
        kread::read::<[u8; 16]>(sockaddr, 8, errsite::READ_SOCKADDR)?
    };
    // The DNS redirection programs send this to the session's resolver (they run after
    // this hook, on the same address): allow-lists leave it to the resolver, rules naming
    // this address still refuse it.
    // SAFETY: map values live as long as the map; only presence is read.
    let dns = port == DNS_PORT && unsafe { RESOLVERS.get(&session.cgroup) }.is_some();
    let Some(verdict) = matcher::check_net(addr, port, session, dns) else {
        // Allowed: a record session reports it (`touched`); the lookups to the session's
        // resolver are not worth a line of the proposal.
        if !dns && session.state.flags & SESSION_RECORD != 0 {
            touched::connect(
                session.cgroup,
                session.state.session,
                touched::word(&addr, 0),
                touched::word(&addr, 8),
                u32::from(family) << 16 | u32::from(port),
            );
        }
        return None;
    };
    let subject = Subject {
        kind: subject::INET,
        path: None,
        family,
        port,
        addr,
        detail: 0,
    };
    event::denial(event::emit(session, verdict, &subject))
}

#[inline(always)]
pub fn unix(session: &Session, sockaddr: *const u8) -> Option<i32> {
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let scratch = unsafe { &mut *SCRATCH.get_ptr_mut(0)? };
    kread::zero_words(&mut scratch.key.data);
    let mut buf = core::mem::MaybeUninit::uninit();
    let words = kread::zero_in_place::<{ UNIX_PATH_MAX.div_ceil(8) }>(&mut buf);
    let sun_path = &mut kread::bytes_of(words)[..UNIX_PATH_MAX];
    let n = kread::read_str(sockaddr.wrapping_add(2), sun_path, errsite::READ_SOCKADDR)?;
    // Abstract sockets (leading NUL) have no path to match.
    if n <= 1 {
        return None;
    }
    scratch.key.data[..UNIX_PATH_MAX].copy_from_slice(sun_path);
    let len = (n - 1) & 0x7f;
    let mut subject = PathSubject {
        scratch,
        len,
        has_name: false,
        inode: None,
        ancestors: false,
        live: false,
        object: Object::None,
    };
    let config = CONFIG.get(0)?;
    let verdict = matcher::check_path(&mut subject, config, op::NETWORK)?;
    let ev = Subject {
        kind: subject::UNIX,
        path: Some(&subject.scratch.key.data),
        family: AF_UNIX,
        port: 0,
        addr: [0; 16],
        detail: 0,
    };
    event::denial(event::emit(session, verdict, &ev))
}
