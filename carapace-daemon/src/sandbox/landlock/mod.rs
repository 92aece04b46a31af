//! The Landlock fallback: where the daemon's kernel layer (BPF LSM) is unavailable but
//! Landlock is, `carapace run` confines the command with a Landlock ruleset derived from the
//! daemon's `block` rules, and says exactly which rules it could not enforce.
//!
//! Landlock only grants, so deny rules become their complement ([`grants`]). Everything that
//! allocates or touches the filesystem happens in [`prepare`], before fork, where the
//! `landlock` crate builds the ruleset; the child only calls [`Prepared::restrict_self`]: a
//! `dup` of the ruleset, `no_new_privs` (already set by the privilege drop) and
//! `landlock_restrict_self`, none of which allocates.
pub mod grants;
pub mod sys;

use std::collections::{BTreeSet, VecDeque};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use carapace_common::op;

use self::grants::Target;
use ::landlock::{
    AccessFs, AccessNet, BitFlags, CompatLevel, Compatible as _, NetPort, PathBeneath, Ruleset,
    RulesetAttr as _, RulesetCreated, RulesetCreatedAttr as _, RulesetError,
};

use self::sys::{fs, net};
use crate::api::proto::KernelRule;

/// How many directory entries the search for `**/name` rules looks at, at most.
const SEARCH_LIMIT: usize = 20_000;

/// How far Landlock enforces one rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Enforced,
    /// Enforced with a gap, which the text names.
    Partly(String),
    /// Not enforced, and why.
    Not(String),
}

/// What the Landlock layer enforces, rule by rule.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub abi: u32,
    pub rules: Vec<(String, Status)>,
    /// Ancestor directories of protected paths whose own new entries are restricted too,
    /// with the rights those entries lack.
    pub collateral: Vec<(PathBuf, u64)>,
    /// Directories that could not be listed, closed entirely.
    pub unreadable: Vec<PathBuf>,
    pub grants: usize,
}

impl Report {
    /// The lines `carapace run` prints (without the `carapace: ` prefix).
    #[must_use]
    pub fn lines(&self) -> Vec<String> {
        let enforced: Vec<&str> = self
            .rules
            .iter()
            .filter(|(_, s)| *s == Status::Enforced)
            .map(|(id, _)| id.as_str())
            .collect();
        let mut out = vec![format!(
            "Landlock (ABI {}) enforces {} of {} block rules in the kernel ({} grants)",
            self.abi,
            self.rules
                .iter()
                .filter(|(_, s)| !matches!(s, Status::Not(_)))
                .count(),
            self.rules.len(),
            self.grants
        )];
        if !enforced.is_empty() {
            out.push(format!("landlock: enforced: {}", enforced.join(", ")));
        }
        for (id, status) in &self.rules {
            match status {
                Status::Enforced => {}
                Status::Partly(why) => out.push(format!("landlock: partly enforced: {id}: {why}")),
                Status::Not(why) => out.push(format!("landlock: not enforced: {id}: {why}")),
            }
        }
        if !self.collateral.is_empty() {
            let dirs: Vec<String> = self
                .collateral
                .iter()
                .map(|(p, lacking)| format!("{} ({})", p.display(), describe(*lacking)))
                .collect();
            out.push(format!(
                "landlock: protected paths lie below these directories, so what is new in \
                 them directly is restricted (existing entries and subdirectories keep their \
                 rights): {}",
                dirs.join(", ")
            ));
        }
        if !self.unreadable.is_empty() {
            let dirs: Vec<String> = self
                .unreadable
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            out.push(format!(
                "landlock: could not list {}; closed entirely",
                dirs.join(", ")
            ));
        }
        out
    }
}

/// What entries lacking `rights` cannot do, in words.
fn describe(rights: u64) -> String {
    let mut what = Vec::new();
    for (bits, word) in [
        (fs::MAKE_ANY, "no creating"),
        (fs::REMOVE_ANY, "no removing"),
        (fs::READ_FILE, "new files unreadable"),
        (fs::WRITE_FILE, "new files unwritable"),
        (fs::EXECUTE, "no executing new files"),
    ] {
        if rights & bits != 0 {
            what.push(word);
        }
    }
    if what.is_empty() {
        "rights restricted".into()
    } else {
        what.join(", ")
    }
}

