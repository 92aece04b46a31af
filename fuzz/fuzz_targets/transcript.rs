//! Arbitrary text as a transcript (Layer 0) and as a tool call (Layer 1): parsing, extraction
//! and evaluation against the built-in packs must never panic or hang, whatever the input.
#![no_main]

use std::sync::OnceLock;

use carapace_policy::engine::{self, Activation, Context, ToolCall};
use carapace_policy::rules::RuleSet;
use libfuzzer_sys::fuzz_target;

fn rules() -> &'static RuleSet {
    static RULES: OnceLock<RuleSet> = OnceLock::new();
    RULES.get_or_init(|| RuleSet::builtin(&carapace::policy_host::options()))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = Context {
        cwd: "/home/fuzz/project".into(),
        home: "/home/fuzz".into(),
        env: Vec::new(),
        host: None,
    };
    let act = Activation::default();
    let report = engine::scan_history(rules(), text, &ctx, &act);
    assert!(report.findings.len() <= report.tool_calls + 1);
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        if let Ok(call) = ToolCall::from_json(&value) {
            let d = engine::check(rules(), &call, &ctx, &act);
            // Every decision explains itself.
            assert!(!d.message.is_empty());
        }
    }
});
