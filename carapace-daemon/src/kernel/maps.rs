//! Where a rule becomes a BPF map entry: writes a [`KernelImage`] into the programs' maps
//! (adding and overwriting what the image has, then removing what it no longer has) and
//! keeps the per-session rule state.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context as _};
use aya::maps::{
    lpm_trie::{Key, LpmTrie},
    Array, HashMap, Map, MapData,
};
use carapace_common::{
    maps as names, Config, InodeKey, NetRef, NetRefs, RuleMeta, RuleRef, RuleRefs, SessionState,
    MAX_EXCEPT_SLOTS, NAME_MAX, PATH_MAX, REFS_PER_KEY, REF_EXCEPT, REF_SLOT_SHIFT,
};

use super::image::KernelImage;

pub struct KernelMaps {
    sessions: HashMap<MapData, u64, SessionState>,
    default_session: Array<MapData, SessionState>,
    rules: Array<MapData, RuleMeta>,
    config: Array<MapData, Config>,
    exact: HashMap<MapData, [u8; PATH_MAX], RuleRefs>,
    prefix: LpmTrie<MapData, [u8; PATH_MAX], RuleRefs>,
    names: HashMap<MapData, [u8; NAME_MAX], RuleRefs>,
    inodes: HashMap<MapData, InodeKey, RuleRefs>,
    nets: LpmTrie<MapData, [u8; 16], NetRefs>,
    /// Rule indices written by the last image, to clear the ones a new image drops.
    rule_count: u32,
}

fn take(maps: &mut Vec<(String, Map)>, name: &str) -> anyhow::Result<Map> {
    let at = maps
        .iter()
        .position(|(n, _)| n == name)
        .with_context(|| format!("map {name} missing"))?;
    Ok(maps.swap_remove(at).1)
}

macro_rules! typed {
    ($maps:expr, $name:expr) => {
        take($maps, $name)?
            .try_into()
            .with_context(|| format!("map {} has an unexpected type", $name))?
    };
}

impl KernelMaps {
    pub fn new(mut maps: Vec<(String, Map)>) -> anyhow::Result<Self> {
        let maps = &mut maps;
        Ok(Self {
            sessions: typed!(maps, names::SESSIONS),
            default_session: typed!(maps, names::DEFAULT_SESSION),
            rules: typed!(maps, names::RULES),
            config: typed!(maps, names::CONFIG),
            exact: typed!(maps, names::EXACT_PATHS),
            prefix: typed!(maps, names::PREFIX_PATHS),
            names: typed!(maps, names::NAMES),
            inodes: typed!(maps, names::INODES),
            nets: typed!(maps, names::NETS),
            rule_count: 0,
        })
    }

    /// Sessions a previous daemon left in the pinned map.
    pub fn sessions(&self) -> anyhow::Result<Vec<(u64, u32)>> {
        self.sessions
            .iter()
            .map(|entry| {
                entry
                    .map(|(cgroup, state)| (cgroup, state.session))
                    .map_err(Into::into)
            })
            .collect()
    }

    pub fn add_session(&mut self, cgroup: u64, session: u32) -> anyhow::Result<()> {
        if let Ok(existing) = self.sessions.get(&cgroup, 0) {
            if existing.session == session {
                return Ok(());
            }
        }
        self.sessions
            .insert(cgroup, SessionState::new(session), 0)
            .with_context(|| format!("cannot tag session cgroup {cgroup}"))
    }

