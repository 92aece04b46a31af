//! The kernel's path automaton: rules no map form can hold (a `re:` regex, a mid-pattern
//! `**`) are enforced by the eBPF programs themselves, for files the userspace layer never
//! sees (opened by a Python one-liner), exceptions included; their siblings stay readable.

use std::{fs, os::unix::fs::PermissionsExt as _};

use super::{agent, assert_denied_line, guard, py_errno, stdout};

/// Files for the two automaton rules of tests/fixtures/kernel-rules.yaml, readable by all.
fn files(paths: &[&str]) {
    for path in paths {
        let path = std::path::Path::new(path);
        let mut dir = path.parent().expect("absolute path");
        while dir != std::path::Path::new("/srv") {
            fs::create_dir_all(dir).expect("create dir");
            fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).expect("chmod dir");
            dir = dir.parent().expect("below /srv");
        }
        fs::write(path, "fixture\n").expect("write fixture");
        fs::set_permissions(path, fs::Permissions::from_mode(0o666)).expect("chmod fixture");
    }
}

fn python_read(path: &str) -> String {
    let out = agent(&py_errno(&format!("open(\"{path}\").read()")));
    stdout(&out).trim().to_owned()
}

#[test]
fn regex_rule_is_enforced_by_the_path_automaton() {
    let _g = guard();
    files(&[
        "/srv/vault/42.secret",
        "/srv/vault/42.secret.txt",
        "/srv/vault/notes.secret",
        "/srv/vault/sub/7.secret",
    ]);
    assert_eq!(
        python_read("/srv/vault/42.secret"),
        "13",
        "python open() must get EACCES"
    );
    let out = agent("cat /srv/vault/42.secret");
    assert!(!out.status.success(), "cat must fail");
    assert_denied_line(
        &out,
        "carapace: blocked read of /srv/vault/42.secret (rule numbered-vault-secrets: Numbered vault secrets are off limits)",
    );
    // Siblings the regex does not match stay readable.
    for sibling in [
        "/srv/vault/42.secret.txt",
        "/srv/vault/notes.secret",
        "/srv/vault/sub/7.secret",
    ] {
        assert_eq!(python_read(sibling), "0", "{sibling} must be readable");
    }
    assert_eq!(
        fs::read_to_string("/srv/vault/42.secret").expect("read outside the session"),
        "fixture\n"
    );
}

#[test]
fn mid_pattern_double_star_rule_and_its_exception_are_enforced() {
    let _g = guard();
    files(&[
        "/srv/projects/secret-a.pem",
        "/srv/projects/app/deploy/tls/secret-b.pem",
        "/srv/projects/app/secret-public-c.pem",
        "/srv/projects/app/secret-b.pem.bak",
        "/srv/projects/app/public-b.pem",
    ]);
    for blocked in [
        "/srv/projects/secret-a.pem",
        "/srv/projects/app/deploy/tls/secret-b.pem",
    ] {
        assert_eq!(python_read(blocked), "13", "{blocked} must be denied");
    }
    let out = agent("cat /srv/projects/app/deploy/tls/secret-b.pem");
    assert_denied_line(
        &out,
        "carapace: blocked read of /srv/projects/app/deploy/tls/secret-b.pem (rule project-secret-keys: Secret keys in projects are off limits)",
    );
    // The exception (a pattern in the automaton too) and non-matching siblings.
    for open in [
        "/srv/projects/app/secret-public-c.pem",
        "/srv/projects/app/secret-b.pem.bak",
        "/srv/projects/app/public-b.pem",
    ] {
        assert_eq!(python_read(open), "0", "{open} must be readable");
    }
    // Writes are denied too (the rule names no actions), also through a new file's open.
    let out = agent(&py_errno(
        "open(\"/srv/projects/app/secret-new.pem\", \"w\").write(\"x\")",
    ));
    assert_eq!(
        stdout(&out).trim(),
        "13",
        "creating a matching file is denied"
    );
}

#[test]
fn floating_directory_rule_and_its_exception_are_matched_on_the_way() {
    let _g = guard();
    files(&[
        "/srv/repo/.githooks/pre-commit",
        "/srv/repo/sub/.githooks/nested/post-merge",
        "/srv/repo/.githooks/examples/pre-commit.sample",
        "/srv/repo/githooks/pre-commit",
    ]);
    let write = |path: &str| {
        let out = agent(&py_errno(&format!("open(\"{path}\", \"a\").write(\"x\")")));
        stdout(&out).trim().to_owned()
    };
    for blocked in [
        "/srv/repo/.githooks/pre-commit",
        "/srv/repo/sub/.githooks/nested/post-merge",
    ] {
        assert_eq!(write(blocked), "13", "writing {blocked} must be denied");
        // The rule covers writes only.
        assert_eq!(python_read(blocked), "0", "{blocked} must stay readable");
    }
    let out = agent("echo x >> /srv/repo/.githooks/pre-commit");
    assert_denied_line(
        &out,
        "carapace: blocked write of /srv/repo/.githooks/pre-commit (rule githook-dirs: Git hook directories are not for agents)",
    );
    for open in [
        "/srv/repo/.githooks/examples/pre-commit.sample",
        "/srv/repo/githooks/pre-commit",
    ] {
        assert_eq!(write(open), "0", "writing {open} must be allowed");
    }
}
