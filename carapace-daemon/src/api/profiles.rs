//! Sessions of named profiles (`carapace run --profile NAME`, `crate::profiles`): which
//! rules judge a session's calls, and getting a profile into the kernel image before a
//! session of it starts.
use std::sync::Arc;

use carapace_policy::rules::union::ProfileBits;
use carapace_policy::rules::RuleSet;
use tonic::Status;

use super::{Daemon, Peer};
use crate::profiles::{self, ProfileError};

impl Daemon {
    /// The rules the calls of session `id` are judged by: its profile's, else the rules in
    /// force.
    #[must_use]
    pub fn rules_of_session(&self, id: Option<&str>) -> Arc<RuleSet> {
        let profile = id
            .and_then(|id| self.sessions.get(id))
            .map(|r| r.profile)
            .unwrap_or_default();
        if profile.is_empty() {
            return self.rules();
        }
        if let Some(rules) = self.sessions.profiles().rules(&profile) {
            return Arc::clone(rules);
        }
        // Only when the profile's file broke while the daemon was down (a session cannot
        // start without its profile loaded): the main rules, never none.
        tracing::warn!(profile, "profile not loaded; judging by the main rules");
        self.rules()
    }

    /// [`Daemon::rules_of_session`] for the `carapace run` session holding `peer`, by its
    /// cgroup (never by what the request says).
    #[must_use]
    pub fn rules_of_peer(&self, peer: &Peer) -> Arc<RuleSet> {
        let session = peer
            .cgroup
            .as_deref()
            .and_then(|c| self.sessions.session_of_cgroup(c));
        self.rules_of_session(session.as_deref())
    }

    /// The rules of the kernel image: the main set's, or its union with the profiles in use
    /// (the index of a kernel event names a rule of this set).
    #[must_use]
    pub fn kernel_rule_set(&self) -> Arc<RuleSet> {
        self.sessions
            .profiles()
            .union()
            .map_or_else(|| self.rules(), Arc::clone)
    }

    /// Makes profile `name` ready for a new session: loaded from its file as it is now,
    /// validated, and in the kernel image with the other profiles loaded. Returns the
    /// session's kernel bits and the rules lock: the caller holds it until the session is
    /// registered, so that neither a reload nor another profile's start rebuilds the union
    /// without this session's profile, or moves its bits, in between. A profile that does
    /// not load, or does not fit the kernel with the others, refuses the session (fail
    /// closed); the running sessions keep their rules.
    pub async fn prepare_profile(
        &self,
        name: &str,
    ) -> Result<(ProfileBits, RulesLock<'_>), Status> {
        profiles::check_name(name).map_err(|e| Status::invalid_argument(e.to_string()))?;
        // One change of rules at a time (reloads hold the same lock).
        let reloading = self.reload_state.lock().await;
        let current = self.sessions.profiles();
        if current.is_current(&self.source.data_dir, name) {
            if let Some(bits) = current.bits(name) {
                return Ok((bits.clone(), reloading));
            }
        }
        // Every profile of the directory is loaded with the required ones (`Profiles::build`),
        // so none is dropped while its session is being registered (the lock is held until
        // then, see above).
        let mut names = self.sessions.profiles_in_use();
        names.insert(name.to_owned());
        let main = self.rules();
        let source = self.source.clone();
        let main2 = Arc::clone(&main);
        let built = tokio::task::spawn_blocking(move || source.profiles(&main2, &names))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| profile_status(&e))?;
        let bits = built.bits(name).cloned().unwrap_or_default();
        let built = Arc::new(built);
        let old_kernel = self.kernel_rule_set();
        let new_kernel = built.union().map_or_else(|| Arc::clone(&main), Arc::clone);
        let learned = Arc::clone(self.resolvers.learned());
        let refused = learned.judge_again(|n| carapace_policy::engine::names::blocked_by(&main, n));
        let sessions = Arc::clone(&self.sessions);
        let (refused2, main2, profile) = (refused.clone(), Arc::clone(&main), name.to_owned());
        tokio::task::spawn_blocking(move || {
            match sessions.apply_rules(new_kernel.kernel_image(), &refused2) {
                Ok(_) => {
                    // The profiles' rules moved in the union: their sessions' bits follow.
                    sessions.set_profiles(built);
                    crate::session::state::sync_all(&sessions, &main2);
                    Ok(())
                }
                Err(e) => {
                    if let Err(back) = sessions.apply_rules(old_kernel.kernel_image(), &refused2) {
                        tracing::error!("cannot restore the previous kernel rules either: {back}");
                    }
                    Err(Status::failed_precondition(format!(
                        "the kernel maps could not take profile `{profile}`: {e}"
                    )))
                }
            }
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))??;
        self.resolvers.learned().renumber(&refused);
        tracing::info!(profile = name, "profile loaded for a new session");
        Ok((bits, reloading))
    }
}

/// The lock every change of rules holds (reloads, profile loads), with the fingerprint of
/// the rule file last read.
pub type RulesLock<'a> = tokio::sync::MutexGuard<'a, Option<crate::fingerprint::Fingerprint>>;

/// A profile's error as the status `CreateSession` answers.
fn profile_status(e: &ProfileError) -> Status {
    match e {
        ProfileError::BadName(_) => Status::invalid_argument(e.to_string()),
        ProfileError::Missing { .. } => Status::not_found(e.to_string()),
        _ => Status::failed_precondition(e.to_string()),
    }
}

/// At start: every profile of the directory (`Profiles::build`), those of the sessions a
/// restarted daemon resumed among them, loaded and put into the kernel image before their
/// rule bits are written again. When a resumed session's profile no longer loads it is
/// logged, the others are loaded without it, and its sessions keep the kernel state they
/// have (Layer 1 judging them by the main rules) until a reload that loads it.
pub fn adopt(
    sessions: &crate::session::SessionManager,
    source: &super::reload::RuleSource,
    main: &RuleSet,
) {
    let in_use = sessions.profiles_in_use();
    let built = match source.profiles(main, &in_use) {
        Ok(built) => built,
        Err(e) => {
            tracing::error!("the profiles of the resumed sessions do not load: {e}");
            match source.profiles(main, &std::collections::BTreeSet::new()) {
                Ok(built) => built,
                Err(e) => {
                    tracing::error!("the profiles do not load: {e}");
                    return;
                }
            }
        }
    };
    if let Some(union) = built.union() {
        if let Err(e) = sessions.apply_rules(union.kernel_image(), &[]) {
            tracing::error!("the kernel maps cannot take the profiles: {e}");
            return;
        }
    }
    let loaded: Vec<&str> = built.names().collect();
    if !loaded.is_empty() {
        tracing::info!(profiles = %loaded.join(", "), "profiles loaded");
    }
    sessions.set_profiles(Arc::new(built));
}
