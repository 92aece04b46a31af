//! First stage: the spanned YAML tree → the rule model, reporting every problem (never
//! stopping at the first) with its position, the rule it belongs to and a hint.

use std::net::IpAddr;

use carapace_common::op;
use globset::GlobBuilder;

use super::diag::{did_you_mean, Sink};
use super::lazy_regex::{LazyGlob, LazyRegex};
use super::model::{
    Action, Cidr, Cond, Effect, Enforcement, Host, NetMatch, TextPattern, TlsCheck, Trigger,
};
use super::pattern::{Homes, PathPattern};
use super::profile::Profile;
use super::yaml::{Node, NodeKind, Span};
use super::{Mode, Rule};

/// Resolves a host name to addresses; `None` when it does not resolve.
pub type Resolver = fn(&str) -> Option<Vec<IpAddr>>;

/// What validation needs from the outside world.
pub(crate) struct Ctx<'a> {
    pub homes: &'a Homes,
    pub resolver: Resolver,
    pub packs: &'a [&'a str],
    /// `builtin:<pack>` or the file name, recorded in each rule.
    pub source: &'a str,
}

/// Which built-in packs a file asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BuiltinSel {
    /// No `builtin:` key: the packs that are on by default.
    Default,
    All,
    List(Vec<String>),
}

pub(crate) struct FileModel {
    pub builtin: BuiltinSel,
    /// The contract the file declares with `profile:` (see `profile`).
    pub profile: Option<Profile>,
    pub rules: Vec<Rule>,
    /// `exceptions:`: exceptions the file adds to built-in rules (applied by
    /// [`apply_overrides`] once the packs are read).
    pub overrides: Vec<Override>,
}

/// One `exceptions:` entry: `{ rule: ID, except: … }`, the way a file relaxes a built-in
/// rule without leaving its pack out. The value is checked against the rule it names (paths
/// or addresses), so it is kept as written until the packs are read.
#[derive(Clone, Debug)]
pub(crate) struct Override {
    pub rule: String,
    pub span: Span,
    pub except: Node,
}

const TOP_KEYS: &[&str] = &["version", "builtin", "profile", "rules", "exceptions"];
const OVERRIDE_KEYS: &[&str] = &["rule", "except"];
const MODES: &[&str] = &["block", "approve", "warn", "log", "allow"];
const RULE_KEYS: &[&str] = &[
    "id",
    "mode",
    "action",
    "block",
    "approve",
    "warn",
    "log",
    "allow",
    "except",
    "actions",
    "message",
    "category",
    "description",
    "locked",
    "match",
    "all",
    "any",
    "not",
    "llm_review",
    "prompt",
    "on_llm_error",
    "on_unknown_target",
    "trigger",
    "effect",
    "tls",
    "hold",
];
const MATCH_KEYS: &[&str] = &[
    "path", "command", "run", "tool", "content", "host", "cidr", "port", "unix", "view", "all",
    "any", "not",
];

mod hold;
mod run;

/// The one `unix:` selector: sockets whose listener is outside the agent's session.
const OUTSIDE_SESSION: &str = "outside-session";
/// The private views of the file system a `view:` rule can refuse, with their kernel ops.
const VIEWS: [(&str, u32); 2] = [("chroot", op::CHROOT), ("user-namespace", op::USERNS)];

fn mode_from_name(name: &str) -> Option<Mode> {
    Some(match name {
        "block" => Mode::Block,
        "approve" => Mode::Approve,
        "warn" => Mode::Warn,
        "log" => Mode::Log,
        "allow" => Mode::Allow,
        _ => return None,
    })
}

/// How `mode` is written in rule files, for messages and the API.
#[must_use]
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Block => "block",
        Mode::Approve => "approve",
        Mode::Warn => "warn",
        Mode::Log => "log",
        Mode::Allow => "allow",
    }
}

/// Validates a whole file. `root` is `None` for an empty file.
pub(crate) fn file(root: Option<&Node>, ctx: &Ctx<'_>, sink: &mut Sink) -> FileModel {
    let mut model = FileModel {
        builtin: BuiltinSel::Default,
        profile: None,
        rules: Vec::new(),
        overrides: Vec::new(),
    };
    let Some(root) = root else {
        sink.error(
            Span { line: 1, col: 1 },
            None,
            "the rule file is empty".into(),
            "start it with `version: 1`",
        );
        return model;
    };
    report_aliases(root, sink);
    let NodeKind::Map(entries) = &root.kind else {
        sink.error(
            root.span,
            None,
            format!(
                "expected a mapping with `version` and `rules`, found {}",
                root.describe()
            ),
            "start the file with `version: 1` and a `rules:` list",
        );
        return model;
    };
    check_keys(entries, TOP_KEYS, "top-level key", None, sink);
    match root.get("version") {
        None => sink.error(
            root.span,
            None,
            "missing `version`".into(),
            "add `version: 1` at the top",
        ),
        Some(v) if v.as_str() == Some("1") && !v.is_null() => {}
        Some(v) => sink.error(
            v.span,
            None,
            format!("unsupported version `{}`", v.as_str().unwrap_or("?")),
            "this Carapace reads `version: 1`",
        ),
    }
    if let Some(b) = root.get("builtin") {
        model.builtin = builtin(b, ctx, sink);
    }
    if let Some(p) = root.get("profile") {
        model.profile = profile(p, sink);
    }
    if let Some(x) = root.get("exceptions") {
        model.overrides = overrides(x, sink);
    }
    if let Some(rules) = root.get("rules") {
        match &rules.kind {
            NodeKind::Seq(items) => {
                for item in items {
                    let mut rule = rule(item, ctx, sink);
                    if model.profile == Some(Profile::Guardrail)
                        && matches!(item.kind, NodeKind::Map(_))
                    {
                        super::profile::check_guardrail(item, rule.as_mut(), sink);
                    }
                    model.rules.extend(rule);
                }
            }
            _ if rules.is_null() => {}
            NodeKind::Alias => {}
            _ => sink.error(
                rules.span,
                None,
                format!("`rules` must be a list, found {}", rules.describe()),
                "write each rule as a list item starting with `- `",
            ),
        }
    }
    model
}

