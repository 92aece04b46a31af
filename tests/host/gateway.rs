//! The model-API gateway (`carapaced --gateway`), driven over real HTTP by a real client,
//! forwarding to a loopback server that speaks the Anthropic Messages API.
use std::path::Path;
use std::time::{Duration, Instant};

use carapace_tests::anthropic::{Block, MessagesServer};
use carapace_tests::http::{post, Answer};
use carapace_tests::{cli, cli_command, text, Daemon};
use serde_json::{json, Value};

use super::{setup, CARAPACE, CARAPACED};

/// A key that must reach the upstream and nothing else.
const API_KEY: &str = "sk-ant-test-5e3f1a9b0c7d4e2f8a6b-secret";

fn gateway_daemon(dir: &Path, upstream: &MessagesServer) -> (Daemon, String) {
    start_gateway(dir, &["--anthropic-upstream", &upstream.base_url()])
}

/// A daemon with its gateway on a free loopback port; returns it and the gateway's URL.
pub(super) fn start_gateway(dir: &Path, upstreams: &[&str]) -> (Daemon, String) {
    let mut args = vec!["--gateway", "127.0.0.1:0"];
    args.extend_from_slice(upstreams);
    let d = Daemon::start(Path::new(CARAPACED), dir, &args);
    let url = d.gateway_url();
    (d, url)
}

fn request(stream: bool, messages: &Value) -> String {
    json!({"model": "claude-test", "max_tokens": 100, "stream": stream, "messages": messages})
        .to_string()
}

fn hello() -> Value {
    json!([{"role": "user", "content": "hello"}])
}

fn messages(base: &str, body: &str) -> Answer {
    post(
        base,
        "/v1/messages?beta=true",
        &[("x-api-key", API_KEY), ("anthropic-version", "2023-06-01")],
        body,
    )
}

/// The SSE events of a streamed answer, as JSON.
fn events(answer: &Answer) -> Vec<Value> {
    answer
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("bad event data {d}: {e}")))
        .collect()
}

fn allowed_turn() -> Vec<Block> {
    vec![
        Block::text("Let me list the files, then read the readme of this project."),
        Block::tool_use(
            "toolu_ok",
            "Bash",
            json!({"command": "ls -la && head README.md"}),
        ),
    ]
}

fn forbidden_turn() -> Vec<Block> {
    vec![
        Block::text("I will read the SSH key."),
        Block::tool_use("toolu_bad", "Bash", json!({"command": "cat ~/.ssh/id_rsa"})),
    ]
}

#[test]
fn gateway_passes_allowed_answers_byte_identical() {
    let Some(dir) = setup("gateway_passes_allowed_answers_byte_identical") else {
        return;
    };
    // Two upstreams with the same script: one behind the gateway, one asked directly. Each
    // numbers its messages from 1, so the same request gets the same bytes from both.
    for stream in [true, false] {
        let behind = MessagesServer::scripted(vec![allowed_turn()]);
        let direct = MessagesServer::scripted(vec![allowed_turn()]);
        let sub = dir.path().join(format!("stream-{stream}"));
        let (_d, gateway) = gateway_daemon(&sub, &behind);
        let body = request(stream, &hello());
        let via = messages(&gateway, &body);
        let straight = messages(&direct.base_url(), &body);
        assert_eq!(via.status, 200, "{}", via.text());
        assert_eq!(via.body, straight.body, "stream={stream}: {}", via.text());
        assert!(via.text().contains("toolu_ok"));
        assert_eq!(
            via.header("content-type"),
            straight.header("content-type"),
            "stream={stream}"
        );
        // The request reached the upstream unchanged, credentials included.
        let got = behind.requests();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].body, body);
        assert_eq!(got[0].path, "/v1/messages?beta=true");
        let header = |name: &str| {
            got[0]
                .headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(header("x-api-key").as_deref(), Some(API_KEY));
        assert_eq!(header("anthropic-version").as_deref(), Some("2023-06-01"));
    }
}

