//! Self-protection that follows where this daemon really keeps its files. The built-in
//! `self-protection` pack names the default places (/var/lib/carapace, /run/carapace,
//! /usr/local/bin/carapaced…); a daemon started with `--data-dir`, `--rules`, `--socket`, a
//! log file elsewhere or from a build directory would leave its real rules, profiles,
//! records, ledger and programs open to a plain `cat > …` from inside a session. So the
//! daemon adds locked rules (source `daemon:own-files`) for the paths it actually uses, in
//! the kernel image and Layer 1 of every session, main or profile; no rule file or profile
//! can turn them off (`RuleSource::locked`).
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

/// The source the rules are listed under (`carapace rules list`, denials).
pub const SOURCE: &str = "daemon:own-files";
/// Rule ids, each naming what it keeps so that a denial says which of Carapace's files.
pub const DATA_RULE: &str = "carapace-own-data-dir";
pub const RULES_RULE: &str = "carapace-own-rule-file";
pub const SOCKET_RULE: &str = "carapace-own-socket";
pub const PROGRAMS_RULE: &str = "carapace-own-programs";
pub const LOG_RULE: &str = "carapace-own-log";

/// The client's file name, looked for beside the daemon's executable.
const CLIENT: &str = "carapace";

/// What the built-in `self-protection` pack refuses at one of its places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// Every action: reading too (the data and config directories).
    All,
    /// Writes and deletes only (the programs, the socket's directory, the logs).
    Changes,
}

/// Directories the pack keeps whole (rules/builtin/self-protection.yaml; a unit test holds
/// the two together, actions included). A path in one of them needs no rule of its own when
/// the pack refuses there all that the path needs, and a denial there keeps naming the
/// pack's rule.
const PACK_DIRS: &[(&str, Kept)] = &[
    ("/var/lib/carapace", Kept::All),
    ("/etc/carapace", Kept::All),
    ("/run/carapace", Kept::Changes),
    ("/var/log/carapace", Kept::Changes),
];
/// Files the pack names one by one, for writes and deletes.
const PACK_FILES: &[&str] = &[
    "/usr/local/bin/carapace",
    "/usr/local/bin/carapaced",
    "/usr/bin/carapace",
    "/usr/bin/carapaced",
    "/usr/local/sbin/carapaced",
    "/usr/sbin/carapaced",
    "/var/log/carapaced.log",
];

/// Whether the self-protection pack already refuses at `path` all that `need` says: a data
/// dir under /run/carapace needs a rule of its own, since the pack lets sessions read
/// there (the socket) and the ledger must not be read.
fn in_pack(path: &Path, need: Kept) -> bool {
    let file = need == Kept::Changes && PACK_FILES.iter().any(|f| path == Path::new(f));
    file || PACK_DIRS
        .iter()
        .any(|&(d, kept)| path.starts_with(d) && (kept == Kept::All || need == Kept::Changes))
}

/// The files and directories this daemon uses, as absolute paths with symlinks resolved
/// where they exist (the kernel sees resolved paths).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OwnFiles {
    /// Rules, config, profiles, records, the session store and the audit ledger: no
    /// session may read, write or remove anything there.
    pub data_dir: Option<PathBuf>,
    /// `--rules FILE` (outside the data dir it needs its own rule).
    pub rule_file: Option<PathBuf>,
    /// The API socket.
    pub socket: Option<PathBuf>,
    /// carapaced and the `carapace` beside it.
    pub programs: Vec<PathBuf>,
    /// Files the daemon's stdout/stderr go to.
    pub logs: Vec<PathBuf>,
}

impl OwnFiles {
    /// This process's files: the given directories plus its executable, the client beside
    /// it, and stdout/stderr when they are regular files (a service's log).
    #[must_use]
    pub fn of_this_daemon(data_dir: &Path, rule_file: Option<&Path>, socket: &Path) -> Self {
        let mut programs = Vec::new();
        if let Ok(exe) = std::env::current_exe() {
            let exe = resolve(&exe);
            if let Some(client) = exe.parent().map(|d| d.join(CLIENT)) {
                if client.is_file() && client != exe {
                    programs.push(client);
                }
            }
            programs.insert(0, exe);
        }
        let mut logs: Vec<PathBuf> = ["/proc/self/fd/1", "/proc/self/fd/2"]
            .iter()
            .filter_map(|fd| std::fs::canonicalize(fd).ok())
            .filter(|p| p.is_file())
            .collect();
        logs.dedup();
        Self {
            data_dir: Some(resolve(data_dir)),
            rule_file: rule_file.map(resolve),
            socket: Some(resolve(socket)),
            programs,
            logs,
        }
    }

