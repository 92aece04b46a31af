//! The rule language: parse (spanned YAML, `yaml`), validate (every problem with
//! `file:line:column` and a hint, `validate`), compile (userspace matchers in `model` /
//! `pattern`, the kernel image in `compile::kernel`). Built-in packs live in `builtin`.
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use crate::host::Host;

use crate::image::KernelImage;
use compile::kernel::Purpose;

pub mod amend;
pub mod builtin;
pub(crate) mod command_index;
pub mod compile;
pub(crate) mod content_index;
pub mod diag;
pub(crate) mod encrypted_dns;
pub(crate) mod index;
pub(crate) mod intersect;
pub(crate) mod lazy_regex;
pub mod model;
pub(crate) mod needles;
pub mod pattern;
pub(crate) mod prebuild;
pub(crate) mod profile;
pub mod run;
pub mod shadow;
pub(crate) mod shape;
pub mod text_pattern;
pub(crate) mod tree_image;
pub mod union;
pub mod validate;
pub mod yaml;

pub use diag::{Diagnostic, Diagnostics, Severity};
pub use model::{Action, Cond, Effect, Enforcement, TlsCheck, Trigger};
pub use pattern::{Homes, PathPattern};
pub(crate) use profile::Profile;
pub use validate::Resolver;
use yaml::Span;

/// How strongly a rule acts; a decision is the strictest mode among matched rules.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The call goes on; a match changes nothing (a stricter rule still wins).
    Allow,
    /// The call goes on; the match is recorded.
    Log,
    /// The call goes on, and the agent is told the rule's message.
    Warn,
    /// The call needs the user's approval first.
    Approve,
    /// The call is refused, with the rule's message.
    Block,
}

/// One validated rule: what it matches, how strongly it acts and what it tells the agent.
#[derive(Clone, Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent yes/no keys of the rule language (locked, hold, llm_review) and \
              whether the id was derived; no two of them form a state"
)]
pub struct Rule {
    /// Unique within the rule set; matches, denials and `carapace rules` name rules by it.
    pub id: String,
    /// Friendly message shown to the agent (a default is derived when the file has none).
    pub message: String,
    /// How strongly the rule acts when it matches.
    pub mode: Mode,
    /// `builtin:<pack>` or the rule file's path.
    pub source: String,
    /// No rule file can switch it off or add exceptions to it, and no session can disable
    /// it: Carapace's self-protection.
    pub locked: bool,
    /// `hold: true`: an approve-mode path rule whose opens the daemon holds (fanotify)
    /// until a human answers, where it has marked the files (`validate::hold`).
    pub hold: bool,
    /// Index in the kernel maps, when the kernel enforces (part of) the rule.
    pub kernel_index: Option<u32>,
    /// Where the rule starts in `source`.
    pub span: Span,
    /// The id was derived from the pattern (no `id:` in the file).
    pub id_derived: bool,
    /// Hash of the rule's text, to tell apart derived ids that would collide.
    pub id_hash: u64,
    /// The file's `category:`, for listings (one of eight under the guardrail profile).
    pub category: Option<String>,
    /// The file's `description:`, also the default message.
    pub description: Option<String>,
    /// As written (`copy` / `move` kept); empty means every action.
    pub actions: Vec<Action>,
    /// What the rule matches; `None` for a pure trigger/effect session rule.
    pub cond: Option<Cond>,
    /// Paths the rule does not cover although its patterns match them (`except:`).
    pub except: Vec<PathPattern>,
    /// Exceptions of a network rule (`except:` on a `host` / `cidr` / `port` match): the
    /// allow-list of a default-deny rule.
    pub except_net: Vec<model::NetMatch>,
    /// `tls: sni`: connections to addresses the session learned for a name are checked by
    /// the name the client asks for (the TLS `ClientHello`'s server name, the HTTP `Host`),
    /// so that an address shared by an allowed and a blocked name opens only the allowed one.
    pub tls: Option<TlsCheck>,
    /// A match is referred to the LLM reviewer, whose answer decides (`llm_review: true`).
    pub llm_review: bool,
    /// What the reviewer is asked to judge, for an `llm_review` rule.
    pub prompt: Option<String>,
    /// The mode that applies when the LLM reviewer cannot answer (not configured, timeout,
    /// error, malformed answer); `approve` (ask the user) unless the rule says otherwise.
    pub on_llm_error: Mode,
    /// The mode that applies when the call's target could not be determined (inline code
    /// that decodes or computes the name it opens) but may be what the rule protects;
    /// `approve` unless the rule says otherwise, and never stricter than `mode`.
    pub on_unknown_target: Mode,
    /// A session rule: when it switches on for the session.
    pub trigger: Option<Trigger>,
    /// A session rule: what it acts on once switched on.
    pub effect: Option<Effect>,
    /// Which layer enforces the rule, and why not the kernel (`carapace rules explain`).
    pub enforcement: Enforcement,
    /// In a union image (`union`): the rule is a named profile's, not the main set's, so
    /// the kernel has it off unless a session's `activated` bit switches it on.
    pub per_session: bool,
}

