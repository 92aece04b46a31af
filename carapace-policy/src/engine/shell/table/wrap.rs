//! Wrappers and runners: commands whose arguments are a command or code that runs
//! (`sudo`, `env`, `xargs`, `sh -c`, `find`).

use super::super::super::normalize;
use super::super::super::operation::Context;
use super::super::args;
use super::super::commands::{environment_feed, program_paths, wrapper_valued};
use super::super::flow::{self, Reach};
use super::super::items::xargs_items;
use super::super::names::{family, is_interpreter, is_shell, unescape, valid_name};
use super::super::vars::{set_var, unset_var};
use super::super::walk::{Feed, Lookup, Walker};
use super::Call;
use crate::rules::Action;

/// `sudo`: the rest of the line is the command that runs (`-i`/`-s` alone: a shell on
/// stdin; `-e`: files edited).
pub(super) fn sudo(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    let o = args::parse(
        args,
        &[
            "-u",
            "-g",
            "-U",
            "-C",
            "-D",
            "-h",
            "-p",
            "-r",
            "-t",
            "-T",
            "--user",
            "--group",
            "--chdir",
            "--prompt",
            "--role",
            "--type",
            "--host",
            "--close-from",
            "--other-user",
            "--command-timeout",
        ],
        true,
    );
    // `-D DIR`/`--chdir=DIR`: the command runs there.
    let mut moved;
    let ctx = match o
        .value(&["-D", "--chdir"])
        .and_then(|d| normalize::shell_path(d, ctx))
    {
        Some(dir) => {
            moved = ctx.clone();
            moved.cwd = dir;
            &mut moved
        }
        None => ctx,
    };
    if o.rest.is_empty() && o.has(&["-i", "-s", "--login", "--shell"]) {
        return w.shell_stdin(&stdin, ctx, depth);
    }
    if o.has(&["-e", "--edit"]) {
        for f in o.rest {
            w.path_op(Action::Read, f, ctx, None);
            w.path_op(Action::Write, f, ctx, None);
        }
        return Feed::default();
    }
    // `sudo VAR=VALUE CMD…`: the command's environment, as env sets it.
    if o.rest.first().and_then(|a| assignment(a)).is_none() {
        return w.wrapped(o.rest, ctx, depth, stdin);
    }
    let mut sub = ctx.clone();
    let assigned = assign_leading(w, o.rest, &mut sub, depth);
    let feed = w.wrapped(&o.rest[assigned..], &mut sub, depth, stdin);
    ctx.cwd = sub.cwd;
    feed
}

/// `NAME=VALUE`, split.
fn assignment(word: &str) -> Option<(&str, &str)> {
    word.split_once('=').filter(|(k, _)| valid_name(k))
}

/// Sets the leading assignments of `words` in `sub` (`env A=1 B=2 CMD`, `sudo A=1 CMD`),
/// each value a program may run walked as code (`GIT_SSH_COMMAND=…`); how many there were.
fn assign_leading<S: AsRef<str>>(
    w: &mut Walker<'_>,
    words: &[S],
    sub: &mut Context,
    depth: usize,
) -> usize {
    let mut assigned = 0;
    for (k, v) in words.iter().map_while(|a| assignment(a.as_ref())) {
        w.environment_command(k, v, sub, depth);
        set_var(sub, k, v);
        assigned += 1;
    }
    assigned
}

