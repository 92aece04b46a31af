//! LLM review end to end: the reference personal-agent rule file in a real `carapaced`, its
//! plain-English rules judged by a loopback model server speaking the Anthropic Messages
//! API; decisions through `carapace check`; counters through `carapace status`; rules
//! proposed by `carapace learn`.
use std::path::Path;

use carapace_tests::anthropic::{Block, MessagesServer};
use carapace_tests::{cli, text, Daemon};
use serde_json::{json, Value};

use super::{setup, CARAPACE, CARAPACED};

const PERSONAL_AGENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../rules/examples/personal-agent-english.yaml"
);

/// The untrusted operation inside a question: the JSON between the delimiters.
fn operation(user: &str) -> Value {
    let Some(open) = user.rfind("<untrusted-data-") else {
        return Value::Null;
    };
    let body = &user[open..];
    let start = body.find('\n').map_or(body.len(), |i| i + 1);
    let end = body.find("</untrusted-data-").unwrap_or(body.len());
    serde_json::from_str(body[start..end].trim()).unwrap_or(Value::Null)
}

/// A model that judges the personal-agent rules by what the operation really does.
fn judge(request: &Value) -> Vec<Block> {
    let tool = request["tools"][0]["name"].as_str().unwrap_or("");
    let user = request["messages"][0]["content"].as_str().unwrap_or("");
    if tool == "proposed_rules" {
        return vec![Block::tool_use(
            "toolu_learn",
            tool,
            json!({"rules": [{"id": "keep-out-of-prod", "description": "the user said never touch prod",
                              "mode": "block", "tool": ["Edit", "Write"], "path": ["/srv/prod/**"],
                              "command": [], "content": [], "llm_review": false, "prompt": ""}]}),
        )];
    }
    let op = operation(user);
    let command = op["input"]["command"].as_str().unwrap_or("");
    let path = op["input"]["file_path"].as_str().unwrap_or("");
    let rule = |id: &str| user.contains(&format!("<rule>\nid: {id}\n"));
    let read_only = ["ls", "cat", "grep", "find"]
        .iter()
        .any(|c| command.split_whitespace().next() == Some(c));
    let applies = if rule("approve-skill-changes") {
        path.contains("/skills/")
    } else if rule("approve-memory-writes") {
        path.contains("/memory/")
    } else if rule("approve-shell-side-effects") {
        !command.is_empty() && !read_only
    } else if rule("approve-credential-fetch") {
        command.starts_with("op read")
    } else {
        false
    };
    vec![Block::tool_use(
        "toolu_1",
        "rule_verdict",
        json!({"applies": applies, "reason": format!("judged {tool}")}),
    )]
}

fn check(d: &Daemon, call: &Value) -> (i32, Value) {
    let out = cli(
        Path::new(CARAPACE),
        &d.socket,
        ["check", "--json", &call.to_string()],
        &[],
    );
    let decision = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check printed no JSON ({e}): {}{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), decision)
}

#[test]
fn the_personal_agent_rules_work_end_to_end_with_a_loopback_model() {
    let Some(dir) = setup("the_personal_agent_rules_work_end_to_end_with_a_loopback_model") else {
        return;
    };
    let model = MessagesServer::start(judge);
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(
        data.join("config.yaml"),
        format!(
            "llm:\n  provider: anthropic\n  base_url: {}\n  model: judge-1\n  api_key_env: CARAPACE_E2E_KEY\n  timeout_ms: 5000\n",
            model.base_url()
        ),
    )
    .expect("config");
    let d = Daemon::start_env(
        Path::new(CARAPACED),
        dir.path(),
        &["--rules", PERSONAL_AGENT],
        &[("CARAPACE_E2E_KEY", "e2e-key".as_ref())],
    );
    assert!(
        d.log_text().contains("LLM review: anthropic model judge-1"),
        "{}",
        d.log_text()
    );

    let skill = json!({"tool": "Write", "input": {"file_path": "/home/agent/skills/mail/SKILL.md", "content": "x"}});
    let (code, v) = check(&d, &skill);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["matches"][0]["id"], "approve-skill-changes", "{v}");
    assert!(
        v["matches"][0]["matched"]
            .as_str()
            .unwrap()
            .contains("LLM review"),
        "{v}"
    );

    let (code, v) = check(
        &d,
        &json!({"tool": "Bash", "input": {"command": "ls -la /home/agent"}}),
    );
    assert_eq!(code, 0, "read-only shell is free: {v}");

    let rm = json!({"tool": "Bash", "input": {"command": "rm -rf /home/agent/build"}});
    let (code, v) = check(&d, &rm);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["matches"][0]["id"], "approve-shell-side-effects", "{v}");
    let asked = model.message_requests().len();
    // Five rules are always in force: one question each per new operation.
    assert_eq!(asked, 15, "three operations × five rules");
    let (code, _) = check(&d, &rm);
    assert_eq!(code, 3);
    assert_eq!(
        model.message_requests().len(),
        asked,
        "the same operation again is cached"
    );

    let (code, v) = check(
        &d,
        &json!({"tool": "Bash", "input": {"command": "op read op://vault/mail/password"}}),
    );
    assert_eq!(code, 3, "{v}");
    let ids: Vec<&str> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(ids.contains(&"approve-credential-fetch"), "{v}");

    // Each question carried the key and the operation as delimited data.
    let requests = model.requests();
    assert!(requests.iter().all(|r| r
        .headers
        .iter()
        .any(|(k, v)| k == "x-api-key" && v == "e2e-key")));

    let out = cli(Path::new(CARAPACE), &d.socket, ["status"], &[]);
    let status = text(&out.stdout);
    assert!(
        status.contains("LLM review: anthropic model judge-1"),
        "{status}"
    );
    assert!(
        status.contains("20 model call(s), 5 cache hit(s), 0 failure(s)"),
        "{status}"
    );

    learn_proposes_rules(&d, dir.path(), &data, &model);
}

