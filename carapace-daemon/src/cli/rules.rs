//! `carapace rules`: check, list, explain and test rule files on this machine (no daemon
//! needed; the same compiler the daemon uses), and ask the daemon to reload its rule file.
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use carapace_common::op;
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use carapace::api::proto::{allow_from_denial_request, AllowFromDenialRequest, ReloadRulesRequest};
use carapace::api::reload::{Loaded, RuleSource};
use carapace::paths::DEFAULT_DATA_DIR;
use carapace::policy_host::resolve_dns;
use carapace_policy::engine::{self, Activation, Extracted, Layer, Operation};
use carapace_policy::rules::compile::dfa::PathAutomaton;
use carapace_policy::rules::compile::kernel::{self as kernel_compile, NotInKernel, Plan};
use carapace_policy::rules::model::{Cidr, Host};
use carapace_policy::rules::pattern::KernelForm;
use carapace_policy::rules::validate::mode_name;
use carapace_policy::rules::{Cond, Enforcement, Mode, Rule, RuleSet};

const AFTER_HELP: &str = "\
Without --rules / FILE, the rule file is $CARAPACE_DATA_DIR/rules.yaml (default
/var/lib/carapace/rules.yaml), the file carapaced reads; when it does not exist, the built-in
packs are used, as the daemon does. Only `reload` and `allow` talk to the daemon.

Examples:
  carapace rules check ./rules.yaml              validate before installing
  carapace rules list                            what the daemon's rule file holds
  carapace rules explain ssh-private-keys        which layer enforces a rule, and how
  carapace rules test ~/.ssh/id_rsa --op read    would reading this file be blocked?
  sudo carapace rules reload                     make the daemon read its rule file again";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct RulesArgs {
    /// Data directory whose rules.yaml is the default rule file
    #[arg(long, global = true, value_name = "DIR", env = "CARAPACE_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
    #[command(subcommand)]
    pub command: RulesCommand,
}

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Validate rule files and report every problem with `file:line:column` and a hint
    ///
    /// Exits 0 when every file is valid (printing how many rules it holds and how many the
    /// kernel enforces), 1 when any has an error. Warnings are printed and do not fail.
    #[command(
        visible_alias = "validate",
        after_help = "Examples:\n  carapace rules check ./rules.yaml\n  \
                            carapace rules check a.yaml b.yaml\n  \
                            carapace rules check          # the daemon's rule file\n  \
                            carapace rules check --profile ci   # $CARAPACE_DATA_DIR/profiles/ci.yaml"
    )]
    Check {
        /// Rule files (default: the daemon's rule file, else the built-in packs)
        #[arg(value_name = "FILE", conflicts_with = "profile")]
        files: Vec<PathBuf>,
        /// Validate the named profile `$CARAPACE_DATA_DIR/profiles/NAME.yaml` (for `carapace
        /// run --profile NAME`) as the daemon loads it: against the daemon's rule file, whose
        /// locked rules it keeps, and in one kernel image with it
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
    },
    /// List the rules: id, mode, source (built-in pack or file), locked, enforcing layers
    #[command(after_help = "Examples:\n  carapace rules list\n  \
                            carapace rules list --rules ./rules.yaml --json")]
    List {
        /// Rule file (default: the daemon's rule file, else the built-in packs)
        #[arg(long, value_name = "FILE")]
        rules: Option<PathBuf>,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Explain which layers enforce each rule and how
    ///
    /// For a rule the kernel enforces: the kernel form of each pattern (exact path, directory
    /// prefix, basename, inode of an existing file, address block and port) and its
    /// exceptions. For a userspace-only rule: the precise reason the kernel cannot enforce it.
    #[command(after_help = "Examples:\n  carapace rules explain\n  \
                            carapace rules explain cloud-metadata\n  \
                            carapace rules explain --rules ./rules.yaml --json")]
    Explain {
        /// Only this rule
        #[arg(value_name = "ID")]
        id: Option<String>,
        /// Rule file (default: the daemon's rule file, else the built-in packs)
        #[arg(long, value_name = "FILE")]
        rules: Option<PathBuf>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Show which rules match a path operation or a connection
    ///
    /// Tests the rules that match on paths or addresses only, the way the kernel layer sees an
    /// operation; rules on tools, commands or content need a whole tool call (`carapace
    /// check`). Exits 2 if a `block` rule matches, 0 otherwise, 1 on errors.
    #[command(
        after_help = "Examples:\n  carapace rules test /etc/shadow --op read\n  \
                            carapace rules test /home/u/.ssh/id_rsa --op write --rules ./rules.yaml\n  \
                            carapace rules test 169.254.169.254:80 --op network\n  \
                            carapace rules test example.com          # a host: --op network, any port\n  \
                            carapace rules test https://pastebin.com/raw/x   # a URL: its host and port"
    )]
    Test {
        /// Rule file (default: the daemon's rule file, else the built-in packs)
        #[arg(long, value_name = "FILE")]
        rules: Option<PathBuf>,
        /// An absolute path, or HOST[:PORT] / IP[:PORT] / [IPv6]:PORT / a URL
        #[arg(value_name = "PATH_OR_HOST")]
        target: String,
        /// The operation (default: network for a host or URL; a path needs one)
        #[arg(long, value_enum)]
        op: Option<TestOp>,
    },
    /// Make the daemon read its rule file again
    ///
    /// The daemon swaps the new rules in only if the file validates; otherwise it keeps the
    /// rules in force and this prints the errors and exits 1. Needs root, and is refused to
    /// processes inside an agent session.
    #[command(after_help = "Example:\n  sudo carapace rules reload")]
    Reload,
    /// Allow a refused operation from now on: the smallest change of the rule file
    ///
    /// Shows the change the daemon proposes for one refusal — an `except:` entry with the
    /// exact path (or host and port) on the rule that refused it, or an `exceptions:` entry
    /// for a built-in rule — as a diff of the rule file, and the safety check: the built-in
    /// packs' must-block cases and the session's refused operations replayed under the old
    /// and the new file, listing every one that would newly be allowed. `--write` writes the
    /// file (with a comment saying when and why) and reloads; a change that lets a must-block
    /// case through also needs `--confirm`. A locked rule is never changed. Needs root; refused
    /// to processes inside an agent session. Exit 0 shown or written, 1 refused.
    #[command(after_help = "Examples:\n  \
        sudo carapace rules allow --from-denial 1234          # show the change\n  \
        sudo carapace rules allow --from-denial 1234 --write  # write it and reload\n  \
        sudo carapace rules allow --approval ap-1a2b3c4d --rule approve-drafts --write\n\n\
        The seq of a denial is in `carapace audit tail` and the console's timeline.")]
    Allow {
        /// The audit ledger record (seq) of the refusal
        #[arg(
            long,
            value_name = "SEQ",
            required_unless_present = "approval",
            conflicts_with = "approval"
        )]
        from_denial: Option<u64>,
        /// An approval request instead (its id)
        #[arg(long, value_name = "ID")]
        approval: Option<String>,
        /// Which of the rules that refused it (default: the one that decided)
        #[arg(long, value_name = "RULE")]
        rule: Option<String>,
        /// Write the change and reload (default: only show it)
        #[arg(long)]
        write: bool,
        /// Write it even though it lets a built-in must-block case through
        #[arg(long, requires = "write")]
        confirm: bool,
        /// Print the offer as JSON
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TestOp {
    Read,
    Write,
    Execute,
    Delete,
    Network,
}

