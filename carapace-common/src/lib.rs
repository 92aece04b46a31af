//! Types shared by Carapace's eBPF programs and its daemon.
//!
//! Everything here is `#[repr(C)]` with explicit padding so that the kernel and userspace
//! agree byte for byte; the `const` assertions at the bottom turn a layout change into a
//! build error instead of a verifier error or, worse, a silent mismatch.
#![no_std]

/// Bytes of a path the kernel programs can match, including the terminating NUL.
///
/// `bpf_d_path` fails with `ENAMETOOLONG` for longer paths; the programs then deny the
/// operation for every session that has a path rule for it (fail closed). 256 is also the
/// largest key an LPM trie accepts.
pub const PATH_MAX: usize = 256;
/// Bytes of a basename key, including the NUL. Basename rules may be at most `NAME_MAX - 2`
/// bytes long: the programs skip the lookup for a name that fills the buffer (it may have
/// been cut short), and such a name can never equal a shorter rule, so no match is lost.
pub const NAME_MAX: usize = 64;
/// Rule references stored under one map key. The compiler merges rules that share a key and
/// refuses a rule set that needs more.
pub const REFS_PER_KEY: usize = 8;
/// Largest number of kernel rules (indices `0..MAX_RULES`).
pub const MAX_RULES: usize = 16_384;
/// Words in a per-session rule bitset.
pub const RULE_WORDS: usize = MAX_RULES / 64;
/// Sessions that can be live at once.
pub const MAX_SESSIONS: u32 = 4096;
/// Bytes of a unix socket path (`sun_path`).
pub const UNIX_PATH_MAX: usize = 108;

/// Operation bits, shared by rules (`actions:`) and events.
pub mod op {
    pub const READ: u32 = 1 << 0;
    pub const WRITE: u32 = 1 << 1;
    pub const EXEC: u32 = 1 << 2;
    pub const DELETE: u32 = 1 << 3;
    pub const NETWORK: u32 = 1 << 4;
    pub const ALL: u32 = READ | WRITE | EXEC | DELETE | NETWORK;

    // Operations only the self-protection guards deny (never in a rule's `actions:`).
    /// A signal to a process outside the session, the daemon included (`task_kill`).
    pub const SIGNAL: u32 = 1 << 5;
    /// ptrace, `/proc/PID/mem`, `process_vm_*`, `pidfd_getfd` and `/proc/PID/fd` of a
    /// process outside the session (`ptrace_access_check`).
    pub const PTRACE: u32 = 1 << 6;
    /// Any `bpf()` command.
    pub const BPF: u32 = 1 << 7;
    /// `mount`, `move_mount`, `pivot_root`.
    pub const MOUNT: u32 = 1 << 8;
    pub const UNMOUNT: u32 = 1 << 9;
    /// `init_module` / `finit_module`.
    pub const MODULE: u32 = 1 << 10;
    /// `clone3(CLONE_INTO_CGROUP)`.
    pub const CLONE_INTO_CGROUP: u32 = 1 << 11;
    /// `chroot`: a private root would change every path the session's hooks see.
    pub const CHROOT: u32 = 1 << 12;
    /// `TIOCSTI` / `TIOCLINUX`: typing into a terminal, which its reader runs as its own.
    pub const TTY_INPUT: u32 = 1 << 13;
    /// Connecting to a unix socket whose listener is outside the session: a path rule's
    /// operation for `block: { unix: outside-session }` (never in a tool call's operations).
    pub const OUTSIDE: u32 = 1 << 14;
    /// Setting a packet's route by hand (IPv4 source-route options, IPv6 routing headers),
    /// by `setsockopt` or as ancillary data: the destination judged is then not the one
    /// the packets reach.
    pub const ROUTE: u32 = 1 << 15;
    /// A new user namespace (`unshare`, `clone`), refused by a `view: user-namespace` rule.
    pub const USERNS: u32 = 1 << 16;
    /// Changing the resource limits, priority, scheduling or memory placement of a process
    /// outside the session (`prlimit`, `renice`, `ionice`, `chrt`, `taskset`, `migratepages`).
    pub const TASK_CONTROL: u32 = 1 << 17;
    /// Using a kernel key or keyring not made in the session (the user keyring's tokens).
    pub const KEY: u32 = 1 << 18;

    /// What removing a name is judged as (unlink, rmdir, a rename onto an existing file): a
    /// delete, and a write too, because a file deleted can be made again with other content,
    /// so a write-protected file keeps its name.
    pub const REMOVE: u32 = DELETE | WRITE;
    /// What making a name is judged as (`O_CREAT`, mknod, mkdir, symlink, the new name of a
    /// link or rename): a write of that path.
    pub const CREATE: u32 = WRITE;
    /// What giving an existing file another name is judged as (the source of a link or a
    /// rename): any operation a rule protects the file against, since under a new name the
    /// file would slip out of the rule's pattern.
    pub const IDENTITY: u32 = READ | WRITE | EXEC | DELETE;
}

/// `DenyEvent::detail` of a `subject::PATH` event: which file operation was refused, so that
/// the message names it (`blocked rename onto …`) whatever rule operation bit it hit.
pub mod path_op {
    /// An open (`file_open`, exec): the event's operation bit says read, write or execute.
    pub const OPEN: u32 = 0;
    pub const UNLINK: u32 = 1;
    pub const RMDIR: u32 = 2;
    /// A new file (`O_CREAT`, mknod).
    pub const CREATE: u32 = 3;
    pub const MKDIR: u32 = 4;
    pub const SYMLINK: u32 = 5;
    /// The existing file of a hard link.
    pub const LINK_FROM: u32 = 6;
    /// The new name of a hard link.
    pub const LINK_ONTO: u32 = 7;
    pub const RENAME_FROM: u32 = 8;
    pub const RENAME_ONTO: u32 = 9;
    /// `truncate`, `ftruncate`, `open(O_TRUNC)`.
    pub const TRUNCATE: u32 = 10;
    pub const CHMOD: u32 = 11;
    pub const CHOWN: u32 = 12;
    /// The new root of a refused `chroot` (a self-protection denial).
    pub const CHROOT: u32 = 13;
    /// `utimes`, `utimensat`, `futimens`: a file's access or modification time set.
    pub const UTIMES: u32 = 14;
    /// `setxattr`, `removexattr` and POSIX ACLs (`setfacl`): an extended attribute changed.
    pub const XATTR: u32 = 15;
    /// A file of a process outside the session (`/proc/PID/cmdline`, `oom_score_adj`): a
    /// self-protection denial, whatever the rules.
    pub const OUTSIDE_PROCESS: u32 = 16;
    /// A terminal outside the session: a pseudo-terminal whose session leader is outside
    /// it (the user's shell), a virtual console, the system console, `/dev/vcs*`.
    pub const OUTSIDE_TERMINAL: u32 = 17;
    /// A POSIX message queue of an IPC namespace not the session's (`/dev/mqueue/…`).
    pub const OUTSIDE_IPC: u32 = 18;
    /// An inode flag change (`chattr`: `FS_IOC_SETFLAGS`, `FS_IOC_FSSETXATTR`).
    pub const INODE_FLAGS: u32 = 19;
    /// A read of an extended attribute's value (`getxattr` of `user.*` or `trusted.*`).
    pub const XATTR_READ: u32 = 20;
}

