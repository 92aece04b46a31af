//! The gate every hook passes first: is the current task in an agent session? Sessions are
//! the cgroups directly below the Carapace root; a task's ancestor at the root's level tells
//! whether it is in any session (one helper call, no map lookup for untagged tasks), and its
//! ancestor one level down names the session — nested cgroups inherit it.

use aya_ebpf::helpers::generated::bpf_get_current_ancestor_cgroup_id;
use carapace_common::SessionState;

use crate::{
    globals,
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

/// Whether the current task is in some session, without finding which: one helper call.
#[inline(always)]
pub fn in_session() -> bool {
    let root_id = globals::root_id();
    // SAFETY: helper call with a plain integer argument.
    root_id != 0
        && unsafe { bpf_get_current_ancestor_cgroup_id(globals::root_level() as i32) } == root_id
}
