//! The machine the policy core (`carapace_policy`) runs against: [`RealHost`], the real file
//! system behind its [`Host`] trait, and what compiling rules and evaluating calls take from
//! this process (the accounts' homes, `$HOME`, the system resolver, the working directory
//! and environment).

use std::net::{IpAddr, ToSocketAddrs as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use carapace_policy::host::{FileInfo, Host};

use carapace_policy::engine::Context;
use carapace_policy::rules::{Homes, Options};

/// The real file system, through `std::fs`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealHost;

/// The real file system as the policy core takes it.
#[must_use]
pub fn shared() -> Arc<dyn Host> {
    static HOST: LazyLock<Arc<dyn Host>> = LazyLock::new(|| Arc::new(RealHost));
    Arc::clone(&HOST)
}

impl Host for RealHost {
    fn stat(&self, path: &Path) -> Option<FileInfo> {
        std::fs::metadata(path).ok().map(|m| FileInfo::from(&m))
    }

    fn lstat(&self, path: &Path) -> Option<FileInfo> {
        std::fs::symlink_metadata(path)
            .ok()
            .map(|m| FileInfo::from(&m))
    }

    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        std::fs::read_link(path).ok()
    }

    fn canonicalize(&self, path: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(path).ok()
    }

    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }
}

/// The accounts of `/etc/passwd` plus this process's `$HOME`: the homes `~` and `$HOME` in
/// rules expand to.
#[must_use]
pub fn homes() -> Homes {
    Homes::from_passwd(
        &RealHost,
        Path::new("/etc/passwd"),
        std::env::var("HOME").ok().as_deref(),
    )
}

/// Resolves with the system resolver (std's `ToSocketAddrs`).
#[must_use]
pub fn resolve_dns(host: &str) -> Option<Vec<IpAddr>> {
    let mut ips: Vec<IpAddr> = (host, 0).to_socket_addrs().ok()?.map(|a| a.ip()).collect();
    ips.sort();
    ips.dedup();
    (!ips.is_empty()).then_some(ips)
}

/// What compiling rules takes from this machine: its accounts' homes, the system resolver
/// and the real file system.
#[must_use]
pub fn options() -> Options {
    Options {
        homes: homes(),
        resolver: resolve_dns,
        host: shared(),
    }
}

/// The context of a local user `uid` working in `cwd`: their home from the password
/// database (falling back to `/` so nothing resolves into someone else's home), paths
/// resolved on the real file system.
#[must_use]
pub fn context_for_user(uid: u32, cwd: &str) -> Context {
    let home = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| "/".to_owned(), |u| u.dir.display().to_string());
    Context {
        cwd: cwd.to_owned(),
        home,
        env: Vec::new(),
        host: Some(shared()),
    }
}

/// The context of this process: its working directory, `$HOME` and environment (the hook
/// runs with the agent's environment, so `$VAR` in a command means what the agent's shell
/// would make of it).
#[must_use]
pub fn current_context() -> Context {
    let cwd = std::env::current_dir().map_or_else(|_| "/".to_owned(), |p| p.display().to_string());
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut ctx = context_for_user(uid, &cwd);
    if let Some(home) = std::env::var_os("HOME") {
        ctx.home = home.to_string_lossy().into_owned();
    }
    ctx.env = std::env::vars().collect();
    ctx
}
