//! The validated rule model: what a rule matches, after short forms are expanded into the
//! long form. Matchers are compiled here (globs, regexes); the kernel image is built from
//! this model by `compile::kernel`.

use std::net::{IpAddr, Ipv4Addr};

use carapace_common::op;

use super::pattern::PathPattern;
pub use super::text_pattern::TextPattern;

/// What an operation does, as rules name it (`actions:`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Reading a file or listing a directory.
    Read,
    /// Creating a file or changing its contents.
    Write,
    /// Removing a file or directory.
    Delete,
    /// Running a program.
    Execute,
    /// Connecting to a host or an address.
    Network,
    /// Read of the source plus write of the destination.
    Copy,
    /// Write of the destination plus delete of the source.
    Move,
}

impl Action {
    /// Every action as rule files write it, for did-you-mean hints.
    pub(crate) const NAMES: &'static [&'static str] = &[
        "read", "write", "delete", "execute", "network", "copy", "move",
    ];

    #[must_use]
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "read" => Self::Read,
            "write" => Self::Write,
            "delete" => Self::Delete,
            "execute" => Self::Execute,
            "network" => Self::Network,
            "copy" => Self::Copy,
            "move" => Self::Move,
            _ => return None,
        })
    }

    /// How rule files and messages write the action.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Delete => "delete",
            Self::Execute => "execute",
            Self::Network => "network",
            Self::Copy => "copy",
            Self::Move => "move",
        }
    }

    /// The kernel operations this action consists of: a copy reads the source and writes
    /// the destination, a move writes the destination and deletes the source.
    #[must_use]
    pub fn ops(self) -> u32 {
        match self {
            Self::Read => op::READ,
            Self::Write => op::WRITE,
            Self::Delete => op::DELETE,
            Self::Execute => op::EXEC,
            Self::Network => op::NETWORK,
            Self::Copy => op::READ | op::WRITE,
            Self::Move => op::WRITE | op::DELETE,
        }
    }
}

/// OR of the kernel ops of `actions`.
#[must_use]
pub(crate) fn ops_of(actions: &[Action]) -> u32 {
    actions.iter().fold(0, |acc, a| acc | a.ops())
}

/// An address block, IPv4 stored IPv4-mapped like the kernel's network trie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    /// Bits over the 128-bit (IPv4-mapped) address.
    pub prefix_len: u32,
    /// Host bits are zero.
    pub addr: [u8; 16],
}

impl Cidr {
    /// Parses `a.b.c.d/n`, `v6/n` or a bare address (a single host).
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (
                a.trim().parse::<IpAddr>().ok()?,
                Some(l.trim().parse::<u32>().ok()?),
            ),
            None => (text.trim().parse::<IpAddr>().ok()?, None),
        };
        let (bytes, len) = match addr {
            IpAddr::V4(v4) => {
                let len = len.unwrap_or(32);
                if len > 32 {
                    return None;
                }
                (v4.to_ipv6_mapped().octets(), 96 + len)
            }
            IpAddr::V6(v6) => {
                let len = len.unwrap_or(128);
                if len > 128 {
                    return None;
                }
                (v6.octets(), len)
            }
        };
        Some(Self::new(bytes, len))
    }

    /// The block of `addr` alone.
    #[must_use]
    pub fn host(addr: IpAddr) -> Self {
        let bytes = match addr {
            IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
            IpAddr::V6(v6) => v6.octets(),
        };
        Self::new(bytes, 128)
    }

    /// The block of `prefix_len` bits that holds `addr` (host bits cleared).
    #[must_use]
    pub fn new(mut addr: [u8; 16], prefix_len: u32) -> Self {
        let prefix_len = prefix_len.min(128);
        for (i, b) in addr.iter_mut().enumerate() {
            let bit = (i as u32) * 8;
            if bit >= prefix_len {
                *b = 0;
            } else if prefix_len - bit < 8 {
                *b &= 0xffu8 << (8 - (prefix_len - bit));
            }
        }
        Self { prefix_len, addr }
    }

    /// Whether `other` lies inside this block.
    #[must_use]
    pub fn covers(&self, other: &Self) -> bool {
        other.prefix_len >= self.prefix_len
            && Self::new(other.addr, self.prefix_len).addr == self.addr
    }

    /// Every address (`::/0`) or every IPv4 address (`0.0.0.0/0`, stored IPv4-mapped).
    #[must_use]
    pub(crate) fn is_whole_family(&self) -> bool {
        self.prefix_len == 0
            || *self == Self::new(Ipv4Addr::UNSPECIFIED.to_ipv6_mapped().octets(), 96)
    }

    /// Whether `addr` lies inside this block.
    #[must_use]
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.covers(&Self::host(addr))
    }
}

