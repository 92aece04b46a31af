//! Looks a path or an address up in the rule maps and decides whether a rule in force for
//! the session denies the operation.
//!
//! Exceptions (`except:`) are entries flagged `REF_EXCEPT`. Every ref of a rule that has
//! exceptions carries the rule's exception slot (see `carapace_common::slot_bit`), and every
//! map value the slots of its exceptions (`RuleRefs::except`), so the exceptions found by all
//! lookups fold into one mask and each rule is judged with a bit test: straight-line code the
//! verifier explores once per ref, not once per combination.

use carapace_common::{
    has, op, slot_bit, ApprovedAddr, Config, InodeKey, Learned, NetRefs, RuleMeta, RuleRefs,
    BLOCK_IN_ANY_STATE, DFA_CELLS, DFA_CHUNK, DFA_EARLY_FLAG, DFA_GROUPS, DFA_STATES,
    LEARNED_BLOCKS, PATH_MAX, REFS_PER_KEY, REF_EXCEPT, RULE_APPROVE, RULE_EVERY_ADDRESS,
    RULE_HOLD,
};

use aya_ebpf::{
    cty::c_void,
    helpers::generated::{bpf_ktime_get_boot_ns, bpf_loop},
};

use core::ptr::addr_of_mut;

use crate::gate::Session;
use crate::maps::{
    source, Scratch, ANCESTORS, APPROVED_ADDRS, APPROVED_PATHS, DFA, DFA_ACCEPT, DFA_EARLY,
    DFA_EARLY_REFS, DFA_LIVE, DFA_TRANS, EXACT_PATHS, HELD_INODES, INODES, LEARNED,
    LEARNED_REFUSALS, LEARNED_SCRATCH, NAMES, NETS, PREFIX_PATHS, RULES, SCRATCH,
};

/// A denial: the rule and the one operation bit it denied.
#[derive(Clone, Copy)]
pub struct Verdict {
    pub rule: u32,
    pub op: u32,
}

/// Copies `refs` to the scratch slot of `src` for the judging. A copy, not the pointer: each
/// lookup's pointer, null or not, kept live until the judging would double the verifier's
/// states at every lookup (2^7 of them at the judging). The bit saying which slots are filled
/// lives in the scratch map too: a constant on the stack would be tracked exactly, and a
/// branch on it would make every combination of lookups a state of its own again.
#[inline(always)]
fn found(scratch: &mut Scratch, judging: &mut Judging, src: usize, refs: &RuleRefs) {
    if refs.count == 0 {
        return;
    }
    scratch.found[src & (source::COUNT - 1)] = *refs;
    scratch.sources |= 1 << src;
    scratch.found_ops |= refs.ops;
    judging.excepted |= refs.except;
}

/// A judging in progress: what [`judge_step`] reads and decides. Scalars only; the refs are
/// in `Scratch::found`.
#[repr(C)]
pub struct Judging {
    /// Exception slots found by every lookup (`slot_bit`).
    excepted: u64,
    ops: u32,
    /// Which of the `source::EARLY` refs the automata matched.
    early: u32,
    rule: u32,
    /// The operation denied; 0 while no ref denies.
    op: u32,
    /// 1 when the scratch key holds the path judged, so that approvals of it
    /// (`APPROVED_PATHS`) can lift an approve-mode rule; 0 for a file known by inode only.
    path: u32,
    pad: u32,
}

impl Judging {
    #[inline(always)]
    pub fn new(ops: u32) -> Self {
        Self {
            excepted: 0,
            ops,
            early: 0,
            rule: 0,
            op: 0,
            path: 0,
            pad: 0,
        }
    }
}

/// The kinds of `Scratch::object`.
pub mod object {
    pub const NONE: u32 = 0;
    pub const FILE: u32 = 1;
    pub const DENTRY: u32 = 2;
}

/// The kernel object of the file judged, whose inode an approval is checked against.
#[derive(Clone, Copy)]
pub enum Object {
    /// None at hand (a unix socket's path): only approvals of no file in particular apply.
    None,
    File(*const u8),
    Dentry(*const u8),
}

