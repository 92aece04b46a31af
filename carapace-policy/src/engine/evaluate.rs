//! Rules × what a call does → [`Decision`]. Every rule is checked (no short-circuit), so
//! the answer lists every match and does not depend on rule order.
use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::net::IpAddr;

use super::decision::{Decision, Layer, Match, UNPARSABLE_RULE};
use super::normalize;
use super::operation::{Extracted, Operation};

use carapace_common::op;

use super::shell::canon;
use crate::rules::command_index::witness;
use crate::rules::content_index::{self, ContentIndex};
use crate::rules::index::top_level_paths;
use crate::rules::model::{Cidr, Host, NetMatch, TextPattern};
use crate::rules::pattern::{any_entry, written_glob, WrittenGlob};
use crate::rules::run;
use crate::rules::{Action, Cond, Effect, Mode, PathPattern, Rule, RuleSet, Trigger};

/// A session's rule state: session rules switched on by their trigger, and rules the user
/// switched off (locked rules ignore that).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Activation {
    /// Ids of the session rules whose trigger fired in this session.
    pub activated: BTreeSet<String>,
    /// Ids of the rules the user switched off for the session (`carapace session disable`).
    pub disabled: BTreeSet<String>,
}

impl Activation {
    /// Whether `rule` applies now.
    #[must_use]
    pub fn applies(&self, rule: &Rule) -> bool {
        if !self.disabled.is_empty() && self.disabled.contains(&rule.id) && !rule.locked {
            return false;
        }
        match &rule.trigger {
            None | Some(Trigger::Always) => true,
            Some(Trigger::After { .. } | Trigger::English(_)) => self.activated.contains(&rule.id),
        }
    }
}

/// Evaluates one extracted call against every rule that applies.
#[must_use]
pub fn evaluate(
    rules: &RuleSet,
    ext: &Extracted,
    activation: &Activation,
    layer: Layer,
) -> Decision {
    Decision::from_matches(
        &ext.tool,
        matches(rules, ext, activation, layer),
        ext.ops.clone(),
    )
}

/// Every rule that applies and matches `ext` (and its unparsable parts), in rule order.
#[must_use]
pub fn matches(
    rules: &RuleSet,
    ext: &Extracted,
    activation: &Activation,
    layer: Layer,
) -> Vec<Match> {
    let mut matches = Vec::new();
    for why in &ext.unparsable {
        matches.push(Match {
            id: UNPARSABLE_RULE.into(),
            mode: Mode::Block,
            layer,
            message: format!(
                "{why}. Carapace refuses what it cannot check; rewrite the call in plain, \
                 simple syntax"
            ),
            source: "carapace".into(),
            matched: "input that could not be parsed".into(),
            kernel: false,
        });
    }
    if !ext.ops.iter().any(|o| o.unknown) {
        for (i, matched) in rule_hits(rules, ext, activation) {
            matches.push(rule_match(&rules.rules()[i], layer, matched));
        }
        return matches;
    }
    // Targets the analysis could not determine (`Operation::unknown`) are matched apart:
    // a rule they meet, and nothing else of the call does, answers with its mode for an
    // unknown target, saying why.
    let (unknown, known): (Vec<Operation>, Vec<Operation>) =
        ext.ops.iter().cloned().partition(|o| o.unknown);
    let known = Extracted {
        ops: known,
        ..ext.clone()
    };
    let unknown = Extracted {
        tool: ext.tool.clone(),
        ops: unknown,
        ..Extracted::default()
    };
    let sure = rule_hits(rules, &known, activation);
    let mut unsure = rule_hits(rules, &unknown, activation);
    unsure.retain(|(i, _)| !sure.iter().any(|(j, _)| j == i));
    for (i, matched) in sure {
        matches.push(rule_match(&rules.rules()[i], layer, matched));
    }
    for (i, matched) in unsure {
        let rule = &rules.rules()[i];
        let mut m = rule_match(rule, layer, matched);
        m.mode = rule.on_unknown_target.min(rule.mode);
        m.message = format!(
            "{} (the target of this call could not be determined: the code decodes or \
             computes the path it uses, which may be what this rule protects)",
            rule.message
        );
        matches.push(m);
    }
    matches
}

