//! Every map the programs use. All are pinned by name under the daemon's bpffs directory so
//! that a restarted daemon adopts them and sessions stay enforced across restarts.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, LpmTrie, LruHashMap, PerCpuArray, RingBuf},
};
use carapace_common::{
    cache_gen, errsite, ApprovedAddr, ApprovedOps, Config, DfaEarly, DfaHeader, InodeKey, Learned,
    LearnedKey, LearnedRefusals, NetRefs, OrigDst, RuleMeta, RuleRefs, SessionState, SniPeerKey,
    TouchedKey, DFA_CELLS, DFA_CHUNK, DFA_SLOTS, DFA_STATES, MAX_APPROVED_ADDRS,
    MAX_APPROVED_PATHS, MAX_HELD_INODES, MAX_LEARNED, MAX_LEARNED_REFUSALS, MAX_RULES,
    MAX_SESSIONS, MAX_SNI_PEERS, MAX_TOUCHED_SEEN, NAME_MAX, PATH_MAX,
};

/// Hash maps grow on demand instead of preallocating every entry.
const NO_PREALLOC: u32 = 1;
/// Entries per rule map; the compiler refuses rule sets that need more.
pub const MAX_ENTRIES: u32 = 65_536;

/// Kernel keys made inside a session: the `struct key` address → the session and, once
/// first checked, the key's serial (`keys`).
#[map(name = "SESSION_KEYS")]
pub static SESSION_KEYS: LruHashMap<u64, SessionKey> = LruHashMap::pinned(MAX_KEYS, 0);

#[repr(C)]
pub struct SessionKey {
    pub cgroup: u64,
    pub serial: i32,
    pub pad: u32,
}

/// Keys remembered for sessions; the oldest are forgotten first.
const MAX_KEYS: u32 = 16_384;

/// Session cgroup id → the session's rule state.
#[map(name = "SESSIONS")]
pub static SESSIONS: HashMap<u64, SessionState> = HashMap::pinned(MAX_SESSIONS, NO_PREALLOC);

/// State used for a cgroup below the root that has no session entry (being set up or torn
/// down): the always-on rules apply, fail closed.
#[map(name = "DEFAULT_SESSION")]
pub static DEFAULT_SESSION: Array<SessionState> = Array::pinned(1, 0);

/// Rule index → what the rule denies and whether it is always on.
#[map(name = "RULES")]
pub static RULES: Array<RuleMeta> = Array::pinned(MAX_RULES as u32, 0);

#[map(name = "CONFIG")]
pub static CONFIG: Array<Config> = Array::pinned(1, 0);

/// Exact path (NUL-terminated, zero-filled) → rules.
#[map(name = "EXACT_PATHS")]
pub static EXACT_PATHS: HashMap<[u8; PATH_MAX], RuleRefs> =
    HashMap::pinned(MAX_ENTRIES, NO_PREALLOC);

/// Directory prefix → rules (each entry merged with every shorter covering prefix).
#[map(name = "PREFIX_PATHS")]
pub static PREFIX_PATHS: LpmTrie<[u8; PATH_MAX], RuleRefs> = LpmTrie::pinned(MAX_ENTRIES, 0);

/// Basename (NUL-terminated, zero-filled) → rules.
#[map(name = "NAMES")]
pub static NAMES: HashMap<[u8; NAME_MAX], RuleRefs> = HashMap::pinned(MAX_ENTRIES, NO_PREALLOC);

/// (dev, inode) of protected files → rules; catches hard links and bind mounts.
#[map(name = "INODES")]
pub static INODES: HashMap<InodeKey, RuleRefs> = HashMap::pinned(MAX_ENTRIES, NO_PREALLOC);

/// Directories above what path rules protect (an exact path's parents, a tree's parents,
/// a glob's fixed leading directories) → rules: a rename or symlink that would put another
/// directory in such a place is refused (`name_ops`). Never looked up by opens.
#[map(name = "ANCESTORS")]
pub static ANCESTORS: HashMap<[u8; PATH_MAX], RuleRefs> = HashMap::pinned(MAX_ENTRIES, NO_PREALLOC);

