use std::net::SocketAddr;

use carapace_policy::engine::Activation;
use carapace_policy::rules::diag::Sink;
use carapace_policy::rules::yaml;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use proptest::prelude::*;

use super::{query, rule_set, RULES};
use crate::config::dns as settings;
use crate::dns::handler::{Handler, Step};
use crate::dns::learned::{expiry, Learned, LearnedAddress};
use crate::dns::wire::{self, Parsed};
use crate::dns::{DnsSettings, RefuseWith, Upstream};

#[test]
fn expiry_clamps_the_ttl_and_adds_grace() {
    let s = 1_000_000_000;
    assert_eq!(expiry(0, 0), 35 * s);
    assert_eq!(expiry(0, 60), 90 * s);
    assert_eq!(expiry(0, u32::MAX), 3630 * s);
    assert_eq!(expiry(u64::MAX - 1, 60), u64::MAX);
}

#[test]
fn resolv_conf_nameservers() {
    let up = Upstream::from_resolv_conf(
        "# comment\nsearch lan\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\nnameserver bogus\noptions edns0\n",
    );
    let want: Vec<SocketAddr> = vec![
        "127.0.0.53:53".parse().unwrap(),
        "[fe80::1]:53".parse().unwrap(),
    ];
    assert_eq!(up.servers(), want.as_slice());
    // None listed: the local resolver, as glibc assumes.
    let up = Upstream::from_resolv_conf("search lan\n");
    assert_eq!(
        up.servers(),
        ["127.0.0.1:53".parse::<SocketAddr>().unwrap()]
    );
}

#[test]
fn the_dns_section_of_config_yaml() {
    let parse = |text: &str| {
        let root = yaml::parse(text).unwrap().unwrap();
        let mut sink = Sink::new("config.yaml");
        let s = settings::parse(root.get("dns").unwrap(), &mut sink);
        (
            s,
            sink.items
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n"),
        )
    };
    assert_eq!(
        parse("dns:\n  refuse_with: nxdomain\n"),
        (
            DnsSettings {
                refuse_with: RefuseWith::NxDomain
            },
            String::new()
        )
    );
    assert_eq!(
        parse("dns:\n  refuse_with: refused\n").0,
        DnsSettings::default()
    );
    let (_, e) = parse("dns:\n  refuse_with: drop\n");
    assert!(
        e.contains("config.yaml:2:") && e.contains("`refused` or `nxdomain`"),
        "{e}"
    );
    let (_, e) = parse("dns:\n  refuse: nxdomain\n");
    assert!(e.contains("unknown `dns` setting `refuse`"), "{e}");
    let full = crate::config::parse("c", "dns:\n  refuse_with: nxdomain\n").unwrap();
    assert_eq!(full.dns.refuse_with, RefuseWith::NxDomain);
}

#[test]
fn the_learned_table_forgets_expired_entries_and_ended_sessions() {
    let learned = Learned::default();
    let entry = |addr: &str, expires_at_boot_ns| LearnedAddress {
        addr: addr.parse().unwrap(),
        name: "x.test".into(),
        expires_at_boot_ns,
        excepted: vec![],
        blocked: vec![],
        refused_for: vec![],
    };
    learned.record(1, entry("192.0.2.1", u64::MAX), 0);
    learned.record(1, entry("192.0.2.2", 1), 0);
    learned.record(2, entry("192.0.2.3", u64::MAX), 0);
    assert_eq!(
        learned.lookup(1, "192.0.2.1".parse().unwrap()).as_deref(),
        Some("x.test")
    );
    assert_eq!(
        learned.lookup(1, "192.0.2.2".parse().unwrap()),
        None,
        "expired"
    );
    assert_eq!(learned.list(1).len(), 1);
    learned.forget(1);
    assert!(learned.list(1).is_empty());
    assert_eq!(learned.list(2).len(), 1);
}

#[test]
fn the_learned_table_is_bounded_per_session() {
    let learned = Learned::default();
    let entry = |i: u32, expires_at_boot_ns| LearnedAddress {
        addr: std::net::IpAddr::V4(i.into()),
        name: format!("n{i}.test"),
        expires_at_boot_ns,
        excepted: vec![],
        blocked: vec![],
        refused_for: vec![],
    };
    // Full of live entries, the one expiring first makes room for a new one.
    for i in 0..16_384 {
        learned.record(1, entry(i, u64::MAX - u64::from(16_384 - i)), 0);
    }
    learned.record(1, entry(99_999, u64::MAX), 0);
    let list = learned.list(1);
    assert_eq!(list.len(), 16_384);
    assert!(!list
        .iter()
        .any(|e| e.addr == std::net::IpAddr::V4(0.into())));
    assert!(list
        .iter()
        .any(|e| e.addr == std::net::IpAddr::V4(99_999.into())));
}

#[test]
fn queries_parse_names_lowercase_without_the_trailing_dot() {
    let Parsed::Question(q) = wire::parse_query(&query(1, "WWW.Example.COM.", RecordType::AAAA))
    else {
        panic!("a question");
    };
    assert_eq!(
        (q.id, q.name.as_str(), q.record_type),
        (1, "www.example.com", RecordType::AAAA)
    );
    assert_eq!(q.udp_payload, 512);
}

thread_local! {
    /// Compiled once per test thread: the property tests run thousands of cases.
    static RULES_SET: std::sync::Arc<carapace_policy::rules::RuleSet> = rule_set(RULES);
}

