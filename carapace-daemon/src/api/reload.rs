//! Hot reload of the rule file — on SIGHUP, when the file changes on disk, and on the
//! `ReloadRules` RPC. A file that does not validate never replaces the running rules: its
//! diagnostics are logged and returned, and the old rules keep applying in both layers.
//!
//! Order of a swap: compile the new set off the async threads; write its kernel image (see
//! `KernelMaps::replace_image` for how the maps never go through a state where neither rule
//! set applies); only then swap the userspace set. If the kernel write fails, the old image is
//! written back and the userspace set is left alone, so both layers keep agreeing.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::Daemon;
use carapace_policy::rules::{Diagnostic, Diagnostics, RuleSet, Severity};

/// How often the watcher looks at the rule file.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// Where the daemon's rules come from.
#[derive(Clone, Debug)]
pub struct RuleSource {
    pub path: PathBuf,
    /// Given with `--rules`: it must exist. The default `$DATA_DIR/rules.yaml` may be absent,
    /// and then the built-in packs apply.
    pub explicit: bool,
    /// Locked rules the daemon adds about its own endpoints (source, rule text), in force
    /// whatever the file says, reload after reload (e.g. the console's port).
    pub locked: Vec<(String, String)>,
    /// The data directory, whose `profiles/` holds the named profiles (`crate::profiles`).
    pub data_dir: PathBuf,
}

/// A rule set and the file state it was read from.
#[derive(Debug)]
pub struct Loaded {
    pub rules: RuleSet,
    /// The file read; `None` when the built-in packs apply because there is no file.
    pub file: Option<PathBuf>,
    /// Taken before reading, so a write during the read shows up as a later change.
    pub fingerprint: Option<Fingerprint>,
}

pub use crate::fingerprint::{fingerprint, Fingerprint};

impl RuleSource {
    /// `--rules FILE` if given, else `DATA_DIR/rules.yaml`.
    #[must_use]
    pub fn new(data_dir: &Path, explicit: Option<PathBuf>) -> Self {
        match explicit {
            Some(path) => Self {
                path,
                explicit: true,
                locked: Vec::new(),
                data_dir: data_dir.to_owned(),
            },
            None => Self {
                path: data_dir.join("rules.yaml"),
                explicit: false,
                locked: Vec::new(),
                data_dir: data_dir.to_owned(),
            },
        }
    }

    /// Adds a locked rule pack (see [`RuleSource::locked`]).
    #[must_use]
    pub fn with_locked(mut self, source: String, text: String) -> Self {
        self.locked.push((source, text));
        self
    }

    /// Reads, validates and compiles the rules (blocking: file I/O and host name lookups).
    pub fn load(&self) -> Result<Loaded, Diagnostics> {
        let fingerprint = fingerprint(&self.path);
        let locked: Vec<(&str, &str)> = self
            .locked
            .iter()
            .map(|(s, t)| (s.as_str(), t.as_str()))
            .collect();
        let file = (self.explicit || self.path.exists()).then(|| self.path.clone());
        Ok(Loaded {
            rules: RuleSet::load_with_locked(
                file.as_deref(),
                &crate::policy_host::options(),
                &locked,
            )?,
            file,
            fingerprint,
        })
    }

    /// Loads every profile of the data directory against the main rules `main`, `names`
    /// required (`Profiles::build`), and compiles their shared kernel image (blocking).
    pub fn profiles(
        &self,
        main: &RuleSet,
        names: &std::collections::BTreeSet<String>,
    ) -> Result<crate::profiles::Profiles, crate::profiles::ProfileError> {
        crate::profiles::Profiles::build(&self.data_dir, main, names, &self.locked)
    }
}

/// A profile's error as the diagnostics a refused reload reports.
fn profile_diags(e: crate::profiles::ProfileError) -> Diagnostics {
    use crate::profiles::ProfileError;
    match e {
        ProfileError::Invalid { diags, .. } | ProfileError::Union { diags, .. } => diags,
        other => one_error("profiles", other.to_string()),
    }
}

/// The result of one reload, as `ReloadRules` returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    /// The file read ("" for the built-in packs only).
    pub file: String,
    /// Rules in force afterwards.
    pub rules: u32,
    pub kernel_rules: u32,
    pub diagnostics: String,
}

fn counts(rules: &RuleSet) -> (u32, u32) {
    let all = rules.rules();
    let kernel = all.iter().filter(|r| r.kernel_index.is_some()).count();
    (all.len() as u32, kernel as u32)
}

/// What a successful reload says: the rules' warnings, and the profiles of the directory
/// that did not load (said, not fatal: no session runs them, and one that asks is refused
/// with these diagnostics).
fn diagnostics(rules: &RuleSet, profiles: &crate::profiles::Profiles) -> String {
    let mut out = rules.warnings().to_string();
    for left in profiles.left_out() {
        let _ = writeln!(out, "profile `{}` is not loaded: {}", left.name, left.why);
    }
    out
}

