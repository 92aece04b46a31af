//! Tool calls in the shapes agents send them → [`Extracted`]. Known tools (Claude Code's,
//! Codex's `shell`, the guardrail task types) are read by their schema; anything else by
//! the words of its name and of its fields' names (`generic`), so an unknown or MCP tool
//! still meets path, command, network and content rules.
mod cli_tool;
mod code;
mod fields;
mod forge;
mod generic;

use serde_json::Value;

use super::operation::{Context, Extracted, Operation};
use super::{normalize, patch, shell};
use crate::rules::Action;

/// A tool call: the tool's name and its input.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The tool's name as the agent gave it (`Bash`, `Read`, `mcp__github__create_issue`).
    pub tool: String,
    /// Its arguments, as JSON (an object for every known tool).
    pub input: Value,
}

/// Why a request is not a tool call Carapace can check.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallError {
    /// The request is some other JSON value.
    #[error("the request is not a JSON object")]
    NotAnObject,
    #[error(
        "no tool name: expected `tool` + `input`, `tool_name` + `tool_input`, `name` + \
         `arguments` (OpenAI), `function` {{name, arguments}}, or `task_type` + `task_parameters`"
    )]
    /// None of the shapes that name a tool.
    NoTool,
    #[error("`arguments` is a string that is not JSON: {0}")]
    /// The string `arguments` of an `OpenAI` call, with the JSON parser's complaint.
    BadArguments(String),
    #[error("unknown task_type `{0}`; known: {known}", known = TASK_TYPES.join(", "))]
    /// A `task_type` outside `TASK_TYPES`.
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
        // Gemini's shell tool runs in its `directory`.
        let name = canonical(&tool);
        let keys = if is_shell_tool(&name) {
            SHELL_CWD_KEYS
        } else {
            CWD_KEYS
        };
        let cwd = field(&self.input, keys)
            .or_else(|| field(action(&self.input)?, keys))
            .or_else(|| base_dir(&self.input));
        // A tool that runs a command with an environment of its own (`{command, env: {…}}`):
        // the command sees those variables (`GIT_CONFIG_*`, `GIT_SSH_COMMAND`, `HOME`).
        let env = self
            .input
            .as_object()
            .and_then(|o| ENV_KEYS.iter().find_map(|k| o.get(*k)))
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty());
        let ctx = if cwd.is_some() || env.is_some() {
            let mut c = ctx.clone();
            if let Some(cwd) = cwd {
                c.cwd = normalize::path(cwd, ctx).unwrap_or_else(|| ctx.cwd.clone());
            }
            for (name, value) in env.into_iter().flatten() {
                let value = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(_) | Value::Bool(_) => value.to_string(),
                    _ => continue,
                };
                // The rules' `~` is the user's home, whatever the command is told.
                if name == "HOME" || name == "PWD" {
                    continue;
                }
                c.env.retain(|(n, _)| n != name);
                c.env.push((name.clone(), value));
            }
            own = c;
            &own
        } else {
            ctx
        };
        // What that environment makes run runs too: a command line (`GIT_SSH_COMMAND`,
        // `GIT_PAGER`), a script sourced (`BASH_ENV`), files loaded (`LD_PRELOAD`).
        for (name, value) in env.into_iter().flatten() {
            if let Some(value) = value.as_str() {
                shell::environment(name, value, ctx, &mut out);
            }
        }
        let known = known_tool(&tool, &name, &self.input, ctx, &mut out);
        if !known {
            generic::extract(&tool, &self.input, ctx, &mut out);
        }
        // Also for names a schema is known for: a git server's `execute_command` runs git.
        cli_tool::extract(&tool, &self.input, ctx, &mut out);
        // A forge's API deleting or force-moving a branch is the git push that would.
        forge::extract(&tool, &self.input, ctx, &mut out);
        collect_texts(&self.input, &mut out, 0);
        out
    }
}

