//! Second stage, kernel side: validated rules → [`KernelImage`], the intended contents of
//! every BPF map. A rule reaches the kernel only when the maps can hold it exactly; anything
//! else stays in userspace with the reason recorded in [`Rule::enforcement`], never a
//! silent downgrade.

use std::collections::BTreeMap;
use std::path::Path;

use crate::host::{FileKind, Host};

use carapace_common::{
    op, Config, NetRef, RuleMeta, RuleRef, MAX_RULES, NAME_MAX, PATH_MAX, REFS_PER_KEY, REF_EXCEPT,
    RULE_ALWAYS_ON, RULE_APPROVE, RULE_EVERY_ADDRESS, RULE_HOLD, RULE_NO_SHADOW,
};

use crate::image::KernelImage;
use crate::rules::compile::dfa::{self, BuildError, HirError, Source};
use crate::rules::compile::resolution::{self, with_link_targets, Mounts};
use crate::rules::diag::{Diagnostic, Severity};
use crate::rules::model::{ops_of, Cidr, Cond, Effect, Enforcement, Trigger};
use crate::rules::pattern::{BadGlob, KernelForm, PathPattern};
use crate::rules::validate::mode_name;
use crate::rules::{Mode, Rule};

/// How the kernel matches one rule (what `carapace rules explain` shows): path forms with
/// their exceptions (map keys, and patterns for the path automaton), or (address block,
/// port; 0 = any) pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// A path rule.
    Path {
        /// Patterns the path maps hold (exact paths, `/dir/**` prefixes, `**/name`).
        forms: Vec<KernelForm>,
        /// Exceptions the path maps hold.
        excepts: Vec<KernelForm>,
        /// Patterns only the path automaton can match.
        automata: Vec<Automaton>,
        /// Exceptions only the path automaton can match.
        except_automata: Vec<Automaton>,
    },
    /// An address rule.
    Net {
        /// The blocks and ports refused.
        entries: Vec<(Cidr, u16)>,
        /// The allow-list: exceptions written as addresses or blocks, plus the addresses
        /// host names resolved to when the rules were compiled (names themselves are
        /// matched in userspace only: the kernel sees addresses, not names).
        excepts: Vec<(Cidr, u16)>,
    },
    /// `view:`: the private views of the file system refused in sessions (`op::CHROOT`,
    /// `op::USERNS` bits), judged by their own hooks with no map entries.
    View {
        /// The `op::CHROOT` / `op::USERNS` bits refused.
        ops: u32,
    },
}

/// A pattern no map form holds, matched by the kernel's path automaton.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Automaton {
    /// As written (a glob with `~` expanded, or the `re:` pattern).
    pub pattern: String,
    /// The regex the automaton is built from, and whether it matches whole paths.
    pub source: Source,
}

/// Kernel operations a rule denies: its actions, or every file operation for a path rule and
/// `network` for an address rule when it names none. An `execute` rule also denies reads of
/// the file: a copy, a memfd or the dynamic loader (`ld.so FILE`) run a binary's bytes
/// without an exec of its path.
#[must_use]
pub fn rule_ops(rule: &Rule) -> u32 {
    let ops = actions_ops(rule);
    if ops & op::EXEC != 0 {
        ops | op::READ
    } else {
        ops
    }
}

fn actions_ops(rule: &Rule) -> u32 {
    if let Some(Effect::Actions { actions, .. }) = &rule.effect {
        if !actions.is_empty() {
            return ops_of(actions);
        }
    }
    if !rule.actions.is_empty() {
        return ops_of(&rule.actions);
    }
    match kernel_cond(rule) {
        Some(Cond::Net(_)) => op::NETWORK,
        Some(Cond::OutsideListener) => op::OUTSIDE,
        Some(Cond::View(ops)) => *ops,
        _ => op::ALL,
    }
}

