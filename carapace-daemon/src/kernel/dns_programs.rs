//! The DNS redirection programs (`carapace-ebpf/src/dns_redirect.rs`): cgroup `sock_addr`
//! programs on the Carapace root cgroup, which send a session's DNS to its resolver in
//! carapaced, and the connects a `tls: sni` rule checks to its server-name proxy
//! (`sni_redirect.rs`, with the `sock_ops` program that tells the proxy where each went). Loaded with the LSM programs and attached while they are (armed); a kernel that
//! refuses them runs the rest of the kernel layer, with names left to the load-time
//! addresses, and says so.

use std::fs::File;
use std::path::Path;

use aya::programs::{
    links::{FdLink, PinnedLink},
    CgroupAttachMode, CgroupSockAddr, ProgramError, SockOps,
};

use super::links::pin_replacing;
use super::KernelUnavailable;

/// The `sock_addr` programs, by name: connects and datagrams (IPv4, IPv6) to port 53 go to
/// the resolver, and datagrams read back show the address first meant; connects to ports
/// 443 and 80 of learned addresses go to the server-name proxy.
const SOCK_ADDR: [&str; 6] = [
    "dns_connect4",
    "dns_connect6",
    "dns_sendmsg4",
    "dns_sendmsg6",
    "dns_recvmsg4",
    "dns_recvmsg6",
];

/// The `sock_ops` program that files a proxied connect under its client address and port.
const SOCK_OPS: &str = "sni_peer";

/// Every program of the redirection, by name.
pub const PROGRAMS: [&str; 7] = [
    SOCK_ADDR[0],
    SOCK_ADDR[1],
    SOCK_ADDR[2],
    SOCK_ADDR[3],
    SOCK_ADDR[4],
    SOCK_ADDR[5],
    SOCK_OPS,
];

/// Why DNS cannot be redirected on this kernel (the daemon runs without).
#[derive(Debug, thiserror::Error)]
pub enum DnsUnavailable {
    #[error("program {0} missing from the object")]
    Missing(String),
    /// The object's program is not of the expected type.
    #[error("{name}: {source}")]
    WrongType {
        name: String,
        #[source]
        source: ProgramError,
    },
    #[error("DNS redirection: the kernel refused {name}: {source}")]
    Refused {
        name: &'static str,
        #[source]
        source: ProgramError,
    },
}

/// Attaching (after the programs loaded) finds the same programs: what is missing then is
/// a failure of the kernel layer's setup.
impl From<DnsUnavailable> for KernelUnavailable {
    fn from(e: DnsUnavailable) -> Self {
        match e {
            DnsUnavailable::Missing(name) => Self::MissingProgram(name),
            DnsUnavailable::WrongType { name, source } => Self::Program {
                name,
                source: Box::new(source),
            },
            DnsUnavailable::Refused { name, source } => Self::Load {
                program: name.to_owned(),
                source: Box::new(source),
            },
        }
    }
}

fn program<'a>(
    ebpf: &'a mut aya::Ebpf,
    name: &str,
) -> Result<&'a mut CgroupSockAddr, DnsUnavailable> {
    ebpf.program_mut(name)
        .ok_or_else(|| DnsUnavailable::Missing(name.to_owned()))?
        .try_into()
        .map_err(|source: ProgramError| DnsUnavailable::WrongType {
            name: name.to_owned(),
            source,
        })
}

fn sock_ops(ebpf: &mut aya::Ebpf) -> Result<&mut SockOps, DnsUnavailable> {
    ebpf.program_mut(SOCK_OPS)
        .ok_or_else(|| DnsUnavailable::Missing(SOCK_OPS.to_owned()))?
        .try_into()
        .map_err(|source: ProgramError| DnsUnavailable::WrongType {
            name: SOCK_OPS.to_owned(),
            source,
        })
}

/// Loads every program (the verifier runs here); the error says why DNS cannot be
/// redirected on this kernel.
pub fn load(ebpf: &mut aya::Ebpf) -> Result<(), DnsUnavailable> {
    for name in SOCK_ADDR {
        program(ebpf, name)?
            .load()
            .map_err(|source| DnsUnavailable::Refused { name, source })?;
    }
    sock_ops(ebpf)?
        .load()
        .map_err(|source| DnsUnavailable::Refused {
            name: SOCK_OPS,
            source,
        })
}

/// Attaches every program to the cgroup `root` and pins its link under its name in
/// `links_dir`, replacing a previous daemon's. They attach as BPF links (Linux 5.7 and
/// later), which the kernel always runs next to other programs of the cgroup and of the
/// cgroups below, never instead of them; link creation takes no flags (it refuses
/// `BPF_F_ALLOW_MULTI` with EINVAL), hence `Single`, which means no flag.
pub fn attach(
    ebpf: &mut aya::Ebpf,
    root: &Path,
    links_dir: &Path,
) -> Result<Vec<(PinnedLink, bool)>, KernelUnavailable> {
    let cgroup = File::open(root).map_err(|source| KernelUnavailable::Cgroup {
        dir: root.to_path_buf(),
        source,
    })?;
    let cannot_attach = |name: &'static str| {
        move |source| KernelUnavailable::Attach {
            name: name.to_owned(),
            target: root.display().to_string(),
            source: Box::new(source),
        }
    };
    let no_link = |name: &'static str| {
        move |source| KernelUnavailable::Program {
            name: name.to_owned(),
            source: Box::new(source),
        }
    };
    let not_a_link = |name: &'static str| {
        move |source| KernelUnavailable::NotALink {
            name: name.to_owned(),
            source,
        }
    };
    let mut links = Vec::new();
    for name in SOCK_ADDR {
        let program = program(ebpf, name)?;
        let id = program
            .attach(&cgroup, CgroupAttachMode::Single)
            .map_err(cannot_attach(name))?;
        let link: FdLink = program
            .take_link(id)
            .map_err(no_link(name))?
            .try_into()
            .map_err(not_a_link(name))?;
        links.push((name, link));
    }
    let program = sock_ops(ebpf)?;
    let id = program
        .attach(&cgroup, CgroupAttachMode::Single)
        .map_err(cannot_attach(SOCK_OPS))?;
    let link: FdLink = program
        .take_link(id)
        .map_err(no_link(SOCK_OPS))?
        .try_into()
        .map_err(not_a_link(SOCK_OPS))?;
    links.push((SOCK_OPS, link));
    links
        .into_iter()
        .map(|(name, link)| {
            pin_replacing(link, &links_dir.join(name)).map_err(|source| {
                KernelUnavailable::PinLink {
                    name: name.to_owned(),
                    source,
                }
            })
        })
        .collect()
}