impl TestOp {
    fn bit(self) -> u32 {
        match self {
            Self::Read => op::READ,
            Self::Write => op::WRITE,
            Self::Execute => op::EXEC,
            Self::Delete => op::DELETE,
            Self::Network => op::NETWORK,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Execute => "execute",
            Self::Delete => "delete",
            Self::Network => "network",
        }
    }
}

/// Runs a `carapace rules` command; returns the exit code.
pub async fn run(socket: &Path, args: RulesArgs) -> anyhow::Result<u8> {
    let data_dir = args.data_dir;
    match args.command {
        RulesCommand::Check {
            profile: Some(name),
            ..
        } => Ok(check_profile(&data_dir, &name)),
        RulesCommand::Check { files, .. } => Ok(check(&data_dir, &files)),
        RulesCommand::List { rules, json } => {
            let Some(loaded) = load(&data_dir, rules) else {
                return Ok(1);
            };
            let rows = list_rows(&loaded.rules);
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                print!("{}", render_table(&rows));
            }
            Ok(0)
        }
        RulesCommand::Explain { id, rules, json } => {
            let Some(loaded) = load(&data_dir, rules) else {
                return Ok(1);
            };
            let set = &loaded.rules;
            let selected: Vec<&Rule> = if let Some(id) = &id {
                let Some(rule) = set.by_id(id) else {
                    eprintln!("carapace: no rule `{id}` (see `carapace rules list` for the ids)");
                    return Ok(1);
                };
                vec![rule]
            } else {
                set.rules().iter().collect()
            };
            let explained: Vec<Explanation> = selected.iter().map(|r| explain(set, r)).collect();
            if json {
                println!("{}", serde_json::to_string_pretty(&explained)?);
            } else {
                let texts: Vec<String> = explained.iter().map(render_explanation).collect();
                print!("{}", texts.join("\n"));
            }
            Ok(0)
        }
        RulesCommand::Test { rules, target, op } => {
            let Some(loaded) = load(&data_dir, rules) else {
                return Ok(1);
            };
            Ok(test(&loaded.rules, &target, op))
        }
        RulesCommand::Reload => reload(socket).await,
        RulesCommand::Allow {
            from_denial,
            approval,
            rule,
            write,
            confirm,
            json,
        } => {
            let from = match (from_denial, approval) {
                (Some(seq), _) => allow_from_denial_request::From::Record(seq),
                (None, Some(id)) => allow_from_denial_request::From::Approval(id),
                (None, None) => anyhow::bail!("name --from-denial SEQ or --approval ID"),
            };
            allow(
                socket,
                AllowFromDenialRequest {
                    from: Some(from),
                    rule: rule.unwrap_or_default(),
                    write,
                    confirm,
                },
                json,
            )
            .await
        }
    }
}

/// The rule set of `explicit`, else of the daemon's default file, else the built-in packs;
/// `None` after printing the diagnostics of a file that does not validate.
fn load(data_dir: &Path, explicit: Option<PathBuf>) -> Option<Loaded> {
    match RuleSource::new(data_dir, explicit).load() {
        Ok(loaded) => Some(loaded),
        Err(diags) => {
            eprint!("{diags}");
            eprintln!("carapace: the rule file has errors (see `carapace rules check`)");
            None
        }
    }
}

fn check(data_dir: &Path, files: &[PathBuf]) -> u8 {
    let sources: Vec<RuleSource> = if files.is_empty() {
        vec![RuleSource::new(data_dir, None)]
    } else {
        files
            .iter()
            .map(|f| RuleSource::new(data_dir, Some(f.clone())))
            .collect()
    };
    let mut failed = false;
    for source in sources {
        let name = source.path.display().to_string();
        match source.load() {
            Ok(loaded) => {
                print!("{}", loaded.rules.warnings());
                let what = match &loaded.file {
                    Some(_) => name,
                    None => format!("no rule file at {name}; built-in packs"),
                };
                println!("{what}: ok, {}", summary(&loaded.rules));
            }
            Err(diags) => {
                failed = true;
                print!("{diags}");
                let errors = diags.errors().count();
                let s = if errors == 1 { "" } else { "s" };
                println!("{name}: {errors} error{s}");
            }
        }
    }
    u8::from(failed)
}

/// `rules check --profile NAME`: the profile as the daemon would load it for a session.
fn check_profile(data_dir: &Path, name: &str) -> u8 {
    use carapace::profiles::{self, ProfileError};
    let main = match RuleSource::new(data_dir, None).load() {
        Ok(loaded) => loaded.rules,
        Err(diags) => {
            print!("{diags}");
            println!("the main rule file has errors; a profile is loaded with its locked rules");
            return 1;
        }
    };
    let shown = profiles::dir(data_dir).join(format!("{name}.yaml"));
    let names = std::collections::BTreeSet::from([name.to_owned()]);
    match profiles::Profiles::build(data_dir, &main, &names, &[]) {
        Ok(built) => {
            let Some(rules) = built.rules(name) else {
                return 1;
            };
            print!("{}", rules.warnings());
            println!("{}: ok, {}", shown.display(), summary(rules));
            0
        }
        Err(ProfileError::Invalid { diags, .. } | ProfileError::Union { diags, .. }) => {
            print!("{diags}");
            let errors = diags.errors().count();
            let s = if errors == 1 { "" } else { "s" };
            println!("{}: {errors} error{s}", shown.display());
            1
        }
        Err(e) => {
            println!("carapace: {e}");
            1
        }
    }
}

