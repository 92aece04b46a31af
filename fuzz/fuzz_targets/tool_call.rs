//! Arbitrary bytes as a tool call, the JSON an agent's hook or the gRPC `Evaluate` request
//! carries: parsing it, extracting its operations and judging them against the built-in
//! packs must never panic nor hang. Seeded with calls of every shape (`fuzz/seeds/`).
#![no_main]

use std::sync::LazyLock;

use carapace_policy::engine::{self, Activation, Context, ToolCall};
use carapace_policy::rules::RuleSet;
use libfuzzer_sys::fuzz_target;

static RULES: LazyLock<RuleSet> =
    LazyLock::new(|| RuleSet::builtin(&carapace::policy_host::options()));

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(call) = ToolCall::from_json(&value) else {
        return;
    };
    let ctx = Context {
        cwd: "/home/fuzz/project".into(),
        home: "/home/fuzz".into(),
        env: vec![("HOME".into(), "/home/fuzz".into())],
        host: None,
    };
    let _ = engine::check(&RULES, &call, &ctx, &Activation::default());
});
