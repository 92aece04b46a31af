//! The rule language: parse (spanned YAML), validate (every problem with file:line:column and
//! a hint), compile (userspace matchers and the kernel image).
//!
//! PLACEHOLDER API — the rules branch replaces the bodies; the signatures are the contract the
//! daemon codes against.
use std::path::Path;

use crate::kernel::image::KernelImage;

/// How strongly a rule acts; a decision is the strictest mode among matched rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    Allow,
    Log,
    Warn,
    Approve,
    Block,
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub id: String,
    /// Friendly message shown to the agent (a default is derived when the file has none).
    pub message: String,
    pub mode: Mode,
    /// `builtin:<pack>` or the rule file's path.
    pub source: String,
    pub locked: bool,
    /// Index in the kernel maps, when the kernel enforces (part of) the rule.
    pub kernel_index: Option<u32>,
}

/// Every problem found in a rule file, each with file:line:column and a hint.
#[derive(Debug)]
pub struct Diagnostics(pub Vec<String>);

impl std::fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    image: KernelImage,
}

impl RuleSet {
    /// The built-in packs that are on by default.
    #[must_use]
    pub fn builtin() -> Self {
        todo!("rules branch")
    }

    /// Reads, validates and compiles a rule file.
    pub fn load(_path: &Path) -> Result<Self, Diagnostics> {
        todo!("rules branch")
    }

    /// Validates and compiles rule text; `origin` names it in diagnostics.
    pub fn parse(_origin: &str, _text: &str) -> Result<Self, Diagnostics> {
        todo!("rules branch")
    }

    #[must_use]
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    #[must_use]
    pub fn kernel_image(&self) -> &KernelImage {
        &self.image
    }

    #[must_use]
    pub fn by_kernel_index(&self, index: u32) -> Option<&Rule> {
        self.rules.iter().find(|r| r.kernel_index == Some(index))
    }
}
