//! Where a rule becomes a BPF map entry: writes a [`KernelImage`] into the programs' maps
//! (adding and overwriting what the image has, then removing what it no longer has) and
//! keeps the per-session rule state.
//!
//! Replacing a rule set ([`KernelMaps::replace_image`]) goes through an intermediate image so
//! that at every moment the old or the new rules apply (usually both): a rule index means a
//! different rule in the next set, and the maps cannot be rewritten at once.

use std::collections::{BTreeMap, BTreeSet};

use aya::maps::MapError;
use aya::maps::{
    lpm_trie::{Key, LpmTrie},
    Array, HashMap, Map, MapData,
};
use carapace_common::{
    cache_gen, has, maps as names, op, slot_bit, ApprovedAddr, ApprovedOps, Config, DfaEarly,
    DfaHeader, InodeKey, NetRef, NetRefs, RuleMeta, RuleRef, RuleRefs, SessionState, DFA_CELLS,
    DFA_CHUNK, DFA_EARLY_FLAG, DFA_GROUPS, DFA_STATES, NAME_MAX, PATH_MAX, REFS_PER_KEY,
    REF_EXCEPT, REF_SLOT_SHIFT, SESSION_RECORD,
};

use carapace_policy::rules::compile::dfa::PathAutomaton;

use carapace_policy::image::{self, KernelImage, Slots};

use super::map_error::MapsError;

pub struct KernelMaps {
    sessions: HashMap<MapData, u64, SessionState>,
    default_session: Array<MapData, SessionState>,
    rules: Array<MapData, RuleMeta>,
    config: Array<MapData, Config>,
    exact: HashMap<MapData, [u8; PATH_MAX], RuleRefs>,
    prefix: LpmTrie<MapData, [u8; PATH_MAX], RuleRefs>,
    names: HashMap<MapData, [u8; NAME_MAX], RuleRefs>,
    inodes: HashMap<MapData, InodeKey, RuleRefs>,
    ancestors: HashMap<MapData, [u8; PATH_MAX], RuleRefs>,
    nets: LpmTrie<MapData, [u8; 16], NetRefs>,
    dfa: Array<MapData, DfaHeader>,
    dfa_trans: Array<MapData, [u32; DFA_CHUNK]>,
    dfa_accept: Array<MapData, RuleRefs>,
    dfa_live: Array<MapData, RuleRefs>,
    dfa_early: Array<MapData, DfaEarly>,
    dfa_early_refs: Array<MapData, RuleRefs>,
    /// Generations of the programs' path cache; the daemon owns `cache_gen::RULES`.
    cache_gen: Array<MapData, u64>,
    /// Operations humans approved per path and session: exceptions to approve-mode rules.
    approved: HashMap<MapData, [u8; PATH_MAX], ApprovedOps>,
    /// Connects humans approved per session, address and port: exceptions to approve-mode
    /// address rules.
    approved_addrs: HashMap<MapData, ApprovedAddr, u32>,
    /// Files whose opens the daemon's fanotify listener holds (`RULE_HOLD`).
    held: HashMap<MapData, InodeKey, u32>,
    /// `Config::dfa` as last written: which half of the automaton maps is in force.
    dfa_in_force: u32,
    /// Rule indices written by the last image, to clear the ones a new image drops.
    rule_count: u32,
    /// The image last written and its exception slots, to stage the next swap from.
    current: KernelImage,
    slots: Slots,
}

/// Takes map `name` out of the loaded ones.
pub(super) fn take(maps: &mut Vec<(String, Map)>, name: &'static str) -> Result<Map, MapsError> {
    let at = maps
        .iter()
        .position(|(n, _)| n == name)
        .ok_or(MapsError::Missing(name))?;
    Ok(maps.swap_remove(at).1)
}

