//! The kernel image of a rule set: every BPF map's intended contents, built by the rule
//! compiler (`rules::compile`) and written into the maps by `kernel::maps`. Plain data, so
//! the compiler can be tested without a kernel and the map sync can diff two images.

use std::collections::{BTreeMap, BTreeSet};

use carapace_common::{
    Config, NetRef, RuleMeta, RuleRef, MAX_EXCEPT_SLOTS, MAX_RULES, REFS_PER_KEY, REF_EXCEPT,
};

use crate::rules::compile::dfa::{self, PathAutomaton, Source};

/// Every BPF map's intended contents for one rule set, as plain data: the daemon writes it
/// into the maps, and `rules explain` reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelImage {
    /// Indexed by kernel rule index.
    pub rules: Vec<RuleMeta>,
    /// Exact paths (no NUL) → rules and exceptions.
    pub exact: BTreeMap<Vec<u8>, Vec<RuleRef>>,
    /// Path prefixes (no NUL). Each entry already holds the refs of every shorter prefix
    /// that is a prefix of it, because an LPM lookup returns only the longest match.
    pub prefix: BTreeMap<Vec<u8>, Vec<RuleRef>>,
    /// Basenames (no NUL).
    pub names: BTreeMap<Vec<u8>, Vec<RuleRef>>,
    /// (kernel dev, inode) of existing files that exact rules protect.
    pub inodes: BTreeMap<(u64, u64), Vec<RuleRef>>,
    /// Directories above protected paths (no trailing `/`) → some of the rules below them
    /// (at most `REFS_PER_KEY`, always-on rules first: one rule in force is enough to refuse
    /// moving another directory there).
    pub ancestors: BTreeMap<Vec<u8>, Vec<RuleRef>>,
    /// (prefix length in bits over the IPv4-mapped address, address) → refs. Like
    /// `prefix`, each entry holds the refs of every covering shorter prefix.
    pub nets: BTreeMap<(u32, [u8; 16]), Vec<NetRef>>,
    /// Patterns of the path automaton and the ref a match of each yields.
    pub automaton: Vec<(Source, RuleRef)>,
    /// The automata of `automaton` (none when it is empty).
    pub dfa: Vec<PathAutomaton>,
    /// The programs' global settings (the `CONFIG` map's one entry).
    pub config: Config,
    /// The literal paths of the rules, and what they resolved to when this was built.
    pub resolution: Resolution,
    /// Keys of `exact` that are links on the way to protected paths (not paths a rule names):
    /// their refs are capped like ancestors'.
    pub link_keys: BTreeSet<Vec<u8>>,
}

/// The literal paths (exact and `/dir/**`) of a rule set's kernel image and a digest of what
/// they resolved to when it was built — the links on their way and the other names bind
/// mounts give them — so that the daemon can tell when one now leads elsewhere (a protected
/// directory replaced by a link after the rules loaded, a new bind mount) and rebuild.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolution {
    /// The literal paths, as the kernel maps hold them.
    pub forms: Vec<crate::rules::pattern::KernelForm>,
    /// What they resolved to (links and bind-mount names), hashed.
    pub digest: u64,
}

impl Resolution {
    /// Whether the paths resolve differently now (reads `host`'s file system and mount
    /// table).
    #[must_use]
    pub fn moved(&self, host: &dyn crate::host::Host) -> bool {
        let mounts = crate::rules::compile::resolution::Mounts::read(host);
        crate::rules::compile::resolution::digest(&self.forms, &mounts, host) != self.digest
    }
}

/// Exception slot (1-based) of every kernel rule that has an exception, by rule index. The
/// programs gather the slots of the exceptions they find into one mask (see
/// `carapace_common::REF_SLOT_SHIFT`).
pub type Slots = BTreeMap<u32, u32>;

/// More kernel rules have exceptions than the programs have slots for.
#[derive(Debug, thiserror::Error)]
#[error("{rules} kernel rules have exceptions; the kernel limit is {MAX_EXCEPT_SLOTS}")]
pub struct TooManyExceptions {
    /// Rules with exceptions, counting those whose slots were already taken.
    pub rules: usize,
}

/// Gives every rule of `image` that has an exception the lowest slot not in `taken`.
pub fn except_slots(
    image: &KernelImage,
    taken: &BTreeSet<u32>,
) -> Result<Slots, TooManyExceptions> {
    except_slots_of(image, taken, |_| true)
}

