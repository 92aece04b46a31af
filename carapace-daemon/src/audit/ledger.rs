//! The writer: one thread owns the files; callers hand it an [`Event`] and wait until the
//! record is written (or, with [`Acknowledge::Synced`], synced), group commit: whatever
//! arrived while the previous batch was being written and synced goes out in the next write
//! + `fdatasync`.
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};

use tokio::sync::{broadcast, oneshot};

use super::files::{self, Head};
use super::record::{self, Event, Kind, Record};
use crate::io_error::IoError;

/// Records written in one commit at most (bounds the latency of the first of them).
const MAX_BATCH: usize = 512;

/// Records kept for a slow subscriber (the console) before it starts missing some.
const PUBLISH_BUFFER: usize = 1024;

/// Segment size after which a new segment starts.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub segment_bytes: u64,
    pub acknowledge: Acknowledge,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            acknowledge: Acknowledge::default(),
        }
    }
}

/// When a caller may give its decision (config.yaml's `audit:` section, read with the rest).
pub use crate::config::Acknowledge;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(
        "the audit ledger {}, line {line}, is damaged ({what}); run `carapace audit verify` to \
         see where, then move {} aside to start a new ledger",
        file.display(), dir.display()
    )]
    Damaged {
        dir: PathBuf,
        file: PathBuf,
        line: usize,
        what: String,
    },
    #[error(
        "the audit ledger in {} ends at record {last} but its head says {head} were \
         acknowledged: records were deleted. Run `carapace audit verify`, then move the \
         directory aside to start a new ledger", dir.display()
    )]
    Truncated { dir: PathBuf, last: u64, head: u64 },
    /// Shared (`Arc`) by every caller of the batch the writer failed to write.
    #[error("cannot write the audit ledger: {0}")]
    Write(#[source] Arc<AuditError>),
    #[error("an earlier write failed and could not be undone; restart carapaced")]
    Broken,
    #[error("cannot encode a record: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("the audit ledger is closed")]
    Closed,
}

/// Counters for `carapace status`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Seq of the last record on disk.
    pub last_seq: AtomicU64,
    /// Appends that failed (and whose decisions were therefore refused).
    pub failures: AtomicU64,
    /// The writer gave up after a failure it could not undo.
    pub broken: AtomicBool,
}

struct Job {
    event: Event,
    done: oneshot::Sender<Result<u64, Arc<AuditError>>>,
}

/// The append-only ledger of one data directory.
pub struct Ledger {
    dir: PathBuf,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    stats: Arc<Stats>,
    /// Every record once it is acknowledged, for live views (see [`Ledger::subscribe`]).
    published: broadcast::Sender<Arc<Record>>,
}

/// What [`Ledger::open`] found.
#[derive(Clone, Debug)]
pub struct Recovery {
    /// Bytes of an unfinished last line (a write cut short by a crash, never acknowledged)
    /// that were cut off.
    pub torn_bytes: u64,
    /// Records found on disk after the head (written, maybe not acknowledged, before a crash).
    pub beyond_head: u64,
    /// The last record on disk when the ledger was opened.
    pub head: Head,
}