/// Why the kernel cannot enforce a rule (shown as the rule's `userspace only` reason).
#[derive(Debug, thiserror::Error)]
pub enum NotInKernel {
    /// A mode the kernel has no answer for (`warn`, `log`, `allow`); the mode's name.
    #[error(
        "mode `{0}` is decided in userspace; only `block` and `approve` rules reach the kernel"
    )]
    Mode(&'static str),
    /// `approve` on something the kernel cannot hold an approval for.
    #[error(
        "mode `approve` reaches the kernel for path and address rules only (an approval \
         there is an exception for one path, or one address and port); this rule is decided \
         in userspace"
    )]
    ApproveOffPath,
    /// The LLM reviewer decides, and it lives in userspace.
    #[error("the rule asks for an LLM review, which happens in userspace")]
    LlmReview,
    /// The trigger is described in words, for the reviewer.
    #[error("a plain-English trigger is decided by the LLM reviewer")]
    EnglishTrigger,
    /// The effect is described in words, for the reviewer.
    #[error("a plain-English effect is judged by the LLM reviewer")]
    EnglishEffect,
    /// An effect without a target would refuse the agent's own work in the kernel.
    #[error(
        "the effect names no path or address (it covers every operation of its actions), \
         which the kernel cannot tell apart from the agent's own work; give the effect a path \
         or address"
    )]
    EffectWithoutTarget,
    /// The effect has a condition of its own beyond its target.
    #[error(
        "the rule narrows its effect with a match of its own, which is evaluated in userspace"
    )]
    NarrowedEffect,
    /// An `all` condition also matches on something only userspace sees (its kind).
    #[error("the rule also matches on `{0}`, which the kernel cannot see")]
    AlsoMatches(&'static str),
    /// `any` / `not`, or an `all` of parts the kernel has no single key for.
    #[error("composite conditions (all / any / not) are evaluated in userspace")]
    Composite,
    /// The condition's kind.
    #[error("the rule matches on `{0}`, which the kernel cannot see")]
    Matches(&'static str),
    /// Neither a path nor an address to key a map on.
    #[error("the rule has no path or address to match")]
    NoTarget,
    /// A glob expansion globset refuses.
    #[error(transparent)]
    Glob(#[from] BadGlob),
    /// A pattern the path automaton cannot be built for (see [`HirError`]).
    #[error("pattern `{pattern}` cannot be matched by the kernel's path automaton: {source}")]
    Automaton {
        /// The pattern, as written.
        pattern: String,
        /// Why the automaton cannot hold it.
        #[source]
        source: HirError,
    },
    /// The rule could be enforced, one of its exceptions not: the reason is the exception's.
    #[error(
        "an exception cannot be expressed in the kernel, and enforcing the rule without it \
         would block what it allows: {0}"
    )]
    Exception(#[source] Box<NotInKernel>),
}

/// The kernel plan of a rule, or why the kernel cannot enforce it (the same reason the
/// compiler records in [`Rule::enforcement`]). An `approve` rule on paths or addresses
/// reaches the kernel too, flagged [`RULE_APPROVE`]: refused there until a human approves
/// the operation (path and action, or address and port) for the session.
pub fn plan(rule: &Rule) -> Result<Plan, NotInKernel> {
    if !matches!(rule.mode, Mode::Block | Mode::Approve) {
        return Err(NotInKernel::Mode(mode_name(rule.mode)));
    }
    if rule.llm_review {
        return Err(NotInKernel::LlmReview);
    }
    if let Some(Trigger::English(_)) = &rule.trigger {
        return Err(NotInKernel::EnglishTrigger);
    }
    match &rule.effect {
        Some(Effect::English(_)) => return Err(NotInKernel::EnglishEffect),
        Some(Effect::Actions { cond: None, .. }) => return Err(NotInKernel::EffectWithoutTarget),
        Some(Effect::Actions { cond: Some(_), .. }) if rule.cond.is_some() => {
            return Err(NotInKernel::NarrowedEffect)
        }
        _ => {}
    }
    // The kernel's approvals are exceptions by path, or by address and port: an approve rule
    // on anything else would refuse with no way for a human to let the retry through.
    if rule.mode == Mode::Approve
        && !matches!(kernel_cond(rule), Some(Cond::Path(_) | Cond::Net(_)))
    {
        return Err(NotInKernel::ApproveOffPath);
    }
    match kernel_cond(rule) {
        Some(Cond::Path(patterns)) => {
            let (forms, automata) = forms_of(patterns)?;
            path_plan(rule, forms, automata)
        }
        // Every socket path (and, in the programs, every abstract name) whose listener is
        // outside the session, except the paths listed.
        Some(Cond::OutsideListener) => {
            path_plan(rule, vec![KernelForm::Prefix("/".into())], Vec::new())
        }
        Some(Cond::View(ops)) => Ok(Plan::View { ops: *ops }),
        Some(Cond::Net(net)) => {
            // A name with no address known now (a wildcard, or one that did not resolve)
            // adds no entry: the kernel refuses the addresses a session's resolver hands
            // out for it (`engine::names::blocked_by`), by the rule's index.
            let blocks = net.resolved_blocks();
            let ports: Vec<u16> = if net.ports.is_empty() {
                vec![0]
            } else {
                net.ports.clone()
            };
            let entries = blocks
                .iter()
                .flat_map(|b| ports.iter().map(move |p| (*b, *p)))
                .collect();
            let mut excepts = Vec::new();
            for e in &rule.except_net {
                excepts.extend(net_entries(&e.resolved_blocks(), &e.ports));
            }
            Ok(Plan::Net { entries, excepts })
        }
        Some(Cond::All(parts)) => Err(
            match parts
                .iter()
                .find(|c| !matches!(c, Cond::Path(_) | Cond::Net(_)))
            {
                Some(c @ (Cond::Tool(_) | Cond::Command(_) | Cond::Run(_) | Cond::Content(_))) => {
                    NotInKernel::AlsoMatches(c.kind())
                }
                _ => NotInKernel::Composite,
            },
        ),
        Some(Cond::Any(_) | Cond::Not(_)) => Err(NotInKernel::Composite),
        Some(other) => Err(NotInKernel::Matches(other.kind())),
        None => Err(NotInKernel::NoTarget),
    }
}

/// A path plan of `forms` and `automata` with the rule's exceptions.
fn path_plan(
    rule: &Rule,
    forms: Vec<KernelForm>,
    automata: Vec<Automaton>,
) -> Result<Plan, NotInKernel> {
    let (excepts, except_automata) =
        forms_of(&rule.except).map_err(|reason| NotInKernel::Exception(Box::new(reason)))?;
    Ok(Plan::Path {
        forms,
        excepts,
        automata,
        except_automata,
    })
}

/// (block, port) pairs of `blocks` on `ports` (none: every port, 0).
fn net_entries(blocks: &[Cidr], ports: &[u16]) -> Vec<(Cidr, u16)> {
    let ports: Vec<u16> = if ports.is_empty() {
        vec![0]
    } else {
        ports.to_vec()
    };
    blocks
        .iter()
        .flat_map(|b| ports.iter().map(move |p| (*b, *p)))
        .collect()
}

/// What the kernel matches: the rule's own condition, or its effect's (a session rule whose
/// trigger switches it on).
fn kernel_cond(rule: &Rule) -> Option<&Cond> {
    match &rule.effect {
        Some(Effect::Actions { cond: Some(c), .. }) => Some(c),
        _ => rule.cond.as_ref(),
    }
}

/// Map forms where the patterns have one, path-automaton patterns for the rest.
fn forms_of(patterns: &[PathPattern]) -> Result<(Vec<KernelForm>, Vec<Automaton>), NotInKernel> {
    let mut forms = Vec::new();
    let mut automata = Vec::new();
    for p in patterns {
        if let Ok(f) = p.kernel_forms() {
            forms.extend(f);
            continue;
        }
        for (pattern, source) in p.automaton_sources()? {
            if let Err(source) = dfa::check(&source) {
                return Err(NotInKernel::Automaton { pattern, source });
            }
            automata.push(Automaton { pattern, source });
        }
    }
    Ok((forms, automata))
}

/// Where a kernel rule index came from, for diagnostics about shared keys.
struct Owner<'a> {
    origin: &'a str,
    rule: &'a Rule,
}

