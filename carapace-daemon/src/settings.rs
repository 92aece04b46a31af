//! `$CARAPACE_DATA_DIR/config.yaml` beyond the rules: which sections exist (a misspelt one is
//! an error, not a silently ignored setting) and the `approvals:` section. The `llm:` section
//! is read by [`crate::llm::config`].
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
//! llm: { … }
//! ```
use std::path::Path;
use std::time::Duration;

use crate::audit::ledger::Acknowledge;
use crate::llm::config::FILE_NAME;
use carapace_policy::rules::diag::{did_you_mean, Sink};
use carapace_policy::rules::yaml::{self, Node, NodeKind, Span};
use carapace_policy::rules::Diagnostics;

const SECTIONS: &[&str] = &["llm", "approvals", "dns", "audit", "console"];
const APPROVAL_KEYS: &[&str] = &["timeout_seconds"];
const AUDIT_KEYS: &[&str] = &["acknowledge"];
const CONSOLE_KEYS: &[&str] = &["listen"];
/// A day: longer waits would park agents (and their sessions) indefinitely.
const MAX_APPROVAL_TIMEOUT: u64 = 86_400;

/// The settings of `config.yaml` that are not the LLM's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub approval_timeout: Option<Duration>,
    /// The `dns:` section: how the sessions' resolvers refuse names (`crate::dns`).
    pub dns: crate::dns::DnsSettings,
    /// The `audit:` section: when a decision may be given relative to its record's sync.
    pub audit_acknowledge: Acknowledge,
    /// The `console:` section: where the console listens (`carapaced --console` wins).
    pub console: Option<std::net::SocketAddr>,
}

/// The text of `dir/config.yaml` and its name for diagnostics; `None` when there is none.
pub fn read(data_dir: &Path) -> Result<Option<(String, String)>, Diagnostics> {
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
pub fn load(data_dir: &Path) -> Result<Settings, Diagnostics> {
    match read(data_dir)? {
        Some((origin, text)) => parse(&origin, &text),
        None => Ok(Settings::default()),
    }
}

/// Validates the sections of config text; `origin` names it in diagnostics.
pub fn parse(origin: &str, text: &str) -> Result<Settings, Diagnostics> {
    let mut sink = Sink::new(origin);
    let root = match yaml::parse(text) {
        Ok(Some(root)) => root,
        Ok(None) => return Ok(Settings::default()),
        // The LLM section's reader reports syntax errors with the same position.
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
        return Ok(Settings::default());
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
    let mut settings = Settings::default();
    if let Some(node) = root.get("approvals") {
        settings.approval_timeout = approvals(node, &mut sink);
    }
    if let Some(node) = root.get("dns") {
        settings.dns = crate::dns::settings::parse(node, &mut sink);
    }
    if let Some(node) = root.get("audit") {
        settings.audit_acknowledge = audit(node, &mut sink);
    }
    if let Some(node) = root.get("console") {
        settings.console = console(node, &mut sink);
    }
    if sink.error_count() > 0 {
        return Err(Diagnostics(sink.items));
    }
    Ok(settings)
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

fn console(node: &Node, sink: &mut Sink) -> Option<std::net::SocketAddr> {
    if !section(
        node,
        "console",
        CONSOLE_KEYS,
        "listen: 127.0.0.1:8790",
        sink,
    ) {
        return None;
    }
    let value = node.get("listen")?;
    match crate::console::parse_addr(value.as_str().unwrap_or("")) {
        Ok(addr) => Some(addr),
        Err(e) => {
            sink.error(
                value.span,
                None,
                e.to_string(),
                "e.g. `listen: 127.0.0.1:8790`",
            );
            None
        }
    }
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
        assert_eq!(parse("c", "").unwrap(), Settings::default());
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

    proptest! {
        #[test]
        fn never_panics(text in ".{0,200}") {
            let _ = parse("c", &text);
        }
    }
}
