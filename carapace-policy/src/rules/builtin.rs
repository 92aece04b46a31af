//! The built-in rule packs, compiled into the binary. Each pack is an ordinary rule file in
//! `rules/builtin/` with must-block / must-allow cases in `rules/fixtures/`.

/// One list of pack names gives both the names and the embedded texts.
macro_rules! packs {
    ($($name:literal),* $(,)?) => {
        /// Every pack, in the order their rules are indexed (`builtin: all`).
        pub const NAMES: &[&str] = &[$($name),*];

        /// The text of a pack.
        #[must_use]
        pub fn text(name: &str) -> Option<&'static str> {
            match name {
                $($name => Some(include_str!(concat!("../../../rules/builtin/", $name, ".yaml"))),)*
                _ => None,
            }
        }

        /// The pack's YAML tree as `build.rs` wrote it (`tree_image`), so that loading the
        /// pack need not parse its text.
        #[must_use]
        pub(crate) fn tree_image(name: &str) -> Option<&'static [u8]> {
            match name {
                $($name => Some(include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".tree"))),)*
                _ => None,
            }
        }

        /// The must-block / must-allow cases of a pack (`rules/fixtures/`), kept in the
        /// binary so that a proposed rule change can be replayed against them.
        #[must_use]
        pub fn fixture(name: &str) -> Option<&'static str> {
            match name {
                $($name => Some(include_str!(concat!("../../../rules/fixtures/", $name, ".yaml"))),)*
                _ => None,
            }
        }
    };
}

packs!(
    "credentials",
    "credential-tools",
    "persistence",
    "system",
    "network",
    "agent-config",
    "container",
    "destructive",
    "destructive-git",
    "remote-code",
    "self-protection",
    "outside-session",
    "private-views",
    "internal-network",
);

/// Packs on when a rule file has no `builtin:` key: all but the last, `internal-network`,
/// which is opt-in because many agents legitimately reach services on the local network.
pub const DEFAULT: &[&str] = NAMES.split_at(NAMES.len() - 1).0;

/// Packs in force whatever the rule file's `builtin:` says (`none` included): their rules are
/// `locked`, and an agent that could write Carapace's rules, binaries or pins would switch
/// every other rule off.
pub(crate) const ALWAYS: &[&str] = &["self-protection"];
