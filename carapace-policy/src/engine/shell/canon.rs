//! Canonical command lines: one spelling per meaning, so that command rules match options
//! reliably. Tools accept many spellings of one option — bundled shorts (`-th HOST`), a value
//! attached (`--raw=1`, `-v=/:/h`), an abbreviated long name (`git push --force-with`, `gpg
//! --export-secret-k`), a short alias (`-D` for `--delete --force`), another front end
//! (`kubecolor`, `microk8s kubectl`) — and a regex over the words as written has to guess
//! them all. For the tools the packs speak about, the line is rewritten here the way the
//! tool itself reads it:
//!
//! - short options split, each replaced by its long name where it has one, a value as the
//!   next word (`-th github.com` → `--show-token --hostname github.com`);
//! - `--name=value` split, a boolean written out dropped or kept (`--raw=1` → `--raw`,
//!   `--raw=false` → nothing);
//! - unique prefixes expanded for tools that accept them (git, gpg, GNU coreutils);
//! - git: global options dropped, `-c alias.NAME=…` and the config that changes what a
//!   command does applied, and the line written `git VERB OPTIONS -- OPERANDS`, so that text
//!   in a message (`git commit -m 'never git push --force'`) is never read as a command; a
//!   dry run gets no canonical line (it does nothing).
//!
//! The canonical line is recorded next to the line as written; rules may match either.
mod specs;

pub(crate) use crate::engine::invocation::{Arg, Invocation};
#[cfg(test)]
pub(crate) use specs::valued_spellings;
pub(super) use specs::GIT_GLOBAL_VALUED;
use specs::{Spec, PASS_VERBS};

/// The canonical line of `base args…`, for the tools the specs know (others: `None`, and the
/// line as written is all there is).
pub(super) fn line(base: &str, args: &[String]) -> Option<String> {
    let (tool, args) = front_end(base, args);
    if tool == "git" {
        let (verb, parsed) = git(&GitLine::read(args))?;
        let mut words = vec!["git".to_owned(), verb];
        words.extend(parsed.options());
        words.push("--".to_owned());
        words.extend(parsed.operands().map(|(w, _)| w.to_owned()));
        return Some(words.join(" "));
    }
    let renamed = tool != base;
    if !renamed && !specs::knows(tool) {
        return None;
    }
    let spec = specs::find(tool, args.iter().find(|a| !a.starts_with('-')));
    let mut words = vec![tool.to_owned()];
    words.extend(implied_verb(tool, args).map(str::to_owned));
    words.extend(parse_args(args, spec).in_order());
    let line = words.join(" ");
    // Kubernetes matches resource types in any case (`kubectl get SECRETS`, `Secret/db`).
    if matches!(tool, "kubectl" | "oc") {
        return Some(line.to_ascii_lowercase());
    }
    Some(line)
}

/// The program a command runs, as the tool is known (`kubecolor` → `kubectl`, `microk8s
/// kubectl` → `kubectl`, `gpg2` → `gpg`): what structured rules are indexed by.
pub(crate) fn program<'a>(base: &'a str, args: &'a [String]) -> &'a str {
    front_end(base, args).0
}

/// Where the command a wrapper runs starts in `args` (`systemd-run -p X --uni=u CMD…`),
/// read by the wrapper's spec as the wrapper's getopt reads it: abbreviated long names,
/// shorts bundled, values attached or in the next word, options ending at the first
/// operand. `None` when no spec knows the wrapper. The spec is the one list of its
/// value-taking options, so the wrapper reading and the command rules cannot drift apart.
pub(super) fn wrapped_at(tool: &str, args: &[String]) -> Option<usize> {
    let spec = specs::find(tool, None)?;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        if arg == "--" {
            return Some(i);
        }
        if let Some(long) = arg.strip_prefix("--") {
            if !long.contains('=') && spec.valued(&spec.long_name(long)) {
                i += 1;
            }
        } else if arg.len() > 1 && arg.starts_with('-') {
            // The first short that takes a value takes the rest of the word, or the next.
            if let Some((j, c)) = arg
                .char_indices()
                .skip(1)
                .find(|&(_, c)| spec.valued(&spec.short_name(c)))
            {
                if j + c.len_utf8() == arg.len() {
                    i += 1;
                }
            }
        } else {
            return Some(i - 1);
        }
    }
    Some(args.len())
}

