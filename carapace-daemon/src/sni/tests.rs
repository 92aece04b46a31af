//! The two readers on well-formed, cut, mutated and arbitrary bytes, and the proxy over
//! real loopback sockets: a name the rules allow reaches the server and back, one they
//! refuse is closed with a denial naming both names.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use carapace_policy::engine::Activation;
use proptest::prelude::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::dns::tests::{rule_set, Collected, Fixed};

// ---- a ClientHello as TLS clients write it ----

fn extension(kind: u16, data: &[u8]) -> Vec<u8> {
    let mut out = kind.to_be_bytes().to_vec();
    out.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes());
    out.extend_from_slice(data);
    out
}

fn sni_extension(names: &[&[u8]]) -> Vec<u8> {
    let mut list = Vec::new();
    for name in names {
        list.push(0);
        list.extend_from_slice(&u16::try_from(name.len()).unwrap().to_be_bytes());
        list.extend_from_slice(name);
    }
    let mut data = u16::try_from(list.len()).unwrap().to_be_bytes().to_vec();
    data.extend_from_slice(&list);
    extension(0, &data)
}

/// A `ClientHello` body with these extensions (`None`: no extension block at all).
fn body(extensions: Option<&[Vec<u8>]>) -> Vec<u8> {
    let mut b = vec![3, 3];
    b.extend_from_slice(&[7; 32]); // random
    b.push(32);
    b.extend_from_slice(&[9; 32]); // session id
    b.extend_from_slice(&[0, 4, 0x13, 0x01, 0x13, 0x02]); // two cipher suites
    b.extend_from_slice(&[1, 0]); // null compression
    if let Some(exts) = extensions {
        let all: Vec<u8> = exts.concat();
        b.extend_from_slice(&u16::try_from(all.len()).unwrap().to_be_bytes());
        b.extend_from_slice(&all);
    }
    b
}

/// The handshake message around a body, cut into records of at most `record` bytes.
fn records(body: &[u8], record: usize) -> Vec<u8> {
    let mut message = vec![1];
    message.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes()[1..]);
    message.extend_from_slice(body);
    let mut out = Vec::new();
    for chunk in message.chunks(record) {
        out.extend_from_slice(&[22, 3, 1]);
        out.extend_from_slice(&u16::try_from(chunk.len()).unwrap().to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// A `ClientHello` naming `name`, with the extensions a browser sends around it.
fn hello(name: &str) -> Vec<u8> {
    let exts = [
        extension(0x000a, &[0, 2, 0, 0x1d]), // supported groups
        sni_extension(&[name.as_bytes()]),
        extension(0x002b, &[2, 3, 4]), // supported versions
    ];
    records(&body(Some(&exts)), 16_384)
}

fn name_of(bytes: &[u8]) -> Reading<Option<String>> {
    match read_client_hello(bytes) {
        Reading::Done(h) => Reading::Done(h.server_name),
        Reading::More => Reading::More,
        Reading::Malformed(w) => Reading::Malformed(w),
    }
}

#[test]
fn the_server_name_is_read_lowercase_with_or_without_extensions() {
    assert_eq!(
        name_of(&hello("GitHub.com")),
        Reading::Done(Some("github.com".into()))
    );
    assert_eq!(name_of(&records(&body(None), 16_384)), Reading::Done(None));
    assert_eq!(
        name_of(&records(&body(Some(&[])), 16_384)),
        Reading::Done(None)
    );
    // Cut into one-byte records, it still reads the same.
    let exts = [sni_extension(&[b"api.github.com"])];
    assert_eq!(
        name_of(&records(&body(Some(&exts)), 1)),
        Reading::Done(Some("api.github.com".into()))
    );
    // Bytes after the ClientHello (early data, a second record) are not read.
    let mut more = hello("a.example");
    more.extend_from_slice(&[23, 3, 3, 0, 1, 0]);
    assert_eq!(name_of(&more), Reading::Done(Some("a.example".into())));
}

#[test]
fn a_client_hello_openssl_wrote_is_read() {
    // Python's ssl module (OpenSSL 3.0) for github.com with ALPN: grease-free, 517 bytes
    // with its padding extension.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/tls/openssl-client-hello-github.com.bin"
    );
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(name_of(&bytes), Reading::Done(Some("github.com".into())));
}

#[test]
fn an_encrypted_client_hello_is_flagged() {
    let exts = [
        sni_extension(&[b"public.example"]),
        extension(0xfe0d, &[0; 8]),
    ];
    assert_eq!(
        read_client_hello(&records(&body(Some(&exts)), 16_384)),
        Reading::Done(Hello {
            server_name: Some("public.example".into()),
            encrypted: true
        })
    );
}

#[test]
fn what_a_server_would_read_otherwise_is_malformed() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "two server name extensions",
            records(
                &body(Some(&[
                    sni_extension(&[b"a.example"]),
                    sni_extension(&[b"b.example"]),
                ])),
                16_384,
            ),
        ),
        (
            "two names in one list",
            records(
                &body(Some(&[sni_extension(&[b"a.example", b"b.example"])])),
                16_384,
            ),
        ),
        ("a trailing dot", hello("a.example.")),
        ("an empty label", hello("a..example")),
        ("a space", hello("a example")),
        ("a NUL", hello("a\0.example")),
        ("not ASCII", hello("é.example")),
        ("an empty name", hello("")),
        (
            "an empty list",
            records(&body(Some(&[extension(0, &[0, 0])])), 16_384),
        ),
        (
            "a name type other than host_name",
            records(&body(Some(&[extension(0, &[0, 4, 1, 0, 1, b'a'])])), 16_384),
        ),
        ("an application data record", {
            let mut h = hello("a.example");
            h[0] = 23;
            h
        }),
        ("a ServerHello", {
            let mut h = hello("a.example");
            h[5] = 2;
            h
        }),
        ("a record length of zero", vec![22, 3, 1, 0, 0]),
        (
            "a ClientHello of 16 MiB",
            vec![22, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff],
        ),
        ("bytes after the extensions", {
            let mut b = body(Some(&[sni_extension(&[b"a.example"])]));
            b.push(0);
            records(&b, 16_384)
        }),
    ];
    for (what, bytes) in cases {
        assert!(
            matches!(read_client_hello(&bytes), Reading::Malformed(_)),
            "{what}: {:?}",
            read_client_hello(&bytes)
        );
    }
}