/// A ruleset ready to apply in the child.
#[derive(Debug)]
pub struct Prepared {
    ruleset: RulesetCreated,
    pub report: Report,
}

impl Prepared {
    /// Confines the calling process. Meant for `pre_exec`: a duplicate of the ruleset's file
    /// descriptor is consumed (the parent's stays for the next child), and an error is the
    /// failed call's errno, so nothing allocates.
    pub fn restrict_self(&self) -> io::Result<()> {
        self.ruleset
            .try_clone()?
            .restrict_self()
            .map(drop)
            .map_err(|_| io::Error::last_os_error())
    }
}

/// A ruleset error as an `io::Error` for `prepare`'s callers.
fn ruleset_error(e: RulesetError) -> io::Error {
    io::Error::other(e)
}

/// An `O_PATH` descriptor of `path` itself (a symlink is not followed: the grant is on the
/// entry the walk found).
fn open_path(path: &Path) -> Option<OwnedFd> {
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `path` is NUL-terminated; O_PATH opens no file content.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    };
    // SAFETY: a descriptor the kernel just returned, owned here only.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Builds the Landlock ruleset for `rules`; `None` when the kernel has no Landlock. `roots`
/// are where `**/name` patterns are looked for (the working directory and home).
pub fn prepare(rules: &[KernelRule], roots: &[PathBuf]) -> io::Result<Option<Prepared>> {
    let Some(abi) = sys::abi() else {
        return Ok(None);
    };
    let plan = Plan::new(rules, abi, roots);
    let handled_fs = fs::known(abi);
    let handled_net = if plan.tcp.is_some() {
        net::CONNECT_TCP
    } else {
        0
    };
    let computed = grants::compute(&plan.targets, handled_fs);
    // The rights are what this kernel's ABI knows (`fs::known`), so anything the crate would
    // have to leave out is an error, never a silent downgrade.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(BitFlags::<AccessFs>::from_bits_truncate(handled_fs))
        .map_err(ruleset_error)?;
    if handled_net & net::CONNECT_TCP != 0 {
        ruleset = ruleset
            .handle_access(AccessNet::ConnectTcp)
            .map_err(ruleset_error)?;
    }
    let mut ruleset = ruleset.create().map_err(ruleset_error)?;
    let mut added = 0;
    for g in &computed.grants {
        // A path that vanished since the walk simply gets no grant (narrower, not wider).
        let Some(fd) = open_path(&g.path) else {
            continue;
        };
        let rights = BitFlags::<AccessFs>::from_bits_truncate(g.rights);
        if (&mut ruleset)
            .add_rule(PathBeneath::new(fd, rights))
            .is_ok()
        {
            added += 1;
        }
    }
    if let Some(denied) = &plan.tcp {
        // An empty set of denied ports means every port: no grant at all.
        if !denied.is_empty() {
            for port in 1..=u16::MAX {
                if !denied.contains(&port) {
                    (&mut ruleset)
                        .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                        .map_err(ruleset_error)?;
                }
            }
        }
    }
    let report = Report {
        abi,
        rules: plan.status,
        collateral: computed.collateral,
        unreadable: computed.unreadable,
        grants: added,
    };
    Ok(Some(Prepared { ruleset, report }))
}

/// The targets and per-rule status for one rule set.
struct Plan {
    targets: Vec<Target>,
    status: Vec<(String, Status)>,
    /// TCP ports whose connections are denied (empty: every port); `None`: no network rule
    /// Landlock can express.
    tcp: Option<BTreeSet<u16>>,
}

/// Rights withheld below a protected directory for the rule's operations.
fn below_rights(ops: u32) -> u64 {
    let mut r = 0;
    if ops & op::READ != 0 {
        r |= fs::READ_FILE;
    }
    if ops & op::WRITE != 0 {
        r |= fs::WRITE_FILE | fs::TRUNCATE | fs::IOCTL_DEV | fs::MAKE_ANY;
    }
    if ops & op::EXEC != 0 {
        r |= fs::EXECUTE;
    }
    if ops & op::DELETE != 0 {
        r |= fs::REMOVE_ANY;
    }
    r
}

/// Where `path` really is: its longest existing ancestor with symlinks resolved, plus the
/// rest. Landlock judges the file an access reaches, not the name used.
fn resolve(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_owned(),
        }
    }
}

