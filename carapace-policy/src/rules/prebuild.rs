//! Builds every deferred matcher of a rule set at once (`lazy_regex` builds each when first
//! used): the daemon and `rules check` do this when rules load, so that a pattern too big to
//! build is an error naming its rule then, never a surprise on a later call.
use super::diag::{Diagnostic, Severity};
use super::lazy_regex::{LazyGlobSet, LazyRegex};
use super::model::{Cond, Effect, TextPattern, Trigger};
use super::pattern::{GlobMatch, PathPattern};
use super::Rule;

/// Something of a rule built when first used.
enum Deferred<'a> {
    Regex(&'a LazyRegex),
    Globs(&'a str, &'a LazyGlobSet),
}

/// Builds every `re:` pattern and glob set of `rules` now, with an error naming the rule for
/// each one that cannot be built: for loaders that serve many calls, or report.
pub fn compile_all(rules: &[Rule], diags: &mut Vec<Diagnostic>) {
    for rule in rules {
        let mut found = Vec::new();
        of_rule(rule, &mut found);
        for deferred in found {
            let (message, hint) = match deferred {
                Deferred::Regex(regex) => match regex.compile() {
                    Ok(_) => continue,
                    Err(e) => (
                        format!("regex `{}` cannot be built: {e}", regex.as_str()),
                        "make it smaller: fewer or shorter repetitions, or ASCII classes \
                         (`(?-u:\\w)`) instead of Unicode ones",
                    ),
                },
                Deferred::Globs(source, set) => match set.compile() {
                    Ok(_) => continue,
                    Err(e) => (
                        format!("glob `{source}` cannot be built: {e}"),
                        "make it simpler: fewer alternatives or brackets",
                    ),
                },
            };
            diags.push(Diagnostic {
                severity: Severity::Error,
                origin: rule.source.clone(),
                span: rule.span,
                message,
                rule: Some(rule.id.clone()),
                hint: Some(hint.into()),
            });
        }
    }
}

/// The regexes of one rule (every condition, exception and trigger).
#[cfg(test)]
pub(crate) fn regexes_of<'a>(rule: &'a Rule, out: &mut Vec<&'a LazyRegex>) {
    let mut found = Vec::new();
    of_rule(rule, &mut found);
    out.extend(found.into_iter().filter_map(|d| match d {
        Deferred::Regex(r) => Some(r),
        Deferred::Globs(..) => None,
    }));
}

fn of_rule<'a>(rule: &'a Rule, out: &mut Vec<Deferred<'a>>) {
    of_cond(rule.cond.as_ref(), out);
    of_paths(&rule.except, out);
    if let Some(Trigger::After { cond, .. }) = &rule.trigger {
        of_cond(cond.as_ref(), out);
    }
    if let Some(Effect::Actions { cond, .. }) = &rule.effect {
        of_cond(cond.as_ref(), out);
    }
}

fn of_cond<'a>(cond: Option<&'a Cond>, out: &mut Vec<Deferred<'a>>) {
    match cond {
        Some(Cond::Path(paths)) => of_paths(paths, out),
        Some(Cond::Command(texts) | Cond::Tool(texts) | Cond::Content(texts)) => {
            out.extend(texts.iter().filter_map(|t| match t {
                TextPattern::Regex { regex, .. } => Some(Deferred::Regex(regex)),
                _ => None,
            }));
        }
        Some(Cond::Run(items)) => {
            out.extend(
                items
                    .iter()
                    .flat_map(super::run::RunMatch::patterns)
                    .filter_map(|t| match t {
                        TextPattern::Regex { regex, .. } => Some(Deferred::Regex(regex)),
                        _ => None,
                    }),
            );
        }
        Some(Cond::All(all) | Cond::Any(all)) => {
            for c in all {
                of_cond(Some(c), out);
            }
        }
        Some(Cond::Not(c)) => of_cond(Some(c), out),
        Some(Cond::Net(_) | Cond::OutsideListener | Cond::View(_)) | None => {}
    }
}

fn of_paths<'a>(paths: &'a [PathPattern], out: &mut Vec<Deferred<'a>>) {
    out.extend(paths.iter().filter_map(|p| match p {
        PathPattern::Regex { regex, .. } => Some(Deferred::Regex(regex)),
        PathPattern::Glob {
            source,
            matcher: GlobMatch::Set(set),
            ..
        } => Some(Deferred::Globs(source, set)),
        PathPattern::Glob { .. } => None,
    }));
}
