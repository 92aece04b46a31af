//! `$CARAPACE_DATA_DIR/config.yaml`: everything Carapace reads from it besides the rules, in
//! one schema with one reader. `carapaced`, `carapace doctor` and `carapace learn` all call
//! [`load`], so they cannot disagree about which keys exist: an unknown section or setting is
//! an error at its `file:line:column`, with a did-you-mean, for each of them.
//!
//! ```yaml
//! approvals:
//!   timeout_seconds: 300   # longest a call waits for the user's answer; then it expires (= deny)
//! dns:
//!   refuse_with: refused   # or nxdomain: the answer to a lookup the rules refuse
//! audit:
//!   acknowledge: written   # or synced: a decision waits for its record's fdatasync too
//! console:
//!   listen: 127.0.0.1:8790 # the console's address (loopback only); off without it
//! record:
//!   keep_days: 30          # records of `carapace run --record` sessions ended longer ago are deleted
//! llm: { … }               # the model that reviews what rules cannot decide alone
//! ```
//!
//! - `llm`: the `llm:` section.
//! - `dns`: the `dns:` section.
//! - `console`: the console's address, as `console.listen` and `carapaced --console` take it.
//! - `record`: how long record sessions' records outlive them.
//!
//! The sections' types live here rather than with the modules that use them (the resolvers,
//! the console, the LLM client), so that reading the file depends on none of them.
pub mod console;
pub mod dns;
pub mod llm;
pub mod record;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use carapace_policy::rules::diag::{did_you_mean, Sink};
use carapace_policy::rules::yaml::{self, Node, NodeKind, Span};
use carapace_policy::rules::Diagnostics;

pub use self::dns::{DnsSettings, RefuseWith};
pub use self::llm::{LlmConfig, Provider};
pub use self::record::RecordSettings;

/// The config file's name in the data directory.
pub const FILE_NAME: &str = "config.yaml";

const SECTIONS: &[&str] = &["llm", "approvals", "dns", "audit", "console", "record"];
const APPROVAL_KEYS: &[&str] = &["timeout_seconds"];
const AUDIT_KEYS: &[&str] = &["acknowledge"];
/// A day: longer waits would park agents (and their sessions) indefinitely.
const MAX_APPROVAL_TIMEOUT: u64 = 86_400;

/// What `config.yaml` says; a missing file or section means its defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// The `approvals:` section: how long a call waits for the user's answer.
    pub approval_timeout: Option<Duration>,
    /// The `dns:` section: how the sessions' resolvers refuse names (`crate::dns`).
    pub dns: DnsSettings,
    /// The `audit:` section: when a decision may be given relative to its record's sync.
    pub audit_acknowledge: Acknowledge,
    /// The `console:` section: where the console listens (`carapaced --console` wins).
    pub console: Option<SocketAddr>,
    /// The `record:` section: how long record sessions' records are kept.
    pub record: RecordSettings,
    /// The `llm:` section: `None` means LLM review is unavailable, and every rule that needs
    /// it falls back to its `on_llm_error` mode.
    pub llm: Option<LlmConfig>,
}

/// When a caller may give its decision: config.yaml's `audit: { acknowledge: … }`, applied by
/// the audit ledger (`crate::audit::ledger`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Acknowledge {
    /// Once the record is written to the segment (in the page cache): it survives any crash
    /// of carapaced, `kill -9` included. The `fdatasync` follows at once, before the next
    /// batch; a power loss or kernel crash in between can lose the records of that one batch
    /// (about a millisecond). Saves the sync's latency on every decision.
    #[default]
    Written,
    /// Only after `fdatasync`: nothing acknowledged is lost even to a power loss, at the
    /// cost of one disk flush in the latency of every decision (0.2–4 ms by disk).
    Synced,
}

/// The text of `dir/config.yaml` and its name for diagnostics; `None` when there is none.
fn read(data_dir: &Path) -> Result<Option<(String, String)>, Diagnostics> {
    let path = data_dir.join(FILE_NAME);
    let origin = path.display().to_string();
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some((origin, text))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => {
            let mut sink = Sink::new(&origin);
            sink.error(
                Span { line: 1, col: 1 },
                None,
                format!("cannot read the config file: {e}"),
                "check the file's permissions",
            );
            Err(Diagnostics(sink.items))
        }
    }
}

/// Reads `dir/config.yaml`; a missing file means defaults.
pub fn load(data_dir: &Path) -> Result<Config, Diagnostics> {
    match read(data_dir)? {
        Some((origin, text)) => parse(&origin, &text),
        None => Ok(Config::default()),
    }
}

