//! Record sessions (`carapace run --record`, issue 20 item 5) on the host, where the kernel
//! layer is unavailable: the session's Layer 1 tool calls that run are recorded; the record
//! survives a daemon restart; the proposal compiles and is saved as a profile with its
//! header, never over an existing one without `--force`; an agent inside a session
//! cannot save one; a session's record is closed when it ends, and deleted
//! `record.keep_days` later. The kernel's side is in tests/vm/record.rs.
use std::path::Path;

use carapace_tests::{text, Daemon};

use super::{carapace, daemon, setup, CARAPACE, CARAPACED};

const READ: &str = r#"{"tool":"Read","input":{"file_path":"/srv/rec-host/notes.txt"}}"#;
const WRITE: &str =
    r#"{"tool":"Write","input":{"file_path":"/srv/rec-host/out.txt","content":"x"}}"#;
const FETCH: &str = r#"{"tool":"WebFetch","input":{"url":"https://docs.example.org/guide"}}"#;

/// Runs `carapace check` of each call inside one record session; its id.
fn record_session(d: &Daemon, calls: &[&str]) -> String {
    let socket = d.socket.to_str().expect("utf-8 socket");
    let script: Vec<String> = calls
        .iter()
        .map(|c| format!("{CARAPACE} --socket {socket} check --json '{c}' >/dev/null"))
        .collect();
    let out = carapace(
        d,
        &["run", "--record", "--", "sh", "-c", &script.join("; ")],
        &[],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "the record session ran:\n{err}");
    assert!(err.contains("proposed allow-list"), "{err}");
    err.lines()
        .find_map(|l| {
            l.strip_prefix("carapace: session ")
                .and_then(|rest| rest.split_once(" records what it touches"))
                .map(|(id, _)| id.to_owned())
        })
        .unwrap_or_else(|| panic!("no record-mode line:\n{err}"))
}