    /// The locked rules (source, rule text) that keep these files from sessions. Paths a
    /// pattern cannot name literally (glob characters, quotes, control characters) are
    /// left out and returned second, for the caller to warn about.
    #[must_use]
    pub fn locked_rules(&self) -> ((String, String), Vec<PathBuf>) {
        let mut skipped = Vec::new();
        let mut text = String::new();
        let mut add = |id: &str, paths: Vec<String>, write_only: bool, message: &str| {
            if paths.is_empty() {
                return;
            }
            let list = paths
                .iter()
                .map(|p| format!("\"{p}\""))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = write!(text, "  - id: {id}\n    block: [{list}]\n");
            if write_only {
                text.push_str("    actions: [write, delete]\n");
            }
            let _ = write!(
                text,
                "    category: self-protection\n    locked: true\n    message: \"{message}\"\n"
            );
        };
        let mut literal = |path: &Path, need: Kept| -> Option<String> {
            if in_pack(path, need) {
                return None;
            }
            let s = path.to_str().filter(|s| is_literal(s));
            if s.is_none() {
                skipped.push(path.to_path_buf());
            }
            s.map(str::to_owned)
        };
        // A data dir of `/` would be every file; such a daemon protects nothing this way.
        if let Some(dir) = self.data_dir.as_deref().filter(|d| d.parent().is_some()) {
            if let Some(d) = literal(dir, Kept::All) {
                add(
                    DATA_RULE,
                    vec![d.clone(), format!("{d}/**")],
                    false,
                    "Carapace's data directory (rules, profiles, records, the audit ledger) is off limits to agents; ask the user to change a rule (carapace rules …).",
                );
            }
        }
        if let Some(file) = &self.rule_file {
            if let Some(f) = literal(file, Kept::Changes) {
                add(
                    RULES_RULE,
                    vec![f],
                    true,
                    "Carapace's rule file is off limits to agents; ask the user to change a rule.",
                );
            }
        }
        if let Some(socket) = &self.socket {
            let mut paths: Vec<String> = literal(socket, Kept::Changes).into_iter().collect();
            // The socket's directory whole only when it is Carapace's own (the default
            // /run/carapace); `--socket /tmp/c.sock` must not close /tmp to sessions.
            if let Some(dir) = socket.parent().filter(|d| is_own_dir(d)) {
                if let Some(d) = literal(dir, Kept::Changes) {
                    paths.extend([d.clone(), format!("{d}/**")]);
                }
            }
            add(
                SOCKET_RULE,
                paths,
                true,
                "Carapace's socket is off limits to agents (talking to it is fine).",
            );
        }
        let programs = self
            .programs
            .iter()
            .filter_map(|p| literal(p, Kept::Changes))
            .collect();
        add(
            PROGRAMS_RULE,
            programs,
            true,
            "Carapace's programs are off limits to agents.",
        );
        let logs = self
            .logs
            .iter()
            .filter_map(|p| literal(p, Kept::Changes))
            .collect();
        add(
            LOG_RULE,
            logs,
            true,
            "Carapace's log is the record of what agents did; agents may not write or remove it.",
        );
        let text = if text.is_empty() {
            "version: 1\nrules: []\n".to_owned()
        } else {
            format!("version: 1\nrules:\n{text}")
        };
        ((SOURCE.to_owned(), text), skipped)
    }
}

/// A directory that is Carapace's alone: its name says so.
fn is_own_dir(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains("carapace"))
}

/// Whether `path` reads as itself in a path pattern and inside a YAML double-quoted string.
fn is_literal(path: &str) -> bool {
    path.starts_with('/')
        && !path
            .chars()
            .any(|c| matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '"' | '\\') || c.is_control())
}

/// `path` made absolute with symlinks resolved as far as it exists (a data dir the daemon
/// creates later keeps its missing tail as given).
fn resolve(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |cwd| cwd.join(path))
    };
    let mut existing = absolute.clone();
    let mut tail = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            return tail.iter().rev().fold(real, |p, c: &PathBuf| p.join(c));
        }
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            return normalise(&absolute);
        };
        tail.push(PathBuf::from(name));
        existing = parent.to_path_buf();
    }
}

