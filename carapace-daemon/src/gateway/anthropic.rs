//! The Anthropic Messages API: `tool_use` content blocks in a message (non-streaming) and in
//! its event stream (`content_block_start` / `input_json_delta`s / `content_block_stop`).
use std::collections::BTreeMap;

use hyper::body::Bytes;
use serde_json::{json, Value};

use super::refusal::{PendingCall, UnreadableInput, Verdict};
use super::sse::{self, Event};
use super::{Step, StreamFilter};

/// The error body the API uses, e.g. for a refused conversation.
#[must_use]
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// The conversation's past turns, for Layer 0 (`tools` and `system` hold no calls).
#[must_use]
pub fn history(request: &Value) -> Option<&Value> {
    request.get("messages")
}

/// The client-side tool calls of a message (server tools run at the provider, not here).
#[must_use]
pub fn message_calls(message: &Value) -> Vec<PendingCall> {
    let Some(content) = message.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    content
        .iter()
        .enumerate()
        .filter(|(_, b)| b["type"] == "tool_use")
        .map(|(key, b)| PendingCall {
            key,
            tool: b["name"].as_str().unwrap_or_default().to_owned(),
            input: Ok(b.get("input").cloned().unwrap_or(Value::Null)),
        })
        .collect()
}

/// Replaces each refused call of `message` by a text block; true if anything changed.
pub fn rewrite_message(message: &mut Value, verdicts: &[(PendingCall, Verdict)]) -> bool {
    let Some(content) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    for (call, verdict) in verdicts {
        if let (Verdict::Refuse(text), Some(block)) = (verdict, content.get_mut(call.key)) {
            *block = json!({"type": "text", "text": text});
            changed = true;
        }
    }
    let tool_use_left = content.iter().any(|b| b["type"] == "tool_use");
    if changed && !tool_use_left && message["stop_reason"] == "tool_use" {
        message["stop_reason"] = json!("end_turn");
    }
    changed
}

/// A `tool_use` block being streamed, held back until it is complete and judged.
struct Held {
    tool: String,
    /// The input of `content_block_start` (used when no deltas follow).
    start_input: Value,
    json: String,
    events: Vec<Bytes>,
}

/// The event-stream filter: holds each `tool_use` block until its `content_block_stop`,
/// then lets its events through unchanged or replaces it by a text block at the same index;
/// everything else passes as it arrives.
#[derive(Default)]
pub struct Stream {
    held: BTreeMap<usize, Held>,
    kept: usize,
    refused: usize,
}

impl Stream {
    fn refusal_block(index: usize, text: &str) -> Vec<u8> {
        let mut out = sse::format(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}}),
        );
        out.extend(sse::format(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": text}}),
        ));
        out.extend(sse::format(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        out
    }
}

fn index_of(data: &Value) -> Option<usize> {
    data.get("index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
}

impl StreamFilter for Stream {
    fn on_event(&mut self, event: Event) -> Step {
        let Some(data) = event.json() else {
            return Step::Emit(event.raw);
        };
        let index = index_of(&data);
        match (data["type"].as_str(), index) {
            (Some("content_block_start"), Some(i))
                if data["content_block"]["type"] == "tool_use" =>
            {
                let block = &data["content_block"];
                self.held.insert(
                    i,
                    Held {
                        tool: block["name"].as_str().unwrap_or_default().to_owned(),
                        start_input: block.get("input").cloned().unwrap_or(Value::Null),
                        json: String::new(),
                        events: vec![event.raw],
                    },
                );
                Step::Emit(Bytes::new())
            }
            (Some("content_block_delta"), Some(i)) if self.held.contains_key(&i) => {
                if let Some(held) = self.held.get_mut(&i) {
                    if let Some(part) = data["delta"]["partial_json"].as_str() {
                        held.json.push_str(part);
                    }
                    held.events.push(event.raw);
                }
                Step::Emit(Bytes::new())
            }
            (Some("content_block_stop"), Some(i)) => match self.held.get_mut(&i) {
                Some(held) => {
                    held.events.push(event.raw);
                    let input = if held.json.trim().is_empty() {
                        Ok(held.start_input.clone())
                    } else {
                        serde_json::from_str(&held.json)
                            .map_err(|e| UnreadableInput::NotJson(std::sync::Arc::new(e)))
                    };
                    Step::Judge(vec![PendingCall {
                        key: i,
                        tool: held.tool.clone(),
                        input,
                    }])
                }
                None => Step::Emit(event.raw),
            },
            (Some("message_delta"), _) => {
                // A block still open here never ended: it is dropped, never let through.
                self.refused += std::mem::take(&mut self.held).len();
                if self.refused > 0 && self.kept == 0 && data["delta"]["stop_reason"] == "tool_use"
                {
                    let mut data = data;
                    data["delta"]["stop_reason"] = json!("end_turn");
                    Step::Emit(Bytes::from(sse::format(&event.name, &data)))
                } else {
                    Step::Emit(event.raw)
                }
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
                    self.kept += 1;
                    for raw in held.events {
                        out.extend_from_slice(&raw);
                    }
                }
                Verdict::Refuse(text) => {
                    self.refused += 1;
                    out.extend(Self::refusal_block(call.key, &text));
                }
            }
        }
        Bytes::from(out)
    }

    fn finish(&mut self) -> Bytes {
        // Blocks the stream never closed are not passed on unchecked.
        self.held.clear();
        Bytes::new()
    }
}
