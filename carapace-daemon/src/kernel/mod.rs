//! Layer 2: the eBPF LSM programs, their maps, and the denial events they emit.
//!
//! PLACEHOLDER API — bodies land with the kernel branch; signatures are the contract.
pub mod image;

use std::path::PathBuf;

use carapace_common::DenyEvent;

use self::image::KernelImage;

/// Where and for which cgroups the programs act.
#[derive(Clone, Debug)]
pub struct KernelSettings {
    /// bpffs directory for pinned programs, links and maps (e.g. /sys/fs/bpf/carapace).
    pub pin_dir: PathBuf,
    /// cgroup id (inode number) of `<cgroup2 mount>/carapace`, the parent of every session.
    pub cgroup_root_id: u64,
    /// Level of that cgroup in the hierarchy (the cgroup2 root is level 0).
    pub cgroup_root_level: u32,
}

/// Why the kernel layer cannot run on this machine, in one line for the user.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
pub struct KernelUnavailable {
    pub reason: String,
}

/// The loaded (or adopted) programs and maps.
pub struct Kernel {
    _private: (),
}

/// Denials read from the ring buffer.
pub struct EventStream {
    _private: (),
}

impl EventStream {
    /// The next denial; `None` once the ring buffer is gone.
    pub async fn next(&mut self) -> Option<DenyEvent> {
        todo!("kernel branch")
    }
}

impl Kernel {
    /// Loads and attaches the programs (or adopts the ones a previous daemon pinned, so that
    /// enforcement never lapses) and writes `image` into the maps.
    pub fn start(_settings: &KernelSettings, _image: &KernelImage) -> Result<Self, KernelUnavailable> {
        todo!("kernel branch")
    }

    /// Replaces the rules in the maps with `image`.
    pub fn apply(&mut self, _image: &KernelImage) -> anyhow::Result<()> {
        todo!("kernel branch")
    }

    /// Tags a session cgroup so the programs act on it and its descendants.
    pub fn add_session(&mut self, _cgroup_id: u64, _session: u32) -> anyhow::Result<()> {
        todo!("kernel branch")
    }

    pub fn remove_session(&mut self, _cgroup_id: u64) -> anyhow::Result<()> {
        todo!("kernel branch")
    }

    /// (cgroup id, session number) of sessions found in pinned maps at start.
    #[must_use]
    pub fn adopted_sessions(&self) -> Vec<(u64, u32)> {
        todo!("kernel branch")
    }

    /// The denial stream; can be taken once.
    pub fn take_events(&mut self) -> Option<EventStream> {
        todo!("kernel branch")
    }

    /// One line: attached hooks and map fill levels.
    #[must_use]
    pub fn status(&self) -> String {
        todo!("kernel branch")
    }
}