/// Rule index used in events when a path was too long to match (see [`PATH_MAX`]).
pub const RULE_PATH_TOO_LONG: u32 = u32::MAX;
/// Rule index used in events of the self-protection guards: denials no rule file can switch
/// off (signals and ptrace to the daemon, `bpf()`, mounts, module loading, leaving the
/// session's cgroup).
pub const RULE_SELF_PROTECTION: u32 = u32::MAX - 1;
/// Rule index used in events of datagrams (QUIC) to an address whose TCP connects a session
/// checks by server name (`tls: sni`): the proxy reads TCP only, so they are refused and the
/// client falls back to TCP, where the name is checked.
pub const RULE_DATAGRAM_BY_NAME: u32 = u32::MAX - 2;

/// `RuleRef::flags` / `NetRef::flags`: the entry is an exception (`except:`) of its rule.
pub const REF_EXCEPT: u32 = 1;
/// `RuleRef::flags` / `NetRef::flags` bits 8..16: for a rule that has exceptions, its
/// exception slot plus one (0: the rule has none). The map writer assigns slots; the
/// programs gather the slots of every exception they looked up into one 64-bit mask, so
/// judging a rule costs one bit test instead of a search the verifier would have to unroll.
pub const REF_SLOT_SHIFT: u32 = 8;
/// Kernel rules that may have exceptions (`except:`) in one rule set.
pub const MAX_EXCEPT_SLOTS: usize = 64;

/// The exception-slot bit a ref carries (0 when its rule has no exceptions).
#[expect(
    clippy::inline_always,
    reason = "called by eBPF programs; a call adds verifier work"
)]
#[inline(always)]
#[must_use]
pub const fn slot_bit(flags: u32) -> u64 {
    let slot = (flags >> REF_SLOT_SHIFT) & 0xff;
    if slot == 0 || slot as usize > MAX_EXCEPT_SLOTS {
        0
    } else {
        1u64 << (slot - 1)
    }
}

/// One reference from a map entry to a rule.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleRef {
    pub rule: u32,
    pub flags: u32,
}

/// The value of every path-keyed map: the rules (and exceptions) that key belongs to.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleRefs {
    pub count: u32,
    /// The operations of the blocking refs' rules (`op::*`), folded by the daemon: an open
    /// whose lookups found only refs of no file operation (the root prefix of a
    /// `unix: outside-session` rule) can still be cached as clean (`path_cache`).
    pub ops: u32,
    /// The exception slots (`slot_bit`) of the `REF_EXCEPT` refs, folded by the daemon: the
    /// programs read one word instead of looping over the refs (a loop per lookup, eight
    /// lookups, was more paths than the verifier would take).
    pub except: u64,
    pub refs: [RuleRef; REFS_PER_KEY],
}

/// Key of the exact-path hash map: the path, NUL-terminated and zero-filled.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathKey {
    pub path: [u8; PATH_MAX],
}

/// Key of the path-prefix LPM trie. `prefix_len` is in bits, as LPM tries want.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixKey {
    pub prefix_len: u32,
    pub path: [u8; PATH_MAX],
}

/// Key of the basename hash map: the last path component, NUL-terminated and zero-filled.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameKey {
    pub name: [u8; NAME_MAX],
}

/// Key of the inode map: a file's identity, so that hard links and bind mounts of a
/// protected file are caught whatever path reaches it. `dev` is the kernel's internal
/// encoding (`MAJOR << 20 | MINOR`), not userspace's `st_dev`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InodeKey {
    pub dev: u64,
    pub ino: u64,
}

/// Key of the network LPM trie. IPv4 addresses are stored IPv4-mapped (`::ffff:a.b.c.d`)
/// so that one lookup covers IPv4, IPv6 and IPv4-mapped IPv6 connects.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetKey {
    pub prefix_len: u32,
    pub addr: [u8; 16],
}

/// One reference from a network entry to a rule, with the port it applies to.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetRef {
    pub rule: u32,
    /// Host byte order; 0 means every port.
    pub port: u16,
    pub pad: u16,
    pub flags: u32,
}

/// The value of the network LPM trie.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetRefs {
    pub count: u32,
    pub refs: [NetRef; REFS_PER_KEY],
}

/// The port of DNS: a session with a resolver of its own has every connect and datagram to
/// it, on any address, redirected there (`dns_redirect`).
pub const DNS_PORT: u16 = 53;

/// Loopback addresses the resolvers listen on (network byte order for IPv4 as the kernel
/// stores it in `bpf_sock_addr.user_ip4`, and the 16 bytes of `::1`).
pub const LOOPBACK4: [u8; 4] = [127, 0, 0, 1];
pub const LOOPBACK6: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// Ports whose connects to learned addresses go to the session's server-name proxy when
/// its rules check server names (`tls: sni`): TLS, and plain HTTP (its `Host`).
pub const HTTPS_PORT: u16 = 443;
pub const HTTP_PORT: u16 = 80;

/// Entries of [`SNI_PEERS`](maps::SNI_PEERS): connections to a server-name proxy whose
/// destination the proxy has not taken yet.
pub const MAX_SNI_PEERS: u32 = 16_384;

/// Entries of [`LEARNED`](maps::LEARNED) (addresses a session's resolver handed out).
pub const MAX_LEARNED: u32 = 65_536;

/// Rules an address learned for one name can be an exception to.
pub const LEARNED_RULES: usize = 8;

/// Key of the learned addresses: the session's cgroup id and the address, IPv4 mapped as
/// in [`NetKey`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LearnedKey {
    pub cgroup: u64,
    pub addr: [u8; 16],
}

/// Rules an address learned for one name can be refused by (as `(rule, port)` pairs).
pub const LEARNED_BLOCKS: usize = 8;

/// A rule that refuses an address because of the name it was learned for, on `port` (host
/// byte order; 0: every port). `flags`: [`BLOCK_IN_ANY_STATE`] or 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LearnedBlock {
    pub rule: u32,
    pub port: u16,
    pub flags: u16,
}

/// [`LearnedBlock::flags`]: refuses whether or not the session has the rule in force. Set
/// on the last block of an address more rules refuse than [`LEARNED_BLOCKS`] holds: the
/// rules left out cannot be checked one by one, so the address is refused on their behalf
/// (fail closed), named by the rule of that block.
pub const BLOCK_IN_ANY_STATE: u16 = 1;

/// Entries of [`LEARNED_REFUSALS`](maps::LEARNED_REFUSALS).
pub const MAX_LEARNED_REFUSALS: u32 = 65_536;

/// The rules refusing an address a session's resolver answered, because of the names it
/// answered it for: `blocks[..blocked]`. Kept apart from [`Learned`] in a map that never
/// evicts: an exception forgotten only refuses more, a refusal forgotten would allow.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LearnedRefusals {
    pub blocked: u32,
    pub pad: u32,
    pub blocks: [LearnedBlock; LEARNED_BLOCKS],
}

/// An address the session's resolver answered: until `expires` (`CLOCK_BOOTTIME`
/// nanoseconds, as `bpf_ktime_get_boot_ns`), it is an exception to the network rules in
/// `rules` (kernel rule indices), as the name is to their `except:`. In the map `LEARNED`
/// `blocked` is 0; the programs copy there the address's [`LearnedRefusals`] (rules whose
/// names cover the name it was learned for, refusing it expired or not: a program may keep
/// an address it was once given, and a blocked name's address does not become harmless
/// when its TTL ends), so one copy carries what a connect is judged by.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Learned {
    pub expires: u64,
    pub count: u32,
    pub rules: [u32; LEARNED_RULES],
    pub blocked: u32,
    pub blocks: [LearnedBlock; LEARNED_BLOCKS],
}

