//! Tool calls in the shapes agents send them → [`Extracted`]. Known tools (Claude Code's,
//! Codex's `shell`, the guardrail task types) are read by their schema; anything else by
//! its field names, so an unknown or MCP tool still meets path, command, network and
//! content rules.
use serde_json::Value;

use super::normalize;
use super::operation::{Context, Extracted, Operation};
use super::shell;
use crate::rules::Action;

/// A tool call: the tool's name and its input.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub tool: String,
    pub input: Value,
}

/// Why a request is not a tool call Carapace can check.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallError {
    #[error("the request is not a JSON object")]
    NotAnObject,
    #[error(
        "no tool name: expected `tool` + `input`, `tool_name` + `tool_input`, `name` + \
         `arguments` (OpenAI), `function` {{name, arguments}}, or `task_type` + `task_parameters`"
    )]
    NoTool,
    #[error("`arguments` is a string that is not JSON: {0}")]
    BadArguments(String),
    #[error("unknown task_type `{0}`; known: {known}", known = TASK_TYPES.join(", "))]
    UnknownTask(String),
}

/// The guardrail task types (DESIGN.md "Evaluation semantics").
pub const TASK_TYPES: &[&str] = &[
    "FILE_READ",
    "FILE_WRITE",
    "FILE_DELETE",
    "FOLDER_CREATE",
    "SYSTEM_COMMAND",
    "RUN_TOOL",
    "APPLICATION_OPEN",
    "INTERNET_SEARCH",
    "WEB_SCRAPE",
    "API_REQUEST",
    "DOWNLOAD_FILE",
    "TEXT_SUMMARIZATION",
    "BULK_OPERATION",
];

impl ToolCall {
    /// Reads a tool call from any of the shapes agents and harnesses use.
    pub fn from_json(v: &Value) -> Result<Self, CallError> {
        let obj = v.as_object().ok_or(CallError::NotAnObject)?;
        if let Some(task) = obj.get("task_type").and_then(Value::as_str) {
            let task = task.trim().to_ascii_uppercase();
            if !TASK_TYPES.contains(&task.as_str()) {
                return Err(CallError::UnknownTask(task));
            }
            let input = obj.get("task_parameters").cloned().unwrap_or(Value::Null);
            return Ok(Self { tool: task, input });
        }
        // OpenAI tool_calls entries wrap the call in `function`.
        let obj = obj
            .get("function")
            .and_then(Value::as_object)
            .unwrap_or(obj);
        let tool = ["tool", "tool_name", "name"]
            .iter()
            .find_map(|k| obj.get(*k).and_then(Value::as_str))
            .ok_or(CallError::NoTool)?;
        let input = ["input", "tool_input", "arguments", "parameters", "args"]
            .iter()
            .find_map(|k| obj.get(*k));
        let input = match input {
            // OpenAI sends arguments as a JSON string.
            Some(Value::String(s)) => {
                serde_json::from_str(s).map_err(|e| CallError::BadArguments(e.to_string()))?
            }
            Some(v) => v.clone(),
            None => Value::Null,
        };
        Ok(Self {
            tool: tool.to_owned(),
            input,
        })
    }

    /// What the call does, seen from `ctx`.
    #[must_use]
    pub fn extract(&self, ctx: &Context) -> Extracted {
        let tool = normalize::text(&self.tool);
        let mut out = Extracted::new(tool.clone());
        // The caller's context as it is, unless the call names its own directory (the
        // environment it carries can be large: no copy per call).
        let own;
        let ctx = match field(&self.input, &["cwd", "workdir", "working_directory"]) {
            Some(cwd) => {
                own = Context {
                    cwd: normalize::path(cwd, ctx).unwrap_or_else(|| ctx.cwd.clone()),
                    ..ctx.clone()
                };
                &own
            }
            None => ctx,
        };
        let known = known_tool(&tool, &self.input, ctx, &mut out);
        if !known {
            generic(&self.input, ctx, &mut out);
        }
        collect_texts(&self.input, &mut out, 0);
        out
    }
}

/// First string among `keys` (matched case-insensitively, `_`/`-` ignored).
fn field<'a>(input: &'a Value, keys: &[&str]) -> Option<&'a str> {
    let obj = input.as_object()?;
    keys.iter().find_map(|k| {
        obj.iter()
            .find(|(name, _)| same_key(name, k))
            .and_then(|(_, v)| v.as_str())
    })
}

fn same_key(a: &str, b: &str) -> bool {
    // Compared character by character: this runs for every key of every call against
    // every known field name, so it must not allocate.
    fn norm(s: &str) -> impl Iterator<Item = char> + '_ {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .map(|c| c.to_ascii_lowercase())
    }
    norm(a).eq(norm(b))
}