/// Path → the operations a human approved on it, per session (`ApprovedOps`): exceptions
/// to approve-mode rules (`RULE_APPROVE`), written by the daemon when a request the kernel
/// filed is approved, removed when the session ends. Looked up only when such a rule would
/// refuse.
#[map(name = "APPROVED_PATHS")]
pub static APPROVED_PATHS: HashMap<[u8; PATH_MAX], ApprovedOps> =
    HashMap::pinned(MAX_APPROVED_PATHS, NO_PREALLOC);

/// Files whose opens the daemon's fanotify listener holds (`RULE_HOLD`): written only once
/// the daemon's marks are on them, cleared when it stops. Looked up only when a hold rule
/// would refuse.
#[map(name = "HELD_INODES")]
pub static HELD_INODES: HashMap<InodeKey, u32> = HashMap::pinned(MAX_HELD_INODES, NO_PREALLOC);

/// (session cgroup, address, port) a human approved connecting to → the operations
/// approved: exceptions to approve-mode address rules, written by the daemon when a request
/// the kernel filed is approved, removed when the session ends. Looked up only when such a
/// rule would refuse.
#[map(name = "APPROVED_ADDRS")]
pub static APPROVED_ADDRS: HashMap<ApprovedAddr, u32> =
    HashMap::pinned(MAX_APPROVED_ADDRS, NO_PREALLOC);

/// IPv4-mapped / IPv6 CIDR → rules with ports.
#[map(name = "NETS")]
pub static NETS: LpmTrie<[u8; 16], NetRefs> = LpmTrie::pinned(MAX_ENTRIES, 0);

/// Session cgroup id → the port of its resolver in carapaced, on loopback. Present only
/// while the DNS redirection programs are attached (`dns_redirect`).
#[map(name = "RESOLVERS")]
pub static RESOLVERS: HashMap<u64, u32> = HashMap::pinned(MAX_SESSIONS, NO_PREALLOC);

/// Loopback port of a session's resolver → that session's cgroup id: the reverse of
/// `RESOLVERS`, for refusing queries sent to a resolver from anywhere but its session
/// (`resolver_peer`).
#[map(name = "RESOLVER_PORTS")]
pub static RESOLVER_PORTS: HashMap<u32, u64> = HashMap::pinned(MAX_SESSIONS, NO_PREALLOC);

/// Addresses each session's resolver answered for allowed names, with the rules they are an
/// exception to and until when (`carapace_common::Learned`). The least recently used go
/// first: a session that looks up more than this many addresses loses its oldest, which are
/// then refused until looked up again (fail closed).
#[map(name = "LEARNED")]
pub static LEARNED: LruHashMap<LearnedKey, Learned> = LruHashMap::pinned(MAX_LEARNED, 0);

/// The rules refusing addresses each session's resolver answered, by the names it answered
/// them for (`carapace_common::LearnedRefusals`). Not LRU: an evicted refusal would let a
/// connect through under a block-list; when full, the daemon refuses the lookups whose
/// refusals it cannot record.
#[map(name = "LEARNED_REFUSALS")]
pub static LEARNED_REFUSALS: HashMap<LearnedKey, LearnedRefusals> =
    HashMap::pinned(MAX_LEARNED_REFUSALS, NO_PREALLOC);

/// A `LEARNED` lookup: its key and a copy of what it found, here rather than on the hooks'
/// stack, which is nearly full where `socket_connect` and `socket_sendmsg` judge an address.
#[repr(C)]
pub struct LearnedScratch {
    pub key: LearnedKey,
    pub found: Learned,
}

#[map(name = "LEARNED_SCRATCH")]
pub static LEARNED_SCRATCH: PerCpuArray<LearnedScratch> = PerCpuArray::with_max_entries(1, 0);