#[test]
fn gateway_replaces_blocked_tool_calls_streamed_and_not() {
    let Some(dir) = setup("gateway_replaces_blocked_tool_calls_streamed_and_not") else {
        return;
    };
    let upstream = MessagesServer::scripted(vec![forbidden_turn()]);
    let (d, gateway) = gateway_daemon(dir.path(), &upstream);

    let plain = messages(&gateway, &request(false, &hello()));
    assert_eq!(plain.status, 200, "{}", plain.text());
    let message = plain.json();
    assert_eq!(message["stop_reason"], "end_turn", "{message}");
    let content = message["content"].as_array().expect("content");
    assert!(content.iter().all(|b| b["type"] == "text"), "{message}");
    let refusal = content[1]["text"].as_str().unwrap_or_default();
    assert!(refusal.contains("Bash call was not run"), "{refusal}");
    assert!(refusal.contains("[rule ssh-"), "{refusal}");

    let streamed = messages(&gateway, &request(true, &hello()));
    assert_eq!(streamed.status, 200, "{}", streamed.text());
    assert!(
        !streamed.text().contains("toolu_bad"),
        "{}",
        streamed.text()
    );
    let ev = events(&streamed);
    let kinds: Vec<&str> = ev.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"message_start"));
    assert_eq!(kinds.last(), Some(&"message_stop"));
    let starts: Vec<&Value> = ev
        .iter()
        .filter(|e| e["type"] == "content_block_start")
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[1]["index"], 1);
    assert_eq!(starts[1]["content_block"]["type"], "text");
    let text: String = ev
        .iter()
        .filter(|e| e["index"] == 1 && e["delta"]["type"] == "text_delta")
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert!(text.contains("Bash call was not run"), "{text}");
    let stop = ev
        .iter()
        .find(|e| e["type"] == "message_delta")
        .expect("message_delta");
    assert_eq!(stop["delta"]["stop_reason"], "end_turn");
    let log = d.log_text();
    assert!(
        log.contains("decision=\"block\"") || log.contains("decision=block"),
        "{log}"
    );
}

#[test]
fn gateway_refuses_conversations_holding_blocked_calls() {
    let Some(dir) = setup("gateway_refuses_conversations_holding_blocked_calls") else {
        return;
    };
    let upstream = MessagesServer::scripted(vec![vec![Block::text("fine")]]);
    let (d, gateway) = gateway_daemon(dir.path(), &upstream);
    let history = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat ~/.ssh/id_rsa"}}
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "..."}]},
    ]);
    for stream in [true, false] {
        let answer = messages(&gateway, &request(stream, &history));
        assert_eq!(answer.status, 403, "{}", answer.text());
        let body = answer.json();
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "permission_error");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("bad agent detected: "), "{message}");
    }
    assert!(
        upstream.requests().is_empty(),
        "a refused conversation reached the upstream"
    );
    // A clean history goes through.
    let ok = messages(&gateway, &request(false, &hello()));
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(upstream.requests().len(), 1);
    // Each refusal is in the audit ledger, with the rule that found it.
    let refusals: Vec<Value> = audit_tail(&d)
        .into_iter()
        .filter(|e| e["kind"] == "scan-history")
        .collect();
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    for r in &refusals {
        assert_eq!(r["decision"], "block", "{r}");
        assert!(r["rules"].to_string().contains("ssh-"), "{r}");
    }
}

