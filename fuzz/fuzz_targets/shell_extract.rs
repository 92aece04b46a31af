//! Arbitrary text as a Bash tool call's command: the extractor must neither panic, hang nor
//! overflow its stack (it would fail closed on the first two; here they are findings), and
//! must never report a copy or move (they are split into parts).
#![no_main]

use carapace_policy::engine::{shell, Context, Extracted};
use carapace_policy::rules::Action;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(command) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = Context {
        cwd: "/home/fuzz/project".into(),
        home: "/home/fuzz".into(),
        env: vec![("USER".into(), "fuzz".into())],
        host: None,
    };
    let mut out = Extracted::new("Bash");
    shell::extract(command, &ctx, &mut out);
    assert!(out
        .ops
        .iter()
        .all(|op| !matches!(op.action, Some(Action::Copy | Action::Move))));
    // The extractor fails closed on a parser hang or panic; here either is a finding.
    assert!(
        !out.unparsable.iter().any(|u| u.contains("took longer")
            || u.contains("still stuck")
            || u.contains("analyser fault")),
        "{:?}",
        out.unparsable
    );
});
