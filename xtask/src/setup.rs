//! `cargo xtask setup`: installs what building and testing Carapace needs. Idempotent: every
//! step checks first and prints one line.

use std::{path::PathBuf, process::Command};

use anyhow::{bail, Context as _, Result};

use crate::{
    kernel,
    util::{self, cache_dir, is_root, run, try_output},
};

/// Debian packages: LLVM for bpf-linker, QEMU and busybox for the test VM (no protoc: the
/// daemon's build.rs parses the .proto with protox);
/// git, perl and pip's wheel for the VM's bypass and benign-workload tests.
const APT_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "zlib1g-dev",
    "libzstd-dev",
    "qemu-system-x86",
    "busybox-static",
    "cpio",
    "git",
    "perl",
    "python3-pip-whl",
    // The console's browser test drives headless Chromium over the DevTools Protocol.
    "chromium",
    // The console test connects from inside a session to show it is refused.
    "curl",
];

/// Node.js and npm install the agent CLIs. Checked by command rather than by package:
/// the nodejs build from nodesource.com bundles npm and conflicts with Debian's `npm`.
const NODE_PACKAGES: &[&str] = &["nodejs", "npm"];

const BPF_LINKER_VERSION: &str = "0.13.0";

/// An agent CLI from npm that the end-to-end hook tests drive (tests/claude/, tests/agents/).
/// Pinned: its hook protocol and start-up traffic are what the tests were written against.
pub struct AgentCli {
    /// For messages.
    pub name: &'static str,
    package: &'static str,
    version: &'static str,
    /// The first line `BIN --version` prints for the pinned version.
    version_line: &'static str,
    /// The npm prefix under the cache directory (the tests compute the same path).
    dir: &'static str,
    /// The executable in `node_modules/.bin`.
    bin: &'static str,
    /// The variable `cargo xtask test` passes the executable's path in.
    pub env: &'static str,
}

pub const AGENT_CLIS: &[AgentCli] = &[
    AgentCli {
        name: "Claude Code",
        package: "@anthropic-ai/claude-code",
        version: "2.1.330",
        version_line: "2.1.330 (Claude Code)",
        dir: "claude-code",
        bin: "claude",
        env: "CARAPACE_CLAUDE_BIN",
    },
    AgentCli {
        name: "Codex CLI",
        package: "@openai/codex",
        version: "0.169.0",
        version_line: "codex-cli 0.169.0",
        dir: "codex",
        bin: "codex",
        env: "CARAPACE_CODEX_BIN",
    },
    AgentCli {
        name: "Gemini CLI",
        package: "@google/gemini-cli",
        version: "0.61.0",
        version_line: "0.61.0",
        dir: "gemini",
        bin: "gemini",
        env: "CARAPACE_GEMINI_BIN",
    },
    AgentCli {
        name: "Copilot CLI",
        package: "@github/copilot",
        version: "1.0.102",
        version_line: "GitHub Copilot CLI 1.0.102.",
        dir: "copilot",
        bin: "copilot",
        env: "CARAPACE_COPILOT_BIN",
    },
];

pub fn setup() -> Result<()> {
    apt_packages()?;
    node()?;
    for cli in AGENT_CLIS {
        cli.install()?;
    }
    bpf_linker()?;
    nightly()?;
    cargo_fuzz()?;
    for k in kernel::Kernel::ALL {
        let vmlinuz = kernel::ensure(k)?;
        println!("setup: kernel {} ok ({})", k.name(), vmlinuz.display());
    }
    Ok(())
}

fn installed(pkg: &str) -> bool {
    try_output("dpkg-query", ["-W", "-f=${Status}", pkg])
        .is_some_and(|s| s.trim() == "install ok installed")
}

/// A command that needs root: run directly as root, through `sudo -n` if that works,
/// otherwise fail with the exact command to run.
fn privileged(args: &[&str]) -> Result<Command> {
    if is_root() {
        let mut cmd = Command::new(args[0]);
        cmd.args(&args[1..]);
        return Ok(cmd);
    }
    if Command::new("sudo")
        .args(["-n", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        let mut cmd = Command::new("sudo");
        cmd.args(["-n", "env", "DEBIAN_FRONTEND=noninteractive"])
            .args(args);
        return Ok(cmd);
    }
    bail!(
        "setup needs root for this step; run as root:\n  {}",
        args.join(" ")
    );
}

fn apt_packages() -> Result<()> {
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| !installed(p))
        .collect();
    if missing.is_empty() {
        println!("setup: apt packages ok ({})", APT_PACKAGES.join(" "));
        return Ok(());
    }
    println!("setup: apt packages installing… ({})", missing.join(" "));
    apt_install(&missing)
}

fn node() -> Result<()> {
    let versions = try_output("node", ["--version"]).zip(try_output("npm", ["--version"]));
    if let Some((node, npm)) = versions {
        println!("setup: node {} and npm {} ok", node.trim(), npm.trim());
        return Ok(());
    }
    println!(
        "setup: node and npm installing… ({})",
        NODE_PACKAGES.join(" ")
    );
    apt_install(NODE_PACKAGES)
}