fn rule_match(rule: &Rule, layer: Layer, matched: String) -> Match {
    Match {
        id: rule.id.clone(),
        mode: rule.mode,
        layer,
        message: rule.message.clone(),
        source: rule.source.clone(),
        matched,
        kernel: rule.kernel_enforced(),
    }
}

/// Every rule that applies and matches `ext`, by index, with what it matched.
fn rule_hits(rules: &RuleSet, ext: &Extracted, activation: &Activation) -> Vec<(usize, String)> {
    let mut found_all = Vec::new();
    let hits = PathHits::new(rules, ext);
    let commands = rules.command_index();
    let paths = rules.path_index();
    let mut first_command = commands.first_matches(rules.rules().len(), &ext.commands, &ext.argvs);
    for (i, rule) in rules.rules().iter().enumerate() {
        // Most rules are settled by an index alone, before anything else is looked at.
        let command = commands.indexed(i);
        if (command && first_command[i].is_none()) || (!command && paths.settles(i) && !hits.any[i])
        {
            continue;
        }
        if !activation.applies(rule) {
            continue;
        }
        let ops = paths.ops(i).unwrap_or_else(|| rule.ops());
        let found = if command {
            first_command[i].take()
        } else if paths.indexed(i) {
            hits.rule_matches(rules, i, ops, ext)
        } else {
            rule_matches_with(rule, ops, Some(&hits), ext)
        };
        if let Some(matched) = found {
            found_all.push((i, matched));
        }
    }
    found_all
}

/// The session rules whose structured trigger this call fires and that are not on yet,
/// each with what fired it (e.g. `network example.com:443`).
#[must_use]
pub fn fired_triggers<'r>(
    rules: &'r RuleSet,
    ext: &Extracted,
    activation: &Activation,
) -> Vec<(&'r Rule, String)> {
    rules
        .rules()
        .iter()
        .filter(|r| !activation.activated.contains(&r.id))
        .filter_map(|rule| {
            let Some(Trigger::After { actions, cond }) = &rule.trigger else {
                return None;
            };
            let m = Matcher {
                ops: crate::rules::model::ops_of(actions),
                prepared: None,
                scoped: !actions.is_empty(),
                except: &[],
                except_net: &[],
                ext,
            };
            let witness = match cond {
                Some(c) => m.cond(c)?,
                None => m.any_op()?,
            };
            Some((rule, witness))
        })
        .collect()
}

/// For each operation with a path, the rules whose indexed path patterns it meets; for
/// each text, whether the content filter lets it through.
struct PathHits<'r> {
    rules: usize,
    /// `hit[op * rules + rule]`.
    hit: Vec<bool>,
    /// Per operation: its path is a glob (compiled once).
    glob: Vec<Option<WrittenGlob>>,
    /// Per operation that writes or deletes: its path's stand-in for every entry
    /// ([`any_entry`]).
    entry: Vec<Option<String>>,
    /// Per rule: `hit` for some operation. A rule without any cannot match through the
    /// index: most rules are settled by this alone.
    any: Vec<bool>,
    content: &'r ContentIndex,
    /// Per text (each operation's content, then `texts`, then `commands`): whether some
    /// content pattern may match it ([`ContentIndex::may_match`]), asked once.
    passes: Vec<OnceCell<bool>>,
}

impl<'r> PathHits<'r> {
    fn new(rules: &'r RuleSet, ext: &Extracted) -> Self {
        let n = rules.rules().len();
        let mut hit = vec![false; n * ext.ops.len()];
        let mut glob = vec![None; ext.ops.len()];
        let mut entry = vec![None; ext.ops.len()];
        for (o, op) in ext.ops.iter().enumerate() {
            let Some(path) = op.path.as_deref() else {
                continue;
            };
            if op.whole_dir() {
                entry[o] = Some(any_entry(path));
            }
            let row = &mut hit[o * n..(o + 1) * n];
            let ops = op.action.map_or(op::ALL, Action::ops);
            rules.path_index().mark(path, ops, row);
            // Writing or deleting a directory touches every entry: a pattern that matches
            // any entry (the made-up NUL name stands for all) covers it.
            if let Some(e) = &entry[o] {
                rules.path_index().mark(e, ops, row);
            }
            // A path written as a glob may name protected files: the rules with a pattern
            // it could name (`PathPattern::covers`).
            if let Some(written) = written_glob(path).map(|w| w.bringing_entries(op.whole_dir())) {
                if let Some(entry) = written.every_entry() {
                    rules.path_index().mark(&entry, ops, row);
                }
                rules.path_index().mark_named_by(&written, ops, row);
                glob[o] = Some(written);
            }
        }
        let mut any = vec![false; n];
        for row in hit.chunks(n.max(1)) {
            for (a, h) in any.iter_mut().zip(row) {
                *a |= *h;
            }
        }
        Self {
            rules: n,
            hit,
            glob,
            entry,
            any,
            content: rules.content_index(),
            passes: vec![OnceCell::new(); ext.ops.len() + ext.texts.len() + ext.commands.len()],
        }
    }

