//! Layer 2: the eBPF LSM programs, their maps, and the denial events they emit.
//!
//! - `btf`: struct offsets from the running kernel, passed to the programs as globals.
//! - `loader`: probe, load, attach and pin the programs; adopt the pins of a previous daemon.
//! - `links`: pinning a link in place of a previous daemon's, shared with `dns_programs`.
//! - `maps`: write a [`KernelImage`] and session state into the maps; `map_error` says why a
//!   write failed ([`MapsError`]).
//! - `unavailable`: why the layer cannot run ([`KernelUnavailable`]), by kind.
//! - `events`: the denial ring buffer.
//! - `kallsyms`: addresses the path cache needs.
pub mod btf;
pub mod dns_maps;
mod dns_programs;
mod events;
mod kallsyms;
mod kfunc;
mod links;
mod loader;
pub mod map_error;
mod maps;
pub mod trees;
pub mod unavailable;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use self::events::EventStream;
pub use self::map_error::MapsError;
pub use self::unavailable::KernelUnavailable;
use carapace_policy::image::KernelImage;

use self::dns_maps::DnsMaps;
use self::maps::KernelMaps;

/// Why a change to the running kernel layer (attaching, detaching, writing the maps)
/// failed. The layer itself stays up: the caller reports it and carries on or refuses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// Writing the maps failed.
    #[error(transparent)]
    Maps(#[from] MapsError),
    /// Attaching the programs failed.
    #[error(transparent)]
    Attach(#[from] KernelUnavailable),
    /// Unpinning the programs' links failed: they may still be attached.
    #[error("cannot detach the programs: {0}")]
    Detach(#[source] std::io::Error),
}

/// Where and for which cgroups the programs act.
#[derive(Clone, Debug)]
pub struct KernelSettings {
    /// bpffs directory for pinned programs, links and maps (e.g. /sys/fs/bpf/carapace).
    pub pin_dir: PathBuf,
    /// cgroup id (inode number) of `<cgroup2 mount>/carapace`, the parent of every session.
    pub cgroup_root_id: u64,
    /// Level of that cgroup in the hierarchy (the cgroup2 root is level 0).
    pub cgroup_root_level: u32,
    /// Its directory, where the DNS redirection programs attach.
    pub cgroup_root: PathBuf,
}

/// The loaded (or adopted) programs and maps.
pub struct Kernel {
    maps: KernelMaps,
    events: Option<EventStream>,
    /// What record sessions touched: a ring buffer of its own, so that a flood of these
    /// never delays or drops a denial.
    touched: Option<EventStream>,
    programs: loader::Programs,
    /// Name hooks and self-protection guards not attached on this kernel, with the reason.
    skipped: Vec<String>,
    adopted: Vec<(u64, u32)>,
    adopted_links: bool,
    path_cache: Result<&'static str, kallsyms::PathCacheOff>,
    /// Resolver ports and learned addresses, when this kernel redirects sessions' DNS;
    /// shared with the resolvers, which write it as they answer.
    dns: Option<Arc<Mutex<DnsMaps>>>,
}

impl Kernel {
    /// Loads the programs and writes `image` into the maps. Where a previous daemon left its
    /// programs attached (it stopped during a session), attaches these in their place at once,
    /// so that enforcement never lapses; otherwise they wait for [`Kernel::arm`].
    pub fn start(
        settings: &KernelSettings,
        image: &KernelImage,
    ) -> Result<Self, KernelUnavailable> {
        let loaded = loader::load(settings)?;
        match &loaded.path_cache {
            Ok(reads) => tracing::info!(
                "path cache on: repeated opens of paths no rule names skip the rule lookups \
                 (lock sequences read with {reads})"
            ),
            Err(why) => tracing::info!(
                "path cache off, every open inside a session is judged in full: {why}"
            ),
        }
        let mut loaded = loaded;
        let dns = if loaded.programs.redirects_dns() {
            let maps = DnsMaps::take(&mut loaded.maps).map_err(KernelUnavailable::DnsMaps)?;
            Some(Arc::new(Mutex::new(maps)))
        } else {
            None
        };
        let mut maps = KernelMaps::new(loaded.maps).map_err(KernelUnavailable::Maps)?;
        let adopted = maps.sessions().map_err(KernelUnavailable::PinnedSessions)?;
        maps.write_image(image)
            .map_err(KernelUnavailable::WriteRules)?;
        let events = EventStream::new(loaded.events).map_err(KernelUnavailable::Events)?;
        let touched = EventStream::new(loaded.touched).map_err(KernelUnavailable::Events)?;
        let mut kernel = Self {
            maps,
            events: Some(events),
            touched: Some(touched),
            programs: loaded.programs,
            skipped: loaded.skipped,
            adopted,
            adopted_links: false,
            path_cache: loaded.path_cache,
            dns,
        };
        if kernel.programs.pinned() {
            kernel.adopted_links = kernel.attach()?;
        }
        Ok(kernel)
    }

    /// Attaches the programs, if they are not: before a session's first process enters its
    /// cgroup. Idempotent.
    pub fn arm(&mut self) -> Result<(), KernelError> {
        if self.programs.armed() {
            return Ok(());
        }
        self.attach()?;
        tracing::info!("kernel programs attached: a session is running");
        Ok(())
    }

    /// Retires the path cache's entries, then attaches. Entries made before may be stale:
    /// while detached, dentries were freed and reused with no `d_instantiate` watching. Every
    /// entry made after is made by a `file_open` attached after the invalidation hooks (plan
    /// order), and `disarm` detaches it before them.
    fn attach(&mut self) -> Result<bool, KernelUnavailable> {
        self.maps
            .invalidate_path_cache()
            .map_err(KernelUnavailable::PathCache)?;
        self.programs.arm()
    }

    /// Detaches the programs once no session cgroup is left: with nothing to enforce they
    /// would only slow every open on the machine.
    pub fn disarm(&mut self) -> Result<(), KernelError> {
        if !self.programs.armed() && !self.programs.pinned() {
            return Ok(());
        }
        self.programs.disarm().map_err(KernelError::Detach)?;
        tracing::info!("kernel programs detached: no session is running");
        Ok(())
    }

    /// Replaces the rules in the maps with `image`, never leaving a moment where neither the
    /// old nor the new rules apply (see `KernelMaps::replace_image`). Learned exceptions are
    /// forgotten and learned refusals replaced by `refusals`, judged under `image`'s rules
    /// (`DnsMaps::after_reload`).
    pub fn apply(
        &mut self,
        image: &KernelImage,
        refusals: &[crate::dns::Refusal],
    ) -> Result<(), MapsError> {
        self.maps.replace_image(image)?;
        if let Some(dns) = &self.dns {
            dns.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .after_reload(refusals);
        }
        Ok(())
    }

    /// Tags a session cgroup so the programs act on it and its descendants. Keeps the rule
    /// state of a session that is already tagged (a restarted daemon re-adding it).
    pub fn add_session(
        &mut self,
        cgroup_id: u64,
        session: u32,
        flags: u32,
    ) -> Result<(), MapsError> {
        self.maps.add_session(cgroup_id, session, flags)
    }

    /// Sets which triggered rules are on and which rules are off for one session.
    pub fn set_session_rules(
        &mut self,
        cgroup_id: u64,
        activated: &[u32],
        disabled: &[u32],
    ) -> Result<(), MapsError> {
        self.maps.set_session_rules(cgroup_id, activated, disabled)
    }

    pub fn remove_session(&mut self, cgroup_id: u64) -> Result<(), MapsError> {
        self.maps.remove_session(cgroup_id)
    }

    /// Lets the operations `ops` on `path`, while it names the file `inode` (zero: any),
    /// through the session's approve-mode rules (a human approved the request the kernel's
    /// refusal filed).
    pub fn approve_path(
        &mut self,
        cgroup_id: u64,
        path: &[u8],
        ops: u32,
        inode: carapace_common::InodeKey,
    ) -> Result<(), MapsError> {
        self.maps.approve_path(cgroup_id, path, ops, inode)
    }

    /// Lets a connect to `addr` (IPv4-mapped for IPv4) and `port` through the session's
    /// approve-mode address rules.
    pub fn approve_addr(
        &mut self,
        cgroup_id: u64,
        addr: [u8; 16],
        port: u16,
    ) -> Result<(), MapsError> {
        self.maps.approve_addr(cgroup_id, addr, port)
    }

    /// Makes `files` the files whose opens the fanotify listener holds (see
    /// `KernelMaps::set_held`); empty when it holds none.
    pub fn set_held(&mut self, files: &[carapace_common::InodeKey]) -> Result<(), MapsError> {
        self.maps.set_held(files)
    }

    /// (cgroup id, session number) of sessions found in pinned maps at start.
    #[must_use]
    pub fn adopted_sessions(&self) -> Vec<(u64, u32)> {
        self.adopted.clone()
    }

    /// The maps of sessions' resolvers and learned addresses, if this kernel redirects DNS.
    #[must_use]
    pub fn dns(&self) -> Option<Arc<Mutex<DnsMaps>>> {
        self.dns.clone()
    }

    /// The denial stream; can be taken once.
    pub fn take_events(&mut self) -> Option<EventStream> {
        self.events.take()
    }

    /// The stream of what record sessions touched; can be taken once.
    pub fn take_touched(&mut self) -> Option<EventStream> {
        self.touched.take()
    }

    /// One line: attached hooks and map fill levels.
    #[must_use]
    pub fn status(&self) -> String {
        let origin = if self.adopted_links {
            "adopted from pins, reloaded"
        } else {
            "loaded"
        };
        let skipped = if self.skipped.is_empty() {
            String::new()
        } else {
            format!("; hooks not attached: {}", self.skipped.join("; "))
        };
        let cache = match &self.path_cache {
            Ok(_) => "path cache on".to_owned(),
            Err(why) => format!("path cache off ({why})"),
        };
        let attached = if self.programs.armed() {
            "attached, a session is running"
        } else {
            "loaded, attached while a session runs"
        };
        format!(
            "enforcing ({origin}; {attached}): hooks {}; {}; {cache}{skipped}",
            self.programs.names().join(", "),
            self.maps.fill_levels()
        )
    }
}
