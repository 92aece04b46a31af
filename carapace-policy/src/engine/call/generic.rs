//! Tools of no known schema (MCP servers', other agents'): their fields are read by the
//! words of their names (`fields::role`) and what the tool does to them by the verbs of
//! its own (`fields::verb`): `mcp__fs__save_file {location, content}` writes `location`,
//! `mcp__fs__delete {path}` deletes it, `mcp__process__spawn {program, args}` runs a
//! command, `run_cell {source}` runs a notebook cell.
use serde_json::{Map, Value};

use super::fields::{self, Role, Verb};
use super::{apply_patches, code, command_line, get_ci, path_op, shell, url_op};
use crate::engine::normalize;
use crate::engine::operation::{Context, Extracted};
use crate::rules::Action;

/// How deep nested objects are followed (inputs are untrusted).
const MAX_DEPTH: usize = 8;

/// What the tool's name says, for every object of its input.
struct Tool<'a> {
    verb: Verb,
    /// The tool applies patches (`apply_patch`, `apply_diff`, `patch_file`): a patch in
    /// any of its fields is applied.
    patches: bool,
    /// The tool types into a running shell or process (`interact_with_process`,
    /// `write_stdin`, `send_keys` of a terminal): its `input` is a command line.
    feeds_shell: bool,
    /// The language its code fields are in, when its name says (`run_python`).
    language: Option<&'a str>,
    /// The tool searches the contents of the files below the directory it is given
    /// (`mcp__rg__grep`, `grep_files`): the directory is read whole.
    searches_contents: bool,
    ctx: &'a Context,
}

pub(super) fn extract(tool: &str, input: &Value, ctx: &Context, out: &mut Extracted) {
    let name = super::local_name(tool);
    // The server's name counts too (`mcp__tmux__send_keys`, `mcp__python__run`); `mcp` and
    // the separators are no words of either.
    let words = fields::words(tool);
    let has = |w: &str| words.iter().any(|x| x.eq_ignore_ascii_case(w));
    let tool = Tool {
        verb: fields::verb(name),
        patches: has("patch") || has("diff"),
        searches_contents: ["grep", "ripgrep", "rg", "ag", "ack"]
            .iter()
            .any(|w| has(w)),
        feeds_shell: [
            "process", "terminal", "stdin", "repl", "pty", "tty", "console", "tmux", "shell",
            "bash",
        ]
        .iter()
        .any(|w| has(w)),
        language: words.iter().copied().find(|w| {
            [
                "python",
                "bash",
                "shell",
                "node",
                "javascript",
                "ruby",
                "perl",
                "sh",
            ]
            .iter()
            .any(|l| w.eq_ignore_ascii_case(l))
        }),
        ctx,
    };
    walk(&tool, input, out, 0);
}

fn walk(tool: &Tool<'_>, input: &Value, out: &mut Extracted, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match input {
        Value::Object(obj) => object(tool, input, obj, out, depth),
        Value::Array(items) => {
            for v in items {
                walk(tool, v, out, depth + 1);
            }
        }
        _ => {}
    }
}