/// The entries of `exceptions:`, each a mapping with `rule` and `except`.
fn overrides(node: &Node, sink: &mut Sink) -> Vec<Override> {
    let items = match &node.kind {
        NodeKind::Seq(items) => items,
        _ if node.is_null() => return Vec::new(),
        NodeKind::Alias => return Vec::new(),
        _ => {
            sink.error(
                node.span,
                None,
                format!("`exceptions` must be a list, found {}", node.describe()),
                "write each entry as `- rule: ID` with `except: [...]` under it",
            );
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for item in items {
        let NodeKind::Map(entries) = &item.kind else {
            if !matches!(item.kind, NodeKind::Alias) {
                sink.error(
                    item.span,
                    None,
                    format!(
                        "an exceptions entry must be a mapping, found {}",
                        item.describe()
                    ),
                    "write `- rule: ssh-private-keys` and `except: [\"/path\"]` under it",
                );
            }
            continue;
        };
        check_keys(entries, OVERRIDE_KEYS, "exceptions key", None, sink);
        let rule = item
            .get("rule")
            .and_then(|r| r.as_str().filter(|_| !r.is_null()));
        match (rule, item.get("except")) {
            (Some(rule), Some(except)) => out.push(Override {
                rule: rule.to_owned(),
                span: item.span,
                except: except.clone(),
            }),
            _ => sink.error(
                item.span,
                None,
                "an exceptions entry needs `rule` (a built-in rule's id) and `except`".into(),
                "write `- rule: ssh-private-keys` and `except: [\"/path\"]` under it",
            ),
        }
    }
    out
}

/// Adds the file's `exceptions:` to the built-in rules they name. Only a built-in rule in
/// force can take one: a locked rule never (no rule file may weaken it), nor a rule of the
/// file itself (its own `except:` is the place).
pub(crate) fn apply_overrides(
    rules: &mut [Rule],
    overrides: &[Override],
    ctx: &Ctx<'_>,
    sink: &mut Sink,
) {
    for o in overrides {
        let Some(rule) = rules.iter_mut().find(|r| r.id == o.rule) else {
            sink.error(
                o.span,
                Some(&o.rule),
                format!("no rule `{}` is in force to add exceptions to", o.rule),
                "name a rule of a selected built-in pack (`carapace rules list`)",
            );
            continue;
        };
        if !rule.source.starts_with("builtin:") {
            sink.error(
                o.span,
                Some(&o.rule),
                format!("rule `{}` is not a built-in rule", o.rule),
                "add the exception to the rule's own `except:`",
            );
            continue;
        }
        if rule.locked {
            sink.error(
                o.span,
                Some(&o.rule),
                format!(
                    "rule `{}` is locked: no rule file can add exceptions to it",
                    o.rule
                ),
                "locked rules protect Carapace itself; remove this entry",
            );
            continue;
        }
        match &rule.cond {
            Some(Cond::Net(_)) => {
                let extra = net_exceptions(&o.except, ctx, &o.rule, sink);
                rule.except_net.extend(extra);
            }
            Some(Cond::View(_)) | None => sink.error(
                o.span,
                Some(&o.rule),
                format!("rule `{}` takes no exceptions", o.rule),
                "leave its pack out, or switch it off for one session",
            ),
            Some(_) => {
                let extra = paths(&o.except, ctx, &o.rule, sink);
                rule.except.extend(extra);
            }
        }
    }
}

fn report_aliases(node: &Node, sink: &mut Sink) {
    match &node.kind {
        NodeKind::Alias => sink.error(
            node.span,
            None,
            "YAML aliases (`*name`) are not supported in rule files".into(),
            "write the value out in full",
        ),
        NodeKind::Seq(items) => items.iter().for_each(|n| report_aliases(n, sink)),
        NodeKind::Map(entries) => entries.iter().for_each(|(k, v)| {
            report_aliases(k, sink);
            report_aliases(v, sink);
        }),
        NodeKind::Scalar { .. } => {}
    }
}

/// Unknown and repeated keys of a mapping.
fn check_keys(
    entries: &[(Node, Node)],
    known: &[&str],
    what: &str,
    rule: Option<&str>,
    sink: &mut Sink,
) {
    let mut seen: Vec<&str> = Vec::new();
    for (k, _) in entries {
        let Some(key) = k.as_str() else {
            if !matches!(k.kind, NodeKind::Alias) {
                sink.error(k.span, rule, format!("a {what} must be a plain word"), "");
            }
            continue;
        };
        if !known.contains(&key) {
            sink.error(
                k.span,
                rule,
                format!("unknown {what} `{key}`"),
                &did_you_mean(key, known),
            );
        } else if seen.contains(&key) {
            sink.error(
                k.span,
                rule,
                format!("`{key}` is given twice"),
                "keep one of them",
            );
        }
        seen.push(key);
    }
}

fn profile(node: &Node, sink: &mut Sink) -> Option<Profile> {
    let name = node.as_str().filter(|_| !node.is_null());
    let found = name.and_then(Profile::from_name);
    if found.is_none() && !matches!(node.kind, NodeKind::Alias) {
        sink.error(
            node.span,
            None,
            format!("unknown profile `{}`", name.unwrap_or("?")),
            &did_you_mean(name.unwrap_or(""), Profile::NAMES),
        );
    }
    found
}

fn builtin(node: &Node, ctx: &Ctx<'_>, sink: &mut Sink) -> BuiltinSel {
    match &node.kind {
        NodeKind::Scalar { value, .. } if value == "all" => BuiltinSel::All,
        NodeKind::Scalar { value, .. } if value == "none" => BuiltinSel::List(Vec::new()),
        NodeKind::Seq(items) => {
            let mut packs = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(name) if ctx.packs.contains(&name) => packs.push(name.to_owned()),
                    Some(name) => sink.error(
                        item.span,
                        None,
                        format!("unknown built-in pack `{name}`"),
                        &did_you_mean(name, ctx.packs),
                    ),
                    None => sink.error(item.span, None, "a pack name must be a word".into(), ""),
                }
            }
            BuiltinSel::List(packs)
        }
        NodeKind::Alias => BuiltinSel::All,
        NodeKind::Scalar { .. } | NodeKind::Map(_) => {
            sink.error(
                node.span,
                None,
                "`builtin` must be `all`, `none` or a list of pack names".into(),
                &format!("packs: {}", ctx.packs.join(", ")),
            );
            BuiltinSel::All
        }
    }
}

