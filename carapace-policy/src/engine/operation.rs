//! What a tool call does, in the terms rules speak: operations (an action on a path or a
//! network endpoint), command lines, and the text it carries. Extractors (`call`, `shell`,
//! `transcript`) produce an [`Extracted`]; `evaluate` matches rules against it.
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::sync::Arc;

use crate::host::Host;

use crate::rules::Action;

/// One action on one object. Copy and move are split into their parts (read + write,
/// write + delete) by the extractors, so `action` is never `Copy` or `Move`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// What is done; `None` only in an operation still being built.
    pub action: Option<Action>,
    /// Absolute, normalised path (`~`, variables, `..`, `//`, `file://` resolved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Lower-case host name or canonical IP literal (IPv4 in dotted quad, whatever spelling
    /// the call used: decimal, hex, octal, IPv4-mapped IPv6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The port connected to, when the call names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Data written (write) or sent out (network), for content rules scoped to those
    /// actions and for secrets detection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The path is what the analysis could make of a target it could not determine (code
    /// that decodes or computes the name it opens): its known start and `**` for the rest.
    /// Rules answer it with their mode for an unknown target.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unknown: bool,
    /// The path is one file that a file tool writes or a patch writes or deletes whole, so
    /// never a directory: the operation does not reach a directory's entries (writing to
    /// a directory's path fails).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_file: bool,
}

impl Operation {
    /// `action` on `path` (already absolute and normalised).
    #[must_use]
    pub fn path(action: Action, path: impl Into<String>) -> Self {
        Self {
            action: Some(action),
            path: Some(path.into()),
            ..Self::default()
        }
    }

    /// A connection to `host` (a name or an IP literal), on `port` when known.
    #[must_use]
    pub fn network(host: impl Into<String>, port: Option<u16>) -> Self {
        Self {
            action: Some(Action::Network),
            host: Some(host.into()),
            port,
            ..Self::default()
        }
    }

    /// Whether the operation may act on every entry below its path (a directory written,
    /// moved or deleted whole): anything but a read of it or a file tool's one file.
    #[must_use]
    pub fn whole_dir(&self) -> bool {
        self.action != Some(Action::Read) && !self.one_file
    }

    /// The operation carrying `content` (what is written or sent).
    #[must_use]
    pub(crate) fn with_content(mut self, content: impl Into<String>) -> Self {
        self.content = Some(content.into());
        self
    }
}

/// Everything a tool call was found to do.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    /// The tool's name as the agent gave it (`Bash`, `mcp__github__create_issue`, …).
    pub tool: String,
    /// Actions on paths and network endpoints, each once.
    pub ops: Vec<Operation>,
    /// Command lines: the whole command as given, and each simple command found inside it
    /// (after unwrapping `sh -c`, `eval`, `xargs`, `sudo`, … and decoding payloads), its
    /// words joined by single spaces, and for the tools `shell::canon` knows, the same
    /// command in its canonical spelling (`git push --force -- origin main`).
    pub commands: Vec<String>,
    /// Each simple command found (wrappers peeled as for `commands`), as its words: the
    /// program's base name first. Structured command rules (`run:`) read them as the tool
    /// does (`shell::canon::invocation`), only for the programs some rule names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argvs: Vec<Vec<String>>,
    /// Every piece of text the call carries (string values of its input, decoded
    /// payloads), Unicode-normalised, for content rules.
    pub texts: Vec<String>,
    /// Why (part of) the call could not be understood; non-empty means the call is
    /// refused (fail closed).
    pub unparsable: Vec<String>,
}

