//! Loading, attaching and pinning the programs.
//!
//! Maps are pinned by name under `<pin_dir>/maps` and links under `<pin_dir>/links`. A
//! restarted daemon loads fresh programs that reuse the pinned maps (so session state and
//! rules carry over), attaches them, and only then removes the previous links: for a moment
//! both generations enforce the same maps, so enforcement never lapses.
//!
//! The programs are loaded (and so verified) when the daemon starts, but attached only while
//! some session may run ([`Programs::arm`]): an attached LSM program costs every process on
//! the machine its trampoline on every open (~100 instructions, 3 % of an open+close), and
//! with no session there is nothing for it to enforce.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

use aya::{
    maps::Map,
    programs::{
        links::{FdLink, PinnedLink},
        Lsm, ProgramError,
    },
    Btf as AyaBtf, EbpfLoader, VerifierLogLevel,
};
use carapace_common::{globals, maps as names};

use super::kallsyms::PathCacheOff;
use super::links::pin_replacing;
use super::{btf, dns_programs, kfunc, KernelSettings, KernelUnavailable};

/// The programs, built by build.rs (empty when built with `AYA_BUILD_SKIP=1`).
pub(super) static PROGRAMS: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/carapace"));

/// The LSM hooks the rules need: the kernel layer does not start without them.
pub const HOOKS: [&str; 8] = [
    "file_open",
    "bprm_check_security",
    "socket_connect",
    "socket_sendmsg",
    "inode_link",
    "inode_rename",
    "unix_stream_connect",
    "unix_may_send",
];

/// The self-protection guards, each with the number of parameters its program was written
/// for (it reads the previous program's verdict right after them). A guard whose hook this
/// kernel lacks, or declares differently, is skipped with the reason logged: a program that
/// read the wrong argument as the verdict would refuse or allow at random.
pub const GUARDS: [(&str, &str, u32); 22] = [
    // (program, LSM hook, parameters)
    ("task_kill", "task_kill", 4),
    ("task_setrlimit", "task_setrlimit", 3),
    ("task_setnice", "task_setnice", 2),
    ("task_setioprio", "task_setioprio", 2),
    ("task_setscheduler", "task_setscheduler", 1),
    ("task_movememory", "task_movememory", 1),
    ("file_fcntl", "file_fcntl", 3),
    ("key_alloc", "key_alloc", 3),
    ("key_permission", "key_permission", 3),
    ("ptrace_access_check", "ptrace_access_check", 2),
    ("bpf", "bpf", 3),
    ("sb_mount", "sb_mount", 5),
    ("sb_umount", "sb_umount", 2),
    ("move_mount", "move_mount", 2),
    ("sb_pivotroot", "sb_pivotroot", 2),
    ("kernel_read_file", "kernel_read_file", 3),
    ("kernel_load_data", "kernel_load_data", 2),
    ("task_alloc", "task_alloc", 2),
    ("file_ioctl", "file_ioctl", 3),
    ("file_ioctl_compat", "file_ioctl_compat", 3),
    ("socket_setsockopt", "socket_setsockopt", 3),
    // Refuses only under a `view: user-namespace` rule.
    ("userns_create", "userns_create", 1),
];

/// The hooks that judge changes of names and attributes (`name_ops`), each with the number
/// of parameters its program was written for. They need `CONFIG_SECURITY_PATH` (Debian,
/// Ubuntu, Fedora and Arch kernels have it, for `AppArmor` and TOMOYO); a kernel without one
/// runs without it, and the daemon's log and status say which and why.
pub const NAME_HOOKS: [(&str, &str, u32); 10] = [
    ("path_unlink", "path_unlink", 2),
    ("path_rmdir", "path_rmdir", 2),
    ("path_mkdir", "path_mkdir", 3),
    ("path_mknod", "path_mknod", 4),
    ("path_symlink", "path_symlink", 3),
    ("path_link", "path_link", 3),
    ("path_rename", "path_rename", 5),
    ("path_truncate", "path_truncate", 1),
    ("path_chmod", "path_chmod", 2),
    ("path_chown", "path_chown", 3),
];