fn apt_install(missing: &[&str]) -> Result<()> {
    if !is_root() && try_output("sudo", ["-n", "true"]).is_none() {
        bail!(
            "setup needs root to install Debian packages; run as root:\n  apt-get update && \
             DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {}",
            missing.join(" ")
        );
    }
    run(&mut privileged(&["apt-get", "update"])?)?;
    let mut args = vec!["apt-get", "install", "-y", "--no-install-recommends"];
    args.extend(missing);
    run(privileged(&args)?.env("DEBIAN_FRONTEND", "noninteractive"))
        .context("installing Debian packages")?;
    Ok(())
}

impl AgentCli {
    /// Where [`AgentCli::install`] puts the executable.
    pub fn bin(&self) -> Result<PathBuf> {
        Ok(self.prefix()?.join("node_modules/.bin").join(self.bin))
    }

    fn prefix(&self) -> Result<PathBuf> {
        Ok(cache_dir()?.join(self.dir))
    }

    /// Installs the pinned CLI into the cache with npm, unless `BIN --version` there already
    /// answers with the pinned version.
    fn install(&self) -> Result<()> {
        let bin = self.bin()?;
        let name = self.name;
        let expected = self.version_line;
        let version = || {
            let out = try_output(&bin.to_string_lossy(), ["--version"]).unwrap_or_default();
            out.lines().next().unwrap_or_default().trim().to_owned()
        };
        if version() == expected {
            println!("setup: {name} ok ({expected}, {})", bin.display());
            return Ok(());
        }
        let dir = self.prefix()?;
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let spec = format!("{}@{}", self.package, self.version);
        println!("setup: {name} installing… ({spec} into {})", dir.display());
        run(Command::new("npm")
            .arg("install")
            .arg("--prefix")
            .arg(&dir)
            .args(["--no-audit", "--no-fund", "--no-update-notifier"])
            .arg(&spec))
        .with_context(|| format!("installing the {name} CLI with npm"))?;
        let got = version();
        if got != expected {
            bail!(
                "{} --version says {got:?} after installing, expected {expected:?}",
                bin.display()
            );
        }
        println!("setup: {name} ok ({expected}, {})", bin.display());
        Ok(())
    }
}

fn bpf_linker() -> Result<()> {
    let current = try_output("bpf-linker", ["--version"]).unwrap_or_default();
    if current.split_whitespace().nth(1) == Some(BPF_LINKER_VERSION) {
        println!("setup: bpf-linker ok ({})", current.trim());
        return Ok(());
    }
    println!("setup: bpf-linker installing… (version {BPF_LINKER_VERSION} with LLVM 22)");
    // Plain `cargo`, not the workspace's: `cargo install` ignores the workspace anyway, and
    // this runs from the workspace root only through `cargo xtask`.
    run(Command::new("cargo")
        .args([
            "install",
            "bpf-linker",
            "--version",
            BPF_LINKER_VERSION,
            "--no-default-features",
            "--features",
            "llvm-22",
        ])
        .env("LLVM_PREFIX", "/usr/lib/llvm-22"))
    .context("installing bpf-linker (needs llvm-22-dev)")
}

/// The fuzzing front end `cargo xtask test` runs the parsers' fuzz targets with.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

fn cargo_fuzz() -> Result<()> {
    let current = try_output("cargo", ["fuzz", "--version"]).unwrap_or_default();
    if current.split_whitespace().nth(1) == Some(CARGO_FUZZ_VERSION) {
        println!("setup: cargo-fuzz ok ({})", current.trim());
        return Ok(());
    }
    println!("setup: cargo-fuzz installing… (version {CARGO_FUZZ_VERSION})");
    run(Command::new("cargo").args([
        "install",
        "cargo-fuzz",
        "--locked",
        "--version",
        CARGO_FUZZ_VERSION,
    ]))
    .context("installing cargo-fuzz")
}

/// The eBPF crate's nightly (`carapace-ebpf/rust-toolchain.toml`) with `rust-src`.
fn nightly() -> Result<()> {
    let toolchain = util::ebpf_toolchain()?;
    let toolchains = try_output("rustup", ["toolchain", "list"])
        .context("rustup is not installed; see https://rustup.rs")?;
    if toolchains
        .lines()
        .any(|l| l.starts_with(&format!("{toolchain}-")))
    {
        println!("setup: {toolchain} toolchain ok");
    } else {
        println!("setup: {toolchain} toolchain installing…");
        run(Command::new("rustup").args([
            "toolchain",
            "install",
            &toolchain,
            "--profile",
            "minimal",
        ]))?;
    }
    let components = try_output(
        "rustup",
        [
            "component",
            "list",
            "--toolchain",
            &toolchain,
            "--installed",
        ],
    )
    .unwrap_or_default();
    for component in ["rust-src", "clippy", "rustfmt"] {
        if components.lines().any(|l| l.starts_with(component)) {
            println!("setup: {toolchain} {component} ok");
        } else {
            println!("setup: {toolchain} {component} installing…");
            run(Command::new("rustup").args([
                "component",
                "add",
                component,
                "--toolchain",
                &toolchain,
            ]))?;
        }
    }
    Ok(())
}
