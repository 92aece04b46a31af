//! From a denial to a rule: the smallest change of the user's rule file that allows exactly
//! one operation a rule refused, and what else that change would let through.
//!
//! [`propose`] writes the operation as an `except:` entry of the rule that refused it — the
//! exact path (never a directory glob), the exact host and port — into the rule's own
//! `except:` when the rule is the file's, or into the file's `exceptions:` list when it is a
//! built-in rule (how a file relaxes a pack's rule without leaving the pack out). A `locked`
//! rule is never changed. The new text keeps every comment and line of the old one, says in
//! a comment when and why, and is validated by the normal loader.
//!
//! [`replay`] is the safety check: every must-block case of the built-in packs
//! (`rules/fixtures/`) and the session's own refused operations, judged under the old and
//! the new file; what the new file would newly allow is listed, must-block cases first.
use std::net::IpAddr;

use super::{Action, Cond, Diagnostics, Options, Rule, RuleSet};

mod edit;
mod replay;
#[cfg(test)]
mod tests;

pub use edit::diff;
pub use replay::{replay, HistoryOp, NewlyAllowed, Replay};

/// An operation as a decision records it (`read /home/u/.ssh/id_rsa`, `network host:443`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A file operation (a unix socket's connect is a `network` of its path).
    Path {
        /// What was done to the path.
        action: Action,
        /// Absolute, as the decision recorded it.
        path: String,
    },
    /// A connection; `port` when known.
    Net {
        /// A host name or an address literal.
        host: String,
        /// The port connected to, when known.
        port: Option<u16>,
    },
}

impl Target {
    /// Reads what a decision says was matched: Layer 1's `VERB PATH` / `network HOST:PORT`,
    /// or a kernel denial's `OPERATION SUBJECT` (`rename onto /x`, `network 1.2.3.4:443
    /// (name)`). Commands, tools and contents are not operations an exception can name.
    pub fn parse(matched: &str) -> Result<Self, AmendError> {
        let unknown = || AmendError::NotAnOperation(matched.to_owned());
        let matched = matched.trim();
        if let Some(i) = matched.find(" /") {
            let (verb, path) = (&matched[..i], &matched[i + 1..]);
            let action = match verb {
                "read" | "attribute read" => Action::Read,
                "execute" => Action::Execute,
                "delete" => Action::Delete,
                "network" | "connect" => Action::Network,
                "chroot into" | "use" | "command" | "tool" => return Err(unknown()),
                // create, truncate, chmod, chown, symlink onto, rename, hard link…: each
                // changes the name or the file, which the rules judge as a write.
                _ if !verb.is_empty() && !verb.contains('`') => Action::Write,
                _ => return Err(unknown()),
            };
            return Ok(Self::Path {
                action,
                path: path.to_owned(),
            });
        }
        let rest = matched.strip_prefix("network ").ok_or_else(unknown)?;
        // A kernel denial adds the name the session looked the address up for: `(name)`.
        let rest = rest.split(" (").next().unwrap_or(rest).trim();
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (addr, after) = v6.split_once(']').ok_or_else(unknown)?;
            let port = after.strip_prefix(':').map(str::parse::<u16>);
            (addr, port.transpose().map_err(|_| unknown())?)
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => {
                    (h, Some(p.parse::<u16>().map_err(|_| unknown())?))
                }
                _ => (rest, None),
            }
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(unknown());
        }
        Ok(Self::Net {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// As a decision says it.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Path { action, path } => format!("{} {path}", action.name()),
            Self::Net {
                host,
                port: Some(p),
            } if host.contains(':') => format!("network [{host}]:{p}"),
            Self::Net {
                host,
                port: Some(p),
            } => format!("network {host}:{p}"),
            Self::Net { host, port: None } => format!("network {host}"),
        }
    }

    /// The narrowest exception that covers the operation, as YAML text: the exact path
    /// (as an anchored regex when the path holds glob characters or would read as `~`), or
    /// the host with the port.
    fn exception(&self) -> String {
        match self {
            Self::Path { path, .. } => {
                let literal = path.starts_with('/')
                    && !path.contains(super::shape::GLOB_META)
                    && !path.contains("$HOME")
                    && !path.contains("${HOME}")
                    // A literal pattern is normalised when read; a path that is not (kept as
                    // the decision wrote it) is named exactly by a regex.
                    && !path[1..].split('/').any(|c| c.is_empty() || c == "." || c == "..");
                if literal {
                    edit::quoted(path)
                } else {
                    edit::quoted(&format!("re:^{}$", regex::escape(path)))
                }
            }
            Self::Net { host, port } => match port {
                Some(p) => format!("{{ host: {}, port: {p} }}", edit::quoted(host)),
                None => edit::quoted(host),
            },
        }
    }

    /// Whether `rule`'s exceptions cover the operation.
    fn excepted_by(&self, rule: &Rule) -> bool {
        match self {
            Self::Path { path, .. } => rule.except.iter().any(|p| p.exempts(path)),
            Self::Net { host, port } => rule.except_net.iter().any(|e| {
                let port_ok = e.ports.is_empty() || port.is_some_and(|p| e.ports.contains(&p));
                let host_ok = match host.parse::<IpAddr>() {
                    Ok(ip) => {
                        e.cidrs.iter().any(|c| c.contains(ip))
                            || e.hosts
                                .iter()
                                .any(|h| matches!(h, super::model::Host::Ip(a) if *a == ip))
                    }
                    Err(_) => e.names().any(|n| n.eq_ignore_ascii_case(host)),
                };
                port_ok && host_ok
            }),
        }
    }
}

