//! The stream filters and message rewriting, without HTTP (the host tests drive the gateway
//! over real sockets).
use std::sync::Arc;

use serde_json::{json, Value};

use super::refusal::{Gate, RuleSource};
use super::sse::{self, Splitter};
use super::*;
use carapace_policy::engine::Context;
use carapace_policy::rules::RuleSet;

fn gate() -> Gate {
    let rules: Arc<RuleSet> = Arc::new(RuleSet::builtin(&crate::policy_host::options()));
    Gate::new(Arc::new(rules) as Arc<dyn RuleSource>)
}

fn ctx() -> refusal::Client {
    refusal::Client {
        peer: peer::Client::default(),
        ctx: Context {
            cwd: "/home/u/project".into(),
            home: "/home/u".into(),
            env: Vec::new(),
            host: None,
        },
        session: Ok(None),
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
    out.extend(sse::format(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    out
}

fn events(bytes: &[u8]) -> Vec<Value> {
    let mut s = Splitter::default();
    let mut all = s.push(bytes).unwrap();
    all.extend(s.finish());
    all.iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| e.json().expect("JSON data"))
        .collect()
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
    assert_eq!(
        ev.iter().rev().nth(1).unwrap()["delta"]["stop_reason"],
        "tool_use"
    );
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
    assert!(ev[1]["delta"]["text"]
        .as_str()
        .unwrap()
        .contains("could not be read"));
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

fn chat_chunk(delta: &Value, finish: &Value) -> Vec<u8> {
    sse::format(
        "",
        &json!({"id": "c", "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
    )
}

fn chat_stream(calls: &[(&str, &str)]) -> Vec<u8> {
    let mut out = chat_chunk(
        &json!({"role": "assistant", "content": "Working."}),
        &Value::Null,
    );
    for (i, (id, args)) in calls.iter().enumerate() {
        out.extend(chat_chunk(
            &json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                                    "function": {"name": "shell", "arguments": ""}}]}),
            &Value::Null,
        ));
        let (a, b) = args.split_at(args.len() / 2);
        for piece in [a, b] {
            out.extend(chat_chunk(
                &json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                &Value::Null,
            ));
        }
    }
    out.extend(chat_chunk(&json!({}), &json!("tool_calls")));
    out.extend(b"data: [DONE]\n\n");
    out
}

#[tokio::test]
async fn chat_streams_pass_byte_exact_or_lose_only_the_refused_call() {
    let fine = chat_stream(&[("a", r#"{"command":"ls"}"#)]);
    for chunk in [1, 9, fine.len()] {
        assert_eq!(
            run(Box::<openai::ChatStream>::default(), &fine, chunk).await,
            fine
        );
    }
    let mixed = chat_stream(&[
        ("a", r#"{"command":"ls"}"#),
        ("b", r#"{"command":"cat ~/.ssh/id_rsa"}"#),
    ]);
    let out = run(Box::<openai::ChatStream>::default(), &mixed, 11).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert!(!text.contains("\"b\""), "{text}");
    let ev: Vec<Value> = events(&out);
    let finish: Vec<&Value> = ev
        .iter()
        .filter(|e| e["choices"][0]["finish_reason"].is_string())
        .collect();
    assert_eq!(finish.len(), 1);
    assert_eq!(finish[0]["choices"][0]["finish_reason"], "tool_calls");
    let only_bad = chat_stream(&[("b", r#"{"command":"cat ~/.ssh/id_rsa"}"#)]);
    let ev = events(&run(Box::<openai::ChatStream>::default(), &only_bad, 4).await);
    let last = ev
        .iter()
        .rev()
        .find(|e| e["choices"][0]["finish_reason"].is_string());
    assert_eq!(
        last.map(|e| &e["choices"][0]["finish_reason"]),
        Some(&json!("stop"))
    );
}

/// Drives a filter synchronously; every call is refused (the worst case for rewriting).
fn run_refusing(mut filter: Box<dyn StreamFilter>, input: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut splitter = Splitter::default();
    let mut out = Vec::new();
    let mut events = Vec::new();
    let mut at = 0;
    for &cut in cuts {
        let cut = cut.clamp(at, input.len());
        events.extend(splitter.push(&input[at..cut]).unwrap_or_default());
        at = cut;
    }
    events.extend(splitter.push(&input[at..]).unwrap_or_default());
    events.extend(splitter.finish());
    for event in events {
        match filter.on_event(event) {
            Step::Emit(b) => out.extend_from_slice(&b),
            Step::Judge(calls) => {
                let verdicts = calls
                    .into_iter()
                    .map(|c| (c, refusal::Verdict::Refuse("no".into())))
                    .collect();
                out.extend_from_slice(&filter.settle(verdicts));
            }
        }
    }
    out.extend_from_slice(&filter.finish());
    out
}

fn event_soup() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let data = prop_oneof![
        Just(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "name": "Bash", "input": {}}})
        ),
        Just(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"command\":"}})
        ),
        Just(json!({"type": "content_block_stop", "index": 0})),
        Just(json!({"type": "content_block_stop", "index": 7})),
        Just(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}})),
        Just(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "shell", "arguments": "{"}}]}, "finish_reason": null}]})
        ),
        Just(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
        Just(json!({"choices": "nonsense"})),
        Just(
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "name": "shell", "arguments": ""}})
        ),
        Just(
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "function_call", "name": "shell", "arguments": "{}"}})
        ),
        Just(json!({"type": "response.output_item.done", "output_index": 0, "item": 3})),
        Just(json!({"type": "response.completed", "response": {"output": [1, 2]}})),
        Just(json!({"index": -1, "output_index": 18_446_744_073_709_551_615_u64})),
        Just(
            json!({"candidates": [{"content": {"parts": [{"text": "hi"}, {"functionCall": {"name": "run_shell_command", "args": {"command": "id"}}}]}}]})
        ),
        Just(
            json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "x", "args": 7}}]}}]})
        ),
        Just(json!({"candidates": [{"content": {"parts": "nonsense"}}, 3]})),
        any::<String>().prop_map(Value::String),
    ];
    let event = prop_oneof![
        data.prop_map(|d| sse::format("e", &d)),
        proptest::collection::vec(any::<u8>(), 0..12),
    ];
    proptest::collection::vec(event, 0..24).prop_map(|v| v.concat())
}

