//! Sessions, triggers, approvals and plans end to end, through the real daemon and CLI, with
//! the personal-agent reference rules (rules/examples/personal-agent.yaml): one scripted
//! test per reference rule, the security invariants (an agent cannot approve its own
//! requests, disable rules, reset its session or reload rules), and state surviving
//! `kill -9` of the daemon.
use std::io::Write as _;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use carapace_tests::{cli, text, Daemon};

use super::{setup, CARAPACE, CARAPACED};

const PERSONAL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../rules/examples/personal-agent.yaml"
);

fn start(dir: &Path) -> Daemon {
    Daemon::start(Path::new(CARAPACED), dir, &["--rules", PERSONAL])
}

fn run(d: &Daemon, args: &[&str]) -> Output {
    cli(Path::new(CARAPACE), &d.socket, args, &[])
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}):\n{}\nstderr:\n{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

/// `carapace check` of `call` in agent session `session`; (exit code, decision JSON).
fn check(d: &Daemon, session: &str, call: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["check", "--session", session, "--json", call];
    args.extend_from_slice(extra);
    let out = run(d, &args);
    (out.status.code().unwrap_or(-1), json(&out))
}

fn write(path: &str) -> String {
    serde_json::json!({"tool": "Write", "input": {"file_path": path, "content": "hello"}})
        .to_string()
}

fn ids(v: &serde_json::Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            m.as_str()
                .map(str::to_owned)
                .or_else(|| m["id"].as_str().map(str::to_owned))
        })
        .collect()
}

fn approve(d: &Daemon, id: &str, extra: &[&str]) -> Output {
    let mut args = vec!["approve", id];
    args.extend_from_slice(extra);
    run(d, &args)
}

const WEB: &str =
    r#"{"tool":"WebFetch","input":{"url":"https://example.com/news","prompt":"summarise"}}"#;

