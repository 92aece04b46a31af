//! `cargo xtask install [--prefix P] [--destdir D] [--uninstall]`: the binaries, the systemd
//! unit and a starter rule file; uninstall also removes the kernel layer's pinned BPF
//! programs and maps so that nothing keeps enforcing after Carapace is gone.
use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _, Result};

use crate::util::workspace_root;

/// Where the kernel layer pins its programs, links and maps (`carapaced`'s `PIN_DIR`).
const PIN_DIR: &str = "/sys/fs/bpf/carapace";
/// The unit's path below the destination root.
const UNIT: &str = "etc/systemd/system/carapaced.service";
/// The daemon's data directory and the rule file in it.
const DATA_DIR: &str = "var/lib/carapace";
const BINARIES: [&str; 2] = ["carapaced", "carapace"];

#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  sudo cargo xtask install                       # /usr/local/bin, /etc/systemd/system, enable with systemctl
  cargo xtask install --destdir /tmp/pkg --prefix /usr   # stage files for a package
  sudo cargo xtask install --uninstall           # stop, remove binaries, unit and BPF pins")]
pub struct InstallArgs {
    /// Installation prefix of the binaries (PREFIX/bin)
    #[arg(long, default_value = "/usr/local")]
    pub prefix: PathBuf,
    /// Stage everything below this directory instead of / (no systemctl, no BPF pins)
    #[arg(long, value_name = "DIR")]
    pub destdir: Option<PathBuf>,
    /// Take the binaries from this directory instead of building them (release)
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Remove what install put in place (the data directory with its rules and audit
    /// ledger is kept)
    #[arg(long)]
    pub uninstall: bool,
}

/// The files of one installation.
struct Layout {
    root: PathBuf,
    bin_dir: PathBuf,
    unit: PathBuf,
    data_dir: PathBuf,
    /// The binaries' directory as the running system sees it (for the unit's `ExecStart`).
    exec_dir: PathBuf,
    /// Installing into the running system (not staged in a destdir).
    live: bool,
}

impl Layout {
    fn new(args: &InstallArgs) -> Result<Self> {
        if !args.prefix.is_absolute() {
            bail!(
                "--prefix must be an absolute path (got {})",
                args.prefix.display()
            );
        }
        let root = args.destdir.clone().unwrap_or_else(|| PathBuf::from("/"));
        let below = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
        Ok(Self {
            bin_dir: below(&args.prefix.join("bin")),
            unit: root.join(UNIT),
            data_dir: root.join(DATA_DIR),
            exec_dir: args.prefix.join("bin"),
            live: args.destdir.is_none(),
            root,
        })
    }
}

pub fn install(args: &InstallArgs) -> Result<()> {
    let layout = Layout::new(args)?;
    if args.uninstall {
        return uninstall(&layout);
    }
    let bins = match &args.bin_dir {
        Some(dir) => dir.clone(),
        None => crate::build_release_binaries()?,
    };
    install_files(&layout, &bins)?;
    if layout.live {
        systemctl(&["daemon-reload"]);
        println!("installed; start it with: sudo systemctl enable --now carapaced");
    } else {
        println!("staged below {}", layout.root.display());
    }
    Ok(())
}

fn copy_mode(from: &Path, to: &Path, mode: u32) -> Result<()> {
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // Through a temporary name, so a running binary is replaced, not overwritten in place.
    let tmp = to.with_extension("xtask-new");
    fs::copy(from, &tmp)
        .with_context(|| format!("cannot copy {} to {}", from.display(), tmp.display()))?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot chmod {}", tmp.display()))?;
    fs::rename(&tmp, to).with_context(|| format!("cannot install {}", to.display()))?;
    println!("installed {}", to.display());
    Ok(())
}

fn install_files(layout: &Layout, bins: &Path) -> Result<()> {
    for bin in BINARIES {
        let from = bins.join(bin);
        if !from.is_file() {
            bail!(
                "{} is missing (build with `cargo build --release`)",
                from.display()
            );
        }
        copy_mode(&from, &layout.bin_dir.join(bin), 0o755)?;
    }
    let contrib = workspace_root().join("contrib");
    let template = fs::read_to_string(contrib.join("systemd/carapaced.service"))
        .context("cannot read contrib/systemd/carapaced.service")?;
    let unit = template.replace("@BINDIR@", &layout.exec_dir.display().to_string());
    if let Some(dir) = layout.unit.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    fs::write(&layout.unit, unit)
        .with_context(|| format!("cannot write {}", layout.unit.display()))?;
    println!("installed {}", layout.unit.display());
    let rules = layout.data_dir.join("rules.yaml");
    if rules.exists() {
        println!("kept {} (already there)", rules.display());
    } else {
        fs::create_dir_all(&layout.data_dir)
            .with_context(|| format!("cannot create {}", layout.data_dir.display()))?;
        copy_mode(&contrib.join("rules.yaml"), &rules, 0o644)?;
    }
    Ok(())
}

fn systemctl(args: &[&str]) {
    match Command::new("systemctl").args(args).status() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("xtask: `systemctl {}` failed ({s})", args.join(" ")),
        Err(e) => eprintln!(
            "xtask: cannot run systemctl ({e}); skipped `{}`",
            args.join(" ")
        ),
    }
}

fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => {
            println!("removed {}", path.display());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

fn uninstall(layout: &Layout) -> Result<()> {
    if layout.live {
        // Stopped first: the daemon would otherwise pin its programs again.
        systemctl(&["disable", "--now", "carapaced"]);
    }
    for bin in BINARIES {
        remove(&layout.bin_dir.join(bin))?;
    }
    remove(&layout.unit)?;
    if layout.live {
        systemctl(&["daemon-reload"]);
        // Unpinning the links detaches the programs; unpinning the maps frees them once
        // nothing else holds them.
        let pins = Path::new(PIN_DIR);
        match fs::remove_dir_all(pins) {
            Ok(()) => println!("removed the pinned BPF programs and maps in {PIN_DIR}"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {PIN_DIR}")),
        }
    }
    println!(
        "kept {} (rules and the audit ledger); remove it yourself if you no longer need them",
        layout.data_dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_and_removes_every_file() {
        let work = std::env::temp_dir().join(format!("xtask-install-{}", std::process::id()));
        let (bins, dest) = (work.join("bins"), work.join("dest"));
        fs::create_dir_all(&bins).unwrap();
        for bin in BINARIES {
            fs::write(bins.join(bin), format!("#!/bin/sh\necho {bin}\n")).unwrap();
        }
        let args = InstallArgs {
            prefix: PathBuf::from("/usr"),
            destdir: Some(dest.clone()),
            bin_dir: Some(bins),
            uninstall: false,
        };
        install(&args).unwrap();
        let daemon = dest.join("usr/bin/carapaced");
        assert_eq!(
            fs::metadata(&daemon).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let unit = fs::read_to_string(dest.join(UNIT)).unwrap();
        assert!(unit.contains("ExecStart=/usr/bin/carapaced --data-dir /var/lib/carapace"));
        assert!(!unit.contains("@BINDIR@"));
        let rules = dest.join(DATA_DIR).join("rules.yaml");
        fs::write(&rules, "version: 1\n# mine\n").unwrap();
        // A second install keeps the user's rules.
        install(&args).unwrap();
        assert_eq!(fs::read_to_string(&rules).unwrap(), "version: 1\n# mine\n");

        install(&InstallArgs {
            uninstall: true,
            ..args
        })
        .unwrap();
        assert!(!daemon.exists() && !dest.join("usr/bin/carapace").exists());
        assert!(!dest.join(UNIT).exists());
        assert!(rules.exists(), "the data directory is kept");
        fs::remove_dir_all(&work).unwrap();
    }

    #[test]
    fn the_unit_keeps_what_the_daemon_needs() {
        let unit =
            fs::read_to_string(workspace_root().join("contrib/systemd/carapaced.service")).unwrap();
        for want in [
            "StateDirectory=carapace",
            "RuntimeDirectory=carapace",
            "ProtectHome=read-only",
            "PrivateTmp=no",
            "CAP_BPF",
            "CAP_SYS_ADMIN",
        ] {
            assert!(unit.contains(want), "{want}");
        }
        // These would break sessions (read-only cgroupfs) or the kernel layer (read-only /sys).
        for unwanted in [
            "ProtectControlGroups=yes",
            "ProtectKernelTunables=yes",
            "PrivateTmp=yes",
        ] {
            assert!(!unit.contains(unwanted), "{unwanted}");
        }
        // systemd's own checker, where it is installed.
        let work = std::env::temp_dir().join(format!("xtask-unit-{}", std::process::id()));
        fs::create_dir_all(&work).unwrap();
        let daemon = work.join("carapaced");
        fs::write(&daemon, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&daemon, fs::Permissions::from_mode(0o755)).unwrap();
        let path = work.join("carapaced.service");
        fs::write(&path, unit.replace("@BINDIR@", &work.display().to_string())).unwrap();
        match Command::new("systemd-analyze")
            .arg("verify")
            .arg(&path)
            .output()
        {
            Ok(out) => assert!(
                out.status.success() && out.stderr.is_empty(),
                "systemd-analyze verify: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("systemd-analyze is not installed ({e}); skipped"),
        }
        fs::remove_dir_all(&work).unwrap();
    }
}