#[test]
fn gateway_judges_only_new_past_calls_and_counts_its_decisions() {
    let Some(dir) = setup("gateway_judges_only_new_past_calls_and_counts_its_decisions") else {
        return;
    };
    // Turns are chosen by the number of assistant messages a request carries: the two
    // conversations below (2 and 3 of them) get an allowed call, the fresh one a forbidden one.
    let upstream = MessagesServer::scripted(vec![
        forbidden_turn(),
        allowed_turn(),
        allowed_turn(),
        allowed_turn(),
    ]);
    let (d, gateway) = start_gateway(
        dir.path(),
        &[
            "--anthropic-upstream",
            &upstream.base_url(),
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let call = |id: &str, command: &str| {
        json!([
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "ok"}]},
        ])
    };
    let mut history = vec![json!({"role": "user", "content": "tidy up"})];
    for (id, command) in [("t1", "ls"), ("t2", "git status")] {
        history.extend(call(id, command).as_array().cloned().unwrap_or_default());
    }
    let first = messages(&gateway, &request(false, &Value::Array(history.clone())));
    assert_eq!(first.status, 200, "{}", first.text());
    // The next turn carries the same two calls and one more: only that one is judged.
    history.extend(
        call("t3", "cargo test")
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    let second = messages(&gateway, &request(false, &Value::Array(history)));
    assert_eq!(second.status, 200, "{}", second.text());
    let third = messages(&gateway, &request(true, &hello()));
    assert_eq!(third.status, 200, "{}", third.text());
    let metrics = super::audit::http_get(&super::audit::metrics_addr(&d), "/metrics");
    for want in [
        "carapace_gateway_history_calls_total{how=\"judged\"} 3",
        "carapace_gateway_history_calls_total{how=\"remembered\"} 2",
        "carapace_decisions_total{layer=\"gateway-history\",mode=\"allow\"} 3",
        "carapace_decisions_total{layer=\"gateway\",mode=\"allow\"} 2",
        "carapace_decisions_total{layer=\"gateway\",mode=\"block\"} 1",
        "carapace_rule_matches_total{layer=\"gateway\",mode=\"block\",rule=\"ssh-private-keys\"} 1",
        // What the gateway did with each request (a streamed answer is counted as checked
        // whatever its calls' decisions, which the lines above count).
        "carapace_gateway_requests_total{decision=\"checked\"} 2",
        "carapace_gateway_requests_total{decision=\"checked-stream\"} 1",
        "carapace_gateway_requests_total{decision=\"bad-agent\"} 0",
    ] {
        assert!(metrics.contains(want), "no {want} in\n{metrics}");
    }
}

#[test]
fn gateway_never_writes_the_api_key_to_its_log_or_data_dir() {
    let Some(dir) = setup("gateway_never_writes_the_api_key_to_its_log_or_data_dir") else {
        return;
    };
    let upstream = MessagesServer::scripted(vec![forbidden_turn(), allowed_turn()]);
    let (mut d, gateway) = gateway_daemon(dir.path(), &upstream);
    let _ = messages(&gateway, &request(true, &hello()));
    let _ = messages(&gateway, &request(false, &hello()));
    let _ = post(&gateway, "/v1/models", &[("x-api-key", API_KEY)], "");
    d.stop();
    assert!(upstream.requests().iter().all(|r| r
        .headers
        .iter()
        .any(|(k, v)| k == "x-api-key" && v == API_KEY)));
    let log = d.log_text();
    assert!(
        log.contains("gateway"),
        "the gateway logged nothing:\n{log}"
    );
    assert!(
        !log.contains(API_KEY),
        "the key is in the daemon's log:\n{log}"
    );
    assert!(
        !log.contains("cat ~/.ssh/id_rsa"),
        "a request body is in the log:\n{log}"
    );
    let mut stack = vec![d.data_dir.clone()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                stack.push(entry.path());
            }
        } else if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(API_KEY),
                "the key is in {}",
                path.display()
            );
        }
    }
}

