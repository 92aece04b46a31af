//! `hold: true`: an approve-mode path rule whose opens the daemon holds with `fanotify`
//! permission events until a human answers, instead of refusing them for a retry. fanotify
//! marks files (inodes), and reports opens and execs only, so a held rule must be a path
//! rule in approve mode whose patterns name files (globs, not `re:`) and that covers an
//! open. Files of the pattern created after the rules are loaded are not marked: there the
//! rule stays refuse-and-retry approve mode (`carapace rules explain` says which files).

use super::{bool_value, mode_name, Sink};
use crate::rules::model::{Action, Cond};
use crate::rules::pattern::PathPattern;
use crate::rules::yaml::Node;
use crate::rules::Mode;

/// The actions fanotify sees: they open the file.
const OPENS: [Action; 4] = [Action::Read, Action::Write, Action::Execute, Action::Copy];

/// Reads `hold:` and reports every way the rule cannot be held; `true` only for a rule
/// that can.
pub(super) fn hold(
    node: &Node,
    cond: Option<&Cond>,
    mode: Mode,
    actions: &[Action],
    rid: &str,
    sink: &mut Sink,
) -> bool {
    let Some(n) = node.get("hold") else {
        return false;
    };
    if !bool_value(n, "hold", rid, sink) {
        return false;
    }
    let errors = sink.error_count();
    if mode != Mode::Approve {
        sink.error(
            n.span,
            Some(rid),
            format!(
                "`hold` waits for a human's answer; mode `{}` asks none",
                mode_name(mode)
            ),
            "use `approve:` (or `mode: approve`), or drop `hold`",
        );
    }
    match cond {
        Some(Cond::Path(patterns)) => {
            for p in patterns {
                if let PathPattern::Regex { source, .. } = p {
                    sink.error(
                        n.span,
                        Some(rid),
                        format!(
                            "`hold` marks the files a pattern names; `{source}` is a regular \
                             expression, whose files cannot be listed"
                        ),
                        "write it as a glob (`/srv/drafts/**`), or drop `hold` (the rule then \
                         refuses until approved and the agent retries)",
                    );
                }
            }
        }
        _ => sink.error(
            n.span,
            Some(rid),
            "`hold` holds opens of files: it needs a rule on paths only".into(),
            "give it a path pattern (`approve: \"/srv/drafts/**\"`) and no other match",
        ),
    }
    if !actions.is_empty() && !actions.iter().any(|a| OPENS.contains(a)) {
        sink.error(
            n.span,
            Some(rid),
            "`hold` holds opens (read, write, execute); this rule's actions open nothing".into(),
            "add `read`, `write` or `execute` to `actions`, or drop `hold`",
        );
    }
    if let Some(t) = node.get("trigger") {
        sink.error(
            t.span,
            Some(rid),
            "a held rule is on in every session; `trigger` cannot be combined with `hold`".into(),
            "drop `trigger`, or drop `hold` (refuse and retry works with triggers)",
        );
    }
    sink.error_count() == errors
}