/// The directory a call's relative paths are under when it names one beside them: a
/// `root`/`base_dir`/`workspace` field, or a `directory` next to a `filename`.
fn base_dir(input: &Value) -> Option<&str> {
    let obj = input.as_object()?;
    // Most calls have no such field: their keys are looked at as bytes first.
    let hint = |k: &str| {
        let b = k.as_bytes();
        [&b"root"[..], b"base", b"work", b"dir", b"folder"]
            .iter()
            .any(|w| b.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w)))
    };
    if obj.len() < 2 || !obj.keys().any(|k| hint(k)) {
        return None;
    }
    let mut base = None;
    let mut others = 0;
    for (k, v) in obj {
        let Some(role) = fields::role(k) else {
            continue;
        };
        let dir_field = role == fields::Role::Path
            && fields::words(k).last().is_some_and(|w| {
                ["dir", "directory", "folder"]
                    .iter()
                    .any(|d| w.eq_ignore_ascii_case(d))
            });
        match v.as_str() {
            Some(s) if role == fields::Role::Base || dir_field && base.is_none() => {
                base = Some(s);
            }
            _ if matches!(
                role,
                fields::Role::Path
                    | fields::Role::Paths
                    | fields::Role::Source
                    | fields::Role::Dest
                    | fields::Role::BareSource
                    | fields::Role::BareDest
            ) =>
            {
                others += 1;
            }
            _ => {}
        }
    }
    base.filter(|_| others > 0)
}

/// Codex's `local_shell` call puts what it runs in an `action` object.
fn action(input: &Value) -> Option<&Value> {
    get_ci(input, &["action"]).filter(|a| a.is_object())
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
    // Compared byte by byte: this runs for every key of every call against every known
    // field name, so it must neither allocate nor decode. `_`, `-` and ASCII letters are
    // single bytes that never occur inside a multi-byte character, so skipping and folding
    // bytes is skipping and folding characters.
    let (left, right) = (a.as_bytes(), b.as_bytes());
    let (mut at_left, mut at_right) = (0, 0);
    let separator = |c: &u8| matches!(c, b'_' | b'-');
    loop {
        while left.get(at_left).is_some_and(separator) {
            at_left += 1;
        }
        while right.get(at_right).is_some_and(separator) {
            at_right += 1;
        }
        match (left.get(at_left), right.get(at_right)) {
            (None, None) => return true,
            (Some(l), Some(r)) if l.eq_ignore_ascii_case(r) => {
                at_left += 1;
                at_right += 1;
            }
            _ => return false,
        }
    }
}

/// The fields the agents' own file tools name their one file with (Claude Code, Gemini CLI).
const FILE_KEYS: &[&str] = &["file_path", "absolute_path", "notebook_path"];
const CWD_KEYS: &[&str] = &["cwd", "workdir", "working_directory", "working_dir"];
/// The fields a command-running tool gives its command's environment in.
const ENV_KEYS: &[&str] = &["env", "environment", "env_vars", "envs"];
const SHELL_CWD_KEYS: &[&str] = &[
    "cwd",
    "workdir",
    "working_directory",
    "working_dir",
    "directory",
    "dir",
    // Gemini CLI's run_shell_command (0.61).
    "dir_path",
];
const COMMAND_KEYS: &[&str] = &[
    "command",
    "cmd",
    "script",
    "shell_command",
    "command_line",
    "cmdline",
    "argv",
];
/// A program run with an argument list, not a command line.
const PROGRAM_KEYS: &[&str] = &["program", "executable", "exe", "binary"];
const ARGS_KEYS: &[&str] = &["args", "arguments"];
const URL_KEYS: &[&str] = &["url", "uri", "endpoint", "href", "link"];

fn path_op(action: Action, raw: &str, ctx: &Context, out: &mut Extracted, content: Option<&str>) {
    if let Some(op) = op_on(action, raw, ctx, content) {
        out.op(op);
    }
}

/// [`path_op`] for one file written or deleted whole ([`Operation::one_file`]).
fn file_op(action: Action, raw: &str, ctx: &Context, out: &mut Extracted, content: Option<&str>) {
    if let Some(op) = op_on(action, raw, ctx, content) {
        out.op(Operation {
            one_file: action != Action::Read,
            ..op
        });
    }
}

