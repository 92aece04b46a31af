//! Looks a path or an address up in the rule maps and decides whether a rule in force for
//! the session denies the operation.
//!
//! Exceptions (`except:`) are entries flagged `REF_EXCEPT`. Every ref of a rule that has
//! exceptions carries the rule's exception slot (see `carapace_common::slot_bit`), so the
//! exceptions found by all lookups fold into one mask and each rule is judged with a bit
//! test: straight-line code the verifier explores once per ref, not once per combination.

use carapace_common::{
    has, op, slot_bit, Config, InodeKey, NetRefs, RuleRefs, SessionState, DFA_CELLS, DFA_CHUNK,
    DFA_GROUPS, DFA_STATES, PATH_MAX, REFS_PER_KEY, REF_EXCEPT,
};

use crate::maps::{
    Scratch, DFA, DFA_ACCEPT, DFA_TRANS, EXACT_PATHS, INODES, NAMES, NETS, PREFIX_PATHS, RULES,
};

/// A denial: the rule and the one operation bit it denied.
#[derive(Clone, Copy)]
pub struct Verdict {
    pub rule: u32,
    pub op: u32,
}

#[inline(always)]
fn except_mask(refs: Option<&RuleRefs>) -> u64 {
    let Some(refs) = refs else { return 0 };
    let mut mask = 0;
    for i in 0..REFS_PER_KEY {
        let r = refs.refs[i];
        if (i as u32) < refs.count && r.flags & REF_EXCEPT != 0 {
            mask |= slot_bit(r.flags);
        }
    }
    mask
}

/// The first rule in `refs` that is in force, covers `ops` and is not excepted.
#[inline(never)]
fn judge(refs: &RuleRefs, excepted: u64, state: &SessionState, ops: u32) -> Option<Verdict> {
    for i in 0..REFS_PER_KEY {
        if i as u32 >= refs.count {
            return None;
        }
        let r = refs.refs[i];
        if r.flags & REF_EXCEPT != 0 || slot_bit(r.flags) & excepted != 0 {
            continue;
        }
        let Some(meta) = RULES.get(r.rule) else {
            continue;
        };
        let hit = meta.ops & ops;
        if hit != 0 && state.is_active(r.rule, meta) {
            // An exec open also reads; exec rules deny reads too, and name the exec.
            let op = if hit & op::EXEC != 0 {
                op::EXEC
            } else {
                hit & hit.wrapping_neg()
            };
            return Some(Verdict { rule: r.rule, op });
        }
    }
    None
}

/// What a file operation is matched on: the scratch buffers hold the path (zero-tailed,
/// `len` bytes without the NUL) and, when `has_name`, the basename.
pub struct PathSubject<'a> {
    pub scratch: &'a mut Scratch,
    pub len: usize,
    pub has_name: bool,
    pub inode: Option<InodeKey>,
}

/// Walks path automaton `slot` over the first `len` bytes of `path`; the accepting entry of
/// the state it ends in (`None` when it died or is not accepting). A function of its own so
/// the verifier checks the loop once, not once per caller.
#[inline(never)]
fn walk(path: &[u8; PATH_MAX], len: usize, slot: u32) -> Option<&'static RuleRefs> {
    let header = DFA.get(slot)?;
    if header.states == 0 {
        return None;
    }
    let base = slot.wrapping_mul(DFA_CELLS as u32);
    let stride = header.stride;
    let mut state = header.start;
    let len = len & (PATH_MAX - 1);
    for i in 0..PATH_MAX {
        if i >= len {
            break;
        }
        let class = u32::from(header.classes[usize::from(path[i & (PATH_MAX - 1)])]);
        let cell = base
            .wrapping_add(state.wrapping_mul(stride))
            .wrapping_add(class);
        let chunk = DFA_TRANS.get(cell / DFA_CHUNK as u32)?;
        state = chunk[(cell as usize) & (DFA_CHUNK - 1)];
        if state == 0 {
            return None;
        }
    }
    let accept = DFA_ACCEPT.get(slot.wrapping_mul(DFA_STATES as u32).wrapping_add(state))?;
    (accept.count != 0).then_some(accept)
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
    // Up to DFA_GROUPS automata, unrolled: each result stays a known map-value pointer.
    let (mut d0, mut d1, mut d2, mut d3) = (None, None, None, None);
    if config.dfa != 0 {
        let first = (config.dfa - 1) * DFA_GROUPS as u32;
        d0 = walk(&scratch.key.data, subject.len, first);
        d1 = walk(&scratch.key.data, subject.len, first + 1);
        d2 = walk(&scratch.key.data, subject.len, first + 2);
        d3 = walk(&scratch.key.data, subject.len, first + 3);
    }
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
        | except_mask(d2)
        | except_mask(d3);
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
    if let Some(v) = d2.and_then(|r| judge(r, excepted, state, ops)) {
        return Some(v);
    }
    d3.and_then(|r| judge(r, excepted, state, ops))
}

const _: () = assert!(DFA_GROUPS == 4, "check_path walks exactly four automata");
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