/// "N rules (K from built-in packs), M enforced in the kernel".
#[must_use]
pub fn summary(set: &RuleSet) -> String {
    let rules = set.rules();
    let builtin = rules
        .iter()
        .filter(|r| r.source.starts_with("builtin:"))
        .count();
    let kernel = rules.iter().filter(|r| r.kernel_index.is_some()).count();
    let s = if rules.len() == 1 { "" } else { "s" };
    format!(
        "{} rule{s} ({builtin} from built-in packs), {kernel} enforced in the kernel",
        rules.len()
    )
}

/// One line of `carapace rules list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ListRow {
    pub id: String,
    pub mode: &'static str,
    /// `builtin:<pack>` or the rule file.
    pub source: String,
    pub locked: bool,
    /// `kernel` and/or `userspace`.
    pub layers: Vec<&'static str>,
}

fn layers(rule: &Rule) -> Vec<&'static str> {
    if rule.kernel_enforced() {
        vec!["kernel", "userspace"]
    } else {
        vec!["userspace"]
    }
}

#[must_use]
pub fn list_rows(set: &RuleSet) -> Vec<ListRow> {
    set.rules()
        .iter()
        .map(|r| ListRow {
            id: r.id.clone(),
            mode: mode_name(r.mode),
            source: r.source.clone(),
            locked: r.locked,
            layers: layers(r),
        })
        .collect()
}

#[must_use]
pub fn render_table(rows: &[ListRow]) -> String {
    let header = ["ID", "MODE", "SOURCE", "LOCKED", "LAYERS"];
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.id.clone(),
                r.mode.to_owned(),
                r.source.clone(),
                if r.locked { "yes" } else { "no" }.to_owned(),
                r.layers.join("+"),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |fields: [&str; 5]| {
        let mut l = String::new();
        for (i, (f, w)) in fields.iter().zip(widths).enumerate() {
            if i + 1 == fields.len() {
                l.push_str(f);
            } else {
                let _ = write!(l, "{f:<w$}  ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header);
    for row in &cells {
        line([&row[0], &row[1], &row[2], &row[3], &row[4]]);
    }
    out
}

/// One kernel map entry a rule compiles to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FormInfo {
    /// `exact path`, `symlink target`, `directory prefix`, `basename`, `inode`,
    /// `path automaton`, `address block`.
    pub kind: &'static str,
    pub value: String,
    /// For address blocks: the port, `None` for every port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// How the kernel enforces a rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelInfo {
    /// The rule's index in the kernel maps (in denial events).
    pub index: u32,
    /// The operations the kernel denies.
    pub ops: Vec<&'static str>,
    /// Every operation denied is one only the kernel sees ([`kernel_only`]): Layer 1 has
    /// nothing to check. Worked out from the op bits, not from `ops`' wording.
    #[serde(skip)]
    pub kernel_only: bool,
    /// On from the start of every session (else once its trigger fires).
    pub always_on: bool,
    pub matches: Vec<FormInfo>,
    /// Checked first: a match here lets the operation through this rule.
    pub exceptions: Vec<FormInfo>,
    /// What the kernel cannot match as written (host names in a network allow-list).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// States of the rule set's path automaton, when this rule has patterns in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automaton_states: Option<usize>,
    /// How the kernel answers an approve-mode rule ([`APPROVE_IN_KERNEL`]); absent for a
    /// block rule, which it refuses outright.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<&'static str>,
}

/// What the kernel does for an approve-mode rule, as `rules explain` says it.
pub const APPROVE_IN_KERNEL: &str = "refuse, then approval request";

/// How the kernel answers a rule of metadata `meta`: [`APPROVE_IN_KERNEL`] (with a note
/// saying what that means) for an approve-mode rule.
fn approval_of(
    meta: Option<&carapace_common::RuleMeta>,
    notes: &mut Vec<String>,
) -> Option<&'static str> {
    let approve = meta.is_some_and(|m| m.flags & carapace_common::RULE_APPROVE != 0);
    if approve {
        notes.push(APPROVE_NOTE.to_owned());
    }
    approve.then_some(APPROVE_IN_KERNEL)
}

/// What `rules explain` adds about an approve-mode rule in the kernel.
const APPROVE_NOTE: &str = "mode approve in the kernel: an operation the rule covers is \
     refused (EACCES) and files an approval request for that path and action (the file it \
     names then), or that address and port; once a human approves it, the same operation \
     passes for the rest of the session (the agent retries); a denial or an expired request \
     keeps it refused";

/// What `carapace rules explain` says about one rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Explanation {
    pub id: String,
    pub mode: &'static str,
    pub source: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
    pub layers: Vec<&'static str>,
    /// Set when the kernel enforces the rule.
    pub kernel: Option<KernelInfo>,
    /// Why the kernel does not enforce it, when it does not.
    pub userspace_reason: Option<String>,
    /// For a `hold: true` rule the kernel enforces: the files whose opens fanotify holds
    /// (those that exist now; the daemon lists them again at each load).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<Vec<String>>,
}

/// The operations a rule's kernel entry can deny, as `explain` names them.
const OP_NAMES: [(u32, &str); 8] = [
    (op::READ, "read"),
    (op::WRITE, "write"),
    (op::EXEC, "execute"),
    (op::DELETE, "delete"),
    (op::NETWORK, "network"),
    (op::OUTSIDE, "connect to listeners outside the session"),
    (op::CHROOT, "chroot"),
    (op::USERNS, "new user namespace"),
];

fn op_names(bits: u32) -> Vec<&'static str> {
    OP_NAMES
        .into_iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| n)
        .collect()
}