/// Takes map `name` out of the loaded ones, as the kind `T` the daemon reads it as.
pub(super) fn take_as<T: TryFrom<Map, Error = MapError>>(
    maps: &mut Vec<(String, Map)>,
    name: &'static str,
) -> Result<T, MapsError> {
    take(maps, name)?
        .try_into()
        .map_err(|source| MapsError::WrongType { name, source })
}

impl KernelMaps {
    pub fn new(mut maps: Vec<(String, Map)>) -> Result<Self, MapsError> {
        let maps = &mut maps;
        let config: Array<MapData, Config> = take_as(maps, names::CONFIG)?;
        // A previous daemon's automata may be in force (pinned maps): write the other half.
        let dfa_in_force = config.get(&0, 0).map_or(0, |c| c.dfa);
        Ok(Self {
            sessions: take_as(maps, names::SESSIONS)?,
            default_session: take_as(maps, names::DEFAULT_SESSION)?,
            rules: take_as(maps, names::RULES)?,
            config,
            exact: take_as(maps, names::EXACT_PATHS)?,
            prefix: take_as(maps, names::PREFIX_PATHS)?,
            names: take_as(maps, names::NAMES)?,
            inodes: take_as(maps, names::INODES)?,
            ancestors: take_as(maps, names::ANCESTORS)?,
            nets: take_as(maps, names::NETS)?,
            dfa: take_as(maps, names::DFA)?,
            dfa_trans: take_as(maps, names::DFA_TRANS)?,
            dfa_accept: take_as(maps, names::DFA_ACCEPT)?,
            dfa_live: take_as(maps, names::DFA_LIVE)?,
            dfa_early: take_as(maps, names::DFA_EARLY)?,
            dfa_early_refs: take_as(maps, names::DFA_EARLY_REFS)?,
            cache_gen: take_as(maps, names::PATH_CACHE_GEN)?,
            approved: take_as(maps, names::APPROVED_PATHS)?,
            approved_addrs: take_as(maps, names::APPROVED_ADDRS)?,
            held: take_as(maps, names::HELD_INODES)?,
            dfa_in_force,
            rule_count: 0,
            current: KernelImage::default(),
            slots: Slots::new(),
        })
    }

    /// Sessions a previous daemon left in the pinned map.
    pub fn sessions(&self) -> Result<Vec<(u64, u32)>, MapsError> {
        self.sessions
            .iter()
            .map(|entry| {
                entry
                    .map(|(cgroup, state)| (cgroup, state.session))
                    .map_err(MapsError::on(names::SESSIONS))
            })
            .collect()
    }

    /// Tags a session's cgroup with its number and `SESSION_*` `flags` (idempotent: a tag
    /// already there with both keeps its rule bits).
    pub fn add_session(&mut self, cgroup: u64, session: u32, flags: u32) -> Result<(), MapsError> {
        if let Ok(existing) = self.sessions.get(&cgroup, 0) {
            if existing.session == session && existing.flags == flags {
                return Ok(());
            }
        }
        let mut state = SessionState::new(session);
        state.flags = flags;
        self.sessions
            .insert(cgroup, state, 0)
            .map_err(|source| MapsError::Session {
                action: "tag",
                cgroup,
                source,
            })?;
        self.sync_recording()
    }

    /// Whether a tagged session records (`SESSION_RECORD`).
    fn any_recording(&self) -> bool {
        self.sessions
            .iter()
            .filter_map(Result::ok)
            .any(|(_, state)| state.flags & SESSION_RECORD != 0)
    }

    /// Sets `has::RECORDING` in the programs' config while a tagged session records, and
    /// clears it after the last: sessions that do not record then pay one bit test.
    fn sync_recording(&mut self) -> Result<(), MapsError> {
        let mut config = self
            .config
            .get(&0, 0)
            .map_err(MapsError::on(names::CONFIG))?;
        let has = if self.any_recording() {
            config.has | has::RECORDING
        } else {
            config.has & !has::RECORDING
        };
        if has == config.has {
            return Ok(());
        }
        config.has = has;
        self.config
            .set(0, config, 0)
            .map_err(MapsError::on(names::CONFIG))
    }

