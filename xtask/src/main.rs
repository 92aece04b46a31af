//! Carapace's developer tasks: `cargo xtask setup | vm | test | demo | bench | install`.

mod cycles;
mod fnlen;
mod initramfs;
mod install;
mod kernel;
mod setup;
mod side_by_side;
mod string_errors;
mod test;
mod test_clock;
mod util;
mod vm;

use std::{path::PathBuf, process::ExitCode};

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};

use crate::util::{cargo, run, target_dir, workspace_root};

#[derive(Parser)]
#[command(about = "Carapace's developer tasks", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install the toolchain, bpf-linker, QEMU and the VM kernels (idempotent).
    Setup,
    /// Boot a Debian kernel under QEMU and run a command as root inside.
    Vm(vm::VmArgs),
    /// Everything CI runs: format, lints, unit and host tests, VM kernel tests.
    Test(test::TestArgs),
    /// Boot the VM with the demo rules and show the kernel floor at work.
    Demo {
        /// Kernel to boot.
        #[arg(long, value_enum, default_value = "6.12")]
        kernel: kernel::Kernel,
    },
    /// Measure against the budgets: Layer 1 latency, `check --batch` throughput and hook
    /// latency on the host, then the kernel floor's open+close overhead in the VM.
    Bench {
        /// Kernel to boot.
        #[arg(long, value_enum, default_value = "6.12")]
        kernel: kernel::Kernel,
        /// Only the host benchmarks (no VM).
        #[arg(long)]
        host_only: bool,
        /// Time the kernel floor by TCG's wall clock instead of counting guest instructions
        /// (see `xtask vm --icount`): closer to elapsed time, but noisy on a shared host.
        #[arg(long)]
        wall_clock: bool,
    },
    /// Install (or --uninstall) the binaries, the systemd unit and a starter rule file.
    Install(install::InstallArgs),
    /// Fail if any module of a crate reaches itself again through `use` paths.
    Cycles,
    /// Clippy for the eBPF crate on its own target (nightly, bpfel-unknown-none).
    ClippyEbpf,
    /// Fail if any function of the policy engine is over 150 lines.
    FnLength,
    /// Fail if library code of the policy crate or the daemon returns `Result<_, String>`.
    StringErrors,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Setup => setup::setup().map(|()| 0),
        Cmd::Vm(args) => vm::vm(&args),
        Cmd::Test(args) => test::test(&args).map(|()| 0),
        Cmd::Demo { kernel } => demo(kernel),
        Cmd::Bench {
            kernel,
            host_only,
            wall_clock,
        } => bench(kernel, host_only, wall_clock),
        Cmd::Install(args) => install::install(&args).map(|()| 0),
        Cmd::Cycles => cycles::check(&workspace_root()).map(|()| 0),
        Cmd::ClippyEbpf => test::ebpf_clippy().map(|()| 0),
        Cmd::FnLength => fnlen::check(&workspace_root()).map(|()| 0),
        Cmd::StringErrors => string_errors::check(&workspace_root()).map(|()| 0),
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1).max(1)),
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The cargo target directory of the workspace.
/// Builds `carapaced` and `carapace` (release) and returns the directory holding them.
pub fn build_release_binaries() -> Result<PathBuf> {
    run(cargo().args(["build", "--release", "-p", "carapace-daemon", "--bins"]))
        .context("building carapaced/carapace (use --no-daemon to boot the VM without them)")?;
    Ok(target_dir()?.join("release"))
}

fn bench(kernel: kernel::Kernel, host_only: bool, wall_clock: bool) -> Result<i32> {
    setup::setup()?;
    let root = workspace_root();
    let bins = build_release_binaries()?;
    run(cargo().args([
        "build",
        "--release",
        "-p",
        "carapace-tests",
        "--bin",
        "openclose",
        "--bin",
        "layer1",
        "--bin",
        "gateway-latency",
        "--bin",
        "names-latency",
    ]))?;
    println!("== Layer 1 on the host (tests/bench/layer1.rs) ==");
    let mut layer1 = std::process::Command::new(target_dir()?.join("release/layer1"));
    layer1.arg(bins.join("carapace"));
    // The hook through a daemon needs one running, which needs root (cgroups).
    if util::is_root() {
        layer1.arg(bins.join("carapaced"));
    }
    run(&mut layer1)?;
    println!("== model-API gateway on the host (tests/bench/gateway.rs) ==");
    run(&mut std::process::Command::new(
        target_dir()?.join("release/gateway-latency"),
    ))?;
    println!("== network by name on the host: session resolver, server-name proxy (tests/bench/names.rs) ==");
    run(&mut std::process::Command::new(
        target_dir()?.join("release/names-latency"),
    ))?;
    if host_only {
        return Ok(0);
    }
    println!("== kernel floor in the VM (tests/vm-init/bench.sh) ==");
    let openclose = target_dir()?.join("release/openclose");
    vm::run_vm(
        &vm::VmArgs {
            kernel,
            rules: Some(root.join("tests/fixtures/kernel-rules.yaml")),
            includes: vec![
                format!("{}:/opt/carapace-bench/openclose", openclose.display()),
                format!(
                    "{}:/opt/carapace-bench/bench.sh",
                    root.join("tests/vm-init/bench.sh").display()
                ),
            ],
            timeout: 1800,
            no_daemon: false,
            bin_dir: None,
            smp: 1,
            machine: "microvm".into(),
            icount: !wall_clock,
            cmd: vec![format!(
                "CARAPACE_BENCH_CLOCK={} bash /opt/carapace-bench/bench.sh",
                if wall_clock { "wall" } else { "icount" }
            )],
        },
        Some(&bins),
    )
}

fn demo(kernel: kernel::Kernel) -> Result<i32> {
    // Like `test` and `bench`: on a fresh machine the eBPF build needs nightly's rust-src,
    // the VM a kernel and QEMU.
    setup::setup()?;
    let root = workspace_root();
    let rules = root.join("rules/examples/demo.yaml");
    if !rules.exists() {
        anyhow::bail!("{} is missing (the demo's rule file)", rules.display());
    }
    let script = root.join("tests/vm-init/demo.sh");
    vm::vm(&vm::VmArgs {
        kernel,
        rules: Some(rules),
        includes: vec![format!("{}:/opt/carapace-demo/demo.sh", script.display())],
        timeout: 600,
        no_daemon: false,
        bin_dir: std::env::var_os("CARAPACE_BIN_DIR").map(PathBuf::from),
        smp: 1,
        machine: "microvm".into(),
        icount: false,
        cmd: vec!["bash /opt/carapace-demo/demo.sh".into()],
    })
}
