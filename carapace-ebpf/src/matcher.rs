//! Looks a path or an address up in the rule maps and decides whether a rule in force for
//! the session denies the operation.
//!
//! Exceptions (`except:`) are entries flagged `REF_EXCEPT`. Every ref of a rule that has
//! exceptions carries the rule's exception slot (see `carapace_common::slot_bit`), and every
//! map value the slots of its exceptions (`RuleRefs::except`), so the exceptions found by all
//! lookups fold into one mask and each rule is judged with a bit test: straight-line code the
//! verifier explores once per ref, not once per combination.

use carapace_common::{
    has, op, slot_bit, Config, DfaEarly, InodeKey, NetRefs, RuleRef, RuleRefs, SessionState,
    DFA_CELLS, DFA_CHUNK, DFA_GROUPS, DFA_STATES, PATH_MAX, REFS_PER_KEY, REF_EXCEPT,
};

use aya_ebpf::{cty::c_void, helpers::generated::bpf_loop};

use crate::maps::{
    Scratch, DFA, DFA_ACCEPT, DFA_EARLY, DFA_EARLY_REFS, DFA_TRANS, EXACT_PATHS, INODES, NAMES,
    NETS, PREFIX_PATHS, RULES, SCRATCH,
};

/// A denial: the rule and the one operation bit it denied.
#[derive(Clone, Copy)]
pub struct Verdict {
    pub rule: u32,
    pub op: u32,
}

#[inline(always)]
fn except_mask(refs: Option<&RuleRefs>) -> u64 {
    refs.map_or(0, |r| r.except)
}

/// The first rule in `refs` that is in force, covers `ops` and is not excepted.
#[inline(always)]
fn judge(refs: &RuleRefs, excepted: u64, state: &SessionState, ops: u32) -> Option<Verdict> {
    judge_some(refs, excepted, state, ops | ALL_REFS)
}

/// Bits of `judge_some`'s last argument above the operations: which of the refs to judge.
const WHICH_SHIFT: u32 = 16;
const ALL_REFS: u32 = ((1 << REFS_PER_KEY) - 1) << WHICH_SHIFT;
const _: () = assert!(op::ALL < 1 << WHICH_SHIFT && REFS_PER_KEY <= 16);

/// A judging in progress: a copy of the refs and what [`judge_step`] decides on.
#[repr(C)]
struct Judging {
    refs: [RuleRef; REFS_PER_KEY],
    excepted: u64,
    count: u32,
    ops_which: u32,
    rule: u32,
    /// The operation denied; 0 while no ref denies.
    op: u32,
}