    /// Rewrites a tagged session's rule bits: `activated` triggered rules on, `disabled`
    /// rules off (kernel rule indices). One map update, so the programs see the old or the
    /// new state, never a mix.
    pub fn set_session_rules(
        &mut self,
        cgroup: u64,
        activated: &[u32],
        disabled: &[u32],
    ) -> Result<(), MapsError> {
        let mut state = self
            .sessions
            .get(&cgroup, 0)
            .map_err(|source| MapsError::NotTagged { cgroup, source })?;
        state.activated = [0; carapace_common::RULE_WORDS];
        state.disabled = [0; carapace_common::RULE_WORDS];
        for &rule in activated {
            SessionState::set_bit(&mut state.activated, rule, true);
        }
        for &rule in disabled {
            SessionState::set_bit(&mut state.disabled, rule, true);
        }
        self.sessions
            .insert(cgroup, state, 0)
            .map_err(|source| MapsError::Session {
                action: "update the rules of",
                cgroup,
                source,
            })
    }

    /// Untags a session and forgets what humans approved for it: a cgroup id is not
    /// reused while the system runs, but the map's slots are few.
    pub fn remove_session(&mut self, cgroup: u64) -> Result<(), MapsError> {
        if let Err(e) = self.forget_approvals(cgroup) {
            tracing::warn!("cannot remove the approvals of session cgroup {cgroup}: {e}");
        }
        match self.sessions.remove(&cgroup) {
            Ok(()) | Err(MapError::KeyNotFound) => {}
            Err(source) => {
                return Err(MapsError::Session {
                    action: "untag",
                    cgroup,
                    source,
                })
            }
        }
        self.sync_recording()
    }

    /// Lets `ops` (`op::*`) on `path`, while it names the file `inode` (zero: any file),
    /// through the approve-mode rules for the session of `cgroup`, as a human approved.
    /// Fails (nothing written) when the path is too long for a key or other sessions fill
    /// its slots: the operation then stays refused.
    pub fn approve_path(
        &mut self,
        cgroup: u64,
        path: &[u8],
        ops: u32,
        inode: InodeKey,
    ) -> Result<(), MapsError> {
        let key = path_key(path)?;
        let mut approved = match self.approved.get(&key, 0) {
            Ok(a) => a,
            Err(MapError::KeyNotFound) => ApprovedOps::default(),
            Err(e) => return Err(MapsError::on(names::APPROVED_PATHS)(e)),
        };
        if !approved.add(cgroup, ops, inode) {
            return Err(MapsError::ApprovalsFull {
                slots: carapace_common::APPROVALS_PER_PATH,
                path: String::from_utf8_lossy(path).into_owned(),
            });
        }
        self.approved
            .insert(key, approved, 0)
            .map_err(MapsError::on(names::APPROVED_PATHS))
    }

    /// Lets a connect to `addr` (IPv4-mapped for IPv4, as the programs see it) and `port`
    /// through the approve-mode address rules for the session of `cgroup`, as a human
    /// approved.
    pub fn approve_addr(
        &mut self,
        cgroup: u64,
        addr: [u8; 16],
        port: u16,
    ) -> Result<(), MapsError> {
        let key = ApprovedAddr {
            cgroup,
            addr,
            port,
            pad: [0; 6],
        };
        self.approved_addrs
            .insert(key, op::NETWORK, 0)
            .map_err(MapsError::on(names::APPROVED_ADDRS))
    }

