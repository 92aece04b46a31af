//! The `dns:` section of `config.yaml`:
//!
//! ```yaml
//! dns:
//!   refuse_with: refused   # or nxdomain: how a lookup the rules refuse is answered
//! ```
use carapace_policy::rules::diag::{did_you_mean, Sink};
use carapace_policy::rules::yaml::{Node, NodeKind};

const KEYS: &[&str] = &["refuse_with"];

/// The answer to a refused lookup. REFUSED tells a program that asked that the name exists
/// but is not for it (most print "refused"); NXDOMAIN makes it look as if the name did not
/// exist, for tools that retry other servers on REFUSED.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefuseWith {
    #[default]
    Refused,
    NxDomain,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DnsSettings {
    pub refuse_with: RefuseWith,
}

/// Reads the `dns:` mapping; problems go to `sink` at their position.
pub fn parse(node: &Node, sink: &mut Sink) -> DnsSettings {
    let mut settings = DnsSettings::default();
    let NodeKind::Map(entries) = &node.kind else {
        if !node.is_null() {
            sink.error(
                node.span,
                None,
                format!("`dns` must be a mapping, found {}", node.describe()),
                "write `dns:` and indent `refuse_with: refused` below it",
            );
        }
        return settings;
    };
    for (k, _) in entries {
        let name = k.as_str().unwrap_or("");
        if !KEYS.contains(&name) {
            sink.error(
                k.span,
                None,
                format!("unknown `dns` setting `{name}`"),
                &did_you_mean(name, KEYS),
            );
        }
    }
    if let Some(value) = node.get("refuse_with") {
        match value.as_str().map(str::trim) {
            Some("refused") => settings.refuse_with = RefuseWith::Refused,
            Some("nxdomain") => settings.refuse_with = RefuseWith::NxDomain,
            _ => sink.error(
                value.span,
                None,
                "`refuse_with` must be `refused` or `nxdomain`".to_owned(),
                "e.g. `refuse_with: nxdomain`",
            ),
        }
    }
    settings
}