    /// Whether text number `slot` (see [`PathHits::passes`]) may match a content pattern.
    fn passes(&self, slot: usize, text: &str) -> bool {
        self.passes
            .get(slot)
            .is_none_or(|p| *p.get_or_init(|| self.content.may_match(text)))
    }

    /// [`rule_matches`] for a rule whose top-level condition is an indexed path match.
    fn rule_matches(&self, rules: &RuleSet, i: usize, ops: u32, ext: &Extracted) -> Option<String> {
        let slow = rules.path_index().slow(i);
        if !slow && !self.any.get(i).copied().unwrap_or(false) {
            return None;
        }
        let rule = &rules.rules()[i];
        let patterns = top_level_paths(rule)?;
        let m = Matcher {
            ops,
            prepared: Some(self),
            scoped: !rule.actions.is_empty(),
            except: &rule.except,
            except_net: &rule.except_net,
            ext,
        };
        ext.ops.iter().enumerate().find_map(|(o, op)| {
            let path = op.path.as_deref()?;
            if !m.covers(op) {
                return None;
            }
            let hit = if slow {
                let entry = self.entry[o].as_deref();
                let written = self.glob[o].as_ref();
                patterns.iter().any(|p| p.covers_with(path, entry, written))
            } else {
                self.hit[o * self.rules + i]
            };
            (hit && !rule.except.iter().any(|p| p.exempts(path))).then(|| describe(op))
        })
    }
}

/// What in `ext` the rule matches, if anything, without the rule set's indexes: the
/// reference the tests hold the indexed matches to.
#[cfg(test)]
pub(crate) fn rule_matches(rule: &Rule, ext: &Extracted) -> Option<String> {
    rule_matches_with(rule, rule.ops(), None, ext)
}

/// [`rule_matches`] with the rule's [`Rule::ops`] and (optionally) the operations' paths
/// prepared by the caller.
fn rule_matches_with(
    rule: &Rule,
    ops: u32,
    prepared: Option<&PathHits>,
    ext: &Extracted,
) -> Option<String> {
    let m = Matcher {
        ops,
        prepared,
        scoped: !rule.actions.is_empty(),
        except: &rule.except,
        except_net: &rule.except_net,
        ext,
    };
    match &rule.effect {
        Some(Effect::Actions { actions, cond }) => {
            let mask = crate::rules::model::ops_of(actions);
            let m = Matcher {
                ops: mask,
                scoped: !actions.is_empty(),
                ..m
            };
            let witness = match cond {
                Some(c) => m.cond(c)?,
                None => m.any_op()?,
            };
            // A rule may narrow its effect further with a match of its own.
            match &rule.cond {
                Some(c) => m.cond(c).map(|_| witness),
                None => Some(witness),
            }
        }
        // Plain-English effects are judged by the LLM reviewer, not here.
        Some(Effect::English(_)) => None,
        None => m.cond(rule.cond.as_ref()?),
    }
}

struct Matcher<'a> {
    /// `op::*` bits the rule covers (0 = every action).
    ops: u32,
    /// What depends only on each operation's path or on each text, prepared once per call
    /// (else prepared again for each pattern).
    prepared: Option<&'a PathHits<'a>>,
    /// The rule names its actions (content rules then look only at what those write or
    /// send).
    scoped: bool,
    except: &'a [PathPattern],
    /// The allow-list of a network rule.
    except_net: &'a [NetMatch],
    ext: &'a Extracted,
}

