//! The gate every hook passes first: is the current task in an agent session? Sessions are
//! the cgroups directly below the Carapace root; a task's ancestor at the root's level tells
//! whether it is in any session (one helper call, no map lookup for untagged tasks), and its
//! ancestor one level down names the session — nested cgroups inherit it.

use aya_ebpf::helpers::generated::bpf_get_current_ancestor_cgroup_id;
use carapace_common::SessionState;

use carapace_common::errsite;

use crate::{
    globals, kread,
    maps::{DEFAULT_SESSION, SESSIONS},
};

pub struct Session {
    pub cgroup: u64,
    pub state: &'static SessionState,
}

#[inline(always)]
pub fn current_session() -> Option<Session> {
    if !in_session() {
        return None;
    }
    member_session()
}

/// The session of a task [`in_session`] already found inside one: its ancestor one level
/// below the root names it.
#[inline(always)]
pub fn member_session() -> Option<Session> {
    // SAFETY: helper call with a plain integer argument.
    let cgroup = unsafe { bpf_get_current_ancestor_cgroup_id(globals::root_level() as i32 + 1) };
    // SAFETY: map values live as long as the map; entries are only replaced whole.
    let state = unsafe { SESSIONS.get(&cgroup) }.or_else(|| DEFAULT_SESSION.get(0))?;
    Some(Session { cgroup, state })
}

/// The cgroup id naming the current task's session, if it is in one (its state not read).
#[inline(always)]
pub fn session_cgroup() -> Option<u64> {
    if !in_session() {
        return None;
    }
    // SAFETY: helper call with a plain integer argument.
    Some(unsafe { bpf_get_current_ancestor_cgroup_id(globals::root_level() as i32 + 1) })
}

/// Whether the current task is in some session, without finding which: one helper call.
#[inline(always)]
pub fn in_session() -> bool {
    let root_id = globals::root_id();
    // SAFETY: helper call with a plain integer argument.
    root_id != 0
        && unsafe { bpf_get_current_ancestor_cgroup_id(globals::root_level() as i32) } == root_id
}

/// Whether the task `task` (a `struct task_struct *`) is in the session whose cgroup id is
/// `session`: its cgroup on the unified hierarchy (`task->cgroups->dfl_cgrp`) is that
/// cgroup or below it. Unreadable counts as outside.
#[inline(never)]
pub fn task_within(task: u64, session: u64) -> bool {
    let Some(css_set) = kread::read::<u64>(
        task as *const u8,
        globals::task_cgroups(),
        errsite::READ_TASK,
    ) else {
        return false;
    };
    let Some(cgroup) = kread::read::<u64>(
        css_set as *const u8,
        globals::css_set_dfl_cgrp(),
        errsite::READ_TASK,
    ) else {
        return false;
    };
    cgroup_within(cgroup, session)
}

/// Whether the socket `sk` (a `struct sock *`) was made in the session whose cgroup id is
/// `session`: a socket keeps the cgroup of the task that created it
/// (`sk_cgrp_data.cgroup`), wherever its descriptor went since.
#[inline(never)]
pub fn socket_within(sk: u64, session: u64) -> bool {
    kread::read::<u64>(sk as *const u8, globals::sock_cgroup(), errsite::READ_TASK)
        .is_some_and(|cgroup| cgroup_within(cgroup, session))
}

/// Whether `cgroup` (a `struct cgroup *`) is the session's cgroup or below it: its
/// ancestor one level below the Carapace root is the session's.
#[inline(always)]
fn cgroup_within(cgroup: u64, session: u64) -> bool {
    let level_at = globals::root_level() + 1;
    let base = cgroup as *const u8;
    let Some(level) = kread::read::<i32>(base, globals::cgroup_level(), errsite::READ_TASK) else {
        return false;
    };
    if level < level_at as i32 {
        return false;
    }
    let slot = globals::cgroup_ancestors() + 8 * level_at as usize;
    let id = if globals::cgroup_ancestor_ids() {
        kread::read::<u64>(base, slot, errsite::READ_TASK)
    } else {
        kread::read::<u64>(base, slot, errsite::READ_TASK)
            .and_then(|a| {
                kread::read::<u64>(a as *const u8, globals::cgroup_kn(), errsite::READ_TASK)
            })
            .and_then(|kn| {
                kread::read::<u64>(
                    kn as *const u8,
                    globals::kernfs_node_id(),
                    errsite::READ_TASK,
                )
            })
    };
    id == Some(session)
}
