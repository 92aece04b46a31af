//! A loopback server that speaks the Gemini API's `generateContent` and
//! `streamGenerateContent` (`?alt=sse`), so that the real Gemini CLI can be tested offline.
//!
//! Replies follow a script: the n-th model request gets the n-th turn (the last one again
//! after that), a turn being text and `functionCall` parts with ids, which the CLI echoes in
//! the `functionResponse` parts of its next request. A stream is one `data:` event holding
//! the whole candidate, as the API sends a short answer. Every request is recorded; other
//! endpoints get the API's 404 error shape.
use std::sync::{Arc, Mutex, PoisonError};

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use crate::loopback::{event_stream, json_response, Body, Loopback, Received};

/// One part of a model turn.
#[derive(Clone, Debug)]
pub enum Part {
    Text(String),
    /// `(id, name, args)`.
    Call(String, String, Value),
}

impl Part {
    #[must_use]
    pub fn text(text: &str) -> Self {
        Self::Text(text.to_owned())
    }

    #[must_use]
    pub fn call(id: &str, name: &str, args: Value) -> Self {
        Self::Call(id.to_owned(), name.to_owned(), args)
    }

    fn json(&self) -> Value {
        match self {
            Self::Text(t) => json!({ "text": t }),
            Self::Call(id, name, args) => {
                json!({ "functionCall": { "id": id, "name": name, "args": args } })
            }
        }
    }
}

struct State {
    turns: Vec<Vec<Part>>,
    recorded: Mutex<Vec<Received>>,
}

/// The running server; stops when dropped.
pub struct GeminiServer {
    server: Loopback,
    state: Arc<State>,
}

impl GeminiServer {
    /// Answers the n-th model request with `turns[n]` (the last turn once past the end).
    #[must_use]
    pub fn scripted(turns: Vec<Vec<Part>>) -> Self {
        assert!(!turns.is_empty(), "a script needs at least one turn");
        let state = Arc::new(State {
            turns,
            recorded: Mutex::new(Vec::new()),
        });
        let serving = Arc::clone(&state);
        let server = Loopback::start("gemini-loopback", move |request| {
            let response = handle(&serving, request);
            async move { response }
        });
        Self { server, state }
    }

    /// `http://127.0.0.1:PORT` (the CLI's `GOOGLE_GEMINI_BASE_URL`).
    #[must_use]
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    #[must_use]
    pub fn requests(&self) -> Vec<Received> {
        self.state
            .recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Requests to endpoints the server does not implement.
    #[must_use]
    pub fn unknown_requests(&self) -> Vec<Received> {
        self.requests()
            .into_iter()
            .filter(|r| method(r).is_none())
            .collect()
    }

    /// The `response` of the `functionResponse` part the client sent back for call `id`
    /// (the latest one when it was sent more than once).
    #[must_use]
    pub fn function_response(&self, id: &str) -> Option<Value> {
        self.requests()
            .iter()
            .rev()
            .filter(|r| method(r).is_some())
            .filter_map(Received::json)
            .find_map(|body| {
                body["contents"]
                    .as_array()?
                    .iter()
                    .filter_map(|c| c["parts"].as_array())
                    .flatten()
                    .find(|p| p["functionResponse"]["id"] == id)
                    .map(|p| p["functionResponse"]["response"].clone())
            })
    }
}

/// `generateContent` or `streamGenerateContent` for `POST /v1beta/models/M:METHOD`.
fn method(r: &Received) -> Option<&str> {
    let (_, method) = r.route().strip_prefix("/v1beta/models/")?.split_once(':')?;
    matches!(method, "generateContent" | "streamGenerateContent")
        .then_some(method)
        .filter(|_| r.method == "POST")
}

fn handle(state: &State, received: Received) -> Response<Body> {
    let mut recorded = state
        .recorded
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let response = if let Some(m) = method(&received) {
        let n = recorded.iter().filter(|r| method(r).is_some()).count();
        let turn = &state.turns[n.min(state.turns.len() - 1)];
        let answer = candidate(turn);
        if m == "streamGenerateContent" {
            event_stream(vec![format!("data: {answer}\r\n\r\n")])
        } else {
            json_response(&answer)
        }
    } else {
        let mut r = json_response(&json!({"error": {"code": 404, "status": "NOT_FOUND",
            "message": format!("{} is not served", received.route())}}));
        *r.status_mut() = StatusCode::NOT_FOUND;
        r
    };
    recorded.push(received);
    response
}

fn candidate(turn: &[Part]) -> Value {
    let parts: Vec<Value> = turn.iter().map(Part::json).collect();
    json!({
        "candidates": [{
            "content": { "role": "model", "parts": parts },
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": { "promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15 },
        "modelVersion": "gemini-loopback",
    })
}