fn error(rule: &Rule, message: String, hint: &str) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        origin: rule.source.clone(),
        span: rule.span,
        message,
        rule: Some(rule.id.clone()),
        hint: Some(hint.to_owned()),
    }
}

/// Whether the kernel would enforce `rule` (its plan exists and fits the kernel's keys),
/// for a rule a one-call load did not plan.
pub(crate) fn would_enforce(rule: &Rule) -> bool {
    match plan(rule) {
        Ok(Plan::Path { forms, excepts, .. }) => forms
            .iter()
            .chain(&excepts)
            .all(|f| check_limits(rule, f, &mut Vec::new())),
        Ok(Plan::Net { .. } | Plan::View { .. }) => true,
        Err(_) => false,
    }
}

/// Checks a form against the kernel's key sizes.
fn check_limits(rule: &Rule, form: &KernelForm, diags: &mut Vec<Diagnostic>) -> bool {
    let (value, limit, what) = match form {
        KernelForm::Exact(p) | KernelForm::Prefix(p) => (p, PATH_MAX - 1, "path"),
        KernelForm::Name(n) => (n, NAME_MAX - 1, "basename"),
    };
    if value.len() > limit {
        diags.push(error(
            rule,
            format!(
                "{what} `{value}` is {} bytes; the kernel limit is {limit}",
                value.len()
            ),
            "shorten the pattern or match a parent directory",
        ));
        return false;
    }
    true
}