/// The operations a human approved on the path in the scratch key for the session of
/// `cgroup` (exceptions to approve-mode rules), if the path still names the file they
/// approved: a file renamed or linked onto the path since is not covered. The inode is
/// read here, only when an approval would apply.
#[inline(always)]
fn approved_ops(cgroup: u64) -> u32 {
    let Some(scratch) = SCRATCH.get_ptr(0) else {
        return 0;
    };
    // SAFETY: per-CPU scratch holding the path judged; map values are valid while the
    // program runs and are replaced whole.
    let (ops, file) = match unsafe { APPROVED_PATHS.get(&(*scratch).key.data) } {
        Some(approved) => approved.of(cgroup),
        None => return 0,
    };
    if ops == 0 || (file.dev == 0 && file.ino == 0) {
        return ops;
    }
    // SAFETY: as above; `check_path` stored the object for this judging.
    let (kind, ptr) = unsafe { ((*scratch).object_kind, (*scratch).object as *const u8) };
    let now = match kind {
        object::FILE => crate::inode::of_file(ptr),
        object::DENTRY => crate::inode::of_dentry(ptr),
        _ => None,
    };
    match now {
        Some(k) if k.dev == file.dev && k.ino == file.ino => ops,
        _ => 0,
    }
}

/// Whether the file judged is one whose opens the daemon's fanotify listener holds
/// (`RULE_HOLD`): in `HELD_INODES` and still marked. Then a hold rule lets the open go on
/// to fanotify, which runs after the LSM hooks and holds it until a human answers.
#[inline(always)]
fn held() -> bool {
    let Some(scratch) = SCRATCH.get_ptr(0) else {
        return false;
    };
    // SAFETY: per-CPU scratch; `check_path` stored the object for this judging.
    let (kind, ptr) = unsafe { ((*scratch).object_kind, (*scratch).object as *const u8) };
    if kind != object::FILE {
        return false;
    }
    match crate::inode::held_file(ptr) {
        // SAFETY: a map value read as a flag only.
        Some(k) => unsafe { HELD_INODES.get(&k) }.is_some(),
        None => false,
    }
}

/// One ref of the judging, as a `bpf_loop` callback: the verifier checks it once, not once
/// per ref and source. 0 to go on, 1 to stop.
extern "C" fn judge_step(index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `Judging` on the caller's stack that `judge` passed.
    let j = unsafe { &mut *ctx.cast::<Judging>() };
    let src = (index as usize / REFS_PER_KEY) & (source::COUNT - 1);
    let i = (index as usize) & (REFS_PER_KEY - 1);
    let Some(scratch) = SCRATCH.get_ptr(0) else {
        return 1;
    };
    // SAFETY: per-CPU scratch filled by `found`; programs do not nest on a CPU.
    let scratch = unsafe { &*scratch };
    if scratch.sources & (1 << src) == 0 || (src == source::EARLY && j.early & (1 << i) == 0) {
        return 0;
    }
    let refs = &scratch.found[src];
    if i as u32 >= refs.count {
        return 0;
    }
    let r = refs.refs[i];
    if r.flags & REF_EXCEPT != 0 || slot_bit(r.flags) & j.excepted != 0 {
        return 0;
    }
    let Some(meta) = RULES.get(r.rule) else {
        return 0;
    };
    let mut hit = meta.ops & j.ops;
    if hit == 0 {
        return 0;
    }
    // The session again (the same task, so the same answer): a map value pointer cannot
    // travel through the callback's context. Only for a ref that covers the operation.
    let Some(session) = crate::gate::current_session() else {
        return 0;
    };
    if session.state.is_active(r.rule, meta) {
        // An approve-mode rule gives way to what a human approved on this path for this
        // session; what is left of the operation (a read approved, a write asked) is
        // still refused and named. An open let through so is never cached as clean (its
        // ref's operations are in `found_ops`): the path cache serves every session.
        if meta.flags & RULE_APPROVE != 0 && j.path != 0 {
            if meta.flags & RULE_HOLD != 0 && held() {
                return 0;
            }
            hit &= !approved_ops(session.cgroup);
            if hit == 0 {
                return 0;
            }
        }
        // An exec open also reads; exec rules deny reads too, and name the exec.
        j.op = if hit & op::EXEC != 0 {
            op::EXEC
        } else {
            hit & hit.wrapping_neg()
        };
        j.rule = r.rule;
        return 1;
    }
    0
}

