//! The safety check of a proposed change: cases judged under the old and the new rule
//! file, and every one the new file would newly allow.
use super::{AmendError, Target};
use crate::engine::cases;
use crate::engine::{evaluate, Activation, Extracted, Layer, Operation};
use crate::rules::{builtin, Homes, Mode, Options, RuleSet};

/// One operation of the session's history (a refused or approved decision).
#[derive(Clone, Debug)]
pub struct HistoryOp {
    /// Where it is recorded, e.g. `ledger record 1234`.
    pub label: String,
    /// The operation.
    pub target: Target,
}

/// A case the new file would allow that the old one refused (or asked about).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NewlyAllowed {
    /// `rules/fixtures/credentials.yaml:17` or the history label.
    pub origin: String,
    /// What the case does (the call or operation).
    pub what: String,
    /// A built-in pack's must-block case: allowing it weakens what the pack guarantees.
    pub must_block: bool,
    /// What the old file answered (`block`, `approve`).
    pub was: String,
    /// The rule a must-block case is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// What the replay found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Replay {
    /// How many must-block cases of the packs were judged.
    pub fixtures_checked: usize,
    /// How many of the session's operations were judged.
    pub history_checked: usize,
    /// Must-block cases first.
    pub newly_allowed: Vec<NewlyAllowed>,
}

impl Replay {
    /// Whether a built-in must-block case would be allowed: the change then needs the
    /// user's explicit confirmation.
    #[must_use]
    pub fn unblocks_fixture(&self) -> bool {
        self.newly_allowed.iter().any(|n| n.must_block)
    }
}

/// Judges every must-block (and must-approve) case of the built-in packs and every
/// operation of `history` under `old_text` and `new_text` (both the user's rule file, named
/// `origin`); cases are judged with the homes their fixture file gives, history with `opts`.
pub fn replay(
    origin: &str,
    old_text: &str,
    new_text: &str,
    history: &[HistoryOp],
    opts: &Options,
) -> Result<Replay, AmendError> {
    let mut out = Replay::default();
    let load = |text: &str, o: &Options| {
        RuleSet::load_text_for_layer1(origin, text, o).map_err(AmendError::Invalid)
    };
    // Fixture files mostly share their homes: one pair of rule sets per distinct list.
    let mut files: Vec<(&str, cases::CaseFile)> = Vec::new();
    for pack in builtin::NAMES {
        let Some(text) = builtin::fixture(pack) else {
            continue;
        };
        if let Ok(file) = cases::parse(text) {
            files.push((pack, file));
        }
    }
    let mut homes_seen: Vec<Vec<String>> = Vec::new();
    for (_, f) in &files {
        if !homes_seen.contains(&f.homes) {
            homes_seen.push(f.homes.clone());
        }
    }
    for homes in homes_seen {
        let o = Options {
            homes: Homes::fixed(homes.clone()),
            resolver: |_| None,
            host: opts.host.clone(),
        };
        let (old, new) = (load(old_text, &o)?, load(new_text, &o)?);
        for (pack, file) in files.iter().filter(|(_, f)| f.homes == homes) {
            let ctx = file.context();
            for case in file.cases.iter().filter(|c| c.expect != Mode::Allow) {
                let Ok(ext) = cases::extract(case, &ctx) else {
                    continue;
                };
                out.fixtures_checked += 1;
                if let Some(was) = newly_allowed(&old, &new, &ext) {
                    out.newly_allowed.push(NewlyAllowed {
                        origin: format!("rules/fixtures/{pack}.yaml:{}", case.line),
                        what: case_text(&case.what),
                        must_block: true,
                        was,
                        rule: case.rule.clone(),
                    });
                }
            }
        }
    }
    if !history.is_empty() {
        let (old, new) = (load(old_text, opts)?, load(new_text, opts)?);
        for h in history {
            out.history_checked += 1;
            if let Some(was) = newly_allowed(&old, &new, &extracted(&h.target)) {
                out.newly_allowed.push(NewlyAllowed {
                    origin: h.label.clone(),
                    what: h.target.describe(),
                    must_block: false,
                    was,
                    rule: None,
                });
            }
        }
    }
    Ok(out)
}

/// What the old set answered, when it refused or asked and the new one allows.
fn newly_allowed(old: &RuleSet, new: &RuleSet, ext: &Extracted) -> Option<String> {
    let none = Activation::default();
    let before = evaluate(old, ext, &none, Layer::ToolCall).decision;
    let after = evaluate(new, ext, &none, Layer::ToolCall).decision;
    (before >= Mode::Approve && after < Mode::Approve)
        .then(|| super::super::validate::mode_name(before).to_owned())
}

/// A bare operation, as the fixtures' `path:` and `addr:` cases are judged.
pub(super) fn extracted(target: &Target) -> Extracted {
    let mut ext = Extracted::new("operation");
    match target {
        Target::Path { action, path } => ext.op(Operation::path(*action, path.clone())),
        Target::Net { host, port } => ext.op(Operation::network(
            crate::engine::normalize::host(host),
            *port,
        )),
    }
    ext
}

/// A case as one line (its YAML mapping as JSON, without the `rule:` it names).
fn case_text(what: &serde_json::Value) -> String {
    let mut w = what.clone();
    if let Some(m) = w.as_object_mut() {
        m.remove("rule");
    }
    w.to_string()
}
