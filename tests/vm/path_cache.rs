//! The kernel's path cache: once a path matched no rule, opening it again skips the rule
//! lookups. These tests read a file from a session (so its path is cached as matching
//! nothing), then change what the path means — a rename of the file or of a directory above
//! it, a mount moved under a protected tree, a new rule — and check that the next open from a
//! session is judged again and refused.

use std::{fs, os::unix::fs::PermissionsExt as _, process::Command};

use super::{agent, assert_denied_line, guard, py_errno, stdout};

fn python_read(path: &str) -> String {
    let out = agent(&py_errno(&format!("open(\"{path}\").read()")));
    stdout(&out).trim().to_owned()
}

fn readable_file(path: &str) {
    let dir = std::path::Path::new(path).parent().expect("absolute path");
    fs::create_dir_all(dir).expect("create dir");
    fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).expect("chmod dir");
    fs::write(path, "fixture\n").expect("write file");
    fs::set_permissions(path, fs::Permissions::from_mode(0o666)).expect("chmod file");
}

fn root(script: &str) {
    let status = Command::new("sh")
        .args(["-c", script])
        .status()
        .expect("run sh");
    assert!(status.success(), "`{script}` failed");
}

/// Reads `path` from two sessions (the second open finds the cached verdict), runs `change`
/// as root, and expects `after` to be refused with the secret-dir rule.
fn read_change_refused(path: &str, change: &str, after: &str) {
    assert_eq!(python_read(path), "0", "{path} matches no rule");
    assert_eq!(python_read(path), "0", "{path} read again, from the cache");
    root(change);
    assert_eq!(python_read(after), "13", "{after} after `{change}`");
    let out = agent(&format!("cat {after}"));
    assert!(!out.status.success());
    assert_denied_line(
        &out,
        &format!("blocked read of {after} (rule secret-dir: The secret directory is off limits)"),
    );
}

#[test]
fn a_cached_file_renamed_into_a_protected_tree_is_refused() {
    let _g = guard();
    let _ = fs::remove_file("/srv/secret/renamed.txt");
    readable_file("/srv/cache/file.txt");
    read_change_refused(
        "/srv/cache/file.txt",
        "mv /srv/cache/file.txt /srv/secret/renamed.txt",
        "/srv/secret/renamed.txt",
    );
}

#[test]
fn a_cached_file_whose_directory_moves_into_a_protected_tree_is_refused() {
    let _g = guard();
    let _ = fs::remove_dir_all("/srv/secret/moved");
    readable_file("/srv/cache-dir/inner/file.txt");
    read_change_refused(
        "/srv/cache-dir/inner/file.txt",
        "mv /srv/cache-dir/inner /srv/secret/moved",
        "/srv/secret/moved/file.txt",
    );
}

#[test]
fn a_cached_file_whose_mount_moves_into_a_protected_tree_is_refused() {
    let _g = guard();
    let (outside, inside) = ("/srv/cache-mnt", "/srv/secret/mnt");
    for dir in [outside, inside] {
        let _ = Command::new("umount").arg(dir).status();
        fs::create_dir_all(dir).expect("mount point");
    }
    root(&format!("mount -t tmpfs -o mode=0777 cache {outside}"));
    readable_file(&format!("{outside}/file.txt"));
    read_change_refused(
        &format!("{outside}/file.txt"),
        &format!("mount --move {outside} {inside}"),
        &format!("{inside}/file.txt"),
    );
    root(&format!("umount {inside}"));
}

#[test]
fn a_cached_file_named_by_a_new_rule_is_refused_after_a_reload() {
    let _g = guard();
    let rules = "/etc/carapace/rules.yaml";
    let original = fs::read_to_string(rules).expect("rules file");
    readable_file("/srv/cache-reload/file.txt");
    assert_eq!(python_read("/srv/cache-reload/file.txt"), "0");
    assert_eq!(python_read("/srv/cache-reload/file.txt"), "0");
    fs::write(
        rules,
        format!(
            "{original}\n  - id: cache-reload\n    block: \"/srv/cache-reload/file.txt\"\n    \
             message: \"Named after it was cached\"\n"
        ),
    )
    .expect("write rules");
    root("carapace rules reload");
    let refused = python_read("/srv/cache-reload/file.txt");
    fs::write(rules, &original).expect("restore rules");
    root("carapace rules reload");
    assert_eq!(
        refused, "13",
        "a new rule must apply to a path read before it"
    );
}

/// The cache reads the lock sequences with direct loads where the kernel has the
/// `bpf_rdonly_cast` kfunc (6.2+) and with `bpf_probe_read_kernel` on 6.1: the tests above
/// exercise whichever is in use, this one checks that it is the one the kernel allows.
#[test]
fn the_lock_sequences_are_read_the_way_this_kernel_allows() {
    let _g = guard();
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let mut version = release
        .split(['.', '-'])
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let direct = (version.next(), version.next()) >= (Some(6), Some(2));
    let log = fs::read_to_string("/var/log/carapaced.log").expect("the daemon's log");
    let line = log
        .lines()
        .rfind(|l| l.contains("path cache on:"))
        .expect("the daemon turned the path cache on");
    let want = if direct {
        "direct loads through bpf_rdonly_cast"
    } else {
        "bpf_probe_read_kernel"
    };
    assert!(line.contains(want), "want {want:?}: {line}");
}