/// [`except_slots`] for the rules `wanted` picks.
fn except_slots_of(
    image: &KernelImage,
    taken: &BTreeSet<u32>,
    wanted: impl Fn(u32) -> bool,
) -> Result<Slots, TooManyExceptions> {
    let path_refs = image
        .exact
        .values()
        .chain(image.prefix.values())
        .chain(image.names.values())
        .chain(image.inodes.values())
        .flatten()
        .chain(image.automaton.iter().map(|(_, r)| r))
        .filter(|r| r.flags & REF_EXCEPT != 0)
        .map(|r| r.rule);
    let net_refs = image
        .nets
        .values()
        .flatten()
        .filter(|r| r.flags & REF_EXCEPT != 0)
        .map(|r| r.rule);
    let rules: BTreeSet<u32> = path_refs.chain(net_refs).filter(|&r| wanted(r)).collect();
    let free = (1..=MAX_EXCEPT_SLOTS as u32).filter(|s| !taken.contains(s));
    if rules.len() > free.clone().count() {
        return Err(TooManyExceptions {
            rules: rules.len() + taken.len(),
        });
    }
    Ok(rules.into_iter().zip(free).collect())
}

/// One place a rule's ref sits in an image, as far as what it matches goes.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Exact(Vec<u8>, u32),
    Prefix(Vec<u8>, u32),
    Name(Vec<u8>, u32),
    Inode(u64, u64, u32),
    Net(u32, [u8; 16], u16, u32),
    Automaton(String, u32),
}

/// Where each rule of `image` sits: its entries, without the refs that closing the prefix
/// and address tables copied onto longer keys (another image's keys would change those),
/// nor the capped ancestor and link entries (they only keep directories in place).
fn places(image: &KernelImage) -> BTreeMap<u32, BTreeSet<Place>> {
    let mut out: BTreeMap<u32, BTreeSet<Place>> = BTreeMap::new();
    let mut put = |rule: u32, place: Place| {
        out.entry(rule).or_default().insert(place);
    };
    for (key, refs) in image
        .exact
        .iter()
        .filter(|(k, _)| !image.link_keys.contains(*k))
    {
        for r in refs {
            put(r.rule, Place::Exact(key.clone(), r.flags));
        }
    }
    for (key, refs) in &image.prefix {
        let covered = |r: &RuleRef| {
            key.iter().enumerate().any(|(i, b)| {
                *b == b'/'
                    && i + 1 < key.len()
                    && image.prefix.get(&key[..=i]).is_some_and(|s| s.contains(r))
            })
        };
        for r in refs.iter().filter(|r| !covered(r)) {
            put(r.rule, Place::Prefix(key.clone(), r.flags));
        }
    }
    for (key, refs) in &image.names {
        for r in refs {
            put(r.rule, Place::Name(key.clone(), r.flags));
        }
    }
    for (&(dev, ino), refs) in &image.inodes {
        for r in refs {
            put(r.rule, Place::Inode(dev, ino, r.flags));
        }
    }
    for (&(len, addr), refs) in &image.nets {
        let covered = |r: &NetRef| {
            (0..len).any(|shorter| {
                let c = crate::rules::model::Cidr::new(addr, shorter);
                image
                    .nets
                    .get(&(c.prefix_len, c.addr))
                    .is_some_and(|s| s.contains(r))
            })
        };
        for r in refs.iter().filter(|r| !covered(r)) {
            put(r.rule, Place::Net(len, addr, r.port, r.flags));
        }
    }
    for (source, r) in &image.automaton {
        put(r.rule, Place::Automaton(format!("{source:?}"), r.flags));
    }
    out
}

/// Indices at which `old` and `new` hold the same rule: the same metadata and the same
/// entries. A swap keeps such a rule where it is instead of staging a copy of it: its refs
/// are the same in both images, so no key needs room for two.
fn same_rules(old: &KernelImage, new: &KernelImage) -> BTreeSet<u32> {
    let (old_places, new_places) = (places(old), places(new));
    old.rules
        .iter()
        .zip(&new.rules)
        .enumerate()
        .filter(|(_, (a, b))| a == b)
        .map(|(i, _)| i as u32)
        .filter(|i| old_places.get(i) == new_places.get(i))
        .collect()
}

