//! `cargo xtask test`: the one command CI runs. Each step prints a header and stops the run
//! on failure; a summary closes it.

use std::{
    io::{BufRead as _, BufReader},
    num::NonZeroUsize,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};

use crate::{
    kernel::Kernel,
    setup, side_by_side,
    util::{self, cargo, free_bytes, run, target_dir, workspace_root},
    vm,
};

#[derive(clap::Args, Debug)]
pub struct TestArgs {
    /// Skip the VM kernel tests.
    #[arg(long)]
    no_vm: bool,
    /// Run the VM kernel tests on this kernel only.
    #[arg(long, value_enum)]
    kernel: Option<Kernel>,
    /// Skip `cargo xtask setup`.
    #[arg(long)]
    no_setup: bool,
    /// Skip the bounded fuzzing of the parsers.
    #[arg(long)]
    no_fuzz: bool,
}

struct Steps {
    done: Vec<(String, f64)>,
}

impl Steps {
    fn step<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        println!("\n==> {name}");
        let t0 = Instant::now();
        match f() {
            Ok(v) => {
                let secs = t0.elapsed().as_secs_f64();
                println!("==> {name}: ok ({secs:.1} s)");
                self.done.push((name.to_owned(), secs));
                Ok(v)
            }
            Err(e) => {
                self.summary();
                println!("FAILED: {name}");
                Err(e.context(format!("step `{name}` failed")))
            }
        }
    }

    fn summary(&self) {
        println!("\n==> summary");
        for (name, secs) in &self.done {
            println!("  ok   {name} ({secs:.1} s)");
        }
    }
}

/// The parsers of untrusted input, each fuzzed for a bounded time on every run, with the
/// directories (under fuzz/) that seed it (the corpus it grows first, then read-only seeds)
/// and the seconds past which one input counts as a hang.
const FUZZ_TARGETS: &[(&str, &[&str], u32)] = &[
    ("shell_extract", &[], 10),
    ("transcript", &["corpus/transcript", "seeds/transcript"], 10),
    (
        "inline_code",
        &["corpus/inline_code", "seeds/inline_code"],
        10,
    ),
    ("tool_call", &["corpus/tool_call", "seeds/tool_call"], 10),
    ("dns_query", &["corpus/dns_query"], 10),
    (
        "server_name",
        &["corpus/server_name", "seeds/server_name"],
        10,
    ),
    // A rule file compiles every built-in pack for the kernel too (unless it says
    // `builtin: none`): one new set of path patterns takes about 5 s to determinise under
    // the fuzzer's instrumentation (the automaton of the last build is reused after).
    (
        "rules",
        &["corpus/rules", "../rules/builtin", "../rules/examples"],
        30,
    ),
];
const FUZZ_SECONDS: u32 = 45;

/// `cargo fuzz SUBCOMMAND` in fuzz/, as every fuzzing step runs it: the same toolchain,
/// flags and environment, so that `run` finds what `build` built and compiles nothing.
fn cargo_fuzz(subcommand: &str) -> Result<Command> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(workspace_root().join("fuzz"))
        .arg(format!("+{}", util::ebpf_toolchain()?))
        .args(["fuzz", subcommand])
        // The fuzz workspace needs no eBPF object (userspace parsers only).
        .env("AYA_BUILD_SKIP", "1");
    Ok(cmd)
}

/// Builds every fuzz target in one cargo invocation (the instrumented dependencies once, the
/// targets in parallel) before the VM suites, whose cores the fuzzing later shares.
fn build_fuzz_targets() -> Result<()> {
    run(cargo_fuzz("build")?.args(["--fuzz-dir", "."]))
}

/// Runs one cargo-fuzz target (fuzz/) for `FUZZ_SECONDS`; a crash, hang or failed assertion
/// fails the step and leaves the input under fuzz/artifacts/.
fn fuzz(target: &str, seeds: &[&str], hang_seconds: u32) -> Result<()> {
    let root = workspace_root();
    if let Some(grown) = seeds.first() {
        std::fs::create_dir_all(root.join("fuzz").join(grown))?;
    }
    run(cargo_fuzz("run")?
        .args([target, "--fuzz-dir", "."])
        .args(seeds)
        .arg("--")
        .arg(format!("-max_total_time={FUZZ_SECONDS}"))
        // A single input taking this long is a hang.
        .arg(format!("-timeout={hang_seconds}"))
        .arg("-rss_limit_mb=4096"))
    .with_context(|| {
        format!("fuzz target {target} failed; the input is under fuzz/artifacts/{target}/")
    })
}