impl Matcher<'_> {
    fn covers(&self, op: &Operation) -> bool {
        self.ops == 0 || op.action.is_some_and(|a| a.ops() & self.ops != 0)
    }

    fn any_op(&self) -> Option<String> {
        self.ext.ops.iter().find(|o| self.covers(o)).map(describe)
    }

    fn cond(&self, cond: &Cond) -> Option<String> {
        match cond {
            Cond::Path(patterns) => self.ext.ops.iter().enumerate().find_map(|(i, o)| {
                let path = o.path.as_deref()?;
                (self.covers(o)
                    && patterns.iter().any(|p| match self.prepared {
                        Some(prep) => {
                            p.covers_with(path, prep.entry[i].as_deref(), prep.glob[i].as_ref())
                        }
                        None => p.covers(path, o.whole_dir()),
                    })
                    && !self.except.iter().any(|p| p.exempts(path)))
                .then(|| describe(o))
            }),
            Cond::Net(net) => self
                .ext
                .ops
                .iter()
                .find(|o| {
                    o.action == Some(Action::Network)
                        && net_matches(net, o, Port::UnknownMatches)
                        && !self
                            .except_net
                            .iter()
                            .any(|e| net_matches(e, o, Port::UnknownDiffers))
                })
                .map(describe),
            // Who made a socket is the kernel's to see (`compile::kernel`).
            Cond::OutsideListener | Cond::View(_) => None,
            Cond::Command(patterns) => self
                .ext
                .commands
                .iter()
                .find(|c| patterns.iter().any(|p| p.matches(c)))
                .map(|c| witness(c)),
            Cond::Run(items) => self.ext.argvs.iter().find_map(|argv| {
                let (base, args) = argv.split_first()?;
                let program = canon::program(base, args);
                if !items
                    .iter()
                    .any(|i| i.programs.iter().any(|p| run::names(p, program)))
                {
                    return None;
                }
                let inv = canon::invocation(base, args)?;
                items
                    .iter()
                    .any(|i| i.matches(&inv))
                    .then(|| witness(&argv.join(" ")))
            }),
            Cond::Tool(patterns) => {
                let family = crate::engine::call::call_family(self.ext);
                patterns
                    .iter()
                    .any(|p| p.matches(&self.ext.tool) || family.is_some_and(|f| p.matches(f)))
                    .then(|| format!("tool {}", self.ext.tool))
            }
            Cond::Content(patterns) => self.content(patterns),
            Cond::All(conds) => {
                let mut first = None;
                for c in conds {
                    let w = self.cond(c)?;
                    first.get_or_insert(w);
                }
                first
            }
            Cond::Any(conds) => conds.iter().find_map(|c| self.cond(c)),
            Cond::Not(c) => match self.cond(c) {
                Some(_) => None,
                None => Some(format!("not {}", c.kind())),
            },
        }
    }

    /// Content rules scoped to write or network actions look only at what is written or
    /// sent; unscoped ones at every text the call carries.
    fn content(&self, patterns: &[TextPattern]) -> Option<String> {
        // Texts are numbered as in `PathHits::passes`.
        let hit = |slot: usize, t: &str| {
            patterns.iter().find(|p| {
                (!content_index::indexed(p) || self.prepared.is_none_or(|h| h.passes(slot, t)))
                    && p.matches(t)
            })
        };
        for (o, op) in self.ext.ops.iter().enumerate() {
            if !self.covers(op) {
                continue;
            }
            if let Some(p) = op.content.as_deref().and_then(|c| hit(o, c)) {
                return Some(format!(
                    "{} carrying `{}`",
                    describe(op),
                    shorten(p.source())
                ));
            }
        }
        if self.scoped {
            return None;
        }
        let first = self.ext.ops.len();
        self.ext
            .texts
            .iter()
            .chain(&self.ext.commands)
            .enumerate()
            .find_map(|(j, t)| hit(first + j, t))
            .map(|p| format!("content matching `{}`", shorten(p.source())))
    }
}

/// How a network match treats an operation whose port is unknown: a rule that blocks may
/// match it (fail closed), an exception must not.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Port {
    UnknownMatches,
    UnknownDiffers,
}

