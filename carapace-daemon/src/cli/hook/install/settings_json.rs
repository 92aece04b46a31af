//! Hooks in a settings.json, the shape Claude Code and Gemini CLI share:
//! `{"hooks": {EVENT: [{"matcher": M, "hooks": [{"type": "command", "command": C}]}]}}`,
//! and Copilot CLI's, whose event lists hold the handlers themselves:
//! `{"hooks": {EVENT: [{"type": "command", "bash": C}]}}`.
//! Every other key and entry is kept as it was (`serde_json` writes object keys in sorted
//! order, which both agents ignore); a file that is not a JSON object is never rewritten.
use anyhow::Context as _;
use serde_json::{json, Map, Value};

use super::{is_ours, Hook, Layout};

fn parse(text: &str) -> anyhow::Result<Map<String, Value>> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(text).context("it is not valid JSON (comments included)")? {
        Value::Object(map) => Ok(map),
        _ => anyhow::bail!("it is not a JSON object"),
    }
}

fn print(settings: Map<String, Value>) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(&Value::Object(settings))? + "\n")
}

/// Whether an entry of an event's list runs Carapace's hook: is its handler, or is a
/// matcher group holding it.
fn runs_ours(entry: &Value, marker: &str) -> bool {
    handler_is_ours(entry, marker) || handlers(entry).iter().any(|h| handler_is_ours(h, marker))
}