    /// Makes `files` the files whose opens fanotify holds, in place of those before: the
    /// hold rules let opens of these through to the listener. Stale entries go first, so
    /// that a failure part way leaves fewer files held (refused instead), never more.
    pub fn set_held(&mut self, files: &[InodeKey]) -> Result<(), MapsError> {
        let stale: Vec<InodeKey> = self
            .held
            .keys()
            .filter_map(Result::ok)
            .filter(|k| !files.contains(k))
            .collect();
        for k in stale {
            match self.held.remove(&k) {
                Ok(()) | Err(MapError::KeyNotFound) => {}
                Err(e) => return Err(MapsError::on(names::HELD_INODES)(e)),
            }
        }
        for k in files {
            self.held
                .insert(*k, 1, 0)
                .map_err(MapsError::on(names::HELD_INODES))?;
        }
        Ok(())
    }

    /// Removes the approvals of the session of `cgroup`.
    fn forget_approvals(&mut self, cgroup: u64) -> Result<(), MapsError> {
        let addrs = self
            .approved_addrs
            .keys()
            .collect::<Result<Vec<_>, _>>()
            .map_err(MapsError::on(names::APPROVED_ADDRS))?;
        for key in addrs.into_iter().filter(|k| k.cgroup == cgroup) {
            match self.approved_addrs.remove(&key) {
                Ok(()) | Err(MapError::KeyNotFound) => {}
                Err(e) => return Err(MapsError::on(names::APPROVED_ADDRS)(e)),
            }
        }
        let entries = self
            .approved
            .iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(MapsError::on(names::APPROVED_PATHS))?;
        for (key, mut approved) in entries {
            if !approved.cgroups.contains(&cgroup) {
                continue;
            }
            if approved.remove(cgroup) {
                self.approved.insert(key, approved, 0)
            } else {
                self.approved.remove(&key)
            }
            .map_err(MapsError::on(names::APPROVED_PATHS))?;
        }
        Ok(())
    }

    /// Writes `image` over whatever the maps hold (at start: nothing, or the pins of a
    /// previous daemon).
    pub fn write_image(&mut self, image: &KernelImage) -> Result<(), MapsError> {
        let slots = image::except_slots(image, &BTreeSet::new())?;
        self.write_with_slots(image, &slots)
    }

    /// Replaces the rules in the maps with `new` such that no operation passes that both the
    /// old and the new rules deny, in two full writes:
    ///
    /// 1. the staging image: the old rules at their indices, the new ones above both rule
    ///    tables (but for rules both hold alike, same metadata and entries at the same
    ///    index, which stay where they are: a profile load keeps the main rules, a reload
    ///    most), every key holding both sets of refs. Metadata of the new indices is written
    ///    first and keys only ever gain refs, so the old rules apply throughout and the new
    ///    ones from the moment their key is written.
    /// 2. the new image at its own indices. Every key holds either its staging refs (the new
    ///    rules at the upper indices, whose metadata is untouched until the end) or its final
    ///    refs, so the new rules apply throughout. New rules keep the exception slots they had
    ///    in the staging image, none of them an old rule's, so an exception of one set never
    ///    lifts a rule of the other. Old refs still present may point at a new rule's metadata
    ///    for a moment: that can only deny more, never less than the new rules.
    ///
    /// When the staging image does not fit the maps (rule table, refs per key, exception
    /// slots), `new` is written directly and the log says that the swap was not atomic.
    pub fn replace_image(&mut self, new: &KernelImage) -> Result<(), MapsError> {
        let Some(staged) = image::staging(&self.current, &self.slots, new) else {
            tracing::warn!(
                "the old and new rules do not fit the maps together; replacing them in one \
                 pass, during which some keys may briefly match neither"
            );
            return self.write_image(new);
        };
        self.write_with_slots(&staged.image, &staged.slots)
            .map_err(|e| e.during("staging the new rules"))?;
        self.write_with_slots(new, &staged.new_slots)
    }

