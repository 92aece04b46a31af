//! The files a patch changes, in every format agents send patches in: Codex's envelope
//! (`*** Update File:`, `*** Add File:`, `*** Delete File:`, `*** Move to:`), unified diffs
//! (`--- a/x` / `+++ b/x`, a timestamp after a tab, `/dev/null` for a file added or
//! removed), context diffs (`*** x` / `--- x`) and git's extended headers (`diff --git`,
//! `rename from/to`, `copy from/to`). Every file a patch names is changed,
//! whatever else the call that carries it says.
use crate::rules::Action;

/// One file a patch touches, as the patch spells it (relative paths are the caller's to
/// resolve).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub action: Action,
    pub path: String,
}

/// Whether `text` is a patch rather than prose or code that mentions one: it has a line
/// only patches start with.
#[must_use]
pub fn is_patch(text: &str) -> bool {
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let next = lines.peek().copied().unwrap_or("");
        if codex_directive(line).is_some()
            || line.starts_with("diff --git ")
            || (line.starts_with("--- ") && next.starts_with("+++ "))
            || context_header(line, next)
        {
            return true;
        }
    }
    false
}

/// The files `patch` adds, changes, moves or removes.
#[must_use]
pub fn changes(patch: &str) -> Vec<Change> {
    let mut out = Vec::new();
    let mut push = |action, raw: &str| {
        let name = header_path(raw);
        if !name.is_empty() && name != "/dev/null" {
            let change = Change {
                action,
                path: name.to_owned(),
            };
            if !out.contains(&change) {
                out.push(change);
            }
        }
    };
    let lines: Vec<&str> = patch.lines().collect();
    // The file a Codex `*** Move to:` moves away from.
    let mut updating: Option<&str> = None;
    for (i, line) in lines.iter().enumerate() {
        let next = lines.get(i + 1).copied().unwrap_or("");
        if let Some((action, path)) = codex_directive(line) {
            if let Some(to) = line.strip_prefix("*** Move to: ") {
                // A moved file loses its old name.
                if let Some(from) = updating {
                    push(Action::Delete, from);
                }
                push(Action::Write, to);
            } else {
                updating = (action == Action::Write).then_some(path);
                push(action, path);
            }
        } else if let Some(old) = line.strip_prefix("--- ") {
            // `--- old` then `+++ new`: new files come from /dev/null, removed ones go to it.
            match next.strip_prefix("+++ ") {
                Some(new) if header_path(new) == "/dev/null" => {
                    push(Action::Delete, strip_side(old, "a/"));
                }
                Some(_) => push(Action::Write, strip_side(old, "a/")),
                None => {}
            }
        } else if let Some(new) = line.strip_prefix("+++ ") {
            push(Action::Write, strip_side(new, "b/"));
        } else if context_header(line, next) {
            push(Action::Write, &line[4..]);
            push(Action::Write, &next[4..]);
        } else if let Some(rest) = line.strip_prefix("diff --git ") {
            let (a, b) = git_pair(rest);
            push(Action::Write, a);
            push(Action::Write, b);
        } else if let Some(p) = line.strip_prefix("rename from ") {
            push(Action::Delete, p);
        } else if let Some(p) = line
            .strip_prefix("rename to ")
            .or_else(|| line.strip_prefix("copy to "))
            .or_else(|| line.strip_prefix("Index: "))
        {
            push(Action::Write, p);
        } else if let Some(p) = line.strip_prefix("copy from ") {
            push(Action::Read, p);
        }
    }
    out
}

/// A context diff's header: `*** old` then `--- new` (hunks have `*** 1,2 ****`).
fn context_header(line: &str, next: &str) -> bool {
    line.starts_with("*** ")
        && next.starts_with("--- ")
        && !line.trim_end().ends_with("****")
        && codex_directive(line).is_none()
}

/// `*** Update File: P` and its kin: what they do and to which path.
fn codex_directive(line: &str) -> Option<(Action, &str)> {
    for (prefix, action) in [
        ("*** Update File: ", Action::Write),
        ("*** Add File: ", Action::Write),
        ("*** Delete File: ", Action::Delete),
        ("*** Move to: ", Action::Write),
    ] {
        if let Some(p) = line.strip_prefix(prefix) {
            return Some((action, p));
        }
    }
    None
}

/// A header's path without what follows it: the timestamp after a tab (or after two
/// spaces and a date), the quotes git puts around names with odd characters.
fn header_path(raw: &str) -> &str {
    let mut path = raw.split('\t').next().unwrap_or(raw);
    if let Some(i) = path.find("  ") {
        if path[i..]
            .trim_start()
            .starts_with(|c: char| c.is_ascii_digit())
        {
            path = &path[..i];
        }
    }
    let path = path.trim();
    path.strip_prefix('"')
        .and_then(|p| p.strip_suffix('"'))
        .unwrap_or(path)
}

/// `a/x` → `x`: git's (and `diff -ru a b`'s) side prefixes, which `git apply` and
/// `patch -p1` drop.
fn strip_side<'a>(path: &'a str, side: &str) -> &'a str {
    let path = header_path(path);
    path.strip_prefix(side).unwrap_or(path)
}

/// The two names of `diff --git a/X b/Y`.
fn git_pair(rest: &str) -> (&str, &str) {
    let rest = rest.trim();
    match rest.rfind(" b/").or_else(|| rest.rfind(" \"b/")) {
        Some(i) => (
            strip_side(&rest[..i], "a/"),
            strip_side(rest[i + 1..].trim_matches('"'), "b/"),
        ),
        None => (rest, rest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(patch: &str) -> Vec<(Action, String)> {
        changes(patch)
            .into_iter()
            .map(|c| (c.action, c.path))
            .collect()
    }

    #[test]
    fn codex_envelope() {
        let p = "*** Begin Patch\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@\n-x\n+y\n*** Add File: n.txt\n+z\n*** Delete File: old.txt\n*** End Patch";
        assert!(is_patch(p));
        assert_eq!(
            paths(p),
            [
                (Action::Write, "src/a.rs".into()),
                (Action::Delete, "src/a.rs".into()),
                (Action::Write, "src/b.rs".into()),
                (Action::Write, "n.txt".into()),
                (Action::Delete, "old.txt".into()),
            ]
        );
    }

    #[test]
    fn unified_and_git_diffs() {
        let p = "--- /home/alice/.bashrc\t2024-01-01 00:00:00\n+++ /home/alice/.bashrc\t2024-01-01 00:00:01\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(is_patch(p));
        assert_eq!(paths(p), [(Action::Write, "/home/alice/.bashrc".into())]);
        let p = "diff --git a/notes.txt b/notes.txt\nsimilarity index 100%\nrename from notes.txt\nrename to ../.bashrc\n";
        assert!(is_patch(p));
        assert_eq!(
            paths(p),
            [
                (Action::Write, "notes.txt".into()),
                (Action::Delete, "notes.txt".into()),
                (Action::Write, "../.bashrc".into()),
            ]
        );
        let p = "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";
        assert_eq!(paths(p), [(Action::Delete, "gone.txt".into())]);
        let p = "*** a.txt\t2024-01-01\n--- b.txt\t2024-01-02\n***************\n";
        assert_eq!(
            paths(p),
            [
                (Action::Write, "a.txt".into()),
                (Action::Write, "b.txt".into())
            ]
        );
    }

    #[test]
    fn prose_is_not_a_patch() {
        assert!(!is_patch("Use --- and +++ in diffs.\nA line."));
        assert!(!is_patch(
            "<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE"
        ));
    }
}
