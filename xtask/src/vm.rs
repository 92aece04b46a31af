//! `cargo xtask vm`: boots a Debian kernel under QEMU (TCG) with a generated initramfs, runs
//! one command as root and exits with its status.

use std::{
    fs,
    io::{BufRead as _, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{mpsc, Mutex},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};

use crate::{
    initramfs::{self, Tree},
    kernel::{self, Kernel},
    test_clock::TestClock,
    util::{shell_quote, vm_cache_dir},
};

const INIT: &str = include_str!("../../tests/vm-init/init.sh");
/// Printed by the VM's init right before the command runs, and after it with its status.
const START_MARKER: &str = "CARAPACE-VM-START";
const EXIT_MARKER: &str = "CARAPACE-VM-EXIT:";

#[derive(clap::Args, Debug, Clone)]
pub struct VmArgs {
    /// Kernel to boot.
    #[arg(long, value_enum, default_value = "6.12")]
    pub kernel: Kernel,
    /// Rule file, installed as /etc/carapace/rules.yaml and passed to carapaced.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Copy a host file or directory into the image (repeatable).
    #[arg(long = "include", value_name = "SRC:DST")]
    pub includes: Vec<String>,
    /// Kill the VM after this many seconds.
    #[arg(long, default_value_t = 900, value_name = "SECS")]
    pub timeout: u64,
    /// Do not build, copy or start carapaced/carapace (for when they do not build).
    #[arg(long, env = "CARAPACE_VM_NO_DAEMON")]
    pub no_daemon: bool,
    /// Take carapaced and carapace from this directory instead of building them.
    #[arg(long, env = "CARAPACE_BIN_DIR", value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Virtual CPUs.
    #[arg(long, default_value_t = 1)]
    pub smp: u32,
    /// QEMU machine type (`microvm` boots fastest; `pc` works too).
    #[arg(long, default_value = "microvm")]
    pub machine: String,
    /// Make the guest's clock count instructions (QEMU `-icount shift=0,sleep=off`): one
    /// nanosecond of guest time per instruction executed, so a timing taken in the guest is
    /// an instruction count, whatever the host's load, instead of TCG's wall time, which the
    /// host's load and QEMU's own caches swing by tens of percent.
    #[arg(long)]
    pub icount: bool,
    /// Command run as root with `bash -c` (one argument: a script; several: quoted words).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// Boots the VM and returns the command's exit status.
pub fn vm(args: &VmArgs) -> Result<i32> {
    let bins = if args.no_daemon {
        None
    } else if let Some(dir) = &args.bin_dir {
        Some(dir.clone())
    } else {
        Some(crate::build_release_binaries()?)
    };
    run_vm(args, bins.as_deref())
}

/// Boots the VM with the Carapace binaries of `bins` (none: no daemon), its console on
/// stdout.
pub fn run_vm(args: &VmArgs, bins: Option<&Path>) -> Result<i32> {
    run_vm_to(args, bins, Box::new(std::io::stdout()))
}

/// Held while a run downloads its kernel and writes its initrd: VMs of several kernels boot
/// side by side (`cargo xtask test`), but the shared cache and the strip directory are
/// filled one run at a time.
static PREPARE: Mutex<()> = Mutex::new(());

/// [`run_vm`] with the guest's console written to `console` instead of stdout.
pub fn run_vm_to(
    args: &VmArgs,
    bins: Option<&Path>,
    console: Box<dyn Write + Send>,
) -> Result<i32> {
    let (vmlinuz, initrd) = {
        let _one_at_a_time = PREPARE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let vmlinuz = kernel::ensure(args.kernel)?;
        let base = initramfs::base()?;
        let mut overlay = overlay(args, bins)?;
        let runs = vm_cache_dir()?.join("runs");
        fs::create_dir_all(&runs)?;
        remove_stale(&runs);
        let initrd = runs.join(format!(
            "initrd-{}-{}.cpio",
            std::process::id(),
            args.kernel.name()
        ));
        let written = initramfs::write_initrd(&base, &mut overlay, &initrd);
        let _ = fs::remove_dir_all(strip_dir()?);
        written?;
        (vmlinuz, initrd)
    };
    let result = boot(args, &vmlinuz, &initrd, console);
    let _ = fs::remove_file(&initrd);
    result
}

/// Removes the per-run files of runs that were killed (their pid is gone).
fn remove_stale(runs: &Path) {
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        // initrd-PID-KERNEL.cpio, stripped-PID
        let pid = name
            .trim_start_matches("initrd-")
            .trim_start_matches("stripped-")
            .split('-')
            .next()
            .unwrap_or_default();
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let path = e.path();
            let _ = fs::remove_dir_all(&path);
            let _ = fs::remove_file(&path);
        }
    }
}

