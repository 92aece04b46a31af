//! Looks a path or an address up in the rule maps and decides whether a rule in force for
//! the session denies the operation.
//!
//! Exceptions (`except:`) are entries flagged `REF_EXCEPT`. Every ref of a rule that has
//! exceptions carries the rule's exception slot (see `carapace_common::slot_bit`), so the
//! exceptions found by all lookups fold into one mask and each rule is judged with a bit
//! test: straight-line code the verifier explores once per ref, not once per combination.

use carapace_common::{
    op, slot_bit, InodeKey, NetRefs, RuleRefs, SessionState, REFS_PER_KEY, REF_EXCEPT,
};

use crate::maps::{Scratch, EXACT_PATHS, INODES, NAMES, NETS, PREFIX_PATHS, RULES};

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

/// Judges a file operation against exact, prefix, basename and inode entries.
#[inline(always)]
pub fn check_path(
    subject: &mut PathSubject<'_>,
    state: &SessionState,
    ops: u32,
) -> Option<Verdict> {
    let scratch = &mut *subject.scratch;
    // SAFETY: map values are valid while the program runs; entries are replaced whole.
    let exact = unsafe { EXACT_PATHS.get(&scratch.key.data) };
    scratch.key.prefix_len = (subject.len * 8) as u32;
    let prefix = PREFIX_PATHS.get(&scratch.key);
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

    let excepted =
        except_mask(exact) | except_mask(prefix) | except_mask(name) | except_mask(inode);
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
    inode.and_then(|r| judge(r, excepted, state, ops))
}

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