fn screen(bytes: &[u8]) -> Step {
    RULES_SET.with(|rules| {
        Handler::screen_query(bytes, rules, &Activation::default(), ResponseCode::Refused)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Whatever an agent sends, the query step answers, refuses, forwards or drops: it
    /// never panics.
    #[test]
    fn any_bytes_into_the_query_step_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = screen(&bytes);
    }

    /// A real query with bytes changed goes deeper into the parser than random bytes.
    #[test]
    fn mutated_queries_never_panic(
        name in "[a-z0-9.-]{0,80}",
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in any::<usize>(),
    ) {
        let Ok(n) = hickory_proto::rr::Name::from_ascii(&name) else { return Ok(()) };
        let mut m = hickory_proto::op::Message::query();
        m.add_query(hickory_proto::op::Query::query(n, RecordType::A));
        let Ok(mut bytes) = m.to_vec() else { return Ok(()) };
        for (at, b) in edits {
            let len = bytes.len();
            bytes[at % len] = b;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let _ = screen(&bytes);
    }

    /// Whatever an upstream (or a forger) answers, screening it never panics.
    #[test]
    fn any_bytes_as_an_upstream_answer_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        udp in any::<bool>(),
    ) {
        let Parsed::Question(q) = wire::parse_query(&query(1, "files.pythonhosted.org", RecordType::A)) else {
            panic!("a question");
        };
        RULES_SET.with(|rules| {
            let _ = Handler::screen_answer(
                &q,
                &bytes,
                udp,
                &[0],
                (rules, &Activation::default()),
                (0, ResponseCode::Refused),
            );
        });
    }
}

#[test]
fn a_name_rules_refuse_keeps_naming_its_address_after_expiry_and_later_answers() {
    use carapace_policy::engine::names::NameBlock;
    let learned = Learned::default();
    let addr: std::net::IpAddr = "192.0.2.7".parse().unwrap();
    let block = NameBlock { rule: 3, port: 0 };
    learned.record(
        1,
        LearnedAddress {
            addr,
            name: "x.pastebin.test".into(),
            expires_at_boot_ns: 1,
            excepted: vec![],
            blocked: vec![block],
            refused_for: vec!["x.pastebin.test".into()],
        },
        0,
    );
    // Expired, yet the kernel still refuses it by the rule: the denial names the name.
    assert_eq!(learned.lookup(1, addr).as_deref(), Some("x.pastebin.test"));
    // The same address answered later for an allowed name (a shared CDN address).
    learned.record(
        1,
        LearnedAddress {
            addr,
            name: "docs.example.test".into(),
            expires_at_boot_ns: u64::MAX,
            excepted: vec![1],
            blocked: vec![],
            refused_for: vec![],
        },
        0,
    );
    assert_eq!(learned.lookup(1, addr).as_deref(), Some("x.pastebin.test"));
    let listed = learned.list(1);
    assert_eq!(listed[0].blocked, [block]);
    assert_eq!(listed[0].excepted, [1]);
}

#[test]
fn refusals_are_judged_again_by_name_and_outlive_a_full_table() {
    use carapace_policy::engine::names::NameBlock;
    let learned = Learned::default();
    let entry = |i: u32, name: &str, blocked: Vec<NameBlock>| LearnedAddress {
        addr: std::net::IpAddr::V4(i.into()),
        name: name.into(),
        expires_at_boot_ns: u64::MAX - u64::from(i),
        excepted: vec![],
        refused_for: if blocked.is_empty() {
            vec![]
        } else {
            vec![format!("alias-of-{name}")]
        },
        blocked,
    };
    // The refused entry expires first, yet a full table gives up the others before it.
    learned.record(
        1,
        LearnedAddress {
            expires_at_boot_ns: 1,
            ..entry(0, "bad.test", vec![NameBlock { rule: 3, port: 0 }])
        },
        0,
    );
    for i in 1..=16_384 {
        learned.record(1, entry(i, "ok.test", vec![]), 0);
    }
    let addr0 = std::net::IpAddr::V4(0.into());
    assert_eq!(learned.lookup(1, addr0).as_deref(), Some("bad.test"));

    // Reloaded rules number the refusing rule 7, and refuse ok.test now by rule 9. The names
    // an address was refused for (its aliases too) are what is judged again.
    let again = learned.judge_again(|name| match name {
        "alias-of-bad.test" => vec![NameBlock { rule: 7, port: 0 }],
        "ok.test" => vec![NameBlock { rule: 9, port: 22 }],
        _ => vec![],
    });
    let bad: Vec<_> = again.iter().filter(|r| r.addr == addr0).collect();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].blocked, [NameBlock { rule: 7, port: 0 }]);
    assert_eq!(bad[0].cgroup, 1);
    assert_eq!(again.len(), 16_384, "every ok.test address, and bad.test's");

    // Rules under which nothing is refused: no refusal is left, in the table either.
    let none = learned.judge_again(|_| vec![]);
    assert!(none.is_empty());
    learned.renumber(&again);
    assert!(learned
        .list(1)
        .iter()
        .all(|e| e.blocked == [NameBlock { rule: 9, port: 22 }]));
    learned.renumber(&none);
    assert!(learned.list(1).iter().all(|e| e.blocked.is_empty()));
}
