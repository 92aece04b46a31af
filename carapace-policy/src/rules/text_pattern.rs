//! Text matchers of commands, tool names and contents: its own module so that the rule model
//! and the structured command matcher (`run`) share it without depending on each other.

use super::lazy_regex::{LazyGlob, LazyRegex};

/// A command or tool-input text matcher: a glob (`*` crosses everything) or `re:`.
#[derive(Clone, Debug)]
pub enum TextPattern {
    /// A glob over the whole text.
    Glob {
        /// As written in the rule.
        source: String,
        /// Compiled when first used.
        matcher: LazyGlob,
    },
    /// A regular expression searched for in the text (`re:`).
    Regex {
        /// As written in the rule, `re:` included.
        source: String,
        /// Compiled when first used.
        regex: LazyRegex,
    },
    /// Content rules without `re:` are substrings.
    Substring(String),
}

impl TextPattern {
    /// The pattern as written, for messages.
    #[must_use]
    pub fn source(&self) -> &str {
        match self {
            Self::Glob { source, .. } | Self::Regex { source, .. } | Self::Substring(source) => {
                source
            }
        }
    }

    /// Whether `text` matches.
    #[must_use]
    pub fn matches(&self, text: &str) -> bool {
        match self {
            Self::Glob { matcher, .. } => matcher.is_match(text),
            Self::Regex { regex, .. } => regex.is_match(text),
            Self::Substring(s) => text.contains(s.as_str()),
        }
    }
}
