//! The kernel's side of network rules by name: which session's DNS goes to which resolver
//! port (`RESOLVERS`), which addresses each session's resolver answered for names a rule's
//! `except:` allows (`LEARNED`), until when and for which rules, and which rules refuse
//! addresses it answered for the names they cover (`LEARNED_REFUSALS`, a map that never
//! evicts: forgetting a refusal would allow). The programs read them (`dns_redirect`,
//! `matcher::check_net`); only the daemon writes them. For `tls: sni`
//! rules: which session's connects to its learned addresses go to which server-name proxy
//! port (`SNI_PROXIES`), and where each connection the proxy accepts first meant to go
//! (`SNI_PEERS`, written by the `sni_peer` program, taken by the proxy).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use aya::maps::{HashMap, Map, MapData};
use carapace_common::{
    maps as names, Learned, LearnedBlock, LearnedKey, LearnedRefusals, OrigDst, SniPeerKey,
    AF_INET, AF_INET6, BLOCK_IN_ANY_STATE, LEARNED_BLOCKS, LEARNED_RULES,
};
use carapace_policy::engine::names::NameBlock;

use super::map_error::MapsError;
use super::maps::take_as;
use crate::dns::{LearnedAddress, Refusal};

pub struct DnsMaps {
    resolvers: HashMap<MapData, u64, u32>,
    /// The reverse of `resolvers`: resolver port → session cgroup.
    resolver_ports: HashMap<MapData, u32, u64>,
    learned: HashMap<MapData, LearnedKey, Learned>,
    refusals: HashMap<MapData, LearnedKey, LearnedRefusals>,
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
    pub fn take(maps: &mut Vec<(String, Map)>) -> Result<Self, MapsError> {
        let mut taken = Self {
            resolvers: take_as(maps, names::RESOLVERS)?,
            resolver_ports: take_as(maps, names::RESOLVER_PORTS)?,
            learned: take_as(maps, names::LEARNED)?,
            refusals: take_as(maps, names::LEARNED_REFUSALS)?,
            sni_proxies: take_as(maps, names::SNI_PROXIES)?,
            sni_peers: take_as(maps, names::SNI_PEERS)?,
        };
        // Ports of an earlier daemon's resolvers (the map is pinned): closed now, and free
        // for any program to listen on; each running session's is set again when its
        // resolver starts.
        let stale: Vec<u32> = taken.resolver_ports.keys().filter_map(Result::ok).collect();
        for port in stale {
            let _ = taken.resolver_ports.remove(&port);
        }
        Ok(taken)
    }

    /// Forgets the resolver ports recorded for session `cgroup`.
    fn forget_resolver_ports(&mut self, cgroup: u64) {
        let ports: Vec<u32> = self
            .resolver_ports
            .iter()
            .filter_map(Result::ok)
            .filter(|(_, owner)| *owner == cgroup)
            .map(|(port, _)| port)
            .collect();
        for port in ports {
            let _ = self.resolver_ports.remove(&port);
        }
    }

    /// Sends session `cgroup`'s connects to ports 443 and 80 of its learned addresses to its
    /// server-name proxy on loopback port `port`.
    pub fn set_sni_proxy(&mut self, cgroup: u64, port: u16) -> Result<(), MapsError> {
        self.sni_proxies
            .insert(cgroup, u32::from(port), 0)
            .map_err(|source| MapsError::Redirect {
                action: format!("set the server-name proxy of session cgroup {cgroup}"),
                source,
            })
    }