/// Whether every operation of `bits` that `explain` names is one only the kernel sees: a
/// connect to a listener made outside the session (no tool call says who made a socket).
fn kernel_only(bits: u32) -> bool {
    OP_NAMES
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .all(|(b, _)| *b == op::OUTSIDE)
}

/// What a `view:` rule refuses, as the forms `explain` lists.
fn view_forms(ops: u32) -> impl Iterator<Item = FormInfo> {
    [(op::CHROOT, "chroot"), (op::USERNS, "new user namespace")]
        .into_iter()
        .filter(move |(bit, _)| ops & bit != 0)
        .map(|(_, what)| FormInfo {
            kind: "refused in sessions",
            value: what.into(),
            port: None,
        })
}

fn form_info(form: &KernelForm) -> FormInfo {
    let (kind, value) = match form {
        KernelForm::Exact(p) => ("exact path", p.clone()),
        KernelForm::Prefix(p) => ("directory prefix", p.clone()),
        KernelForm::Name(n) => ("basename", n.clone()),
    };
    FormInfo {
        kind,
        value,
        port: None,
    }
}

/// The kernel side of a rule: its plan (the compiler's own) plus the entries the compiler
/// derived from the machine (inodes of existing files, symlink targets), read from the image.
fn kernel_info(set: &RuleSet, rule: &Rule, index: u32) -> Result<KernelInfo, NotInKernel> {
    let plan = kernel_compile::plan(rule)?;
    let image = set.kernel_image();
    let mut matches = Vec::new();
    let mut exceptions = Vec::new();
    let mut notes = Vec::new();
    let mut automaton_states = None;
    match plan {
        Plan::Path {
            forms,
            excepts,
            automata,
            except_automata,
        } => {
            matches.extend(forms.iter().map(form_info));
            exceptions.extend(excepts.iter().map(form_info));
            let automaton = |a: &kernel_compile::Automaton| FormInfo {
                kind: "path automaton",
                value: a.pattern.clone(),
                port: None,
            };
            matches.extend(automata.iter().map(automaton));
            exceptions.extend(except_automata.iter().map(automaton));
            if !automata.is_empty() || !except_automata.is_empty() {
                automaton_states = Some(image.dfa.iter().map(PathAutomaton::states).sum());
            }
            let own: Vec<&str> = forms
                .iter()
                .chain(&excepts)
                .filter_map(|f| match f {
                    KernelForm::Exact(p) => Some(p.as_str()),
                    _ => None,
                })
                .collect();
            for (path, refs) in &image.exact {
                let path = String::from_utf8_lossy(path);
                if refs.iter().any(|r| r.rule == index && r.flags == 0) && !own.contains(&&*path) {
                    matches.push(FormInfo {
                        kind: "symlink target",
                        value: path.into_owned(),
                        port: None,
                    });
                }
            }
            for ((dev, ino), refs) in &image.inodes {
                if refs.iter().any(|r| r.rule == index) {
                    matches.push(FormInfo {
                        kind: "inode",
                        value: format!("{}:{}:{ino}", dev >> 20, dev & 0xf_ffff),
                        port: None,
                    });
                }
            }
        }
        Plan::View { ops } => matches.extend(view_forms(ops)),
        Plan::Net { entries, excepts } => {
            let info = |(cidr, port): (Cidr, u16)| {
                let addr = std::net::Ipv6Addr::from(cidr.addr);
                let value = match addr.to_ipv4_mapped() {
                    Some(v4) if cidr.prefix_len >= 96 => format!("{v4}/{}", cidr.prefix_len - 96),
                    _ => format!("{addr}/{}", cidr.prefix_len),
                };
                FormInfo {
                    kind: "address block",
                    value,
                    port: (port != 0).then_some(port),
                }
            };
            matches.extend(entries.into_iter().map(info));
            exceptions.extend(excepts.into_iter().map(info));
            if let Some(Cond::Net(net)) = &rule.cond {
                for h in &net.hosts {
                    if let Host::Name { name, resolved } = h {
                        notes.push(blocked_name_note(name, resolved));
                    }
                }
            }
            for e in &rule.except_net {
                for h in &e.hosts {
                    if let Host::Name { name, resolved } = h {
                        notes.push(name_note(name, resolved));
                    }
                }
            }
        }
    }
    let meta = image.rules.get(index as usize);
    let approval = approval_of(meta, &mut notes);
    let ops = meta.map_or_else(|| rule.ops(), |m| m.ops);
    Ok(KernelInfo {
        index,
        ops: op_names(ops),
        kernel_only: kernel_only(ops),
        always_on: meta.is_some_and(|m| m.flags & carapace_common::RULE_ALWAYS_ON != 0),
        matches,
        exceptions,
        notes,
        automaton_states,
        approval,
    })
}

/// How the kernel refuses a host name a rule blocks: by the addresses it had when the rules
/// loaded, and by those a session's resolver hands out for it.
fn blocked_name_note(name: &str, resolved: &[std::net::IpAddr]) -> String {
    let learned = "and, in each session, the addresses its resolver hands out for the name \
                   (kept for the session)";
    if resolved.is_empty() {
        format!(
            "host `{name}` has no fixed address: the kernel refuses only the addresses a \
             session's resolver hands out for it (kept for the session); where the kernel \
             layer cannot redirect DNS, the name is refused in userspace only"
        )
    } else {
        let addrs: Vec<String> = resolved.iter().map(ToString::to_string).collect();
        format!(
            "host `{name}` is refused by the addresses it resolved to when the rules were \
             loaded ({}) {learned}",
            addrs.join(", ")
        )
    }
}

/// Why an allowed host name is only partly the kernel's: the kernel sees the address a
/// process connects to, never the name it looked up.
fn name_note(name: &str, resolved: &[std::net::IpAddr]) -> String {
    if resolved.is_empty() {
        format!(
            "allowed host `{name}` did not resolve: it is allowed by name in userspace only \
             and the kernel refuses connects to it"
        )
    } else {
        let addrs: Vec<String> = resolved.iter().map(ToString::to_string).collect();
        format!(
            "allowed host `{name}` is matched by name in userspace only; the kernel sees \
             addresses, not names, and cannot resolve them safely: it allows only the \
             addresses the name resolved to when the rules were loaded ({}) and refuses a \
             connect to any other address of it",
            addrs.join(", ")
        )
    }
}

