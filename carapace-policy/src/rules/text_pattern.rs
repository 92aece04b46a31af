//! Text matchers of commands, tool names and contents: its own module so that the rule model
//! and the structured command matcher (`run`) share it without depending on each other.

use super::lazy_regex::{LazyGlob, LazyRegex};

/// A command or tool-input text matcher: a glob (`*` crosses everything) or `re:`.
#[derive(Clone, Debug)]
pub enum TextPattern {
    Glob {
        source: String,
        matcher: LazyGlob,
    },
    Regex {
        source: String,
        regex: LazyRegex,
    },
    /// Content rules without `re:` are substrings.
    Substring(String),
}

impl TextPattern {
    #[must_use]
    pub fn source(&self) -> &str {
        match self {
            Self::Glob { source, .. } | Self::Regex { source, .. } | Self::Substring(source) => {
                source
            }
        }
    }

    #[must_use]
    pub fn matches(&self, text: &str) -> bool {
        match self {
            Self::Glob { matcher, .. } => matcher.is_match(text),
            Self::Regex { regex, .. } => regex.is_match(text),
            Self::Substring(s) => text.contains(s.as_str()),
        }
    }
}
