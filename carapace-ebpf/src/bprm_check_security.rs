//! `bprm_check_security`: the exec of a binary by a session's process, judged on the file
//! the kernel resolved. `file_open` already judges the same file (its exec open carries
//! `FMODE_EXEC`), and also the ELF interpreter, which this hook never sees; this hook is the
//! designated exec check, and the second look costs a `bpf_d_path` only on exec, inside a
//! session, when an exec rule exists.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{has, op, SESSION_RECORD};

use crate::{file_open::check_file, gate, globals, maps::CONFIG, touched};

#[lsm(hook = "bprm_check_security")]
pub fn bprm_check_security(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(1);
    if previous != 0 {
        return previous;
    }
    try_bprm(&ctx).unwrap_or(0)
}

fn try_bprm(ctx: &LsmContext) -> Option<i32> {
    let session = gate::current_session()?;
    let bprm: *const u8 = ctx.arg(0);
    // A direct load (not a probe read) keeps the verifier's knowledge that this is a
    // `struct file *`, which bpf_d_path needs.
    #[expect(
        clippy::cast_ptr_alignment,
        reason = "a pointer field of the kernel's struct, at its BTF offset, is aligned"
    )]
    // SAFETY: the offset of `linux_binprm.file` comes from the running kernel's BTF.
    let file =
        unsafe { core::ptr::read(bprm.wrapping_add(globals::bprm_file()).cast::<*const u8>()) };
    if file.is_null() {
        return None;
    }
    let denied = check_file(&session, file, op::EXEC);
    // A record session reports the program it was allowed to run: `file_open` sees the
    // exec's open as a read only (its `f_mode` carries no `FMODE_EXEC` on these kernels).
    if denied.is_none() && session.state.flags & SESSION_RECORD != 0 {
        if let Some(config) = CONFIG.get(0) {
            if config.has & has::RECORDING != 0 {
                touched::open(session.cgroup, session.state.session, file, op::EXEC);
            }
        }
    }
    denied
}
