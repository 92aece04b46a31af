//! The resolver over real sockets (a fake upstream DNS server on loopback, queries from
//! plain UDP and TCP sockets), and its untrusted-input steps on arbitrary bytes.
mod fake_upstream;
mod over_sockets;
mod pure;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use carapace_policy::engine::Activation;
use carapace_policy::rules::{Homes, Options, RuleSet};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UdpSocket};

use super::{DenialSink, LearnedAddress, Learner, ResolverRegistry, RulesInForce};
use crate::api::proto::Denial;
use crate::kernel::map_error::MapsError;

const RULES: &str = "  - id: egress
    block: { host: \"*\" }
    except: [github.com, \"*.pythonhosted.org\", 10.20.0.0/16]
    message: only listed hosts
  - id: no-gist
    block: { host: gist.github.com }
    message: no gists
  - id: no-git-ssh
    block: { host: \"*.ssh.github.com\", port: 22 }
    message: no git over ssh
";

pub(crate) fn rule_set(rules: &str) -> Arc<RuleSet> {
    let opts = Options {
        homes: Homes::fixed(["/home/u"]),
        resolver: |_| None,
        host: crate::policy_host::shared(),
    };
    let text = format!("version: 1\nbuiltin: none\nrules:\n{rules}");
    Arc::new(RuleSet::parse_with("rules.yaml", &text, &opts).unwrap_or_else(|d| panic!("{d}")))
}

fn kernel_index(set: &RuleSet, id: &str) -> u32 {
    set.by_id(id)
        .and_then(|r| r.kernel_index)
        .unwrap_or_else(|| panic!("{id} reaches the kernel"))
}

/// A fixed rule set and activation, as the daemon's would be between two reloads.
pub(crate) struct Fixed(pub(crate) Arc<RuleSet>, pub(crate) Activation);

impl RulesInForce for Fixed {
    fn current(&self) -> Result<(Arc<RuleSet>, Activation), crate::dns::RulesUnavailable> {
        Ok((Arc::clone(&self.0), self.1.clone()))
    }
}

#[derive(Default)]
pub(crate) struct Collected(Mutex<Vec<Denial>>);

impl DenialSink for Collected {
    fn refused(&self, denial: Denial) {
        self.0.lock().unwrap().push(denial);
    }
}

impl Collected {
    pub(crate) fn taken(&self) -> Vec<Denial> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// One `Learner::learn` call: session cgroup, address, expiry, excepted rules.
type Learnt = (u64, IpAddr, u64, Vec<u32>);

/// What the kernel side was told.
#[derive(Default)]
struct KernelLog {
    learned: Mutex<Vec<Learnt>>,
    resolvers: Mutex<Vec<(u64, Option<u16>)>>,
}

impl Learner for KernelLog {
    fn learn(&self, session_cgroup: u64, entry: &LearnedAddress) -> Result<(), MapsError> {
        self.learned.lock().unwrap().push((
            session_cgroup,
            entry.addr,
            entry.expires_at_boot_ns,
            entry.excepted.clone(),
        ));
        Ok(())
    }
}

impl ResolverRegistry for KernelLog {
    fn set_resolver(&self, session_cgroup: u64, port: u16) -> Result<(), MapsError> {
        self.resolvers
            .lock()
            .unwrap()
            .push((session_cgroup, Some(port)));
        Ok(())
    }

    fn clear_resolver(&self, session_cgroup: u64) {
        self.resolvers.lock().unwrap().push((session_cgroup, None));
    }
}

fn query(id: u16, name: &str, record_type: RecordType) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), record_type));
    m.to_vec().unwrap()
}

/// Asks over UDP; `None` when nothing came back in `wait`.
async fn ask_udp(port: u16, bytes: &[u8], wait: Duration) -> Option<Vec<u8>> {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(bytes, ("127.0.0.1", port)).await.unwrap();
    let mut buf = vec![0; 65_535];
    let (n, _) = tokio::time::timeout(wait, socket.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    Some(buf[..n].to_vec())
}

async fn udp(port: u16, name: &str, record_type: RecordType) -> Message {
    let bytes = ask_udp(port, &query(7, name, record_type), Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("no answer for {name}"));
    let m = Message::from_vec(&bytes).unwrap();
    assert_eq!(m.metadata.id, 7);
    m
}

/// Several queries on one TCP connection, answers in order.
async fn tcp(port: u16, questions: &[(&str, RecordType)]) -> Vec<Message> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut out = Vec::new();
    for (i, (name, record_type)) in questions.iter().enumerate() {
        let q = query(100 + i as u16, name, *record_type);
        let mut framed = u16::try_from(q.len()).unwrap().to_be_bytes().to_vec();
        framed.extend_from_slice(&q);
        stream.write_all(&framed).await.unwrap();
        let len = tokio::time::timeout(Duration::from_secs(5), stream.read_u16())
            .await
            .expect("an answer in time")
            .unwrap();
        let mut answer = vec![0; usize::from(len)];
        stream.read_exact(&mut answer).await.unwrap();
        let m = Message::from_vec(&answer).unwrap();
        assert_eq!(m.metadata.id, 100 + i as u16);
        out.push(m);
    }
    out
}

fn addresses(m: &Message) -> Vec<IpAddr> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            hickory_proto::rr::RData::A(a) => Some(IpAddr::V4(a.0)),
            hickory_proto::rr::RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}
