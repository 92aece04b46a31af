//! `file_ioctl` (and `file_ioctl_compat`, Linux 6.8+, for 32-bit callers): a session may not
//! type into a terminal. `TIOCSTI` pushes bytes into a terminal's input as if typed, and
//! `TIOCLINUX` pastes the console's selection: the shell reading that terminal — the user's,
//! outside the session — would run them with the user's authority. Refused on every
//! terminal, whatever the rules; nothing an agent does needs either.

use aya_ebpf::{macros::lsm, programs::LsmContext};
use carapace_common::{op, subject, TIOCLINUX, TIOCSTI};

use crate::{event::Subject, gate, guard};

#[lsm(hook = "file_ioctl")]
pub fn file_ioctl(ctx: LsmContext) -> i32 {
    judge(&ctx)
}

#[lsm(hook = "file_ioctl_compat")]
pub fn file_ioctl_compat(ctx: LsmContext) -> i32 {
    judge(&ctx)
}

/// Both hooks take (file, cmd, arg).
#[inline(always)]
fn judge(ctx: &LsmContext) -> i32 {
    let previous: i32 = ctx.arg(3);
    if previous != 0 {
        return previous;
    }
    // The command first: every ioctl on the machine passes here.
    let cmd: u32 = ctx.arg(1);
    if cmd != TIOCSTI && cmd != TIOCLINUX {
        return 0;
    }
    let Some(session) = gate::current_session() else {
        return 0;
    };
    guard::deny(&session, op::TTY_INPUT, &Subject::bare(subject::TTY, cmd))
}
