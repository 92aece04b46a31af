//! The kernel's side of network rules by name: which session's DNS goes to which resolver
//! port (`RESOLVERS`), and which addresses each session's resolver answered for names a
//! rule's `except:` allows (`LEARNED`), until when and for which rules. The programs read
//! both (`dns_redirect`, `matcher::check_net`); only the daemon writes them.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use aya::maps::{HashMap, Map, MapData};
use carapace_common::{maps as names, Learned, LearnedKey, LEARNED_RULES};

pub struct DnsMaps {
    resolvers: HashMap<MapData, u64, u32>,
    learned: HashMap<MapData, LearnedKey, Learned>,
}

/// An address as the maps key it: IPv4 mapped into IPv6, as in `NetKey`.
#[must_use]
pub fn key_addr(addr: IpAddr) -> [u8; 16] {
    match addr {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

impl DnsMaps {
    /// Takes the two maps out of the loaded ones.
    pub fn take(maps: &mut Vec<(String, Map)>) -> anyhow::Result<Self> {
        let mut take = |name: &str| {
            let at = maps
                .iter()
                .position(|(n, _)| n == name)
                .with_context(|| format!("map {name} missing"))?;
            Ok::<_, anyhow::Error>(maps.swap_remove(at).1)
        };
        Ok(Self {
            resolvers: take(names::RESOLVERS)?
                .try_into()
                .context("map RESOLVERS has an unexpected type")?,
            learned: take(names::LEARNED)?
                .try_into()
                .context("map LEARNED has an unexpected type")?,
        })
    }

    /// Sends the DNS of session `cgroup` to its resolver on loopback port `port`.
    pub fn set_resolver(&mut self, cgroup: u64, port: u16) -> anyhow::Result<()> {
        self.resolvers
            .insert(cgroup, u32::from(port), 0)
            .with_context(|| format!("cannot set the resolver of session cgroup {cgroup}"))
    }

    /// Stops redirecting the session's DNS and forgets what its resolver answered.
    pub fn clear_resolver(&mut self, cgroup: u64) -> anyhow::Result<()> {
        match self.resolvers.remove(&cgroup) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
            Err(e) => return Err(e).context("cannot remove a session's resolver"),
        }
        let keys: Vec<LearnedKey> = self
            .learned
            .keys()
            .filter_map(Result::ok)
            .filter(|k| k.cgroup == cgroup)
            .collect();
        for k in keys {
            let _ = self.learned.remove(&k);
        }
        Ok(())
    }

    /// Forgets every learned address: after a reload, rule indices may name other rules, so
    /// an exception learned for one must not carry over to another. Sessions look the names
    /// up again; until they do, connects to those addresses are refused (fail closed).
    pub fn forget_learned(&mut self) {
        let keys: Vec<LearnedKey> = self.learned.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = self.learned.remove(&k);
        }
    }

    /// Records that session `cgroup`'s resolver answered `addr` for a name the rules
    /// `rules` (kernel indices) allow, until `expires` (`CLOCK_BOOTTIME` ns). An address
    /// already learned keeps its other rules and the later expiry; rules past
    /// [`LEARNED_RULES`] are left out, so connects they govern stay refused (fail closed).
    pub fn learn(
        &mut self,
        cgroup: u64,
        addr: IpAddr,
        expires: u64,
        rules: &[u32],
    ) -> anyhow::Result<()> {
        let key = LearnedKey {
            cgroup,
            addr: key_addr(addr),
        };
        let mut entry = self.learned.get(&key, 0).unwrap_or_default();
        entry.expires = entry.expires.max(expires);
        for &rule in rules {
            let count = entry.count as usize;
            if entry.rules[..count.min(LEARNED_RULES)].contains(&rule) {
                continue;
            }
            if count < LEARNED_RULES {
                entry.rules[count] = rule;
                entry.count += 1;
            }
        }
        self.learned
            .insert(key, entry, 0)
            .with_context(|| format!("cannot record the address {addr} for session {cgroup}"))
    }
}

/// The maps as the sessions' resolvers use them (`crate::dns`): where each listens, and
/// what each handed out.
pub struct KernelDns(pub Arc<Mutex<DnsMaps>>);

impl crate::dns::ResolverRegistry for KernelDns {
    fn set_resolver(&self, session_cgroup: u64, port: u16) -> anyhow::Result<()> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .set_resolver(session_cgroup, port)
    }

    fn clear_resolver(&self, session_cgroup: u64) {
        if let Err(e) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear_resolver(session_cgroup)
        {
            tracing::warn!(cgroup = session_cgroup, "{e:#}");
        }
    }
}

impl crate::dns::Learner for KernelDns {
    fn learn(&self, session_cgroup: u64, addr: IpAddr, expires_at_boot_ns: u64, excepted: &[u32]) {
        // An address no rule excepts opens nothing in the kernel: the userspace table
        // keeps its name for messages.
        if excepted.is_empty() {
            return;
        }
        if let Err(e) = self.0.lock().unwrap_or_else(PoisonError::into_inner).learn(
            session_cgroup,
            addr,
            expires_at_boot_ns,
            excepted,
        ) {
            // Not recorded: connects to it stay refused (fail closed).
            tracing::warn!(cgroup = session_cgroup, "{e:#}");
        }
    }
}
