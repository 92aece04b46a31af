//! What a field or a tool is for, read from the words of its name. Agents and MCP servers
//! spell the same thing many ways (`destination`, `destPath`, `dest_path`, `to_path`,
//! `target-file`; `write_file`, `save_file`, `edit_block`, `create_directory`): the words
//! a name is made of say what it is where a list of spellings would miss the next one.

use std::collections::HashMap;
use std::sync::LazyLock;

/// The words of an identifier, as they are written: `destPath` → `dest`, `Path`;
/// `new_file-path` → `new`, `file`, `path`.
pub(super) fn words(name: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev_lower = false;
    for (i, c) in name.char_indices() {
        if matches!(c, '_' | '-' | '.' | ' ' | '/') {
            if start < i {
                out.push(&name[start..i]);
            }
            start = i + c.len_utf8();
            prev_lower = false;
            continue;
        }
        // camelCase: a capital after a small letter or a digit starts a word.
        if c.is_ascii_uppercase() && prev_lower && start < i {
            out.push(&name[start..i]);
            start = i;
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    if start < name.len() {
        out.push(&name[start..]);
    }
    out
}

/// `forceWithLease`, `force-with-lease` and `Force_With_Lease` as `force_with_lease`.
pub(super) fn snake(key: &str) -> String {
    words(key)
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("_")
}

fn is_any(word: &str, set: &[&str]) -> bool {
    set.iter().any(|s| word.eq_ignore_ascii_case(s))
}

/// What a field of a tool's input holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// The file or directory the tool works on (`path`, `file_path`, `location`).
    Path,
    /// A list of them (`paths`, `files`).
    Paths,
    /// Where the tool puts something: `destPath`, `to_path`, `target_file`, `new_name`.
    Dest,
    /// A destination spelled with a bare word (`to`, `output`, `target`), which is a path
    /// only when its value looks like one (`to: json` is a format, `to: bob@…` a mail).
    BareDest,
    /// Where a move or copy takes from (`source_path`, `old_path`).
    Source,
    /// `from`: a source when the value looks like a path.
    BareSource,
    /// What is written (`content`, `new_string`, `text`, `diff`, `patch`).
    Content,
    /// A shell command line or argv (`command`, `cmd`, `argv`, `script`).
    Command,
    /// A program run with an argument list (`program`, `executable`).
    Program,
    /// The argument list of a command or program (`args`, `arguments`).
    Args,
    /// Code for an interpreter or a notebook kernel (`code`, `cell_source`, `snippet`).
    Code,
    /// A URL.
    Url,
    /// The directory the call runs in.
    Cwd,
    /// A directory the call's other paths are relative to (`root`, `base_dir`,
    /// `workspace`, `rootPath`); a path itself when the call names no other.
    Base,
    /// Globs of files read (`include`, `patterns`): Gemini's `read_many_files` reads what
    /// its `include` matches as well as its `paths`.
    Globs,
}

const PATH_NOUNS: &[&str] = &[
    "path",
    "file",
    "filename",
    "filepath",
    "pathname",
    "fname",
    "dir",
    "directory",
    "folder",
    "location",
];
const PLURAL_PATH_NOUNS: &[&str] = &[
    "paths",
    "files",
    "filenames",
    "filepaths",
    "pathnames",
    "dirs",
    "directories",
    "folders",
    "locations",
    "sources",
    "srcs",
    "inputs",
];
const DEST_MARKS: &[&str] = &[
    "dest",
    "destination",
    "dst",
    "target",
    "to",
    "output",
    "out",
    "outfile",
    "outdir",
    "save",
    "new",
];
/// Destination words that name a path by themselves (`destination: notes.txt`).
const DEST_ALONE: &[&str] = &["dest", "destination", "dst", "target", "outfile", "outdir"];
const SOURCE_MARKS: &[&str] = &["source", "src", "from", "old", "origin", "input", "in"];
const CONTENT_NOUNS: &[&str] = &[
    "content",
    "contents",
    "text",
    "data",
    "body",
    "diff",
    "patch",
    "replacement",
    "edit",
];
const NEW_CONTENT_NOUNS: &[&str] = &["string", "str", "source", "code", "lines", "line"];
const COMMAND_NOUNS: &[&str] = &["command", "cmd", "cmdline", "commandline", "argv", "script"];
const CODE_NOUNS: &[&str] = &["code", "snippet", "cell"];
/// Words that may stand before a code noun (`source_code`, `python_code`, `cell_source`).
const CODE_QUALIFIERS: &[&str] = &[
    "source",
    "cell",
    "code",
    "python",
    "py",
    "javascript",
    "js",
    "node",
    "program",
    "script",
    "raw",
    "input",
];
/// What the other paths of a call are relative to (`root`, `base_dir`, `workspace_root`).
/// A bare `base` is not one: a pull request's `base` is a branch.
const BASE_NOUNS: &[&str] = &["root", "basedir", "rootdir", "workspace", "workspaceroot"];
const URL_NOUNS: &[&str] = &["url", "uri", "endpoint", "href", "link"];

/// Field names the agents' own tools send on nearly every call (Claude Code, Codex, Gemini
/// CLI, Copilot CLI): their roles are worked out once, by [`role_by_words`] itself.
const COMMON_FIELDS: &[&str] = &[
    "file_path",
    "absolute_path",
    "notebook_path",
    "path",
    "paths",
    "content",
    "old_string",
    "new_string",
    "new_source",
    "replace_all",
    "edits",
    "pattern",
    "glob",
    "output_mode",
    "command",
    "description",
    "timeout",
    "run_in_background",
    "url",
    "prompt",
    "query",
    "limit",
    "offset",
    "type",
    "head_limit",
    "multiline",
    "cell_id",
    "edit_mode",
    "workdir",
    "dir_path",
    "directory",
    "patch",
    "input",
    "title",
    "body",
];

/// The role of an input field, by the words of its name.
pub(super) fn role(key: &str) -> Option<Role> {
    type Known = HashMap<&'static str, Option<Role>, foldhash::fast::FixedState>;
    static KNOWN: LazyLock<Known> = LazyLock::new(|| {
        COMMON_FIELDS
            .iter()
            .map(|k| (*k, role_by_words(k)))
            .collect()
    });
    match KNOWN.get(key) {
        Some(known) => *known,
        None => role_by_words(key),
    }
}

fn role_by_words(key: &str) -> Option<Role> {
    let w = words(key);
    let (last, before) = w.split_last()?;
    let has = |set: &[&str]| w.iter().any(|x| is_any(x, set));
    if is_any(last, BASE_NOUNS)
        || is_any(last, &["dir", "directory", "folder", "path"])
            && before
                .iter()
                .any(|x| is_any(x, BASE_NOUNS) || x.eq_ignore_ascii_case("base"))
    {
        return Some(Role::Base);
    }
    if w.len() == 1 && is_any(last, &["include", "includes", "patterns", "globs"])
        || w.len() > 1 && is_any(last, &["patterns", "globs"])
    {
        return Some(Role::Globs);
    }
    if is_any(last, &["cwd", "workdir"])
        || (is_any(last, &["dir", "directory", "folder"])
            && before
                .iter()
                .any(|x| is_any(x, &["working", "work", "current"])))
    {
        return Some(Role::Cwd);
    }
    if is_any(last, CONTENT_NOUNS)
        || (is_any(last, NEW_CONTENT_NOUNS)
            && before
                .first()
                .is_some_and(|f| is_any(f, &["new", "updated", "replacement"])))
    {
        return Some(Role::Content);
    }
    if is_any(last, URL_NOUNS) {
        return Some(Role::Url);
    }
    if is_any(last, COMMAND_NOUNS) {
        return Some(Role::Command);
    }
    if w.len() == 1 && is_any(last, &["args", "arguments", "arg", "argument"]) {
        return Some(Role::Args);
    }
    if is_any(last, &["program", "executable", "exe", "binary"]) {
        return Some(Role::Program);
    }
    if is_any(last, CODE_NOUNS) && before.iter().all(|x| is_any(x, CODE_QUALIFIERS))
        || is_any(last, &["source"])
            && !before.is_empty()
            && before.iter().all(|x| is_any(x, &["cell", "code"]))
    {
        return Some(Role::Code);
    }
    if is_any(last, PLURAL_PATH_NOUNS) {
        return Some(Role::Paths);
    }
    let path_noun = is_any(last, PATH_NOUNS) || is_any(last, &["name"]) && !before.is_empty();
    if has(DEST_MARKS) && (path_noun || w.len() > 1 && is_any(last, DEST_MARKS)) {
        return Some(Role::Dest);
    }
    if has(SOURCE_MARKS) && path_noun {
        return Some(Role::Source);
    }
    if w.len() == 1 && is_any(last, DEST_ALONE) {
        return Some(Role::Dest);
    }
    if w.len() == 1 && is_any(last, DEST_MARKS) {
        return Some(Role::BareDest);
    }
    if w.len() == 1 && is_any(last, &["source", "src"]) {
        return Some(Role::Source);
    }
    if w.len() == 1 && is_any(last, &["from"]) {
        return Some(Role::BareSource);
    }
    // `fileName`, `dir_name`: a name of a path noun is a path (`branch_name` is not).
    let path_name = is_any(last, &["name"])
        && !before.is_empty()
        && before.iter().all(|x| is_any(x, PATH_NOUNS));
    (is_any(last, PATH_NOUNS) || path_name).then_some(Role::Path)
}

/// What a tool does to the files it names, by the verbs of its name (`save_file`,
/// `edit_block`, `create_directory`, `mcp__fs__delete`, `run_cell`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verb {
    Delete,
    Move,
    Copy,
    /// Writes, creates or edits.
    Write,
    /// Runs commands or code.
    Run,
    Read,
}