/// Why no change is proposed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AmendError {
    /// The rule id named (perhaps since reloaded away).
    #[error("no rule `{0}` is in force")]
    UnknownRule(String),
    #[error(
        "rule `{0}` is locked: it protects Carapace itself (or the console), and no rule file \
         can weaken it"
    )]
    /// A locked rule's id: its refusals stay.
    Locked(String),
    #[error(
        "`{0}` is not a file or network operation: an exception names paths or addresses, so \
         the rule language has no exception for it (switch the rule off for one session with \
         `carapace session disable`, or edit the rule by hand)"
    )]
    /// What the decision matched, when it is a command, tool or content.
    NotAnOperation(String),
    #[error("rule `{rule}` matches {kind}, which takes no exception for {target}")]
    /// The rule's condition has no `except:` that could name the operation.
    NoException {
        /// The rule's id.
        rule: String,
        /// What the rule matches on (its condition's kind).
        kind: &'static str,
        /// The operation, as the decision wrote it.
        target: String,
    },
    #[error(
        "rule `{rule}` comes from {origin}, which is not the rule file; it cannot be changed here"
    )]
    /// The rule comes from another file than the rule file (a profile's, a run-time pack).
    NotEditable {
        /// The rule's id.
        rule: String,
        /// Where it comes from.
        origin: String,
    },
    #[error("the rule file cannot be changed automatically: {0}")]
    /// The file's text has a shape the editor does not rewrite.
    Edit(#[from] edit::EditError),
    #[error("the changed rule file does not validate:\n{0}")]
    /// The changed text fails validation (a bug in the editor, or a file already broken).
    Invalid(Diagnostics),
    #[error("the change would not allow {0}; nothing was proposed")]
    /// The operation, which the changed rule still refuses (the exception written does
    /// not cover it): a bug caught before anything is written.
    NotAllowed(String),
}

/// When and why the change is made, for the comment written above it.
#[derive(Clone, Debug, Default)]
pub struct Note {
    /// E.g. `2026-11-27 11:02 UTC`.
    pub when: String,
    /// The session the denial happened in.
    pub session: Option<String>,
    /// Where the denial is recorded (`ledger record 1234`, `approval ap-…`).
    pub from: String,
}

/// The user's rule file: its name (diagnostics) and text (`None`: there is no file yet,
/// the built-in packs apply).
#[derive(Clone, Debug)]
pub struct RuleFile<'a> {
    /// The file's name, for diagnostics.
    pub origin: &'a str,
    /// Its text; `None` when there is no file yet.
    pub text: Option<&'a str>,
}

/// The proposed change.
#[derive(Clone, Debug)]
pub struct Proposal {
    /// The id of the rule that refused the operation.
    pub rule: String,
    /// Where the rule comes from (`builtin:<pack>` or the file).
    pub source: String,
    /// The operation the change allows.
    pub target: Target,
    /// The exception added, as YAML.
    pub exception: String,
    /// The file's text before and after.
    pub old_text: String,
    /// The text to write.
    pub new_text: String,
    /// A unified diff of the two, to show the user before writing.
    pub diff: String,
    /// What the change allows besides the operation (an exception covers every action the
    /// rule covers on its path; a host name covers its subdomains).
    pub notes: Vec<String>,
}

