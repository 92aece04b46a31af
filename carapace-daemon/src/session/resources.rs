//! Memory and process-count limits of sessions (`carapace run --memory M --pids N`), through
//! the cgroup v2 `memory` and `pids` controllers of the session cgroup.
//!
//! At start the daemon enables both controllers for the children of the Carapace root (in the
//! hierarchy root's and the Carapace root's `cgroup.subtree_control`) and remembers why a
//! controller is unavailable when it cannot. A session that asks for a limit the daemon cannot
//! set is refused, never run unlimited. When a session ends, `memory.events` and `pids.events`
//! say whether it hit its limits.
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::cgroup::{CarapaceRoot, Hierarchy};
use crate::io_error::IoError;
use crate::sandbox::limits::format_size;

/// What a session asks to be bounded by (`None`: unlimited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// `memory.max`, in bytes.
    pub memory_max: Option<u64>,
    /// `pids.max`: processes and threads at once.
    pub pids_max: Option<u64>,
}

impl Resources {
    /// From the request's fields, where 0 means "no limit".
    #[must_use]
    pub fn from_request(memory_max: u64, pids_max: u64) -> Self {
        Self {
            memory_max: (memory_max > 0).then_some(memory_max),
            pids_max: (pids_max > 0).then_some(pids_max),
        }
    }
}

/// A limit the daemon cannot set, or could not set on a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    #[error(
        "cannot limit the session's {what} ({flag}): {why}. Run without {flag} to go on \
         without that limit"
    )]
    Unavailable {
        what: &'static str,
        flag: &'static str,
        #[source]
        why: ControllerUnavailable,
    },
    #[error("cannot set the session's limit: {0}")]
    Write(#[from] IoError),
}

/// Why a cgroup controller cannot limit sessions.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ControllerUnavailable {
    #[error(
        "the cgroup v2 hierarchy at {} has no {name} controller (its cgroup.controllers \
         lists: {listed}); on hosts with a hybrid cgroup setup {name} lives on cgroup v1 — \
         boot with systemd.unified_cgroup_hierarchy=1 to use cgroup v2 only",
        mount.display()
    )]
    Missing {
        mount: PathBuf,
        name: &'static str,
        listed: String,
    },
    #[error("cannot enable the {name} controller in {}: {source}", file.display())]
    Enable {
        name: &'static str,
        file: PathBuf,
        /// Shared: the state is kept (and cloned) for every session that asks.
        #[source]
        source: Arc<io::Error>,
    },
}

/// The controllers below the Carapace root: `Ok` when usable, else why not.
#[derive(Clone, Debug)]
pub struct Controllers {
    memory: Result<(), ControllerUnavailable>,
    pids: Result<(), ControllerUnavailable>,
}

impl Controllers {
    /// Enables `memory` and `pids` for the session cgroups below `root` as far as the
    /// hierarchy allows, and records why each one that stays off is unavailable.
    #[must_use]
    pub fn enable(hierarchy: &Hierarchy, root: &CarapaceRoot) -> Self {
        let enable = |name: &'static str| -> Result<(), ControllerUnavailable> {
            let offered =
                fs::read_to_string(hierarchy.mount.join("cgroup.controllers")).unwrap_or_default();
            if !offered.split_whitespace().any(|c| c == name) {
                let listed = if offered.trim().is_empty() {
                    "none"
                } else {
                    offered.trim()
                };
                return Err(ControllerUnavailable::Missing {
                    mount: hierarchy.mount.clone(),
                    name,
                    listed: listed.to_owned(),
                });
            }
            for dir in [hierarchy.mount.as_path(), root.dir.as_path()] {
                let file = dir.join("cgroup.subtree_control");
                let on = fs::read_to_string(&file)
                    .is_ok_and(|t| t.split_whitespace().any(|c| c == name));
                if !on {
                    if let Err(e) = fs::write(&file, format!("+{name}")) {
                        return Err(ControllerUnavailable::Enable {
                            name,
                            file,
                            source: Arc::new(e),
                        });
                    }
                }
            }
            Ok(())
        };
        let controllers = Self {
            memory: enable("memory"),
            pids: enable("pids"),
        };
        for (name, state) in [("memory", &controllers.memory), ("pids", &controllers.pids)] {
            match state {
                Ok(()) => tracing::info!("sessions can be limited by the {name} controller"),
                Err(why) => tracing::info!("{name} limits are unavailable: {why}"),
            }
        }
        controllers
    }

    /// Refuses limits whose controller is unavailable.
    pub fn check(&self, wanted: &Resources) -> Result<(), LimitError> {
        let unavailable = |what, flag, state: &Result<(), ControllerUnavailable>| match state {
            Ok(()) => Ok(()),
            Err(why) => Err(LimitError::Unavailable {
                what,
                flag,
                why: why.clone(),
            }),
        };
        if wanted.memory_max.is_some() {
            unavailable("memory", "--memory", &self.memory)?;
        }
        if wanted.pids_max.is_some() {
            unavailable("process count", "--pids", &self.pids)?;
        }
        Ok(())
    }
}