/// Every fuzz target, one step each; the first failure stops the rest.
fn fuzz_all(s: &mut Steps) -> Result<()> {
    for (target, seeds, hang_seconds) in FUZZ_TARGETS {
        s.step(&format!("fuzz {target} ({FUZZ_SECONDS} s)"), || {
            fuzz(target, seeds, *hang_seconds)
        })?;
    }
    Ok(())
}

/// Lints the eBPF crate for its own target, which the workspace's clippy (host target,
/// stable) never builds: nightly with `-Z build-std=core` and the `bpf_target_arch` cfg the
/// real build gets from aya-build. Checking does not link, so no bpf-linker is needed.
/// `cargo xtask clippy-ebpf`, and a step of `test`: any finding fails it.
pub fn ebpf_clippy() -> Result<()> {
    run(Command::new("cargo")
        .current_dir(workspace_root())
        .arg(format!("+{}", util::ebpf_toolchain()?))
        .args([
            "clippy",
            "--package",
            "carapace-ebpf",
            "--bins",
            "--release",
            "--target",
            "bpfel-unknown-none",
            "-Z",
            "build-std=core",
            "--",
            "-D",
            "warnings",
        ])
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            format!("--cfg=bpf_target_arch=\"{}\"", std::env::consts::ARCH),
        ))
}

/// Disk a full run from a fresh clone needs free before it starts, measured under CI
/// (target/, fuzz/target/ and the VM cache), with room to spare.
const DISK_NEEDED_FRESH: u64 = 8 << 30;
/// What a run over an existing target/ needs at least (the release binaries and test
/// executables it relinks).
const DISK_NEEDED_WARM: u64 = 1 << 30;

/// Fails at once, naming the file system and what to do, when the run would run out of disk
/// part-way: a linker writing into a full disk dies of SIGBUS, which says nothing of disk.
fn disk_space() -> Result<()> {
    let target = target_dir()?;
    let free = free_bytes(&target)?;
    // Bytes as GiB with one decimal, in integers (no float casts).
    let gib = |b: u64| format!("{}.{}", b >> 30, ((b & ((1 << 30) - 1)) * 10) >> 30);
    let fresh = !target.exists();
    let needed = if fresh {
        DISK_NEEDED_FRESH
    } else {
        DISK_NEEDED_WARM
    };
    println!(
        "{} GiB free for {} ({}; a run from a fresh clone needs about {} GiB)",
        gib(free),
        target.display(),
        if fresh {
            "not built yet"
        } else {
            "already built"
        },
        gib(DISK_NEEDED_FRESH)
    );
    if free < needed {
        bail!(
            "only {} GiB free on the file system of {}, {} GiB needed; free some space \
             (`cargo clean` drops this checkout's builds) or point CARGO_TARGET_DIR at a \
             larger disk",
            gib(free),
            target.display(),
            gib(needed)
        );
    }
    Ok(())
}

