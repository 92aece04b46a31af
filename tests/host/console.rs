//! The console in a real browser: a real `carapaced --console` on a free loopback port,
//! headless Chromium driven over the `DevTools` Protocol (`carapace_tests::cdp`), and the real
//! CLI as the agent and the user. Screenshots of each page go to
//! `target/console-screenshots/` for people to look at. Besides approvals, denials and
//! rules, it shows a shadow session's would-deny decisions and a record session's proposed
//! allow-list reviewed and saved as a profile.
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use carapace_tests::cdp::{self, http_exchange, raw_http, Browser};
use carapace_tests::{cli, text, Daemon};

use super::{setup, CARAPACE, CARAPACED};

const PERSONAL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../rules/examples/personal-agent.yaml"
);
const WAIT: Duration = Duration::from_secs(20);
const WEB: &str =
    r#"{"tool":"WebFetch","input":{"url":"https://example.com/news","prompt":"summarise"}}"#;

fn screenshots() -> PathBuf {
    // CARGO_TARGET_TMPDIR is <target>/tmp.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap_or_else(|| Path::new("target"))
        .join("console-screenshots")
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
}

fn run(d: &Daemon, args: &[&str]) -> Output {
    cli(Path::new(CARAPACE), &d.socket, args, &[])
}

fn write(path: &str) -> String {
    serde_json::json!({"tool": "Write", "input": {"file_path": path, "content": "hello"}})
        .to_string()
}