    /// Rule metadata goes first and entries second when adding, so an entry never points at
    /// a rule the programs do not know yet; metadata of dropped rules is cleared last.
    fn write_with_slots(&mut self, image: &KernelImage, slots: &Slots) -> Result<(), MapsError> {
        let too_many = || MapsError::TooManyRules {
            count: image.rules.len(),
            limit: carapace_common::MAX_RULES,
        };
        let count = u32::try_from(image.rules.len()).map_err(|_| too_many())?;
        if image.rules.len() > carapace_common::MAX_RULES {
            return Err(too_many());
        }
        for (index, meta) in image.rules.iter().enumerate() {
            self.rules
                .set(index as u32, meta, 0)
                .map_err(MapsError::on(names::RULES))?;
        }
        self.default_session
            .set(0, SessionState::new(0), 0)
            .map_err(MapsError::on(names::DEFAULT_SESSION))?;

        sync_hash(
            &mut self.exact,
            &path_entries(&image.exact, slots, &image.rules)?,
        )
        .map_err(MapsError::on(names::EXACT_PATHS))?;
        sync_hash(
            &mut self.ancestors,
            &path_entries(&image.ancestors, slots, &image.rules)?,
        )
        .map_err(MapsError::on(names::ANCESTORS))?;

        let names = image
            .names
            .iter()
            .map(|(name, refs)| Ok((name_key(name)?, rule_refs(refs, slots, &image.rules)?)))
            .collect::<Result<Vec<_>, MapsError>>()?;
        sync_hash(&mut self.names, &names).map_err(MapsError::on(names::NAMES))?;

        let inodes = with_tree_inodes(image)
            .iter()
            .map(|(&(dev, ino), refs)| {
                Ok((InodeKey { dev, ino }, rule_refs(refs, slots, &image.rules)?))
            })
            .collect::<Result<Vec<_>, MapsError>>()?;
        sync_hash(&mut self.inodes, &inodes).map_err(MapsError::on(names::INODES))?;

        let prefixes = image
            .prefix
            .iter()
            .map(|(prefix, refs)| {
                let data = path_key(prefix)?;
                Ok((
                    Key::new((prefix.len() * 8) as u32, data),
                    rule_refs(refs, slots, &image.rules)?,
                ))
            })
            .collect::<Result<Vec<_>, MapsError>>()?;
        sync_lpm(&mut self.prefix, &prefixes).map_err(MapsError::on(names::PREFIX_PATHS))?;

        let nets = image
            .nets
            .iter()
            .map(|(&(len, addr), refs)| Ok((Key::new(len, addr), net_refs(refs, slots)?)))
            .collect::<Result<Vec<_>, MapsError>>()?;
        sync_lpm(&mut self.nets, &nets).map_err(MapsError::on(names::NETS))?;

        let mut config = image.config;
        config.dfa = self
            .write_automata(&image.dfa, slots, &image.rules)
            .map_err(|e| e.during("path automata"))?;
        for (bit, present) in [
            (has::EXACT, !image.exact.is_empty()),
            (has::PREFIX, !image.prefix.is_empty()),
            (has::NAMES, !image.names.is_empty()),
            (has::INODES, !image.inodes.is_empty()),
            (has::ANCESTORS, !image.ancestors.is_empty()),
            (has::RECORDING, self.any_recording()),
        ] {
            if present {
                config.has |= bit;
            }
        }
        // One value: the programs switch to the new automata and skip emptied maps at once.
        self.config
            .set(0, config, 0)
            .map_err(MapsError::on(names::CONFIG))?;
        self.dfa_in_force = config.dfa;

        // Clear metadata of rules the new image no longer has; no entry refers to them now.
        for index in count..self.rule_count.max(count) {
            self.rules
                .set(index, RuleMeta::default(), 0)
                .map_err(MapsError::on(names::RULES))?;
        }
        self.rule_count = count;
        self.current = image.clone();
        self.slots = slots.clone();
        self.invalidate_path_cache()
    }

    /// Retires every cached "no rule names this path": made under the maps before this
    /// write (or during it), it may not hold under the new entries. Read from the pinned map
    /// and counted up, never reset, so a restarted daemon cannot revive an old entry.
    pub(super) fn invalidate_path_cache(&mut self) -> Result<(), MapsError> {
        let gen = self
            .cache_gen
            .get(&cache_gen::RULES, 0)
            .map_err(MapsError::on(names::PATH_CACHE_GEN))?;
        self.cache_gen
            .set(cache_gen::RULES, gen.wrapping_add(1), 0)
            .map_err(MapsError::on(names::PATH_CACHE_GEN))
    }