/// Wrappers that run the rest of the line (`nohup`, `exec`, `strace`, `unshare`…).
pub(super) fn wrapper(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name,
        args,
        depth,
        stdin,
    } = call;
    let valued: &[&str] = match name {
        "exec" => &["-a"],
        "setpriv" | "unshare" | "nsenter" | "xvfb-run" | "ssh-agent" | "cgexec" | "proot" => {
            wrapper_valued(name)
        }
        "strace" | "ltrace" => &[
            "-o", "-e", "-p", "-s", "-u", "-E", "-P", "-a", "-b", "-I", "-S", "-X",
        ],
        _ => &[],
    };
    // `command -v NAME` / `-V` looks a name up and runs nothing; `-v` prints
    // where the program is.
    if name == "command"
        && args
            .iter()
            .take_while(|a| a.starts_with('-') && *a != "--")
            .any(|a| a.contains(['v', 'V']))
    {
        return if args.iter().any(|a| a == "-v") {
            program_paths(args)
        } else {
            Feed::default()
        };
    }
    let o = args::parse(args, valued, true);
    // setarch ARCH CMD…, faketime TIME CMD…, sg GROUP [-c] CMD…
    let o_rest = if let Some(at) = (name == "systemd-run")
        .then(|| super::super::canon::wrapped_at(name, args))
        .flatten()
    {
        // Its options are read by its spec (`canon/specs.rs`), the one list of them.
        args.get(at..).unwrap_or_default()
    } else if matches!(name, "setarch" | "faketime" | "sg") {
        let after = o.rest.get(1..).unwrap_or(&[]);
        if name == "sg" && after.first().is_some_and(|a| a == "-c") {
            let cmd = after.get(1..).unwrap_or(&[]).join(" ");
            return w.script(&cmd, ctx, depth + 1);
        }
        args::parse(after, &[], true).rest
    } else {
        o.rest
    };
    if matches!(name, "strace" | "ltrace") {
        for f in o.values(&["-o"]) {
            w.path_op(Action::Write, f, ctx, None);
        }
    }
    // `command cat` and `builtin cd` skip functions of that name; so does any
    // program a wrapper starts (it looks commands up on PATH).
    if !o_rest.is_empty() {
        w.lookup = Lookup::PastFunctions;
    }
    w.wrapped(o_rest, ctx, depth, stdin)
}

/// Tools whose `run` (or `exec`) subcommand runs the rest of the line as a command.
pub(super) const PROJECT_RUNNERS: &[&str] = &[
    "uv",
    "poetry",
    "pipenv",
    "pdm",
    "hatch",
    "rye",
    "pixi",
    "conda",
    "mamba",
    "micromamba",
    "bundle",
    "npm",
    "pnpm",
    "yarn",
];

/// The subcommand of a [`PROJECT_RUNNERS`] tool that runs a command (`yarn run` and `pnpm
/// run` run package.json scripts, their `exec` a command).
fn project_verb(name: &str) -> &'static str {
    match name {
        "bundle" | "npm" | "pnpm" | "yarn" => "exec",
        _ => "run",
    }
}

/// Where the subcommand is, after the tool's own leading options (`uv -q run`).
fn project_verb_at(name: &str, args: &[String]) -> Option<usize> {
    let at = args.iter().position(|a| !a.starts_with('-'))?;
    (args[at] == project_verb(name)).then_some(at)
}

/// When the entry `project_run` applies.
pub(super) fn when_project_run(call: &Call<'_>) -> bool {
    project_verb_at(call.name, call.args).is_some()
}

/// `uv run [OPTS] CMD…`, `conda run -n ENV CMD…`, `npm exec -c CODE`: the command run.
pub(super) fn project_run(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name,
        args,
        depth,
        stdin,
    } = call;
    let Some(at) = project_verb_at(name, args) else {
        return Feed::default();
    };
    let o = args::parse(
        &args[at + 1..],
        &[
            "--with",
            "--with-editable",
            "--with-requirements",
            "-p",
            "--python",
            "--package",
            "--extra",
            "--group",
            "--env-file",
            "--directory",
            "--project",
            "--index",
            "--index-url",
            "--extra-index-url",
            "-n",
            "--name",
            "--prefix",
            "--cwd",
            "-e",
            "--env",
            "-c",
            "--call",
        ],
        true,
    );
    for code in o.values(&["-c", "--call"]) {
        w.script(code, &mut ctx.clone(), depth + 1);
    }
    w.wrapped(o.rest, ctx, depth, stdin)
}

/// `nice`, `taskset`, `chrt`…: the command they run.
pub(super) fn scheduler(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name,
        args,
        depth,
        stdin,
    } = call;
    let o = args::parse(
        args,
        &[
            "-n",
            "-c",
            "-p",
            "-l",
            "-e",
            "-t",
            "--adjustment",
            "--class",
            "--classdata",
            "--cpu-list",
            "--limit",
        ],
        true,
    );
    let rest = if matches!(name, "taskset" | "chrt") && !o.has(&["-p", "-c"]) {
        o.rest.get(1..).unwrap_or(&[])
    } else {
        o.rest
    };
    w.wrapped(rest, ctx, depth, stdin)
}