/// Strings of a scalar-or-list value; reports anything else.
fn strings<'n>(node: &'n Node, what: &str, rule: &str, sink: &mut Sink) -> Vec<(&'n str, Span)> {
    match &node.kind {
        NodeKind::Scalar { value, .. } if !node.is_null() => vec![(value.as_str(), node.span)],
        NodeKind::Seq(items) if !items.is_empty() => items
            .iter()
            .filter_map(|i| match i.as_str() {
                Some(s) if !i.is_null() => Some((s, i.span)),
                _ => {
                    if !matches!(i.kind, NodeKind::Alias) {
                        sink.error(
                            i.span,
                            Some(rule),
                            format!("each {what} must be a string"),
                            "",
                        );
                    }
                    None
                }
            })
            .collect(),
        NodeKind::Alias => Vec::new(),
        _ => {
            sink.error(
                node.span,
                Some(rule),
                format!(
                    "expected a {what} or a list of them, found {}",
                    node.describe()
                ),
                "",
            );
            Vec::new()
        }
    }
}

fn text_value(node: &Node, key: &str, rule: &str, sink: &mut Sink) -> Option<String> {
    match &node.kind {
        NodeKind::Scalar { value, .. } if !node.is_null() => Some(value.clone()),
        NodeKind::Alias => None,
        _ => {
            sink.error(
                node.span,
                Some(rule),
                format!("`{key}` must be text, found {}", node.describe()),
                "",
            );
            None
        }
    }
}

fn bool_value(node: &Node, key: &str, rule: &str, sink: &mut Sink) -> bool {
    node.as_bool().unwrap_or_else(|| {
        if !matches!(node.kind, NodeKind::Alias) {
            sink.error(
                node.span,
                Some(rule),
                format!("`{key}` must be `true` or `false`"),
                "",
            );
        }
        false
    })
}

/// Lower-case words joined by `-`, for ids derived from patterns.
fn slug(text: &str) -> String {
    let text = text
        .replace("${HOME}", "home")
        .replace("$HOME", "home")
        .replace('~', "home");
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let mut out = out.trim_end_matches('-').to_owned();
    out.truncate(60);
    out.trim_end_matches('-').to_owned()
}

/// A short, order-independent text for a node (no positions), for ids and hashes.
pub(crate) fn render(node: &Node) -> String {
    let mut out = String::new();
    render_pieces(node, &mut |piece| out.push_str(piece));
    out
}