proptest::proptest! {
    /// Whatever the upstream sends, however it is cut: no filter panics, and with every
    /// call refused, no tool call name the soup holds ever leaves in a call shape.
    #[test]
    fn filters_never_panic_on_any_stream(
        input in event_soup(),
        cuts in proptest::collection::vec(0usize..2000, 0..6),
    ) {
        let mut cuts = cuts;
        cuts.sort_unstable();
        let filters: [fn() -> Box<dyn StreamFilter>; 3] = [
            || Box::<anthropic::Stream>::default(),
            || Box::<openai::ChatStream>::default(),
            || Box::<openai::ResponsesStream>::default(),
        ];
        for make in filters {
            let _ = run_refusing(make(), &input, &cuts);
        }
        let out = run_refusing(Box::<gemini::Stream>::default(), &input, &cuts);
        let mut s = Splitter::default();
        let mut all = s.push(&out).unwrap_or_default();
        all.extend(s.finish());
        for e in all.iter().filter_map(sse::Event::json) {
            proptest::prop_assert!(
                gemini::calls(&e).is_empty(),
                "a functionCall left the Gemini filter: {}", e
            );
        }
        let out = run_refusing(Box::<anthropic::Stream>::default(), &input, &cuts);
        let mut s = Splitter::default();
        let mut all = s.push(&out).unwrap_or_default();
        all.extend(s.finish());
        for e in all.iter().filter_map(sse::Event::json) {
            proptest::prop_assert!(
                !(e["type"] == "content_block_start" && e["content_block"]["type"] == "tool_use"),
                "a tool_use block left the filter: {}", e
            );
        }
    }
}