/// `watch CMD`: CMD runs.
pub(super) fn watch(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, depth, .. } = call;
    let o = args::parse(
        args,
        &["-n", "-d", "--interval", "-q", "--equexit", "--differences"],
        true,
    );
    let src = o.rest.join(" ");
    w.script(&src, &mut ctx.clone(), depth + 1)
}

/// `env [-i] [-u NAME] [-C DIR] [NAME=VALUE…] [CMD…]`.
pub(super) fn env(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    let o = args::parse(
        args,
        &["-u", "-C", "-S", "--unset", "--chdir", "--split-string"],
        false,
    );
    let mut sub = ctx.clone();
    if o.has(&["-i", "--ignore-environment"]) || o.operands.first() == Some(&"-") {
        sub.env.clear();
    }
    for n in o.values(&["-u", "--unset"]) {
        unset_var(&mut sub, n);
    }
    if let Some(dir) = o.value(&["-C", "--chdir"]) {
        if let Some(p) = normalize::shell_path(dir, &sub) {
            sub.cwd = p;
        }
    }
    if let Some(s) = o.value(&["-S", "--split-string"]) {
        let mut src = s.to_owned();
        for a in &o.operands {
            src.push(' ');
            src.push_str(a);
        }
        return w.script(&src, &mut sub, depth + 1);
    }
    // Assignments come first, then the command; a real env stops parsing options
    // there, which `parse` does not, so find the command among the operands.
    let assigned = assign_leading(w, &o.operands, &mut sub, depth);
    let mut rest: Vec<String> = o.operands[assigned..]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    // Options after the command belong to it: take them from the original list.
    if let Some(pos) = rest.first().and_then(|c| args.iter().position(|a| a == c)) {
        rest = args[pos..].to_vec();
    }
    if rest.is_empty() {
        // No command: env prints the environment.
        return environment_feed();
    }
    w.wrapped(&rest, &mut sub, depth, stdin)
}

/// `xargs CMD`: CMD run with its input as arguments.
pub(super) fn xargs(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    let o = args::parse(
        args,
        &[
            "-I",
            "-n",
            "-P",
            "-L",
            "-d",
            "-E",
            "-a",
            "-s",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-lines",
            "--replace",
            "--eof",
            "--max-chars",
            "--process-slot-var",
        ],
        true,
    );
    // `-a FILE`: the arguments come from FILE, stdin stays the command's.
    let mut stdin = stdin;
    for f in o.values(&["-a", "--arg-file"]) {
        // `-a /dev/stdin`: the arguments are stdin's, as without it.
        if f == "-" || super::super::taint::is_stdin_path(f) {
            continue;
        }
        w.path_op(Action::Read, f, ctx, None);
        let listed = w.file_feed(f, ctx).unwrap_or_default();
        // A file saved by a download earlier in the line holds downloaded words too.
        let saved = w.is_download(f, ctx);
        stdin = Feed {
            downloaded: stdin.downloaded || listed.downloaded || saved,
            ..listed
        };
    }
    let mut cmd: Vec<String> = if o.rest.is_empty() {
        vec!["echo".into()]
    } else {
        o.rest.to_vec()
    };
    // Downloaded words become a runner's arguments: `sh -c` takes the first as
    // its code, a script runner its file.
    if stdin.downloaded {
        if let Some(runner) = cmd.first().map(|c| family(c).to_owned()) {
            // The stream is piped into the runner, and is its script.
            if is_shell(&runner) || is_interpreter(&runner) {
                w.runs_download(&runner, Reach::Script);
                w.runs_download(&runner, Reach::Stdin);
            }
        }
    }
    // The input becomes arguments: known text word by word, listed names as the
    // globs they came from.
    let delimiter = if o.has(&["-0", "--null"]) {
        Some('\0')
    } else {
        o.value(&["-d", "--delimiter"])
            .and_then(|d| unescape(d).chars().next())
    };
    let input: Vec<String> = stdin
        .text
        .iter()
        .flat_map(|t| xargs_items(t, delimiter))
        .chain(stdin.names.iter().cloned())
        .collect();
    let replace = o
        .value(&["-I", "--replace"])
        .or_else(|| o.has(&["-i"]).then_some("{}"));
    if let Some(r) = replace {
        // A listed name may stand anywhere in a word (`cat DIR/{}`): there it
        // is just the entry's name (what `ls DIR` prints), any of them.
        let mut input = input;
        if !stdin.names.is_empty() {
            input.push("*".to_owned());
        }
        for item in &input {
            let c: Vec<String> = cmd.iter().map(|w| w.replace(r, item)).collect();
            w.wrapped(&c, ctx, depth, Feed::default());
        }
        return Feed::default();
    }
    cmd.extend(input);
    w.wrapped(&cmd, ctx, depth, Feed::default())
}