impl Rule {
    /// Whether the kernel enforces this rule too (worked out now for a rule a one-call load
    /// did not plan).
    #[must_use]
    pub fn kernel_enforced(&self) -> bool {
        match self.enforcement {
            Enforcement::Kernel => true,
            Enforcement::Userspace(_) => false,
            Enforcement::Unplanned => compile::kernel::would_enforce(self),
        }
    }

    /// The `op::*` bits the rule covers (`copy` → read+write, `move` → write+delete).
    #[must_use]
    pub fn ops(&self) -> u32 {
        compile::kernel::rule_ops(self)
    }

    /// Whether a plain path operation matches: the rule matches paths only (no tool, command
    /// or content condition), `path` matches a pattern and no exception, and `op` is covered.
    #[must_use]
    pub fn matches_path(&self, path: &str, op: u32) -> bool {
        let Some(Cond::Path(patterns)) = &self.cond else {
            return false;
        };
        self.ops() & op != 0
            && patterns.iter().any(|p| p.matches(path))
            && !self.except.iter().any(|p| p.matches(path))
    }

    /// Whether a connection to `addr:port` matches an address-only rule.
    #[must_use]
    pub fn matches_net(&self, addr: IpAddr, port: u16) -> bool {
        matches!(&self.cond, Some(Cond::Net(net)) if net.matches(addr, port))
            && !self.except_net.iter().any(|e| e.matches(addr, port))
    }

    /// Whether deciding the rule needs the LLM reviewer: an `llm_review` prompt, or a
    /// plain-English trigger or effect.
    #[must_use]
    pub fn needs_llm(&self) -> bool {
        self.llm_review
            || matches!(self.trigger, Some(Trigger::English(_)))
            || matches!(self.effect, Some(Effect::English(_)))
    }
}

/// What compiling needs from the machine; injectable so tests do not depend on it.
#[derive(Clone, Debug)]
pub struct Options {
    /// Homes `~` and `$HOME` expand to.
    pub homes: Homes,
    /// Host name resolution for `host:` rules.
    pub resolver: Resolver,
    /// The file system the rules' literal paths are resolved on (links on their way, their
    /// files' inodes, the mount table) and rule files are read from.
    pub host: Arc<dyn Host>,
}

/// The rules in force, compiled: their userspace indexes, the kernel image, and the
/// warnings compiling gave. Built once per load and shared read-only.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
    paths: index::PathIndex,
    commands: command_index::CommandIndex,
    contents: content_index::ContentIndex,
    image: KernelImage,
    warnings: Diagnostics,
    profile: Option<Profile>,
}

impl RuleSet {
    /// The built-in packs that are on by default.
    #[must_use]
    pub fn builtin(opts: &Options) -> Self {
        match Self::parse_with("builtin", "version: 1\n", opts) {
            Ok(set) => set,
            Err(diags) => {
                // The packs are tested at build time (see the fixtures); reaching this is a bug.
                tracing::error!("built-in rule packs do not compile:\n{diags}");
                Self::default()
            }
        }
    }

    /// Reads, validates and compiles a rule file. The locked packs (`builtin::ALWAYS`, the
    /// self-protection rules) are in force whatever the file's `builtin:` says.
    pub fn load(path: &Path, opts: &Options) -> Result<Self, Diagnostics> {
        Self::load_with_locked(Some(path), opts, &[])
    }