/// A host a network rule names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// An address literal.
    Ip(IpAddr),
    /// A name, resolved when the rule set is compiled.
    Name {
        /// Lower-case, as written (`example.com` or `*.example.com`).
        name: String,
        /// Its addresses then, for the kernel; empty when it did not resolve.
        resolved: Vec<IpAddr>,
    },
}

/// A network match: any of the hosts/blocks (none = every address) on any of the ports
/// (none = every port).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetMatch {
    /// Hosts by address or name (`host:`).
    pub hosts: Vec<Host>,
    /// Address blocks (`cidr:`).
    pub cidrs: Vec<Cidr>,
    /// Ports (`port:`).
    pub ports: Vec<u16>,
}

impl NetMatch {
    /// Every address block this match covers, host names as resolved; `None` when a name
    /// did not resolve (so the set of addresses is unknown).
    #[must_use]
    pub fn blocks(&self) -> Option<Vec<Cidr>> {
        let mut out = self.cidrs.clone();
        for h in &self.hosts {
            match h {
                Host::Ip(ip) => out.push(Cidr::host(*ip)),
                Host::Name { resolved, .. } if !resolved.is_empty() => {
                    out.extend(resolved.iter().map(|ip| Cidr::host(*ip)));
                }
                Host::Name { .. } => return None,
            }
        }
        if out.is_empty() && self.hosts.is_empty() {
            out.push(Cidr::new([0; 16], 0));
        }
        Some(out)
    }

    /// The blocks of a match or an exception as far as they are known: addresses and CIDR
    /// blocks, and what host names resolved to. A name that did not resolve (or a
    /// wildcard) adds nothing: in an exception the kernel keeps refusing it (fail closed);
    /// in a match it refuses the addresses a session's resolver hands out for it.
    #[must_use]
    pub(crate) fn resolved_blocks(&self) -> Vec<Cidr> {
        let mut out = self.cidrs.clone();
        for h in &self.hosts {
            match h {
                Host::Ip(ip) => out.push(Cidr::host(*ip)),
                Host::Name { resolved, .. } => {
                    out.extend(resolved.iter().map(|ip| Cidr::host(*ip)));
                }
            }
        }
        if self.hosts.is_empty() && self.cidrs.is_empty() {
            out.push(Cidr::new([0; 16], 0));
        }
        out
    }

    /// Host names among the hosts (matched by name in userspace).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().filter_map(|h| match h {
            Host::Name { name, .. } => Some(name.as_str()),
            Host::Ip(_) => None,
        })
    }

    /// Whether a connection to `addr:port` matches, names by what they resolved to (the
    /// kernel's view; Layer 1 also matches names as written).
    #[must_use]
    pub fn matches(&self, addr: IpAddr, port: u16) -> bool {
        let addr_ok = self
            .blocks()
            .is_some_and(|b| b.iter().any(|c| c.contains(addr)));
        addr_ok && (self.ports.is_empty() || self.ports.contains(&port))
    }
}