/// The first rule found that is in force, covers the operations and is not excepted. One
/// judging per check: a single place the verdict comes from, so what follows a denial is
/// verified once.
#[inline(never)]
fn judge(j: &mut Judging) -> Option<Verdict> {
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    if unsafe { (*SCRATCH.get_ptr(0)?).sources } == 0 {
        return None;
    }
    // SAFETY: `judge_step` has the callback signature bpf_loop expects and only touches `j`.
    unsafe {
        bpf_loop(
            (source::COUNT * REFS_PER_KEY) as u32,
            judge_step as *mut c_void,
            core::ptr::from_mut(j).cast::<c_void>(),
            0,
        );
    }
    (j.op != 0).then_some(Verdict {
        rule: j.rule,
        op: j.op,
    })
}

/// What a file operation is matched on: the scratch buffers hold the path (zero-tailed,
/// `len` bytes without the NUL) and, when `has_name`, the basename.
pub struct PathSubject<'a> {
    pub scratch: &'a mut Scratch,
    pub len: usize,
    pub has_name: bool,
    pub inode: Option<InodeKey>,
    /// Whether the path is also looked up among the directories above protected paths:
    /// only for a name a directory could be moved or linked to.
    pub ancestors: bool,
    /// Whether an automaton walk that ends inside a pattern (neither dead nor in its
    /// neutral state) is judged by the patterns it is inside (`DFA_LIVE`) instead of those
    /// it completes: for a directory's path and `/`, under a name a directory could be moved
    /// or linked to.
    pub live: bool,
    /// The file's kernel object, for an approval's inode check.
    pub object: Object,
}

/// A walk in progress: what [`step`] reads and writes between bytes. Scalars only: the
/// callback finds the path and the tables through their maps.
#[repr(C)]
struct Walk {
    except: u64,
    blocks: u64,
    slot: u32,
    state: u32,
    len: u32,
    /// Set when the walk died or could not read a table.
    dead: u32,
}

/// One byte of a walk, as a `bpf_loop` callback: the verifier checks it once, whatever the
/// number of bytes (an inline loop of `PATH_MAX` steps was checked step by step, and with the
/// early matches it no longer fit the verifier's budget). 0 to go on, 1 to stop.
extern "C" fn step(index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `Walk` on the caller's stack that `walk` passed to bpf_loop.
    let w = unsafe { &mut *ctx.cast::<Walk>() };
    let i = (index as usize) & (PATH_MAX - 1);
    if i >= w.len as usize {
        return 1;
    }
    let (Some(header), Some(scratch)) = (DFA.get(w.slot), SCRATCH.get_ptr(0)) else {
        w.dead = 1;
        return 1;
    };
    // SAFETY: per-CPU scratch holding the path being matched; programs do not nest on a CPU.
    let byte = unsafe { (*scratch).key.data[i] };
    let class = u32::from(header.classes[usize::from(byte)]);
    let cell = w
        .slot
        .wrapping_mul(DFA_CELLS as u32)
        .wrapping_add(w.state.wrapping_mul(header.stride))
        .wrapping_add(class);
    let Some(chunk) = DFA_TRANS.get(cell / DFA_CHUNK as u32) else {
        w.dead = 1;
        return 1;
    };
    let next = chunk[(cell as usize) & (DFA_CHUNK - 1)];
    let state = next & (DFA_STATES as u32 - 1);
    if next & DFA_EARLY_FLAG != 0 {
        let first_state = w.slot.wrapping_mul(DFA_STATES as u32);
        let Some(e) = DFA_EARLY.get(first_state.wrapping_add(state)) else {
            w.dead = 1;
            return 1;
        };
        w.except |= e.except;
        w.blocks |= u64::from(e.blocks);
    }
    w.state = state;
    if state == 0 {
        w.dead = 1;
        return 1;
    }
    0
}

