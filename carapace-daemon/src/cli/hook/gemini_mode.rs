//! Whether the Gemini CLI that ran this hook can ask its user for confirmation.
//!
//! Gemini CLI 0.61 tells its hooks nothing about it: the `BeforeTool` input is
//! `{session_id, transcript_path, cwd, hook_event_name, timestamp, tool_name, tool_input}`
//! (`createBaseInput` / `fireBeforeToolEvent` in the bundle's core chunk), and the hook's
//! environment is the CLI's own plus `GEMINI_PROJECT_DIR`, `GEMINI_CWD`, `GEMINI_PLANS_DIR`,
//! `GEMINI_SESSION_ID` and `CLAUDE_PROJECT_DIR` (the hook runner's `spawn`). Yet the answer
//! matters: a hook's `"ask"` forces the confirmation prompt past the CLI's own
//! non-interactive check (which turns a policy's ask into an error), so in headless mode the
//! call waits forever for an answer nobody can give.
//!
//! So the hook looks at the CLI process itself — the nearest ancestor that is not the shell
//! it runs hooks with — and applies the CLI's own rule (`const interactive = …` in
//! `gemini-*.js`, `isHeadlessMode` in the core chunk): interactive with `-i` /
//! `--prompt-interactive`, `--acp` or `--experimental-acp`; otherwise headless under CI
//! (`CI=true` or `GITHUB_ACTIONS=true`, unless `GEMINI_CLI_INTEGRATION_TEST=true`), when its
//! stdin or stdout is not a terminal, or with `-p` / `--prompt`. Anything unreadable counts
//! as headless: a needless refusal says how to approve, a needless ask hangs the agent.
use std::path::{Path, PathBuf};

/// The shells an agent may run its hook command through (Gemini uses `bash -c`, which
/// usually execs the command, but not always).
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "busybox"];

/// How many ancestors are looked at before giving up (a shell or two, then the CLI).
const MAX_HOPS: usize = 4;

/// Whether the Gemini CLI that started this process can ask its user.
pub(super) fn can_ask() -> bool {
    agent_can_ask(Path::new("/proc"), std::os::unix::process::parent_id())
}

/// [`can_ask`] with the process table at `proc` and the search starting at `pid`.
fn agent_can_ask(proc: &Path, pid: u32) -> bool {
    let Some(agent) = agent_process(proc, pid) else {
        return false;
    };
    let argv = nul_separated(&agent.join("cmdline"));
    let env = nul_separated(&agent.join("environ"));
    if argv.is_empty() {
        return false;
    }
    interactive(
        &argv,
        &env,
        is_terminal(&agent.join("fd/0")),
        is_terminal(&agent.join("fd/1")),
    )
}

/// `/proc/PID` of the nearest process from `pid` up that is not a shell.
fn agent_process(proc: &Path, mut pid: u32) -> Option<PathBuf> {
    for _ in 0..MAX_HOPS {
        if pid <= 1 {
            return None;
        }
        let dir = proc.join(pid.to_string());
        let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
        if !SHELLS.contains(&comm.trim_end()) {
            return Some(dir);
        }
        pid = parent(&dir)?;
    }
    None
}