/// The hooks that judge attribute changes no `path_*` hook carries (`attr_ops`): times
/// and extended attributes. `inode_setattr` gained a first parameter (the mount's idmap) in
/// Linux 6.8: one program for each form, and the one this kernel declares is attached.
/// `inode_set_acl` and `inode_remove_acl` exist from 6.2; before, ACLs are extended
/// attributes and `inode_setxattr` judges them.
pub const ATTR_HOOKS: [(&str, &str, u32); 7] = [
    ("inode_setattr", "inode_setattr", 3),
    ("inode_setattr_v1", "inode_setattr", 2),
    ("inode_setxattr", "inode_setxattr", 6),
    ("inode_removexattr", "inode_removexattr", 3),
    ("inode_getxattr", "inode_getxattr", 2),
    ("inode_set_acl", "inode_set_acl", 4),
    ("inode_remove_acl", "inode_remove_acl", 3),
];

/// Links earlier versions pinned for programs that are gone: removed once this version's
/// programs are attached (`file_open_cgroup`'s check now runs inside `file_open`).
const RETIRED_LINKS: [&str; 1] = ["file_open_cgroup"];

/// The programs that keep the path cache honest (see the programs' `path_cache`): without
/// both attached, the cache stays off.
pub const PATH_CACHE_HOOKS: [&str; 2] = ["d_instantiate", CHROOT_GUARD];

/// The program on `path_chroot`, which also refuses chroot in sessions under a `view:
/// chroot` rule.
const CHROOT_GUARD: &str = "path_chroot";

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

pub struct Loaded {
    /// Every map but the ring buffers, by name.
    pub maps: Vec<(String, Map)>,
    pub events: Map,
    /// What record sessions touched (`carapace_common::SESSION_RECORD`).
    pub touched: Map,
    pub programs: Programs,
    /// Guards not loaded, with the reason.
    pub skipped: Vec<String>,
    /// Whether file opens inside sessions use the path cache (and how it reads the lock
    /// sequences), or why not.
    pub path_cache: Result<&'static str, PathCacheOff>,
}

pub fn load(settings: &KernelSettings) -> Result<Loaded, KernelUnavailable> {
    if PROGRAMS.is_empty() {
        return Err(KernelUnavailable::NotBuilt);
    }
    check_lsm_list()?;
    let kernel_btf = btf::Btf::from_sys_fs()
        .map_err(|source| KernelUnavailable::NoBtf { source })?
        .map_err(|source| KernelUnavailable::BtfUnreadable {
            what: "kernel BTF",
            source,
        })?;
    let lacks = KernelUnavailable::BtfLacks;
    let offsets = btf::program_offsets(&kernel_btf).map_err(lacks)?;
    let enums = btf::program_enums(&kernel_btf).map_err(lacks)?;
    let guards = optional_plan(&kernel_btf, &NAME_HOOKS)
        .into_iter()
        .chain(optional_plan(&kernel_btf, &ATTR_HOOKS))
        .chain(optional_plan(&kernel_btf, &GUARDS))
        .collect::<Vec<_>>();
    let path_cache = path_cache_plan(&kernel_btf);
    let aya_btf =
        AyaBtf::from_sys_fs().map_err(|e| KernelUnavailable::BtfForLoading(Box::new(e)))?;

    ensure_bpffs(&settings.pin_dir)?;
    let maps_dir = settings.pin_dir.join("maps");
    let links_dir = settings.pin_dir.join("links");
    let fresh = !has_entries(&maps_dir) && !has_entries(&links_dir);
    for dir in [&maps_dir, &links_dir] {
        fs::create_dir_all(dir).map_err(|source| KernelUnavailable::PinDir {
            dir: dir.clone(),
            source,
        })?;
    }

    let mut inputs = Inputs {
        offsets: &offsets,
        enums: &enums,
        optional: &guards,
        path_cache: &path_cache,
        seqcount_cast: kernel_btf.seqcount_cast().filter(|_| path_cache.is_ok()),
    };
    let mut result = load_programs(settings, &inputs, &aya_btf, &maps_dir, &links_dir);
    if let (Err(e), Some(_)) = (&result, inputs.seqcount_cast) {
        // A speed-up only: a kernel that refuses the kfunc still gets every program.
        tracing::warn!(
            "loading with the bpf_rdonly_cast kfunc failed ({e}); loading again without it"
        );
        inputs.seqcount_cast = None;
        result = load_programs(settings, &inputs, &aya_btf, &maps_dir, &links_dir);
    }
    if result.is_err() && fresh {
        // Leave nothing behind on a kernel that refused the programs.
        let _ = fs::remove_dir_all(&settings.pin_dir);
    }
    result
}