    /// Writes `automata` into the half of the automaton maps not in force; the `Config::dfa`
    /// value that puts them in force (0 when there are none).
    fn write_automata(
        &mut self,
        automata: &[PathAutomaton],
        slots: &Slots,
        rules: &[RuleMeta],
    ) -> Result<u32, MapsError> {
        if automata.is_empty() {
            return Ok(0);
        }
        if automata.len() > DFA_GROUPS {
            return Err(MapsError::TooManyAutomata {
                count: automata.len(),
                limit: DFA_GROUPS,
            });
        }
        let half = u32::from(self.dfa_in_force == 1);
        // The block refs early matches name, one bit each, shared by the half's automata.
        let early_blocks: Vec<RuleRef> = automata
            .iter()
            .flat_map(|a| a.early.values().flatten())
            .filter(|r| r.flags & REF_EXCEPT == 0)
            .map(|r| (r.rule, r.flags))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|(rule, flags)| RuleRef { rule, flags })
            .collect();
        let early_refs =
            rule_refs(&early_blocks, slots, rules).map_err(|e| e.during("early block refs"))?;
        self.dfa_early_refs
            .set(half, early_refs, 0)
            .map_err(MapsError::on(names::DFA_EARLY_REFS))?;
        for group in 0..DFA_GROUPS {
            let slot = half * DFA_GROUPS as u32 + group as u32;
            let Some(a) = automata.get(group) else {
                self.dfa
                    .set(slot, DfaHeader::default(), 0)
                    .map_err(MapsError::on(names::DFA))?;
                continue;
            };
            let states = a.states();
            if states > DFA_STATES || a.trans.len() > DFA_CELLS {
                return Err(MapsError::AutomatonTooLarge {
                    states,
                    cells: a.trans.len(),
                    max_states: DFA_STATES,
                    max_cells: DFA_CELLS,
                });
            }
            let first_state = slot * DFA_STATES as u32;
            let mut flagged = vec![false; states];
            for state in 0..states as u32 {
                let refs = a.accept.get(&state).map_or(&[][..], Vec::as_slice);
                self.dfa_accept
                    .set(first_state + state, rule_refs(refs, slots, rules)?, 0)
                    .map_err(MapsError::on(names::DFA_ACCEPT))?;
                let live = a.live.get(&state).map_or(&[][..], Vec::as_slice);
                self.dfa_live
                    .set(first_state + state, rule_refs(live, slots, rules)?, 0)
                    .map_err(MapsError::on(names::DFA_LIVE))?;
                let mut early = DfaEarly::default();
                for r in a.early.get(&state).into_iter().flatten() {
                    if r.flags & REF_EXCEPT != 0 {
                        early.except |= slot_bit(with_slot(r.flags, r.rule, slots));
                    } else if let Some(bit) = early_blocks.iter().position(|b| b == r) {
                        early.blocks |= 1 << bit;
                    }
                }
                flagged[state as usize] = early != DfaEarly::default();
                self.dfa_early
                    .set(first_state + state, early, 0)
                    .map_err(MapsError::on(names::DFA_EARLY))?;
            }
            let first_chunk = slot as usize * (DFA_CELLS / DFA_CHUNK);
            for (i, cells) in a.trans.chunks(DFA_CHUNK).enumerate() {
                let mut chunk = [0u32; DFA_CHUNK];
                for (cell, &target) in chunk.iter_mut().zip(cells) {
                    let early = flagged.get(target as usize).copied().unwrap_or(false);
                    *cell = if early {
                        target | DFA_EARLY_FLAG
                    } else {
                        target
                    };
                }
                self.dfa_trans
                    .set((first_chunk + i) as u32, chunk, 0)
                    .map_err(MapsError::on(names::DFA_TRANS))?;
            }
            let header = DfaHeader {
                start: a.start,
                stride: a.stride,
                states: states as u32,
                neutral: a.neutral,
                classes: a.classes,
            };
            self.dfa
                .set(slot, header, 0)
                .map_err(MapsError::on(names::DFA))?;
        }
        Ok(half + 1)
    }

    pub fn fill_levels(&self) -> String {
        let count = |n: usize| n.to_string();
        format!(
            "{} rules, {} exact paths, {} prefixes, {} names, {} inodes, {} networks, {} sessions",
            self.rule_count,
            count(self.exact.keys().count()),
            count(self.prefix.keys().count()),
            count(self.names.keys().count()),
            count(self.inodes.keys().count()),
            count(self.nets.keys().count()),
            count(self.sessions.keys().count()),
        )
    }
}

