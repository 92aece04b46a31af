//! The `dns:` section of `config.yaml`, read by the sessions' resolvers (`crate::dns`):
//!
//! ```yaml
//! dns:
//!   refuse_with: refused   # or nxdomain: how a lookup the rules refuse is answered
//! ```
use carapace_policy::rules::diag::Sink;
use carapace_policy::rules::yaml::Node;

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
pub(crate) fn parse(node: &Node, sink: &mut Sink) -> DnsSettings {
    let mut settings = DnsSettings::default();
    if !super::section(node, "dns", KEYS, "refuse_with: refused", sink) {
        return settings;
    }
    let choices = [
        ("refused", RefuseWith::Refused),
        ("nxdomain", RefuseWith::NxDomain),
    ];
    if let Some(answer) = super::one_of(
        node,
        "refuse_with",
        &choices,
        "e.g. `refuse_with: nxdomain`",
        sink,
    ) {
        settings.refuse_with = answer;
    }
    settings
}