/// One simple command as the tool reads it: for structured command rules (`run:`). Every
/// program gets one; options of the tools the specs know are spelled one way (long names,
/// values split off, unique prefixes expanded), others as written with `--x=v` split. A git
/// dry run keeps only the `-c` config given for it (its verb does nothing).
pub(crate) fn invocation(base: &str, args: &[String]) -> Option<Invocation> {
    let (tool, rest) = front_end(base, args);
    if tool == "git" {
        return git_invocation(rest);
    }
    let spec = specs::find(tool, rest.iter().find(|a| !a.starts_with('-')));
    let mut out: Vec<Arg> = implied_verb(tool, rest)
        .map(|v| Arg::Operand {
            word: v.to_owned(),
            after_option: false,
        })
        .into_iter()
        .collect();
    for arg in parse_args(rest, spec).0 {
        match arg {
            // `-json=true` (Go's flag package): one option and its value.
            Arg::Option { name, value: None }
                if spec.is_none() && !name.starts_with("--") && name.contains('=') =>
            {
                let (n, v) = name.split_once('=').unwrap_or((&name, ""));
                let value = match boolean(v) {
                    Some(true) => None,
                    Some(false) => continue,
                    None => Some(v.to_owned()),
                };
                out.push(Arg::Option {
                    name: n.to_owned(),
                    value,
                });
            }
            other => out.push(other),
        }
    }
    Some(Invocation {
        program: tool.to_owned(),
        args: out,
    })
}

/// `git …` as git reads it: the verb, its options and operands (none for a dry run), and
/// the `-c KEY=VALUE` given before it (as `-c` options, the key in lower case: git ignores
/// its case). `git config set|get|unset|list` (git 2.46) is written as the options the
/// older form spells (`git config --get KEY`), so that rules name one form.
fn git_invocation(args: &[String]) -> Option<Invocation> {
    let line = GitLine::read(args);
    let mut out: Vec<Arg> = line
        .config
        .iter()
        .map(|c| Arg::Option {
            name: "-c".to_owned(),
            value: Some(match c.split_once('=') {
                Some((k, v)) => format!("{}={v}", k.to_ascii_lowercase()),
                // `-c KEY` alone sets KEY to true (`core.hooksPath` to the directory `true`).
                None => format!("{}=true", c.to_ascii_lowercase()),
            }),
        })
        .collect();
    // A dry run does nothing but what the config given for it does (hooks run).
    let Some((verb, mut parsed)) = git(&line) else {
        return (!out.is_empty()).then(|| Invocation {
            program: "git".to_owned(),
            args: out,
        });
    };
    if verb == "config" {
        let first = parsed
            .0
            .iter()
            .position(|a| matches!(a, Arg::Operand { .. } | Arg::End));
        let sub = first.and_then(|i| match parsed.0.get(i) {
            Some(Arg::Operand { word, .. }) => Some((i, word.clone())),
            _ => None,
        });
        let option = match sub.as_ref().map(|(_, w)| w.as_str()) {
            Some("set") => Some(None),
            Some("get") => Some(Some("--get")),
            Some("unset") => Some(Some("--unset")),
            Some("list") => Some(Some("--list")),
            _ => None,
        };
        if let (Some((i, _)), Some(option)) = (sub, option) {
            parsed.0.remove(i);
            if let Some(name) = option {
                parsed.0.insert(
                    0,
                    Arg::Option {
                        name: name.to_owned(),
                        value: None,
                    },
                );
            }
        }
    }
    out.push(Arg::Operand {
        word: verb,
        after_option: false,
    });
    out.extend(parsed.0);
    Some(Invocation {
        program: "git".to_owned(),
        args: out,
    })
}

/// The name `program` (whose subcommand is `verb`) shows the matcher for the option written
/// `option`, when that is another (`-f` → `--force`, `--force-with` → `--force-with-lease`).
pub(crate) fn option_name(program: &str, verb: Option<&str>, option: &str) -> Option<String> {
    let verb = verb.map(str::to_owned);
    let spec = specs::find(program, verb.as_ref())?;
    let name = if let Some(long) = option.strip_prefix("--") {
        spec.long_name(long)
    } else {
        let mut chars = option.chars().skip(1);
        match (chars.next(), chars.next()) {
            (Some(c), None) => spec.short_name(c),
            _ => return None,
        }
    };
    (name != option).then_some(name)
}