/// Text reaches the agent while the upstream is still generating: the filter holds tool
/// calls only, never what comes before them.
#[tokio::test]
async fn text_streams_through_before_the_upstream_finishes() {
    use std::time::Duration;

    use http_body_util::{BodyExt as _, StreamBody};
    use hyper::body::Frame;

    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(8);
    let upstream = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut body = filter_stream(upstream, Box::<anthropic::Stream>::default(), gate(), ctx());
    let first = sse::format(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "thinking…"}}),
    );
    tx.send(Ok(Frame::data(Bytes::from(first.clone()))))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .expect("the text event waited for the rest of the stream")
        .expect("a frame")
        .expect("no error");
    assert_eq!(got.into_data().ok(), Some(Bytes::from(first)));
    // A tool call, by contrast, is held until it is complete.
    let start = sse::format(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "t", "name": "Read",
                                  "input": {"file_path": "README.md"}}}),
    );
    tx.send(Ok(Frame::data(Bytes::from(start.clone()))))
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(200), body.frame())
            .await
            .is_err(),
        "an incomplete tool call was let through"
    );
    let stop = sse::format(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 1}),
    );
    tx.send(Ok(Frame::data(Bytes::from(stop.clone()))))
        .await
        .unwrap();
    drop(tx);
    let rest = body.collect().await.expect("the rest").to_bytes();
    assert_eq!(rest, Bytes::from([start, stop].concat()));
}

/// Without a daemon to ask the user, approve-mode calls are withheld with a message that
/// says approval is needed; warn-mode calls pass.
#[tokio::test]
async fn approve_mode_calls_are_withheld_and_warn_mode_calls_pass() {
    let rules = RuleSet::parse_with(
        "rules.yaml",
        "version: 1\nbuiltin: none\nrules:\n  - approve: \"/srv/prod/**\"\n  - warn: \"/srv/staging/**\"\n",
        &crate::policy_host::options(),
    )
    .expect("valid rules");
    let gate = Gate::new(Arc::new(Arc::new(rules)) as Arc<dyn RuleSource>);
    let call = |path: &str| refusal::PendingCall {
        key: 0,
        tool: "Read".into(),
        input: Ok(json!({"file_path": path})),
    };
    match gate.tool_call(&ctx(), &call("/srv/prod/db.conf")).await {
        refusal::Verdict::Refuse(text) => {
            assert!(text.contains("needs your user's approval"), "{text}");
            assert!(text.contains("without a daemon"), "{text}");
        }
        refusal::Verdict::Pass => panic!("an approve-mode call passed"),
    }
    assert_eq!(
        gate.tool_call(&ctx(), &call("/srv/staging/app.conf")).await,
        refusal::Verdict::Pass
    );
}

fn conversation(commands: &[&str]) -> Value {
    let blocks: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| json!({"type": "tool_use", "id": format!("t{i}"), "name": "Bash", "input": {"command": c}}))
        .collect();
    json!([{"role": "user", "content": "go"}, {"role": "assistant", "content": blocks}])
}

/// Layer 0 over `messages` as an Anthropic request's body carries them.
async fn history_of(gate: &Gate, client: &GatewayClient, messages: &Value) -> Option<String> {
    let body = json!({"model": "m", "messages": messages}).to_string();
    let conversation = Api::AnthropicMessages
        .read_history(body.as_bytes())
        .expect("JSON")
        .expect("a conversation");
    gate.history(client, &conversation).await
}

#[tokio::test]
async fn history_judges_new_calls_and_never_remembers_a_blocked_one() {
    let gate = gate();
    let client = ctx();
    // Turn by turn, the conversation grows; the calls found clean are not judged again, and
    // a blocked call, new or old, refuses every request that carries it.
    assert_eq!(
        history_of(&gate, &client, &conversation(&["ls", "git status"])).await,
        None
    );
    let bad = conversation(&["ls", "git status", "cat ~/.ssh/id_rsa"]);
    for _ in 0..2 {
        let message = history_of(&gate, &client, &bad).await.expect("refused");
        assert!(message.contains("#3 Bash"), "{message}");
    }
    // Many new calls at once (judged off the async workers) count the same.
    let mut long: Vec<String> = (0..40).map(|i| format!("echo {i}")).collect();
    long.push("cat ~/.ssh/id_ed25519".into());
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    let message = history_of(&gate, &client, &conversation(&long))
        .await
        .expect("refused");
    assert!(message.contains("#41 Bash"), "{message}");
    assert_eq!(
        history_of(&gate, &client, &conversation(&long[..40])).await,
        None
    );
}

