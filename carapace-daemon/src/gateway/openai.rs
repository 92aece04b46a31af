//! The `OpenAI` APIs: Chat Completions (`tool_calls` of each choice's message, streamed as
//! argument fragments per tool call index) and Responses (`function_call`,
//! `custom_tool_call` and `local_shell_call` output items, streamed as item events).
use std::collections::{BTreeMap, BTreeSet};

use hyper::body::Bytes;
use serde_json::{json, Value};

use super::refusal::{PendingCall, UnreadableInput, Verdict};
use super::sse::{self, Event};
use super::{Step, StreamFilter};

/// The error body the API uses.
#[must_use]
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": kind}})
}

/// Chat: the conversation's past turns, for Layer 0 (`tools` holds schemas, not calls).
#[must_use]
pub fn chat_history(request: &Value) -> Option<&Value> {
    request.get("messages")
}

/// Responses: the input items (a plain string holds no calls).
#[must_use]
pub fn responses_history(request: &Value) -> Option<&Value> {
    request.get("input").filter(|i| i.is_array())
}

fn arguments(v: &Value) -> Result<Value, UnreadableInput> {
    match v {
        Value::String(s) if s.trim().is_empty() => Ok(json!({})),
        Value::String(s) => {
            serde_json::from_str(s).map_err(|e| UnreadableInput::NotJson(std::sync::Arc::new(e)))
        }
        Value::Null => Ok(json!({})),
        other => Ok(other.clone()),
    }
}

fn chat_call(key: usize, call: &Value) -> PendingCall {
    let f = &call["function"];
    PendingCall {
        key,
        tool: f["name"].as_str().unwrap_or_default().to_owned(),
        input: arguments(&f["arguments"]),
    }
}

/// Chat: every tool call of every choice, numbered in order.
#[must_use]
pub fn chat_calls(completion: &Value) -> Vec<PendingCall> {
    let mut out = Vec::new();
    for choice in completion["choices"].as_array().into_iter().flatten() {
        let message = &choice["message"];
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            out.push(chat_call(out.len(), call));
        }
        if message["function_call"].is_object() {
            let call = json!({"function": message["function_call"]});
            out.push(chat_call(out.len(), &call));
        }
    }
    out
}

/// `v[key]` for writing, only when `v` is an object and has it (indexing anything else for
/// writing panics, and the upstream's JSON can be anything).
fn field<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    v.as_object_mut()?.get_mut(key)
}

/// Appends `text` to a chat message's content (a string or null).
fn add_content(message: &mut Value, text: &str) {
    let joined = match message["content"].as_str() {
        Some(c) if !c.is_empty() => format!("{c}\n\n{text}"),
        _ => text.to_owned(),
    };
    message["content"] = json!(joined);
}

/// Chat: drops refused calls, says why in the message's content, and ends the turn when no
/// call is left.
pub fn rewrite_chat(completion: &mut Value, verdicts: &[(PendingCall, Verdict)]) -> bool {
    let refused: BTreeMap<usize, &str> = verdicts
        .iter()
        .filter_map(|(c, v)| match v {
            Verdict::Refuse(t) => Some((c.key, t.as_str())),
            Verdict::Pass => None,
        })
        .collect();
    if refused.is_empty() {
        return false;
    }
    let Some(choices) = field(completion, "choices").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut key = 0;
    for choice in choices {
        let mut texts = Vec::new();
        let Some(message) = field(choice, "message").filter(|m| m.is_object()) else {
            continue;
        };
        if let Some(calls) = field(message, "tool_calls").and_then(Value::as_array_mut) {
            calls.retain(|_| {
                let keep = refused.get(&key).is_none_or(|t| {
                    texts.push((*t).to_owned());
                    false
                });
                key += 1;
                keep
            });
        }
        if message["function_call"].is_object() {
            if let Some(t) = refused.get(&key) {
                texts.push((*t).to_owned());
                if let Some(m) = message.as_object_mut() {
                    m.remove("function_call");
                }
            }
            key += 1;
        }
        if texts.is_empty() {
            continue;
        }
        add_content(message, &texts.join("\n\n"));
        let none_left = message["tool_calls"].as_array().is_none_or(Vec::is_empty)
            && !message["function_call"].is_object();
        if none_left {
            if let Some(m) = message.as_object_mut() {
                m.remove("tool_calls");
            }
            if let Some(reason) = field(choice, "finish_reason") {
                if matches!(reason.as_str(), Some("tool_calls" | "function_call")) {
                    *reason = json!("stop");
                }
            }
        }
    }
    true
}