/// `trap CMD SIGNAL…`: CMD runs later.
pub(super) fn trap(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, depth, .. } = call;
    // `trap 'CMD' EXIT…`: CMD runs later; what it changes (a `cd`) does not
    // reach the commands before it.
    let handler = args.iter().find(|a| *a != "--");
    match handler {
        Some(h) if !h.starts_with('-') => w.script(h, &mut ctx.clone(), depth + 1),
        _ => Feed::default(),
    }
}

/// `eval WORDS`: the words run as a command line.
pub(super) fn eval(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, depth, .. } = call;
    let src = args.join(" ");
    w.runs_unknown_words(ctx, depth);
    w.code_from_download("sh", &src);
    w.script(&src, ctx, depth + 1)
}

/// `su -c CMD` / `runuser`: the command, or a shell on stdin.
pub(super) fn switch_user(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name,
        args,
        depth,
        stdin,
    } = call;
    let valued = &[
        "-c",
        "--command",
        "--session-command",
        "-s",
        "--shell",
        "-g",
        "-G",
        "-u",
        "--group",
        "--user",
        "-w",
        "--whitelist-environment",
    ];
    // `su USER -c CODE`: su hands what follows the user to the shell, so options after it
    // count; only `runuser -u USER CMD…` runs the words after its user as a command.
    let user_command = name == "runuser"
        && args
            .iter()
            .any(|a| a.starts_with("--user") || (a.starts_with("-u") && !a.starts_with("--")));
    let o = args::parse(args, valued, user_command);
    let mut feed = Feed::default();
    for c in o.values(&["-c", "--command", "--session-command"]) {
        feed.extend(w.script(c, &mut ctx.clone(), depth + 1));
    }
    if name == "runuser" && !o.rest.is_empty() && !o.has(&["-c", "--command", "--session-command"])
    {
        // runuser -u USER CMD…
        if o.has(&["-u", "--user"]) {
            return w.wrapped(o.rest, ctx, depth, stdin);
        }
    }
    if !o.has(&["-c", "--command", "--session-command"]) {
        feed.extend(w.shell_stdin(&stdin, ctx, depth));
    }
    feed
}

/// `script [-c CMD] [FILE]`: the typescript written, CMD run.
pub(super) fn script(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, depth, .. } = call;
    let o = args::parse(
        args,
        &[
            "-c",
            "--command",
            "-t",
            "-T",
            "-I",
            "-O",
            "-B",
            "-E",
            "--log-out",
            "--log-in",
            "--log-io",
            "--log-timing",
            "--timing",
            "--echo",
        ],
        false,
    );
    for f in o.operands.iter().copied().chain(o.values(&[
        "-O",
        "-B",
        "--log-out",
        "--log-io",
        "-T",
        "--log-timing",
    ])) {
        w.path_op(Action::Write, f, ctx, None);
    }
    for c in o.values(&["-c", "--command"]) {
        w.script(c, &mut ctx.clone(), depth + 1);
    }
    Feed::default()
}

/// `find`: what it lists, and what `-exec`, `-delete` and `-fprint` do.
pub(super) fn find(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, depth, .. } = call;
    w.find(args, ctx, depth)
}

/// `locate` and kin: the names they print.
pub(super) fn locate(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    w.locate(args, ctx)
}

/// `fd`: what it lists and runs (`-x`).
pub(super) fn fd(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, depth, .. } = call;
    w.fd(args, ctx, depth)
}

/// Shells: `-c CODE`, a script file, or commands on stdin.
pub(super) fn shell(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    w.shell(args, ctx, depth, &stdin)
}

/// `source FILE` / `. FILE`: its commands run in this shell.
pub(super) fn source(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    let Some(file) = args.first() else {
        return Feed::default();
    };
    // `source /dev/stdin <<< '…'` runs what comes in on stdin.
    if file == "-" || flow::is_stdin_path(file) {
        return w.shell_stdin(&stdin, ctx, depth);
    }
    w.script_file(file, ctx, depth, true)
}
