//! The kernel's side of network rules by name: which session's DNS goes to which resolver
//! port (`RESOLVERS`), and which addresses each session's resolver answered for names a
//! rule's `except:` allows (`LEARNED`), until when and for which rules. The programs read
//! both (`dns_redirect`, `matcher::check_net`); only the daemon writes them. For `tls: sni`
//! rules: which session's connects to its learned addresses go to which server-name proxy
//! port (`SNI_PROXIES`), and where each connection the proxy accepts first meant to go
//! (`SNI_PEERS`, written by the `sni_peer` program, taken by the proxy).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context as _;
use aya::maps::{HashMap, Map, MapData};
use carapace_common::{
    maps as names, Learned, LearnedBlock, LearnedKey, OrigDst, SniPeerKey, AF_INET, AF_INET6,
    LEARNED_BLOCKS, LEARNED_RULES,
};
use carapace_policy::engine::names::NameBlock;

use crate::dns::LearnedAddress;

pub struct DnsMaps {
    resolvers: HashMap<MapData, u64, u32>,
    learned: HashMap<MapData, LearnedKey, Learned>,
    sni_proxies: HashMap<MapData, u64, u32>,
    sni_peers: HashMap<MapData, SniPeerKey, OrigDst>,
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
            sni_proxies: take(names::SNI_PROXIES)?
                .try_into()
                .context("map SNI_PROXIES has an unexpected type")?,
            sni_peers: take(names::SNI_PEERS)?
                .try_into()
                .context("map SNI_PEERS has an unexpected type")?,
        })
    }

    /// Sends session `cgroup`'s connects to ports 443 and 80 of its learned addresses to its
    /// server-name proxy on loopback port `port`.
    pub fn set_sni_proxy(&mut self, cgroup: u64, port: u16) -> anyhow::Result<()> {
        self.sni_proxies
            .insert(cgroup, u32::from(port), 0)
            .with_context(|| format!("cannot set the server-name proxy of session cgroup {cgroup}"))
    }

    /// Stops sending the session's connects to a server-name proxy.
    pub fn clear_sni_proxy(&mut self, cgroup: u64) -> anyhow::Result<()> {
        match self.sni_proxies.remove(&cgroup) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(e).context("cannot remove a session's server-name proxy"),
        }
    }

    /// Whether session `cgroup`'s connects are checked by server name.
    #[must_use]
    pub fn checks_names(&self, cgroup: u64) -> bool {
        self.sni_proxies.get(&cgroup, 0).is_ok()
    }

    /// Where the connection from `peer` (as the proxy accepted it) first meant to go; the
    /// entry is taken, so it serves one connection.
    pub fn take_sni_peer(&mut self, peer: SocketAddr) -> Option<SocketAddr> {
        let key = SniPeerKey {
            addr: key_addr(peer.ip()),
            port: peer.port(),
            pad: 0,
            pad2: 0,
        };
        let orig = self.sni_peers.get(&key, 0).ok()?;
        let _ = self.sni_peers.remove(&key);
        let port = u16::from_be(orig.port);
        match orig.family {
            AF_INET => {
                let [a, b, c, d, ..] = orig.addr;
                Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(a, b, c, d)), port))
            }
            AF_INET6 => {
                let v6 = Ipv6Addr::from(orig.addr);
                // An IPv4-mapped destination is the IPv4 address: the proxy connects to it so.
                let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
                Some(SocketAddr::new(ip, port))
            }
            _ => None,
        }
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

    /// Records what session `cgroup`'s resolver answered: `entry.addr` is an exception to
    /// the rules `entry.excepted` (kernel indices) until `entry.expires_at_boot_ns`
    /// (`CLOCK_BOOTTIME` ns), and refused by the rules `entry.blocked`. An address already
    /// learned keeps its other rules and the later expiry. Exceptions past
    /// [`LEARNED_RULES`] are left out, so connects they govern stay refused; refusals past
    /// [`LEARNED_BLOCKS`] widen to every port of their rule, and past that the entry
    /// refuses by the rules it holds and says so (fail closed either way, as far as it
    /// can be).
    pub fn learn(&mut self, cgroup: u64, entry: &LearnedAddress) -> anyhow::Result<()> {
        let key = LearnedKey {
            cgroup,
            addr: key_addr(entry.addr),
        };
        let mut value = self.learned.get(&key, 0).unwrap_or_default();
        value.expires = value.expires.max(entry.expires_at_boot_ns);
        for &rule in &entry.excepted {
            let count = value.count as usize;
            if value.rules[..count.min(LEARNED_RULES)].contains(&rule) {
                continue;
            }
            if count < LEARNED_RULES {
                value.rules[count] = rule;
                value.count += 1;
            }
        }
        let held = value.blocks[..(value.blocked as usize).min(LEARNED_BLOCKS)]
            .iter()
            .map(|b| NameBlock {
                rule: b.rule,
                port: b.port,
            });
        let blocks = fit_blocks(held.chain(entry.blocked.iter().copied()).collect());
        if blocks.len() > LEARNED_BLOCKS {
            tracing::warn!(
                cgroup,
                addr = %entry.addr,
                "more rules refuse the address than the kernel holds per address \
                 ({LEARNED_BLOCKS}); it refuses by the first of them only"
            );
        }
        value.blocked = 0;
        for (slot, b) in value.blocks.iter_mut().zip(&blocks) {
            *slot = LearnedBlock {
                rule: b.rule,
                port: b.port,
                pad: 0,
            };
            value.blocked += 1;
        }
        self.learned.insert(key, value, 0).with_context(|| {
            format!(
                "cannot record the address {} for session {cgroup}",
                entry.addr
            )
        })
    }
}