const DELETE_VERBS: &[&str] = &[
    "delete", "remove", "rm", "unlink", "rmdir", "trash", "erase", "destroy", "purge", "wipe",
];
const MOVE_VERBS: &[&str] = &["move", "rename", "mv", "relocate"];
const COPY_VERBS: &[&str] = &["copy", "cp", "duplicate"];
/// Verbs that change a file's text in place.
const EDIT_VERBS: &[&str] = &[
    "edit",
    "replace",
    "patch",
    "apply",
    "insert",
    "update",
    "modify",
    "append",
    "prepend",
    "substitute",
];
/// Verbs that make or overwrite a file or directory.
const WRITE_VERBS: &[&str] = &[
    "write",
    "save",
    "create",
    "put",
    "make",
    "mkdir",
    "makedirs",
    "overwrite",
    "touch",
    "store",
];
/// Also the words of tools that type into a running shell (Codex's `write_stdin`, Copilot
/// CLI's `write_bash`): they are the agent's shell.
const RUN_VERBS: &[&str] = &[
    "run", "execute", "exec", "eval", "evaluate", "spawn", "launch", "shell", "terminal", "stdin",
    "bash", "pty", "tty", "tmux", "repl",
];
const READ_VERBS: &[&str] = &["read", "view", "cat", "open", "show", "get", "load"];

