//! `carapace audit verify`: walks every segment from the first record and reports the first
//! place where the ledger is not what the daemon wrote.
use std::path::{Path, PathBuf};

use super::files::{self, Head};
use super::record::{self, GENESIS};
use crate::io_error::IoError;

/// The first thing wrong with a ledger.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {what}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct Problem {
    pub file: PathBuf,
    /// 1-based line, when the problem is in a line.
    pub line: Option<usize>,
    /// The seq expected at that place.
    pub seq: Option<u64>,
    pub what: String,
}

/// A ledger that verified.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub records: u64,
    pub segments: usize,
    /// Hash of the last record (copy it somewhere else to detect a later rewrite).
    pub last_hash: String,
    /// Things that are not tampering but worth saying (a torn last line after a crash).
    pub notes: Vec<String>,
}

fn problem(file: &Path, line: Option<usize>, seq: Option<u64>, what: impl Into<String>) -> Problem {
    Problem {
        file: file.to_owned(),
        line,
        seq,
        what: what.into(),
    }
}

fn io(e: &IoError) -> Problem {
    problem(
        &e.path,
        None,
        None,
        format!("cannot {}: {}", e.action, e.source),
    )
}

/// Verifies the ledger in `dir` (a data directory's `audit/`).
///
/// Detected: a record edited in any byte, deleted, inserted, duplicated or moved (within or
/// across segments); a missing segment; records cut off the end (the head then points past
/// the last record); a missing or edited head. Not detected: a rewrite of the whole chain and
/// head from some record on by someone who can write the files (root) — the hashes are not
/// keyed; compare [`Report::last_hash`] with a copy kept elsewhere to catch that.
pub fn verify(dir: &Path) -> Result<Report, Problem> {
    let segments = files::segments(dir).map_err(|e| io(&e))?;
    let head_path = files::head_path(dir);
    let head = match files::read_head(dir).map_err(|e| io(&e))? {
        Some(Ok(h)) => Some(h),
        Some(Err(_)) => return Err(problem(&head_path, Some(1), None, "not a ledger head")),
        None => None,
    };
    if segments.is_empty() {
        return empty_ledger(dir, head.as_ref());
    }
    let mut report = Report::default();
    let mut prev = GENESIS.to_owned();
    let mut seq = 0u64;
    // (seq, hash) of every record, to check the head against the record it names.
    let mut head_match: Option<String> = None;
    let last_index = segments.len() - 1;
    for (i, (n, path)) in segments.iter().enumerate() {
        let expected_n = segments[0].0 + i as u32;
        if *n != expected_n || (i == 0 && *n != 1) {
            let missing = if i == 0 { 1 } else { expected_n };
            return Err(problem(
                &dir.join(files::segment_name(missing)),
                None,
                Some(seq + 1),
                "this segment is missing (deleted)",
            ));
        }
        let lines = files::lines(path).map_err(|e| io(&e))?;
        if lines.is_empty() && i != last_index {
            return Err(problem(
                path,
                None,
                Some(seq + 1),
                "empty segment in the middle of the ledger",
            ));
        }
        for line in &lines {
            let want = seq + 1;
            if !line.complete {
                if i == last_index && line.number == lines.len() {
                    report.notes.push(format!(
                        "{}:{}: unfinished last line ({} bytes): a write cut short by a crash, never acknowledged; carapaced cuts it off at its next start",
                        path.display(),
                        line.number,
                        line.bytes.len()
                    ));
                    continue;
                }
                return Err(problem(
                    path,
                    Some(line.number),
                    Some(want),
                    "line without a newline inside the ledger",
                ));
            }
            let parsed = record::decode(&line.bytes)
                .map_err(|e| problem(path, Some(line.number), Some(want), e.to_string()))?;
            let r = &parsed.record;
            if r.seq != want {
                let what = if r.seq > want {
                    format!("found record {} where {want} belongs: records {want}..{} are missing (deleted) or out of order", r.seq, r.seq - 1)
                } else {
                    format!("found record {} where {want} belongs: a record was inserted, duplicated or moved", r.seq)
                };
                return Err(problem(path, Some(line.number), Some(want), what));
            }
            if r.prev != prev {
                return Err(problem(
                    path,
                    Some(line.number),
                    Some(want),
                    "the record does not chain to the one before it (a record before it was replaced)",
                ));
            }
            if head.as_ref().is_some_and(|h| h.seq == r.seq) {
                head_match = Some(parsed.hash.clone());
            }
            prev = parsed.hash;
            seq = want;
        }
        report.segments += 1;
    }
    report.records = seq;
    report.last_hash = prev;
    check_head(
        head.as_ref(),
        head_match.as_deref(),
        &head_path,
        &mut report,
    )?;
    Ok(report)
}

/// A ledger without segments: fine when nothing was ever written.
fn empty_ledger(dir: &Path, head: Option<&Head>) -> Result<Report, Problem> {
    match head {
        Some(h) if h.seq > 0 => Err(problem(
            dir,
            None,
            Some(1),
            format!(
                "every segment is gone, but the head says {} records were written",
                h.seq
            ),
        )),
        _ if !dir.exists() => Err(problem(
            dir,
            None,
            None,
            "no audit ledger here (is this the daemon's data directory?)",
        )),
        _ => Ok(Report {
            last_hash: GENESIS.into(),
            ..Report::default()
        }),
    }
}

fn check_head(
    head: Option<&Head>,
    matched: Option<&str>,
    path: &Path,
    report: &mut Report,
) -> Result<(), Problem> {
    let seq = report.records;
    let Some(head) = head else {
        return Err(problem(
            path,
            None,
            Some(seq),
            "the head file is missing (it anchors the end of the ledger)",
        ));
    };
    if head.seq > seq {
        return Err(problem(
            path,
            Some(1),
            Some(seq + 1),
            format!(
                "the ledger ends at record {seq} but the head says {} were acknowledged: records {}..{} were deleted from the end",
                head.seq,
                seq + 1,
                head.seq
            ),
        ));
    }
    if head.seq == 0 && seq > 0 {
        report.notes.push(format!(
            "the head predates all {seq} records (written just before a crash?)"
        ));
        return Ok(());
    }
    if head.seq > 0 && matched != Some(head.hash.as_str()) {
        return Err(problem(
            path,
            Some(1),
            Some(head.seq),
            format!(
                "the head's hash does not match record {}: the ledger was rewritten from there on",
                head.seq
            ),
        ));
    }
    if head.seq < seq {
        report.notes.push(format!(
            "{} record(s) after the head: written just before a crash (maybe never acknowledged), or appended by someone else",
            seq - head.seq
        ));
    }
    Ok(())
}