fn add<R: PartialEq>(map: &mut BTreeMap<Vec<u8>, Vec<R>>, key: &str, r: R) {
    let refs = map.entry(key.as_bytes().to_vec()).or_default();
    if !refs.contains(&r) {
        refs.push(r);
    }
}

/// What a rule set is compiled for: the kernel (every map entry and the determinised path
/// automaton; the kernel's limits checked), or userspace evaluation alone (`check --local`,
/// the hook's `--local`), which needs each rule's plan (what enforces it) but not the maps,
/// whose entries stat and resolve every named path, nor the automaton, whose
/// determinisation is most of compiling the packs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    Kernel,
    Layer1,
    /// A profile's rules: they serve many calls (every matcher built), but the kernel gets
    /// them through the union image (`union::compile`), so each rule is planned and no maps
    /// nor automaton are built (the automaton is most of a profile's load, and was built
    /// twice).
    Profile,
}

/// Compiles the kernel image and records each rule's enforcement and kernel index; the
/// maps and the path automaton only for [`Purpose::Kernel`].
pub(crate) fn compile_with(
    rules: &mut [Rule],
    diags: &mut Vec<Diagnostic>,
    purpose: Purpose,
    host: &dyn Host,
) -> KernelImage {
    let mut image = KernelImage::default();
    // The mount table only for the kernel's image: Layer 1 alone (`check --local`) needs no
    // aliases and should not pay for reading it.
    let mounts = if purpose == Purpose::Kernel {
        Mounts::read(host)
    } else {
        Mounts::default()
    };
    let mut next: u32 = 0;
    for rule in rules.iter_mut() {
        rule.kernel_index = None;
        let plan = match plan(rule) {
            Ok(plan) => plan,
            Err(reason) => {
                rule.enforcement = Enforcement::Userspace(reason.to_string());
                continue;
            }
        };
        let fits = match &plan {
            // Every form is checked (no short-circuit) so that all oversized ones are reported.
            Plan::Path { forms, excepts, .. } => {
                forms
                    .iter()
                    .chain(excepts)
                    .filter(|f| !check_limits(rule, f, diags))
                    .count()
                    == 0
            }
            Plan::Net { .. } | Plan::View { .. } => true,
        };
        if !fits {
            rule.enforcement =
                Enforcement::Userspace("a pattern exceeds the kernel's key size".into());
            continue;
        }
        if next as usize >= MAX_RULES {
            diags.push(error(
                rule,
                format!("more than {MAX_RULES} kernel rules"),
                "merge rules that share a pattern",
            ));
            rule.enforcement = Enforcement::Userspace("the kernel rule table is full".into());
            continue;
        }
        let index = next;
        next += 1;
        let ops = rule_ops(rule);
        let flags = rule_flags(rule, &plan);
        image.rules.push(RuleMeta { ops, flags });
        match plan {
            Plan::Path {
                forms,
                excepts,
                automata,
                except_automata,
            } => {
                image.config.path_rule_ops |= ops;
                if purpose == Purpose::Kernel {
                    image.resolution.forms.extend(forms.iter().cloned());
                    add_path_plan(
                        &mut image,
                        (&mounts, host),
                        index,
                        (&forms, &excepts),
                        automata,
                        except_automata,
                    );
                }
            }
            Plan::Net { entries, excepts } => {
                image.config.net_rule_ops |= ops;
                add_net_plan(&mut image, index, &entries, &excepts);
            }
            Plan::View { ops } => add_view(&mut image.config, index, ops),
        }
        rule.kernel_index = Some(index);
        rule.enforcement = Enforcement::Kernel;
    }
    // One entry per path, in path order: the image must not depend on the rules' order.
    image.resolution.forms.sort();
    image.resolution.forms.dedup();
    image.resolution.digest = resolution::digest(&image.resolution.forms, &mounts, host);
    image.close_prefixes();
    image.close_nets();
    let ids: BTreeMap<u32, &str> = rules
        .iter()
        .filter_map(|r| r.kernel_index.map(|i| (i, r.id.as_str())))
        .collect();
    crate::image::cap_ancestors(&mut image, |rule| ids.get(&rule).copied());
    sort_and_check(&mut image, rules, diags);
    if purpose == Purpose::Kernel {
        build_automaton(&mut image, rules, diags);
    }
    image
}

