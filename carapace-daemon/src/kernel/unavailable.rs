//! Why the kernel layer cannot run, by kind: the daemon logs it (with the fix, where the
//! machine is what must change) and `carapace doctor` matches on it to pick its fix. A leaf
//! module, so that `host` (the doctor's probes) can name it without the loader.

/// Why the kernel layer cannot run on this machine, one line for the user. The daemon and
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
    /// The kernel's BTF could not be read, or lacks what the programs need.
    #[error("{0}")]
    Btf(String),
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
    /// Loading worked, but setting up maps, pins or links did not.
    #[error("{0}")]
    Setup(String),
}

impl KernelUnavailable {
    /// The fix for a kernel that refuses BPF LSM programs although `bpf` is active.
    pub const REFUSED_FIX: &'static str =
        "bpf is active but this kernel (or the hypervisor/sandbox \
         it runs in) forbids BPF trampoline programs; run Carapace on a kernel that allows them \
         (e.g. Debian's linux-image-cloud-amd64, 6.1 or later, with `lsm=...,bpf`). Until then \
         carapaced enforces Layers 0/1 and the Landlock fallback";

    /// A failure while setting the loaded programs up (maps, pins, links).
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        Self::Setup(reason.into())
    }

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
            Self::NoBtf { .. } | Self::Btf(_) => Some(
                "use a kernel built with CONFIG_DEBUG_INFO_BTF=y (most distribution kernels are)",
            ),
            Self::NoLsmHooks => Some(
                "use a kernel built with CONFIG_BPF_LSM=y (e.g. Debian's linux-image-cloud-amd64, \
                 6.1 or later, with `lsm=...,bpf`)",
            ),
            Self::TrampolinesRefused { .. } => Some(Self::REFUSED_FIX),
            Self::LsmInactive { .. } | Self::Rejected { .. } | Self::Setup(_) => None,
        }
    }
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
        assert_eq!(KernelUnavailable::new("cannot pin").fix(), None);
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