/// A conversation of one message per call, as agents send them turn by turn.
fn turns(commands: &[&str]) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "go"})];
    for (i, c) in commands.iter().enumerate() {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("t{i}"), "name": "Bash", "input": {"command": c}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": "ok"}]}));
    }
    Value::Array(messages)
}

/// The messages found clean before are not read again, yet a blocked call in a new message
/// is found and named by its number in the whole conversation; and a message found clean
/// whose bytes change (a client moving its cache marker) is read again, its calls skipped by
/// their own keys.
#[tokio::test]
async fn messages_found_clean_are_skipped_and_calls_keep_their_numbers() {
    let gate = gate();
    let client = ctx();
    let clean = turns(&["ls", "git status", "cargo test"]);
    assert_eq!(history_of(&gate, &client, &clean).await, None);
    let bad = turns(&["ls", "git status", "cargo test", "cat ~/.ssh/id_rsa"]);
    let message = history_of(&gate, &client, &bad).await.expect("refused");
    assert!(message.contains("#4 Bash"), "{message}");
    // What is remembered: read at the level of the gate's own parts.
    let rules: Arc<RuleSet> = Arc::new(RuleSet::builtin(&crate::policy_host::options()));
    let seen = seen::SeenClean::default();
    let digest = seen::ClientDigest::of(&client.ctx);
    let read = |v: &Value| {
        let body = json!({"messages": v}).to_string();
        let conversation = Api::AnthropicMessages
            .read_history(body.as_bytes())
            .expect("JSON")
            .expect("a conversation");
        let reading = history::Reading::of(&conversation, &digest, &seen, &rules);
        let keys = digest.calls(&reading.parsed);
        let known: Vec<bool> = seen
            .known(&rules, &keys)
            .iter()
            .map(Option::is_some)
            .collect();
        let learned: Vec<_> = reading
            .clean_keys(&keys, &known, &std::collections::HashSet::new())
            .collect();
        seen.learn(&rules, learned);
        (
            reading.parsed.calls.len(),
            reading.remembered,
            reading.total,
            known,
        )
    };
    assert_eq!(read(&clean), (3, 0, 3, vec![false; 3]));
    assert_eq!(read(&clean), (0, 3, 3, vec![]));
    let mut marked = clean.clone();
    marked[3]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
    assert_eq!(read(&marked), (1, 2, 3, vec![true]));
}

#[test]
fn gemini_content_methods_are_checked_under_any_model_resource() {
    for path in [
        "/v1beta/models/gemini-2.5-pro:generateContent",
        "/v1/models/gemini-2.5-pro:streamGenerateContent",
        "/v1beta/tunedModels/my-model:generateContent",
        "/v1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent",
    ] {
        assert_eq!(
            Api::of(&Method::POST, path),
            Some(Api::GeminiContent),
            "{path}"
        );
    }
    for path in [
        "/v1beta/models/m:countTokens",
        "/v1beta/models/:generateContent",
        "/v1beta/models",
    ] {
        assert_eq!(Api::of(&Method::POST, path), None, "{path}");
    }
}

