//! The self-protection guards' common verdict: an event under the `self-protection` rule
//! and -EACCES. These guards hold in every session whatever the rule file says: an agent
//! that could signal or trace the daemon, use `bpf()`, mount, load modules or leave its
//! cgroup could switch the kernel floor off.

use carapace_common::RULE_SELF_PROTECTION;

use crate::{
    event::{self, Subject},
    gate::Session,
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
    event::emit(session, verdict, subject);
    -EACCES
}