/// Other names and front ends of the tools the packs speak about.
fn front_end<'a>(base: &'a str, args: &'a [String]) -> (&'a str, &'a [String]) {
    match (base, args.split_first()) {
        ("microk8s" | "k3s", Some((first, rest)))
            if matches!(first.as_str(), "kubectl" | "ctr" | "crictl") =>
        {
            (first.as_str(), rest)
        }
        ("microk8s.kubectl" | "kubecolor", _) => ("kubectl", args),
        ("gpg2", _) => ("gpg", args),
        // Release tracks run the same commands: `gcloud beta auth print-access-token`.
        ("gcloud", Some((first, rest))) if matches!(first.as_str(), "alpha" | "beta") => {
            ("gcloud", rest)
        }
        _ => (base, args),
    }
}

/// The subcommand a tool runs when the first word names none: `pass NAME` is `pass show
/// NAME`.
fn implied_verb(tool: &str, args: &[String]) -> Option<&'static str> {
    let first = args.iter().find(|a| !a.starts_with('-'))?;
    (matches!(tool, "pass" | "gopass" | "passage") && !PASS_VERBS.contains(&first.as_str()))
        .then_some("show")
}

/// The words of one command as the tool reads them, in the order written.
#[derive(Default)]
struct Parsed(Vec<Arg>);

impl Parsed {
    /// Each option with its value as the next word.
    fn options(&self) -> Vec<String> {
        let mut out = Vec::new();
        for a in &self.0 {
            if let Arg::Option { name, value } = a {
                out.push(name.clone());
                out.extend(value.clone());
            }
        }
        out
    }

    /// Operands, with whether each follows an option that may take it as its value.
    fn operands(&self) -> impl Iterator<Item = (&str, bool)> {
        self.0.iter().filter_map(|a| match a {
            Arg::Operand { word, after_option } => Some((word.as_str(), *after_option)),
            _ => None,
        })
    }

    /// Options and operands in the order written, `--` where it was.
    fn in_order(&self) -> Vec<String> {
        let mut out = Vec::new();
        for a in &self.0 {
            match a {
                Arg::Option { name, value } => {
                    out.push(name.clone());
                    out.extend(value.clone());
                }
                Arg::Operand { word, .. } => out.push(word.clone()),
                Arg::End => out.push("--".to_owned()),
            }
        }
        out
    }
}

/// Rewrites `args` as `spec` says the tool reads them (or by the generic rules alone).
fn parse_args(args: &[String], spec: Option<&Spec>) -> Parsed {
    let mut out = Parsed::default();
    // Whether the last word was an option that may take the next word as its value
    // (neither the spec nor an attached value settles it).
    let mut open = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        if arg == "--" {
            out.0.push(Arg::End);
            out.0.extend(
                args.get(i..)
                    .unwrap_or_default()
                    .iter()
                    .filter(|a| !a.is_empty())
                    .map(|a| Arg::Operand {
                        word: a.clone(),
                        after_option: false,
                    }),
            );
            break;
        }
        let before = out.0.len();
        if let Some(long) = arg.strip_prefix("--") {
            i += long_option(long, args.get(i), spec, &mut out.0);
        } else if arg.len() > 1 && arg.starts_with('-') {
            i += short_cluster(arg, args.get(i), spec, &mut out.0);
        } else if !arg.is_empty() {
            // An empty word is a value the analysis could not know (`"$(…)"`): no operand
            // the rules could name.
            out.0.push(Arg::Operand {
                word: arg.clone(),
                after_option: open,
            });
            open = false;
            continue;
        }
        // `--raw=1`: the option had its say in its own word.
        open = !arg.contains('=')
            && match out.0.get(before..) {
                Some([.., Arg::Option { name, value: None }]) => {
                    !spec.is_some_and(|s| s.settles(name))
                }
                _ => false,
            };
    }
    out
}

