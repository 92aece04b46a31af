//! `carapace hook install AGENT [--project|--user] [--uninstall]`: merges Carapace's hook
//! into the agent's own config file, keeping everything already there, and takes out exactly
//! what it added. Claude Code, Gemini CLI and Copilot CLI keep hooks in a settings.json
//! (`settings_json`), Codex in its config.toml (`config_toml`, comments and layout kept).
//!
//! What Carapace added is recognised by its command (`… carapace… hook AGENT …`), so a
//! second install changes nothing and an uninstall leaves the user's own hooks alone.
use std::path::{Path, PathBuf};

use anyhow::Context as _;

mod config_toml;
mod settings_json;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  carapace hook install claude-code            ~/.claude/settings.json
  carapace hook install codex                  $CODEX_HOME/config.toml (~/.codex/config.toml)
  carapace hook install gemini --project       ./.gemini/settings.json
  carapace hook install copilot                ~/.copilot/settings.json
  carapace hook install codex --uninstall      take out what install added, nothing else
  carapace hook install gemini --hook-args --local
                                               check calls in-process, without the daemon")]
pub struct InstallArgs {
    /// The agent whose config gets the hook
    #[arg(value_enum)]
    agent: Target,
    /// This project only (the agent's config directory in the working directory)
    #[arg(long, conflicts_with_all = ["user", "settings"])]
    project: bool,
    /// Every session of this user (the default)
    #[arg(long)]
    user: bool,
    /// Write this config file instead
    #[arg(long, value_name = "FILE", conflicts_with = "user")]
    settings: Option<PathBuf>,
    /// Extra arguments for the hook command (e.g. "--rules /path/rules.yaml")
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    hook_args: Option<String>,
    /// Remove the hook that install added (and nothing else)
    #[arg(long, conflicts_with = "hook_args")]
    uninstall: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Target {
    /// Claude Code: .claude/settings.json
    ClaudeCode,
    /// Codex CLI (`@openai/codex`): .codex/config.toml
    Codex,
    /// Google Gemini CLI: .gemini/settings.json
    Gemini,
    /// GitHub Copilot CLI: ~/.copilot/settings.json, or .github/copilot/settings.json
    Copilot,
}

/// How an agent lists the handlers of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Matcher groups: `[{"matcher": M, "hooks": [{"type": "command", "command": C}]}]`.
    Grouped,
    /// Handlers directly: `[{"type": "command", "bash": C}]` (Copilot CLI).
    Flat,
}

/// One hook entry to add: the event, the matcher (`None`: the event takes none).
type Event = (&'static str, Option<&'static str>);

impl Target {
    /// The hook subcommand, also how an installed hook is recognised.
    fn subcommand(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
            Self::Copilot => "copilot",
        }
    }

    /// The handler's timeout field for a hook that waits up to `wait` seconds for an
    /// approval, with room to spare: each agent runs the call when its hook times out.
    fn timeout(self, wait: u64) -> (&'static str, u64) {
        let secs = wait + 30;
        match self {
            Self::ClaudeCode | Self::Codex => ("timeout", secs),
            Self::Gemini => ("timeout", secs * 1000),
            Self::Copilot => ("timeoutSec", secs),
        }
    }

    fn layout(self) -> Layout {
        match self {
            Self::Copilot => Layout::Flat,
            _ => Layout::Grouped,
        }
    }

    fn events(self) -> &'static [Event] {
        match self {
            // PreToolUse checks every call; UserPromptSubmit carries the user's
            // `/carapace …` commands (the user, not the model, types those).
            Self::ClaudeCode => &[("PreToolUse", Some("*")), ("UserPromptSubmit", None)],
            Self::Codex => &[("PreToolUse", Some("*"))],
            // Gemini's matchers are regular expressions.
            Self::Gemini => &[("BeforeTool", Some(".*"))],
            // Matched to every tool; camelCase, the event name of Copilot's own payload.
            Self::Copilot => &[("preToolUse", None)],
        }
    }

    /// The config file: the project's, or the user's.
    fn path(self, project: bool) -> anyhow::Result<PathBuf> {
        let (dir, file, home_var) = match self {
            Self::ClaudeCode => (".claude", "settings.json", None),
            Self::Codex => (".codex", "config.toml", Some("CODEX_HOME")),
            Self::Gemini => (".gemini", "settings.json", None),
            Self::Copilot => (".copilot", "settings.json", Some("COPILOT_HOME")),
        };
        if project {
            if self == Self::Copilot {
                return Ok(PathBuf::from(".github/copilot/settings.json"));
            }
            return Ok(Path::new(dir).join(file));
        }
        if let Some(var) = home_var {
            if let Some(home) = std::env::var_os(var).filter(|h| !h.is_empty()) {
                return Ok(PathBuf::from(home).join(file));
            }
        }
        let home = std::env::var_os("HOME").context("HOME is not set")?;
        Ok(PathBuf::from(home).join(dir).join(file))
    }

    /// What the user should be told after an install, beyond "added".
    fn note(self, trusted: bool) -> Option<&'static str> {
        match self {
            Self::Codex if trusted => Some(
                "Codex runs a hook only once it is trusted: this install recorded that trust in \
                 the same file (`/hooks` in codex shows it).",
            ),
            Self::Codex => Some(
                "Codex runs a new hook only after you trust it, and a project's config cannot \
                 record that: start `codex`, open /hooks and trust Carapace's PreToolUse hook. \
                 Until then Codex skips it without a word.",
            ),
            _ => None,
        }
    }
}