// ---- HTTP/1 Host ----

fn host_of(head: &str) -> Reading<Option<String>> {
    read_request_host(head.as_bytes())
}

#[test]
fn the_host_is_read_from_the_header_or_an_absolute_target() {
    for (head, want) in [
        (
            "GET / HTTP/1.1\r\nHost: GitHub.com\r\n\r\n",
            Some("github.com"),
        ),
        (
            "GET /x?y HTTP/1.1\r\nUser-Agent: t\r\nhost:  a.example:8080 \r\n\r\n",
            Some("a.example"),
        ),
        (
            "GET http://a.example/p HTTP/1.1\r\nHost: a.example\r\n\r\n",
            Some("a.example"),
        ),
        (
            "GET http://a.example:80 HTTP/1.1\r\n\r\n",
            Some("a.example"),
        ),
        (
            "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
            Some("a.example"),
        ),
        ("GET / HTTP/1.0\r\n\r\n", None),
        ("GET / HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n", None),
        ("GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", None),
        (
            "OPTIONS * HTTP/1.1\r\nHost: a.example\r\n\r\n",
            Some("a.example"),
        ),
    ] {
        assert_eq!(
            host_of(head),
            Reading::Done(want.map(str::to_owned)),
            "{head:?}"
        );
    }
    // A body after the head is not read.
    assert_eq!(
        host_of("POST / HTTP/1.1\r\nHost: a.example\r\n\r\nHost: b.example\r\n\r\n"),
        Reading::Done(Some("a.example".into()))
    );
}

#[test]
fn requests_a_server_could_read_otherwise_are_malformed() {
    for head in [
        "GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.example\r\nHOST: a.example\r\n\r\n",
        "GET http://b.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET / HTTP/1.1\r\nX: y\r\n Host: b.example\r\n\r\n",
        "GET / HTTP/1.1\nHost: b.example\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : a.example\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.example\rX: y\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: user@a.example\r\n\r\n",
        "GET http://u@b.example/ HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.example:http\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a%2eexample\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: a.example\r\n\r\n",
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "GET  / HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET a.example HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: \u{e9}.example\r\n\r\n",
    ] {
        assert!(
            matches!(host_of(head), Reading::Malformed(_)),
            "{head:?}: {:?}",
            host_of(head)
        );
    }
    let long = format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(MAX_HEAD));
    assert!(matches!(host_of(&long), Reading::Malformed(_)));
}

// ---- properties ----

fn label() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,20}[a-zA-Z0-9_])?"
}