fn file_name(file: Option<&Path>) -> String {
    file.map(|p| p.display().to_string()).unwrap_or_default()
}

fn one_error(origin: &str, message: String) -> Diagnostics {
    Diagnostics(vec![Diagnostic {
        severity: Severity::Error,
        origin: origin.to_owned(),
        span: carapace_policy::rules::yaml::Span { line: 1, col: 1 },
        message,
        rule: None,
        hint: Some("the previous rules stay in force; see the daemon's log".into()),
    }])
}

impl Daemon {
    /// Reads the rule file again and swaps it in if it validates. `why` names the trigger
    /// in the log (SIGHUP, file change, RPC). The outcome is recorded in the audit ledger.
    pub async fn reload(&self, why: &str) -> Outcome {
        let outcome = self.swap_rules(why).await;
        let mut event = crate::audit::Event::new(crate::audit::Kind::RulesReload);
        event.decision = Some(if outcome.ok { "applied" } else { "refused" }.to_owned());
        let file = if outcome.file.is_empty() {
            "the built-in packs"
        } else {
            &outcome.file
        };
        event.detail = crate::audit::redact::field(&format!(
            "{why}: {file}; {} rules ({} in the kernel layer) in force",
            outcome.rules, outcome.kernel_rules
        ));
        if !outcome.ok {
            event.error = Some("invalid-rules".to_owned());
        }
        self.audit.note(event).await;
        if outcome.ok {
            self.rules_changed.notify_one();
            self.holds_changed.notify_one();
        }
        outcome
    }