impl Ledger {
    /// Opens (or creates) the ledger under `data_dir/audit`, checks its last record and head,
    /// and starts the writer. Refuses a ledger whose end is damaged or was cut off.
    pub fn open(data_dir: &Path, options: Options) -> Result<(Self, Recovery), AuditError> {
        let dir = files::audit_dir(data_dir);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(IoError::at("create directory", &dir))?;
        let (mut writer, mut recovery) = Writer::recover(&dir, options)?;
        recovery.head = writer.head.clone();
        let (published, _) = broadcast::channel(PUBLISH_BUFFER);
        writer.publish = Some(published.clone());
        let stats = Arc::new(Stats::default());
        stats.last_seq.store(writer.head.seq, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let thread_stats = Arc::clone(&stats);
        let thread = std::thread::Builder::new()
            .name("audit-ledger".into())
            .spawn(move || writer.run(&rx, &thread_stats))
            .map_err(IoError::at("start the writer thread of", &dir))?;
        Ok((
            Self {
                dir,
                jobs: Mutex::new(Some(tx)),
                thread: Mutex::new(Some(thread)),
                stats,
                published,
            },
            recovery,
        ))
    }

    /// The ledger's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    #[must_use]
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Every record from now on, right after its caller got the acknowledgement. The
    /// writer thread copies records only while someone subscribes, so the decisions'
    /// path pays nothing for a view nobody looks at; a subscriber that falls more than
    /// [`PUBLISH_BUFFER`] records behind gets `Lagged` and misses those.
    #[must_use]
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Record>> {
        self.published.subscribe()
    }

    fn submit(
        &self,
        event: Event,
    ) -> Result<oneshot::Receiver<Result<u64, Arc<AuditError>>>, AuditError> {
        let (done, rx) = oneshot::channel();
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.as_ref()
            .ok_or(AuditError::Closed)?
            .send(Job { event, done })
            .map_err(|_| AuditError::Closed)?;
        Ok(rx)
    }

    /// Queues `event` now (so records keep the order of the calls) and returns a future
    /// that resolves like [`Ledger::append`].
    pub fn append_queued(
        &self,
        event: Event,
    ) -> impl std::future::Future<Output = Result<u64, AuditError>> + Send + 'static {
        let rx = self.submit(event);
        async move {
            rx?.await
                .map_err(|_| AuditError::Closed)?
                .map_err(AuditError::Write)
        }
    }

    /// Appends `event` and returns its seq once it is on disk (written and synced).
    pub async fn append(&self, event: Event) -> Result<u64, AuditError> {
        let rx = self.submit(event)?;
        rx.await
            .map_err(|_| AuditError::Closed)?
            .map_err(AuditError::Write)
    }

    /// [`Ledger::append`] for threads outside the async runtime.
    pub fn append_blocking(&self, event: Event) -> Result<u64, AuditError> {
        let rx = self.submit(event)?;
        rx.blocking_recv()
            .map_err(|_| AuditError::Closed)?
            .map_err(AuditError::Write)
    }

    /// Stops the writer after it has written everything already submitted.
    pub fn close(&self) {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = t.join();
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    options: Options,
    /// The segment being appended to (`None` before the first record).
    file: Option<(u32, File, u64)>,
    /// Seq and hash of the last record written, and its segment.
    head: Head,
    head_file: File,
    /// A failed write could not be undone: nothing more may be appended after a record
    /// that may be half on disk.
    broken: bool,
    /// Head and segment length before the commit being synced (what an undo restores).
    synced_before: (Head, Option<(u32, u64)>),
    /// Where acknowledged records go for live views.
    publish: Option<broadcast::Sender<Arc<Record>>>,
    /// Records of the commit in flight, kept only while someone subscribes.
    unpublished: Vec<Record>,
}

/// Answers every caller of a batch: record `first + i` for the i-th, or the error.
fn acknowledge(batch: Vec<Job>, result: &Result<u64, Arc<AuditError>>) {
    for (i, job) in batch.into_iter().enumerate() {
        let _ = job.done.send(
            result
                .as_ref()
                .map(|first| first + i as u64)
                .map_err(Arc::clone),
        );
    }
}

fn sync_dir(dir: &Path) -> Result<(), IoError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(IoError::at("sync directory", dir))
}

fn open_append(path: &Path) -> Result<File, IoError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(IoError::at("open", path))
}

