//! From what a record session touched to a proposed allow-list rule file.
//!
//! The generalisation, in order:
//! - **Roots guarded**: the session owner's home, and the top-level directory of every other
//!   path touched outside the system's own trees ([`SYSTEM_ROOTS`]: programs, libraries,
//!   `/etc`, `/proc`, `/dev`, `/tmp`…, which every program reads and which the built-in
//!   packs already guard where it matters).
//! - **Reads** under those roots are refused except what the session read, wrote or ran;
//!   **writes and deletes** except what it wrote or deleted.
//! - A directory in which at least [`DIR_GLOB_AT`] entries were touched is excepted whole
//!   (`dir/**`); a guarded root itself never is (the rule would then allow everything).
//! - **Network**: every host is refused except the names recorded (the resolver's name for
//!   an address, the hosts tool calls named) and the addresses that had no name.
//! - **Executables** get no rule: an `execute` rule also refuses reads of what it names, so
//!   an allow-list of executables would refuse reading every other file. They are listed in
//!   the header for the review.
//!
//! The proposal only adds `block` rules with their own `except:`; it never writes an
//! `exceptions:` entry, so no built-in rule loses anything. That is checked, not assumed:
//! the text is compiled like any rule file and the built-in packs' must-block cases are
//! replayed against it (`rules::amend::replay`) before it is offered.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use carapace_policy::rules::{amend, Options, RuleSet};

use super::{FileAction, Recorded, Touched};

/// Entries touched in one directory at which the whole directory is excepted (`dir/**`)
/// rather than each entry.
pub const DIR_GLOB_AT: usize = 8;

/// Trees every program reads or that the system owns: not guarded by the proposal.
pub const SYSTEM_ROOTS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/nix", "/opt",
    "/proc", "/run", "/sbin", "/snap", "/sys", "/tmp", "/usr", "/var",
];

/// Rule ids of the proposal.
pub const READS_RULE: &str = "recorded-reads";
pub const WRITES_RULE: &str = "recorded-writes";
pub const NETWORK_RULE: &str = "recorded-network";

/// The generalised touched set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Directories guarded (`/home/u`, `/srv`).
    pub roots: BTreeSet<String>,
    /// Exceptions to the read rule: exact paths and `dir/**`.
    pub reads: BTreeSet<String>,
    /// Exceptions to the write/delete rule.
    pub writes: BTreeSet<String>,
    /// Host names and addresses the network rule excepts.
    pub hosts: BTreeSet<String>,
    /// Programs run (listed for the review; no rule, see the module doc).
    pub executables: BTreeSet<String>,
    /// Paths not excepted, with why (they stay refused).
    pub left_out: Vec<String>,
}

/// Who recorded the proposal and when, for its header.
#[derive(Clone, Debug, Default)]
pub struct Header {
    pub session: String,
    pub command: String,
    /// `2026-11-27 11:02 UTC`.
    pub recorded: String,
    pub proposed: String,
    pub truncated: bool,
}