fn host_name() -> impl Strategy<Value = String> {
    prop::collection::vec(label(), 1..5).prop_map(|l| l.join("."))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_name_is_read_back_whatever_the_record_size(name in host_name(), record in 1usize..400) {
        let exts = [extension(0x000a, &[0, 2, 0, 0x1d]), sni_extension(&[name.as_bytes()])];
        let bytes = records(&body(Some(&exts)), record);
        prop_assert_eq!(name_of(&bytes), Reading::Done(Some(name.to_ascii_lowercase())));
        // Every cut of it asks for more: nothing is decided on part of a ClientHello.
        for cut in 0..bytes.len() {
            prop_assert_eq!(name_of(&bytes[..cut]), Reading::More, "cut at {}", cut);
        }
    }

    #[test]
    fn every_host_is_read_back_and_cuts_ask_for_more(name in host_name(), port in proptest::option::of(1u16..)) {
        let host = port.map_or_else(|| name.clone(), |p| format!("{name}:{p}"));
        let head = format!("GET /index.html HTTP/1.1\r\nAccept: */*\r\nHost: {host}\r\n\r\n");
        // Labels of digits can spell an IPv4 literal (`0.0.0.0`), which names no host.
        let named = name.parse::<std::net::Ipv4Addr>().is_err().then(|| name.to_ascii_lowercase());
        prop_assert_eq!(host_of(&head), Reading::Done(named));
        for cut in 0..head.len() {
            prop_assert_eq!(read_request_host(&head.as_bytes()[..cut]), Reading::More);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_a_name_read_is_a_host_name(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        for reading in [name_of(&bytes), read_request_host(&bytes)] {
            if let Reading::Done(Some(name)) = reading {
                prop_assert!(server_name::host_name(name.as_bytes()).as_deref() == Some(name.as_str()));
            }
        }
    }

    #[test]
    fn a_changed_byte_never_panics_and_never_hides_a_second_name(
        name in host_name(), at in any::<prop::sample::Index>(), to in any::<u8>()
    ) {
        let mut bytes = hello(&name);
        let i = at.index(bytes.len());
        bytes[i] = to;
        if let Reading::Done(h) = read_client_hello(&bytes) {
            // The name is read within its own bounds: a changed byte yields it, a variant
            // of it (a byte of the name changed), or none, never bytes around it.
            prop_assert!(h.server_name.is_none_or(|n| n.len() == name.len()
                && server_name::host_name(n.as_bytes()).as_deref() == Some(n.as_str())));
        }
    }
}

// ---- the proxy over loopback ----

const RULES: &str = "  - id: egress
    block: { host: \"*\" }
    except: [github.com, \"*.githubusercontent.com\"]
    message: only listed hosts
    tls: sni
  - id: no-gist
    block: { host: gist.github.com }
    message: no gists
    tls: sni
";

struct Bench {
    proxy: Arc<SniProxy>,
    denials: Arc<Collected>,
}

fn proxy(rules: &str) -> Bench {
    let denials = Arc::new(Collected::default());
    let proxy = Arc::new(SniProxy {
        rules: Arc::new(Fixed(rule_set(rules), Activation::default())),
        denials: Arc::clone(&denials) as Arc<dyn crate::dns::DenialSink>,
        limits: Limits {
            first_bytes: Duration::from_millis(500),
            connect: Duration::from_secs(2),
        },
        recent: crate::dns::RecentDenials::default(),
    });
    Bench { proxy, denials }
}

/// A server that answers what it reads, prefixed, and records the first bytes it got.
async fn echo_server() -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0; 4096];
        loop {
            let n = s.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            s.write_all(b"echo:").await.unwrap();
            s.write_all(&buf[..n]).await.unwrap();
        }
        got
    });
    (addr, task)
}

/// A client connected to a proxy that serves the one connection toward `destination`.
async fn through(
    bench: &Bench,
    destination: SocketAddr,
    protocol: Protocol,
) -> (TcpStream, tokio::task::JoinHandle<Outcome>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (accepted, _) = listener.accept().await.unwrap();
    let proxy = Arc::clone(&bench.proxy);
    let to = Redirected {
        session_id: "s1".into(),
        destination,
        learned_name: Some("github.com".into()),
        protocol,
    };
    let outcome = tokio::spawn(async move { proxy.serve(accepted, &to).await });
    (client, outcome)
}

async fn read_all(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .expect("the proxy closes in time")
        .expect("read");
    out
}

#[tokio::test]
async fn an_allowed_name_reaches_the_server_and_its_answer_comes_back() {
    let bench = proxy(RULES);
    let (server, received) = echo_server().await;
    let (mut client, outcome) = through(&bench, server, Protocol::Tls).await;
    let hello = hello("objects.githubusercontent.com");
    client.write_all(&hello).await.unwrap();
    client.write_all(b"after").await.unwrap();
    client.shutdown().await.unwrap();
    let back = read_all(&mut client).await;
    let got = received.await.unwrap();
    let mut sent = hello.clone();
    sent.extend_from_slice(b"after");
    assert_eq!(
        got, sent,
        "the server gets the ClientHello untouched, then the rest"
    );
    assert!(back.starts_with(b"echo:"), "the server's answer comes back");
    assert_eq!(
        outcome.await.unwrap(),
        Outcome::Spliced {
            sent: sent.len() as u64,
            received: back.len() as u64
        }
    );
    assert!(bench.denials.taken().is_empty());
}

