//! Small helpers shared by the tasks: running commands, paths of the workspace and cache.

use std::{
    env,
    ffi::OsStr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _, Result};

/// The workspace root (the parent of xtask/).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// `cargo` as the caller ran it (so the workspace toolchain is used), or plain `cargo`.
///
/// Under CI (`CI` set) builds keep line tables only and no incremental state: a fresh
/// clone's target/ then needs about half the disk, and a CI machine short of disk has
/// failed in the linker with SIGBUS. Elsewhere the developer's usual profile is kept, so
/// that `cargo xtask` and plain `cargo` share one set of artifacts.
pub fn cargo() -> Command {
    let mut cmd = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(workspace_root());
    if is_ci() {
        cmd.env("CARGO_INCREMENTAL", "0")
            .env("CARGO_PROFILE_DEV_DEBUG", "line-tables-only");
    }
    cmd
}

/// Whether this runs under CI (any non-empty `CI` other than `false` or `0`).
pub fn is_ci() -> bool {
    env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// The directory cargo builds into, as cargo itself resolves it (`CARGO_TARGET_DIR`,
/// `build.target-dir`, or the workspace's target/).
pub fn target_dir() -> Result<PathBuf> {
    let meta = output(cargo().args(["metadata", "--format-version", "1", "--no-deps"]))?;
    let meta: serde_json::Value = serde_json::from_str(&meta).context("cargo metadata")?;
    meta["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata: no target_directory")
}

/// Bytes free to an unprivileged writer on the file system holding `path` (or its nearest
/// existing ancestor, for a directory not made yet).
pub fn free_bytes(path: &Path) -> Result<u64> {
    let existing = path
        .ancestors()
        .find(|p| p.exists())
        .context("no ancestor of the path exists")?;
    let st = nix::sys::statvfs::statvfs(existing)
        .with_context(|| format!("statvfs {}", existing.display()))?;
    Ok(st.blocks_available().saturating_mul(st.fragment_size()))
}

/// Carapace's cache directory: `$XDG_CACHE_HOME/carapace` or `~/.cache/carapace`.
pub fn cache_dir() -> Result<PathBuf> {
    let base = env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .context("neither XDG_CACHE_HOME nor HOME is set")?;
    Ok(base.join("carapace"))
}

/// Cache directory of the VM pieces: `$CARAPACE_VM_CACHE` or `cache_dir()/vm`.
pub fn vm_cache_dir() -> Result<PathBuf> {
    let dir = match env::var_os("CARAPACE_VM_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => cache_dir()?.join("vm"),
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create cache directory {}", dir.display()))?;
    Ok(dir)
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// Runs `cmd` with inherited stdio; fails unless it exits successfully.
pub fn run(cmd: &mut Command) -> Result<()> {
    let what = describe(cmd);
    let status = cmd
        .status()
        .with_context(|| format!("cannot start `{what}`"))?;
    if !status.success() {
        bail!("`{what}` failed ({status})");
    }
    Ok(())
}

/// Runs `cmd` and returns its stdout; fails unless it exits successfully.
pub fn output(cmd: &mut Command) -> Result<String> {
    let what = describe(cmd);
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot start `{what}`"))?;
    if !out.status.success() {
        bail!(
            "`{what}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a program with arguments and returns its stdout, or `None` if it cannot run or fails.
pub fn try_output<I, S>(program: &str, args: I) -> Option<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new(program)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether the current user is root.
pub fn is_root() -> bool {
    try_output("id", ["-u"]).is_some_and(|s| s.trim() == "0")
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The nightly the eBPF crate builds with, from `carapace-ebpf/rust-toolchain.toml`: the one
/// place that names it (carapace-daemon's build.rs reads the same line).
pub fn ebpf_toolchain() -> Result<String> {
    let file = workspace_root().join("carapace-ebpf/rust-toolchain.toml");
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    text.lines()
        .find_map(|line| {
            let value = line
                .trim()
                .strip_prefix("channel")?
                .trim()
                .strip_prefix('=')?;
            Some(value.trim().trim_matches('"').to_owned())
        })
        .with_context(|| format!("{} names no channel", file.display()))
}
