//! Files that reach into processes outside the session: a process's own files under
//! `/proc/PID` (its command line, `oom_score_adj`, `timerslack_ns`, …), a terminal whose
//! session leader is outside (the user's shell: its keystrokes and its screen), the virtual
//! consoles and the system console, and the message queues of an IPC namespace not the
//! session's (`/dev/mqueue`). The kernel guards a process's memory, environment and
//! descriptors with ptrace modes (`ptrace_access_check` refuses those); these it leaves to
//! file modes, which an agent running as the user passes.
//!
//! Checked by `file_open` on every open in a session, whatever the rules and before the
//! path cache. The fast path is four direct loads (the file's inode, its mode, its super
//! block, the magic; a fifth, the device number, for character devices); only files on
//! procfs, devpts or mqueue, and console devices, go on.

use carapace_common::{
    errsite, op, path_op, CONSOLE_MINOR, DEVPTS_SUPER_MAGIC, MQUEUE_MAGIC, PROC_SUPER_MAGIC,
    TTYAUX_MAJOR, TTY_MAJOR, VCS_MAJOR,
};

use aya_ebpf::helpers::bpf_get_current_task;

use crate::{gate, globals, guard, kread, EACCES};

const S_IFMT: u16 = 0o170_000;
const S_IFDIR: u16 = 0o040_000;
const S_IFCHR: u16 = 0o020_000;

/// A refusal without an event: `ps`, `top` and `pgrep` read every process's command line,
/// and a denial line for each would bury the ones that matter.
const QUIET: u32 = u32::MAX;

/// The files of a process outside the session a session may still read: what `ps`, `top`,
/// `pgrep` and container checks read of every process (state, times, memory, name, cgroup,
/// scheduling, limits, OOM score, login), none of it the user's data. The command line,
/// environment, memory maps, mounts and the rest stay refused.
const READABLE: [[u64; 2]; 13] = [
    name(b"stat"),
    name(b"statm"),
    name(b"status"),
    name(b"comm"),
    name(b"cgroup"),
    name(b"sched"),
    name(b"schedstat"),
    name(b"wchan"),
    name(b"oom_score"),
    name(b"oom_score_adj"),
    name(b"loginuid"),
    name(b"sessionid"),
    name(b"limits"),
];

/// `Some(-EACCES)` when opening `file` (for writing, or for ioctls only, when `writes`)
/// would reach a process outside the caller's session.
#[inline(always)]
pub fn check(file: *const u8, writes: bool) -> Option<i32> {
    // SAFETY: `file` is the hook's trusted `struct file *`; each pointer loaded from it is
    // typed by BTF, and the offsets come from the running kernel's BTF.
    let (inode, mode, magic): (*const u8, u16, u64) = unsafe {
        let inode: *const u8 = kread::load(file, globals::file_f_inode());
        let sb: *const u8 = kread::load(inode, globals::inode_i_sb());
        (
            inode,
            kread::load(inode, globals::inode_i_mode()),
            kread::load(sb, globals::sb_s_magic()),
        )
    };
    let class = match magic {
        PROC_SUPER_MAGIC => PROC,
        DEVPTS_SUPER_MAGIC => DEVPTS,
        MQUEUE_MAGIC => MQUEUE,
        // Decided here: `/dev/null` and `/dev/urandom` are opened all the time.
        // SAFETY: as above.
        _ if mode & S_IFMT == S_IFCHR
            && console(unsafe { kread::load(inode, globals::inode_i_rdev()) }) =>
        {
            CONSOLE
        }
        _ => return None,
    };
    (judge(file, class | u32::from(mode) << 8, u32::from(writes)) != 0).then_some(-EACCES)
}

/// What `judge` is given: the file system or kind of file, with the inode's mode above.
const PROC: u32 = 1;
const DEVPTS: u32 = 2;
const MQUEUE: u32 = 3;
const CONSOLE: u32 = 4;

/// 1 to refuse (reported, or quietly), 0 to allow. A subprogram of scalars (BPF passes at
/// most five, and no aggregates): its exits merge here instead of multiplying
/// `file_open`'s states.
#[inline(never)]
fn judge(file: *const u8, class: u32, writes: u32) -> u32 {
    let Some(session) = gate::member_session() else {
        return 0;
    };
    let Some(inode) = kread::read::<*const u8>(file, globals::file_f_inode(), errsite::READ_INODE)
    else {
        return 0;
    };
    let writes = writes != 0;
    let detail = match class & 0xff {
        PROC => process_file(&session, file, inode, (class >> 8) as u16, writes),
        DEVPTS => pseudo_terminal(&session, file),
        MQUEUE => message_queue(inode),
        _ => Some(path_op::OUTSIDE_TERMINAL),
    };
    let Some(detail) = detail else {
        return 0;
    };
    if detail != QUIET {
        let op = if writes { op::WRITE } else { op::READ };
        guard::deny_file(&session, op, file, detail);
    }
    1
}

