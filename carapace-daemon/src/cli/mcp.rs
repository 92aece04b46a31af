//! `carapace mcp wrap -- SERVER_CMD…`: Layer 1 for an MCP stdio server. Sits between the
//! agent (our stdin/stdout) and the server (the child's), reads the newline-delimited
//! JSON-RPC messages, and checks each `tools/call` request before the server sees it. A
//! refused call is answered with a JSON-RPC error and never forwarded; every other message
//! passes through byte for byte, both ways.
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::Mutex;

use super::evaluator::{Evaluator, Fallback, Source};
use carapace_policy::rules::Mode;

/// Largest message read from either side.
const MAX_LINE: usize = 32 << 20;

/// JSON-RPC error code of a call Carapace refused (in the implementation-defined range).
pub const REFUSED: i64 = -32001;

#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// Run an MCP stdio server behind Carapace's tool-call check
    ///
    /// Configure the agent to start `carapace mcp wrap -- SERVER_CMD…` instead of
    /// `SERVER_CMD…`. Each `tools/call` is checked as the tool `mcp__NAME__TOOL` with the
    /// call's arguments as input (path, command, network and content rules apply); a refused
    /// call gets a JSON-RPC error (code -32001) saying why, and the server never sees it.
    /// Decisions come from carapaced when it runs, else from the local rules.
    #[command(after_help = "\
Examples:
  carapace mcp wrap -- npx -y @modelcontextprotocol/server-filesystem /srv/data
  carapace mcp wrap --name github -- github-mcp-server stdio
  claude mcp add files -- carapace mcp wrap --name files -- mcp-files /srv/data")]
    Wrap(WrapArgs),
}

#[derive(Debug, clap::Args)]
pub struct WrapArgs {
    /// The server's name in tool names (`mcp__NAME__TOOL`); default: the command's file name
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    #[command(flatten)]
    pub source: Source,
    /// The MCP server's command and arguments (put them after --)
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "SERVER_CMD"
    )]
    pub command: Vec<OsString>,
}

pub async fn run(socket: &Path, command: McpCommand) -> anyhow::Result<u8> {
    match command {
        McpCommand::Wrap(args) => wrap(socket, args).await,
    }
}

async fn wrap(socket: &Path, args: WrapArgs) -> anyhow::Result<u8> {
    let (program, rest) = args
        .command
        .split_first()
        .context("no server command given")?;
    let name = args.name.clone().unwrap_or_else(|| {
        Path::new(program)
            .file_name()
            .map_or_else(|| "server".to_owned(), |n| n.to_string_lossy().into_owned())
    });
    let eval = Evaluator::open(socket, &args.source, Fallback::Local).await?;
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", program.to_string_lossy()))?;
    let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take()) else {
        anyhow::bail!("the server's stdin and stdout are not pipes");
    };
    let client_out = Arc::new(Mutex::new(tokio::io::stdout()));
    let to_client = tokio::spawn(copy_lines(
        BufReader::new(server_out),
        Arc::clone(&client_out),
    ));
    let mut filter = Filter {
        eval,
        name,
        server: server_in,
        client: client_out,
    };
    let from_client = filter.run(BufReader::new(tokio::io::stdin())).await;
    // The agent hung up (or failed): close the server's stdin so that it exits.
    drop(filter);
    let status = child.wait().await.context("cannot wait for the server")?;
    let _ = to_client.await;
    from_client?;
    Ok(super::exit::exit_code(status))
}

/// Copies whole lines from the server to the agent, so that an error we write never lands in
/// the middle of one of the server's messages.
async fn copy_lines(
    mut from: BufReader<tokio::process::ChildStdout>,
    to: Arc<Mutex<tokio::io::Stdout>>,
) -> anyhow::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        if read_line(&mut from, &mut line).await? == 0 {
            return Ok(());
        }
        write_all(&to, &line).await?;
    }
}

async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    from: &mut R,
    line: &mut Vec<u8>,
) -> anyhow::Result<usize> {
    let n = from.read_until(b'\n', line).await.context("read")?;
    anyhow::ensure!(line.len() <= MAX_LINE, "a message is longer than 32 MiB");
    Ok(n)
}

async fn write_all<W: AsyncWrite + Unpin>(to: &Mutex<W>, bytes: &[u8]) -> anyhow::Result<()> {
    let mut to = to.lock().await;
    to.write_all(bytes).await.context("write")?;
    to.flush().await.context("flush")
}

