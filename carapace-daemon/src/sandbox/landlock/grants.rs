//! Deny rules → the complement allow-list Landlock needs. Landlock only grants, and a grant
//! on a directory covers its whole subtree; so starting at `/`, every directory that holds no
//! protected path gets one grant of everything, and the ancestors of protected paths are
//! opened up entry by entry: their own grant leaves out whatever is denied anywhere below
//! them, and their entries get grants of their own.
//!
//! The price: an ancestor of a protected path (e.g. the home directory above `~/.ssh`) keeps
//! only the rights that no protected path below it denies, so new entries made directly in
//! it later get only those. [`Grants::collateral`] lists these directories.
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use super::sys::fs;

/// One protected or exempted path of one rule (index into the caller's rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The path itself: `file` rights withheld on it, `entry` rights withheld on its parent
    /// directory (creating, replacing or removing it).
    Exact {
        path: PathBuf,
        rule: usize,
        file: u64,
        entry: u64,
    },
    /// Everything below the directory `path`.
    Prefix {
        path: PathBuf,
        rule: usize,
        rights: u64,
    },
    /// An exception of `rule` for the path itself.
    ExceptExact { path: PathBuf, rule: usize },
    /// An exception of `rule` for everything below `path`.
    ExceptPrefix { path: PathBuf, rule: usize },
}

impl Target {
    fn path(&self) -> &Path {
        match self {
            Self::Exact { path, .. }
            | Self::Prefix { path, .. }
            | Self::ExceptExact { path, .. }
            | Self::ExceptPrefix { path, .. } => path,
        }
    }
}

#[derive(Debug, Default)]
struct Node {
    children: BTreeMap<OsString, Node>,
    /// Rules denying rights below this directory.
    prefix: Vec<(usize, u64)>,
    /// Rules denying rights on this path itself.
    exact: Vec<(usize, u64)>,
    /// Rights withheld on this directory's own entries (from `Exact` children).
    entry: u64,
    except_prefix: Vec<usize>,
    except_exact: Vec<usize>,
    /// Union of every right denied at or below this node.
    subtree: u64,
}

impl Node {
    fn insert(&mut self, target: &Target) {
        let mut node = self;
        let names: Vec<&OsStr> = target
            .path()
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        for (i, name) in names.iter().enumerate() {
            if let (true, Target::Exact { entry, .. }) = (i + 1 == names.len(), target) {
                node.entry |= entry;
            }
            node = node.children.entry((*name).to_owned()).or_default();
        }
        match target {
            Target::Exact { rule, file, .. } => node.exact.push((*rule, *file)),
            Target::Prefix { rule, rights, .. } => node.prefix.push((*rule, *rights)),
            Target::ExceptExact { rule, .. } => node.except_exact.push(*rule),
            Target::ExceptPrefix { rule, .. } => node.except_prefix.push(*rule),
        }
    }

    fn compute_subtree(&mut self) -> u64 {
        let mut m = self.entry;
        for (_, r) in self.prefix.iter().chain(&self.exact) {
            m |= r;
        }
        for child in self.children.values_mut() {
            m |= child.compute_subtree();
        }
        self.subtree = m;
        m
    }

    fn has_excepts(&self) -> bool {
        !self.except_prefix.is_empty() || self.children.values().any(|c| !c.except_exact.is_empty())
    }
}

/// One Landlock rule to add: `rights` on `path` and beneath.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub rights: u64,
}

/// The allow-list for a set of targets.
#[derive(Debug, Default)]
pub struct Grants {
    pub grants: Vec<Grant>,
    /// Directories that lose rights on their own new entries only because something below
    /// them is protected (`/home/u` above `/home/u/.ssh`), with the rights they lack.
    pub collateral: Vec<(PathBuf, u64)>,
    /// Directories that could not be listed; nothing below them is granted (fail closed).
    pub unreadable: Vec<PathBuf>,
}

