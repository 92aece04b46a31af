//! Diagnostics: every problem of a rule file, each with `file:line:column`, the rule it is
//! about and a hint, so `carapace rules check` can list them all at once.

use std::fmt;

use super::yaml::Span;

/// Whether a problem stops the file from loading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Reported; the rules load anyway (e.g. a host name that did not resolve).
    Warning,
    /// The file is refused and the rules in force stay as they were.
    Error,
}

/// One problem, located in its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Whether it stops the file from loading.
    pub severity: Severity,
    /// The file (or `builtin:<pack>`) the problem is in.
    pub origin: String,
    /// Where in the file.
    pub span: Span,
    /// What is wrong, naming the value and the limit it breaks.
    pub message: String,
    /// Id of the rule the problem belongs to, when known.
    pub rule: Option<String>,
    /// How to fix it, when there is a usual fix.
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(
            f,
            "{}:{}:{}: {severity}: {}",
            self.origin, self.span.line, self.span.col, self.message
        )?;
        if let Some(rule) = &self.rule {
            write!(f, " (rule `{rule}`)")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// Every problem found in a rule file, errors and warnings, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    #[must_use]
    pub(crate) fn has_errors(&self) -> bool {
        self.0.iter().any(|d| d.severity == Severity::Error)
    }

    /// The problems that stop the file from loading.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.severity == Severity::Error)
    }

    /// The problems reported while the rules load anyway.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.severity == Severity::Warning)
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// Collects diagnostics for one origin.
#[derive(Debug)]
pub struct Sink {
    /// The file every diagnostic collected here is about.
    pub origin: String,
    /// What was collected, in the order it was found.
    pub items: Vec<Diagnostic>,
}

impl Sink {
    /// An empty sink for the file `origin`.
    #[must_use]
    pub fn new(origin: &str) -> Self {
        Self {
            origin: origin.to_owned(),
            items: Vec::new(),
        }
    }

    /// How many errors were collected: the caller stops once one was.
    #[must_use]
    pub fn error_count(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    /// Collects an error at `span` (about rule `rule` when given); `hint` may be empty.
    pub fn error(&mut self, span: Span, rule: Option<&str>, message: String, hint: &str) {
        self.push(Severity::Error, span, rule, message, hint);
    }

    /// Collects a warning, as [`Sink::error`] does an error.
    pub(crate) fn warning(&mut self, span: Span, rule: Option<&str>, message: String, hint: &str) {
        self.push(Severity::Warning, span, rule, message, hint);
    }

    fn push(
        &mut self,
        severity: Severity,
        span: Span,
        rule: Option<&str>,
        message: String,
        hint: &str,
    ) {
        self.items.push(Diagnostic {
            severity,
            origin: self.origin.clone(),
            span,
            message,
            rule: rule.map(str::to_owned),
            hint: (!hint.is_empty()).then(|| hint.to_owned()),
        });
    }
}

/// A "did you mean `x`?" hint for `word` among `known`, or a list of the known words.
#[must_use]
pub fn did_you_mean(word: &str, known: &[&str]) -> String {
    let lower = word.to_lowercase();
    let best = known
        .iter()
        .map(|k| (strsim::levenshtein(&lower, k), *k))
        .min_by_key(|(d, _)| *d);
    match best {
        Some((d, k)) if d <= 2.max(word.len() / 3) => format!("did you mean `{k}`?"),
        _ => format!("expected one of: {}", known.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_and_suggestion() {
        assert_eq!(
            did_you_mean("rulse", &["version", "builtin", "rules"]),
            "did you mean `rules`?"
        );
        assert!(did_you_mean("zzzzzz", &["version", "rules"]).starts_with("expected one of"));
        // Case does not count; one edit away is close, three away from three letters is not.
        assert_eq!(did_you_mean("RULEZ", &["rules"]), "did you mean `rules`?");
        assert!(did_you_mean("", &["abc"]).starts_with("expected one of"));
    }

    #[test]
    fn display_format() {
        let mut sink = Sink::new("rules.yaml");
        sink.error(
            Span { line: 3, col: 5 },
            Some("x"),
            "bad thing".into(),
            "do this",
        );
        assert_eq!(
            sink.items[0].to_string(),
            "rules.yaml:3:5: error: bad thing (rule `x`)\n  hint: do this"
        );
    }
}
