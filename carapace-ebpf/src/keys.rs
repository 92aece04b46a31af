//! Kernel keys (`add_key`, `keyctl`, `request_key`): a session may use only the keys and
//! keyrings made inside it. The user keyring (`@u`) is shared by every process of the uid
//! and may hold the user's tokens and passwords; `carapace run` gives the session a session
//! keyring of its own (`KEYCTL_JOIN_SESSION_KEYRING`) before the agent starts.
//!
//! `key_alloc` records each key a session makes (serial → session cgroup); `key_permission`
//! refuses a session any other key, whatever it asks (search, read, write, link, view).

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{errsite, op, subject};

use crate::{event::Subject, gate, globals, guard, kread, maps::SESSION_KEYS, EACCES};

#[lsm(hook = "key_alloc")]
pub fn key_alloc(ctx: LsmContext) -> i32 {
    // key_alloc(key, cred, flags)
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    if let Some(session) = gate::current_session() {
        if let Some(serial) = serial_of(ctx.arg(0)) {
            // A full table only forgets old keys (LRU): a forgotten key of the session is
            // then refused to it, never granted to another.
            let _ = SESSION_KEYS.insert(&serial, &session.cgroup, 0);
        }
    }
    0
}

#[lsm(hook = "key_permission")]
pub fn key_permission(ctx: LsmContext) -> i32 {
    // key_permission(key_ref, cred, need_perm)
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    if foreign(ctx.arg(0)) {
        -EACCES
    } else {
        0
    }
}

/// Whether the key behind `key_ref` was not made in the caller's session (reported), the
/// caller being in one. A subprogram.
#[inline(never)]
fn foreign(key_ref: u64) -> bool {
    let Some(session) = gate::current_session() else {
        return false;
    };
    // The low bit of a `key_ref_t` says whether the caller possesses the key.
    let serial = serial_of(key_ref & !1).unwrap_or(0);
    // SAFETY: map values live as long as the map.
    if serial != 0 && unsafe { SESSION_KEYS.get(&serial) } == Some(&session.cgroup) {
        return false;
    }
    guard::deny(
        &session,
        op::KEY,
        &Subject::bare(subject::KEY, serial as u32),
    );
    true
}

#[inline(always)]
fn serial_of(key: u64) -> Option<i32> {
    kread::read::<i32>(key as *const u8, globals::key_serial(), errsite::READ_TASK)
}
