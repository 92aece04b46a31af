//! Named profiles (`carapace run --profile NAME`, issue 20 item 5) at Layer 1, through the
//! real daemon and CLI: two sessions of different profiles at once get different answers to
//! the same call, each by its own rules and not the main file's; a missing, misnamed or
//! invalid profile is refused with what is there or where the error is; a profile cannot
//! switch self-protection or a locked rule off; an agent cannot start a session of another
//! profile; a reload changes a running profile session's answers. The kernel's side is in
//! tests/vm/profiles.rs.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use carapace_tests::{cli_command, text, Daemon};

use super::{carapace, daemon, setup, CARAPACE};

const CALL: &str = r#"{"tool":"Read","input":{"file_path":"/srv/carapace-profile-test/data.txt"}}"#;
/// Carapace's own state: the self-protection pack.
const SELF: &str = r#"{"tool":"Read","input":{"file_path":"/var/lib/carapace/carapace.db"}}"#;
const LOCKED: &str = r#"{"tool":"Read","input":{"file_path":"/srv/carapace-locked-test/x"}}"#;

/// The main rule file: blocks the call by a rule of its own, and holds a locked rule.
const MAIN: &str = "version: 1
rules:
  - id: main-srv
    block: \"/srv/carapace-profile-test/**\"
  - id: main-locked
    locked: true
    block: \"/srv/carapace-locked-test/**\"
";
/// A profile that blocks the call by its own rule.
const STRICT: &str = "version: 1
rules:
  - id: strict-srv
    block: \"/srv/carapace-profile-test/**\"
    message: the strict profile keeps agents out of /srv
";
/// A profile that does not block it (the packs only).
const OPEN: &str = "version: 1\nrules: []\n";

/// A daemon whose data directory holds the main rule file and `profiles`.
fn start(dir: &Path, profiles: &[(&str, &str)]) -> Daemon {
    let data = dir.join("data");
    let pdir = data.join("profiles");
    std::fs::create_dir_all(&pdir).unwrap_or_else(|e| panic!("{}: {e}", pdir.display()));
    std::fs::write(data.join("rules.yaml"), MAIN).unwrap_or_else(|e| panic!("rules.yaml: {e}"));
    for (name, text) in profiles {
        write_profile(&data, name, text);
    }
    daemon(dir)
}