#[test]
fn no_write_after_web_gates_writes_once_the_agent_read_the_web() {
    let Some(dir) = setup("no_write_after_web_gates_writes_once_the_agent_read_the_web") else {
        return;
    };
    let d = start(dir.path());
    let s = "cc-web-1";
    let (code, v) = check(&d, s, &write("/tmp/carapace-test/a.txt"), &[]);
    assert_eq!(code, 0, "a write before any web read passes: {v}");

    let (code, v) = check(&d, s, WEB, &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(ids(&v, "activated"), ["no-write-after-web"], "{v}");

    let (code, v) = check(&d, s, &write("/tmp/carapace-test/a.txt"), &[]);
    assert_eq!(code, 3, "the same write now needs approval: {v}");
    assert_eq!(ids(&v, "matches"), ["no-write-after-web"]);
    let approval = v["approval_id"].as_str().unwrap_or_default().to_owned();
    assert!(approval.starts_with("ap-"), "{v}");

    let pending = json(&run(&d, &["approvals", "--json"]));
    assert_eq!(pending["id"], approval.as_str(), "{pending}");
    let status = text(&run(&d, &["status"]).stdout);
    assert!(status.contains("approvals: 1 pending"), "{status}");
    let out = approve(&d, &approval, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let (code, v) = check(&d, s, &write("/tmp/carapace-test/a.txt"), &[]);
    assert_eq!(code, 0, "approved once, the same write passes: {v}");
    // The ledger says who answered, and verifies.
    let data_dir = d.data_dir.display().to_string();
    let tail = run(
        &d,
        &[
            "audit",
            "--data-dir",
            &data_dir,
            "tail",
            "--json",
            "-n",
            "50",
        ],
    );
    let answered = text(&tail.stdout);
    assert!(
        answered.contains("\"approval-answered\"") && answered.contains(&approval),
        "{answered}{}",
        text(&tail.stderr)
    );
    let verify = run(&d, &["audit", "--data-dir", &data_dir, "verify"]);
    assert!(verify.status.success(), "{}", text(&verify.stdout));
    let (code, _) = check(&d, s, &write("/tmp/carapace-test/b.txt"), &[]);
    assert_eq!(code, 3, "another write needs its own approval");
    // Another session has read nothing from the web.
    let (code, _) = check(&d, "cc-web-2", &write("/tmp/carapace-test/b.txt"), &[]);
    assert_eq!(code, 0);
}

#[test]
fn no_exfil_after_sensitive_waits_for_the_users_answer() {
    let Some(dir) = setup("no_exfil_after_sensitive_waits_for_the_users_answer") else {
        return;
    };
    let d = start(dir.path());
    let s = "cc-fin-1";
    let curl = r#"{"tool":"WebFetch","input":{"url":"https://accountant.example/upload","prompt":"send"}}"#;
    let (code, _) = check(&d, s, curl, &[]);
    assert_eq!(code, 0, "nothing sensitive seen yet");
    let (code, v) = check(
        &d,
        s,
        r#"{"tool":"Read","input":{"file_path":"~/finance/q4.csv"}}"#,
        &[],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(ids(&v, "activated"), ["no-exfil-after-sensitive"]);

    // The agent waits; the user answers from another terminal.
    let answer_when_pending = |approve_it: bool| {
        let socket = d.socket.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let out = cli(Path::new(CARAPACE), &socket, ["approvals", "--json"], &[]);
                if let Some(id) = text(&out.stdout)
                    .lines()
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .find_map(|a| a["id"].as_str().map(str::to_owned))
                {
                    let verb = if approve_it { "approve" } else { "deny" };
                    return cli(Path::new(CARAPACE), &socket, [verb, id.as_str()], &[]);
                }
                assert!(Instant::now() < deadline, "no approval request appeared");
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let user = answer_when_pending(false);
    let (code, v) = check(&d, s, curl, &["--wait", "30"]);
    assert!(user.join().is_ok_and(|o| o.status.success()));
    assert_eq!(code, 2, "denied means blocked: {v}");
    assert_eq!(v["approval_status"], "denied");

    // The user's denial stands for the identical request in this session: refused at once,
    // nobody is asked again (approval fatigue).
    let (code, v) = check(&d, s, curl, &["--wait", "30"]);
    assert_eq!(code, 2, "denied earlier in the session: {v}");
    assert_eq!(v["approval_status"], "denied");
    let pending = run(&d, &["approvals", "--json"]);
    assert!(
        text(&pending.stdout).trim().is_empty(),
        "asked again: {}",
        text(&pending.stdout)
    );

    // Another upload is another request: approved while the agent waits.
    let other = r#"{"tool":"WebFetch","input":{"url":"https://accountant.example/upload2","prompt":"send"}}"#;
    let user = answer_when_pending(true);
    let (code, v) = check(&d, s, other, &["--wait", "30"]);
    assert!(user.join().is_ok_and(|o| o.status.success()));
    assert_eq!(code, 0, "approved while waiting: {v}");
    assert_eq!(v["approval_status"], "approved");
}

#[test]
fn credential_access_needs_approval_on_first_use_per_session() {
    let Some(dir) = setup("credential_access_needs_approval_on_first_use_per_session") else {
        return;
    };
    let d = start(dir.path());
    let fetch = |name: &str| {
        serde_json::json!({"tool": "mcp__passwords__get", "input": {"name": name}}).to_string()
    };
    let (code, v) = check(&d, "cc-cred", &fetch("FINANCE_API_KEY"), &[]);
    assert_eq!(code, 3, "{v}");
    let out = approve(&d, v["approval_id"].as_str().unwrap_or_default(), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(check(&d, "cc-cred", &fetch("FINANCE_API_KEY"), &[]).0, 0);
    assert_eq!(check(&d, "cc-cred", &fetch("FINANCE_API_KEY"), &[]).0, 0);
    assert_eq!(
        check(&d, "cc-cred", &fetch("GMAIL_APP_PASSWORD"), &[]).0,
        3,
        "another credential is another first use"
    );
    assert_eq!(
        check(&d, "cc-other", &fetch("FINANCE_API_KEY"), &[]).0,
        3,
        "another session is another first use"
    );
}

#[test]
fn a_plan_approved_in_part_runs_those_steps_and_a_deviation_asks_again() {
    let Some(dir) = setup("a_plan_approved_in_part_runs_those_steps_and_a_deviation_asks_again")
    else {
        return;
    };
    let d = start(dir.path());
    let plan = dir.path().join("plan.jsonl");
    let steps = [
        WEB.to_owned(),
        write("/tmp/carapace-test/report.md"),
        write("/tmp/carapace-test/notes.md"),
        r#"{"tool":"Read","input":{"file_path":"/tmp/carapace-test/report.md"}}"#.to_owned(),
    ];
    std::fs::write(&plan, steps.join("\n")).unwrap_or_else(|e| panic!("{e}"));
    let plan = plan.display().to_string();

    // Nothing gated in a read-only plan: approved at once.
    let ro = dir.path().join("ro.json");
    std::fs::write(&ro, format!("[{}]", steps[3])).unwrap_or_else(|e| panic!("{e}"));
    let out = run(
        &d,
        &[
            "plan",
            &ro.display().to_string(),
            "--session",
            "p1",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    let out = run(&d, &["plan", &plan, "--session", "p1", "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    let v = json(&out);
    let decisions: Vec<&str> = v["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["decision"].as_str())
        .collect();
    // The web read of step 1 gates the writes of steps 2 and 3.
    assert_eq!(decisions, ["allow", "approve", "approve", "allow"], "{v}");
    let id = v["approval_id"].as_str().unwrap_or_default().to_owned();
    let out = approve(&d, &id, &["--steps", "1-2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    for (n, want) in [(0, 0), (1, 0), (2, 3), (3, 0)] {
        let (code, v) = check(&d, "p1", &steps[n], &[]);
        assert_eq!(code, want, "step {}: {v}", n + 1);
    }
    // Off the plan: a new approval request.
    let (code, v) = check(&d, "p1", &write("/tmp/carapace-test/elsewhere.md"), &[]);
    assert_eq!(code, 3, "{v}");
    assert_ne!(v["approval_id"], id.as_str());
}

#[test]
fn a_plan_with_a_blocked_step_is_refused_outright() {
    let Some(dir) = setup("a_plan_with_a_blocked_step_is_refused_outright") else {
        return;
    };
    let d = start(dir.path());
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"[{"tool":"Read","input":{"file_path":"/tmp/x"}},{"tool":"Read","input":{"file_path":"~/.ssh/id_ed25519"}}]"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = run(
        &d,
        &[
            "plan",
            &plan.display().to_string(),
            "--session",
            "p2",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let v = json(&out);
    assert_eq!(v["status"], "block");
    assert!(v["approval_id"].as_str().is_some_and(str::is_empty));
    let pending = run(&d, &["approvals", "--json"]);
    assert!(
        text(&pending.stdout).trim().is_empty(),
        "no request: {}",
        text(&pending.stdout)
    );
}

#[test]
fn the_user_disables_and_resets_but_not_locked_rules() {
    let Some(dir) = setup("the_user_disables_and_resets_but_not_locked_rules") else {
        return;
    };
    let d = start(dir.path());
    let (_, v) = check(&d, "u1", WEB, &[]);
    let session = v["session_id"].as_str().unwrap_or_default().to_owned();
    assert!(session.starts_with("a-"), "{v}");
    assert_eq!(check(&d, "u1", &write("/tmp/carapace-test/x"), &[]).0, 3);

    let out = run(&d, &["session", "disable", &session, "no-write-after-web"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(check(&d, "u1", &write("/tmp/carapace-test/x"), &[]).0, 0);
    let out = run(&d, &["session", "enable", &session, "no-write-after-web"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(check(&d, "u1", &write("/tmp/carapace-test/x"), &[]).0, 3);

    let out = run(&d, &["session", "reset", &session]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = json(&run(&d, &["session", "show", &session, "--json"]));
    assert!(
        shown["rules"].as_array().is_some_and(Vec::is_empty),
        "{shown}"
    );
    assert!(
        shown["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|a| a["status"] != "pending"),
        "pending requests are denied by a reset: {shown}"
    );
    assert_eq!(check(&d, "u1", &write("/tmp/carapace-test/x"), &[]).0, 0);

    // Locked rules (the built-in ssh-private-keys) stay on; unknown ids are refused.
    for (rule, why) in [("ssh-private-keys", "locked"), ("no-such-rule", "no rule")] {
        let out = run(&d, &["session", "disable", &session, rule]);
        assert!(!out.status.success(), "{rule} was disabled");
        assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
    }
}

#[test]
fn the_claude_code_user_types_carapace_commands_the_model_never_sees() {
    let Some(dir) = setup("the_claude_code_user_types_carapace_commands_the_model_never_sees")
    else {
        return;
    };
    let d = start(dir.path());
    let hook = |event: serde_json::Value| {
        let mut child = std::process::Command::new(CARAPACE)
            .args(["--socket"])
            .arg(&d.socket)
            .args(["hook", "claude-code"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(event.to_string().as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        json(&child.wait_with_output().unwrap_or_else(|e| panic!("{e}")))
    };
    let tool = |name: &str, input: serde_json::Value| {
        serde_json::json!({"session_id": "cc-slash", "hook_event_name": "PreToolUse",
            "cwd": "/tmp", "tool_name": name, "tool_input": input})
    };
    let prompt = |p: &str| {
        serde_json::json!({"session_id": "cc-slash", "hook_event_name": "UserPromptSubmit",
            "cwd": "/tmp", "prompt": p})
    };
    hook(tool(
        "WebFetch",
        serde_json::json!({"url": "https://example.com", "prompt": "x"}),
    ));
    let w = serde_json::json!({"file_path": "/tmp/carapace-test/y", "content": "x"});
    let v = hook(tool("Write", w.clone()));
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "ask", "{v}");

    let v = hook(prompt("/carapace rules"));
    assert_eq!(v["decision"], "block", "withheld from the model: {v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap_or("")
            .contains("activated no-write-after-web"),
        "{v}"
    );
    let v = hook(prompt("/carapace disable ssh-private-keys"));
    assert!(v["reason"].as_str().unwrap_or("").contains("locked"), "{v}");
    let v = hook(prompt("/carapace disable no-write-after-web"));
    assert!(
        v["reason"].as_str().unwrap_or("").contains("disabled"),
        "{v}"
    );
    let v = hook(tool("Write", w));
    assert_eq!(
        v,
        serde_json::json!({}),
        "left to Claude Code's permissions: {v}"
    );
    // Ordinary prompts pass untouched.
    assert_eq!(hook(prompt("please write the file")), serde_json::json!({}));
}

/// A shell script for `sh -c` inside `carapace run`: tries every loosening command and
/// prints `NAME=STATUS` lines plus their error output.
fn attempts(carapace: &str, socket: &Path, approval: &str, session: &str) -> String {
    let c = format!("{carapace} --socket {}", socket.display());
    format!(
        "{c} approve {approval}; echo approve=$?; \
         {c} deny {approval}; echo deny=$?; \
         {c} session disable {session} no-write-after-web; echo disable=$?; \
         {c} session reset {session}; echo reset=$?; \
         {c} rules reload; echo reload=$?; \
         id=$({c} check --session inner --json '{{\"tool\":\"mcp__passwords__get\",\"input\":{{\"name\":\"K\"}}}}' | sed -n 's/.*\"approval_id\": \"\\([^\"]*\\)\".*/\\1/p'); \
         echo own=$id; {c} approve \"$id\"; echo approve_own=$?"
    )
}

#[test]
fn an_agent_cannot_approve_disable_reset_or_reload() {
    let Some(dir) = setup("an_agent_cannot_approve_disable_reset_or_reload") else {
        return;
    };
    let d = start(dir.path());
    let (_, v) = check(&d, "victim", WEB, &[]);
    let session = v["session_id"].as_str().unwrap_or_default().to_owned();
    let (code, v) = check(&d, "victim", &write("/tmp/carapace-test/z"), &[]);
    assert_eq!(code, 3);
    let approval = v["approval_id"].as_str().unwrap_or_default().to_owned();

    let script = attempts(CARAPACE, &d.socket, &approval, &session);
    let out = run(&d, &["run", "--", "sh", "-c", &script]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    for name in [
        "approve",
        "deny",
        "disable",
        "reset",
        "reload",
        "approve_own",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} line:\n{stdout}\n{stderr}"));
        assert_ne!(
            line,
            format!("{name}=0"),
            "{name} succeeded from inside:\n{stdout}\n{stderr}"
        );
    }
    assert!(
        stdout.lines().any(|l| l.starts_with("own=ap-")),
        "the agent may request approvals:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr
            .matches("processes inside a Carapace session cannot")
            .count()
            >= 5,
        "{stderr}"
    );
    // Everything is as it was.
    let shown = json(&run(&d, &["session", "show", &session, "--json"]));
    let rules: Vec<&str> = shown["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["state"].as_str())
        .collect();
    assert_eq!(rules, ["activated"], "{shown}");
    let pending = text(&run(&d, &["approvals", "--json"]).stdout);
    assert!(pending.contains(&approval), "{pending}");
}

#[test]
fn session_state_survives_kill_9_of_the_daemon() {
    let Some(dir) = setup("session_state_survives_kill_9_of_the_daemon") else {
        return;
    };
    let mut d = start(dir.path());
    let (data_dir, socket) = (d.data_dir.clone(), d.socket.clone());
    check(&d, "k9", WEB, &[]);
    let (code, v) = check(&d, "k9", &write("/tmp/carapace-test/approved"), &[]);
    assert_eq!(code, 3);
    let out = approve(&d, v["approval_id"].as_str().unwrap_or_default(), &[]);
    assert!(out.status.success());
    let (code, v) = check(&d, "k9", &write("/tmp/carapace-test/pending"), &[]);
    assert_eq!(code, 3);
    let pending = v["approval_id"].as_str().unwrap_or_default().to_owned();

    let pid = d.pid().unwrap_or_else(|| panic!("no daemon pid"));
    // SAFETY: kill(2) on the daemon this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    d.stop();
    let d = Daemon::start_with(
        Path::new(CARAPACED),
        &data_dir,
        &socket,
        &["--rules", PERSONAL],
    );
    let approvals = text(&run(&d, &["approvals", "--json"]).stdout);
    assert!(
        approvals.contains(&pending),
        "pending approval lost: {approvals}"
    );
    let (code, v) = check(&d, "k9", &write("/tmp/carapace-test/approved"), &[]);
    assert_eq!(code, 0, "approved signature lost: {v}");
    let (code, v) = check(&d, "k9", &write("/tmp/carapace-test/other"), &[]);
    assert_eq!(code, 3, "activated rule lost: {v}");
}
