//! A loopback server that speaks the Anthropic Messages API, so that real agent harnesses
//! (the Claude Code CLI) and Carapace's model-API gateway can be tested offline over real HTTP.
//!
//! It binds `127.0.0.1:0`, records every request, and answers `POST /v1/messages` from a
//! responder: streaming server-sent events when the request asks for `stream: true` (the same
//! event sequence the API sends), one JSON message otherwise. Unknown endpoints get the API's
//! 404 error shape and are recorded too, so a test can see what a client asked for.
//!
//! The server runs on its own thread with its own Tokio runtime, so synchronous tests can use
//! it next to `std::process`, and it stops when dropped.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use crate::loopback::{self, paced_event_stream, Body, Loopback};

/// One content block of an assistant reply.
#[derive(Clone, Debug)]
pub enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

impl Block {
    #[must_use]
    pub fn text(text: &str) -> Self {
        Self::Text(text.to_owned())
    }

    #[must_use]
    pub fn tool_use(id: &str, name: &str, input: Value) -> Self {
        Self::ToolUse {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Self::Text(text) => json!({"type": "text", "text": text}),
            Self::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        }
    }
}

/// A request the server received.
pub use crate::loopback::Received as Recorded;

fn is_messages(r: &Recorded) -> bool {
    r.method == "POST" && r.route() == "/v1/messages"
}

/// Chooses the assistant's reply from the parsed request body.
pub type Responder = dyn Fn(&Value) -> Vec<Block> + Send + Sync;

struct State {
    responder: Box<Responder>,
    recorded: Mutex<Vec<Recorded>>,
    next_id: AtomicU64,
    /// Time between two streamed events, in nanoseconds (0: all at once).
    gap_ns: AtomicU64,
}

/// The running server; stops when dropped.
pub struct MessagesServer {
    server: Loopback,
    state: Arc<State>,
}

impl MessagesServer {
    /// Answers from a script of turns: a request whose conversation already holds `n`
    /// assistant messages gets `turns[n]` (the last turn once the script runs out). Choosing
    /// by the conversation rather than by arrival order keeps a retried request on the same
    /// answer.
    #[must_use]
    pub fn scripted(turns: Vec<Vec<Block>>) -> Self {
        assert!(!turns.is_empty(), "a script needs at least one turn");
        Self::start(move |request| {
            let n = request["messages"].as_array().map_or(0, |messages| {
                messages.iter().filter(|m| m["role"] == "assistant").count()
            });
            turns[n.min(turns.len() - 1)].clone()
        })
    }

    /// Starts the server with `responder` choosing each reply.
    #[must_use]
    pub fn start(responder: impl Fn(&Value) -> Vec<Block> + Send + Sync + 'static) -> Self {
        let state = Arc::new(State {
            responder: Box::new(responder),
            recorded: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            gap_ns: AtomicU64::new(0),
        });
        let serving = Arc::clone(&state);
        let server = Loopback::start("anthropic-loopback", move |request| {
            let response = handle(&serving, request);
            async move { response }
        });
        Self { server, state }
    }

    /// Streams the next answers with `gap` between two events, as a model sends them while
    /// it generates (zero, the default: all at once).
    pub fn pace(&self, gap: Duration) {
        let ns = u64::try_from(gap.as_nanos()).unwrap_or(u64::MAX);
        self.state.gap_ns.store(ns, Ordering::Relaxed);
    }

    /// `http://127.0.0.1:PORT`, the value for `ANTHROPIC_BASE_URL`.
    #[must_use]
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// Every request received so far, in arrival order.
    #[must_use]
    pub fn requests(&self) -> Vec<Recorded> {
        self.state
            .recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The parsed bodies of the `POST /v1/messages` requests, in arrival order.
    #[must_use]
    pub fn message_requests(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .filter(|r| is_messages(r))
            .filter_map(Recorded::json)
            .collect()
    }

    /// Requests to endpoints the server does not implement.
    #[must_use]
    pub fn unknown_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| !is_messages(r) && r.route() != COUNT_TOKENS)
            .collect()
    }

    /// The `tool_result` block the client sent back for `tool_use_id` (the latest one when it
    /// was sent more than once).
    #[must_use]
    pub fn tool_result(&self, tool_use_id: &str) -> Option<Value> {
        self.message_requests()
            .iter()
            .rev()
            .filter_map(|r| r["messages"].as_array())
            .flatten()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == tool_use_id)
            .cloned()
    }
}

/// The text of a `tool_result` block: its `content` as a string, or its text blocks joined.
#[must_use]
pub fn tool_result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

const COUNT_TOKENS: &str = "/v1/messages/count_tokens";

