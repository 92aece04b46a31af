//! `carapace mcp wrap`: a client speaking MCP (newline-delimited JSON-RPC over stdio) to a
//! real MCP server (`mcp-test-server`) through the wrapper, with decisions from the daemon
//! and, when none runs, from the local rules.
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use carapace_tests::Daemon;
use serde_json::{json, Value};

use super::{setup, CARAPACE, CARAPACED};

const SERVER: &str = env!("CARGO_BIN_EXE_mcp-test-server");

struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// Every line this client sent, in order.
    sent: Vec<String>,
    log: std::path::PathBuf,
}

impl Session {
    fn start(socket: &Path, dir: &Path, extra: &[&str]) -> Self {
        let log = dir.join("server");
        let mut child = Command::new(CARAPACE)
            .arg("--socket")
            .arg(socket)
            .args(["mcp", "wrap", "--name", "files"])
            .args(extra)
            .arg("--")
            .arg(SERVER)
            .env("MCP_SERVER_LOG", &log)
            .env("CARAPACE_DATA_DIR", dir.join("no-data"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CARAPACE} mcp wrap: {e}"));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Self {
            child,
            stdin,
            stdout,
            sent: Vec::new(),
            log,
        }
    }

    fn send(&mut self, message: &Value) {
        let line = format!("{message}\n");
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("cannot write to the wrapper: {e}"));
        self.sent.push(line);
    }

    fn receive(&mut self) -> (String, Value) {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("cannot read from the wrapper: {e}"));
        assert!(!line.is_empty(), "the wrapper closed its output");
        let value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the wrapper sent a line that is not JSON ({e}): {line}"));
        (line, value)
    }

    fn call(&mut self, id: u64, method: &str, params: &Value) -> (String, Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let (line, reply) = self.receive();
        assert_eq!(reply["id"], id, "{line}");
        (line, reply)
    }

    /// Closes stdin, waits, and returns (what the server received, what it sent).
    fn finish(mut self) -> (String, String, std::process::ExitStatus) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("wait for the wrapper");
        let read =
            |ext: &str| std::fs::read_to_string(self.log.with_extension(ext)).unwrap_or_default();
        (read("in"), read("out"), status)
    }
}

/// The MCP conversation both tests run: initialize, list, an allowed call, a refused one.
/// Returns the refused call's error.
fn converse(session: &mut Session, dir: &Path, refused_path: &str) -> (Vec<String>, Value) {
    let readme = dir.join("README.md");
    std::fs::write(&readme, "hello from the project\n").expect("write README");
    let mut received = Vec::new();
    let (line, init) = session.call(
        1,
        "initialize",
        &json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "test-client", "version": "1"}}),
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "test-files", "{line}");
    received.push(line);
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let (line, list) = session.call(2, "tools/list", &json!({}));
    assert_eq!(list["result"]["tools"][0]["name"], "read_file", "{line}");
    received.push(line);
    let (line, ok) = session.call(
        3,
        "tools/call",
        &json!({"name": "read_file", "arguments": {"path": readme}}),
    );
    assert_eq!(
        ok["result"]["content"][0]["text"], "hello from the project\n",
        "{line}"
    );
    received.push(line);
    let (line, refused) = session.call(
        4,
        "tools/call",
        &json!({"name": "read_file", "arguments": {"path": refused_path}}),
    );
    assert!(refused.get("result").is_none(), "{line}");
    (received, refused["error"].clone())
}

fn assert_byte_exact(session: Session, received: &[String]) {
    let sent = session.sent.clone();
    let (server_in, server_out, status) = session.finish();
    assert!(status.success(), "the wrapper exited with {status}");
    // The server saw every line but the refused call (the last one), byte for byte.
    assert_eq!(server_in, sent[..sent.len() - 1].concat());
    // The client got the server's lines byte for byte.
    assert_eq!(server_out, received.concat());
}

#[test]
fn mcp_wrap_checks_tool_calls_locally_when_no_daemon_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut session = Session::start(&dir.path().join("no.sock"), dir.path(), &[]);
    let (received, error) = converse(&mut session, dir.path(), "/root/.ssh/id_rsa");
    assert_eq!(error["code"], -32001, "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("mcp__files__read_file"), "{message}");
    assert!(message.contains("[rule ssh-"), "{message}");
    assert_eq!(error["data"]["decision"], "block");
    assert_byte_exact(session, &received);
}

#[test]
fn mcp_wrap_asks_the_daemon_and_content_rules_apply() {
    let Some(dir) = setup("mcp_wrap_asks_the_daemon_and_content_rules_apply") else {
        return;
    };
    let rules = dir.path().join("rules.yaml");
    std::fs::write(
        &rules,
        "version: 1\nrules:\n  - id: no-evil-domain\n    match: { content: \"evil.example\" }\n    mode: block\n    message: \"Nothing about evil.example.\"\n",
    )
    .expect("write rules");
    let d = Daemon::start(
        Path::new(CARAPACED),
        dir.path(),
        &["--rules", rules.to_str().expect("utf-8 path")],
    );
    let mut session = Session::start(&d.socket, dir.path(), &[]);
    let (received, error) = converse(&mut session, dir.path(), "/srv/evil.example/notes.txt");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("[rule no-evil-domain]"), "{message}");
    assert_eq!(error["data"]["rules"][0], "no-evil-domain");
    assert_byte_exact(session, &received);
}