/// The lock addresses the path cache reads, or why it stays off on this kernel.
fn path_cache_plan(kernel_btf: &btf::Btf) -> Result<(u64, u64), PathCacheOff> {
    for hook in PATH_CACHE_HOOKS {
        if kernel_btf.lsm_hook_params(hook).is_none() {
            return Err(PathCacheOff::NoHook(hook));
        }
    }
    super::kallsyms::path_cache_locks()
}

/// Each optional program (name hooks, attribute hooks, guards) with why it cannot be
/// attached here (`None`: attach it). Of a hook's forms, the ones this kernel does not
/// declare are left out when another form fits.
fn optional_plan(
    kernel_btf: &btf::Btf,
    programs: &[(&'static str, &'static str, u32)],
) -> Vec<(&'static str, &'static str, Option<String>)> {
    let plan = programs.iter().map(|&(program, hook, params)| {
        let why_not = match kernel_btf.lsm_hook_params(hook) {
            Some(n) if n == params => None,
            Some(n) => Some(format!(
                "{hook}: this kernel's hook takes {n} arguments, the program expects {params}"
            )),
            None => Some(format!("{hook}: this kernel has no such LSM hook")),
        };
        (program, hook, why_not)
    });
    let plan: Vec<_> = plan.collect();
    let fits = |hook: &str| plan.iter().any(|(_, h, why)| *h == hook && why.is_none());
    plan.iter()
        .filter(|(_, hook, why_not)| why_not.is_none() || !fits(hook))
        .cloned()
        .collect()
}

/// What the loader feeds the programs, all read from the running kernel's BTF.
struct Inputs<'a> {
    offsets: &'a [(&'static str, u64)],
    enums: &'a [(&'static str, u32)],
    /// Name hooks and guards, with why each cannot be attached here.
    optional: &'a [(&'static str, &'static str, Option<String>)],
    path_cache: &'a Result<(u64, u64), PathCacheOff>,
    /// The BTF ids of `bpf_rdonly_cast` and `struct seqcount` (`Btf::seqcount_cast`).
    seqcount_cast: Option<(u32, u32)>,
}

/// A program and the LSM hook it attaches to.
type Attach = (&'static str, &'static str);

/// The loaded programs, attached while armed.
pub struct Programs {
    /// Owns the programs' file descriptors (the maps were taken out of it).
    ebpf: aya::Ebpf,
    /// In attach order: the path cache's invalidation hooks first.
    plan: Vec<Attach>,
    links_dir: PathBuf,
    /// The Carapace root cgroup, where the DNS redirection programs attach.
    cgroup_root: PathBuf,
    /// Whether the DNS redirection programs loaded (`dns_programs`).
    dns: bool,
    armed: bool,
    /// The links this daemon attached, by program. Held, not only pinned: a pin removed by
    /// someone else (a `rm` of the pin directory) then leaves the programs attached. Pins
    /// are for a restarted daemon to adopt; these are what keeps enforcement in force.
    held: Vec<PinnedLink>,
}

impl Programs {
    /// Attaches every program in plan order and pins its link in place of a previous
    /// daemon's, each only after the new one is in force. Returns whether a previous daemon's
    /// link was replaced. A failure leaves what was attached in force.
    pub fn arm(&mut self) -> Result<bool, KernelUnavailable> {
        let mut replaced = false;
        for &(name, hook) in &self.plan {
            let (link, was_pinned) = attach_as(&mut self.ebpf, name, hook, &self.links_dir)?;
            self.held.push(link);
            replaced |= was_pinned;
        }
        if self.dns {
            for (link, was_pinned) in
                dns_programs::attach(&mut self.ebpf, &self.cgroup_root, &self.links_dir)?
            {
                self.held.push(link);
                replaced |= was_pinned;
            }
        }
        self.armed = true;
        Ok(replaced)
    }