fn net_matches(net: &NetMatch, op: &Operation, unknown: Port) -> bool {
    let port_ok = net.ports.is_empty()
        || op
            .port
            .map_or(unknown == Port::UnknownMatches, |p| net.ports.contains(&p));
    if !port_ok {
        return false;
    }
    if net.hosts.is_empty() && net.cidrs.is_empty() {
        return true;
    }
    let Some(host) = op.host.as_deref() else {
        return false;
    };
    let ip: Option<IpAddr> = normalize::ip(host);
    if let Some(ip) = ip {
        if net.cidrs.iter().any(|c| c.contains(ip)) {
            return true;
        }
    } else if unknown == Port::UnknownMatches && net.cidrs.iter().any(Cidr::is_whole_family) {
        // A name's addresses are unknown here, but a block of every IPv4 or every IPv6
        // address (the base of an allow-list) holds them whatever they are.
        return true;
    }
    net.hosts.iter().any(|h| match h {
        Host::Ip(want) => ip == Some(canonical(*want)),
        Host::Name { name, resolved } => {
            super::hostname::covers(name, host)
                || ip.is_some_and(|ip| resolved.iter().any(|r| canonical(*r) == ip))
        }
    })
}

/// IPv4-mapped IPv6 as IPv4, as operations carry it.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

fn describe(op: &Operation) -> String {
    let verb = op.action.map_or("use", Action::name);
    match (&op.path, &op.host) {
        // find's walk is written with a NUL no path has: shown as the `**` it stands for.
        (Some(p), _) if p.contains('\0') => {
            format!(
                "{verb} {}",
                p.replace(crate::rules::intersect::FIND_DEPTH, "**")
            )
        }
        (Some(p), _) => format!("{verb} {p}"),
        (None, Some(h)) => match op.port {
            Some(port) if h.contains(':') => format!("{verb} [{h}]:{port}"),
            Some(port) => format!("{verb} {h}:{port}"),
            None => format!("{verb} {h}"),
        },
        (None, None) => verb.to_owned(),
    }
}

/// How much of a command or pattern a match description quotes.
const QUOTED: usize = 120;