    /// Validates and compiles rule text; `origin` names it in diagnostics, `opts` gives the
    /// machine's facts (homes, resolver, file system). Takes the text as it is: `builtin:
    /// none` means no pack (see [`RuleSet::load`] for rule files).
    pub fn parse_with(origin: &str, text: &str, opts: &Options) -> Result<Self, Diagnostics> {
        Self::compile_text(origin, text, opts, &[], &[], Purpose::Kernel)
    }

    /// The rules of `path` (`None`: the built-in packs alone), as [`RuleSet::load`] and
    /// [`RuleSet::builtin`] make them, plus `extra` packs (source, text) the daemon writes
    /// at run time about its own endpoints (e.g. its console's port). Their rules are locked
    /// whatever the text says and in force whatever the file selects: no rule file can turn
    /// them off.
    pub fn load_with_locked(
        path: Option<&Path>,
        opts: &Options,
        extra: &[(&str, &str)],
    ) -> Result<Self, Diagnostics> {
        let Some(path) = path else {
            return Self::compile_text(
                "builtin",
                "version: 1\n",
                opts,
                &[],
                extra,
                Purpose::Kernel,
            );
        };
        let (origin, text) = read_file(path, opts)?;
        Self::compile_text(
            &origin,
            &text,
            opts,
            builtin::ALWAYS,
            extra,
            Purpose::Kernel,
        )
    }

    /// [`RuleSet::load`] on text already read (`origin` names it in diagnostics): what a
    /// rule file would give if it held `text`, e.g. a change before it is written.
    pub fn load_text(origin: &str, text: &str, opts: &Options) -> Result<Self, Diagnostics> {
        Self::compile_text(origin, text, opts, builtin::ALWAYS, &[], Purpose::Kernel)
    }

    /// [`RuleSet::load_text`] for Layer 1 alone (see [`RuleSet::load_for_layer1`]): the
    /// cheap form for replaying cases against many rule sets.
    pub fn load_text_for_layer1(
        origin: &str,
        text: &str,
        opts: &Options,
    ) -> Result<Self, Diagnostics> {
        Self::compile_text(origin, text, opts, builtin::ALWAYS, &[], Purpose::Layer1)
    }

    /// [`RuleSet::load`] for Layer 1 alone and one call (`check --local`, the hook's
    /// `--local`): every rule's plan, but no kernel maps or automaton (nor the kernel's
    /// limits checked: `rules check` and the daemon do), and each regex compiled when a call
    /// first needs it. `None` for the file: the built-in packs.
    pub fn load_for_layer1(path: Option<&Path>, opts: &Options) -> Result<Self, Diagnostics> {
        let Some(path) = path else {
            return Self::compile_text("builtin", "version: 1\n", opts, &[], &[], Purpose::Layer1);
        };
        let (origin, text) = read_file(path, opts)?;
        Self::compile_text(&origin, &text, opts, builtin::ALWAYS, &[], Purpose::Layer1)
    }

    /// Compiles rule text with the packs it selects plus `locked_packs` and the run-time
    /// packs `extra` (see [`RuleSet::load_with_locked`]).
    fn compile_text(
        origin: &str,
        text: &str,
        opts: &Options,
        locked_packs: &[&str],
        extra: &[(&str, &str)],
        purpose: Purpose,
    ) -> Result<Self, Diagnostics> {
        Self::compile_with_inherited(origin, text, opts, locked_packs, extra, &[], purpose)
    }

    /// A named profile's rules (`carapace run --profile NAME`): the rule file `path` with the
    /// packs it selects, the always-on packs (`builtin::ALWAYS`) and the run-time packs
    /// `extra`, plus every locked rule of `main` (the rule set in force) the profile does not
    /// already hold, and every rule of `main` that holds in shadow sessions too (private
    /// views, processes outside the session: the ways around self-protection). A profile can
    /// narrow or widen what the main rules say, never drop or weaken those: an id of its own
    /// that reuses one's id is an error.
    pub fn load_profile(
        path: &Path,
        opts: &Options,
        extra: &[(&str, &str)],
        main: &RuleSet,
    ) -> Result<Self, Diagnostics> {
        let (origin, text) = read_file(path, opts)?;
        let inherited: Vec<Rule> = main
            .rules
            .iter()
            .filter(|r| r.locked || r.holds_in_shadow())
            .cloned()
            .collect();
        Self::compile_with_inherited(
            &origin,
            &text,
            opts,
            builtin::ALWAYS,
            extra,
            &inherited,
            Purpose::Profile,
        )
    }

