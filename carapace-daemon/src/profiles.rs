//! Named profiles (`carapace run --profile NAME`): `$CARAPACE_DATA_DIR/profiles/NAME.yaml`,
//! a rule file in the normal rule language that a session runs under instead of the main
//! rule file, so that different agents get different rules at the same time.
//!
//! Layering: a profile's rules are the built-in packs its own `builtin:` selects (the
//! always-on packs whatever it says), its own rules, the daemon's run-time locked packs, and
//! every locked rule of the main rule set and every one that holds in shadow sessions
//! (`RuleSet::load_profile`). The main rule file's
//! other rules do not apply: a profile recorded with `carapace run --record` is an
//! allow-list that must stand on the packs alone. In the kernel the main set and the
//! profiles in use share one image (`carapace_policy::rules::union`), each session picking
//! its rules with its `SessionState` bits.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use carapace_policy::rules::union::{self, ProfileBits};
use carapace_policy::rules::{Diagnostics, RuleSet};

use crate::fingerprint::{fingerprint, Fingerprint};

/// Longest profile name.
const MAX_NAME: usize = 64;

/// The directory the profiles live in. The one place that says where: `carapace run
/// --record` writes its proposals here.
#[must_use]
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("profiles")
}

/// Why a profile cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    #[error(
        "profile name `{0}` is not allowed: use letters, digits, `-`, `_` and `.` (no `/`, \
         no `..`, not starting with `.` or `-`), at most {MAX_NAME} characters"
    )]
    BadName(String),
    #[error("no profile `{name}` in {}: {}", dir.display(), existing_list(.existing))]
    Missing {
        name: String,
        dir: PathBuf,
        existing: Vec<String>,
    },
    #[error("profile `{name}` does not validate:\n{diags}")]
    Invalid { name: String, diags: Diagnostics },
    #[error(
        "the main rules and the profiles in use ({names}) do not fit one kernel image \
         together; no session of these profiles can start until some end or the rules \
         shrink:\n{diags}"
    )]
    Union { names: String, diags: Diagnostics },
}

fn existing_list(names: &[String]) -> String {
    if names.is_empty() {
        "there are none (write NAME.yaml there, or record one with `carapace run --record`)"
            .to_owned()
    } else {
        format!("the profiles there are {}", names.join(", "))
    }
}

/// Refuses names that would leave the profile directory or hide there.
pub fn check_name(name: &str) -> Result<(), ProfileError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with(['.', '-'])
        && !name.contains("..")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(ProfileError::BadName(name.to_owned()))
    }
}

/// The profiles in `data_dir` (names of `profiles/*.yaml`), sorted.
#[must_use]
pub fn names(data_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir(data_dir)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".yaml")?;
            check_name(stem).ok()?;
            Some(stem.to_owned())
        })
        .collect();
    names.sort();
    names
}

/// The file of profile `name`, which must exist.
pub fn path(data_dir: &Path, name: &str) -> Result<PathBuf, ProfileError> {
    check_name(name)?;
    let path = dir(data_dir).join(format!("{name}.yaml"));
    if path.is_file() {
        Ok(path)
    } else {
        Err(ProfileError::Missing {
            name: name.to_owned(),
            dir: dir(data_dir),
            existing: names(data_dir),
        })
    }
}

/// Reads and validates profile `name` against the main rule set `main` (whose locked rules
/// it keeps), with the daemon's run-time locked packs `locked` (source, text).
pub fn load(
    data_dir: &Path,
    name: &str,
    main: &RuleSet,
    locked: &[(String, String)],
) -> Result<RuleSet, ProfileError> {
    let path = path(data_dir, name)?;
    let locked: Vec<(&str, &str)> = locked
        .iter()
        .map(|(s, t)| (s.as_str(), t.as_str()))
        .collect();
    RuleSet::load_profile(&path, &crate::policy_host::options(), &locked, main).map_err(|diags| {
        ProfileError::Invalid {
            name: name.to_owned(),
            diags,
        }
    })
}

/// One loaded profile.
#[derive(Debug)]
struct Loaded {
    rules: Arc<RuleSet>,
    bits: ProfileBits,
    /// The file's state when read: a session start reads a changed file again.
    fingerprint: Option<Fingerprint>,
}

/// A profile of the directory left out of the kernel image, and why (shown by `carapace
/// status` and a reload's diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub name: String,
    pub why: String,
}

/// The profiles loaded and the kernel image they share with the main set.
#[derive(Debug, Default)]
pub struct Profiles {
    by_name: BTreeMap<String, Loaded>,
    /// The union image's rules; `None` when no profile is loaded (the main set's image is
    /// the kernel's).
    union: Option<Arc<RuleSet>>,
    /// Profiles of the directory that did not load or did not fit with the others.
    left_out: Vec<LeftOut>,
}

