//! The direct wire: one `Evaluate` in a plain frame on the API socket, for the one-call
//! clients (`carapace hook`, `carapace check`). A gRPC call from a fresh process pays an
//! HTTP/2 handshake (preface, two SETTINGS frames and their acknowledgements, one round
//! trip more before the request may go) and the client's HTTP/2 stack; for a hook that runs
//! once per tool call that was a quarter of its end-to-end time. The request and reply are
//! the gRPC messages themselves (protobuf), so both doors answer alike; the daemon tells the
//! two apart by the first bytes a client sends (an HTTP/2 client starts with `PRI * HTTP/2.0`).
//!
//! Only `Evaluate` is offered here; who the caller is comes from `SO_PEERCRED`, as for gRPC.
//!
//! ```text
//! request: MAGIC (8 bytes) · length (u32 LE) · EvaluateRequest (protobuf)
//! reply:   kind (1 byte: 0 answer, 1 refusal) · length (u32 LE) · EvaluateReply (protobuf)
//!          or the refusal's message (UTF-8)
//! ```

use prost::Message as _;

use super::proto::{EvaluateReply, EvaluateRequest};

/// What a direct client sends first. The NUL makes it impossible as the start of an HTTP/2
/// preface; the last byte is the wire's version.
pub const MAGIC: [u8; 8] = *b"\0CRPC-E\x01";

/// The largest request body accepted: tonic's default decoding limit for the gRPC door.
pub const MAX_BODY: usize = 4 << 20;

const ANSWER: u8 = 0;
const REFUSAL: u8 = 1;

/// A frame that is not one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("the frame is {0} bytes long; at most {MAX_BODY} are accepted")]
    TooLong(usize),
    #[error("the frame's kind is {0}; this carapace knows 0 (answer) and 1 (refusal)")]
    UnknownKind(u8),
    #[error("the frame's body is not the message it should be: {0}")]
    Body(String),
}

/// What the first bytes on a connection say about its client.
#[derive(Debug, PartialEq, Eq)]
pub enum Opening {
    Direct,
    /// gRPC, or anything else: tonic answers it (and refuses what is not HTTP/2).
    Other,
    /// Too few bytes yet to tell.
    Undecided,
}

/// Reads the first bytes a client sent (possibly fewer than [`MAGIC`]).
#[must_use]
pub fn opening(first: &[u8]) -> Opening {
    let n = first.len().min(MAGIC.len());
    if first[..n] != MAGIC[..n] {
        Opening::Other
    } else if n == MAGIC.len() {
        Opening::Direct
    } else {
        Opening::Undecided
    }
}

/// The whole request a direct client writes.
#[must_use]
pub fn request_frame(req: &EvaluateRequest) -> Vec<u8> {
    let body = req.encode_to_vec();
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&length(body.len()));
    out.extend_from_slice(&body);
    out
}

/// The body length a request's header (the 4 bytes after [`MAGIC`]) announces.
pub fn request_length(header: [u8; 4]) -> Result<usize, FrameError> {
    checked_length(header)
}

/// Decodes a request body.
pub fn request(body: &[u8]) -> Result<EvaluateRequest, FrameError> {
    EvaluateRequest::decode(body).map_err(|e| FrameError::Body(e.to_string()))
}

/// The reply frame for an answer or a refusal.
#[must_use]
pub fn reply_frame(outcome: Result<&EvaluateReply, &str>) -> Vec<u8> {
    let (kind, body) = match outcome {
        Ok(reply) => (ANSWER, reply.encode_to_vec()),
        Err(message) => (REFUSAL, message.as_bytes().to_vec()),
    };
    let mut out = Vec::with_capacity(5 + body.len());
    out.push(kind);
    out.extend_from_slice(&length(body.len()));
    out.extend_from_slice(&body);
    out
}

/// A reply's header (kind and length), read before its body.
pub fn reply_header(header: [u8; 5]) -> Result<(bool, usize), FrameError> {
    let answered = match header[0] {
        ANSWER => true,
        REFUSAL => false,
        other => return Err(FrameError::UnknownKind(other)),
    };
    let len = checked_length([header[1], header[2], header[3], header[4]])?;
    Ok((answered, len))
}

