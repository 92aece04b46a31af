//! MCP tools of a code forge's API (GitHub, GitLab, Gitea, Bitbucket servers) that do to a
//! remote repository what a destructive git command does: deleting a branch or a ref,
//! moving one by force, deleting the repository. Each is judged as the command line with
//! the same effect — `git push --delete origin BRANCH`, `git push --force origin
//! SHA:refs/heads/BRANCH`, `gh repo delete OWNER/REPO` — so that the destructive-git pack's
//! rules (shared branches by name, feature branches passed) cover the API too. Other forge
//! tools (issues, pull requests, commits through `push_files`) add nothing here.
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use serde_json::Value;

use super::{fields, quote, same_key, shell};
use crate::engine::operation::{Context, Extracted};

/// Words of a server's or a tool's name that say it speaks to a forge's API.
const FORGES: &[&str] = &[
    "github",
    "gitlab",
    "gitea",
    "forgejo",
    "bitbucket",
    "codeberg",
    "gh",
    "glab",
];

/// Verbs that delete what the tool names (`delete_branch`, `purge_branch`, `drop_ref`,
/// `wipe_branch`, `{method: DELETE}`).
const DELETE_VERBS: &[&str] = &[
    "delete", "remove", "destroy", "purge", "drop", "wipe", "erase", "rm", "del", "trash",
    "discard", "nuke", "prune", "clear",
];

/// Verbs that move a ref when forced (`update_ref`, `overwrite_ref`, `replace_ref`,
/// `create_ref {force: true}`).
const MOVE_VERBS: &[&str] = &[
    "update",
    "set",
    "reset",
    "force",
    "move",
    "overwrite",
    "replace",
    "rewrite",
    "create",
    "put",
    "patch",
    "write",
    "edit",
    "modify",
    "push",
];

/// Verbs that force by themselves (`force_update_ref`, `overwrite_branch`).
const FORCE_VERBS: &[&str] = &["force", "overwrite", "rewrite"];

/// Words of a tool's name that say it acts on branches or refs.
const REF_WORDS: &[&str] = &[
    "branch",
    "branches",
    "ref",
    "refs",
    "reference",
    "references",
];

/// Words of a tool's name that say it acts on a setting of the branch, not on the branch
/// (`delete_branch_protection`, `remove_branch_rules`): the branch and its commits stay.
const SETTING_WORDS: &[&str] = &[
    "protection",
    "protections",
    "protect",
    "rule",
    "rules",
    "ruleset",
    "rulesets",
    "policy",
    "policies",
    "permission",
    "permissions",
    "restriction",
    "restrictions",
    "lock",
    "review",
    "reviews",
    "reviewer",
    "reviewers",
    "check",
    "checks",
    "status",
    "statuses",
    "setting",
    "settings",
    "config",
    "pattern",
    "patterns",
    "label",
    "labels",
    "comment",
    "comments",
    "description",
];

/// Words of a tool's name that say it acts on the repository itself.
const REPO_WORDS: &[&str] = &["repo", "repository", "repos", "repositories", "project"];

/// Fields whose value is the verb of a tool that takes one (`git_refs {method: DELETE}`,
/// `branches {action: delete}`, `refs {operation: force_update}`).
const VERB_KEYS: &[&str] = &["method", "action", "operation", "op", "verb", "http_method"];

/// Fields naming the branch or the ref a tool acts on, in order of preference.
const REF_KEYS: &[&str] = &["branch", "branch_name", "ref", "ref_name", "name"];

/// Fields naming several of them (`delete_branches {branches: […]}`).
const REFS_KEYS: &[&str] = &["branches", "refs", "branch_names", "ref_names"];

/// Fields naming the commit a ref is moved to.
const SHA_KEYS: &[&str] = &["sha", "commit", "commit_sha", "target", "to"];

/// Fields of a REST call's own path (`api_request {method, path}`).
const ENDPOINT_KEYS: &[&str] = &["endpoint", "path", "url", "route", "uri"];

/// The verbs that make a tool worth reading, in any case and spelling, looked for in one
/// pass over its name (and a verb field's value) before any word is split or copied.
static MARKS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(DELETE_VERBS.iter().chain(FORCE_VERBS))
        .ok()
});

/// Whether a call may be one read here: a deleting or forcing verb in its name or its verb
/// field, a `force` field, or a REST call's method and path.
fn worth_reading(local: &str, obj: &serde_json::Map<String, Value>) -> bool {
    let marked = |s: &str| MARKS.as_ref().is_none_or(|m| m.is_match(s));
    if marked(local) {
        return true;
    }
    let key = |keys: &[&str]| obj.keys().any(|k| keys.iter().any(|w| same_key(k, w)));
    key(&["force"])
        || obj.iter().any(|(k, v)| {
            VERB_KEYS.iter().any(|w| same_key(k, w)) && v.as_str().is_some_and(marked)
        })
        || key(&["method", "http_method"]) && key(ENDPOINT_KEYS)
}