impl Plan {
    fn new(rules: &[KernelRule], abi: u32, roots: &[PathBuf]) -> Self {
        let known = fs::known(abi);
        let wanted_names: BTreeSet<OsString> = rules
            .iter()
            .flat_map(|r| r.names.iter().chain(&r.except_names))
            .map(OsString::from)
            .collect();
        let (found, truncated) = search(roots, &wanted_names, SEARCH_LIMIT);
        let mut plan = Self {
            targets: Vec::new(),
            status: Vec::new(),
            tcp: None,
        };
        for (index, rule) in rules.iter().enumerate() {
            let status = if rule.triggered {
                Status::Not(
                    "it switches on during the session; a Landlock ruleset is fixed when the \
                     command starts"
                        .into(),
                )
            } else if !rule.userspace_reason.is_empty() {
                Status::Not(format!("userspace only ({})", rule.userspace_reason))
            } else if !rule.net.is_empty() {
                plan.add_net(rule, abi)
            } else {
                plan.add_paths(index, rule, known, &found, truncated, roots)
            };
            plan.status.push((rule.id.clone(), status));
        }
        plan
    }

    fn add_net(&mut self, rule: &KernelRule, abi: u32) -> Status {
        if abi < 4 {
            return Status::Not(format!(
                "Landlock ABI {abi} has no network rules (TCP port rules need ABI 4)"
            ));
        }
        if !rule.except_net.is_empty() {
            // Denying the ports would also deny the allowed addresses.
            return Status::Not(
                "it allows some addresses; Landlock restricts TCP ports, not addresses".into(),
            );
        }
        let every_address: Vec<u32> = rule
            .net
            .iter()
            .filter(|n| n.cidr == "::/0")
            .map(|n| n.port)
            .collect();
        if every_address.is_empty() {
            return Status::Not(
                "it names addresses; Landlock restricts TCP ports, not addresses".into(),
            );
        }
        let denied = self.tcp.get_or_insert_with(BTreeSet::new);
        let all_ports = every_address.contains(&0);
        if all_ports {
            denied.clear();
            // Mark "every port" so that later port lists do not narrow it.
            denied.insert(0);
        } else if !denied.contains(&0) {
            denied.extend(every_address.iter().filter_map(|p| u16::try_from(*p).ok()));
        }
        let mut gaps = vec!["TCP connections only; UDP and other protocols pass"];
        if every_address.len() < rule.net.len() {
            gaps.push("its address-specific entries are not enforced");
        }
        Status::Partly(gaps.join("; "))
    }

    fn add_paths(
        &mut self,
        index: usize,
        rule: &KernelRule,
        known: u64,
        found: &[PathBuf],
        truncated: bool,
        roots: &[PathBuf],
    ) -> Status {
        let below = below_rights(rule.ops) & known;
        if below == 0 {
            return Status::Not("it denies no file operation".into());
        }
        let mut gaps = Vec::new();
        let named = |names: &[String]| -> Vec<PathBuf> {
            found
                .iter()
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| names.iter().any(|w| n.as_bytes() == w.as_bytes()))
                })
                .cloned()
                .collect()
        };
        let except_exact: Vec<PathBuf> = rule
            .except_exact
            .iter()
            .map(|p| resolve(Path::new(p)))
            .chain(named(&rule.except_names))
            .collect();
        let except_prefix: Vec<PathBuf> = rule
            .except_prefixes
            .iter()
            .map(|p| resolve(Path::new(p)))
            .collect();
        let excepted = |p: &Path| {
            except_exact.iter().any(|e| e == p)
                || except_prefix.iter().any(|e| p.starts_with(e) && p != e)
        };
        let mut exact: Vec<PathBuf> = rule.exact.iter().map(|p| resolve(Path::new(p))).collect();
        if !rule.names.is_empty() {
            let hits = named(&rule.names);
            let where_ = roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            gaps.push(format!(
                "`**/{}` covers only the {} such path(s) found at start under {where_}{}; \
                 ones created later or elsewhere are not protected",
                rule.names.join("`, `**/"),
                hits.len(),
                if truncated {
                    format!(" (search stopped after {SEARCH_LIMIT} entries)")
                } else {
                    String::new()
                }
            ));
            exact.extend(hits.into_iter().map(|p| resolve(&p)));
        }
        if !rule.except_names.is_empty() {
            gaps.push(
                "exceptions by name are honoured only for paths found at start; elsewhere the \
                 rule is stricter than written"
                    .into(),
            );
        }
        for path in exact {
            if !excepted(&path) {
                self.targets
                    .push(exact_target(path, index, rule.ops, below, known));
            }
        }
        for prefix in &rule.prefixes {
            self.targets.push(Target::Prefix {
                path: resolve(Path::new(prefix)),
                rule: index,
                rights: below,
            });
        }
        self.targets.extend(
            except_exact
                .iter()
                .map(|p| Target::ExceptExact {
                    path: p.clone(),
                    rule: index,
                })
                .chain(except_prefix.iter().map(|p| Target::ExceptPrefix {
                    path: p.clone(),
                    rule: index,
                })),
        );
        if known & fs::TRUNCATE == 0 && rule.ops & op::WRITE != 0 {
            gaps.push("truncate(2) is not restricted (needs Landlock ABI 3)".into());
        }
        if gaps.is_empty() {
            Status::Enforced
        } else {
            Status::Partly(gaps.join("; "))
        }
    }
}