/// What `tls: sni` adds to a rule, as `rules explain` says it.
const SNI_NOTE: &str = "tls: sni: a session's TCP connects to ports 443 and 80 of addresses \
     its resolver handed out go through carapaced's server-name proxy, which reads the TLS \
     ClientHello's server name (or the HTTP Host) and refuses a name this rule blocks, \
     though the address was learned for another; UDP to those ports is refused";

#[must_use]
pub fn explain(set: &RuleSet, rule: &Rule) -> Explanation {
    let (kernel, userspace_reason) = match (&rule.enforcement, rule.kernel_index) {
        (Enforcement::Kernel, Some(index)) => match kernel_info(set, rule, index) {
            Ok(mut info) => {
                if rule.tls.is_some() {
                    info.notes.push(SNI_NOTE.to_owned());
                }
                (Some(info), None)
            }
            // The compiler accepted the plan; failing now would be a bug worth seeing.
            Err(reason) => (None, Some(format!("inconsistent kernel plan: {reason}"))),
        },
        (Enforcement::Kernel, None) => (None, Some("not compiled for the kernel".into())),
        (Enforcement::Userspace(reason), _) => (None, Some(reason.clone())),
        (Enforcement::Unplanned, _) => (None, Some(Enforcement::Unplanned.to_string())),
    };
    Explanation {
        id: rule.id.clone(),
        mode: mode_name(rule.mode),
        source: rule.source.clone(),
        line: rule.span.line,
        column: rule.span.col,
        message: rule.message.clone(),
        layers: match (&kernel, rule.hold) {
            (Some(_), true) => vec!["kernel", "fanotify", "userspace"],
            (Some(_), false) => vec!["kernel", "userspace"],
            (None, _) => vec!["userspace"],
        },
        held: (kernel.is_some() && rule.hold)
            .then(|| carapace::hold::files_of(rule, carapace::hold::MAX_FILES)),
        kernel,
        userspace_reason,
    }
}

#[must_use]
pub fn render_explanation(e: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({}, {}:{}:{})",
        e.id, e.mode, e.source, e.line, e.column
    );
    let _ = writeln!(out, "  message: {}", e.message);
    match (&e.kernel, &e.userspace_reason) {
        (Some(k), _) => {
            let when = if k.always_on {
                "always on"
            } else {
                "on once its trigger fires"
            };
            let userspace = if k.kernel_only {
                " only"
            } else {
                " and userspace"
            };
            let answer = match k.approval {
                Some(how) => format!("{how} for {}", k.ops.join(", ")),
                None => format!("denies {}", k.ops.join(", ")),
            };
            let _ = writeln!(
                out,
                "  layers: kernel (rule index {}, {answer}, {when}){userspace}",
                k.index
            );
            for f in &k.matches {
                let _ = writeln!(out, "  kernel matches {}", form_text(f));
            }
            for f in &k.exceptions {
                let _ = writeln!(out, "  kernel exception {}", form_text(f));
            }
            for n in &k.notes {
                let _ = writeln!(out, "  note: {n}");
            }
            if let Some(files) = &e.held {
                let _ = writeln!(
                    out,
                    "  held by fanotify: opens of {} file(s) that exist now wait for a human's \
                     answer (the kernel lets them through to the daemon's fanotify listener; \
                     a denial fails the open with EPERM); other files of the pattern are \
                     refused until approved and the agent retries",
                    files.len()
                );
                for f in files {
                    let _ = writeln!(out, "  holds {f}");
                }
            }
            if let Some(states) = k.automaton_states {
                let _ = writeln!(
                    out,
                    "  kernel: path automata, {states} states in all (the rule set's patterns \
                     anchored at the root in one, floating ones in another; walked over the \
                     path's bytes, `/**` endings and regexes matched on the way)"
                );
            }
        }
        (None, reason) => {
            let _ = writeln!(
                out,
                "  layers: userspace only: {}",
                reason
                    .as_deref()
                    .unwrap_or("the kernel does not enforce it")
            );
        }
    }
    out
}

fn form_text(f: &FormInfo) -> String {
    match (f.kind, f.port) {
        ("address block", Some(port)) => format!("address block {} port {port}", f.value),
        ("address block", None) => format!("address block {} (any port)", f.value),
        (kind, _) => format!("{kind} `{}`", f.value),
    }
}

/// A `--op network` target: addresses and, if given, the port.
/// `HOST:PORT` of a URL (`https://h/x` → `h:443`), or `None` for anything else.
fn url_authority(target: &str) -> Option<String> {
    let (scheme, rest) = target.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let has_port = if authority.starts_with('[') {
        authority.contains("]:")
    } else {
        authority.contains(':')
    };
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        "ftp" => Some(21),
        "ssh" | "sftp" | "git+ssh" => Some(22),
        _ => None,
    };
    Some(match default {
        Some(port) if !has_port => format!("{authority}:{port}"),
        _ => authority.to_owned(),
    })
}

/// A `rules test --op network` target that names no address.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum BadTarget {
    #[error("`{port}` in `{target}` is not a port (0-65535)")]
    Port { port: String, target: String },
    #[error("`{0}` is not a host; write HOST[:PORT], IP[:PORT] or [IPv6]:PORT")]
    NotAHost(String),
}

/// A `rules test` network target: the host as written, its addresses (none for a name that
/// does not resolve here) and the port, if given.
#[derive(Debug, PartialEq, Eq)]
struct NetTarget {
    host: String,
    ips: Vec<IpAddr>,
    port: Option<u16>,
}

fn parse_net_target(target: &str) -> Result<NetTarget, BadTarget> {
    if let Ok(sa) = target.parse::<SocketAddr>() {
        return Ok(NetTarget {
            host: sa.ip().to_string(),
            ips: vec![sa.ip()],
            port: Some(sa.port()),
        });
    }
    let bare = target.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(NetTarget {
            host: ip.to_string(),
            ips: vec![ip],
            port: None,
        });
    }
    let (host, port) = match target.rsplit_once(':') {
        Some((h, p)) => {
            let port = p.parse::<u16>().map_err(|_| BadTarget::Port {
                port: p.to_owned(),
                target: target.to_owned(),
            })?;
            (h, Some(port))
        }
        None => (target, None),
    };
    if host.is_empty() || host.contains('/') {
        return Err(BadTarget::NotAHost(target.to_owned()));
    }
    Ok(NetTarget {
        host: host.to_owned(),
        ips: resolve_dns(host).unwrap_or_default(),
        port,
    })
}