/// `RuleMeta::flags` of a rule the kernel enforces with `plan`.
fn rule_flags(rule: &Rule, plan: &Plan) -> u32 {
    let every_address = matches!(
        plan,
        Plan::Net { entries, .. } if entries.iter().any(|(cidr, _)| cidr.is_whole_family())
    );
    // A profile's rule in a union image is on only where a session's bits say so.
    let mut flags = match rule.trigger {
        None | Some(Trigger::Always) if !rule.per_session => RULE_ALWAYS_ON,
        _ => 0,
    };
    if every_address {
        flags |= RULE_EVERY_ADDRESS;
    }
    if rule.mode == Mode::Approve {
        flags |= RULE_APPROVE;
        // Inert until the daemon's fanotify marks are on a file (`HELD_INODES`).
        if rule.hold {
            flags |= RULE_HOLD;
        }
    }
    if rule.holds_in_shadow() {
        flags |= RULE_NO_SHADOW;
    }
    flags
}

/// Adds a network rule's address entries (exceptions flagged `REF_EXCEPT`).
fn add_net_plan(
    image: &mut KernelImage,
    index: u32,
    entries: &[(Cidr, u16)],
    excepts: &[(Cidr, u16)],
) {
    let all = entries
        .iter()
        .map(|e| (e, 0))
        .chain(excepts.iter().map(|e| (e, REF_EXCEPT)));
    for (&(cidr, port), flags) in all {
        let refs = image.nets.entry((cidr.prefix_len, cidr.addr)).or_default();
        let r = NetRef {
            rule: index,
            port,
            pad: 0,
            flags,
        };
        if !refs.contains(&r) {
            refs.push(r);
        }
    }
}

/// Makes rule `index` the one that refuses the views in `ops`, where no rule before it
/// does: one rule in force is enough to refuse a view.
fn add_view(config: &mut Config, index: u32, ops: u32) {
    if ops & op::CHROOT != 0 && config.chroot_rule == 0 {
        config.chroot_rule = index + 1;
    }
    if ops & op::USERNS != 0 && config.userns_rule == 0 {
        config.userns_rule = index + 1;
    }
}