/// `--name[=value]`: pushes the canonical option; returns how many following words it took.
fn long_option(
    long: &str,
    next: Option<&String>,
    spec: Option<&Spec>,
    out: &mut Vec<Arg>,
) -> usize {
    let (name, value) = match long.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (long, None),
    };
    let name = spec.map_or_else(|| format!("--{name}"), |s| s.long_name(name));
    let valued = spec.is_some_and(|s| s.valued(&name));
    let (value, took) = match value {
        Some(v) if !valued => match boolean(v) {
            Some(true) => (None, 0),
            Some(false) => return 0,
            None => (Some(v.to_owned()), 0),
        },
        Some(v) => (Some(v.to_owned()), 0),
        None if valued => match next {
            Some(v) => (Some(v.clone()), 1),
            None => (None, 0),
        },
        None => (None, 0),
    };
    out.push(Arg::Option { name, value });
    took
}

/// `-abc`: each short option in turn, the first that takes a value taking the rest of the
/// word (or the next word). Returns how many following words it took.
fn short_cluster(
    arg: &str,
    next: Option<&String>,
    spec: Option<&Spec>,
    out: &mut Vec<Arg>,
) -> usize {
    let Some(spec) = spec else {
        out.push(Arg::Option {
            name: arg.to_owned(),
            value: None,
        });
        return 0;
    };
    for (j, c) in arg.char_indices().skip(1) {
        let name = spec.short_name(c);
        let valued = spec.valued(&name);
        // `-D` stands for two options: `--delete --force`.
        out.extend(name.split_whitespace().map(|n| Arg::Option {
            name: n.to_owned(),
            value: None,
        }));
        if valued {
            // `-v=/:/h` is `-v /:/h` to tools built on Go's pflag.
            let attached = arg.get(j + c.len_utf8()..).unwrap_or("");
            let attached = attached.strip_prefix('=').unwrap_or(attached);
            let (value, took) = if !attached.is_empty() {
                (Some(attached.to_owned()), 0)
            } else if let Some(v) = next {
                (Some(v.clone()), 1)
            } else {
                (None, 0)
            };
            if let Some(Arg::Option { value: slot, .. }) = out.last_mut() {
                *slot = value;
            }
            return took;
        }
    }
    0
}

/// A boolean option's value as tools accept it (`--raw=1`, `--show-token=true`, Go's `t`).
fn boolean(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "t" | "1" | "yes" | "on" => Some(true),
        "false" | "f" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// `git [GLOBAL…] VERB ARGS…` with its global options read (once, for both the line and
/// the invocation): the `-c` config given, as written, and the verb with what follows.
struct GitLine<'a> {
    config: Vec<&'a str>,
    rest: &'a [String],
}

impl<'a> GitLine<'a> {
    fn read(args: &'a [String]) -> Self {
        let globals = super::args::parse(args, GIT_GLOBAL_VALUED, true);
        Self {
            config: globals.values(&["-c"]),
            rest: globals.rest,
        }
    }
}

/// `git [GLOBAL…] VERB ARGS…` → the verb and its arguments as git reads them (global
/// options dropped, an alias expanded, `-c` config applied), or nothing for a dry run.
fn git(line: &GitLine<'_>) -> Option<(String, Parsed)> {
    let config: Vec<(String, &str)> = line
        .config
        .iter()
        .filter_map(|c| c.split_once('='))
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    let (verb, rest) = line.rest.split_first()?;
    // `-c alias.p='push --force' p`: git runs the alias's words (a `!` alias is a shell
    // command, walked as one by the command table).
    let expanded: Vec<String>;
    // Config keys are case-insensitive: `git P` runs `alias.p`.
    let alias = config.iter().find(|(k, _)| {
        k.strip_prefix("alias.")
            .is_some_and(|name| name.eq_ignore_ascii_case(verb))
    });
    let (verb, rest) = match alias {
        Some((_, value)) if !value.starts_with('!') => {
            expanded = value
                .split_whitespace()
                .map(str::to_owned)
                .chain(rest.iter().cloned())
                .collect();
            let (v, r) = expanded.split_first()?;
            (v.as_str(), r)
        }
        _ => (verb.as_str(), rest),
    };
    let spec = specs::find("git", Some(&verb.to_owned()));
    let mut parsed = parse_args(rest, spec);
    if spec.is_some_and(|s| s.is_dry_run(&parsed.options())) {
        return None;
    }
    apply_git_config(verb, &config, &mut parsed);
    Some((verb.to_owned(), parsed))
}

