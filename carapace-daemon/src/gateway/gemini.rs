//! Google's Gemini API (`models/MODEL:generateContent`, and `:streamGenerateContent` whose
//! server-sent events each carry a whole `GenerateContentResponse`): tool calls are
//! `functionCall` parts of a candidate's content, whole in one chunk, so a chunk holding one
//! is judged before it is passed on, and a refused call's part becomes a text part saying
//! why (the turn then has nothing for the client to run).
use hyper::body::Bytes;
use serde_json::{json, Value};

use super::refusal::{PendingCall, UnreadableInput, Verdict};
use super::sse::{self, Event};
use super::{Step, StreamFilter};

/// The error body Gemini clients read (`google.rpc.Status`).
#[must_use]
pub fn error_body(status: u16, kind: &str, message: &str) -> Value {
    let status_name = match status {
        400 | 413 => "INVALID_ARGUMENT",
        403 => "PERMISSION_DENIED",
        _ => "UNAVAILABLE",
    };
    json!({"error": {"code": status, "message": message, "status": status_name,
                     "details": [{"reason": kind}]}})
}

/// The conversation's past turns, for Layer 0.
#[must_use]
pub fn history(request: &Value) -> Option<&Value> {
    request.get("contents")
}

/// A call's place: candidate and part, in one key (no answer holds 2^32 parts).
fn key(candidate: usize, part: usize) -> usize {
    (candidate << 32) | (part & 0xffff_ffff)
}

fn parts_mut(message: &mut Value, candidate: usize) -> Option<&mut Vec<Value>> {
    message
        .get_mut("candidates")?
        .get_mut(candidate)?
        .get_mut("content")?
        .get_mut("parts")?
        .as_array_mut()
}

/// The function calls of every candidate of an answer (or of one streamed chunk).
#[must_use]
pub fn calls(message: &Value) -> Vec<PendingCall> {
    let mut out = Vec::new();
    let candidates = message["candidates"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for (c, candidate) in candidates.iter().enumerate() {
        let parts = candidate["content"]["parts"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        for (p, part) in parts.iter().enumerate() {
            let Some(call) = part.get("functionCall") else {
                continue;
            };
            out.push(PendingCall {
                key: key(c, p),
                tool: call["name"].as_str().unwrap_or_default().to_owned(),
                input: match call.get("args") {
                    None | Some(Value::Null) => Ok(json!({})),
                    Some(args @ Value::Object(_)) => Ok(args.clone()),
                    Some(other) => Err(UnreadableInput::ArgsNotObject(other.clone())),
                },
            });
        }
    }
    out
}

/// Replaces each refused call's part by a text part; true if anything changed.
pub fn rewrite(message: &mut Value, verdicts: &[(PendingCall, Verdict)]) -> bool {
    let mut changed = false;
    for (call, verdict) in verdicts {
        let Verdict::Refuse(text) = verdict else {
            continue;
        };
        let (candidate, part) = (call.key >> 32, call.key & 0xffff_ffff);
        if let Some(slot) = parts_mut(message, candidate).and_then(|p| p.get_mut(part)) {
            *slot = json!({"text": text});
            changed = true;
        }
    }
    changed
}

/// The streamed answer: a chunk with function calls is held while they are judged.
#[derive(Default)]
pub struct Stream {
    held: Option<(Event, Value)>,
}

impl StreamFilter for Stream {
    fn on_event(&mut self, event: Event) -> Step {
        let Some(data) = event.json() else {
            return Step::Emit(event.raw);
        };
        let found = calls(&data);
        if found.is_empty() {
            return Step::Emit(event.raw);
        }
        self.held = Some((event, data));
        Step::Judge(found)
    }

    fn settle(&mut self, verdicts: Vec<(PendingCall, Verdict)>) -> Bytes {
        let Some((event, mut data)) = self.held.take() else {
            return Bytes::new();
        };
        if rewrite(&mut data, &verdicts) {
            Bytes::from(sse::format(&event.name, &data))
        } else {
            event.raw
        }
    }

    fn finish(&mut self) -> Bytes {
        // Nothing is held past its own settle.
        self.held = None;
        Bytes::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(parts: &Value) -> Value {
        json!({"candidates": [{"content": {"role": "model", "parts": parts},
                               "finishReason": "STOP"}]})
    }

    #[test]
    fn refused_calls_become_text_and_allowed_ones_stay() {
        let mut message = answer(&json!([
            {"text": "Let me look."},
            {"functionCall": {"name": "run_shell_command", "args": {"command": "cat ~/.ssh/id_rsa"}}},
            {"functionCall": {"name": "read_file", "args": {"file_path": "README.md"}}},
        ]));
        let found = calls(&message);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].tool, "run_shell_command");
        let verdicts = vec![
            (found[0].clone(), Verdict::Refuse("[Carapace] no".into())),
            (found[1].clone(), Verdict::Pass),
        ];
        assert!(rewrite(&mut message, &verdicts));
        let parts = &message["candidates"][0]["content"]["parts"];
        assert_eq!(parts[1], json!({"text": "[Carapace] no"}));
        assert_eq!(parts[2]["functionCall"]["name"], "read_file");
    }

    #[test]
    fn calls_of_every_candidate_and_far_parts_are_rewritten_in_place() {
        let mut parts: Vec<Value> = (0..70_000)
            .map(|i| json!({"text": i.to_string()}))
            .collect();
        parts.push(
            json!({"functionCall": {"name": "run_shell_command", "args": {"command": "id"}}}),
        );
        let mut message = json!({"candidates": [
            {"content": {"parts": [{"text": "a"}]}},
            {"content": {"parts": parts}},
        ]});
        let found = calls(&message);
        assert_eq!(found.len(), 1);
        let verdicts = vec![(found[0].clone(), Verdict::Refuse("no".into()))];
        assert!(rewrite(&mut message, &verdicts));
        assert!(calls(&message).is_empty(), "the call survived its refusal");
        assert_eq!(
            message["candidates"][1]["content"]["parts"][70_000],
            json!({"text": "no"})
        );
        assert_eq!(
            message["candidates"][0]["content"]["parts"][0],
            json!({"text": "a"})
        );
    }

    #[test]
    fn unreadable_args_are_errors_not_empty_inputs() {
        let message =
            answer(&json!([{"functionCall": {"name": "x", "args": "cat ~/.ssh/id_rsa"}}]));
        assert!(calls(&message)[0].input.is_err());
    }

    #[test]
    fn streamed_chunks_without_calls_pass_byte_exact() {
        let mut filter = Stream::default();
        let raw = Bytes::from(format!("data: {}\n\n", answer(&json!([{"text": "hi"}]))));
        match filter.on_event(Event::parse(raw.clone())) {
            Step::Emit(bytes) => assert_eq!(bytes, raw),
            Step::Judge(_) => panic!("a chunk without calls was held"),
        }
        let call = answer(&json!([{"functionCall": {"name": "x", "args": {}}}]));
        let raw = Bytes::from(format!("data: {call}\n\n"));
        let Step::Judge(found) = filter.on_event(Event::parse(raw.clone())) else {
            panic!("a chunk with a call passed unjudged");
        };
        let refused = filter.settle(vec![(found[0].clone(), Verdict::Refuse("no".into()))]);
        let text = String::from_utf8_lossy(&refused);
        assert!(
            text.starts_with("data: ") && text.contains("\"text\":\"no\""),
            "{text}"
        );
        assert!(!text.contains("functionCall"), "{text}");
    }
}
