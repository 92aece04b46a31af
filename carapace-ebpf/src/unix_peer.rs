//! `unix_stream_connect` and `unix_may_send`: the unix socket a session's process reaches,
//! judged by the socket file's inode once the kernel has resolved the address. The path check
//! in `socket_connect` sees the address as written; a relative path, a symlink or a bind
//! mount spells the same socket differently, but its inode stays the one the daemon recorded.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, subject};

use crate::{
    event::Subject, gate, globals, inode, kread, link_rename, maps::CONFIG, matcher, EACCES,
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
    if config.path_rule_ops & op::NETWORK == 0 || sk.is_null() {
        return None;
    }
    // `struct unix_sock` starts with its `struct sock`; its bound path's dentry (none for
    // abstract and unnamed sockets).
    let path = sk.wrapping_add(globals::unix_sock_path());
    let dentry: *const u8 = kread::read(path, globals::path_dentry(), errsite::READ_SOCKADDR)?;
    if dentry.is_null() {
        return None;
    }
    let key = inode::of_dentry(dentry)?;
    let verdict = matcher::check_inode(&key, op::NETWORK)?;
    link_rename::deny(
        &session,
        verdict,
        &Subject::named(subject::UNIX, None, 0),
        dentry,
    );
    Some(-EACCES)
}