    /// Detaches every program, in reverse plan order so that the path cache's invalidation
    /// hooks outlive `file_open`, its reader; then any other pin left there. Unpinning a link
    /// drops the last reference to it (the daemon keeps none); the kernel frees the
    /// trampolines after an RCU grace period.
    pub fn disarm(&mut self) -> io::Result<()> {
        for &(name, _) in self.plan.iter().rev() {
            match fs::remove_file(self.links_dir.join(name)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        for entry in fs::read_dir(&self.links_dir)? {
            fs::remove_file(entry?.path())?;
        }
        // The last references: the kernel detaches each program as its link closes.
        self.held.clear();
        self.armed = false;
        Ok(())
    }

    #[must_use]
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// Whether a previous daemon left links pinned (it was armed when it stopped).
    #[must_use]
    pub fn pinned(&self) -> bool {
        has_entries(&self.links_dir)
    }

    /// The programs attached while armed.
    #[must_use]
    pub fn names(&self) -> Vec<&'static str> {
        let dns = self
            .dns
            .then_some(dns_programs::PROGRAMS)
            .into_iter()
            .flatten();
        self.plan.iter().map(|&(name, _)| name).chain(dns).collect()
    }

    /// Whether sessions' DNS can be sent to their resolvers (the redirection programs
    /// loaded; they are attached whenever the LSM programs are).
    #[must_use]
    pub fn redirects_dns(&self) -> bool {
        self.dns
    }
}

/// Loads every program into the kernel (the verifier runs here, so a program this kernel
/// refuses fails the start, not a session) and returns the attach plan, with the guards left
/// out and why.
fn load_plan(
    ebpf: &mut aya::Ebpf,
    inputs: &Inputs<'_>,
    aya_btf: &AyaBtf,
    links_dir: &Path,
) -> Result<(Vec<Attach>, Vec<String>), KernelUnavailable> {
    let mut plan = Vec::new();
    let mut skipped = Vec::new();
    if inputs.path_cache.is_ok() {
        // With the cache on, its invalidation must be in force before any session opens a
        // file: a refusal fails the kernel layer rather than run a blind cache.
        for program in PATH_CACHE_HOOKS {
            load_one(ebpf, program, program, aya_btf)?;
            plan.push((program, program));
        }
    } else {
        let _ = fs::remove_file(links_dir.join("d_instantiate"));
        // `path_chroot` also refuses chroot in sessions (`view: chroot`): wanted without the
        // cache too.
        match load_one(ebpf, CHROOT_GUARD, CHROOT_GUARD, aya_btf) {
            Ok(()) => plan.push((CHROOT_GUARD, CHROOT_GUARD)),
            Err(e) => {
                tracing::warn!("kernel hook not attached: {e}");
                let _ = fs::remove_file(links_dir.join(CHROOT_GUARD));
                skipped.push(e.to_string());
            }
        }
    }
    for hook in HOOKS {
        load_one(ebpf, hook, hook, aya_btf)?;
        plan.push((hook, hook));
    }
    for (program, hook, why_not) in inputs.optional {
        let outcome = match why_not {
            None => load_one(ebpf, program, hook, aya_btf).map_err(|e| e.to_string()),
            Some(why) => Err(why.clone()),
        };
        match outcome {
            Ok(()) => plan.push((*program, *hook)),
            Err(why) => {
                tracing::warn!("kernel hook not attached: {why}");
                // A previous daemon's program would protect a stale daemon pid.
                let _ = fs::remove_file(links_dir.join(program));
                skipped.push(why);
            }
        }
    }
    Ok((plan, skipped))
}

/// Loads the DNS redirection programs; a kernel that refuses them runs without.
fn load_dns(ebpf: &mut aya::Ebpf, links_dir: &Path, skipped: &mut Vec<String>) -> bool {
    match dns_programs::load(ebpf) {
        Ok(()) => true,
        Err(why) => {
            tracing::warn!(
                "{why}; host names in network rules are enforced by their load-time addresses"
            );
            for name in dns_programs::PROGRAMS {
                let _ = fs::remove_file(links_dir.join(name));
            }
            skipped.push(why.to_string());
            false
        }
    }
}

/// The maps the daemon writes or reads, taken out of the loaded object.
const DAEMON_MAPS: [&str; 29] = [
    names::SESSIONS,
    names::DEFAULT_SESSION,
    names::RULES,
    names::CONFIG,
    names::EXACT_PATHS,
    names::PREFIX_PATHS,
    names::NAMES,
    names::INODES,
    names::ANCESTORS,
    names::NETS,
    names::RESOLVERS,
    names::RESOLVER_PORTS,
    names::LEARNED,
    names::LEARNED_REFUSALS,
    names::SNI_PROXIES,
    names::SNI_PEERS,
    names::DFA,
    names::DFA_TRANS,
    names::DFA_ACCEPT,
    names::DFA_LIVE,
    names::DFA_EARLY,
    names::DFA_EARLY_REFS,
    names::PATH_CACHE_GEN,
    names::APPROVED_PATHS,
    names::APPROVED_ADDRS,
    names::HELD_INODES,
    names::EVENTS,
    names::TOUCHED,
    names::ERRORS,
];

fn load_programs(
    settings: &KernelSettings,
    inputs: &Inputs<'_>,
    aya_btf: &AyaBtf,
    maps_dir: &Path,
    links_dir: &Path,
) -> Result<Loaded, KernelUnavailable> {
    let daemon_tgid = std::process::id();
    let mut loader = EbpfLoader::new();
    loader
        .btf(Some(aya_btf))
        .default_map_pin_directory(maps_dir)
        .override_global(
            globals::CGROUP_ROOT_LEVEL,
            &settings.cgroup_root_level,
            true,
        )
        .override_global(globals::CGROUP_ROOT_ID, &settings.cgroup_root_id, true)
        .override_global(globals::DAEMON_TGID, &daemon_tgid, true);
    for (name, offset) in inputs.offsets {
        loader.override_global(name, offset, true);
    }
    for (name, value) in inputs.enums {
        loader.override_global(name, value, true);
    }
    // Zero addresses keep the programs from ever consulting the cache.
    let (rename_lock, mount_lock) = inputs.path_cache.clone().unwrap_or((0, 0));
    loader
        .override_global(globals::ADDR_RENAME_LOCK, &rename_lock, true)
        .override_global(globals::ADDR_MOUNT_LOCK, &mount_lock, true);
    let (rdonly_cast, seqcount) = inputs.seqcount_cast.unzip();
    let seqcount = seqcount.unwrap_or(0);
    loader.override_global(globals::BTF_SEQCOUNT, &seqcount, true);
    let (object, rewritten) =
        kfunc::link(PROGRAMS, rdonly_cast).map_err(KernelUnavailable::LinkObject)?;
    tracing::debug!(
        rewritten,
        kfunc = rdonly_cast.is_some(),
        "linked the bpf_rdonly_cast placeholders"
    );
    if std::env::var_os(VERIFIER_LOG_ENV).is_some() {
        // Every instruction of every path: tens of MB for a large program, so opt-in.
        loader.verifier_log_level(VerifierLogLevel::VERBOSE | VerifierLogLevel::STATS);
    }
    let mut ebpf = loader
        .load(object.bytes())
        .map_err(|e| KernelUnavailable::LoadObject(Box::new(e)))?;

    let (plan, mut skipped) = load_plan(&mut ebpf, inputs, aya_btf, links_dir)?;
    let dns = load_dns(&mut ebpf, links_dir, &mut skipped);
    for name in RETIRED_LINKS {
        let _ = fs::remove_file(links_dir.join(name));
    }

    let mut maps = Vec::new();
    let mut events = None;
    let mut touched = None;
    for name in DAEMON_MAPS {
        let map = ebpf
            .take_map(name)
            .ok_or(KernelUnavailable::MissingMap(name))?;
        match name {
            names::EVENTS => events = Some(map),
            names::TOUCHED => touched = Some(map),
            _ => maps.push((name.to_owned(), map)),
        }
    }
    let events = events.ok_or(KernelUnavailable::MissingMap(names::EVENTS))?;
    let touched = touched.ok_or(KernelUnavailable::MissingMap(names::TOUCHED))?;
    Ok(Loaded {
        maps,
        events,
        touched,
        programs: Programs {
            ebpf,
            plan,
            links_dir: links_dir.to_path_buf(),
            cgroup_root: settings.cgroup_root.clone(),
            dns,
            armed: false,
            held: Vec::new(),
        },
        skipped,
        path_cache: inputs.path_cache.clone().map(|_| {
            if inputs.seqcount_cast.is_some() {
                "direct loads through bpf_rdonly_cast"
            } else {
                "bpf_probe_read_kernel (no bpf_rdonly_cast kfunc before Linux 6.2)"
            }
        }),
    })
}

/// Loads program `name` for LSM `hook` into the kernel (the verifier runs here).
fn load_one(
    ebpf: &mut aya::Ebpf,
    name: &'static str,
    hook: &'static str,
    aya_btf: &AyaBtf,
) -> Result<(), KernelUnavailable> {
    lsm_program(ebpf, name)?
        .load(hook, aya_btf)
        .map_err(|e| refused(name, e))
}

fn lsm_program<'a>(
    ebpf: &'a mut aya::Ebpf,
    name: &'static str,
) -> Result<&'a mut Lsm, KernelUnavailable> {
    ebpf.program_mut(name)
        .ok_or_else(|| KernelUnavailable::MissingProgram(name.to_owned()))?
        .try_into()
        .map_err(|source: ProgramError| KernelUnavailable::Program {
            name: name.to_owned(),
            source: Box::new(source),
        })
}