impl Writer {
    /// Finds the last record, cuts off a torn last line, checks the head.
    fn recover(dir: &Path, options: Options) -> Result<(Self, Recovery), AuditError> {
        let mut recovery = Recovery {
            torn_bytes: 0,
            beyond_head: 0,
            head: Head::empty(),
        };
        let segments = files::segments(dir)?;
        let mut last: Option<(u32, Head, u64)> = None;
        // The newest non-empty segment holds the last record; an empty one after it is a
        // rotation that a crash interrupted.
        for (n, path) in segments.iter().rev() {
            let lines = files::lines(path)?;
            let mut good_len: u64 = lines
                .iter()
                .map(|l| l.bytes.len() as u64 + u64::from(l.complete))
                .sum();
            let mut complete = lines.as_slice();
            if let Some((tail, rest)) = lines.split_last().filter(|(l, _)| !l.complete) {
                good_len -= tail.bytes.len() as u64;
                recovery.torn_bytes = tail.bytes.len() as u64;
                complete = rest;
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(IoError::at("open", path))?;
                f.set_len(good_len)
                    .and_then(|()| f.sync_all())
                    .map_err(IoError::at("cut the torn last line of", path))?;
                tracing::warn!(
                    file = %path.display(),
                    bytes = recovery.torn_bytes,
                    "cut off an unfinished last ledger line (a crash during a write; it was never acknowledged)"
                );
            }
            let Some(line) = complete.last() else {
                continue;
            };
            let parsed = record::decode(&line.bytes).map_err(|e| AuditError::Damaged {
                dir: dir.to_owned(),
                file: path.clone(),
                line: line.number,
                what: e.to_string(),
            })?;
            last = Some((
                *n,
                Head {
                    seq: parsed.record.seq,
                    segment: *n,
                    hash: parsed.hash,
                },
                good_len,
            ));
            break;
        }
        let (file, head) = match last {
            Some((n, head, len)) => {
                let path = dir.join(files::segment_name(n));
                (Some((n, open_append(&path)?, len)), head)
            }
            None => (None, Head::empty()),
        };
        recovery.beyond_head = check_anchor(dir, &head)?;
        let head_path = files::head_path(dir);
        let head_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(&head_path)
            .map_err(IoError::at("open", &head_path))?;
        let mut writer = Self {
            dir: dir.to_owned(),
            options,
            synced_before: (head.clone(), file.as_ref().map(|(n, _, len)| (*n, *len))),
            file,
            head,
            head_file,
            broken: false,
            publish: None,
            unpublished: Vec::new(),
        };
        writer
            .write_head(true)
            .map_err(|e| AuditError::Write(Arc::new(e.into())))?;
        sync_dir(dir)?;
        Ok((writer, recovery))
    }

    /// Rewrites the head in place. After a commit it is not synced: the records it names
    /// are already on disk, so it can only lag behind them (after a power loss), never
    /// point past them — and one `fdatasync` per commit instead of two halves the cost of
    /// every decision. It survives a crash of the daemon itself (the page cache does).
    fn write_head(&mut self, sync: bool) -> Result<(), IoError> {
        let path = files::head_path(&self.dir);
        let text = self.head.encode();
        self.head_file
            .write_all_at(text.as_bytes(), 0)
            .and_then(|()| self.head_file.set_len(text.len() as u64))
            .and_then(|()| {
                if sync {
                    self.head_file.sync_data()
                } else {
                    Ok(())
                }
            })
            .map_err(IoError::at("write", &path))
    }

    /// Starts segment `n` (empty) and makes its directory entry durable.
    fn start_segment(&mut self, n: u32) -> Result<(), IoError> {
        let path = self.dir.join(files::segment_name(n));
        let file = open_append(&path)?;
        sync_dir(&self.dir)?;
        self.file = Some((n, file, 0));
        Ok(())
    }

