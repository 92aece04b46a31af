//! Inodes of what already exists under protected trees. A prefix rule (`/srv/secret/**`)
//! matches paths, and a path changes with a hard link, a bind mount or a chroot; the file's
//! inode does not. When the daemon writes the rules into the maps it walks each protected
//! tree and records the (dev, inode) of its files and directories under the tree's rules, so
//! that `file_open` catches those files under any name, and `inode_link` / `inode_rename`
//! (which look up a file and its ancestors) refuse to give anything in the tree a new name.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use carapace_common::{RuleRef, REFS_PER_KEY, REF_EXCEPT};
use carapace_policy::host::kernel_dev;

use carapace_policy::image::KernelImage;

/// Entries recorded for one tree and for all trees: the inode map holds 65,536 entries,
/// shared with exact-path rules. A larger tree is recorded in part (paths still match).
pub const PER_TREE: usize = 8_192;
pub const TOTAL: usize = 32_768;

/// What the walk found: (dev, inode) → refs, and the trees it could not record in full.
#[derive(Debug, Default)]
pub struct TreeInodes {
    pub inodes: BTreeMap<(u64, u64), Vec<RuleRef>>,
    pub truncated: Vec<String>,
}

/// Walks every prefix entry of `image` (its own directory included), staying on the tree's
/// filesystem, following no symlinks, and leaving out what the rule's exceptions cover.
#[must_use]
pub fn walk(image: &KernelImage) -> TreeInodes {
    let mut out = TreeInodes::default();
    for (key, refs) in &image.prefix {
        // Rules of no file operation (`unix: outside-session`, whose `/` prefix is every
        // socket path) have no use for the files' identities.
        let blocking: Vec<RuleRef> = refs
            .iter()
            .copied()
            .filter(|r| {
                r.flags & REF_EXCEPT == 0
                    && image
                        .rules
                        .get(r.rule as usize)
                        .is_some_and(|m| m.ops & carapace_common::op::ALL != 0)
            })
            .collect();
        let Ok(prefix) = std::str::from_utf8(key) else {
            continue;
        };
        let root = prefix.trim_end_matches('/');
        let root = if root.is_empty() { "/" } else { root };
        if blocking.is_empty() || out.inodes.len() >= TOTAL {
            continue;
        }
        if !walk_tree(image, root, &blocking, &mut out) {
            out.truncated.push(prefix.to_owned());
        }
    }
    out
}

/// Returns false when the tree was cut short by a budget.
fn walk_tree(image: &KernelImage, root: &str, refs: &[RuleRef], out: &mut TreeInodes) -> bool {
    let Ok(meta) = fs::symlink_metadata(root) else {
        return true;
    };
    if !meta.is_dir() || is_pseudo_fs(root) {
        return true;
    }
    let dev = meta.dev();
    let mut seen = 0usize;
    let mut stack = vec![(root.to_owned(), meta)];
    while let Some((path, meta)) = stack.pop() {
        if seen >= PER_TREE || out.inodes.len() >= TOTAL {
            return false;
        }
        let live: Vec<RuleRef> = refs
            .iter()
            .copied()
            .filter(|r| !excepted(image, &path, r.rule))
            .collect();
        if !live.is_empty() {
            seen += 1;
            let entry = out
                .inodes
                .entry((kernel_dev(meta.dev()), meta.ino()))
                .or_default();
            for r in live {
                if !entry.contains(&r) && entry.len() < REFS_PER_KEY {
                    entry.push(r);
                }
            }
        }
        if !meta.is_dir() {
            continue;
        }
        let Ok(dir) = fs::read_dir(&path) else {
            continue;
        };
        for entry in dir.filter_map(Result::ok) {
            let child = Path::new(&path).join(entry.file_name());
            let (Some(child), Ok(m)) = (child.to_str(), fs::symlink_metadata(&child)) else {
                continue;
            };
            // Symlinks are judged at their target; other mounts are not this tree's files.
            if m.file_type().is_symlink() || m.dev() != dev {
                continue;
            }
            stack.push((child.to_owned(), m));
        }
    }
    true
}