/// Redirected DNS sockets (by cookie) → where they first meant to go.
#[map(name = "ORIG_DST")]
pub static ORIG_DST: LruHashMap<u64, OrigDst> = LruHashMap::pinned(MAX_LEARNED, 0);

/// Sessions whose rules check server names (`tls: sni`) → the loopback port of their
/// server-name proxy in carapaced (`dns_redirect` sends connects to ports 443 and 80 of
/// the session's learned addresses there).
#[map(name = "SNI_PROXIES")]
pub static SNI_PROXIES: HashMap<u64, u32> = HashMap::pinned(MAX_SESSIONS, NO_PREALLOC);

/// Connections redirected to a server-name proxy, by the client's address and port (known
/// once the connect has picked them, `sni_peer`) → where they first meant to go. The proxy
/// takes each entry when it accepts the connection; the least recently used go first.
#[map(name = "SNI_PEERS")]
pub static SNI_PEERS: LruHashMap<SniPeerKey, OrigDst> = LruHashMap::pinned(MAX_SNI_PEERS, 0);

/// Path automata (see `carapace_common::DfaHeader`): headers by slot.
#[map(name = "DFA")]
pub static DFA: Array<DfaHeader> = Array::pinned(DFA_SLOTS as u32, 0);

/// Transition tables of the path automata, `DFA_CHUNK` cells a value.
#[map(name = "DFA_TRANS")]
pub static DFA_TRANS: Array<[u32; DFA_CHUNK]> =
    Array::pinned((DFA_SLOTS * DFA_CELLS / DFA_CHUNK) as u32, 0);

/// Accepting states of the path automata → rules (count 0 for other states).
#[map(name = "DFA_ACCEPT")]
pub static DFA_ACCEPT: Array<RuleRefs> = Array::pinned((DFA_SLOTS * DFA_STATES) as u32, 0);

/// States of the path automata → the block refs a directory whose path and `/` end there
/// could bring along (`carapace_common::DfaHeader::neutral`); looked up only for a name a
/// directory is moved or linked to.
#[map(name = "DFA_LIVE")]
pub static DFA_LIVE: Array<RuleRefs> = Array::pinned((DFA_SLOTS * DFA_STATES) as u32, 0);

/// What the path automata's states match on the way (see `carapace_common::DfaEarly`).
#[map(name = "DFA_EARLY")]
pub static DFA_EARLY: Array<DfaEarly> = Array::pinned((DFA_SLOTS * DFA_STATES) as u32, 0);

/// The block refs early matches name, one table per half of the automaton maps.
#[map(name = "DFA_EARLY_REFS")]
pub static DFA_EARLY_REFS: Array<RuleRefs> = Array::pinned(2, 0);

/// Denials for the daemon.
#[map(name = "EVENTS")]
pub static EVENTS: RingBuf = RingBuf::pinned(1 << 20, 0);

/// What record sessions touched (`touched`), apart from `EVENTS` so that a flood of them
/// can never crowd out a denial.
#[map(name = "TOUCHED")]
pub static TOUCHED: RingBuf = RingBuf::pinned(1 << 20, 0);

/// What record sessions were already reported touching (`touched`); the least recently
/// used are forgotten first (they are then reported again, which the daemon absorbs).
#[map(name = "TOUCHED_SEEN")]
pub static TOUCHED_SEEN: LruHashMap<TouchedKey, u32> = LruHashMap::pinned(MAX_TOUCHED_SEEN, 0);

/// Where `touched` builds its `TOUCHED_SEEN` key: per CPU, off the stack, which
/// `socket_connect`'s call chain had filled past the verifier's 512 bytes on Linux 6.1.
#[map(name = "TOUCHED_KEY")]
pub static TOUCHED_KEY: PerCpuArray<TouchedKey> = PerCpuArray::with_max_entries(1, 0);

/// Helper failures by site (`errsite::*`), so nothing fails silently.
#[map(name = "ERRORS")]
pub static ERRORS: PerCpuArray<u64> = PerCpuArray::with_max_entries(errsite::COUNT, 0);