/// The protection of one whole path: the file rights of `below` on it, and on its parent
/// the rights to replace it (it exists) or to create it (it does not).
fn exact_target(path: PathBuf, rule: usize, ops: u32, below: u64, known: u64) -> Target {
    let meta = std::fs::symlink_metadata(&path).ok();
    let mut entry = 0;
    if ops & (op::WRITE | op::DELETE) != 0 && meta.is_some() {
        // Replacing an existing file means removing it first.
        entry |= fs::REMOVE_ANY;
    }
    if meta.is_none() {
        if ops & op::WRITE != 0 {
            entry |= fs::MAKE_ANY;
        }
        if ops & op::DELETE != 0 {
            entry |= fs::REMOVE_ANY;
        }
    }
    // A directory named exactly is protected as an entry of its parent; its contents are
    // another pattern's business.
    let file = if meta.as_ref().is_some_and(std::fs::Metadata::is_dir) {
        0
    } else {
        below & fs::ON_FILES
    };
    Target::Exact {
        path,
        rule,
        file,
        entry: entry & known,
    }
}

/// Paths under `roots` whose basename is in `names`, breadth first, symlinks not followed,
/// at most `limit` entries looked at; the flag says whether the limit cut the search short.
fn search(roots: &[PathBuf], names: &BTreeSet<OsString>, limit: usize) -> (Vec<PathBuf>, bool) {
    let mut found = BTreeSet::new();
    if names.is_empty() {
        return (Vec::new(), false);
    }
    let mut queue: VecDeque<PathBuf> = roots.iter().cloned().collect();
    let mut seen = 0;
    let mut visited = BTreeSet::new();
    while let Some(dir) = queue.pop_front() {
        if !visited.insert(dir.clone()) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > limit {
                return (found.into_iter().collect(), true);
            }
            let path = entry.path();
            if names.contains(&entry.file_name()) {
                found.insert(path.clone());
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                queue.push_back(path);
            }
        }
    }
    (found.into_iter().collect(), false)
}