/// The parent pid from `/proc/PID/stat` (the field after the parenthesised command name,
/// which may itself hold spaces and parentheses).
fn parent(dir: &Path) -> Option<u32> {
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn nul_separated(path: &Path) -> Vec<String> {
    std::fs::read(path)
        .map(|bytes| {
            bytes
                .split(|&b| b == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the file descriptor link names a terminal.
fn is_terminal(fd: &Path) -> bool {
    std::fs::read_link(fd).is_ok_and(|target| {
        let target = target.to_string_lossy();
        target.starts_with("/dev/pts/")
            || target.starts_with("/dev/tty")
            || target == "/dev/console"
    })
}

/// Gemini CLI's own rule, on its command line (the interpreter and script included: their
/// arguments never look like Gemini's options), environment and terminals.
fn interactive(argv: &[String], env: &[String], stdin_tty: bool, stdout_tty: bool) -> bool {
    let words: Vec<&str> = argv
        .iter()
        .map(String::as_str)
        .take_while(|a| *a != "--")
        .collect();
    let has = |long: &str, short: Option<char>| {
        words.iter().any(|a| {
            *a == long
                || a.strip_prefix(long).is_some_and(|v| v.starts_with('='))
                || short.is_some_and(|c| short_flag(a, c))
        })
    };
    if has("--prompt-interactive", Some('i'))
        || has("--acp", None)
        || has("--experimental-acp", None)
    {
        return true;
    }
    let var = |name: &str| {
        env.iter()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    };
    let ci = var("GEMINI_CLI_INTEGRATION_TEST") != Some("true")
        && (var("CI") == Some("true") || var("GITHUB_ACTIONS") == Some("true"));
    !ci && stdin_tty && stdout_tty && !has("--prompt", Some('p'))
}

/// `-c`, or `c` in a group of short flags (`-yp`), or `-cVALUE`.
fn short_flag(arg: &str, c: char) -> bool {
    let Some(rest) = arg.strip_prefix('-') else {
        return false;
    };
    if rest.starts_with('-') || rest.is_empty() {
        return false;
    }
    // Flags grouped before a value: every character up to `c` is a letter.
    rest.chars()
        .take_while(char::is_ascii_alphabetic)
        .any(|x| x == c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    const NODE: [&str; 3] = [
        "/usr/bin/node",
        "--max-old-space-size=4096",
        "/x/bin/gemini",
    ];

    fn gemini(args: &[&str], env: &[&str], ttys: bool) -> bool {
        let line: Vec<&str> = NODE.iter().chain(args).copied().collect();
        interactive(&strings(&line), &strings(env), ttys, ttys)
    }

    #[test]
    fn the_clis_own_rule() {
        // On a terminal, with or without a query (which then opens the interactive UI).
        assert!(gemini(&[], &[], true));
        assert!(gemini(&["-m", "gemini-2.5-pro", "fix the bug"], &[], true));
        // -p in every spelling, on a terminal or not.
        for p in [
            &["-p", "x"][..],
            &["--prompt", "x"],
            &["--prompt=x"],
            &["-yp", "x"],
            &["-px"],
        ] {
            assert!(!gemini(p, &[], true), "{p:?}");
        }
        // Not on a terminal (piped, a test harness, `carapace run` without a pty).
        assert!(!gemini(&[], &[], false));
        assert!(!gemini(&["fix the bug"], &[], false));
        // CI, unless Gemini's own integration tests say otherwise.
        assert!(!gemini(&[], &["CI=true"], true));
        assert!(!gemini(&[], &["GITHUB_ACTIONS=true"], true));
        assert!(gemini(
            &[],
            &["CI=true", "GEMINI_CLI_INTEGRATION_TEST=true"],
            true
        ));
        assert!(gemini(&[], &["CI=false", "CIRCLECI=true"], true));
        // -i and ACP are interactive whatever the terminals.
        assert!(gemini(&["-i", "x"], &[], false));
        assert!(gemini(&["--prompt-interactive=x"], &["CI=true"], false));
        assert!(gemini(&["--acp"], &[], false));
        assert!(gemini(&["--experimental-acp"], &[], false));
        // Options whose names start alike are other options; words after `--` are not
        // options.
        assert!(gemini(&["--prompt-interactive", "x"], &[], true));
        assert!(gemini(&["--", "-p"], &[], true));
        assert!(gemini(&["--prompts", "x"], &[], true));
    }

    /// A fake `/proc`: `pid → (comm, ppid, argv, stdin and stdout targets)`.
    fn fake_proc(entries: &[(u32, &str, u32, &[&str], &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("a temp dir");
        for (pid, comm, ppid, argv, fd) in entries {
            let dir = root.path().join(pid.to_string());
            std::fs::create_dir_all(dir.join("fd")).expect("mkdir");
            std::fs::write(dir.join("comm"), format!("{comm}\n")).expect("comm");
            std::fs::write(
                dir.join("stat"),
                format!("{pid} ({comm} (x) y) S {ppid} 1 1 0 -1"),
            )
            .expect("stat");
            let mut cmdline = argv.join("\0");
            cmdline.push('\0');
            std::fs::write(dir.join("cmdline"), cmdline).expect("cmdline");
            std::fs::write(dir.join("environ"), "HOME=/home/alice\0").expect("environ");
            for n in ["0", "1"] {
                std::os::unix::fs::symlink(fd, dir.join("fd").join(n)).expect("symlink");
            }
        }
        root
    }

    #[test]
    fn the_cli_is_found_past_the_shell_that_ran_the_hook() {
        let proc = fake_proc(&[
            (
                40,
                "node",
                30,
                &["node", "/x/gemini", "-p", "go"],
                "/dev/pts/3",
            ),
            (
                41,
                "bash",
                40,
                &["bash", "-c", "carapace hook gemini"],
                "pipe:[1]",
            ),
            (50, "node", 30, &["node", "/x/gemini"], "/dev/pts/3"),
            (
                51,
                "bash",
                50,
                &["bash", "-c", "carapace hook gemini"],
                "pipe:[2]",
            ),
            (60, "node", 30, &["node", "/x/gemini"], "/dev/null"),
        ]);
        // The hook ran by the shell, or exec'd by it.
        assert!(!agent_can_ask(proc.path(), 41));
        assert!(!agent_can_ask(proc.path(), 40));
        assert!(agent_can_ask(proc.path(), 51));
        assert!(agent_can_ask(proc.path(), 50));
        assert!(!agent_can_ask(proc.path(), 60));
        // Nothing readable, or init: nobody to ask.
        assert!(!agent_can_ask(proc.path(), 99));
        assert!(!agent_can_ask(proc.path(), 1));
    }

    #[test]
    fn a_chain_of_shells_ends_the_search() {
        let proc = fake_proc(&[
            (10, "sh", 11, &["sh"], "/dev/pts/1"),
            (11, "sh", 12, &["sh"], "/dev/pts/1"),
            (12, "sh", 13, &["sh"], "/dev/pts/1"),
            (13, "sh", 14, &["sh"], "/dev/pts/1"),
            (14, "node", 1, &["node", "/x/gemini"], "/dev/pts/1"),
        ]);
        assert!(!agent_can_ask(proc.path(), 10));
        assert!(agent_can_ask(proc.path(), 11));
    }
}