fn path_key(path: &[u8]) -> Result<[u8; PATH_MAX], MapsError> {
    let key = carapace_common::PathKey::new(path).ok_or_else(|| MapsError::PathTooLong {
        path: String::from_utf8_lossy(path).into_owned(),
        len: path.len(),
        limit: PATH_MAX - 1,
    })?;
    Ok(key.path)
}

/// The entries of a map keyed by whole paths.
fn path_entries(
    paths: &BTreeMap<Vec<u8>, Vec<RuleRef>>,
    slots: &Slots,
    rules: &[RuleMeta],
) -> Result<Vec<([u8; PATH_MAX], RuleRefs)>, MapsError> {
    paths
        .iter()
        .map(|(path, refs)| Ok((path_key(path)?, rule_refs(refs, slots, rules)?)))
        .collect()
}

fn name_key(name: &[u8]) -> Result<[u8; NAME_MAX], MapsError> {
    let lossy = || String::from_utf8_lossy(name).into_owned();
    if name.len() > NAME_MAX - 2 {
        return Err(MapsError::NameTooLong {
            name: lossy(),
            len: name.len(),
            limit: NAME_MAX - 2,
        });
    }
    let key = carapace_common::NameKey::new(name).ok_or_else(|| MapsError::BadName(lossy()))?;
    Ok(key.name)
}

fn with_slot(flags: u32, rule: u32, slots: &Slots) -> u32 {
    let slot = slots.get(&rule).copied().unwrap_or(0);
    (flags & !(0xff << REF_SLOT_SHIFT)) | (slot << REF_SLOT_SHIFT)
}

/// The image's inode entries plus those of what exists under its protected trees (see
/// `kernel::trees`), walked now: the files a write protects are the ones there at that time.
fn with_tree_inodes(image: &KernelImage) -> BTreeMap<(u64, u64), Vec<RuleRef>> {
    let found = super::trees::walk(image);
    for tree in &found.truncated {
        tracing::warn!(
            "protected tree {tree} holds more than the kernel's inode budget; files past it \
             are matched by path only (a hard link made to them before the rules loaded, or a \
             bind mount, is not caught)"
        );
    }
    let mut inodes = image.inodes.clone();
    for (key, refs) in found.inodes {
        let entry = inodes.entry(key).or_default();
        for r in refs {
            if !entry.contains(&r) && entry.len() < REFS_PER_KEY {
                entry.push(r);
            }
        }
    }
    inodes
}

