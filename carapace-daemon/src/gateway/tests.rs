//! The stream filters and message rewriting, without HTTP (the host tests drive the gateway
//! over real sockets).
use std::sync::Arc;

use serde_json::{json, Value};

use super::refusal::{Gate, RuleSource};
use super::sse::{self, Splitter};
use super::*;
use crate::rules::RuleSet;

fn gate() -> Gate {
    let rules: Arc<RuleSet> = Arc::new(RuleSet::builtin());
    Gate::new(Arc::new(rules) as Arc<dyn RuleSource>)
}

fn ctx() -> Context {
    Context {
        cwd: "/home/u/project".into(),
        home: "/home/u".into(),
        env: Vec::new(),
        follow_symlinks: false,
    }
}

/// Runs `filter` over `input` cut into `chunk`-byte pieces, as the gateway does.
async fn run(mut filter: Box<dyn StreamFilter>, input: &[u8], chunk: usize) -> Vec<u8> {
    let (gate, ctx) = (gate(), ctx());
    let mut splitter = Splitter::default();
    let mut out = Vec::new();
    let mut events = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        events.extend(splitter.push(piece).unwrap());
    }
    events.extend(splitter.finish());
    for event in events {
        match filter.on_event(event) {
            Step::Emit(b) => out.extend_from_slice(&b),
            Step::Judge(calls) => {
                let verdicts = judge(&gate, &ctx, calls).await;
                out.extend_from_slice(&filter.settle(verdicts));
            }
        }
    }
    out.extend_from_slice(&filter.finish());
    out
}

fn anthropic_stream(blocks: &[Value], stop_reason: &str) -> Vec<u8> {
    let mut out = sse::format(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "m", "content": [], "stop_reason": null}}),
    );
    for (i, block) in blocks.iter().enumerate() {
        let (start, deltas): (Value, Vec<Value>) = if block["type"] == "tool_use" {
            let input = block["input"].to_string();
            let (a, b) = input.split_at(input.len() / 2);
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                vec![
                    json!({"type": "input_json_delta", "partial_json": a}),
                    json!({"type": "input_json_delta", "partial_json": b}),
                ],
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                vec![json!({"type": "text_delta", "text": block["text"]})],
            )
        };
        out.extend(sse::format(
            "content_block_start",
            &json!({"type": "content_block_start", "index": i, "content_block": start}),
        ));
        for d in deltas {
            out.extend(sse::format(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": i, "delta": d}),
            ));
        }
        out.extend(sse::format(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": i}),
        ));
    }
    out.extend(sse::format(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 5}}),
    ));
    out.extend(sse::format("message_stop", &json!({"type": "message_stop"})));
    out
}

fn events(bytes: &[u8]) -> Vec<Value> {
    let mut s = Splitter::default();
    let mut all = s.push(bytes).unwrap();
    all.extend(s.finish());
    all.iter().map(|e| e.json().expect("JSON data")).collect()
}

#[tokio::test]
async fn allowed_tool_use_streams_through_byte_exact() {
    let input = anthropic_stream(
        &[
            json!({"type": "text", "text": "Listing."}),
            json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls -la"}}),
        ],
        "tool_use",
    );
    for chunk in [1, 7, 64, input.len()] {
        let out = run(Box::<anthropic::Stream>::default(), &input, chunk).await;
        assert_eq!(out, input, "chunk size {chunk}");
    }
}

#[tokio::test]
async fn blocked_tool_use_becomes_a_text_block_and_the_turn_ends() {
    let input = anthropic_stream(
        &[
            json!({"type": "text", "text": "Reading the key."}),
            json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat ~/.ssh/id_rsa"}}),
        ],
        "tool_use",
    );
    for chunk in [1, 13, input.len()] {
        let out = run(Box::<anthropic::Stream>::default(), &input, chunk).await;
        let ev = events(&out);
        let kinds: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(ev[4]["index"], 1);
        assert_eq!(ev[4]["content_block"]["type"], "text");
        let text = ev[5]["delta"]["text"].as_str().unwrap();
        assert!(text.contains("Bash call was not run"), "{text}");
        assert!(text.contains("[rule ssh-"), "{text}");
        assert_eq!(ev[7]["delta"]["stop_reason"], "end_turn");
        assert_eq!(ev[7]["usage"]["output_tokens"], 5);
        assert!(!String::from_utf8_lossy(&out).contains("tool_use"));
    }
}

#[tokio::test]
async fn one_allowed_call_keeps_the_tool_use_stop_reason() {
    let input = anthropic_stream(
        &[
            json!({"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/home/u/.ssh/id_ed25519"}}),
            json!({"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "README.md"}}),
        ],
        "tool_use",
    );
    let ev = events(&run(Box::<anthropic::Stream>::default(), &input, 5).await);
    assert_eq!(ev[1]["content_block"]["type"], "text");
    assert_eq!(ev[4]["content_block"]["name"], "Read");
    assert_eq!(ev.iter().rev().nth(1).unwrap()["delta"]["stop_reason"], "tool_use");
}

#[tokio::test]
async fn unclosed_or_unreadable_tool_blocks_never_pass() {
    let mut input = sse::format(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": "t", "name": "Bash", "input": {}}}),
    );
    input.extend(sse::format(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "{\"command\": \"ls"}}),
    ));
    let out = run(Box::<anthropic::Stream>::default(), &input, 3).await;
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    input.extend(sse::format(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    let ev = events(&run(Box::<anthropic::Stream>::default(), &input, 3).await);
    assert_eq!(ev[0]["content_block"]["type"], "text");
    assert!(ev[1]["delta"]["text"].as_str().unwrap().contains("could not be read"));
}

#[tokio::test]
async fn non_streamed_messages_are_rewritten_only_when_refused() {
    let gate = gate();
    let mut message = json!({"content": [
        {"type": "text", "text": "ok"},
        {"type": "tool_use", "id": "a", "name": "Read", "input": {"file_path": ".env"}},
    ], "stop_reason": "tool_use"});
    let calls = anthropic::message_calls(&message);
    assert_eq!(calls.len(), 1);
    let verdicts = judge(&gate, &ctx(), calls).await;
    assert!(anthropic::rewrite_message(&mut message, &verdicts));
    assert_eq!(message["content"][1]["type"], "text");
    assert_eq!(message["stop_reason"], "end_turn");

    let mut fine = json!({"content": [
        {"type": "tool_use", "id": "a", "name": "Read", "input": {"file_path": "src/main.rs"}},
    ], "stop_reason": "tool_use"});
    let verdicts = judge(&gate, &ctx(), anthropic::message_calls(&fine)).await;
    assert!(!anthropic::rewrite_message(&mut fine, &verdicts));
}

#[test]
fn upstream_urls_join_paths() {
    let u = Upstream::parse("http://127.0.0.1:9/prefix/").unwrap();
    assert_eq!(
        u.join("/v1/messages?beta=true").unwrap().to_string(),
        "http://127.0.0.1:9/prefix/v1/messages?beta=true"
    );
    assert!(Upstream::parse("ftp://x").is_err());
    assert!(Upstream::parse("not a url").is_err());
}
