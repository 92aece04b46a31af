//! The model-API gateway in front of a loopback server speaking the `OpenAI` Chat
//! Completions and Responses APIs, streamed and not.
use carapace_tests::http::{post, Answer};
use carapace_tests::openai::{OpenAiServer, Turn};
use serde_json::{json, Value};

use super::gateway::start_gateway;
use super::setup;

const API_KEY: &str = "sk-proj-test-0a1b2c3d4e5f-secret";
const CHAT: &str = "/v1/chat/completions";
const RESPONSES: &str = "/v1/responses";

fn allowed() -> Turn {
    Turn::new("Listing the project files for you now.").call(
        "call_ok",
        "shell",
        json!({"command": ["ls", "-la"]}),
    )
}

fn forbidden() -> Turn {
    Turn::new("Reading the key.")
        .call("call_ok", "shell", json!({"command": ["ls"]}))
        .call("call_bad", "shell", json!({"command": "cat ~/.ssh/id_rsa"}))
}

fn body(path: &str, stream: bool) -> String {
    if path == CHAT {
        json!({"model": "gpt-test", "stream": stream,
               "messages": [{"role": "user", "content": "hi"}]})
    } else {
        json!({"model": "gpt-test", "stream": stream, "input": "hi"})
    }
    .to_string()
}

fn ask(base: &str, path: &str, body: &str) -> Answer {
    post(
        base,
        path,
        &[("authorization", &format!("Bearer {API_KEY}"))],
        body,
    )
}

fn data_events(answer: &Answer) -> Vec<Value> {
    answer
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("bad event {d}: {e}")))
        .collect()
}

#[test]
fn openai_gateway_passes_allowed_answers_byte_identical() {
    let Some(dir) = setup("openai_gateway_passes_allowed_answers_byte_identical") else {
        return;
    };
    let upstream = OpenAiServer::start(allowed());
    let (_d, gateway) = start_gateway(dir.path(), &["--openai-upstream", &upstream.base_url()]);
    for path in [CHAT, RESPONSES] {
        for stream in [true, false] {
            let request = body(path, stream);
            let via = ask(&gateway, path, &request);
            let direct = ask(&upstream.base_url(), path, &request);
            assert_eq!(via.status, 200, "{path} stream={stream}: {}", via.text());
            assert_eq!(via.body, direct.body, "{path} stream={stream}");
            assert!(via.text().contains("call_ok"), "{path} stream={stream}");
        }
    }
    let got = upstream.requests();
    assert!(got.iter().all(|r| r
        .headers
        .iter()
        .any(|(k, v)| k == "authorization" && v == &format!("Bearer {API_KEY}"))));
}

#[test]
fn openai_gateway_refuses_blocked_calls_and_keeps_allowed_ones() {
    let Some(dir) = setup("openai_gateway_refuses_blocked_calls_and_keeps_allowed_ones") else {
        return;
    };
    let upstream = OpenAiServer::start(forbidden());
    let (d, gateway) = start_gateway(dir.path(), &["--openai-upstream", &upstream.base_url()]);

    // Chat, not streamed: the bad call is gone, the good one stays, the content says why.
    let chat = ask(&gateway, CHAT, &body(CHAT, false)).json();
    let message = &chat["choices"][0]["message"];
    let calls = message["tool_calls"].as_array().expect("tool_calls");
    assert_eq!(calls.len(), 1, "{chat}");
    assert_eq!(calls[0]["id"], "call_ok");
    let content = message["content"].as_str().unwrap_or_default();
    assert!(content.starts_with("Reading the key."), "{content}");
    assert!(content.contains("shell call was not run"), "{content}");
    assert_eq!(chat["choices"][0]["finish_reason"], "tool_calls");

    // Chat, streamed: reassemble the calls as a client does.
    let streamed = ask(&gateway, CHAT, &body(CHAT, true));
    assert!(
        streamed.text().ends_with("data: [DONE]\n\n"),
        "{}",
        streamed.text()
    );
    assert!(!streamed.text().contains("call_bad"), "{}", streamed.text());
    let mut names: Vec<(String, String)> = Vec::new();
    let mut text = String::new();
    for event in data_events(&streamed) {
        let delta = &event["choices"][0]["delta"];
        text.push_str(delta["content"].as_str().unwrap_or_default());
        for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
            let i = usize::try_from(fragment["index"].as_u64().expect("index")).expect("small");
            if names.len() <= i {
                names.resize(i + 1, (String::new(), String::new()));
            }
            names[i]
                .0
                .push_str(fragment["id"].as_str().unwrap_or_default());
            names[i].1.push_str(
                fragment["function"]["arguments"]
                    .as_str()
                    .unwrap_or_default(),
            );
        }
    }
    assert_eq!(names.len(), 1, "{}", streamed.text());
    assert_eq!(names[0].0, "call_ok");
    assert_eq!(
        serde_json::from_str::<Value>(&names[0].1).ok(),
        Some(json!({"command": ["ls"]}))
    );
    assert!(text.contains("shell call was not run"), "{text}");

    // Responses, not streamed: the bad item became a message.
    let response = ask(&gateway, RESPONSES, &body(RESPONSES, false)).json();
    let output = response["output"].as_array().expect("output");
    assert_eq!(output[1]["type"], "function_call");
    assert_eq!(output[2]["type"], "message", "{response}");
    let said = output[2]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(said.contains("[rule ssh-"), "{said}");

    // Responses, streamed: no event carries the bad call, and the final response agrees.
    let streamed = ask(&gateway, RESPONSES, &body(RESPONSES, true));
    assert!(!streamed.text().contains("call_bad"), "{}", streamed.text());
    let events = data_events(&streamed);
    let completed = events
        .iter()
        .find(|e| e["type"] == "response.completed")
        .expect("response.completed");
    assert_eq!(completed["response"]["output"][2]["type"], "message");
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .collect();
    assert_eq!(done.len(), 3);
    assert_eq!(done[2]["item"]["type"], "message");
    assert!(!d.log_text().contains(API_KEY));
}

#[test]
fn openai_gateway_refuses_conversations_holding_blocked_calls() {
    let Some(dir) = setup("openai_gateway_refuses_conversations_holding_blocked_calls") else {
        return;
    };
    let upstream = OpenAiServer::start(allowed());
    let (_d, gateway) = start_gateway(dir.path(), &["--openai-upstream", &upstream.base_url()]);
    let chat = json!({"model": "m", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "shell", "arguments": "{\"command\":\"cat ~/.ssh/id_rsa\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "..."}]});
    let responses = json!({"model": "m", "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "shell",
         "arguments": "{\"command\":\"cat ~/.ssh/id_rsa\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "..."}]});
    for (path, request) in [(CHAT, chat), (RESPONSES, responses)] {
        let answer = ask(&gateway, path, &request.to_string());
        assert_eq!(answer.status, 403, "{}", answer.text());
        let message = answer.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(message.starts_with("bad agent detected: "), "{message}");
    }
    assert!(upstream.requests().is_empty());
}
