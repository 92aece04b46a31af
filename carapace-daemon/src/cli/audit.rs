//! `carapace audit verify` and `carapace audit tail`: read the ledger files directly (as
//! root: the ledger directory is 0700), so they work whether or not the daemon runs.
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;

use carapace::api::proto::StatusReply;
use carapace::audit::files::{self, audit_dir};
use carapace::audit::record::{self, Record};
use carapace::audit::verify::verify;
use carapace::paths::DEFAULT_DATA_DIR;

/// How often `tail --follow` looks for new records.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Debug, clap::Args)]
#[command(after_help = "\
The ledger lives in $CARAPACE_DATA_DIR/audit/ (default /var/lib/carapace/audit), readable
by root only; run these with sudo.

Examples:
  sudo carapace audit verify
  sudo carapace audit tail -n 50
  sudo carapace audit tail --follow --session 4f2c…
  sudo carapace audit tail --json | jq 'select(.decision == \"block\")'")]
pub struct AuditArgs {
    /// The daemon's data directory
    #[arg(long, global = true, value_name = "DIR", env = "CARAPACE_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum AuditCommand {
    /// Check that no record was edited, deleted, inserted or reordered
    ///
    /// Walks every segment from the first record, checking each record's hash, its seq and
    /// its link to the one before, then the head that anchors the end. Prints the first bad
    /// file, line and seq and exits 1; exits 0 with the record count and the last hash
    /// (keep that hash elsewhere: a rewrite of the whole chain by root changes it).
    Verify,
    /// Print the latest records (and, with --follow, new ones as they are written)
    Tail(TailArgs),
}

#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// How many of the latest records to print first
    #[arg(short = 'n', long, default_value_t = 20, value_name = "N")]
    pub lines: usize,
    /// Keep printing records as they are appended
    #[arg(short, long)]
    pub follow: bool,
    /// Only the records of this Carapace session
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Print the records as stored (one JSON object per line)
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: AuditArgs) -> anyhow::Result<u8> {
    let dir = audit_dir(&args.data_dir);
    match args.command {
        AuditCommand::Verify => Ok(verify_command(&dir)),
        AuditCommand::Tail(tail) => tail_command(&dir, &tail).await,
    }
}

/// How often `verify` looks again when it finds what a live daemon leaves for a moment:
/// a record written but the head not yet pointed at it, or a line half written.
const SETTLE_TRIES: u32 = 20;
const SETTLE_PAUSE: Duration = Duration::from_millis(50);

fn verify_command(dir: &Path) -> u8 {
    let mut result = verify(dir);
    for _ in 1..SETTLE_TRIES {
        match &result {
            Ok(report) if !report.notes.is_empty() => {
                std::thread::sleep(SETTLE_PAUSE);
                result = verify(dir);
            }
            _ => break,
        }
    }
    match result {
        Ok(report) => {
            for note in &report.notes {
                println!("note: {note}");
            }
            println!(
                "ok: {} records in {} segment(s) in {}; last hash {}",
                report.records,
                report.segments,
                dir.display(),
                report.last_hash
            );
            0
        }
        Err(p) => {
            let seq = p.seq.map(|s| format!(" (record {s})")).unwrap_or_default();
            eprintln!("carapace: audit ledger verification FAILED{seq}: {p}");
            1
        }
    }
}

/// One record as a line of text.
#[must_use]
pub fn human(r: &Record) -> String {
    let e = &r.event;
    let kind = serde_json::to_value(e.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut line = format!("{} #{} {kind}", r.ts, r.seq);
    let mut push = |s: String| {
        line.push(' ');
        line.push_str(&s);
    };
    if let Some(d) = &e.decision {
        push(d.clone());
    }
    if let Some(l) = &e.layer {
        push(format!("layer={l}"));
    }
    if let Some(s) = &e.session {
        push(format!("session={s}"));
    }
    if let Some(a) = &e.agent {
        push(if a.command.is_empty() {
            format!("pid={}", a.pid)
        } else {
            format!("pid={} ({})", a.pid, a.command)
        });
    }
    if let Some(t) = &e.tool {
        push(format!("tool={t}"));
    }
    if !e.rules.is_empty() {
        let rules: Vec<String> = e
            .rules
            .iter()
            .map(|r| {
                if r.matched.is_empty() {
                    r.id.clone()
                } else {
                    format!("{} [{}]", r.id, r.matched)
                }
            })
            .collect();
        push(format!("rules={}", rules.join(", ")));
    }
    if let Some(err) = &e.error {
        push(format!("error={err}"));
    }
    if let Some(us) = e.elapsed_us {
        push(format!("{us}µs"));
    }
    if let Some(p) = &e.purpose {
        push(format!("purpose={p:?}"));
    }
    if let Some(d) = &e.detail {
        push(format!("— {d}"));
    }
    line
}

fn wanted(r: &Record, session: Option<&str>) -> bool {
    session.is_none_or(|s| r.event.session.as_deref() == Some(s))
}

fn print(line: &[u8], args: &TailArgs) {
    match record::decode(line) {
        Ok(p) if wanted(&p.record, args.session.as_deref()) => {
            if args.json {
                println!("{}", String::from_utf8_lossy(line));
            } else {
                println!("{}", human(&p.record));
            }
        }
        Ok(_) => {}
        Err(e) => eprintln!("carapace: skipping a bad ledger line: {e}"),
    }
}

async fn tail_command(dir: &Path, args: &TailArgs) -> anyhow::Result<u8> {
    let segments = files::segments(dir)?;
    if segments.is_empty() && !dir.exists() {
        anyhow::bail!(
            "no audit ledger in {} (is --data-dir the daemon's data directory? run as root)",
            dir.display()
        );
    }
    // The newest records first, until N of the wanted ones are found.
    let mut latest: Vec<Vec<u8>> = Vec::new();
    'segments: for (_, path) in segments.iter().rev() {
        let lines = files::lines(path)?;
        for line in lines.into_iter().rev().filter(|l| l.complete) {
            let keep = record::decode(&line.bytes)
                .is_ok_and(|p| wanted(&p.record, args.session.as_deref()));
            if keep {
                if latest.len() == args.lines {
                    break 'segments;
                }
                latest.push(line.bytes);
            }
        }
    }
    for line in latest.iter().rev() {
        print(line, args);
    }
    if !args.follow {
        return Ok(0);
    }
    let mut cursor = match segments.last() {
        Some((n, path)) => Cursor {
            segment: *n,
            offset: std::fs::metadata(path).map_or(0, |m| m.len()),
            pending: Vec::new(),
        },
        None => Cursor {
            segment: 1,
            offset: 0,
            pending: Vec::new(),
        },
    };
    loop {
        for line in cursor.poll(dir)? {
            print(&line, args);
        }
        tokio::time::sleep(FOLLOW_INTERVAL).await;
    }
}