fn strip_dir() -> Result<PathBuf> {
    Ok(vm_cache_dir()?
        .join("runs")
        .join(format!("stripped-{}", std::process::id())))
}

/// A copy of an ELF file without debug info (release builds keep `debug = 1`, which makes
/// them several times larger), or the file itself if it is not ELF or `strip` fails.
/// Large initrds slow the boot down, and past about 150 MB the 6.12 kernel's decompressor
/// hangs under TCG.
fn stripped(src: &Path, name: &str) -> Result<PathBuf> {
    if !initramfs::is_elf(src) {
        return Ok(src.to_path_buf());
    }
    let dir = strip_dir()?;
    fs::create_dir_all(&dir)?;
    let dst = dir.join(name);
    let ok = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&dst)
        .arg(src)
        .status()
        .is_ok_and(|s| s.success());
    Ok(if ok { dst } else { src.to_path_buf() })
}

fn overlay(args: &VmArgs, bins: Option<&Path>) -> Result<Tree> {
    let mut t = Tree::default();
    t.data("init", INIT, 0o755);
    let script = if args.cmd.len() == 1 {
        args.cmd[0].clone()
    } else {
        args.cmd
            .iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    };
    t.data("etc/carapace-vm/cmd.sh", format!("{script}\n"), 0o755);
    let mut config = format!("CARAPACE_VM_KERNEL={}\n", args.kernel.name());
    if let Some(dir) = bins {
        for bin in ["carapaced", "carapace"] {
            let src = dir.join(bin);
            if !src.exists() {
                bail!(
                    "{} not found (build with `cargo build --release -p carapace-daemon --bins`, \
                     or pass --no-daemon)",
                    src.display()
                );
            }
            t.host_file(&stripped(&src, bin)?, &format!("usr/local/bin/{bin}"))?;
        }
        config.push_str("CARAPACE_VM_DAEMON=1\n");
    } else {
        config.push_str("CARAPACE_VM_DAEMON=0\n");
    }
    t.data("etc/carapace-vm/config", config, 0o644);
    if let Some(rules) = &args.rules {
        if !rules.exists() {
            bail!("rules file {} does not exist", rules.display());
        }
        t.host_file(rules, "etc/carapace/rules.yaml")?;
    }
    for inc in &args.includes {
        let (src, dst) = inc
            .split_once(':')
            .with_context(|| format!("--include {inc}: expected SRC:DST"))?;
        if !dst.starts_with('/') {
            bail!("--include {inc}: DST must be an absolute path");
        }
        let src = Path::new(src);
        if src.is_file() {
            let name = format!("include-{}", t.len());
            t.host_file(&stripped(src, &name)?, dst)
        } else {
            t.host_tree(src, dst, &[])
        }
        .with_context(|| format!("--include {inc}"))?;
    }
    Ok(t)
}

const BOOT_SILENCE: Duration = Duration::from_mins(2);

fn bail_boot_stuck(child: &mut std::process::Child) -> Result<()> {
    let _ = child.kill();
    let _ = child.wait();
    bail!(
        "the VM printed nothing for {} s: the kernel is stuck before its console came up \
         (CARAPACE_VM_APPEND=earlyprintk=ttyS0 shows where; a very large initrd does this)",
        BOOT_SILENCE.as_secs()
    )
}

enum Event {
    Line,
    Started,
    Exit(i32),
    Panic,
    Eof,
}