impl Learned {
    /// Whether this entry, read at `now`, excepts `rule`.
    #[expect(
        clippy::inline_always,
        reason = "called by eBPF programs; a call adds verifier work"
    )]
    #[inline(always)]
    #[must_use]
    pub fn excepts(&self, rule: u32, now: u64) -> bool {
        if now >= self.expires {
            return false;
        }
        let mut i = 0;
        while i < LEARNED_RULES {
            if (i as u32) < self.count && self.rules[i] == rule {
                return true;
            }
            i += 1;
        }
        false
    }
}

/// Where a redirected DNS socket first meant to go, by socket cookie: a reply read from the
/// resolver is shown as coming from there (resolvers check the source of an answer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrigDst {
    /// IPv4 in the first four bytes for `AF_INET`; the whole IPv6 address otherwise.
    pub addr: [u8; 16],
    /// Network byte order, as in `bpf_sock_addr.user_port`.
    pub port: u16,
    pub family: u16,
    pub pad: u32,
}

/// A connection redirected to a server-name proxy, as the proxy sees it from accepting it:
/// the client's own address (IPv4 mapped into IPv6) and port (host byte order). The socket
/// cookie that keys [`OrigDst`] at `connect` is the client socket's, which the proxy's
/// accepted socket does not share; the client's address and port are what both ends know.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SniPeerKey {
    pub addr: [u8; 16],
    pub port: u16,
    pub pad: u16,
    pub pad2: u32,
}

/// `RuleMeta::flags`: the rule is on in every session unless disabled (no trigger).
pub const RULE_ALWAYS_ON: u32 = 1;

/// `RuleMeta::flags`: a network rule that blocks every address (the base of an allow-list,
/// `host: "*"`). For DNS of a session with a resolver it gives way: the resolver judges the
/// names, and the connect goes to it. Rules that name addresses still refuse port 53 there.
pub const RULE_EVERY_ADDRESS: u32 = 2;

/// `RuleMeta::flags`: a `mode: approve` rule. The programs refuse what it covers unless a
/// human approved that very operation for the session ([`ApprovedOps`]): the denial makes
/// the daemon file an approval request, and the approval lets the agent's retry through.
pub const RULE_APPROVE: u32 = 4;

/// `RuleMeta::flags`: an approve-mode rule with `hold: true`. On a file the daemon has
/// marked for `fanotify` permission events ([`maps::HELD_INODES`], and the inode's
/// `i_fsnotify_mask` still asks for open permission events, so the marks are alive) the
/// programs let the open go on to fanotify, which holds it until a human answers; anywhere
/// else the rule refuses as approve mode does (refuse and retry). The LSM hooks run before
/// fanotify's, so a refusal here would never let the hold happen.
pub const RULE_HOLD: u32 = 8;

/// Files [`maps::HELD_INODES`] can name.
pub const MAX_HELD_INODES: u32 = 4096;

/// `FS_OPEN_PERM | FS_OPEN_EXEC_PERM` of `include/linux/fsnotify_backend.h`: the bits an
/// inode's `i_fsnotify_mask` carries while a fanotify group holds opens of it.
pub const FS_OPEN_PERMS: u32 = 0x0001_0000 | 0x0004_0000;

/// `RuleMeta::flags`: the rule holds in shadow sessions too ([`SESSION_SHADOW`]): the
/// self-protection rules and those that keep a session from reaching the machine under
/// other names or through processes outside it (private views, outside-session sockets).
/// Shadow mode must never be a way to switch self-protection off.
pub const RULE_NO_SHADOW: u32 = 16;

/// `SessionState::flags`: a shadow session (`carapace run --shadow`). Every denial a rule
/// without [`RULE_NO_SHADOW`] would make is reported (its event's `op` carries
/// [`EVENT_WOULD_DENY`]) and the operation allowed; the self-protection guards and
/// [`RULE_PATH_TOO_LONG`] still refuse.
pub const SESSION_SHADOW: u32 = 1 << 0;
/// `SessionState::flags`: a record session (`carapace run --record`). The operations the
/// rules allow are reported on the `TOUCHED` ring buffer ([`TouchedKey`] keeps a file or
/// address from being reported twice), so the daemon can propose an allow-list from them.
pub const SESSION_RECORD: u32 = 1 << 1;

/// Key of the `TOUCHED_SEEN` LRU map: what a record session was already reported touching,
/// so a loop reading one file reports it once. Files by (device, inode) — read in the hook
/// without spelling the path — and addresses by their 16 bytes and port; `ops` the
/// `op::*` bits reported together.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TouchedKey {
    pub cgroup: u64,
    /// A file's device, or the first 8 bytes of an address.
    pub id0: u64,
    /// A file's inode number, or the last 8 bytes of an address.
    pub id1: u64,
    pub ops: u32,
    /// An address's port (0 for a file).
    pub port: u32,
}

/// Entries of `TOUCHED_SEEN` (all record sessions together). When it is full the oldest
/// are forgotten, and a file touched again after that is reported again: the daemon's
/// store, which keeps each (path, action) once, absorbs the repeat.
pub const MAX_TOUCHED_SEEN: u32 = 16_384;

/// A bit of `DenyEvent::op`: the operation was allowed, the denial only reported (a shadow
/// session). Far above every `op::*` bit.
pub const EVENT_WOULD_DENY: u32 = 1 << 31;

/// `DenyEvent::rule` of a touched event (no rule refused anything).
pub const TOUCHED_RULE: u32 = u32::MAX;

/// Sessions that can hold an approval for one path at once ([`ApprovedOps`]).
pub const APPROVALS_PER_PATH: usize = 8;
/// Paths [`maps::APPROVED_PATHS`] holds approvals for.
pub const MAX_APPROVED_PATHS: u32 = 16_384;

/// The value of `APPROVED_PATHS` (keyed by the path as `EXACT_PATHS` is): the operations
/// (`op::*`) a human approved on that path for each session (`cgroups[i]`, a session's
/// cgroup id; 0 for a free slot), and the file the path named when they approved
/// (`inodes[i]`): a file renamed or hard-linked onto the path later is another file, which
/// the approval does not cover. A zero inode (no file there when approved: a write that
/// creates it, or a socket) covers whatever the path names. Read only when an approve-mode
/// rule would refuse, so opens no such rule covers never pay for it. Keyed by path rather
/// than (session, path): the programs look it up with the path already in their scratch
/// buffer, no copy.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApprovedOps {
    pub cgroups: [u64; APPROVALS_PER_PATH],
    pub inodes: [InodeKey; APPROVALS_PER_PATH],
    pub ops: [u32; APPROVALS_PER_PATH],
}