/// `blocks` sorted, each once; when they are more than an entry holds, a rule's ports
/// widen to every port (port 0), which refuses more, never less.
fn fit_blocks(mut blocks: Vec<NameBlock>) -> Vec<NameBlock> {
    blocks.sort_unstable();
    blocks.dedup();
    if blocks.len() > LEARNED_BLOCKS {
        for b in &mut blocks {
            b.port = 0;
        }
        blocks.dedup();
    }
    blocks
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
    fn learn(&self, session_cgroup: u64, entry: &LearnedAddress) {
        let mut maps = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // An address no rule excepts or refuses changes nothing in the kernel (the
        // userspace table keeps its name for messages), unless the session's connects are
        // checked by server name: the kernel sends those to learned addresses to its proxy.
        if entry.excepted.is_empty()
            && entry.blocked.is_empty()
            && !maps.checks_names(session_cgroup)
        {
            return;
        }
        if let Err(e) = maps.learn(session_cgroup, entry) {
            // Not recorded: connects to it stay refused (fail closed).
            tracing::warn!(cgroup = session_cgroup, "{e:#}");
        }
    }
}

/// The maps as the sessions' server-name proxies use them (`crate::sni`): where each
/// listens, and where each accepted connection first meant to go.
impl crate::sni::ProxyRegistry for KernelDns {
    fn set_proxy(&self, session_cgroup: u64, port: u16) -> anyhow::Result<()> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .set_sni_proxy(session_cgroup, port)
    }

    fn clear_proxy(&self, session_cgroup: u64) {
        if let Err(e) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear_sni_proxy(session_cgroup)
        {
            tracing::warn!(cgroup = session_cgroup, "{e:#}");
        }
    }

    fn destination(&self, peer: SocketAddr) -> Option<SocketAddr> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take_sni_peer(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_past_what_an_entry_holds_widen_to_every_port_of_their_rule() {
        let b = |rule, port| NameBlock { rule, port };
        // Within the limit: sorted, each once, ports kept.
        assert_eq!(
            fit_blocks(vec![b(2, 443), b(1, 22), b(2, 443)]),
            [b(1, 22), b(2, 443)]
        );
        // Nine pairs of two rules: each rule on every port, which refuses more, not less.
        let many: Vec<NameBlock> = (0..9).map(|i| b(i % 2, 8000 + i as u16)).collect();
        assert_eq!(fit_blocks(many), [b(0, 0), b(1, 0)]);
    }
}