pub fn test(args: &TestArgs) -> Result<()> {
    let mut s = Steps { done: Vec::new() };
    s.step("disk space", disk_space)?;
    if !args.no_setup {
        s.step("setup", setup::setup)?;
    }
    s.step("cargo fmt --check", || {
        run(cargo().args(["fmt", "--all", "--", "--check"]))
    })?;
    s.step("module cycles (cargo xtask cycles)", || {
        crate::cycles::check(&workspace_root())
    })?;
    s.step("function length (policy engine)", || {
        crate::fnlen::check(&workspace_root())
    })?;
    s.step("typed errors (cargo xtask string-errors)", || {
        crate::string_errors::check(&workspace_root())
    })?;
    s.step("cargo clippy", || {
        run(cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    s.step("cargo clippy (eBPF crate, bpfel target)", ebpf_clippy)?;
    s.step("cargo test (unit, host and agent CLI tests)", || {
        // The agent CLI tests (tests/claude/, tests/agents/) fail rather than skip without
        // the CLIs, so a run with --no-setup still needs an earlier `cargo xtask setup`.
        let mut test = cargo();
        test.args(["test", "--workspace"]);
        for cli in setup::AGENT_CLIS {
            test.env(cli.env, cli.bin()?);
        }
        run(&mut test)
    })?;
    let fuzzing = !args.no_fuzz;
    if fuzzing {
        s.step("build fuzz targets", build_fuzz_targets)?;
    }
    if args.no_vm {
        if fuzzing {
            fuzz_all(&mut s)?;
        }
        s.summary();
        println!("all steps passed (VM tests skipped: --no-vm)");
        return Ok(());
    }
    let (bins, exe) = s.step("build release binaries and VM kernel tests", release_build)?;
    let rules = workspace_root().join("tests/fixtures/kernel-rules.yaml");
    let kernels: Vec<Kernel> = match args.kernel {
        Some(k) => vec![k],
        None => Kernel::ALL.to_vec(),
    };
    let names: Vec<&str> = kernels.iter().map(|k| k.name()).collect();
    // The fuzzing steps run on the core the quicker suite frees (side_by_side.rs); their
    // own lines and times are kept apart and joined to the summary after.
    let mut fuzz_steps = Steps { done: Vec::new() };
    let vm = s.step(
        &format!(
            "VM kernel tests on Linux {}{}",
            names.join(" and "),
            if fuzzing { ", fuzzing beside" } else { "" }
        ),
        || {
            if !rules.exists() {
                bail!("{} is missing (the VM tests' rule file)", rules.display());
            }
            vm_suites(&kernels, &rules, &exe, &bins, || {
                if fuzzing {
                    fuzz_all(&mut fuzz_steps)
                } else {
                    Ok(())
                }
            })
        },
    );
    s.done.append(&mut fuzz_steps.done);
    vm?;
    s.summary();
    println!("all steps passed");
    Ok(())
}

/// The VM test suite's QEMU arguments for kernel `k`.
fn vm_args(k: Kernel, rules: &Path, exe: &Path) -> vm::VmArgs {
    vm::VmArgs {
        kernel: k,
        rules: Some(rules.to_path_buf()),
        includes: vec![format!("{}:/opt/carapace-tests/kernel", exe.display())],
        // 6.1 verifies the programs slowly under TCG (~2 min a daemon start) and the tests
        // restart the daemon several times.
        timeout: 1800,
        no_daemon: false,
        bin_dir: None,
        smp: 1,
        machine: "microvm".into(),
        icount: false,
        cmd: vec![
            "/opt/carapace-tests/kernel".into(),
            "--test-threads=1".into(),
        ],
    }
}

/// Runs the VM suite on each kernel, and `beside` (the fuzzing) once a core is free. Several
/// kernels boot side by side: TCG runs a one-CPU guest on one host thread, so on a 2-core
/// machine two suites take the time of the longer one instead of the sum (about 15 minutes
/// less), and `beside` runs in the quicker suite's idle tail (6.1 ends about 4 minutes before
/// 6.12) instead of before the VMs. Each console goes to target/vm-logs/KERNEL.log, printed
/// whole when every suite has ended, with a progress line a minute meanwhile.
fn vm_suites(
    kernels: &[Kernel],
    rules: &Path,
    exe: &Path,
    bins: &Path,
    beside: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let logs = target_dir()?.join("vm-logs");
    std::fs::create_dir_all(&logs)?;
    let log_of = |k: Kernel| logs.join(format!("{}.log", k.name()));
    let jobs: Vec<side_by_side::Job<'_, i32>> = kernels
        .iter()
        .map(|&k| -> side_by_side::Job<'_, i32> {
            let log = log_of(k);
            Box::new(move || {
                let file = std::fs::File::create(&log)
                    .with_context(|| format!("cannot create {}", log.display()))?;
                vm::run_vm_to(&vm_args(k, rules, exe), Some(bins), Box::new(file))
            })
        })
        .collect();
    let cores = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    let outcomes = side_by_side::run(jobs, cores, beside, Duration::from_mins(1), || {
        let progress: Vec<String> = kernels
            .iter()
            .map(|&k| format!("{}: {}", k.name(), progress(&log_of(k))))
            .collect();
        println!("VM tests: {}", progress.join("; "));
    });
    let mut failed = Vec::new();
    for (&k, outcome) in kernels.iter().zip(outcomes.jobs) {
        println!("\n---- console of the VM suite on Linux {} ----", k.name());
        match std::fs::read_to_string(log_of(k)) {
            Ok(text) => print!("{text}"),
            Err(e) => println!("(cannot read {}: {e})", log_of(k).display()),
        }
        match outcome {
            Ok(0) => println!("---- Linux {}: all passed ----", k.name()),
            Ok(code) => failed.push(format!("Linux {} (exit status {code})", k.name())),
            Err(e) => failed.push(format!("Linux {} ({e:#})", k.name())),
        }
    }
    if let Err(e) = outcomes.beside {
        failed.push(format!("{e:#}"));
    }
    if !failed.is_empty() {
        bail!("kernel tests failed in the VM: {}", failed.join(", "));
    }
    Ok(())
}

/// "N passed, M failed" so far in a VM suite's console log.
fn progress(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let passed = text.lines().filter(|l| l.ends_with("... ok")).count();
    let failed = text.lines().filter(|l| l.ends_with("... FAILED")).count();
    format!("{passed} passed, {failed} failed")
}

/// Builds the release `carapaced` and `carapace` and the `kernel` test binary of
/// carapace-tests in one cargo invocation, and returns the binaries' directory and the test
/// binary's path. One invocation resolves one feature set: built apart, the test's
/// dependencies (tungstenite's) turn on features of crates under carapace-daemon (rand,
/// regex-syntax) and cargo compiled the daemon, its rule engine and the regex stack twice in
/// release, about 2.5 minutes of CI (BENCHMARKS.md).
fn release_build() -> Result<(PathBuf, PathBuf)> {
    let mut child = cargo()
        .args([
            "build",
            "--release",
            "-p",
            "carapace-daemon",
            "--bin",
            "carapaced",
            "--bin",
            "carapace",
            "-p",
            "carapace-tests",
            "--test",
            "kernel",
            "--message-format=json-render-diagnostics",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start cargo")?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut exe = None;
    for line in BufReader::new(stdout).lines() {
        if let Some(path) = kernel_test_executable(&line?) {
            exe = Some(path);
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!(
            "building carapaced/carapace and the kernel tests failed ({status}); \
             use --no-vm to skip the VM"
        );
    }
    let exe = exe.context("cargo did not report the kernel test executable")?;
    Ok((target_dir()?.join("release"), exe))
}

/// The path of the `kernel` test executable when `line` (cargo's JSON messages) reports it.
fn kernel_test_executable(line: &str) -> Option<PathBuf> {
    let msg = serde_json::from_str::<serde_json::Value>(line).ok()?;
    if msg["reason"] == "compiler-artifact"
        && msg["target"]["name"] == "kernel"
        && msg["profile"]["test"] == true
    {
        return msg["executable"].as_str().map(PathBuf::from);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_test_executable_is_found_among_cargos_messages() {
        let test = r#"{"reason":"compiler-artifact","target":{"name":"kernel"},"profile":{"test":true},"executable":"/t/release/deps/kernel-0123"}"#;
        assert_eq!(
            kernel_test_executable(test),
            Some(PathBuf::from("/t/release/deps/kernel-0123"))
        );
        // The daemon binary built beside it, the crate `kernel` built as a library of no test,
        // a message of another kind and cargo's plain text are not it.
        for other in [
            r#"{"reason":"compiler-artifact","target":{"name":"carapaced"},"profile":{"test":false},"executable":"/t/release/carapaced"}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"kernel"},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"build-finished","success":true}"#,
            "   Compiling carapace-tests v0.1.0",
        ] {
            assert_eq!(kernel_test_executable(other), None, "{other}");
        }
    }
}