/// The rules a connection to `host` matches by name, as Layer 1 judges a call that names it
/// and the session resolver a lookup (wildcards and `except:` included).
fn name_matches<'a>(set: &'a RuleSet, host: &str, port: Option<u16>) -> Vec<&'a Rule> {
    let mut ext = Extracted::new("network");
    ext.ops.push(Operation::network(host, port));
    engine::evaluate(set, &ext, &Activation::default(), Layer::ToolCall)
        .matches
        .iter()
        .filter_map(|m| set.by_id(&m.id))
        .collect()
}

/// The rules a connection matches. Without a port, a rule matches if it matches on some
/// port: the ports any address rule names, or any other port.
fn net_matches<'a>(set: &'a RuleSet, ips: &[IpAddr], port: Option<u16>) -> Vec<&'a Rule> {
    let ports: Vec<u16> = if let Some(p) = port {
        vec![p]
    } else {
        let mut named: Vec<u16> = set
            .rules()
            .iter()
            .filter_map(|r| match &r.cond {
                Some(carapace_policy::rules::Cond::Net(n)) => Some(n.ports.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        // A port no rule names stands for "any other port".
        let other = (1..=u16::MAX).find(|p| !named.contains(p)).unwrap_or(0);
        named.push(other);
        named
    };
    set.rules()
        .iter()
        .filter(|r| {
            ips.iter()
                .any(|ip| ports.iter().any(|p| r.matches_net(*ip, *p)))
        })
        .collect()
}

fn test(set: &RuleSet, target: &str, op: Option<TestOp>) -> u8 {
    let path = target.starts_with(['/', '~', '.']);
    let op = match op {
        Some(op) => op,
        None if !path => TestOp::Network,
        None => {
            eprintln!(
                "carapace: say which operation to test on `{target}`: --op read, write, \
                 execute or delete"
            );
            return 1;
        }
    };
    let target = url_authority(target).unwrap_or_else(|| target.to_owned());
    let target = target.as_str();
    let (subject, matched) = if op == TestOp::Network {
        let t = match parse_net_target(target) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("carapace: {e}");
                return 1;
            }
        };
        let port_text = t
            .port
            .map_or_else(|| "any port".to_owned(), |p| format!("port {p}"));
        let addresses = if t.ips.is_empty() {
            "does not resolve here: rules on addresses not checked".to_owned()
        } else {
            let shown: Vec<String> = t.ips.iter().map(ToString::to_string).collect();
            shown.join(", ")
        };
        let subject = format!("{target} ({addresses}, {port_text})");
        let mut matched = name_matches(set, &t.host, t.port);
        for r in net_matches(set, &t.ips, t.port) {
            if !matched.iter().any(|m| m.id == r.id) {
                matched.push(r);
            }
        }
        (subject, matched)
    } else {
        if !target.starts_with('/') {
            eprintln!(
                "carapace: `{target}` is not an absolute path (with --op network, give a host)"
            );
            return 1;
        }
        (target.to_owned(), set.matches_path(target, op.bit()))
    };
    println!("{} {subject}", op.name());
    for r in &matched {
        println!(
            "  {:<8} {}  ({}:{}:{})  {}",
            mode_name(r.mode),
            r.id,
            r.source,
            r.span.line,
            r.span.col,
            r.message
        );
    }
    let strictest = matched.iter().map(|r| r.mode).max();
    match strictest {
        None => println!("decision: allow (no path, host or address rule matches)"),
        Some(mode) => println!("decision: {}", mode_name(mode)),
    }
    if strictest == Some(Mode::Block) {
        2
    } else {
        0
    }
}

async fn reload(socket: &Path) -> anyhow::Result<u8> {
    let mut client = super::connect::connect(socket).await?;
    let reply = client
        .reload_rules(ReloadRulesRequest {})
        .await
        .map_err(|s| anyhow::anyhow!("reload refused: {}", s.message()))?
        .into_inner();
    let file = if reply.file.is_empty() {
        "the built-in packs".to_owned()
    } else {
        reply.file.clone()
    };
    if reply.ok {
        print!("{}", reply.diagnostics);
        println!(
            "rules reloaded from {file}: {} rules, {} enforced in the kernel",
            reply.rules, reply.kernel_rules
        );
        Ok(0)
    } else {
        eprint!("{}", reply.diagnostics);
        eprintln!(
            "carapace: {file} was not loaded; the daemon keeps its previous rules ({} rules, {} \
             enforced in the kernel)",
            reply.rules, reply.kernel_rules
        );
        Ok(1)
    }
}