    /// Stops sending the session's connects to a server-name proxy.
    pub fn clear_sni_proxy(&mut self, cgroup: u64) -> Result<(), MapsError> {
        match self.sni_proxies.remove(&cgroup) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(source) => Err(MapsError::Redirect {
                action: "remove a session's server-name proxy".to_owned(),
                source,
            }),
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
    /// The port is recorded the other way round too (first), so that the kernel refuses
    /// queries sent to it from outside the session (`resolver_peer`).
    pub fn set_resolver(&mut self, cgroup: u64, port: u16) -> Result<(), MapsError> {
        self.forget_resolver_ports(cgroup);
        self.resolver_ports
            .insert(u32::from(port), cgroup, 0)
            .map_err(|source| MapsError::Redirect {
                action: format!("keep the resolver port of session cgroup {cgroup} to it"),
                source,
            })?;
        self.resolvers
            .insert(cgroup, u32::from(port), 0)
            .map_err(|source| MapsError::Redirect {
                action: format!("set the resolver of session cgroup {cgroup}"),
                source,
            })
    }

    /// Stops redirecting the session's DNS and forgets what its resolver answered.
    pub fn clear_resolver(&mut self, cgroup: u64) -> Result<(), MapsError> {
        self.forget_resolver_ports(cgroup);
        match self.resolvers.remove(&cgroup) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => {}
            Err(source) => {
                return Err(MapsError::Redirect {
                    action: "remove a session's resolver".to_owned(),
                    source,
                })
            }
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
        let keys: Vec<LearnedKey> = self
            .refusals
            .keys()
            .filter_map(Result::ok)
            .filter(|k| k.cgroup == cgroup)
            .collect();
        for k in keys {
            let _ = self.refusals.remove(&k);
        }
        Ok(())
    }

    /// After a reload, rule indices may name other rules. Every learned exception is
    /// forgotten, so one learned for a rule does not carry over to another: sessions look the
    /// names up again, and until they do, connects to those addresses are refused (fail
    /// closed). The refusals are replaced by `refusals`, the names judged again under the
    /// new rules: each address still refused is overwritten in place, never absent for a
    /// moment, after the entries no longer refused are removed.
    pub fn after_reload(&mut self, refusals: &[Refusal]) {
        let keys: Vec<LearnedKey> = self.learned.keys().filter_map(Result::ok).collect();
        for k in keys {
            let _ = self.learned.remove(&k);
        }
        let kept: std::collections::HashSet<(u64, [u8; 16])> = refusals
            .iter()
            .map(|r| (r.cgroup, key_addr(r.addr)))
            .collect();
        // Entries no longer refused go first: that frees room for the new ones, and they
        // refuse nothing the new rules refuse.
        let stale: Vec<LearnedKey> = self
            .refusals
            .keys()
            .filter_map(Result::ok)
            .filter(|k| !kept.contains(&(k.cgroup, k.addr)))
            .collect();
        for k in stale {
            let _ = self.refusals.remove(&k);
        }
        for r in refusals {
            let key = LearnedKey {
                cgroup: r.cgroup,
                addr: key_addr(r.addr),
            };
            let value = refusals_value(fit_blocks(r.blocked.clone(), false));
            if let Err(e) = self.refusals.insert(key, value, 0) {
                tracing::warn!(cgroup = r.cgroup, addr = %r.addr, "cannot keep a refusal across the reload: {e}");
            }
        }
    }

    /// Records what session `cgroup`'s resolver answered: `entry.addr` is an exception to
    /// the rules `entry.excepted` (kernel indices) until `entry.expires_at_boot_ns`
    /// (`CLOCK_BOOTTIME` ns), and refused by the rules `entry.blocked`. An address already
    /// learned keeps its other rules and the later expiry. Exceptions past
    /// [`LEARNED_RULES`] are left out, so connects they govern stay refused; refusals past
    /// [`LEARNED_BLOCKS`] widen to every port of their rule, and past that the last one
    /// held refuses in any state, for those left out (fail closed either way). An error
    /// means the refusals were not recorded: the caller must not hand the address out.
    pub fn learn(&mut self, cgroup: u64, entry: &LearnedAddress) -> Result<(), MapsError> {
        let key = LearnedKey {
            cgroup,
            addr: key_addr(entry.addr),
        };
        // Refusals first: an address must not be an exception the kernel knows while the
        // refusal that comes with it is missing.
        if !entry.blocked.is_empty() {
            let held = self.refusals.get(&key, 0).unwrap_or_default();
            let count = (held.blocked as usize).min(LEARNED_BLOCKS);
            let overflowed = held.blocks[..count]
                .iter()
                .any(|b| b.flags & BLOCK_IN_ANY_STATE != 0);
            let all = held.blocks[..count]
                .iter()
                .map(|b| NameBlock {
                    rule: b.rule,
                    port: b.port,
                })
                .chain(entry.blocked.iter().copied())
                .collect();
            let blocks = fit_blocks(all, overflowed);
            if !overflowed && blocks.iter().any(|b| b.flags & BLOCK_IN_ANY_STATE != 0) {
                tracing::warn!(
                    cgroup,
                    addr = %entry.addr,
                    "more rules refuse the address than the kernel holds per address \
                     ({LEARNED_BLOCKS}); it is refused in any state by the last one held"
                );
            }
            self.refusals
                .insert(key, refusals_value(blocks), 0)
                .map_err(|source| MapsError::Redirect {
                    action: format!(
                        "record the rules refusing {} for session {cgroup}",
                        entry.addr
                    ),
                    source,
                })?;
        }
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
        // The programs take an address's refusals from `LEARNED_REFUSALS`.
        value.blocked = 0;
        if let Err(e) = self.learned.insert(key, value, 0) {
            // Not recorded: connects to it stay refused (fail closed).
            tracing::warn!(cgroup, addr = %entry.addr, "cannot record a learned address: {e}");
        }
        Ok(())
    }
}

/// `blocks` sorted, each once, as the kernel holds them. When they are more than an entry
/// holds, a rule's ports widen to every port (port 0), which refuses more, never less; when
/// still more, or `overflowed` (an entry already holds more than it could), the last one
/// held is flagged [`BLOCK_IN_ANY_STATE`]: it stands for the rules left out, whose session
/// state the kernel cannot check, so it refuses whatever their state (fail closed).
fn fit_blocks(mut blocks: Vec<NameBlock>, overflowed: bool) -> Vec<LearnedBlock> {
    blocks.sort_unstable();
    blocks.dedup();
    if blocks.len() > LEARNED_BLOCKS {
        for b in &mut blocks {
            b.port = 0;
        }
        blocks.dedup();
    }
    let overflowed = overflowed || blocks.len() > LEARNED_BLOCKS;
    blocks.truncate(LEARNED_BLOCKS);
    let mut out: Vec<LearnedBlock> = blocks
        .iter()
        .map(|b| LearnedBlock {
            rule: b.rule,
            port: b.port,
            flags: 0,
        })
        .collect();
    if overflowed {
        if let Some(last) = out.last_mut() {
            last.port = 0;
            last.flags = BLOCK_IN_ANY_STATE;
        }
    }
    out
}

/// The map value holding `blocks` (at most [`LEARNED_BLOCKS`], as [`fit_blocks`] makes them).
fn refusals_value(blocks: Vec<LearnedBlock>) -> LearnedRefusals {
    let mut value = LearnedRefusals::default();
    for (slot, b) in value.blocks.iter_mut().zip(blocks) {
        *slot = b;
        value.blocked += 1;
    }
    value
}

/// The maps as the sessions' resolvers use them (`crate::dns`): where each listens, and
/// what each handed out.
pub struct KernelDns(pub Arc<Mutex<DnsMaps>>);

impl crate::dns::ResolverRegistry for KernelDns {
    fn set_resolver(&self, session_cgroup: u64, port: u16) -> Result<(), MapsError> {
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
            tracing::warn!(cgroup = session_cgroup, "{e}");
        }
    }
}

