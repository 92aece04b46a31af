//! Record mode (`carapace run --record`): what a session touched — files by action,
//! executables, addresses and the names they were looked up by — from the kernel's touched
//! events (`carapace_common::SESSION_RECORD`) and the session's Layer 1 tool calls, kept per
//! session in `$CARAPACE_DATA_DIR/record/<session>.jsonl`, and turned on demand into a
//! proposed allow-list rule file (`propose`) for the user to review and save as a profile
//! (`profiles`).
//!
//! The store is append-only JSON lines: a restarted daemon reads a session's file back, and
//! it outlives the session so that `carapace record propose` works after the run. When the
//! session ends its file gets an `ended` line and is synced ([`Recorder::close`]); records of
//! sessions ended more than `record.keep_days` ago are deleted ([`Recorder::prune`]). Each
//! (what, action) is kept once. A session keeps at most [`MAX_TOUCHED`] of them: past that,
//! nothing more is kept and the set is marked truncated (shown by `record show`, and in the
//! proposal's header), so the proposal blocks what was not kept — fail closed, never wider.

pub mod convert;
pub mod profiles;
pub mod propose;

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// Distinct things one session's record keeps.
pub const MAX_TOUCHED: usize = 20_000;

/// The store's directory inside the data directory.
const DIR: &str = "record";

/// What a file was touched for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileAction {
    Read,
    Write,
    Execute,
    Delete,
}

impl FileAction {
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Execute => "execute",
            Self::Delete => "delete",
        }
    }
}

/// One thing a record session touched.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Touched {
    /// A file (or directory) by absolute path.
    File { action: FileAction, path: String },
    /// A connect (or datagram) to an address, with the name the session's resolver handed
    /// it out for, if any.
    Address {
        addr: IpAddr,
        port: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A host a tool call named (Layer 1: `curl`, `WebFetch`…).
    Host {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        port: Option<u16>,
    },
}

impl Touched {
    /// One line for people: `read /home/u/notes.txt`, `connect 10.0.0.5:443 (example.com)`.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::File { action, path } => format!("{} {path}", action.name()),
            Self::Address { addr, port, name } => {
                let at = match addr {
                    IpAddr::V6(v6) => format!("[{v6}]:{port}"),
                    IpAddr::V4(v4) => format!("{v4}:{port}"),
                };
                match name {
                    Some(n) => format!("connect {at} ({n})"),
                    None => format!("connect {at}"),
                }
            }
            Self::Host {
                name,
                port: Some(p),
            } => format!("network {name}:{p}"),
            Self::Host { name, port: None } => format!("network {name}"),
        }
    }
}

/// A line of a session's file: a touched thing, the session's description (first), the
/// mark that the bound was reached, or when the session ended (last).
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Touched(Touched),
    Meta {
        session: SessionMeta,
    },
    Truncated {
        truncated: bool,
    },
    /// Seconds since the Unix epoch. Its write is what dates the file for pruning.
    Ended {
        ended: u64,
    },
}

/// Who and what a record session was, for the proposal's header.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: String,
    pub command: Vec<String>,
    pub owner_uid: u32,
    /// Seconds since the Unix epoch.
    pub started: u64,
}

/// What one session touched.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    pub meta: Option<SessionMeta>,
    pub items: BTreeSet<Touched>,
    /// The bound ([`MAX_TOUCHED`]) was reached: later things were not kept.
    pub truncated: bool,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error("record store {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no record of session {0} (was it run with `carapace run --record`?)")]
    Unknown(String),
    #[error("`{0}` is not a session id")]
    BadId(String),
}

/// The per-session record store.
pub struct Recorder {
    data_dir: PathBuf,
    dir: PathBuf,
    /// Sessions read or written since start: their set, and the file appended to.
    open: Mutex<HashMap<String, (Recorded, Option<File>)>>,
}