/// Config given with `-c` that changes what the command does, written as the option or
/// operand it stands for.
fn apply_git_config(verb: &str, config: &[(String, &str)], c: &mut Parsed) {
    let option = |name: &str, value: Option<&str>| Arg::Option {
        name: name.to_owned(),
        value: value.map(str::to_owned),
    };
    for (key, value) in config {
        let remote_key = key
            .strip_prefix("remote.")
            .and_then(|k| k.rsplit_once('.'))
            .map(|(_, last)| last);
        match (verb, remote_key, key.as_str()) {
            ("push", Some("mirror"), _) if boolean(value) == Some(true) => {
                c.0.push(option("--mirror", None));
            }
            // The configured refspec is used when the command line names none.
            ("push", Some("push"), _) if c.operands().count() <= 1 => {
                c.0.push(Arg::Operand {
                    word: (*value).to_owned(),
                    after_option: false,
                });
            }
            // Git's own safety taken away: `clean` without `--force` cleans.
            ("clean", _, "clean.requireforce") if boolean(value) == Some(false) => {
                c.0.push(option("--force", None));
            }
            // Reflogs expired by `gc` are history deleted as a prune's objects are.
            ("gc", _, "gc.pruneexpire" | "gc.reflogexpire" | "gc.reflogexpireunreachable") => {
                c.0.push(option("--prune", Some(value)));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::line;

    fn canon(cmd: &str) -> Option<String> {
        let words: Vec<String> = cmd.split(' ').map(str::to_owned).collect();
        let (base, args) = words.split_first()?;
        line(base, args)
    }

    #[test]
    fn short_clusters_split_into_long_names_with_their_values() {
        assert_eq!(
            canon("gh auth status -th github.com").as_deref(),
            Some("gh auth status --show-token --hostname github.com")
        );
        assert_eq!(
            canon("chmod -vR 777 /").as_deref(),
            Some("chmod --verbose --recursive 777 /")
        );
        assert_eq!(
            canon("security find-generic-password -ws github").as_deref(),
            Some("security find-generic-password -w -s github")
        );
    }

    #[test]
    fn booleans_written_out_are_kept_or_dropped() {
        assert_eq!(
            canon("kubectl config view --raw=1").as_deref(),
            Some("kubectl config view --raw")
        );
        assert_eq!(
            canon("kubectl config view --raw=false").as_deref(),
            Some("kubectl config view")
        );
    }

    #[test]
    fn unique_prefixes_expand_where_the_tool_accepts_them() {
        assert_eq!(
            canon("gpg --export-secret-k ABCD").as_deref(),
            Some("gpg --export-secret-keys ABCD")
        );
        // Ambiguous: `--export-secret-keys` or `--export-secret-subkeys`? Neither here.
        assert_eq!(
            canon("gpg --export-s ABCD").as_deref(),
            Some("gpg --export-s ABCD")
        );
        assert_eq!(
            canon("git push --force-with origin main").as_deref(),
            Some("git push --force-with-lease -- origin main")
        );
    }

    #[test]
    fn git_lines_name_the_verb_first_and_drop_dry_runs() {
        assert_eq!(
            canon("git -C /srv/r -c alias.p=push --no-pager p -fu origin").as_deref(),
            Some("git push --force --set-upstream -- origin")
        );
        assert_eq!(
            canon("git branch -D old").as_deref(),
            Some("git branch --delete --force -- old")
        );
        assert_eq!(canon("git push -nf origin main"), None);
        assert_eq!(
            canon("git -c remote.origin.mirror=true push origin").as_deref(),
            Some("git push --mirror -- origin")
        );
    }

    #[test]
    fn front_ends_and_implied_verbs() {
        assert_eq!(
            canon("microk8s kubectl config view --raw").as_deref(),
            Some("kubectl config view --raw")
        );
        assert_eq!(canon("pass github").as_deref(), Some("pass show github"));
        assert_eq!(canon("pass ls").as_deref(), Some("pass ls"));
        assert_eq!(canon("ls -la"), None);
    }
}