/// Walks path automaton `slot` over the first `len` bytes of the path in the scratch map;
/// the `DFA_ACCEPT` index of the state it ends in (`NO_STATE` when it died). What the states
/// passed matched on the way is added to `early_except` and `early_blocks`.
#[inline(never)]
fn walk(len: usize, slot: u32, early_except: &mut u64, early_blocks: &mut u64) -> u32 {
    let Some(header) = DFA.get(slot) else {
        return NO_STATE;
    };
    if header.states == 0 {
        return NO_STATE;
    }
    // Built field by field: a struct literal with zeros becomes a `memset` call (see
    // `kread::zero_in_place`).
    let mut buf = core::mem::MaybeUninit::<Walk>::uninit();
    let p = buf.as_mut_ptr();
    // SAFETY: every field of the Walk is written before it is used as one.
    let w = unsafe {
        addr_of_mut!((*p).except).write_volatile(0);
        addr_of_mut!((*p).blocks).write_volatile(0);
        addr_of_mut!((*p).slot).write_volatile(slot);
        addr_of_mut!((*p).state).write_volatile(header.start);
        addr_of_mut!((*p).len).write_volatile((len & (PATH_MAX - 1)) as u32);
        addr_of_mut!((*p).dead).write_volatile(0);
        buf.assume_init_mut()
    };
    // SAFETY: `step` has the callback signature bpf_loop expects and only touches `w`.
    unsafe {
        bpf_loop(
            PATH_MAX as u32,
            step as *mut c_void,
            core::ptr::from_mut(w).cast::<c_void>(),
            0,
        );
    }
    *early_except |= w.except;
    *early_blocks |= w.blocks;
    if w.dead != 0 {
        return NO_STATE;
    }
    slot.wrapping_mul(DFA_STATES as u32)
        .wrapping_add(w.state & (DFA_STATES as u32 - 1))
}

const NO_STATE: u32 = u32::MAX;

/// The accepting entry at `index` (from [`walk`]), if it lists any rule; with `live`, the
/// patterns the walk is inside where it did not end in its automaton's neutral state.
#[inline(always)]
fn accepted(index: u32, live: bool) -> Option<&'static RuleRefs> {
    if index == NO_STATE {
        return None;
    }
    if live {
        let slot = index / DFA_STATES as u32;
        let neutral = DFA.get(slot).map_or(0, |h| h.neutral);
        if index & (DFA_STATES as u32 - 1) != neutral {
            return DFA_LIVE.get(index).filter(|a| a.count != 0);
        }
    }
    DFA_ACCEPT.get(index).filter(|a| a.count != 0)
}