#[tokio::test]
async fn a_refused_name_is_closed_with_a_denial_naming_both_names() {
    let bench = proxy(RULES);
    for (name, rule) in [("gist.github.com", "no-gist"), ("pastebin.com", "egress")] {
        let (server, received) = echo_server().await;
        let (mut client, outcome) = through(&bench, server, Protocol::Tls).await;
        client.write_all(&hello(name)).await.unwrap();
        assert!(read_all(&mut client).await.is_empty(), "nothing comes back");
        assert_eq!(
            outcome.await.unwrap(),
            Outcome::Refused {
                rule_id: rule.into(),
                requested: Some(name.into())
            }
        );
        let denials = bench.denials.taken();
        assert_eq!(denials.len(), 1);
        let d = &denials[0];
        assert_eq!(
            (d.operation.as_str(), d.layer.as_str(), d.rule_id.as_str()),
            ("network", "sni", rule)
        );
        assert_eq!(
            d.subject,
            format!("{server} (github.com, server name {name})")
        );
        nothing_sent(received).await;
    }
}

#[tokio::test]
async fn no_name_a_malformed_hello_or_a_silent_client_is_refused_under_an_allow_list() {
    let bench = proxy(RULES);
    let (server, _got) = echo_server().await;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("no server name", records(&body(Some(&[])), 16_384)),
        ("malformed", {
            let mut h = hello("github.com");
            h[0] = 23;
            h
        }),
        (
            "encrypted",
            records(
                &body(Some(&[
                    sni_extension(&[b"github.com"]),
                    extension(0xfe0d, &[0; 4]),
                ])),
                16_384,
            ),
        ),
        ("silent", Vec::new()),
    ];
    for (what, bytes) in cases {
        let (mut client, outcome) = through(&bench, server, Protocol::Tls).await;
        client.write_all(&bytes).await.unwrap();
        assert!(read_all(&mut client).await.is_empty(), "{what}");
        assert!(
            matches!(outcome.await.unwrap(), Outcome::Refused { ref rule_id, .. } if rule_id == "egress"),
            "{what}"
        );
        assert_eq!(bench.denials.taken().len(), 1, "{what}");
    }
}

/// What a server got from a connection the proxy refused: nothing, whether the proxy's
/// connection to it (opened while the client's bytes were judged) was made or not.
async fn nothing_sent(received: tokio::task::JoinHandle<Vec<u8>>) {
    if let Ok(got) = tokio::time::timeout(Duration::from_secs(1), received).await {
        assert!(
            got.unwrap().is_empty(),
            "a refused client's bytes reached the server"
        );
    }
}

#[tokio::test]
async fn plain_http_is_judged_by_its_host() {
    let bench = proxy(RULES);
    let (server, received) = echo_server().await;
    let (mut client, outcome) = through(&bench, server, Protocol::Http).await;
    client
        .write_all(b"GET /gist HTTP/1.1\r\nHost: gist.github.com\r\n\r\n")
        .await
        .unwrap();
    assert!(read_all(&mut client).await.is_empty());
    assert!(
        matches!(outcome.await.unwrap(), Outcome::Refused { ref rule_id, .. } if rule_id == "no-gist")
    );
    nothing_sent(received).await;
    let (server, received) = echo_server().await;
    let (mut client, outcome) = through(&bench, server, Protocol::Http).await;
    let request = b"GET / HTTP/1.1\r\nHost: github.com\r\n\r\n";
    client.write_all(request).await.unwrap();
    client.shutdown().await.unwrap();
    assert!(read_all(&mut client)
        .await
        .starts_with(b"echo:GET / HTTP/1.1"));
    assert!(matches!(outcome.await.unwrap(), Outcome::Spliced { .. }));
    assert_eq!(received.await.unwrap(), request);
}

#[tokio::test]
async fn a_refusal_repeated_in_a_loop_is_refused_each_time_and_reported_once() {
    let bench = proxy(RULES);
    // A server that never accepts: its backlog takes the proxy's connects, which a refused
    // name leaves unused.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = listener.local_addr().unwrap();
    for round in 0..3 {
        let (mut client, outcome) = through(&bench, server, Protocol::Tls).await;
        client.write_all(&hello("pastebin.com")).await.unwrap();
        assert!(read_all(&mut client).await.is_empty(), "round {round}");
        assert!(
            matches!(outcome.await.unwrap(), Outcome::Refused { ref rule_id, .. } if rule_id == "egress"),
            "round {round}"
        );
    }
    assert_eq!(bench.denials.taken().len(), 1, "one report for the three");
    // Another name asked of the same server is a new report.
    let (mut client, _outcome) = through(&bench, server, Protocol::Tls).await;
    client.write_all(&hello("gist.github.com")).await.unwrap();
    assert!(read_all(&mut client).await.is_empty());
    assert_eq!(bench.denials.taken().len(), 1);
}
