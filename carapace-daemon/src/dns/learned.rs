//! Addresses a session's resolver handed out, until they expire. The kernel allows connects
//! to them (through a [`Learner`] it implements); the daemon keeps its own table
//! ([`Learned`]) to name the host in a kernel denial ("connect to 140.82.112.5:443
//! (api.github.com)") and to list them in `carapace status`.
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use carapace_policy::engine::names::NameBlock;

// The leaf module, not `crate::kernel`: the kernel side implements `Learner`.
use crate::kernel::map_error::MapsError;

/// Entries kept per session in [`Learned`]: an agent that resolves names without end (a
/// wildcard exception) must not grow the daemon without end. Expired entries go first;
/// entries rules refuse go last (a reload judges their names again from here).
const MAX_PER_SESSION: usize = 16_384;

/// Names kept per address for judging its refusals again after a reload.
const MAX_REFUSED_NAMES: usize = 16;

/// Receives the addresses a name resolved to. The kernel side implements it to fill its
/// map of learned addresses (keyed by session cgroup and address).
pub trait Learner: Send + Sync {
    /// `entry.addr` was handed out to session `session_cgroup`: an exception to the rules
    /// `entry.excepted` until `entry.expires_at_boot_ns` (`CLOCK_BOOTTIME`, as
    /// `bpf_ktime_get_boot_ns` reads it), refused by the rules `entry.blocked`. An error:
    /// the refusals could not be recorded, so the address must not be handed out (an
    /// exception not recorded only keeps the address refused).
    fn learn(&self, session_cgroup: u64, entry: &LearnedAddress) -> Result<(), MapsError>;
}

/// Now on `CLOCK_BOOTTIME` in nanoseconds: the clock the kernel's map expiries use (it keeps
/// counting while the machine sleeps, like TTLs do).
#[must_use]
pub fn boot_time_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME) {
        Ok(t) => (t.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec() as u64),
        // CLOCK_BOOTTIME exists since Linux 2.6.39; without it nothing learned would expire
        // correctly, so expire everything at once (fail closed).
        Err(_) => 0,
    }
}

/// When an address answered with `ttl` seconds stops being allowed: the TTL clamped to
/// between 5 s (programs connect a moment after they resolve) and an hour (a long TTL must
/// not outlive a change of the rules by long), plus 30 s for connects that began in time.
#[must_use]
pub fn expiry(now_boot_ns: u64, ttl: u32) -> u64 {
    const GRACE: Duration = Duration::from_secs(30);
    let kept = Duration::from_secs(u64::from(ttl.clamp(5, 3600))) + GRACE;
    now_boot_ns.saturating_add(kept.as_nanos() as u64)
}

/// One learned address as `carapace status` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LearnedAddress {
    pub addr: IpAddr,
    pub name: String,
    pub expires_at_boot_ns: u64,
    /// Kernel indices of the rules whose `except:` allows the name on every port.
    pub excepted: Vec<u32>,
    /// The rules whose names cover the name (or a name of its CNAME chain): the kernel
    /// refuses the address by them, expired or not.
    pub blocked: Vec<NameBlock>,
    /// The names (the question's, its aliases') those rules cover: judged again when the
    /// rules are reloaded, so the refusals outlive the rule numbers they were made with.
    pub refused_for: Vec<String>,
}

/// The rules refusing an address a session's resolver answered, judged again under reloaded
/// rules ([`Learned::judge_again`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub cgroup: u64,
    pub addr: IpAddr,
    pub blocked: Vec<NameBlock>,
}

/// Learned addresses per session cgroup.
#[derive(Default)]
pub struct Learned {
    sessions: Mutex<HashMap<u64, HashMap<IpAddr, LearnedAddress>>>,
}

