//! `kernel_read_file` (`finit_module`) and `kernel_load_data` (`init_module`): a session
//! loads no kernel module — kernel code would be beyond every layer.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{op, subject};

use crate::{event::Subject, gate, globals, guard};

#[lsm(hook = "kernel_read_file")]
pub fn kernel_read_file(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    let id: u32 = ctx.arg(1);
    deny_module(id == globals::reading_module())
}

#[lsm(hook = "kernel_load_data")]
pub fn kernel_load_data(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(2);
    if previous != 0 {
        return previous;
    }
    let id: u32 = ctx.arg(0);
    deny_module(id == globals::loading_module())
}

#[inline(always)]
fn deny_module(is_module: bool) -> i32 {
    // Firmware, kexec images and policies are not this guard's business.
    if !is_module {
        return 0;
    }
    let Some(session) = gate::current_session() else {
        return 0;
    };
    guard::deny(&session, op::MODULE, &Subject::bare(subject::NONE, 0))
}
