//! Host names as network rules judge them, for a lookup rather than a connection: the
//! per-session resolver asks here whether a name may be resolved at all, and whether an
//! answer's address may be handed out for it.
//!
//! The semantics are Layer 1's (`evaluate::net_matches`): a rule name `example.com` covers
//! the name and its subdomains, `*.example.com` the subdomains only. Only rules in force
//! (`Activation::applies`) in `block` mode whose whole condition is a network match speak
//! of names; a lookup never reveals a port, so a rule restricted to some ports never
//! refuses one (the kernel decides per port on connect).
use std::net::IpAddr;

use super::evaluate::Activation;
use crate::rules::model::{Cidr, Host, NetMatch};
use crate::rules::{Cond, Mode, Rule, RuleSet};

/// What the rules say about resolving one name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameVerdict {
    /// The name may be resolved. `excepted` holds the kernel indices of the rules whose
    /// `except:` allows it on every port: the addresses learned for it are exceptions of
    /// those rules.
    Allowed {
        /// Kernel indices of the rules whose exception admits the name on every port.
        excepted: Vec<u32>,
    },
    /// The first rule (in rule order) that refuses the name.
    Refused {
        /// The refusing rule's id.
        rule_id: String,
        /// Its friendly message, for the agent's failed lookup.
        message: String,
    },
}

pub use super::hostname::covers;

/// The network match of a rule that speaks of names: `block` mode, in force, a network
/// condition of its own (composite conditions hold tool or command parts a lookup has not).
fn network_block<'r>(rule: &'r Rule, activation: &Activation) -> Option<&'r NetMatch> {
    match &rule.cond {
        Some(Cond::Net(net)) if rule.mode == Mode::Block && activation.applies(rule) => Some(net),
        _ => None,
    }
}

/// The base of an allow-list: the match holds every address (`host: "*"`, `::/0`,
/// `0.0.0.0/0`), whatever a name resolves to.
fn is_allow_list(net: &NetMatch) -> bool {
    net.cidrs.iter().any(Cidr::is_whole_family)
}

fn names_cover(net: &NetMatch, name: &str) -> bool {
    net.names().any(|pattern| covers(pattern, name))
}

/// Whether an `except:` of `rule` names `name`.
fn excepted(rule: &Rule, name: &str) -> bool {
    rule.except_net.iter().any(|e| names_cover(e, name))
}

/// Whether an `except:` of `rule` names `name` on every port. The kernel learns a name's
/// addresses as exceptions of whole rules; an exception on some ports only
/// (`{ host: pypi.org, port: 443 }`) would open every port that way, so it lets the lookup
/// through but adds no kernel exception (fail closed: connects stay refused).
fn excepted_on_every_port(rule: &Rule, name: &str) -> bool {
    rule.except_net
        .iter()
        .any(|e| e.ports.is_empty() && names_cover(e, name))
}

/// What the rules in force say about resolving `name` (case-insensitive, a trailing dot
/// ignored).
#[must_use]
pub fn verdict(rules: &RuleSet, activation: &Activation, name: &str) -> NameVerdict {
    verdict_with(rules, activation, name, true)
}

/// What the rules in force that name hosts say of `name`, reached as an alias (a CNAME
/// target of an answer to an allowed name): a rule naming it refuses the answer, while an
/// allow-list's base does not (the names an allowed host is served under, a CDN's, are
/// not for its author to list).
#[must_use]
pub fn alias_verdict(rules: &RuleSet, activation: &Activation, name: &str) -> NameVerdict {
    verdict_with(rules, activation, name, false)
}

