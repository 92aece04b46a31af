//! Conversation transcripts → the tool calls they hold (Layer 0). Accepts `OpenAI` chat
//! (`tool_calls`, legacy `function_call`), `OpenAI` Responses (`function_call` items),
//! Anthropic messages (`tool_use` blocks; a request body or a bare list) and Claude Code
//! JSONL (one event per line, with its `cwd`). Recognising calls by their own shape, at
//! any depth, keeps this robust to wrappers each format adds around them.
use serde_json::Value;

use super::call::ToolCall;

/// How deep a transcript may nest; deeper input is refused rather than walked.
const MAX_DEPTH: usize = 64;

/// A tool call found in a transcript.
#[derive(Clone, Debug, PartialEq)]
pub struct PastCall {
    pub call: ToolCall,
    /// The working directory recorded with it (Claude Code JSONL), if any.
    pub cwd: Option<String>,
}

/// The calls of a transcript, and the parts that could not be read (which the caller
/// treats as findings: a history Carapace cannot read is not a clean history).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transcript {
    pub calls: Vec<PastCall>,
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
            // JSONL: one JSON value per line.
            let mut any = false;
            for (n, line) in trimmed.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(line) {
                    Ok(v) => {
                        any = true;
                        let cwd = v.get("cwd").and_then(Value::as_str).map(str::to_owned);
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

/// The calls of a transcript already read as JSON (a request body's messages or items).
#[must_use]
pub fn from_value(v: &Value) -> Transcript {
    let mut out = Transcript::default();
    walk(v, None, &mut out, 0);
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
            if let Some(call) = as_call(v) {
                match call {
                    Ok(call) => out.calls.push(PastCall {
                        call,
                        cwd: cwd.map(str::to_owned),
                    }),
                    Err(e) => out.unreadable.push(format!("a tool call: {e}")),
                }
                return;
            }
            for value in obj.values() {
                walk(value, cwd, out, depth + 1);
            }
        }
        _ => {}
    }
}

/// A tool call in one of the formats' own shapes, or `None` if `v` is not one.
fn as_call(v: &Value) -> Option<Result<ToolCall, String>> {
    let obj = v.as_object()?;
    let kind = obj.get("type").and_then(Value::as_str);
    let named = |input_key: &str| -> Result<ToolCall, String> {
        let mut shaped = serde_json::Map::new();
        shaped.insert(
            "name".into(),
            obj.get("name").cloned().unwrap_or(Value::Null),
        );
        shaped.insert(
            "arguments".into(),
            obj.get(input_key).cloned().unwrap_or(Value::Null),
        );
        ToolCall::from_json(&Value::Object(shaped)).map_err(|e| e.to_string())
    };
    match kind {
        // Anthropic (and Claude Code) tool_use blocks; MCP and server tools alike.
        Some("tool_use" | "server_tool_use" | "mcp_tool_use") => Some(named("input")),
        // OpenAI Responses items.
        Some("function_call" | "custom_tool_call") if obj.contains_key("name") => {
            let key = if obj.contains_key("arguments") {
                "arguments"
            } else {
                "input"
            };
            Some(named(key))
        }
        Some("local_shell_call") => {
            let action = obj.get("action").cloned().unwrap_or(Value::Null);
            Some(Ok(ToolCall {
                tool: "local_shell".into(),
                input: action,
            }))
        }
        // OpenAI chat `tool_calls` entries.
        Some("function") if obj.contains_key("function") => {
            Some(ToolCall::from_json(v).map_err(|e| e.to_string()))
        }
        _ => {
            // Legacy `function_call: {name, arguments}` on a chat message.
            let f = obj.get("function_call")?.as_object()?;
            f.get("name")?;
            Some(ToolCall::from_json(&Value::Object(f.clone())).map_err(|e| e.to_string()))
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
    fn bad_arguments_are_unreadable_not_ignored() {
        let t = parse(
            r#"{"tool_calls":[{"type":"function","function":{"name":"shell","arguments":"{oops"}}]}"#,
        );
        assert!(t.calls.is_empty());
        assert_eq!(t.unreadable.len(), 1);
    }
}
