//! Whether a command that stops services or signals processes can reach Carapace's daemon.
//! Each tool reads its target its own way — pkill and pgrep an extended regex searched in
//! the process name (with `-f`, in the whole command line), killall a name (with `-r`, a
//! regex), systemctl a unit glob, pidof a program name — so `pkill -f 'c.rapaced'` names
//! the daemon and `pkill -f caramel` does not, though both start with `cara`.
//!
//! When a target can be the daemon, the line is recorded once more with the daemon's own
//! name in its place (`pkill carapaced`, `systemctl stop carapaced`): that is what the
//! self-protection rule matches. pgrep and pidof print the daemon's name for the PID they
//! would find, so that `kill $(pgrep c.rapaced)` reads `kill carapaced`.
use regex::RegexBuilder;

use super::args;
use crate::rules::compile::dfa::Source;
use crate::rules::intersect::{meet, Lang};

/// The daemon's process name, and the name the rule looks for.
pub(super) const DAEMON: &str = "carapaced";

/// Unit names Carapace is installed under.
const UNITS: &[&str] = &[
    "carapaced",
    "carapaced.service",
    "carapace",
    "carapace.service",
];

/// The daemon's command line as `ps -o args` shows it (it takes no arguments).
const COMMAND_LINE: &str = r"(?:/usr(?:/local)?/s?bin/)?carapaced";

/// A pattern larger than this compiles to no regex and is taken to name the daemon.
const REGEX_SIZE: usize = 1 << 20;

const PGREP_VALUED: &[&str] = &[
    "-d",
    "-g",
    "-G",
    "-P",
    "-s",
    "-t",
    "-u",
    "-U",
    "-F",
    "--delimiter",
    "--signal",
    "--euid",
    "--uid",
    "--pgroup",
    "--group",
    "--parent",
    "--session",
    "--terminal",
    "--pidfile",
    "--ns",
    "--nslist",
];

const KILLALL_VALUED: &[&str] = &[
    "-s",
    "-u",
    "-o",
    "-y",
    "-n",
    "--signal",
    "--user",
    "--older-than",
    "--younger-than",
    "--ns",
];

const SYSTEMCTL_VALUED: &[&str] = &[
    "-t",
    "-p",
    "-H",
    "-M",
    "-s",
    "-n",
    "-o",
    "--type",
    "--property",
    "--host",
    "--machine",
    "--root",
    "--signal",
    "--kill-whom",
    "--job-mode",
    "--lines",
    "--output",
    "--state",
];

/// systemctl verbs that stop a running unit or keep it from starting again.
const STOPPING: &[&str] = &[
    "stop",
    "disable",
    "mask",
    "kill",
    "restart",
    "freeze",
    "try-restart",
    "reload-or-restart",
    "condrestart",
    "force-reload",
];

