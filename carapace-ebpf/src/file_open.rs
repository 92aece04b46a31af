//! `file_open`: every open of a file by a session's process — reads and writes by `f_mode`,
//! and the opens the kernel does to execute a binary or its interpreter (`FMODE_EXEC`) — and
//! the cgroup-escape guard on write opens (`cgroup_escape`). One program for both: each
//! program on a hook costs its own trampoline entry and exit on every open of every process.

use aya_ebpf::{
    bindings::path,
    helpers::generated::{bpf_d_path, bpf_probe_read_kernel_str},
    macros::lsm,
    programs::LsmContext,
};
use carapace_common::{
    errsite, has, op, path_op, subject, Config, FMODE_EXEC, FMODE_READ, FMODE_WRITE, NAME_MAX,
    O_ACCMODE, O_TRUNC, PATH_MAX, RULE_PATH_TOO_LONG,
};

use crate::{
    cgroup_escape,
    event::{self, Subject},
    gate::{self, Session},
    globals, inode, kread,
    maps::{count_error, CONFIG, SCRATCH},
    matcher::{self, Object, PathSubject, Verdict},
    outside, path_cache, touched, EACCES,
};

#[lsm(hook = "file_open")]
pub fn file_open(ctx: LsmContext) -> i32 {
    let previous: i32 = ctx.arg(1);
    if previous != 0 {
        return previous;
    }
    crate::verdict(try_file_open(&ctx))
}

fn try_file_open(ctx: &LsmContext) -> Option<i32> {
    if !gate::in_session() {
        return None;
    }
    let file: *const u8 = ctx.arg(0);
    // SAFETY: the hook's `struct file *`, offsets from BTF.
    let (f_mode, f_flags): (u32, u32) = unsafe {
        (
            kread::load(file, globals::file_f_mode()),
            kread::load(file, globals::file_f_flags()),
        )
    };
    // Access mode 3 opens for ioctls only, with neither FMODE_READ nor FMODE_WRITE: ioctls
    // read (`FS_IOC_GETFLAGS`) and change (`FS_IOC_SETFLAGS`) the file, so it is judged as
    // both. `O_TRUNC` truncates whatever the access mode (`open(O_RDONLY | O_TRUNC)`
    // empties a file the caller may write): a write.
    let ioctl_only = f_flags & O_ACCMODE == O_ACCMODE;
    let writes = f_mode & FMODE_WRITE != 0 || f_flags & O_TRUNC != 0 || ioctl_only;
    // Before the rules and the path cache: a process outside the session is out of reach
    // whatever the rules say.
    if let Some(denied) = outside::check(file, writes) {
        return Some(denied);
    }
    // Before the rules' own checks: a session whose rules name no path still cannot leave.
    let mut session = None;
    if f_mode & FMODE_WRITE != 0 {
        let member = gate::member_session()?;
        if cgroup_escape::check(&member, file).is_some() {
            return Some(-EACCES);
        }
        session = Some(member);
    }
    let mut ops = 0;
    if f_mode & FMODE_READ != 0 || ioctl_only {
        ops |= op::READ;
    }
    if writes {
        ops |= op::WRITE;
    }
    if f_mode & FMODE_EXEC != 0 {
        ops |= op::EXEC;
    }
    let config = CONFIG.get(0)?;
    let denied = judge_open(file, ops, session, config);
    // A record session reports what it was allowed to open (`touched`).
    if denied.is_none() && ops != 0 {
        if let Some(recording) = touched::recording(config) {
            touched::open(recording.cgroup, recording.state.session, file, ops);
        }
    }
    denied
}

/// The rules' answer to an open of `file` for `ops`: the path cache, then the path checks.
/// `session` when the caller already looked it up.
#[inline(always)]
fn judge_open(file: *const u8, ops: u32, session: Option<Session>, config: &Config) -> Option<i32> {
    if ops & config.path_rule_ops == 0 {
        return None;
    }
    let scratch = SCRATCH.get_ptr_mut(0)?;
    // Identified before the check: a rename or mount change during it spoils the entry.
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let probe = unsafe { &mut (*scratch).probe };
    let cacheable = path_cache::identify(file, probe);
    if cacheable && path_cache::is_clean(probe) {
        return None;
    }
    let session = match session {
        Some(s) => s,
        None => gate::member_session()?,
    };
    let denied = check_file(&session, file, ops);
    // SAFETY: as above; `check_file` left what its lookups found in the scratch. Refs of
    // rules of no file operation (a `unix: outside-session` rule's root prefix, on every
    // path) leave the path clean for opens.
    let (found_ops, complete) = unsafe { ((*scratch).found_ops, (*scratch).complete) };
    if denied.is_none() && cacheable && found_ops & FILE_OPS == 0 && complete != 0 {
        // SAFETY: as above.
        path_cache::remember_clean(unsafe { &(*scratch).probe });
    }
    denied
}