    /// [`RuleSet::compile_text`], plus `inherited` rules (already validated elsewhere) that
    /// the text's own packs and rules do not hold (same source and id).
    fn compile_with_inherited(
        origin: &str,
        text: &str,
        opts: &Options,
        locked_packs: &[&str],
        extra: &[(&str, &str)],
        inherited: &[Rule],
        purpose: Purpose,
    ) -> Result<Self, Diagnostics> {
        let mut diags = Vec::new();
        let Some(model) = parse_file(origin, origin, text, opts, &mut diags) else {
            return Err(Diagnostics(diags));
        };
        let selected: Vec<&str> = match &model.builtin {
            validate::BuiltinSel::Default => builtin::DEFAULT.to_vec(),
            validate::BuiltinSel::All => builtin::NAMES.to_vec(),
            validate::BuiltinSel::List(list) => builtin::NAMES
                .iter()
                .copied()
                .filter(|n| list.iter().any(|l| l == n) || locked_packs.contains(n))
                .collect(),
        };
        let mut rules = pack_rules(&selected, extra, opts, &mut diags);
        let profile = model.profile;
        rules.extend(model.rules);
        let missing: Vec<Rule> = inherited
            .iter()
            .filter(|i| !rules.iter().any(|r| r.source == i.source && r.id == i.id))
            .map(|i| {
                // A main rule whose id a pack of the profile also uses (a user's own copy of
                // a pack's rule) is kept beside it under its source's name: both hold.
                let mut kept = i.clone();
                if rules
                    .iter()
                    .any(|r| r.id == i.id && r.source.starts_with("builtin:"))
                {
                    kept.id = format!("{}@main", i.id);
                }
                kept
            })
            .collect();
        rules.extend(missing);
        assign_ids(&mut rules, &mut diags);
        if !model.overrides.is_empty() {
            let mut sink = diag::Sink::new(origin);
            let ctx = validate::Ctx {
                homes: &opts.homes,
                resolver: opts.resolver,
                packs: builtin::NAMES,
                source: origin,
            };
            validate::apply_overrides(&mut rules, &model.overrides, &ctx, &mut sink);
            diags.extend(sink.items);
        }
        encrypted_dns::add_guards(&mut rules);
        if diags.iter().any(|d| d.severity == Severity::Error) {
            return Err(sorted(diags));
        }
        let serves_many = purpose != Purpose::Layer1;
        if serves_many {
            // Loaders that serve many calls (or report) build every matcher now; a
            // one-call loader builds those its call asks for.
            prebuild::compile_all(&rules, &mut diags);
        }
        // A one-call load plans a rule for the kernel only if a call matches it (the
        // decision's message says whether the kernel refuses it too): planning every
        // pattern was a tenth of such a call.
        let image = match purpose {
            Purpose::Kernel | Purpose::Profile => {
                compile::kernel::compile_with(&mut rules, &mut diags, purpose, &*opts.host)
            }
            Purpose::Layer1 => {
                for rule in &mut rules {
                    rule.enforcement = Enforcement::Unplanned;
                }
                KernelImage::default()
            }
        };
        let diags = sorted(diags);
        if diags.has_errors() {
            return Err(diags);
        }
        let paths = index::PathIndex::build(&rules);
        if serves_many {
            paths.build_all();
        }
        Ok(Self {
            paths,
            commands: command_index::CommandIndex::build(&rules, serves_many),
            contents: if serves_many {
                content_index::ContentIndex::build(&rules)
            } else {
                content_index::ContentIndex::default()
            },
            rules,
            image,
            warnings: diags,
            profile,
        })
    }

    /// Every rule, in load order: packs first, then the file's own rules (a profile's
    /// inherited rules last).
    #[must_use]
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The contract the rule file declares (`profile:`), if any.
    #[must_use]
    pub(crate) fn profile(&self) -> Option<Profile> {
        self.profile
    }