/// Judges a forge tool as the git or `gh` command line with the same effect.
pub(super) fn extract(tool: &str, input: &Value, ctx: &Context, out: &mut Extracted) {
    for line in command_lines(tool, input) {
        shell::extract(&line, ctx, out);
    }
}

/// Whether the call is a forge's: its server's or its tool's name names one, or its
/// arguments have a forge API's shape (`owner` and `repo`, a GitLab `project_id`). A
/// version-control server's tools (`mcp__vcs__delete_branch`, `mcp__git__purge_branch`)
/// count too: whether the branch they delete is the clone's or the remote's is the
/// server's business, and a shared one deleted either way is the same loss.
fn is_forge(server: &str, local: &str, obj: &serde_json::Map<String, Value>) -> bool {
    let forge = |w: &str| FORGES.iter().any(|f| w.eq_ignore_ascii_case(f));
    let server = server.to_ascii_lowercase();
    let server_words = fields::words(&server);
    if server_words.iter().any(|w| forge(w))
        || fields::words(local).iter().any(|w| forge(w))
        || super::cli_tool::vcs_words(&server_words)
    {
        return true;
    }
    let key = |k: &str| obj.keys().any(|n| fields::snake(n) == k);
    (key("owner") && (key("repo") || key("repository"))) || key("project_id")
}

fn command_lines(tool: &str, input: &Value) -> Vec<String> {
    let Some((server, local)) = tool.strip_prefix("mcp__").and_then(|r| r.split_once("__")) else {
        return Vec::new();
    };
    let Some(obj) = input.as_object() else {
        return Vec::new();
    };
    // Most tools of a forge (issues, pull requests, reads) change no ref.
    if !worth_reading(local, obj) {
        return Vec::new();
    }
    // The words of what the tool does: its name's, and those of a verb field's value.
    let mut words: Vec<String> = fields::words(local)
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    for (k, v) in obj {
        if VERB_KEYS.iter().any(|vk| fields::snake(k) == *vk) {
            if let Some(s) = v.as_str() {
                words.extend(fields::words(s).iter().map(|w| w.to_ascii_lowercase()));
            }
        }
    }
    let has = |set: &[&str]| words.iter().any(|w| set.contains(&w.as_str()));
    let deletes = has(DELETE_VERBS);
    let force = forced(obj) || has(FORCE_VERBS);
    if !is_forge(server, local, obj) {
        return Vec::new();
    }
    let get = |keys: &[&str]| {
        keys.iter().find_map(|k| {
            obj.iter()
                .find(|(name, _)| fields::snake(name) == *k)
                .and_then(|(_, v)| v.as_str())
                .filter(|v| !v.trim().is_empty())
        })
    };
    let mut lines = Vec::new();
    // A REST call the tool passes through: as `gh api`, which the packs read.
    if let (Some(method), Some(endpoint)) = (get(&["method", "http_method"]), get(ENDPOINT_KEYS)) {
        if endpoint.contains("repos/") || endpoint.contains("projects/") {
            let endpoint = endpoint.split("://").nth(1).map_or(endpoint, |rest| {
                rest.split_once('/').map_or(rest, |(_, p)| p)
            });
            lines.push(format!(
                "gh api -X {} {}",
                quote(&method.to_ascii_uppercase()),
                quote(endpoint.trim_start_matches('/'))
            ));
        }
    }
    let mut refs: Vec<&str> = get(REF_KEYS)
        .into_iter()
        .chain(list(obj, REFS_KEYS))
        .collect();
    // A bare verb (`mcp__vcs__delete`) acts on what a branch or ref field names, and on
    // nothing a `name` field names.
    if only_verbs(&words) && !has(REF_WORDS) {
        refs = refs_named(obj);
    }
    let on_refs = has(REF_WORDS) || (!refs.is_empty() && !has(REPO_WORDS));
    if has(SETTING_WORDS) {
        // A branch's protection removed: the API call that does it, which its own rule
        // names; any other setting changes no ref.
        if deletes && has(&["protection", "protections", "protect"]) {
            let owner = get(&["owner", "namespace", "org", "organization"]).unwrap_or("_");
            let repo = get(&["repo", "repository", "project", "project_id"]).unwrap_or("_");
            lines.extend(refs.iter().map(|r| {
                format!(
                    "gh api -X DELETE {}",
                    quote(&format!("repos/{owner}/{repo}/branches/{r}/protection"))
                )
            }));
        }
    } else if deletes && (has(REF_WORDS) || (only_verbs(&words) && !refs_named(obj).is_empty())) {
        lines.extend(
            refs.iter()
                .map(|r| format!("git push --delete -- origin {}", quote(&branch_ref(r)))),
        );
    } else if deletes && has(REPO_WORDS) {
        let owner = get(&["owner", "namespace", "org", "organization", "user"]);
        let name = get(&["repo", "repository", "name", "project", "project_id", "id"])
            .map(str::to_owned)
            .or_else(|| number(obj, &["project_id", "id"]))
            .unwrap_or_default();
        let full = owner.map_or_else(|| name.clone(), |o| format!("{o}/{name}"));
        lines.push(format!("gh repo delete -- {}", quote(&full)));
    } else if force && on_refs && (has(MOVE_VERBS) || forced(obj)) {
        let sha = get(SHA_KEYS).unwrap_or("HEAD");
        lines.extend(refs.iter().map(|r| {
            format!(
                "git push --force -- origin {}",
                quote(&format!("{sha}:{}", branch_ref(r)))
            )
        }));
    }
    lines
}

