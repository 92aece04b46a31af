//! A real DNS server on loopback standing in for the machine's resolver: UDP and TCP on
//! one port, answering from a fixed zone, counting the questions it was asked.
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{Name, RData, Record};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, UdpSocket};
use tokio::task::JoinHandle;

/// What the fake knows of a name.
#[derive(Clone)]
pub enum Zone {
    Records(Vec<(&'static str, u32, RData)>),
    /// Over UDP: an empty answer with TC set; over TCP: these records.
    TooBigForUdp(Vec<(&'static str, u32, RData)>),
    /// Never answered.
    Silent,
    /// Answered with bytes that are not DNS.
    Garbage,
}

pub fn a(ip: [u8; 4]) -> RData {
    RData::A(A(Ipv4Addr::from(ip)))
}

pub fn aaaa(ip: &str) -> RData {
    RData::AAAA(AAAA(ip.parse().expect("an IPv6 address")))
}

pub fn cname(target: &str) -> RData {
    RData::CNAME(CNAME(Name::from_ascii(target).expect("a name")))
}

pub struct FakeUpstream {
    pub addr: SocketAddr,
    asked: Arc<Mutex<Vec<(String, &'static str)>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl FakeUpstream {
    /// Names asked, with the transport (`udp`, `tcp`).
    pub fn asked(&self) -> Vec<(String, &'static str)> {
        self.asked.lock().unwrap().clone()
    }

    pub async fn start(zone: fn(&str) -> Option<Zone>) -> Self {
        let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = udp.local_addr().unwrap();
        let tcp = TcpListener::bind(addr).await.unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let udp_task = {
            let asked = Arc::clone(&asked);
            tokio::spawn(async move {
                let mut buf = vec![0; 65_535];
                loop {
                    let Ok((n, from)) = udp.recv_from(&mut buf).await else {
                        continue;
                    };
                    if let Some(reply) = answer(&buf[..n], zone, false, &asked) {
                        udp.send_to(&reply, from).await.unwrap();
                    }
                }
            })
        };
        let tcp_task = {
            let asked = Arc::clone(&asked);
            tokio::spawn(async move {
                loop {
                    let Ok((mut stream, _)) = tcp.accept().await else {
                        continue;
                    };
                    let asked = Arc::clone(&asked);
                    tokio::spawn(async move {
                        while let Ok(len) = stream.read_u16().await {
                            let mut query = vec![0; usize::from(len)];
                            if stream.read_exact(&mut query).await.is_err() {
                                return;
                            }
                            let Some(reply) = answer(&query, zone, true, &asked) else {
                                return;
                            };
                            let mut framed =
                                u16::try_from(reply.len()).unwrap().to_be_bytes().to_vec();
                            framed.extend_from_slice(&reply);
                            if stream.write_all(&framed).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            })
        };
        Self {
            addr,
            asked,
            tasks: vec![udp_task, tcp_task],
        }
    }
}

fn answer(
    query: &[u8],
    zone: fn(&str) -> Option<Zone>,
    tcp: bool,
    asked: &Mutex<Vec<(String, &'static str)>>,
) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    let q = query.queries.first()?.clone();
    let name = q
        .name()
        .to_ascii()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    asked
        .lock()
        .unwrap()
        .push((name.clone(), if tcp { "tcp" } else { "udp" }));
    let mut reply = Message::new(query.metadata.id, MessageType::Response, OpCode::Query);
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.add_query(q.clone());
    let records = match zone(&name) {
        None => {
            reply.metadata.response_code = ResponseCode::NXDomain;
            Vec::new()
        }
        Some(Zone::Silent) => return None,
        Some(Zone::Garbage) => return Some(b"\x00\x01not dns at all".to_vec()),
        Some(Zone::TooBigForUdp(_)) if !tcp => {
            reply.metadata.truncation = true;
            Vec::new()
        }
        Some(Zone::Records(records) | Zone::TooBigForUdp(records)) => records,
    };
    for (owner, ttl, data) in records {
        // A real server answers a question with records of its type (and the CNAMEs
        // leading there).
        if data.record_type() == q.query_type() || matches!(data, RData::CNAME(_)) {
            reply.add_answer(Record::from_rdata(Name::from_ascii(owner).ok()?, ttl, data));
        }
    }
    reply.to_vec().ok()
}
