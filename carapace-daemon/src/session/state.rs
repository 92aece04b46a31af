//! What a session accumulates, and how it shapes decisions: which session a call belongs to,
//! the rules its triggers switched on (and that state pushed into the kernel maps), the
//! operations the user approved, and the history of what ran.
use sha2::{Digest as _, Sha256};

use super::db::{HistoryEntry, RuleState, StoreError};
use super::{SessionError, SessionManager};
use carapace_policy::engine::{self, Activation, Decision, Extracted, Layer};
use carapace_policy::rules::validate::mode_name;
use carapace_policy::rules::{Mode, RuleSet};

/// Longest agent-side session id accepted (Claude Code's are UUIDs).
const MAX_EXTERNAL_ID: usize = 256;

/// The session a call is made in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRef {
    pub id: String,
    pub owner_uid: u32,
}

/// Who calls, as the socket says: its uid and (hierarchy-relative) cgroup.
#[derive(Clone, Copy, Debug)]
pub struct Caller<'a> {
    pub uid: u32,
    pub cgroup: Option<&'a str>,
}

/// The session of a call: the `carapace run` session whose cgroup holds the caller (it
/// cannot claim another), else the agent session the harness names (`agent`, `external`)
/// for the caller's uid, created on first use; else none.
pub fn resolve(
    sessions: &SessionManager,
    caller: Caller<'_>,
    agent: &str,
    external: &str,
) -> Result<Option<SessionRef>, StoreError> {
    if let Some(id) = caller.cgroup.and_then(|c| sessions.session_of_cgroup(c)) {
        let owner_uid = sessions.get(&id).map_or(caller.uid, |r| r.owner_uid);
        return Ok(Some(SessionRef { id, owner_uid }));
    }
    let external = external.trim();
    if external.is_empty() {
        return Ok(None);
    }
    let external: String = external.chars().take(MAX_EXTERNAL_ID).collect();
    let agent = if agent.is_empty() { "agent" } else { agent };
    let agent: String = agent.chars().take(64).collect();
    // The id is derived, never taken from the request: a caller cannot pick another user's
    // session by naming it.
    let digest = Sha256::digest(format!("{}\0{agent}\0{external}", caller.uid).as_bytes());
    let id: String = std::iter::once("a-".to_owned())
        .chain(digest.iter().take(8).map(|b| format!("{b:02x}")))
        .collect();
    let session = sessions
        .db()
        .agent_session(&id, caller.uid, &agent, &external)?;
    Ok(Some(SessionRef {
        id: session.id,
        owner_uid: session.owner_uid,
    }))
}

/// The session's activated and disabled rules.
pub fn activation(sessions: &SessionManager, id: &str) -> Result<Activation, StoreError> {
    let mut a = Activation::default();
    for (rule, state, _, _) in sessions.db().rule_states(id)? {
        match state {
            RuleState::Activated => a.activated.insert(rule),
            RuleState::Disabled => a.disabled.insert(rule),
        };
    }
    Ok(a)
}

/// A Layer-1 decision in a session, before anything is recorded.
#[derive(Clone, Debug)]
pub struct Checked {
    pub decision: Decision,
    pub activation: Activation,
    /// Computed on first use: most calls (no session, nothing to approve) never need it.
    signature: std::sync::OnceLock<String>,
}

impl Checked {
    /// The operation's signature (see [`Extracted::signature`]); `ext` is the call checked.
    pub fn signature(&self, ext: &Extracted) -> &str {
        self.signature.get_or_init(|| ext.signature())
    }
}

/// Checks `ext` with the session's rule state; an approve decision for an operation the
/// user already approved in this session passes.
pub fn check(
    sessions: &SessionManager,
    rules: &RuleSet,
    session: Option<&SessionRef>,
    ext: &Extracted,
) -> Result<Checked, StoreError> {
    let activation = match session {
        Some(s) => activation(sessions, &s.id)?,
        None => Activation::default(),
    };
    let mut decision = engine::evaluate(rules, ext, &activation, Layer::ToolCall);
    let signature = std::sync::OnceLock::new();
    if decision.decision == Mode::Approve {
        if let Some(s) = session {
            if sessions
                .db()
                .is_approved(&s.id, signature.get_or_init(|| ext.signature()))?
            {
                decision = decision.approved("approved earlier in this session");
            }
        }
    }
    Ok(Checked {
        decision,
        activation,
        signature,
    })
}

/// Records a checked call in its session's history and, when it is going to run (not
/// blocked, not waiting for approval), switches on the session rules it triggers — in the
/// database and in the kernel maps — before the caller gets the answer. Returns the ids of
/// the rules it switched on.
pub fn record(
    sessions: &SessionManager,
    rules: &RuleSet,
    session: &SessionRef,
    ext: &Extracted,
    checked: &Checked,
) -> Result<Vec<String>, SessionError> {
    let d = &checked.decision;
    sessions.db().push_history(
        &session.id,
        &HistoryEntry {
            seq: 0,
            at: super::db::now(),
            tool: ext.tool.clone(),
            summary: ext.summary(),
            decision: mode_name(d.decision).to_owned(),
            signature: checked.signature(ext).to_owned(),
        },
    )?;
    if matches!(d.decision, Mode::Block | Mode::Approve) {
        return Ok(Vec::new());
    }
    let fired = engine::fired_triggers(rules, ext, &checked.activation);
    let mut activated = Vec::new();
    for (rule, witness) in fired {
        let reason = format!("{} ({witness})", ext.tool);
        if sessions.db().set_rule_state(
            &session.id,
            &rule.id,
            RuleState::Activated,
            true,
            &reason,
        )? {
            tracing::info!(session = %session.id, rule = %rule.id, "session rule switched on after {reason}");
            activated.push(rule.id.clone());
        }
    }
    if !activated.is_empty() {
        sync_kernel(sessions, rules, &session.id)?;
    }
    Ok(activated)
}

