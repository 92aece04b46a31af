//! The Landlock fallback: with the daemon's kernel layer unavailable (as on the project's
//! machines, which refuse BPF LSM), `carapace run` confines the command with Landlock built
//! from the daemon's rules, and reports which rules it enforces.
use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use carapace_tests::{cli_command, text, Daemon};

use super::{kernel_enforcing, setup, CARAPACE, CARAPACED};

const RULES: &str = r#"
version: 1
builtin: none
rules:
  - id: test-ssh-keys
    block: "~/.ssh/**"
    message: "SSH keys are off limits"
  - id: test-regex-rule
    block: "re:^/nowhere/[0-9]+$"
  - id: test-address-rule
    block: { cidr: "10.1.2.0/24" }
  - id: test-names
    block: "**/.env"
"#;

#[test]
fn landlock_refuses_a_protected_file_and_reports_what_it_enforces() {
    let Some(dir) = setup("landlock_refuses_a_protected_file_and_reports_what_it_enforces") else {
        return;
    };
    if carapace::sandbox::landlock::sys::abi().is_none() {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::create_dir_all(work.join("src")).unwrap();
    fs::write(home.join(".ssh/id_test"), "PRIVATE-KEY\n").unwrap();
    fs::write(work.join("src/notes.txt"), "notes\n").unwrap();
    fs::write(work.join(".env"), "TOKEN=SECRET-ENV\n").unwrap();
    let rules = dir.path().join("rules.yaml");
    fs::write(&rules, RULES).unwrap();
    let rules_arg = rules.to_string_lossy().into_owned();
    let d = Daemon::start_env(
        Path::new(CARAPACED),
        dir.path(),
        &["--rules", &rules_arg],
        &[("HOME", home.as_os_str())],
    );
    if kernel_enforcing(&d) {
        eprintln!("skipped: the kernel layer runs, so Landlock stands aside");
        return;
    }
    // Each step prints its outcome; the protected reads must fail, the rest succeed.
    let script = r#"
cat "$HOME/.ssh/id_test" && echo "ssh: read" || echo "ssh: refused"
cat .env && echo "env: read" || echo "env: refused"
cat src/notes.txt
echo more >> src/notes.txt && echo "notes: appended"
echo fresh > src/new.txt && cat src/new.txt
"#;
    let out = cli_command(
        Path::new(CARAPACE),
        &d.socket,
        ["run", "--", "sh", "-c", script],
        &[],
    )
    .env("HOME", OsStr::new(&home))
    .current_dir(&work)
    .output()
    .unwrap_or_else(|e| panic!("cannot run carapace: {e}"));
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let context = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(out.status.success(), "{context}");
    assert!(stdout.contains("ssh: refused"), "{context}");
    assert!(!stdout.contains("PRIVATE-KEY"), "{context}");
    assert!(
        stderr.contains("id_test: Permission denied"),
        "EACCES expected; {context}"
    );
    assert!(stdout.contains("env: refused"), "{context}");
    assert!(!stdout.contains("SECRET-ENV"), "{context}");
    assert!(stdout.contains("notes\n"), "{context}");
    assert!(stdout.contains("notes: appended"), "{context}");
    assert!(stdout.contains("fresh\n"), "{context}");
    assert_eq!(
        fs::read_to_string(work.join("src/notes.txt")).unwrap(),
        "notes\nmore\n"
    );
    // The report, rule by rule.
    let enforced = stderr
        .lines()
        .find_map(|l| l.strip_prefix("carapace: landlock: enforced: "))
        .unwrap_or_else(|| panic!("no enforced list; {context}"));
    // The locked self-protection pack is in force despite `builtin: none`, and Landlock
    // enforces what of it the paths allow.
    assert_eq!(
        enforced,
        "carapace-data, carapace-runtime, carapace-binaries, carapace-kernel-state, carapace-logs, kernel-knobs, test-ssh-keys",
        "{context}"
    );
    assert!(
        stderr.contains("carapace: landlock: not enforced: test-regex-rule: userspace only"),
        "{context}"
    );
    assert!(
        stderr.contains("carapace: landlock: not enforced: test-address-rule: it names addresses"),
        "{context}"
    );
    assert!(
        stderr.contains("carapace: landlock: partly enforced: test-names: `**/.env` covers only the 1 such path(s) found at start"),
        "{context}"
    );
    // The daemon's own-files rules (its data dir, socket, programs, log here) are the eBPF
    // layer's and Layer 1's: Landlock would close their parent directories.
    assert!(
        stderr.contains("carapace: landlock: not enforced: carapace-own-data-dir: userspace only (the daemon's own files"),
        "{context}"
    );
    assert!(stderr.contains("enforces 8 of 16 block rules"), "{context}");
}