/// Whether `path` is on a file system the kernel makes up (/proc, /sys, cgroups, bpffs, …):
/// nothing there can be hard-linked, its inodes come and go, and recording thousands of
/// them would only crowd the inode map. Such trees are matched by path.
fn is_pseudo_fs(path: &str) -> bool {
    use nix::sys::statfs::{
        statfs, BPF_FS_MAGIC, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC, DEBUGFS_MAGIC,
        PROC_SUPER_MAGIC, SECURITYFS_MAGIC, SYSFS_MAGIC, TRACEFS_MAGIC,
    };
    statfs(path).is_ok_and(|s| {
        [
            PROC_SUPER_MAGIC,
            SYSFS_MAGIC,
            CGROUP_SUPER_MAGIC,
            CGROUP2_SUPER_MAGIC,
            BPF_FS_MAGIC,
            DEBUGFS_MAGIC,
            TRACEFS_MAGIC,
            SECURITYFS_MAGIC,
        ]
        .contains(&s.filesystem_type())
    })
}

/// Whether an exception of `rule` covers `path` (exact path, enclosing prefix or basename).
fn excepted(image: &KernelImage, path: &str, rule: u32) -> bool {
    let is_except = |refs: Option<&Vec<RuleRef>>| {
        refs.is_some_and(|refs| {
            refs.iter()
                .any(|r| r.rule == rule && r.flags & REF_EXCEPT != 0)
        })
    };
    if is_except(image.exact.get(path.as_bytes())) {
        return true;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    if is_except(image.names.get(name.as_bytes())) {
        return true;
    }
    let dir = format!("{path}/");
    dir.char_indices()
        .filter(|&(_, c)| c == '/')
        .any(|(i, _)| is_except(image.prefix.get(&dir.as_bytes()[..=i])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image_with(prefix: &[(&str, RuleRef)], exact: &[(&str, RuleRef)]) -> KernelImage {
        let mut img = KernelImage {
            rules: vec![
                carapace_common::RuleMeta {
                    ops: carapace_common::op::ALL,
                    flags: carapace_common::RULE_ALWAYS_ON,
                };
                8
            ],
            ..KernelImage::default()
        };
        for (p, r) in prefix {
            img.prefix
                .entry(p.as_bytes().to_vec())
                .or_default()
                .push(*r);
        }
        for (p, r) in exact {
            img.exact.entry(p.as_bytes().to_vec()).or_default().push(*r);
        }
        img
    }

    #[test]
    fn records_files_and_directories_of_a_tree_but_not_its_exceptions_or_symlinks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("secret");
        fs::create_dir_all(root.join("deep")).expect("mkdir");
        fs::write(root.join("a.txt"), "a").expect("write");
        fs::write(root.join("deep/b.txt"), "b").expect("write");
        fs::write(root.join("public.txt"), "p").expect("write");
        std::os::unix::fs::symlink("/etc/hostname", root.join("link")).expect("symlink");
        let prefix = format!("{}/", root.display());
        let rule = RuleRef { rule: 3, flags: 0 };
        let except = RuleRef {
            rule: 3,
            flags: REF_EXCEPT,
        };
        let public = format!("{}/public.txt", root.display());
        let img = image_with(&[(&prefix, rule)], &[(&public, except)]);
        let found = walk(&img);
        let ino = |p: &Path| {
            let m = fs::symlink_metadata(p).expect("stat");
            (kernel_dev(m.dev()), m.ino())
        };
        for p in [
            root.clone(),
            root.join("deep"),
            root.join("a.txt"),
            root.join("deep/b.txt"),
        ] {
            assert_eq!(
                found.inodes.get(&ino(&p)),
                Some(&vec![rule]),
                "{}",
                p.display()
            );
        }
        assert!(!found.inodes.contains_key(&ino(&root.join("public.txt"))));
        assert!(!found.inodes.contains_key(&ino(&root.join("link"))));
        assert!(found.truncated.is_empty());
    }

    #[test]
    fn trees_on_pseudo_file_systems_are_not_walked() {
        let img = image_with(&[("/proc/sys/", RuleRef { rule: 0, flags: 0 })], &[]);
        let found = walk(&img);
        assert!(found.inodes.is_empty() && found.truncated.is_empty());
    }

    #[test]
    fn a_missing_tree_records_nothing() {
        let img = image_with(
            &[("/nonexistent/carapace/tree/", RuleRef { rule: 0, flags: 0 })],
            &[],
        );
        let found = walk(&img);
        assert!(found.inodes.is_empty() && found.truncated.is_empty());
    }
}
