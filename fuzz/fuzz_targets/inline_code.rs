//! Arbitrary text as inline code of an interpreter (`python3 -c`, `node -e`, `perl -e`,
//! `ruby -e`, `php -r`, `awk`, `lua -e`), the first byte choosing which: the expression evaluator
//! (`engine::shell::code_eval`) must neither panic nor hang, and work past its limit must
//! fail closed with its own message, never as an analyser fault.
#![no_main]

use carapace_policy::engine::{shell, Context, Extracted};
use libfuzzer_sys::fuzz_target;

const RUNNERS: [&str; 7] = [
    "python3 -c",
    "node -e",
    "perl -e",
    "ruby -e",
    "php -r",
    "awk",
    "lua -e",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, code)) = data.split_first() else {
        return;
    };
    let Ok(code) = std::str::from_utf8(code) else {
        return;
    };
    let runner = RUNNERS[usize::from(pick) % RUNNERS.len()];
    let command = format!("{runner} '{}'", code.replace('\'', "'\\''"));
    let ctx = Context {
        cwd: "/home/fuzz/project".into(),
        home: "/home/fuzz".into(),
        env: Vec::new(),
        host: None,
    };
    let mut out = Extracted::new("Bash");
    shell::extract(&command, &ctx, &mut out);
    assert!(
        !out.unparsable.iter().any(|u| u.contains("took longer")
            || u.contains("still stuck")
            || u.contains("analyser fault")),
        "{:?}",
        out.unparsable
    );
});