/// The QEMU command line.
fn qemu(args: &VmArgs, vmlinuz: &Path, initrd: &Path) -> Command {
    // Without a known TSC rate the kernel calibrates it against the PIT, which under TCG on
    // a busy host can fail and leave boot hung with a stopped clock; the rate given here
    // only scales guest time.
    let mut append = String::from(
        "console=ttyS0 panic=-1 rdinit=/init quiet tsc_early_khz=2000000 tsc=reliable",
    );
    // CARAPACE_VM_APPEND adds kernel parameters, e.g. `loglevel=7` to debug a boot.
    let user = std::env::var("CARAPACE_VM_APPEND").unwrap_or_default();
    for extra in [args.kernel.extra_cmdline(), user.as_str()] {
        if !extra.is_empty() {
            append.push(' ');
            append.push_str(extra);
        }
    }
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args([
        "-accel",
        "tcg",
        "-M",
        &args.machine,
        "-cpu",
        "max",
        "-m",
        "1024",
    ])
    .args(["-smp", &args.smp.to_string()])
    .args(if args.icount {
        &["-icount", "shift=0,sleep=off"][..]
    } else {
        &[]
    })
    .args(["-nographic", "-no-reboot", "-kernel"])
    .arg(vmlinuz)
    .arg("-initrd")
    .arg(initrd)
    .args(["-append", &append])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    println!(
        "vm: booting {} on {} ({}) with {}",
        args.kernel.name(),
        args.machine,
        vmlinuz.display(),
        append
    );
    cmd
}

fn boot(args: &VmArgs, vmlinuz: &Path, initrd: &Path, out: Box<dyn Write + Send>) -> Result<i32> {
    let mut cmd = qemu(args, vmlinuz, initrd);
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .context("cannot start qemu-system-x86_64 (run `cargo xtask setup`)")?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    let reader = thread::spawn(move || console(stdout, &tx, out));
    let vm = format!("vm {}", args.kernel.name());

    let deadline = t0 + Duration::from_secs(args.timeout);
    let mut status = None;
    let mut panicked = false;
    let mut timed_out = false;
    let mut silent = true;
    loop {
        let now = Instant::now();
        if now >= deadline {
            timed_out = true;
            break;
        }
        // A kernel that prints nothing for this long is stuck before its console came up.
        if silent && now >= t0 + BOOT_SILENCE {
            bail_boot_stuck(&mut child)?;
        }
        let wait = if silent {
            (t0 + BOOT_SILENCE).min(deadline) - now
        } else {
            deadline - now
        };
        let event = rx.recv_timeout(wait);
        if !matches!(event, Err(mpsc::RecvTimeoutError::Timeout)) {
            silent = false;
        }
        match event {
            Ok(Event::Started) => {
                eprintln!(
                    "{vm}: command started {:.1} s after QEMU",
                    t0.elapsed().as_secs_f64()
                );
            }
            Ok(Event::Exit(s)) => {
                status = Some(s);
                break;
            }
            Ok(Event::Panic) => panicked = true,
            Ok(Event::Line) => {}
            Ok(Event::Eof) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if !silent {
                    timed_out = true;
                    break;
                }
            }
        }
    }
    // After the exit marker init powers off; give QEMU a moment, then make sure it is gone.
    let grace = Instant::now() + Duration::from_secs(if status.is_some() { 5 } else { 0 });
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if Instant::now() >= grace {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let _ = reader.join();
    let elapsed = t0.elapsed().as_secs_f64();
    match status {
        Some(s) => {
            eprintln!("{vm}: command exited with status {s} ({elapsed:.1} s in total)");
            Ok(s)
        }
        None if timed_out => bail!(
            "VM timed out after {} s without an exit status (raise --timeout?); QEMU killed",
            args.timeout
        ),
        None if panicked => bail!("the VM's kernel panicked (see the console output above)"),
        None => bail!(
            "QEMU exited after {elapsed:.1} s without the VM's exit marker (init failed or \
             the kernel panicked; see the console output above)"
        ),
    }
}

/// Streams the serial console to `out` (without \r) and reports the markers.
fn console(
    stdout: std::process::ChildStdout,
    tx: &mpsc::Sender<Event>,
    mut out: Box<dyn Write + Send>,
) {
    let mut r = BufReader::new(stdout);
    let mut buf = Vec::new();
    let mut clock = TestClock::default();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']).replace('\r', "");
        if line == START_MARKER {
            let _ = tx.send(Event::Started);
            continue;
        }
        if let Some(status) = line.strip_prefix(EXIT_MARKER) {
            if let Ok(s) = status.trim().parse() {
                let _ = tx.send(Event::Exit(s));
                continue;
            }
        }
        if line.contains("Kernel panic") {
            let _ = tx.send(Event::Panic);
        }
        let _ = tx.send(Event::Line);
        let _ = writeln!(out, "{line}");
        if let Some(summary) = clock.line(&line, Instant::now()) {
            let _ = write!(out, "{summary}");
        }
        let _ = out.flush();
    }
    let _ = tx.send(Event::Eof);
}