fn op_on(action: Action, raw: &str, ctx: &Context, content: Option<&str>) -> Option<Operation> {
    let mut op = Operation::path(action, normalize::path(raw, ctx)?);
    if let Some(c) = content {
        op = op.with_content(normalize::text(c));
    }
    Some(op)
}

fn url_op(raw: &str, out: &mut Extracted, content: Option<String>) {
    let raw_n = normalize::text(raw);
    let named = normalize::urls(&raw_n);
    if !named.is_empty() {
        let content = content.unwrap_or_else(|| raw_n.clone());
        for (host, port) in named {
            let mut op = Operation::network(host, port);
            op.content = Some(content.clone());
            out.op(op);
        }
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
        Value::Array(words) => Some(quote_all(words)),
        _ => None,
    }
}

fn quote_all(words: &[Value]) -> String {
    words
        .iter()
        .filter_map(Value::as_str)
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command line an object of a tool's input runs: `command`/`cmd`/`argv` (a line or
/// an argv), or a `program`; either followed by an `args` list (`{"command": "bash",
/// "args": ["-c", …]}`, as MCP servers and process tools take them).
fn command_line(obj: &Value) -> Option<String> {
    let args = get_ci(obj, ARGS_KEYS)
        .and_then(Value::as_array)
        .map(|a| quote_all(a));
    let program = get_ci(obj, COMMAND_KEYS)
        .and_then(command_text)
        .or_else(|| field(obj, PROGRAM_KEYS).map(quote))?;
    Some(match args {
        Some(args) if !args.is_empty() => format!("{program} {args}"),
        _ => program,
    })
}

pub(super) fn quote(word: &str) -> String {
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

/// A tool's name as the tables below spell it: without an MCP prefix, lower case, without
/// `_` and `-` (`ApplyPatch`, `apply-patch` and `mcp__codex__apply_patch` are one tool).
fn canonical(tool: &str) -> String {
    local_name(tool)
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Tools that run a command line.
fn is_shell_tool(name: &str) -> bool {
    matches!(
        name,
        "bash"
            | "shell"
            | "localshell"
            | "execcommand"
            | "runshellcommand"
            | "runterminalcmd"
            | "executecommand"
            | "terminal"
            | "systemcommand"
            | "runinterminal"
            | "runcommand"
            | "container.exec"
    )
}

fn is_write_tool(name: &str) -> bool {
    matches!(
        name,
        "write" | "writefile" | "createfile" | "filewrite" | "foldercreate" | "writetofile"
    )
}

fn is_edit_tool(name: &str) -> bool {
    matches!(
        name,
        "edit"
            | "multiedit"
            | "notebookedit"
            | "strreplaceeditor"
            | "applypatch"
            | "editfile"
            | "replace"
            | "strreplacebasededittool"
            | "replaceinfile"
            | "applydiff"
    )
}

fn is_read_tool(name: &str) -> bool {
    matches!(
        name,
        "read"
            | "notebookread"
            | "readfile"
            | "readtextfile"
            | "view"
            | "fileread"
            | "readmultiplefiles"
            | "readmanyfiles"
            | "readfiles"
    )
}

/// The Claude Code name of what a tool of another agent or an MCP server does, so that a
/// rule written `tool: Bash` (or `Write`, `Edit`, `Read`, `WebFetch`, `WebSearch`) covers
/// Codex's `shell`, Gemini's `run_shell_command`, `mcp__filesystem__write_file`,
/// `mcp__fs__save_file`, and so on: by the name when it is a known one, else by its verbs
/// (`save_file` writes, `edit_block` edits). `None` for a tool of no such family.
#[must_use]
pub fn tool_family(tool: &str) -> Option<&'static str> {
    let name = canonical(tool);
    Some(match name.as_str() {
        n if is_shell_tool(n) => "Bash",
        n if is_write_tool(n) => "Write",
        n if is_edit_tool(n) => "Edit",
        n if is_read_tool(n) => "Read",
        "webfetch" | "fetch" | "browse" => "WebFetch",
        "websearch" | "googlewebsearch" | "internetsearch" => "WebSearch",
        _ => return fields::family_by_verbs(local_name(tool)),
    })
}

/// [`tool_family`] of a call, or, for an MCP tool whose name says nothing, what it was found
/// to do: one that writes or deletes files is of the `Write` family, whatever it is called.
/// Only MCP tools: a bare operation (a case file's, or one the kernel saw) is no agent's
/// tool, and a rule that lists tools is there to leave those alone.
#[must_use]
pub fn call_family(ext: &Extracted) -> Option<&'static str> {
    tool_family(&ext.tool).or_else(|| {
        let writes = ext
            .ops
            .iter()
            .any(|o| o.path.is_some() && matches!(o.action, Some(Action::Write | Action::Delete)));
        (ext.tool.starts_with("mcp__") && writes).then_some("Write")
    })
}

/// A web search: the query leaves the machine; the host is the search provider's.
fn web_search(input: &Value, out: &mut Extracted) {
    let query = field(input, &["query", "q", "search_query"]).unwrap_or_default();
    out.op(Operation {
        action: Some(Action::Network),
        content: Some(normalize::text(query)),
        ..Operation::default()
    });
}

/// Whether an MCP tool named plain `search` searches files rather than the web: its input
/// names a file or directory (`mcp__ripgrep__search {path, pattern}`), or its server is a
/// content searcher or a file system's (`mcp__rg__search`, `mcp__files__search`). Read by
/// its fields then, as any other tool: a content searcher reads its directory whole.
fn searches_files(tool: &str, input: &Value) -> bool {
    use fields::Role;
    const FILE_SERVERS: &[&str] = &[
        "grep",
        "ripgrep",
        "rg",
        "ag",
        "ack",
        "file",
        "files",
        "fs",
        "filesystem",
        "code",
    ];
    let Some(server) = tool
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .map(|(server, _)| server)
    else {
        return false;
    };
    fields::words(server)
        .iter()
        .any(|w| FILE_SERVERS.iter().any(|f| w.eq_ignore_ascii_case(f)))
        || input.as_object().is_some_and(|o| {
            o.keys().any(|k| {
                matches!(
                    fields::role(k),
                    Some(Role::Path | Role::Paths | Role::Base | Role::Cwd)
                )
            })
        })
}

/// Tools whose schema Carapace knows; returns false for the rest.
fn known_tool(tool: &str, name: &str, input: &Value, ctx: &Context, out: &mut Extracted) -> bool {
    match name {
        n if is_shell_tool(n) => {
            match command_line(input).or_else(|| command_line(action(input)?)) {
                Some(cmd) => shell::extract(&cmd, ctx, out),
                None => out.unparsable(format!("the {tool} call has no command")),
            }
        }
        n if is_read_tool(n) => {
            file_tool(Action::Read, tool, input, ctx, out, None);
        }
        // Listing a directory reads it; with no path, the working directory. Gemini CLI
        // names its own `list_directory` and `grep_search` (once `search_file_content`).
        "ls" | "listdir" | "listdirectory" | "glob" | "grep" | "grepsearch"
        | "searchfilecontent" => {
            // One directory, or a list of them (Copilot CLI's grep and glob take `paths`).
            let mut bases: Vec<&str> = field(input, &["path", "directory", "dir", "dir_path"])
                .into_iter()
                .collect();
            if bases.is_empty() {
                bases = get_ci(input, &["paths"])
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
            }
            if bases.is_empty() {
                bases.push(".");
            }
            for base in bases {
                path_op(Action::Read, base, ctx, out, None);
                // Grep searches every file below its path.
                if matches!(name, "grep" | "grepsearch" | "searchfilecontent") {
                    if let Some(p) = normalize::path(base, ctx) {
                        let tree = format!("{}/**", p.trim_end_matches('/'));
                        out.op(Operation::path(Action::Read, tree));
                    }
                }
            }
            if let Some(pattern) = field(input, &["pattern"])
                .filter(|p| name == "glob" && (p.starts_with('/') || p.starts_with('~')))
            {
                let dir = pattern.split(['*', '?', '[', '{']).next().unwrap_or("/");
                path_op(Action::Read, dir, ctx, out, None);
            }
        }
        n if is_write_tool(n) => {
            file_tool(
                Action::Write,
                tool,
                input,
                ctx,
                out,
                generic::content(input),
            );
        }
        n if is_edit_tool(n) => edit_tool(tool, input, ctx, out),
        "filedelete" | "deletefile" | "removefile" => {
            file_tool(Action::Delete, tool, input, ctx, out, None);
        }
        // The source is read (and, moved, loses its name); the destination is written.
        "movefile" | "move" | "renamefile" | "rename" | "copyfile" | "copy" => {
            let moves = !name.starts_with("copy");
            match generic::first_of(input, &[fields::Role::Source, fields::Role::BareSource])
                .or_else(|| generic::first_of(input, &[fields::Role::Path]))
            {
                Some(src) => {
                    // A directory copied or moved takes everything below it along.
                    let tree = format!("{}/**", src.trim_end_matches('/'));
                    for p in [src, tree.as_str()] {
                        path_op(Action::Read, p, ctx, out, None);
                        if moves {
                            path_op(Action::Delete, p, ctx, out, None);
                        }
                    }
                }
                None => out.unparsable(format!("the {tool} call names no source")),
            }
            match generic::first_of(input, &[fields::Role::Dest, fields::Role::BareDest]) {
                Some(dst) => path_op(Action::Write, dst, ctx, out, None),
                None => out.unparsable(format!("the {tool} call names no destination")),
            }
        }
        "webfetch" | "fetch" | "webscrape" | "apirequest" | "browse" => {
            if let Some(u) = field(input, URL_KEYS) {
                let body = field(input, &["body", "data", "payload"]);
                url_op(u, out, body.map(|b| format!("{u}\n{b}")));
            } else {
                // Gemini CLI's web_fetch takes no url: it fetches every URL its `prompt`
                // names (up to 20).
                let prompt = field(input, &["prompt"]).unwrap_or_default();
                let urls = urls_in(prompt);
                // An MCP server's own API call names a path on its server, which the server
                // chose (`mcp__github__api_request {method, path}`): no URL is missing.
                let own_api =
                    tool.starts_with("mcp__") && field(input, &["path", "route"]).is_some();
                if urls.is_empty() && !own_api {
                    out.unparsable(format!("the {tool} call has no url"));
                }
                for u in urls {
                    url_op(u, out, Some(prompt.to_owned()));
                }
            }
        }
        "downloadfile" => {
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
        "search" if searches_files(tool, input) => return false,
        "websearch" | "internetsearch" | "search" => web_search(input, out),
        "applicationopen" => {
            if let Some(app) = field(input, &["application", "app", "name", "path"]) {
                let app = normalize::text(app);
                if app.contains('/') {
                    path_op(Action::Execute, &app, ctx, out, None);
                }
                // The program it starts, for structured command rules as for the others.
                let base = app.rsplit('/').next().unwrap_or(&app).to_owned();
                out.argv(vec![base]);
                out.command(app);
            }
        }
        "runtool" => {
            if let Some(name) = field(input, &["tool", "tool_name", "name"]) {
                let name = normalize::text(name);
                out.argv(vec![name.clone()]);
                out.command(name);
            }
            return false;
        }
        "bulkoperation" => bulk(input, ctx, out),
        // Subagent prompts and summaries are text only; content rules see them.
        "task" | "agent" | "textsummarization" | "todowrite" | "exitplanmode" => {}
        _ => return false,
    }
    true
}

/// The URLs Gemini CLI's `web_fetch` fetches from its prompt: every whitespace-separated
/// token holding `://`, which it hands to a WHATWG parser whole (see `normalize::url`).
/// Also the rest of such a token from each `http` in it, so that text glued before a URL
/// (`see,https://…`, a control character) cannot hide it from the rules.
fn urls_in(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for token in text.split(|c: char| c.is_whitespace() || c == '\u{feff}') {
        if !token.contains("://") {
            continue;
        }
        out.push(token);
        let lower = token.to_ascii_lowercase();
        out.extend(
            lower
                .match_indices("http")
                .filter(|&(at, _)| at > 0)
                .map(|(at, _)| &token[at..]),
        );
    }
    out
}

/// A file tool: every file it names (`file_path`, `path`, `paths: […]`, `destPath`, …).
fn file_tool(
    action: Action,
    tool: &str,
    input: &Value,
    ctx: &Context,
    out: &mut Extracted,
    content: Option<&str>,
) {
    let mut paths = generic::named_paths(input);
    // Gemini's `read_many_files` also reads what its `include` globs match.
    if action == Action::Read {
        paths.extend(generic::globs(input));
    }
    files_of(action, tool, input, paths, ctx, out, content);
}

/// [`file_tool`] with the files the input names already found.
fn files_of(
    action: Action,
    tool: &str,
    input: &Value,
    paths: Vec<&str>,
    ctx: &Context,
    out: &mut Extracted,
    content: Option<&str>,
) {
    if paths.is_empty() {
        out.unparsable(format!("the {tool} call names no file"));
    }
    // One file for sure only when the call names a single path, in a field the agents'
    // own file tools name a file with: a generic tool's `directory` (with a `filename`
    // beside it, or none) may write into a directory's entries.
    let one_file = action == Action::Write
        && paths.len() == 1
        && FILE_KEYS
            .iter()
            .any(|k| input.get(k).and_then(Value::as_str) == paths.first().copied());
    for p in paths {
        if one_file {
            file_op(action, p, ctx, out, content);
        } else {
            path_op(action, p, ctx, out, content);
        }
    }
}

/// An edit: the file it names is written with the new text; a patch it carries writes
/// every file the patch names, whatever the call's own `path` says.
fn edit_tool(tool: &str, input: &Value, ctx: &Context, out: &mut Extracted) {
    // The text editor tool's `view` command shows a file (or lists a directory): a read.
    if field(input, &["command"]).is_some_and(|c| c.trim().eq_ignore_ascii_case("view")) {
        let paths = generic::named_paths(input);
        files_of(Action::Read, tool, input, paths, ctx, out, None);
        return;
    }
    let mut content: Vec<&str> = generic::content(input).into_iter().collect();
    if let Some(edits) = input.get("edits").and_then(Value::as_array) {
        content.extend(edits.iter().filter_map(generic::content));
    }
    let content = content.join("\n");
    let patched = apply_patches(input, true, ctx, out);
    let paths = generic::named_paths(input);
    if paths.is_empty() && patched {
        return;
    }
    files_of(Action::Write, tool, input, paths, ctx, out, Some(&content));
}

/// The files of every patch among the input's strings: in any field when the tool applies
/// patches (`all`), else in `patch`/`diff` fields. Returns whether there was one.
fn apply_patches(input: &Value, all: bool, ctx: &Context, out: &mut Extracted) -> bool {
    let Some(obj) = input.as_object() else {
        return false;
    };
    let mut found = false;
    for (key, value) in obj {
        let Some(text) = value.as_str() else {
            continue;
        };
        let patch_key = || {
            fields::words(key)
                .last()
                .is_some_and(|w| w.eq_ignore_ascii_case("patch") || w.eq_ignore_ascii_case("diff"))
        };
        if !(all || patch_key()) || !patch::is_patch(text) {
            continue;
        }
        found = true;
        for change in patch::changes(text) {
            let content = (change.action == Action::Write).then_some(text);
            file_op(change.action, &change.path, ctx, out, content);
        }
    }
    found
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::same_key;

    /// The key comparison by characters, as it was written first.
    fn by_chars(a: &str, b: &str) -> bool {
        fn norm(s: &str) -> impl Iterator<Item = char> + '_ {
            s.chars()
                .filter(|c| *c != '_' && *c != '-')
                .map(|c| c.to_ascii_lowercase())
        }
        norm(a).eq(norm(b))
    }

    proptest! {
        /// Byte by byte, keys compare as characters do, non-ASCII included.
        #[test]
        fn keys_compare_as_characters_do(
            a in "[a-cA-C_\\-éÉß]{0,6}",
            b in "[a-cA-C_\\-éÉß]{0,6}",
        ) {
            prop_assert_eq!(same_key(&a, &b), by_chars(&a, &b));
            prop_assert_eq!(same_key(&a, &a.to_ascii_uppercase()), true);
        }
    }
}