/// `carapace check` in agent session `session`; (exit code, decision JSON).
fn check(socket: &Path, session: &str, call: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec!["check", "--session", session, "--json", call];
    args.extend_from_slice(extra);
    let out = cli(Path::new(CARAPACE), socket, &args, &[]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check printed no JSON ({e}): {}{}",
            text(&out.stdout),
            text(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

/// A check that waits for the user's answer, in a thread.
fn check_waiting(
    d: &Daemon,
    session: &'static str,
    call: String,
) -> std::thread::JoinHandle<(i32, serde_json::Value)> {
    let socket = d.socket.clone();
    std::thread::spawn(move || check(&socket, session, &call, &["--wait", "30"]))
}

fn login_url(d: &Daemon) -> String {
    let out = run(d, &["console", "--no-open"]);
    assert!(
        out.status.success(),
        "carapace console failed: {}",
        text(&out.stderr)
    );
    let url = text(&out.stdout).trim().to_owned();
    assert!(url.contains("/login?token="), "{url}");
    url
}

fn get(hostport: &str, path: &str, extra_headers: &str) -> (String, String) {
    raw_http(
        hostport,
        &format!(
            "GET {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n{extra_headers}\r\n"
        ),
    )
    .unwrap_or_else(|e| panic!("GET {path}: {e}"))
}

#[test]
fn the_console_in_a_real_browser() {
    let Some(dir) = setup("the_console_in_a_real_browser") else {
        return;
    };
    let Some(chromium) = cdp::chromium() else {
        eprintln!("the_console_in_a_real_browser: skipped, needs chromium (cargo xtask setup)");
        return;
    };
    let port = free_port();
    let hostport = format!("127.0.0.1:{port}");
    // A copy: turning a denial into a rule writes the file.
    let rules = dir.path().join("personal-agent.yaml");
    std::fs::copy(PERSONAL, &rules).unwrap_or_else(|e| panic!("{e}"));
    let rules_arg = rules.display().to_string();
    let d = Daemon::start(
        Path::new(CARAPACED),
        dir.path(),
        &["--rules", &rules_arg, "--console", &hostport],
    );
    let shots = screenshots();
    only_the_human_gets_in(&d, &hostport, port);
    let mut b = Browser::start(&chromium);
    b.navigate(&login_url(&d));
    b.wait_for(
        "document.body && document.body.dataset.ready === 'true'",
        WAIT,
        "the page",
    );
    assert_eq!(
        b.eval("location.pathname"),
        "/",
        "the token leaves the address bar"
    );
    assert_eq!(b.eval("document.cookie"), "", "the cookie is HttpOnly");
    b.wait_for(
        "document.getElementById('live').textContent === 'live'",
        WAIT,
        "the live feed",
    );
    let sleeper = sessions_appear_live(&mut b, &d, &shots);
    an_approval_is_answered_by_a_click(&mut b, &d, &hostport, &shots);
    identical_requests_are_asked_once(&mut b, &d);
    denials_rules_and_charts(&mut b, &d, &hostport, &shots);
    a_denial_becomes_a_rule(&mut b, &d, &hostport, &shots, &rules);
    shadow_refusals_show_as_would_deny(&mut b, &d, &shots, dir.path());
    a_record_is_reviewed_and_saved(&mut b, &d, &hostport, &shots);
    let out = sleeper
        .join()
        .unwrap_or_else(|_| panic!("the run session panicked"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    for page in [
        "sessions",
        "approvals",
        "timeline",
        "rules",
        "charts",
        "allow",
        "shadow",
        "shadow-session",
        "record",
    ] {
        let png = shots.join(format!("{page}.png"));
        let size = std::fs::metadata(&png).map_or(0, |m| m.len());
        assert!(size > 1000, "{} is {size} bytes", png.display());
    }
    let log = d.log_text();
    assert!(
        log.contains("a process inside an agent session connected; refused"),
        "{log}"
    );
}

/// Without the token, with a made-up one, by another Host name or from inside a session
/// (even with a valid token): nothing is served.
fn only_the_human_gets_in(d: &Daemon, hostport: &str, port: u16) {
    let (status, body) = get(hostport, "/", "");
    assert!(status.contains(" 401 "), "{status} {body}");
    assert!(body.contains("carapace console"), "{body}");
    let (status, _) = get(hostport, "/api/events", "");
    assert!(status.contains(" 401 "), "{status}");
    let (status, _) = get(hostport, &format!("/login?token={}", "0".repeat(64)), "");
    assert!(status.contains(" 403 "), "{status}");
    let stolen = login_url(d);
    let path = &stolen[stolen.find("/login").unwrap_or(0)..];
    let (status, _) = raw_http(
        hostport,
        &format!("GET {path} HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.contains(" 403 "), "another Host: {status}");

    let agent_url = login_url(d);
    let out = run(d, &["run", "--", "curl", "-s", "-i", &agent_url]);
    let said = text(&out.stdout);
    assert!(
        said.contains("403") && said.contains("inside an agent session"),
        "from a session: {said}{}",
        text(&out.stderr)
    );
    assert!(!said.to_lowercase().contains("set-cookie"), "{said}");
    let socket = d.socket.display().to_string();
    let out = run(
        d,
        &[
            "run",
            "--",
            CARAPACE,
            "--socket",
            &socket,
            "console",
            "--no-open",
        ],
    );
    assert!(
        !out.status.success() && text(&out.stderr).contains("inside a Carapace session"),
        "a session asked for a login link: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// A session appears without reloading; returns the `carapace run` session's thread.
fn sessions_appear_live(
    b: &mut Browser,
    d: &Daemon,
    shots: &Path,
) -> std::thread::JoinHandle<Output> {
    // A session appears without reloading: an agent session (its first call) and a
    // `carapace run` session.
    let (code, v) = check(&d.socket, "cc-console-1", WEB, &[]);
    assert_eq!(code, 0, "{v}");
    b.wait_for(
        "[...document.querySelectorAll('#sessions-table tbody tr')].some(r => r.innerText.includes('cc-console-1') && r.innerText.includes('no-write-after-web'))",
        WAIT,
        "the agent session with the rule its web read switched on",
    );
    let sleeper = {
        let socket = d.socket.clone();
        std::thread::spawn(move || {
            cli(
                Path::new(CARAPACE),
                &socket,
                ["run", "--", "sleep", "4"],
                &[],
            )
        })
    };
    b.wait_for(
        "[...document.querySelectorAll('#sessions-table tbody tr')].some(r => r.innerText.includes('sleep 4'))",
        WAIT,
        "the run session",
    );
    // Its decisions are counted per layer, live.
    b.wait_for(
        "[...document.querySelectorAll('#sessions-table tbody tr')].some(r => r.innerText.includes('cc-console-1') && r.querySelector('[data-layer=\"tool-call\"]'))",
        WAIT,
        "the agent session's decisions per layer",
    );
    b.screenshot(&shots.join("sessions.png"));
    sleeper
}

fn an_approval_is_answered_by_a_click(b: &mut Browser, d: &Daemon, hostport: &str, shots: &Path) {
    // An approval arrives; a click answers it; the waiting check gets "allowed".
    let waiting = check_waiting(d, "cc-console-1", write("/tmp/carapace-console/a.txt"));
    b.navigate(&format!("http://{hostport}/#approvals"));
    b.wait_for(
        "document.querySelector('[data-approval]')",
        WAIT,
        "the approval request",
    );
    let card = b.eval("document.querySelector('[data-approval]').innerText");
    let card = card.as_str().unwrap_or_default();
    assert!(
        card.contains("/tmp/carapace-console/a.txt")
            && card.contains("no-write-after-web")
            && card.contains("writes need the user's approval"),
        "the operation, the gating rule and its message: {card}"
    );
    b.screenshot(&shots.join("approvals.png"));
    // "Allow this from now on…" on the pending request. The gating rule here is switched on
    // by what the session did (it read the web), and an exception cannot say "after the
    // web": the panel says so and names the rule (the path-rule case, where a proposal is
    // made, is tested through the CLI in rules_allow.rs). Cancel leaves the request waiting.
    b.click("[data-approval] button[data-allow-approval]");
    b.wait_for(
        "document.getElementById('allow-error').textContent.includes('no-write-after-web')",
        WAIT,
        "the reason no exception is offered for the waiting request",
    );
    let why = b.eval("document.getElementById('allow-error').textContent");
    assert!(
        why.as_str().is_some_and(
            |w| w.contains("session effect") && w.contains("/tmp/carapace-console/a.txt")
        ),
        "names the operation and why: {why}"
    );
    b.screenshot(&shots.join("approval-allow.png"));
    b.click("#allow-cancel");
    assert_eq!(
        b.eval("document.getElementById('allow-panel').hidden"),
        true,
        "Cancel closes the panel"
    );
    // Without the CSRF token (the page's own fetch, cookie and Origin included): refused.
    let forged = b.eval(
        "fetch('/api/answer', {method: 'POST', headers: {'Content-Type': 'application/json'}, \
         body: JSON.stringify({id: document.querySelector('[data-approval]').dataset.approval, answer: 'session'})}).then(r => r.status)",
    );
    assert_eq!(forged, 403, "an answer without the CSRF token");
    b.click("[data-approval] button[data-answer='session']");
    let (code, v) = waiting
        .join()
        .unwrap_or_else(|_| panic!("the waiting check panicked"));
    assert_eq!(code, 0, "approved by the click: {v}");
    assert_eq!(v["approval_status"], "approved", "{v}");
    b.wait_for(
        "!document.querySelector('[data-approval]')",
        WAIT,
        "the answered card gone",
    );
}

fn identical_requests_are_asked_once(b: &mut Browser, d: &Daemon) {
    // Fatigue: the same request twice is one card, asked twice; a denial answers both and
    // the next identical call at once.
    let call = write("/tmp/carapace-console/b.txt");
    let first = check_waiting(d, "cc-console-1", call.clone());
    b.wait_for(
        "document.querySelector('[data-approval]')",
        WAIT,
        "the first request",
    );
    let second = check_waiting(d, "cc-console-1", call.clone());
    b.wait_for(
        "document.querySelector('[data-approval] [data-asked=\"2\"]')",
        WAIT,
        "the request asked twice",
    );
    assert_eq!(
        b.eval("document.querySelectorAll('[data-approval]').length"),
        1,
        "one card for identical requests"
    );
    b.click("[data-approval] button[data-answer='deny']");
    for waiter in [first, second] {
        let (code, v) = waiter
            .join()
            .unwrap_or_else(|_| panic!("a waiting check panicked"));
        assert_eq!(code, 2, "denied means blocked: {v}");
    }
    let (code, v) = check(&d.socket, "cc-console-1", &call, &[]);
    assert_eq!(code, 2, "denied earlier in the session: {v}");
}

fn denials_rules_and_charts(b: &mut Browser, d: &Daemon, hostport: &str, shots: &Path) {
    // A denial shows in the timeline, by filter.
    let (code, v) = check(
        &d.socket,
        "cc-console-1",
        r#"{"tool":"Read","input":{"file_path":"/root/.ssh/id_rsa"}}"#,
        &[],
    );
    assert_eq!(code, 2, "{v}");
    b.navigate(&format!("http://{hostport}/#timeline"));
    b.wait_for(
        "document.body.dataset.ready === 'true'",
        WAIT,
        "the page again",
    );
    b.eval("(() => { const s = document.getElementById('f-decision'); s.value = 'block'; s.dispatchEvent(new Event('input')); })()");
    b.wait_for(
        "[...document.querySelectorAll('#timeline-table tbody tr')].some(r => r.dataset.decision === 'block' && r.innerText.includes('ssh'))",
        WAIT,
        "the denial in the timeline",
    );
    assert_eq!(
        b.eval("[...document.querySelectorAll('#timeline-table tbody tr')].every(r => r.dataset.decision === 'block')"),
        true,
        "the filter shows only denials"
    );
    b.wait_for(
        "document.getElementById('ledger').textContent.startsWith('ledger verified')",
        WAIT,
        "the ledger's verification",
    );
    b.screenshot(&shots.join("timeline.png"));

    b.navigate(&format!("http://{hostport}/#rules"));
    b.wait_for(
        "document.querySelector('#rules-table tr[data-rule=\"carapace-data\"]')",
        WAIT,
        "the rules",
    );
    for (rule, shown) in [
        ("no-write-after-web", &["personal-agent.yaml"][..]),
        ("carapace-console", &["locked", "daemon:console"][..]),
    ] {
        let row = b.eval(&format!(
            "document.querySelector('#rules-table tr[data-rule=\"{rule}\"]').innerText"
        ));
        let row = row.as_str().unwrap_or_default();
        assert!(
            shown.iter().all(|s| row.contains(s)),
            "rule {rule} shows {shown:?}: {row}"
        );
    }
    b.screenshot(&shots.join("rules.png"));

    b.navigate(&format!("http://{hostport}/#charts"));
    b.wait_for(
        "document.querySelector('#chart-rules rect[data-rule]') && document.querySelector('#chart-time polyline')",
        WAIT,
        "the charts",
    );
    b.screenshot(&shots.join("charts.png"));
}

/// "Allow from now on" on a denial in the timeline: the diff and the safety check are shown,
/// a locked rule is refused, a must-block case needs the confirmation, and "Always" writes
/// the rule file and reloads, after which the retry passes.
fn a_denial_becomes_a_rule(
    b: &mut Browser,
    d: &Daemon,
    hostport: &str,
    shots: &Path,
    rules: &Path,
) {
    let before = std::fs::read_to_string(rules).unwrap_or_else(|e| panic!("{e}"));
    b.navigate(&format!("http://{hostport}/#timeline"));
    b.wait_for(
        "document.body.dataset.ready === 'true'",
        WAIT,
        "the page again",
    );
    // The SSH key's denial: its rule is locked, so no change is offered.
    b.wait_for(
        "[...document.querySelectorAll('#timeline-table tbody tr')].some(r => r.innerText.includes('ssh-private-keys') && r.querySelector('[data-allow]'))",
        WAIT,
        "the SSH denial with its allow button",
    );
    b.eval("[...document.querySelectorAll('#timeline-table tbody tr')].find(r => r.innerText.includes('ssh-private-keys')).querySelector('[data-allow]').click()");
    b.wait_for(
        "document.getElementById('allow-error').textContent.includes('locked')",
        WAIT,
        "the locked rule refused",
    );

    // A built-in rule that is not locked.
    let read = r#"{"tool":"Read","input":{"file_path":"/root/.aws/config"}}"#;
    let (code, v) = check(&d.socket, "cc-console-1", read, &[]);
    assert_eq!(code, 2, "{v}");
    b.wait_for(
        "[...document.querySelectorAll('#timeline-table tbody tr')].some(r => r.innerText.includes('aws-credentials') && r.querySelector('[data-allow]'))",
        WAIT,
        "the AWS denial",
    );
    b.eval("[...document.querySelectorAll('#timeline-table tbody tr')].find(r => r.innerText.includes('aws-credentials')).querySelector('[data-allow]').click()");
    b.wait_for(
        "document.querySelector('#allow-check [data-newly-allowed]')",
        WAIT,
        "the proposal and its safety check",
    );
    let diff = b.eval("document.getElementById('allow-diff').innerText");
    let diff = diff.as_str().unwrap_or_default();
    assert!(
        diff.contains("+exceptions:")
            && diff.contains("+  - rule: \"aws-credentials\"")
            && diff.contains("+      - \"/root/.aws/config\""),
        "the diff: {diff}"
    );
    // `/root/.aws/config` is a must-block case of the credentials pack: shown as such, and
    // "Always" needs the confirmation.
    let must = b.eval("[...document.querySelectorAll('#allow-check [data-must-block=\"true\"]')].map(e => e.innerText).join('\\n')");
    let must = must.as_str().unwrap_or_default();
    assert!(
        must.contains("rules/fixtures/credentials.yaml:") && must.contains("/root/.aws/config"),
        "the must-block case: {must}"
    );
    assert_eq!(
        b.eval("document.getElementById('allow-confirm-label').hidden"),
        false
    );
    // The session's own refusals were replayed too (the SSH reads stay refused).
    let safety = b.eval("document.querySelector('#allow-check [data-newly-allowed]').innerText");
    let safety = safety.as_str().unwrap_or_default();
    assert!(
        !safety.contains(" 0 operations of the session"),
        "the session's history: {safety}"
    );
    b.screenshot(&shots.join("allow.png"));
    b.click("#allow-always");
    b.wait_for(
        "document.getElementById('allow-error').textContent.includes('confirm')",
        WAIT,
        "unconfirmed: refused",
    );
    assert_eq!(
        std::fs::read_to_string(rules).unwrap_or_default(),
        before,
        "nothing written without the confirmation"
    );
    b.click("#allow-confirm");
    b.click("#allow-always");
    b.wait_for(
        "document.getElementById('allow-result').dataset.written === 'true'",
        WAIT,
        "written and reloaded",
    );
    let after = std::fs::read_to_string(rules).unwrap_or_default();
    assert!(
        after.starts_with(before.trim_end())
            && after.contains("allowed from now on: read /root/.aws/config"),
        "the rule file: {after}"
    );
    // Reloaded: the timeline shows it, and the retry passes; the rest stays refused.
    b.eval("(() => { const s = document.getElementById('f-decision'); s.value = ''; s.dispatchEvent(new Event('input')); })()");
    b.wait_for(
        "[...document.querySelectorAll('#timeline-table tbody tr')].some(r => r.dataset.kind === 'rules-reload' && r.innerText.includes('allowed'))",
        WAIT,
        "the reload in the timeline",
    );
    let (code, v) = check(&d.socket, "cc-console-1", read, &[]);
    assert_eq!(code, 0, "the retry: {v}");
    let (code, v) = check(
        &d.socket,
        "cc-console-1",
        r#"{"tool":"Read","input":{"file_path":"/root/.aws/credentials"}}"#,
        &[],
    );
    assert_eq!(code, 2, "another file of the rule: {v}");
}

/// The rows of a table, as a JavaScript array expression.
fn rows(table: &str) -> String {
    format!("[...document.querySelectorAll('#{table} tbody tr')]")
}

/// A shadow session's refusal, seen live (the page is not reloaded): the session shows its
/// mode and a would-deny count in the tool-call layer, and the timeline, filtered by that
/// decision, shows the refusal with its rule.
fn shadow_refusals_show_as_would_deny(b: &mut Browser, d: &Daemon, shots: &Path, dir: &Path) {
    b.click("#allow-cancel");
    b.eval("location.hash = '#sessions'; window.carapaceSamePage = true");
    let gate = dir.join("shadow-done");
    let shadow = {
        let socket = d.socket.clone();
        let script = format!(
            "{CARAPACE} --socket {} check --json '{SSH_KEY}'; \
             while [ ! -e {} ]; do sleep 0.1; done",
            socket.display(),
            gate.display()
        );
        std::thread::spawn(move || {
            cli(
                Path::new(CARAPACE),
                &socket,
                ["run", "--shadow", "--", "sh", "-c", script.as_str()],
                &[],
            )
        })
    };
    let row = format!(
        "{}.find(r => r.dataset.mode === 'shadow' && r.querySelector('[data-layer=\"tool-call\"] [data-decision=\"would-deny\"]'))",
        rows("sessions-table")
    );
    b.wait_for(&row, WAIT, "the shadow session with its would-deny count");
    let shown = b.eval(&format!("{row}.innerText"));
    let shown = shown.as_str().unwrap_or_default();
    assert!(
        shown.contains("shadow mode") && shown.contains("would-deny 1"),
        "the session's mode and count: {shown}"
    );
    assert_eq!(
        b.eval(&format!(
            "{row}.querySelector('[data-layer=\"tool-call\"] [data-decision=\"block\"]')"
        )),
        serde_json::Value::Null,
        "a would-deny is not counted as a block"
    );
    b.screenshot(&shots.join("shadow-session.png"));

    b.eval("location.hash = '#timeline'");
    b.eval("(() => { const s = document.getElementById('f-decision'); s.value = 'would-deny'; s.dispatchEvent(new Event('input')); })()");
    b.wait_for(
        &format!(
            "{}.some(r => r.dataset.decision === 'would-deny' && r.innerText.includes('ssh-private-keys'))",
            rows("timeline-table")
        ),
        WAIT,
        "the would-deny in the timeline, with its rule",
    );
    assert_eq!(
        b.eval(&format!(
            "{}.every(r => r.dataset.decision === 'would-deny')",
            rows("timeline-table")
        )),
        true,
        "the filter shows only would-deny decisions"
    );
    assert_eq!(
        b.eval("window.carapaceSamePage === true"),
        true,
        "seen live, without a reload"
    );
    b.screenshot(&shots.join("shadow.png"));
    b.eval("(() => { const s = document.getElementById('f-decision'); s.value = ''; s.dispatchEvent(new Event('input')); })()");

    std::fs::write(&gate, "").unwrap_or_else(|e| panic!("{e}"));
    let out = shadow
        .join()
        .unwrap_or_else(|_| panic!("the shadow session panicked"));
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    let decision: serde_json::Value = serde_json::from_str(said.trim())
        .unwrap_or_else(|e| panic!("the check printed no JSON ({e}): {said}"));
    assert_eq!(
        decision["decision"], "allow",
        "shadow mode allows: {decision}"
    );
}

/// A proposal without its header's date line (a save proposes again, maybe a minute on).
fn undated(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with("# Recorded in session"))
        .collect()
}

const SSH_KEY: &str = r#"{"tool":"Read","input":{"file_path":"/root/.ssh/id_ed25519"}}"#;
const PROFILE: &str = "console-rec";

/// Runs a record session whose tool calls read two files, to its end; its id.
fn record_session(d: &Daemon) -> String {
    let socket = d.socket.display().to_string();
    let script: Vec<String> = ["notes.txt", "data.csv"]
        .iter()
        .map(|f| {
            let call = serde_json::json!({"tool": "Read", "input": {"file_path": format!("/srv/rec-console/{f}")}});
            format!("{CARAPACE} --socket {socket} check --json '{call}' >/dev/null")
        })
        .collect();
    let out = run(
        d,
        &["run", "--record", "--", "sh", "-c", &script.join(" && ")],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "the record session ran:\n{err}");
    err.lines()
        .find_map(|l| {
            l.strip_prefix("carapace: session ")
                .and_then(|rest| rest.split_once(" records what it touches"))
                .map(|(id, _)| id.to_owned())
        })
        .unwrap_or_else(|| panic!("no record-mode line:\n{err}"))
}

/// An ended record session is listed; its proposal (the rules, the header asking for a
/// review) is shown, saved as a profile that `rules check --profile` accepts, and not
/// saved over without "replace"; `POST /api/record` needs the CSRF token and is refused from
/// inside a session even with it.
fn a_record_is_reviewed_and_saved(b: &mut Browser, d: &Daemon, hostport: &str, shots: &Path) {
    let id = record_session(d);
    b.eval("location.hash = '#sessions'");
    let row = format!("#recordings-table tr[data-id=\"{id}\"][data-live=\"false\"]");
    b.wait_for(
        &format!("document.querySelector('{row}')"),
        WAIT,
        "the ended record session",
    );
    b.click(&format!("{row} button.record-propose"));
    b.wait_for(
        &format!("document.getElementById('record-panel').dataset.session === '{id}' && !document.getElementById('record-save').disabled"),
        WAIT,
        "the proposal",
    );
    let proposal = b.eval("document.getElementById('record-text').textContent");
    let proposal = proposal.as_str().unwrap_or_default().to_owned();
    for needle in [
        "# Carapace profile proposed by `carapace run --record`",
        "REVIEW IT BEFORE USE",
        &format!("session {id}"),
        "recorded-reads",
        "\"/srv/rec-console/notes.txt\"",
        "\"/srv/rec-console/data.csv\"",
    ] {
        assert!(proposal.contains(needle), "`{needle}` in:\n{proposal}");
    }
    b.eval(&format!(
        "document.getElementById('record-name').value = '{PROFILE}'"
    ));
    b.click("#record-save");
    b.wait_for(
        "document.getElementById('record-result').dataset.written",
        WAIT,
        "the profile saved",
    );
    let saved = d.data_dir.join("profiles").join(format!("{PROFILE}.yaml"));
    let written = std::fs::read_to_string(&saved).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        undated(&written),
        undated(&proposal),
        "the file is the text reviewed"
    );
    let data = d.data_dir.display().to_string();
    let checked = run(
        d,
        &["rules", "check", "--data-dir", &data, "--profile", PROFILE],
    );
    assert!(
        checked.status.success(),
        "rules check --profile: {}{}",
        text(&checked.stdout),
        text(&checked.stderr)
    );
    b.screenshot(&shots.join("record.png"));

    // A second save with the same name is refused unless "replace" is ticked (`--force`).
    let edited = "version: 1\n# edited by the user\n";
    std::fs::write(&saved, edited).unwrap_or_else(|e| panic!("{e}"));
    b.click("#record-save");
    b.wait_for(
        "document.getElementById('record-error').textContent.includes('replace an existing profile')",
        WAIT,
        "the existing profile refused",
    );
    assert_eq!(
        std::fs::read_to_string(&saved).unwrap_or_default(),
        edited,
        "not replaced"
    );
    b.click("#record-force");
    b.click("#record-save");
    b.wait_for(
        "document.getElementById('record-result').dataset.written",
        WAIT,
        "replaced",
    );
    assert_eq!(
        undated(&std::fs::read_to_string(&saved).unwrap_or_default()),
        undated(&proposal)
    );
    record_requests_need_the_token_and_the_user(b, d, hostport, &id);
}

/// `POST /api/record` by HTTP, with the browser's visit (its cookie and CSRF token):
/// without the token, refused; with it, saved; from inside a session, refused even with both.
fn record_requests_need_the_token_and_the_user(
    b: &mut Browser,
    d: &Daemon,
    hostport: &str,
    id: &str,
) {
    let cookies = b.call(
        "Network.getCookies",
        &serde_json::json!({"urls": [format!("http://{hostport}/")]}),
    );
    let cookie = cookies["cookies"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "carapace_console"))
        .map_or_else(
            || panic!("no console cookie: {cookies}"),
            |c| {
                format!(
                    "carapace_console={}",
                    c["value"].as_str().unwrap_or_default()
                )
            },
        );
    let csrf = b.eval("state.csrf");
    let csrf = csrf.as_str().unwrap_or_default().to_owned();
    assert!(!csrf.is_empty(), "the page's CSRF token");
    let origin = format!("http://{hostport}");
    let body = serde_json::json!({"session": id, "write": "by-http", "force": true}).to_string();
    let post = |headers: &str| {
        let (head, said) = http_exchange(
            hostport,
            &format!(
                "POST /api/record HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\nCookie: {cookie}\r\n\
                 Origin: {origin}\r\n{headers}\r\n{body}",
                body.len()
            ),
        )
        .unwrap_or_else(|e| panic!("POST /api/record: {e}"));
        (head.lines().next().unwrap_or_default().to_owned(), said)
    };
    let (status, said) = post("");
    assert!(
        status.contains(" 403 "),
        "without the CSRF token: {status} {said}"
    );
    let by_http = d.data_dir.join("profiles/by-http.yaml");
    assert!(!by_http.exists());
    let (status, said) = post(&format!("X-Carapace-Csrf: {csrf}\r\n"));
    assert!(status.contains(" 200 "), "with it: {status} {said}");
    assert!(by_http.exists(), "saved with the token");
    std::fs::remove_file(&by_http).unwrap_or_else(|e| panic!("{e}"));
    let url = format!("http://{hostport}/api/record");
    let csrf_header = format!("X-Carapace-Csrf: {csrf}");
    let cookie_header = format!("Cookie: {cookie}");
    let origin_header = format!("Origin: {origin}");
    let out = run(
        d,
        &[
            "run",
            "--",
            "curl",
            "-s",
            "-i",
            "-X",
            "POST",
            "-H",
            &cookie_header,
            "-H",
            &csrf_header,
            "-H",
            &origin_header,
            "-H",
            "Content-Type: application/json",
            "--data",
            &body,
            &url,
        ],
    );
    let said = text(&out.stdout);
    assert!(
        said.contains("403") && said.contains("inside an agent session"),
        "from a session: {said}{}",
        text(&out.stderr)
    );
    assert!(!by_http.exists(), "nothing saved from a session");
}
