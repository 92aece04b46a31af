//! Encrypted DNS under an allow-list. A session's plain DNS goes to its own resolver, which
//! refuses the names the allow-list does not allow; a program that asks a public resolver
//! over HTTPS (`DoH`) or TLS (`DoT`, port 853) instead would learn any address, and the name
//! it connects to next is hidden from the rules. An allow-list's exceptions are often
//! broad enough to reach such a resolver (`*.google.com`, a cloud's address blocks), so
//! each allow-list that covers every port brings two guard rules of its own, in force
//! when it is:
//!
//! - `<id>/encrypted-dns`: the well-known `DoH`/`DoT` resolvers of `rules/encrypted-dns.txt`,
//!   by name (refused at lookup, and their learned addresses in the kernel) and by address
//!   (kernel map entries), on every port;
//! - `<id>/dns-over-tls`: port 853 of every address.
//!
//! Neither gives way to a wildcard or an address block of the allow-list: only an
//! exception that names the resolver itself (host or address) lifts the first, and only
//! one that names port 853 lifts the second.
use std::net::IpAddr;
use std::sync::OnceLock;

use super::model::{Cidr, Host, NetMatch};
use super::{Cond, Mode, Rule};

/// The list, as data: one host name or address a line, `#` comments.
const LIST: &str = include_str!("../../../rules/encrypted-dns.txt");

/// DNS over TLS (RFC 7858).
pub(crate) const DOT_PORT: u16 = 853;

/// The resolvers of the list.
#[derive(Debug, Default)]
pub(crate) struct Endpoints {
    pub names: Vec<&'static str>,
    pub addrs: Vec<IpAddr>,
}

/// The list, read once.
#[must_use]
pub fn endpoints() -> &'static Endpoints {
    static ENDPOINTS: OnceLock<Endpoints> = OnceLock::new();
    ENDPOINTS.get_or_init(|| parse(LIST))
}

fn parse(text: &'static str) -> Endpoints {
    let mut out = Endpoints::default();
    for line in text.lines() {
        let entry = line.split('#').next().unwrap_or("").trim();
        if entry.is_empty() {
            continue;
        }
        match entry.parse::<IpAddr>() {
            Ok(addr) => out.addrs.push(addr),
            Err(_) => out.names.push(entry),
        }
    }
    out
}

/// An allow-list's base over every port: `block` of every address with no port.
fn covers_every_port(rule: &Rule) -> bool {
    rule.mode == Mode::Block
        && matches!(&rule.cond, Some(Cond::Net(net))
            if net.ports.is_empty() && net.cidrs.iter().any(Cidr::is_whole_family))
}

/// The exceptions of `rule` that name a listed resolver itself, narrowed to those hosts.
fn named_resolvers(rule: &Rule, list: &Endpoints) -> Vec<NetMatch> {
    rule.except_net
        .iter()
        .filter_map(|e| {
            let hosts: Vec<Host> = e
                .hosts
                .iter()
                .filter(|h| match h {
                    Host::Ip(ip) => list.addrs.contains(ip),
                    Host::Name { name, .. } => {
                        let name = name.trim_end_matches('.');
                        list.names.iter().any(|n| n.eq_ignore_ascii_case(name))
                    }
                })
                .cloned()
                .collect();
            // An address written alone is a block of one address.
            let cidrs: Vec<Cidr> = e
                .cidrs
                .iter()
                .filter(|c| list.addrs.iter().any(|a| Cidr::host(*a) == **c))
                .copied()
                .collect();
            (!hosts.is_empty() || !cidrs.is_empty()).then(|| NetMatch {
                hosts,
                cidrs,
                ports: e.ports.clone(),
            })
        })
        .collect()
}

/// The exceptions of `rule` that name port 853, narrowed to it.
fn named_dot_port(rule: &Rule) -> Vec<NetMatch> {
    rule.except_net
        .iter()
        .filter(|e| e.ports.contains(&DOT_PORT))
        .map(|e| NetMatch {
            ports: vec![DOT_PORT],
            ..e.clone()
        })
        .collect()
}

/// A guard of `base`: its trigger, effect, lock and source, with a match of its own.
fn guard(base: &Rule, suffix: &str, net: NetMatch, except: Vec<NetMatch>, what: &str) -> Rule {
    let mut rule = base.clone();
    rule.id = format!("{}/{suffix}", base.id);
    rule.id_derived = false;
    rule.kernel_index = None;
    rule.cond = Some(Cond::Net(net));
    rule.except = Vec::new();
    rule.except_net = except;
    rule.message = format!(
        "{what} would answer any name and bypass the allow-list of rule {}; to use one, \
         name it in that rule's `except:`",
        base.id
    );
    rule.description = Some(format!(
        "Added by Carapace with the allow-list {}: {what} bypasses its name checks.",
        base.id
    ));
    rule
}

/// Appends the guards of every allow-list over every port in `rules`.
pub(crate) fn add_guards(rules: &mut Vec<Rule>) {
    let list = endpoints();
    let guards: Vec<Rule> = rules
        .iter()
        .filter(|r| covers_every_port(r))
        .flat_map(|base| {
            let resolvers = NetMatch {
                hosts: list
                    .names
                    .iter()
                    .map(|n| Host::Name {
                        name: (*n).to_owned(),
                        resolved: Vec::new(),
                    })
                    .chain(list.addrs.iter().copied().map(Host::Ip))
                    .collect(),
                cidrs: Vec::new(),
                ports: Vec::new(),
            };
            let dot = NetMatch {
                hosts: Vec::new(),
                cidrs: vec![Cidr::new([0; 16], 0)],
                ports: vec![DOT_PORT],
            };
            [
                guard(
                    base,
                    "encrypted-dns",
                    resolvers,
                    named_resolvers(base, list),
                    "a public DNS-over-HTTPS/TLS resolver",
                ),
                guard(
                    base,
                    "dns-over-tls",
                    dot,
                    named_dot_port(base),
                    "DNS over TLS (port 853)",
                ),
            ]
        })
        .collect();
    rules.extend(guards);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_reads_names_and_addresses_and_nothing_else() {
        let list = endpoints();
        assert!(list.names.contains(&"dns.google"));
        assert!(list.names.contains(&"cloudflare-dns.com"));
        assert!(list.addrs.contains(&"1.1.1.1".parse().unwrap()));
        assert!(list.addrs.contains(&"2620:fe::fe".parse().unwrap()));
        assert!(list.names.len() >= 30 && list.addrs.len() >= 40);
        // Every name is a plain host name the rules' syntax would take.
        for n in &list.names {
            assert!(
                n.split('.').count() >= 2
                    && n.bytes().all(|b| b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b"-.".contains(&b)),
                "{n}"
            );
        }
        let parsed = parse("# c\n  a.example # trailing\n\n192.0.2.1\n");
        assert_eq!(parsed.names, ["a.example"]);
        assert_eq!(parsed.addrs, ["192.0.2.1".parse::<IpAddr>().unwrap()]);
    }
}