impl Recorder {
    /// Opens (creating, mode 0700) `$data_dir/record`.
    pub fn open(data_dir: &Path) -> Result<Self, RecordError> {
        let dir = data_dir.join(DIR);
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(RecordError::Io { path: dir, source }),
        }
        Ok(Self {
            data_dir: data_dir.to_path_buf(),
            dir,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// The data directory the store is in (profiles are saved next to it).
    #[must_use]
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, (Recorded, Option<File>)>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn path_of(&self, id: &str) -> Result<PathBuf, RecordError> {
        // Session ids are `s-<hex>`: anything else must not become a file name.
        if id.is_empty()
            || id.len() > 64
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(RecordError::BadId(id.to_owned()));
        }
        Ok(self.dir.join(format!("{id}.jsonl")))
    }

    /// Starts the record of a session (its file, with `meta` first).
    pub fn start(&self, meta: &SessionMeta) -> Result<(), RecordError> {
        let path = self.path_of(&meta.id)?;
        let mut open = self.lock();
        let mut file = append(&path)?;
        write_line(
            &mut file,
            &path,
            &Line::Meta {
                session: meta.clone(),
            },
        )?;
        let recorded = Recorded {
            meta: Some(meta.clone()),
            ..Recorded::default()
        };
        open.insert(meta.id.clone(), (recorded, Some(file)));
        Ok(())
    }

    /// Whether `id` has a record (started now or by an earlier daemon).
    #[must_use]
    pub fn has(&self, id: &str) -> bool {
        self.lock().contains_key(id) || self.path_of(id).is_ok_and(|p| p.exists())
    }

    /// Adds what session `id` touched; returns how many were new. A session without a
    /// record is left alone (0).
    pub fn note(
        &self,
        id: &str,
        items: impl IntoIterator<Item = Touched>,
    ) -> Result<usize, RecordError> {
        let path = self.path_of(id)?;
        let mut open = self.lock();
        if !open.contains_key(id) {
            if !path.exists() {
                return Ok(0);
            }
            let recorded = read(&path)?;
            open.insert(id.to_owned(), (recorded, None));
        }
        let Some((recorded, file)) = open.get_mut(id) else {
            return Ok(0);
        };
        let mut added = 0;
        for item in items {
            if recorded.items.contains(&item) {
                continue;
            }
            let file = match file {
                Some(f) => f,
                None => file.insert(append(&path)?),
            };
            if recorded.items.len() >= MAX_TOUCHED {
                if !recorded.truncated {
                    recorded.truncated = true;
                    write_line(file, &path, &Line::Truncated { truncated: true })?;
                    tracing::warn!(
                        session = id,
                        "record: {MAX_TOUCHED} things recorded, the rest is not kept (the \
                         proposal will block it)"
                    );
                }
                break;
            }
            write_line(file, &path, &Line::Touched(item.clone()))?;
            recorded.items.insert(item);
            added += 1;
        }
        Ok(added)
    }

    /// What session `id` touched so far.
    pub fn recorded(&self, id: &str) -> Result<Recorded, RecordError> {
        let path = self.path_of(id)?;
        if let Some((recorded, _)) = self.lock().get(id) {
            return Ok(recorded.clone());
        }
        if !path.exists() {
            return Err(RecordError::Unknown(id.to_owned()));
        }
        read(&path)
    }

    /// The sessions with a record on disk, newest first, by the description each file
    /// starts with (what the console lists, ended sessions included). Files that cannot be
    /// read or do not start with one are left out.
    #[must_use]
    pub fn list(&self) -> Vec<SessionMeta> {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<SessionMeta> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
            .filter_map(|e| {
                let mut first = String::new();
                BufReader::new(File::open(e.path()).ok()?)
                    .read_line(&mut first)
                    .ok()?;
                match serde_json::from_str::<Line>(&first).ok()? {
                    Line::Meta { session } => Some(session),
                    _ => None,
                }
            })
            .collect();
        out.sort_by(|a, b| b.started.cmp(&a.started).then_with(|| a.id.cmp(&b.id)));
        out
    }

    /// Ends the record of a session that ended: its set leaves memory, and its file (if it
    /// has one) gets an `ended` line and is synced, so that what the proposal is made from
    /// survives a power loss. The record stays on disk for `record show` and `propose`
    /// until [`Recorder::prune`]. A session without a record is left alone.
    pub fn close(&self, id: &str, ended: u64) -> Result<(), RecordError> {
        let path = self.path_of(id)?;
        // Taken out under the lock, written and synced after it: a sync must not hold up
        // other sessions' notes.
        let file = self.lock().remove(id).and_then(|(_, file)| file);
        let mut file = match file {
            Some(f) => f,
            None if path.exists() => append(&path)?,
            None => return Ok(()),
        };
        write_line(&mut file, &path, &Line::Ended { ended })?;
        file.sync_all()
            .map_err(|source| RecordError::Io { path, source })
    }

    /// Deletes the records of sessions that are not `live` and whose file was last written
    /// (its `ended` line, for a session that ended under a daemon) longer than `keep` ago;
    /// returns their ids. A file whose date cannot be read is kept.
    pub fn prune(
        &self,
        keep: Duration,
        live: impl Fn(&str) -> bool,
    ) -> Result<Vec<String>, RecordError> {
        let io = |source| RecordError::Io {
            path: self.dir.clone(),
            source,
        };
        let mut pruned = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                continue;
            };
            if self.path_of(id).is_err() || live(id) || self.lock().contains_key(id) {
                continue;
            }
            let age = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok());
            if age.is_some_and(|age| age > keep) {
                let path = entry.path();
                fs::remove_file(&path).map_err(|source| RecordError::Io { path, source })?;
                pruned.push(id.to_owned());
            }
        }
        Ok(pruned)
    }
}