/// The line once more with the daemon's name as the target, when `tool args…` may stop or
/// signal it.
pub(super) fn line(tool: &str, args: &[String]) -> Option<String> {
    match tool {
        "pkill" | "killall" => reaches(tool, args).then(|| format!("{tool} {DAEMON}")),
        "systemctl" => systemctl(args),
        "service" => {
            let o = args::parse(args, &[], false);
            match o.operands.as_slice() {
                [unit, verb, ..] if unit_is_daemon(unit) && STOPPING.contains(verb) => {
                    Some(format!("service {DAEMON} {verb}"))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether `pgrep`/`pidof`/`pkill`/`killall args…` selects the daemon's process.
pub(super) fn reaches(tool: &str, args: &[String]) -> bool {
    match tool {
        "pkill" | "pgrep" => pgrep(args),
        "killall" => killall(args),
        "pidof" => args::parse(args, &["-o", "--omit-pid"], false)
            .operands
            .iter()
            .any(|name| program(name) == DAEMON),
        _ => false,
    }
}

fn pgrep(args: &[String]) -> bool {
    let o = args::parse(args, PGREP_VALUED, false);
    let full = o.has(&["-f", "--full"]);
    let exact = o.has(&["-x", "--exact"]);
    let icase = o.has(&["-i", "--ignore-case"]);
    let inverse = o.has(&["-v", "--inverse"]);
    let Some(pattern) = o.operands.first() else {
        // No pattern: processes chosen by user, group, parent… the daemon may be among them.
        return true;
    };
    let named = if full {
        command_line_meets(pattern, exact, icase)
    } else {
        regex_matches(pattern, exact, icase, DAEMON)
    };
    if inverse {
        // `-v` selects every process the pattern does not: the daemon unless the pattern
        // is sure to match its name (a command line's is not known well enough to say).
        full || !named
    } else {
        named
    }
}

fn killall(args: &[String]) -> bool {
    let o = args::parse(args, KILLALL_VALUED, false);
    let regex = o.has(&["-r", "--regexp"]);
    let icase = o.has(&["-I", "--ignore-case"]);
    if o.operands.is_empty() {
        // `killall -u root`: every process of the user.
        return o.has(&["-u", "--user"]);
    }
    o.operands.iter().any(|name| {
        if regex {
            regex_matches(name, false, icase, DAEMON)
        } else if icase {
            program(name).eq_ignore_ascii_case(DAEMON)
        } else {
            program(name) == DAEMON
        }
    })
}

fn systemctl(args: &[String]) -> Option<String> {
    let o = args::parse(args, SYSTEMCTL_VALUED, false);
    let (verb, units) = o.operands.split_first()?;
    if !STOPPING.contains(verb) {
        return None;
    }
    units
        .iter()
        .any(|u| unit_is_daemon(u))
        .then(|| format!("systemctl {verb} {DAEMON}"))
}

/// A unit operand (a glob, as systemctl reads one, or a unit file's path) that can name
/// the daemon's unit.
fn unit_is_daemon(unit: &str) -> bool {
    let unit = unit.rsplit('/').next().unwrap_or(unit);
    UNITS
        .iter()
        .any(|name| super::param::glob_matches(unit, name))
}

/// A program name as killall and pidof take it: a path names its file.
fn program(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Whether `pattern` (an extended regex) finds a match in `text`; a pattern that does not
/// compile here may still mean something to the tool, so it is taken to match.
fn regex_matches(pattern: &str, exact: bool, icase: bool, text: &str) -> bool {
    let pattern = if exact {
        format!("^(?:{pattern})$")
    } else {
        pattern.to_owned()
    };
    RegexBuilder::new(&pattern)
        .case_insensitive(icase)
        .size_limit(REGEX_SIZE)
        .build()
        .map_or(true, |re| re.is_match(text))
}

/// Whether `pattern` can match in (with `exact`, the whole of) the daemon's command line.
fn command_line_meets(pattern: &str, exact: bool, icase: bool) -> bool {
    let flags = if icase { "(?i)" } else { "" };
    let source = if exact {
        Source::Glob(format!("{flags}(?:{pattern})"))
    } else {
        Source::Search(format!("{flags}(?:{pattern})"))
    };
    match (
        Lang::of(&source),
        Lang::of(&Source::Glob(COMMAND_LINE.to_owned())),
    ) {
        (Some(a), Some(b)) => meet(&a, &b),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn patterns_that_can_name_the_daemon() {
        for (tool, args) in [
            ("pkill", "carap"),
            ("pkill", "-f carapac"),
            ("pkill", "-f c.rapaced"),
            ("pkill", "^c[a-z]+d$"),
            ("pkill", "ca.*ed"),
            ("pkill", "-f ^cara"),
            ("pkill", "-f /usr/local/bin/carapaced"),
            ("pkill", "-i CARAPACED"),
            ("pkill", "-v caramel"),
            ("pkill", "-u root"),
            ("pkill", "--signal KILL carapaced"),
            ("killall", "carapaced"),
            ("killall", "-s 9 /usr/local/bin/carapaced"),
            ("killall", "-r ^cara"),
            ("killall", "-I CARAPACED"),
            ("pgrep", "-x carapaced"),
            ("pidof", "carapaced"),
        ] {
            assert!(reaches(tool, &words(args)), "{tool} {args}");
        }
    }

    #[test]
    fn patterns_that_cannot() {
        for (tool, args) in [
            ("pkill", "-f caramel"),
            ("pkill", "caramel"),
            ("pkill", "-f cargo run"),
            ("pkill", "-x carapace"),
            ("pkill", "node"),
            ("killall", "carafe"),
            ("killall", "carapace"),
            ("killall", "-s TERM node"),
            ("pidof", "caramel"),
        ] {
            assert!(!reaches(tool, &words(args)), "{tool} {args}");
        }
    }

    #[test]
    fn units() {
        let stop = |args: &str| systemctl(&words(args));
        assert!(stop("stop carapaced").is_some());
        assert!(stop("--user restart carapaced.service").is_some());
        assert!(stop("stop cara*").is_some());
        assert!(stop("kill -s KILL carapace").is_some());
        assert!(stop("stop caramel").is_none());
        assert!(stop("status carapaced").is_none());
        assert!(line("service", &words("carapace stop")).is_some());
        assert!(line("service", &words("caramel stop")).is_none());
    }
}