/// Whether a tool's name is verbs alone (`mcp__vcs__delete`): what it acts on is then
/// what its fields name.
fn only_verbs(words: &[String]) -> bool {
    !words.is_empty()
        && words
            .iter()
            .all(|w| DELETE_VERBS.contains(&w.as_str()) || FORCE_VERBS.contains(&w.as_str()))
}

/// The branches or refs a call names by a field that says so (`branch`, `ref`, `branches`;
/// not `name`, which names anything).
fn refs_named(obj: &serde_json::Map<String, Value>) -> Vec<&str> {
    const KEYS: &[&str] = &["branch", "branch_name", "ref", "ref_name"];
    obj.iter()
        .filter(|(k, _)| KEYS.contains(&fields::snake(k).as_str()))
        .filter_map(|(_, v)| v.as_str())
        .chain(list(obj, REFS_KEYS))
        .collect()
}

/// The strings of the first of `keys` that holds a list.
fn list<'a>(obj: &'a serde_json::Map<String, Value>, keys: &[&str]) -> Vec<&'a str> {
    keys.iter()
        .find_map(|k| {
            obj.iter()
                .find(|(name, _)| fields::snake(name) == *k)
                .and_then(|(_, v)| v.as_array())
        })
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `main`, `heads/main` and `refs/heads/main` as `refs/heads/main`; tags and other refs
/// as they are, under `refs/`.
fn branch_ref(name: &str) -> String {
    let name = name.trim().trim_start_matches('/');
    let name = name.strip_prefix("refs/").unwrap_or(name);
    if name.starts_with("heads/") || name.starts_with("tags/") || name.starts_with("pull/") {
        format!("refs/{name}")
    } else {
        format!("refs/heads/{name}")
    }
}

/// A `force` field that a server coercing its inputs takes as true.
fn forced(obj: &serde_json::Map<String, Value>) -> bool {
    obj.iter()
        .filter(|(k, _)| fields::snake(k) == "force")
        .any(|(_, v)| match v {
            Value::Bool(b) => *b,
            Value::String(s) => ["true", "yes", "1", "on"]
                .iter()
                .any(|t| s.trim().eq_ignore_ascii_case(t)),
            Value::Number(n) => n.as_u64() == Some(1),
            _ => false,
        })
}

fn number(obj: &serde_json::Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| {
        obj.iter()
            .find(|(name, _)| fields::snake(name) == *k)
            .and_then(|(_, v)| v.as_u64())
            .map(|n| n.to_string())
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::command_lines;

    #[test]
    fn forge_tools_read_as_the_command_with_their_effect() {
        let line = |t: &str, v| command_lines(t, &v).into_iter().next();
        assert_eq!(
            line(
                "mcp__github__delete_branch",
                json!({"owner": "a", "repo": "r", "branch": "main"})
            )
            .as_deref(),
            Some("git push --delete -- origin refs/heads/main")
        );
        assert_eq!(
            line(
                "mcp__github__update_ref",
                json!({"ref": "heads/main", "sha": "abc", "force": "true"})
            )
            .as_deref(),
            Some("git push --force -- origin abc:refs/heads/main")
        );
        assert_eq!(
            line(
                "mcp__GitHub__deleteRepo",
                json!({"owner": "a", "name": "r"})
            )
            .as_deref(),
            Some("gh repo delete -- a/r")
        );
        assert_eq!(
            line("mcp__gitlab__delete_project", json!({"project_id": 7})).as_deref(),
            Some("gh repo delete -- 7")
        );
        // Not forced, not a forge, or not destructive: nothing to add.
        assert_eq!(
            line(
                "mcp__github__update_ref",
                json!({"ref": "heads/main", "sha": "abc"})
            ),
            None
        );
        assert_eq!(
            line("mcp__notes__delete_branch", json!({"branch": "main"})),
            None
        );
        assert_eq!(
            line("mcp__github__create_branch", json!({"branch": "x"})),
            None
        );
        assert_eq!(line("Bash", json!({"command": "ls"})), None);
    }
}