/// Gives [`render`]'s text to `out` piece by piece, without building it: hashing every
/// rule's text this way took a fifth of loading the built-in packs when it was built.
fn render_pieces(node: &Node, out: &mut impl FnMut(&str)) {
    match &node.kind {
        NodeKind::Scalar { value, .. } => out(value),
        NodeKind::Alias => out("*"),
        NodeKind::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out(" ");
                }
                render_pieces(item, out);
            }
        }
        NodeKind::Map(entries) => {
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out(" ");
                }
                render_pieces(k, out);
                out(" ");
                render_pieces(v, out);
            }
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a over `text`, continuing from `hash`: a stable hash (std's `DefaultHasher` may
/// change between releases).
fn fnv_more(hash: u64, text: &str) -> u64 {
    text.bytes().fold(hash, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The FNV-1a hash of `render(node)`, without the text.
pub(crate) fn fnv_of(node: &Node) -> u64 {
    let mut hash = FNV_OFFSET;
    render_pieces(node, &mut |piece| hash = fnv_more(hash, piece));
    hash
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

#[allow(
    clippy::too_many_lines,
    reason = "one pass over a rule's keys reads best in one place"
)]
fn rule(node: &Node, ctx: &Ctx<'_>, sink: &mut Sink) -> Option<Rule> {
    let NodeKind::Map(entries) = &node.kind else {
        if !matches!(node.kind, NodeKind::Alias) {
            sink.error(
                node.span,
                None,
                format!("a rule must be a mapping, found {}", node.describe()),
                "write e.g. `- block: \"~/.ssh/**\"`",
            );
        }
        return None;
    };
    let errors_before = sink
        .items
        .iter()
        .filter(|d| d.severity == super::diag::Severity::Error)
        .count();

    // Mode: from the short form key or `mode:`/`action:`.
    let short: Vec<(&Node, &Node)> = entries
        .iter()
        .filter(|(k, _)| k.as_str().is_some_and(|k| MODES.contains(&k)))
        .map(|(k, v)| (k, v))
        .collect();
    let explicit_id = node
        .get("id")
        .and_then(|n| n.as_str().map(|s| (s.to_owned(), n.span)));
    let id_hash = fnv_of(node);
    let (id, id_derived) = if let Some((id, _)) = &explicit_id {
        (id.clone(), false)
    } else {
        let derived_text = short
            .first()
            .map(|(k, v)| format!("{} {}", render(k), render(v)))
            .or_else(|| {
                node.get("match").map(|m| {
                    format!(
                        "{} {}",
                        node.get("mode").map_or_else(String::new, render),
                        render(m)
                    )
                })
            })
            .unwrap_or_else(|| render(node));
        let s = slug(&derived_text);
        let id = if s.is_empty() {
            format!("rule-{:08x}", id_hash as u32)
        } else {
            s
        };
        (id, true)
    };
    let rid = id.as_str();
    check_keys(entries, RULE_KEYS, "rule key", Some(rid), sink);
    if let Some((id, span)) = &explicit_id {
        if !valid_id(id) {
            sink.error(
                *span,
                Some(rid),
                format!("invalid rule id `{id}`"),
                "use letters, digits, `-`, `_`, `.` and `:`",
            );
        }
    } else if let Some(n) = node.get("id") {
        sink.error(n.span, None, "`id` must be text".into(), "");
    }

    let mut mode = None;
    if short.len() > 1 {
        sink.error(
            short[1].0.span,
            Some(rid),
            "a rule has one mode; found several short forms".into(),
            "split it into several rules",
        );
    }
    if let Some((k, _)) = short.first() {
        mode = k.as_str().and_then(mode_from_name);
    }
    let mode_nodes: Vec<&Node> = ["mode", "action"]
        .iter()
        .filter_map(|k| node.get(k))
        .collect();
    if mode_nodes.len() > 1 {
        sink.error(
            mode_nodes[1].span,
            Some(rid),
            "`mode` and `action` are the same setting".into(),
            "keep one of them",
        );
    }
    if let Some(m) = mode_nodes.first() {
        match m.as_str().filter(|_| !m.is_null()) {
            Some(name) => match mode_from_name(name) {
                Some(given) if short.is_empty() => mode = Some(given),
                Some(_) => sink.error(
                    m.span,
                    Some(rid),
                    "the mode is set twice (short form and `mode`)".into(),
                    "drop `mode:` or write the pattern under `match: { path: … }`",
                ),
                None => sink.error(
                    m.span,
                    Some(rid),
                    format!("unknown mode `{name}`"),
                    &did_you_mean(name, MODES),
                ),
            },
            None => sink.error(
                m.span,
                Some(rid),
                "`mode` must be a word".into(),
                &did_you_mean("", MODES),
            ),
        }
    }
    // DESIGN: rules without a mode block (`match:`, `all:`, trigger/effect rules).
    let mode = mode.unwrap_or(Mode::Block);

    // What the rule matches.
    let errors_before_match = sink.error_count();
    let mut conds = Vec::new();
    if let Some((_, v)) = short.first() {
        match &v.kind {
            NodeKind::Map(m) => {
                if let Some(c) = match_map(v, m, ctx, rid, sink) {
                    conds.push(c);
                }
            }
            _ if v.is_null() => {}
            _ => {
                let pats = paths(v, ctx, rid, sink);
                if !pats.is_empty() {
                    conds.push(Cond::Path(pats));
                }
            }
        }
    }
    if let Some(m) = node.get("match") {
        match &m.kind {
            NodeKind::Map(entries) => conds.extend(match_map(m, entries, ctx, rid, sink)),
            NodeKind::Alias => {}
            _ => sink.error(
                m.span,
                Some(rid),
                format!("`match` must be a mapping, found {}", m.describe()),
                "write `match: { path: \"/etc/**\" }`",
            ),
        }
    }
    for key in ["all", "any", "not"] {
        if let Some(c) = node.get(key) {
            conds.extend(composite(key, c, ctx, rid, sink));
        }
    }
    let cond = match conds.len() {
        0 => None,
        1 => conds.pop(),
        _ => Some(Cond::All(conds)),
    };

    let actions = node
        .get("actions")
        .map(|a| actions(a, rid, sink))
        .unwrap_or_default();
    // A network rule's exceptions are addresses (its allow-list); any other rule's are paths.
    let (except, except_net) = match (&cond, node.get("except")) {
        (Some(Cond::Net(_)), Some(e)) => (Vec::new(), net_exceptions(e, ctx, rid, sink)),
        (_, Some(e)) => (paths(e, ctx, rid, sink), Vec::new()),
        (_, None) => (Vec::new(), Vec::new()),
    };
    let message = node
        .get("message")
        .and_then(|n| text_value(n, "message", rid, sink));
    let category = node
        .get("category")
        .and_then(|n| text_value(n, "category", rid, sink));
    let description = node
        .get("description")
        .and_then(|n| text_value(n, "description", rid, sink));
    let locked = node
        .get("locked")
        .is_some_and(|n| bool_value(n, "locked", rid, sink));
    let llm_review = node
        .get("llm_review")
        .is_some_and(|n| bool_value(n, "llm_review", rid, sink));
    let prompt = node
        .get("prompt")
        .and_then(|n| text_value(n, "prompt", rid, sink));
    if let (Some(_), false, Some(p)) = (&prompt, llm_review, node.get("prompt")) {
        sink.error(
            p.span,
            Some(rid),
            "`prompt` is only used by an LLM review".into(),
            "add `llm_review: true` or drop `prompt`",
        );
    }
    let trigger = node.get("trigger").and_then(|t| trigger(t, ctx, rid, sink));
    let effect = node.get("effect").and_then(|e| effect(e, ctx, rid, sink));
    let on_llm_error = node.get("on_llm_error").and_then(|n| {
        let english = matches!(trigger, Some(Trigger::English(_)))
            || matches!(effect, Some(Effect::English(_)));
        if !llm_review && !english {
            sink.error(
                n.span,
                Some(rid),
                "`on_llm_error` is only used by rules the LLM reviewer decides".into(),
                "add `llm_review: true` with a `prompt`, or drop `on_llm_error`",
            );
        }
        mode_key(n, "on_llm_error", rid, sink)
    });
    let on_unknown_target = node
        .get("on_unknown_target")
        .and_then(|n| mode_key(n, "on_unknown_target", rid, sink));
    if llm_review && prompt.is_none() && sink.error_count() == errors_before {
        if let Some(n) = node.get("llm_review") {
            sink.error(
                n.span,
                Some(rid),
                "an LLM review needs a `prompt`".into(),
                "add `prompt: \"Does this change weaken authentication?\"` (the question the model answers)",
            );
        }
    }

    // A pattern that was already reported as invalid leaves no condition: saying that the
    // rule matches nothing as well would only bury the real error under a consequence.
    if cond.is_none() && effect.is_none() && sink.error_count() == errors_before_match {
        sink.error(
            node.span,
            Some(rid),
            "the rule matches nothing".into(),
            "give it a pattern (`block: \"/etc/**\"`), a `match:`, or a `trigger:` with an `effect:`",
        );
    }
    if effect.is_some() && trigger.is_none() {
        if let Some(e) = node.get("effect") {
            sink.error(
                e.span,
                Some(rid),
                "`effect` needs a `trigger`".into(),
                "add `trigger: always` or a `trigger: { after: … }`",
            );
        }
    }
    kernel_only_checks(node, cond.as_ref(), mode, rid, sink);
    if let Some(Cond::Net(_)) = &cond {
        if let Some(bad) = actions.iter().find(|a| **a != Action::Network) {
            if let Some(a) = node.get("actions") {
                sink.error(
                    a.span,
                    Some(rid),
                    format!("action `{}` does not apply to a network match", bad.name()),
                    "network rules take `actions: [network]` (the default)",
                );
            }
        }
    }

    let hold = hold::hold(node, cond.as_ref(), mode, &actions, rid, sink);

    let tls = node
        .get("tls")
        .and_then(|n| tls_check(n, cond.as_ref(), &except_net, mode, rid, sink));

    let errors_after = sink
        .items
        .iter()
        .filter(|d| d.severity == super::diag::Severity::Error)
        .count();
    if errors_after > errors_before {
        return None;
    }
    // An empty message gets its default once the id is final (see `RuleSet::parse_with`).
    let message = message.unwrap_or_default();
    Some(Rule {
        id,
        message,
        mode,
        source: ctx.source.to_owned(),
        locked,
        hold,
        kernel_index: None,
        span: node.span,
        id_derived,
        id_hash,
        category,
        description,
        actions,
        cond,
        except,
        except_net,
        tls,
        llm_review,
        prompt,
        on_llm_error: on_llm_error.unwrap_or(Mode::Approve),
        on_unknown_target: on_unknown_target.unwrap_or(Mode::Approve),
        trigger,
        effect,
        enforcement: Enforcement::Userspace("not compiled yet".into()),
        per_session: false,
    })
}

/// The one `tls:` check: `sni`.
const TLS_CHECKS: &[&str] = &["sni"];

/// `tls: sni`, on a network rule that names hosts (in its match or its `except:`): the
/// check compares the name a client asks for with the names the rules speak of, so a rule
/// of addresses only has nothing to compare it with.
fn tls_check(
    n: &Node,
    cond: Option<&Cond>,
    except_net: &[NetMatch],
    mode: Mode,
    rid: &str,
    sink: &mut Sink,
) -> Option<TlsCheck> {
    match n.as_str().filter(|_| !n.is_null()) {
        Some("sni") => {}
        Some(other) => {
            sink.error(
                n.span,
                Some(rid),
                format!("unknown `tls` check `{other}`"),
                &did_you_mean(other, TLS_CHECKS),
            );
            return None;
        }
        None => {
            if !matches!(n.kind, NodeKind::Alias) {
                sink.error(
                    n.span,
                    Some(rid),
                    format!("`tls` must be a word, found {}", n.describe()),
                    "write `tls: sni`",
                );
            }
            return None;
        }
    }
    let names_hosts = match cond {
        Some(Cond::Net(net)) => {
            net.names().next().is_some() || except_net.iter().any(|e| e.names().next().is_some())
        }
        _ => false,
    };
    if !names_hosts {
        sink.error(
            n.span,
            Some(rid),
            "`tls: sni` checks host names, and this rule names none".into(),
            "use it on a rule with `host:` names (`block: { host: \"*.pastebin.com\" }`) or an allow-list excepting names (`block: { host: \"*\" }` with `except: [github.com]`), or drop `tls:`",
        );
        return None;
    }
    if mode != Mode::Block {
        sink.error(
            n.span,
            Some(rid),
            "`tls: sni` refuses connections, which only a `block` rule does".into(),
            "make the rule `block`, or drop `tls:`",
        );
        return None;
    }
    Some(TlsCheck::Sni)
}

/// A key whose value is a mode (`on_unknown_target: block`).
fn mode_key(n: &Node, key: &str, rid: &str, sink: &mut Sink) -> Option<Mode> {
    let name = n.as_str().filter(|_| !n.is_null());
    match name.map(|s| (s, mode_from_name(s))) {
        Some((_, Some(m))) => Some(m),
        Some((name, None)) => {
            sink.error(
                n.span,
                Some(rid),
                format!("unknown `{key}` mode `{name}`"),
                &did_you_mean(name, MODES),
            );
            None
        }
        None => {
            if !matches!(n.kind, NodeKind::Alias) {
                sink.error(
                    n.span,
                    Some(rid),
                    format!("`{key}` must be a mode"),
                    &format!("write `{key}: block` (or approve, warn, log, allow)"),
                );
            }
            None
        }
    }
}

/// A rule only the kernel can match (`unix: outside-session`, `view:`) stands on its own
/// (no other match, no composite around it, no trigger), blocks, and covers the one
/// operation it names.
fn kernel_only_checks(node: &Node, cond: Option<&Cond>, mode: Mode, rule: &str, sink: &mut Sink) {
    fn nested(cond: &Cond) -> Option<&'static str> {
        match cond {
            Cond::All(cs) | Cond::Any(cs) => cs.iter().find_map(nested),
            Cond::Not(c) => nested(c),
            c => c.kernel_only(),
        }
    }
    let Some(cond) = cond else { return };
    let Some(form) = nested(cond) else { return };
    let span = node.span;
    if cond.kernel_only().is_none() {
        sink.error(
            span,
            Some(rule),
            format!("`{form}` cannot be combined with other matches"),
            "only the kernel sees what it matches: give it a rule of its own",
        );
    }
    if mode != Mode::Block {
        sink.error(
            span,
            Some(rule),
            format!(
                "a `{form}` rule is enforced by the kernel, which can only block; mode `{}` \
                 cannot apply",
                mode_name(mode)
            ),
            "use `block:` (the default)",
        );
    }
    let mut keys = vec!["actions", "trigger", "effect", "llm_review"];
    if matches!(cond, Cond::View(_)) {
        keys.push("except");
    }
    for key in keys {
        if let Some(n) = node.get(key) {
            sink.error(
                n.span,
                Some(rule),
                format!("`{key}` does not apply to a `{form}` rule"),
                "the rule covers the operation it names, in every session; drop the key",
            );
        }
    }
}

fn paths(node: &Node, ctx: &Ctx<'_>, rule: &str, sink: &mut Sink) -> Vec<PathPattern> {
    strings(node, "path pattern", rule, sink)
        .into_iter()
        .filter_map(|(s, span)| match PathPattern::parse(s, ctx.homes) {
            Ok(p) => {
                if let PathPattern::Glob { expanded, .. } = &p {
                    if expanded.is_empty() {
                        sink.warning(
                            span,
                            Some(rule),
                            format!("`{s}` matches nothing: no account has a home directory"),
                            "use an absolute path, or create the account first",
                        );
                    }
                }
                Some(p)
            }
            Err(e) => {
                sink.error(span, Some(rule), e.message, &e.hint);
                None
            }
        })
        .collect()
}

fn actions(node: &Node, rule: &str, sink: &mut Sink) -> Vec<Action> {
    let mut out = Vec::new();
    let items = strings(node, "action", rule, sink);
    if items.is_empty() && !matches!(node.kind, NodeKind::Alias) {
        sink.error(
            node.span,
            Some(rule),
            "`actions` is empty".into(),
            &format!("list some of: {}", Action::NAMES.join(", ")),
        );
    }
    for (name, span) in items {
        match Action::from_name(name) {
            Some(a) if !out.contains(&a) => out.push(a),
            Some(_) => {}
            None => sink.error(
                span,
                Some(rule),
                format!("unknown action `{name}`"),
                &did_you_mean(name, Action::NAMES),
            ),
        }
    }
    out
}

/// `re:` regexes, and globs (`glob`) or substrings otherwise.
fn text_patterns(
    node: &Node,
    what: &str,
    glob: bool,
    rule: &str,
    sink: &mut Sink,
) -> Vec<TextPattern> {
    cased_text_patterns(node, what, glob, false, rule, sink)
}

/// [`text_patterns`], `ignore_case` for regexes and globs alike (`run:` items).
fn cased_text_patterns(
    node: &Node,
    what: &str,
    glob: bool,
    ignore_case: bool,
    rule: &str,
    sink: &mut Sink,
) -> Vec<TextPattern> {
    strings(node, what, rule, sink)
        .into_iter()
        .filter_map(|(s, span)| {
            let parsed = if let Some(re) = s.strip_prefix("re:") {
                let source = if ignore_case {
                    format!("(?i){re}")
                } else {
                    re.to_owned()
                };
                LazyRegex::new(&source)
                    .map(|regex| TextPattern::Regex {
                        source: s.to_owned(),
                        regex,
                    })
                    .map_err(|e| format!("invalid regex `{re}`: {e}"))
            } else if glob {
                GlobBuilder::new(s)
                    .case_insensitive(ignore_case)
                    .build()
                    .map(|g| TextPattern::Glob {
                        source: s.to_owned(),
                        matcher: LazyGlob::new(g),
                    })
                    .map_err(|e| format!("invalid glob `{s}`: {e}"))
            } else {
                Ok(TextPattern::Substring(s.to_owned()))
            };
            parsed
                .map_err(|m| {
                    sink.error(
                        span,
                        Some(rule),
                        m,
                        "fix the pattern (`re:` takes Rust regex syntax)",
                    );
                })
                .ok()
        })
        .collect()
}

/// A `match:` mapping (also the short-form value `{host: …}` and each item of all/any).
fn match_map(
    node: &Node,
    entries: &[(Node, Node)],
    ctx: &Ctx<'_>,
    rule: &str,
    sink: &mut Sink,
) -> Option<Cond> {
    check_keys(entries, MATCH_KEYS, "match key", Some(rule), sink);
    match_entries(node, entries, &[], ctx, rule, sink)
}

/// Builds the condition of a mapping's match keys, ignoring `skip` keys (checked by the caller).
fn match_entries(
    node: &Node,
    entries: &[(Node, Node)],
    skip: &[&str],
    ctx: &Ctx<'_>,
    rule: &str,
    sink: &mut Sink,
) -> Option<Cond> {
    let mut conds = Vec::new();
    let mut net = NetMatch::default();
    let mut has_net = false;
    for (k, v) in entries {
        let Some(key) = k.as_str() else { continue };
        if skip.contains(&key) {
            continue;
        }
        match key {
            "path" => {
                let p = paths(v, ctx, rule, sink);
                if !p.is_empty() {
                    conds.push(Cond::Path(p));
                }
            }
            "command" => conds.push(Cond::Command(text_patterns(
                v,
                "command pattern",
                true,
                rule,
                sink,
            ))),
            "run" => conds.extend(run::cond(v, rule, sink)),
            "tool" => conds.push(Cond::Tool(text_patterns(v, "tool name", true, rule, sink))),
            "content" => conds.push(Cond::Content(text_patterns(
                v,
                "content pattern",
                false,
                rule,
                sink,
            ))),
            "host" => {
                has_net = true;
                for (h, span) in strings(v, "host", rule, sink) {
                    if h == "*" {
                        // Every address, IPv4 (mapped) and IPv6: the base of an allow-list.
                        net.cidrs.push(Cidr::new([0; 16], 0));
                    } else if let Some(host) = host(h, span, ctx, rule, sink, false) {
                        net.hosts.push(host);
                    }
                }
            }
            "cidr" => {
                has_net = true;
                for (c, span) in strings(v, "CIDR block", rule, sink) {
                    match Cidr::parse(c) {
                        Some(cidr) => net.cidrs.push(cidr),
                        None => sink.error(
                            span,
                            Some(rule),
                            format!("invalid CIDR block `{c}`"),
                            "write e.g. `10.0.0.0/8` or `fd00::/8`",
                        ),
                    }
                }
            }
            "port" => {
                has_net = true;
                for (p, span) in port_values(v, rule, sink) {
                    match p.parse::<u16>() {
                        Ok(0) => sink.error(
                            span,
                            Some(rule),
                            "port 0 is not a port".into(),
                            "leave `port` out to match every port",
                        ),
                        Ok(port) => net.ports.push(port),
                        Err(_) => sink.error(
                            span,
                            Some(rule),
                            format!("invalid port `{p}`"),
                            "a port is a number from 1 to 65535",
                        ),
                    }
                }
            }
            "unix" => conds.extend(unix_selector(v, rule, sink)),
            "view" => conds.extend(view_selector(v, rule, sink)),
            "all" | "any" | "not" => conds.extend(composite(key, v, ctx, rule, sink)),
            _ => {}
        }
    }
    if has_net {
        conds.push(Cond::Net(net));
    }
    match conds.len() {
        0 => {
            if entries.is_empty() {
                sink.error(
                    node.span,
                    Some(rule),
                    "empty match".into(),
                    "add `path`, `command`, `run`, `tool`, `content`, `host`, `cidr`, `port`, `unix` or `view`",
                );
            }
            None
        }
        1 => conds.pop(),
        _ => Some(Cond::All(conds)),
    }
}

/// `unix: outside-session`, the one selector of unix sockets by who made them.
fn unix_selector(v: &Node, rule: &str, sink: &mut Sink) -> Option<Cond> {
    match v.as_str().filter(|_| !v.is_null()) {
        Some(OUTSIDE_SESSION) => Some(Cond::OutsideListener),
        other => {
            sink.error(
                v.span,
                Some(rule),
                format!(
                    "unknown unix socket selector `{}`",
                    other.map_or_else(|| render(v), str::to_owned)
                ),
                "write `unix: outside-session` (sockets whose listener is outside the agent's \
                 session; name the allowed ones in `except:`); a socket path is a path rule: \
                 `block: \"/run/foo.sock\"`",
            );
            None
        }
    }
}

/// `view: chroot`, `view: [chroot, user-namespace]`: the private views of the file system
/// refused.
fn view_selector(v: &Node, rule: &str, sink: &mut Sink) -> Option<Cond> {
    let mut ops = 0;
    for (name, span) in strings(v, "view", rule, sink) {
        match VIEWS.iter().find(|(n, _)| *n == name) {
            Some((_, bit)) => ops |= bit,
            None => sink.error(
                span,
                Some(rule),
                format!("unknown view `{name}`"),
                "write `view: chroot`, `view: user-namespace` or both as a list",
            ),
        }
    }
    (ops != 0).then_some(Cond::View(ops))
}

/// The exceptions of a network rule: host names, addresses and CIDR blocks as strings, or
/// mappings `{ host, cidr, port }` (an exception on some ports only).
fn net_exceptions(node: &Node, ctx: &Ctx<'_>, rule: &str, sink: &mut Sink) -> Vec<NetMatch> {
    let items: Vec<&Node> = match &node.kind {
        NodeKind::Seq(items) => items.iter().collect(),
        _ => vec![node],
    };
    let mut out = Vec::new();
    for item in items {
        match &item.kind {
            NodeKind::Map(entries) => {
                check_keys(
                    entries,
                    &["host", "cidr", "port"],
                    "network exception key",
                    Some(rule),
                    sink,
                );
                if let Some(Cond::Net(net)) = match_entries(item, entries, &[], ctx, rule, sink) {
                    out.push(net);
                }
            }
            NodeKind::Scalar { value, .. } if !item.is_null() => {
                if value == "*" {
                    sink.error(
                        item.span,
                        Some(rule),
                        "an exception of every address leaves nothing to block".into(),
                        "list the hosts or blocks that are allowed",
                    );
                } else if value.starts_with(['/', '~', '$']) {
                    sink.error(
                        item.span,
                        Some(rule),
                        format!(
                            "`{value}` looks like a path; the exceptions of a network rule are \
                             hosts and address blocks"
                        ),
                        "list allowed hosts or blocks, e.g. `except: [github.com, 10.0.0.0/8]`",
                    );
                } else if let Some(cidr) = Cidr::parse(value) {
                    out.push(NetMatch {
                        cidrs: vec![cidr],
                        ..NetMatch::default()
                    });
                } else if let Some(h) = host(value, item.span, ctx, rule, sink, true) {
                    out.push(NetMatch {
                        hosts: vec![h],
                        ..NetMatch::default()
                    });
                }
            }
            NodeKind::Alias => {}
            _ => sink.error(
                item.span,
                Some(rule),
                format!(
                    "a network exception must be a host, an address block or a mapping, found {}",
                    item.describe()
                ),
                "write e.g. `except: [github.com, 10.0.0.0/8, { host: pypi.org, port: 443 }]`",
            ),
        }
    }
    out
}

fn port_values<'n>(node: &'n Node, rule: &str, sink: &mut Sink) -> Vec<(&'n str, Span)> {
    strings(node, "port", rule, sink)
}

