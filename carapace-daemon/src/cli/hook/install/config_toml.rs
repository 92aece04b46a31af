//! Hooks in Codex's config.toml: `[[hooks.EVENT]]` matcher groups, each with
//! `[[hooks.EVENT.hooks]]` handlers `{type = "command", command = …}` (or the same as inline
//! arrays). Edited with `toml_edit`, so the user's comments, order and layout stay as they
//! were; a file that does not parse is never rewritten.
//!
//! Codex keys a hook's trust by its position (`FILE:pre_tool_use:GROUP:HANDLER`): the group
//! is appended after the user's, so installing or removing it moves none of theirs.
use anyhow::Context as _;
use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, TableLike};

use super::{is_ours, Hook};

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
    for (event, matcher) in hook.events {
        let list = hooks
            .entry(event)
            .or_insert(Item::ArrayOfTables(ArrayOfTables::new()));
        if let Some(groups) = list.as_array_of_tables_mut() {
            if groups.iter().any(|g| runs_ours(g, hook.marker)) {
                continue;
            }
            let mut handler = Table::new();
            handler["type"] = value("command");
            handler["command"] = value(hook.command);
            let mut handlers = ArrayOfTables::new();
            handlers.push(handler);
            let mut group = Table::new();
            if let Some(m) = matcher {
                group["matcher"] = value(*m);
            }
            group.insert("hooks", Item::ArrayOfTables(handlers));
            groups.push(group);
        } else if let Some(groups) = list.as_array_mut() {
            let ours = groups
                .iter()
                .filter_map(toml_edit::Value::as_inline_table)
                .any(|g| runs_ours(g, hook.marker));
            if ours {
                continue;
            }
            let mut handler = InlineTable::new();
            handler.insert("type", "command".into());
            handler.insert("command", hook.command.into());
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
    Ok(changed.then(|| doc.to_string()))
}

/// Takes out every handler of Carapace's hook, then each group, event list and `hooks`
/// table that only held it.
pub(super) fn remove(text: &str, marker: &str) -> anyhow::Result<Option<String>> {
    let mut doc = parse(text)?;
    let Some(hooks) = doc.get_mut("hooks").and_then(Item::as_table_like_mut) else {
        return Ok(None);
    };
    let mut changed = false;
    let events: Vec<String> = hooks.iter().map(|(k, _)| k.to_owned()).collect();
    for event in events {
        let Some(list) = hooks.get_mut(&event) else {
            continue;
        };
        let emptied = if let Some(groups) = list.as_array_of_tables_mut() {
            for group in groups.iter_mut().filter(|g| runs_ours(*g, marker)) {
                changed = true;
                if let Some(handlers) = group.get_mut("hooks") {
                    retain_handlers(handlers, marker);
                }
            }
            groups.retain(|g| !(g.contains_key("hooks") && commands(g).is_empty()));
            groups.is_empty()
        } else if let Some(groups) = list.as_array_mut() {
            for group in groups
                .iter_mut()
                .filter_map(toml_edit::Value::as_inline_table_mut)
            {
                if runs_ours(group, marker) {
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
    };

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
            let merged = merge(original, &HOOK).unwrap().expect("changed");
            let removed = remove(&merged, HOOK.marker).unwrap().expect("changed");
            assert_eq!(removed, original, "merged:\n{merged}");
            assert_eq!(remove(&removed, HOOK.marker).unwrap(), None);
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
        assert!(remove("[[x]", HOOK.marker).is_err());
    }
}