/// Records the request, then answers it.
fn handle(state: &State, recorded: Recorded) -> Response<Body> {
    let response = respond(state, &recorded);
    state
        .recorded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(recorded);
    response
}

fn respond(state: &State, recorded: &Recorded) -> Response<Body> {
    let method = recorded.method.as_str();
    let route = recorded.route();
    if method != "POST" || (route != "/v1/messages" && route != COUNT_TOKENS) {
        return error(
            StatusCode::NOT_FOUND,
            "not_found_error",
            &format!("{method} {route} is not served by the loopback server"),
        );
    }
    let Some(request) = recorded.json() else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "the body is not JSON",
        );
    };
    let input_tokens = estimate_tokens(&recorded.body);
    if route == COUNT_TOKENS {
        return json_response(&json!({ "input_tokens": input_tokens }));
    }
    let blocks = (state.responder)(&request);
    let model = request["model"].as_str().unwrap_or("claude-loopback");
    let id = format!(
        "msg_loopback_{:04}",
        state.next_id.fetch_add(1, Ordering::Relaxed)
    );
    let reply = Reply {
        id: &id,
        model,
        blocks: &blocks,
        input_tokens,
    };
    if request["stream"] == true {
        let gap = Duration::from_nanos(state.gap_ns.load(Ordering::Relaxed));
        with_request_id(paced_event_stream(reply.events(), gap))
    } else {
        json_response(&reply.message())
    }
}

/// Roughly four bytes a token, so clients that show usage or cost see plausible numbers.
fn estimate_tokens(body: &str) -> u64 {
    (body.len() as u64 / 4).max(1)
}

struct Reply<'a> {
    id: &'a str,
    model: &'a str,
    blocks: &'a [Block],
    input_tokens: u64,
}

