//! DNS messages as the resolver reads and writes them. Queries come from the agent and
//! answers from the network: both are parsed with hickory-proto and never indexed by hand
//! beyond the fixed 12-byte header.
use std::net::IpAddr;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{RData, RecordType};

/// The DNS header's length: anything shorter has no id to answer to.
const HEADER_LEN: usize = 12;
/// Largest UDP answer a client accepts without EDNS (RFC 1035).
const PLAIN_UDP_PAYLOAD: usize = 512;

/// One question of a query the resolver may answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    pub id: u16,
    /// Lower case, without the trailing dot (`example.com`); the root is empty.
    pub name: String,
    pub record_type: RecordType,
    /// The query as received, to answer errors with its question and flags.
    query: Query,
    recursion_desired: bool,
    /// Largest answer the client takes over UDP.
    pub udp_payload: usize,
}

/// What to do with the bytes of a query.
#[derive(Debug)]
pub enum Parsed {
    Question(Question),
    /// Answer at once (FORMERR, NOTIMP) with these bytes.
    Reply(Vec<u8>),
    /// Not a query, or too broken to answer: stay silent, as servers do, so that nothing
    /// can be reflected or looped.
    Drop,
}

/// Reads a query: only standard queries (`QUERY`) with one question are answered.
#[must_use]
pub fn parse_query(bytes: &[u8]) -> Parsed {
    if bytes.len() < HEADER_LEN {
        return Parsed::Drop;
    }
    let id = u16::from_be_bytes([bytes[0], bytes[1]]);
    // QR set: a response, never answered.
    if bytes[2] & 0x80 != 0 {
        return Parsed::Drop;
    }
    let Ok(message) = Message::from_vec(bytes) else {
        return Parsed::Reply(error_bytes(id, ResponseCode::FormErr, None, false));
    };
    if message.metadata.message_type != MessageType::Query {
        return Parsed::Drop;
    }
    let rd = message.metadata.recursion_desired;
    if message.metadata.op_code != OpCode::Query {
        return Parsed::Reply(error_bytes(id, ResponseCode::NotImp, None, rd));
    }
    let [query] = message.queries.as_slice() else {
        return Parsed::Reply(error_bytes(id, ResponseCode::FormErr, None, rd));
    };
    // Zone transfers are not lookups (and span several TCP messages): no program needs one
    // to connect anywhere.
    if matches!(query.query_type(), RecordType::AXFR | RecordType::IXFR) {
        return Parsed::Reply(error_bytes(id, ResponseCode::Refused, Some(query), rd));
    }
    let name = query.name().to_ascii().to_ascii_lowercase();
    let name = name.trim_end_matches('.').to_owned();
    let udp_payload = message
        .edns
        .as_ref()
        .map_or(PLAIN_UDP_PAYLOAD, |e| usize::from(e.max_payload()))
        .max(PLAIN_UDP_PAYLOAD);
    Parsed::Question(Question {
        id,
        name,
        record_type: query.query_type(),
        query: query.clone(),
        recursion_desired: rd,
        udp_payload,
    })
}

fn error_bytes(id: u16, code: ResponseCode, query: Option<&Query>, rd: bool) -> Vec<u8> {
    let mut m = Message::error_msg(id, OpCode::Query, code);
    m.metadata.recursion_desired = rd;
    m.metadata.recursion_available = true;
    if let Some(q) = query {
        m.add_query(q.clone());
    }
    // A header and one question always encode; an empty reply would read as a lost answer.
    m.to_vec().unwrap_or_default()
}

impl Question {
    /// An answer with `code` and no records (REFUSED, NXDOMAIN, SERVFAIL).
    #[must_use]
    pub fn error(&self, code: ResponseCode) -> Vec<u8> {
        error_bytes(self.id, code, Some(&self.query), self.recursion_desired)
    }

    /// An empty answer with TC set: the client asks again over TCP.
    #[must_use]
    pub fn truncated(&self) -> Vec<u8> {
        let mut m = Message::response(self.id, OpCode::Query);
        m.metadata.recursion_desired = self.recursion_desired;
        m.metadata.recursion_available = true;
        m.metadata.truncation = true;
        m.add_query(self.query.clone());
        m.to_vec().unwrap_or_default()
    }
}

/// An address an answer gives, and how long it may be kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerAddress {
    pub addr: IpAddr,
    pub ttl: u32,
}

/// What the resolver needs of an upstream answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub truncated: bool,
    pub response_code: ResponseCode,
    /// A and AAAA records of the answer section (any owner name: a CNAME chain ends in them).
    pub addresses: Vec<AnswerAddress>,
    /// A and AAAA records elsewhere (additional section): never learned, but screened.
    pub other_addresses: Vec<IpAddr>,
    /// The names the answer section leads through besides the question's (CNAME targets,
    /// and the owners of its records: a DNAME's synthesised CNAME among them), lower case without the trailing dot:
    /// the addresses are those of these names as much as of the question's.
    pub aliases: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("the upstream answer does not parse: {0}")]
    Malformed(String),
    #[error("the upstream answer is not for this query")]
    Mismatched,
}

fn address(data: &RData) -> Option<IpAddr> {
    match data {
        RData::A(a) => Some(IpAddr::V4(a.0)),
        RData::AAAA(a) => Some(IpAddr::V6(a.0)),
        _ => None,
    }
}

/// Reads an upstream answer to `question`: it must be a response with the query's id and
/// question, or it is not used (a forged or stray datagram).
pub fn read_answer(question: &Question, bytes: &[u8]) -> Result<Answer, AnswerError> {
    let message = Message::from_vec(bytes).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    let same_question = match message.queries.as_slice() {
        [q] => {
            q.query_type() == question.record_type
                && q.name()
                    .to_ascii()
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case(&question.name)
        }
        _ => false,
    };
    if message.metadata.message_type != MessageType::Response
        || message.metadata.id != question.id
        || !same_question
    {
        return Err(AnswerError::Mismatched);
    }
    Ok(Answer {
        truncated: message.metadata.truncation,
        response_code: message.metadata.response_code,
        addresses: message
            .answers
            .iter()
            .filter_map(|r| address(&r.data).map(|addr| AnswerAddress { addr, ttl: r.ttl }))
            .collect(),
        other_addresses: message
            .additionals
            .iter()
            .chain(&message.authorities)
            .filter_map(|r| address(&r.data))
            .collect(),
        aliases: aliases(&message, &question.name),
    })
}

/// The names of the answer section other than `question_name`, each once.
fn aliases(message: &Message, question_name: &str) -> Vec<String> {
    let plain =
        |name: &hickory_proto::rr::Name| name.to_ascii().trim_end_matches('.').to_ascii_lowercase();
    let mut out: Vec<String> = Vec::new();
    for record in &message.answers {
        let target = match &record.data {
            RData::CNAME(c) => Some(plain(&c.0)),
            _ => None,
        };
        for name in std::iter::once(plain(&record.name)).chain(target) {
            if name != question_name && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}