#[test]
fn run_points_the_agent_at_the_gateway_and_status_shows_it() {
    let Some(dir) = setup("run_points_the_agent_at_the_gateway_and_status_shows_it") else {
        return;
    };
    let upstream = MessagesServer::scripted(vec![vec![Block::text("fine")]]);
    let (d, gateway) = gateway_daemon(dir.path(), &upstream);
    let out = super::carapace(
        &d,
        &[
            "run",
            "--",
            "sh",
            "-c",
            "echo \"$ANTHROPIC_BASE_URL $OPENAI_BASE_URL\"",
        ],
        &[],
    );
    let stdout = carapace_tests::text(&out.stdout);
    assert_eq!(
        stdout.trim(),
        format!("{gateway} {gateway}/v1"),
        "{}",
        carapace_tests::text(&out.stderr)
    );
    let status = carapace_tests::text(&super::carapace(&d, &["status"], &[]).stdout);
    assert!(
        status.contains(&format!("model-API gateway: {gateway}")),
        "{status}"
    );
}

/// Rules with one approve-mode path, for the approval tests.
fn approve_rules(dir: &Path) -> String {
    let rules = dir.join("approve.yaml");
    std::fs::create_dir_all(dir).expect("test dir");
    std::fs::write(
        &rules,
        "version: 1\nbuiltin: none\nrules:\n  - approve: \"/srv/prod/**\"\n",
    )
    .expect("write rules");
    rules.to_str().expect("utf-8").to_owned()
}

fn prod_read_turn() -> Vec<Block> {
    vec![
        Block::text("Let me read the production configuration."),
        Block::tool_use(
            "toolu_prod",
            "Read",
            json!({"file_path": "/srv/prod/db.conf"}),
        ),
    ]
}