impl ApprovedOps {
    /// The operations approved on this path for the session of cgroup `cgroup`, and the
    /// file they were approved for (zero: any).
    #[expect(
        clippy::inline_always,
        reason = "called by eBPF programs; a call adds verifier work"
    )]
    #[inline(always)]
    #[must_use]
    pub fn of(&self, cgroup: u64) -> (u32, InodeKey) {
        let mut ops = 0;
        let mut inode = InodeKey { dev: 0, ino: 0 };
        let mut i = 0;
        while i < APPROVALS_PER_PATH {
            if self.cgroups[i] == cgroup {
                ops |= self.ops[i];
                inode = self.inodes[i];
            }
            i += 1;
        }
        (ops, inode)
    }

    /// Adds `ops` for `cgroup` on the file `inode`; `false` when every slot is another
    /// session's. An approval for another file than the one approved before (the path was
    /// replaced) starts afresh: what was approved for the old file does not pass to the new.
    pub fn add(&mut self, cgroup: u64, ops: u32, inode: InodeKey) -> bool {
        let slot = (0..APPROVALS_PER_PATH)
            .find(|&i| self.cgroups[i] == cgroup)
            .or_else(|| (0..APPROVALS_PER_PATH).find(|&i| self.cgroups[i] == 0));
        let Some(i) = slot else {
            return false;
        };
        if self.cgroups[i] != cgroup || self.inodes[i] != inode {
            self.ops[i] = 0;
        }
        self.cgroups[i] = cgroup;
        self.inodes[i] = inode;
        self.ops[i] |= ops;
        true
    }

    /// Forgets what was approved for `cgroup`; whether any slot is still in use.
    pub fn remove(&mut self, cgroup: u64) -> bool {
        for i in 0..APPROVALS_PER_PATH {
            if self.cgroups[i] == cgroup {
                self.cgroups[i] = 0;
                self.inodes[i] = InodeKey::default();
                self.ops[i] = 0;
            }
        }
        self.cgroups.iter().any(|&c| c != 0)
    }
}

/// Address approvals [`maps::APPROVED_ADDRS`] holds, all sessions together.
pub const MAX_APPROVED_ADDRS: u32 = 16_384;

/// The key of `APPROVED_ADDRS`: an address (IPv4-mapped for IPv4, as `NETS` keys it) and
/// port a human approved connecting to for the session of cgroup `cgroup`. Its value is the
/// `op::*` bits approved (`op::NETWORK`). Looked up only when an approve-mode address rule
/// would refuse.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ApprovedAddr {
    pub cgroup: u64,
    pub addr: [u8; 16],
    pub port: u16,
    pub pad: [u8; 6],
}

/// Per-rule data the programs need, in an array indexed by rule index.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleMeta {
    /// `op::*` bits the rule denies.
    pub ops: u32,
    pub flags: u32,
}

/// A session's rule state: which triggered rules are on and which rules the user turned off.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionState {
    /// Daemon-side session number, for events.
    pub session: u32,
    /// `SESSION_*` bits.
    pub flags: u32,
    pub activated: [u64; RULE_WORDS],
    pub disabled: [u64; RULE_WORDS],
}

impl SessionState {
    #[must_use]
    pub const fn new(session: u32) -> Self {
        Self {
            session,
            flags: 0,
            activated: [0; RULE_WORDS],
            disabled: [0; RULE_WORDS],
        }
    }

    /// Whether `rule` (with metadata `meta`) is in force for this session.
    #[expect(
        clippy::inline_always,
        reason = "called by eBPF programs; a call adds verifier work"
    )]
    #[inline(always)]
    #[must_use]
    pub fn is_active(&self, rule: u32, meta: &RuleMeta) -> bool {
        let word = (rule as usize / 64) % RULE_WORDS;
        let bit = 1u64 << (rule % 64);
        let on = meta.flags & RULE_ALWAYS_ON != 0 || self.activated[word] & bit != 0;
        on && self.disabled[word] & bit == 0
    }

    pub fn set_bit(words: &mut [u64; RULE_WORDS], rule: u32, on: bool) {
        let word = (rule as usize / 64) % RULE_WORDS;
        let bit = 1u64 << (rule % 64);
        if on {
            words[word] |= bit;
        } else {
            words[word] &= !bit;
        }
    }
}

/// Global settings the programs read from the `CONFIG` array (index 0). Unlike load-time
/// globals these can change while programs run (a rule reload).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// `op::*` bits for which at least one path rule exists: a path too long to match is
    /// denied for these operations only.
    pub path_rule_ops: u32,
    /// `op::*` bits that any network rule covers.
    pub net_rule_ops: u32,
    /// `has::*` bits: which path maps hold entries, so the programs skip the lookups (and
    /// the reads feeding them) of empty ones.
    pub has: u32,
    /// The path automata in force: 0 for none, else their half of the `DFA*` maps plus one.
    pub dfa: u32,
    /// The rule that refuses `chroot` in sessions (`view: chroot`), plus one; 0 for none.
    pub chroot_rule: u32,
    /// The rule that refuses new user namespaces (`view: user-namespace`), plus one.
    pub userns_rule: u32,
}

/// `Config::has` bits.
pub mod has {
    pub const EXACT: u32 = 1 << 0;
    pub const PREFIX: u32 = 1 << 1;
    pub const NAMES: u32 = 1 << 2;
    pub const INODES: u32 = 1 << 3;
    pub const ANCESTORS: u32 = 1 << 4;
    /// Some live session records (`SESSION_RECORD`): only then do the hooks look at the
    /// session's flags after allowing, so that no session pays for recording otherwise.
    pub const RECORDING: u32 = 1 << 5;
}

/// Path automata of one rule set: patterns anchored at the root in one, floating ones
/// (`**/…`, regexes) in the other, each walked on its own (together their states would
/// multiply). Two, not more: every automaton adds a walk and a judging of its refs to
/// `file_open`, and with four the verifier gave up on the program (E2BIG).
pub const DFA_GROUPS: usize = 2;
/// States of one path automaton.
pub const DFA_STATES: usize = 4096;
/// Transition cells (states × byte classes) of one path automaton.
pub const DFA_CELLS: usize = 1 << 17;
/// Cells of the transition map's values (one lookup reads a chunk).
pub const DFA_CHUNK: usize = 64;
/// Set on a `DFA_TRANS` cell whose target state matched something on the way (its
/// `DFA_EARLY` entry is not empty): the walk looks `DFA_EARLY` up only then.
pub const DFA_EARLY_FLAG: u32 = 1 << 31;
/// Automata the maps hold: `DFA_GROUPS` for each of the two halves (in force, being written).
pub const DFA_SLOTS: usize = 2 * DFA_GROUPS;

/// A path automaton's header: its start state and byte classes. Automaton `slot` (`half *
/// DFA_GROUPS + group`) is anchored at both ends of the path: the programs feed every byte
/// of the path through cell `slot * DFA_CELLS + state * stride + classes[byte]` of
/// `DFA_TRANS` (chunks of `DFA_CHUNK` cells), state 0 being the dead state (no pattern can
/// match any more), and look the final state up in `DFA_ACCEPT[slot * DFA_STATES + state]`.
/// The daemon writes new automata into the half not in force and then switches
/// `Config::dfa`, so a program never walks a half-written one. `states == 0`: no automaton
/// in this slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DfaHeader {
    pub start: u32,
    /// Byte classes: the row length of the transition table.
    pub stride: u32,
    pub states: u32,
    /// The state a walk is in after a directory no pattern goes on from: 0 (dead) for
    /// patterns anchored at the root; for floating ones, the state after `/`, which every
    /// path ending in such a directory leads back to (the automata are minimised). A walk
    /// over a directory's path and `/` that ends anywhere else is inside some pattern: the
    /// directory's descendants could complete it (`DFA_LIVE`).
    pub neutral: u32,
    /// Byte → class.
    pub classes: [u8; 256],
}

impl Default for DfaHeader {
    fn default() -> Self {
        Self {
            start: 0,
            stride: 0,
            states: 0,
            neutral: 0,
            classes: [0; 256],
        }
    }
}

