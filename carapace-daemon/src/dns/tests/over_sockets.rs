use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use tokio::io::AsyncWriteExt as _;

use super::fake_upstream::{a, aaaa, cname, FakeUpstream, Zone};
use super::{
    addresses, ask_udp, kernel_index, query, rule_set, tcp, udp, Collected, Fixed, KernelLog, RULES,
};
use crate::dns::handler::{Handler, LAYER, OPERATION, PRIVATE_ANSWER};
use crate::dns::learned::Learned;
use crate::dns::{DnsSettings, RefuseWith, Resolver, ResolverHandle, SessionResolvers, Upstream};
use carapace_policy::engine::names::NameBlock;
use carapace_policy::engine::Activation;

const CGROUP: u64 = 4242;
/// The test's boot-time clock, stopped at its first reading: expiries are exact, and the
/// entries are alive for the daemon's table (which reads the real clock).
fn now() -> u64 {
    static NOW: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NOW.get_or_init(crate::dns::boot_time_ns)
}
const SECOND: u64 = 1_000_000_000;

fn zone(name: &str) -> Option<Zone> {
    Some(match name {
        "api.github.com" => Zone::Records(vec![
            ("api.github.com", 60, a([140, 82, 112, 5])),
            ("api.github.com", 7200, aaaa("2606:50c0:8000::154")),
        ]),
        "www.github.com" => Zone::Records(vec![
            ("www.github.com", 300, cname("github.com.")),
            ("github.com", 1, a([140, 82, 112, 3])),
        ]),
        // Served under a name a rule refuses.
        "paste.github.com" => Zone::Records(vec![
            ("paste.github.com", 300, cname("gist.github.com.")),
            ("gist.github.com", 60, a([140, 82, 112, 4])),
        ]),
        // Allowed, but not on port 22; and an allowed name served under it.
        "eu.ssh.github.com" => {
            Zone::Records(vec![("eu.ssh.github.com", 60, a([140, 82, 112, 36]))])
        }
        "git.github.com" => Zone::Records(vec![
            ("git.github.com", 60, cname("us.ssh.github.com.")),
            ("us.ssh.github.com", 60, a([140, 82, 112, 35])),
        ]),
        "example.org" => Zone::Records(vec![("example.org", 60, a([93, 184, 215, 14]))]),
        "gist.github.com" => Zone::Records(vec![("gist.github.com", 60, a([140, 82, 112, 4]))]),
        "pythonhosted.org" => Zone::Records(vec![("pythonhosted.org", 60, a([151, 101, 0, 1]))]),
        "files.pythonhosted.org" => {
            Zone::Records(vec![("files.pythonhosted.org", 300, a([151, 101, 0, 223]))])
        }
        "evil.pythonhosted.org" => Zone::Records(vec![
            ("evil.pythonhosted.org", 300, a([151, 101, 0, 224])),
            ("evil.pythonhosted.org", 300, a([169, 254, 169, 254])),
        ]),
        "inner.pythonhosted.org" => {
            Zone::Records(vec![("inner.pythonhosted.org", 300, a([10, 20, 0, 7]))])
        }
        "big.pythonhosted.org" => Zone::TooBigForUdp(vec![
            ("big.pythonhosted.org", 300, a([151, 101, 1, 1])),
            ("big.pythonhosted.org", 300, a([151, 101, 1, 2])),
            ("big.pythonhosted.org", 300, a([151, 101, 1, 3])),
        ]),
        "slow.pythonhosted.org" => Zone::Silent,
        "junk.pythonhosted.org" => Zone::Garbage,
        _ => return None,
    })
}

struct Setup {
    upstream: FakeUpstream,
    resolver: ResolverHandle,
    denials: Arc<Collected>,
    kernel: Arc<KernelLog>,
    learned: Arc<Learned>,
    egress: u32,
}

async fn setup_with(servers: impl FnOnce(SocketAddr) -> Vec<SocketAddr>) -> Setup {
    let upstream = FakeUpstream::start(zone).await;
    let rules = rule_set(RULES);
    let egress = kernel_index(&rules, "egress");
    let denials = Arc::new(Collected::default());
    let kernel = Arc::new(KernelLog::default());
    let learned = Arc::new(Learned::default());
    let handler = Handler {
        session_id: "s1".into(),
        session_cgroup: CGROUP,
        rules: Arc::new(Fixed(rules, Activation::default())),
        upstream: Upstream::new(servers(upstream.addr), Duration::from_millis(300)),
        refuse_with: RefuseWith::Refused,
        learned: Arc::clone(&learned),
        kernel: Some(Arc::clone(&kernel) as _),
        denials: Arc::clone(&denials) as _,
        recent: crate::dns::handler::RecentDenials::default(),
        clock: now,
    };
    let resolver = Resolver::start(Arc::new(handler)).await.unwrap();
    Setup {
        upstream,
        resolver,
        denials,
        kernel,
        learned,
        egress,
    }
}

