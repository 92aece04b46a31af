//! Named profiles in the kernel (issue 20 item 5): two `carapace run --profile` sessions of
//! different profiles at once read the same file, and the kernel refuses it (EACCES) in one
//! and lets it through in the other, while a session without a profile keeps the fixture's
//! rules; the self-protection rules refuse in a profile session whose file selects no pack;
//! and a reload changes what the kernel answers a running profile session.
use std::{
    fs,
    os::unix::fs::{MetadataExt as _, PermissionsExt as _},
    path::Path,
    process::{Child, Command, Output, Stdio},
    thread,
    time::{Duration, Instant},
};

use super::{agent, guard, stderr, stdout};

const PROFILES: &str = "/var/lib/carapace/profiles";
/// Blocks reads of /srv/open, which the fixture's rules leave open, and nothing of /srv/secret.
const STRICT: &str = "version: 1
rules:
  - id: vm-strict-open
    block: \"/srv/open/**\"
    actions: [read]
    message: \"The strict profile keeps agents out of /srv/open\"
";
/// The packs alone: neither /srv/open nor /srv/secret is refused.
const OPEN: &str = "version: 1\nrules: []\n";
/// No pack asked for: the self-protection packs come anyway.
const BARE: &str = "version: 1\nbuiltin: none\nrules: []\n";
/// A file of the self-protection pack's `carapace-data` rule, readable by file modes.
const PROBE_DIR: &str = "/etc/carapace";
const PROBE: &str = "/etc/carapace/profile-probe.txt";

/// Writes profile `name`; it is removed when the returned guard drops. The daemon compiles
/// every profile of the directory on each reload, so one left behind would slow every later
/// test's reload (minutes under TCG).
#[must_use]
fn write_profile(name: &str, text: &str) -> ProfileFile {
    fs::create_dir_all(PROFILES).expect("create the profiles directory");
    let path = Path::new(PROFILES).join(format!("{name}.yaml"));
    fs::write(&path, text).expect("write profile");
    ProfileFile(path)
}

struct ProfileFile(std::path::PathBuf);

impl Drop for ProfileFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// `carapace run --profile NAME -- bash -c SCRIPT` as uid 1000 in /tmp, started.
fn spawn_profile_agent(profile: &str, script: &str) -> Child {
    Command::new("carapace")
        .args(["run", "--profile", profile, "--", "bash", "-c", script])
        .current_dir("/tmp")
        .env("SUDO_UID", "1000")
        .env("SUDO_GID", "1000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run carapace")
}