/// The smallest change of `file` that stops `rule_id` from refusing `target`. `rules` is
/// the rule set in force (it tells where the rule comes from); `opts` are the machine's
/// facts the new file is validated with.
pub fn propose(
    rules: &RuleSet,
    file: &RuleFile<'_>,
    rule_id: &str,
    target: &Target,
    note: &Note,
    opts: &Options,
) -> Result<Proposal, AmendError> {
    let rule = rules
        .by_id(rule_id)
        .ok_or_else(|| AmendError::UnknownRule(rule_id.to_owned()))?;
    if rule.locked {
        return Err(AmendError::Locked(rule_id.to_owned()));
    }
    let fits = match (&rule.cond, target) {
        (Some(Cond::Net(_)), Target::Net { .. }) => true,
        (Some(Cond::Net(_) | Cond::View(_)) | None, _) | (Some(_), Target::Net { .. }) => false,
        (Some(_), Target::Path { .. }) => true,
    };
    if !fits {
        return Err(AmendError::NoException {
            rule: rule_id.to_owned(),
            kind: rule.cond.as_ref().map_or("a session effect", Cond::kind),
            target: target.describe(),
        });
    }
    let place = if rule.source == file.origin {
        edit::Place::Rule(rule.span)
    } else if rule.source.starts_with("builtin:") {
        edit::Place::Override(rule_id)
    } else {
        return Err(AmendError::NotEditable {
            rule: rule_id.to_owned(),
            origin: rule.source.clone(),
        });
    };
    let old_text = file.text.unwrap_or("version: 1\n").to_owned();
    let exception = target.exception();
    let comment = comment(note, rule_id, target);
    let new_text = edit::add_exception(&old_text, place, &exception, &comment)?;
    if !edit::same_but_for(&old_text, &new_text, place, &exception) {
        return Err(AmendError::Edit(edit::EditError::Layout(
            "the edit would change more than the one exception (an unusual layout); add it by \
             hand",
        )));
    }
    let new = RuleSet::load_text(file.origin, &new_text, opts).map_err(AmendError::Invalid)?;
    if !same_rule(rules, &new, rule).is_some_and(|r| target.excepted_by(r)) {
        return Err(AmendError::NotAllowed(target.describe()));
    }
    let mut notes = Vec::new();
    match target {
        Target::Path { action, path } if rule.ops().count_ones() > 1 => notes.push(format!(
            "the exception lifts rule `{rule_id}` from {path} for every action it covers, not \
             only {}",
            action.name()
        )),
        Target::Net { host, .. } if host.parse::<IpAddr>().is_err() => {
            notes.push(format!("a host name covers its subdomains too (*.{host})"));
        }
        _ => {}
    }
    Ok(Proposal {
        rule: rule_id.to_owned(),
        source: rule.source.clone(),
        target: target.clone(),
        exception,
        diff: diff(file.origin, &old_text, &new_text),
        old_text,
        new_text,
        notes,
    })
}

/// `rule` of `old` in `new`: the same place among the rules of its source. (An id derived
/// from a rule's text can change with the edit; the edit neither adds nor moves rules.)
fn same_rule<'a>(old: &RuleSet, new: &'a RuleSet, rule: &Rule) -> Option<&'a Rule> {
    if rule.source.starts_with("builtin:") {
        return new.by_id(&rule.id);
    }
    let index = old
        .rules()
        .iter()
        .filter(|r| r.source == rule.source)
        .position(|r| r.span == rule.span)?;
    new.rules()
        .iter()
        .filter(|r| r.source == rule.source)
        .nth(index)
}

fn comment(note: &Note, rule_id: &str, target: &Target) -> String {
    let session = note
        .session
        .as_deref()
        .map(|s| format!(" in session {s}"))
        .unwrap_or_default();
    let from = if note.from.is_empty() {
        String::new()
    } else {
        format!(" ({})", note.from)
    };
    format!(
        "{}: allowed from now on: {}, refused by `{rule_id}`{session}{from}",
        note.when,
        target.describe()
    )
}
