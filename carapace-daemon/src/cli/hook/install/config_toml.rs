//! Hooks in Codex's config.toml: `[[hooks.EVENT]]` matcher groups, each with
//! `[[hooks.EVENT.hooks]]` handlers `{type = "command", command = …}` (or the same as inline
//! arrays). Edited with `toml_edit`, so the user's comments, order and layout stay as they
//! were; a file that does not parse is never rewritten.
//!
//! Codex runs a config.toml hook only once the user trusted it, and records that trust in
//! the user's config.toml: `[hooks.state."FILE:pre_tool_use:GROUP:HANDLER"]` with
//! `trusted_hash`, the sha256 of the handler's normalized identity (read from Codex 0.169's
//! `hooks/list`, which reports each hook's `currentHash`). Installing the hook is the user's
//! consent, so the installer records the trust Codex would record after `/hooks`; a Codex
//! that hashes differently sees a "modified" hook and skips it, as it would an untrusted one.
//! The key is the group's position: the group is appended after the user's, so installing or
//! removing it moves none of theirs.
use anyhow::Context as _;
use sha2::{Digest as _, Sha256};
use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, TableLike};

use super::{is_ours, Hook};
use carapace::audit::record::hex;

/// Codex's default handler timeout, part of the identity it hashes.
const CODEX_DEFAULT_TIMEOUT_SECS: u64 = 600;

/// Codex's label of an event in trust keys: `PreToolUse` → `pre_tool_use`.
fn event_label(event: &str) -> String {
    let mut label = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            label.push('_');
        }
        label.push(c.to_ascii_lowercase());
    }
    label
}

/// Where Codex looks up the trust of handler 0 of group `group` of `event` in `file`.
fn trust_key(file: &str, event: &str, group: usize) -> String {
    format!("{file}:{}:{group}:0", event_label(event))
}

/// The hash Codex computes for the group Carapace adds (one handler, `type`, `command` and
/// perhaps `timeout`, Codex's defaults for the rest): sha256 of the identity as compact JSON, keys sorted.
fn trusted_hash(event: &str, matcher: Option<&str>, command: &str, timeout: Option<u64>) -> String {
    // Written key by key in sorted order, whatever map type serde_json is built with.
    let mut identity = serde_json::Map::new();
    identity.insert("event_name".into(), event_label(event).into());
    let mut handler = serde_json::Map::new();
    handler.insert("async".into(), false.into());
    handler.insert("command".into(), command.into());
    handler.insert(
        "timeout".into(),
        timeout.unwrap_or(CODEX_DEFAULT_TIMEOUT_SECS).into(),
    );
    handler.insert("type".into(), "command".into());
    identity.insert(
        "hooks".into(),
        serde_json::Value::Array(vec![handler.into()]),
    );
    if let Some(m) = matcher {
        identity.insert("matcher".into(), m.into());
    }
    let text = serde_json::Value::Object(identity).to_string();
    format!("sha256:{}", hex(&Sha256::digest(text.as_bytes())))
}

fn parse(text: &str) -> anyhow::Result<DocumentMut> {
    text.parse().context("it is not valid TOML")
}

/// The commands of a matcher group's handlers, in either spelling.
fn commands(group: &dyn TableLike) -> Vec<&str> {
    let Some(hooks) = group.get("hooks") else {
        return Vec::new();
    };
    if let Some(tables) = hooks.as_array_of_tables() {
        tables
            .iter()
            .filter_map(|t| t.get("command").and_then(Item::as_str))
            .collect()
    } else if let Some(array) = hooks.as_array() {
        array
            .iter()
            .filter_map(|v| v.as_inline_table()?.get("command")?.as_str())
            .collect()
    } else {
        Vec::new()
    }
}

fn runs_ours(group: &dyn TableLike, marker: &str) -> bool {
    commands(group).iter().any(|c| is_ours(c, marker))
}