/// A procfs file of a process outside the session: refused, but for reads of directories
/// (listing `/proc`) and of [`READABLE`]; a read of `cmdline` quietly.
#[inline(always)]
fn process_file(
    session: &gate::Session,
    file: *const u8,
    inode: *const u8,
    mode: u16,
    writes: bool,
) -> Option<u32> {
    // Every procfs inode is the `vfs_inode` of a `proc_inode`; those of a process's
    // directory carry its `struct pid`, the rest (`/proc/meminfo`, `/proc/sys`) none.
    let base = inode.wrapping_sub(globals::proc_inode_vfs_inode());
    let pid = kread::read::<*const u8>(base, globals::proc_inode_pid(), errsite::READ_TASK)?;
    let task = first_task(pid)?;
    if gate::task_within(task, session.cgroup) {
        return None;
    }
    if writes {
        return Some(path_op::OUTSIDE_PROCESS);
    }
    if mode & S_IFMT == S_IFDIR {
        return None;
    }
    let words = name_words(file);
    // Word by word: an array comparison may become a `bcmp` call, which BPF has not.
    let is = |n: &[u64; 2]| n[0] == words[0] && n[1] == words[1];
    if READABLE.iter().any(is) {
        return None;
    }
    if is(&name(b"cmdline")) {
        return Some(QUIET);
    }
    Some(path_op::OUTSIDE_PROCESS)
}

/// A pseudo-terminal whose session is led by a process outside the session. A terminal
/// with no session yet (just made, or its leader gone) belongs to no one else.
#[inline(always)]
fn pseudo_terminal(session: &gate::Session, file: *const u8) -> Option<u32> {
    let dentry = dentry_of(file)?;
    // devpts keeps each terminal's `tty_struct` in its dentry (`devpts_pty_new`); `ptmx`
    // and the root have none.
    let tty = kread::read::<*const u8>(dentry, globals::dentry_d_fsdata(), errsite::READ_TASK)?;
    if tty.is_null() {
        return None;
    }
    let sid = kread::read::<*const u8>(tty, globals::tty_session(), errsite::READ_TASK)?;
    let leader = first_task(sid)?;
    if gate::task_within(leader, session.cgroup) {
        return None;
    }
    Some(path_op::OUTSIDE_TERMINAL)
}

/// A message queue of an IPC namespace other than the caller's: `carapace run` gives each
/// session its own, and `/dev/mqueue` shows the host's.
#[inline(always)]
fn message_queue(inode: *const u8) -> Option<u32> {
    let sb = kread::read::<*const u8>(inode, globals::inode_i_sb(), errsite::READ_TASK)?;
    let theirs = kread::read::<u64>(sb, globals::sb_s_fs_info(), errsite::READ_TASK)?;
    // SAFETY: helper call without arguments.
    let current = unsafe { bpf_get_current_task() } as *const u8;
    let nsproxy = kread::read::<*const u8>(current, globals::task_nsproxy(), errsite::READ_TASK)?;
    let ours = kread::read::<u64>(nsproxy, globals::nsproxy_ipc_ns(), errsite::READ_TASK)?;
    (theirs != ours).then_some(path_op::OUTSIDE_IPC)
}

/// Whether character device `rdev` is a terminal no session owns (its own is a
/// pseudo-terminal): virtual consoles and serial lines, the system console, and the
/// consoles' screen memory.
#[inline(always)]
fn console(rdev: u32) -> bool {
    let (major, minor) = (rdev >> 20, rdev & 0xf_ffff);
    major == TTY_MAJOR || major == VCS_MAJOR || (major == TTYAUX_MAJOR && minor == CONSOLE_MINOR)
}

/// The task a `struct pid` names first (`pid->tasks[PIDTYPE_PID]`), as a `task_struct *`;
/// `None` for no pid or a process already gone.
#[inline(always)]
fn first_task(pid: *const u8) -> Option<u64> {
    if pid.is_null() {
        return None;
    }
    let node = kread::read::<u64>(pid, globals::pid_tasks(), errsite::READ_TASK)?;
    if node == 0 {
        return None;
    }
    Some(node - globals::task_pid_links() as u64)
}

#[inline(always)]
fn dentry_of(file: *const u8) -> Option<*const u8> {
    let f_path = file.wrapping_add(globals::file_f_path());
    kread::read::<*const u8>(f_path, globals::path_dentry(), errsite::READ_INODE)
}

/// The file's name in two words, NUL-padded; a name of 16 bytes or more reads as none (no
/// name compared with is that long).
#[inline(always)]
fn name_words(file: *const u8) -> [u64; 2] {
    let Some(dentry) = dentry_of(file) else {
        return [0; 2];
    };
    let d_name = dentry.wrapping_add(globals::dentry_d_name());
    let Some(ptr) = kread::read::<*const u8>(d_name, globals::qstr_name(), errsite::READ_INODE)
    else {
        return [0; 2];
    };
    let mut buf = core::mem::MaybeUninit::uninit();
    let words = kread::zero_in_place::<2>(&mut buf);
    match kread::read_str(ptr, kread::bytes_of(words), errsite::READ_INODE) {
        // The count includes the NUL: 16 means the name was cut.
        Some(n) if n < 16 => *words,
        _ => [0; 2],
    }
}

/// A short name as `name_words` reads it.
const fn name(text: &[u8]) -> [u64; 2] {
    let mut bytes = [0u8; 16];
    let mut i = 0;
    while i < text.len() && i < 15 {
        bytes[i] = text[i];
        i += 1;
    }
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    let mut j = 0;
    while j < 8 {
        lo[j] = bytes[j];
        hi[j] = bytes[8 + j];
        j += 1;
    }
    [u64::from_ne_bytes(lo), u64::from_ne_bytes(hi)]
}