/// A host of a match, or of a network rule's allow-list when `allowed`.
fn host(
    text: &str,
    span: Span,
    ctx: &Ctx<'_>,
    rule: &str,
    sink: &mut Sink,
    allowed: bool,
) -> Option<Host> {
    let bare = text.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(Host::Ip(ip));
    }
    // `*.example.com`: the subdomains of a name, not the name itself.
    let wildcard = text.strip_prefix("*.");
    let labels = wildcard.unwrap_or(text);
    let valid = !labels.is_empty()
        && text.len() <= 253
        && labels.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if !valid {
        sink.error(
            span,
            Some(rule),
            format!("invalid host `{text}`"),
            "write a host name, `*.` and a name for its subdomains, or an IP address (ranges \
             go under `cidr`)",
        );
        return None;
    }
    if wildcard.is_some() {
        // A wildcard names no address to look up: only names are matched (tool calls, and
        // lookups where a session resolver runs), so the kernel cannot hold it by address.
        sink.warning(
            span,
            Some(rule),
            if allowed {
                format!(
                    "allowed host `{text}` has no fixed addresses; the kernel allows its \
                     subdomains only by the addresses a session's resolver hands out"
                )
            } else {
                format!(
                    "host `{text}` has no fixed addresses; the kernel refuses only the \
                     addresses a session's resolver hands out for it"
                )
            },
            "tool calls and lookups naming a subdomain are still checked",
        );
        return Some(Host::Name {
            name: text.to_owned(),
            resolved: Vec::new(),
        });
    }
    let resolved = (ctx.resolver)(text).unwrap_or_default();
    if resolved.is_empty() && allowed {
        sink.warning(
            span,
            Some(rule),
            format!(
                "allowed host `{text}` does not resolve; the kernel will refuse connects to it \
                 (tool calls naming it are still allowed)"
            ),
            "check the name, or allow its addresses under `cidr`",
        );
    } else if resolved.is_empty() {
        sink.warning(
            span,
            Some(rule),
            format!(
                "host `{text}` does not resolve; the kernel refuses only the addresses a \
                 session's resolver hands out for it"
            ),
            "check the name; the rule is still checked on tool calls",
        );
    }
    Some(Host::Name {
        name: text.to_owned(),
        resolved,
    })
}