/// Judges a file operation against exact, prefix, basename and inode entries and the path
/// automata, skipping what the rule set does not use (`config.has`, `config.dfa`).
#[inline(always)]
pub fn check_path(subject: &mut PathSubject<'_>, config: &Config, ops: u32) -> Option<Verdict> {
    let scratch = &mut *subject.scratch;
    // The automata first: the verifier checks a walk once per distinct state of its caller.
    let (mut d0, mut d1) = (NO_STATE, NO_STATE);
    // Two scalars, not a `DfaEarly`: zeroing a struct becomes a `memset` call, a byte loop
    // the verifier walks for every state of its caller.
    let (mut early_except, mut early_blocks) = (0u64, 0u64);
    let half = config.dfa.wrapping_sub(1) & 1;
    if config.dfa != 0 {
        let first = half * DFA_GROUPS as u32;
        d0 = walk(subject.len, first, &mut early_except, &mut early_blocks);
        d1 = walk(subject.len, first + 1, &mut early_except, &mut early_blocks);
    }
    let mut j = Judging::new(ops);
    j.path = 1;
    (scratch.object_kind, scratch.object) = match subject.object {
        Object::None => (object::NONE, 0),
        Object::File(f) => (object::FILE, f as u64),
        Object::Dentry(d) => (object::DENTRY, d as u64),
    };
    scratch.sources = 0;
    scratch.found_ops = 0;
    j.excepted = early_except;
    j.early = early_blocks as u32;
    // Each pointer is consumed where it is found (see `found`).
    if let Some(r) = accepted(d0, subject.live) {
        found(scratch, &mut j, source::DFA0, r);
    }
    if let Some(r) = accepted(d1, subject.live) {
        found(scratch, &mut j, source::DFA1, r);
    }
    if early_blocks != 0 {
        if let Some(r) = DFA_EARLY_REFS.get(half) {
            found(scratch, &mut j, source::EARLY, r);
        }
    }
    if config.has & has::EXACT != 0 {
        // SAFETY: map values are valid while the program runs; entries are replaced whole.
        if let Some(r) = unsafe { EXACT_PATHS.get(&scratch.key.data) } {
            found(scratch, &mut j, source::EXACT, r);
        }
    }
    scratch.key.prefix_len = (subject.len * 8) as u32;
    if config.has & has::PREFIX != 0 {
        if let Some(r) = PREFIX_PATHS.get(&scratch.key) {
            found(scratch, &mut j, source::PREFIX, r);
        }
    }
    if subject.has_name {
        // SAFETY: as above.
        if let Some(r) = unsafe { NAMES.get(&scratch.name) } {
            found(scratch, &mut j, source::NAME, r);
        }
    }
    if subject.ancestors && config.has & has::ANCESTORS != 0 {
        // SAFETY: as above.
        if let Some(r) = unsafe { ANCESTORS.get(&scratch.key.data) } {
            found(scratch, &mut j, source::ANCESTOR, r);
        }
    }
    if let Some(key) = subject.inode {
        // SAFETY: as above.
        if let Some(r) = unsafe { INODES.get(&key) } {
            found(scratch, &mut j, source::INODE, r);
        }
    }
    judge(&mut j)
}

const _: () = assert!(DFA_GROUPS == 2, "check_path walks exactly two automata");
/// Judges `ops` on a file known only by its inode (a dentry with no path at hand). Exceptions
/// are paths and do not apply: a new name for an excepted file in a protected tree is refused
/// too (fail closed).
#[inline(always)]
pub fn check_inode(key: &InodeKey, ops: u32) -> Option<Verdict> {
    // SAFETY: map values are valid while the program runs; entries are replaced whole.
    let refs = unsafe { INODES.get(key) }?;
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let scratch = unsafe { &mut *SCRATCH.get_ptr_mut(0)? };
    let mut j = Judging::new(ops);
    scratch.sources = 0;
    scratch.found_ops = 0;
    found(scratch, &mut j, source::INODE, refs);
    // Exceptions are paths: none applies here.
    j.excepted = 0;
    judge(&mut j)
}

/// What the session's resolver recorded of `addr`, copied to per-CPU scratch (a zeroed
/// record when it recorded nothing): a map value pointer kept across the judging would
/// split every verifier state in two, found or not. Its refusals come from
/// `LEARNED_REFUSALS`, which keeps them however many exceptions `LEARNED` evicts. `None`
/// only if the one-entry scratch array has no entry 0, which it always has.
#[inline(always)]
fn learned(cgroup: u64, addr: &[u8; 16]) -> Option<&'static Learned> {
    // SAFETY: per-CPU value, no concurrent writer on this CPU (the hooks do not nest).
    let scratch = unsafe { &mut *LEARNED_SCRATCH.get_ptr_mut(0)? };
    scratch.key.cgroup = cgroup;
    scratch.key.addr = *addr;
    // SAFETY: map values live as long as the map; read by copy. Only the exceptions: the
    // map's `blocked`/`blocks` are always empty (refusals are `LEARNED_REFUSALS`'), and
    // copying those 68 bytes was most of the copy, on every connect to a learned address.
    if let Some(found) = unsafe { LEARNED.get(&scratch.key) } {
        scratch.found.expires = found.expires;
        scratch.found.count = found.count;
        scratch.found.rules = found.rules;
    } else {
        scratch.found.expires = 0;
        scratch.found.count = 0;
    }
    // SAFETY: as above.
    match unsafe { LEARNED_REFUSALS.get(&scratch.key) } {
        Some(refusals) => {
            scratch.found.blocked = refusals.blocked;
            scratch.found.blocks = refusals.blocks;
        }
        None => scratch.found.blocked = 0,
    }
    Some(&scratch.found)
}