/// What a cached "no rule mentions this path" was decided for (see `path_cache`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CachedPath {
    pub dentry: u64,
    pub mnt: u64,
    pub root_dentry: u64,
    pub root_mnt: u64,
    pub inode: u64,
    pub rules_gen: u64,
    pub kernel_gen: u64,
    /// `rename_lock`'s sequence in the high half, `mount_lock`'s in the low one.
    pub seqs: u64,
    pub check: u64,
}

/// log2 of the path cache's slots.
pub const PATH_CACHE_BITS: u32 = 14;

/// Paths known to match no rule, direct-mapped by dentry address (see `path_cache`).
#[map(name = "PATH_CACHE")]
pub static PATH_CACHE: Array<CachedPath> = Array::pinned(1 << PATH_CACHE_BITS, 0);

/// Generations of the rule maps and of roots (`carapace_common::cache_gen`).
#[map(name = "PATH_CACHE_GEN")]
pub static PATH_CACHE_GEN: Array<u64> = Array::pinned(cache_gen::COUNT, 0);

/// Bytes of `Scratch::spelled`: a component of up to `PATH_MAX - 1` bytes written at an
/// offset below `PATH_MAX` stays inside, which is what the verifier can check.
pub const SPELLED: usize = 2 * PATH_MAX;

/// Where the refs found by one lookup wait to be judged (`Scratch::found`), in judging order:
/// the first rule found denies.
pub mod source {
    pub const EXACT: usize = 0;
    pub const PREFIX: usize = 1;
    pub const NAME: usize = 2;
    pub const INODE: usize = 3;
    pub const DFA0: usize = 4;
    pub const DFA1: usize = 5;
    /// The block refs the automata matched on the way; only those in `Judging::early` count.
    pub const EARLY: usize = 6;
    /// Directories above protected paths (`PathSubject::ancestors`).
    pub const ANCESTOR: usize = 7;
    pub const COUNT: usize = 8;
}

/// Per-CPU scratch space: paths do not fit the 512-byte BPF stack.
#[repr(C)]
pub struct Scratch {
    _align: u32,
    /// LPM key whose data doubles as the exact-path key; starts at offset 8 so the path is
    /// 8-byte aligned for word-wise zeroing.
    pub key: aya_ebpf::maps::lpm_trie::Key<[u8; PATH_MAX]>,
    pub name: [u8; NAME_MAX],
    /// Where `bpf_d_path` writes, before the path is copied into the zeroed key.
    pub raw: [u8; PATH_MAX],
    /// The refs each lookup found, waiting for the judging (`source`), and one bit
    /// per slot filled.
    pub found: [RuleRefs; source::COUNT],
    pub sources: u32,
    /// The operations of the blocking refs those lookups found (`RuleRefs::ops`): an open
    /// is cached as clean only when none is a file operation.
    pub found_ops: u32,
    /// Whether every lookup the rules call for was made (no read failed).
    pub complete: u32,
    /// The path being checked, as the cache knows it (`path_cache::identify`).
    pub probe: CachedPath,
    /// The file judged, for the inode check of an approval (`matcher::approved_ops`): a
    /// `struct file *` or `struct dentry *` as `object_kind` says (`matcher::object`).
    /// Stored, not read: the inode is read only when an approval is about to apply.
    pub object: u64,
    pub object_kind: u32,
    pub object_pad: u32,
    /// Where `dpath` spells a path, backwards from `PATH_MAX`.
    pub spelled: [u8; SPELLED],
}

#[map(name = "SCRATCH")]
pub static SCRATCH: PerCpuArray<Scratch> = PerCpuArray::with_max_entries(1, 0);

/// Counts one failure at `site`.
#[inline(always)]
pub fn count_error(site: u32) {
    if let Some(counter) = ERRORS.get_ptr_mut(site) {
        // SAFETY: per-CPU value, no concurrent writer on this CPU.
        unsafe { *counter += 1 };
    }
}