/// What a path automaton's state matched on the way (`DFA_EARLY[slot * DFA_STATES + state]`,
/// gathered by the walk on entering the state): patterns ending in `/**` and `re:` regexes
/// match as soon as the path read so far matches, and need not be remembered by the states
/// after (which would multiply them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DfaEarly {
    /// Exception slots (`slot_bit`) of the rules excepted.
    pub except: u64,
    /// Bits of the refs in `DFA_EARLY_REFS[half]` (blocks) matched.
    pub blocks: u32,
    pub pad: u32,
}

/// What an event's subject is.
pub mod subject {
    pub const PATH: u32 = 1;
    pub const INET: u32 = 2;
    pub const UNIX: u32 = 3;
    /// A process; `DenyEvent::detail` is its tgid.
    pub const TASK: u32 = 4;
    /// A `bpf()` command; `DenyEvent::detail` is its number.
    pub const BPF_CMD: u32 = 5;
    /// A mount operation; `DenyEvent::detail` is a `mount_kind::*`, `path` the source
    /// (`mount`'s device name) when there is one.
    pub const MOUNT: u32 = 6;
    /// Nothing more to say (module loading, `clone3(CLONE_INTO_CGROUP)`).
    pub const NONE: u32 = 7;
    /// A process outside the session; `DenyEvent::detail` is its tgid.
    pub const PROCESS: u32 = 8;
    /// A terminal; `DenyEvent::detail` is the `ioctl` command.
    pub const TTY: u32 = 9;
    /// A socket option or ancillary data; `DenyEvent::detail` is `level << 16 | name`.
    pub const SOCKOPT: u32 = 10;
    /// A kernel key; `DenyEvent::detail` is its serial number.
    pub const KEY: u32 = 11;
}

/// Socket options and ancillary data that route packets by hand (uapi in.h and in6.h):
/// `(level, name)`. `IP_OPTIONS` by `setsockopt`, `IP_RETOPTS` as ancillary data carry IPv4
/// options (loose and strict source routes among them); IPv6 routing headers come as
/// `IPV6_RTHDR`, RFC 2292's `IPV6_2292RTHDR`, or inside `IPV6_2292PKTOPTIONS`.
pub mod route_opt {
    pub const SOL_IP: u32 = 0;
    pub const SOL_IPV6: u32 = 41;
    pub const IP_OPTIONS: u32 = 4;
    pub const IP_RETOPTS: u32 = 7;
    pub const IPV6_2292PKTOPTIONS: u32 = 6;
    pub const IPV6_2292RTHDR: u32 = 5;
    pub const IPV6_RTHDR: u32 = 57;

    /// Whether `setsockopt(level, name)` sets a route.
    #[must_use]
    pub const fn sets_route(level: u32, name: u32) -> bool {
        (level == SOL_IP && name == IP_OPTIONS)
            || (level == SOL_IPV6
                && (name == IPV6_RTHDR || name == IPV6_2292RTHDR || name == IPV6_2292PKTOPTIONS))
    }

    /// Whether ancillary data of `(level, type)` sets a route.
    #[must_use]
    pub const fn carries_route(level: u32, kind: u32) -> bool {
        (level == SOL_IP && (kind == IP_RETOPTS || kind == IP_OPTIONS))
            || (level == SOL_IPV6 && (kind == IPV6_RTHDR || kind == IPV6_2292RTHDR))
    }
}

/// `DenyEvent::detail` of a `subject::MOUNT` event.
pub mod mount_kind {
    pub const MOUNT: u32 = 1;
    pub const UNMOUNT: u32 = 2;
    pub const MOVE_MOUNT: u32 = 3;
    pub const PIVOT_ROOT: u32 = 4;
}

/// A kernel denial, pushed to the `EVENTS` ring buffer; also what a record session touched,
/// on the `TOUCHED` ring buffer (`rule` [`TOUCHED_RULE`], `op` the `op::*` bits allowed).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DenyEvent {
    /// cgroup id of the session (not of a nested cgroup below it).
    pub session_cgroup: u64,
    pub session: u32,
    pub pid: u32,
    pub tgid: u32,
    pub rule: u32,
    /// One `op::*` bit, with [`EVENT_WOULD_DENY`] when the operation was allowed.
    pub op: u32,
    /// One `subject::*` value.
    pub subject: u32,
    /// Host byte order.
    pub port: u16,
    pub family: u16,
    /// Subject-specific number (see `subject::*`), 0 otherwise.
    pub detail: u32,
    /// IPv4-mapped for IPv4.
    pub addr: [u8; 16],
    pub comm: [u8; 16],
    /// NUL-terminated path (file or unix socket).
    pub path: [u8; PATH_MAX],
}

/// Helper failures counted by the programs, indices into the `ERRORS` per-CPU array.
pub mod errsite {
    pub const D_PATH: u32 = 0;
    pub const RINGBUF_FULL: u32 = 1;
    pub const READ_SOCKADDR: u32 = 2;
    pub const READ_INODE: u32 = 3;
    pub const READ_TASK: u32 = 4;
    /// Spelling a (dentry, mount) pair as a path (`dpath`).
    pub const PATH_WALK: u32 = 5;
    pub const COUNT: u32 = 6;
}