impl Profiles {
    /// Loads every profile of the directory plus `required` against `main` and compiles
    /// their union image (blocking: file I/O and the automaton), so that a session of any
    /// of them starts without waiting for a whole-image rebuild. `required` are the
    /// profiles of running sessions, or the one a new session asks for: one of them that
    /// does not validate, or that does not fit the kernel, is an error and the caller keeps
    /// what it had (fail closed). Any other profile that does not validate is left out
    /// and reported by name and `file:line:column` (a session of it is refused with the same
    /// diagnostics); when all of them together do not fit the kernel's limits, only the
    /// required ones are compiled and the rest wait for their first session.
    pub fn build(
        data_dir: &Path,
        main: &RuleSet,
        required: &BTreeSet<String>,
        locked: &[(String, String)],
    ) -> Result<Self, ProfileError> {
        let mut all: BTreeSet<String> = names(data_dir).into_iter().collect();
        all.extend(required.iter().cloned());
        let mut sets = Vec::with_capacity(all.len());
        let mut left_out = Vec::new();
        for name in all {
            let before = path(data_dir, &name).ok().and_then(|p| fingerprint(&p));
            match load(data_dir, &name, main, locked) {
                Ok(set) => sets.push((name, set, before)),
                Err(e) if required.contains(&name) => return Err(e),
                Err(e) => {
                    tracing::warn!(profile = %name, "profile left out of the kernel image: {e}");
                    left_out.push(LeftOut {
                        name,
                        why: e.to_string(),
                    });
                }
            }
        }
        match Self::compile(main, sets) {
            Ok(mut built) => {
                built.left_out = left_out;
                Ok(built)
            }
            Err((e, sets)) => {
                // Together they do not fit: the required ones alone, the others at their
                // first session (which then reports the limit).
                let (needed, rest): (Vec<_>, Vec<_>) =
                    sets.into_iter().partition(|(n, _, _)| required.contains(n));
                if rest.is_empty() {
                    return Err(e);
                }
                for (name, _, _) in rest {
                    tracing::warn!(
                        profile = %name,
                        "profile left out of the kernel image: it does not fit with the others"
                    );
                    left_out.push(LeftOut {
                        name,
                        why: "does not fit the kernel image with the other profiles; compiled \
                              at its first session"
                            .to_owned(),
                    });
                }
                let mut built = Self::compile(main, needed).map_err(|(e, _)| e)?;
                left_out.sort_by(|a, b| a.name.cmp(&b.name));
                built.left_out = left_out;
                Ok(built)
            }
        }
    }