fn handlers(group: &Value) -> &[Value] {
    group
        .get("hooks")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn handler_is_ours(handler: &Value, marker: &str) -> bool {
    ["command", "bash"].iter().any(|k| {
        handler
            .get(*k)
            .and_then(Value::as_str)
            .is_some_and(|c| is_ours(c, marker))
    })
}

pub(super) fn merge(text: &str, hook: &Hook<'_>) -> anyhow::Result<Option<String>> {
    let mut settings = parse(text)?;
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .context("its `hooks` is not an object")?;
    let mut changed = false;
    for (event, matcher) in hook.events {
        let list = hooks
            .entry(*event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .with_context(|| format!("its `hooks.{event}` is not a list"))?;
        if list.iter().any(|g| runs_ours(g, hook.marker)) {
            continue;
        }
        let mut handler = match hook.layout {
            Layout::Grouped => json!({ "type": "command", "command": hook.command }),
            Layout::Flat => json!({ "type": "command", "bash": hook.command }),
        };
        if let Some((key, value)) = hook.timeout {
            handler[key] = json!(value);
        }
        let entry = match hook.layout {
            Layout::Grouped => {
                let mut group = json!({ "hooks": [handler] });
                if let Some(m) = matcher {
                    group["matcher"] = json!(m);
                }
                group
            }
            Layout::Flat => handler,
        };
        list.push(entry);
        changed = true;
    }
    changed.then(|| print(settings)).transpose()
}

/// Takes out every handler of Carapace's hook, then each group, event list and `hooks`
/// object that only held it.
pub(super) fn remove(text: &str, marker: &str) -> anyhow::Result<Option<String>> {
    let mut settings = parse(text)?;
    let Some(hooks) = settings.get_mut("hooks").and_then(Value::as_object_mut) else {
        return Ok(None);
    };
    let mut changed = false;
    let events: Vec<String> = hooks.keys().cloned().collect();
    for event in events {
        let Some(list) = hooks.get_mut(&event).and_then(Value::as_array_mut) else {
            continue;
        };
        let before = list.len();
        list.retain(|entry| !handler_is_ours(entry, marker));
        changed |= list.len() < before;
        for group in list.iter_mut().filter(|g| runs_ours(g, marker)) {
            if let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                handlers.retain(|h| !handler_is_ours(h, marker));
                changed = true;
            }
        }
        list.retain(|g| !(g.get("hooks").is_some() && handlers(g).is_empty()));
        if list.is_empty() && before > 0 {
            hooks.remove(&event);
        }
    }
    if !changed {
        return Ok(None);
    }
    if hooks.is_empty() {
        settings.remove("hooks");
    }
    print(settings).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOOK: Hook<'static> = Hook {
        events: &[("PreToolUse", Some("*")), ("UserPromptSubmit", None)],
        layout: Layout::Grouped,
        trust_file: None,
        timeout: None,
        command: "/usr/bin/carapace hook claude-code",
        marker: "hook claude-code",
    };

    fn value(text: &str) -> Value {
        serde_json::from_str(text).unwrap()
    }

    const EXISTING: &str = r#"{"model":"x","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"other"}]}],"Stop":[]},"env":{"A":"1"}}"#;

    #[test]
    fn merges_into_an_existing_file_and_is_idempotent() {
        let merged = merge(EXISTING, &HOOK).unwrap().expect("changed");
        assert_eq!(merge(&merged, &HOOK).unwrap(), None, "second install");
        let v = value(&merged);
        assert_eq!(v["model"], "x");
        assert_eq!(v["env"], json!({"A": "1"}));
        assert_eq!(v["hooks"]["Stop"], json!([]));
        let pre = v["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0]["hooks"][0]["command"], "other");
        assert_eq!(pre[1]["matcher"], "*");
        assert_eq!(pre[1]["hooks"][0]["command"], HOOK.command);
        let prompt = v["hooks"]["UserPromptSubmit"].as_array().unwrap();
        assert_eq!(prompt.len(), 1);
        assert!(prompt[0].get("matcher").is_none());
    }

    #[test]
    fn uninstall_gives_back_the_original() {
        // An empty `hooks` object (or event list) the user had is indistinguishable from
        // one Carapace emptied: it goes too, the one way the round trip is not exact.
        for (original, after) in [
            (EXISTING, EXISTING),
            ("{}", "{}"),
            ("", "{}"),
            (r#"{"hooks":{}}"#, "{}"),
        ] {
            let merged = merge(original, &HOOK).unwrap().expect("changed");
            let removed = remove(&merged, HOOK.marker).unwrap().expect("changed");
            assert_eq!(value(&removed), value(after), "{original}");
            assert_eq!(remove(&removed, HOOK.marker).unwrap(), None);
        }
    }

    #[test]
    fn uninstall_keeps_a_users_handler_sharing_the_group() {
        let shared = r#"{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[
            {"type":"command","command":"carapace hook claude-code --local"},
            {"type":"command","command":"audit.sh"}]}]}}"#;
        let removed = value(
            &remove(shared, "hook claude-code")
                .unwrap()
                .expect("changed"),
        );
        assert_eq!(
            removed,
            json!({"hooks":{"PreToolUse":[{"matcher":"*","hooks":[
                {"type":"command","command":"audit.sh"}]}]}})
        );
        // Another agent's Carapace hook is not this one.
        assert_eq!(remove(shared, "hook gemini").unwrap(), None);
    }

    #[test]
    fn never_rewrites_what_it_cannot_read() {
        for bad in [
            "{ broken",
            "[1]",
            r#"{"hooks": []}"#,
            r#"{"hooks": {"PreToolUse": {}}}"#,
            "// a comment\n{}",
        ] {
            assert!(merge(bad, &HOOK).is_err(), "{bad}");
        }
        assert!(remove("{ broken", "hook claude-code").is_err());
    }

    #[test]
    fn copilot_handlers_sit_in_the_event_list_itself() {
        const COPILOT: Hook<'static> = Hook {
            events: &[("preToolUse", None)],
            layout: Layout::Flat,
            trust_file: None,
            timeout: None,
            command: "/usr/bin/carapace hook copilot",
            marker: "hook copilot",
        };
        let existing = r#"{"banner":"never","hooks":{"preToolUse":[
            {"type":"command","bash":"./audit.sh","timeoutSec":10}],
            "sessionStart":[{"type":"prompt","prompt":"/status"}]}}"#;
        let merged = merge(existing, &COPILOT).unwrap().expect("changed");
        assert_eq!(merge(&merged, &COPILOT).unwrap(), None, "second install");
        let v = value(&merged);
        assert_eq!(
            v["hooks"]["preToolUse"],
            json!([{"type": "command", "bash": "./audit.sh", "timeoutSec": 10},
                   {"type": "command", "bash": "/usr/bin/carapace hook copilot"}])
        );
        let removed = remove(&merged, COPILOT.marker).unwrap().expect("changed");
        assert_eq!(value(&removed), value(existing));
        assert_eq!(remove(&removed, COPILOT.marker).unwrap(), None);
    }

    /// A user's settings: other keys, and hooks of their own in both layouts (never empty
    /// lists: an emptied one is pruned on uninstall, see above).
    fn arb_settings() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let command = "[a-z./ -]{1,12}".prop_map(|c| format!("user-{c}"));
        let handler = command.prop_map(|c| json!({"type": "command", "command": c}));
        let group = (
            prop::option::of("[*.a-zA-Z]{1,6}"),
            prop::collection::vec(handler, 1..3),
        )
            .prop_map(|(m, hooks)| {
                let mut g = json!({ "hooks": hooks });
                if let Some(m) = m {
                    g["matcher"] = json!(m);
                }
                g
            });
        let event = prop::sample::select(vec!["PreToolUse", "Stop", "BeforeTool", "preToolUse"]);
        let hooks = prop::collection::btree_map(event, prop::collection::vec(group, 1..3), 1..3);
        let other = prop::collection::btree_map("[a-z]{1,8}", "[ -~]{0,8}", 0..4);
        (prop::option::of(hooks), other).prop_map(|(hooks, other)| {
            let mut v = json!({});
            for (k, val) in other {
                v[k] = json!(val);
            }
            if let Some(hooks) = hooks {
                v["hooks"] = json!(hooks);
            }
            v
        })
    }

    proptest::proptest! {
        /// Install then uninstall gives back any settings file, and a second install or
        /// uninstall changes nothing.
        #[test]
        fn uninstall_undoes_install(settings in arb_settings()) {
            let text = settings.to_string();
            let merged = merge(&text, &HOOK).unwrap().expect("changed");
            proptest::prop_assert_eq!(merge(&merged, &HOOK).unwrap(), None);
            let removed = remove(&merged, HOOK.marker).unwrap().expect("changed");
            proptest::prop_assert_eq!(value(&removed), settings);
            proptest::prop_assert_eq!(remove(&removed, HOOK.marker).unwrap(), None);
        }

        /// Whatever the file holds, the installer answers (an edit or a refusal).
        #[test]
        fn any_text_is_handled_without_panicking(text in ".{0,64}") {
            let _ = merge(&text, &HOOK);
            let _ = remove(&text, HOOK.marker);
        }
    }
}
