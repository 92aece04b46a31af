//! Kernel keys (`add_key`, `keyctl`, `request_key`): a session may use only the keys and
//! keyrings made inside it. The user keyring (`@u`) is shared by every process of the uid
//! and may hold the user's tokens and passwords; `carapace run` gives the session a session
//! keyring of its own (`KEYCTL_JOIN_SESSION_KEYRING`) before the agent starts.
//!
//! `key_alloc` records each key a session makes by its address (the serial number is given
//! only after the hook); the first `key_permission` check binds the record to the key's
//! serial, so a key of someone else's that later takes the freed memory is not mistaken
//! for it (no BPF program can attach to `key_free`). `key_permission` refuses a session any
//! other key, whatever it asks (search, read, write, link, view).

use aya_ebpf::{
    helpers::generated::bpf_get_func_arg, macros::lsm, programs::LsmContext, EbpfContext as _,
};
use carapace_common::{errsite, op, subject};

use crate::{
    event::Subject,
    gate, globals, guard, kread,
    maps::{SessionKey, SESSION_KEYS},
    EACCES,
};

#[lsm(hook = "key_alloc")]
pub fn key_alloc(ctx: LsmContext) -> i32 {
    // key_alloc(key, cred, flags)
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    let key: u64 = ctx.arg(0);
    match gate::current_session() {
        Some(session) => {
            // A full table only forgets old keys (LRU): a forgotten key of the session is
            // then refused to it, never granted to another.
            let made = SessionKey {
                cgroup: session.cgroup,
                serial: 0,
                pad: 0,
            };
            let _ = SESSION_KEYS.insert(&key, &made, 0);
        }
        // Memory a session's key once had now holds a key made outside.
        None => {
            let _ = SESSION_KEYS.remove(&key);
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
    // The key arrives as a `key_ref_t`, a pointer to a struct the kernel only declares:
    // the verifier refuses to read it from the context, so it is taken from the
    // trampoline's saved arguments instead. Unreadable: no key to judge by (fail closed).
    let mut key_ref: u64 = 0;
    // SAFETY: the helper writes one u64 through the pointer, to a local.
    if unsafe { bpf_get_func_arg(ctx.as_ptr(), 0, &raw mut key_ref) } != 0 {
        key_ref = 0;
    }
    if foreign(key_ref) {
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
    let key = key_ref & !1;
    let serial = if key == 0 {
        0
    } else {
        serial_of(key).unwrap_or(0)
    };
    if let Some(made) = SESSION_KEYS.get_ptr_mut(&key) {
        // SAFETY: a pointer into the map's value, which lives as long as the map.
        let made = unsafe { &mut *made };
        if serial != 0 && made.cgroup == session.cgroup {
            if made.serial == 0 {
                made.serial = serial;
                return false;
            }
            if made.serial == serial {
                return false;
            }
        }
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