fn verdict_with(
    rules: &RuleSet,
    activation: &Activation,
    name: &str,
    allow_lists: bool,
) -> NameVerdict {
    let name = name.trim_end_matches('.');
    let mut allowed_by = Vec::new();
    for rule in rules.rules() {
        let Some(net) = network_block(rule, activation) else {
            continue;
        };
        let named = if is_allow_list(net) {
            allow_lists
        } else {
            names_cover(net, name)
        };
        if !named {
            continue;
        }
        if excepted_on_every_port(rule, name) {
            allowed_by.extend(rule.kernel_index);
        } else if net.ports.is_empty() && !excepted(rule, name) {
            return NameVerdict::Refused {
                rule_id: rule.id.clone(),
                message: rule.message.clone(),
            };
        }
    }
    allowed_by.sort_unstable();
    allowed_by.dedup();
    NameVerdict::Allowed {
        excepted: allowed_by,
    }
}

/// What the `tls: sni` rules in force say of a connection to an address the session
/// learned, by the name the client asks the server for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SniVerdict {
    /// No rule in force refuses the name: the connection goes on.
    Pass,
    /// The first `tls: sni` rule (in rule order) that refuses the name, or that is an
    /// allow-list and was given no name (`requested` of `None`).
    Refused {
        /// The refusing rule's id.
        rule_id: String,
        /// Its friendly message.
        message: String,
    },
}

/// Whether some rule of the set checks the names clients ask for (`tls: sni`), in force now
/// or once triggered: the session's connects to learned addresses then go through the check.
#[must_use]
pub fn needs_sni_check(rules: &RuleSet) -> bool {
    rules
        .rules()
        .iter()
        .any(|rule| rule.tls.is_some() && rule.mode == Mode::Block)
}

/// What the `tls: sni` rules in force say of a connection to `port` asking for the server
/// name `requested` (the TLS `ClientHello`'s server name, the HTTP `Host`): the resolver's
/// semantics ([`verdict`]), with the port known, so a rule or exception limited to some
/// ports counts on those. A connection that names no server passes only where no
/// `tls: sni` allow-list is in force: an allow-list cannot admit what it cannot name.
#[must_use]
pub fn sni_verdict(
    rules: &RuleSet,
    activation: &Activation,
    requested: Option<&str>,
    port: u16,
) -> SniVerdict {
    let on_port = |net: &NetMatch| net.ports.is_empty() || net.ports.contains(&port);
    for rule in rules.rules() {
        let Some(net) = network_block(rule, activation).filter(|_| rule.tls.is_some()) else {
            continue;
        };
        if !on_port(net) {
            continue;
        }
        let refused = match requested.map(|n| n.trim_end_matches('.')) {
            None => is_allow_list(net),
            Some(name) => {
                (is_allow_list(net) || names_cover(net, name))
                    && !rule
                        .except_net
                        .iter()
                        .any(|e| on_port(e) && names_cover(e, name))
            }
        };
        if refused {
            return SniVerdict::Refused {
                rule_id: rule.id.clone(),
                message: rule.message.clone(),
            };
        }
    }
    SniVerdict::Pass
}

/// A rule that refuses the addresses a name resolves to: kernel index `rule`, on `port`
/// (0: every port).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NameBlock {
    /// The rule's kernel index (its bit in the address map's entry).
    pub rule: u32,
    /// The refused port; 0 for every port.
    pub port: u16,
}

