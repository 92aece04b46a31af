//! A loopback server that speaks the `OpenAI` Chat Completions and Responses APIs (streaming
//! and not), so that the model-API gateway can be tested offline over real HTTP.
//!
//! Every reply is one assistant turn: some text, then function calls; a scripted server
//! answers the n-th model request with the n-th turn (so an agent's loop ends). Streams are sent the
//! way the API sends them: chat chunks as unnamed `data:` events with argument fragments per
//! tool call index and a final `data: [DONE]`; Responses as named `response.*` events. The
//! server records every request and stops when dropped.
use std::sync::{Arc, Mutex, PoisonError};

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use crate::loopback::{event_stream, json_response, Body, Loopback, Received};

/// One assistant turn: text, then function calls `(call id, name, arguments)`.
#[derive(Clone, Debug, Default)]
pub struct Turn {
    pub text: String,
    pub calls: Vec<(String, String, Value)>,
    /// The Responses API `namespace` of calls that have one, by call id (Codex puts each
    /// MCP server's tools in a namespace `mcp__SERVER`).
    pub namespaces: Vec<(String, String)>,
    /// The ids of calls of custom (freeform) tools, whose argument is one string (Codex's
    /// `apply_patch`): `custom_tool_call` items with an `input`.
    pub custom: Vec<String>,
}

impl Turn {
    #[must_use]
    pub fn new(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            calls: Vec::new(),
            namespaces: Vec::new(),
            custom: Vec::new(),
        }
    }

    #[must_use]
    pub fn call(mut self, id: &str, name: &str, arguments: Value) -> Self {
        self.calls.push((id.to_owned(), name.to_owned(), arguments));
        self
    }

    /// A call of the custom tool `name` with `input` as its whole argument (Responses API
    /// only: the Chat Completions answers carry it as a function call).
    #[must_use]
    pub fn custom_call(mut self, id: &str, name: &str, input: &str) -> Self {
        self.custom.push(id.to_owned());
        self.call(id, name, Value::String(input.to_owned()))
    }

    /// A call of tool `name` of `namespace` (Responses API only).
    #[must_use]
    pub fn call_in(mut self, namespace: &str, id: &str, name: &str, arguments: Value) -> Self {
        self.namespaces.push((id.to_owned(), namespace.to_owned()));
        self.call(id, name, arguments)
    }
}

/// A request the server received.
pub use crate::loopback::Received as Recorded;

struct State {
    turns: Vec<Turn>,
    recorded: Mutex<Vec<Recorded>>,
}

/// The running server; stops when dropped.
pub struct OpenAiServer {
    server: Loopback,
    state: Arc<State>,
}

impl OpenAiServer {
    /// Starts a server that answers every request with `turn`.
    #[must_use]
    pub fn start(turn: Turn) -> Self {
        Self::scripted(vec![turn])
    }

    /// Answers the n-th model request with `turns[n]` (the last turn once past the end).
    #[must_use]
    pub fn scripted(turns: Vec<Turn>) -> Self {
        assert!(!turns.is_empty(), "a script needs at least one turn");
        let state = Arc::new(State {
            turns,
            recorded: Mutex::new(Vec::new()),
        });
        let serving = Arc::clone(&state);
        let server = Loopback::start("openai-loopback", move |request| {
            let response = handle(&serving, request);
            async move { response }
        });
        Self { server, state }
    }