/// Adds a path rule's map entries and automaton patterns (exceptions flagged `REF_EXCEPT`).
fn add_path_plan(
    image: &mut KernelImage,
    (mounts, host): (&Mounts, &dyn Host),
    index: u32,
    (forms, excepts): (&[KernelForm], &[KernelForm]),
    automata: Vec<Automaton>,
    except_automata: Vec<Automaton>,
) {
    let block = RuleRef {
        rule: index,
        flags: 0,
    };
    let given = forms;
    let forms = &with_link_targets(forms, mounts, host);
    // The links a path is resolved through are names many rules share (`~/.config` for
    // every rule below it): like ancestors, one rule in force is enough to keep one in
    // place, so their refs are capped (`cap_ancestors`) instead of overflowing the key.
    for form in forms.iter().filter(|f| !given.contains(f)) {
        if let KernelForm::Exact(path) = form {
            if host
                .lstat(Path::new(path))
                .is_some_and(|f| f.kind == FileKind::Symlink)
            {
                image.link_keys.insert(path.as_bytes().to_vec());
            }
        }
    }
    for a in &automata {
        if let Source::Glob(_) = a.source {
            for dir in glob_ancestors(&a.pattern) {
                add(&mut image.ancestors, &dir, block);
            }
        }
    }
    for form in forms {
        let above = match form {
            KernelForm::Exact(path) => ancestor_dirs(path),
            KernelForm::Prefix(prefix) => ancestor_dirs(prefix.trim_end_matches('/')),
            KernelForm::Name(_) => Vec::new(),
        };
        for dir in above {
            add(&mut image.ancestors, &dir, block);
        }
    }
    let patterns = automata
        .into_iter()
        .map(|a| (a, 0))
        .chain(except_automata.into_iter().map(|a| (a, REF_EXCEPT)));
    for (a, flags) in patterns {
        let r = RuleRef { rule: index, flags };
        if !image.automaton.contains(&(a.source.clone(), r)) {
            image.automaton.push((a.source, r));
        }
    }
    let all = forms
        .iter()
        .map(|f| (f, 0))
        .chain(excepts.iter().map(|f| (f, REF_EXCEPT)));
    for (form, flags) in all {
        let r = RuleRef { rule: index, flags };
        match form {
            // An exception stays a plain path: following its symlink or inode
            // could except whatever file a planted link points to.
            KernelForm::Exact(path) if flags == REF_EXCEPT => {
                add(&mut image.exact, path, r);
            }
            KernelForm::Exact(path) => {
                add(&mut image.exact, path, r);
                add_inode(image, host, path, r);
            }
            KernelForm::Prefix(p) => add(&mut image.prefix, p, r),
            KernelForm::Name(n) => add(&mut image.names, n, r),
        }
    }
}

/// The directories strictly above `path` ("/a/b/c" → "/a", "/a/b"); never "/".
fn ancestor_dirs(path: &str) -> Vec<String> {
    path.char_indices()
        .filter(|&(i, c)| c == '/' && i > 0)
        .map(|(i, _)| path[..i].to_owned())
        .filter(|dir| dir.len() < PATH_MAX)
        .collect()
}

/// The fixed leading directory of a glob and the directories above it
/// ("/srv/p/**/k-*.pem" → "/srv", "/srv/p"); none for a glob that starts with a wildcard.
fn glob_ancestors(glob: &str) -> Vec<String> {
    let fixed = glob
        .find(['*', '?', '[', '{', '\\'])
        .map_or(glob, |at| &glob[..at]);
    let Some(slash) = fixed.rfind('/') else {
        return Vec::new();
    };
    let dir = &fixed[..slash];
    let mut dirs = ancestor_dirs(dir);
    if !dir.is_empty() && dir.len() < PATH_MAX {
        dirs.push(dir.to_owned());
    }
    dirs
}

/// Builds the one path automaton of every automaton pattern; a rule set whose automaton
/// does not fit the maps is refused as a whole (an error on its rules), never loaded in part.
fn build_automaton(image: &mut KernelImage, rules: &[Rule], diags: &mut Vec<Diagnostic>) {
    let failure = match dfa::build(&image.automaton) {
        Ok(automaton) => {
            image.dfa = automaton;
            return;
        }
        Err(e) => e,
    };
    let users: Vec<&Rule> = rules
        .iter()
        .filter(|r| {
            r.kernel_index
                .is_some_and(|i| image.automaton.iter().any(|(_, x)| x.rule == i))
        })
        .collect();
    let (blamed, hint): (Vec<&Rule>, &str) = match &failure {
        BuildError::Crowded(refs) => (
            users
                .iter()
                .copied()
                .filter(|r| refs.iter().any(|x| Some(x.rule) == r.kernel_index))
                .collect(),
            "merge rules whose patterns match the same paths, or turn some into userspace \
             modes",
        ),
        BuildError::TooLarge(_) => (
            users.clone(),
            "simplify these patterns (fewer `*` between fixed parts, no counted repetition \
             in regexes), express some as `/dir/**` or `**/name`, or turn some into \
             userspace modes",
        ),
        BuildError::Unsupported(_) => (users.clone(), "rewrite the pattern"),
    };
    let ids: Vec<String> = blamed
        .iter()
        .map(|r| format!("{}:{}", r.source, r.id))
        .collect();
    if let Some(first) = blamed.first().or(users.first()) {
        diags.push(error(
            first,
            format!(
                "the kernel's path automaton cannot hold the patterns of rules {}: {failure}",
                ids.join(", ")
            ),
            hint,
        ));
    }
    image.dfa = Vec::new();
}

