//! One ledger record: what happened ([`Event`]) plus its place in the chain (seq, timestamp,
//! previous hash), and the line it is stored as.
//!
//! A line is the record's JSON *body* with its own hash spliced in as the last member:
//! `{"seq":1,…,"prev":"…"` + `,"hash":"<sha256 of the body bytes>"}`. The hash covers the
//! exact bytes written (the body is `{…}` without the hash member), so any byte changed in a
//! line — even one that parses to the same values — breaks it; and each line stays plain JSON
//! for `jq`.
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The `prev` of the very first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What a record is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A tool call checked (Layer 1).
    Evaluate,
    /// A transcript scanned (Layer 0).
    ScanHistory,
    /// The kernel refused an operation (Layer 2).
    KernelDenial,
    /// The rule file was read again (swapped in or refused).
    RulesReload,
    SessionCreated,
    SessionEnded,
    /// The user answered an approval request (or it expired); `agent` is who answered.
    ApprovalAnswered,
    /// The user switched a rule off or on for a session, or reset it.
    SessionRulesChanged,
    /// The daemon opened the ledger (start) and what it found (e.g. a torn last line).
    LedgerOpened,
    /// A session ran into one of its limits (memory, pids, time).
    SessionLimit,
    /// A session's resolver refused a lookup (network rules by name).
    LookupRefused,
    /// A session's connect to a learned address was refused for the server name it asked
    /// for (`tls: sni`).
    ServerNameRefused,
    /// The user changed the rule file through Carapace ("allow this from now on"); `rules`
    /// names the rule that got the exception, `detail` the exception and the safety check.
    RulesChanged,
}

/// A rule that matched, as recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRef {
    pub id: String,
    pub mode: String,
    /// What in the call matched (redacted).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub matched: String,
}

/// The process that caused the event, when known.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Its command (`/proc/PID/comm` or the session's command line; redacted).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
}

/// What happened. Every free-text field is redacted before it gets here (see
/// [`super::redact`]); argument values are never stored, only their sha256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub kind: Kind,
    /// The Carapace session (cgroup) the caller runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The agent's own session id (e.g. Claude Code's), as the request gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Agent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// sha256 (hex) of the arguments exactly as received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_sha256: Option<String>,
    /// block | approve | warn | log | allow; `error` when no decision could be made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleRef>,
    /// history | tool-call | kernel
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_us: Option<u64>,
    /// Why the request failed (e.g. `invalid-argument`), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// E.g. the actions the call performs (`write`, `network`), `secret-in-arguments`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub risk: Vec<String>,
    /// Anything else worth keeping, redacted (a denial's operation and path, a reload's file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Event {
    /// An event of `kind` with every other field empty.
    #[must_use]
    pub fn new(kind: Kind) -> Self {
        Self {
            kind,
            session: None,
            agent_session: None,
            agent: None,
            tool: None,
            purpose: None,
            args_sha256: None,
            decision: None,
            rules: Vec::new(),
            layer: None,
            elapsed_us: None,
            error: None,
            risk: Vec::new(),
            detail: None,
        }
    }
}

/// A record as stored: its place in the chain, then the event, then the previous hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub seq: u64,
    /// UTC, RFC 3339 with microseconds.
    pub ts: String,
    #[serde(flatten)]
    pub event: Event,
    /// Hash of the previous record ([`GENESIS`] for the first).
    pub prev: String,
}

/// A stored line split into its record and the hashes.
#[derive(Clone, Debug)]
pub struct Parsed {
    pub record: Record,
    /// The hash the line claims.
    pub hash: String,
}

/// Why a line is not a valid record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("the line does not end with a `\"hash\"` member")]
    NoHash,
    #[error("the hash does not match the line's contents (the record was edited)")]
    HashMismatch,
    #[error("the line is not a ledger record: {0}")]
    Malformed(String),
}

const HASH_KEY: &str = ",\"hash\":\"";

/// Lower-case hex of `bytes`.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// sha256 of `bytes` in lower-case hex.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

impl Record {
    /// The line to store (with its trailing newline) and the record's hash.
    pub fn encode(&self) -> Result<(String, String), serde_json::Error> {
        let body = serde_json::to_string(self)?;
        let hash = sha256_hex(body.as_bytes());
        // The body is a JSON object: drop its closing brace and add the hash member.
        let open = &body[..body.len() - 1];
        Ok((format!("{open}{HASH_KEY}{hash}\"}}\n"), hash))
    }
}

/// Checks a line's hash against its bytes and parses it. `line` has no trailing newline.
pub fn decode(line: &[u8]) -> Result<Parsed, LineError> {
    // `,"hash":"` + 64 hex + `"}`
    let tail = HASH_KEY.len() + 64 + 2;
    if line.len() < tail + 2 || !line.ends_with(b"\"}") {
        return Err(LineError::NoHash);
    }
    let split = line.len() - tail;
    let (open, rest) = line.split_at(split);
    let Some(hash) = rest
        .strip_prefix(HASH_KEY.as_bytes())
        .and_then(|r| r.strip_suffix(b"\"}"))
        .filter(|h| h.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
    else {
        return Err(LineError::NoHash);
    };
    let mut body = Vec::with_capacity(split + 1);
    body.extend_from_slice(open);
    body.push(b'}');
    let hash = String::from_utf8_lossy(hash).into_owned();
    if sha256_hex(&body) != hash {
        return Err(LineError::HashMismatch);
    }
    let record: Record =
        serde_json::from_slice(&body).map_err(|e| LineError::Malformed(e.to_string()))?;
    Ok(Parsed { record, hash })
}

/// Now, as RFC 3339 UTC with microseconds (`2026-11-23T16:03:36.123456Z`).
#[must_use]
pub fn now_rfc3339() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs(), since.subsec_micros())
}

/// `secs` since the epoch as RFC 3339 UTC with `micros`.
#[must_use]
pub fn rfc3339(secs: u64, micros: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        let mut event = Event::new(Kind::Evaluate);
        event.tool = Some("Bash".into());
        event.decision = Some("block".into());
        event.rules = vec![RuleRef {
            id: "r".into(),
            mode: "block".into(),
            matched: "read /x".into(),
        }];
        Record {
            seq: 7,
            ts: rfc3339(0, 0),
            event,
            prev: GENESIS.into(),
        }
    }

    #[test]
    fn lines_round_trip_and_any_byte_change_breaks_them() {
        let (line, hash) = record().encode().unwrap();
        assert!(line.ends_with("\"}\n"));
        let line = line.trim_end_matches('\n');
        serde_json::from_str::<serde_json::Value>(line).expect("each line is plain JSON");
        let parsed = decode(line.as_bytes()).unwrap();
        assert_eq!(parsed.record, record());
        assert_eq!(parsed.hash, hash);
        // Whitespace that parses to the same values is still an edit.
        let spaced = line.replacen("\"seq\":7", "\"seq\": 7", 1);
        assert_eq!(
            decode(spaced.as_bytes()).unwrap_err(),
            LineError::HashMismatch
        );
        let edited = line.replacen("block", "allow", 1);
        assert_eq!(
            decode(edited.as_bytes()).unwrap_err(),
            LineError::HashMismatch
        );
        assert_eq!(decode(b"{}").unwrap_err(), LineError::NoHash);
    }

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.000005Z");
        assert_eq!(
            rfc3339(1_795_449_816, 123_456),
            "2026-11-23T16:03:36.123456Z"
        );
    }
}