impl Extracted {
    /// Nothing found yet, for a call of `tool`.
    #[must_use]
    pub fn new(tool: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            ..Self::default()
        }
    }

    /// `sha256:<hex>` of what the call does — tool, operations (content included) and
    /// command lines, in a canonical form — so that an approval covers exactly this
    /// operation and nothing that differs in any detail.
    #[must_use]
    pub fn signature(&self) -> String {
        use sha2::{Digest as _, Sha256};
        let mut ops: Vec<String> = self
            .ops
            .iter()
            .map(|o| serde_json::to_string(o).unwrap_or_default())
            .collect();
        ops.sort();
        ops.dedup();
        let mut commands = self.commands.clone();
        commands.sort();
        commands.dedup();
        // Texts too: a call without file or network operations (an MCP tool fetching the
        // credential named in its arguments) differs from another only there.
        let mut texts = self.texts.clone();
        texts.sort();
        texts.dedup();
        let canonical = serde_json::json!({
            "tool": self.tool,
            "ops": ops,
            "commands": commands,
            "texts": texts,
        });
        let digest = Sha256::digest(canonical.to_string().as_bytes());
        let mut out = String::with_capacity(7 + 64);
        out.push_str("sha256:");
        for b in digest {
            let _ = write!(out, "{b:02x}");
        }
        out
    }

    /// One line saying what the call does, for approval prompts and history.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = self
            .ops
            .iter()
            .map(|o| {
                let verb = o.action.map_or("use", crate::rules::Action::name);
                match (&o.path, &o.host) {
                    (Some(p), _) => format!("{verb} {p}"),
                    (None, Some(h)) => match o.port {
                        Some(port) => format!("{verb} {h}:{port}"),
                        None => format!("{verb} {h}"),
                    },
                    (None, None) => verb.to_owned(),
                }
            })
            .collect();
        parts.dedup();
        if parts.is_empty() {
            if let Some(c) = self.commands.first() {
                parts.push(format!("run `{c}`"));
            }
        }
        super::shorten(&format!("{}: {}", self.tool, parts.join(", ")), 300)
    }

    /// Adds an operation, unless already found.
    pub fn op(&mut self, op: Operation) {
        if !self.ops.contains(&op) {
            self.ops.push(op);
        }
    }

    /// Adds a command line, unless empty or already found.
    pub(crate) fn command(&mut self, command: impl Into<String>) {
        let command = command.into();
        if !command.is_empty() && !self.commands.contains(&command) {
            self.commands.push(command);
        }
    }

    /// Adds a simple command's words, unless empty or already found.
    pub(crate) fn argv(&mut self, words: Vec<String>) {
        if !words.is_empty() && !self.argvs.contains(&words) {
            self.argvs.push(words);
        }
    }

    /// Adds a piece of text for content rules, unless empty or already found.
    pub(crate) fn text(&mut self, text: impl Into<String>) {
        let text = text.into();
        if !text.is_empty() && !self.texts.contains(&text) {
            self.texts.push(text);
        }
    }

    /// Records why part of the call could not be understood: the call is then refused.
    pub(crate) fn unparsable(&mut self, why: impl Into<String>) {
        self.unparsable.push(why.into());
    }

    /// Adds what another extraction found (a nested call, a sub-analysis), without
    /// repeating what is already here.
    pub fn merge(&mut self, other: Extracted) {
        for op in other.ops {
            self.op(op);
        }
        for c in other.commands {
            self.command(c);
        }
        for a in other.argvs {
            self.argv(a);
        }
        for t in other.texts {
            self.text(t);
        }
        self.unparsable.extend(other.unparsable);
    }
}

/// Where relative paths and `~` resolve for one call: the agent's working directory, its
/// home, and the environment variables the agent's shell would expand.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// Absolute working directory of the agent (`/` when unknown).
    pub cwd: String,
    /// The agent user's home directory.
    pub home: String,
    /// Variables available for `$VAR` expansion (HOME is taken from `home`), and the
    /// directories and files the shell holds open as descriptors (`exec 3< DIR`), under
    /// names no variable can have (see [`Context::descriptor`]).
    pub env: Vec<(String, String)>,
    /// The file system paths are resolved on (symlinks) and repositories' configs read from;
    /// `None` resolves paths as written (tests that use made-up paths, fuzzing).
    pub host: Option<Arc<dyn Host>>,
}

impl Context {
    /// The value `$name` expands to in the agent's shell, if set.
    #[must_use]
    pub(crate) fn var(&self, name: &str) -> Option<&str> {
        let name = self.referent(name);
        if name == "HOME" {
            return Some(&self.home);
        }
        if name == "PWD" {
            return Some(&self.cwd);
        }
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Where a nameref (`declare -n r=x`) is kept among the variables: a name with a space is
/// no variable's.
fn nameref_key(name: &str) -> String {
    format!("declare -n {name}")
}

/// Namerefs followed from one name, at most (`declare -n a=b b=a` loops).
const MAX_NAMEREF_HOPS: usize = 8;

impl Context {
    /// The variable `name` stands for: itself, or through namerefs the one they point to
    /// (`declare -n r=x; cat "$r"` reads `$x`, `r=v` sets x).
    #[must_use]
    pub fn referent<'a>(&'a self, name: &'a str) -> &'a str {
        let mut name = name;
        for _ in 0..MAX_NAMEREF_HOPS {
            let target = self.env.iter().find_map(|(k, v)| {
                k.strip_prefix("declare -n ")
                    .filter(|n| *n == name)
                    .map(|_| v.as_str())
            });
            match target {
                Some(t) => name = t,
                None => break,
            }
        }
        name
    }

    /// Makes `name` a nameref to `target`.
    pub fn set_nameref(&mut self, name: &str, target: &str) {
        let key = nameref_key(name);
        self.env.retain(|(k, _)| *k != key);
        self.env.push((key, target.to_owned()));
    }
}

/// Where a descriptor is kept among the variables: `/dev/fd/3` can never be a variable's
/// name, and a subshell inherits descriptors as it inherits variables.
fn descriptor_key(fd: &str) -> String {
    format!("/dev/fd/{fd}")
}

impl Context {
    /// The path the shell opened as descriptor `fd` (`exec 3< ~/.aws`), so that
    /// `/proc/self/fd/3/credentials` and `/dev/fd/3/credentials` name what they open.
    #[must_use]
    pub fn descriptor(&self, fd: &str) -> Option<&str> {
        let key = descriptor_key(fd);
        self.env
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Opens (`Some(path)`) or closes (`None`) descriptor `fd`; returns what it held before,
    /// so that a redirection scoped to one command can be undone after it.
    pub fn set_descriptor(&mut self, fd: &str, path: Option<String>) -> Option<String> {
        let key = descriptor_key(fd);
        let old = self
            .env
            .iter()
            .position(|(k, _)| *k == key)
            .map(|i| self.env.swap_remove(i).1);
        if let Some(path) = path {
            self.env.push((key, path));
        }
        old
    }
}