    /// `http://127.0.0.1:PORT` (the gateway's `--openai-upstream`).
    #[must_use]
    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    #[must_use]
    pub fn requests(&self) -> Vec<Recorded> {
        self.state
            .recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Requests to endpoints the server does not implement.
    #[must_use]
    pub fn unknown_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| !is_model_request(r))
            .collect()
    }

    /// The `output` of the Responses API `function_call_output` (or, for a custom tool,
    /// `custom_tool_call_output`) item the client sent back for `call_id` (the latest one
    /// when it was sent more than once).
    #[must_use]
    pub fn function_call_output(&self, call_id: &str) -> Option<String> {
        self.requests()
            .iter()
            .rev()
            .filter(|r| r.route() == "/v1/responses")
            .filter_map(Recorded::json)
            .find_map(|body| {
                body["input"]
                    .as_array()?
                    .iter()
                    .find(|i| {
                        matches!(
                            i["type"].as_str(),
                            Some("function_call_output" | "custom_tool_call_output")
                        ) && i["call_id"] == call_id
                    })
                    .map(|i| match &i["output"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
            })
    }
}

fn is_model_request(r: &Received) -> bool {
    matches!(r.route(), "/v1/chat/completions" | "/v1/responses")
}

/// Records the request, then answers it.
fn handle(state: &State, received: Received) -> Response<Body> {
    let mut recorded = state
        .recorded
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let n = recorded.iter().filter(|r| is_model_request(r)).count();
    let turn = &state.turns[n.min(state.turns.len() - 1)];
    let response = respond(turn, &received);
    recorded.push(received);
    response
}

fn respond(turn: &Turn, received: &Received) -> Response<Body> {
    let request = received.json().unwrap_or(Value::Null);
    let stream = request["stream"] == true;
    let model = request["model"]
        .as_str()
        .unwrap_or("gpt-loopback")
        .to_owned();
    match received.route() {
        "/v1/chat/completions" if stream => event_stream(chat_chunks(turn, &model)),
        "/v1/chat/completions" => json_response(&chat_completion(turn, &model)),
        "/v1/responses" if stream => event_stream(response_events(turn, &model)),
        "/v1/responses" => json_response(&response(turn, &model, "completed")),
        other => {
            let mut r = json_response(&json!({"error": {"message": format!("{other} not served"),
                "type": "invalid_request_error", "param": null, "code": "unknown_url"}}));
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    }
}

const CREATED: u64 = 1_760_000_000;

fn chat_completion(turn: &Turn, model: &str) -> Value {
    let calls: Vec<Value> = turn
        .calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": turn.text, "refusal": null});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let finish = if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    json!({"id": "chatcmpl-loopback", "object": "chat.completion", "created": CREATED,
           "model": model,
           "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
}

fn chunk(model: &str, delta: &Value, finish: &Value) -> String {
    let c = json!({"id": "chatcmpl-loopback", "object": "chat.completion.chunk",
                   "created": CREATED, "model": model,
                   "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

fn chat_chunks(turn: &Turn, model: &str) -> Vec<String> {
    let mut out = vec![chunk(
        model,
        &json!({"role": "assistant", "content": ""}),
        &Value::Null,
    )];
    for piece in pieces(&turn.text) {
        out.push(chunk(model, &json!({"content": piece}), &Value::Null));
    }
    for (i, (id, name, args)) in turn.calls.iter().enumerate() {
        out.push(chunk(
            model,
            &json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                                    "function": {"name": name, "arguments": ""}}]}),
            &Value::Null,
        ));
        for piece in pieces(&args.to_string()) {
            out.push(chunk(
                model,
                &json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                &Value::Null,
            ));
        }
    }
    let finish = if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out.push(chunk(model, &json!({}), &json!(finish)));
    out.push("data: [DONE]\n\n".to_owned());
    out
}

fn output_items(turn: &Turn) -> Vec<Value> {
    let mut items = vec![
        json!({"type": "message", "id": "msg_loopback", "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": turn.text, "annotations": []}]}),
    ];
    for (id, name, args) in &turn.calls {
        if turn.custom.contains(id) {
            items.push(
                json!({"type": "custom_tool_call", "id": format!("ctc_{id}"),
                              "call_id": id, "name": name, "input": args,
                              "status": "completed"}),
            );
            continue;
        }
        let mut item = json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id,
                              "name": name, "arguments": args.to_string(), "status": "completed"});
        if let Some((_, namespace)) = turn.namespaces.iter().find(|(call, _)| call == id) {
            item["namespace"] = json!(namespace);
        }
        items.push(item);
    }
    items
}

fn response(turn: &Turn, model: &str, status: &str) -> Value {
    let output = if status == "completed" {
        output_items(turn)
    } else {
        Vec::new()
    };
    json!({"id": "resp_loopback", "object": "response", "created_at": CREATED,
           "status": status, "model": model, "output": output,
           "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}})
}

fn response_events(turn: &Turn, model: &str) -> Vec<String> {
    let mut seq = 0u64;
    let mut out = Vec::new();
    let mut push = |mut data: Value| {
        data["sequence_number"] = json!(seq);
        seq += 1;
        let name = data["type"].as_str().unwrap_or_default().to_owned();
        out.push(format!("event: {name}\ndata: {data}\n\n"));
    };
    push(json!({"type": "response.created", "response": response(turn, model, "in_progress")}));
    for (index, item) in output_items(turn).into_iter().enumerate() {
        let mut opening = item.clone();
        opening["status"] = json!("in_progress");
        if item["type"] == "message" {
            opening["content"] = json!([]);
            push(
                json!({"type": "response.output_item.added", "output_index": index, "item": opening}),
            );
            for piece in pieces(&turn.text) {
                push(
                    json!({"type": "response.output_text.delta", "item_id": item["id"],
                            "output_index": index, "content_index": 0, "delta": piece}),
                );
            }
        } else if item["type"] == "custom_tool_call" {
            opening["input"] = json!("");
            push(
                json!({"type": "response.output_item.added", "output_index": index, "item": opening}),
            );
            let input = item["input"].as_str().unwrap_or_default().to_owned();
            for piece in pieces(&input) {
                push(json!({"type": "response.custom_tool_call_input.delta",
                            "item_id": item["id"], "output_index": index, "delta": piece}));
            }
            push(json!({"type": "response.custom_tool_call_input.done",
                        "item_id": item["id"], "output_index": index, "input": input}));
        } else {
            opening["arguments"] = json!("");
            push(
                json!({"type": "response.output_item.added", "output_index": index, "item": opening}),
            );
            let args = item["arguments"].as_str().unwrap_or_default().to_owned();
            for piece in pieces(&args) {
                push(json!({"type": "response.function_call_arguments.delta",
                            "item_id": item["id"], "output_index": index, "delta": piece}));
            }
            push(json!({"type": "response.function_call_arguments.done",
                        "item_id": item["id"], "output_index": index, "arguments": args}));
        }
        push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    }
    push(json!({"type": "response.completed", "response": response(turn, model, "completed")}));
    out
}

/// Pieces of at most 16 bytes on character boundaries, as the API streams fragments.
fn pieces(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in s.chars() {
        if current.len() + c.len_utf8() > 16 {
            out.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