/// One ref of a judging, as a `bpf_loop` callback: checked once by the verifier, not once per
/// ref and call site (6.1's verifier gave up on eight unrolled steps at seven call sites).
extern "C" fn judge_step(index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `ctx` is the `Judging` on the caller's stack that `judge_some` passed.
    let j = unsafe { &mut *ctx.cast::<Judging>() };
    let i = (index as usize) & (REFS_PER_KEY - 1);
    if i as u32 >= j.count {
        return 1;
    }
    let r = j.refs[i];
    if (j.ops_which >> (WHICH_SHIFT + i as u32)) & 1 == 0
        || r.flags & REF_EXCEPT != 0
        || slot_bit(r.flags) & j.excepted != 0
    {
        return 0;
    }
    let Some(meta) = RULES.get(r.rule) else {
        return 0;
    };
    // The session again (the same task, so the same answer): a map value pointer cannot
    // travel through the callback's context.
    let Some(session) = crate::gate::current_session() else {
        return 0;
    };
    let hit = meta.ops & j.ops_which & ((1 << WHICH_SHIFT) - 1);
    if hit != 0 && session.state.is_active(r.rule, meta) {
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

/// [`judge`] over the refs whose bit is set in `ops_which >> WHICH_SHIFT`. One argument for
/// both: a BPF call passes at most five, and the verdict's return pointer is one of them.
#[inline(never)]
fn judge_some(
    refs: &RuleRefs,
    excepted: u64,
    _state: &SessionState,
    ops_which: u32,
) -> Option<Verdict> {
    let mut j = Judging {
        refs: refs.refs,
        excepted,
        count: refs.count,
        ops_which,
        rule: 0,
        op: 0,
    };
    // SAFETY: `judge_step` has the callback signature bpf_loop expects and only touches `j`.
    unsafe {
        bpf_loop(
            REFS_PER_KEY as u32,
            judge_step as *mut c_void,
            (&raw mut j).cast::<c_void>(),
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
}

/// A walk in progress: what [`step`] reads and writes between bytes. Scalars only: the
/// callback finds the path and the tables through their maps.
#[repr(C)]
struct Walk {
    slot: u32,
    state: u32,
    len: u32,
    /// Set when the walk died or could not read a table.
    dead: u32,
    except: u64,
    blocks: u64,
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
    let state = chunk[(cell as usize) & (DFA_CHUNK - 1)];
    let first_state = w.slot.wrapping_mul(DFA_STATES as u32);
    let Some(e) = DFA_EARLY.get(first_state.wrapping_add(state & (DFA_STATES as u32 - 1))) else {
        w.dead = 1;
        return 1;
    };
    w.except |= e.except;
    w.blocks |= u64::from(e.blocks);
    w.state = state;
    if state == 0 {
        w.dead = 1;
        return 1;
    }
    0
}

/// Walks path automaton `slot` over the first `len` bytes of the path in the scratch map;
/// the `DFA_ACCEPT` index of the state it ends in (`NO_STATE` when it died). What the states
/// passed matched on the way is added to `early`.
#[inline(never)]
fn walk(len: usize, slot: u32, early: &mut DfaEarly) -> u32 {
    let Some(header) = DFA.get(slot) else {
        return NO_STATE;
    };
    if header.states == 0 {
        return NO_STATE;
    }
    let mut w = Walk {
        slot,
        state: header.start,
        len: (len & (PATH_MAX - 1)) as u32,
        dead: 0,
        except: 0,
        blocks: 0,
    };
    // SAFETY: `step` has the callback signature bpf_loop expects and only touches `w`.
    unsafe {
        bpf_loop(
            PATH_MAX as u32,
            step as *mut c_void,
            (&raw mut w).cast::<c_void>(),
            0,
        );
    }
    early.except |= w.except;
    early.blocks |= w.blocks as u32;
    if w.dead != 0 {
        return NO_STATE;
    }
    slot.wrapping_mul(DFA_STATES as u32)
        .wrapping_add(w.state & (DFA_STATES as u32 - 1))
}

const NO_STATE: u32 = u32::MAX;

/// The accepting entry at `index` (from [`walk`]), if it lists any rule.
#[inline(always)]
fn accepted(index: u32) -> Option<&'static RuleRefs> {
    if index == NO_STATE {
        return None;
    }
    DFA_ACCEPT.get(index).filter(|a| a.count != 0)
}

/// Judges a file operation against exact, prefix, basename and inode entries and the path
/// automata, skipping what the rule set does not use (`config.has`, `config.dfa`).
#[inline(always)]
pub fn check_path(
    subject: &mut PathSubject<'_>,
    config: &Config,
    state: &SessionState,
    ops: u32,
) -> Option<Verdict> {
    let scratch = &mut *subject.scratch;
    // The automata first: the verifier checks a walk once per distinct state of its caller,
    // and every lookup before it (a map value or null) would double those.
    // Up to DFA_GROUPS automata, unrolled: each result stays a known map-value pointer.
    let (mut d0, mut d1) = (None, None);
    let mut early = DfaEarly::default();
    let half = config.dfa.wrapping_sub(1) & 1;
    if config.dfa != 0 {
        let first = half * DFA_GROUPS as u32;
        let i0 = walk(subject.len, first, &mut early);
        let i1 = walk(subject.len, first + 1, &mut early);
        d0 = accepted(i0);
        d1 = accepted(i1);
    }
    let exact = if config.has & has::EXACT != 0 {
        // SAFETY: map values are valid while the program runs; entries are replaced whole.
        unsafe { EXACT_PATHS.get(&scratch.key.data) }
    } else {
        None
    };
    scratch.key.prefix_len = (subject.len * 8) as u32;
    let prefix = if config.has & has::PREFIX != 0 {
        PREFIX_PATHS.get(&scratch.key)
    } else {
        None
    };
    let name = if subject.has_name {
        // SAFETY: as above.
        unsafe { NAMES.get(&scratch.name) }
    } else {
        None
    };
    let inode = match subject.inode {
        // SAFETY: as above.
        Some(key) => unsafe { INODES.get(&key) },
        None => None,
    };

    let excepted = except_mask(exact)
        | except_mask(prefix)
        | except_mask(name)
        | except_mask(inode)
        | except_mask(d0)
        | except_mask(d1)
        | early.except;
    // Four explicit calls: iterating an array of them would read the pointers back from the
    // stack at a variable offset, and the verifier would no longer know they point at maps.
    if let Some(v) = exact.and_then(|r| judge(r, excepted, state, ops)) {
        return Some(v);
    }
    if let Some(v) = prefix.and_then(|r| judge(r, excepted, state, ops)) {
        return Some(v);
    }
    if let Some(v) = name.and_then(|r| judge(r, excepted, state, ops)) {
        return Some(v);
    }
    if let Some(v) = inode.and_then(|r| judge(r, excepted, state, ops)) {
        return Some(v);
    }
    if let Some(v) = d0.and_then(|r| judge(r, excepted, state, ops)) {
        return Some(v);
    }
    if let Some(v) = d1.and_then(|r| judge(r, excepted, state, ops)) {
        return Some(v);
    }
    // Looked up last: a lookup that may fail, earlier, would double the verifier's paths
    // through everything after it.
    if early.blocks == 0 {
        return None;
    }
    let ops_which = ops | ((early.blocks << WHICH_SHIFT) & ALL_REFS);
    DFA_EARLY_REFS
        .get(half)
        .and_then(|r| judge_some(r, excepted, state, ops_which))
}

const _: () = assert!(DFA_GROUPS == 2, "check_path walks exactly two automata");
/// Judges `ops` on a file known only by its inode (a dentry with no path at hand). Exceptions
/// are paths and do not apply: a new name for an excepted file in a protected tree is refused
/// too (fail closed).
#[inline(always)]
pub fn check_inode(key: &InodeKey, state: &SessionState, ops: u32) -> Option<Verdict> {
    // SAFETY: map values are valid while the program runs; entries are replaced whole.
    let refs = unsafe { INODES.get(key) }?;
    judge(refs, 0, state, ops)
}

/// Judges a connect to `addr` (IPv4-mapped for IPv4) and `port` (host order).
#[inline(always)]
pub fn check_net(addr: [u8; 16], port: u16, state: &SessionState) -> Option<Verdict> {
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
        if meta.ops & op::NETWORK != 0 && state.is_active(r.rule, meta) {
            return Some(Verdict {
                rule: r.rule,
                op: op::NETWORK,
            });
        }
    }
    None
}