async fn setup() -> Setup {
    setup_with(|addr| vec![addr]).await
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test]
async fn allowed_names_are_answered_from_upstream_and_learned_until_their_clamped_ttl() {
    let s = setup().await;
    let port = s.resolver.port();
    let m = udp(port, "API.github.com.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(addresses(&m), [ip("140.82.112.5")]);
    let m = udp(port, "api.github.com", RecordType::AAAA).await;
    assert_eq!(addresses(&m), [ip("2606:50c0:8000::154")]);
    // A CNAME chain: the address of its end is learned for the name asked.
    let m = udp(port, "www.github.com", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("140.82.112.3")]);
    let egress = vec![s.egress];
    assert_eq!(
        *s.kernel.learned.lock().unwrap(),
        [
            (
                CGROUP,
                ip("140.82.112.5"),
                now() + 90 * SECOND,
                egress.clone()
            ),
            // 7200 s is kept an hour.
            (
                CGROUP,
                ip("2606:50c0:8000::154"),
                now() + 3630 * SECOND,
                egress.clone()
            ),
            // 1 s is kept 5 s.
            (CGROUP, ip("140.82.112.3"), now() + 35 * SECOND, egress),
        ]
    );
    assert!(s.denials.taken().is_empty());
    let listed: Vec<(IpAddr, String)> = s
        .learned
        .list(CGROUP)
        .into_iter()
        .map(|e| (e.addr, e.name))
        .collect();
    assert_eq!(
        listed,
        [
            (ip("140.82.112.3"), "www.github.com".to_owned()),
            (ip("140.82.112.5"), "api.github.com".to_owned()),
            (ip("2606:50c0:8000::154"), "api.github.com".to_owned()),
        ]
    );
    assert_eq!(
        s.learned.lookup(CGROUP, ip("140.82.112.3")).as_deref(),
        Some("www.github.com")
    );
    assert_eq!(s.learned.lookup(CGROUP + 1, ip("140.82.112.3")), None);
}

#[tokio::test]
async fn refused_names_get_refused_and_a_denial_and_never_reach_upstream() {
    let s = setup().await;
    let port = s.resolver.port();
    for (name, rule, message) in [
        ("example.org", "egress", "only listed hosts"),
        // Allowed by the allow-list's exception (github.com), refused by its own rule.
        ("gist.github.com", "no-gist", "no gists"),
        // The wildcard exception covers subdomains only.
        ("pythonhosted.org", "egress", "only listed hosts"),
    ] {
        let m = udp(port, name, RecordType::A).await;
        assert_eq!(m.metadata.response_code, ResponseCode::Refused, "{name}");
        assert!(m.answers.is_empty());
        assert_eq!(m.queries.len(), 1, "the question is echoed");
        let d = s.denials.taken();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (
                d[0].session_id.as_str(),
                d[0].operation.as_str(),
                d[0].subject.as_str(),
                d[0].rule_id.as_str(),
                d[0].message.as_str(),
                d[0].layer.as_str()
            ),
            ("s1", OPERATION, name, rule, message, LAYER)
        );
    }
    assert!(s.upstream.asked().is_empty(), "{:?}", s.upstream.asked());
    assert!(s.kernel.learned.lock().unwrap().is_empty());
    // Asked again (AAAA, a retry): refused again, reported once.
    for record_type in [RecordType::AAAA, RecordType::A] {
        let m = udp(port, "example.org", record_type).await;
        assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    }
    assert!(s.denials.taken().is_empty());
    // Zone transfers are refused whatever the name, without a denial.
    let m = udp(port, "api.github.com", RecordType::AXFR).await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert!(s.denials.taken().is_empty() && s.upstream.asked().is_empty());
}

#[tokio::test]
async fn wildcard_exceptions_allow_subdomains() {
    let s = setup().await;
    let m = udp(s.resolver.port(), "files.pythonhosted.org", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("151.101.0.223")]);
    assert_eq!(
        s.learned
            .list(CGROUP)
            .iter()
            .map(|e| e.excepted.clone())
            .collect::<Vec<_>>(),
        [vec![s.egress]]
    );
}