    /// The index of the rules' path patterns (Layer 1's fast path).
    #[must_use]
    pub(crate) fn path_index(&self) -> &index::PathIndex {
        &self.paths
    }

    /// The index of the rules' command regexes (Layer 1's fast path for shell commands).
    #[must_use]
    pub(crate) fn command_index(&self) -> &command_index::CommandIndex {
        &self.commands
    }

    /// The filter of the rules' content patterns (Layer 1's fast path for texts).
    #[must_use]
    pub(crate) fn content_index(&self) -> &content_index::ContentIndex {
        &self.contents
    }

    /// What the kernel's maps must hold for these rules.
    #[must_use]
    pub fn kernel_image(&self) -> &KernelImage {
        &self.image
    }

    /// The rule behind a kernel denial (the index the kernel reports).
    #[must_use]
    pub fn by_kernel_index(&self, index: u32) -> Option<&Rule> {
        self.rules.iter().find(|r| r.kernel_index == Some(index))
    }

    /// The rule with this id, if any.
    #[must_use]
    pub fn by_id(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// Warnings of a rule set that compiled (e.g. host names that did not resolve).
    #[must_use]
    pub fn warnings(&self) -> &Diagnostics {
        &self.warnings
    }

    /// Rules that match a plain path operation (`op` is one `op::*` bit), for fixtures and
    /// `carapace rules test`; the full evaluator (tools, commands, sessions) is `engine`.
    #[must_use]
    pub fn matches_path(&self, path: &str, op: u32) -> Vec<&Rule> {
        self.rules
            .iter()
            .filter(|r| r.matches_path(path, op))
            .collect()
    }

    /// Rules that match a connection to `addr:port`.
    #[must_use]
    pub fn matches_net(&self, addr: IpAddr, port: u16) -> Vec<&Rule> {
        self.rules
            .iter()
            .filter(|r| r.matches_net(addr, port))
            .collect()
    }
}

/// The rules of the built-in packs `selected` and of the run-time packs `extra` (source,
/// text), the latter locked; errors of either go to `diags`.
fn pack_rules(
    selected: &[&str],
    extra: &[(&str, &str)],
    opts: &Options,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Rule> {
    let mut rules = Vec::new();
    for pack in selected {
        let source = format!("builtin:{pack}");
        // Packs name cloud-only hosts (metadata.google.internal) that do not resolve
        // elsewhere; looking them up would only slow start-up down and warn about
        // what the pack knows. Their addresses have rules of their own.
        let pack_opts = Options {
            resolver: |_| None,
            ..opts.clone()
        };
        let mut pack_diags = Vec::new();
        if let Some(m) = parse_pack(pack, &source, &pack_opts, &mut pack_diags) {
            rules.extend(m.rules);
        }
        diags.extend(
            pack_diags
                .into_iter()
                .filter(|d| d.severity == Severity::Error),
        );
    }
    for (source, text) in extra {
        let mut pack_diags = Vec::new();
        if let Some(m) = parse_file(source, source, text, opts, &mut pack_diags) {
            rules.extend(m.rules.into_iter().map(|mut r| {
                r.locked = true;
                r
            }));
        }
        diags.extend(
            pack_diags
                .into_iter()
                .filter(|d| d.severity == Severity::Error),
        );
    }
    rules
}

/// A rule file's name (for diagnostics) and text; an error diagnostic when unreadable.
fn read_file(path: &Path, opts: &Options) -> Result<(String, String), Diagnostics> {
    let origin = path.display().to_string();
    match opts.host.read_to_string(path) {
        Ok(text) => Ok((origin, text)),
        Err(e) => Err(Diagnostics(vec![Diagnostic {
            severity: Severity::Error,
            origin,
            span: Span { line: 1, col: 1 },
            message: format!("cannot read the rule file: {e}"),
            rule: None,
            hint: Some("check the path and its permissions".into()),
        }])),
    }
}

fn parse_file(
    origin: &str,
    source: &str,
    text: &str,
    opts: &Options,
    diags: &mut Vec<Diagnostic>,
) -> Option<validate::FileModel> {
    let mut sink = diag::Sink::new(origin);
    let root = match yaml::parse(text) {
        Ok(root) => root,
        Err(e) => {
            sink.error(
                e.span,
                None,
                format!("YAML syntax: {}", e.message),
                "fix the YAML syntax at this position",
            );
            diags.extend(sink.items);
            return None;
        }
    };
    Some(validate_tree(root.as_ref(), source, opts, sink, diags))
}

/// [`parse_file`] for a built-in pack: its tree comes from the image `build.rs` wrote
/// (`tree_image`), the same tree its text parses to without the parsing.
fn parse_pack(
    pack: &str,
    source: &str,
    opts: &Options,
    diags: &mut Vec<Diagnostic>,
) -> Option<validate::FileModel> {
    match builtin::tree_image(pack).map(tree_image::decode) {
        Some(Ok(root)) => Some(validate_tree(
            root.as_ref(),
            source,
            opts,
            diag::Sink::new(source),
            diags,
        )),
        // Not reached (a test reads every image back); the text gives the same rules.
        Some(Err(tree_image::Malformed)) | None => parse_file(
            source,
            source,
            builtin::text(pack).unwrap_or_default(),
            opts,
            diags,
        ),
    }
}

fn validate_tree(
    root: Option<&yaml::Node>,
    source: &str,
    opts: &Options,
    mut sink: diag::Sink,
    diags: &mut Vec<Diagnostic>,
) -> validate::FileModel {
    let ctx = validate::Ctx {
        homes: &opts.homes,
        resolver: opts.resolver,
        packs: builtin::NAMES,
        source,
    };
    let model = validate::file(root, &ctx, &mut sink);
    diags.extend(sink.items);
    model
}

fn sorted(mut diags: Vec<Diagnostic>) -> Diagnostics {
    diags.sort_by(|a, b| (&a.origin, a.span).cmp(&(&b.origin, b.span)));
    Diagnostics(diags)
}

/// Makes ids unique: explicit ids must be; derived ids that collide all get a suffix from
/// their rule's text, so that no id depends on the order of the rules.
fn assign_ids(rules: &mut [Rule], diags: &mut Vec<Diagnostic>) {
    let mut explicit: BTreeMap<String, usize> = BTreeMap::new();
    let mut derived: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in rules.iter().enumerate() {
        if r.id_derived {
            *derived.entry(r.id.clone()).or_default() += 1;
        } else if let Some(&first) = explicit.get(&r.id) {
            let f = &rules[first];
            diags.push(Diagnostic {
                severity: Severity::Error,
                origin: r.source.clone(),
                span: r.span,
                message: format!(
                    "rule id `{}` is already used at {}:{}:{}",
                    r.id, f.source, f.span.line, f.span.col
                ),
                rule: Some(r.id.clone()),
                hint: Some("rule ids must be unique; rename one".into()),
            });
        } else {
            explicit.insert(r.id.clone(), i);
        }
    }
    let mut taken: BTreeMap<String, (String, Span)> = BTreeMap::new();
    for r in rules.iter_mut() {
        if r.id_derived
            && (derived.get(&r.id).copied().unwrap_or(0) > 1 || explicit.contains_key(&r.id))
        {
            r.id = format!("{}-{:08x}", r.id, r.id_hash as u32);
        }
        if r.id_derived {
            if let Some((src, span)) = taken.get(&r.id) {
                diags.push(Diagnostic {
                    severity: Severity::Error,
                    origin: r.source.clone(),
                    span: r.span,
                    message: format!(
                        "the same rule is already given at {src}:{}:{}",
                        span.line, span.col
                    ),
                    rule: Some(r.id.clone()),
                    hint: Some("remove the duplicate, or give each an `id:`".into()),
                });
            }
            taken.insert(r.id.clone(), (r.source.clone(), r.span));
        }
        if r.message.is_empty() {
            r.message = r.description.clone().unwrap_or_else(|| default_message(r));
        }
    }
}

fn default_message(r: &Rule) -> String {
    let what = match r.mode {
        Mode::Block => "blocked",
        Mode::Approve => "needs approval",
        Mode::Warn => "allowed with a warning",
        Mode::Log => "logged",
        Mode::Allow => "allowed",
    };
    format!("{what} by rule `{}`", r.id)
}

#[cfg(test)]
mod tests;