/// The strongest thing a tool's name says it does.
pub(super) fn verb(tool: &str) -> Verb {
    let w = words(tool);
    let has = |set: &[&str]| w.iter().any(|x| is_any(x, set));
    if has(DELETE_VERBS) {
        Verb::Delete
    } else if has(MOVE_VERBS) {
        Verb::Move
    } else if has(COPY_VERBS) {
        Verb::Copy
    } else if has(EDIT_VERBS) || has(WRITE_VERBS) {
        Verb::Write
    } else if has(RUN_VERBS) {
        Verb::Run
    } else {
        Verb::Read
    }
}

/// What a tool's name says its object is, when it says: a file tool (`save_file`,
/// `edit_block`, `delete`) versus one that acts on something else (`create_issue`,
/// `update_user`), which no file rule is about.
fn works_on_files(w: &[&str], verbs: &[&[&str]]) -> bool {
    const FILE_OBJECTS: &[&str] = &[
        "file",
        "files",
        "directory",
        "directories",
        "dir",
        "folder",
        "path",
        "block",
        "text",
        "content",
        "contents",
        "notebook",
        "cell",
        "code",
        "lines",
        "line",
        "patch",
        "diff",
        "document",
        "doc",
        "to",
        "in",
        "at",
        "from",
        "based",
        "tool",
        "str",
        "multiple",
        "many",
        "all",
    ];
    w.iter()
        .all(|x| verbs.iter().any(|set| is_any(x, set)) || is_any(x, FILE_OBJECTS))
}