#[tokio::test]
async fn answers_pointing_allowed_names_at_private_addresses_are_refused() {
    let s = setup().await;
    let port = s.resolver.port();
    let m = udp(port, "evil.pythonhosted.org", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert!(
        m.answers.is_empty(),
        "no address of the answer is passed on"
    );
    let d = s.denials.taken();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].rule_id, "egress");
    assert_eq!(d[0].subject, "evil.pythonhosted.org");
    assert!(d[0].message.starts_with(PRIVATE_ANSWER), "{}", d[0].message);
    assert!(d[0].message.contains("169.254.169.254"), "{}", d[0].message);
    assert!(s.kernel.learned.lock().unwrap().is_empty());
    // A private address the allow-list excepts by CIDR passes.
    let m = udp(port, "inner.pythonhosted.org", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("10.20.0.7")]);
    assert_eq!(s.kernel.learned.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_truncated_upstream_answer_is_asked_again_over_tcp() {
    let s = setup().await;
    let port = s.resolver.port();
    let m = udp(port, "big.pythonhosted.org", RecordType::A).await;
    assert!(!m.metadata.truncation);
    assert_eq!(addresses(&m).len(), 3);
    assert_eq!(
        s.upstream.asked(),
        [
            ("big.pythonhosted.org".to_owned(), "udp"),
            ("big.pythonhosted.org".to_owned(), "tcp")
        ]
    );
    assert_eq!(s.kernel.learned.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn upstream_silence_or_garbage_is_servfail_and_the_next_server_is_tried() {
    let s = setup().await;
    let port = s.resolver.port();
    let m = udp(port, "slow.pythonhosted.org", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    // Asked twice: once, then once more (the only server is also the next one).
    assert_eq!(s.upstream.asked().len(), 2);
    let m = udp(port, "junk.pythonhosted.org", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(s.kernel.learned.lock().unwrap().is_empty());

    // A first server that never answers: the second one does.
    let mute = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mute_addr = mute.local_addr().unwrap();
    let s = setup_with(|addr| vec![mute_addr, addr]).await;
    let m = udp(s.resolver.port(), "api.github.com", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("140.82.112.5")]);
}

#[tokio::test]
async fn tcp_carries_several_queries_per_connection_on_the_udp_port() {
    let s = setup().await;
    let answers = tcp(
        s.resolver.port(),
        &[
            ("api.github.com", RecordType::A),
            ("example.org", RecordType::A),
            ("big.pythonhosted.org", RecordType::A),
        ],
    )
    .await;
    assert_eq!(addresses(&answers[0]), [ip("140.82.112.5")]);
    assert_eq!(answers[1].metadata.response_code, ResponseCode::Refused);
    assert_eq!(addresses(&answers[2]).len(), 3);
    assert_eq!(s.denials.taken().len(), 1);
    if s.resolver.ipv6() {
        let m = tokio::net::TcpStream::connect(("::1", s.resolver.port())).await;
        assert!(m.is_ok(), "listens on [::1] too");
        let socket = tokio::net::UdpSocket::bind("[::1]:0").await.unwrap();
        let q = query(5, "api.github.com", RecordType::A);
        socket
            .send_to(&q, ("::1", s.resolver.port()))
            .await
            .unwrap();
        let mut buf = vec![0; 4096];
        let (n, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
            .await
            .expect("an answer over IPv6 in time")
            .unwrap();
        let m = Message::from_vec(&buf[..n]).unwrap();
        assert_eq!(addresses(&m), [ip("140.82.112.5")]);
    }
}

#[tokio::test]
async fn malformed_queries_get_formerr_or_silence_and_the_resolver_keeps_serving() {
    let s = setup().await;
    let port = s.resolver.port();
    let short = Duration::from_millis(300);
    // Too short for a header, a response, or nothing at all: silence.
    assert_eq!(ask_udp(port, b"", short).await, None);
    assert_eq!(ask_udp(port, b"\x12\x34\x01", short).await, None);
    let mut response = query(9, "api.github.com", RecordType::A);
    response[2] |= 0x80;
    assert_eq!(ask_udp(port, &response, short).await, None);
    // A header then garbage: FORMERR with the id.
    let mut garbage = b"\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00".to_vec();
    garbage.extend_from_slice(&[0xff; 40]);
    let m = Message::from_vec(&ask_udp(port, &garbage, short).await.unwrap()).unwrap();
    assert_eq!(
        (m.metadata.id, m.metadata.response_code),
        (0xabcd, ResponseCode::FormErr)
    );
    // Two questions: FORMERR; another opcode: NOTIMP.
    let mut two = Message::from_vec(&query(3, "api.github.com", RecordType::A)).unwrap();
    two.add_query(two.queries[0].clone());
    let m =
        Message::from_vec(&ask_udp(port, &two.to_vec().unwrap(), short).await.unwrap()).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    let mut notify = query(4, "api.github.com", RecordType::A);
    notify[2] = (notify[2] & 0x87) | (4 << 3);
    let m = Message::from_vec(&ask_udp(port, &notify, short).await.unwrap()).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::NotImp);
    // Over TCP, a length past any query closes the connection.
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream.write_all(&[0xff, 0xff, 1, 2, 3]).await.unwrap();
    let mut buf = [0u8; 8];
    let read = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut stream, &mut buf),
    )
    .await
    .expect("closed in time");
    assert_eq!(read.unwrap_or(0), 0);
    // Still serving.
    let m = udp(port, "api.github.com", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("140.82.112.5")]);
    assert!(s.denials.taken().is_empty());
}

#[tokio::test]
async fn tcp_connections_are_bounded_per_session() {
    let s = setup().await;
    let port = s.resolver.port();
    let mut held = Vec::new();
    for _ in 0..16 {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        held.push(stream);
    }
    // Let the resolver accept them all before the next one.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut extra = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let q = query(1, "api.github.com", RecordType::A);
    let mut framed = u16::try_from(q.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    let _ = extra.write_all(&framed).await;
    let mut buf = [0u8; 2];
    let read = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut extra, &mut buf),
    )
    .await
    .expect("closed in time");
    assert_eq!(
        read.unwrap_or(0),
        0,
        "the 17th connection is closed unanswered"
    );
    // One closes: a new connection is served.
    held.pop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answers = tcp(port, &[("api.github.com", RecordType::A)]).await;
    assert_eq!(addresses(&answers[0]), [ip("140.82.112.5")]);
}