/// Writes the limits of the session cgroup `dir` (before any process joins it). With a
/// memory limit, swap is limited to nothing too, so that the limit means what it says.
pub fn apply(dir: &Path, wanted: &Resources) -> Result<(), LimitError> {
    let write = |name: &str, value: String| -> Result<(), LimitError> {
        let file = dir.join(name);
        fs::write(&file, value).map_err(|e| IoError::new("write", file, e).into())
    };
    if let Some(bytes) = wanted.memory_max {
        write("memory.max", bytes.to_string())?;
        // Absent without swap accounting: then there is no swap to limit.
        match fs::write(dir.join("memory.swap.max"), "0") {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(IoError::new("write", dir.join("memory.swap.max"), e).into());
            }
            _ => {}
        }
    }
    if let Some(n) = wanted.pids_max {
        write("pids.max", n.to_string())?;
    }
    Ok(())
}

/// A limit a session ran into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimitHit {
    /// The OOM killer killed `oom_kill` processes at the `limit` (bytes).
    Memory { limit: u64, oom_kill: u64 },
    /// `refused` forks (or thread creations) failed at the `limit`.
    Pids { limit: u64, refused: u64 },
}

impl LimitHit {
    /// `memory` or `pids`.
    #[must_use]
    pub fn resource(&self) -> &'static str {
        match self {
            Self::Memory { .. } => "memory",
            Self::Pids { .. } => "pids",
        }
    }

    /// What happened, for `carapace run`'s stderr and the ledger.
    #[must_use]
    pub fn message(&self) -> String {
        match self {
            Self::Memory { limit, oom_kill } => format!(
                "killed: memory limit {} reached (oom_kill {oom_kill})",
                format_size(*limit)
            ),
            Self::Pids { limit, refused } => {
                format!("fork refused: pids limit {limit} reached (pids.events max {refused})")
            }
        }
    }
}

/// The limits the session cgroup `dir` ran into so far. Read before the cgroup is removed.
#[must_use]
pub fn hits(dir: &Path) -> Vec<LimitHit> {
    let read = |name: &str| fs::read_to_string(dir.join(name)).ok();
    let mut hits = Vec::new();
    let memory_limit = read("memory.max").as_deref().and_then(parse_max);
    let oom_kill = read("memory.events")
        .as_deref()
        .and_then(|t| event(t, "oom_kill"));
    if let (Some(limit), Some(oom_kill)) = (memory_limit, oom_kill.filter(|n| *n > 0)) {
        hits.push(LimitHit::Memory { limit, oom_kill });
    }
    if let Some(limit) = read("pids.max").as_deref().and_then(parse_max) {
        // Before Linux 6.13 a refused fork is counted in the forking process's own cgroup,
        // which may be nested inside the session: take the largest count of the tree.
        let refused = pids_refused(dir);
        if refused > 0 {
            hits.push(LimitHit::Pids { limit, refused });
        }
    }
    hits
}

