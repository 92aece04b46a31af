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

use super::{fields, quote, shell};
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

/// The verbs of the tools read here, in any case as tool names spell them (`delete_branch`,
/// `deleteRepo`, `UPDATE_REF`), looked for in one pass over a tool's name.
static VERB_MARKS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build([
            "delete", "remove", "destroy", "update", "set", "force", "move",
        ])
        .ok()
});

/// Fields naming the branch or the ref a tool acts on, in order of preference.
const REF_KEYS: &[&str] = &["branch", "branch_name", "ref", "ref_name", "name"];

/// Fields naming the commit a ref is moved to.
const SHA_KEYS: &[&str] = &["sha", "commit", "commit_sha", "target", "to"];

/// Judges a forge tool as the git or `gh` command line with the same effect.
pub(super) fn extract(tool: &str, input: &Value, ctx: &Context, out: &mut Extracted) {
    if let Some(line) = command_line(tool, input) {
        shell::extract(&line, ctx, out);
    }
}

fn command_line(tool: &str, input: &Value) -> Option<String> {
    let (server, local) = tool.strip_prefix("mcp__")?.split_once("__")?;
    // Most tools of a forge (issues, pull requests, reads) change no ref: a look for the
    // verbs first, before any word is split or copied.
    if VERB_MARKS
        .as_ref()
        .is_some_and(|verbs| !verbs.is_match(local))
    {
        return None;
    }
    // Lowercased first: `GitHub` is one word, not `Git` and `Hub`.
    let server = server.to_ascii_lowercase();
    let server_words = fields::words(&server);
    let words: Vec<String> = fields::words(local)
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let forge = |w: &str| FORGES.iter().any(|f| w.eq_ignore_ascii_case(f));
    if !server_words.iter().any(|w| forge(w)) && !words.iter().any(|w| forge(w)) {
        return None;
    }
    let has = |w: &str| words.iter().any(|x| x == w);
    let obj = input.as_object()?;
    let get = |keys: &[&str]| {
        keys.iter().find_map(|k| {
            obj.iter()
                .find(|(name, _)| fields::snake(name) == *k)
                .and_then(|(_, v)| v.as_str())
                .filter(|v| !v.trim().is_empty())
        })
    };
    let deletes = has("delete") || has("remove") || has("destroy");
    if deletes && (has("branch") || has("ref") || has("reference")) {
        let branch = branch_ref(get(REF_KEYS)?);
        return Some(format!("git push --delete -- origin {}", quote(&branch)));
    }
    if deletes && (has("repo") || has("repository") || has("project")) {
        let owner = get(&["owner", "namespace", "org", "organization", "user"]);
        let name = get(&["repo", "repository", "name", "project", "project_id", "id"])
            .map(str::to_owned)
            .or_else(|| number(obj, &["project_id", "id"]))
            .unwrap_or_default();
        let full = owner.map_or_else(|| name.clone(), |o| format!("{o}/{name}"));
        return Some(format!("gh repo delete -- {}", quote(&full)));
    }
    let moves = has("update") || has("set") || has("reset") || has("force") || has("move");
    if moves && (has("ref") || has("reference") || has("branch")) && forced(obj) {
        let branch = branch_ref(get(REF_KEYS)?);
        let sha = get(SHA_KEYS).unwrap_or("HEAD");
        return Some(format!(
            "git push --force -- origin {}",
            quote(&format!("{sha}:{branch}"))
        ));
    }
    None
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

    use super::command_line;

    #[test]
    fn forge_tools_read_as_the_command_with_their_effect() {
        let line = |t: &str, v| command_line(t, &v);
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