    async fn swap_rules(&self, why: &str) -> Outcome {
        // One reload at a time; the guard also holds the fingerprint of the last file read.
        let mut last = self.reload_state.lock().await;
        // Taken before reading: a write during the read then shows up as a later change.
        let before = fingerprint(&self.source.path);
        let source = self.source.clone();
        // Every profile of the directory is compiled with the new main rules
        // (`Profiles::build`): one of a running session that no longer loads refuses the
        // whole reload; any other that does not load is left out and said.
        let in_use = self.sessions.profiles_in_use();
        let loaded = tokio::task::spawn_blocking(move || {
            let loaded = source.load()?;
            let profiles = source
                .profiles(&loaded.rules, &in_use)
                .map_err(profile_diags)?;
            Ok((loaded, profiles))
        })
        .await;
        let loaded = match loaded {
            Ok(result) => result,
            Err(e) => Err(one_error(
                &self.source.path.display().to_string(),
                format!("the reload task failed: {e}"),
            )),
        };
        let (loaded, profiles) = match loaded {
            Ok(loaded) => loaded,
            Err(diags) => {
                *last = before;
                return self.refused(why, &diags);
            }
        };
        *last = loaded.fingerprint;
        let old = self.rules();
        let sessions = Arc::clone(&self.sessions);
        let new = Arc::new(loaded.rules);
        let new2 = Arc::clone(&new);
        // The kernel's images: the main set's, or its union with the profiles in use.
        let old_kernel = self.kernel_rule_set();
        let profiles = Arc::new(profiles);
        let new_kernel = profiles
            .union()
            .map_or_else(|| Arc::clone(&new), Arc::clone);
        let profiles2 = Arc::clone(&profiles);
        // The addresses the sessions' resolvers handed out, judged again under each set: the
        // kernel keeps refusing them across the reload (and across a step back).
        let learned = Arc::clone(self.resolvers.learned());
        let refused = |rules: &RuleSet| {
            learned.judge_again(|name| carapace_policy::engine::names::blocked_by(rules, name))
        };
        let (refused_new, refused_old) = (refused(&new), refused(&old));
        let kernel = tokio::task::spawn_blocking(move || {
            sessions
                .apply_rules(new_kernel.kernel_image(), &refused_new)
                .map(|_| {
                    // Session rule bits name rule indices, which the new set renumbers.
                    sessions.set_profiles(profiles2);
                    crate::session::state::sync_all(&sessions, &new2);
                    refused_new
                })
                .map_err(|e| {
                    // Put the old image back so the kernel agrees with the userspace rules
                    // that stay in force.
                    if let Err(back) = sessions.apply_rules(old_kernel.kernel_image(), &refused_old)
                    {
                        tracing::error!("cannot restore the previous kernel rules either: {back}");
                    }
                    e.to_string()
                })
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        let refused = match kernel {
            Ok(refused) => refused,
            Err(e) => {
                let origin = file_name(loaded.file.as_deref());
                let diags = one_error(
                    &origin,
                    format!("the kernel maps could not take the new rules: {e}"),
                );
                return self.refused(why, &diags);
            }
        };
        self.resolvers.learned().renumber(&refused);
        *self
            .rules
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::clone(&new);
        self.set_rules_file(loaded.file.clone());
        self.reloads.fetch_add(1, Ordering::Relaxed);
        let (rules, kernel_rules) = counts(&new);
        let file = file_name(loaded.file.as_deref());
        for w in new.warnings().warnings() {
            tracing::warn!("{w}");
        }
        tracing::info!(
            file = %if file.is_empty() { "built-in packs" } else { &file },
            rules,
            kernel_rules,
            "{why}: rules reloaded"
        );
        Outcome {
            ok: true,
            file,
            rules,
            kernel_rules,
            diagnostics: diagnostics(&new, &profiles),
        }
    }

    fn refused(&self, why: &str, diags: &Diagnostics) -> Outcome {
        tracing::error!(
            "{why}: the rule file has errors; the previous rules stay in force:\n{diags}"
        );
        let current = self.rules();
        let (rules, kernel_rules) = counts(&current);
        Outcome {
            ok: false,
            file: self.source.path.display().to_string(),
            rules,
            kernel_rules,
            diagnostics: diags.to_string(),
        }
    }
}

/// How much longer than one check of the protected paths' resolution the watcher waits
/// before the next: the checks take about one percent of a core.
const NAMES_CHECK_SPACING: u32 = 100;

/// Reloads when the rule file changes: its fingerprint must differ from the last one read
/// and hold still for one interval, so a file caught half-written is not read. With the
/// kernel layer up and a session live, also when a path the rules protect now resolves
/// elsewhere than when the rules were built (a protected directory replaced by a link, a new
/// bind mount), seen on two checks running: the kernel judges the names the agent's
/// processes see.
#[must_use = "the task runs forever; keep or detach its handle"]
pub fn spawn_watcher(daemon: Arc<Daemon>, interval: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let path = daemon.source.path.clone();
        let mut seen = *daemon.reload_state.lock().await;
        let mut tick = tokio::time::interval(interval);
        let mut names_moved = false;
        // A reload for moved names failed (the rule file no longer loads): wait for the file.
        let mut hold_names = false;
        let mut next_names_check = std::time::Instant::now();
        loop {
            tick.tick().await;
            let now = fingerprint(&path);
            if now != seen {
                seen = now;
                continue;
            }
            if now != *daemon.reload_state.lock().await {
                if now.is_none() {
                    // Falling back to fewer rules because a file vanished is left to a
                    // person (SIGHUP or `carapace rules reload`).
                    tracing::warn!(
                        file = %path.display(),
                        "the rule file disappeared; the current rules stay in force"
                    );
                    *daemon.reload_state.lock().await = None;
                    continue;
                }
                let _ = daemon.reload("the rule file changed").await;
                (names_moved, hold_names) = (false, false);
                continue;
            }
            let due = std::time::Instant::now() >= next_names_check;
            if hold_names || !due || !daemon.sessions.kernel_up() || daemon.sessions.is_idle() {
                continue;
            }
            let started = std::time::Instant::now();
            let rules = daemon.rules();
            let moved = tokio::task::spawn_blocking(move || {
                rules
                    .kernel_image()
                    .resolution
                    .moved(&crate::policy_host::RealHost)
            })
            .await
            .unwrap_or(false);
            // About one percent of a core at most, however many paths the rules name.
            next_names_check = std::time::Instant::now() + started.elapsed() * NAMES_CHECK_SPACING;
            if moved && names_moved {
                let outcome = daemon
                    .reload("a protected path now leads elsewhere (a link or a mount changed)")
                    .await;
                (names_moved, hold_names) = (false, !outcome.ok);
                continue;
            }
            names_moved = moved;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_sees_rewrites_and_renames() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.yaml");
        assert_eq!(fingerprint(&path), None);
        std::fs::write(&path, "version: 1\n").unwrap();
        let first = fingerprint(&path).unwrap();
        std::fs::write(&path, "version: 1\nrules: []\n").unwrap();
        let second = fingerprint(&path).unwrap();
        assert_ne!(first, second);
        let other = dir.path().join("new.yaml");
        std::fs::write(&other, "version: 1\nrules: []\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_ne!(fingerprint(&path).unwrap(), second);
    }

    #[test]
    fn a_missing_default_file_means_the_builtin_packs() {
        let dir = tempfile::tempdir().unwrap();
        let source = RuleSource::new(dir.path(), None);
        let loaded = source.load().unwrap();
        assert_eq!(loaded.file, None);
        assert!(!loaded.rules.rules().is_empty());
        let explicit = RuleSource::new(dir.path(), Some(dir.path().join("absent.yaml")));
        let diags = explicit.load().unwrap_err();
        assert!(
            diags.to_string().contains("cannot read the rule file"),
            "{diags}"
        );
    }
}
