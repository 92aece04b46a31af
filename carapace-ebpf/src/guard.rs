//! The self-protection guards' common verdict: an event under the `self-protection` rule
//! and -EACCES. These guards hold in every session whatever the rule file says: an agent
//! that could signal or trace the daemon, use `bpf()`, mount, load modules or leave its
//! cgroup could switch the kernel floor off.

use aya_ebpf::{bindings::path, helpers::generated::bpf_d_path};
use carapace_common::{errsite, subject, PATH_MAX, RULE_SELF_PROTECTION};

use crate::{
    event::{self, Subject},
    gate::Session,
    globals,
    maps::{count_error, SCRATCH},
    matcher::Verdict,
    EACCES,
};

/// Reports `op` on `subject` and returns the hook's denial.
#[inline(always)]
pub fn deny(session: &Session, op: u32, subject: &Subject<'_>) -> i32 {
    let verdict = Verdict {
        rule: RULE_SELF_PROTECTION,
        op,
    };
    // A guard's pseudo-rule is never shadowed (`event::emit`): the denial stands.
    event::emit(session, verdict, subject);
    -EACCES
}

/// Reports `op` on the file `file` (a trusted `struct file *`) by its path, with the
/// `path_op` `detail`, and returns the hook's denial.
#[inline(always)]
pub fn deny_file(session: &Session, op: u32, file: *const u8, detail: u32) -> i32 {
    let mut ev = Subject::bare(subject::PATH, detail);
    if let Some(ptr) = SCRATCH.get_ptr_mut(0) {
        // SAFETY: per-CPU scratch; programs do not nest on one CPU for these hooks.
        let scratch = unsafe { &mut *ptr };
        let f_path = file.wrapping_add(globals::file_f_path());
        // SAFETY: f_path is `&file->f_path` of a trusted file; the buffer holds PATH_MAX
        // bytes.
        let n = unsafe {
            bpf_d_path(
                f_path as *mut path,
                scratch.key.data.as_mut_ptr().cast(),
                PATH_MAX as u32,
            )
        };
        // No zeroing of the bytes past the path: the event's reader stops at the NUL
        // bpf_d_path writes, and that loop, explored once per exit of the callers' walks,
        // took 6.1's verifier past its limit (E2BIG).
        if n > 0 && n as usize <= PATH_MAX {
            ev.path = Some(&scratch.key.data);
        } else {
            count_error(errsite::D_PATH);
        }
    }
    deny(session, op, &ev)
}