/// The first rule in force that refuses `port` of an address for the name the session's
/// resolver learned it for (`Learned::blocks`; expired or not). A block flagged
/// `BLOCK_IN_ANY_STATE` stands for rules the entry had no room for: in force regardless.
#[inline(always)]
fn learned_block(
    learned: &Learned,
    addr: &[u8; 16],
    port: u16,
    session: &Session,
) -> Option<Verdict> {
    for i in 0..LEARNED_BLOCKS {
        if i as u32 >= learned.blocked {
            return None;
        }
        let b = learned.blocks[i];
        if b.port != 0 && b.port != port {
            continue;
        }
        let Some(meta) = RULES.get(b.rule) else {
            continue;
        };
        let in_force = b.flags & BLOCK_IN_ANY_STATE != 0 || session.state.is_active(b.rule, meta);
        if meta.ops & op::NETWORK != 0 && in_force && !approved_addr(meta, session, addr, port) {
            return Some(Verdict {
                rule: b.rule,
                op: op::NETWORK,
            });
        }
    }
    None
}

/// Whether `meta` is an approve-mode rule and a human approved connecting to `addr` and
/// `port` for the session: such a rule then gives way (a block rule never does). The map is
/// read only for an approve-mode rule about to refuse.
#[inline(always)]
fn approved_addr(meta: &RuleMeta, session: &Session, addr: &[u8; 16], port: u16) -> bool {
    if meta.flags & RULE_APPROVE == 0 {
        return false;
    }
    let key = ApprovedAddr {
        cgroup: session.cgroup,
        addr: *addr,
        port,
        pad: [0; 6],
    };
    // SAFETY: map values are valid while the program runs.
    unsafe { APPROVED_ADDRS.get(&key) }.is_some_and(|ops| *ops & op::NETWORK != 0)
}

/// Judges a connect to `addr` (IPv4-mapped for IPv4) and `port` (host order): first by the
/// name the session's resolver learned the address for (a rule naming it refuses), then
/// by the address blocks of the rules, whose allow-list exceptions include the addresses
/// learned for allowed names until they expire.
#[inline(always)]
pub fn check_net(addr: [u8; 16], port: u16, session: &Session, dns: bool) -> Option<Verdict> {
    let state = session.state;
    let learned = learned(session.cgroup, &addr)?;
    if let Some(verdict) = learned_block(learned, &addr, port, session) {
        return Some(verdict);
    }
    // SAFETY: helper without arguments.
    let now = unsafe { bpf_ktime_get_boot_ns() };
    let key = aya_ebpf::maps::lpm_trie::Key::new(128, addr);
    let refs: &NetRefs = NETS.get(&key)?;
    let mut excepted = 0u64;
    for i in 0..REFS_PER_KEY {
        let r = refs.refs[i];
        if (i as u32) < refs.count && r.flags & REF_EXCEPT != 0 && (r.port == 0 || r.port == port) {
            excepted |= slot_bit(r.flags);
        }
    }
    for i in 0..REFS_PER_KEY {
        if i as u32 >= refs.count {
            return None;
        }
        let r = refs.refs[i];
        if r.flags & REF_EXCEPT != 0
            || (r.port != 0 && r.port != port)
            || slot_bit(r.flags) & excepted != 0
        {
            continue;
        }
        let Some(meta) = RULES.get(r.rule) else {
            continue;
        };
        // DNS going to the session's resolver: an allow-list's base leaves it to the
        // resolver, which judges the names (`RULE_EVERY_ADDRESS`).
        if dns && meta.flags & RULE_EVERY_ADDRESS != 0 {
            continue;
        }
        if learned.excepts(r.rule, now) {
            continue;
        }
        if meta.ops & op::NETWORK != 0
            && state.is_active(r.rule, meta)
            && !approved_addr(meta, session, &addr, port)
        {
            return Some(Verdict {
                rule: r.rule,
                op: op::NETWORK,
            });
        }
    }
    None
}