pub fn run(socket: &Path, args: &InstallArgs) -> anyhow::Result<u8> {
    let target = args.agent;
    let path = match &args.settings {
        Some(p) => p.clone(),
        None => target.path(args.project)?,
    };
    let marker = format!("hook {}", target.subcommand());
    // Codex reads hook trust from the user's config only, keyed by the file's path.
    let trust_file = match target {
        Target::Codex if !args.project => Some(real_path(&path)?.display().to_string()),
        _ => None,
    };
    let old = read(&path)?;
    if args.uninstall {
        let new = match &old {
            Some(text) => edit(&path, |p| remove(p, text, &marker, trust_file.as_deref()))?,
            None => None,
        };
        match new {
            Some(new) => {
                write(&path, &new)?;
                println!(
                    "carapace: removed Carapace's {} hook from {}",
                    target.subcommand(),
                    path.display()
                );
            }
            None => println!(
                "carapace: {} holds no Carapace hook; nothing changed",
                path.display()
            ),
        }
        return Ok(0);
    }
    let exe = std::env::current_exe().context("cannot find the carapace binary")?;
    let mut command = format!(
        "{} {marker}",
        super::shell_quote(&exe.display().to_string())
    );
    if let Some(extra) = &args.hook_args {
        command.push(' ');
        command.push_str(extra);
    }
    let hook = Hook {
        events: target.events(),
        layout: target.layout(),
        timeout: wait_secs(args.hook_args.as_deref()).map(|w| target.timeout(w)),
        trust_file: trust_file.as_deref(),
        command: &command,
        marker: &marker,
    };
    let text = old.as_deref().unwrap_or_default();
    match edit(&path, |p| merge(p, text, &hook))? {
        Some(new) => {
            write(&path, &new)?;
            let events: Vec<&str> = target.events().iter().map(|(e, _)| *e).collect();
            println!(
                "carapace: added to {}: a {} hook (every tool call is checked before it runs)",
                path.display(),
                events.join(" and ")
            );
            if let Some(note) = target.note(trust_file.is_some()) {
                println!("carapace: {note}");
            }
        }
        None => println!(
            "carapace: {} already runs the hook; nothing changed",
            path.display()
        ),
    }
    let evaluates_locally = command.contains("--local") || command.contains("--rules");
    if !evaluates_locally && std::os::unix::net::UnixStream::connect(socket).is_err() {
        eprintln!(
            "carapace: warning: no daemon answers on {}; until `sudo carapaced` runs, the hook \
             denies every tool call (it fails closed). To check calls without the daemon, \
             install with --hook-args --local",
            socket.display()
        );
    }
    Ok(0)
}