/// Names of the load-time globals the daemon fills from the running kernel's BTF.
pub mod globals {
    /// Level of the Carapace cgroup root (`<cgroup2>/carapace`) in the hierarchy.
    pub const CGROUP_ROOT_LEVEL: &str = "CGROUP_ROOT_LEVEL";
    /// cgroup id of the Carapace cgroup root.
    pub const CGROUP_ROOT_ID: &str = "CGROUP_ROOT_ID";
    pub const OFF_FILE_F_PATH: &str = "OFF_FILE_F_PATH";
    pub const OFF_FILE_F_MODE: &str = "OFF_FILE_F_MODE";
    pub const OFF_FILE_F_INODE: &str = "OFF_FILE_F_INODE";
    pub const OFF_INODE_I_INO: &str = "OFF_INODE_I_INO";
    pub const OFF_INODE_I_SB: &str = "OFF_INODE_I_SB";
    pub const OFF_INODE_I_FSNOTIFY_MASK: &str = "OFF_INODE_I_FSNOTIFY_MASK";
    pub const OFF_SB_S_DEV: &str = "OFF_SB_S_DEV";
    pub const OFF_BPRM_FILE: &str = "OFF_BPRM_FILE";
    pub const OFF_PATH_DENTRY: &str = "OFF_PATH_DENTRY";
    pub const OFF_DENTRY_D_NAME: &str = "OFF_DENTRY_D_NAME";
    pub const OFF_QSTR_NAME: &str = "OFF_QSTR_NAME";
    /// tgid of the running `carapaced`, which sessions may not signal or trace.
    pub const DAEMON_TGID: &str = "DAEMON_TGID";
    pub const OFF_TASK_TGID: &str = "OFF_TASK_TGID";
    pub const OFF_SB_S_MAGIC: &str = "OFF_SB_S_MAGIC";
    pub const OFF_DENTRY_D_PARENT: &str = "OFF_DENTRY_D_PARENT";
    pub const OFF_DENTRY_D_INODE: &str = "OFF_DENTRY_D_INODE";
    /// `READING_MODULE` of `enum kernel_read_file_id`.
    pub const READING_MODULE: &str = "READING_MODULE";
    /// `LOADING_MODULE` of `enum kernel_load_data_id`.
    pub const LOADING_MODULE: &str = "LOADING_MODULE";
    pub const OFF_MSGHDR_MSG_NAME: &str = "OFF_MSGHDR_MSG_NAME";
    pub const OFF_UNIX_SOCK_PATH: &str = "OFF_UNIX_SOCK_PATH";
    pub const OFF_SOCKET_SK: &str = "OFF_SOCKET_SK";
    pub const OFF_PATH_MNT: &str = "OFF_PATH_MNT";
    pub const OFF_TASK_FS: &str = "OFF_TASK_FS";
    pub const OFF_FS_ROOT: &str = "OFF_FS_ROOT";
    pub const OFF_FILE_F_FLAGS: &str = "OFF_FILE_F_FLAGS";
    /// Members the programs walk to spell a (dentry, mount) pair as a path, where the hook
    /// offers no `struct file` for `bpf_d_path` (`dpath`).
    pub const OFF_VFSMOUNT_MNT_ROOT: &str = "OFF_VFSMOUNT_MNT_ROOT";
    pub const OFF_MOUNT_MNT: &str = "OFF_MOUNT_MNT";
    pub const OFF_MOUNT_MNT_PARENT: &str = "OFF_MOUNT_MNT_PARENT";
    pub const OFF_MOUNT_MNT_MOUNTPOINT: &str = "OFF_MOUNT_MNT_MOUNTPOINT";
    /// Addresses (from /proc/kallsyms) of the dcache's `rename_lock` and the mount table's
    /// `mount_lock`, whose sequence counts tell the path cache that a path may have changed;
    /// 0 turns the cache off.
    pub const ADDR_RENAME_LOCK: &str = "ADDR_RENAME_LOCK";
    pub const ADDR_MOUNT_LOCK: &str = "ADDR_MOUNT_LOCK";
    /// BTF id of the kernel's `struct seqcount` where the kernel has the `bpf_rdonly_cast`
    /// kfunc (Linux 6.2+): the path cache then reads the two sequences with direct loads
    /// instead of two `bpf_probe_read_kernel` calls. 0 where it has not.
    pub const BTF_SEQCOUNT: &str = "BTF_SEQCOUNT";
    /// Members the programs walk to tell whether a task or a socket belongs to the current
    /// session: `task->cgroups->dfl_cgrp`, a socket's cgroup (`sk_cgrp_data.cgroup`, one
    /// offset), and a cgroup's ancestor at the sessions' level (`ancestors[]`, whose
    /// `kn->id` is the cgroup id; `ancestor_ids[]` holding the ids before Linux 6.0).
    pub const OFF_TASK_CGROUPS: &str = "OFF_TASK_CGROUPS";
    pub const OFF_CSS_SET_DFL_CGRP: &str = "OFF_CSS_SET_DFL_CGRP";
    pub const OFF_SOCK_CGROUP: &str = "OFF_SOCK_CGROUP";
    pub const OFF_CGROUP_LEVEL: &str = "OFF_CGROUP_LEVEL";
    pub const OFF_CGROUP_ANCESTORS: &str = "OFF_CGROUP_ANCESTORS";
    pub const OFF_CGROUP_KN: &str = "OFF_CGROUP_KN";
    pub const OFF_KERNFS_NODE_ID: &str = "OFF_KERNFS_NODE_ID";
    /// `unix_sock->addr` and `unix_address.name`: an abstract socket's name, for events.
    pub const OFF_UNIX_SOCK_ADDR: &str = "OFF_UNIX_SOCK_ADDR";
    pub const OFF_UNIX_ADDRESS_NAME: &str = "OFF_UNIX_ADDRESS_NAME";
    /// A dentry's super block, its mounts, a mount's link among them (0 from Linux 6.18,
    /// where `s_mounts` points at the first mount) and a vfsmount's super block: the hooks
    /// given only a dentry find a mount to spell it by.
    pub const OFF_DENTRY_D_SB: &str = "OFF_DENTRY_D_SB";
    pub const OFF_SB_S_MOUNTS: &str = "OFF_SB_S_MOUNTS";
    pub const OFF_MOUNT_MNT_INSTANCE: &str = "OFF_MOUNT_MNT_INSTANCE";
    pub const OFF_VFSMOUNT_MNT_SB: &str = "OFF_VFSMOUNT_MNT_SB";
    /// From a procfs inode to the process it shows: `proc_inode.pid` (the inode is
    /// `proc_inode.vfs_inode`), the first task of a `struct pid` (`pid.tasks[0]`, a
    /// `hlist_node` at `task_struct.pid_links[0]`).
    pub const OFF_PROC_INODE_PID: &str = "OFF_PROC_INODE_PID";
    pub const OFF_PROC_INODE_VFS_INODE: &str = "OFF_PROC_INODE_VFS_INODE";
    pub const OFF_PID_TASKS: &str = "OFF_PID_TASKS";
    pub const OFF_TASK_PID_LINKS: &str = "OFF_TASK_PID_LINKS";
    /// A devpts dentry's terminal (`d_fsdata`) and that terminal's session
    /// (`tty_struct.ctrl.session`, a `struct pid`).
    pub const OFF_DENTRY_D_FSDATA: &str = "OFF_DENTRY_D_FSDATA";
    pub const OFF_TTY_SESSION: &str = "OFF_TTY_SESSION";
    /// An inode's type and device number.
    pub const OFF_INODE_I_MODE: &str = "OFF_INODE_I_MODE";
    pub const OFF_INODE_I_RDEV: &str = "OFF_INODE_I_RDEV";
    /// The caller's IPC namespace (`task_struct.nsproxy->ipc_ns`) and an mqueue super
    /// block's (`s_fs_info`).
    pub const OFF_TASK_NSPROXY: &str = "OFF_TASK_NSPROXY";
    pub const OFF_NSPROXY_IPC_NS: &str = "OFF_NSPROXY_IPC_NS";
    pub const OFF_SB_S_FS_INFO: &str = "OFF_SB_S_FS_INFO";
    /// A kernel key's serial number (`key.serial`).
    pub const OFF_KEY_SERIAL: &str = "OFF_KEY_SERIAL";
    /// A socket's address family (`sock_common.skc_family`, at the start of `struct sock`),
    /// and a message's ancillary data (`msghdr.msg_control`, `msg_controllen`).
    pub const OFF_SOCK_FAMILY: &str = "OFF_SOCK_FAMILY";
    pub const OFF_MSGHDR_MSG_CONTROL: &str = "OFF_MSGHDR_MSG_CONTROL";
    pub const OFF_MSGHDR_MSG_CONTROLLEN: &str = "OFF_MSGHDR_MSG_CONTROLLEN";
    /// 1 where `OFF_CGROUP_ANCESTORS` is `ancestor_ids[]` (ids, not pointers).
    pub const CGROUP_ANCESTOR_IDS: &str = "CGROUP_ANCESTOR_IDS";
}

/// The one kfunc call the programs make, and how it reaches the kernel. aya 0.14 cannot
/// relocate a call to an extern function, so the programs emit this placeholder instruction
/// (`call` with `src_reg = BPF_PSEUDO_KFUNC_CALL` and a marker as the BTF id) and the daemon
/// rewrites it before loading: into a call of `bpf_rdonly_cast` by its id in the running
/// kernel's BTF, or, on a kernel without it, into `r0 = r1` on a path the verifier proves
/// dead (the programs branch on [`globals::BTF_SEQCOUNT`]).
pub mod kfunc {
    /// `BPF_JMP | BPF_CALL`, `src_reg` 2, `dst_reg` 0, `off` 0, `imm` "cRDC", as the
    /// little-endian 64-bit word the instruction is.
    pub const RDONLY_CAST_PLACEHOLDER: u64 = 0x4344_5263_0000_2085;
    /// The instruction's opcode and register byte.
    pub const CALL: u8 = 0x85;
    pub const KFUNC_CALL_REGS: u8 = 0x20;
    /// `BPF_ALU64 | BPF_MOV | BPF_X` with `dst_reg` 0, `src_reg` 1: what the verifier
    /// inlines `bpf_rdonly_cast` to anyway, used where the kfunc is missing.
    pub const MOV_R0_R1: u8 = 0xbf;
    pub const MOV_R0_R1_REGS: u8 = 0x10;
}