    fn run(mut self, jobs: &mpsc::Receiver<Job>, stats: &Stats) {
        while let Ok(first) = jobs.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            let events = batch.iter().map(|j| &j.event);
            let result = if self.broken {
                Err(Arc::new(AuditError::Broken))
            } else {
                let written = self.commit(events);
                match (written, self.options.acknowledge) {
                    (Ok(first), Acknowledge::Written) => {
                        // Counted before the callers hear of it: a caller that reads the
                        // stats after its answer sees its own record.
                        stats.last_seq.store(self.head.seq, Ordering::Relaxed);
                        acknowledge(batch, &Ok(first));
                        self.publish();
                        self.sync_acknowledged(stats);
                        continue;
                    }
                    (Ok(first), Acknowledge::Synced) => self.sync_or_undo(first),
                    (Err(e), _) => Err(e),
                }
                .map_err(|e| {
                    tracing::error!("audit ledger: {e}");
                    Arc::new(e)
                })
            };
            if result.is_ok() {
                stats.last_seq.store(self.head.seq, Ordering::Relaxed);
            } else {
                stats
                    .failures
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                stats.broken.store(self.broken, Ordering::Relaxed);
            }
            acknowledge(batch, &result);
            if result.is_ok() {
                self.publish();
            } else {
                self.unpublished.clear();
            }
        }
        tracing::info!(
            seq = self.head.seq,
            hash = %self.head.hash,
            "audit ledger closed; its head"
        );
    }

    /// Sends the records of the last commit to the subscribers (after their callers got
    /// the answer, so a slow view never delays a decision).
    fn publish(&mut self) {
        let Some(tx) = &self.publish else {
            return;
        };
        for record in self.unpublished.drain(..) {
            // No subscriber left in between: nothing to do.
            let _ = tx.send(Arc::new(record));
        }
    }

    /// Writes the events as consecutive records (not synced yet); returns the first seq. On
    /// failure the segment is cut back to where it was, so the chain stays whole.
    fn commit<'a>(&mut self, events: impl Iterator<Item = &'a Event>) -> Result<u64, AuditError> {
        self.synced_before = (
            self.head.clone(),
            self.file.as_ref().map(|(n, _, len)| (*n, *len)),
        );
        let result = self.write_all(events);
        if result.is_err() {
            self.undo(self.synced_before.clone());
        }
        result
    }

    /// Syncs what [`Self::commit`] wrote, then points the head at it; a failed sync cuts
    /// the segment back (nothing of it was acknowledged yet).
    fn sync_or_undo(&mut self, first: u64) -> Result<u64, AuditError> {
        match self.sync().and_then(|()| self.write_head(false)) {
            Ok(()) => Ok(first),
            Err(e) => {
                self.undo(self.synced_before.clone());
                Err(e.into())
            }
        }
    }

    /// Syncs records already acknowledged. They cannot be taken back, so a failed sync
    /// (whose pages the kernel may have dropped) stops the ledger: every later decision is
    /// refused until carapaced restarts and checks the files.
    fn sync_acknowledged(&mut self, stats: &Stats) {
        if let Err(e) = self.sync().and_then(|()| self.write_head(false)) {
            tracing::error!(
                "audit ledger: cannot sync records already acknowledged ({e}); every further decision is refused until carapaced restarts"
            );
            self.broken = true;
            stats.broken.store(true, Ordering::Relaxed);
        }
    }

    /// `fdatasync` of the segment being appended to.
    fn sync(&mut self) -> Result<(), IoError> {
        match &self.file {
            Some((n, file, _)) => file
                .sync_data()
                .map_err(IoError::at("sync", &self.dir.join(files::segment_name(*n)))),
            None => Ok(()),
        }
    }

    fn write_all<'a>(
        &mut self,
        events: impl Iterator<Item = &'a Event>,
    ) -> Result<u64, AuditError> {
        let first = self.head.seq + 1;
        let mut buf = String::new();
        let watched = self
            .publish
            .as_ref()
            .is_some_and(|tx| tx.receiver_count() > 0);
        self.unpublished.clear();
        for event in events {
            let record = Record {
                seq: self.head.seq + 1,
                ts: record::now_rfc3339(),
                event: event.clone(),
                prev: self.head.hash.clone(),
            };
            let (line, hash) = record.encode().map_err(AuditError::Encode)?;
            // A full segment (never an empty one: a record larger than the limit gets a
            // segment of its own) starts the next.
            let rotate = self.file.as_ref().is_none_or(|(_, _, len)| {
                let used = len + buf.len() as u64;
                used > 0 && used + line.len() as u64 > self.options.segment_bytes
            });
            if rotate {
                // The segment being left is synced now: only the current one is later.
                self.flush(&buf)?;
                self.sync()?;
                buf.clear();
                let next = self.file.as_ref().map_or(1, |(n, _, _)| n + 1);
                self.start_segment(next)?;
            }
            buf.push_str(&line);
            self.head.seq = record.seq;
            self.head.hash = hash;
            self.head.segment = self.file.as_ref().map_or(0, |(n, _, _)| *n);
            if watched {
                self.unpublished.push(record);
            }
        }
        self.flush(&buf)?;
        Ok(first)
    }

    /// Appends `buf` to the current segment.
    fn flush(&mut self, buf: &str) -> Result<(), IoError> {
        if buf.is_empty() {
            return Ok(());
        }
        let Some((n, file, len)) = self.file.as_mut() else {
            return Ok(());
        };
        let path = self.dir.join(files::segment_name(*n));
        file.write_all(buf.as_bytes())
            .map_err(IoError::at("append to", &path))?;
        *len += buf.len() as u64;
        Ok(())
    }

    /// Puts the files back as they were before a failed commit (or marks the writer broken).
    fn undo(&mut self, (head, file): (Head, Option<(u32, u64)>)) {
        self.head = head;
        let restored = (|| -> io::Result<()> {
            // Segments started during the failed commit go away.
            let keep = file.map_or(0, |(n, _)| n);
            if let Some((n, _, _)) = &self.file {
                for extra in (keep + 1)..=*n {
                    let _ = fs::remove_file(self.dir.join(files::segment_name(extra)));
                }
            }
            match file {
                Some((n, len)) => {
                    let path = self.dir.join(files::segment_name(n));
                    let mut f = open_append(&path).map_err(|e| e.source)?;
                    f.set_len(len)?;
                    f.sync_all()?;
                    f.seek(SeekFrom::End(0))?;
                    self.file = Some((n, f, len));
                }
                None => self.file = None,
            }
            self.write_head(true).map_err(|e| e.source)
        })();
        if let Err(e) = restored {
            tracing::error!(
                "audit ledger: cannot undo a failed write ({e}); every further decision is refused until carapaced restarts"
            );
            self.broken = true;
        }
    }
}

