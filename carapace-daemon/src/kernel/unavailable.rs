//! Why the kernel layer cannot run, by kind: the daemon logs it (with the fix, where the
//! machine is what must change) and `carapace doctor` matches on it to pick its fix. A leaf
//! module, so that `host` (the doctor's probes) can name it without the loader.
use std::io;
use std::path::PathBuf;

use aya::programs::{links::LinkError, ProgramError};

use super::btf::BtfError;
use super::kfunc::Unreadable;
use super::map_error::MapsError;

/// Why the kernel layer cannot run on this machine, one line for the user. aya's errors are
/// boxed: they are large, and this travels in every `Result` of the loader. The daemon and
/// `carapace doctor` match on the kind (each has its own fix); the text is what they print.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelUnavailable {
    /// Built with `AYA_BUILD_SKIP=1`: there is nothing to load.
    #[error("this build has no eBPF programs (built with AYA_BUILD_SKIP=1)")]
    NotBuilt,
    /// `bpf` is missing from the active LSM list (`/sys/kernel/security/lsm`).
    #[error(
        "BPF LSM is not active (active LSMs: {active}); add `lsm={active},bpf` to the kernel \
         command line and reboot"
    )]
    LsmInactive { active: String },
    /// No `/sys/kernel/btf/vmlinux`.
    #[error(
        "the kernel has no BTF (/sys/kernel/btf/vmlinux: {source}); a kernel built with \
         CONFIG_DEBUG_INFO_BTF=y is required"
    )]
    NoBtf { source: std::io::Error },
    /// The kernel's BTF could not be parsed (`what`: the file, or "kernel BTF").
    #[error("cannot read {what}: {source}")]
    BtfUnreadable {
        what: &'static str,
        #[source]
        source: BtfError,
    },
    /// aya could not read the kernel's BTF for loading.
    #[error("cannot read kernel BTF: {0}")]
    BtfForLoading(#[source] Box<aya::BtfError>),
    /// The kernel's BTF lacks a struct, member or enum the programs read.
    #[error("kernel BTF lacks what the programs need: {0}")]
    BtfLacks(#[source] BtfError),
    /// The kernel was built without BPF LSM (no `bpf_lsm_*` attach points).
    #[error("the kernel has no bpf_lsm_file_open (built without CONFIG_BPF_LSM)")]
    NoLsmHooks,
    /// `EPERM` with an empty verifier log: the kernel (or the hypervisor or sandbox it runs
    /// in) forbids trampoline programs, whatever the program says. The project's own
    /// development and CI machines answer this way.
    #[error(
        "this kernel refuses BPF LSM programs (loading {program}: EPERM with an empty verifier \
         log — trampoline programs are not allowed here)"
    )]
    TrampolinesRefused { program: String },
    /// The verifier (or the kernel) refused one program for what it does.
    #[error(
        "the kernel rejected the {program} program: {error}{}",
        verifier_log(log)
    )]
    Rejected {
        program: String,
        error: std::io::Error,
        log: String,
    },
    /// The pin directory (or one of its subdirectories) could not be created.
    #[error("cannot create {}: {source}", dir.display())]
    PinDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The pin directory is outside bpffs, where pins cannot live.
    #[error("{} is not on a bpffs mount; pins must live on bpffs", dir.display())]
    NotBpffs { dir: PathBuf },
    /// Nothing was mounted at `/sys/fs/bpf`, and mounting bpffs there failed.
    #[error("cannot mount bpffs at /sys/fs/bpf: {0}")]
    MountBpffs(#[source] nix::errno::Errno),
    /// The embedded eBPF object could not be read to link its kfunc calls.
    #[error("cannot link the eBPF object: {0}")]
    LinkObject(#[source] Unreadable),
    /// aya could not load the object (its maps, BTF relocations).
    #[error("cannot load the eBPF object: {}", chain(.0))]
    LoadObject(#[source] Box<aya::EbpfError>),
    /// The object lacks a map the daemon needs.
    #[error("map {0} missing from the object")]
    MissingMap(&'static str),
    /// The object lacks a program the daemon needs.
    #[error("program {0} missing from the object")]
    MissingProgram(String),
    /// A program is not of the type expected, or its link could not be taken.
    #[error("{name}: {source}")]
    Program {
        name: String,
        #[source]
        source: Box<ProgramError>,
    },
    /// Loading a program failed other than by the verifier's or the kernel's refusal.
    #[error("cannot load {program}: {}", chain(source))]
    Load {
        program: String,
        #[source]
        source: Box<ProgramError>,
    },
    /// Attaching a loaded program to its hook (or cgroup) failed.
    #[error("cannot attach {name} to {target}: {}", chain(source))]
    Attach {
        name: String,
        target: String,
        #[source]
        source: Box<ProgramError>,
    },
    /// A program's link is not a BPF link, which is what can be pinned.
    #[error("{name}: not a bpf link: {source}")]
    NotALink {
        name: String,
        #[source]
        source: LinkError,
    },
    /// A link could not be pinned (in place of a previous daemon's).
    #[error("cannot pin the {name} link: {source}")]
    PinLink {
        name: String,
        #[source]
        source: io::Error,
    },
    /// The Carapace root cgroup, where the DNS programs attach, could not be opened.
    #[error("cannot open the cgroup {}: {source}", dir.display())]
    Cgroup {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The programs' maps could not be taken as the daemon reads them.
    #[error("cannot open the programs' maps: {0}")]
    Maps(#[source] MapsError),
    /// The DNS and server-name maps could not be taken as the daemon reads them.
    #[error("cannot open the DNS maps: {0}")]
    DnsMaps(#[source] MapsError),
    /// The sessions a previous daemon left in the pinned maps could not be read.
    #[error("cannot read pinned sessions: {0}")]
    PinnedSessions(#[source] MapsError),
    /// The rules could not be written into the maps.
    #[error("cannot write rules into maps: {0}")]
    WriteRules(#[source] MapsError),
    /// The path cache could not be reset before attaching.
    #[error("cannot reset the path cache: {0}")]
    PathCache(#[source] MapsError),
    /// The denial ring buffer could not be watched.
    #[error("cannot watch the event ring buffer: {0}")]
    Events(#[source] io::Error),
}

impl KernelUnavailable {
    /// The fix for a kernel that refuses BPF LSM programs although `bpf` is active.
    pub const REFUSED_FIX: &'static str =
        "bpf is active but this kernel (or the hypervisor/sandbox \
         it runs in) forbids BPF trampoline programs; run Carapace on a kernel that allows them \
         (e.g. Debian's linux-image-cloud-amd64, 6.1 or later, with `lsm=...,bpf`). Until then \
         carapaced enforces Layers 0/1 and the Landlock fallback";

    /// What the user can do about it, where that is a change to the machine; `None` where
    /// the message already says (the boot parameter) or there is nothing to change (a
    /// failure of the daemon's own).
    #[must_use]
    pub fn fix(&self) -> Option<&'static str> {
        match self {
            Self::NotBuilt => Some(
                "build carapaced without AYA_BUILD_SKIP (`cargo xtask setup` installs what the \
                 eBPF build needs)",
            ),
            Self::NoBtf { .. }
            | Self::BtfUnreadable { .. }
            | Self::BtfForLoading(_)
            | Self::BtfLacks(_) => Some(
                "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (most distribution kernels are)",
            ),
            Self::NoLsmHooks => Some(
                "use a kernel built with CONFIG_BPF_LSM=y (e.g. Debian's linux-image-cloud-amd64, \
                 6.1 or later, with `lsm=...,bpf`)",
            ),
            Self::TrampolinesRefused { .. } => Some(Self::REFUSED_FIX),
            // The boot parameter is in the message; the rest are failures of the daemon's own
            // setup, which no change to the machine's kernel fixes.
            Self::LsmInactive { .. }
            | Self::Rejected { .. }
            | Self::PinDir { .. }
            | Self::NotBpffs { .. }
            | Self::MountBpffs(_)
            | Self::LinkObject(_)
            | Self::LoadObject(_)
            | Self::MissingMap(_)
            | Self::MissingProgram(_)
            | Self::Program { .. }
            | Self::Load { .. }
            | Self::Attach { .. }
            | Self::NotALink { .. }
            | Self::PinLink { .. }
            | Self::Cgroup { .. }
            | Self::Maps(_)
            | Self::DnsMaps(_)
            | Self::PinnedSessions(_)
            | Self::WriteRules(_)
            | Self::PathCache(_)
            | Self::Events(_) => None,
        }
    }
}

/// An error and its sources, `: `-separated (aya's errors keep the errno in a source).
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// A refusal's verifier log after its one-line cause; nothing when the kernel left none.
fn verifier_log(log: &str) -> String {
    if log.trim().is_empty() {
        String::new()
    } else {
        format!("; verifier log:\n{log}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_fix() {
        let refused = KernelUnavailable::TrampolinesRefused {
            program: "file_open".into(),
        };
        assert_eq!(refused.fix(), Some(KernelUnavailable::REFUSED_FIX));
        assert!(refused.to_string().contains("loading file_open: EPERM"));
        let no_btf = KernelUnavailable::NoBtf {
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert!(no_btf
            .fix()
            .is_some_and(|f| f.contains("CONFIG_DEBUG_INFO_BTF")));
        assert!(KernelUnavailable::NoLsmHooks
            .fix()
            .is_some_and(|f| f.contains("CONFIG_BPF_LSM")));
        // The boot parameter is in the message itself; a failure of ours has no fix to give.
        let inactive = KernelUnavailable::LsmInactive {
            active: "lockdown,yama".into(),
        };
        assert_eq!(inactive.fix(), None);
        assert!(inactive.to_string().contains("lsm=lockdown,yama,bpf"));
        let ours = KernelUnavailable::NotBpffs {
            dir: "/tmp/pins".into(),
        };
        assert_eq!(ours.fix(), None);
    }

    #[test]
    fn a_rejection_shows_its_verifier_log_only_when_there_is_one() {
        let rejected = |log: &str| KernelUnavailable::Rejected {
            program: "file_open".into(),
            error: std::io::Error::from_raw_os_error(libc::EINVAL),
            log: log.into(),
        };
        let bare = rejected("").to_string();
        assert!(bare.starts_with("the kernel rejected the file_open program: "));
        assert!(!bare.contains("verifier log"), "{bare}");
        assert!(rejected("R1 invalid mem access")
            .to_string()
            .ends_with("; verifier log:\nR1 invalid mem access"));
    }
}