fn pids_refused(dir: &Path) -> u64 {
    let own = fs::read_to_string(dir.join("pids.events"))
        .ok()
        .and_then(|t| event(&t, "max"))
        .unwrap_or(0);
    let nested = fs::read_dir(dir).map_or(0, |rd| {
        rd.filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| pids_refused(&e.path()))
            .max()
            .unwrap_or(0)
    });
    own.max(nested)
}

/// A limit file's value: a number, or `None` for `max` (unlimited) and anything unreadable.
#[must_use]
pub fn parse_max(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// The counter `key` of a flat-keyed file such as `memory.events` (`oom_kill 1` per line).
#[must_use]
pub fn event(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        (fields.next()? == key).then(|| fields.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMORY_EVENTS: &str = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";

    #[test]
    fn counters() {
        assert_eq!(event(MEMORY_EVENTS, "oom_kill"), Some(1));
        assert_eq!(event(MEMORY_EVENTS, "max"), Some(12));
        assert_eq!(event(MEMORY_EVENTS, "oom_group"), None);
        assert_eq!(event("max 3\n", "max"), Some(3));
        assert_eq!(event("max x\n", "max"), None);
        assert_eq!(event("", "max"), None);
        assert_eq!(parse_max("max\n"), None);
        assert_eq!(parse_max("67108864\n"), Some(64 << 20));
    }

    #[test]
    fn messages() {
        let m = LimitHit::Memory {
            limit: 512 << 20,
            oom_kill: 1,
        };
        assert_eq!(
            m.message(),
            "killed: memory limit 512 MiB reached (oom_kill 1)"
        );
        let p = LimitHit::Pids {
            limit: 200,
            refused: 7,
        };
        assert_eq!(
            p.message(),
            "fork refused: pids limit 200 reached (pids.events max 7)"
        );
        assert_eq!((m.resource(), p.resource()), ("memory", "pids"));
    }

    #[test]
    fn hits_are_read_from_the_cgroup_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        assert!(hits(p).is_empty(), "no files, no hits");
        fs::write(p.join("memory.max"), "max\n").unwrap();
        fs::write(p.join("memory.events"), MEMORY_EVENTS).unwrap();
        assert!(hits(p).is_empty(), "no limit, no hit");
        fs::write(p.join("memory.max"), "67108864\n").unwrap();
        fs::write(p.join("pids.max"), "20\n").unwrap();
        fs::write(p.join("pids.events"), "max 0\n").unwrap();
        let nested = p.join("inner");
        fs::create_dir(&nested).unwrap();
        fs::write(nested.join("pids.events"), "max 4\n").unwrap();
        assert_eq!(
            hits(p),
            vec![
                LimitHit::Memory {
                    limit: 64 << 20,
                    oom_kill: 1
                },
                LimitHit::Pids {
                    limit: 20,
                    refused: 4
                }
            ]
        );
    }

    #[test]
    fn unavailable_controllers_refuse_only_what_is_asked() {
        let c = Controllers {
            memory: Err(ControllerUnavailable::Missing {
                mount: "/sys/fs/cgroup".into(),
                name: "memory",
                listed: "cpu io".into(),
            }),
            pids: Ok(()),
        };
        assert!(c.check(&Resources::default()).is_ok());
        assert!(c.check(&Resources::from_request(0, 20)).is_ok());
        let e = c.check(&Resources::from_request(64 << 20, 0)).unwrap_err();
        assert!(
            e.to_string().contains("--memory") && e.to_string().contains("no memory controller"),
            "{e}"
        );
    }

    proptest::proptest! {
        #[test]
        fn cgroup_files_never_panic(text in "\\PC{0,64}", key in "[a-z_]{0,9}") {
            let _ = event(&text, &key);
            let _ = parse_max(&text);
        }
    }
}
