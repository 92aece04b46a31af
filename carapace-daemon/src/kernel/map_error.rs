//! Why a write into (or a read of) the programs' maps failed. A leaf module: the resolvers
//! (`crate::dns`) and server-name proxies (`crate::sni`) name it in the traits the kernel
//! side implements for them, without depending on the loader.
use aya::maps::MapError;

/// A failure of the daemon's side of the maps: a map the object lacks, a syscall on one
/// that failed, or a value the kernel's fixed sizes cannot hold. Each message names the map
/// or the limit, then aya's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MapsError {
    /// The loaded object has no map of that name.
    #[error("map {0} missing")]
    Missing(&'static str),
    /// The map is not of the kind the daemon reads it as.
    #[error("map {name} has an unexpected type: {source}")]
    WrongType {
        name: &'static str,
        #[source]
        source: MapError,
    },
    /// A lookup, update or removal in a map failed.
    #[error("{map}: {source}")]
    Map {
        map: &'static str,
        #[source]
        source: MapError,
    },
    /// Tagging a session's cgroup (or changing its rule state) failed.
    #[error("cannot {action} session cgroup {cgroup}: {source}")]
    Session {
        action: &'static str,
        cgroup: u64,
        #[source]
        source: MapError,
    },
    /// A session's rule state was asked for, but its cgroup is not tagged.
    #[error("session cgroup {cgroup} is not tagged: {source}")]
    NotTagged {
        cgroup: u64,
        #[source]
        source: MapError,
    },
    /// A per-session entry of the DNS or server-name maps could not be written.
    #[error("cannot {action}: {source}")]
    Redirect {
        action: String,
        #[source]
        source: MapError,
    },
    /// Every slot of a path's approvals is held by other sessions.
    #[error("{slots} sessions already hold approvals for {path}")]
    ApprovalsFull { slots: usize, path: String },
    /// More rules than the kernel's rule table holds.
    #[error("{count} kernel rules; the limit is {limit}")]
    TooManyRules { count: usize, limit: usize },
    /// More rules with `except:` than there are exception slots.
    #[error("{0}")]
    Exceptions(#[from] carapace_policy::image::TooManyExceptions),
    /// More path automata than the maps hold.
    #[error("{count} path automata; the kernel holds {limit}")]
    TooManyAutomata { count: usize, limit: usize },
    /// One automaton larger than its share of the maps.
    #[error(
        "a path automaton of {states} states and {cells} cells; the kernel holds \
         {max_states} and {max_cells}"
    )]
    AutomatonTooLarge {
        states: usize,
        cells: usize,
        max_states: usize,
        max_cells: usize,
    },
    /// A path longer than a map key holds.
    #[error("path {path:?} is {len} bytes; the kernel limit is {limit}")]
    PathTooLong {
        path: String,
        len: usize,
        limit: usize,
    },
    /// A base name longer than a map key holds.
    #[error("basename {name:?} is {len} bytes; the kernel limit is {limit}")]
    NameTooLong {
        name: String,
        len: usize,
        limit: usize,
    },
    /// A base name that cannot be a key (empty, or with a slash).
    #[error("basename {0:?} cannot be a key")]
    BadName(String),
    /// More rules on one key (or one network) than a value holds.
    #[error("{count} rules share one {what}; the limit is {limit}")]
    TooManyRefs {
        what: &'static str,
        count: usize,
        limit: usize,
    },
    /// A step of a larger write, and what failed in it.
    #[error("{step}: {source}")]
    In {
        step: &'static str,
        #[source]
        source: Box<MapsError>,
    },
}

impl MapsError {
    /// For `map_err`: `map.insert(..).map_err(MapsError::on("RULES"))`.
    pub(crate) fn on(map: &'static str) -> impl FnOnce(MapError) -> Self {
        move |source| Self::Map { map, source }
    }

    /// This error as the failure of `step` of a larger write.
    #[must_use]
    pub(crate) fn during(self, step: &'static str) -> Self {
        Self::In {
            step,
            source: Box::new(self),
        }
    }
}