const PATH_KEYS: &[&str] = &[
    "file_path",
    "filepath",
    "path",
    "target_file",
    "file",
    "filename",
    "notebook_path",
    "absolute_path",
    "target",
    "destination",
    "dest",
    "source",
    "src",
    "directory",
    "dir",
];
/// Fields that name where a tool puts something: written whatever else the tool does.
const DEST_KEYS: &[&str] = &[
    "destination",
    "dest",
    "dst",
    "target",
    "target_path",
    "destination_path",
    "new_path",
    "to",
    "output",
    "output_path",
    "output_file",
    "outfile",
    "out",
    "save_path",
    "save_to",
];
/// Fields that name what a move or copy takes.
const SOURCE_KEYS: &[&str] = &[
    "source",
    "src",
    "source_path",
    "old_path",
    "from",
    "path",
    "file_path",
];
const COMMAND_KEYS: &[&str] = &["command", "cmd", "script", "shell_command"];
const URL_KEYS: &[&str] = &["url", "uri", "endpoint", "href", "link"];
const CONTENT_KEYS: &[&str] = &[
    "content",
    "contents",
    "new_string",
    "new_source",
    "text",
    "data",
    "body",
];

fn path_op(action: Action, raw: &str, ctx: &Context, out: &mut Extracted, content: Option<&str>) {
    if let Some(p) = normalize::path(raw, ctx) {
        let mut op = Operation::path(action, p);
        if let Some(c) = content {
            op = op.with_content(normalize::text(c));
        }
        out.op(op);
    }
}

fn url_op(raw: &str, out: &mut Extracted, content: Option<String>) {
    let raw_n = normalize::text(raw);
    if let Some((host, port)) = normalize::url(&raw_n) {
        let mut op = Operation::network(host, port);
        op.content = Some(content.unwrap_or(raw_n));
        out.op(op);
    } else if normalize::file_url_path(&raw_n).is_some() {
        // file:// URLs fetch local files.
        if let Some(path) = normalize::path(&raw_n, &Context::default()) {
            out.op(Operation::path(Action::Read, path));
        }
    }
}

fn command_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        // Codex and others send argv arrays; quote each word so the shell parser sees them
        // as they were.
        Value::Array(words) => Some(
            words
                .iter()
                .filter_map(Value::as_str)
                .map(quote)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn get_ci<'a>(input: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    let obj = input.as_object()?;
    keys.iter()
        .find_map(|k| obj.iter().find(|(n, _)| same_key(n, k)).map(|(_, v)| v))
}

/// A tool's own name without an MCP server's prefix: `mcp__filesystem__write_file` →
/// `write_file`, so that a server's file and shell tools are read by their schema.
fn local_name(tool: &str) -> &str {
    tool.strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .map_or(tool, |(_, name)| name)
}

/// The Claude Code name of what a tool of another agent or an MCP server does, so that a
/// rule written `tool: Bash` (or `Write`, `Edit`, `Read`, `WebFetch`, `WebSearch`) covers
/// Codex's `shell`, Gemini's `run_shell_command`, `mcp__filesystem__write_file`, and so
/// on. `None` for a tool of no such family.
#[must_use]
pub fn tool_family(tool: &str) -> Option<&'static str> {
    let name = local_name(tool).to_ascii_lowercase();
    Some(match name.as_str() {
        "bash" | "shell" | "local_shell" | "exec_command" | "run_shell_command"
        | "run_terminal_cmd" | "execute_command" | "terminal" | "run_in_terminal"
        | "run_command" | "system_command" => "Bash",
        "write" | "write_file" | "create_file" | "file_write" => "Write",
        "edit"
        | "edit_file"
        | "replace"
        | "apply_patch"
        | "str_replace_editor"
        | "str_replace_based_edit_tool"
        | "multiedit" => "Edit",
        "read" | "read_file" | "read_text_file" | "read_many_files" | "view" | "file_read" => {
            "Read"
        }
        "webfetch" | "web_fetch" | "fetch" | "browse" => "WebFetch",
        "websearch" | "web_search" | "google_web_search" | "internet_search" => "WebSearch",
        _ => return None,
    })
}