/// Writes a session's rule state into the kernel maps (for `carapace run` sessions while
/// the kernel layer runs; a no-op otherwise). `rules` are the main rules; a session of a
/// named profile is written from its profile's rules and bits.
pub fn sync_kernel(
    sessions: &SessionManager,
    rules: &RuleSet,
    id: &str,
) -> Result<bool, SessionError> {
    let profile = sessions.get(id).map(|r| r.profile).unwrap_or_default();
    if !profile.is_empty() {
        return sync_profile_kernel(sessions, &profile, id);
    }
    let (mut activated, mut disabled) = (Vec::new(), Vec::new());
    add_rule_states(sessions, id, &mut activated, &mut disabled, |rule_id| {
        let rule = rules.by_id(rule_id)?;
        Some((rule.kernel_index?, rule.locked))
    })?;
    sessions.set_kernel_rules(id, &activated, &disabled)
}

/// Adds what the session's triggers switched on and the user switched off (never a locked
/// rule) to its kernel bits; `index_of` gives a rule id's kernel index and whether it is
/// locked, in the image the session uses.
fn add_rule_states(
    sessions: &SessionManager,
    id: &str,
    activated: &mut Vec<u32>,
    disabled: &mut Vec<u32>,
    index_of: impl Fn(&str) -> Option<(u32, bool)>,
) -> Result<(), SessionError> {
    for (rule_id, state, _, _) in sessions.db().rule_states(id)? {
        let Some((index, locked)) = index_of(&rule_id) else {
            continue;
        };
        match state {
            RuleState::Activated => activated.push(index),
            RuleState::Disabled if !locked => disabled.push(index),
            RuleState::Disabled => {}
        }
    }
    Ok(())
}

/// [`sync_kernel`] for a session of profile `profile`: the profile's own bits (its rules on,
/// the main rules it does not hold off), then what its triggers switched on and the user
/// switched off, by the profile's rule ids in the union image.
fn sync_profile_kernel(
    sessions: &SessionManager,
    profile: &str,
    id: &str,
) -> Result<bool, SessionError> {
    let profiles = sessions.profiles();
    let (Some(rules), Some(bits)) = (profiles.rules(profile), profiles.bits(profile)) else {
        // Not loaded (its file broke while the daemon was down): the session keeps the
        // state it has, the main rules if none (never nothing).
        return Err(SessionError::ProfileNotLoaded(profile.to_owned()));
    };
    let mut activated = bits.activated.clone();
    let mut disabled = bits.disabled.clone();
    add_rule_states(sessions, id, &mut activated, &mut disabled, |rule_id| {
        Some((*bits.index.get(rule_id)?, rules.by_id(rule_id)?.locked))
    })?;
    sessions.set_kernel_rules(id, &activated, &disabled)
}

/// After a rule reload (rule indices change) or a daemon start: every `carapace run`
/// session's rule state, written again.
pub fn sync_all(sessions: &SessionManager, rules: &RuleSet) {
    for record in sessions.list() {
        if let Err(e) = sync_kernel(sessions, rules, &record.id) {
            tracing::warn!(session = %record.id, "cannot write the session's rule state into the kernel: {e}");
        }
    }
}

/// Why a session's rule cannot be switched on or off.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuleChangeError {
    #[error("no rule {0} in the rules in force (see `carapace rules list`)")]
    UnknownRule(String),
    #[error("rule {0} is locked: only root can change it, by editing the rule file")]
    Locked(String),
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl From<StoreError> for RuleChangeError {
    fn from(e: StoreError) -> Self {
        Self::Session(e.into())
    }
}

/// The user switches a rule off (or back on) for one session. Authorization is the
/// caller's business; this only refuses what nobody may do from a session.
pub fn set_disabled(
    sessions: &SessionManager,
    rules: &RuleSet,
    session: &SessionRef,
    rule_id: &str,
    disabled: bool,
    by_uid: u32,
) -> Result<bool, RuleChangeError> {
    let rule = rules
        .by_id(rule_id)
        .ok_or_else(|| RuleChangeError::UnknownRule(rule_id.into()))?;
    if rule.locked && disabled {
        return Err(RuleChangeError::Locked(rule_id.into()));
    }
    let changed = sessions.db().set_rule_state(
        &session.id,
        rule_id,
        RuleState::Disabled,
        disabled,
        &format!("by uid {by_uid}"),
    )?;
    if changed {
        sync_kernel(sessions, rules, &session.id)?;
        tracing::info!(session = %session.id, rule = rule_id, uid = by_uid, "rule {} for the session", if disabled { "disabled" } else { "enabled" });
    }
    Ok(changed)
}

/// Clears a session's rule state, approvals and history (pending approvals are denied),
/// in the database and the kernel.
pub fn reset(
    sessions: &SessionManager,
    rules: &RuleSet,
    session: &SessionRef,
    by_uid: u32,
) -> Result<(), SessionError> {
    sessions.db().reset(&session.id, by_uid)?;
    sync_kernel(sessions, rules, &session.id)?;
    tracing::info!(session = %session.id, uid = by_uid, "session reset");
    Ok(())
}
