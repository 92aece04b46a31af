//! Agent sessions: one cgroup v2 directory per session below `<cgroup2>/carapace`, tagged in
//! the kernel maps (when the kernel layer runs) and remembered in the session database
//! (`db`) so that a restarted daemon knows them. What a session accumulates — activated and
//! disabled rules, approvals, history — lives in the same database (`state`).
pub mod approvals;
pub mod cgroup;
pub mod db;
pub mod resources;
pub mod state;

use std::collections::BTreeMap;
use std::fs;
use std::io::Read as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use self::cgroup::{CarapaceRoot, CgroupError, Hierarchy};
use self::db::Db;
pub use self::db::{SessionRecord, StoreError};
use self::resources::{Controllers, LimitError, LimitHit, Resources};
use crate::kernel::{Kernel, KernelError, MapsError};

/// How long ending a session waits for its processes to die.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// How long the kernel programs stay attached after the last session ended. Attaching them
/// (a trampoline per hook, the path cache reset) is most of what starting a session costs,
/// and agents are often run one after another (a script, a test suite); detaching at once
/// made every such `carapace run` pay it again. Meanwhile the machine's other processes pay
/// the trampolines on their opens as they do while a session runs (BENCHMARKS.md, session 9).
pub const DETACH_AFTER: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("kernel layer: {0}")]
    Kernel(#[from] KernelError),
    #[error("no session {0}")]
    NotFound(String),
    #[error(transparent)]
    Limits(#[from] LimitError),
    #[error("profile `{0}` is not loaded; its sessions keep their kernel state")]
    ProfileNotLoaded(String),
}

/// Who asks for a session, as the socket (`SO_PEERCRED`) and `/proc/PID/cgroup` tell.
#[derive(Clone, Debug)]
pub struct NewSession {
    pub owner_uid: u32,
    pub pid: u32,
    /// The process's cgroup before it joins the session (hierarchy-relative).
    pub origin: String,
    pub command: Vec<String>,
    /// Memory and process-count limits (refused when the controllers are unavailable).
    pub resources: Resources,
    /// `carapace_common::SESSION_*` bits: shadow mode.
    pub flags: u32,
    /// The named profile (`carapace run --profile`; empty: the main rules) and its kernel
    /// rule bits (activated, disabled), written before the process joins the session.
    pub profile: String,
    pub rule_bits: (Vec<u32>, Vec<u32>),
}

struct State {
    sessions: BTreeMap<String, SessionRecord>,
    kernel: Option<Kernel>,
    /// Since when nothing was left to enforce while the programs stayed attached
    /// (`DETACH_AFTER`); `None` while a session runs or once detached.
    idle_since: Option<Instant>,
}

/// Every live session, the kernel handle that tags them, and their storage.
pub struct SessionManager {
    hierarchy: Hierarchy,
    root: CarapaceRoot,
    db: Arc<Db>,
    /// Which resource controllers the session cgroups have.
    controllers: Controllers,
    state: Mutex<State>,
    /// The named profiles in use and their kernel bits (`crate::profiles`); swapped whole
    /// with the kernel image they belong to.
    profiles: RwLock<Arc<crate::profiles::Profiles>>,
}

impl SessionManager {
    /// Reads the `carapace run` sessions of the database: keeps those whose cgroup still
    /// exists and tags them again in the kernel (idempotent), and forgets the others.
    pub fn open(
        hierarchy: Hierarchy,
        root: CarapaceRoot,
        db: Arc<Db>,
        kernel: Option<Kernel>,
    ) -> Result<Self, SessionError> {
        let mut sessions = BTreeMap::new();
        let mut kernel = kernel;
        for record in db.run_sessions()? {
            let alive = cgroup::cgroup_id(&record.cgroup).is_ok_and(|id| id == record.cgroup_id);
            if !alive {
                tracing::info!(session = %record.id, "session cgroup is gone; forgetting the session");
                db.remove_session(&record.id)?;
                continue;
            }
            if let Some(k) = kernel.as_mut() {
                if let Err(e) = k.add_session(record.cgroup_id, record.number, record.flags) {
                    tracing::warn!(session = %record.id, "cannot tag the session in the kernel again: {e:#}");
                }
            }
            tracing::info!(session = %record.id, cgroup = %record.cgroup.display(), "resumed session");
            sessions.insert(record.id.clone(), record);
        }
        if let Some(k) = kernel.as_mut() {
            forget_orphans(&root, &sessions, k);
            let settled = if nothing_to_enforce(&root, &sessions) {
                k.disarm()
            } else {
                k.arm()
            };
            if let Err(e) = settled {
                tracing::warn!("kernel programs: {e:#}");
            }
        }
        let controllers = Controllers::enable(&hierarchy, &root);
        Ok(Self {
            hierarchy,
            root,
            db,
            controllers,
            state: Mutex::new(State {
                sessions,
                kernel,
                idle_since: None,
            }),
            profiles: RwLock::new(Arc::default()),
        })
    }

    /// The named profiles in use.
    #[must_use]
    pub fn profiles(&self) -> Arc<crate::profiles::Profiles> {
        Arc::clone(&self.profiles.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Installs the profiles of a kernel image just written (or, without the kernel layer,
    /// just loaded).
    pub fn set_profiles(&self, profiles: Arc<crate::profiles::Profiles>) {
        *self
            .profiles
            .write()
            .unwrap_or_else(PoisonError::into_inner) = profiles;
    }

    /// The named profiles of the live sessions.
    #[must_use]
    pub fn profiles_in_use(&self) -> std::collections::BTreeSet<String> {
        self.lock()
            .sessions
            .values()
            .filter(|s| !s.profile.is_empty())
            .map(|s| s.profile.clone())
            .collect()
    }

    /// The session database.
    #[must_use]
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data that is still consistent enough to
        // serve (every mutation is a single insert/remove), so keep going.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[must_use]
    pub fn root(&self) -> &CarapaceRoot {
        &self.root
    }

    /// Whether the kernel layer is up.
    #[must_use]
    pub fn kernel_up(&self) -> bool {
        self.lock().kernel.is_some()
    }

    /// The kernel's one-line status, if it is up.
    #[must_use]
    pub fn kernel_status(&self) -> Option<String> {
        self.lock().kernel.as_ref().map(Kernel::status)
    }

    /// Writes a rule set's kernel image into the maps, with the refusals of addresses the
    /// sessions' resolvers answered judged under its rules; `Ok(false)` when the kernel layer
    /// is not up (nothing to write).
    pub fn apply_rules(
        &self,
        image: &carapace_policy::image::KernelImage,
        refusals: &[crate::dns::Refusal],
    ) -> Result<bool, SessionError> {
        match self.lock().kernel.as_mut() {
            Some(k) => k
                .apply(image, refusals)
                .map(|()| true)
                .map_err(|e| SessionError::Kernel(e.into())),
            None => Ok(false),
        }
    }

    /// Writes a `carapace run` session's rule state into the kernel maps; `Ok(false)` when
    /// the kernel layer is not up or `id` is not a `carapace run` session.
    pub fn set_kernel_rules(
        &self,
        id: &str,
        activated: &[u32],
        disabled: &[u32],
    ) -> Result<bool, SessionError> {
        self.in_kernel(id, |k, cgroup_id| {
            k.set_session_rules(cgroup_id, activated, disabled)
        })
    }

    /// Lets `ops` on `path`, while it names the file `inode` (zero: any), through the
    /// approve-mode kernel rules for session `id`, as a human approved; `Ok(false)` when the
    /// kernel layer is not up or `id` is not a `carapace run` session.
    pub fn approve_kernel_path(
        &self,
        id: &str,
        path: &[u8],
        ops: u32,
        inode: carapace_common::InodeKey,
    ) -> Result<bool, SessionError> {
        self.in_kernel(id, |k, cgroup_id| {
            k.approve_path(cgroup_id, path, ops, inode)
        })
    }

    /// Lets a connect to `addr` and `port` through the approve-mode kernel address rules for
    /// session `id`, as a human approved; `Ok(false)` as for [`Self::approve_kernel_path`].
    pub fn approve_kernel_addr(
        &self,
        id: &str,
        addr: std::net::IpAddr,
        port: u16,
    ) -> Result<bool, SessionError> {
        // The programs see IPv4 IPv4-mapped (`NETS` keys it so).
        let key = match addr {
            std::net::IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            std::net::IpAddr::V6(v6) => v6.octets(),
        };
        self.in_kernel(id, |k, cgroup_id| k.approve_addr(cgroup_id, key, port))
    }

    /// Runs `write` on the kernel maps for the cgroup of `carapace run` session `id`;
    /// `Ok(false)` when the kernel layer is not up or `id` is not such a session.
    fn in_kernel(
        &self,
        id: &str,
        write: impl FnOnce(&mut Kernel, u64) -> Result<(), MapsError>,
    ) -> Result<bool, SessionError> {
        let mut state = self.lock();
        let Some(cgroup_id) = state.sessions.get(id).map(|s| s.cgroup_id) else {
            return Ok(false);
        };
        match state.kernel.as_mut() {
            Some(k) => write(k, cgroup_id)
                .map(|()| true)
                .map_err(|e| SessionError::Kernel(e.into())),
            None => Ok(false),
        }
    }

    /// Makes `files` the files whose opens the fanotify listener holds (`crate::hold`);
    /// `Ok(false)` when the kernel layer is not up (the hold rules then refuse and retry).
    pub fn set_held(&self, files: &[carapace_common::InodeKey]) -> Result<bool, SessionError> {
        let mut state = self.lock();
        match state.kernel.as_mut() {
            Some(k) => k
                .set_held(files)
                .map(|()| true)
                .map_err(|e| SessionError::Kernel(e.into())),
            None => Ok(false),
        }
    }

    /// The `carapace run` session whose cgroup holds `cgroup` (hierarchy-relative).
    #[must_use]
    pub fn session_of_cgroup(&self, cgroup: &str) -> Option<String> {
        let state = self.lock();
        state
            .sessions
            .values()
            .find(|s| cgroup::is_below(&rel_of(&self.root, &s.id), cgroup))
            .map(|s| s.id.clone())
    }

    /// Creates the session cgroup, tags it in the kernel, moves `new.pid` in and saves.
    /// On failure nothing is left behind.
    pub fn create(&self, new: NewSession) -> Result<SessionRecord, SessionError> {
        self.controllers.check(&new.resources)?;
        let mut state = self.lock();
        let number = (1..=u32::MAX)
            .find(|n| state.sessions.values().all(|s| s.number != *n))
            .unwrap_or(0);
        let id = new_id();
        let dir = self.root.session_dir(&id);
        let cgroup_id = cgroup::create_session(&dir)?;
        let undo = |dir: &std::path::Path| {
            if let Err(e) = cgroup::kill_and_remove(dir, KILL_WAIT) {
                tracing::warn!("cannot remove {}: {e}", dir.display());
            }
        };
        // Limit and tag first, then move: the process must never run unlimited or untagged
        // inside the session.
        if let Err(e) = resources::apply(&dir, &new.resources) {
            undo(&dir);
            return Err(e.into());
        }
        if let Some(k) = state.kernel.as_mut() {
            let (activated, disabled) = &new.rule_bits;
            // A profile's rules are in the session's state before its first process runs.
            let tagged = k.arm().and_then(|()| {
                k.add_session(cgroup_id, number, new.flags)?;
                if !activated.is_empty() || !disabled.is_empty() {
                    k.set_session_rules(cgroup_id, activated, disabled)?;
                }
                Ok(())
            });
            if let Err(e) = tagged {
                undo(&dir);
                self.idle_from_now(&mut state);
                return Err(SessionError::Kernel(e));
            }
        }
        let record = SessionRecord {
            id: id.clone(),
            number,
            owner_uid: new.owner_uid,
            leader_pid: new.pid,
            leader_origin: new.origin,
            cgroup: dir.clone(),
            cgroup_id,
            command: new.command,
            created: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            flags: new.flags,
            profile: new.profile,
        };
        let result = cgroup::move_process(&dir, new.pid)
            .map_err(SessionError::from)
            .and_then(|()| {
                self.db.insert_run_session(&record)?;
                state.sessions.insert(id.clone(), record.clone());
                Ok(())
            });
        if let Err(e) = result {
            state.sessions.remove(&id);
            if let Some(k) = state.kernel.as_mut() {
                if let Err(e) = k.remove_session(cgroup_id) {
                    tracing::warn!("cannot untag cgroup {cgroup_id}: {e:#}");
                }
            }
            undo(&dir);
            self.idle_from_now(&mut state);
            return Err(e);
        }
        state.idle_since = None;
        tracing::info!(session = %id, uid = new.owner_uid, pid = new.pid, cgroup = %dir.display(), "session created");
        Ok(record)
    }

    #[must_use]
    pub fn get(&self, id: &str) -> Option<SessionRecord> {
        self.lock().sessions.get(id).cloned()
    }

    /// Whether no session is live.
    #[must_use]
    pub fn is_idle(&self) -> bool {
        self.lock().sessions.is_empty()
    }

    #[must_use]
    pub fn list(&self) -> Vec<SessionRecord> {
        self.lock().sessions.values().cloned().collect()
    }

    /// The session id of a kernel session number.
    #[must_use]
    pub fn id_of_number(&self, number: u32) -> Option<String> {
        self.lock()
            .sessions
            .values()
            .find(|s| s.number == number)
            .map(|s| s.id.clone())
    }

    /// Ends a session: moves its leader back to where it came from (if `release_leader` and it
    /// is still inside), kills what remains, removes the cgroup, untags it and saves.
    /// Blocks for up to a couple of seconds; call it from a blocking task. Returns the limits
    /// the session ran into.
    pub fn end(&self, id: &str, release_leader: bool) -> Result<Vec<LimitHit>, SessionError> {
        let record = self
            .get(id)
            .ok_or_else(|| SessionError::NotFound(id.into()))?;
        if release_leader {
            let inside = cgroup::process_cgroup(record.leader_pid)
                .is_ok_and(|c| cgroup::is_below(&rel_of(&self.root, &record.id), &c));
            if inside {
                // Back where it came from, else to the hierarchy's root: anywhere but inside,
                // or killing the session would kill the caller too.
                let origin = cgroup::dir_of(&self.hierarchy, &record.leader_origin);
                let moved = cgroup::move_process(&origin, record.leader_pid).or_else(|e| {
                    tracing::info!(session = %id, "cannot move the session leader back ({e}); moving it to the root cgroup");
                    cgroup::move_process(&self.hierarchy.mount, record.leader_pid)
                });
                if let Err(e) = moved {
                    tracing::warn!(session = %id, "cannot move the session leader out: {e}");
                }
            }
        }
        let hits = resources::hits(&record.cgroup);
        cgroup::kill_and_remove(&record.cgroup, KILL_WAIT)?;
        let mut state = self.lock();
        if let Some(k) = state.kernel.as_mut() {
            if let Err(e) = k.remove_session(record.cgroup_id) {
                tracing::warn!(session = %id, "cannot untag the session in the kernel: {e:#}");
            }
        }
        self.db.remove_session(id)?;
        state.sessions.remove(id);
        tracing::info!(session = %id, "session ended");
        // Detached by `detach_when_idle` unless another session starts first.
        self.idle_from_now(&mut state);
        Ok(hits)
    }

    /// Starts the wait before detaching when nothing is left to enforce (a wait already
    /// running goes on).
    fn idle_from_now(&self, state: &mut State) {
        if nothing_to_enforce(&self.root, &state.sessions) {
            state.idle_since.get_or_insert_with(Instant::now);
        }
    }

    /// Detaches the kernel programs when nothing was left to enforce for `after` since the
    /// last session ended; a session started meanwhile keeps them. The reaper calls it.
    pub fn detach_when_idle(&self, after: Duration) {
        let mut state = self.lock();
        let Some(since) = state.idle_since else {
            return;
        };
        if since.elapsed() < after || !nothing_to_enforce(&self.root, &state.sessions) {
            return;
        }
        state.idle_since = None;
        if let Some(k) = state.kernel.as_mut() {
            if let Err(e) = k.disarm() {
                tracing::warn!("cannot detach the kernel programs: {e:#}");
            }
        }
    }
}

impl SessionManager {
    /// Ends every session whose cgroup has no process left (its `carapace run` died without
    /// ending it, or it ended while the daemon was down). Returns the ids it ended and the
    /// limits each ran into.
    pub fn reap_empty(&self) -> Vec<(String, Vec<LimitHit>)> {
        let empty: Vec<String> = self
            .list()
            .into_iter()
            .filter(|s| cgroup::is_empty(&s.cgroup))
            .map(|s| s.id)
            .collect();
        empty
            .into_iter()
            .filter_map(|id| match self.end(&id, false) {
                Ok(hits) => Some((id, hits)),
                Err(e) => {
                    tracing::warn!(session = %id, "cannot reap the empty session: {e}");
                    None
                }
            })
            .collect()
    }
}

/// No session and nothing below the Carapace cgroup: the kernel programs, attached only while
/// some session may run, can go.
fn nothing_to_enforce(root: &CarapaceRoot, sessions: &BTreeMap<String, SessionRecord>) -> bool {
    sessions.is_empty() && root.is_vacant()
}

/// Cleans what a daemon that died while creating a session left: a session cgroup with no
/// record. Empty, it is removed and untagged (nothing ran in it yet); with processes, it
/// stays tagged and enforced. Tags of cgroups that are gone are dropped.
fn forget_orphans(root: &CarapaceRoot, sessions: &BTreeMap<String, SessionRecord>, k: &mut Kernel) {
    let known: Vec<u64> = sessions.values().map(|s| s.cgroup_id).collect();
    let mut present = Vec::new();
    if let Ok(entries) = fs::read_dir(&root.dir) {
        for dir in entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
        {
            let Ok(id) = cgroup::cgroup_id(&dir) else {
                continue;
            };
            if known.contains(&id) {
                continue;
            }
            if cgroup::is_empty(&dir) && fs::remove_dir(&dir).is_ok() {
                tracing::info!(cgroup = %dir.display(), "removed an empty session cgroup no session owns");
            } else {
                tracing::warn!(cgroup = %dir.display(), "a session cgroup no session owns has processes; leaving it enforced");
                present.push(id);
            }
        }
    }
    for (cgroup_id, number) in k.adopted_sessions() {
        if known.contains(&cgroup_id) || present.contains(&cgroup_id) {
            continue;
        }
        tracing::info!(
            cgroup_id,
            number,
            "untagging a session whose cgroup is gone"
        );
        if let Err(e) = k.remove_session(cgroup_id) {
            tracing::warn!(cgroup_id, "cannot untag: {e:#}");
        }
    }
}

/// Hierarchy-relative path of a session cgroup.
fn rel_of(root: &CarapaceRoot, id: &str) -> String {
    format!("{}/{id}", root.rel)
}

/// `s-<unix seconds>-<8 random hex digits>`.
fn new_id() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("s-{secs}-{:08x}", random_u32())
}

/// 32 random bits for ids. Uniqueness, not secrecy, is what matters (the cgroup mkdir and
/// the database's primary keys refuse a clash), so without /dev/urandom the clock will do.
#[must_use]
pub fn random_u32() -> u32 {
    let mut bytes = [0u8; 4];
    let random = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_ok() {
        u32::from_ne_bytes(bytes)
    } else {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ std::process::id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_well_formed_and_distinct() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        assert!(a.starts_with("s-"));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }
}
