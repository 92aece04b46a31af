//! The `record:` section of `config.yaml`: how long the records of `carapace run --record`
//! sessions are kept after the session ended.
//!
//! ```yaml
//! record:
//!   keep_days: 30   # records of sessions ended longer ago are deleted (1 to 36500)
//! ```
use std::time::Duration;

use carapace_policy::rules::diag::Sink;
use carapace_policy::rules::yaml::Node;

const KEYS: &[&str] = &["keep_days"];
/// The default: long enough to review a proposal after a holiday.
pub const DEFAULT_KEEP_DAYS: u64 = 30;
/// A hundred years: "keep them" without a special value that means forever.
const MAX_KEEP_DAYS: u64 = 36_500;
const DAY: u64 = 86_400;

/// How long a record outlives its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSettings {
    pub keep: Duration,
}

impl Default for RecordSettings {
    fn default() -> Self {
        Self {
            keep: Duration::from_secs(DEFAULT_KEEP_DAYS * DAY),
        }
    }
}

/// Reads the `record:` mapping; problems go to `sink` at their position.
pub(crate) fn parse(node: &Node, sink: &mut Sink) -> RecordSettings {
    let mut settings = RecordSettings::default();
    if !super::section(node, "record", KEYS, "keep_days: 30", sink) {
        return settings;
    }
    let Some(value) = node.get("keep_days") else {
        return settings;
    };
    match value
        .as_str()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|d| (1..=MAX_KEEP_DAYS).contains(d))
    {
        Some(days) => settings.keep = Duration::from_secs(days * DAY),
        None => sink.error(
            value.span,
            None,
            format!("`keep_days` must be a whole number of days from 1 to {MAX_KEEP_DAYS}"),
            &format!("e.g. `keep_days: {DEFAULT_KEEP_DAYS}`"),
        ),
    }
    settings
}