    /// The union image of `main` and `sets` (name, rules, fingerprint); on failure the
    /// error and the sets back.
    #[allow(clippy::type_complexity)]
    fn compile(
        main: &RuleSet,
        sets: Vec<(String, RuleSet, Option<Fingerprint>)>,
    ) -> Result<Self, (ProfileError, Vec<(String, RuleSet, Option<Fingerprint>)>)> {
        if sets.is_empty() {
            return Ok(Self::default());
        }
        let refs: Vec<(&str, &RuleSet)> = sets.iter().map(|(n, s, _)| (n.as_str(), s)).collect();
        let built = match union::compile(main, &refs, &crate::policy_host::RealHost) {
            Ok(built) => built,
            Err(diags) => {
                let names = sets
                    .iter()
                    .map(|(n, _, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err((ProfileError::Union { names, diags }, sets));
            }
        };
        let mut bits = built.bits;
        let by_name = sets
            .into_iter()
            .map(|(name, rules, fingerprint)| {
                let loaded = Loaded {
                    rules: Arc::new(rules),
                    bits: bits.remove(&name).unwrap_or_default(),
                    fingerprint,
                };
                (name, loaded)
            })
            .collect();
        Ok(Self {
            by_name,
            union: Some(Arc::new(built.set)),
            left_out: Vec::new(),
        })
    }

    /// The profiles of the directory that are not loaded, and why.
    #[must_use]
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
    }

    /// Profile `name`'s rules (Layer 1 of its sessions), if it is in use.
    #[must_use]
    pub fn rules(&self, name: &str) -> Option<&Arc<RuleSet>> {
        self.by_name.get(name).map(|l| &l.rules)
    }

    /// The kernel bits of profile `name`'s sessions, if it is in use.
    #[must_use]
    pub fn bits(&self, name: &str) -> Option<&ProfileBits> {
        self.by_name.get(name).map(|l| &l.bits)
    }

    /// The union image's rules, when profiles are in use.
    #[must_use]
    pub fn union(&self) -> Option<&Arc<RuleSet>> {
        self.union.as_ref()
    }

    /// The profiles loaded.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Whether profile `name` is loaded from its file as it is now on disk.
    #[must_use]
    pub fn is_current(&self, data_dir: &Path, name: &str) -> bool {
        let Some(loaded) = self.by_name.get(name) else {
            return false;
        };
        let now = path(data_dir, name).ok().and_then(|p| fingerprint(&p));
        now.is_some() && now == loaded.fingerprint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_the_directory_are_refused() {
        for bad in [
            "", "../x", "a/b", "..", ".hidden", "a..b", "x y", "/abs", "é",
        ] {
            assert!(
                matches!(check_name(bad), Err(ProfileError::BadName(_))),
                "{bad:?}"
            );
        }
        for good in ["ci", "claude-code", "web_2", "v1.2"] {
            check_name(good).unwrap();
        }
    }

    #[test]
    fn a_missing_profile_names_the_directory_and_those_there() {
        let data = tempfile::tempdir().unwrap();
        let err = path(data.path(), "ci").unwrap_err().to_string();
        assert!(err.contains("profiles"), "{err}");
        assert!(err.contains("there are none"), "{err}");
        std::fs::create_dir(dir(data.path())).unwrap();
        std::fs::write(dir(data.path()).join("web.yaml"), "version: 1\n").unwrap();
        std::fs::write(dir(data.path()).join("build.yaml"), "version: 1\n").unwrap();
        std::fs::write(dir(data.path()).join("notes.txt"), "").unwrap();
        let err = path(data.path(), "ci").unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "no profile `ci` in {}",
                dir(data.path()).display()
            )),
            "{err}"
        );
        assert!(err.contains("the profiles there are build, web"), "{err}");
    }

    #[test]
    fn an_invalid_profile_reports_file_line_and_column() {
        let data = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir(data.path())).unwrap();
        let file = dir(data.path()).join("bad.yaml");
        std::fs::write(
            &file,
            "version: 1\nrules:\n  - block: \"/x\"\n    mode: blok\n",
        )
        .unwrap();
        let main = RuleSet::builtin(&crate::policy_host::options());
        let err = load(data.path(), "bad", &main, &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("{}:4:", file.display())), "{err}");
    }

    #[test]
    fn every_valid_profile_is_compiled_and_a_broken_one_is_left_out_by_name() {
        let data = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir(data.path())).unwrap();
        let pdir = dir(data.path());
        std::fs::write(
            pdir.join("a.yaml"),
            "version: 1\nrules:\n  - block: \"/srv/a/**\"\n",
        )
        .unwrap();
        std::fs::write(pdir.join("b.yaml"), "version: 1\nrules: []\n").unwrap();
        std::fs::write(pdir.join("bad.yaml"), "version: 1\nrules:\n  - blok: /x\n").unwrap();
        let main = RuleSet::builtin(&crate::policy_host::options());
        // Nothing in use: every valid profile is loaded, the broken one reported.
        let built = Profiles::build(data.path(), &main, &BTreeSet::new(), &[]).unwrap();
        assert_eq!(built.names().collect::<Vec<_>>(), ["a", "b"]);
        assert!(built.union().is_some());
        assert!(built.bits("a").is_some() && built.is_current(data.path(), "b"));
        let [left] = built.left_out() else {
            panic!("{:?}", built.left_out());
        };
        assert_eq!(left.name, "bad");
        let file = pdir.join("bad.yaml");
        assert!(
            left.why.contains(&format!("{}:3:", file.display())),
            "{}",
            left.why
        );
        // Required (a session asks for it, or runs it): the error, not a partial image.
        let required = BTreeSet::from(["bad".to_owned()]);
        let err = Profiles::build(data.path(), &main, &required, &[]).unwrap_err();
        assert!(matches!(err, ProfileError::Invalid { .. }), "{err}");
        // No profiles at all: the main image stays the kernel's.
        let empty = tempfile::tempdir().unwrap();
        let built = Profiles::build(empty.path(), &main, &BTreeSet::new(), &[]).unwrap();
        assert!(built.union().is_none() && built.left_out().is_empty());
    }

    #[test]
    fn a_changed_file_is_not_current() {
        let data = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir(data.path())).unwrap();
        let file = dir(data.path()).join("p.yaml");
        std::fs::write(&file, "version: 1\nrules:\n  - block: \"/srv/p/**\"\n").unwrap();
        let main = RuleSet::builtin(&crate::policy_host::options());
        let names = BTreeSet::from(["p".to_owned()]);
        let built = Profiles::build(data.path(), &main, &names, &[]).unwrap();
        assert!(built.is_current(data.path(), "p"));
        assert!(built.rules("p").is_some() && built.union().is_some());
        std::fs::write(&file, "version: 1\nrules:\n  - block: \"/srv/q/**\"\n").unwrap();
        assert!(!built.is_current(data.path(), "p"));
        assert!(!built.is_current(data.path(), "other"));
    }
}