fn composite(key: &str, node: &Node, ctx: &Ctx<'_>, rule: &str, sink: &mut Sink) -> Option<Cond> {
    let item = |n: &Node, sink: &mut Sink| match &n.kind {
        NodeKind::Map(entries) => match_map(n, entries, ctx, rule, sink),
        NodeKind::Alias => None,
        _ => {
            sink.error(
                n.span,
                Some(rule),
                format!("each `{key}` item must be a mapping such as `{{ path: \"/etc/**\" }}`"),
                "",
            );
            None
        }
    };
    match (key, &node.kind) {
        ("not", NodeKind::Map(_)) => item(node, sink).map(|c| Cond::Not(Box::new(c))),
        ("all" | "any", NodeKind::Seq(items)) if !items.is_empty() => {
            let conds: Vec<Cond> = items.iter().filter_map(|i| item(i, sink)).collect();
            (conds.len() == items.len()).then(|| {
                if key == "all" {
                    Cond::All(conds)
                } else {
                    Cond::Any(conds)
                }
            })
        }
        (_, NodeKind::Alias) => None,
        _ => {
            let hint = if key == "not" {
                "write `not: { path: … }`"
            } else {
                "write a non-empty list of match mappings"
            };
            sink.error(
                node.span,
                Some(rule),
                format!("`{key}` has the wrong shape ({})", node.describe()),
                hint,
            );
            None
        }
    }
}