fn show(d: &Daemon, id: &str) -> String {
    let out = carapace(d, &["record", "show", id], &[]);
    assert!(out.status.success(), "record show: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn a_record_session_records_its_tool_calls_and_proposes_a_valid_profile() {
    let Some(dir) = setup("a_record_session_records_its_tool_calls_and_proposes_a_valid_profile")
    else {
        return;
    };
    let mut d = daemon(dir.path());
    let id = record_session(&d, &[READ, WRITE, FETCH]);
    // The session ended: its record was closed (an `ended` line, synced).
    let file = d.data_dir.join("record").join(format!("{id}.jsonl"));
    let ended = || {
        std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with(r#"{"ended":"#))
    };
    let since = std::time::Instant::now();
    while !ended() && since.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        ended(),
        "{}",
        std::fs::read_to_string(&file).unwrap_or_default()
    );
    let shown = show(&d, &id);
    for line in [
        "read /srv/rec-host/notes.txt",
        "write /srv/rec-host/out.txt",
    ] {
        assert!(
            shown.lines().any(|l| l.trim() == line),
            "`{line}` recorded:\n{shown}"
        );
    }
    assert!(
        shown
            .lines()
            .any(|l| l.trim().starts_with("network docs.example.org")),
        "the fetched host recorded:\n{shown}"
    );

    // The record is on disk: a restarted daemon shows the same.
    let (data, socket) = (d.data_dir.clone(), d.socket.clone());
    d.stop();
    let d = Daemon::start_with(Path::new(CARAPACED), &data, &socket, &[]);
    assert_eq!(show(&d, &id), shown, "the record survived the restart");

    let out = carapace(&d, &["record", "propose", &id], &[]);
    let proposal = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for needle in [
        "\"/srv/**\"",
        "\"/srv/rec-host/notes.txt\"",
        "\"/srv/rec-host/out.txt\"",
        "\"docs.example.org\"",
    ] {
        assert!(proposal.contains(needle), "`{needle}` in:\n{proposal}");
    }
    // It is a rule file the compiler takes.
    let file = dir.path().join("proposal.yaml");
    std::fs::write(&file, &proposal).expect("write proposal");
    let checked = carapace(&d, &["rules", "check", file.to_str().expect("utf-8")], &[]);
    assert!(
        checked.status.success(),
        "rules check: {}{}",
        text(&checked.stdout),
        text(&checked.stderr)
    );

    let out = carapace(&d, &["record", "propose", &id, "--write", "rec-host"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let saved = data.join("profiles").join("rec-host.yaml");
    let text_saved = std::fs::read_to_string(&saved).expect("the profile was written");
    assert!(text_saved.starts_with("# Carapace profile proposed by `carapace run --record`"));
    assert!(
        text_saved.contains(&format!("session {id}")),
        "{text_saved}"
    );
    assert!(text_saved.contains("REVIEW IT BEFORE USE"), "{text_saved}");

    std::fs::write(&saved, "version: 1\n# edited by the user\n").expect("edit");
    let again = carapace(&d, &["record", "propose", &id, "--write", "rec-host"], &[]);
    assert!(!again.status.success(), "no overwrite without --force");
    assert!(
        text(&again.stderr).contains("--force"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&saved).expect("profile"),
        "version: 1\n# edited by the user\n"
    );
    let forced = carapace(
        &d,
        &["record", "propose", &id, "--write", "rec-host", "--force"],
        &[],
    );
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    assert!(std::fs::read_to_string(&saved)
        .expect("profile")
        .contains("REVIEW IT BEFORE USE"));
}

#[test]
fn an_agent_cannot_write_a_profile() {
    let Some(dir) = setup("an_agent_cannot_write_a_profile") else {
        return;
    };
    let d = daemon(dir.path());
    let id = record_session(&d, &[READ]);
    let socket = d.socket.to_str().expect("utf-8 socket");
    let out = carapace(
        &d,
        &[
            "run",
            "--",
            CARAPACE,
            "--socket",
            socket,
            "record",
            "propose",
            &id,
            "--write",
            "from-agent",
        ],
        &[],
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "refused:\n{err}");
    assert!(err.contains("cannot write profiles"), "{err}");
    assert!(!d.data_dir.join("profiles/from-agent.yaml").exists());
    // Nor can it start a record session of its own.
    let out = carapace(
        &d,
        &[
            "run", "--", CARAPACE, "--socket", socket, "run", "--record", "--", "true",
        ],
        &[],
    );
    assert!(
        text(&out.stderr).contains("cannot create sessions"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn records_of_sessions_ended_long_ago_are_deleted() {
    let Some(dir) = setup("records_of_sessions_ended_long_ago_are_deleted") else {
        return;
    };
    let data = dir.path().join("data");
    let records = data.join("record");
    std::fs::create_dir_all(&records).expect("record dir");
    std::fs::write(data.join("config.yaml"), "record:\n  keep_days: 35\n").expect("config");
    let day = std::time::Duration::from_hours(24);
    for (id, age) in [("s-0ld", 40), ("s-y0ung", 20)] {
        let path = records.join(format!("{id}.jsonl"));
        std::fs::write(&path, format!("{{\"session\":{{\"id\":\"{id}\",\"command\":[\"sh\"],\"owner_uid\":0,\"started\":1}}}}\n{{\"ended\":2}}\n"))
            .expect("record");
        std::fs::File::options()
            .append(true)
            .open(&path)
            .and_then(|f| f.set_modified(std::time::SystemTime::now() - age * day))
            .expect("date the record");
    }
    let d = daemon(dir.path());
    let old = records.join("s-0ld.jsonl");
    let since = std::time::Instant::now();
    while old.exists() && since.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!old.exists(), "ended 40 days ago, kept 35: deleted");
    assert!(
        show(&d, "s-y0ung").contains("sh"),
        "ended 20 days ago: kept"
    );
    let out = carapace(&d, &["record", "show", "s-0ld"], &[]);
    assert!(!out.status.success(), "{}", text(&out.stdout));
}
