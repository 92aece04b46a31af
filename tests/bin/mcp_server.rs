//! A small but real MCP stdio server for the `carapace mcp wrap` tests: newline-delimited
//! JSON-RPC 2.0 on stdin/stdout, with `initialize`, `tools/list` and one tool, `read_file`,
//! that reads a file. Every line it receives is appended to `$MCP_SERVER_LOG.in` and every
//! line it sends to `$MCP_SERVER_LOG.out`, so a test can compare bytes on both sides.
use std::io::{BufRead as _, Write as _};

use serde_json::{json, Value};

fn append(path: Option<&str>, bytes: &[u8]) {
    if let Some(path) = path {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut file) = file {
            let _ = file.write_all(bytes);
        }
    }
}

fn answer(request: &Value) -> Option<Value> {
    let id = request.get("id")?.clone();
    let method = request["method"].as_str().unwrap_or_default();
    let result = match method {
        "initialize" => json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "test-files", "version": "1.0.0"},
        }),
        "tools/list" => json!({"tools": [{
            "name": "read_file",
            "description": "Reads a text file",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        }]}),
        "tools/call" if request["params"]["name"] == "read_file" => {
            let path = request["params"]["arguments"]["path"]
                .as_str()
                .unwrap_or_default();
            match std::fs::read_to_string(path) {
                Ok(text) => json!({"content": [{"type": "text", "text": text}], "isError": false}),
                Err(e) => {
                    json!({"content": [{"type": "text", "text": e.to_string()}], "isError": true})
                }
            }
        }
        _ => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("Method not found: {method}")}}))
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn main() {
    let log = std::env::var("MCP_SERVER_LOG").ok();
    let (log_in, log_out) = (
        log.as_ref().map(|l| format!("{l}.in")),
        log.as_ref().map(|l| format!("{l}.out")),
    );
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    let mut line = Vec::new();
    let mut input = stdin.lock();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        append(log_in.as_deref(), &line);
        let Ok(request) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if let Some(reply) = answer(&request) {
            let mut bytes = reply.to_string().into_bytes();
            bytes.push(b'\n');
            append(log_out.as_deref(), &bytes);
            if stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return;
            }
        }
    }
}