/// `.` and `..` taken out lexically (for a path none of which exists).
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_policy::engine::{self, Activation, Context, Layer, ToolCall};
    use carapace_policy::rules::{Mode, RuleSet};

    fn files(dir: &Path) -> OwnFiles {
        OwnFiles {
            data_dir: Some(dir.join("data")),
            rule_file: Some(dir.join("etc/rules.yaml")),
            socket: Some(dir.join("run/c.sock")),
            programs: vec![dir.join("bin/carapaced"), dir.join("bin/carapace")],
            logs: vec![dir.join("carapaced.log")],
        }
    }

    fn write(rules: &RuleSet, path: &Path) -> engine::Decision {
        let call = serde_json::json!({"tool": "Write",
            "input": {"file_path": path, "content": "version: 1\nbuiltin: none\n"}});
        let ext = ToolCall::from_json(&call)
            .unwrap()
            .extract(&Context::default());
        engine::evaluate(rules, &ext, &Activation::default(), Layer::ToolCall)
    }

    fn read(rules: &RuleSet, path: &Path) -> engine::Decision {
        let call = serde_json::json!({"tool": "Read", "input": {"file_path": path}});
        let ext = ToolCall::from_json(&call)
            .unwrap()
            .extract(&Context::default());
        engine::evaluate(rules, &ext, &Activation::default(), Layer::ToolCall)
    }

    fn refused_by(d: &engine::Decision, id: &str) -> bool {
        d.decision == Mode::Block && d.matches.iter().any(|m| m.id == id)
    }

    #[test]
    fn the_rule_set_holds_the_daemons_real_paths_in_the_kernel_and_layer1() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let (locked, skipped) = files(&dir).locked_rules();
        assert!(skipped.is_empty(), "{skipped:?}");
        let extra = [(locked.0.as_str(), locked.1.as_str())];
        let file = dir.join("rules.yaml");
        // A file that selects no pack: the daemon's own rules hold all the same.
        std::fs::write(&file, "version: 1\nbuiltin: none\nrules: []\n").unwrap();
        let opts = crate::policy_host::options();
        let rules = RuleSet::load_with_locked(Some(&file), &opts, &extra)
            .unwrap_or_else(|d| panic!("{d}\n{}", locked.1));
        for id in [DATA_RULE, RULES_RULE, SOCKET_RULE, PROGRAMS_RULE, LOG_RULE] {
            let rule = rules.by_id(id).unwrap_or_else(|| panic!("{id}"));
            assert!(rule.locked, "{id}");
            assert_eq!(rule.source, SOURCE);
            assert!(rule.kernel_index.is_some(), "{id}: {:?}", rule.enforcement);
            assert!(rule.holds_in_shadow(), "{id}");
        }
        // Not for the Landlock fallback (see `api::kernel_rules`).
        for k in crate::api::kernel_rules::kernel_rules(&rules) {
            if k.id.starts_with("carapace-own-") {
                assert!(k.exact.is_empty() && k.prefixes.is_empty(), "{k:?}");
                assert!(!k.userspace_reason.is_empty(), "{k:?}");
            }
        }
        let profile = dir.join("data/profiles/x.yaml");
        assert!(refused_by(&write(&rules, &profile), DATA_RULE));
        assert!(refused_by(
            &read(&rules, &dir.join("data/audit/ledger-000001.jsonl")),
            DATA_RULE
        ));
        assert!(refused_by(
            &write(&rules, &dir.join("etc/rules.yaml")),
            RULES_RULE
        ));
        assert!(refused_by(
            &write(&rules, &dir.join("bin/carapaced")),
            PROGRAMS_RULE
        ));
        assert!(refused_by(
            &write(&rules, &dir.join("carapaced.log")),
            LOG_RULE
        ));
        assert!(refused_by(
            &write(&rules, &dir.join("run/c.sock")),
            SOCKET_RULE
        ));
        // Reading the programs, the rule file's neighbours, the socket's directory (not
        // named after Carapace) stay open.
        assert!(!refused_by(
            &read(&rules, &dir.join("bin/carapaced")),
            PROGRAMS_RULE
        ));
        let d = write(&rules, &dir.join("etc/other.yaml"));
        assert_eq!(d.decision, Mode::Allow, "{d:?}");
        let d = write(&rules, &dir.join("run/other"));
        assert_eq!(d.decision, Mode::Allow, "{d:?}");
    }

    #[test]
    fn a_profile_cannot_drop_them() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let (locked, _) = files(&dir).locked_rules();
        let extra = [(locked.0.as_str(), locked.1.as_str())];
        let opts = crate::policy_host::options();
        let main = RuleSet::load_with_locked(None, &opts, &extra).unwrap();
        let profile = dir.join("p.yaml");
        // No pack, nothing said: still refused.
        std::fs::write(&profile, "version: 1\nbuiltin: none\nrules: []\n").unwrap();
        let rules = RuleSet::load_profile(&profile, &opts, &extra, &main).unwrap();
        assert!(refused_by(
            &write(&rules, &dir.join("data/profiles/p.yaml")),
            DATA_RULE
        ));
        // Reusing the id, or excepting it, is an error.
        std::fs::write(
            &profile,
            format!("version: 1\nrules:\n  - id: {DATA_RULE}\n    block: /nothing\n"),
        )
        .unwrap();
        assert!(RuleSet::load_profile(&profile, &opts, &extra, &main).is_err());
        std::fs::write(
            &profile,
            format!(
                "version: 1\nexceptions:\n  - rule: {DATA_RULE}\n    except: [\"{}/data/**\"]\n",
                dir.display()
            ),
        )
        .unwrap();
        assert!(RuleSet::load_profile(&profile, &opts, &extra, &main).is_err());
    }

    #[test]
    fn the_default_places_are_left_to_the_pack() {
        // The table says what the pack refuses; the pack's own rules, evaluated, agree.
        let pack = RuleSet::load_with_locked(None, &crate::policy_host::options(), &[]).unwrap();
        let by_pack = |d: &engine::Decision| {
            d.decision == Mode::Block
                && d.matches
                    .iter()
                    .any(|m| m.source.contains("self-protection"))
        };
        for path in PACK_FILES {
            assert!(by_pack(&write(&pack, Path::new(path))), "{path}");
        }
        for &(dir, kept) in PACK_DIRS {
            let inside = Path::new(dir).join("x");
            assert!(by_pack(&write(&pack, &inside)), "{dir}");
            assert_eq!(by_pack(&read(&pack, &inside)), kept == Kept::All, "{dir}");
        }
        let default = OwnFiles {
            data_dir: Some(PathBuf::from("/var/lib/carapace")),
            rule_file: Some(PathBuf::from("/etc/carapace/rules.yaml")),
            socket: Some(PathBuf::from("/run/carapace/carapace.sock")),
            programs: vec![PathBuf::from("/usr/local/sbin/carapaced")],
            logs: vec![PathBuf::from("/var/log/carapaced.log")],
        };
        let ((_, text), skipped) = default.locked_rules();
        assert!(skipped.is_empty());
        assert_eq!(text, "version: 1\nrules: []\n");
        RuleSet::load_with_locked(None, &crate::policy_host::options(), &[(SOURCE, &text)])
            .unwrap();
    }

    /// Where the pack refuses only changes, a data dir needs its own rule: the ledger and
    /// records must not be readable.
    #[test]
    fn a_data_dir_where_the_pack_refuses_only_writes_gets_its_own_rule() {
        for dir in ["/run/carapace/data", "/var/log/carapace/state"] {
            let own = OwnFiles {
                data_dir: Some(PathBuf::from(dir)),
                ..OwnFiles::default()
            };
            let ((source, text), _) = own.locked_rules();
            assert!(text.contains(DATA_RULE), "{dir}: {text}");
            let rules = RuleSet::load_with_locked(
                None,
                &crate::policy_host::options(),
                &[(source.as_str(), text.as_str())],
            )
            .unwrap();
            let ledger = Path::new(dir).join("audit/ledger-000001.jsonl");
            assert!(refused_by(&read(&rules, &ledger), DATA_RULE), "{dir}");
        }
    }

    #[test]
    fn the_socket_directory_is_closed_only_when_it_is_carapaces() {
        let own = OwnFiles {
            socket: Some(PathBuf::from("/srv/carapace-test/c.sock")),
            ..OwnFiles::default()
        };
        assert!(own
            .locked_rules()
            .0
             .1
            .contains("\"/srv/carapace-test/**\""));
        let shared = OwnFiles {
            socket: Some(PathBuf::from("/tmp/c.sock")),
            ..OwnFiles::default()
        };
        let text = shared.locked_rules().0 .1;
        assert!(text.contains("\"/tmp/c.sock\""), "{text}");
        assert!(!text.contains("/tmp/**"), "{text}");
    }

    #[test]
    fn paths_a_pattern_cannot_name_are_reported_not_written() {
        let own = OwnFiles {
            data_dir: Some(PathBuf::from("/srv/data[1]")),
            logs: vec![PathBuf::from("/var/log/c\"x")],
            ..OwnFiles::default()
        };
        let ((_, text), skipped) = own.locked_rules();
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(!text.contains("data[1]"), "{text}");
    }

    #[test]
    fn paths_are_made_absolute_and_resolved() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(&real, real.join("link")).unwrap();
        assert_eq!(resolve(&real.join("link/not/yet")), real.join("not/yet"));
        assert_eq!(normalise(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }
}