/// Tools whose schema Carapace knows; returns false for the rest.
fn known_tool(tool: &str, input: &Value, ctx: &Context, out: &mut Extracted) -> bool {
    let lower = local_name(tool).to_ascii_lowercase();
    match lower.as_str() {
        "bash" | "shell" | "local_shell" | "exec_command" | "run_shell_command"
        | "run_terminal_cmd" | "execute_command" | "terminal" | "system_command"
        | "run_in_terminal" | "run_command" => {
            match get_ci(input, COMMAND_KEYS).and_then(command_text) {
                Some(cmd) => shell::extract(&cmd, ctx, out),
                None => out.unparsable(format!("the {tool} call has no command")),
            }
        }
        "read" | "notebookread" | "read_file" | "read_text_file" | "view" | "file_read" => {
            file_tool(Action::Read, tool, input, ctx, out, None);
        }
        // Listing a directory reads it; with no path, the working directory.
        "ls" | "list_dir" | "glob" | "grep" => {
            let base = field(input, &["path", "directory", "dir"]).unwrap_or(".");
            path_op(Action::Read, base, ctx, out, None);
            // Grep searches every file below its path.
            if lower == "grep" {
                if let Some(p) = normalize::path(base, ctx) {
                    let tree = format!("{}/**", p.trim_end_matches('/'));
                    out.op(Operation::path(Action::Read, tree));
                }
            }
            if let Some(pattern) = field(input, &["pattern"])
                .filter(|p| lower == "glob" && (p.starts_with('/') || p.starts_with('~')))
            {
                let dir = pattern.split(['*', '?', '[', '{']).next().unwrap_or("/");
                path_op(Action::Read, dir, ctx, out, None);
            }
        }
        "write" | "write_file" | "create_file" | "file_write" | "folder_create" => {
            file_tool(
                Action::Write,
                tool,
                input,
                ctx,
                out,
                field(input, CONTENT_KEYS),
            );
        }
        "edit"
        | "multiedit"
        | "notebookedit"
        | "str_replace_editor"
        | "apply_patch"
        | "edit_file"
        | "replace"
        | "str_replace_based_edit_tool" => {
            edit_tool(tool, input, ctx, out);
        }
        "file_delete" | "delete_file" | "remove_file" => {
            file_tool(Action::Delete, tool, input, ctx, out, None);
        }
        // The source is read (and, moved, loses its name); the destination is written.
        "move_file" | "move" | "rename_file" | "rename" | "copy_file" | "copy" => {
            let moves = !lower.starts_with("copy");
            match field(input, SOURCE_KEYS) {
                Some(src) => {
                    path_op(Action::Read, src, ctx, out, None);
                    if moves {
                        path_op(Action::Delete, src, ctx, out, None);
                    }
                }
                None => out.unparsable(format!("the {tool} call names no source")),
            }
            match field(input, DEST_KEYS) {
                Some(dst) => path_op(Action::Write, dst, ctx, out, None),
                None => out.unparsable(format!("the {tool} call names no destination")),
            }
        }
        "webfetch" | "web_fetch" | "fetch" | "web_scrape" | "api_request" | "browse" => {
            match field(input, URL_KEYS) {
                Some(u) => {
                    let body = field(input, &["body", "data", "payload"]);
                    url_op(u, out, body.map(|b| format!("{u}\n{b}")));
                }
                None => out.unparsable(format!("the {tool} call has no url")),
            }
        }
        "download_file" => {
            if let Some(u) = field(input, URL_KEYS) {
                url_op(u, out, None);
            }
            if let Some(p) = field(
                input,
                &["destination", "dest", "path", "file_path", "save_path"],
            ) {
                path_op(Action::Write, p, ctx, out, None);
            }
        }
        "websearch" | "web_search" | "internet_search" | "search" => {
            // The query leaves the machine; the host is the search provider's.
            let query = field(input, &["query", "q", "search_query"]).unwrap_or_default();
            out.op(Operation {
                action: Some(Action::Network),
                content: Some(normalize::text(query)),
                ..Operation::default()
            });
        }
        "application_open" => {
            if let Some(app) = field(input, &["application", "app", "name", "path"]) {
                let app = normalize::text(app);
                if app.contains('/') {
                    path_op(Action::Execute, &app, ctx, out, None);
                }
                out.command(app);
            }
        }
        "run_tool" => {
            if let Some(name) = field(input, &["tool", "tool_name", "name"]) {
                out.command(normalize::text(name));
            }
            return false;
        }
        "bulk_operation" => bulk(input, ctx, out),
        // Subagent prompts and summaries are text only; content rules see them.
        "task" | "agent" | "text_summarization" | "todowrite" | "exitplanmode" => {}
        _ => return false,
    }
    true
}

fn file_tool(
    action: Action,
    tool: &str,
    input: &Value,
    ctx: &Context,
    out: &mut Extracted,
    content: Option<&str>,
) {
    match field(input, PATH_KEYS) {
        Some(p) => path_op(action, p, ctx, out, content),
        None => out.unparsable(format!("the {tool} call names no file")),
    }
}

