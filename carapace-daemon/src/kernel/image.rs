//! The kernel image of a rule set: every BPF map's intended contents, built by the rule
//! compiler (`rules::compile`) and written into the maps by `kernel::maps`. Plain data, so
//! the compiler can be tested without a kernel and the map sync can diff two images.

use std::collections::BTreeMap;

use carapace_common::{Config, NetRef, RuleMeta, RuleRef};

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
    /// (prefix length in bits over the IPv4-mapped address, address) → refs. Like
    /// `prefix`, each entry holds the refs of every covering shorter prefix.
    pub nets: BTreeMap<(u32, [u8; 16]), Vec<NetRef>>,
    pub config: Config,
}