/// The user answers the first pending approval request from another terminal: `carapace
/// approve ID` (or `deny`), once the request shows in `carapace approvals --json`.
fn answer_when_pending(
    socket: &Path,
    approve_it: bool,
) -> std::thread::JoinHandle<std::process::Output> {
    let socket = socket.to_owned();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = cli(Path::new(CARAPACE), &socket, ["approvals", "--json"], &[]);
            if let Some(id) = text(&out.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find_map(|a| a["id"].as_str().map(str::to_owned))
            {
                let verb = if approve_it { "approve" } else { "deny" };
                return cli(Path::new(CARAPACE), &socket, [verb, id.as_str()], &[]);
            }
            assert!(
                Instant::now() < deadline,
                "no approval request appeared: {}",
                text(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

#[test]
fn gateway_waits_for_the_users_approval() {
    let Some(dir) = setup("gateway_waits_for_the_users_approval") else {
        return;
    };
    let upstream = MessagesServer::scripted(vec![prod_read_turn()]);
    let rules = approve_rules(dir.path());
    let (d, gateway) = start_gateway(
        dir.path(),
        &[
            "--anthropic-upstream",
            &upstream.base_url(),
            "--rules",
            &rules,
        ],
    );
    for stream in [false, true] {
        // Approved: the call reaches the agent as the model sent it.
        let user = answer_when_pending(&d.socket, true);
        let answer = messages(&gateway, &request(stream, &hello()));
        let out = user.join().expect("the user's thread");
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert!(
            answer.text().contains("toolu_prod") && answer.text().contains("/srv/prod/db.conf"),
            "stream={stream}: {}",
            answer.text()
        );
        assert!(!answer.text().contains("[Carapace]"), "{}", answer.text());

        // Denied: the call becomes a text saying so.
        let user = answer_when_pending(&d.socket, false);
        let answer = messages(&gateway, &request(stream, &hello()));
        let out = user.join().expect("the user's thread");
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(answer.status, 200, "{}", answer.text());
        let body = answer.text();
        assert!(!body.contains("toolu_prod"), "stream={stream}: {body}");
        assert!(body.contains("Read call was not run"), "{body}");
        assert!(body.contains("the user denied it"), "{body}");
    }
    // Every decision is in the audit ledger, and no key is.
    let ledger = audit_tail(&d);
    let decisions: Vec<&str> = ledger
        .iter()
        .filter(|e| e["kind"] == "evaluate" && e["tool"] == "Read")
        .filter_map(|e| e["decision"].as_str())
        .collect();
    assert_eq!(
        decisions,
        ["allow", "block", "allow", "block"],
        "{ledger:?}"
    );
    assert!(
        !ledger.iter().any(|e| e.to_string().contains(API_KEY)),
        "a key reached the ledger"
    );
}

/// The last records of the daemon's audit ledger (`carapace audit tail --json`).
fn audit_tail(d: &Daemon) -> Vec<Value> {
    let data_dir = d.data_dir.to_str().expect("utf-8");
    let out = cli(
        Path::new(CARAPACE),
        &d.socket,
        [
            "audit",
            "--data-dir",
            data_dir,
            "tail",
            "--json",
            "-n",
            "100",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// An agent inside `carapace run` that talks to the gateway gets its session: the gateway's
/// decision on its call is in the session's history and in the ledger under the session.
#[test]
fn gateway_clients_inside_carapace_run_get_their_session() {
    let Some(dir) = setup("gateway_clients_inside_carapace_run_get_their_session") else {
        return;
    };
    let upstream = MessagesServer::scripted(vec![allowed_turn()]);
    let (d, _gateway) = gateway_daemon(dir.path(), &upstream);
    let body = request(false, &hello());
    let (answer, done) = (dir.path().join("answer.json"), dir.path().join("done"));
    // `carapace run` points the agent at the gateway; curl is the agent. The session stays
    // until the test has looked at it.
    let script = format!(
        "curl -sS --max-time 30 -H 'content-type: application/json' \
         -H 'anthropic-version: 2023-06-01' -H 'x-api-key: {API_KEY}' \
         -d '{body}' -o {answer} \"$ANTHROPIC_BASE_URL/v1/messages\"; \
         for _ in $(seq 600); do [ -e {done} ] && break; sleep 0.05; done",
        answer = answer.display(),
        done = done.display()
    );
    let mut agent = cli_command(
        Path::new(CARAPACE),
        &d.socket,
        ["run", "--", "sh", "-c", &script],
        &[],
    )
    .spawn()
    .expect("start carapace run");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = String::new();
    let (session, shown) = loop {
        assert!(
            Instant::now() < deadline,
            "no session history from the gateway: {seen}"
        );
        std::thread::sleep(Duration::from_millis(50));
        let list = cli(
            Path::new(CARAPACE),
            &d.socket,
            ["session", "list", "--json"],
            &[],
        );
        seen = text(&list.stdout);
        let listed: Value = serde_json::from_slice(&list.stdout).unwrap_or(Value::Null);
        let Some(id) = listed[0]["id"].as_str().map(str::to_owned) else {
            continue;
        };
        let show = cli(
            Path::new(CARAPACE),
            &d.socket,
            ["session", "show", &id, "--json"],
            &[],
        );
        let shown: Value = serde_json::from_slice(&show.stdout).unwrap_or(Value::Null);
        seen = format!("{seen}\n{shown}{}", text(&show.stderr));
        let history = shown["history"].as_array().cloned().unwrap_or_default();
        if history.iter().any(|h| h["tool"] == "Bash") {
            break (id, shown);
        }
    };
    std::fs::write(&done, "").expect("let the agent finish");
    let status = agent.wait().expect("carapace run");
    assert!(status.success());
    let answer = std::fs::read_to_string(&answer).unwrap_or_default();
    assert!(answer.contains("toolu_ok"), "{answer}");
    assert_eq!(shown["history"][0]["decision"], "allow", "{shown}");
    let ledger = audit_tail(&d);
    let call = ledger
        .iter()
        .find(|e| e["kind"] == "evaluate" && e["tool"] == "Bash")
        .unwrap_or_else(|| panic!("the call is not in the ledger: {ledger:?}"));
    assert_eq!(call["session"], session.as_str(), "{call}");
    assert_eq!(call["agent"]["command"], "curl", "{call}");
}