fn object(
    tool: &Tool<'_>,
    input: &Value,
    obj: &Map<String, Value>,
    out: &mut Extracted,
    depth: usize,
) {
    let ctx = tool.ctx;
    if let Some(cmd) = command_line(input) {
        shell::extract(&cmd, ctx, out);
    }
    apply_patches(input, tool.patches, ctx, out);
    let content = content(input);
    let carries_content = obj.keys().any(|k| fields::role(k) == Some(Role::Content));
    let taken = taken_actions(tool.verb, carries_content);
    let language = get_ci(
        input,
        &["language", "lang", "kernel", "kernel_name", "runtime"],
    )
    .and_then(Value::as_str)
    .or(tool.language);
    let roles: Vec<Option<Role>> = obj.keys().map(|k| fields::role(k)).collect();
    let any = |set: &[Role]| roles.iter().flatten().any(|r| set.contains(r));
    // A source named beside a destination is copied, whatever the tool's name says
    // (`sync`, `backup`, `zip {inputs, output}`): a directory goes whole.
    let pair =
        any(&[Role::Source, Role::BareSource, Role::Paths]) && any(&[Role::Dest, Role::BareDest]);
    let tree = tree_verb(tool.verb) || pair || tool.searches_contents;
    // A base directory is a path itself only when the call names no other.
    let base_alone = !any(&[
        Role::Path,
        Role::Paths,
        Role::Source,
        Role::BareSource,
        Role::Dest,
        Role::BareDest,
    ]);
    for ((key, value), role) in obj.iter().zip(roles.iter().copied()) {
        let Some(s) = value.as_str() else {
            match (role, value) {
                // `paths: […]`, and `path: […]` too.
                (Some(Role::Paths | Role::Path | Role::Source), Value::Array(items)) => {
                    let actions = if role == Some(Role::Source) {
                        source_actions(tool.verb)
                    } else {
                        taken
                    };
                    for p in items
                        .iter()
                        .filter_map(Value::as_str)
                        .filter(|p| plausible(p))
                    {
                        named(tool, p, actions, tree, content, out);
                    }
                    // `files: [{path, content}, …]`
                    walk(tool, value, out, depth + 1);
                }
                (Some(Role::Globs), Value::Array(items)) => {
                    for p in items
                        .iter()
                        .filter_map(Value::as_str)
                        .filter(|p| plausible(p))
                    {
                        path_op(Action::Read, p, ctx, out, None);
                    }
                }
                // Handled with the object (`command_line`); an object there is walked
                // (`{args: {path, content}}`).
                (Some(Role::Command | Role::Args | Role::Program), v) if !v.is_object() => {}
                _ => walk(tool, value, out, depth + 1),
            }
            continue;
        };
        // A tool that runs things runs its `source` or `input` (a notebook cell).
        let runs = tool.verb == Verb::Run
            && (matches!(role, Some(Role::Source | Role::BareSource))
                || ["input", "cell", "query"]
                    .iter()
                    .any(|k| key.eq_ignore_ascii_case(k)));
        if role == Some(Role::Code) || runs {
            shell::extract(&code::as_shell(s, language), ctx, out);
        } else if tool.feeds_shell
            && ["input", "chars", "keys", "text", "data", "line"]
                .iter()
                .any(|k| key.eq_ignore_ascii_case(k))
        {
            typed_input(s, ctx, out);
        }
        // A `source` that is a file as well as code: the file is read too.
        match role {
            Some(Role::Path | Role::Paths) if plausible(s) => {
                named(tool, s, taken, tree, content, out);
            }
            // Spelled as a path: a chat tool's `workspace: acme` names no directory.
            Some(Role::Base) if base_alone && plausible(s) && spelled_as_path(s) => {
                named(tool, s, taken, tree, content, out);
            }
            Some(Role::Source) if plausible(s) => {
                named(tool, s, source_actions(tool.verb), tree, content, out);
            }
            Some(Role::BareSource) if plausible(s) && spelled_as_path(s) => {
                named(tool, s, source_actions(tool.verb), tree, None, out);
            }
            Some(Role::Dest) if plausible(s) => path_op(Action::Write, s, ctx, out, content),
            // A destination spelled as a path (`to: "json"` is a format, not a file).
            Some(Role::BareDest) if plausible(s) && spelled_as_path(s) => {
                path_op(Action::Write, s, ctx, out, content);
            }
            Some(Role::Globs) if plausible(s) => path_op(Action::Read, s, ctx, out, None),
            // A file URI is the file, done to as the tool's name says (`write_resource
            // {uri: file:///…}` writes it).
            Some(Role::Url) if normalize::file_url_path(s).is_some() => {
                named(tool, s, taken, tree, content, out);
            }
            Some(Role::Url) => url_op(s, out, None),
            _ => {}
        }
    }
}

/// One path a call names, done to with `actions`; with what is below it when a directory
/// goes whole (`tree`).
fn named(
    tool: &Tool<'_>,
    path: &str,
    actions: &[Action],
    tree: bool,
    content: Option<&str>,
    out: &mut Extracted,
) {
    let ctx = tool.ctx;
    for action in actions {
        path_op(*action, path, ctx, out, content.filter(|_| writes(*action)));
    }
    if tree {
        let below = format!("{}/**", path.trim_end_matches('/'));
        for action in actions {
            path_op(*action, &below, ctx, out, None);
        }
    }
}

/// Text typed into a running process: a shell's command line, or a REPL's code (Python,
/// most often), which no shell parser takes; that is no reason to refuse it, so text the
/// shell grammar refuses is read as code as well as word by word.
fn typed_input(text: &str, ctx: &Context, out: &mut Extracted) {
    let mut found = Extracted::default();
    shell::extract(text, ctx, &mut found);
    // Only the grammar's refusal is forgiven: limits of the analysis still fail closed.
    let before = found.unparsable.len();
    found
        .unparsable
        .retain(|why| !why.starts_with("the shell command could not be parsed"));
    if found.unparsable.len() < before {
        shell::extract(&code::as_shell(text, None), ctx, &mut found);
    }
    out.merge(found);
}