/// What a rule matches.
#[derive(Clone, Debug)]
pub enum Cond {
    /// Operations on a path any of the patterns matches (`path:`, the short forms).
    Path(Vec<PathPattern>),
    /// Command lines any of the patterns matches, whole or one simple command (`command:`).
    Command(Vec<TextPattern>),
    /// `run:`: any of these structured command matches (see `run`).
    Run(Vec<super::run::RunMatch>),
    /// Tool names (`Bash`, `Read`, `mcp__*` globs).
    Tool(Vec<TextPattern>),
    /// Text the call carries (arguments, data written or sent) any of the patterns matches
    /// (`content:`).
    Content(Vec<TextPattern>),
    /// Connections the match covers (`host:`, `cidr:`, `port:`).
    Net(NetMatch),
    /// `unix: outside-session`: a connection to (or a datagram for) a unix socket whose
    /// listener was made outside the agent's session. Only the kernel sees who made a
    /// socket, so only the kernel matches it; `except:` names the sockets allowed, by path.
    OutsideListener,
    /// `view: [chroot, user-namespace]`: making a private view of the file system — a
    /// `chroot`, or a new user namespace (inside one, mount namespaces and `chroot` need no
    /// host privilege). Paths seen from a private root are not the ones the rules name. Only
    /// the kernel matches it; the value holds the `op::CHROOT` and `op::USERNS` bits named.
    View(u32),
    /// Every one of the conditions holds (`all:`).
    All(Vec<Cond>),
    /// At least one holds (`any:`).
    Any(Vec<Cond>),
    /// The condition does not hold (`not:`).
    Not(Box<Cond>),
}

impl Cond {
    /// How a condition only the kernel can match is written, for messages; `None` for the
    /// others.
    #[must_use]
    pub(crate) fn kernel_only(&self) -> Option<&'static str> {
        match self {
            Self::OutsideListener => Some("unix: outside-session"),
            Self::View(_) => Some("view:"),
            _ => None,
        }
    }

    /// Short name of the condition's kind, for explanations.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Path(_) => "path",
            Self::Command(_) => "command",
            Self::Run(_) => "run",
            Self::Tool(_) => "tool",
            Self::Content(_) => "content",
            Self::Net(_) => "network",
            Self::OutsideListener => "unix",
            Self::View(_) => "view",
            Self::All(_) => "all",
            Self::Any(_) => "any",
            Self::Not(_) => "not",
        }
    }
}

/// When a session rule switches on.
#[derive(Clone, Debug)]
pub enum Trigger {
    /// On from the session's start (`trigger: always`).
    Always,
    /// After an operation with these actions (any, if empty) that matches `cond`.
    After {
        /// The actions that count.
        actions: Vec<Action>,
        /// What the operation must match; `None` for any.
        cond: Option<Cond>,
    },
    /// Decided by the LLM reviewer.
    English(String),
}

/// What a session rule acts on once triggered.
#[derive(Clone, Debug)]
pub enum Effect {
    /// Operations with these actions (any, if empty) that match `cond`.
    Actions {
        /// The actions acted on.
        actions: Vec<Action>,
        /// What the operation must match; `None` for any.
        cond: Option<Cond>,
    },
    /// Described in plain words; the LLM reviewer decides what it covers.
    English(String),
}

/// Which layer enforces a rule, and why not the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// The kernel enforces the rule fully (Layer 1 checks it too).
    Kernel,
    /// Layer 1 only; the reason is shown by `carapace rules explain`.
    Userspace(String),
    /// Not worked out: a one-call load (`check --local`, `hook --local`) plans a rule
    /// for the kernel only when a call matches it ([`Rule::kernel_enforced`](super::Rule::kernel_enforced)).
    Unplanned,
}

impl std::fmt::Display for Enforcement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Kernel => f.write_str("kernel and userspace"),
            Self::Userspace(reason) => write!(f, "userspace only: {reason}"),
            Self::Unplanned => f.write_str("not planned (a one-call load)"),
        }
    }
}

/// What a network rule checks of a TLS (or plain HTTP) connection (`tls:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsCheck {
    /// `sni`: the server name the client asks for is judged by the rule's names.
    Sni,
}