/// Names of the maps (also their pin names under bpffs).
pub mod maps {
    pub const SESSIONS: &str = "SESSIONS";
    pub const DEFAULT_SESSION: &str = "DEFAULT_SESSION";
    pub const RULES: &str = "RULES";
    pub const CONFIG: &str = "CONFIG";
    pub const EXACT_PATHS: &str = "EXACT_PATHS";
    pub const PREFIX_PATHS: &str = "PREFIX_PATHS";
    pub const NAMES: &str = "NAMES";
    pub const INODES: &str = "INODES";
    pub const ANCESTORS: &str = "ANCESTORS";
    pub const NETS: &str = "NETS";
    pub const RESOLVERS: &str = "RESOLVERS";
    pub const RESOLVER_PORTS: &str = "RESOLVER_PORTS";
    pub const LEARNED: &str = "LEARNED";
    pub const LEARNED_REFUSALS: &str = "LEARNED_REFUSALS";
    pub const ORIG_DST: &str = "ORIG_DST";
    pub const SNI_PROXIES: &str = "SNI_PROXIES";
    pub const SNI_PEERS: &str = "SNI_PEERS";
    pub const EVENTS: &str = "EVENTS";
    pub const TOUCHED: &str = "TOUCHED";
    pub const TOUCHED_SEEN: &str = "TOUCHED_SEEN";
    pub const ERRORS: &str = "ERRORS";
    pub const SCRATCH: &str = "SCRATCH";
    pub const DFA: &str = "DFA";
    pub const DFA_TRANS: &str = "DFA_TRANS";
    pub const DFA_ACCEPT: &str = "DFA_ACCEPT";
    pub const DFA_EARLY: &str = "DFA_EARLY";
    pub const DFA_EARLY_REFS: &str = "DFA_EARLY_REFS";
    pub const DFA_LIVE: &str = "DFA_LIVE";
    pub const PATH_CACHE: &str = "PATH_CACHE";
    pub const PATH_CACHE_GEN: &str = "PATH_CACHE_GEN";
    pub const APPROVED_PATHS: &str = "APPROVED_PATHS";
    pub const HELD_INODES: &str = "HELD_INODES";
    pub const APPROVED_ADDRS: &str = "APPROVED_ADDRS";
}

/// Indices of `PATH_CACHE_GEN`, the generations a cached path verdict was made under. Two
/// counters, each with one kind of writer, so no increment is ever lost.
pub mod cache_gen {
    /// Bumped by the daemon after every write of the rule maps (its only writer).
    pub const RULES: u32 = 0;
    /// Bumped by the programs (atomically) when a task changes its root.
    pub const KERNEL: u32 = 1;
    pub const COUNT: u32 = 2;
}

// Kernel f_mode bits (include/linux/fs.h).
pub const FMODE_READ: u32 = 0x1;
pub const FMODE_WRITE: u32 = 0x2;
pub const FMODE_EXEC: u32 = 0x20;
/// `open(2)` flag (include/uapi/asm-generic/fcntl.h): truncates whatever the access mode.
pub const O_TRUNC: u32 = 0o1000;
/// `open(2)`'s access mode bits; all set (3) opens a file for ioctls only.
pub const O_ACCMODE: u32 = 0o3;
/// `renameat2` flag (include/uapi/linux/fs.h): the two names swap files.
pub const RENAME_EXCHANGE: u32 = 1 << 1;

// Superblock magics of cgroup filesystems (include/uapi/linux/magic.h).
pub const CGROUP_SUPER_MAGIC: u64 = 0x0027_e0eb;
pub const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;
/// procfs, devpts and the POSIX message queue file system (include/uapi/linux/magic.h).
pub const PROC_SUPER_MAGIC: u64 = 0x9fa0;
pub const DEVPTS_SUPER_MAGIC: u64 = 0x1cd1;
pub const MQUEUE_MAGIC: u64 = 0x1980_0202;
/// Character-device majors of terminals no session owns (Documentation/admin-guide/
/// devices.txt): virtual consoles and serial lines (4), the system console (5:1), and
/// the virtual consoles' screen memory (7, `/dev/vcs*`).
pub const TTY_MAJOR: u32 = 4;
pub const TTYAUX_MAJOR: u32 = 5;
pub const CONSOLE_MINOR: u32 = 1;
pub const VCS_MAJOR: u32 = 7;
/// `ioctl`s that change a file's inode flags (`chattr`): immutable, append-only, no-dump.
pub const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
pub const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
pub const FS_IOC_FSSETXATTR: u32 = 0x401c_5820;
/// `clone3` flag (include/uapi/linux/sched.h).
pub const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `ioctl`s that push input into a terminal (include/uapi/asm-generic/ioctls.h): `TIOCSTI`
/// fakes typed bytes, `TIOCLINUX` (subcommand 3) pastes the console's selection.
pub const TIOCSTI: u32 = 0x5412;
pub const TIOCLINUX: u32 = 0x541c;
pub const AF_UNSPEC: u16 = 0;
pub const AF_UNIX: u16 = 1;
pub const AF_INET: u16 = 2;
pub const AF_INET6: u16 = 10;

const _: () = {
    assert!(core::mem::size_of::<RuleRef>() == 8);
    assert!(core::mem::size_of::<RuleRefs>() == 16 + 8 * REFS_PER_KEY);
    assert!(core::mem::size_of::<PathKey>() == PATH_MAX);
    assert!(core::mem::size_of::<PrefixKey>() == 4 + PATH_MAX);
    assert!(core::mem::size_of::<NameKey>() == NAME_MAX);
    assert!(core::mem::size_of::<InodeKey>() == 16);
    assert!(core::mem::size_of::<NetKey>() == 20);
    assert!(core::mem::size_of::<NetRef>() == 12);
    assert!(core::mem::size_of::<NetRefs>() == 4 + 12 * REFS_PER_KEY);
    assert!(core::mem::size_of::<RuleMeta>() == 8);
    assert!(core::mem::size_of::<SessionState>() == 8 + 16 * RULE_WORDS);
    assert!(core::mem::size_of::<Config>() == 24);
    assert!(core::mem::size_of::<DfaHeader>() == 16 + 256);
    assert!(DFA_STATES < u16::MAX as usize);
    assert!(core::mem::size_of::<DfaEarly>() == 16);
    assert!(DFA_STATES.is_power_of_two());
    assert!((DFA_STATES as u32) < DFA_EARLY_FLAG);
    assert!(core::mem::size_of::<DenyEvent>() == 8 + 4 * 6 + 2 + 2 + 4 + 16 + 16 + PATH_MAX);
    assert!(MAX_RULES.is_multiple_of(64));
    // The would-deny flag never collides with an operation bit.
    assert!(op::KEY < EVENT_WOULD_DENY && op::OUTSIDE < EVENT_WOULD_DENY);
    assert!(core::mem::size_of::<LearnedKey>() == 24);
    assert!(core::mem::size_of::<LearnedBlock>() == 8);
    assert!(core::mem::size_of::<Learned>() == 16 + 4 * LEARNED_RULES + 8 * LEARNED_BLOCKS);
    assert!(core::mem::size_of::<LearnedRefusals>() == 8 + 8 * LEARNED_BLOCKS);
    assert!(core::mem::size_of::<OrigDst>() == 24);
    assert!(core::mem::size_of::<SniPeerKey>() == 24);
    assert!(core::mem::size_of::<ApprovedOps>() == 28 * APPROVALS_PER_PATH);
    assert!(core::mem::size_of::<ApprovedAddr>() == 32);
};