/// Compares the head file with the last record found: how many records lie beyond the
/// head, or why the ledger must not be appended to.
fn check_anchor(dir: &Path, head: &Head) -> Result<u64, AuditError> {
    let damaged = |what: &str| AuditError::Damaged {
        dir: dir.to_owned(),
        file: files::head_path(dir),
        line: 1,
        what: what.to_owned(),
    };
    match files::read_head(dir)? {
        Some(Ok(anchor)) if anchor.seq > head.seq => Err(AuditError::Truncated {
            dir: dir.to_owned(),
            last: head.seq,
            head: anchor.seq,
        }),
        Some(Ok(anchor)) => Ok(head.seq - anchor.seq),
        Some(Err(_)) => Err(damaged("the head file is not a ledger head")),
        None if head.seq > 0 => Err(damaged("the head file is missing")),
        None => Ok(0),
    }
}

/// The event written when the daemon opens the ledger.
#[must_use]
pub fn opened_event(recovery: &Recovery) -> Event {
    use std::fmt::Write as _;
    let mut event = Event::new(Kind::LedgerOpened);
    let mut detail = format!("carapaced {}", env!("CARGO_PKG_VERSION"));
    if recovery.torn_bytes > 0 {
        let _ = write!(
            detail,
            "; cut off an unfinished last line of {} bytes (a crash during a write, never acknowledged)",
            recovery.torn_bytes
        );
    }
    if recovery.beyond_head > 0 {
        let _ = write!(
            detail,
            "; {} records were on disk after the head (written just before a crash)",
            recovery.beyond_head
        );
    }
    event.detail = Some(detail);
    event
}