async fn allow(socket: &Path, request: AllowFromDenialRequest, json: bool) -> anyhow::Result<u8> {
    let mut client = super::connect::connect(socket).await?;
    let write = request.write;
    match client.allow_from_denial(request).await {
        Ok(reply) => {
            let reply = reply.into_inner();
            if json {
                println!("{}", reply.offer_json);
            } else {
                print!("{}", reply.text);
                if reply.written {
                    println!("written and reloaded.");
                } else if !write {
                    println!("(not written: add --write to write it and reload)");
                }
            }
            Ok(0)
        }
        Err(status) => {
            eprintln!("carapace: {}", status.message());
            Ok(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use carapace_policy::rules::{Homes, Options};

    #[test]
    fn urls_name_their_host_and_port() {
        assert_eq!(
            url_authority("https://pastebin.com/raw/x").as_deref(),
            Some("pastebin.com:443")
        );
        assert_eq!(
            url_authority("http://u:p@h.example:8080/a?b").as_deref(),
            Some("h.example:8080")
        );
        assert_eq!(url_authority("http://[::1]/x").as_deref(), Some("[::1]:80"));
        assert_eq!(
            url_authority("http://[::1]:81/").as_deref(),
            Some("[::1]:81")
        );
        assert_eq!(url_authority("example.com"), None);
    }

    fn set(text: &str) -> RuleSet {
        let opts = Options {
            homes: Homes::fixed(["/home/a"]),
            resolver: |_| None,
            host: carapace::policy_host::shared(),
        };
        RuleSet::parse_with("t.yaml", text, &opts).unwrap()
    }

    const RULES: &str = r#"version: 1
builtin: none
rules:
  - id: ssh
    block: "~/.ssh/**"
    except: "~/.ssh/known_hosts"
    locked: true
  - id: env
    block: "**/.env"
    actions: [read]
  - id: pem
    warn: "**/*.pem"
  - id: meta
    block: { cidr: "169.254.0.0/16", port: 80 }
  - id: regex
    block: "re:/proc/\\d+/environ"
"#;

    #[test]
    fn list_rows_and_table() {
        let s = set(RULES);
        let rows = list_rows(&s);
        assert_eq!(rows.len(), 5);
        assert_eq!(
            rows[0],
            ListRow {
                id: "ssh".into(),
                mode: "block",
                source: "t.yaml".into(),
                locked: true,
                layers: vec!["kernel", "userspace"],
            }
        );
        assert_eq!(rows[2].layers, ["userspace"]);
        let table = render_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "ID     MODE   SOURCE  LOCKED  LAYERS");
        assert_eq!(lines[1], "ssh    block  t.yaml  yes     kernel+userspace");
        assert_eq!(lines[3], "pem    warn   t.yaml  no      userspace");
        let json = serde_json::to_value(&rows).unwrap();
        assert_eq!(
            json[0]["layers"],
            serde_json::json!(["kernel", "userspace"])
        );
    }

    #[test]
    fn explain_says_which_allowed_hosts_the_kernel_cannot_match_by_name() {
        let s = set("version: 1\nbuiltin: none\nrules:\n  - id: egress\n    block: { host: \"*\" }\n    except: [10.0.0.0/8, { host: pypi.org, port: 443 }]\n");
        let e = explain(&s, s.by_id("egress").unwrap());
        let k = e.kernel.as_ref().unwrap();
        assert_eq!(k.matches[0].value, "::/0");
        assert_eq!(k.exceptions.len(), 1, "{k:?}");
        assert_eq!(k.exceptions[0].value, "10.0.0.0/8");
        let text = render_explanation(&e);
        assert!(
            text.contains("kernel exception address block 10.0.0.0/8 (any port)"),
            "{text}"
        );
        assert!(
            text.contains("note: allowed host `pypi.org` did not resolve: it is allowed by name in userspace only"),
            "{text}"
        );
    }

    #[test]
    fn explain_says_what_a_server_name_check_does() {
        let s = set("version: 1\nbuiltin: none\nrules:\n  - id: web\n    block: { host: \"*\", port: 443 }\n    except: [github.com]\n    tls: sni\n  - id: plain\n    block: { host: \"*\", port: 443 }\n    except: [github.com]\n");
        let text = render_explanation(&explain(&s, s.by_id("web").unwrap()));
        assert!(
            text.contains("note: tls: sni: a session's TCP connects to ports 443 and 80"),
            "{text}"
        );
        let text = render_explanation(&explain(&s, s.by_id("plain").unwrap()));
        assert!(!text.contains("tls: sni"), "{text}");
    }

    #[test]
    fn explain_says_how_the_kernel_refuses_a_blocked_name() {
        let s = set("version: 1\nbuiltin: none\nrules:\n  - id: no-paste\n    block: { host: \"*.pastebin.com\" }\n");
        let e = explain(&s, s.by_id("no-paste").unwrap());
        let k = e.kernel.as_ref().unwrap();
        assert!(k.matches.is_empty(), "{k:?}");
        let text = render_explanation(&e);
        assert!(
            text.contains("note: host `*.pastebin.com` has no fixed address: the kernel refuses only the addresses a session's resolver hands out for it"),
            "{text}"
        );
    }

    #[test]
    fn explain_kernel_forms_and_reasons() {
        let s = set(RULES);
        let ex = |id: &str| explain(&s, s.by_id(id).unwrap());
        let ssh = ex("ssh");
        let k = ssh.kernel.as_ref().unwrap();
        assert_eq!(k.ops, ["read", "write", "execute", "delete", "network"]);
        assert!(k.always_on);
        assert_eq!(
            k.matches[0],
            FormInfo {
                kind: "directory prefix",
                value: "/home/a/.ssh/".into(),
                port: None
            }
        );
        assert_eq!(k.exceptions[0].kind, "exact path");
        assert_eq!(k.exceptions[0].value, "/home/a/.ssh/known_hosts");
        let text = render_explanation(&ssh);
        assert!(
            text.contains("kernel matches directory prefix `/home/a/.ssh/`"),
            "{text}"
        );
        assert!(text.contains("kernel exception exact path"), "{text}");

        let env = ex("env");
        assert_eq!(env.kernel.as_ref().unwrap().ops, ["read"]);
        assert_eq!(env.kernel.as_ref().unwrap().matches[0].kind, "basename");

        let meta = ex("meta");
        let m = &meta.kernel.as_ref().unwrap().matches[0];
        assert_eq!(
            (m.kind, m.value.as_str(), m.port),
            ("address block", "169.254.0.0/16", Some(80))
        );
        assert!(render_explanation(&meta).contains("address block 169.254.0.0/16 port 80"));

        let pem = ex("pem");
        assert!(pem.kernel.is_none());
        assert!(pem
            .userspace_reason
            .as_deref()
            .unwrap()
            .contains("mode `warn`"));
        let regex = ex("regex");
        let k = regex
            .kernel
            .as_ref()
            .expect("the path automaton enforces it");
        assert_eq!(
            k.matches,
            [FormInfo {
                kind: "path automaton",
                value: "re:/proc/\\d+/environ".into(),
                port: None
            }]
        );
        let states = k.automaton_states.expect("states shown");
        assert!(states > 2, "{states}");
        let text = render_explanation(&regex);
        assert!(
            text.contains("kernel matches path automaton `re:/proc/\\d+/environ`")
                && text.contains(&format!("kernel: path automata, {states} states in all")),
            "{text}"
        );
        let json = serde_json::to_value(&regex).unwrap();
        assert_eq!(json["kernel"]["automaton_states"], states);
        assert_eq!(
            (json["line"].clone(), json["column"].clone()),
            (15.into(), 5.into())
        );
        assert!(ssh.kernel.as_ref().unwrap().automaton_states.is_none());
        assert!(ssh.kernel.as_ref().unwrap().approval.is_none());
        assert!(!render_explanation(&ssh).contains("approval"));
    }

    #[test]
    fn explain_says_which_files_a_hold_rule_holds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let s = set(&format!(
            "version: 1\nbuiltin: none\nrules:\n  - id: drafts\n    approve: \"{}/*.txt\"\n    hold: true\n  - id: plain\n    approve: \"/srv/x/**\"\n",
            dir.path().display()
        ));
        let e = explain(&s, s.by_id("drafts").unwrap());
        assert_eq!(e.layers, ["kernel", "fanotify", "userspace"]);
        let a = dir.path().join("a.txt").display().to_string();
        assert_eq!(e.held, Some(vec![a.clone()]));
        let text = render_explanation(&e);
        assert!(
            text.contains("held by fanotify: opens of 1 file(s)"),
            "{text}"
        );
        assert!(text.contains(&format!("holds {a}")), "{text}");
        assert!(text.contains("refused until approved"), "{text}");
        let plain = explain(&s, s.by_id("plain").unwrap());
        assert_eq!(
            (plain.layers, plain.held),
            (vec!["kernel", "userspace"], None)
        );
    }

    #[test]
    fn explain_says_an_approve_rule_is_refused_then_asked_in_the_kernel() {
        let s = set(
            "version: 1\nbuiltin: none\nrules:\n  - id: drafts\n    approve: \"/srv/drafts/**\"\n    actions: [write]\n",
        );
        let e = explain(&s, s.by_id("drafts").unwrap());
        assert_eq!(e.layers, ["kernel", "userspace"]);
        let k = e.kernel.as_ref().expect("in the kernel");
        assert_eq!(k.approval, Some(APPROVE_IN_KERNEL));
        let text = render_explanation(&e);
        assert!(
            text.contains("kernel (rule index 0, refuse, then approval request for write"),
            "{text}"
        );
        assert!(text.contains("files an approval request"), "{text}");
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["kernel"]["approval"], "refuse, then approval request");
        // An address and port the same way.
        let s = set(
            "version: 1\nbuiltin: none\nrules:\n  - id: api\n    approve: { host: \"127.0.0.9\", port: 8080 }\n",
        );
        let e = explain(&s, s.by_id("api").unwrap());
        assert_eq!(e.layers, ["kernel", "userspace"]);
        assert_eq!(
            e.kernel.as_ref().and_then(|k| k.approval),
            Some(APPROVE_IN_KERNEL)
        );
        assert!(
            render_explanation(&e).contains("address and port"),
            "{}",
            render_explanation(&e)
        );
    }

    #[test]
    fn network_targets() {
        let target = |host: &str, ip: &str, port| NetTarget {
            host: host.into(),
            ips: vec![ip.parse().unwrap()],
            port,
        };
        assert_eq!(
            parse_net_target("10.0.0.1:443"),
            Ok(target("10.0.0.1", "10.0.0.1", Some(443)))
        );
        assert_eq!(
            parse_net_target("[::1]:22"),
            Ok(target("::1", "::1", Some(22)))
        );
        assert_eq!(parse_net_target("::1"), Ok(target("::1", "::1", None)));
        assert!(parse_net_target("localhost:http").is_err());
        // A name that does not resolve is still a target: rules by name decide it.
        assert_eq!(
            parse_net_target("nowhere.invalid:443"),
            Ok(NetTarget {
                host: "nowhere.invalid".into(),
                ips: Vec::new(),
                port: Some(443),
            })
        );
        assert!(parse_net_target("/etc/passwd").is_err());
        let s = set(RULES);
        let ip: IpAddr = "169.254.169.254".parse().unwrap();
        let ids = |m: Vec<&Rule>| m.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(net_matches(&s, &[ip], None)), ["meta"]);
        assert_eq!(ids(net_matches(&s, &[ip], Some(80))), ["meta"]);
        assert!(net_matches(&s, &[ip], Some(443)).is_empty());
    }

    #[test]
    fn names_are_tested_by_name_whether_they_resolve_or_not() {
        let s = set(r#"version: 1
builtin: none
rules:
  - id: paste
    block: { host: "*.pastebin.example" }
  - id: allow-list
    approve: { host: "*" }
    except: [github.example, "*.githubusercontent.example"]
"#);
        let ids = |m: Vec<&Rule>| m.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
        assert_eq!(
            ids(name_matches(&s, "raw.pastebin.example", Some(443))),
            ["paste", "allow-list"]
        );
        assert!(name_matches(&s, "github.example", None).is_empty());
        assert!(name_matches(&s, "objects.githubusercontent.example", Some(443)).is_empty());
        assert_eq!(
            ids(name_matches(&s, "GitHub.example.evil", None)),
            ["allow-list"]
        );
        // `rules test` of a name that does not resolve: rules by name still answer.
        assert_eq!(test(&s, "https://raw.pastebin.example/x", None), 2);
        assert_eq!(test(&s, "github.example:443", None), 0);
    }

    #[test]
    fn kernel_only_rules_are_told_by_their_op_bits() {
        let s = set("version: 1\nbuiltin: none\nrules:\n  - id: outside\n    block: { unix: outside-session }\n  - id: keys\n    block: \"~/.ssh/**\"\n");
        let layers = |id: &str| {
            let e = explain(&s, s.by_id(id).unwrap());
            render_explanation(&e)
                .lines()
                .find(|l| l.trim_start().starts_with("layers:"))
                .unwrap()
                .to_owned()
        };
        assert!(
            layers("outside").ends_with(") only"),
            "{}",
            layers("outside")
        );
        assert!(
            layers("keys").ends_with(") and userspace"),
            "{}",
            layers("keys")
        );
        assert!(kernel_only(op::OUTSIDE));
        assert!(!kernel_only(op::OUTSIDE | op::READ));
        assert!(!kernel_only(op::CHROOT));
    }
}
