//! Shadow sessions (`carapace run --shadow`) at Layer 1: a call the rules would refuse or
//! hold for approval runs, and its record says `would-deny` with the rules that matched,
//! so a user can see what a rule set would do to an agent's work before enforcing it. The
//! kernel does the same for its own denials (`carapace_common::SESSION_SHADOW`). The rules
//! that keep Carapace itself safe hold in shadow sessions too
//! (`carapace_policy::rules::shadow`).
use carapace_policy::engine::Decision;
use carapace_policy::rules::shadow::holds_by_source;
use carapace_policy::rules::validate::mode_name;
use carapace_policy::rules::Mode;

use super::audit::WOULD_DENY;
use super::Daemon;
use crate::audit::Event;

/// Applies shadow mode to `decision`, a call's in session `session`: in a shadow session a
/// refusal or approval that no held rule makes becomes an allow; returns what it was.
pub fn apply(daemon: &Daemon, session: Option<&str>, decision: &mut Decision) -> Option<Mode> {
    let session = session?;
    if !refuses(decision) {
        return None;
    }
    if !daemon.sessions.get(session).is_some_and(|r| r.shadow()) {
        return None;
    }
    shadowed(decision)
}

fn refuses(d: &Decision) -> bool {
    matches!(d.decision, Mode::Block | Mode::Approve)
}

/// Turns a refusing decision into an allow that says what it would have been, unless a
/// rule that holds in shadow sessions refuses; returns the decision it was.
pub fn shadowed(d: &mut Decision) -> Option<Mode> {
    if !refuses(d) {
        return None;
    }
    let held = d
        .matches
        .iter()
        .any(|m| m.mode >= Mode::Approve && holds_by_source(&m.source));
    if held {
        return None;
    }
    let would = d.decision;
    let ids: Vec<&str> = d
        .matches
        .iter()
        .filter(|m| m.mode >= Mode::Approve)
        .map(|m| m.id.as_str())
        .collect();
    d.message = format!(
        "Carapace allows this {} call in shadow mode; it would have been {} [rule {}]",
        d.tool,
        if would == Mode::Block {
            "blocked"
        } else {
            "held for approval"
        },
        ids.join(", ")
    );
    d.decision = Mode::Allow;
    Some(would)
}

/// The ledger's record of a call, marked `would-deny` when shadow mode let it run.
#[must_use]
pub fn recorded(mut event: Event, would_deny: bool) -> Event {
    if would_deny && event.decision.is_some() {
        event.decision = Some(WOULD_DENY.to_owned());
    }
    event
}

/// `EvaluateReply::would_deny`: the decision shadow mode did not apply, or "".
#[must_use]
pub fn reply_field(would: Option<Mode>) -> String {
    would.map(mode_name).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_policy::engine::{Layer, Match};

    fn decision(matches: &[(&str, Mode, &str)]) -> Decision {
        let matches = matches
            .iter()
            .map(|(id, mode, source)| Match {
                id: (*id).to_owned(),
                mode: *mode,
                layer: Layer::ToolCall,
                message: format!("{id} says no"),
                source: (*source).to_owned(),
                matched: "read /srv/x".to_owned(),
                kernel: true,
            })
            .collect();
        Decision::from_matches("Read", matches, Vec::new())
    }

    #[test]
    fn a_refusal_by_an_ordinary_rule_becomes_an_allow_that_says_so() {
        let mut d = decision(&[
            ("ssh-keys", Mode::Block, "builtin:credentials"),
            ("note", Mode::Warn, "/r.yaml"),
        ]);
        assert_eq!(shadowed(&mut d), Some(Mode::Block));
        assert_eq!(d.decision, Mode::Allow);
        assert!(
            d.message.contains("would have been blocked"),
            "{}",
            d.message
        );
        assert!(d.message.contains("ssh-keys"), "{}", d.message);
        assert_eq!(d.matches.len(), 2, "the matches are kept for the record");
        let mut a = decision(&[("drafts", Mode::Approve, "/r.yaml")]);
        assert_eq!(shadowed(&mut a), Some(Mode::Approve));
        assert_eq!(a.decision, Mode::Allow);
    }

    #[test]
    fn self_protection_still_refuses() {
        for source in ["builtin:self-protection", "daemon:console"] {
            let mut d = decision(&[
                ("carapace-files", Mode::Block, source),
                ("ssh-keys", Mode::Block, "builtin:credentials"),
            ]);
            assert_eq!(shadowed(&mut d), None, "{source}");
            assert_eq!(d.decision, Mode::Block);
        }
    }

    #[test]
    fn an_allow_is_left_alone() {
        let mut d = decision(&[("note", Mode::Warn, "/r.yaml")]);
        assert_eq!(shadowed(&mut d), None);
        assert_eq!(d.decision, Mode::Warn);
    }

    #[test]
    fn the_record_says_would_deny_only_when_shadowed() {
        let mut e = Event::new(crate::audit::Kind::Evaluate);
        e.decision = Some("allow".into());
        assert_eq!(
            recorded(e.clone(), false).decision.as_deref(),
            Some("allow")
        );
        assert_eq!(recorded(e, true).decision.as_deref(), Some(WOULD_DENY));
    }
}