fn finish(child: Child, what: &str) -> Output {
    let out = child.wait_with_output().expect("wait for carapace run");
    eprintln!(
        "{what} → {:?}\nstdout: {}\nstderr: {}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    out
}

/// A script that waits for `go` to exist (the test's signal), then runs `then`.
fn after(go: &str, then: &str) -> String {
    format!("while [ ! -e {go} ]; do sleep 0.05; done; {then}")
}

/// Waits until live `carapace run` sessions run under each of `expected`.
fn live_profiles(expected: &[&str]) {
    // Each new profile compiles the union image again, which takes tens of seconds under
    // TCG, and the sessions start one after the other.
    let deadline = Instant::now() + Duration::from_mins(6);
    loop {
        let out = Command::new("carapace")
            .args(["session", "list", "--json"])
            .output()
            .expect("run carapace session list");
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let found: Vec<&str> = list
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["kind"] == "run")
            .filter_map(|s| s["profile"].as_str())
            .collect();
        if expected.iter().all(|p| found.contains(p)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "sessions of {expected:?} never appeared: {found:?}"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

fn wait_for(path: &str) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while !Path::new(path).exists() {
        assert!(Instant::now() < deadline, "{path} never appeared");
        thread::sleep(Duration::from_millis(50));
    }
}

const READ_BOTH: &str =
    "cat /srv/open/notes.txt; echo open=$?; cat /srv/secret/a.txt; echo secret=$?";
/// A file outside /srv/open with a second name inside it.
const READ_LINKED: &str = "cat /srv/secret/deep/pre.txt; echo linked=$?";

#[test]
fn two_sessions_of_different_profiles_get_different_kernel_answers_for_the_same_file() {
    let _g = guard();
    let _strict = write_profile("vm-strict", STRICT);
    let _open = write_profile("vm-open", OPEN);
    // The kernel keeps a file under a protected tree by its inode, under all its names: a
    // hard link from /srv/open to /srv/secret/a.txt left by another test would rightly make
    // the strict profile refuse it too (session 27's "false block" was such a leftover).
    assert_eq!(
        fs::metadata("/srv/secret/a.txt")
            .expect("stat a.txt")
            .nlink(),
        1,
        "a test left a hard link to /srv/secret/a.txt"
    );
    let go = "/tmp/profiles-go";
    let _ = fs::remove_file(go);
    let both = format!("{READ_BOTH}; {READ_LINKED}");
    let strict = spawn_profile_agent("vm-strict", &after(go, &both));
    let open = spawn_profile_agent("vm-open", &after(go, &both));
    // Both run at once.
    live_profiles(&["vm-open", "vm-strict"]);
    fs::write(go, "").expect("go");
    let strict = finish(strict, "vm-strict session");
    let open = finish(open, "vm-open session");
    let (s, o) = (stdout(&strict), stdout(&open));
    // The strict profile's rule refuses /srv/open there; the fixture's secret-dir rule is
    // the main file's, which neither profile holds.
    assert!(s.contains("open=1"), "refused under vm-strict:\n{s}");
    assert!(s.contains("fixture\nsecret=0"), "{s}");
    assert!(o.contains("fixture\nopen=0"), "read under vm-open:\n{o}");
    assert!(o.contains("fixture\nsecret=0"), "{o}");
    // /srv/secret/deep/pre.txt is also named /srv/open/pre-hardlink.txt (made before the
    // rules loaded, `bypass::before_rules`): the strict profile's tree rule holds it under
    // its other name too, and only there.
    assert!(s.contains("linked=1"), "refused under vm-strict:\n{s}");
    assert!(o.contains("fixture\nlinked=0"), "read under vm-open:\n{o}");
    super::assert_denied_line(
        &strict,
        "carapace: blocked read of /srv/secret/deep/pre.txt (rule vm-strict-open:",
    );
    assert!(stderr(&strict).contains("Permission denied"), "EACCES");
    super::assert_denied_line(
        &strict,
        "carapace: blocked read of /srv/open/notes.txt (rule vm-strict-open: The strict profile keeps agents out of /srv/open)",
    );
    // A session without a profile still has the fixture's rules and not the profile's.
    let out = agent(READ_BOTH);
    let text = stdout(&out);
    assert!(text.contains("fixture\nopen=0"), "{text}");
    assert!(text.contains("secret=1"), "{text}");
    // Outside any session nothing is refused.
    let outside = Command::new("cat")
        .arg("/srv/open/notes.txt")
        .output()
        .expect("cat");
    assert!(outside.status.success());
}

#[test]
fn self_protection_refuses_in_a_profile_session_that_selects_no_pack() {
    let _g = guard();
    let _bare = write_profile("vm-bare", BARE);
    fs::create_dir_all(PROBE_DIR).expect("create probe dir");
    fs::set_permissions(PROBE_DIR, fs::Permissions::from_mode(0o755)).expect("chmod dir");
    fs::write(PROBE, "probe\n").expect("write probe");
    fs::set_permissions(PROBE, fs::Permissions::from_mode(0o644)).expect("chmod probe");
    let out = finish(
        spawn_profile_agent(
            "vm-bare",
            &format!("cat {PROBE}; echo self=$?; cat /srv/secret/a.txt; echo secret=$?"),
        ),
        "vm-bare session",
    );
    let text = stdout(&out);
    assert!(
        text.contains("self=1") && !text.contains("probe"),
        "refused:\n{text}"
    );
    assert!(
        text.contains("secret=0"),
        "the main file's rule is not the profile's:\n{text}"
    );
    super::assert_denied_line(
        &out,
        &format!("carapace: blocked read of {PROBE} (rule carapace-data:"),
    );
}

#[test]
fn a_reload_changes_the_kernels_answer_to_a_running_profile_session() {
    let _g = guard();
    let _reload = write_profile("vm-reload", OPEN);
    let (go1, done1, go2) = (
        "/tmp/profiles-reload-go1",
        "/tmp/profiles-reload-done1",
        "/tmp/profiles-reload-go2",
    );
    for f in [go1, done1, go2] {
        let _ = fs::remove_file(f);
    }
    let script = format!(
        "{}; {}",
        after(
            go1,
            &format!("cat /srv/open/notes.txt; echo first=$?; : > {done1}")
        ),
        after(go2, "cat /srv/open/notes.txt; echo second=$?")
    );
    let child = spawn_profile_agent("vm-reload", &script);
    live_profiles(&["vm-reload"]);
    fs::write(go1, "").expect("go1");
    wait_for(done1);
    let _strict = write_profile("vm-reload", STRICT);
    let reload = Command::new("carapace")
        .args(["rules", "reload"])
        .output()
        .expect("carapace rules reload");
    assert!(
        reload.status.success(),
        "{}{}",
        stdout(&reload),
        stderr(&reload)
    );
    fs::write(go2, "").expect("go2");
    let out = finish(child, "vm-reload session");
    let text = stdout(&out);
    assert!(text.contains("fixture\nfirst=0"), "open before:\n{text}");
    assert!(
        text.contains("second=1"),
        "refused after the reload:\n{text}"
    );
    super::assert_denied_line(
        &out,
        "carapace: blocked read of /srv/open/notes.txt (rule vm-strict-open:",
    );
}
