//! `bpf`: no `bpf()` command from a session — no program loads, map reads or updates,
//! pinned-object gets, link changes. Carapace's own maps would be the first target.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{op, subject};

use crate::{event::Subject, gate, guard};

#[lsm(hook = "bpf")]
pub fn bpf(ctx: LsmContext) -> i32 {
    // The loader attaches this only where the hook takes (cmd, attr, size).
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    let Some(session) = gate::current_session() else {
        return 0;
    };
    let cmd: i32 = ctx.arg(0);
    guard::deny(
        &session,
        op::BPF,
        &Subject::bare(subject::BPF_CMD, cmd as u32),
    )
}