/// Computes the grants over the filesystem as it is now. `all` is every handled filesystem
/// right; `fs::READ_DIR` should be in it and in no target (listing stays allowed: a grant on
/// an ancestor covers its protected subdirectories too).
#[must_use]
pub fn compute(targets: &[Target], all: u64) -> Grants {
    let mut root = Node::default();
    for t in targets {
        root.insert(t);
    }
    root.compute_subtree();
    let mut out = Grants::default();
    visit(Path::new("/"), Some(&root), &[], 0, all, &mut out);
    out
}

fn mask(active: &[(usize, u64)]) -> u64 {
    active.iter().fold(0, |m, (_, r)| m | r)
}

fn visit(
    path: &Path,
    node: Option<&Node>,
    active: &[(usize, u64)],
    granted: u64,
    all: u64,
    out: &mut Grants,
) {
    let inherited = mask(active);
    let deny = inherited | node.map_or(0, |n| n.subtree);
    let here = all & !deny & !granted;
    if here != 0 {
        out.grants.push(Grant {
            path: path.to_owned(),
            rights: here,
        });
    }
    let granted = granted | here;
    let Some(node) = node else {
        return;
    };
    let mut below: Vec<(usize, u64)> = active
        .iter()
        .copied()
        .filter(|(rule, _)| !node.except_prefix.contains(rule))
        .collect();
    below.extend(
        node.prefix
            .iter()
            .copied()
            .filter(|(rule, _)| !node.except_prefix.contains(rule)),
    );
    let below_mask = mask(&below);
    let lacking = all & !granted & !below_mask;
    if lacking != 0 {
        out.collateral.push((path.to_owned(), lacking));
    }
    // Entries would get nothing beyond what this directory's grant gives them.
    let exact_here = node.exact.iter().fold(0, |m, (_, r)| m | r);
    if node.children.is_empty()
        && !node.has_excepts()
        && (node.entry | exact_here) & !below_mask == 0
    {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        out.unreadable.push(path.to_owned());
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        // A symlink's target is judged where it lives; it gets its grants there.
        if kind.is_symlink() {
            continue;
        }
        let name = entry.file_name();
        let child = node.children.get(&name);
        let child_path = path.join(&name);
        if kind.is_dir() {
            visit(&child_path, child, &below, granted, all, out);
        } else {
            let excepted = |rule: &usize| child.is_some_and(|c| c.except_exact.contains(rule));
            let denied = below
                .iter()
                .chain(child.map_or(&[][..], |c| &c.exact[..]))
                .filter(|(rule, _)| !excepted(rule))
                .fold(0, |m, (_, r)| m | r);
            let rights = all & fs::ON_FILES & !denied & !granted;
            if rights != 0 {
                out.grants.push(Grant {
                    path: child_path,
                    rights,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u64 = (1 << 16) - 1;

    /// The rights `path` ends up with: the union of the grants on it and its ancestors.
    fn rights_of(g: &Grants, path: &Path) -> u64 {
        g.grants
            .iter()
            .filter(|gr| path.starts_with(&gr.path))
            .fold(0, |m, gr| m | gr.rights)
    }

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for sub in ["home/.ssh", "home/project/src", "etc/ssh", "other"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        for file in [
            "home/.ssh/id_test",
            "home/.bashrc",
            "home/project/src/main.rs",
            "home/project/.env",
            "etc/passwd",
            "etc/ssh/sshd_config",
            "other/x",
        ] {
            std::fs::write(d.join(file), "x").unwrap();
        }
        dir
    }

    #[test]
    fn a_protected_directory_gets_nothing_and_its_siblings_everything() {
        let dir = tree();
        let d = dir.path();
        let g = compute(
            &[Target::Prefix {
                path: d.join("home/.ssh"),
                rule: 0,
                rights: ALL & !fs::READ_DIR,
            }],
            ALL,
        );
        assert_eq!(rights_of(&g, &d.join("home/.ssh/id_test")), fs::READ_DIR);
        assert_eq!(rights_of(&g, &d.join("home/project/src/main.rs")), ALL);
        assert_eq!(rights_of(&g, &d.join("other/x")), ALL);
        assert_eq!(rights_of(&g, Path::new("/usr/bin/env")), ALL);
        assert_eq!(
            rights_of(&g, &d.join("home/.bashrc")),
            ALL & fs::ON_FILES | fs::READ_DIR
        );
        // The home directory itself cannot get new entries: a grant on it would cover .ssh.
        let home = rights_of(&g, &d.join("home"));
        assert_eq!(home & (fs::MAKE_REG | fs::REMOVE_FILE), 0);
        assert!(g.collateral.iter().any(|(p, _)| p == &d.join("home")));
        assert!(g.collateral.iter().any(|(p, _)| p == Path::new("/")));
    }

    #[test]
    fn action_rules_withhold_only_their_rights() {
        let dir = tree();
        let d = dir.path();
        let write = fs::WRITE_FILE | fs::TRUNCATE | fs::MAKE_ANY;
        let g = compute(
            &[Target::Prefix {
                path: d.join("etc"),
                rule: 0,
                rights: write,
            }],
            ALL,
        );
        let passwd = rights_of(&g, &d.join("etc/passwd"));
        assert_eq!(passwd & write, 0);
        assert_ne!(passwd & fs::READ_FILE, 0);
        assert_ne!(
            rights_of(&g, &d.join("etc/ssh/sshd_config")) & fs::EXECUTE,
            0
        );
        assert_eq!(rights_of(&g, &d.join("other/x")), ALL);
        // No collateral inside the protected directory: losing rights there is the rule.
        assert!(!g
            .collateral
            .iter()
            .any(|(p, _)| p.starts_with(d.join("etc"))));
    }

    #[test]
    fn exact_files_and_exceptions() {
        let dir = tree();
        let d = dir.path();
        let g = compute(
            &[
                Target::Exact {
                    path: d.join("home/project/.env"),
                    rule: 0,
                    file: fs::ON_FILES,
                    entry: fs::REMOVE_ANY,
                },
                Target::Prefix {
                    path: d.join("etc"),
                    rule: 1,
                    rights: fs::READ_FILE,
                },
                Target::ExceptExact {
                    path: d.join("etc/passwd"),
                    rule: 1,
                },
                Target::ExceptPrefix {
                    path: d.join("etc/ssh"),
                    rule: 1,
                },
            ],
            ALL,
        );
        assert_eq!(
            rights_of(&g, &d.join("home/project/.env")) & fs::ON_FILES,
            0
        );
        assert_eq!(rights_of(&g, &d.join("home/project/src/main.rs")), ALL);
        let project = rights_of(&g, &d.join("home/project"));
        assert_eq!(project & fs::REMOVE_FILE, 0);
        assert_ne!(project & fs::MAKE_REG, 0);
        assert_ne!(rights_of(&g, &d.join("etc/passwd")) & fs::READ_FILE, 0);
        assert_ne!(
            rights_of(&g, &d.join("etc/ssh/sshd_config")) & fs::READ_FILE,
            0
        );
        std::fs::write(d.join("etc/group"), "x").unwrap();
        let g2 = compute(
            &[Target::Prefix {
                path: d.join("etc"),
                rule: 1,
                rights: fs::READ_FILE,
            }],
            ALL,
        );
        assert_eq!(rights_of(&g2, &d.join("etc/group")) & fs::READ_FILE, 0);
    }

    #[test]
    fn a_missing_target_closes_its_deepest_existing_ancestor() {
        let dir = tree();
        let d = dir.path();
        let g = compute(
            &[Target::Exact {
                path: d.join("home/.aws/credentials"),
                rule: 0,
                file: fs::ON_FILES,
                entry: fs::MAKE_ANY,
            }],
            ALL,
        );
        let home = rights_of(&g, &d.join("home"));
        assert_eq!(home & (fs::MAKE_DIR | fs::READ_FILE), 0);
        assert_eq!(rights_of(&g, &d.join("home/project/src/main.rs")), ALL);
    }
}