/// Validates config text, every section; `origin` names it in diagnostics.
pub fn parse(origin: &str, text: &str) -> Result<Config, Diagnostics> {
    let mut sink = Sink::new(origin);
    let root = match yaml::parse(text) {
        Ok(Some(root)) => root,
        Ok(None) => return Ok(Config::default()),
        Err(e) => {
            sink.error(
                e.span,
                None,
                format!("YAML syntax: {}", e.message),
                "fix the YAML syntax at this position",
            );
            return Err(Diagnostics(sink.items));
        }
    };
    let NodeKind::Map(entries) = &root.kind else {
        if !root.is_null() {
            sink.error(
                root.span,
                None,
                format!(
                    "expected a mapping of sections (`llm:` …), found {}",
                    root.describe()
                ),
                "start the file with a section such as `llm:` and its settings indented below",
            );
            return Err(Diagnostics(sink.items));
        }
        return Ok(Config::default());
    };
    for (k, _) in entries {
        let name = k.as_str().unwrap_or("");
        if !SECTIONS.contains(&name) {
            sink.error(
                k.span,
                None,
                format!("unknown section `{name}`"),
                &did_you_mean(name, SECTIONS),
            );
        }
    }
    let mut config = Config::default();
    if let Some(node) = root.get("approvals") {
        config.approval_timeout = approvals(node, &mut sink);
    }
    if let Some(node) = root.get("dns") {
        config.dns = dns::parse(node, &mut sink);
    }
    if let Some(node) = root.get("audit") {
        config.audit_acknowledge = audit(node, &mut sink);
    }
    if let Some(node) = root.get("console") {
        config.console = console::parse(node, &mut sink);
    }
    if let Some(node) = root.get("record") {
        config.record = record::parse(node, &mut sink);
    }
    if let Some(node) = root.get("llm") {
        config.llm = llm::parse(node, &mut sink);
    }
    if sink.error_count() > 0 {
        return Err(Diagnostics(sink.items));
    }
    Ok(config)
}

fn approvals(node: &Node, sink: &mut Sink) -> Option<Duration> {
    if !section(
        node,
        "approvals",
        APPROVAL_KEYS,
        "timeout_seconds: 300",
        sink,
    ) {
        return None;
    }
    let value = node.get("timeout_seconds")?;
    let secs = value
        .as_str()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|s| (1..=MAX_APPROVAL_TIMEOUT).contains(s));
    if secs.is_none() {
        sink.error(
            value.span,
            None,
            format!("`timeout_seconds` must be a whole number of seconds from 1 to {MAX_APPROVAL_TIMEOUT}"),
            "e.g. `timeout_seconds: 300`",
        );
    }
    secs.map(Duration::from_secs)
}

fn audit(node: &Node, sink: &mut Sink) -> Acknowledge {
    if !section(node, "audit", AUDIT_KEYS, "acknowledge: written", sink) {
        return Acknowledge::default();
    }
    one_of(
        node,
        "acknowledge",
        &[
            ("written", Acknowledge::Written),
            ("synced", Acknowledge::Synced),
        ],
        "`written`: a decision is given once its audit record is written (survives a crash \
         of carapaced); `synced`: also after the disk flushed it (survives a power loss, \
         slower)",
        sink,
    )
    .unwrap_or_default()
}

/// Checks that `node`, config.yaml's section `name`, is a mapping of `keys` only (each
/// other key an error with a did-you-mean); `example` is a line of it for the hint. False
/// when it is not a mapping (or empty), so there is nothing to read.
pub(crate) fn section(
    node: &Node,
    name: &str,
    keys: &[&str],
    example: &str,
    sink: &mut Sink,
) -> bool {
    let NodeKind::Map(entries) = &node.kind else {
        if !node.is_null() {
            sink.error(
                node.span,
                None,
                format!("`{name}` must be a mapping, found {}", node.describe()),
                &format!("write `{name}:` and indent `{example}` below it"),
            );
        }
        return false;
    };
    for (k, _) in entries {
        let key = k.as_str().unwrap_or("");
        if !keys.contains(&key) {
            sink.error(
                k.span,
                None,
                format!("unknown `{name}` setting `{key}`"),
                &did_you_mean(key, keys),
            );
        }
    }
    true
}