/// Records the inode of an exact path's file. Not of a directory: the programs look the
/// ancestors of a file being linked or renamed up in the inode map (a protected *tree*'s
/// directories are there, `kernel::trees`), and an exact rule on a directory (`/home`,
/// `/srv` in the destructive pack) protects that directory, not everything below it; it
/// cannot be hard-linked, and its own name is judged by path.
fn add_inode(image: &mut KernelImage, host: &dyn Host, path: &str, r: RuleRef) {
    // `stat` follows symlinks, so a link protects its target's inode.
    if let Some(file) = host
        .stat(Path::new(path))
        .filter(|f| f.kind != FileKind::Dir)
    {
        let refs = image.inodes.entry((file.dev, file.ino)).or_default();
        if !refs.contains(&r) {
            refs.push(r);
        }
    }
}

fn sort_and_check(image: &mut KernelImage, rules: &[Rule], diags: &mut Vec<Diagnostic>) {
    let owners: BTreeMap<u32, Owner<'_>> = rules
        .iter()
        .filter_map(|r| {
            r.kernel_index.map(|i| {
                (
                    i,
                    Owner {
                        origin: &r.source,
                        rule: r,
                    },
                )
            })
        })
        .collect();
    let mut over = |key: String, idx: Vec<u32>| {
        let ids: Vec<String> = idx
            .iter()
            .filter_map(|i| owners.get(i))
            .map(|o| format!("{}:{}", o.origin, o.rule.id))
            .collect();
        if let Some(last) = idx.last().and_then(|i| owners.get(i)) {
            diags.push(error(
                last.rule,
                format!(
                    "kernel key {key} needs {} rule references; the kernel holds at most \
                     {REFS_PER_KEY} per key (rules: {})",
                    idx.len(),
                    ids.join(", ")
                ),
                "merge rules that share this pattern or turn some into userspace modes",
            ));
        }
    };
    for (name, map) in [
        ("path", &mut image.exact),
        ("prefix", &mut image.prefix),
        ("name", &mut image.names),
    ] {
        for (key, refs) in map.iter_mut() {
            refs.sort_by_key(|r| (r.rule, r.flags));
            if refs.len() > REFS_PER_KEY {
                over(
                    format!("{name} `{}`", String::from_utf8_lossy(key)),
                    refs.iter().map(|r| r.rule).collect(),
                );
            }
        }
    }
    for ((dev, ino), refs) in &mut image.inodes {
        refs.sort_by_key(|r| (r.rule, r.flags));
        if refs.len() > REFS_PER_KEY {
            over(
                format!("inode {dev}:{ino}"),
                refs.iter().map(|r| r.rule).collect(),
            );
        }
    }
    for ((len, addr), refs) in &mut image.nets {
        refs.sort_by_key(|r| (r.rule, r.port, r.flags));
        if refs.len() > REFS_PER_KEY {
            let ip = std::net::Ipv6Addr::from(*addr);
            over(
                format!("network `{ip}/{len}`"),
                refs.iter().map(|r| r.rule).collect(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ancestors_of_paths_and_globs() {
        assert_eq!(ancestor_dirs("/home/u/.bashrc"), ["/home", "/home/u"]);
        assert_eq!(ancestor_dirs("/srv"), Vec::<String>::new());
        assert_eq!(
            glob_ancestors("/srv/projects/**/secret-*.pem"),
            ["/srv", "/srv/projects"]
        );
        assert_eq!(
            glob_ancestors("/home/u/.ssh/id_*"),
            ["/home", "/home/u", "/home/u/.ssh"]
        );
        assert!(glob_ancestors("**/.git/hooks/**").is_empty());
        assert!(glob_ancestors("/*/secret").is_empty());
    }
}
