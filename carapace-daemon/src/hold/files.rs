//! The files a hold rule's patterns name now: fanotify marks inodes, so a pattern is held
//! on the files that exist when the rules are loaded (and reloaded). Files created later
//! under the pattern are not marked, and the rule refuses them until approved (approve
//! mode's refuse and retry).
use std::path::Path;

use carapace_policy::rules::pattern::PathPattern;
use carapace_policy::rules::{Rule, RuleSet};

/// At most this many files are held in all (`carapace_common::MAX_HELD_INODES`, the
/// kernel map's size); the rest refuse and retry.
pub const MAX_FILES: usize = carapace_common::MAX_HELD_INODES as usize;
/// How deep a walk below a pattern's fixed directory goes.
const MAX_DEPTH: usize = 16;

/// A hold rule and the files it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldRule {
    pub rule: String,
    pub files: Vec<String>,
}

/// Every hold rule of `rules` with the regular files its patterns name now, sorted; at
/// most [`MAX_FILES`] files in all (the first rules first).
#[must_use]
pub fn held(rules: &RuleSet) -> Vec<HeldRule> {
    let mut left = MAX_FILES;
    rules
        .rules()
        .iter()
        .filter(|r| r.hold)
        .map(|r| {
            let files = files_of(r, left);
            left -= files.len();
            HeldRule {
                rule: r.id.clone(),
                files,
            }
        })
        .collect()
}

/// The regular files `rule` matches below the fixed directories of its globs, at most
/// `limit`.
#[must_use]
pub fn files_of(rule: &Rule, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let Some(carapace_policy::rules::model::Cond::Path(patterns)) = &rule.cond else {
        return out;
    };
    for p in patterns {
        // `re:` patterns are refused with `hold` (validation): nothing to list.
        let PathPattern::Glob { expanded, .. } = p else {
            continue;
        };
        for glob in expanded {
            walk(Path::new(fixed_dir(glob)), rule, 0, limit, &mut out);
        }
    }
    out.sort();
    out.dedup();
    out.truncate(limit);
    out
}

/// The leading part of `glob` with no wildcard in it: the whole path for a plain path, else
/// the directory above the first component that has one.
fn fixed_dir(glob: &str) -> &str {
    let Some(at) = glob.find(['*', '?', '[', '{']) else {
        return glob;
    };
    match glob[..at].rfind('/') {
        Some(0) => "/",
        Some(slash) => &glob[..slash],
        None => "",
    }
}

/// Adds the regular files at or below `path` that `rule` matches, not following symlinks
/// (the kernel judges a link's target by its own path).
fn walk(path: &Path, rule: &Rule, depth: usize, limit: usize, out: &mut Vec<String>) {
    if out.len() >= limit {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_file() {
        if let Some(p) = path.to_str() {
            if rule.matches_path(p, rule.ops()) {
                out.push(p.to_owned());
            }
        }
        return;
    }
    if !meta.is_dir() || depth >= MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    for entry in entries.flatten() {
        walk(&entry.path(), rule, depth + 1, limit, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(yaml: &str) -> RuleSet {
        RuleSet::parse_with("rules.yaml", yaml, &crate::policy_host::options()).expect("valid")
    }

    #[test]
    fn the_fixed_directory_of_a_glob() {
        assert_eq!(fixed_dir("/srv/drafts/**"), "/srv/drafts");
        assert_eq!(fixed_dir("/srv/drafts/*.txt"), "/srv/drafts");
        assert_eq!(fixed_dir("/srv/a.txt"), "/srv/a.txt");
        assert_eq!(fixed_dir("/*.txt"), "/");
        assert_eq!(fixed_dir("/srv/d*/x"), "/srv");
    }

    #[test]
    fn a_hold_rule_holds_the_files_its_pattern_names_now() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        std::fs::create_dir_all(d.join("held/sub")).expect("mkdir");
        for f in [
            "held/a.txt",
            "held/sub/b.txt",
            "held/c.md",
            "held/keep.txt",
            "other.txt",
        ] {
            std::fs::write(d.join(f), f).expect("write");
        }
        std::os::unix::fs::symlink(d.join("other.txt"), d.join("held/link.txt")).expect("ln");
        let set = rules(&format!(
            "version: 1\nbuiltin: none\nrules:\n  - id: held\n    approve: \"{0}/held/**/*.txt\"\n    except: \"{0}/held/keep.txt\"\n    hold: true\n  - id: plain\n    approve: \"{0}/other.txt\"\n",
            d.display()
        ));
        let held = held(&set);
        let want: Vec<String> = ["held/a.txt", "held/sub/b.txt"]
            .iter()
            .map(|f| d.join(f).display().to_string())
            .collect();
        // Not the exception, not another extension, not a symlink, not a rule without hold.
        assert_eq!(
            held,
            vec![HeldRule {
                rule: "held".into(),
                files: want.clone()
            }]
        );
        // A file made after the load is not held until the next load.
        std::fs::write(d.join("held/new.txt"), "new").expect("write");
        assert_eq!(held[0].files, want);
        assert_eq!(super::held(&set)[0].files.len(), 3);
        // The limit cuts the list.
        let rule = set.by_id("held").expect("rule");
        assert_eq!(files_of(rule, 1).len(), 1);
    }
}