/// Renders the report for the terminal, one `carapace: `-prefixed line each.
#[must_use]
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    for line in report.lines() {
        let _ = writeln!(out, "carapace: {line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::proto::NetForm;

    fn rule(id: &str) -> KernelRule {
        KernelRule {
            id: id.into(),
            ops: op::ALL,
            ..KernelRule::default()
        }
    }

    #[test]
    fn statuses_say_what_landlock_cannot_do() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("app")).unwrap();
        std::fs::write(dir.path().join("app/.env"), "K=V").unwrap();
        let rules = vec![
            KernelRule {
                prefixes: vec![format!("{}/secret/", dir.path().display())],
                ..rule("prefix")
            },
            KernelRule {
                names: vec![".env".into()],
                ..rule("names")
            },
            KernelRule {
                userspace_reason: "pattern `re:x` is a regex".into(),
                ..rule("regex")
            },
            KernelRule {
                triggered: true,
                exact: vec!["/x".into()],
                ..rule("session")
            },
            KernelRule {
                net: vec![NetForm {
                    cidr: "::ffff:169.254.169.254/128".into(),
                    port: 0,
                }],
                ..rule("metadata")
            },
            KernelRule {
                net: vec![NetForm {
                    cidr: "::/0".into(),
                    port: 25,
                }],
                ..rule("smtp")
            },
        ];
        let plan = Plan::new(&rules, 7, &[dir.path().to_owned()]);
        let status: Vec<&Status> = plan.status.iter().map(|(_, s)| s).collect();
        assert_eq!(status[0], &Status::Enforced);
        assert!(
            matches!(status[1], Status::Partly(w) if w.contains("1 such path")),
            "{status:?}"
        );
        assert!(matches!(status[2], Status::Not(w) if w.contains("regex")));
        assert!(matches!(status[3], Status::Not(w) if w.contains("during the session")));
        assert!(matches!(status[4], Status::Not(w) if w.contains("not addresses")));
        assert!(matches!(status[5], Status::Partly(w) if w.contains("TCP")));
        assert_eq!(plan.tcp, Some(BTreeSet::from([25])));
        let env = resolve(&dir.path().join("app/.env"));
        assert!(plan
            .targets
            .iter()
            .any(|t| matches!(t, Target::Exact { path, .. } if *path == env)));
    }

    #[test]
    fn exceptions_drop_exact_targets() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), "").unwrap();
        std::fs::write(dir.path().join(".env.example"), "").unwrap();
        let rules = vec![KernelRule {
            names: vec![".env".into(), ".env.example".into()],
            except_names: vec![".env.example".into()],
            ..rule("env")
        }];
        let plan = Plan::new(&rules, 7, &[dir.path().to_owned()]);
        let exact: Vec<&PathBuf> = plan
            .targets
            .iter()
            .filter_map(|t| match t {
                Target::Exact { path, .. } => Some(path),
                _ => None,
            })
            .collect();
        assert_eq!(exact, [&resolve(&dir.path().join(".env"))]);
    }

    #[test]
    fn missing_paths_resolve_through_their_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        assert_eq!(
            resolve(&dir.path().join("link/a/b")),
            std::fs::canonicalize(&real).unwrap().join("a/b")
        );
    }

    /// A real ruleset applied in a child: the protected file is refused, its neighbour not.
    #[test]
    fn a_child_is_refused_the_protected_file() {
        use std::os::unix::process::CommandExt as _;
        if sys::abi().is_none() {
            eprintln!("skipped: no Landlock on this kernel");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::create_dir(&secret).unwrap();
        std::fs::write(secret.join("key"), "k").unwrap();
        std::fs::write(dir.path().join("open"), "o").unwrap();
        let rules = vec![KernelRule {
            prefixes: vec![format!("{}/", secret.display())],
            ..rule("secret")
        }];
        let prepared = prepare(&rules, &[]).unwrap().unwrap();
        let script = format!(
            "cat {}/open && ! cat {}/key 2>/dev/null",
            dir.path().display(),
            secret.display()
        );
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", &script]);
        // SAFETY: prctl and restrict_self are single system calls, no allocation.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                prepared.restrict_self()
            });
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"o");
    }

    /// A port rule through the crate: the denied port is refused, another one connects.
    #[test]
    fn a_child_is_refused_the_denied_port() {
        use std::os::unix::process::CommandExt as _;
        if sys::abi().is_none_or(|abi| abi < 4) {
            eprintln!("skipped: no Landlock network rules on this kernel");
            return;
        }
        let denied = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = |l: &std::net::TcpListener| l.local_addr().unwrap().port();
        let rules = vec![KernelRule {
            net: vec![NetForm {
                cidr: "::/0".into(),
                port: u32::from(port(&denied)),
            }],
            ..rule("port")
        }];
        let prepared = prepare(&rules, &[]).unwrap().unwrap();
        assert!(matches!(&prepared.report.rules[0].1, Status::Partly(w) if w.contains("TCP")));
        let script = format!(
            "echo > /dev/tcp/127.0.0.1/{} && ! echo > /dev/tcp/127.0.0.1/{} 2>/dev/null",
            port(&open),
            port(&denied)
        );
        let mut cmd = std::process::Command::new("bash");
        cmd.args(["-c", &script]);
        // SAFETY: prctl and restrict_self make system calls only, no allocation.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                prepared.restrict_self()
            });
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
}