#[cfg(feature = "user")]
mod pod {
    use super::{
        ApprovedAddr, ApprovedOps, Config, DfaEarly, DfaHeader, InodeKey, Learned, LearnedKey,
        LearnedRefusals, NameKey, NetKey, NetRefs, OrigDst, PathKey, PrefixKey, RuleMeta, RuleRefs,
        SessionState, SniPeerKey,
    };

    // SAFETY: each type is #[repr(C)], has no padding the compiler inserts (the size
    // assertions above pin every field) and is valid for any bit pattern.
    unsafe impl aya::Pod for RuleRefs {}
    // SAFETY: see above.
    unsafe impl aya::Pod for PathKey {}
    // SAFETY: see above.
    unsafe impl aya::Pod for PrefixKey {}
    // SAFETY: see above.
    unsafe impl aya::Pod for NameKey {}
    // SAFETY: see above.
    unsafe impl aya::Pod for InodeKey {}
    // SAFETY: see above.
    unsafe impl aya::Pod for NetKey {}
    // SAFETY: see above.
    unsafe impl aya::Pod for NetRefs {}
    // SAFETY: see above.
    unsafe impl aya::Pod for RuleMeta {}
    // SAFETY: see above.
    unsafe impl aya::Pod for SessionState {}
    // SAFETY: see above.
    unsafe impl aya::Pod for Config {}
    // SAFETY: see above.
    unsafe impl aya::Pod for DfaHeader {}
    // SAFETY: see above.
    unsafe impl aya::Pod for DfaEarly {}
    // SAFETY: see above.
    unsafe impl aya::Pod for LearnedKey {}
    // SAFETY: see above.
    unsafe impl aya::Pod for SniPeerKey {}
    // SAFETY: see above.
    unsafe impl aya::Pod for Learned {}
    // SAFETY: see above.
    unsafe impl aya::Pod for LearnedRefusals {}
    // SAFETY: see above.
    unsafe impl aya::Pod for OrigDst {}
    // SAFETY: see above.
    unsafe impl aya::Pod for ApprovedOps {}
    // SAFETY: see above.
    unsafe impl aya::Pod for ApprovedAddr {}
}

#[cfg(feature = "user")]
impl DenyEvent {
    /// Reads an event from the bytes of a ring buffer record, if it is large enough.
    #[must_use]
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < core::mem::size_of::<Self>() {
            return None;
        }
        // SAFETY: the length was checked, DenyEvent is plain old data valid for any bit
        // pattern, and read_unaligned copes with the ring buffer's alignment.
        Some(unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast::<Self>()) })
    }

    /// Whether the operation was allowed and the denial only reported (a shadow session).
    #[must_use]
    pub const fn would_deny(&self) -> bool {
        self.op & EVENT_WOULD_DENY != 0
    }

    /// The operation denied (or that would have been), without the event's flag bits.
    #[must_use]
    pub const fn operation(&self) -> u32 {
        self.op & !EVENT_WOULD_DENY
    }
}

impl PathKey {
    /// Builds a key from a path; `None` if it does not fit with its NUL.
    #[must_use]
    pub fn new(path: &[u8]) -> Option<Self> {
        let mut key = Self {
            path: [0; PATH_MAX],
        };
        fill(&mut key.path, path)?;
        Some(key)
    }
}

impl PrefixKey {
    /// Builds a key matching every path that starts with `prefix` (no NUL is part of it).
    #[must_use]
    pub fn new(prefix: &[u8]) -> Option<Self> {
        let mut key = Self {
            prefix_len: 0,
            path: [0; PATH_MAX],
        };
        fill(&mut key.path, prefix)?;
        key.prefix_len = (prefix.len() * 8) as u32;
        Some(key)
    }
}

impl NameKey {
    #[must_use]
    pub fn new(name: &[u8]) -> Option<Self> {
        let mut key = Self {
            name: [0; NAME_MAX],
        };
        fill(&mut key.name, name)?;
        Some(key)
    }
}

/// Copies `src` into `dst` leaving at least one trailing NUL; `None` if it does not fit.
fn fill(dst: &mut [u8], src: &[u8]) -> Option<()> {
    if src.len() >= dst.len() || src.contains(&0) {
        return None;
    }
    dst[..src.len()].copy_from_slice(src);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_refuse_what_does_not_fit() {
        assert!(PathKey::new(&[b'a'; PATH_MAX - 1]).is_some());
        assert!(PathKey::new(&[b'a'; PATH_MAX]).is_none());
        assert!(NameKey::new(b"id_rsa").is_some());
        assert!(NameKey::new(&[b'x'; NAME_MAX]).is_none());
        assert!(PathKey::new(b"a\0b").is_none());
        assert_eq!(PrefixKey::new(b"/etc/").map(|k| k.prefix_len), Some(40));
    }

    #[test]
    fn approved_ops_by_session() {
        let file = InodeKey { dev: 3, ino: 11 };
        let any = InodeKey::default();
        let mut a = ApprovedOps::default();
        assert_eq!(a.of(7).0, 0);
        assert!(a.add(7, op::READ, file));
        assert!(a.add(7, op::WRITE, file));
        assert!(a.add(9, op::EXEC | op::READ, any));
        assert_eq!(a.of(7), (op::READ | op::WRITE, file));
        assert_eq!(a.of(9), (op::EXEC | op::READ, any));
        assert_eq!(a.of(8).0, 0);
        // The path now names another file: what the old one had approved is gone.
        let other = InodeKey { dev: 3, ino: 12 };
        assert!(a.add(7, op::WRITE, other));
        assert_eq!(a.of(7), (op::WRITE, other));
        for c in 10..16 {
            assert!(a.add(c, op::READ, any));
        }
        assert!(!a.add(99, op::READ, any), "every slot is taken");
        assert!(a.remove(7));
        assert_eq!(a.of(7).0, 0);
        assert!(a.add(99, op::READ, any), "a freed slot is reused");
        let mut b = ApprovedOps::default();
        b.add(1, op::READ, file);
        assert!(!b.remove(1), "no slot left in use");
        assert_eq!(b, ApprovedOps::default(), "a freed slot is all zeroes");
    }

    #[test]
    fn session_bits() {
        let mut s = SessionState::new(1);
        let always = RuleMeta {
            ops: op::READ,
            flags: RULE_ALWAYS_ON,
        };
        let triggered = RuleMeta {
            ops: op::WRITE,
            flags: 0,
        };
        assert!(s.is_active(3, &always));
        assert!(!s.is_active(70, &triggered));
        SessionState::set_bit(&mut s.activated, 70, true);
        assert!(s.is_active(70, &triggered));
        SessionState::set_bit(&mut s.disabled, 70, true);
        assert!(!s.is_active(70, &triggered));
        SessionState::set_bit(&mut s.disabled, 3, true);
        assert!(!s.is_active(3, &always));
    }
}