/// A proposal, validated.
#[derive(Clone, Debug)]
pub struct Proposal {
    pub plan: Plan,
    pub text: String,
    /// Built-in must-block cases replayed against it.
    pub fixtures_checked: usize,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProposeError {
    #[error("the proposed rules do not compile (a bug; nothing is offered):\n{0}")]
    Invalid(String),
    #[error("the proposed rules would allow what a built-in pack must block: {0}")]
    Weakens(String),
}

/// Generalises what a session touched (see the module doc); `homes` are the session
/// owner's home directories.
#[must_use]
pub fn generalise(recorded: &Recorded, homes: &[String]) -> Plan {
    let mut plan = Plan::default();
    let mut reads = BTreeSet::new();
    let mut writes = BTreeSet::new();
    for item in &recorded.items {
        match item {
            Touched::File { action, path } => {
                let Some(root) = root_of(path, homes) else {
                    if *action == FileAction::Execute {
                        plan.executables.insert(path.clone());
                    }
                    continue;
                };
                if *action == FileAction::Execute {
                    plan.executables.insert(path.clone());
                }
                if let Some(why) = unfit(path) {
                    plan.left_out.push(format!("{path}: {why}"));
                    continue;
                }
                plan.roots.insert(root);
                reads.insert(path.clone());
                if matches!(action, FileAction::Write | FileAction::Delete) {
                    writes.insert(path.clone());
                }
            }
            Touched::Address {
                name: Some(name), ..
            }
            | Touched::Host { name, .. } => {
                plan.hosts.insert(name.clone());
            }
            Touched::Address {
                addr, name: None, ..
            } => {
                plan.hosts.insert(addr.to_string());
            }
        }
    }
    // Names and addresses are matched exactly as the rule language reads them; an address
    // that also came with a name stays: the kernel checks the address it connects to.
    plan.reads = collapse(&reads, &plan.roots);
    plan.writes = collapse(&writes, &plan.roots);
    plan.left_out.sort();
    plan.left_out.dedup();
    plan
}

/// The guarded root `path` falls under: a home that holds it, or its top-level directory
/// when that is not a system tree; `None` for system paths.
fn root_of(path: &str, homes: &[String]) -> Option<String> {
    if let Some(home) = homes.iter().find(|h| under(path, h)) {
        return Some(home.clone());
    }
    let top = path[1..].split('/').next().filter(|t| !t.is_empty())?;
    let top = format!("/{top}");
    (!SYSTEM_ROOTS.contains(&top.as_str())).then_some(top)
}

fn under(path: &str, dir: &str) -> bool {
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Why `path` cannot be an exception as it is: the rule language would read it as a
/// pattern, or the kernel cannot match it.
fn unfit(path: &str) -> Option<&'static str> {
    if path.len() >= carapace_common::PATH_MAX {
        return Some("longer than the kernel matches (it refuses it anyway)");
    }
    if path.contains(['*', '?', '[', ']', '{', '}', '\\']) || path.starts_with("re:") {
        return Some("its name has pattern characters");
    }
    if path.chars().any(char::is_control) {
        return Some("its name has control characters");
    }
    None
}

/// Exact paths, with every directory holding at least [`DIR_GLOB_AT`] of them (and not a
/// root) replaced by `dir/**`.
fn collapse(paths: &BTreeSet<String>, roots: &BTreeSet<String>) -> BTreeSet<String> {
    let mut by_dir: BTreeMap<&str, usize> = BTreeMap::new();
    for p in paths {
        if let Some((dir, _)) = p.rsplit_once('/') {
            *by_dir.entry(dir).or_default() += 1;
        }
    }
    let whole: BTreeSet<&str> = by_dir
        .into_iter()
        .filter(|(dir, n)| *n >= DIR_GLOB_AT && !dir.is_empty() && !roots.contains(*dir))
        .map(|(dir, _)| dir)
        .collect();
    let mut out = BTreeSet::new();
    for p in paths {
        match whole.iter().find(|d| under(p, d)) {
            Some(dir) => out.insert(format!("{dir}/**")),
            None => out.insert(p.clone()),
        };
    }
    out
}

/// The rule file for `plan`, with its header.
#[must_use]
pub fn render(plan: &Plan, header: &Header) -> String {
    let mut out = String::new();
    let roots: Vec<&str> = plan.roots.iter().map(String::as_str).collect();
    let _ = writeln!(
        out,
        "# Carapace profile proposed by `carapace run --record` — REVIEW IT BEFORE USE.\n\
         # Recorded in session {} ({}), started {}; proposed {}.\n\
         # It allows what that session touched and refuses the rest: reads and writes under\n\
         # {} except the files listed, and every network host except those listed. A\n\
         # directory with {DIR_GLOB_AT} or more entries touched is allowed whole (`dir/**`).\n\
         # The built-in packs still apply on top of it; it adds refusals, never exceptions.",
        header.session,
        one_line(&header.command),
        header.recorded,
        header.proposed,
        if roots.is_empty() {
            "(no directory outside the system's own)".to_owned()
        } else {
            roots.join(", ")
        },
    );
    if header.truncated {
        let _ = writeln!(
            out,
            "# The record reached its bound ({} things): what came after was not kept and is\n\
             # refused by this profile.",
            super::MAX_TOUCHED
        );
    }
    if !plan.executables.is_empty() {
        out.push_str(
            "# Programs run (no rule: an `execute` rule also refuses reads of what it names):\n",
        );
        for e in &plan.executables {
            let _ = writeln!(out, "#   {}", one_line(e));
        }
    }
    if !plan.left_out.is_empty() {
        out.push_str("# Not allowed, though touched:\n");
        for l in &plan.left_out {
            let _ = writeln!(out, "#   {}", one_line(l));
        }
    }
    out.push_str("version: 1\nrules:\n");
    let message = format!(
        "Outside what session {} touched while recording this profile. Ask the user to add \
         it to the profile if the task needs it.",
        header.session
    );
    if !roots.is_empty() {
        let block = list(roots.iter().map(|r| format!("{r}/**")));
        path_rule(
            &mut out,
            READS_RULE,
            &block,
            "[read]",
            &plan.reads,
            &message,
        );
        path_rule(
            &mut out,
            WRITES_RULE,
            &block,
            "[write, delete]",
            &plan.writes,
            &message,
        );
    }
    let _ = writeln!(out, "  - id: {NETWORK_RULE}\n    block: {{ host: \"*\" }}");
    if !plan.hosts.is_empty() {
        let _ = writeln!(out, "    except: {}", list(plan.hosts.iter().cloned()));
    }
    let _ = writeln!(out, "    message: {}", quote(&message));
    out
}

fn path_rule(
    out: &mut String,
    id: &str,
    block: &str,
    actions: &str,
    except: &BTreeSet<String>,
    message: &str,
) {
    let _ = writeln!(
        out,
        "  - id: {id}\n    block: {block}\n    actions: {actions}"
    );
    if !except.is_empty() {
        out.push_str("    except:\n");
        for e in except {
            let _ = writeln!(out, "      - {}", quote(e));
        }
    }
    let _ = writeln!(out, "    message: {}", quote(message));
}

/// A YAML double-quoted scalar (JSON's escapes are YAML's).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

fn list(items: impl Iterator<Item = String>) -> String {
    let quoted: Vec<String> = items.map(|i| quote(&i)).collect();
    format!("[{}]", quoted.join(", "))
}

/// Text fit for one comment line: control characters (newlines) become spaces.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Generalises, renders and validates: the text compiles as a rule file (kernel forms
/// included) and no built-in must-block case becomes allowed with it.
pub fn propose(
    recorded: &Recorded,
    homes: &[String],
    header: &Header,
    opts: &Options,
) -> Result<Proposal, ProposeError> {
    let plan = generalise(recorded, homes);
    let header = Header {
        truncated: header.truncated || recorded.truncated,
        ..header.clone()
    };
    let text = render(&plan, &header);
    let origin = format!("proposal of session {}", header.session);
    RuleSet::load_text(&origin, &text, opts).map_err(|d| ProposeError::Invalid(d.to_string()))?;
    let replay = amend::replay(&origin, "version: 1\n", &text, &[], opts)
        .map_err(|e| ProposeError::Invalid(e.to_string()))?;
    if replay.unblocks_fixture() {
        let which: Vec<String> = replay
            .newly_allowed
            .iter()
            .filter(|n| n.must_block)
            .map(|n| format!("{} ({})", n.what, n.origin))
            .collect();
        return Err(ProposeError::Weakens(which.join("; ")));
    }
    Ok(Proposal {
        plan,
        text,
        fixtures_checked: replay.fixtures_checked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_policy::engine::{evaluate, Activation, Extracted, Layer, Operation};
    use carapace_policy::rules::{Action, Homes, Mode};

    fn file(action: FileAction, path: &str) -> Touched {
        Touched::File {
            action,
            path: path.to_owned(),
        }
    }

    fn recorded(items: impl IntoIterator<Item = Touched>) -> Recorded {
        Recorded {
            items: items.into_iter().collect(),
            ..Recorded::default()
        }
    }

    fn homes() -> Vec<String> {
        vec!["/home/u".to_owned()]
    }

    fn opts() -> Options {
        Options {
            homes: Homes::fixed(homes()),
            resolver: |_| None,
            host: crate::policy_host::shared(),
        }
    }

    fn header() -> Header {
        Header {
            session: "s-1234".into(),
            command: "sh -c 'cat notes'\nrm -rf x".into(),
            recorded: "2026-11-27 10:00 UTC".into(),
            proposed: "2026-11-27 10:05 UTC".into(),
            truncated: false,
        }
    }

    fn decide(rules: &RuleSet, action: Action, path: &str) -> Mode {
        let mut ext = Extracted::new("operation");
        ext.op(Operation::path(action, path));
        evaluate(rules, &ext, &Activation::default(), Layer::ToolCall).decision
    }

    #[test]
    fn guards_home_and_other_roots_not_system_trees() {
        let plan = generalise(
            &recorded([
                file(FileAction::Read, "/home/u/notes.txt"),
                file(FileAction::Write, "/srv/data/out.csv"),
                file(FileAction::Read, "/usr/lib/libc.so.6"),
                file(FileAction::Read, "/etc/passwd"),
                file(FileAction::Execute, "/usr/bin/python3"),
            ]),
            &homes(),
        );
        assert_eq!(
            plan.roots,
            BTreeSet::from(["/home/u".to_owned(), "/srv".to_owned()])
        );
        assert_eq!(
            plan.reads,
            BTreeSet::from([
                "/home/u/notes.txt".to_owned(),
                "/srv/data/out.csv".to_owned()
            ])
        );
        assert_eq!(
            plan.writes,
            BTreeSet::from(["/srv/data/out.csv".to_owned()])
        );
        assert_eq!(
            plan.executables,
            BTreeSet::from(["/usr/bin/python3".to_owned()])
        );
    }

    #[test]
    fn a_directory_becomes_a_glob_at_the_threshold_but_never_a_root() {
        let below: Vec<Touched> = (0..DIR_GLOB_AT - 1)
            .map(|i| file(FileAction::Read, &format!("/home/u/few/{i}")))
            .collect();
        let at: Vec<Touched> = (0..DIR_GLOB_AT)
            .map(|i| file(FileAction::Read, &format!("/home/u/src/{i}.rs")))
            .collect();
        let in_root: Vec<Touched> = (0..DIR_GLOB_AT * 2)
            .map(|i| file(FileAction::Read, &format!("/home/u/.f{i}")))
            .collect();
        let plan = generalise(
            &recorded(below.into_iter().chain(at).chain(in_root)),
            &homes(),
        );
        assert!(plan.reads.contains("/home/u/src/**"));
        assert!(!plan
            .reads
            .iter()
            .any(|r| r.starts_with("/home/u/src/") && r != "/home/u/src/**"));
        assert!(plan.reads.contains("/home/u/few/0"));
        assert!(!plan.reads.contains("/home/u/few/**"));
        assert!(
            !plan.reads.contains("/home/u/**"),
            "the root itself stays guarded"
        );
        assert!(plan.reads.contains("/home/u/.f3"));
    }

    #[test]
    fn names_stand_for_their_addresses_and_pattern_names_are_left_out() {
        let plan = generalise(
            &recorded([
                Touched::Address {
                    addr: "192.0.2.7".parse().unwrap(),
                    port: 443,
                    name: Some("example.com".into()),
                },
                Touched::Address {
                    addr: "127.0.0.1".parse().unwrap(),
                    port: 8080,
                    name: None,
                },
                Touched::Host {
                    name: "pypi.org".into(),
                    port: None,
                },
                file(FileAction::Read, "/home/u/we*ird"),
            ]),
            &homes(),
        );
        assert_eq!(
            plan.hosts,
            BTreeSet::from([
                "127.0.0.1".to_owned(),
                "example.com".to_owned(),
                "pypi.org".to_owned()
            ])
        );
        assert_eq!(plan.left_out.len(), 1);
        assert!(plan.reads.is_empty());
    }

    #[test]
    fn the_proposal_compiles_allows_what_was_recorded_and_refuses_the_rest() {
        let rec = recorded([
            file(FileAction::Read, "/home/u/project/README.md"),
            file(FileAction::Write, "/home/u/project/out.txt"),
            Touched::Host {
                name: "pypi.org".into(),
                port: Some(443),
            },
        ]);
        let p = propose(&rec, &homes(), &header(), &opts()).unwrap();
        assert!(p.fixtures_checked > 0, "the must-block cases were replayed");
        let rules = RuleSet::load_text("p", &p.text, &opts()).unwrap();
        assert_eq!(
            decide(&rules, Action::Read, "/home/u/project/README.md"),
            Mode::Allow
        );
        assert_eq!(
            decide(&rules, Action::Write, "/home/u/project/out.txt"),
            Mode::Allow
        );
        assert_eq!(
            decide(&rules, Action::Read, "/home/u/project/other.md"),
            Mode::Block
        );
        assert_eq!(
            decide(&rules, Action::Write, "/home/u/project/README.md"),
            Mode::Block,
            "read, not written: writes stay refused"
        );
        // A built-in pack still refuses what it refuses, whatever was recorded.
        let rec = recorded([file(FileAction::Read, "/home/u/.ssh/id_ed25519")]);
        let p = propose(&rec, &homes(), &header(), &opts()).unwrap();
        let rules = RuleSet::load_text("p", &p.text, &opts()).unwrap();
        assert_eq!(
            decide(&rules, Action::Read, "/home/u/.ssh/id_ed25519"),
            Mode::Block
        );
    }

    #[test]
    fn the_header_says_who_recorded_it_when_and_to_review_it() {
        let rec = Recorded {
            truncated: true,
            ..recorded([file(FileAction::Execute, "/usr/bin/git")])
        };
        let text = propose(&rec, &homes(), &header(), &opts()).unwrap().text;
        let comments: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        let head = comments.join("\n");
        assert!(head.contains("REVIEW IT BEFORE USE"), "{head}");
        assert!(head.contains("session s-1234"), "{head}");
        assert!(head.contains("started 2026-11-27 10:00 UTC"), "{head}");
        assert!(head.contains("proposed 2026-11-27 10:05 UTC"), "{head}");
        assert!(head.contains("/usr/bin/git"), "{head}");
        assert!(head.contains("bound"), "{head}");
        // The command's newline cannot end the comment and start YAML.
        assert!(head.contains("sh -c 'cat notes' rm -rf x"), "{head}");
        assert!(text.lines().any(|l| l == "version: 1"));
    }
}
