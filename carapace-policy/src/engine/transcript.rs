//! Conversation transcripts → the tool calls they hold (Layer 0). Accepts `OpenAI` chat
//! (`tool_calls`, legacy `function_call`), `OpenAI` Responses (`function_call` items),
//! Anthropic messages (`tool_use` blocks; a request body or a bare list) and Claude Code
//! JSONL (one event per line, with its `cwd`). Recognising calls by their own shape, at
//! any depth, keeps this robust to wrappers each format adds around them.
use serde_json::Value;

use super::call::{CallError, ToolCall};

/// How deep a transcript may nest; deeper input is refused rather than walked.
const MAX_DEPTH: usize = 64;

/// A tool call found in a transcript.
#[derive(Clone, Debug, PartialEq)]
pub struct PastCall {
    /// The call as the agent made it.
    pub call: ToolCall,
    /// The working directory recorded with it (Claude Code JSONL), if any.
    pub cwd: Option<String>,
}

/// The calls of a transcript, and the parts that could not be read (which the caller
/// treats as findings: a history Carapace cannot read is not a clean history).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transcript {
    /// The tool calls, in the order the conversation holds them.
    pub calls: Vec<PastCall>,
    /// Why each unreadable part could not be read (a message for the finding).
    pub unreadable: Vec<String>,
}

/// Parses a transcript in any of the supported forms.
#[must_use]
pub fn parse(text: &str) -> Transcript {
    let mut out = Transcript::default();
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return out;
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => walk(&v, None, &mut out, 0),
        Err(whole) => {
            // JSONL: one JSON value per line. Claude Code records the working directory on
            // every line, Codex on the session's and each turn's first line (in `payload`),
            // Copilot in its session start (`data.context`): the last one seen holds.
            let mut any = false;
            let mut cwd: Option<String> = None;
            for (n, line) in trimmed.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(line) {
                    Ok(v) => {
                        any = true;
                        if let Some(dir) = recorded_cwd(&v) {
                            cwd = Some(dir.to_owned());
                        }
                        walk(&v, cwd.as_deref(), &mut out, 0);
                    }
                    Err(e) => out
                        .unreadable
                        .push(format!("line {}: not JSON ({e})", n + 1)),
                }
            }
            if !any {
                out.unreadable.clear();
                out.unreadable.push(format!(
                    "the transcript is neither JSON nor JSONL ({whole})"
                ));
            }
        }
    }
    out
}

/// The working directory a transcript line records, in the agents' places for it.
fn recorded_cwd(line: &Value) -> Option<&str> {
    [
        &line["cwd"],
        &line["payload"]["cwd"],
        &line["data"]["context"]["cwd"],
    ]
    .into_iter()
    .find_map(Value::as_str)
}

/// The calls of a transcript already read as JSON (a request body's messages or items).
#[must_use]
pub fn from_value(v: &Value) -> Transcript {
    let mut out = Transcript::default();
    walk(v, None, &mut out, 0);
    out
}

/// The calls of one item of a conversation's list (a message), read as [`from_value`] reads
/// each item of the list: a conversation read message by message finds the same calls, but
/// for a call repeated across two messages, which counts once per message.
#[must_use]
pub fn from_item(v: &Value) -> Transcript {
    let mut out = Transcript::default();
    walk(v, None, &mut out, 1);
    out
}