/// The intermediate state of a swap from one image to the next (see
/// `KernelMaps::replace_image`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staging {
    /// The old rules at their indices plus the new ones moved above both rule tables (but
    /// for those both images hold alike, which stay where they are); every key holds the
    /// refs of both.
    pub image: KernelImage,
    /// The exception slots of `image`'s rules.
    pub slots: Slots,
    /// Slots of the new image at its own indices: the ones its rules hold in `image`, none
    /// of them an old rule's.
    pub new_slots: Slots,
}

/// The union of `old` (written with `old_slots`) and `new`, or `None` when it does not fit
/// the maps (rule table, refs per key, exception slots).
#[must_use]
pub fn staging(old: &KernelImage, old_slots: &Slots, new: &KernelImage) -> Option<Staging> {
    let same = same_rules(old, new);
    let offset = old.rules.len().max(new.rules.len());
    if offset + new.rules.len() > MAX_RULES {
        return None;
    }
    let off = offset as u32;
    let to = |rule: u32| {
        if same.contains(&rule) {
            rule
        } else {
            rule + off
        }
    };
    // A rule both images hold keeps its slot; the others take slots no old rule holds.
    let taken: BTreeSet<u32> = old_slots.values().copied().collect();
    let moved_slots = except_slots_of(new, &taken, |r| !same.contains(&r)).ok()?;
    let mut new_slots: Slots = old_slots
        .iter()
        .filter(|(rule, _)| same.contains(rule))
        .map(|(rule, slot)| (*rule, *slot))
        .collect();
    new_slots.extend(moved_slots.iter().map(|(r, s)| (*r, *s)));
    let mut slots = old_slots.clone();
    slots.extend(moved_slots.iter().map(|(rule, slot)| (rule + off, *slot)));

    let mut image = old.clone();
    image.rules.resize(offset, RuleMeta::default());
    image.rules.extend_from_slice(&new.rules);
    let moved = |r: &RuleRef| RuleRef {
        rule: to(r.rule),
        flags: r.flags,
    };
    merge(&mut image.exact, &new.exact, moved);
    merge(&mut image.prefix, &new.prefix, moved);
    merge(&mut image.names, &new.names, moved);
    merge(&mut image.inodes, &new.inodes, moved);
    merge(&mut image.ancestors, &new.ancestors, moved);
    cap_ancestors(&mut image, |rule| rule);
    merge(&mut image.nets, &new.nets, |r: &NetRef| NetRef {
        rule: to(r.rule),
        ..*r
    });
    for (source, r) in &new.automaton {
        let r = moved(r);
        if !image.automaton.iter().any(|(s, x)| s == source && *x == r) {
            image.automaton.push((source.clone(), r));
        }
    }
    // One automaton for both sets; when the union is too large the swap cannot be staged.
    image.dfa = dfa::build(&image.automaton).ok()?;
    image.config.path_rule_ops |= new.config.path_rule_ops;
    image.config.net_rule_ops |= new.config.net_rule_ops;
    for (slot, new_rule) in [
        (&mut image.config.chroot_rule, new.config.chroot_rule),
        (&mut image.config.userns_rule, new.config.userns_rule),
    ] {
        if *slot == 0 && new_rule != 0 {
            *slot = to(new_rule);
        }
    }
    // A longer prefix must carry the refs of the shorter ones of the other image too.
    image.close_prefixes();
    image.close_nets();
    let fits = image
        .exact
        .values()
        .chain(image.prefix.values())
        .chain(image.names.values())
        .chain(image.inodes.values())
        .all(|refs| refs.len() <= REFS_PER_KEY)
        && image.nets.values().all(|refs| refs.len() <= REFS_PER_KEY);
    fits.then_some(Staging {
        image,
        slots,
        new_slots,
    })
}

