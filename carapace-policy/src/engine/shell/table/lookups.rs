//! Lookups (`which`, `pgrep`), inert commands, installers, and the fallback for a
//! command not in the table.

use super::super::super::operation::Context;
use super::super::walk::{Feed, Walker};
use super::Call;

/// When the entry `program_type` applies.
pub(super) fn when_program_type(call: &Call<'_>) -> bool {
    let Call { args, .. } = call;
    args.iter().any(|a| a == "-P" || a == "-p")
}

/// `hash NAME=PATH`: the program a name runs as.
pub(super) fn hash(w: &mut Walker<'_>, _ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    w.hash(args);
    Feed::default()
}

/// Process lookups print PIDs: the daemon's stands as its name (see `stop`).
pub(super) fn pid_lookup(_w: &mut Walker<'_>, _ctx: &mut Context, call: Call<'_>) -> Feed {
    let _ = call;
    Feed::text(super::super::stop::DAEMON)
}

/// When the entry `pid_lookup` applies.
pub(super) fn when_pid_lookup(call: &Call<'_>) -> bool {
    let Call { name, args, .. } = call;
    super::super::stop::reaches(name, args)
}

/// Package installers (`pip`, `uv`, `npm`): where they write.
pub(super) fn installer(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name, args, depth, ..
    } = call;
    w.installer(name, args, ctx, depth);
    Feed::default()
}

/// Anything else: arguments that look like paths are read.
pub(super) fn other(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    w.other_command(args, ctx);
    Feed::default()
}
