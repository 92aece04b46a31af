//! `run:` items: structured command matches (`rules::run`), checked as strictly as the rest
//! of the language — unknown keys with a did-you-mean, option names the tool would never
//! show the matcher (a short alias, an abbreviation) refused with the name to write.

use super::{bool_value, cased_text_patterns, check_keys, strings, Sink};
use crate::engine::shell::canon;
use crate::rules::model::Cond;
use crate::rules::run::{RunMatch, Word};
use crate::rules::yaml::{Node, NodeKind};

const RUN_KEYS: &[&str] = &[
    "program",
    "subcommand",
    "any-option",
    "all-options",
    "no-option",
    "option-value",
    "operand",
    "no-operand",
    "runs",
    "only-options",
    "max-operands",
    "ignore-case",
];

/// `run: {…}` or `run: [{…}, …]` (any of them).
pub(super) fn cond(node: &Node, rule: &str, sink: &mut Sink) -> Option<Cond> {
    let items: Vec<&Node> = match &node.kind {
        NodeKind::Map(_) => vec![node],
        NodeKind::Seq(items) if !items.is_empty() => items.iter().collect(),
        NodeKind::Alias => return None,
        _ => {
            sink.error(
                node.span,
                Some(rule),
                format!("`run` must be a mapping or a list of them, found {}", node.describe()),
                "write e.g. `run: { program: kubectl, subcommand: [config, view], any-option: [--raw] }`",
            );
            return None;
        }
    };
    let parsed: Vec<RunMatch> = items
        .into_iter()
        .filter_map(|i| item(i, rule, sink))
        .collect();
    (!parsed.is_empty()).then_some(Cond::Run(parsed))
}

fn item(node: &Node, rule: &str, sink: &mut Sink) -> Option<RunMatch> {
    let NodeKind::Map(entries) = &node.kind else {
        if !matches!(node.kind, NodeKind::Alias) {
            sink.error(
                node.span,
                Some(rule),
                format!(
                    "each `run` item must be a mapping, found {}",
                    node.describe()
                ),
                "write e.g. `{ program: gh, subcommand: [auth, token] }`",
            );
        }
        return None;
    };
    check_keys(entries, RUN_KEYS, "`run` key", Some(rule), sink);
    let ignore_case = node
        .get("ignore-case")
        .is_some_and(|v| bool_value(v, "ignore-case", rule, sink));
    let mut m = RunMatch {
        ignore_case,
        ..RunMatch::default()
    };
    let Some(programs) = node.get("program") else {
        sink.error(
            node.span,
            Some(rule),
            "a `run` item needs a `program`".into(),
            "name the program, e.g. `program: [kubectl, oc]`",
        );
        return None;
    };
    for (name, span) in strings(programs, "program name", rule, sink) {
        let star = name.find('*');
        let bad = name.is_empty()
            || name == "*"
            || name.contains(['/', '?', '[', ']', '{', '}'])
            || name.contains(char::is_whitespace)
            || star.is_some_and(|i| i + 1 != name.len());
        if bad {
            sink.error(
                span,
                Some(rule),
                format!("invalid program name `{name}`"),
                "write the program's base name (`kubectl`), or a prefix ending in `*` (`git-credential-*`)",
            );
        } else {
            m.programs.push(name.to_owned());
        }
    }
    let verb = node.get("subcommand").and_then(|s| match &s.kind {
        NodeKind::Seq(items) => items.first().and_then(Node::as_str),
        _ => s.as_str(),
    });
    let verb = verb.filter(|v| !v.starts_with("re:") && !v.contains(['*', '?', '[']));
    if let Some(v) = node.get("subcommand") {
        m.subcommand = words(v, "subcommand word", ignore_case, rule, sink);
    }
    let options = |key: &str, sink: &mut Sink| -> Vec<String> {
        node.get(key)
            .map(|v| option_names(v, &m.programs, verb, rule, sink))
            .unwrap_or_default()
    };
    m.any_option = options("any-option", sink);
    m.all_options = options("all-options", sink);
    m.no_option = options("no-option", sink);
    if node.get("only-options").is_some() {
        m.only_options = Some(options("only-options", sink));
    }
    if let Some(v) = node.get("operand") {
        m.operand = words(v, "operand pattern", ignore_case, rule, sink);
    }
    if let Some(v) = node.get("no-operand") {
        m.no_operand = words(v, "operand pattern", ignore_case, rule, sink);
    }
    if let Some(v) = node.get("runs") {
        m.runs = words(v, "program pattern", ignore_case, rule, sink);
    }
    if let Some(v) = node.get("option-value") {
        m.option_values = option_values(v, &m.programs, verb, ignore_case, rule, sink);
    }
    if let Some(v) = node.get("max-operands") {
        match v.as_str().and_then(|s| s.parse::<usize>().ok()) {
            Some(n) => m.max_operands = Some(n),
            None => sink.error(
                v.span,
                Some(rule),
                "`max-operands` must be a whole number".into(),
                "write e.g. `max-operands: 1`",
            ),
        }
    }
    (!m.programs.is_empty()).then_some(m)
}

/// `option-value: { --output: [yaml, json] }`.
fn option_values(
    node: &Node,
    programs: &[String],
    verb: Option<&str>,
    ignore_case: bool,
    rule: &str,
    sink: &mut Sink,
) -> Vec<(String, Vec<Word>)> {
    let NodeKind::Map(entries) = &node.kind else {
        if !matches!(node.kind, NodeKind::Alias) {
            sink.error(
                node.span,
                Some(rule),
                format!(
                    "`option-value` must be a mapping, found {}",
                    node.describe()
                ),
                "write e.g. `option-value: { --output: [yaml, json] }`",
            );
        }
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(k, v)| {
            let name = option_names(k, programs, verb, rule, sink).pop()?;
            let p = words(v, "option value pattern", ignore_case, rule, sink);
            (!p.is_empty()).then_some((name, p))
        })
        .collect()
}

/// Option names as the matcher sees them: the canonical spelling, which the rule must use
/// (a short alias or an abbreviation would never be seen).
fn option_names(
    node: &Node,
    programs: &[String],
    verb: Option<&str>,
    rule: &str,
    sink: &mut Sink,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, span) in strings(node, "option name", rule, sink) {
        if !name.starts_with('-') || name == "-" || name == "--" || name.contains(['=', ' ']) {
            sink.error(
                span,
                Some(rule),
                format!("invalid option name `{name}`"),
                "write the option as the tool spells it, without a value: `--raw`, `-w`",
            );
            continue;
        }
        let renamed = programs
            .iter()
            .find_map(|p| canon::option_name(p, verb, name).map(|c| (p, c)));
        if let Some((program, canonical)) = renamed {
            sink.error(
                span,
                Some(rule),
                format!("`{program}` reads `{name}` as `{canonical}`; the matcher sees that name"),
                &format!("write `{canonical}`"),
            );
            continue;
        }
        out.push(name.to_owned());
    }
    out
}

/// [`patterns`] as the words a `run:` item compares.
fn words(node: &Node, what: &str, ignore_case: bool, rule: &str, sink: &mut Sink) -> Vec<Word> {
    // Whole-word globs (`*` crosses everything) or `re:` regexes (searched: anchor with `^…$`).
    cased_text_patterns(node, what, true, ignore_case, rule, sink)
        .into_iter()
        .map(|p| Word::new(p, ignore_case))
        .collect()
}
