//! Carapace's kernel floor: BPF LSM programs that return -EACCES for the processes of agent
//! sessions (a cgroup below the Carapace cgroup root, and everything nested in it).
//!
//! One file per hook; `maps` documents every map; `gate` decides whether a task belongs to a
//! session; `matcher` looks a path or address up in the rule maps. The self-protection
//! guards (`task_kill`, `ptrace_access_check`, `bpf`, `mount`, `kernel_module`, `task_alloc`,
//! `tty_ioctl`, and `cgroup_escape` inside `file_open`) deny through `guard` in every session.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
// `atomic_xadd`: the bpf target offers no `AtomicU64::fetch_add`.
#![cfg_attr(target_arch = "bpf", feature(core_intrinsics))]
// `asm!` for the one kfunc call (`kread::sequence`), which aya 0.14 cannot relocate.
#![cfg_attr(target_arch = "bpf", feature(asm_experimental_arch))]
#![cfg_attr(target_arch = "bpf", allow(internal_features))]
#![cfg_attr(not(target_arch = "bpf"), allow(dead_code, unused_imports))]
// Pedantic lints that do not fit eBPF programs (`cargo xtask clippy-ebpf`, a step of
// `cargo xtask test`):
// Helpers are forced inline: BPF-to-BPF calls cost stack frames and verifier states, and
// take at most five arguments.
#![allow(clippy::inline_always)]
// aya's program macros hand the context by value to the function they wrap.
#![allow(clippy::needless_pass_by_value)]
// Map keys are passed by reference everywhere, so that large keys (paths, scratch buffers)
// are never copied onto the 512-byte BPF stack.
#![allow(clippy::needless_borrows_for_generic_args)]

#[cfg(target_arch = "bpf")]
mod attr_ops;
#[cfg(target_arch = "bpf")]
mod bpf;
#[cfg(target_arch = "bpf")]
mod bprm_check_security;
#[cfg(target_arch = "bpf")]
mod cgroup_escape;
#[cfg(target_arch = "bpf")]
mod dns_redirect;
#[cfg(target_arch = "bpf")]
mod dpath;
#[cfg(target_arch = "bpf")]
mod event;
#[cfg(target_arch = "bpf")]
mod file_open;
#[cfg(target_arch = "bpf")]
mod gate;
#[cfg(target_arch = "bpf")]
mod globals;
#[cfg(target_arch = "bpf")]
mod guard;
#[cfg(target_arch = "bpf")]
mod inode;
#[cfg(target_arch = "bpf")]
mod kernel_module;
#[cfg(target_arch = "bpf")]
mod keys;
#[cfg(target_arch = "bpf")]
mod kread;
#[cfg(target_arch = "bpf")]
mod link_rename;
#[cfg(target_arch = "bpf")]
mod maps;
#[cfg(target_arch = "bpf")]
mod matcher;
#[cfg(target_arch = "bpf")]
mod mount;
#[cfg(target_arch = "bpf")]
mod name_ops;
#[cfg(target_arch = "bpf")]
mod outside;
#[cfg(target_arch = "bpf")]
mod path_cache;
#[cfg(target_arch = "bpf")]
mod ptrace_access_check;
#[cfg(target_arch = "bpf")]
mod resolver_peer;
#[cfg(target_arch = "bpf")]
mod route_opts;
#[cfg(target_arch = "bpf")]
mod sigio;
#[cfg(target_arch = "bpf")]
mod sni_redirect;
#[cfg(target_arch = "bpf")]
mod sock_addr;
#[cfg(target_arch = "bpf")]
mod socket_connect;
#[cfg(target_arch = "bpf")]
mod socket_sendmsg;
#[cfg(target_arch = "bpf")]
mod task_alloc;
#[cfg(target_arch = "bpf")]
mod task_kill;
#[cfg(target_arch = "bpf")]
mod touched;
#[cfg(target_arch = "bpf")]
mod tty_ioctl;
#[cfg(target_arch = "bpf")]
mod unix_peer;
#[cfg(target_arch = "bpf")]
mod view;

/// The hook's verdict for a denied operation.
#[cfg(target_arch = "bpf")]
const EACCES: i32 = 13;

/// A program's exit value from its check's answer: -EACCES or 0, constants the verifier can
/// bound (it refuses an exit value carried out of a subprogram).
#[cfg(target_arch = "bpf")]
#[inline(always)]
fn verdict(denied: Option<i32>) -> i32 {
    if denied.is_some_and(|v| v != 0) {
        -EACCES
    } else {
        0
    }
}

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any reachable panic, so this is never called.
    loop {}
}

#[cfg(not(target_arch = "bpf"))]
fn main() {}

#[cfg(target_arch = "bpf")]
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