/// `carapace learn` proposes rules with the same model and never activates them.
fn learn_proposes_rules(d: &Daemon, dir: &Path, data: &Path, model: &MessagesServer) {
    let transcript = dir.join("t.json");
    std::fs::write(
        &transcript,
        json!([{"role": "user", "content": "fix the config"},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "1", "name": "Edit",
                 "input": {"file_path": "/srv/prod/app.conf", "old_string": "a", "new_string": "b"}}]},
               {"role": "user", "content": "never touch prod!"}])
        .to_string(),
    )
    .expect("transcript");
    let out = cli(
        Path::new(CARAPACE),
        &d.socket,
        [
            "learn",
            transcript.to_str().expect("utf-8"),
            "--data-dir",
            data.to_str().expect("utf-8"),
        ],
        &[("CARAPACE_E2E_KEY", "e2e-key")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    assert!(yaml.contains("id: \"keep-out-of-prod\""), "{yaml}");
    let proposed = dir.join("proposed.yaml");
    std::fs::write(&proposed, &yaml).expect("proposed");
    let out = cli(
        Path::new(CARAPACE),
        &d.socket,
        ["rules", "check", proposed.to_str().expect("utf-8")],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let learn_request = model
        .message_requests()
        .pop()
        .expect("learn asked the model");
    assert!(learn_request["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("USER: never touch prod!"));
}

#[test]
fn a_broken_llm_config_stops_the_daemon_with_file_line_column() {
    let Some(dir) = setup("a_broken_llm_config_stops_the_daemon_with_file_line_column") else {
        return;
    };
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(
        data.join("config.yaml"),
        "llm:\n  provider: anthropic\n  model: m\n  timeout_ms: soon\n",
    )
    .expect("config");
    let out = std::process::Command::new(CARAPACED)
        .arg("--data-dir")
        .arg(&data)
        .arg("--socket")
        .arg(dir.path().join("run/carapace.sock"))
        .env("NO_COLOR", "1")
        .output()
        .expect("carapaced runs");
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("config.yaml:4:15: error: `llm.timeout_ms` must be a whole number"),
        "{err}"
    );
}

/// A model for the session test: the trigger holds once web content was read; the effect
/// covers file writes.
fn session_judge(request: &Value) -> Vec<Block> {
    let user = request["messages"][0]["content"].as_str().unwrap_or("");
    let applies = if user.contains("trigger: the agent has taken in content from the internet") {
        user.contains("WebFetch")
    } else {
        operation(user)["tool"] == "Write"
    };
    vec![Block::tool_use(
        "toolu_1",
        "rule_verdict",
        json!({"applies": applies, "reason": "judged"}),
    )]
}

#[test]
fn a_plain_english_trigger_switches_its_rule_on_in_the_session() {
    let Some(dir) = setup("a_plain_english_trigger_switches_its_rule_on_in_the_session") else {
        return;
    };
    let model = MessagesServer::start(session_judge);
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(
        data.join("config.yaml"),
        format!(
            "llm:\n  provider: anthropic\n  base_url: {}\n  model: judge-1\n",
            model.base_url()
        ),
    )
    .expect("config");
    let rules = dir.path().join("rules.yaml");
    std::fs::write(
        &rules,
        "version: 1\nbuiltin: none\nrules:\n  - id: approve-writes-after-web\n    trigger: \"the agent has taken in content from the internet\"\n    effect: \"writes to files\"\n    mode: approve\n",
    )
    .expect("rules");
    let d = Daemon::start(
        Path::new(CARAPACED),
        dir.path(),
        &["--rules", rules.to_str().expect("utf-8")],
    );
    let check_in = |session: &str, call: &Value| {
        let out = cli(
            Path::new(CARAPACE),
            &d.socket,
            ["check", "--session", session, "--json", &call.to_string()],
            &[],
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("no JSON ({e}): {}{}", text(&out.stdout), text(&out.stderr))
        });
        (out.status.code().unwrap_or(-1), v)
    };
    let write = |p: &str| json!({"tool": "Write", "input": {"file_path": p, "content": "x"}});
    let (code, v) = check_in("s1", &write("/tmp/before"));
    assert_eq!(code, 0, "the rule is not on yet: {v}");
    let (code, v) = check_in(
        "s1",
        &json!({"tool": "WebFetch", "input": {"url": "https://news.example/today", "prompt": "read"}}),
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["activated"], json!(["approve-writes-after-web"]), "{v}");
    let (code, v) = check_in("s1", &write("/tmp/after"));
    assert_eq!(code, 3, "after the web read, writes need approval: {v}");
    assert_eq!(v["matches"][0]["id"], "approve-writes-after-web", "{v}");
    let id = v["approval_id"]
        .as_str()
        .expect("an approval request")
        .to_owned();
    let out = cli(Path::new(CARAPACE), &d.socket, ["approve", &id], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (code, v) = check_in("s1", &write("/tmp/after"));
    assert_eq!(code, 0, "the user approved this write in the session: {v}");
    let (code, v) = check_in("s2", &write("/tmp/after"));
    assert_eq!(code, 0, "another session has not read the web: {v}");
    // The second trigger question saw the first call in the session's history.
    let trigger_questions: Vec<String> = model
        .message_requests()
        .iter()
        .filter_map(|r| r["messages"][0]["content"].as_str().map(str::to_owned))
        .filter(|u| u.contains("recent operations"))
        .collect();
    assert!(
        trigger_questions
            .iter()
            .any(|u| u.contains("WebFetch") && u.contains("/tmp/before")),
        "{trigger_questions:#?}"
    );
}
