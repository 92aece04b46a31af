//! Rule-file profiles: `profile: guardrail` makes a file follow the deterministic guardrail
//! engine's contract (reference 002): every rule has an id `R_<CATEGORY>_<NNN>` in one of
//! eight categories, passes or fails (mode `block`), except CONFIRMATION rules, which only
//! ask for confirmation (mode `approve`); no rule depends on an LLM or on session state.
//! Task requests checked against such a file are answered with
//! `{approved, failed_checks, required_confirmation}` (`engine::guardrail`).

use super::diag::{did_you_mean, Sink};
use super::yaml::{Node, NodeKind};
use super::{Mode, Rule};

/// A contract a rule file declares with `profile:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// The guardrail engine's contract (the module's doc).
    Guardrail,
}

impl Profile {
    /// Every profile's name, for did-you-mean hints.
    pub(crate) const NAMES: &'static [&'static str] = &["guardrail"];

    /// The profile `profile: NAME` declares.
    #[must_use]
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        (name == "guardrail").then_some(Self::Guardrail)
    }
}

/// The eight categories of the guardrail profile; no others exist.
pub const CATEGORIES: &[&str] = &[
    "OPERATIONS",
    "IO_FILESYSTEM",
    "IO_NETWORK",
    "SYS_COMMANDS",
    "APP_AUTOMATION",
    "CONFIRMATION",
    "INTEGRITY",
    "SAFETY",
];

/// The category that never rejects: its rules only require confirmation.
pub const CONFIRMATION: &str = "CONFIRMATION";

/// Why an id is not `R_<CATEGORY>_<NNN>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadId {
    #[error("`{0}` does not start with `R_`")]
    NoPrefix(String),
    #[error("`{0}` has no `_<NNN>` number")]
    NoNumber(String),
    #[error("`{0}` is not a zero-padded three-digit number from 001 to 999")]
    BadNumber(String),
    #[error("`{0}` is not a guardrail category")]
    UnknownCategory(String),
}

/// The category of an id `R_<CATEGORY>_<NNN>` (NNN zero-padded, 001–999), or why it is not
/// one.
pub fn id_category(id: &str) -> Result<&str, BadId> {
    let rest = id
        .strip_prefix("R_")
        .ok_or_else(|| BadId::NoPrefix(id.to_owned()))?;
    let (category, number) = rest
        .rsplit_once('_')
        .ok_or_else(|| BadId::NoNumber(id.to_owned()))?;
    if number.len() != 3 || !number.bytes().all(|b| b.is_ascii_digit()) || number == "000" {
        return Err(BadId::BadNumber(number.to_owned()));
    }
    if !CATEGORIES.contains(&category) {
        return Err(BadId::UnknownCategory(category.to_owned()));
    }
    Ok(category)
}

/// Checks one rule of a guardrail-profile file (every problem, at its position) and fills in
/// what the profile implies: the category from the id, and mode `approve` for a
/// CONFIRMATION rule that names no mode.
pub(crate) fn check_guardrail(node: &Node, rule: Option<&mut Rule>, sink: &mut Sink) {
    let id_node = node.get("id");
    let id = id_node.and_then(Node::as_str);
    let rid = id;
    let category = if let (Some(n), Some(id)) = (id_node, id) {
        match id_category(id) {
            Ok(c) => Some(c),
            Err(why) => {
                sink.error(
                    n.span,
                    rid,
                    format!("guardrail rule ids are `R_<CATEGORY>_<NNN>`: {why}"),
                    &format!(
                        "write e.g. `R_IO_FILESYSTEM_001`; categories: {}",
                        CATEGORIES.join(", ")
                    ),
                );
                None
            }
        }
    } else {
        sink.error(
            node.span,
            None,
            "every rule of the guardrail profile needs an `id`".into(),
            "add `id: R_<CATEGORY>_<NNN>`, e.g. `id: R_SAFETY_001`",
        );
        None
    };
    if let (Some(c), Some(written)) = (category, node.get("category")) {
        match written.as_str() {
            Some(w) if w == c => {}
            Some(w) if CATEGORIES.contains(&w) => sink.error(
                written.span,
                rid,
                format!("category `{w}` differs from the id's category `{c}`"),
                "a rule belongs to exactly one category: the one its id names",
            ),
            Some(w) => sink.error(
                written.span,
                rid,
                format!("unknown guardrail category `{w}`"),
                &did_you_mean(w, CATEGORIES),
            ),
            None => {}
        }
    }
    // The mode as written: a short-form key, or `mode:` / `action:`.
    let written_mode = match &node.kind {
        NodeKind::Map(entries) => entries.iter().find_map(|(k, v)| match k.as_str() {
            Some(m @ ("block" | "approve" | "warn" | "log" | "allow")) => Some((m, k.span)),
            Some("mode" | "action") => v.as_str().map(|m| (m, v.span)),
            _ => None,
        }),
        _ => None,
    };
    let confirmation = category == Some(CONFIRMATION);
    match written_mode {
        Some(("approve", _)) if confirmation => {}
        Some(("block", _)) if !confirmation => {}
        Some((m, span)) if confirmation => sink.error(
            span,
            rid,
            format!("a CONFIRMATION rule never rejects nor logs; mode `{m}` does not apply"),
            "CONFIRMATION rules only require confirmation: use `mode: approve` (the default) \
             with a `match:`",
        ),
        Some((m, span)) if category.is_some() => sink.error(
            span,
            rid,
            format!("guardrail rules pass or fail; mode `{m}` is a severity they cannot have"),
            "use `block` (the default); only CONFIRMATION rules ask for confirmation",
        ),
        _ => {}
    }
    for (key, why) in [
        ("llm_review", "rules never depend on an LLM's output"),
        (
            "trigger",
            "rules are stateless: they cannot switch on during a session",
        ),
        (
            "effect",
            "rules are stateless: they cannot switch on during a session",
        ),
    ] {
        if let Some(n) = node.get(key) {
            sink.error(
                n.span,
                rid,
                format!("`{key}` is not allowed in the guardrail profile: {why}"),
                "drop it, or remove `profile: guardrail` from the file",
            );
        }
    }
    if let (Some(rule), Some(c)) = (rule, category) {
        rule.category = Some(c.to_owned());
        if confirmation && written_mode.is_none() {
            rule.mode = Mode::Approve;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::id_category;

    #[test]
    fn ids_name_one_of_the_eight_categories_and_a_number() {
        assert_eq!(id_category("R_IO_FILESYSTEM_003"), Ok("IO_FILESYSTEM"));
        assert_eq!(id_category("R_SAFETY_999"), Ok("SAFETY"));
        for bad in [
            "IO_FILESYSTEM_003",
            "R_IO_FILESYSTEM_03",
            "R_IO_FILESYSTEM_000",
            "R_IO_FILESYSTEM_1000",
            "R_FILES_001",
            "R_SAFETY",
            "R__001",
            "R_SAFETY_00a",
        ] {
            assert!(id_category(bad).is_err(), "{bad}");
        }
    }
}