impl Reply<'_> {
    fn stop_reason(&self) -> &'static str {
        if self
            .blocks
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. }))
        {
            "tool_use"
        } else {
            "end_turn"
        }
    }

    fn output_tokens(&self) -> u64 {
        let bytes: usize = self
            .blocks
            .iter()
            .map(|b| b.to_json().to_string().len())
            .sum();
        (bytes as u64 / 4).max(1)
    }

    fn usage(&self, output_tokens: u64) -> Value {
        json!({
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output_tokens,
        })
    }

    /// The non-streaming response body.
    fn message(&self) -> Value {
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.blocks.iter().map(Block::to_json).collect::<Vec<_>>(),
            "stop_reason": self.stop_reason(),
            "stop_sequence": null,
            "usage": self.usage(self.output_tokens()),
        })
    }

    /// The server-sent events of a streamed response, each `event: NAME\ndata: JSON\n\n`.
    fn events(&self) -> Vec<String> {
        let mut events = vec![
            sse(
                "message_start",
                &json!({
                    "type": "message_start",
                    "message": {
                        "id": self.id,
                        "type": "message",
                        "role": "assistant",
                        "model": self.model,
                        "content": [],
                        "stop_reason": null,
                        "stop_sequence": null,
                        "usage": self.usage(1),
                    },
                }),
            ),
            sse("ping", &json!({"type": "ping"})),
        ];
        for (index, block) in self.blocks.iter().enumerate() {
            let (start, deltas) = match block {
                Block::Text(text) => (
                    json!({"type": "text", "text": ""}),
                    chunks(text)
                        .map(|t| json!({"type": "text_delta", "text": t}))
                        .collect::<Vec<_>>(),
                ),
                Block::ToolUse { id, name, input } => {
                    let input = input.to_string();
                    (
                        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                        chunks(&input)
                            .map(|j| json!({"type": "input_json_delta", "partial_json": j}))
                            .collect(),
                    )
                }
            };
            events.push(sse(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            for delta in deltas {
                events.push(sse(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
            }
            events.push(sse(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        events.push(sse(
            "message_delta",
            &json!({
                "type": "message_delta",
                "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null},
                "usage": {"output_tokens": self.output_tokens()},
            }),
        ));
        events.push(sse("message_stop", &json!({"type": "message_stop"})));
        events
    }
}

/// Splits `s` into pieces of at most 32 bytes on character boundaries: the API streams text
/// and tool input in fragments, and a client must join them, so the server does too.
fn chunks(s: &str) -> impl Iterator<Item = &str> {
    const MAX: usize = 32;
    let mut rest = s;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(MAX);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        if end == 0 {
            // One character longer than MAX bytes cannot happen (UTF-8 is at most 4 bytes),
            // but never loop forever.
            end = rest.len();
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

fn json_response(value: &Value) -> Response<Body> {
    with_request_id(loopback::json_response(value))
}

fn error(status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    let mut resp = json_response(&body);
    *resp.status_mut() = status;
    resp
}

fn with_request_id(mut resp: Response<Body>) -> Response<Body> {
    resp.headers_mut().insert(
        "request-id",
        hyper::header::HeaderValue::from_static("req_loopback"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_events(events: &[String]) -> Vec<(String, Value)> {
        events
            .iter()
            .map(|e| {
                let (name, data) = e
                    .strip_prefix("event: ")
                    .and_then(|r| r.split_once("\ndata: "))
                    .unwrap_or_else(|| panic!("malformed event {e:?}"));
                let data: Value = serde_json::from_str(data.trim_end())
                    .unwrap_or_else(|err| panic!("event data is not JSON: {err}: {e:?}"));
                assert_eq!(data["type"], name, "event name and data type differ");
                (name.to_owned(), data)
            })
            .collect()
    }

    #[test]
    fn streamed_tool_use_reassembles_to_the_input() {
        let input = json!({"command": "echo héllo wörld, a command long enough to be split"});
        let blocks = [
            Block::text("Let me run that."),
            Block::tool_use("toolu_1", "Bash", input.clone()),
        ];
        let reply = Reply {
            id: "msg_1",
            model: "m",
            blocks: &blocks,
            input_tokens: 3,
        };
        let events = parse_events(&reply.events());
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(names.last(), Some(&"message_stop"));
        let json: String = events
            .iter()
            .filter(|(_, d)| d["index"] == 1 && d["delta"]["type"] == "input_json_delta")
            .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&json).ok(), Some(input));
        let delta = &events[events.len() - 2].1;
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(reply.message()["stop_reason"], "tool_use");
    }

    #[test]
    fn text_only_reply_ends_the_turn() {
        let blocks = [Block::text("done")];
        let reply = Reply {
            id: "msg_2",
            model: "m",
            blocks: &blocks,
            input_tokens: 1,
        };
        assert_eq!(reply.stop_reason(), "end_turn");
        assert_eq!(reply.message()["content"][0]["text"], "done");
    }

    /// A bare HTTP/1.1 exchange, so the server is tested over a real socket without a client
    /// library that could paper over a framing mistake.
    fn exchange(server: &MessagesServer, method: &str, path: &str, body: &str) -> String {
        use std::io::{Read as _, Write as _};
        let addr = server.base_url().replace("http://", "");
        let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        response
    }

    #[test]
    fn serves_streamed_and_plain_replies_and_records_requests() {
        let server = MessagesServer::scripted(vec![
            vec![Block::tool_use(
                "toolu_1",
                "Read",
                json!({"file_path": "/etc/hostname"}),
            )],
            vec![Block::text("bye")],
        ]);
        let first =
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
        let streamed = exchange(
            &server,
            "POST",
            "/v1/messages?beta=true",
            &first.to_string(),
        );
        assert!(streamed.starts_with("HTTP/1.1 200"), "{streamed}");
        assert!(
            streamed.contains("content-type: text/event-stream"),
            "{streamed}"
        );
        let order = [
            "event: message_start",
            "event: content_block_start",
            "\"input_json_delta\"",
            "event: content_block_stop",
            "\"stop_reason\":\"tool_use\"",
            "event: message_stop",
        ];
        let mut at = 0;
        for needle in order {
            let found = streamed[at..]
                .find(needle)
                .unwrap_or_else(|| panic!("{needle} missing or out of order in {streamed}"));
            at += found;
        }

        let second = json!({"model": "m", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "host", "is_error": false}]},
        ]});
        let plain = exchange(&server, "POST", "/v1/messages", &second.to_string());
        let body = plain.split("\r\n\r\n").nth(1).unwrap_or_default();
        let message: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {plain}"));
        assert_eq!(message["stop_reason"], "end_turn");
        assert_eq!(message["content"][0]["text"], "bye");

        let missing = exchange(&server, "GET", "/api/hello", "");
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");

        assert_eq!(server.message_requests(), vec![first, second]);
        let result = server.tool_result("toolu_1").expect("tool_result recorded");
        assert_eq!(tool_result_text(&result), "host");
        let unknown = server.unknown_requests();
        assert_eq!(unknown.len(), 1);
        assert_eq!(unknown[0].path, "/api/hello");
    }

    #[test]
    fn chunks_respect_character_boundaries() {
        let s = "ä".repeat(40);
        let pieces: Vec<&str> = chunks(&s).collect();
        assert!(pieces.len() > 1);
        assert_eq!(pieces.concat(), s);
        assert_eq!(chunks("").count(), 0);
    }
}