struct Filter<W> {
    eval: Evaluator,
    name: String,
    server: tokio::process::ChildStdin,
    client: Arc<Mutex<W>>,
}

impl<W: AsyncWrite + Unpin> Filter<W> {
    async fn run<R: tokio::io::AsyncBufRead + Unpin>(&mut self, mut from: R) -> anyhow::Result<()> {
        let mut line = Vec::new();
        loop {
            line.clear();
            if read_line(&mut from, &mut line).await? == 0 {
                return Ok(());
            }
            match self.screen(&line).await {
                Screened::Forward => {
                    self.server
                        .write_all(&line)
                        .await
                        .context("write to the server")?;
                    self.server.flush().await.context("write to the server")?;
                }
                Screened::Answer(reply) => {
                    let mut bytes = reply.to_string().into_bytes();
                    bytes.push(b'\n');
                    write_all(&self.client, &bytes).await?;
                }
                Screened::Split { forward, reply } => {
                    let mut bytes = forward.to_string().into_bytes();
                    bytes.push(b'\n');
                    self.server
                        .write_all(&bytes)
                        .await
                        .context("write to the server")?;
                    self.server.flush().await.context("write to the server")?;
                    let mut bytes = reply.to_string().into_bytes();
                    bytes.push(b'\n');
                    write_all(&self.client, &bytes).await?;
                }
            }
        }
    }

    /// What to do with one message from the agent.
    async fn screen(&mut self, line: &[u8]) -> Screened {
        let text = String::from_utf8_lossy(line);
        if text.trim().is_empty() {
            return Screened::Forward;
        }
        let Ok(message) = serde_json::from_str::<Value>(&text) else {
            // What Carapace cannot read may still be a call the server can: not passed on.
            return Screened::Answer(error(
                &Value::Null,
                -32700,
                "Parse error: Carapace could not read this message, so it was not passed on",
                None,
            ));
        };
        match message {
            Value::Array(batch) => {
                let mut forward = Vec::new();
                let mut replies = Vec::new();
                for item in batch {
                    match self.refusal(&item).await {
                        Some(reply) => replies.push(reply),
                        None => forward.push(item),
                    }
                }
                match (replies.is_empty(), forward.is_empty()) {
                    (true, _) => Screened::Forward,
                    (false, true) => Screened::Answer(Value::Array(replies)),
                    (false, false) => Screened::Split {
                        forward: Value::Array(forward),
                        reply: Value::Array(replies),
                    },
                }
            }
            single => match self.refusal(&single).await {
                Some(reply) => Screened::Answer(reply),
                None => Screened::Forward,
            },
        }
    }

    /// The error answering `message` when it is a `tools/call` the rules refuse.
    async fn refusal(&mut self, message: &Value) -> Option<Value> {
        if message.get("method").and_then(Value::as_str) != Some("tools/call") {
            return None;
        }
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let params = message.get("params");
        let Some(tool) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
            return Some(error(
                &id,
                -32602,
                "Invalid params: a tools/call without a tool name was not passed on",
                None,
            ));
        };
        let input = params
            .and_then(|p| p.get("arguments"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        let full = format!("mcp__{}__{tool}", self.name);
        let call = json!({"tool": full, "input": input});
        match self.eval.check(&call, None).await {
            Ok(d) if d.decision >= Mode::Approve => {
                let verb = if d.decision == Mode::Block {
                    "block"
                } else {
                    "approve"
                };
                let rules: Vec<&str> = d.matches.iter().map(|m| m.id.as_str()).collect();
                eprintln!(
                    "carapace: refused the MCP call {full} ({verb}; rules {})",
                    rules.join(", ")
                );
                Some(error(
                    &id,
                    REFUSED,
                    &d.message,
                    Some(json!({"decision": verb, "rules": rules})),
                ))
            }
            Ok(_) => None,
            Err(e) => Some(error(
                &id,
                REFUSED,
                &format!("Carapace could not check this call ({e:#}), so it was not passed on"),
                None,
            )),
        }
    }
}

enum Screened {
    Forward,
    Answer(Value),
    /// A batch with refused calls: the rest goes on, the refusals come back.
    Split {
        forward: Value,
        reply: Value,
    },
}

fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}