/// The daemon's refusal of a call on the direct wire: its message, as `Evaluate`'s gRPC
/// status would have said it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// Decodes a reply body: the daemon's answer, or its refusal.
pub fn reply(answered: bool, body: &[u8]) -> Result<Result<EvaluateReply, Refusal>, FrameError> {
    if answered {
        EvaluateReply::decode(body)
            .map(Ok)
            .map_err(|e| FrameError::Body(e.to_string()))
    } else {
        Ok(Err(Refusal(String::from_utf8_lossy(body).into_owned())))
    }
}

fn length(len: usize) -> [u8; 4] {
    // Bodies are bounded by MAX_BODY on the way in; an answer is far smaller still.
    u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes()
}

fn checked_length(header: [u8; 4]) -> Result<usize, FrameError> {
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_BODY {
        return Err(FrameError::TooLong(len));
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> EvaluateRequest {
        EvaluateRequest {
            call_json: r#"{"tool":"Read","input":{"file_path":"/etc/hosts"}}"#.into(),
            cwd: "/home/alice/project".into(),
            session_id: "abc".into(),
            agent: "claude-code".into(),
            wait_seconds: 30,
        }
    }

    #[test]
    fn a_request_survives_its_frame() {
        let frame = request_frame(&sample());
        assert_eq!(opening(&frame), Opening::Direct);
        let len = request_length(frame[8..12].try_into().unwrap()).unwrap();
        assert_eq!(len, frame.len() - 12);
        assert_eq!(request(&frame[12..]).unwrap(), sample());
    }

    #[test]
    fn an_http2_preface_is_not_direct() {
        assert_eq!(opening(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Opening::Other);
        assert_eq!(opening(b"P"), Opening::Other);
        assert_eq!(opening(b""), Opening::Undecided);
        assert_eq!(opening(&MAGIC[..3]), Opening::Undecided);
    }

    #[test]
    fn replies_and_refusals_survive_their_frames() {
        let answer = EvaluateReply {
            decision_json: r#"{"decision":"allow"}"#.into(),
            approval_id: "r1".into(),
            ..EvaluateReply::default()
        };
        for outcome in [Ok(&answer), Err("the daemon is shutting down")] {
            let frame = reply_frame(outcome);
            let (answered, len) = reply_header(frame[..5].try_into().unwrap()).unwrap();
            assert_eq!(len, frame.len() - 5);
            let back = reply(answered, &frame[5..]).unwrap();
            assert_eq!(back, outcome.cloned().map_err(|m| Refusal(m.to_owned())));
        }
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading() {
        let too_long = u32::try_from(MAX_BODY + 1).unwrap().to_le_bytes();
        assert_eq!(
            request_length(too_long),
            Err(FrameError::TooLong(MAX_BODY + 1))
        );
        assert_eq!(
            reply_header([7, 0, 0, 0, 0]),
            Err(FrameError::UnknownKind(7))
        );
    }

    proptest! {
        /// Whatever bytes arrive, reading them as a frame answers or refuses; it never
        /// panics, and never accepts a length over the limit.
        #[test]
        fn any_bytes_are_read_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = opening(&bytes);
            if bytes.len() >= 5 {
                if let Ok((_, len)) = reply_header(bytes[..5].try_into().unwrap()) {
                    prop_assert!(len <= MAX_BODY);
                }
                let _ = reply(bytes[0] == 0, &bytes[5..]);
            }
            if bytes.len() >= 4 {
                if let Ok(len) = request_length(bytes[..4].try_into().unwrap()) {
                    prop_assert!(len <= MAX_BODY);
                }
            }
            let _ = request(&bytes);
        }

        #[test]
        fn any_request_survives_its_frame(
            call_json in ".{0,200}", cwd in ".{0,40}", session_id in ".{0,20}",
            agent in ".{0,20}", wait_seconds in any::<u32>(),
        ) {
            let req = EvaluateRequest { call_json, cwd, session_id, agent, wait_seconds };
            let frame = request_frame(&req);
            prop_assert_eq!(opening(&frame), Opening::Direct);
            prop_assert_eq!(request(&frame[12..]).unwrap(), req);
        }
    }
}