pub(super) fn merge(text: &str, hook: &Hook<'_>) -> anyhow::Result<Option<String>> {
    let mut doc = parse(text)?;
    let hooks = doc.entry("hooks").or_insert_with(|| {
        // `[hooks]` itself stays unwritten: only its `[[hooks.EVENT]]` tables appear.
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let hooks = hooks
        .as_table_like_mut()
        .context("its `hooks` is not a table")?;
    let mut changed = false;
    // (event, matcher, group index, (command, timeout)) of Carapace's group in each
    // event's list.
    let mut trusted = Vec::new();
    for (event, matcher) in hook.events {
        let list = hooks
            .entry(event)
            .or_insert(Item::ArrayOfTables(ArrayOfTables::new()));
        if let Some(groups) = list.as_array_of_tables_mut() {
            if let Some(i) = groups.iter().position(|g| runs_ours(g, hook.marker)) {
                let ours = groups.get(i).map(|g| our_handler(g, hook.marker));
                trusted.push((event, *matcher, i, ours.unwrap_or_default()));
                continue;
            }
            trusted.push((event, *matcher, groups.len(), new_handler(hook)));
            let mut handler = Table::new();
            handler["type"] = value("command");
            handler["command"] = value(hook.command);
            if let Some((key, secs)) = hook.timeout {
                handler[key] = value(i64::try_from(secs).unwrap_or(i64::MAX));
            }
            let mut handlers = ArrayOfTables::new();
            handlers.push(handler);
            let mut group = Table::new();
            if let Some(m) = matcher {
                group["matcher"] = value(*m);
            }
            group.insert("hooks", Item::ArrayOfTables(handlers));
            groups.push(group);
        } else if let Some(groups) = list.as_array_mut() {
            let ours = groups.iter().position(|g| {
                g.as_inline_table()
                    .is_some_and(|t| runs_ours(t, hook.marker))
            });
            if let Some(i) = ours {
                let ours = groups
                    .get(i)
                    .and_then(toml_edit::Value::as_inline_table)
                    .map(|t| our_handler(t, hook.marker));
                trusted.push((event, *matcher, i, ours.unwrap_or_default()));
                continue;
            }
            trusted.push((event, *matcher, groups.len(), new_handler(hook)));
            let mut handler = InlineTable::new();
            handler.insert("type", "command".into());
            handler.insert("command", hook.command.into());
            if let Some((key, secs)) = hook.timeout {
                handler.insert(key, i64::try_from(secs).unwrap_or(i64::MAX).into());
            }
            let mut handlers = Array::new();
            handlers.push(handler);
            let mut group = InlineTable::new();
            if let Some(m) = matcher {
                group.insert("matcher", (*m).into());
            }
            group.insert("hooks", handlers.into());
            groups.push(group);
        } else {
            anyhow::bail!("its `hooks.{event}` is not a list of tables");
        }
        changed = true;
    }
    if let Some(file) = hook.trust_file {
        for (event, matcher, group, handler) in trusted {
            let (command, timeout) = handler;
            let hash = trusted_hash(event, matcher, &command, timeout);
            changed |= set_trust(hooks, &trust_key(file, event, group), &hash)?;
        }
    }
    Ok(changed.then(|| doc.to_string()))
}

/// The command and timeout of the handler this install adds.
fn new_handler(hook: &Hook<'_>) -> (String, Option<u64>) {
    (hook.command.to_owned(), hook.timeout.map(|(_, secs)| secs))
}

/// The command and timeout of Carapace's handler in `group`.
fn our_handler(group: &dyn TableLike, marker: &str) -> (String, Option<u64>) {
    let read = |command: Option<&str>, timeout: Option<i64>| {
        let command = command.filter(|c| is_ours(c, marker))?;
        Some((
            command.to_owned(),
            timeout.and_then(|t| u64::try_from(t).ok()),
        ))
    };
    let Some(hooks) = group.get("hooks") else {
        return (String::new(), None);
    };
    let found = if let Some(tables) = hooks.as_array_of_tables() {
        tables.iter().find_map(|t| {
            read(
                t.get("command").and_then(Item::as_str),
                t.get("timeout").and_then(Item::as_integer),
            )
        })
    } else {
        hooks.as_array().and_then(|a| {
            a.iter()
                .filter_map(toml_edit::Value::as_inline_table)
                .find_map(|t| {
                    read(
                        t.get("command").and_then(toml_edit::Value::as_str),
                        t.get("timeout").and_then(toml_edit::Value::as_integer),
                    )
                })
        })
    };
    found.unwrap_or_default()
}

/// Records `hash` as the trusted hash of `key` in `hooks.state`; whether that changed it.
fn set_trust(hooks: &mut dyn TableLike, key: &str, hash: &str) -> anyhow::Result<bool> {
    let state = hooks.entry("state").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let state = state
        .as_table_like_mut()
        .context("its `hooks.state` is not a table")?;
    let entry = state
        .entry(key)
        .or_insert_with(|| Item::Table(Table::new()));
    let entry = entry
        .as_table_like_mut()
        .with_context(|| format!("its `hooks.state.\"{key}\"` is not a table"))?;
    if entry.get("trusted_hash").and_then(Item::as_str) == Some(hash) {
        return Ok(false);
    }
    entry.insert("trusted_hash", value(hash));
    Ok(true)
}

/// Takes out every handler of Carapace's hook and the trust recorded for it (`trust_file`:
/// the config's path in Codex's trust keys), then each group, event list and table that
/// only held them.
pub(super) fn remove(
    text: &str,
    marker: &str,
    trust_file: Option<&str>,
) -> anyhow::Result<Option<String>> {
    let mut doc = parse(text)?;
    let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_like_mut) else {
        return Ok(None);
    };
    let mut changed = false;
    let mut trust_keys = Vec::new();
    let events: Vec<String> = hooks.iter().map(|(k, _)| k.to_owned()).collect();
    for event in events {
        let Some(list) = hooks.get_mut(&event) else {
            continue;
        };
        let emptied = if let Some(groups) = list.as_array_of_tables_mut() {
            if let Some(file) = trust_file {
                trust_keys.extend(
                    groups
                        .iter()
                        .enumerate()
                        .filter(|(_, g)| runs_ours(*g, marker))
                        .map(|(i, _)| trust_key(file, &event, i)),
                );
            }
            for group in groups.iter_mut().filter(|g| runs_ours(*g, marker)) {
                changed = true;
                if let Some(handlers) = group.get_mut("hooks") {
                    retain_handlers(handlers, marker);
                }
            }
            groups.retain(|g| !(g.contains_key("hooks") && commands(g).is_empty()));
            groups.is_empty()
        } else if let Some(groups) = list.as_array_mut() {
            for (i, group) in groups
                .iter_mut()
                .enumerate()
                .filter_map(|(i, g)| Some((i, g.as_inline_table_mut()?)))
            {
                if runs_ours(group, marker) {
                    if let Some(file) = trust_file {
                        trust_keys.push(trust_key(file, &event, i));
                    }
                    changed = true;
                    if let Some(handlers) = group.get_mut("hooks") {
                        if let Some(array) = handlers.as_array_mut() {
                            array.retain(|h| !inline_is_ours(h, marker));
                        }
                    }
                }
            }
            groups.retain(|g| {
                g.as_inline_table()
                    .is_none_or(|t| !(t.contains_key("hooks") && commands(t).is_empty()))
            });
            groups.is_empty()
        } else {
            false
        };
        if emptied && changed {
            hooks.remove(&event);
        }
    }
    if !changed {
        return Ok(None);
    }
    if let Some(state) = hooks.get_mut("state").and_then(Item::as_table_like_mut) {
        for key in &trust_keys {
            state.remove(key);
        }
        if state.is_empty() {
            hooks.remove("state");
        }
    }
    if hooks.is_empty() {
        doc.remove("hooks");
    }
    Ok(Some(doc.to_string()))
}

fn inline_is_ours(handler: &toml_edit::Value, marker: &str) -> bool {
    handler
        .as_inline_table()
        .and_then(|t| t.get("command"))
        .and_then(toml_edit::Value::as_str)
        .is_some_and(|c| is_ours(c, marker))
}

fn retain_handlers(handlers: &mut Item, marker: &str) {
    if let Some(tables) = handlers.as_array_of_tables_mut() {
        tables.retain(|t| {
            !t.get("command")
                .and_then(Item::as_str)
                .is_some_and(|c| is_ours(c, marker))
        });
    } else if let Some(array) = handlers.as_array_mut() {
        array.retain(|h| !inline_is_ours(h, marker));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOOK: Hook<'static> = Hook {
        events: &[("PreToolUse", Some("*"))],
        layout: super::super::Layout::Grouped,
        command: "/usr/local/bin/carapace hook codex",
        marker: "hook codex",
        trust_file: None,
        timeout: None,
    };

    /// The file as Codex keys its trust.
    const FILE: &str = "/home/u/.codex/config.toml";

    const TRUSTED: Hook<'static> = Hook {
        trust_file: Some(FILE),
        ..HOOK
    };

    #[test]
    fn a_last_line_ending_in_a_comment_comes_back_with_its_line_break() {
        let text = "model = \"x\" # mine";
        let merged = merge(text, &TRUSTED).unwrap().unwrap();
        assert!(merged.starts_with("model = \"x\" # mine\n"), "{merged}");
        let removed = remove(&merged, TRUSTED.marker, TRUSTED.trust_file).unwrap();
        assert_eq!(removed.as_deref(), Some("model = \"x\" # mine\n"));
    }

    #[test]
    fn trust_is_recorded_as_codex_records_it() {
        // Codex 0.169's `hooks/list` reported this currentHash for this very group.
        assert_eq!(
            trusted_hash(
                "PreToolUse",
                Some("*"),
                "/usr/local/bin/carapace hook codex",
                None
            ),
            "sha256:5d906a19b96a38a7197a9e203ae417c1f6e8f21a48e438aa5c485a5e90875749"
        );
        let merged = merge(EXISTING, &TRUSTED).unwrap().expect("changed");
        assert_eq!(merge(&merged, &TRUSTED).unwrap(), None, "second install");
        let doc: DocumentMut = merged.parse().unwrap();
        // The user's group is 0; Carapace's, appended, is 1.
        let state = &doc["hooks"]["state"][&format!("{FILE}:pre_tool_use:1:0")];
        assert_eq!(
            state["trusted_hash"].as_str(),
            Some("sha256:5d906a19b96a38a7197a9e203ae417c1f6e8f21a48e438aa5c485a5e90875749")
        );
        let removed = remove(&merged, TRUSTED.marker, TRUSTED.trust_file)
            .unwrap()
            .expect("changed");
        assert_eq!(removed, EXISTING);
        // With a timeout (a hook that waits for approvals), Codex hashes it too.
        assert_eq!(
            trusted_hash(
                "PreToolUse",
                Some("*"),
                "/usr/local/bin/carapace hook codex --wait 120",
                Some(150)
            ),
            "sha256:f8495578e55b2bcdd3e460f7cbfdf8ed69d02ee087996995f3f8c2ac3fae98ad"
        );
        let waiting = Hook {
            command: "/usr/local/bin/carapace hook codex --wait 120",
            timeout: Some(("timeout", 150)),
            ..TRUSTED
        };
        let merged_waiting = merge("", &waiting).unwrap().expect("changed");
        assert!(
            merged_waiting.contains("\ntimeout = 150\n"),
            "{merged_waiting}"
        );
        assert!(
            merged_waiting.contains(
                "sha256:f8495578e55b2bcdd3e460f7cbfdf8ed69d02ee087996995f3f8c2ac3fae98ad"
            ),
            "{merged_waiting}"
        );
        assert_eq!(merge(&merged_waiting, &waiting).unwrap(), None);
        // A hook installed before trust was recorded gets it on the next install.
        let untrusted = merge(EXISTING, &HOOK).unwrap().expect("changed");
        let trusted = merge(&untrusted, &TRUSTED).unwrap().expect("trust added");
        assert_eq!(trusted, merged);
    }

    /// A config with comments, a provider, and a hook of the user's own.
    const EXISTING: &str = r#"# my Codex settings
model = "gpt-5.5" # the default model
approval_policy = "on-request"

[model_providers.local]
name = "local"   # aligned on purpose
base_url = "http://127.0.0.1:8080/v1"

# audit every command
[[hooks.PreToolUse]]
matcher = "^Bash$"

[[hooks.PreToolUse.hooks]]
type = "command"
command = "~/bin/audit.sh"

[analytics]
enabled = false
"#;

    #[test]
    fn merges_keeping_comments_and_is_idempotent() {
        let merged = merge(EXISTING, &HOOK).unwrap().expect("changed");
        assert_eq!(merge(&merged, &HOOK).unwrap(), None, "second install");
        // Everything the user wrote is still there, byte for byte.
        for line in EXISTING.lines() {
            assert!(merged.contains(line), "lost {line:?} in:\n{merged}");
        }
        let doc: DocumentMut = merged.parse().unwrap();
        let groups = doc["hooks"]["PreToolUse"].as_array_of_tables().unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(commands(groups.get(0).unwrap()), ["~/bin/audit.sh"]);
        let ours = groups.get(1).unwrap();
        assert_eq!(ours["matcher"].as_str(), Some("*"));
        assert_eq!(commands(ours), [HOOK.command]);
        assert_eq!(ours["hooks"][0]["type"].as_str(), Some("command"));
    }

    #[test]
    fn uninstall_gives_back_the_original_text() {
        for original in [
            EXISTING,
            "",
            "model = \"o3\"\n",
            "# nothing but a comment\n",
            "hooks = { PreToolUse = [{ matcher = \"Bash\", hooks = [{ type = \"command\", command = \"x\" }] }] }\n",
        ] {
            for hook in [HOOK, TRUSTED] {
                let merged = merge(original, &hook).unwrap().expect("changed");
                let removed = remove(&merged, hook.marker, hook.trust_file)
                    .unwrap()
                    .expect("changed");
                assert_eq!(removed, original, "merged:\n{merged}");
                assert_eq!(remove(&removed, hook.marker, hook.trust_file).unwrap(), None);
            }
        }
    }

    #[test]
    fn the_merged_hook_reads_as_codex_reads_it() {
        let merged = merge("", &HOOK).unwrap().expect("changed");
        assert_eq!(
            merged,
            "[[hooks.PreToolUse]]\nmatcher = \"*\"\n\n[[hooks.PreToolUse.hooks]]\n\
             type = \"command\"\ncommand = \"/usr/local/bin/carapace hook codex\"\n"
        );
        let inline = merge("hooks = { PreToolUse = [] }\n", &HOOK)
            .unwrap()
            .expect("changed");
        let doc: DocumentMut = inline.parse().unwrap();
        let group = doc["hooks"]["PreToolUse"][0].as_inline_table().unwrap();
        assert_eq!(commands(group), [HOOK.command]);
    }

    #[test]
    fn never_rewrites_what_it_cannot_read() {
        for bad in [
            "model = ",
            "hooks = 3",
            "hooks = { PreToolUse = 1 }",
            "[hooks]\nPreToolUse = \"x\"",
        ] {
            assert!(merge(bad, &HOOK).is_err(), "{bad}");
        }
        assert!(remove("[[x]", HOOK.marker, None).is_err());
    }

    proptest::proptest! {
        /// Whatever the file holds, the installer answers (an edit or a refusal), and an
        /// install it accepts is undone exactly by the uninstall.
        #[test]
        fn any_text_is_handled_and_uninstall_undoes_install(text in "[a-z\\[\\]=\"#. \\n]{0,64}") {
            if let Ok(Some(merged)) = merge(&text, &TRUSTED) {
                let removed = remove(&merged, TRUSTED.marker, TRUSTED.trust_file)
                    .ok()
                    .flatten();
                // A last line with no line break that ends in a comment (`a = 1 # x`) gets
                // one: the tables the install appends must start on a line of their own, and
                // the uninstall cannot tell that the break was not there before.
                let broken = format!("{text}\n");
                proptest::prop_assert!(
                    removed.as_deref() == Some(text.as_str())
                        || (!text.ends_with('\n') && removed.as_deref() == Some(broken.as_str())),
                    "{:?} came back as {:?}", text, removed
                );
            }
            let _ = remove(&text, HOOK.marker, None);
        }
    }
}