    pub fn remove_session(&mut self, cgroup: u64) -> anyhow::Result<()> {
        match self.sessions.remove(&cgroup) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(e).with_context(|| format!("cannot untag session cgroup {cgroup}")),
        }
    }

    /// Writes `image`. Rule metadata goes first and entries second when adding, so an entry
    /// never points at a rule the programs do not know yet.
    pub fn write_image(&mut self, image: &KernelImage) -> anyhow::Result<()> {
        let count = u32::try_from(image.rules.len()).context("too many rules")?;
        if image.rules.len() > carapace_common::MAX_RULES {
            bail!(
                "{} kernel rules; the limit is {}",
                image.rules.len(),
                carapace_common::MAX_RULES
            );
        }
        for (index, meta) in image.rules.iter().enumerate() {
            self.rules.set(index as u32, meta, 0).context("RULES")?;
        }
        self.default_session
            .set(0, SessionState::new(0), 0)
            .context("DEFAULT_SESSION")?;
        let slots = &except_slots(image)?;

        let exact = image
            .exact
            .iter()
            .map(|(path, refs)| Ok((path_key(path)?, rule_refs(refs, slots)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        sync_hash(&mut self.exact, &exact).context("EXACT_PATHS")?;

        let names = image
            .names
            .iter()
            .map(|(name, refs)| Ok((name_key(name)?, rule_refs(refs, slots)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        sync_hash(&mut self.names, &names).context("NAMES")?;

        let inodes = image
            .inodes
            .iter()
            .map(|(&(dev, ino), refs)| Ok((InodeKey { dev, ino }, rule_refs(refs, slots)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        sync_hash(&mut self.inodes, &inodes).context("INODES")?;

        let prefixes = image
            .prefix
            .iter()
            .map(|(prefix, refs)| {
                let data = path_key(prefix)?;
                Ok((
                    Key::new((prefix.len() * 8) as u32, data),
                    rule_refs(refs, slots)?,
                ))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        sync_lpm(&mut self.prefix, &prefixes).context("PREFIX_PATHS")?;

        let nets = image
            .nets
            .iter()
            .map(|(&(len, addr), refs)| Ok((Key::new(len, addr), net_refs(refs, slots)?)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        sync_lpm(&mut self.nets, &nets).context("NETS")?;

        self.config.set(0, image.config, 0).context("CONFIG")?;

        // Clear metadata of rules the new image no longer has; no entry refers to them now.
        for index in count..self.rule_count.max(count) {
            self.rules
                .set(index, RuleMeta::default(), 0)
                .context("RULES")?;
        }
        self.rule_count = count;
        Ok(())
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

fn path_key(path: &[u8]) -> anyhow::Result<[u8; PATH_MAX]> {
    let key = carapace_common::PathKey::new(path).with_context(|| {
        format!(
            "path {:?} is {} bytes; the kernel limit is {}",
            String::from_utf8_lossy(path),
            path.len(),
            PATH_MAX - 1
        )
    })?;
    Ok(key.path)
}

fn name_key(name: &[u8]) -> anyhow::Result<[u8; NAME_MAX]> {
    if name.len() > NAME_MAX - 2 {
        bail!(
            "basename {:?} is {} bytes; the kernel limit is {}",
            String::from_utf8_lossy(name),
            name.len(),
            NAME_MAX - 2
        );
    }
    let key = carapace_common::NameKey::new(name).with_context(|| {
        format!(
            "basename {:?} cannot be a key",
            String::from_utf8_lossy(name)
        )
    })?;
    Ok(key.name)
}

/// Exception slot (1-based) of every rule that has an exception anywhere in the image.
type Slots = BTreeMap<u32, u32>;

fn except_slots(image: &KernelImage) -> anyhow::Result<Slots> {
    let path_refs = image
        .exact
        .values()
        .chain(image.prefix.values())
        .chain(image.names.values())
        .chain(image.inodes.values())
        .flatten()
        .filter(|r| r.flags & REF_EXCEPT != 0)
        .map(|r| r.rule);
    let net_refs = image
        .nets
        .values()
        .flatten()
        .filter(|r| r.flags & REF_EXCEPT != 0)
        .map(|r| r.rule);
    let rules: BTreeSet<u32> = path_refs.chain(net_refs).collect();
    if rules.len() > MAX_EXCEPT_SLOTS {
        bail!(
            "{} kernel rules have exceptions; the kernel limit is {MAX_EXCEPT_SLOTS}",
            rules.len()
        );
    }
    Ok(rules.into_iter().zip(1..).collect())
}

fn with_slot(flags: u32, rule: u32, slots: &Slots) -> u32 {
    let slot = slots.get(&rule).copied().unwrap_or(0);
    (flags & !(0xff << REF_SLOT_SHIFT)) | (slot << REF_SLOT_SHIFT)
}

fn rule_refs(refs: &[RuleRef], slots: &Slots) -> anyhow::Result<RuleRefs> {
    if refs.len() > REFS_PER_KEY {
        bail!(
            "{} rules share one key; the limit is {REFS_PER_KEY}",
            refs.len()
        );
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
    }
    Ok(out)
}

fn net_refs(refs: &[NetRef], slots: &Slots) -> anyhow::Result<NetRefs> {
    if refs.len() > REFS_PER_KEY {
        bail!(
            "{} rules share one network; the limit is {REFS_PER_KEY}",
            refs.len()
        );
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

fn sync_hash<K, V>(map: &mut HashMap<MapData, K, V>, wanted: &[(K, V)]) -> anyhow::Result<()>
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

fn sync_lpm<K, V>(map: &mut LpmTrie<MapData, K, V>, wanted: &[(Key<K>, V)]) -> anyhow::Result<()>
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
