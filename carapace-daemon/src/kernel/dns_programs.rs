//! The DNS redirection programs (`carapace-ebpf/src/dns_redirect.rs`): cgroup `sock_addr`
//! programs on the Carapace root cgroup, which send a session's DNS to its resolver in
//! carapaced. Loaded with the LSM programs and attached while they are (armed); a kernel that
//! refuses them runs the rest of the kernel layer, with names left to the load-time
//! addresses, and says so.

use std::fs::File;
use std::path::Path;

use aya::programs::{
    links::{FdLink, PinnedLink},
    CgroupAttachMode, CgroupSockAddr, ProgramError,
};

use super::loader::{chain, pin_replacing};
use super::KernelUnavailable;

/// The programs, by name: connects and datagrams (IPv4, IPv6) to port 53 go to the
/// resolver, and datagrams read back show the address first meant.
pub const PROGRAMS: [&str; 6] = [
    "dns_connect4",
    "dns_connect6",
    "dns_sendmsg4",
    "dns_sendmsg6",
    "dns_recvmsg4",
    "dns_recvmsg6",
];

fn program<'a>(ebpf: &'a mut aya::Ebpf, name: &str) -> Result<&'a mut CgroupSockAddr, String> {
    ebpf.program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the object"))?
        .try_into()
        .map_err(|e: ProgramError| format!("{name}: {e}"))
}

/// Loads every program (the verifier runs here); the error says why DNS cannot be
/// redirected on this kernel.
pub fn load(ebpf: &mut aya::Ebpf) -> Result<(), String> {
    for name in PROGRAMS {
        program(ebpf, name)?
            .load()
            .map_err(|e| format!("DNS redirection: the kernel refused {name}: {e}"))?;
    }
    Ok(())
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
    let cgroup = File::open(root).map_err(|e| {
        KernelUnavailable::new(format!("cannot open the cgroup {}: {e}", root.display()))
    })?;
    let mut pinned = Vec::new();
    for name in PROGRAMS {
        let program = program(ebpf, name).map_err(KernelUnavailable::new)?;
        let id = program
            .attach(&cgroup, CgroupAttachMode::Single)
            .map_err(|e| {
                KernelUnavailable::new(format!(
                    "cannot attach {name} to {}: {}",
                    root.display(),
                    chain(&e)
                ))
            })?;
        let link: FdLink = program
            .take_link(id)
            .map_err(|e| KernelUnavailable::new(format!("{name}: {e}")))?
            .try_into()
            .map_err(|e| KernelUnavailable::new(format!("{name}: not a bpf link: {e}")))?;
        pinned.push(
            pin_replacing(link, &links_dir.join(name))
                .map_err(|e| KernelUnavailable::new(format!("cannot pin the {name} link: {e}")))?,
        );
    }
    Ok(pinned)
}
