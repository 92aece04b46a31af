//! `task_alloc`: `clone3(CLONE_INTO_CGROUP)` from a session would start a child in another
//! cgroup, outside the session; refused. Ordinary forks pass (the child stays in the
//! session's cgroup).

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{op, subject, CLONE_INTO_CGROUP};

use crate::{event::Subject, gate, guard};

#[lsm(hook = "task_alloc")]
pub fn task_alloc(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(2);
    if previous != 0 {
        return previous;
    }
    let Some(session) = gate::current_session() else {
        return 0;
    };
    let clone_flags: u64 = ctx.arg(1);
    if clone_flags & CLONE_INTO_CGROUP == 0 {
        return 0;
    }
    guard::deny(
        &session,
        op::CLONE_INTO_CGROUP,
        &Subject::bare(subject::NONE, 0),
    )
}