/// One tool call being streamed in a chat completion.
#[derive(Default)]
struct ChatCall {
    id: Value,
    name: String,
    arguments: String,
}

/// The chat completion stream filter. Once a chunk carries tool call fragments, chunks are
/// held until every choice that has calls finishes; then they go out unchanged if every
/// call passes, or rewritten (refused calls removed, the allowed ones whole, the refusal as
/// content, the finish reason fixed).
#[derive(Default)]
pub struct ChatStream {
    held: Vec<Event>,
    /// (choice, tool call index) → the call so far.
    calls: BTreeMap<(u64, u64), ChatCall>,
    /// Choices with calls that have not finished yet.
    open: BTreeSet<u64>,
    /// The calls being judged, by key, and their (choice, index).
    judging: Vec<(u64, u64)>,
}

impl ChatStream {
    fn release(&mut self, verdicts: &[(PendingCall, Verdict)]) -> Bytes {
        let held = std::mem::take(&mut self.held);
        let calls = std::mem::take(&mut self.calls);
        let judging = std::mem::take(&mut self.judging);
        if verdicts.iter().all(|(_, v)| *v == Verdict::Pass) {
            let mut out = Vec::new();
            for e in held {
                out.extend_from_slice(&e.raw);
            }
            return Bytes::from(out);
        }
        // Per choice: the calls that pass (whole) and the refusal texts.
        let mut kept: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
        let mut texts: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for (call, verdict) in verdicts {
            let Some(&(choice, index)) = judging.get(call.key) else {
                continue;
            };
            match verdict {
                Verdict::Pass => {
                    if let Some(c) = calls.get(&(choice, index)) {
                        let list = kept.entry(choice).or_default();
                        list.push(json!({"index": list.len(), "id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments}}));
                    }
                }
                Verdict::Refuse(t) => texts.entry(choice).or_default().push(t.clone()),
            }
        }
        let mut out = Vec::new();
        for event in held {
            let Some(mut chunk) = event.json().filter(Value::is_object) else {
                out.extend_from_slice(&event.raw);
                continue;
            };
            let mut inserts = Vec::new();
            let choices = field(&mut chunk, "choices").and_then(Value::as_array_mut);
            for choice in choices.into_iter().flatten().filter(|c| c.is_object()) {
                let c = choice["index"].as_u64().unwrap_or(0);
                if let Some(delta) = field(choice, "delta").and_then(Value::as_object_mut) {
                    delta.remove("tool_calls");
                }
                let had_calls = kept.contains_key(&c) || texts.contains_key(&c);
                if had_calls && choice["finish_reason"].is_string() {
                    let calls = kept.remove(&c).unwrap_or_default();
                    let text = texts.remove(&c).unwrap_or_default().join("\n\n");
                    let mut delta = json!({"content": text});
                    if calls.is_empty() {
                        if choice["finish_reason"] == "tool_calls" {
                            choice["finish_reason"] = json!("stop");
                        }
                    } else {
                        delta["tool_calls"] = Value::Array(calls);
                    }
                    inserts.push(json!({"index": c, "delta": delta, "finish_reason": null}));
                }
            }
            if !inserts.is_empty() {
                let mut before = chunk.clone();
                before["choices"] = Value::Array(inserts);
                if let Some(obj) = before.as_object_mut() {
                    obj.remove("usage");
                }
                out.extend(sse::format(&event.name, &before));
            }
            out.extend(sse::format(&event.name, &chunk));
        }
        Bytes::from(out)
    }
}

impl StreamFilter for ChatStream {
    fn on_event(&mut self, event: Event) -> Step {
        let chunk = event.json();
        let Some(chunk) = chunk.filter(|c| c["choices"].is_array()) else {
            return if self.held.is_empty() {
                Step::Emit(event.raw)
            } else {
                self.held.push(event);
                Step::Emit(Bytes::new())
            };
        };
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            let c = choice["index"].as_u64().unwrap_or(0);
            let delta = &choice["delta"];
            let mut fragments: Vec<Value> =
                delta["tool_calls"].as_array().cloned().unwrap_or_default();
            if delta["function_call"].is_object() {
                let mut legacy = json!({"index": 0, "function": delta["function_call"]});
                legacy["id"] = Value::Null;
                fragments.push(legacy);
            }
            for fragment in fragments {
                let i = fragment["index"].as_u64().unwrap_or(0);
                let call = self.calls.entry((c, i)).or_default();
                if !fragment["id"].is_null() {
                    call.id = fragment["id"].clone();
                }
                if let Some(n) = fragment["function"]["name"].as_str() {
                    call.name.push_str(n);
                }
                if let Some(a) = fragment["function"]["arguments"].as_str() {
                    call.arguments.push_str(a);
                }
                self.open.insert(c);
            }
            if choice["finish_reason"].is_string() {
                self.open.remove(&c);
            }
        }
        if self.calls.is_empty() {
            return Step::Emit(event.raw);
        }
        self.held.push(event);
        if !self.open.is_empty() {
            return Step::Emit(Bytes::new());
        }
        self.judging = self.calls.keys().copied().collect();
        Step::Judge(
            self.calls
                .values()
                .enumerate()
                .map(|(key, c)| PendingCall {
                    key,
                    tool: c.name.clone(),
                    input: arguments(&Value::String(c.arguments.clone())),
                })
                .collect(),
        )
    }

    fn settle(&mut self, verdicts: Vec<(PendingCall, Verdict)>) -> Bytes {
        self.release(&verdicts)
    }

    fn finish(&mut self) -> Bytes {
        // Calls whose choice never finished are not passed on unchecked.
        self.held.clear();
        self.calls.clear();
        self.open.clear();
        Bytes::new()
    }
}

const CALL_ITEMS: &[&str] = &["function_call", "custom_tool_call", "local_shell_call"];

fn item_call(key: usize, item: &Value) -> Option<PendingCall> {
    let kind = item["type"].as_str()?;
    if !CALL_ITEMS.contains(&kind) {
        return None;
    }
    let (tool, input) = match kind {
        "local_shell_call" => ("local_shell".to_owned(), Ok(item["action"].clone())),
        "custom_tool_call" => (
            item["name"].as_str().unwrap_or_default().to_owned(),
            Ok(json!({"input": item["input"]})),
        ),
        _ => (
            item["name"].as_str().unwrap_or_default().to_owned(),
            arguments(&item["arguments"]),
        ),
    };
    Some(PendingCall { key, tool, input })
}

/// Responses: the call items of a response's output, keyed by their position.
#[must_use]
pub fn response_calls(response: &Value) -> Vec<PendingCall> {
    response["output"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, item)| item_call(i, item))
        .collect()
}

/// The assistant message item that stands in for a refused call.
fn message_item(key: usize, text: &str) -> Value {
    json!({"type": "message", "id": format!("msg_carapace_{key}"), "status": "completed",
           "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// Responses: replaces each refused call item by a message item saying why.
pub fn rewrite_response(response: &mut Value, verdicts: &[(PendingCall, Verdict)]) -> bool {
    let Some(output) = field(response, "output").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    for (call, verdict) in verdicts {
        if let (Verdict::Refuse(text), Some(item)) = (verdict, output.get_mut(call.key)) {
            *item = message_item(call.key, text);
            changed = true;
        }
    }
    changed
}

/// The Responses stream filter: holds a call item's events (by `output_index`) from
/// `response.output_item.added` to `response.output_item.done`, then lets them through or
/// replaces them by a message item; the final `response.completed` gets the same
/// replacement in its `output`.
#[derive(Default)]
pub struct ResponsesStream {
    held: BTreeMap<usize, Vec<Bytes>>,
    refused: BTreeMap<usize, String>,
}

fn output_index(data: &Value) -> Option<usize> {
    data["output_index"]
        .as_u64()
        .and_then(|i| usize::try_from(i).ok())
}

impl ResponsesStream {
    fn refusal_events(name: &str, index: usize, text: &str) -> Vec<u8> {
        let item = message_item(index, text);
        let mut opening = item.clone();
        opening["status"] = json!("in_progress");
        opening["content"] = json!([]);
        let id = item["id"].clone();
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        let events = [
            json!({"type": "response.output_item.added", "output_index": index, "item": opening}),
            json!({"type": "response.content_part.added", "item_id": id, "output_index": index,
                   "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
            json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                   "content_index": 0, "delta": text}),
            json!({"type": "response.output_text.done", "item_id": id, "output_index": index,
                   "content_index": 0, "text": text}),
            json!({"type": "response.content_part.done", "item_id": id, "output_index": index,
                   "content_index": 0, "part": part}),
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ];
        let mut out = Vec::new();
        for e in events {
            let event_name = if name.is_empty() {
                ""
            } else {
                e["type"].as_str().unwrap_or_default()
            };
            out.extend(sse::format(event_name, &e));
        }
        out
    }
}

impl StreamFilter for ResponsesStream {
    fn on_event(&mut self, event: Event) -> Step {
        let Some(data) = event.json() else {
            return Step::Emit(event.raw);
        };
        let kind = data["type"].as_str().unwrap_or_default();
        let index = output_index(&data);
        match (kind, index) {
            ("response.output_item.added", Some(i))
                if CALL_ITEMS.contains(&data["item"]["type"].as_str().unwrap_or_default()) =>
            {
                self.held.insert(i, vec![event.raw]);
                Step::Emit(Bytes::new())
            }
            ("response.output_item.done", Some(i)) if self.held.contains_key(&i) => {
                if let Some(h) = self.held.get_mut(&i) {
                    h.push(event.raw);
                }
                match item_call(i, &data["item"]) {
                    Some(call) => Step::Judge(vec![call]),
                    None => Step::Judge(vec![PendingCall {
                        key: i,
                        tool: data["item"]["type"].as_str().unwrap_or("tool").to_owned(),
                        input: Err(UnreadableInput::NotACall),
                    }]),
                }
            }
            (_, Some(i)) if self.held.contains_key(&i) => {
                if let Some(h) = self.held.get_mut(&i) {
                    h.push(event.raw);
                }
                Step::Emit(Bytes::new())
            }
            ("response.completed" | "response.incomplete" | "response.failed", _)
                if !self.refused.is_empty() || !self.held.is_empty() =>
            {
                let mut data = data;
                let verdicts: Vec<(PendingCall, Verdict)> = self
                    .refused
                    .iter()
                    .map(|(k, t)| {
                        (
                            PendingCall {
                                key: *k,
                                tool: String::new(),
                                input: Ok(Value::Null),
                            },
                            Verdict::Refuse(t.clone()),
                        )
                    })
                    .collect();
                // Items whose events never finished are dropped from the final output too.
                let unfinished: Vec<usize> = std::mem::take(&mut self.held).into_keys().collect();
                let response = field(&mut data, "response");
                let output = response.and_then(|r| {
                    rewrite_response(r, &verdicts);
                    field(r, "output").and_then(Value::as_array_mut)
                });
                if let Some(output) = output {
                    for i in unfinished.into_iter().rev() {
                        if i < output.len() {
                            output.remove(i);
                        }
                    }
                }
                Step::Emit(Bytes::from(sse::format(&event.name, &data)))
            }
            _ => Step::Emit(event.raw),
        }
    }

    fn settle(&mut self, verdicts: Vec<(PendingCall, Verdict)>) -> Bytes {
        let mut out = Vec::new();
        for (call, verdict) in verdicts {
            let Some(held) = self.held.remove(&call.key) else {
                continue;
            };
            match verdict {
                Verdict::Pass => {
                    for raw in held {
                        out.extend_from_slice(&raw);
                    }
                }
                Verdict::Refuse(text) => {
                    let named = held.first().is_some_and(|raw| raw.starts_with(b"event:"));
                    out.extend(Self::refusal_events(
                        if named { "named" } else { "" },
                        call.key,
                        &text,
                    ));
                    self.refused.insert(call.key, text);
                }
            }
        }
        Bytes::from(out)
    }

    fn finish(&mut self) -> Bytes {
        self.held.clear();
        Bytes::new()
    }
}
