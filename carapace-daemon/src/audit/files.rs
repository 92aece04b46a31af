//! Where the ledger lives: `DATA_DIR/audit/ledger-NNNNNN.jsonl` segments and the `head`
//! anchor, and how to read them back line by line.
use std::fs;
use std::io::{self, BufRead as _};
use std::path::{Path, PathBuf};

use super::record::GENESIS;
use crate::io_error::IoError;

/// The ledger's directory below the data directory.
#[must_use]
pub fn audit_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("audit")
}

/// File name of segment `n`.
#[must_use]
pub fn segment_name(n: u32) -> String {
    format!("ledger-{n:06}.jsonl")
}

/// The segment number of a file name, if it is a segment.
#[must_use]
pub fn segment_number(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("ledger-")?.strip_suffix(".jsonl")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segments in `dir`, by number. A missing directory has none.
pub fn segments(dir: &Path) -> Result<Vec<(u32, PathBuf)>, IoError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(IoError::new("list", dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(IoError::at("list", dir))?;
        // Only regular files: a planted symlink to /dev/zero must not make a reader spin.
        if !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if let Some(n) = entry.file_name().to_str().and_then(segment_number) {
            out.push((n, entry.path()));
        }
    }
    out.sort_unstable_by_key(|(n, _)| *n);
    Ok(out)
}

/// One line of a segment, without its newline.
#[derive(Debug)]
pub struct Line {
    /// 1-based.
    pub number: usize,
    pub bytes: Vec<u8>,
    /// The line ended with a newline (only the last line of a torn write does not).
    pub complete: bool,
}

/// Every line of a segment file.
pub fn lines(path: &Path) -> Result<Vec<Line>, IoError> {
    let file = fs::File::open(path).map_err(IoError::at("open", path))?;
    let mut reader = io::BufReader::new(file);
    let mut out = Vec::new();
    loop {
        let mut bytes = Vec::new();
        let n = reader
            .read_until(b'\n', &mut bytes)
            .map_err(IoError::at("read", path))?;
        if n == 0 {
            return Ok(out);
        }
        let complete = bytes.last() == Some(&b'\n');
        if complete {
            bytes.pop();
        }
        out.push(Line {
            number: out.len() + 1,
            bytes,
            complete,
        });
    }
}

/// The anchor: the last record acknowledged (seq and hash) and its segment. Rewritten in
/// place after every commit, so that deleting records from the end of the ledger leaves a
/// head that points past it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub segment: u32,
    pub hash: String,
}

const HEAD_MAGIC: &str = "carapace-ledger-head-v1";

/// The head file of `dir`.
#[must_use]
pub fn head_path(dir: &Path) -> PathBuf {
    dir.join("head")
}

impl Head {
    /// Before the first record.
    #[must_use]
    pub fn empty() -> Self {
        Self {
            seq: 0,
            segment: 0,
            hash: GENESIS.to_owned(),
        }
    }

    /// Fixed-width text, so that rewriting it in place never leaves a longer old tail.
    #[must_use]
    pub fn encode(&self) -> String {
        format!(
            "{HEAD_MAGIC} seq={:020} segment={:010} hash={}\n",
            self.seq, self.segment, self.hash
        )
    }

    /// `None` when `text` is not a head.
    #[must_use]
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.trim_end_matches('\n').split(' ');
        if parts.next()? != HEAD_MAGIC {
            return None;
        }
        let seq = parts.next()?.strip_prefix("seq=")?.parse().ok()?;
        let segment = parts.next()?.strip_prefix("segment=")?.parse().ok()?;
        let hash = parts.next()?.strip_prefix("hash=")?;
        if parts.next().is_some()
            || hash.len() != 64
            || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return None;
        }
        Some(Self {
            seq,
            segment,
            hash: hash.to_owned(),
        })
    }
}

/// A head file whose text (kept here) is not a ledger head.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a ledger head: `{0}`")]
pub struct NotAHead(pub String);

/// The head of `dir`: `Ok(None)` when there is no head file, `Err` when it cannot be read;
/// `Ok(Some(Err(_)))` when it is not a head.
pub fn read_head(dir: &Path) -> Result<Option<Result<Head, NotAHead>>, IoError> {
    let path = head_path(dir);
    match fs::read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            Ok(Some(Head::decode(&text).ok_or(NotAHead(text))))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(IoError::new("read", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_heads() {
        assert_eq!(segment_name(3), "ledger-000003.jsonl");
        assert_eq!(segment_number("ledger-000003.jsonl"), Some(3));
        assert_eq!(segment_number("ledger-1234567.jsonl"), Some(1_234_567));
        assert_eq!(segment_number("ledger-3.jsonl"), None);
        assert_eq!(segment_number("ledger-00000x.jsonl"), None);
        let head = Head {
            seq: 42,
            segment: 2,
            hash: "ab".repeat(32),
        };
        let text = head.encode();
        assert_eq!(text.len(), Head::empty().encode().len());
        assert_eq!(Head::decode(&text), Some(head));
        assert_eq!(Head::decode("carapace-ledger-head-v1 seq=1"), None);
    }
}