/// Attaches the loaded program `name` to its LSM hook (a hook may carry several programs)
/// and pins its link under the program's name; returns the link and whether it replaced a
/// previous daemon's.
fn attach_as(
    ebpf: &mut aya::Ebpf,
    name: &'static str,
    hook: &'static str,
    links_dir: &Path,
) -> Result<(PinnedLink, bool), KernelUnavailable> {
    let program = lsm_program(ebpf, name)?;
    let id = program
        .attach()
        .map_err(|source| KernelUnavailable::Attach {
            name: name.to_owned(),
            target: hook.to_owned(),
            source: Box::new(source),
        })?;
    let link: FdLink = program
        .take_link(id)
        .map_err(|source| KernelUnavailable::Program {
            name: name.to_owned(),
            source: Box::new(source),
        })?
        .into();
    pin_replacing(link, &links_dir.join(name)).map_err(|source| KernelUnavailable::PinLink {
        name: name.to_owned(),
        source,
    })
}

/// Set to a file path, makes the loader ask the kernel for its verbose verifier log and write
/// it there when a program is refused: where the verifier spent its budget, for diagnosis.
const VERIFIER_LOG_ENV: &str = "CARAPACE_VERIFIER_LOG";

fn refused(hook: &str, e: ProgramError) -> KernelUnavailable {
    if let ProgramError::LoadError {
        io_error,
        verifier_log,
    } = &e
    {
        let mut log = verifier_log.to_string();
        if let Some(path) = std::env::var_os(VERIFIER_LOG_ENV) {
            // The whole log goes to the file; the message keeps its end, where the refusal is.
            match fs::write(&path, &log) {
                Ok(()) => tracing::info!(
                    "verifier log of {hook} written to {}",
                    Path::new(&path).display()
                ),
                Err(e) => tracing::warn!("cannot write {}: {e}", Path::new(&path).display()),
            }
            let keep = log.len().saturating_sub(20_000);
            let cut = (keep..log.len())
                .find(|&i| log.is_char_boundary(i))
                .unwrap_or(0);
            log = log.split_off(cut);
        }
        let program = hook.to_owned();
        if io_error.raw_os_error() == Some(libc::EPERM) && log.trim().is_empty() {
            return KernelUnavailable::TrampolinesRefused { program };
        }
        return KernelUnavailable::Rejected {
            program,
            // The error is borrowed from aya's; the errno is all it holds.
            error: io_error.raw_os_error().map_or_else(
                || io::Error::new(io_error.kind(), io_error.to_string()),
                io::Error::from_raw_os_error,
            ),
            log,
        };
    }
    KernelUnavailable::Load {
        program: hook.to_owned(),
        source: Box::new(e),
    }
}