/// `path` as Codex spells it in trust keys: absolute, with the symbolic links of its
/// directory resolved (Codex resolves its home, e.g. a `~/.codex` linked from dotfiles),
/// also when the directory does not exist yet.
fn real_path(path: &Path) -> anyhow::Result<PathBuf> {
    let abs = std::path::absolute(path)
        .with_context(|| format!("cannot make {} absolute", path.display()))?;
    let mut missing = Vec::new();
    let mut dir = abs.parent();
    while let Some(d) = dir {
        if let Ok(real) = std::fs::canonicalize(d) {
            let mut out = real;
            out.extend(missing.iter().rev());
            if let Some(name) = abs.file_name() {
                out.push(name);
            }
            return Ok(out);
        }
        missing.extend(d.file_name());
        dir = d.parent();
    }
    Ok(abs)
}

/// The hook an install adds.
struct Hook<'a> {
    events: &'a [Event],
    layout: Layout,
    /// Codex: the config's absolute path, which keys the trust the installer records.
    trust_file: Option<&'a str>,
    /// The handler's timeout field and value, when the hook waits for approvals (the
    /// agents' defaults, 30 to 600 s, are otherwise ample).
    timeout: Option<(&'static str, u64)>,
    command: &'a str,
    /// `hook AGENT`: a command holding it and `carapace` is Carapace's hook.
    marker: &'a str,
}

/// The `--wait SECS` among the hook's extra arguments.
fn wait_secs(hook_args: Option<&str>) -> Option<u64> {
    let mut words = hook_args?.split_whitespace();
    while let Some(w) = words.next() {
        if let Some(n) = w.strip_prefix("--wait=") {
            return n.parse().ok();
        }
        if w == "--wait" {
            return words.next()?.parse().ok();
        }
    }
    None
}

fn is_ours(command: &str, marker: &str) -> bool {
    command.contains("carapace") && command.contains(marker)
}

/// The config's format, by its file name.
#[derive(Clone, Copy)]
enum Format {
    Json,
    Toml,
}

fn format_of(path: &Path) -> Format {
    if path.extension().is_some_and(|e| e == "toml") {
        Format::Toml
    } else {
        Format::Json
    }
}

/// The file's new text with the hook merged in; `None` when it already has it.
fn merge(format: Format, text: &str, hook: &Hook<'_>) -> anyhow::Result<Option<String>> {
    match format {
        Format::Json => settings_json::merge(text, hook),
        Format::Toml => config_toml::merge(text, hook),
    }
}

/// The file's new text without Carapace's hook (and the trust recorded for it); `None`
/// when it has none.
fn remove(
    format: Format,
    text: &str,
    marker: &str,
    trust_file: Option<&str>,
) -> anyhow::Result<Option<String>> {
    match format {
        Format::Json => settings_json::remove(text, marker),
        Format::Toml => config_toml::remove(text, marker, trust_file),
    }
}

/// Runs an edit, naming the file in its error and saying it was left alone.
fn edit(
    path: &Path,
    f: impl FnOnce(Format) -> anyhow::Result<Option<String>>,
) -> anyhow::Result<Option<String>> {
    f(format_of(path)).with_context(|| {
        format!(
            "cannot edit {} (it was left untouched; fix it first)",
            path.display()
        )
    })
}

fn read(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Replaces the file atomically (a reader never sees half of it), keeping its permissions.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".carapace-tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        std::fs::set_permissions(&tmp, meta.permissions())
            .with_context(|| format!("cannot set the permissions of {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_keys_name_the_config_through_resolved_links() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(
            real_path(&link.join("config.toml")).unwrap(),
            real.join("config.toml")
        );
        // A home not made yet: the part that exists is resolved, the rest kept.
        assert_eq!(
            real_path(&link.join("new/.codex/config.toml")).unwrap(),
            real.join("new/.codex/config.toml")
        );
    }

    #[test]
    fn a_hook_that_waits_gets_a_timeout_beyond_its_wait() {
        assert_eq!(wait_secs(None), None);
        assert_eq!(wait_secs(Some("--local")), None);
        assert_eq!(wait_secs(Some("--local --wait 90")), Some(90));
        assert_eq!(wait_secs(Some("--wait=45 --local")), Some(45));
        assert_eq!(wait_secs(Some("--wait soon")), None);
        // Gemini counts milliseconds, the others seconds.
        assert_eq!(Target::Gemini.timeout(90), ("timeout", 120_000));
        assert_eq!(Target::ClaudeCode.timeout(90), ("timeout", 120));
        assert_eq!(Target::Copilot.timeout(90), ("timeoutSec", 120));
    }
}
