//! Debian kernels for the test VM: resolved from the metapackages, downloaded with
//! `apt-get download`, unpacked with `dpkg-deb -x`, cached by resolved package and version.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _, Result};

use crate::util::{output, run, vm_cache_dir};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kernel {
    #[value(name = "6.12")]
    V6_12,
    #[value(name = "6.1")]
    V6_1,
}

impl Kernel {
    pub const ALL: [Kernel; 2] = [Kernel::V6_12, Kernel::V6_1];

    pub fn name(self) -> &'static str {
        match self {
            Kernel::V6_12 => "6.12",
            Kernel::V6_1 => "6.1",
        }
    }

    fn metapackage(self) -> &'static str {
        match self {
            Kernel::V6_12 => "linux-image-6.12-cloud-amd64",
            Kernel::V6_1 => "linux-image-cloud-amd64",
        }
    }

    /// Kernel command line additions. Debian's 6.1 does not have bpf in its default LSM list.
    pub fn extra_cmdline(self) -> &'static str {
        match self {
            Kernel::V6_12 => "",
            Kernel::V6_1 => "lsm=lockdown,capability,landlock,yama,apparmor,bpf",
        }
    }
}

/// The versioned `linux-image-*` package the metapackage depends on, and its version.
fn resolve(k: Kernel) -> Result<(String, String)> {
    let meta = k.metapackage();
    let deps = output(Command::new("apt-cache").args(["depends", meta]))
        .with_context(|| format!("cannot resolve {meta} (is it in the apt sources?)"))?;
    let pkg = deps
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .map(str::trim)
        .find(|d| d.starts_with("linux-image-") && *d != meta)
        .with_context(|| format!("{meta} depends on no linux-image package:\n{deps}"))?
        .to_owned();
    let show = output(Command::new("apt-cache").args(["show", "--no-all-versions", &pkg]))?;
    let version = show
        .lines()
        .find_map(|l| l.strip_prefix("Version: "))
        .with_context(|| format!("apt-cache show {pkg}: no Version"))?
        .trim()
        .to_owned();
    Ok((pkg, version))
}

fn find_vmlinuz(dir: &Path) -> Option<PathBuf> {
    fs::read_dir(dir.join("boot"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })
}

/// Returns the path of the kernel image, downloading and unpacking it when not cached. A
/// stale apt list names versions the archive no longer has, so a failure refreshes the lists
/// once and tries again.
pub fn ensure(k: Kernel) -> Result<PathBuf> {
    match ensure_once(k) {
        Ok(p) => Ok(p),
        Err(e) if crate::util::is_root() => {
            eprintln!("setup: {e:#}; refreshing the apt lists and trying again");
            run(Command::new("apt-get").arg("update")).context("apt-get update")?;
            ensure_once(k)
        }
        Err(e) => Err(e),
    }
}

fn ensure_once(k: Kernel) -> Result<PathBuf> {
    let root = vm_cache_dir()?.join("kernels");
    fs::create_dir_all(&root)?;
    let (pkg, version) = match resolve(k) {
        Ok(r) => r,
        Err(e) => {
            // Offline or apt lists gone: any kernel of this series cached earlier will do.
            if let Some(p) = cached_any(&root, k) {
                eprintln!("vm: {e:#}; using cached {}", p.display());
                return Ok(p);
            }
            return Err(e);
        }
    };
    let dir = root.join(format!("{pkg}_{}", version.replace([':', '/'], "_")));
    if let Some(p) = find_vmlinuz(&dir) {
        return Ok(p);
    }
    println!("setup: kernel {} downloading… ({pkg} {version})", k.name());
    let tmp = root.join(format!(".download-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let mut download = Command::new("apt-get");
    if crate::util::is_root() {
        // root's apt drops to _apt, which cannot write into a cache under /root
        download.args(["-o", "APT::Sandbox::User=root"]);
    }
    run(download
        .args(["download", &format!("{pkg}={version}")])
        .current_dir(&tmp))
    .with_context(|| format!("apt-get download {pkg}"))?;
    let deb = fs::read_dir(&tmp)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .context("apt-get download produced no .deb")?;
    let unpacked = tmp.join("root");
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
    if find_vmlinuz(&unpacked).is_none() {
        bail!("{} holds no boot/vmlinuz-*", deb.display());
    }
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&unpacked, &dir)
        .with_context(|| format!("cannot move kernel into {}", dir.display()))?;
    let _ = fs::remove_dir_all(&tmp);
    find_vmlinuz(&dir).context("kernel vanished after unpacking")
}

fn cached_any(root: &Path, k: Kernel) -> Option<PathBuf> {
    let prefix = match k {
        Kernel::V6_12 => "linux-image-6.12.",
        Kernel::V6_1 => "linux-image-6.1.",
    };
    let mut dirs: Vec<PathBuf> = fs::read_dir(root)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    dirs.sort();
    dirs.iter().rev().find_map(|d| find_vmlinuz(d))
}
