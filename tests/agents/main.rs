//! Other agents' real CLIs, offline, with Carapace as their tool-call hook: Codex CLI
//! (`carapace hook codex`), Gemini CLI (`carapace hook gemini`) and GitHub Copilot CLI
//! (`carapace hook copilot`).
//!
//! Each test starts a loopback server speaking the agent's model API whose first answer asks
//! for tool calls (secrets and ordinary project work) and whose second ends the turn;
//! installs the hook into the agent's config with `carapace hook install` (over a config the
//! test wrote first, as a user's would be); runs the CLI in a throwaway HOME; and reads from
//! the CLI's own output and from the tool results it sent back to the model which calls
//! Carapace refused and which ran. The CLIs are the pinned npm packages `cargo xtask setup`
//! installs; `cargo xtask test` passes their paths in `CARAPACE_CODEX_BIN`,
//! `CARAPACE_GEMINI_BIN` and `CARAPACE_COPILOT_BIN`.
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use carapace_tests::agent_cli::{Finished, Workspace};
use carapace_tests::loopback::Received;

mod codex;
mod copilot;
mod gemini;

const CARAPACE: &str = env!("CARGO_BIN_EXE_carapace-under-test");
/// The daemon, for the gateway tests (which need root, as carapaced does).
const CARAPACED: &str = env!("CARGO_BIN_EXE_carapaced-under-test");
/// A real MCP stdio server with one tool, `read_file {path}`, for the agents to load as
/// server `files`.
const MCP_SERVER: &str = env!("CARGO_BIN_EXE_mcp-test-server");

/// `carapace hook install AGENT --settings FILE --hook-args --local`, which must succeed:
/// the hook then evaluates in-process with the built-in packs.
fn install_hook(agent: &str, config: &Path) {
    let out = Command::new(CARAPACE)
        .args(["hook", "install", agent, "--settings"])
        .arg(config)
        .args(["--hook-args", "--local"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run carapace hook install: {e}"));
    assert!(
        out.status.success(),
        "carapace hook install {agent} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The CLI finished its turn (the script's closing "All done.") and asked the loopback
/// server for nothing it does not serve: the run was offline and complete.
fn assert_finished_offline(run: &Finished, unknown: &[Received], context: &dyn Fn() -> String) {
    assert!(
        run.status.success(),
        "the CLI failed ({})\n{}",
        run.status,
        context()
    );
    assert!(run.stdout.contains("All done."), "{}", context());
    assert!(
        unknown.is_empty(),
        "the CLI called endpoints the loopback server does not serve: {unknown:?}"
    );
}

/// A hook written as a shell script, independent of Carapace, to pin what the CLI sends a
/// hook and how it treats each answer: it logs its stdin (one JSON object a call) to
/// `hook-input.jsonl`, answers `deny` (the agent's own deny JSON) to a call naming the SSH
/// key, crashes (exit 1) on one naming the AWS credentials, and prints `other` (when given)
/// for one naming the README. Returns the script's path and the log's.
fn script_hook(ws: &Workspace, deny: &Value, other: Option<&Value>) -> (PathBuf, PathBuf) {
    let log = ws.path("hook-input.jsonl");
    let quote = |v: &Value| carapace_tests::agent_cli::shell_quote(&v.to_string());
    let script = format!(
        "#!/bin/sh\ninput=$(cat)\nprintf '%s\\n' \"$input\" >> {log}\ncase \"$input\" in\n  \
         *id_ed25519*) printf '%s' {deny} ;;\n  \
         *credentials*) echo 'script-hook: crashed' >&2; exit 1 ;;\n  \
         *README*) printf '%s' {other} ;;\nesac\n",
        log = carapace_tests::agent_cli::shell_quote(&log.to_string_lossy()),
        deny = quote(deny),
        other = other.map_or_else(|| "''".to_owned(), quote),
    );
    let path = ws.path("hook.sh");
    ws.write(&path, &script);
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", path.display()));
    }
    (path, log)
}

/// The hook inputs the script logged, one a call.
fn logged_inputs(log: &Path) -> Vec<Value> {
    carapace_tests::agent_cli::read(log)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("hook input {l:?}: {e}")))
        .collect()
}

/// `tests/fixtures/NAME`, a sample hook input of a pinned CLI.
fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    serde_json::from_str(&carapace_tests::agent_cli::read(&path))
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn keys(v: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = v
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    keys
}

/// The live hook input has the sample's top-level fields, and its arguments (`args_key`)
/// the sample's: the samples the hook's unit tests use are still true to the pinned CLI.
fn assert_same_fields(live: &Value, sample: &str, args_key: &str) {
    let sample = fixture(sample);
    assert_eq!(keys(live), keys(&sample), "live hook input: {live:#}");
    assert_eq!(
        keys(&live[args_key]),
        keys(&sample[args_key]),
        "live hook input: {live:#}"
    );
}

/// Layer 0 over the transcript the CLI itself wrote (the one file under `dir` whose name
/// ends with `suffix`): `carapace scan-history --local --json` must find exactly the calls
/// whose findings mention `blocked` (each a text of the blocked call's message), and report
/// `calls` tool calls in all.
fn assert_history_scan(
    ws: &Workspace,
    dir: &Path,
    suffix: &str,
    calls: usize,
    blocked: &[&str],
    context: &dyn Fn() -> String,
) {
    let transcript = find_file(dir, suffix).unwrap_or_else(|| {
        panic!(
            "no *{suffix} transcript under {}\n{}",
            dir.display(),
            context()
        )
    });
    let out = Command::new(CARAPACE)
        .args(["scan-history", "--local", "--json"])
        .arg(&transcript)
        .env("HOME", ws.home())
        .output()
        .unwrap_or_else(|e| panic!("cannot run carapace scan-history: {e}"));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "scan-history printed no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            context()
        )
    });
    let shown = || format!("{report:#}\ntranscript: {}", transcript.display());
    assert_eq!(out.status.code(), Some(2), "{}", shown());
    assert_eq!(report["tool_calls"], calls, "{}", shown());
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    assert_eq!(findings.len(), blocked.len(), "{}", shown());
    for want in blocked {
        assert!(
            findings.iter().any(|f| f.to_string().contains(want)),
            "no finding mentions {want}: {}",
            shown()
        );
    }
}

fn find_file(dir: &Path, suffix: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, suffix) {
                return Some(found);
            }
        } else if path.to_string_lossy().ends_with(suffix) {
            return Some(path);
        }
    }
    None
}