/// Keeps at most `REFS_PER_KEY` refs per ancestor directory and per link on the way to
/// protected paths: always-on rules first, those refusing writes or deletes next, then in
/// the order `rank` gives rule indices (the compiler ranks by rule id, so that the order
/// of the rules never changes the image).
pub(crate) fn cap_ancestors<K: Ord>(image: &mut KernelImage, rank: impl Fn(u32) -> K) {
    let rules = &image.rules;
    let always_on = |r: &RuleRef| {
        rules
            .get(r.rule as usize)
            .is_some_and(|m| m.flags & carapace_common::RULE_ALWAYS_ON != 0)
    };
    let links = image
        .exact
        .iter_mut()
        .filter(|(key, _)| image.link_keys.contains(*key))
        .map(|(_, refs)| refs);
    // A rule that refuses writes or deletes keeps a directory or link in place.
    let keeps = |r: &RuleRef| {
        rules.get(r.rule as usize).is_some_and(|m| {
            m.ops & (carapace_common::op::WRITE | carapace_common::op::DELETE) != 0
        })
    };
    for refs in image.ancestors.values_mut().chain(links) {
        refs.sort_by_cached_key(|r| (!always_on(r), !keeps(r), rank(r.rule)));
        refs.truncate(REFS_PER_KEY);
    }
}

fn merge<K: Ord + Clone, R: PartialEq>(
    into: &mut BTreeMap<K, Vec<R>>,
    from: &BTreeMap<K, Vec<R>>,
    moved: impl Fn(&R) -> R,
) {
    for (key, refs) in from {
        let entry = into.entry(key.clone()).or_default();
        for r in refs.iter().map(&moved) {
            if !entry.contains(&r) {
                entry.push(r);
            }
        }
    }
}