/// Fails early, with the fix, when BPF LSM is not in the active LSM list. Where securityfs
/// is not mounted the list cannot be read, and loading itself decides.
fn check_lsm_list() -> Result<(), KernelUnavailable> {
    let Ok(list) = fs::read_to_string("/sys/kernel/security/lsm") else {
        return Ok(());
    };
    let list = list.trim();
    if list.split(',').any(|l| l == "bpf") {
        return Ok(());
    }
    Err(KernelUnavailable::LsmInactive {
        active: list.to_owned(),
    })
}

/// Mounts bpffs at /sys/fs/bpf when the pin directory lives there and nothing is mounted,
/// as systemd would have done.
fn ensure_bpffs(pin_dir: &Path) -> Result<(), KernelUnavailable> {
    let mount_point = Path::new("/sys/fs/bpf");
    let target = if pin_dir.starts_with(mount_point) {
        mount_point
    } else {
        pin_dir
    };
    if is_bpffs(target) {
        return Ok(());
    }
    if target != mount_point {
        return Err(KernelUnavailable::NotBpffs {
            dir: pin_dir.to_path_buf(),
        });
    }
    nix::mount::mount(
        Some("bpffs"),
        mount_point,
        Some("bpf"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(KernelUnavailable::MountBpffs)
}

fn is_bpffs(path: &Path) -> bool {
    nix::sys::statfs::statfs(path).is_ok_and(|s| s.filesystem_type().0 == BPF_FS_MAGIC)
}

fn has_entries(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
}