#[tokio::test]
async fn a_flood_of_queries_is_bounded_and_the_resolver_answers_after_it() {
    let s = setup().await;
    let port = s.resolver.port();
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for i in 0..2_000u16 {
        let _ = socket
            .send_to(
                &query(i, "slow.pythonhosted.org", RecordType::A),
                ("127.0.0.1", port),
            )
            .await;
    }
    // Each answered query asked upstream twice; at most the in-flight bound reached it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let asked = s.upstream.asked().len();
    assert!(asked <= 2 * 64, "{asked} upstream questions");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let m = udp(port, "api.github.com", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("140.82.112.5")]);
}

#[tokio::test]
async fn session_resolvers_start_register_refuse_with_nxdomain_and_stop() {
    let upstream = FakeUpstream::start(zone).await;
    let resolvers = SessionResolvers::new(
        DnsSettings {
            refuse_with: RefuseWith::NxDomain,
        },
        Some(Upstream::new(
            vec![upstream.addr],
            Duration::from_millis(300),
        )),
    );
    let kernel = Arc::new(KernelLog::default());
    resolvers.attach_kernel(Arc::clone(&kernel) as _, Arc::clone(&kernel) as _);
    let denials = Arc::new(Collected::default());
    let rules = Arc::new(Fixed(rule_set(RULES), Activation::default()));
    let port = resolvers
        .start("s1", CGROUP, rules.clone(), Arc::clone(&denials) as _)
        .await
        .unwrap();
    // Started once per session.
    assert_eq!(
        resolvers
            .start("s1", CGROUP, rules, Arc::clone(&denials) as _)
            .await
            .unwrap(),
        port
    );
    assert_eq!(*kernel.resolvers.lock().unwrap(), [(CGROUP, Some(port))]);
    let m = udp(port, "example.org", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(denials.taken().len(), 1);
    let m = udp(port, "api.github.com", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("140.82.112.5")]);
    assert_eq!(resolvers.learned().list(CGROUP).len(), 1);
    assert_eq!(kernel.learned.lock().unwrap().len(), 1);
    resolvers.stop("s1");
    assert_eq!(
        *kernel.resolvers.lock().unwrap(),
        [(CGROUP, Some(port)), (CGROUP, None)]
    );
    assert!(resolvers.learned().list(CGROUP).is_empty());
    assert_eq!(resolvers.port("s1"), None);
    tokio::task::yield_now().await;
    let closed = ask_udp(
        port,
        &query(1, "api.github.com", RecordType::A),
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(closed, None, "the stopped resolver does not answer");
}

/// Rules that change under a running resolver, as a reload or a trigger changes them.
struct Changing(std::sync::Mutex<(Arc<carapace_policy::rules::RuleSet>, Activation)>);

impl crate::dns::RulesInForce for Changing {
    fn current(
        &self,
    ) -> Result<(Arc<carapace_policy::rules::RuleSet>, Activation), crate::dns::RulesUnavailable>
    {
        Ok(self.0.lock().unwrap().clone())
    }
}

#[tokio::test]
async fn each_query_is_judged_by_the_rules_in_force_at_that_moment() {
    let upstream = FakeUpstream::start(zone).await;
    let triggered = "  - id: after-fetch
    block: { host: \"*\" }
    except: [github.com]
    trigger: { after: { actions: [network], tool: [WebFetch] } }
";
    let rules = Arc::new(Changing(std::sync::Mutex::new((
        rule_set("  - block: \"~/.ssh/**\"\n"),
        Activation::default(),
    ))));
    let resolvers = SessionResolvers::new(
        DnsSettings::default(),
        Some(Upstream::new(
            vec![upstream.addr],
            Duration::from_millis(300),
        )),
    );
    let denials = Arc::new(Collected::default());
    let port = resolvers
        .start(
            "s1",
            CGROUP,
            Arc::clone(&rules) as _,
            Arc::clone(&denials) as _,
        )
        .await
        .unwrap();
    // No rule speaks of names: answered, learned without exceptions.
    let m = udp(port, "example.org", RecordType::A).await;
    assert_eq!(addresses(&m), [ip("93.184.215.14")]);
    assert_eq!(
        resolvers.learned().list(CGROUP)[0].excepted,
        Vec::<u32>::new()
    );
    // A reload brings a triggered allow-list: not in force yet.
    *rules.0.lock().unwrap() = (rule_set(triggered), Activation::default());
    let m = udp(port, "example.org", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    // The trigger fires: the next query is refused.
    rules
        .0
        .lock()
        .unwrap()
        .1
        .activated
        .insert("after-fetch".into());
    let m = udp(port, "example.org", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert_eq!(denials.taken()[0].rule_id, "after-fetch");
}

#[tokio::test]
async fn an_answer_through_a_refused_alias_is_refused_and_names_it() {
    let s = setup().await;
    let m = udp(s.resolver.port(), "paste.github.com", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
    assert!(
        m.answers.is_empty(),
        "the refused name's address is not handed out"
    );
    let d = s.denials.taken();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        (
            d[0].subject.as_str(),
            d[0].rule_id.as_str(),
            d[0].message.as_str()
        ),
        (
            "paste.github.com",
            "no-gist",
            "an alias of gist.github.com: no gists"
        )
    );
    assert!(s.learned.list(CGROUP).is_empty());
}

#[tokio::test]
async fn addresses_of_names_a_rule_refuses_on_some_ports_are_learned_with_those_refusals() {
    let s = setup().await;
    let rules = rule_set(RULES);
    let block = NameBlock {
        rule: kernel_index(&rules, "no-git-ssh"),
        port: 22,
    };
    let port = s.resolver.port();
    // The rule refuses port 22 only: the lookup is answered, and the kernel is told to
    // refuse port 22 of the address by that rule (the allow-list's exception holds for
    // the others), for the name asked and for one reached as an alias alike.
    for name in ["eu.ssh.github.com", "git.github.com"] {
        let m = udp(port, name, RecordType::A).await;
        assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{name}");
    }
    assert!(s.denials.taken().is_empty());
    let listed: Vec<(IpAddr, String, Vec<u32>, Vec<NameBlock>)> = s
        .learned
        .list(CGROUP)
        .into_iter()
        .map(|e| (e.addr, e.name, e.excepted, e.blocked))
        .collect();
    assert_eq!(
        listed,
        [
            (
                ip("140.82.112.35"),
                "git.github.com".to_owned(),
                vec![s.egress],
                vec![block]
            ),
            (
                ip("140.82.112.36"),
                "eu.ssh.github.com".to_owned(),
                vec![s.egress],
                vec![block]
            ),
        ]
    );
}