/// The value of setting `key` of `node` when it is one of the `choices`' words; an error at
/// its position otherwise (`hint` says what each means). `None` when absent or wrong.
pub(crate) fn one_of<T: Copy>(
    node: &Node,
    key: &str,
    choices: &[(&str, T)],
    hint: &str,
    sink: &mut Sink,
) -> Option<T> {
    let value = node.get(key)?;
    let word = value.as_str().map(str::trim);
    let found = choices
        .iter()
        .find(|(w, _)| Some(*w) == word)
        .map(|(_, v)| *v);
    if found.is_none() {
        let words: Vec<String> = choices.iter().map(|(w, _)| format!("`{w}`")).collect();
        sink.error(
            value.span,
            None,
            format!(
                "`{key}` must be {}, found {}",
                words.join(" or "),
                value.describe()
            ),
            hint,
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sections_and_the_approval_timeout() {
        assert_eq!(parse("c", "").unwrap(), Config::default());
        let s = parse("c", "approvals:\n  timeout_seconds: 90\nllm: ~\n").unwrap();
        assert_eq!(s.approval_timeout, Some(Duration::from_secs(90)));
        let e = parse("c", "aprovals:\n  timeout_seconds: 90\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("c:1:1") && e.contains("approvals"), "{e}");
        let e = parse("c", "approvals:\n  timeout_seconds: 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("c:2:") && e.contains("from 1 to"), "{e}");
        let e = parse("c", "approvals:\n  timeout: 5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("timeout_seconds"), "{e}");
    }

    #[test]
    fn the_audit_acknowledgement() {
        assert_eq!(
            parse("c", "").unwrap().audit_acknowledge,
            Acknowledge::Written
        );
        let s = parse("c", "audit:\n  acknowledge: synced\n").unwrap();
        assert_eq!(s.audit_acknowledge, Acknowledge::Synced);
        let e = parse("c", "audit:\n  acknowledge: always\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c:2:") && e.contains("`written` or `synced`"),
            "{e}"
        );
        let e = parse("c", "audit:\n  acknowlege: synced\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("acknowledge"), "{e}");
    }

    #[test]
    fn the_console_listens_on_loopback_only() {
        assert_eq!(parse("c", "").unwrap().console, None);
        let s = parse("c", "console:\n  listen: 127.0.0.1:8790\n").unwrap();
        assert_eq!(s.console, Some("127.0.0.1:8790".parse().unwrap()));
        let e = parse("c", "console:\n  listen: 0.0.0.0:8790\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("c:2:") && e.contains("loopback"), "{e}");
        let e = parse("c", "console:\n  listen: nowhere\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("127.0.0.1:8790"), "{e}");
        let e = parse("c", "console:\n  lisen: 127.0.0.1:1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("listen"), "{e}");
    }

    #[test]
    fn how_long_records_are_kept() {
        let day = Duration::from_hours(24);
        assert_eq!(parse("c", "").unwrap().record.keep, 30 * day);
        let s = parse("c", "record:\n  keep_days: 7\n").unwrap();
        assert_eq!(s.record.keep, 7 * day);
        for wrong in ["0", "-1", "36501", "a week", "1.5"] {
            let e = parse("c", &format!("record:\n  keep_days: {wrong}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("c:2:") && e.contains("from 1 to 36500"),
                "{wrong}: {e}"
            );
        }
    }

    #[test]
    fn an_unknown_key_in_each_section_is_an_error_with_a_suggestion() {
        // (text, position of the wrong key, what it says, the suggestion)
        let cases = [
            (
                "aproovals: {}\n",
                "c:1:1",
                "unknown section `aproovals`",
                "`approvals`",
            ),
            (
                "approvals:\n  timeout_secs: 5\n",
                "c:2:3",
                "unknown `approvals` setting `timeout_secs`",
                "`timeout_seconds`",
            ),
            (
                "dns:\n  refuse_wth: nxdomain\n",
                "c:2:3",
                "unknown `dns` setting `refuse_wth`",
                "`refuse_with`",
            ),
            (
                "audit:\n  acknowledged: synced\n",
                "c:2:3",
                "unknown `audit` setting `acknowledged`",
                "`acknowledge`",
            ),
            (
                "console:\n  listn: 127.0.0.1:8790\n",
                "c:2:3",
                "unknown `console` setting `listn`",
                "`listen`",
            ),
            (
                "record:\n  keep_day: 3\n",
                "c:2:3",
                "unknown `record` setting `keep_day`",
                "`keep_days`",
            ),
            (
                "recrd:\n  keep_days: 3\n",
                "c:1:1",
                "unknown section `recrd`",
                "`record`",
            ),
            (
                "llm:\n  provider: openai\n  model: m\n  modle: n\n",
                "c:4:3",
                "unknown `llm` setting `modle`",
                "`model`",
            ),
        ];
        for (text, at, what, suggestion) in cases {
            let e = parse("c", text).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{at}: error: {what}"))
                    && e.contains(&format!("did you mean {suggestion}?")),
                "{text:?}: {e}"
            );
        }
    }

    proptest! {
        #[test]
        fn never_panics(text in ".{0,200}") {
            let _ = parse("c", &text);
        }
    }
}