fn walk(v: &Value, cwd: Option<&str>, out: &mut Transcript, depth: usize) {
    if depth > MAX_DEPTH {
        out.unreadable.push(format!(
            "the transcript nests deeper than {MAX_DEPTH} levels"
        ));
        return;
    }
    match v {
        Value::Array(items) => {
            for item in items {
                walk(item, cwd, out, depth + 1);
            }
        }
        Value::Object(obj) => {
            if let Some(Value::Array(calls)) = obj.get("toolCalls") {
                // Gemini CLI's chat records and Copilot's hook input: `{id, name, args}`.
                for c in calls {
                    match c.as_object().filter(|c| c.contains_key("name")) {
                        Some(call) => push(out, named(call, "name", "args"), cwd),
                        None => walk(c, cwd, out, depth + 1),
                    }
                }
            }
            if let Some(call) = as_call(v) {
                push(out, call, cwd);
                return;
            }
            for (key, value) in obj {
                // A `toolCalls` list was read above; anything else under that name is walked.
                if key != "toolCalls" || !value.is_array() {
                    walk(value, cwd, out, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Records a call found, or why it could not be read. A call recorded again right after
/// (Copilot logs the model's request, the hook's input and the execution of each) counts
/// once: its verdict is the same.
fn push(out: &mut Transcript, call: Result<ToolCall, CallError>, cwd: Option<&str>) {
    /// How far back a repeat is looked for: the records of one call sit close together.
    const RECENT: usize = 64;
    match call {
        Ok(call) => {
            let past = PastCall {
                call,
                cwd: cwd.map(str::to_owned),
            };
            let recent = out.calls.len().saturating_sub(RECENT);
            if !out.calls[recent..].contains(&past) {
                out.calls.push(past);
            }
        }
        Err(e) => out.unreadable.push(format!("a tool call: {e}")),
    }
}

/// The call of an object naming its tool under `name_key` and its input under `input_key`
/// (a JSON object, or a string holding one); Codex's MCP calls carry their server as
/// `namespace`, which is part of the name hooks and rules see (`mcp__files__read_file`).
fn named(
    obj: &serde_json::Map<String, Value>,
    name_key: &str,
    input_key: &str,
) -> Result<ToolCall, CallError> {
    let name = match (
        obj.get("namespace").and_then(Value::as_str),
        obj.get(name_key),
    ) {
        (Some(space), Some(Value::String(name))) if !space.is_empty() => {
            Value::String(format!("{space}__{name}"))
        }
        (_, name) => name.cloned().unwrap_or(Value::Null),
    };
    let mut shaped = serde_json::Map::new();
    shaped.insert("name".into(), name);
    shaped.insert(
        "arguments".into(),
        obj.get(input_key).cloned().unwrap_or(Value::Null),
    );
    ToolCall::from_json(&Value::Object(shaped))
}

/// A tool call in one of the formats' own shapes, or `None` if `v` is not one.
fn as_call(v: &Value) -> Option<Result<ToolCall, CallError>> {
    let obj = v.as_object()?;
    let kind = obj.get("type").and_then(Value::as_str);
    if let Some(Value::Object(f)) = obj.get("functionCall") {
        // Gemini API parts (`generateContent` requests and answers).
        if f.contains_key("name") {
            return Some(named(f, "name", "args"));
        }
    }
    if obj.contains_key("toolName") && obj.contains_key("arguments") {
        // Copilot's `tool.execution_start` events.
        return Some(named(obj, "toolName", "arguments"));
    }
    match kind {
        // Anthropic (and Claude Code) tool_use blocks; MCP and server tools alike.
        Some("tool_use" | "server_tool_use" | "mcp_tool_use") => Some(named(obj, "name", "input")),
        // OpenAI Responses items.
        Some("function_call" | "custom_tool_call") if obj.contains_key("name") => {
            let key = if obj.contains_key("arguments") {
                "arguments"
            } else {
                "input"
            };
            Some(named(obj, "name", key))
        }
        // Copilot's `toolRequests` (a tool definition has `parameters`, not `arguments`).
        Some("function") if obj.contains_key("name") && obj.contains_key("arguments") => {
            Some(named(obj, "name", "arguments"))
        }
        Some("local_shell_call") => {
            let action = obj.get("action").cloned().unwrap_or(Value::Null);
            Some(Ok(ToolCall {
                tool: "local_shell".into(),
                input: action,
            }))
        }
        // OpenAI chat `tool_calls` entries.
        Some("function") if obj.contains_key("function") => Some(ToolCall::from_json(v)),
        _ => {
            // Legacy `function_call: {name, arguments}` on a chat message.
            let f = obj.get("function_call")?.as_object()?;
            f.get("name")?;
            Some(ToolCall::from_json(&Value::Object(f.clone())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(t: &Transcript) -> Vec<&str> {
        t.calls.iter().map(|c| c.call.tool.as_str()).collect()
    }

    #[test]
    fn openai_chat() {
        let t = parse(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
            "function":{"name":"shell","arguments":"{\"command\":\"cat ~/.ssh/id_rsa\"}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"..."},
            {"role":"assistant","function_call":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}]}"#,
        );
        assert!(t.unreadable.is_empty(), "{:?}", t.unreadable);
        assert_eq!(tools(&t), ["shell", "read_file"]);
        assert_eq!(t.calls[0].call.input["command"], "cat ~/.ssh/id_rsa");
    }

    #[test]
    fn anthropic_messages_and_responses_items() {
        let t = parse(
            r#"[{"role":"assistant","content":[{"type":"text","text":"ok"},
            {"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},
            {"type":"function_call","call_id":"x","name":"exec","arguments":"{\"cmd\":\"id\"}"}]"#,
        );
        assert_eq!(tools(&t), ["Bash", "exec"]);
    }

    #[test]
    fn claude_code_jsonl_keeps_cwd_and_reports_bad_lines() {
        let t = parse(concat!(
            r#"{"type":"user","cwd":"/p","message":{"role":"user","content":"go"}}"#,
            "\n",
            r#"{"type":"assistant","cwd":"/p","message":{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Read","input":{"file_path":"x.txt"}}]}}"#,
            "\n{not json\n"
        ));
        assert_eq!(tools(&t), ["Read"]);
        assert_eq!(t.calls[0].cwd.as_deref(), Some("/p"));
        assert_eq!(t.unreadable.len(), 1);
    }

    #[test]
    fn gemini_chat_records_and_api_parts() {
        // Gemini CLI's chat JSONL: a message recorded, then again with its tool calls, and
        // `$set` rewrites; the API's `functionCall` parts; results are not calls.
        let t = parse(concat!(
            r#"{"sessionId":"s","kind":"main"}"#,
            "\n",
            r#"{"id":"m1","type":"gemini","content":"ok"}"#,
            "\n",
            r#"{"id":"m1","type":"gemini","content":"ok","toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"cat ~/.ssh/id_rsa"},"status":"error"}]}"#,
            "\n",
            r#"{"$set":{"messages":[{"type":"gemini","toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"cat ~/.ssh/id_rsa"}}]}]}}"#,
            "\n",
            r#"{"type":"user","content":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"error":"blocked"}}}]}"#,
            "\n",
            r#"{"contents":[{"role":"model","parts":[{"functionCall":{"name":"read_file","args":{"file_path":"/etc/shadow"}}}]}]}"#,
        ));
        assert!(t.unreadable.is_empty(), "{:?}", t.unreadable);
        assert_eq!(tools(&t), ["run_shell_command", "read_file"]);
        assert_eq!(t.calls[1].call.input["file_path"], "/etc/shadow");
    }

    #[test]
    fn copilot_events_count_each_call_once() {
        let t = parse(concat!(
            r#"{"type":"session.start","data":{"context":{"cwd":"/work/app"}}}"#,
            "\n",
            r#"{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"a","name":"bash","arguments":{"command":"ls"},"type":"function"}]}}"#,
            "\n",
            r#"{"type":"tool.execution_start","data":{"toolCallId":"a","toolName":"bash","arguments":{"command":"ls"}}}"#,
            "\n",
            r#"{"type":"hook.start","data":{"input":{"toolCalls":[{"id":"a","name":"bash","args":{"command":"ls"}},{"id":"b","name":"files-read_file","args":{"path":"x"}}]}}}"#,
        ));
        assert_eq!(tools(&t), ["bash", "files-read_file"]);
        assert_eq!(t.calls[0].cwd.as_deref(), Some("/work/app"));
    }

    #[test]
    fn codex_rollouts_keep_the_turns_cwd_and_mcp_namespace() {
        let t = parse(concat!(
            r#"{"type":"session_meta","payload":{"cwd":"/p"}}"#,
            "\n",
            r#"{"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cat a\"}","call_id":"1"}}"#,
            "\n",
            r#"{"type":"turn_context","payload":{"cwd":"/q"}}"#,
            "\n",
            r#"{"type":"response_item","payload":{"type":"function_call","name":"read_file","namespace":"mcp__files","arguments":"{\"path\":\"b\"}","call_id":"2"}}"#,
        ));
        assert!(t.unreadable.is_empty(), "{:?}", t.unreadable);
        assert_eq!(tools(&t), ["exec_command", "mcp__files__read_file"]);
        assert_eq!(t.calls[0].cwd.as_deref(), Some("/p"));
        assert_eq!(t.calls[1].cwd.as_deref(), Some("/q"));
    }

    #[test]
    fn a_tool_calls_key_that_is_not_a_list_hides_nothing() {
        let t = parse(
            r#"{"toolCalls":{"x":{"type":"tool_use","id":"a","name":"Bash","input":{"command":"id"}}}}"#,
        );
        assert_eq!(tools(&t), ["Bash"]);
    }

    #[test]
    fn tool_definitions_are_not_calls() {
        let t = parse(
            r#"{"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}}],"input":[]}"#,
        );
        assert!(t.calls.is_empty(), "{:?}", t.calls);
    }

    #[test]
    fn bad_arguments_are_unreadable_not_ignored() {
        let t = parse(
            r#"{"tool_calls":[{"type":"function","function":{"name":"shell","arguments":"{oops"}}]}"#,
        );
        assert!(t.calls.is_empty());
        assert_eq!(t.unreadable.len(), 1);
    }
}