fn shorten(s: &str) -> String {
    super::shorten(s, QUOTED)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::rules::{Homes, Options};

    fn builtin_all() -> &'static RuleSet {
        static RULES: std::sync::OnceLock<RuleSet> = std::sync::OnceLock::new();
        RULES.get_or_init(compile_all)
    }

    fn compile_all() -> RuleSet {
        let opts = Options {
            homes: Homes::fixed(["/home/alice", "/root", "/srv/bob"]),
            resolver: |_| None,
            host: crate::host::real::host(),
        };
        RuleSet::parse_with("t", "version: 1\nbuiltin: all\nrules:\n  - block: \"/opt/**/secret-*\"\n  - block: \"re:/proc/[0-9]+/environ\"\n", &opts)
            .expect("the packs compile")
    }

    /// The literals of the packs' command regexes, as text: the words a line needs for the
    /// command index's prefilter to let it through to the regex set.
    fn command_literals() -> &'static [String] {
        static WORDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        WORDS.get_or_init(|| {
            fn walk(cond: &crate::rules::Cond, out: &mut Vec<String>) {
                use crate::rules::model::TextPattern;
                match cond {
                    crate::rules::Cond::Command(patterns) => {
                        for p in patterns {
                            if let TextPattern::Regex { regex, .. } = p {
                                out.extend(
                                    regex
                                        .literals()
                                        .into_iter()
                                        .flatten()
                                        .map(|l| String::from_utf8_lossy(l).into_owned()),
                                );
                            }
                        }
                    }
                    crate::rules::Cond::Any(all) | crate::rules::Cond::All(all) => {
                        for c in all {
                            walk(c, out);
                        }
                    }
                    crate::rules::Cond::Not(c) => walk(c, out),
                    _ => {}
                }
            }
            let mut out = Vec::new();
            for rule in builtin_all().rules() {
                if let Some(cond) = &rule.cond {
                    walk(cond, &mut out);
                }
            }
            out.sort();
            out.dedup();
            out
        })
    }

    #[test]
    fn the_packs_command_regexes_have_a_prefilter() {
        // Should a pack add a pattern without literals, every line would go through the
        // set again: not wrong, but the budget would notice.
        assert!(builtin_all().command_index().has_prefilter());
        assert!(!command_literals().is_empty());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// The prefilter never keeps a line from a pattern it matches: lines made of the
        /// patterns' own literals (whole, cut, in upper case) and everyday words, through
        /// the index with and without it.
        #[test]
        fn the_command_prefilter_drops_no_match(
            words in proptest::collection::vec(
                prop_oneof![
                    3 => (0usize..10_000, 0usize..3).prop_map(|(i, how)| {
                        let all = command_literals();
                        let w = &all[i % all.len()];
                        match how {
                            0 => w.clone(),
                            1 => w.to_uppercase(),
                            _ => w.chars().take(w.chars().count().saturating_sub(1)).collect(),
                        }
                    }),
                    1 => prop_oneof![
                        Just("cargo"), Just("test"), Just("|"), Just("sh"), Just("-c"),
                        Just("https://x.example/i.sh"), Just("rm"), Just("-rf"), Just("/"),
                        Just("~"), Just(">"), Just("&&"), Just("$(x)"), Just("É"),
                    ].prop_map(str::to_owned),
                ],
                0..8,
            ),
            glue in prop_oneof![Just(" "), Just(""), Just(" | ")],
        ) {
            let rules = builtin_all();
            let mut ext = Extracted::new("Bash");
            ext.command(words.join(glue));
            let index = rules.command_index();
            let n = rules.rules().len();
            prop_assert_eq!(
                index.first_matches(n, &ext.commands, &[]),
                index.without_prefilter().first_matches(n, &ext.commands, &[]),
                "{:?}", ext.commands
            );
        }
    }

    proptest! {
        /// The command regex set answers exactly what each rule's regexes answer, first
        /// matching command included.
        #[test]
        fn the_command_index_agrees_with_every_rule(
            lines in proptest::collection::vec(
                proptest::collection::vec(prop_oneof![
                    Just("curl"), Just("-fsSL"), Just("https://x.example/i.sh"), Just("|"),
                    Just("sh"), Just("bash"), Just("sudo"), Just("docker"), Just("run"),
                    Just("--privileged"), Just("-v"), Just("/:/host"), Just("mkfs.ext4"),
                    Just("/dev/sda"), Just("chmod"), Just("-R"), Just("777"), Just("/"),
                    Just("crontab"), Just("-e"), Just("systemctl"), Just("enable"),
                    Just("carapaced"), Just("stop"), Just("git"), Just("config"),
                    Just("core.hooksPath"), Just("x"), Just("eval"), Just("$(curl"),
                    Just("base64"), Just("-d"), Just("pkill"), Just("<("), Just("source"),
                    Just("status"), Just("ls"), Just("-la"), Just("É"), Just("\\x41"),
                    // Subcommands the index files without case, and their neighbours.
                    Just("CONFIG"), Just("Config"), Just("--global"), Just("alias.x"),
                    Just("!sh"), Just("alias.x=!sh"), Just("core.fsmonitor"), Just("Core.SshCommand"),
                    Just("-c"), Just("core.hookspath=x"), Just("credential-fill"), Just("fill"),
                    Just("filter-branch"), Just("push"), Just("--force"), Just("main"),
                    Just("kubectl"), Just("get"), Just("SECRETS"), Just("--get"), Just("user.token"),
                ], 0..7),
                0..4,
            ),
        ) {
            let rules = builtin_all();
            let mut ext = Extracted::new("Bash");
            for words in &lines {
                ext.command(words.join(" "));
                ext.argv(words.iter().map(|w| (*w).to_owned()).collect());
            }
            let first = rules
                .command_index()
                .first_matches(rules.rules().len(), &ext.commands, &ext.argvs);
            for (i, rule) in rules.rules().iter().enumerate() {
                if rules.command_index().indexed(i) {
                    // Which command a rule of both kinds reports may differ; whether it
                    // matches may not.
                    prop_assert_eq!(
                        first[i].is_some(),
                        rule_matches(rule, &ext).is_some(),
                        "rule {} on {:?}", rule.id, ext.commands
                    );
                }
            }
        }

        /// The `run:` index (by program, by subcommand, with and without case) never drops
        /// an item that matches, nor keeps one that does not: commands of the programs the
        /// packs name, written as program, global options, subcommand and words from their
        /// rules, against every rule one by one.
        #[test]
        fn the_run_index_agrees_with_every_rule(
            program in prop_oneof![
                Just("git"), Just("git"), Just("git"), Just("kubectl"), Just("gh"),
                Just("docker"), Just("pass"), Just("security"), Just("gcloud"), Just("python3"),
                Just("git-credential-store"),
            ],
            globals in proptest::collection::vec(prop_oneof![
                Just("-c"), Just("core.hooksPath=x"), Just("alias.p=push --force"),
                Just("--no-pager"), Just("-C"), Just("/tmp"),
            ], 0..3),
            verb in prop_oneof![
                Just("config"), Just("CONFIG"), Just("Config"), Just("push"), Just("status"),
                Just("credential-fill"), Just("credential"), Just("filter-branch"),
                Just("FILTER-BRANCH"), Just("reset"), Just("auth"), Just("get"), Just("view"),
                Just("run"), Just("find-generic-password"), Just("show"), Just("beta"), Just("p"),
            ],
            words in proptest::collection::vec(prop_oneof![
                Just("--global"), Just("get"), Just("set"), Just("alias.x"), Just("!sh -c x"),
                Just("ALIAS.x=!sh"), Just("core.fsmonitor"), Just("Core.SshCommand"),
                Just("ssh -i k"), Just("core.hooksPath"), Just("/tmp/h"), Just("fill"),
                Just("--force"), Just("-f"), Just("main"), Just("+main"), Just("origin"),
                Just("--raw"), Just("SECRETS"), Just("token"), Just("--get"), Just("user.token"),
                Just("-m"), Just("git_filter_repo"), Just("-w"), Just("--privileged"),
                Just("--hard"), Just("."), Just("print-access-token"), Just("--"),
            ], 0..4),
        ) {
            let rules = builtin_all();
            let mut ext = Extracted::new("Bash");
            let mut argv = vec![program.to_owned()];
            argv.extend(globals.iter().chain([&verb]).chain(&words).map(|w| (*w).to_owned()));
            ext.argv(argv.clone());
            let first = rules
                .command_index()
                .first_matches(rules.rules().len(), &ext.commands, &ext.argvs);
            for (i, rule) in rules.rules().iter().enumerate() {
                if rules.command_index().indexed(i) {
                    prop_assert_eq!(
                        first[i].is_some(),
                        rule_matches(rule, &ext).is_some(),
                        "rule {} on {:?}", rule.id, argv
                    );
                }
            }
        }

        /// The index answers exactly what testing every pattern one by one answers.
        #[test]
        fn the_path_index_agrees_with_every_pattern(
            segs in proptest::collection::vec(prop_oneof![
                Just("home"), Just("alice"), Just("root"), Just(".ssh"), Just("id_rsa"),
                Just(".aws"), Just("credentials"), Just("etc"), Just("passwd"), Just(".env"),
                Just("project"), Just("src"), Just(".git"), Just("hooks"), Just("opt"),
                Just("secret-x"), Just("proc"), Just("12"), Just("environ"), Just("srv"),
                Just("bob"), Just("var"), Just("lib"), Just("carapace"), Just("x.pem"),
                Just("*"), Just("cred*"), Just("id_?sa"), Just(".claude"),
                Just("settings.local.json"), Just("config"), Just(".copilot"),
                Just("settings.json"), Just("x.git"),
            ], 0..7),
            action in 0usize..5,
            one_file in proptest::bool::ANY,
        ) {
            let rules = builtin_all();
            let path = format!("/{}", segs.join("/"));
            let action = [Action::Read, Action::Write, Action::Delete, Action::Execute, Action::Network][action];
            // A file tool's write, carrying what every content condition of the packs
            // looks for, so that a rule guarded by a path below its top level is settled
            // by its path alone.
            let mut ext = Extracted::new(if one_file { "Write" } else { "Bash" });
            let mut op = Operation::path(action, path.clone())
                .with_content("[core]\n\thooksPath = /tmp/h\nAKIAABCDEFGHIJKLMNOP");
            op.one_file = one_file && action != Action::Read;
            ext.op(op);
            let hits = PathHits::new(rules, &ext);
            for (i, rule) in rules.rules().iter().enumerate() {
                if rules.path_index().indexed(i) {
                    prop_assert_eq!(
                        hits.rule_matches(rules, i, rule.ops(), &ext).is_some(),
                        rule_matches(rule, &ext).is_some(),
                        "rule {} on {}", rule.id, path
                    );
                } else if rules.path_index().settles(i) && !hits.any[i] {
                    prop_assert!(
                        rule_matches(rule, &ext).is_none(),
                        "rule {} on {} matches without an index hit", rule.id, path
                    );
                }
            }
        }
    }

    /// Items that compare without case are filed under their subcommand in lower case:
    /// every spelling of it still reaches them, through the index as one by one.
    #[test]
    fn case_blind_run_items_are_reached_in_every_case() {
        let rules = builtin_all();
        for (line, id) in [
            ("git config alias.x !sh", "git-config-commands"),
            ("git CONFIG alias.x !sh", "git-config-commands"),
            (
                "git -c x.y=z Config --global ALIAS.x=!sh",
                "git-config-commands",
            ),
            ("git config core.sshCommand ssh", "git-config-commands"),
            ("git config --get user.token", "git-config-credentials"),
            ("git CONFIG --get user.TOKEN", "git-config-credentials"),
            ("git -c core.hooksPath=/tmp/h status", "git-hooks-path"),
        ] {
            let mut ext = Extracted::new("Bash");
            ext.argv(line.split(' ').map(str::to_owned).collect());
            let first =
                rules
                    .command_index()
                    .first_matches(rules.rules().len(), &ext.commands, &ext.argvs);
            let (i, rule) = rules
                .rules()
                .iter()
                .enumerate()
                .find(|(_, r)| r.id == id)
                .expect("the packs hold the rule");
            assert!(rules.command_index().indexed(i), "{id} is indexed");
            assert!(first[i].is_some(), "{id} on {line} through the index");
            assert!(
                rule_matches(rule, &ext).is_some(),
                "{id} on {line} one by one"
            );
        }
    }

    /// A target the analysis resolved gets the rule's own mode; one it could not determine
    /// gets the rule's mode for an unknown target (approve unless the rule says otherwise,
    /// never stricter than the rule), with a message saying why.
    #[test]
    fn an_unknown_target_gets_the_rules_mode_for_it() {
        let opts = Options {
            homes: Homes::fixed(["/home/alice"]),
            resolver: |_| None,
            host: crate::host::real::host(),
        };
        let rules = RuleSet::parse_with(
            "t",
            "version: 1\nrules:\n  - id: my-keys\n    block: \"~/.ssh/**\"\n    message: no keys\n  - id: my-netrc\n    block: \"~/.netrc\"\n    on_unknown_target: block\n  - id: my-history\n    warn: \"~/.bash_history\"\n",
            &opts,
        )
        .expect("the rules compile");
        let decide = |ops: Vec<Operation>| {
            let mut ext = Extracted::new("Bash");
            for op in ops {
                ext.op(op);
            }
            evaluate(&rules, &ext, &Activation::default(), Layer::ToolCall)
        };
        let mode_of =
            |d: &Decision, id: &str| d.matches.iter().find(|m| m.id == id).map(|m| m.mode);
        let sure = decide(vec![Operation::path(
            Action::Read,
            "/home/alice/.ssh/id_ed25519",
        )]);
        assert_eq!(sure.decision, Mode::Block);
        let unknown = Operation {
            unknown: true,
            ..Operation::path(Action::Read, "/home/alice/**")
        };
        let unsure = decide(vec![unknown.clone()]);
        assert_eq!(mode_of(&unsure, "my-keys"), Some(Mode::Approve));
        assert_eq!(mode_of(&unsure, "my-netrc"), Some(Mode::Block));
        assert_eq!(mode_of(&unsure, "my-history"), Some(Mode::Warn));
        let keys = unsure.matches.iter().find(|m| m.id == "my-keys");
        assert!(
            keys.is_some_and(|m| m.message.starts_with("no keys")
                && m.message.contains("could not be determined")),
            "{keys:?}"
        );
        // A rule the resolved part of the call meets keeps its own mode.
        let both = decide(vec![
            unknown,
            Operation::path(Action::Read, "/home/alice/.ssh/id_rsa"),
        ]);
        assert_eq!(mode_of(&both, "my-keys"), Some(Mode::Block));
        assert!(RuleSet::parse_with(
            "t",
            "version: 1\nrules:\n  - block: /x\n    on_unknown_target: blok\n",
            &opts
        )
        .is_err());
    }
}