impl crate::dns::Learner for KernelDns {
    fn learn(&self, session_cgroup: u64, entry: &LearnedAddress) -> Result<(), MapsError> {
        let mut maps = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // An address no rule excepts or refuses changes nothing in the kernel (the
        // userspace table keeps its name for messages), unless the session's connects are
        // checked by server name: the kernel sends those to learned addresses to its proxy.
        if entry.excepted.is_empty()
            && entry.blocked.is_empty()
            && !maps.checks_names(session_cgroup)
        {
            return Ok(());
        }
        maps.learn(session_cgroup, entry)
    }
}

/// The maps as the sessions' server-name proxies use them (`crate::sni`): where each
/// listens, and where each accepted connection first meant to go.
impl crate::sni::ProxyRegistry for KernelDns {
    fn set_proxy(&self, session_cgroup: u64, port: u16) -> Result<(), MapsError> {
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
            tracing::warn!(cgroup = session_cgroup, "{e}");
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
    fn refusals_past_what_an_entry_holds_widen_then_refuse_in_any_state() {
        let b = |rule, port| NameBlock { rule, port };
        let held = |rule, port, flags| LearnedBlock { rule, port, flags };
        // Within the limit: sorted, each once, ports kept.
        assert_eq!(
            fit_blocks(vec![b(2, 443), b(1, 22), b(2, 443)], false),
            [held(1, 22, 0), held(2, 443, 0)]
        );
        // Nine pairs of two rules: each rule on every port, which refuses more, not less.
        let many: Vec<NameBlock> = (0..9).map(|i| b(i % 2, 8000 + i as u16)).collect();
        assert_eq!(fit_blocks(many, false), [held(0, 0, 0), held(1, 0, 0)]);
        // Nine rules: eight held, the last of them in any state, on every port, for the
        // ninth, which has no slot.
        let nine: Vec<NameBlock> = (0..9).map(|rule| b(rule, 443)).collect();
        let fitted = fit_blocks(nine, false);
        assert_eq!(fitted.len(), LEARNED_BLOCKS);
        assert!(fitted[..7]
            .iter()
            .zip(0..)
            .all(|(h, rule)| *h == held(rule, 0, 0)));
        assert_eq!(fitted[7], held(7, 0, BLOCK_IN_ANY_STATE));
        // An entry that overflowed before stays flagged when it is merged again.
        assert_eq!(
            fit_blocks(vec![b(3, 22)], true),
            [held(3, 0, BLOCK_IN_ANY_STATE)]
        );
    }

    #[test]
    fn refusals_fill_the_value_in_order() {
        let value = refusals_value(fit_blocks(vec![NameBlock { rule: 4, port: 80 }], false));
        assert_eq!(value.blocked, 1);
        assert_eq!(
            value.blocks[0],
            LearnedBlock {
                rule: 4,
                port: 80,
                flags: 0
            }
        );
    }
}
