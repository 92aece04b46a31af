//! Tests of the client against the library it calls, which must agree with the daemon:
//! they live with the binary, since the library cannot name it.
use std::time::Duration;

use carapace::config::{load, Acknowledge, Config, RefuseWith, FILE_NAME};
use carapace_policy::rules::Mode;
use serde_json::{json, Value};

use super::evaluator::{Evaluator, Fallback, Source};
use super::{doctor, learn};

/// `carapaced` (`load`), `carapace doctor` and `carapace learn` read the same file the
/// same way: the same model, and the same errors.
#[tokio::test]
async fn the_daemon_doctor_and_learn_read_a_file_alike() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let file = dir.path().join(FILE_NAME);
    std::fs::write(
        &file,
        format!(
            "approvals:\n  timeout_seconds: 90\ndns:\n  refuse_with: nxdomain\n\
             audit:\n  acknowledge: synced\nconsole:\n  listen: 127.0.0.1:8790\n\
             llm:\n  provider: openai\n  model: m\n  base_url: {url}/\n  \
             api_key_env: CARAPACE_NO_SUCH_KEY\n  timeout_ms: 2000\n"
        ),
    )
    .unwrap();
    let daemon = load(dir.path()).unwrap();
    assert_eq!(daemon.approval_timeout, Some(Duration::from_secs(90)));
    assert_eq!(daemon.dns.refuse_with, RefuseWith::NxDomain);
    assert_eq!(daemon.audit_acknowledge, Acknowledge::Synced);
    assert_eq!(daemon.console, Some("127.0.0.1:8790".parse().unwrap()));
    let model = daemon.llm.clone().unwrap();
    assert_eq!(model.base_url, url);
    assert_eq!(learn::model(dir.path()).unwrap(), model);
    assert_eq!(doctor::config(dir.path()).status, doctor::State::Ok);
    let reach = doctor::llm(dir.path()).await;
    assert_eq!(reach.status, doctor::State::Ok, "{reach:?}");
    assert!(reach.detail.contains(&url), "{reach:?}");

    // One wrong key, in a section learn does not use: all three refuse the file alike.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("refuse_with", "refuse_wiht")).unwrap();
    let diagnostics = load(dir.path()).unwrap_err().to_string();
    assert!(
        diagnostics.contains("config.yaml:4:3: error: unknown `dns` setting `refuse_wiht`")
            && diagnostics.contains("did you mean `refuse_with`?"),
        "{diagnostics}"
    );
    let learned = learn::model(dir.path()).unwrap_err().to_string();
    assert!(learned.contains(diagnostics.trim_end()), "{learned}");
    let checked = doctor::config(dir.path());
    assert_eq!(checked.status, doctor::State::Fail);
    assert!(
        checked.detail.contains(diagnostics.trim_end()),
        "{checked:?}"
    );
    assert_eq!(doctor::llm(dir.path()).await.status, doctor::State::Skip);
    // No file: the defaults, no model, nothing to check.
    std::fs::remove_file(&file).unwrap();
    assert_eq!(load(dir.path()).unwrap(), Config::default());
    assert!(learn::model(dir.path()).is_err());
    assert_eq!(doctor::config(dir.path()).status, doctor::State::Ok);
    assert_eq!(doctor::llm(dir.path()).await.status, doctor::State::Skip);
}

/// A rule that asks a model about changes to authentication code, and one that needs none.
const AUTH_RULES: &str = r#"
  - id: review-auth
    match: { path: "/srv/app/auth/**" }
    llm_review: true
    prompt: "Does this change weaken authentication?"
    mode: block
  - id: secrets-off-limits
    block: "/srv/app/secrets/**"
"#;

fn auth_write(content: &str) -> Value {
    json!({"tool": "Write", "input": {"file_path": "/srv/app/auth/login.py", "content": content}})
}

#[tokio::test]
async fn local_evaluation_applies_on_llm_error_like_a_daemon_without_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    std::fs::write(
        &file,
        format!(
            "version: 1\nbuiltin: none\nrules:\n{}",
            AUTH_RULES.replace(
                "    mode: block\n",
                "    mode: block\n    on_llm_error: warn\n"
            )
        ),
    )
    .unwrap();
    let source = Source {
        rules: Some(file),
        local: true,
        cwd: None,
    };
    let mut eval = Evaluator::open(&dir.path().join("no.sock"), &source, Fallback::Fail)
        .await
        .unwrap();
    let d = eval.check(&auth_write("x"), None).await.unwrap();
    assert_eq!(d.decision, Mode::Warn, "{d:?}");
    assert!(d.matches[0]
        .message
        .contains("local evaluation does not ask a model"));
    let call = json!({"tool": "Read", "input": {"file_path": "/srv/app/secrets/k"}});
    assert_eq!(eval.check(&call, None).await.unwrap().decision, Mode::Block);
}