fn append(path: &Path) -> Result<File, RecordError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        })
}

fn write_line(file: &mut File, path: &Path, line: &Line) -> Result<(), RecordError> {
    let mut text = serde_json::to_string(line).unwrap_or_default();
    text.push('\n');
    file.write_all(text.as_bytes())
        .map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Reads a session's file back; a line that does not parse (a write cut short by a crash)
/// is skipped.
fn read(path: &Path) -> Result<Recorded, RecordError> {
    let io = |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let mut recorded = Recorded::default();
    for line in BufReader::new(file).lines() {
        let line = line.map_err(io)?;
        match serde_json::from_str::<Line>(&line) {
            Ok(Line::Touched(t)) if recorded.items.len() < MAX_TOUCHED => {
                recorded.items.insert(t);
            }
            Ok(Line::Touched(_) | Line::Truncated { .. }) => recorded.truncated = true,
            Ok(Line::Meta { session }) => recorded.meta = Some(session),
            Ok(Line::Ended { .. }) | Err(_) => {}
        }
    }
    Ok(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(action: FileAction, path: &str) -> Touched {
        Touched::File {
            action,
            path: path.to_owned(),
        }
    }

    fn meta(id: &str) -> SessionMeta {
        SessionMeta {
            id: id.to_owned(),
            command: vec!["sh".into()],
            owner_uid: 1000,
            started: 1,
        }
    }

    #[test]
    fn keeps_each_thing_once_and_reads_it_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recorder::open(dir.path()).unwrap();
        r.start(&meta("s-1")).unwrap();
        let a = file(FileAction::Read, "/home/u/a");
        assert_eq!(r.note("s-1", [a.clone(), a.clone()]).unwrap(), 1);
        assert_eq!(r.note("s-1", [a.clone()]).unwrap(), 0);
        let net = Touched::Address {
            addr: "10.0.0.5".parse().unwrap(),
            port: 443,
            name: Some("example.com".into()),
        };
        r.note("s-1", [net.clone()]).unwrap();
        drop(r);
        let again = Recorder::open(dir.path()).unwrap();
        let rec = again.recorded("s-1").unwrap();
        assert_eq!(rec.items, BTreeSet::from([a, net]));
        assert_eq!(rec.meta, Some(meta("s-1")));
        assert!(!rec.truncated);
        // A restarted daemon appends to the same record.
        let b = file(FileAction::Write, "/home/u/b");
        assert_eq!(again.note("s-1", [b.clone()]).unwrap(), 1);
        assert!(again.recorded("s-1").unwrap().items.contains(&b));
    }

    #[test]
    fn a_session_without_a_record_is_not_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recorder::open(dir.path()).unwrap();
        assert_eq!(r.note("s-2", [file(FileAction::Read, "/x")]).unwrap(), 0);
        assert!(matches!(r.recorded("s-2"), Err(RecordError::Unknown(_))));
        assert!(matches!(
            r.recorded("../etc/passwd"),
            Err(RecordError::BadId(_))
        ));
    }

    #[test]
    fn closing_ends_the_file_and_keeps_the_record_readable() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recorder::open(dir.path()).unwrap();
        r.start(&meta("s-4")).unwrap();
        let a = file(FileAction::Read, "/srv/a");
        r.note("s-4", [a.clone()]).unwrap();
        r.close("s-4", 1234).unwrap();
        assert!(r.lock().is_empty(), "the ended session left memory");
        let text = fs::read_to_string(dir.path().join("record/s-4.jsonl")).unwrap();
        assert_eq!(text.lines().last(), Some(r#"{"ended":1234}"#), "{text}");
        let rec = r.recorded("s-4").unwrap();
        assert_eq!(rec.items, BTreeSet::from([a]));
        assert_eq!(r.list(), [meta("s-4")], "listed after it ended");
        assert_eq!(rec.meta, Some(meta("s-4")));
        // A session that recorded nothing has no file, and gets none.
        r.close("s-5", 1).unwrap();
        assert!(!dir.path().join("record/s-5.jsonl").exists());
        // A daemon that never had the file open (restarted) still ends it.
        let again = Recorder::open(dir.path()).unwrap();
        again.close("s-4", 99).unwrap();
        let text = fs::read_to_string(dir.path().join("record/s-4.jsonl")).unwrap();
        assert_eq!(text.lines().last(), Some(r#"{"ended":99}"#), "{text}");
    }

    #[test]
    fn pruning_deletes_only_old_records_of_sessions_that_ended() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recorder::open(dir.path()).unwrap();
        let day = Duration::from_hours(24);
        let age = |id: &str, by: Duration| {
            let f = File::options()
                .append(true)
                .open(dir.path().join(format!("record/{id}.jsonl")))
                .unwrap();
            f.set_modified(SystemTime::now() - by).unwrap();
        };
        for id in ["s-old", "s-live", "s-new"] {
            r.start(&meta(id)).unwrap();
        }
        r.close("s-old", 1).unwrap();
        r.close("s-new", 1).unwrap();
        age("s-old", 31 * day);
        age("s-new", 29 * day);
        // A live session that touched nothing new for a long time keeps its record.
        age("s-live", 40 * day);
        fs::write(dir.path().join("record/notes.txt"), "x").unwrap();
        let pruned = r.prune(30 * day, |id| id == "s-live").unwrap();
        assert_eq!(pruned, ["s-old"]);
        assert!(matches!(r.recorded("s-old"), Err(RecordError::Unknown(_))));
        assert!(r.recorded("s-new").is_ok());
        assert!(r.recorded("s-live").is_ok());
        assert!(dir.path().join("record/notes.txt").exists());
        // Still held open (a live session the caller forgot to name): kept.
        assert!(r.prune(Duration::ZERO, |_| false).unwrap() == ["s-new"]);
        assert!(r.recorded("s-live").is_ok());
    }

    #[test]
    fn the_bound_truncates_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recorder::open(dir.path()).unwrap();
        r.start(&meta("s-3")).unwrap();
        let many = (0..=MAX_TOUCHED).map(|i| file(FileAction::Read, &format!("/d/{i}")));
        assert_eq!(r.note("s-3", many).unwrap(), MAX_TOUCHED);
        let rec = r.recorded("s-3").unwrap();
        assert!(rec.truncated);
        assert_eq!(rec.items.len(), MAX_TOUCHED);
        drop(r);
        let rec = Recorder::open(dir.path()).unwrap().recorded("s-3").unwrap();
        assert!(rec.truncated, "the mark survives a restart");
        assert_eq!(rec.items.len(), MAX_TOUCHED);
    }
}