/// The kernel rules whose names cover `name` and so refuse the addresses it resolves to,
/// whether they are in force now or not (the kernel checks that at each connect: a session
/// rule switched on later refuses an address looked up before). A lookup such a rule
/// refuses is not answered at all; this is for the answers that are: a rule limited to
/// some ports, a rule not yet in force, a name reached through another one (CNAME).
///
/// Allow-list bases are left out: they refuse every address already. An exception of the
/// name on every port takes the rule out; one on some ports only is not expressible per
/// address and is ignored (fail closed: the rule's ports stay refused).
#[must_use]
pub fn blocked_by(rules: &RuleSet, name: &str) -> Vec<NameBlock> {
    let name = name.trim_end_matches('.');
    let mut out = Vec::new();
    for rule in rules.rules() {
        // An approve rule too: the kernel refuses the name's addresses until a human
        // approves the address and port for the session.
        let (Some(Cond::Net(net)), Mode::Block | Mode::Approve, Some(index)) =
            (&rule.cond, rule.mode, rule.kernel_index)
        else {
            continue;
        };
        if is_allow_list(net) || !names_cover(net, name) || excepted_on_every_port(rule, name) {
            continue;
        }
        if net.ports.is_empty() {
            out.push(NameBlock {
                rule: index,
                port: 0,
            });
        } else {
            out.extend(
                net.ports
                    .iter()
                    .map(|&port| NameBlock { rule: index, port }),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether a rule set needs a resolver per session: some network `block` or `approve` rule
/// (in force now or once triggered) names hosts, wildcards included, or a `block` rule is
/// the base of an allow-list.
#[must_use]
pub fn needs_resolver(rules: &RuleSet) -> bool {
    rules.rules().iter().any(|rule| {
        matches!(&rule.cond, Some(Cond::Net(net))
            if (rule.mode == Mode::Block && is_allow_list(net))
                || (matches!(rule.mode, Mode::Block | Mode::Approve) && net.names().next().is_some()))
    })
}

/// Addresses no public name should resolve to: pointing an allowed name at them would
/// turn an allow-list exception into a door to the machine, its network or the cloud
/// metadata service (DNS rebinding).
///
/// An IPv6 address that carries an IPv4 one a router or the host turns back into it
/// (IPv4-mapped `::ffff:0:0/96`, the NAT64 prefixes `64:ff9b::/96` and `64:ff9b:1::/48`,
/// 6to4 `2002::/16`) is judged by that IPv4 address.
#[must_use]
pub(crate) fn is_private(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                // 0.0.0.0/8, "this network": Linux reaches the host itself through 0.0.0.0.
                || a == 0
                // 100.64.0.0/10, carrier-grade NAT.
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return is_private(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                // fc00::/7 unique local, fe80::/10 link-local, fec0::/10 site-local.
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first & 0xffc0) == 0xfec0
        }
    }
}

/// The IPv4 address an IPv6 one stands for on its way (see [`is_private`]).
fn embedded_v4(v6: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let o = v6.octets();
    let last = std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        // The well-known NAT64 prefix, and the local-use one (RFC 8215), which embeds the
        // address at /96 in practice.
        [0x64, 0xff9b, 0, 0, 0, 0, ..] | [0x64, 0xff9b, 1, ..] => Some(last),
        [0x2002, ..] => Some(std::net::Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

/// `localhost` and names below it, which resolve to loopback by definition (RFC 6761).
fn is_localhost(name: &str) -> bool {
    covers("localhost", name)
}

/// Whether an answer may give `addr` for `name`: the first rule in force whose allow-list
/// exception admits `name` but whose exceptions do not hold the private address `addr`, if
/// any. Such an answer would let the kernel allow what the rule's author refused. A name
/// allowed explicitly that is `localhost`-like may point at loopback; any other private
/// address is allowed only through an address exception (`except: [10.1.0.0/16]`).
#[must_use]
pub fn private_answer_refused<'r>(
    rules: &'r RuleSet,
    activation: &Activation,
    name: &str,
    addr: IpAddr,
) -> Option<&'r Rule> {
    let addr = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        IpAddr::V4(_) => addr,
    };
    if !is_private(addr) {
        return None;
    }
    let name = name.trim_end_matches('.');
    rules.rules().iter().find(|rule| {
        let Some(net) = network_block(rule, activation) else {
            return false;
        };
        if !is_allow_list(net) || !excepted(rule, name) {
            return false;
        }
        let by_address = rule.except_net.iter().any(|e| {
            e.cidrs.iter().any(|c| c.contains(addr))
                || e.hosts
                    .iter()
                    .any(|h| matches!(h, Host::Ip(ip) if *ip == addr))
        });
        let loopback_name = is_localhost(name) && addr.is_loopback();
        !by_address && !loopback_name
    })
}

#[cfg(test)]
#[path = "names_tests.rs"]
mod tests;