impl Learned {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, HashMap<IpAddr, LearnedAddress>>> {
        // Plain data, each change a single insert or remove: usable after a panic.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `entry` for `session_cgroup` as of `now_boot_ns`. A later answer for the same
    /// address replaces the earlier one (the name most recently resolved is the one the
    /// program is about to connect to), except that a name rules refuse the address for
    /// stays, with those rules: the kernel keeps refusing the address by them, and its
    /// denials name the name they refuse.
    pub fn record(&self, session_cgroup: u64, mut entry: LearnedAddress, now_boot_ns: u64) {
        let mut sessions = self.lock();
        let table = sessions.entry(session_cgroup).or_default();
        if table.len() >= MAX_PER_SESSION && !table.contains_key(&entry.addr) {
            table.retain(|_, e| e.expires_at_boot_ns > now_boot_ns);
            if table.len() >= MAX_PER_SESSION {
                // Still full of live entries: the one expiring first makes room, one no rule
                // refuses before any other.
                if let Some(oldest) = table
                    .values()
                    .min_by_key(|e| (!e.blocked.is_empty(), e.expires_at_boot_ns))
                    .map(|e| e.addr)
                {
                    table.remove(&oldest);
                }
            }
        }
        if let Some(previous) = table.get(&entry.addr) {
            if entry.blocked.is_empty() && !previous.blocked.is_empty() {
                entry.name.clone_from(&previous.name);
            }
            entry.blocked.extend(previous.blocked.iter().copied());
            entry.blocked.sort_unstable();
            entry.blocked.dedup();
            for name in &previous.refused_for {
                if entry.refused_for.len() < MAX_REFUSED_NAMES && !entry.refused_for.contains(name)
                {
                    entry.refused_for.push(name.clone());
                }
            }
        }
        table.insert(entry.addr, entry);
    }

    /// Every address of every session judged again by `blocked_by` (the rules of a reloaded
    /// set refusing a name, as `carapace_policy::engine::names::blocked_by` gives them) over
    /// the names it was refused for and the name it was last handed out for: those any rule
    /// still refuses. Expired entries count: the kernel refuses those expired or not.
    pub fn judge_again(&self, blocked_by: impl Fn(&str) -> Vec<NameBlock>) -> Vec<Refusal> {
        let sessions = self.lock();
        let mut out = Vec::new();
        for (&cgroup, table) in sessions.iter() {
            for entry in table.values() {
                let mut blocked: Vec<NameBlock> = std::iter::once(&entry.name)
                    .chain(&entry.refused_for)
                    .flat_map(|n| blocked_by(n))
                    .collect();
                if blocked.is_empty() {
                    continue;
                }
                blocked.sort_unstable();
                blocked.dedup();
                out.push(Refusal {
                    cgroup,
                    addr: entry.addr,
                    blocked,
                });
            }
        }
        out
    }

    /// Takes `refusals` (from [`Learned::judge_again`], once the kernel holds them) as the
    /// rules refusing each address; the addresses not among them are refused by none.
    pub fn renumber(&self, refusals: &[Refusal]) {
        let mut sessions = self.lock();
        for table in sessions.values_mut() {
            for entry in table.values_mut() {
                entry.blocked.clear();
            }
        }
        for r in refusals {
            if let Some(entry) = sessions.get_mut(&r.cgroup).and_then(|t| t.get_mut(&r.addr)) {
                entry.blocked.clone_from(&r.blocked);
            }
        }
    }

    /// The name `addr` was handed out for in the session, if it has not expired or rules
    /// refuse the address for it (the kernel does, expired or not).
    #[must_use]
    pub fn lookup(&self, session_cgroup: u64, addr: IpAddr) -> Option<String> {
        let now = boot_time_ns();
        self.lock()
            .get(&session_cgroup)?
            .get(&addr)
            .filter(|e| e.expires_at_boot_ns > now || !e.blocked.is_empty())
            .map(|e| e.name.clone())
    }

    /// The session's unexpired addresses, by address.
    #[must_use]
    pub fn list(&self, session_cgroup: u64) -> Vec<LearnedAddress> {
        let now = boot_time_ns();
        let mut out: Vec<LearnedAddress> = self
            .lock()
            .get(&session_cgroup)
            .map(|t| {
                t.values()
                    .filter(|e| e.expires_at_boot_ns > now)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        out.sort_by_key(|e| e.addr);
        out
    }

    /// Forgets a session that ended.
    pub fn forget(&self, session_cgroup: u64) {
        self.lock().remove(&session_cgroup);
    }
}
