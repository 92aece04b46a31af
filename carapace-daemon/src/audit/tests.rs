//! The ledger against every kind of tampering, crashes and arbitrary file contents.
use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::files::{self, audit_dir};
use super::ledger::Acknowledge;
use super::verify::{verify, Problem};
use super::{Event, Kind, Ledger, Options};

fn event(n: u64) -> Event {
    let mut e = Event::new(Kind::Evaluate);
    e.tool = Some("Bash".into());
    e.decision = Some(
        if n.is_multiple_of(2) {
            "allow"
        } else {
            "block"
        }
        .into(),
    );
    e.detail = Some(format!("call {n}"));
    e
}

/// A ledger with `n` records (segments of `segment_bytes`), closed.
fn ledger(n: u64, segment_bytes: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, _) = Ledger::open(
        dir.path(),
        Options {
            segment_bytes,
            ..Options::default()
        },
    )
    .unwrap();
    for i in 1..=n {
        assert_eq!(ledger.append_blocking(event(i)).unwrap(), i);
    }
    ledger.close();
    dir
}

fn segment(dir: &Path, n: u32) -> PathBuf {
    audit_dir(dir).join(files::segment_name(n))
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn bad(dir: &Path) -> Problem {
    verify(&audit_dir(dir)).expect_err("verify must fail")
}

#[test]
fn an_untouched_ledger_verifies() {
    let dir = ledger(5, u64::MAX);
    let report = verify(&audit_dir(dir.path())).unwrap();
    assert_eq!((report.records, report.segments), (5, 1));
    assert!(report.notes.is_empty(), "{:?}", report.notes);
}

#[test]
fn an_edited_field_is_detected_at_its_line() {
    let dir = ledger(5, u64::MAX);
    let path = segment(dir.path(), 1);
    let mut l = lines(&path);
    l[2] = l[2].replace("\"block\"", "\"allow\"");
    write_lines(&path, &l);
    let p = bad(dir.path());
    assert_eq!((p.file, p.line, p.seq), (path, Some(3), Some(3)));
    assert!(p.what.contains("edited"), "{}", p.what);
}

#[test]
fn a_deleted_middle_record_is_detected() {
    let dir = ledger(5, u64::MAX);
    let path = segment(dir.path(), 1);
    let mut l = lines(&path);
    l.remove(1);
    write_lines(&path, &l);
    let p = bad(dir.path());
    assert_eq!((p.line, p.seq), (Some(2), Some(2)));
    assert!(p.what.contains("missing"), "{}", p.what);
}

#[test]
fn two_swapped_records_are_detected() {
    let dir = ledger(5, u64::MAX);
    let path = segment(dir.path(), 1);
    let mut l = lines(&path);
    l.swap(1, 3);
    write_lines(&path, &l);
    let p = bad(dir.path());
    assert_eq!((p.line, p.seq), (Some(2), Some(2)));
}

#[test]
fn an_inserted_record_is_detected() {
    let dir = ledger(4, u64::MAX);
    let path = segment(dir.path(), 1);
    let mut l = lines(&path);
    let copy = l[1].clone();
    l.insert(2, copy);
    write_lines(&path, &l);
    let p = bad(dir.path());
    assert_eq!((p.line, p.seq), (Some(3), Some(3)));
    assert!(p.what.contains("inserted"), "{}", p.what);
}

#[test]
fn a_truncated_tail_is_detected_by_the_head() {
    let dir = ledger(5, u64::MAX);
    let path = segment(dir.path(), 1);
    let mut l = lines(&path);
    l.truncate(3);
    write_lines(&path, &l);
    let p = bad(dir.path());
    assert_eq!(p.file, files::head_path(&audit_dir(dir.path())));
    assert_eq!(p.seq, Some(4));
    assert!(p.what.contains("records 4..5 were deleted"), "{}", p.what);
    // And the daemon refuses to append to it.
    let err = Ledger::open(dir.path(), Options::default()).err().unwrap();
    assert!(err.to_string().contains("records were deleted"), "{err}");
}

#[test]
fn rotation_chains_across_segments_and_tampering_there_is_found() {
    let dir = ledger(30, 1024);
    let audit = audit_dir(dir.path());
    let report = verify(&audit).unwrap();
    assert_eq!(report.records, 30);
    assert!(report.segments >= 4, "{report:?}");
    for (_, path) in files::segments(&audit).unwrap() {
        assert!(fs::metadata(&path).unwrap().len() <= 1024);
    }
    // The first record of segment 2 chains to the last of segment 1.
    let first2: serde_json::Value =
        serde_json::from_str(&lines(&segment(dir.path(), 2))[0]).unwrap();
    let last1: serde_json::Value =
        serde_json::from_str(lines(&segment(dir.path(), 1)).last().unwrap()).unwrap();
    assert_eq!(first2["prev"], last1["hash"]);

    // A record moved from segment 2 to the end of segment 1.
    let work = tempfile::tempdir().unwrap();
    copy_dir(&audit, &audit_dir(work.path()));
    let (s1, s2) = (segment(work.path(), 1), segment(work.path(), 2));
    let (mut l1, mut l2) = (lines(&s1), lines(&s2));
    l1.push(l2.remove(1));
    write_lines(&s1, &l1);
    write_lines(&s2, &l2);
    assert_eq!(bad(work.path()).file, s1);

    // A whole middle segment deleted.
    let work = tempfile::tempdir().unwrap();
    copy_dir(&audit, &audit_dir(work.path()));
    fs::remove_file(segment(work.path(), 2)).unwrap();
    let p = bad(work.path());
    assert_eq!(p.file, segment(work.path(), 2));
    assert!(p.what.contains("missing"), "{}", p.what);

    // The newest segment deleted: the head points past the end.
    let work = tempfile::tempdir().unwrap();
    copy_dir(&audit, &audit_dir(work.path()));
    let newest = files::segments(&audit_dir(work.path()))
        .unwrap()
        .last()
        .unwrap()
        .1
        .clone();
    fs::remove_file(newest).unwrap();
    assert!(bad(work.path()).what.contains("deleted from the end"));

    // Reopening continues the chain in the newest segment.
    let (ledger, _) = Ledger::open(
        dir.path(),
        Options {
            segment_bytes: 1024,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(ledger.append_blocking(event(31)).unwrap(), 31);
    ledger.close();
    assert_eq!(verify(&audit).unwrap().records, 31);
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn an_edited_head_is_detected() {
    let dir = ledger(3, u64::MAX);
    let head = files::head_path(&audit_dir(dir.path()));
    let text = fs::read_to_string(&head).unwrap();
    let forged = text.replace("seq=00000000000000000003", "seq=00000000000000000002");
    fs::write(&head, forged).unwrap();
    assert!(bad(dir.path()).what.contains("does not match record 2"));
    fs::remove_file(&head).unwrap();
    assert!(bad(dir.path()).what.contains("head file is missing"));
}

#[test]
fn a_torn_last_line_is_noted_then_cut_off_and_recorded_at_the_next_open() {
    let dir = ledger(3, u64::MAX);
    let path = segment(dir.path(), 1);
    let mut text = fs::read(&path).unwrap();
    text.extend_from_slice(b"{\"seq\":4,\"ts\":\"2026");
    fs::write(&path, &text).unwrap();
    let report = verify(&audit_dir(dir.path())).unwrap();
    assert_eq!(report.records, 3);
    assert!(
        report.notes[0].contains("unfinished last line"),
        "{report:?}"
    );

    let (ledger, recovery) = Ledger::open(dir.path(), Options::default()).unwrap();
    assert_eq!(recovery.torn_bytes, 19);
    let seq = ledger
        .append_blocking(super::ledger::opened_event(&recovery))
        .unwrap();
    assert_eq!(seq, 4);
    ledger.close();
    let report = verify(&audit_dir(dir.path())).unwrap();
    assert!(report.notes.is_empty(), "{report:?}");
    assert!(lines(&path)[3].contains("cut off an unfinished last line of 19 bytes"));
}

#[test]
fn concurrent_appends_get_distinct_consecutive_seqs() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, _) = Ledger::open(dir.path(), Options::default()).unwrap();
    let ledger = std::sync::Arc::new(ledger);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let ledger = std::sync::Arc::clone(&ledger);
            std::thread::spawn(move || {
                (0..25)
                    .map(|i| ledger.append_blocking(event(t * 100 + i)).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
    assert_eq!(
        ledger
            .stats()
            .last_seq
            .load(std::sync::atomic::Ordering::Relaxed),
        200
    );
    ledger.close();
    assert_eq!(verify(&audit_dir(dir.path())).unwrap().records, 200);
}

#[test]
fn a_failed_write_is_refused_and_the_chain_stays_whole() {
    let dir = ledger(2, u64::MAX);
    let path = segment(dir.path(), 1);
    let before = fs::read(&path).unwrap();
    let (ledger, _) = Ledger::open(
        dir.path(),
        Options {
            segment_bytes: 1,
            ..Options::default()
        },
    )
    .unwrap();
    // The next record starts segment 2, which points at a device that is always full.
    std::os::unix::fs::symlink("/dev/full", segment(dir.path(), 2)).unwrap();
    let err = ledger.append_blocking(event(3)).unwrap_err();
    assert!(
        err.to_string().contains("cannot write the audit ledger"),
        "{err}"
    );
    assert_eq!(fs::read(&path).unwrap(), before, "segment 1 is as it was");
    assert_eq!(
        ledger
            .stats()
            .failures
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    // The failed segment was removed; the next record gets the seq the failed one would have.
    assert_eq!(ledger.append_blocking(event(3)).unwrap(), 3);
    ledger.close();
    let report = verify(&audit_dir(dir.path())).unwrap();
    assert_eq!((report.records, report.segments), (3, 2));
}

#[test]
fn an_acknowledged_record_is_in_its_segment_whichever_the_acknowledgement() {
    for acknowledge in [Acknowledge::Written, Acknowledge::Synced] {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            acknowledge,
            ..Options::default()
        };
        let (ledger, _) = Ledger::open(dir.path(), options).unwrap();
        for i in 1..=5 {
            assert_eq!(ledger.append_blocking(event(i)).unwrap(), i);
            // What a crash of carapaced right after the answer leaves (the page cache keeps
            // a written record): the record is in the segment already.
            let on_disk = lines(&segment(dir.path(), 1));
            assert_eq!(on_disk.len() as u64, i, "{acknowledge:?}");
            assert!(on_disk[i as usize - 1].contains(&format!("call {i}")));
        }
        ledger.close();
        let report = verify(&audit_dir(dir.path())).unwrap();
        assert_eq!(report.records, 5, "{acknowledge:?}");
        // Closed, the head names the last record in both modes.
        let (reopened, recovery) = Ledger::open(dir.path(), options).unwrap();
        assert_eq!((recovery.head.seq, recovery.beyond_head), (5, 0));
        reopened.close();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn verify_never_panics_on_arbitrary_files(
        segment_bytes in proptest::collection::vec(any::<u8>(), 0..600),
        head in proptest::collection::vec(any::<u8>(), 0..120),
        keep_head in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let audit = audit_dir(dir.path());
        fs::create_dir_all(&audit).unwrap();
        fs::write(audit.join(files::segment_name(1)), &segment_bytes).unwrap();
        if keep_head {
            fs::write(files::head_path(&audit), &head).unwrap();
        }
        let _ = verify(&audit);
        let _ = Ledger::open(dir.path(), Options::default()).map(|(l, _)| l.close());
    }

    #[test]
    fn verify_never_panics_on_mangled_real_ledgers(
        cut in 0usize..2000, flip in 0usize..2000, byte in any::<u8>()
    ) {
        let dir = ledger(6, 700);
        let path = segment(dir.path(), 1);
        let mut text = fs::read(&path).unwrap();
        if !text.is_empty() {
            let at = flip % text.len();
            text[at] = byte;
            text.truncate(cut.min(text.len()));
        }
        fs::write(&path, &text).unwrap();
        let _ = verify(&audit_dir(dir.path()));
    }
}

#[test]
fn acknowledged_records_are_published_to_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let (ledger, _) = Ledger::open(dir.path(), Options::default()).unwrap();
    // Before anyone subscribes, nothing is kept for later subscribers.
    ledger.append_blocking(event(1)).unwrap();
    let mut rx = ledger.subscribe();
    let first = ledger.append_blocking(event(2)).unwrap();
    let second = ledger.append_blocking(event(3)).unwrap();
    let got: Vec<u64> = (0..2).map(|_| rx.blocking_recv().unwrap().seq).collect();
    assert_eq!(got, [first, second]);
    assert!(rx.try_recv().is_err(), "nothing else");
    ledger.close();
}