/// A map value: `refs` with their exception slots, the exceptions' slots folded, and the
/// operations of the blocking refs (from `rules`, the image's rule table).
fn rule_refs(refs: &[RuleRef], slots: &Slots, rules: &[RuleMeta]) -> Result<RuleRefs, MapsError> {
    if refs.len() > REFS_PER_KEY {
        return Err(MapsError::TooManyRefs {
            what: "key",
            count: refs.len(),
            limit: REFS_PER_KEY,
        });
    }
    let mut out = RuleRefs {
        count: refs.len() as u32,
        ..RuleRefs::default()
    };
    for (slot, r) in out.refs.iter_mut().zip(refs) {
        *slot = RuleRef {
            rule: r.rule,
            flags: with_slot(r.flags, r.rule, slots),
        };
        if r.flags & REF_EXCEPT != 0 {
            out.except |= slot_bit(slot.flags);
        } else {
            // A rule the table lacks counts as covering everything (never cached clean).
            out.ops |= rules.get(r.rule as usize).map_or(u32::MAX, |m| m.ops);
        }
    }
    Ok(out)
}

fn net_refs(refs: &[NetRef], slots: &Slots) -> Result<NetRefs, MapsError> {
    if refs.len() > REFS_PER_KEY {
        return Err(MapsError::TooManyRefs {
            what: "network",
            count: refs.len(),
            limit: REFS_PER_KEY,
        });
    }
    let mut out = NetRefs {
        count: refs.len() as u32,
        ..NetRefs::default()
    };
    for (slot, r) in out.refs.iter_mut().zip(refs) {
        *slot = NetRef {
            flags: with_slot(r.flags, r.rule, slots),
            ..*r
        };
    }
    Ok(out)
}

fn sync_hash<K, V>(map: &mut HashMap<MapData, K, V>, wanted: &[(K, V)]) -> Result<(), MapError>
where
    K: aya::Pod + Ord + Copy,
    V: aya::Pod,
{
    for (key, value) in wanted {
        map.insert(key, value, 0)?;
    }
    let keep: BTreeSet<K> = wanted.iter().map(|(k, _)| *k).collect();
    let stale: Vec<K> = map
        .keys()
        .filter_map(Result::ok)
        .filter(|k| !keep.contains(k))
        .collect();
    for key in stale {
        map.remove(&key)?;
    }
    Ok(())
}

fn sync_lpm<K, V>(map: &mut LpmTrie<MapData, K, V>, wanted: &[(Key<K>, V)]) -> Result<(), MapError>
where
    K: aya::Pod + Ord + Copy,
    V: aya::Pod,
{
    for (key, value) in wanted {
        map.insert(key, value, 0)?;
    }
    let keep: BTreeSet<(u32, K)> = wanted
        .iter()
        .map(|(k, _)| (k.prefix_len(), k.data()))
        .collect();
    let stale: Vec<Key<K>> = map
        .keys()
        .filter_map(Result::ok)
        .filter(|k| !keep.contains(&(k.prefix_len(), k.data())))
        .collect();
    for key in stale {
        map.remove(&key)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use carapace_common::{op, RULE_ALWAYS_ON};

    use super::*;

    #[test]
    fn a_value_carries_the_operations_of_its_blocking_refs() {
        let meta = |ops| RuleMeta {
            ops,
            flags: RULE_ALWAYS_ON,
        };
        let rules = [
            meta(op::READ | op::WRITE),
            meta(op::OUTSIDE),
            meta(op::EXEC),
        ];
        let r = |rule, flags| RuleRef { rule, flags };
        let slots = Slots::from([(2, 1)]);
        // The root prefix of a `unix: outside-session` rule alone: no file operation, so an
        // open under it stays cacheable.
        let outside = rule_refs(&[r(1, 0)], &slots, &rules).expect("fits");
        assert_eq!(outside.ops, op::OUTSIDE);
        let mixed = rule_refs(&[r(0, 0), r(1, 0), r(2, REF_EXCEPT)], &slots, &rules).expect("fits");
        // An exception is no block: its rule's operations do not count.
        assert_eq!(mixed.ops, op::READ | op::WRITE | op::OUTSIDE);
        assert_ne!(mixed.except, 0);
        // A ref to a rule the table lacks counts as every operation (never cached clean).
        assert_eq!(
            rule_refs(&[r(9, 0)], &slots, &rules).expect("fits").ops,
            u32::MAX
        );
    }
}