/// The actions and match of a trigger's `after:` or of an `effect:`.
fn actions_and_match(
    node: &Node,
    what: &str,
    ctx: &Ctx<'_>,
    rule: &str,
    sink: &mut Sink,
) -> Option<(Vec<Action>, Option<Cond>)> {
    let NodeKind::Map(entries) = &node.kind else {
        sink.error(
            node.span,
            Some(rule),
            format!("`{what}` must be a mapping or plain text"),
            "write e.g. `{ actions: [write] }`",
        );
        return None;
    };
    let mut known = MATCH_KEYS.to_vec();
    known.push("actions");
    check_keys(entries, &known, &format!("`{what}` key"), Some(rule), sink);
    let actions = node
        .get("actions")
        .map(|a| actions(a, rule, sink))
        .unwrap_or_default();
    let cond = match_entries(node, entries, &["actions"], ctx, rule, sink);
    if actions.is_empty() && cond.is_none() {
        sink.error(
            node.span,
            Some(rule),
            format!("`{what}` is empty"),
            "give it `actions:` and/or a match such as `path:`",
        );
    }
    Some((actions, cond))
}

fn trigger(node: &Node, ctx: &Ctx<'_>, rule: &str, sink: &mut Sink) -> Option<Trigger> {
    match &node.kind {
        NodeKind::Scalar { value, .. } if value == "always" => Some(Trigger::Always),
        NodeKind::Scalar { value, .. } if !node.is_null() => Some(Trigger::English(value.clone())),
        NodeKind::Map(entries) => {
            check_keys(entries, &["after"], "trigger key", Some(rule), sink);
            let after = node.get("after").or_else(|| {
                sink.error(
                    node.span,
                    Some(rule),
                    "a structured trigger needs `after:`".into(),
                    "write `trigger: { after: { actions: [network] } }`",
                );
                None
            })?;
            let (actions, cond) = actions_and_match(after, "after", ctx, rule, sink)?;
            Some(Trigger::After { actions, cond })
        }
        NodeKind::Alias => None,
        _ => {
            sink.error(
                node.span,
                Some(rule),
                "`trigger` must be `always`, plain text or `{ after: … }`".into(),
                "",
            );
            None
        }
    }
}