impl KernelImage {
    /// An LPM lookup returns only the longest matching prefix, so each prefix carries the refs
    /// of every shorter prefix entry above it. Prefix keys end in `/`, so the covering keys are
    /// the key cut after each of its `/`.
    pub(crate) fn close_prefixes(&mut self) {
        let snapshot = self.prefix.clone();
        for (key, refs) in &mut self.prefix {
            for (i, b) in key.iter().enumerate() {
                if *b == b'/' && i + 1 < key.len() {
                    if let Some(shorter) = snapshot.get(&key[..=i]) {
                        for r in shorter {
                            if !refs.contains(r) {
                                refs.push(*r);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Like [`Self::close_prefixes`], for address blocks.
    pub(crate) fn close_nets(&mut self) {
        let snapshot = self.nets.clone();
        for ((len, addr), refs) in &mut self.nets {
            // Every block covering this one is this address cut to a shorter length.
            for shorter_len in 0..*len {
                let shorter = crate::rules::model::Cidr::new(*addr, shorter_len);
                if let Some(srefs) = snapshot.get(&(shorter.prefix_len, shorter.addr)) {
                    for r in srefs {
                        if !refs.contains(r) {
                            refs.push(*r);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use carapace_common::op;

    use super::*;

    fn rref(rule: u32, flags: u32) -> RuleRef {
        RuleRef { rule, flags }
    }

    fn image(rules: &[u32], prefix: &[(&str, RuleRef)], names: &[(&str, RuleRef)]) -> KernelImage {
        let mut img = KernelImage {
            rules: rules
                .iter()
                .map(|ops| RuleMeta {
                    ops: *ops,
                    flags: 0,
                })
                .collect(),
            ..KernelImage::default()
        };
        for (k, r) in prefix {
            img.prefix
                .entry(k.as_bytes().to_vec())
                .or_default()
                .push(*r);
        }
        for (k, r) in names {
            img.names.entry(k.as_bytes().to_vec()).or_default().push(*r);
        }
        img
    }

    #[test]
    fn staging_holds_both_rule_sets_with_disjoint_slots() {
        let old = image(
            &[op::READ],
            &[("/a/", rref(0, 0))],
            &[("keep", rref(0, REF_EXCEPT))],
        );
        let old_slots = except_slots(&old, &BTreeSet::new()).unwrap();
        assert_eq!(old_slots, Slots::from([(0, 1)]));
        let new = image(
            &[op::WRITE, op::ALL],
            &[("/a/b/", rref(0, 0))],
            &[("x", rref(1, 0)), ("ok", rref(1, REF_EXCEPT))],
        );
        let s = staging(&old, &old_slots, &new).unwrap();
        // New rules sit above both tables: offset max(1, 2) = 2.
        assert_eq!(s.image.rules.len(), 4);
        assert_eq!(s.image.rules[0].ops, op::READ);
        assert_eq!(s.image.rules[1], RuleMeta::default());
        assert_eq!(&s.image.rules[2..], &new.rules[..]);
        assert_eq!(s.image.prefix[&b"/a/".to_vec()], [rref(0, 0)]);
        // The longer new prefix also carries the old shorter one (LPM returns one entry).
        let longer = &s.image.prefix[&b"/a/b/".to_vec()];
        assert!(longer.contains(&rref(2, 0)) && longer.contains(&rref(0, 0)));
        assert_eq!(s.image.names[&b"x".to_vec()], [rref(3, 0)]);
        assert_eq!(s.image.names[&b"keep".to_vec()], [rref(0, REF_EXCEPT)]);
        // New exception slots avoid the old ones and are the same at both indices.
        assert_eq!(s.new_slots, Slots::from([(1, 2)]));
        assert_eq!(s.slots, Slots::from([(0, 1), (3, 2)]));
        assert_eq!(s.image.config.path_rule_ops, 0);
    }

    /// A rule at the same index with the same metadata and entries in both images is one
    /// rule: staged once, at its place, with its slot. A rule that differs in anything, an
    /// exception included, is staged as a copy above both tables.
    #[test]
    fn a_rule_both_images_hold_alike_stays_in_place() {
        let old = image(
            &[op::READ, op::WRITE],
            &[("/a/", rref(0, 0)), ("/b/", rref(1, 0))],
            &[("keep", rref(0, REF_EXCEPT)), ("old", rref(1, REF_EXCEPT))],
        );
        let old_slots = except_slots(&old, &BTreeSet::new()).unwrap();
        assert_eq!(old_slots, Slots::from([(0, 1), (1, 2)]));
        let new = image(
            &[op::READ, op::WRITE, op::EXEC],
            &[
                ("/a/", rref(0, 0)),
                ("/b/", rref(1, 0)),
                ("/a/c/", rref(2, 0)),
            ],
            &[
                ("keep", rref(0, REF_EXCEPT)),
                ("new", rref(1, REF_EXCEPT)),
                ("c", rref(2, REF_EXCEPT)),
            ],
        );
        assert_eq!(same_rules(&old, &new), BTreeSet::from([0]));
        let s = staging(&old, &old_slots, &new).unwrap();
        // Rule 0 once, where it is (the longer new prefix carries it as before); rule 1
        // differs in its exception, so its new form is a copy at 3 + 1.
        assert_eq!(s.image.prefix[&b"/a/".to_vec()], [rref(0, 0)]);
        let longer = &s.image.prefix[&b"/a/c/".to_vec()];
        assert!(
            longer.contains(&rref(0, 0)) && longer.contains(&rref(5, 0)),
            "{longer:?}"
        );
        assert_eq!(s.image.prefix[&b"/b/".to_vec()], [rref(1, 0), rref(4, 0)]);
        assert_eq!(s.image.names[&b"keep".to_vec()], [rref(0, REF_EXCEPT)]);
        assert_eq!(s.image.names[&b"new".to_vec()], [rref(4, REF_EXCEPT)]);
        // Rule 0 keeps slot 1 at its one index; the changed and added rules take slots no
        // old rule holds, the same at both their indices.
        assert_eq!(s.new_slots, Slots::from([(0, 1), (1, 3), (2, 4)]));
        assert_eq!(s.slots, Slots::from([(0, 1), (1, 2), (4, 3), (5, 4)]));
    }

    #[test]
    fn staging_refuses_what_does_not_fit() {
        let full = KernelImage {
            rules: vec![RuleMeta::default(); MAX_RULES / 2 + 1],
            ..KernelImage::default()
        };
        assert!(staging(&full, &Slots::new(), &full).is_none());
        let crowded: Vec<(&str, RuleRef)> = (0..REFS_PER_KEY as u32)
            .map(|i| ("k", rref(i, 0)))
            .collect();
        let old = image(&[op::READ; REFS_PER_KEY], &[], &crowded);
        let new = image(&[op::WRITE], &[], &[("k", rref(0, 0))]);
        assert!(staging(&old, &Slots::new(), &new).is_none());
        let taken: BTreeSet<u32> = (1..=MAX_EXCEPT_SLOTS as u32).collect();
        let one = image(&[op::READ], &[], &[("e", rref(0, REF_EXCEPT))]);
        assert!(except_slots(&one, &taken).is_err());
    }
}