/// What a tool does to the files its `path`-like fields name.
fn taken_actions(verb: Verb, carries_content: bool) -> &'static [Action] {
    match verb {
        Verb::Delete => &[Action::Delete],
        Verb::Move => &[Action::Read, Action::Delete],
        Verb::Copy => &[Action::Read],
        Verb::Write => &[Action::Write],
        _ if carries_content => &[Action::Write],
        Verb::Run | Verb::Read => &[Action::Read],
    }
}

/// Verbs whose source, when a directory, is taken whole.
fn tree_verb(verb: Verb) -> bool {
    matches!(verb, Verb::Copy | Verb::Move | Verb::Delete)
}

/// What a tool does to the file a `source`-like field names.
fn source_actions(verb: Verb) -> &'static [Action] {
    match verb {
        Verb::Delete => &[Action::Delete],
        Verb::Move => &[Action::Read, Action::Delete],
        _ => &[Action::Read],
    }
}

fn writes(action: Action) -> bool {
    action == Action::Write
}

/// A value that could be a path at all (one line, not huge).
fn plausible(s: &str) -> bool {
    let s = s.trim();
    !s.is_empty() && !s.contains('\n') && s.len() < 4096
}

/// A value spelled the way only paths are: with a slash, from home, or hidden.
fn spelled_as_path(s: &str) -> bool {
    let s = s.trim();
    (s.contains('/') || s.starts_with('~') || s.starts_with('.')) && !s.contains("://")
}

/// What a call writes: its first content field (`content`, `new_string`, `CodeContent`).
pub(super) fn content(input: &Value) -> Option<&str> {
    input.as_object()?.iter().find_map(|(k, v)| {
        v.as_str()
            .filter(|_| fields::role(k) == Some(Role::Content))
    })
}

/// The first string of a field whose role is among `roles`.
pub(super) fn first_of<'a>(input: &'a Value, roles: &[Role]) -> Option<&'a str> {
    input.as_object()?.iter().find_map(|(k, v)| {
        let role = fields::role(k)?;
        let s = v.as_str().filter(|s| plausible(s))?;
        let bare = matches!(role, Role::BareDest | Role::BareSource);
        (roles.contains(&role) && (!bare || spelled_as_path(s))).then_some(s)
    })
}

/// Every file a file tool's input names: its path fields, path lists and destinations
/// (a singular field holding a list, a plural one a string); a base directory when it is
/// the only one; in nested request objects (`{request: {path}}`, `files: [{path}]`) when
/// the top names none.
pub(super) fn named_paths(input: &Value) -> Vec<&str> {
    named_paths_at(input, 0)
}

fn named_paths_at(input: &Value, depth: usize) -> Vec<&str> {
    let Some(obj) = input.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut base = None;
    for (k, v) in obj {
        let role = fields::role(k);
        match (role, v) {
            (Some(Role::Path | Role::Paths | Role::Dest | Role::Source), Value::String(s))
                if plausible(s) =>
            {
                out.push(s.as_str());
            }
            (Some(Role::BareDest | Role::BareSource), Value::String(s))
                if plausible(s) && spelled_as_path(s) =>
            {
                out.push(s.as_str());
            }
            (Some(Role::Paths | Role::Path | Role::Source), Value::Array(items)) => {
                out.extend(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .filter(|s| plausible(s)),
                );
            }
            (Some(Role::Base), Value::String(s)) if plausible(s) && spelled_as_path(s) => {
                base = Some(s.as_str());
            }
            // `uri: file:///…` names the file.
            (Some(Role::Url), Value::String(s)) if normalize::file_url_path(s).is_some() => {
                out.push(s.as_str());
            }
            _ => {}
        }
    }
    if out.is_empty() {
        out.extend(base);
    }
    // `{request: {path}}`, or one object per file (`edits: [{file_path, …}, …]`).
    if out.is_empty() && depth < 2 {
        for v in obj.values() {
            match v {
                Value::Object(_) => out.extend(named_paths_at(v, depth + 1)),
                Value::Array(items) => {
                    for item in items.iter().filter(|i| i.is_object()) {
                        out.extend(named_paths_at(item, depth + 1));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The globs a read tool reads besides its paths (`include`, `patterns`).
pub(super) fn globs(input: &Value) -> Vec<&str> {
    let Some(obj) = input.as_object() else {
        return Vec::new();
    };
    obj.iter()
        .filter(|(k, _)| fields::role(k) == Some(Role::Globs))
        .flat_map(|(_, v)| match v {
            Value::String(s) => vec![s.as_str()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        })
        .filter(|s| plausible(s))
        .collect()
}
