//! The built-in rule packs, compiled into the binary. Each pack is an ordinary rule file in
//! `rules/builtin/` with must-block / must-allow cases in `rules/fixtures/`.

/// Pack names in the order their rules are indexed.
pub const NAMES: &[&str] = &["credentials", "system", "network"];

/// The text of a pack.
#[must_use]
pub fn text(name: &str) -> Option<&'static str> {
    Some(match name {
        "credentials" => include_str!("../../../rules/builtin/credentials.yaml"),
        "system" => include_str!("../../../rules/builtin/system.yaml"),
        "network" => include_str!("../../../rules/builtin/network.yaml"),
        _ => return None,
    })
}