fn effect(node: &Node, ctx: &Ctx<'_>, rule: &str, sink: &mut Sink) -> Option<Effect> {
    match &node.kind {
        NodeKind::Scalar { value, .. } if !node.is_null() => Some(Effect::English(value.clone())),
        NodeKind::Map(_) => {
            let (actions, cond) = actions_and_match(node, "effect", ctx, rule, sink)?;
            Some(Effect::Actions { actions, cond })
        }
        NodeKind::Alias => None,
        _ => {
            sink.error(
                node.span,
                Some(rule),
                "`effect` must be plain text or `{ actions: … }`".into(),
                "",
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{fnv_more, fnv_of, render, slug, FNV_OFFSET};
    use crate::rules::{builtin, yaml};

    /// How `render` built its text before it gave pieces: the reference.
    fn joined(node: &yaml::Node) -> String {
        match &node.kind {
            yaml::NodeKind::Scalar { value, .. } => value.clone(),
            yaml::NodeKind::Alias => "*".into(),
            yaml::NodeKind::Seq(items) => items.iter().map(joined).collect::<Vec<_>>().join(" "),
            yaml::NodeKind::Map(entries) => entries
                .iter()
                .map(|(k, v)| format!("{} {}", joined(k), joined(v)))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// Hashing the pieces is hashing the whole text, for every rule of every pack and for
    /// trees with every kind of node.
    #[test]
    fn the_streamed_hash_is_the_hash_of_the_text() {
        let mut texts: Vec<&str> = builtin::NAMES
            .iter()
            .filter_map(|n| builtin::text(n))
            .collect();
        texts.extend([
            "- &x a\n- *x\n- [b, {c: [d, e], f: ~}]\n",
            "k: ''\n\"\": v\n",
        ]);
        for text in texts {
            let Some(root) = yaml::parse(text).unwrap() else {
                continue;
            };
            let mut nodes = vec![&root];
            while let Some(node) = nodes.pop() {
                let text = joined(node);
                assert_eq!(render(node), text);
                assert_eq!(fnv_of(node), fnv_more(FNV_OFFSET, &text), "{node:?}");
                match &node.kind {
                    yaml::NodeKind::Seq(items) => nodes.extend(items),
                    yaml::NodeKind::Map(entries) => {
                        nodes.extend(entries.iter().flat_map(|(k, v)| [k, v]));
                    }
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn slugs_are_stable_words() {
        assert_eq!(slug("block ~/.env"), "block-home-env");
        assert_eq!(slug("block **/.env"), "block-env");
        assert_eq!(
            slug("block host 169.254.169.254 port 80"),
            "block-host-169-254-169-254-port-80"
        );
        assert_eq!(slug("***"), "");
    }
}