fn write_profile(data: &Path, name: &str, text: &str) -> PathBuf {
    let path = data.join("profiles").join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// `carapace check --json CALL` from inside a session started with `run_args`: (exit code,
/// stdout, stderr).
fn check_inside(d: &Daemon, run_args: &[&str], call: &str) -> (Option<i32>, String, String) {
    let socket = d.socket.to_str().expect("utf-8 socket");
    let mut args = vec!["run"];
    args.extend_from_slice(run_args);
    args.extend_from_slice(&["--", CARAPACE, "--socket", socket, "check", "--json", call]);
    let out = carapace(d, &args, &[]);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The ids of the rules a decision printed by `check --json` matched.
fn matched(out: &str) -> Vec<String> {
    let decision: serde_json::Value =
        serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    decision["matches"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["id"].as_str().map(str::to_owned))
        .collect()
}

/// A session of `profile` that waits for `go` to exist, then checks CALL once for each name
/// in `steps`: it touches `DIR/done-STEP` after each and waits for `DIR/go-STEP` before the
/// next. Its output is the checks' decisions, one per line.
fn waiting_session(d: &Daemon, dir: &Path, profile: &str, steps: &[&str]) -> Child {
    let socket = d.socket.to_str().expect("utf-8 socket");
    let mut script = String::new();
    for step in steps {
        let go = dir.join(format!("go-{profile}-{step}"));
        let done = dir.join(format!("done-{profile}-{step}"));
        let _ = write!(
            script,
            "while [ ! -e {go} ]; do sleep 0.05; done; \
             {CARAPACE} --socket {socket} check --json '{CALL}' >/dev/null 2>&1; echo $?; touch {done}; ",
            go = go.display(),
            done = done.display()
        );
    }
    cli_command(
        Path::new(CARAPACE),
        &d.socket,
        ["run", "--profile", profile, "--", "sh", "-c", &script],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start carapace run --profile")
}

fn wait_for(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{what}: {} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The profiles of the live `carapace run` sessions, once there are `n` of them.
fn session_profiles(d: &Daemon, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = carapace(d, &["session", "list", "--json"], &[]);
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let mut profiles: Vec<String> = list
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["kind"] == "run")
            .map(|s| s["profile"].as_str().unwrap_or_default().to_owned())
            .collect();
        if profiles.len() >= n {
            profiles.sort();
            return profiles;
        }
        assert!(
            Instant::now() < deadline,
            "{n} sessions never appeared; log:\n{}",
            d.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn two_sessions_of_different_profiles_get_different_answers_at_once() {
    let Some(dir) = setup("two_sessions_of_different_profiles_get_different_answers_at_once")
    else {
        return;
    };
    let d = start(dir.path(), &[("strict", STRICT), ("open", OPEN)]);
    let strict = waiting_session(&d, dir.path(), "strict", &["1"]);
    let open = waiting_session(&d, dir.path(), "open", &["1"]);
    // Both live at once, each showing its profile.
    assert_eq!(session_profiles(&d, 2), ["open", "strict"]);
    let status = text(&carapace(&d, &["status"], &[]).stdout);
    assert!(status.contains("profile: strict"), "{status}");
    assert!(status.contains("profile: open"), "{status}");
    let line = text(&carapace(&d, &["session", "list"], &[]).stdout);
    assert!(line.contains("[profile strict]"), "{line}");
    for p in ["strict", "open"] {
        std::fs::write(dir.path().join(format!("go-{p}-1")), "").expect("go");
    }
    let strict = strict.wait_with_output().expect("strict session");
    let open = open.wait_with_output().expect("open session");
    assert_eq!(text(&strict.stdout).trim(), "2", "blocked under strict");
    assert_eq!(
        text(&open.stdout).trim(),
        "0",
        "allowed under open: the main file's rule does not apply; stderr:\n{}",
        text(&open.stderr)
    );
    assert!(
        text(&strict.stderr).contains("runs under profile strict"),
        "{}",
        text(&strict.stderr)
    );
    // Each by its own rules: the profile's rule names the block, the main file's does not;
    // a session without a profile still gets the main file's.
    let (code, out, err) = check_inside(&d, &["--profile", "strict"], CALL);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(matched(&out), ["strict-srv"], "{out}");
    assert!(
        out.contains("the strict profile keeps agents out of /srv"),
        "{out}"
    );
    let (code, out, err) = check_inside(&d, &[], CALL);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(matched(&out), ["main-srv"], "{out}");
}

/// Sessions of several profiles started at the same moment: each is judged by its own
/// profile. (A profile loaded for a session not yet registered was once dropped by the next
/// profile's load, and its session fell back to the main rules.)
#[test]
fn sessions_of_several_profiles_started_at_once_each_keep_their_own_rules() {
    let Some(dir) = setup("sessions_of_several_profiles_started_at_once_each_keep_their_own_rules")
    else {
        return;
    };
    let names = ["open-a", "open-b", "open-c", "open-d"];
    let profiles: Vec<(&str, &str)> = names.iter().map(|n| (*n, OPEN)).collect();
    let d = start(dir.path(), &profiles);
    let children: Vec<Child> = names
        .iter()
        .map(|n| waiting_session(&d, dir.path(), n, &["1"]))
        .collect();
    assert_eq!(session_profiles(&d, names.len()), names);
    for n in names {
        std::fs::write(dir.path().join(format!("go-{n}-1")), "").expect("go");
    }
    for (n, child) in names.iter().zip(children) {
        let out = child.wait_with_output().expect("profile session");
        assert_eq!(
            text(&out.stdout).trim(),
            "0",
            "the session of profile {n} was judged by other rules than its own; log:\n{}",
            d.log_text()
        );
    }
}

#[test]
fn a_missing_or_misnamed_profile_is_refused_naming_those_there() {
    let Some(dir) = setup("a_missing_or_misnamed_profile_is_refused_naming_those_there") else {
        return;
    };
    let d = start(dir.path(), &[("strict", STRICT), ("open", OPEN)]);
    let out = carapace(&d, &["run", "--profile", "nope", "--", "true"], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let pdir = d.data_dir.join("profiles");
    assert!(
        err.contains(&format!("no profile `nope` in {}", pdir.display())),
        "{err}"
    );
    assert!(err.contains("the profiles there are open, strict"), "{err}");
    for bad in ["../rules", "a/b", ".."] {
        let out = carapace(&d, &["run", "--profile", bad, "--", "true"], &[]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bad}: {err}");
        assert!(err.contains("is not allowed"), "{bad}: {err}");
    }
    assert!(
        super::run_session_ids(&d).is_empty(),
        "no session was left behind"
    );
}

#[test]
fn an_invalid_profile_is_refused_with_file_line_and_column() {
    let Some(dir) = setup("an_invalid_profile_is_refused_with_file_line_and_column") else {
        return;
    };
    let bad = "version: 1\nrules:\n  - id: x\n    block: \"/srv/x/**\"\n    mode: blok\n";
    let d = start(dir.path(), &[("bad", bad), ("strict", STRICT)]);
    let file = d.data_dir.join("profiles").join("bad.yaml");
    let out = carapace(&d, &["run", "--profile", "bad", "--", "true"], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{}:5:", file.display())), "{err}");
    // The same without a session.
    let data = d.data_dir.to_str().expect("utf-8 data dir");
    let out = carapace(
        &d,
        &["rules", "--data-dir", data, "check", "--profile", "bad"],
        &[],
    );
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("{}:5:", file.display())), "{said}");
    let out = carapace(
        &d,
        &["rules", "--data-dir", data, "check", "--profile", "strict"],
        &[],
    );
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("strict.yaml: ok"), "{said}");
    // The broken profile did not stop the daemon nor keep the others out of the image
    // compiled at start; status names both.
    let out = carapace(&d, &["status"], &[]);
    let said = text(&out.stdout);
    assert!(said.contains("profiles loaded: strict"), "{said}");
    assert!(said.contains("profile `bad` not loaded:"), "{said}");
    assert!(said.contains(&format!("{}:5:", file.display())), "{said}");
    // A reload goes through and says so.
    let out = carapace(&d, &["rules", "reload"], &[]);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("profile `bad` is not loaded"), "{said}");
    // Mended, it is compiled at the next reload and its session starts.
    write_profile(&d.data_dir, "bad", OPEN);
    let out = carapace(&d, &["rules", "reload"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let said = text(&carapace(&d, &["status"], &[]).stdout);
    assert!(said.contains("profiles loaded: bad, strict"), "{said}");
    let out = carapace(&d, &["run", "--profile", "bad", "--", "true"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// The daemon's own files where it really keeps them (a custom `--data-dir`, as every host
/// test daemon has): the built-in pack names /var/lib/carapace, the daemon adds locked
/// rules for the directory it uses, in main and profile sessions alike.
#[test]
fn a_custom_data_dir_is_kept_from_sessions_main_and_profile() {
    let Some(dir) = setup("a_custom_data_dir_is_kept_from_sessions_main_and_profile") else {
        return;
    };
    let none = "version: 1\nbuiltin: none\nrules: []\n";
    let d = start(dir.path(), &[("none", none)]);
    let target = d.data_dir.join("profiles").join("lax.yaml");
    let write = serde_json::json!({"tool": "Write",
        "input": {"file_path": target, "content": "version: 1\nbuiltin: none\n"}})
    .to_string();
    let ledger = d.data_dir.join("audit").join("ledger-000001.jsonl");
    let read = serde_json::json!({"tool": "Read", "input": {"file_path": ledger}}).to_string();
    for run_args in [&[][..], &["--profile", "none"][..]] {
        for call in [&write, &read] {
            let (code, out, err) = check_inside(&d, run_args, call);
            assert_eq!(code, Some(2), "{run_args:?} {call}:\n{out}\n{err}");
            assert!(
                matched(&out).contains(&"carapace-own-data-dir".to_owned()),
                "{out}"
            );
        }
    }
    assert!(!target.exists());
}

#[test]
fn a_profile_cannot_switch_off_self_protection_or_a_locked_rule() {
    let Some(dir) = setup("a_profile_cannot_switch_off_self_protection_or_a_locked_rule") else {
        return;
    };
    // No packs asked for, an allow rule on Carapace's files and on the locked path: allow
    // never outranks a block.
    let lax = "version: 1
builtin: none
rules:
  - id: lax
    match: { path: \"/var/lib/carapace/**\" }
    mode: allow
  - id: lax-locked
    match: { path: \"/srv/carapace-locked-test/**\" }
    mode: allow
";
    // Reusing the locked rule's id for a weaker rule is an error.
    let weaker =
        "version: 1\nrules:\n  - id: main-locked\n    log: \"/srv/carapace-locked-test/**\"\n";
    let d = start(dir.path(), &[("lax", lax), ("weaker", weaker)]);
    let (code, out, err) = check_inside(&d, &["--profile", "lax"], SELF);
    assert_eq!(code, Some(2), "self-protection holds:\n{out}\n{err}");
    let (code, out, err) = check_inside(&d, &["--profile", "lax"], LOCKED);
    assert_eq!(code, Some(2), "the locked rule holds:\n{out}\n{err}");
    assert!(matched(&out).contains(&"main-locked".to_owned()), "{out}");
    // The main file's unlocked rule is not the profile's.
    let (code, out, err) = check_inside(&d, &["--profile", "lax"], CALL);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let out = carapace(&d, &["run", "--profile", "weaker", "--", "true"], &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("rule id `main-locked` is already used"),
        "{err}"
    );
}

#[test]
fn an_agent_cannot_start_a_session_of_another_profile() {
    let Some(dir) = setup("an_agent_cannot_start_a_session_of_another_profile") else {
        return;
    };
    let d = start(dir.path(), &[("strict", STRICT), ("open", OPEN)]);
    let socket = d.socket.to_str().expect("utf-8 socket");
    let out = carapace(
        &d,
        &[
            "run",
            "--profile",
            "strict",
            "--",
            CARAPACE,
            "--socket",
            socket,
            "run",
            "--profile",
            "open",
            "--",
            CARAPACE,
            "--socket",
            socket,
            "check",
            "--json",
            CALL,
        ],
        &[],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the nested run fails:\n{err}");
    assert!(err.contains("cannot create sessions"), "{err}");
}

#[test]
fn a_reload_changes_a_running_profile_sessions_answers() {
    let Some(dir) = setup("a_reload_changes_a_running_profile_sessions_answers") else {
        return;
    };
    let d = start(dir.path(), &[("p", OPEN)]);
    let session = waiting_session(&d, dir.path(), "p", &["1", "2", "3"]);
    assert_eq!(session_profiles(&d, 1), ["p"]);
    let step = |n: &str| {
        std::fs::write(dir.path().join(format!("go-p-{n}")), "").expect("go");
        wait_for(
            &dir.path().join(format!("done-p-{n}")),
            "the session's check",
        );
    };
    step("1");
    write_profile(&d.data_dir, "p", STRICT);
    let out = carapace(&d, &["rules", "reload"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    step("2");
    // A profile that no longer validates is refused; the session keeps its rules.
    let path = write_profile(&d.data_dir, "p", "version: 1\nrules:\n  - blok: /x\n");
    let out = carapace(&d, &["rules", "reload"], &[]);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{said}");
    assert!(said.contains(&format!("{}:3:", path.display())), "{said}");
    step("3");
    let out = session.wait_with_output().expect("the session");
    let codes: Vec<String> = text(&out.stdout).lines().map(str::to_owned).collect();
    assert_eq!(
        codes,
        ["0", "2", "2"],
        "open, then strict after the reload, still strict after a refused one; stderr:\n{}",
        text(&out.stderr)
    );
}
