//! Looks a path or an address up in the rule maps and decides whether a rule in force for
//! the session denies the operation. Exceptions (`except:`) are entries flagged
//! `REF_EXCEPT`; they cancel their own rule only, whichever map they came from.

use carapace_common::{op, InodeKey, NetRefs, RuleRefs, SessionState, REFS_PER_KEY, REF_EXCEPT};

use crate::maps::{Scratch, EXACT_PATHS, INODES, NAMES, NETS, PREFIX_PATHS, RULES};

/// A denial: the rule and the one operation bit it denied.
#[derive(Clone, Copy)]
pub struct Verdict {
    pub rule: u32,
    pub op: u32,
}

/// Exceptions collected from every lookup before any rule is judged.
struct Exceptions {
    rules: [u32; REFS_PER_KEY],
    count: usize,
}

impl Exceptions {
    #[inline(always)]
    fn add_from(&mut self, refs: Option<&RuleRefs>) {
        let Some(refs) = refs else { return };
        for i in 0..REFS_PER_KEY {
            if i >= refs.count as usize {
                break;
            }
            let r = refs.refs[i];
            if r.flags & REF_EXCEPT != 0 && self.count < REFS_PER_KEY {
                self.rules[self.count] = r.rule;
                self.count += 1;
            }
        }
    }

    #[inline(always)]
    fn contains(&self, rule: u32) -> bool {
        for i in 0..REFS_PER_KEY {
            if i >= self.count {
                break;
            }
            if self.rules[i] == rule {
                return true;
            }
        }
        false
    }
}

/// The first rule in `refs` that is in force, covers `ops` and has no matching exception.
#[inline(always)]
fn judge(
    refs: Option<&RuleRefs>,
    exceptions: &Exceptions,
    state: &SessionState,
    ops: u32,
) -> Option<Verdict> {
    let refs = refs?;
    for i in 0..REFS_PER_KEY {
        if i >= refs.count as usize {
            break;
        }
        let r = refs.refs[i];
        if r.flags & REF_EXCEPT != 0 {
            continue;
        }
        let Some(meta) = RULES.get(r.rule) else {
            continue;
        };
        let hit = meta.ops & ops;
        if hit != 0 && state.is_active(r.rule, meta) && !exceptions.contains(r.rule) {
            return Some(Verdict {
                rule: r.rule,
                op: lowest_bit(hit),
            });
        }
    }
    None
}

#[inline(always)]
fn lowest_bit(bits: u32) -> u32 {
    bits & bits.wrapping_neg()
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

    let mut exceptions = Exceptions {
        rules: [0; REFS_PER_KEY],
        count: 0,
    };
    exceptions.add_from(exact);
    exceptions.add_from(prefix);
    exceptions.add_from(name);
    exceptions.add_from(inode);

    judge(exact, &exceptions, state, ops)
        .or_else(|| judge(prefix, &exceptions, state, ops))
        .or_else(|| judge(name, &exceptions, state, ops))
        .or_else(|| judge(inode, &exceptions, state, ops))
}

/// Judges a connect to `addr` (IPv4-mapped for IPv4) and `port` (host order).
#[inline(always)]
pub fn check_net(addr: [u8; 16], port: u16, state: &SessionState) -> Option<Verdict> {
    let key = aya_ebpf::maps::lpm_trie::Key::new(128, addr);
    let refs: &NetRefs = NETS.get(&key)?;
    for i in 0..REFS_PER_KEY {
        if i >= refs.count as usize {
            break;
        }
        let r = refs.refs[i];
        if r.flags & REF_EXCEPT != 0 || (r.port != 0 && r.port != port) {
            continue;
        }
        let Some(meta) = RULES.get(r.rule) else {
            continue;
        };
        if meta.ops & op::NETWORK != 0
            && state.is_active(r.rule, meta)
            && !excepted(refs, r.rule, port)
        {
            return Some(Verdict {
                rule: r.rule,
                op: op::NETWORK,
            });
        }
    }
    None
}

/// Whether an exception entry of `rule` covers `port`.
#[inline(always)]
fn excepted(refs: &NetRefs, rule: u32, port: u16) -> bool {
    for i in 0..REFS_PER_KEY {
        if i >= refs.count as usize {
            break;
        }
        let r = refs.refs[i];
        if r.flags & REF_EXCEPT != 0 && r.rule == rule && (r.port == 0 || r.port == port) {
            return true;
        }
    }
    false
}
