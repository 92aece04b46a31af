//! `carapace doctor`: what this machine can enforce, and for each missing piece the exact fix.
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use carapace::api::proto::StatusRequest;
use carapace::host;
use carapace::kernel::unavailable::KernelUnavailable;
use carapace::paths::DEFAULT_DATA_DIR;

/// Oldest kernel with BPF LSM (`BPF_PROG_TYPE_LSM`).
const MIN_KERNEL: (u32, u32) = (5, 7);
/// How long the daemon and the LLM endpoint get to answer.
const REACH_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Checks the kernel (version, BPF LSM in the active LSM list and loadable, BTF, cgroup v2,
bpffs, Landlock), the daemon's socket and data directory, the daemon itself and the audit
ledger, and the LLM endpoint when config.yaml names one. Every failed check prints its fix.
Exit status: 0 when every required check passes, 1 otherwise. Run as root for the full
picture (the BPF load probe and the ledger need it).

Examples:
  sudo carapace doctor
  sudo carapace doctor --json | jq '.checks[] | select(.status != \"ok\")'")]
pub struct DoctorArgs {
    /// Print the checks as one JSON object
    #[arg(long)]
    pub json: bool,
    /// The daemon's data directory
    #[arg(long, value_name = "DIR", env = "CARAPACE_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Ok,
    /// Works, with a caveat.
    Warn,
    Fail,
    /// Not applicable or not checkable here.
    Skip,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: State,
    /// A failure of this check makes `doctor` exit non-zero.
    pub required: bool,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(name: &'static str, required: bool, status: State, detail: impl Into<String>) -> Check {
    Check {
        name,
        status,
        required,
        detail: detail.into(),
        fix: None,
    }
}

impl Check {
    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn kernel() -> Check {
    match host::kernel_release() {
        Some((major, minor, release)) if (major, minor) >= MIN_KERNEL => check(
            "kernel",
            true,
            State::Ok,
            format!(
                "Linux {release} (BPF LSM needs {}.{} or later)",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
        ),
        Some((_, _, release)) => check(
            "kernel",
            true,
            State::Fail,
            format!(
                "Linux {release} is older than {}.{}, which has no BPF LSM",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
        )
        .fix("upgrade to a 6.1 or later kernel (e.g. Debian's linux-image-cloud-amd64)"),
        None => check(
            "kernel",
            true,
            State::Fail,
            "cannot read /proc/sys/kernel/osrelease",
        )
        .fix("mount procfs at /proc"),
    }
}

/// The LSM list check, and the list itself for the load probe's advice.
fn lsm_list() -> (Check, Option<Vec<String>>) {
    let Some(list) = host::lsm_list_any() else {
        let c = check("lsm-list", true, State::Fail, format!("cannot read {} (securityfs is not mounted{})", host::LSM_FILE, if is_root() { "" } else { " or not readable without root" }))
            .fix("mount securityfs (`sudo mount -t securityfs securityfs /sys/kernel/security`) and run `sudo carapace doctor` again");
        return (c, None);
    };
    let shown = list.join(",");
    let c = if list.iter().any(|l| l == "bpf") {
        check(
            "lsm-list",
            true,
            State::Ok,
            format!("bpf is in the active LSM list ({shown})"),
        )
    } else {
        check("lsm-list", true, State::Fail, format!("BPF LSM is not active (active LSMs: {shown})")).fix(format!(
            "add `{}` to the kernel command line (e.g. GRUB_CMDLINE_LINUX in /etc/default/grub, then `sudo update-grub`) and reboot",
            host::lsm_boot_parameter(&list)
        ))
    };
    (c, Some(list))
}

fn btf() -> Check {
    if host::readable(Path::new(host::BTF_FILE)) {
        check("btf", true, State::Ok, host::BTF_FILE)
    } else {
        check(
            "btf",
            true,
            State::Fail,
            format!("{} is missing: the kernel has no BTF", host::BTF_FILE),
        )
        .fix("use a kernel built with CONFIG_DEBUG_INFO_BTF=y (most distribution kernels are)")
    }
}

fn bpf_lsm(list: Option<&[String]>) -> Check {
    if !is_root() {
        return check(
            "bpf-lsm",
            true,
            State::Skip,
            "loading a probe program needs root",
        )
        .fix("run `sudo carapace doctor`");
    }
    if list.is_some_and(|l| !l.iter().any(|x| x == "bpf")) {
        return check(
            "bpf-lsm",
            true,
            State::Fail,
            "BPF LSM unavailable: bpf is not in the active LSM list",
        )
        .fix(format!(
            "add `{}` to the kernel command line and reboot",
            host::lsm_boot_parameter(list.unwrap_or_default())
        ));
    }
    match host::probe_bpf_lsm() {
        Ok(()) => check(
            "bpf-lsm",
            true,
            State::Ok,
            "the kernel loads BPF LSM programs",
        ),
        Err(why) => {
            let lockdown = std::fs::read_to_string("/sys/kernel/security/lockdown")
                .ok()
                .map(|l| format!(" (lockdown: {})", l.trim()))
                .unwrap_or_default();
            // Each kind of refusal has its own fix; a minimal program that allows everything
            // refused for another reason is as good as a kernel refusing them all.
            let fix = why.fix().unwrap_or(KernelUnavailable::REFUSED_FIX);
            check(
                "bpf-lsm",
                true,
                State::Fail,
                format!("BPF LSM unavailable: {why}{lockdown}"),
            )
            .fix(fix)
        }
    }
}

fn cgroup2(mountinfo: &str) -> Check {
    match host::mounts_of(mountinfo, "cgroup2").first() {
        Some(m) => check("cgroup2", true, State::Ok, format!("cgroup v2 mounted at {m}")),
        None => check("cgroup2", true, State::Fail, "no cgroup v2 hierarchy is mounted")
            .fix("mount it (`sudo mount -t cgroup2 none /sys/fs/cgroup`) or boot with systemd.unified_cgroup_hierarchy=1"),
    }
}

fn bpffs(mountinfo: &str) -> Check {
    let mounts = host::mounts_of(mountinfo, "bpf");
    if mounts.iter().any(|m| m == host::BPFFS_DIR) {
        check(
            "bpffs",
            false,
            State::Ok,
            format!("bpffs mounted at {}", host::BPFFS_DIR),
        )
    } else {
        check(
            "bpffs",
            false,
            State::Warn,
            format!(
                "bpffs is not mounted at {} (carapaced mounts it at start)",
                host::BPFFS_DIR
            ),
        )
        .fix(format!(
            "`sudo mount -t bpf bpffs {}` to pin programs across daemon restarts",
            host::BPFFS_DIR
        ))
    }
}

fn landlock() -> Check {
    match host::landlock_abi() {
        Ok(v) => check(
            "landlock",
            false,
            State::Ok,
            format!("Landlock ABI {v} (the fallback sandbox)"),
        ),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => check(
            "landlock",
            false,
            State::Warn,
            "Landlock is built in but not enabled",
        )
        .fix("add landlock to the `lsm=` kernel command line parameter and reboot"),
        Err(e) => check(
            "landlock",
            false,
            State::Warn,
            format!("Landlock is unavailable ({e})"),
        )
        .fix("use a kernel with CONFIG_SECURITY_LANDLOCK=y (5.13 or later)"),
    }
}

/// Owned by root (or us) and not writable by group or others.
fn safe_owner(meta: &std::fs::Metadata) -> bool {
    let me = nix::unistd::geteuid().as_raw();
    (meta.uid() == 0 || meta.uid() == me) && meta.permissions().mode() & 0o022 == 0
}

fn data_dir(dir: &Path) -> Check {
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => check("data-dir", true, State::Fail, format!("{} is not a directory", dir.display()))
            .fix(format!("move {} aside; carapaced creates the directory", dir.display())),
        Ok(meta) if !safe_owner(&meta) => check("data-dir", true, State::Fail, format!(
            "{} (mode {:o}, uid {}) can be written by others: they could replace the rules or the ledger",
            dir.display(), meta.permissions().mode() & 0o7777, meta.uid()
        ))
        .fix(format!("sudo chown root:root {0} && sudo chmod 0755 {0}", dir.display())),
        Ok(_) => {
            let audit = carapace::audit::files::audit_dir(dir);
            match std::fs::metadata(&audit) {
                Ok(m) if m.permissions().mode() & 0o077 != 0 => check("data-dir", true, State::Fail, format!(
                    "{} is readable by others (mode {:o})", audit.display(), m.permissions().mode() & 0o7777
                ))
                .fix(format!("sudo chmod 0700 {}", audit.display())),
                _ => check("data-dir", true, State::Ok, format!("{} (root-owned, not writable by others)", dir.display())),
            }
        }
        Err(_) => check("data-dir", false, State::Warn, format!("{} does not exist yet", dir.display()))
            .fix("carapaced creates it at its first start (`sudo systemctl start carapaced`)"),
    }
}

fn socket(path: &Path) -> Check {
    let Some(dir) = path.parent() else {
        return check(
            "socket",
            true,
            State::Fail,
            format!("{} has no directory", path.display()),
        );
    };
    match (std::fs::metadata(dir), std::fs::symlink_metadata(path)) {
        (Ok(d), _) if !safe_owner(&d) && d.permissions().mode() & 0o1000 == 0 => check("socket", true, State::Fail, format!(
            "{} can be written by others: someone could put their own socket there", dir.display()
        ))
        .fix(format!("sudo chown root:root {0} && sudo chmod 0755 {0}", dir.display())),
        (_, Ok(s)) if !s.file_type().is_socket() => check("socket", true, State::Fail, format!("{} is not a socket", path.display()))
            .fix(format!("remove it and restart carapaced: sudo rm {} && sudo systemctl restart carapaced", path.display())),
        (_, Ok(s)) if s.permissions().mode() & 0o006 != 0o006 => check("socket", true, State::Warn, format!(
            "{} (mode {:o}) cannot be used by every user; agents of other users cannot reach the daemon",
            path.display(), s.permissions().mode() & 0o777
        ))
        .fix(format!("sudo chmod 0666 {}", path.display())),
        (_, Ok(_)) => check("socket", true, State::Ok, format!("{} (directory root-owned, socket usable by all users)", path.display())),
        (_, Err(_)) => check("socket", true, State::Fail, format!("{} does not exist: carapaced is not running", path.display()))
            .fix("start the daemon: `sudo systemctl start carapaced` (or `sudo carapaced`)"),
    }
}

async fn daemon(socket: &Path) -> Check {
    let status = tokio::time::timeout(REACH_TIMEOUT, async {
        let mut client = super::connect::connect(socket).await?;
        let reply = client
            .status(StatusRequest {})
            .await
            .map_err(|s| anyhow::anyhow!("{}", s.message()))?;
        anyhow::Ok(reply.into_inner())
    })
    .await;
    match status {
        Ok(Ok(s)) => {
            let kernel = if s.kernel_enforcing {
                format!("kernel layer enforcing ({})", s.kernel_status)
            } else {
                format!("kernel layer unavailable: {}", s.kernel_status)
            };
            check(
                "daemon",
                true,
                State::Ok,
                format!(
                    "carapaced {} answers; {kernel}; {} rules; {} ledger records",
                    s.version, s.rules, s.ledger_records
                ),
            )
        }
        Ok(Err(e)) => check("daemon", true, State::Fail, format!("{e:#}"))
            .fix("start the daemon: `sudo systemctl start carapaced` (or `sudo carapaced`)"),
        Err(_) => check(
            "daemon",
            true,
            State::Fail,
            format!("carapaced did not answer within {REACH_TIMEOUT:?}"),
        )
        .fix("look at its log: `journalctl -u carapaced -e`"),
    }
}

fn ledger(data_dir: &Path) -> Check {
    let dir = carapace::audit::files::audit_dir(data_dir);
    if !dir.exists() {
        return check(
            "audit-ledger",
            false,
            State::Skip,
            format!("no ledger in {} yet", dir.display()),
        );
    }
    if !is_root() {
        return check(
            "audit-ledger",
            true,
            State::Skip,
            "reading the ledger needs root",
        )
        .fix("run `sudo carapace doctor`");
    }
    match carapace::audit::verify::verify(&dir) {
        Ok(r) => check("audit-ledger", true, State::Ok, format!("{} records verify; last hash {}", r.records, r.last_hash)),
        Err(p) => check("audit-ledger", true, State::Fail, format!("the ledger does not verify: {p}"))
            .fix(format!("see `sudo carapace audit verify`; keep the directory as evidence and move {} aside so that carapaced starts a new ledger", dir.display())),
    }
}

/// `config.yaml`, read as the daemon reads it: a file it would refuse fails here, with the
/// same diagnostics (`file:line:column` and a did-you-mean).
pub(crate) fn config(data_dir: &Path) -> Check {
    let path = data_dir.join(carapace::config::FILE_NAME);
    match carapace::config::load(data_dir) {
        Ok(_) if !path.exists() => check(
            "config",
            true,
            State::Ok,
            format!("no {} (the defaults apply)", path.display()),
        ),
        Ok(_) => check("config", true, State::Ok, format!("{} is valid", path.display())),
        Err(d) => check(
            "config",
            true,
            State::Fail,
            format!("{} has errors:\n{}", path.display(), d.to_string().trim_end()),
        )
        .fix("correct the settings at the positions shown; carapaced refuses to start with this file"),
    }
}

/// `http://host:port/…` → ("host", port) with the scheme's default port.
fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?.rsplit('@').next()?;
    let default = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, port) = v6.split_once(']')?;
        let port = port
            .strip_prefix(':')
            .map_or(Some(default), |p| p.parse().ok())?;
        return Some((host.to_owned(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((authority.to_owned(), default)),
    }
}

pub(crate) async fn llm(data_dir: &Path) -> Check {
    let path = data_dir.join(carapace::config::FILE_NAME);
    let model = match carapace::config::load(data_dir) {
        Ok(config) => config.llm,
        Err(_) => {
            return check(
                "llm",
                false,
                State::Skip,
                format!("{} has errors (see the config check)", path.display()),
            )
        }
    };
    let Some(model) = model else {
        return check(
            "llm",
            false,
            State::Skip,
            format!(
                "no LLM configured (no `llm:` section in {})",
                path.display()
            ),
        );
    };
    let url = model.base_url;
    let Some((host, port)) = host_port(&url) else {
        return check(
            "llm",
            true,
            State::Fail,
            format!("`{url}` in {} is not an http(s) URL", path.display()),
        )
        .fix("set llm.base_url to e.g. https://api.anthropic.com");
    };
    let connect = tokio::time::timeout(
        REACH_TIMEOUT,
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await;
    match connect {
        Ok(Ok(_)) => check("llm", true, State::Ok, format!("{url} is reachable ({host}:{port})")),
        Ok(Err(e)) => check("llm", true, State::Fail, format!("cannot connect to {host}:{port} for {url}: {e}"))
            .fix("check the URL in config.yaml, DNS and the firewall; LLM-reviewed rules fail closed while it is down"),
        Err(_) => check("llm", true, State::Fail, format!("{host}:{port} did not answer within {REACH_TIMEOUT:?}"))
            .fix("check the URL in config.yaml, DNS and the firewall; LLM-reviewed rules fail closed while it is down"),
    }
}

/// Every check, in the order they are shown.
pub async fn checks(socket_path: &Path, data: &Path) -> Vec<Check> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let (lsm, list) = lsm_list();
    vec![
        kernel(),
        lsm,
        btf(),
        bpf_lsm(list.as_deref()),
        cgroup2(&mountinfo),
        bpffs(&mountinfo),
        landlock(),
        data_dir(data),
        socket(socket_path),
        daemon(socket_path).await,
        ledger(data),
        config(data),
        llm(data).await,
    ]
}

pub async fn run(socket: &Path, args: DoctorArgs) -> anyhow::Result<u8> {
    let checks = checks(socket, &args.data_dir).await;
    let ok = !checks.iter().any(|c| c.required && c.status == State::Fail);
    if args.json {
        let out = serde_json::json!({ "ok": ok, "checks": checks });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for c in &checks {
            let tag = match c.status {
                State::Ok => "ok  ",
                State::Warn => "warn",
                State::Fail => "FAIL",
                State::Skip => "skip",
            };
            println!("{tag}  {:<13} {}", c.name, c.detail);
            if let Some(fix) = &c.fix {
                if c.status != State::Ok {
                    println!("      {:<13} fix: {fix}", "");
                }
            }
        }
        println!(
            "{}",
            if ok {
                "carapace doctor: every required check passed"
            } else {
                "carapace doctor: some required checks FAILED (see the fixes above)"
            }
        );
    }
    Ok(u8::from(!ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llm_urls() {
        // The endpoint is the one the daemon's reader finds (`config::parse`), not a reading
        // of doctor's own.
        let endpoint = |text: &str| {
            carapace::config::parse("config.yaml", text)
                .ok()
                .and_then(|c| c.llm)
                .map(|m| m.base_url)
        };
        assert_eq!(
            endpoint(
                "llm:\n  provider: anthropic\n  model: m\n  base_url: http://127.0.0.1:8080/v1\n"
            )
            .as_deref(),
            Some("http://127.0.0.1:8080/v1")
        );
        assert_eq!(endpoint("approvals:\n  timeout_seconds: 300\n"), None);
        assert_eq!(
            host_port("http://127.0.0.1:8080/v1"),
            Some(("127.0.0.1".into(), 8080))
        );
        assert_eq!(
            host_port("https://api.example"),
            Some(("api.example".into(), 443))
        );
        assert_eq!(host_port("http://[::1]:9/x"), Some(("::1".into(), 9)));
        assert_eq!(host_port("ftp://x"), None);
    }

    #[tokio::test]
    async fn llm_reachability_is_tested_over_tcp() {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        std::fs::write(
            dir.path().join("config.yaml"),
            format!("llm:\n  provider: openai\n  model: m\n  base_url: http://127.0.0.1:{port}/\n"),
        )
        .unwrap();
        assert_eq!(llm(dir.path()).await.status, State::Ok);
        drop(listener);
        let c = llm(dir.path()).await;
        assert_eq!(c.status, State::Fail, "{c:?}");
        assert!(c.fix.is_some());
        std::fs::remove_file(dir.path().join("config.yaml")).unwrap();
        assert_eq!(llm(dir.path()).await.status, State::Skip);
    }

    #[tokio::test]
    async fn the_config_check_reads_the_file_as_the_daemon_does() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(config(dir.path()).status, State::Ok);
        let file = dir.path().join("config.yaml");
        std::fs::write(&file, "approvals:\n  timeout_seconds: 60\n").unwrap();
        assert_eq!(config(dir.path()).status, State::Ok);
        // A key only doctor's old reading accepted (`llm.url`) is an error for everyone.
        std::fs::write(
            &file,
            "llm:\n  provider: openai\n  model: m\n  url: http://x\n",
        )
        .unwrap();
        let c = config(dir.path());
        assert_eq!(c.status, State::Fail, "{c:?}");
        assert!(
            c.detail.contains("config.yaml:4:3")
                && c.detail.contains("unknown `llm` setting `url`"),
            "{c:?}"
        );
        assert!(c.fix.is_some());
        assert_eq!(llm(dir.path()).await.status, State::Skip);
    }
}