/// The narrow reading of a request's conversation gives what reading the whole request and
/// taking the field gave, for every API, whatever else the body holds; a body that is not
/// JSON is still refused.
#[test]
fn the_conversation_is_read_as_the_whole_request_would_give_it() {
    let apis = [
        Api::AnthropicMessages,
        Api::ChatCompletions,
        Api::Responses,
        Api::GeminiContent,
    ];
    let bodies = [
        r#"{"model": "m", "system": [{"type": "text", "text": "be brief"}], "tools": [{"name": "Bash", "input_schema": {"type": "object"}}], "messages": [{"role": "user", "content": "hi"}], "input": [{"type": "function_call", "name": "shell", "arguments": "{}"}], "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}"#,
        r#"{"input": "a plain string", "messages": null}"#,
        // The field twice: a provider's parser keeps the last one, and so is it judged.
        r#"{"messages": [1], "messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "Bash", "input": {"command": "cat ~/.ssh/id_rsa"}}]}], "contents": [], "contents": [2], "input": [], "input": [3]}"#,
        r#"[{"messages": []}]"#,
        "{}",
        "7",
    ];
    for api in apis {
        for body in bodies {
            let whole: Value = serde_json::from_str(body).expect("JSON");
            let want = api.history(&whole).filter(|h| !h.is_null()).cloned();
            let got = api
                .read_history(body.as_bytes())
                .expect("read")
                .map(|c| c.value());
            assert_eq!(got, want, "{api:?} {body}");
        }
        for bad in [
            "",
            "{",
            r#"{"messages": [}"#,
            r#"{"tools": [1,], "messages": []}"#,
        ] {
            assert!(api.read_history(bad.as_bytes()).is_err(), "{api:?} {bad}");
        }
    }
}

/// Messages in each API's shapes, holding calls among other content.
fn message_soup() -> impl proptest::strategy::Strategy<Value = Vec<Value>> {
    use proptest::prelude::*;
    let command = prop::sample::select(vec!["ls", "git status", "cat ~/.ssh/id_rsa", "rm -rf ~"]);
    let message = (0usize..5, command, 0usize..3).prop_map(|(shape, c, n)| match shape {
        0 => json!({"role": "assistant", "content": (0..n).map(|i| json!(
            {"type": "tool_use", "id": format!("t{i}"), "name": "Bash", "input": {"command": c}}
        )).collect::<Vec<_>>()}),
        1 => json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "Bash", "arguments": json!({"command": c}).to_string()}}]}),
        2 => json!({"type": "function_call", "name": "shell", "arguments":
            json!({"command": ["bash", "-lc", c]}).to_string()}),
        3 => json!({"role": "model", "parts": [{"functionCall": {"name": "run_shell_command",
            "args": {"command": c}}}]}),
        _ => json!({"role": "user", "content": c}),
    });
    proptest::collection::vec(message, 0..12)
}

proptest::proptest! {
    /// Read message by message, cold or with every message remembered but one, a
    /// conversation yields the calls the whole reading finds: a cache never hides a call.
    #[test]
    fn reading_by_message_finds_every_call_of_the_whole(messages in message_soup()) {
        let whole = carapace_policy::engine::transcript::from_value(&Value::Array(messages.clone()));
        let body = json!({"messages": messages}).to_string();
        let conversation = Api::AnthropicMessages
            .read_history(body.as_bytes())
            .expect("JSON")
            .expect("a conversation");
        let rules: Arc<RuleSet> = Arc::new(RuleSet::default());
        let seen = seen::SeenClean::default();
        let digest = seen::ClientDigest::of(&ctx().ctx);
        let cold = history::Reading::of(&conversation, &digest, &seen, &rules);
        let distinct = |calls: &[carapace_policy::engine::transcript::PastCall]| {
            calls.iter().map(|c| format!("{:?}", c.call)).collect::<std::collections::BTreeSet<_>>()
        };
        proptest::prop_assert_eq!(distinct(&cold.parsed.calls), distinct(&whole.calls));
        proptest::prop_assert_eq!(cold.parsed.unreadable.is_empty(), whole.unreadable.is_empty());
        // Remember every message but the last one holding calls (and any message of the
        // same bytes, which has its key): what is read then is those messages' calls, and
        // the count of the rest is kept.
        let last = cold.owners.last().copied().flatten().map(|m| cold.messages[m].0);
        let keep: Vec<_> = cold.messages.iter()
            .filter(|(k, _, _)| Some(*k) != last)
            .map(|(k, n, _)| (*k, *n))
            .collect();
        seen.learn(&rules, keep);
        let warm = history::Reading::of(&conversation, &digest, &seen, &rules);
        proptest::prop_assert_eq!(warm.total, cold.total);
        let in_last = cold.owners.iter()
            .filter(|o| o.is_some_and(|m| Some(cold.messages[m].0) == last))
            .count();
        proptest::prop_assert_eq!(warm.parsed.calls.len(), in_last);
    }
}