/// The Claude Code tool a tool of no known name stands for, by its verbs: `Bash` for one
/// that runs commands or code, `Edit` for one that changes a file's text in place, `Write`
/// for one that writes, creates, moves or deletes files, `Read` for one that reads them.
pub(super) fn family_by_verbs(tool: &str) -> Option<&'static str> {
    let w = words(tool);
    let has = |set: &[&str]| w.iter().any(|x| is_any(x, set));
    let writes: &[&[&str]] = &[
        WRITE_VERBS,
        DELETE_VERBS,
        MOVE_VERBS,
        COPY_VERBS,
        EDIT_VERBS,
    ];
    if has(RUN_VERBS) {
        return Some("Bash");
    }
    if has(EDIT_VERBS) && works_on_files(&w, writes) {
        return Some("Edit");
    }
    if writes.iter().any(|set| has(set)) && works_on_files(&w, writes) {
        return Some("Write");
    }
    (has(READ_VERBS) && works_on_files(&w, &[READ_VERBS])).then_some("Read")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_every_spelling() {
        assert_eq!(words("destPath"), ["dest", "Path"]);
        assert_eq!(words("new_file-path"), ["new", "file", "path"]);
        assert_eq!(words("executeCode"), ["execute", "Code"]);
        assert_eq!(words("ApplyPatch"), ["Apply", "Patch"]);
        assert_eq!(words("URL"), ["URL"]);
        assert_eq!(words("__x__"), ["x"]);
    }

    #[test]
    fn fields_by_their_words() {
        for (key, want) in [
            ("path", Role::Path),
            ("File_Path", Role::Path),
            ("location", Role::Path),
            ("paths", Role::Paths),
            ("filePaths", Role::Paths),
            ("destPath", Role::Dest),
            ("to_path", Role::Dest),
            ("targetFile", Role::Dest),
            ("new_name", Role::Dest),
            ("output_dir", Role::Dest),
            ("save_to", Role::Dest),
            ("destination", Role::Dest),
            ("to", Role::BareDest),
            ("output", Role::BareDest),
            ("source_path", Role::Source),
            ("oldPath", Role::Source),
            ("from", Role::BareSource),
            ("content", Role::Content),
            ("new_string", Role::Content),
            ("file_text", Role::Content),
            ("diff", Role::Content),
            ("command", Role::Command),
            ("argv", Role::Command),
            ("shell_command", Role::Command),
            ("program", Role::Program),
            ("args", Role::Args),
            ("code", Role::Code),
            ("cell_source", Role::Code),
            ("new_source", Role::Content),
            ("source", Role::Source),
            ("target", Role::Dest),
            ("source_code", Role::Code),
            ("url", Role::Url),
            ("working_directory", Role::Cwd),
            ("cwd", Role::Cwd),
            ("root", Role::Base),
            ("rootPath", Role::Base),
            ("base_dir", Role::Base),
            ("workspace", Role::Base),
            ("project_root", Role::Base),
            ("include", Role::Globs),
            ("patterns", Role::Globs),
            ("inputs", Role::Paths),
        ] {
            assert_eq!(role(key), Some(want), "{key}");
        }
        for key in [
            "country_code",
            "old_string",
            "title",
            "format",
            "file_id",
            "name",
            "base",
        ] {
            assert!(
                !matches!(
                    role(key),
                    Some(Role::Code | Role::Path | Role::Dest | Role::Base)
                ),
                "{key}"
            );
        }
    }

    #[test]
    fn tools_by_their_verbs() {
        assert_eq!(verb("save_file"), Verb::Write);
        assert_eq!(verb("create_directory"), Verb::Write);
        assert_eq!(verb("delete"), Verb::Delete);
        assert_eq!(verb("remove_file"), Verb::Delete);
        assert_eq!(verb("edit_block"), Verb::Write);
        assert_eq!(verb("move_file"), Verb::Move);
        assert_eq!(verb("run_cell"), Verb::Run);
        assert_eq!(verb("get_file_contents"), Verb::Read);
        assert_eq!(family_by_verbs("save_file"), Some("Write"));
        assert_eq!(family_by_verbs("edit_block"), Some("Edit"));
        assert_eq!(family_by_verbs("delete"), Some("Write"));
        assert_eq!(family_by_verbs("executeCode"), Some("Bash"));
        assert_eq!(family_by_verbs("create_issue"), None);
        assert_eq!(family_by_verbs("update_user"), None);
        assert_eq!(family_by_verbs("read_multiple_files"), Some("Read"));
        assert_eq!(family_by_verbs("write_stdin"), Some("Bash"));
        assert_eq!(family_by_verbs("write_bash"), Some("Bash"));
    }
}