/// What an open can be judged as, whatever the session's state: a ref of none of these
/// never denies an open.
const FILE_OPS: u32 = op::READ | op::WRITE | op::EXEC | op::DELETE;

/// Judges `ops` on `file` (a `struct file *` the hook received or reached through a trusted
/// pointer, as `bpf_d_path` requires); `Some(-EACCES)` to deny.
#[inline(always)]
pub fn check_file(session: &Session, file: *const u8, ops: u32) -> Option<i32> {
    let config = CONFIG.get(0)?;
    let ops = ops & config.path_rule_ops;
    if ops == 0 {
        return None;
    }
    // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
    let scratch = unsafe { &mut *SCRATCH.get_ptr_mut(0)? };
    let f_path = file.wrapping_add(globals::file_f_path());
    // SAFETY: f_path is `&file->f_path` (offset from BTF), the buffer is PATH_MAX bytes.
    let n = unsafe {
        bpf_d_path(
            f_path as *mut path,
            scratch.raw.as_mut_ptr().cast(),
            PATH_MAX as u32,
        )
    };
    // `bpf_d_path` leaves bytes of its own after the NUL, which would spoil the hash and LPM
    // keys: the path is copied into the zeroed key instead. A helper call, where a loop
    // clearing the tail was explored by the verifier once per path length.
    kread::zero_words(&mut scratch.key.data);
    let copied = if n > 0 && n as usize <= PATH_MAX {
        // SAFETY: both buffers are PATH_MAX bytes of the per-CPU scratch.
        unsafe {
            bpf_probe_read_kernel_str(
                scratch.key.data.as_mut_ptr().cast(),
                PATH_MAX as u32,
                scratch.raw.as_ptr().cast(),
            )
        }
    } else {
        0
    };
    if copied <= 0 || copied as usize > PATH_MAX {
        // Too long to match (or unresolvable): deny rather than let it slip past the rules.
        count_error(errsite::D_PATH);
        let verdict = Verdict {
            rule: RULE_PATH_TOO_LONG,
            op: ops & ops.wrapping_neg(),
        };
        deny(session, verdict, &scratch.key.data);
        return Some(-EACCES);
    }
    let len = strip_deleted(&mut scratch.key.data, copied as usize - 1) & (PATH_MAX - 1);

    // The reads feeding a lookup only when its map holds entries. A lookup skipped because
    // its read failed makes the verdict unfit for the path cache.
    let want_name = config.has & has::NAMES != 0;
    let has_name = want_name && read_basename(f_path, &mut scratch.name);
    let inode = if config.has & has::INODES != 0 {
        inode::of_file(file)
    } else {
        None
    };
    scratch.complete =
        u32::from(has_name == want_name && (inode.is_some() || config.has & has::INODES == 0));
    let mut subject = PathSubject {
        scratch,
        len,
        has_name,
        inode,
        ancestors: false,
        live: false,
        object: Object::File(file),
    };
    let verdict = matcher::check_path(&mut subject, config, ops)?;
    event::denial(deny(session, verdict, &subject.scratch.key.data))
}

/// What `d_path` appends to the path of a file whose name was removed (an unlinked file
/// still open, reopened through `/proc/PID/fd`).
const DELETED: &[u8; 10] = b" (deleted)";

/// `len` less the ` (deleted)` suffix, which is zeroed: the file is judged by the name it
/// had, or a pattern anchored at the end (`re:…$`, an exact path) would miss it. A file
/// really named so is judged as its name without the suffix, which can only refuse more.
/// A subprogram returning a scalar: its branches do not multiply the matcher's states.
#[inline(never)]
fn strip_deleted(path: &mut [u8; PATH_MAX], len: usize) -> usize {
    let len = len & (PATH_MAX - 1);
    if len <= DELETED.len() || path[(len - 1) & (PATH_MAX - 1)] != b')' {
        return len;
    }
    let start = len - DELETED.len();
    for (i, b) in DELETED.iter().enumerate() {
        if path[(start + i) & (PATH_MAX - 1)] != *b {
            return len;
        }
    }
    for i in 0..DELETED.len() {
        path[(start + i) & (PATH_MAX - 1)] = 0;
    }
    start
}

/// Reports the denial of an open; true when it stands (see `event::emit`).
fn deny(session: &Session, verdict: Verdict, path: &[u8; PATH_MAX]) -> bool {
    let subject = Subject::named(subject::PATH, Some(path), path_op::OPEN);
    event::emit(session, verdict, &subject)
}

/// The dentry's name: cheaper than scanning the path for its last '/'.
#[inline(always)]
fn read_basename(f_path: *const u8, name: &mut [u8; NAME_MAX]) -> bool {
    if let Some(dentry) =
        kread::read::<*const u8>(f_path, globals::path_dentry(), errsite::READ_INODE)
    {
        inode::name_of(dentry, name)
    } else {
        kread::zero_words(name);
        false
    }
}