/// Where `tail --follow` has read up to.
struct Cursor {
    segment: u32,
    offset: u64,
    /// A line read in part (its writer had not finished it).
    pending: Vec<u8>,
}

impl Cursor {
    /// The complete lines appended since the last poll, moving on to newer segments.
    fn poll(&mut self, dir: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        loop {
            let path = dir.join(files::segment_name(self.segment));
            if let Ok(mut file) = std::fs::File::open(&path) {
                file.seek(SeekFrom::Start(self.offset))
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                self.offset += bytes.len() as u64;
                self.pending.extend_from_slice(&bytes);
                while let Some(at) = self.pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = self.pending.drain(..=at).collect();
                    out.push(line[..line.len() - 1].to_vec());
                }
            }
            let next = dir.join(files::segment_name(self.segment + 1));
            if !next.exists() {
                return Ok(out);
            }
            self.segment += 1;
            self.offset = 0;
            self.pending.clear();
        }
    }
}

/// The `carapace status` lines about Landlock, layers and the ledger.
#[must_use]
pub fn status_lines(s: &StatusReply) -> Vec<String> {
    let per = |map: Vec<(String, u64)>| {
        let mut map = map;
        let order = |k: &str| match k {
            "history" => 0,
            "tool-call" => 1,
            "kernel" => 2,
            _ => 3,
        };
        map.sort_by_key(|(k, _)| (order(k), k.clone()));
        map.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let landlock = if s.landlock_abi > 0 {
        format!("landlock: ABI {}", s.landlock_abi)
    } else {
        "landlock: unavailable".to_owned()
    };
    vec![
        landlock,
        format!(
            "rules per layer: {}",
            per(s
                .rules_per_layer
                .iter()
                .map(|(k, v)| (k.clone(), u64::from(*v)))
                .collect())
        ),
        format!(
            "denials since start: {}",
            per(s
                .denials_per_layer
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect())
        ),
        format!(
            "audit ledger: {} records in {}{}",
            s.ledger_records,
            s.ledger_dir,
            if s.ledger_failures > 0 {
                format!(
                    "; {} writes FAILED (those decisions were refused)",
                    s.ledger_failures
                )
            } else {
                String::new()
            }
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace::audit::{Event, Kind, Ledger, Options, RuleRef};

    #[test]
    fn follow_reads_complete_lines_across_segments() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, _) = Ledger::open(
            dir.path(),
            Options {
                segment_bytes: 600,
                ..Options::default()
            },
        )
        .unwrap();
        let audit = audit_dir(dir.path());
        let mut cursor = Cursor {
            segment: 1,
            offset: 0,
            pending: Vec::new(),
        };
        let mut seen = Vec::new();
        for i in 0..12 {
            let mut e = Event::new(Kind::Evaluate);
            e.rules = vec![RuleRef {
                id: format!("rule-{i}"),
                mode: "block".into(),
                matched: String::new(),
            }];
            ledger.append_blocking(e).unwrap();
            if i % 3 == 0 {
                seen.extend(cursor.poll(&audit).unwrap());
            }
        }
        seen.extend(cursor.poll(&audit).unwrap());
        let seqs: Vec<u64> = seen
            .iter()
            .map(|l| record::decode(l).unwrap().record.seq)
            .collect();
        assert_eq!(seqs, (1..=12).collect::<Vec<_>>());
        assert!(cursor.segment > 1, "the ledger rotated");
        ledger.close();
    }

    #[test]
    fn human_lines_say_what_happened() {
        let mut e = Event::new(Kind::Evaluate);
        e.decision = Some("block".into());
        e.layer = Some("tool-call".into());
        e.tool = Some("Read".into());
        e.rules = vec![RuleRef {
            id: "ssh-private-keys".into(),
            mode: "block".into(),
            matched: "read /home/u/.ssh/id_rsa".into(),
        }];
        let r = Record {
            seq: 3,
            ts: record::rfc3339(0, 0),
            event: e,
            prev: record::GENESIS.into(),
        };
        assert_eq!(
            human(&r),
            "1970-01-01T00:00:00.000000Z #3 evaluate block layer=tool-call tool=Read \
             rules=ssh-private-keys [read /home/u/.ssh/id_rsa]"
        );
    }
}