fn edit_tool(tool: &str, input: &Value, ctx: &Context, out: &mut Extracted) {
    let mut content: Vec<&str> = field(input, CONTENT_KEYS).into_iter().collect();
    if let Some(edits) = input.get("edits").and_then(Value::as_array) {
        content.extend(edits.iter().filter_map(|e| field(e, CONTENT_KEYS)));
    }
    let content = content.join("\n");
    if field(input, PATH_KEYS).is_none() && tool.eq_ignore_ascii_case("apply_patch") {
        patch_paths(input, ctx, out);
    } else {
        file_tool(Action::Write, tool, input, ctx, out, Some(&content));
    }
}

fn bulk(input: &Value, ctx: &Context, out: &mut Extracted) {
    let items = get_ci(input, &["operations", "tasks", "items"]).and_then(Value::as_array);
    for item in items.into_iter().flatten() {
        match ToolCall::from_json(item) {
            Ok(inner) => out.merge(inner.extract(ctx)),
            Err(e) => out.unparsable(format!("a bulk operation step is not a task: {e}")),
        }
    }
}

/// `*** Update File: path` / `+++ b/path` lines of a patch.
fn patch_paths(input: &Value, ctx: &Context, out: &mut Extracted) {
    let patch = field(input, &["patch", "input", "diff"]).unwrap_or_default();
    for line in patch.lines() {
        let target = line
            .strip_prefix("*** Update File: ")
            .or_else(|| line.strip_prefix("*** Add File: "))
            .or_else(|| line.strip_prefix("+++ b/"))
            .or_else(|| line.strip_prefix("+++ "));
        if let Some(p) = target {
            path_op(Action::Write, p.trim(), ctx, out, Some(patch));
        }
        if let Some(p) = line.strip_prefix("*** Delete File: ") {
            path_op(Action::Delete, p.trim(), ctx, out, None);
        }
        // A moved file's new name is written with the patch's content.
        if let Some(p) = line.strip_prefix("*** Move to: ") {
            path_op(Action::Write, p.trim(), ctx, out, Some(patch));
        }
    }
}

/// Unknown tools (MCP included): fields that name paths, commands or URLs by their usual
/// names. A tool that carries content or a `new_string` writes; otherwise it reads.
fn generic(input: &Value, ctx: &Context, out: &mut Extracted) {
    walk_fields(input, ctx, out, 0);
}

fn walk_fields(input: &Value, ctx: &Context, out: &mut Extracted, depth: usize) {
    if depth > 8 {
        return;
    }
    match input {
        Value::Object(obj) => {
            let writes = obj
                .keys()
                .any(|k| CONTENT_KEYS.iter().any(|c| same_key(k, c)));
            let content = field(input, CONTENT_KEYS);
            for (k, v) in obj {
                if let Some(s) = v.as_str() {
                    // A destination spelled as a path (`to: "json"` is a format, not a file).
                    if DEST_KEYS.iter().any(|p| same_key(k, p))
                        && looks_like_path(s)
                        && (s.contains('/') || s.starts_with('~'))
                    {
                        path_op(Action::Write, s, ctx, out, content);
                    } else if PATH_KEYS.iter().any(|p| same_key(k, p)) && looks_like_path(s) {
                        let action = if writes { Action::Write } else { Action::Read };
                        path_op(action, s, ctx, out, if writes { content } else { None });
                    } else if COMMAND_KEYS.iter().any(|c| same_key(k, c)) {
                        shell::extract(s, ctx, out);
                    } else if URL_KEYS.iter().any(|u| same_key(k, u)) {
                        url_op(s, out, None);
                    }
                } else if COMMAND_KEYS.iter().any(|c| same_key(k, c)) {
                    if let Some(cmd) = command_text(v) {
                        shell::extract(&cmd, ctx, out);
                    }
                } else {
                    walk_fields(v, ctx, out, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            for v in items {
                walk_fields(v, ctx, out, depth + 1);
            }
        }
        _ => {}
    }
}

fn looks_like_path(s: &str) -> bool {
    let s = s.trim();
    !s.is_empty() && !s.contains('\n') && s.len() < 4096
}

/// Every string in the input, for content rules (bounded depth: inputs are untrusted).
fn collect_texts(v: &Value, out: &mut Extracted, depth: usize) {
    if depth > 16 {
        out.unparsable("the tool input is nested too deeply to check");
        return;
    }
    match v {
        Value::String(s) => {
            let t = normalize::text(s);
            for decoded in normalize::decode_payloads(&t) {
                out.text(decoded);
            }
            out.text(t);
        }
        Value::Array(items) => items.iter().for_each(|i| collect_texts(i, out, depth + 1)),
        Value::Object(obj) => obj.values().for_each(|i| collect_texts(i, out, depth + 1)),
        _ => {}
    }
}
