//! One simple command as the tool reads it, as data for structured command rules (`run:`):
//! written by `shell::canon`, read by `rules::run`. Its own module so that the rule language
//! and the shell analysis both use it without depending on each other.

/// One simple command as the tool reads it (`shell::canon::invocation`), for structured
/// command rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invocation {
    /// The program as the tool is known (`kubecolor` → `kubectl`).
    pub program: String,
    /// Options and operands in the order written (for git: the verb first).
    pub args: Vec<Arg>,
}

/// A word (or two) of an [`Invocation`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arg {
    /// An option by the name the tool knows it (its long name where it has one), with its
    /// value when it took one.
    Option { name: String, value: Option<String> },
    /// A word that is no option. `after_option`: it follows an option the tool's spec does
    /// not settle, so it may be that option's value rather than an operand.
    Operand { word: String, after_option: bool },
    /// `--`: options end; what follows is operands (often a command to run).
    End,
}

impl Invocation {
    /// The first word after `--`: the command a runner (`op run -- CMD`) starts.
    #[must_use]
    pub fn runs(&self) -> Option<&str> {
        let end = self.args.iter().position(|a| matches!(a, Arg::End))?;
        self.args.get(end + 1..)?.iter().find_map(|a| match a {
            Arg::Operand { word, .. } => Some(word.as_str()),
            _ => None,
        })
    }

    /// Operands with whether each may be an option's value.
    pub fn operands(&self) -> impl Iterator<Item = (&str, bool)> {
        self.args.iter().filter_map(|a| match a {
            Arg::Operand { word, after_option } => Some((word.as_str(), *after_option)),
            _ => None,
        })
    }

    /// Options by name, with their values: an attached value, or the word after an option
    /// whose value the spec does not settle.
    pub fn options(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.args.iter().enumerate().filter_map(|(i, a)| match a {
            Arg::Option { name, value } => {
                let value = value.as_deref().or_else(|| match self.args.get(i + 1) {
                    Some(Arg::Operand {
                        word,
                        after_option: true,
                    }) => Some(word.as_str()),
                    _ => None,
                });
                Some((name.as_str(), value))
            }
            _ => None,
        })
    }
}
