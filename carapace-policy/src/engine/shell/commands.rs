//! Running one command: [`Walker::run`] records its line, resolves functions, aliases and
//! programs written earlier, follows downloads, then asks the command table
//! (`super::table`) what the command does. The methods the table's handlers share (readers,
//! `find`, `cp`, `tar`, `git`, shells) live here.
use std::path::Path;

use crate::host::FileKind;

use super::super::normalize;
use super::super::operation::{Context, Operation};
use super::args;
use super::flow::{self, Reach};
use super::names::{bare_name, family, loopback_path, path_like, remote_host};
use super::vars::set_var;
use super::walk::{Feed, Lookup, Walker};
use super::MAX_DEPTH;
use crate::rules::intersect::{self, FIND_DEPTH};
use crate::rules::Action;

/// The directories `cd DIR` may go to with `CDPATH` set: a relative name that does not
/// start with `.` or `..` as a component is looked for in CDPATH's directories in turn (an
/// empty entry is the working directory), then in the working directory. Which one holds
/// it is for the file system to say when the command runs: all of them, in that order.
fn cd_path_targets(target: &str, ctx: &Context) -> Vec<String> {
    let relative =
        !target.starts_with(['/', '~']) && !matches!(target.split('/').next(), Some("." | ".."));
    let Some(cdpath) = ctx.var("CDPATH").filter(|_| relative) else {
        return vec![target.to_owned()];
    };
    let mut dirs: Vec<String> = Vec::new();
    for entry in cdpath.split(':').chain(std::iter::once(".")) {
        let dir = if entry.is_empty() { "." } else { entry };
        let joined = format!("{}/{target}", dir.trim_end_matches('/'));
        if !dirs.contains(&joined) {
            dirs.push(joined);
        }
    }
    dirs
}

/// Whether a copy's sources land inside `dest` (`DEST/NAME`): a directory by its
/// spelling, several sources, `-t`, or a directory that exists.
fn lands_inside(dest: &str, sources: usize, o: &args::Opts<'_>, ctx: &Context) -> bool {
    dest.ends_with('/')
        || matches!(dest, "." | ".." | "~")
        || sources > 1
        || o.value(&["-t", "--target-directory"]).is_some()
        || ctx.host.as_deref().is_some_and(|host| {
            normalize::shell_path(dest, ctx)
                .and_then(|p| host.stat(Path::new(&p)))
                .is_some_and(|f| f.kind == FileKind::Dir)
        })
}

/// Whether a copy writes its destination whole: a directory moved, copied or linked into
/// place brings whatever it holds (`mv /tmp/h .git/hooks`).
fn writes_whole(name: &str, o: &args::Opts<'_>) -> bool {
    match name {
        "mv" => true,
        "ln" | "link" => o.has(&["-s", "--symbolic"]),
        "cp" => o.has(&["-r", "-R", "-a", "--recursive", "--archive"]),
        "rsync" => o.has(&["-r", "-a", "--recursive", "--archive"]),
        _ => false,
    }
}

impl Walker<'_> {
    /// The links a copy makes (see [`makes_links`]): at `DEST/NAME` for each source when
    /// they land inside `dest`, else at `dest`.
    fn made_links(
        &mut self,
        sources: &[&str],
        dest: &str,
        into_dir: bool,
        o: &args::Opts<'_>,
        ctx: &Context,
    ) {
        let symbolic = o.has(&["-s", "--symbolic", "--symbolic-link"]);
        for s in sources {
            let trimmed = s.trim_end_matches('/');
            if into_dir {
                let file = trimmed.rsplit('/').next().unwrap_or(trimmed);
                let link = format!("{}/{file}", dest.trim_end_matches('/'));
                self.made_link(&link, s, symbolic, ctx);
            } else {
                self.made_link(dest, s, symbolic, ctx);
            }
        }
    }
}

/// Whether an operand is stdin or a pseudo file (`-`, a process substitution's
/// `/dev/fd/63`), which has no tree below it.
fn pseudo_operand(f: &str) -> bool {
    f == "-" || f.starts_with("/dev/") || f.starts_with("/proc/")
}

/// Whether a copy makes links to its sources (`ln`, `link`, `cp -s`/`-l`) rather than
/// copies of them.
fn makes_links(name: &str, o: &args::Opts<'_>) -> bool {
    match name {
        "ln" | "link" => true,
        "cp" => o.has(&["-s", "-l", "--link", "--symbolic-link"]),
        _ => false,
    }
}

/// grep's options that print counts or file names, or nothing, instead of lines.
const GREP_NO_LINES: &[&str] = &[
    "-c",
    "--count",
    "-l",
    "--files-with-matches",
    "-L",
    "--files-without-match",
    "-q",
    "--quiet",
    "--silent",
];

/// What a lister of whole trees prints (`rg --files DIR…`): every name below each
/// directory, the working one when none is given.
fn listed_trees(dirs: &[&str], ctx: &Context) -> Feed {
    let dirs = if dirs.is_empty() { &["."][..] } else { dirs };
    Feed {
        names: dirs
            .iter()
            .filter_map(|d| normalize::shell_path(d, ctx))
            .map(|d| format!("{}/**", d.trim_end_matches('/')))
            .collect(),
        ..Feed::default()
    }
}

/// What a reader given its stdin (no file, `-`, `/dev/stdin`) prints of it: filters of
/// lines print it, or some lines; filters of columns and lines print parts of it, which
/// stand for code run but are no value (`Feed::approximate`).
fn filtered_stdin(name: &str, operands: &[&str], stdin: Feed) -> Option<Feed> {
    let reads_stdin =
        operands.is_empty() || operands.iter().any(|f| *f == "-" || flow::is_stdin_path(f));
    let exact = matches!(
        name,
        "cat" | "tac" | "head" | "tail" | "sort" | "uniq" | "less" | "more"
    );
    let parts = matches!(
        name,
        "cut" | "paste" | "fold" | "fmt" | "nl" | "expand" | "unexpand" | "pr"
    );
    (reads_stdin && (exact || parts)).then_some(Feed {
        approximate: stdin.approximate || parts,
        ..stdin
    })
}

/// What `git rev-parse` prints of the repository's own places (`--git-dir`,
/// `--git-path hooks`), taking the working directory as the top of a repository with a
/// `.git` directory: `cp -r x $(git rev-parse --git-path hooks)` writes `.git/hooks`.
fn git_dir_paths(args: &[String], ctx: &Context) -> Feed {
    let mut lines = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--git-dir" | "--git-common-dir" => lines.push(".git".to_owned()),
            "--absolute-git-dir" => lines.push(format!("{}/.git", ctx.cwd.trim_end_matches('/'))),
            "--show-toplevel" => lines.push(ctx.cwd.clone()),
            "--git-path" => {
                if let Some(p) = it.next() {
                    lines.push(format!(".git/{p}"));
                }
            }
            _ => {}
        }
    }
    if lines.is_empty() {
        return Feed::default();
    }
    Feed::text(lines.join("\n"))
}

/// The directory `git clone URL` makes: the URL's last name without `.git`.
fn clone_dest(url: &str) -> String {
    url.trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("repo")
        .trim_end_matches(".git")
        .to_owned()
}

/// Unix sockets a container CLI is pointed at (`--url`, `-H`, `--host`, `--connection`).
pub(super) fn engine_sockets(args: &[String]) -> Vec<&str> {
    let mut socks = Vec::new();
    let mut it = args.iter().map(String::as_str);
    while let Some(a) = it.next() {
        let value = match a.split_once('=') {
            Some(("--url" | "--host" | "-H", v)) => Some(v),
            None if matches!(a, "--url" | "--host" | "-H") => it.next(),
            _ => None,
        };
        if let Some(path) = value.and_then(|v| v.strip_prefix("unix://")) {
            socks.push(path);
        }
    }
    socks
}

pub(super) const UNIQ_VALUED: &[&str] = &[
    "-f",
    "-s",
    "-w",
    "--skip-fields",
    "--skip-chars",
    "--check-chars",
];
pub(super) const PATCH_VALUED: &[&str] = &[
    "-p",
    "-i",
    "-o",
    "-d",
    "-F",
    "-B",
    "-V",
    "-r",
    "-z",
    "-D",
    "-Y",
    "--strip",
    "--input",
    "--output",
    "--directory",
    "--fuzz",
    "--prefix",
    "--suffix",
    "--reject-file",
    "--basename-prefix",
    "--ifdef",
    "--backup-if-mismatch",
    "--quoting-style",
];

/// Options that take a value, of `cp`, `mv`, `ln`, `install`, `rsync` and `scp`.
fn copy_valued(name: &str) -> &'static [&'static str] {
    match name {
        "install" => &[
            "-m",
            "-o",
            "-g",
            "-t",
            "-S",
            "--mode",
            "--owner",
            "--group",
            "--target-directory",
            "--suffix",
        ],
        "rsync" => &[
            "-e",
            "--rsh",
            "-f",
            "--filter",
            "--exclude",
            "--include",
            "--exclude-from",
            "--include-from",
            "--files-from",
            "--password-file",
            "-T",
            "--temp-dir",
            "--log-file",
            "--chmod",
            "--port",
            "-B",
            "--block-size",
            "--backup-dir",
            "--partial-dir",
            "--compare-dest",
            "--link-dest",
            "--copy-dest",
            "-M",
            "--remote-option",
            "--rsync-path",
            "--timeout",
            "--bwlimit",
            "--max-size",
            "--min-size",
            "--info",
            "--debug",
        ],
        "scp" => &["-i", "-P", "-F", "-o", "-J", "-c", "-l", "-S", "-D", "-X"],
        _ => &["-t", "-S", "--target-directory", "--suffix"],
    }
}

/// Options of git's verbs (`clone -b BRANCH`, `commit -m MSG`) that take a value.
const GIT_VERB_VALUED: &[&str] = &[
    "-m",
    "-b",
    "-B",
    "-o",
    "--origin",
    "--branch",
    "--depth",
    "-F",
    "--file",
    "-u",
    "--upload-pack",
    "--receive-pack",
    "--template",
    "-c",
    "--config",
    "--reference",
    "-j",
    "--jobs",
    "--format",
    "-n",
    "--author",
    "--date",
    "-S",
    "--gpg-sign",
    "--output",
    "--output-directory",
];

/// Options that take a value, of wrappers that run the rest of the line as a command.
pub(super) fn wrapper_valued(name: &str) -> &'static [&'static str] {
    match name {
        "setpriv" => &[
            "--reuid",
            "--regid",
            "--ruid",
            "--euid",
            "--rgid",
            "--egid",
            "--groups",
            "--inh-caps",
            "--ambient-caps",
            "--bounding-set",
            "--securebits",
            "--pdeathsig",
            "--selinux-label",
            "--apparmor-profile",
            "--landlock-access",
            "--landlock-rule",
        ],
        "unshare" => &[
            "-S",
            "--setuid",
            "-G",
            "--setgid",
            "--map-user",
            "--map-group",
            "--map-users",
            "--map-groups",
            "-R",
            "--root",
            "-w",
            "--wd",
            "--propagation",
        ],
        "nsenter" => &["-t", "--target", "-S", "--setuid", "-G", "--setgid"],
        "xvfb-run" => &[
            "-n",
            "-s",
            "-f",
            "-e",
            "-p",
            "--server-num",
            "--server-args",
            "--auth-file",
            "--error-file",
        ],
        "ssh-agent" => &["-a", "-E", "-t", "-P", "-O"],
        "cgexec" => &["-g"],
        "proot" => &[
            "-r", "-b", "-m", "-w", "-q", "-k", "-R", "-S", "--rootfs", "--bind", "--cwd",
        ],
        _ => &[],
    }
}

impl Walker<'_> {
    /// Runs one command (its words already expanded): records its command line, then what
    /// the command table says it does. Returns what it prints, when known.
    pub fn run(&mut self, words: &[String], ctx: &mut Context, depth: usize, stdin: Feed) -> Feed {
        if depth > MAX_DEPTH {
            self.out.unparsable(format!(
                "the shell command is nested too deep (more than {MAX_DEPTH} levels of wrappers)"
            ));
            return Feed::default();
        }
        if !self.spend(words.len()) {
            return Feed::default();
        }
        let Some((first, args)) = words.split_first() else {
            return Feed::default();
        };
        // A program under another name, or a glob: walked as each program it can be.
        if let Some(programs) = self.resolve_command(first, ctx) {
            let mut feed = Feed::default();
            for program in programs {
                let mut resolved = vec![program];
                resolved.extend(args.iter().cloned());
                feed.extend(self.run(&resolved, ctx, depth + 1, stdin.clone()));
            }
            return feed;
        }
        let base = first.rsplit('/').next().unwrap_or(first).to_owned();
        // `$(curl …)` as the command: the download is the command run.
        self.code_from_download("sh", first);
        if first.contains('/') {
            self.path_op(Action::Execute, first, ctx, None);
            if self.is_download(first, ctx) {
                self.runs_download("sh", Reach::Script);
            }
        } else if self.on_path_download(first, ctx) {
            self.runs_download("sh", Reach::Script);
        }
        self.build_of_download(&base, args, ctx);
        if !self.files.is_empty() {
            self.build_of_written(&base, args, ctx, depth);
        }
        // A package fetched by URL or from a repository and run or installed (its setup runs).
        if super::remote_pkg::runs_remote_package(&base, args) {
            self.runs_download("sh", Reach::Script);
        }
        let line = std::iter::once(base.as_str())
            .chain(args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        self.out.command(line);
        // The words as the program reads them: git with the config set for this command
        // (`GIT_CONFIG_*`, `-c` of an alias) in front.
        let mut words_read = vec![base.clone()];
        if base == "git" {
            words_read.extend(self.git_config_words(args, ctx));
        }
        words_read.extend(args.iter().cloned());
        if let Some(canonical) = super::canon::line(&base, &words_read[1..]) {
            self.out.command(canonical);
        }
        self.out.argv(words_read);
        if let Some(stops) = super::stop::line(family(&base), args) {
            // Recorded as a command of its own too, for structured rules.
            self.out.argv(stops.split(' ').map(str::to_owned).collect());
            self.out.command(stops);
        }
        let bypass = std::mem::take(&mut self.lookup) == Lookup::PastFunctions;
        if !first.contains('/') {
            // A function calling itself past the depth limit runs as the command of that
            // name (its body was walked at the definition).
            let body = self
                .functions
                .iter()
                .find(|(n, _)| *n == base && !bypass && depth <= MAX_DEPTH / 2)
                .map(|(_, b)| b.clone());
            if let Some(body) = body {
                return self.call_function(&body, args, ctx, depth, stdin);
            }
        } else if let Some(script) = self.file_feed(first, ctx) {
            // `./x.sh` written earlier in this command: its content runs.
            let mut sub = ctx.clone();
            let mut out = Feed::default();
            for text in &script.text {
                out.extend(self.script(text, &mut sub, depth + 1));
            }
            return out;
        }
        if let Some(value) = self
            .aliases
            .iter()
            .find(|(n, _)| *n == base)
            .map(|(_, v)| v.clone())
        {
            let mut src = value;
            for a in args {
                src.push(' ');
                src.push_str(a);
            }
            return self.script(&src, ctx, depth + 1);
        }
        // A command that reads a downloaded file prints downloaded bytes (`cat f | sh`).
        let outer = std::mem::take(&mut self.flow.read_download);
        let fetched = self.remote_copy(family(&base), args, ctx);
        self.installs_download(family(&base), args, ctx);
        self.unpacks_download(family(&base), args, ctx);
        // What the command runs inside (`sh -c`, `script -c`) inherits its stdin.
        let mut feed = self.with_stdin(&stdin.clone(), |w| {
            w.dispatch(family(&base), args, ctx, depth, stdin)
        });
        feed.downloaded |= self.flow.read_download || fetched;
        self.flow.read_download |= outer;
        feed
    }

    /// Runs a wrapped command (`sudo CMD…`), one level deeper.
    pub(super) fn wrapped(
        &mut self,
        rest: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        if rest.is_empty() {
            return Feed::default();
        }
        self.run(rest, ctx, depth + 1, stdin)
    }

    /// dd: `if=` is read, `of=` written with what it copies.
    pub(super) fn dd(&mut self, args: &[String], ctx: &Context, stdin: &Feed) -> Feed {
        // Without `of=`, dd prints what it reads: its stdin, or a file whose text
        // this command wrote.
        let mut printed = if args.iter().any(|a| a.starts_with("of=")) {
            None
        } else {
            Some(stdin.clone())
        };
        for a in args {
            if let Some(f) = a.strip_prefix("if=") {
                self.path_op(Action::Read, f, ctx, None);
                if !flow::is_stdin_path(f) {
                    printed = printed.and(self.file_feed(f, ctx));
                }
            } else if let Some(f) = a.strip_prefix("of=") {
                let content = (!stdin.text.is_empty()).then(|| stdin.joined());
                self.path_op(Action::Write, f, ctx, content);
                // A copy of a download (from stdin or `if=`) is a download.
                if stdin.downloaded || self.flow.read_download {
                    self.downloaded_to(f, ctx);
                }
            }
        }
        printed.unwrap_or_default()
    }

    /// cd / pushd: the working directory moves (see `cd_path_targets` for `CDPATH`).
    pub(super) fn cd(&mut self, name: &str, args: &[String], ctx: &mut Context) -> Feed {
        if name == "pushd" && pushd_within_stack(args, ctx) {
            return Feed::default();
        }
        let o = args::parse(args, &[], false);
        let target = o.operands.first().copied().unwrap_or("~");
        let target = match target {
            // `cd -`: back to the previous directory, unknown unless a `cd` set it.
            "-" => ctx.var("OLDPWD").unwrap_or("/**").to_owned(),
            t => {
                let mut dirs = cd_path_targets(t, ctx);
                self.cd_choices = self.cd_choices.max(dirs.len());
                let pick = self.cd_pick.min(dirs.len().saturating_sub(1));
                dirs.swap_remove(pick)
            }
        };
        if let Some(p) = normalize::shell_path(&target, ctx) {
            let old = std::mem::replace(&mut ctx.cwd, p);
            if name == "pushd" {
                let stack = ctx.var(DIRSTACK).unwrap_or("").to_owned();
                set_var(ctx, DIRSTACK, &format!("{old}\n{stack}"));
            }
            set_var(ctx, "OLDPWD", &old);
        }
        Feed::default()
    }

    /// `locate` and its kin print globs of the paths they may list (`super::locate`).
    pub(super) fn locate(&mut self, args: &[String], ctx: &Context) -> Feed {
        let found = super::locate::locate(args);
        for db in found.databases {
            self.path_op(Action::Read, db, ctx, None);
        }
        Feed {
            names: found.names,
            ..Feed::default()
        }
    }

    /// fd: what it lists (`super::locate::fd`), below its directories, and the command
    /// `-x`/`-X` runs on each.
    pub(super) fn fd(&mut self, args: &[String], ctx: &mut Context, depth: usize) -> Feed {
        let found = super::locate::fd(args);
        let names: Vec<String> = found
            .names
            .iter()
            .filter_map(|n| normalize::shell_path(n, ctx))
            .collect();
        if !found.exec.is_empty() {
            for n in &names {
                let words: Vec<String> = found.exec.iter().map(|w| w.replace("{}", n)).collect();
                // A command without `{}` is given the entries after its words.
                let words = if found.exec.iter().any(|w| w.contains("{}")) {
                    words
                } else {
                    words.into_iter().chain([n.clone()]).collect()
                };
                self.wrapped(&words, &mut ctx.clone(), depth, Feed::default());
            }
        }
        Feed {
            names,
            ..Feed::default()
        }
    }

    /// Package installers: the directories the line installs into are written whole
    /// (`super::installs`); their other arguments are read like any command's.
    pub(super) fn installer(&mut self, name: &str, args: &[String], ctx: &Context, depth: usize) {
        let dirs = match name {
            "pip" => self.pip_dirs(args, ctx),
            "easy_install" => super::installs::setup_py(args, ctx),
            "uv" if args.first().is_some_and(|a| a == "pip") => {
                super::installs::pip(&args[1..], ctx, &[])
            }
            "npm" => {
                if let Some(rc) = super::installs::npm_config_file(args) {
                    self.path_op(Action::Write, &rc, ctx, None);
                }
                // A script set into package.json is there for `npm run` to run.
                for script in super::installs::npm_set_scripts(args) {
                    self.script(script, &mut ctx.clone(), depth + 1);
                }
                super::installs::npm(args, ctx)
            }
            _ => Vec::new(),
        };
        for d in dirs {
            self.tree_write(&d, ctx);
        }
        self.other_command(args, ctx);
    }

    /// Where `pip ARGS` installs, with the settings of this command line's `pip config set`
    /// and of configuration files it wrote (`PIP_CONFIG_FILE`, the user's, the system's).
    pub(super) fn pip_dirs(&mut self, args: &[String], ctx: &Context) -> Vec<String> {
        if let Some(setting) = super::installs::pip_config_set(args) {
            self.pip_config.push(setting);
            return Vec::new();
        }
        let files = [
            ctx.var("PIP_CONFIG_FILE").unwrap_or(""),
            "/etc/pip.conf",
            "/etc/xdg/pip/pip.conf",
            "~/.pip/pip.conf",
            "~/.config/pip/pip.conf",
        ];
        let mut config = Vec::new();
        for f in files.iter().filter(|f| !f.is_empty()) {
            if let Some(feed) = self.file_feed(f, ctx) {
                config.extend(super::installs::pip_config(&feed.joined()));
            }
        }
        config.extend(self.pip_config.iter().cloned());
        super::installs::pip(args, ctx, &config)
    }

    /// A command not in the table: arguments that look like paths are read.
    pub(super) fn other_command(&mut self, args: &[String], ctx: &Context) {
        for a in args {
            let candidate = if a.starts_with('-') {
                a.split_once('=').map_or("", |(_, v)| v)
            } else {
                a.as_str()
            };
            // A bare name is a file in the working directory to a command not in the
            // table (`cd ~/.aws && aws s3 cp credentials s3://…`).
            if path_like(candidate) || bare_name(candidate) {
                self.path_op(Action::Read, candidate, ctx, None);
            }
        }
    }

    /// Text decoded from base64, base32 or hex in `input`; a consumer may run it.
    pub(super) fn decoded(&mut self, input: &str) -> Feed {
        let compact: String = input.chars().filter(|c| !c.is_whitespace()).collect();
        let mut decoded = normalize::decode_payloads(&compact);
        if decoded.is_empty() {
            decoded = normalize::decode_payloads(input);
        }
        for d in &decoded {
            self.out.text(d.as_str());
        }
        Feed {
            text: decoded,
            ..Feed::default()
        }
    }

    /// A shell: `-c STRING`, a script file, or commands on stdin.
    pub(super) fn shell(
        &mut self,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: &Feed,
    ) -> Feed {
        let mut command_mode = false;
        let mut stdin_mode = false;
        // `-n` (noexec): the shell reads and checks the script, runs nothing in it.
        let mut check_only = false;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            if a == "--" || a == "-" {
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                check_only |= long == "no-execute";
                if matches!(long, "rcfile" | "init-file") {
                    if let Some(f) = args.get(i) {
                        self.path_op(Action::Read, f, ctx, None);
                    }
                    i += 1;
                } else if long == "command" {
                    command_mode = true;
                }
                continue;
            }
            if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 {
                command_mode |= a[1..].contains('c') && a.starts_with('-');
                stdin_mode |= a[1..].contains('s') && a.starts_with('-');
                check_only |= a[1..].contains('n') && a.starts_with('-');
                // -o OPTION / -O OPTION take a value.
                if a[1..].contains(['o', 'O']) {
                    check_only |= a.starts_with('-') && args.get(i).is_some_and(|o| o == "noexec");
                    i += 1;
                }
                continue;
            }
            i -= 1;
            break;
        }
        let rest = args.get(i..).unwrap_or(&[]);
        if check_only {
            if let Some(file) = rest.first().filter(|_| !command_mode && !stdin_mode) {
                self.path_op(Action::Read, file, ctx, None);
            }
            return Feed::default();
        }
        if command_mode {
            let Some((src, params)) = rest.split_first() else {
                return Feed::default();
            };
            self.code_from_download("sh", src);
            self.runs_unknown_words(ctx, depth);
            // `sh -c 'cat "$1"' NAME FILE`: $0 is NAME, $1… the rest.
            let mut sub = ctx.clone();
            for (i, p) in params.iter().enumerate() {
                set_var(&mut sub, &i.to_string(), p);
            }
            set_var(&mut sub, "@", &params.get(1..).unwrap_or(&[]).join(" "));
            return self.script(src, &mut sub, depth + 1);
        }
        // The script's positional parameters: after the file (`bash F A B`), or all of the
        // words with `-s` (`bash -s -- A B <<EOF`).
        let params = if stdin_mode {
            rest.strip_prefix(&["--".to_owned()][..]).unwrap_or(rest)
        } else {
            rest.get(1..).unwrap_or(&[])
        };
        let mut own;
        let sub: &mut Context = if params.is_empty() {
            ctx
        } else {
            own = ctx.clone();
            for (i, p) in params.iter().enumerate() {
                set_var(&mut own, &(i + 1).to_string(), p);
            }
            set_var(&mut own, "@", &params.join(" "));
            &mut own
        };
        match rest.first() {
            // `bash /dev/stdin <<< '…'`: the script is what comes in on stdin.
            Some(file) if flow::is_stdin_path(file) => self.shell_stdin(stdin, sub, depth),
            Some(file) if !stdin_mode => self.script_file(file, sub, depth, false),
            _ => self.shell_stdin(stdin, sub, depth),
        }
    }

    /// Commands a shell reads from its stdin (`curl … | sh`, `base64 -d | bash`, here-docs).
    pub(super) fn shell_stdin(&mut self, stdin: &Feed, ctx: &mut Context, depth: usize) -> Feed {
        if stdin.downloaded {
            self.runs_download("sh", Reach::Stdin);
        }
        let mut feed = Feed::default();
        for text in &stdin.text {
            let mut sub = ctx.clone();
            feed.extend(self.script(text, &mut sub, depth + 1));
        }
        feed
    }

    /// A script file is read and executed; its text is walked when it is known (process
    /// substitution). `source` runs it in this shell (`same_shell`).
    pub(super) fn script_file(
        &mut self,
        file: &str,
        ctx: &mut Context,
        depth: usize,
        same_shell: bool,
    ) -> Feed {
        self.path_op(Action::Read, file, ctx, None);
        self.path_op(Action::Execute, file, ctx, None);
        if self.is_download(file, ctx) {
            self.runs_download("sh", Reach::Script);
        }
        let Some(feed) = self.file_feed(file, ctx) else {
            return Feed::default();
        };
        let mut sub = ctx.clone();
        let shell = if same_shell { ctx } else { &mut sub };
        let mut out = Feed::default();
        for text in &feed.text {
            out.extend(self.script(text, shell, depth + 1));
        }
        out
    }

    /// A reader or filter of files, told which of its options take a value (the command
    /// table's entry for it).
    pub(super) fn reader(
        &mut self,
        name: &str,
        valued: &[&str],
        args: &[String],
        ctx: &mut Context,
        stdin: Feed,
    ) -> Feed {
        let o = args::parse(args, valued, false);
        let operands: Vec<&str> = match name {
            // tr takes sets, not files.
            "tr" => Vec::new(),
            // split writes PREFIX*, reads the input.
            "split" | "csplit" => o.operands.iter().take(1).copied().collect(),
            _ => o.operands.clone(),
        };
        for f in o.values(&["-o", "--output"]) {
            if matches!(name, "sort" | "iconv" | "tree") {
                self.path_op(Action::Write, f, ctx, None);
            }
        }
        for f in o.values(&[
            "--files0-from",
            "--exclude-from",
            "-X",
            "--from-file",
            "--to-file",
            "--magic-file",
            "-m",
        ]) {
            if !matches!(name, "tree" | "column" | "bat" | "batcat") {
                self.path_op(Action::Read, f, ctx, None);
            }
        }
        // Listings and metadata look at names, sizes and modes, never at the bytes: a
        // protected file's contents stay unread (`stat ~/.ssh/id_rsa`, `ls -l server.pem`).
        // `tree --fromfile FILE` prints FILE's lines as a tree: its operands are read.
        let metadata = METADATA_ONLY.contains(&name) && !(name == "tree" && o.has(&["--fromfile"]));
        if o.operands.is_empty() && matches!(name, "ls" | "dir" | "vdir" | "du" | "tree") {
            return Feed {
                names: vec![format!("{}/*", ctx.cwd.trim_end_matches('/'))],
                ..Feed::default()
            };
        }
        let mut feed = Feed::default();
        for f in &operands {
            if !metadata {
                self.path_op(Action::Read, f, ctx, None);
                if matches!(name, "diff" | "sdiff" | "diff3") && !pseudo_operand(f) {
                    // A directory operand is compared file by file, below it with `-r`.
                    let tree = format!("{}/**", f.trim_end_matches('/'));
                    self.path_op(Action::Read, &tree, ctx, None);
                }
                if let Some(inner) = self.file_feed(f, ctx) {
                    feed.extend(inner);
                }
            }
            if matches!(name, "ls" | "dir" | "vdir" | "du" | "tree") {
                // `ls DIR` prints the entries' bare names (`-a`: hidden ones too), which a
                // loop puts back under DIR (`cat DIR/$f`); `ls FILE` and `ls -d` print the
                // operand itself. The full names below stand for the other listers; for
                // ls, for a directory written out (a glob's matches are what it selects:
                // `ls ~/.ssh/*.pub` prints keys' names, not what lies below them).
                let any = if o.has(&["-a", "-A", "--all", "--almost-all"]) {
                    super::walk::UNKNOWN
                } else {
                    "*"
                };
                let ls = matches!(name, "ls" | "dir" | "vdir");
                if ls && !o.has(&["-d", "--directory"]) {
                    feed.names.push(any.to_owned());
                }
                if let Some(p) = normalize::shell_path(f, ctx) {
                    let glob = p.contains(['*', '?', '[']) || intersect::extglob_at(&p).is_some();
                    if ls {
                        feed.names.push(p.clone());
                    }
                    if !(ls && glob) {
                        feed.names
                            .push(format!("{}/{any}", p.trim_end_matches('/')));
                    }
                }
            }
        }
        if let Some(printed) = filtered_stdin(name, &operands, stdin) {
            feed.extend(printed);
        }
        feed
    }

    #[expect(
        clippy::too_many_lines,
        reason = "the per-tool option table is most of it"
    )]
    pub(super) fn grep(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: Feed,
    ) -> Feed {
        let valued: &[&str] = match name {
            "rg" => &[
                "-e",
                "-f",
                "-g",
                "-t",
                "-T",
                "-m",
                "-A",
                "-B",
                "-C",
                "-j",
                "-M",
                "-r",
                "-E",
                "-d",
                "--regexp",
                "--file",
                "--glob",
                "--iglob",
                "--type",
                "--type-not",
                "--max-count",
                "--threads",
                "--replace",
                "--encoding",
                "--sort",
                "--sortr",
                "--type-add",
                "--max-depth",
                "--max-filesize",
                "--color",
                "--colors",
                "--pre",
                "--pre-glob",
                "--ignore-file",
                "--context-separator",
                "--field-match-separator",
            ],
            "ag" => &[
                "-G",
                "-A",
                "-B",
                "-C",
                "-m",
                "-g",
                "-p",
                "--ignore",
                "--depth",
                "--file-search-regex",
                "--path-to-ignore",
            ],
            _ => &[
                "-e",
                "-f",
                "-m",
                "-A",
                "-B",
                "-C",
                "-d",
                "-D",
                "--regexp",
                "--file",
                "--max-count",
                "--after-context",
                "--before-context",
                "--context",
                "--include",
                "--exclude",
                "--exclude-dir",
                "--exclude-from",
                "--label",
                "--color",
                "--colour",
                "--devices",
                "--directories",
                "--binary-files",
                "--group-separator",
            ],
        };
        let o = args::parse(args, valued, false);
        // `rg --files DIR…` lists the files below its directories (the working one by
        // default) rather than searching them.
        if name == "rg" && o.has(&["--files"]) {
            return listed_trees(&o.operands, ctx);
        }
        let explicit = o.values(&["-e", "--regexp", "-f", "--file"]);
        let mut files = o.operands.clone();
        if explicit.is_empty() && !files.is_empty() {
            self.out.text(files.remove(0));
        }
        for f in o.values(&[
            "-f",
            "--file",
            "--exclude-from",
            "--ignore-file",
            "-p",
            "--path-to-ignore",
        ]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        for pre in o.values(&["--pre"]) {
            // rg --pre runs a command on every file it searches.
            self.run(
                &[pre.to_owned()],
                &mut ctx.clone(),
                depth + 1,
                Feed::default(),
            );
        }
        let recursive = matches!(name, "rg" | "ag" | "ack" | "ugrep")
            || o.has(&["-r", "-R", "--recursive", "--dereference-recursive"]);
        if files.is_empty() && recursive {
            self.tree_read(".", ctx);
        }
        // Filtering its stdin, grep prints some of its lines (text or names): all of them
        // stand for those (`locate x | grep y | xargs cat`, `… | eval "$(grep .)"`).
        let counts = o.has(GREP_NO_LINES);
        let filtered = if files.is_empty() && !recursive && !counts {
            // One line is printed or not; of several, some.
            let several = stdin.text.iter().any(|t| t.trim_end().contains('\n'));
            Feed {
                approximate: stdin.approximate || several,
                ..stdin
            }
        } else {
            Feed::default()
        };
        for f in files {
            if recursive {
                self.tree_read(f, ctx);
            } else {
                self.path_op(Action::Read, f, ctx, None);
            }
        }
        filtered
    }

    /// find: the start directories are read; `-exec`/`-execdir`/`-ok` run a command on what
    /// it finds (`{}` stands for every entry of the tree, hidden ones too, or for the names
    /// its `-name` tests allow: `find_names`); `-delete` deletes it.
    pub(super) fn find(&mut self, args: &[String], ctx: &mut Context, depth: usize) -> Feed {
        let mut starts: Vec<&str> = Vec::new();
        let mut i = 0;
        // Leading -H -L -P -D… options, then start points until the expression.
        while let Some(a) = args.get(i) {
            if matches!(a.as_str(), "-H" | "-L" | "-P") {
                i += 1;
            } else if matches!(a.as_str(), "-D" | "-O") {
                i += 2;
            } else if a.starts_with('-') || a == "(" || a == "!" || a == ")" {
                break;
            } else {
                starts.push(a);
                i += 1;
            }
        }
        if starts.is_empty() {
            starts.push(".");
        }
        let expr = args.get(i..).unwrap_or(&[]);
        // Each top-level `-o` side selects on its own, and its actions act on that alone.
        let splits = super::find_names::top_level_splits(expr);
        let side_of = |at: usize| splits.iter().filter(|&&s| s < at).count();
        let sides: Vec<Vec<super::find_names::Branch>> = splits
            .iter()
            .copied()
            .chain([expr.len()])
            .scan(0, |from, to| {
                let side = super::find_names::branches(expr.get(*from..to).unwrap_or(&[]));
                *from = to + 1;
                Some(side)
            })
            .collect();
        // `-maxdepth 0` finds the start points alone, `-maxdepth 1` their entries: no walk.
        let max_depth = expr
            .iter()
            .position(|a| a == "-maxdepth")
            .and_then(|at| expr.get(at + 1))
            .and_then(|d| d.parse::<u32>().ok());
        let mut found_by: Vec<Vec<String>> = vec![Vec::new(); sides.len()];
        for written in &starts {
            let Some(s) = normalize::shell_path(written, ctx) else {
                continue;
            };
            let s = s.trim_end_matches('/');
            for (side, found) in sides.iter().zip(found_by.iter_mut()) {
                for b in side {
                    // A whole-path test names the paths themselves (`-path '*/.ssh/id_*'`).
                    if let Some(paths) = b.path.as_deref().and_then(|p| find_path(written, s, p)) {
                        found.extend(paths);
                        continue;
                    }
                    found.extend(match (&b.name, max_depth) {
                        (_, Some(0)) => vec![s.to_owned()],
                        // One level down, hidden names too: find's `-name '*.pub'` also
                        // matches `.x.pub`, which the shell's `*.pub` does not.
                        (Some(n), Some(1)) if n.starts_with(['*', '?', '[']) => {
                            vec![format!("{s}/{n}"), format!("{s}/.{n}")]
                        }
                        (Some(n), Some(1)) => vec![format!("{s}/{n}")],
                        (Some(n), _) => vec![format!("{s}/{FIND_DEPTH}/{n}")],
                        (None, _) => vec![format!("{s}/**")],
                    });
                }
            }
        }
        for s in &starts {
            self.path_op(Action::Read, s, ctx, None);
        }
        let mut j = 0;
        while let Some(a) = expr.get(j) {
            j += 1;
            match a.as_str() {
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let end = expr[j..]
                        .iter()
                        .position(|w| w == ";" || w == "+")
                        .map_or(expr.len(), |p| j + p);
                    let cmd = &expr[j..end];
                    // `-execdir` runs in the directory that holds the entry, given as
                    // `./NAME`: the command's own relative names are there too.
                    let in_dir = matches!(a.as_str(), "-execdir" | "-okdir");
                    let side = side_of(j - 1);
                    for f in found_by.get(side).into_iter().flatten() {
                        let mut sub = ctx.clone();
                        let mut entry = f.clone();
                        if let Some((dir, name)) = f.rsplit_once('/').filter(|_| in_dir) {
                            if dir.is_empty() { "/" } else { dir }.clone_into(&mut sub.cwd);
                            entry = format!("./{name}");
                        }
                        let words: Vec<String> =
                            cmd.iter().map(|w| w.replace("{}", &entry)).collect();
                        self.wrapped(&words, &mut sub, depth, Feed::default());
                    }
                    j = end + 1;
                }
                "-delete" => {
                    for f in found_by.get(side_of(j - 1)).into_iter().flatten() {
                        self.path_op(Action::Delete, f, ctx, None);
                    }
                }
                "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                    if let Some(f) = expr.get(j) {
                        self.path_op(Action::Write, f, ctx, None);
                    }
                }
                _ => {}
            }
        }
        Feed {
            names: found_by.concat(),
            ..Feed::default()
        }
    }

    /// cp / mv / install / ln / rsync / scp: sources are read (mv: deleted), the destination
    /// written. Remote sides (`host:path`) are network operations.
    #[expect(
        clippy::too_many_lines,
        reason = "cp, mv, install, ln, rsync and scp share the source/destination logic"
    )]
    pub(super) fn copy(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &mut Context,
        stdin: &Feed,
    ) -> Feed {
        let valued = copy_valued(name);
        let o = args::parse(args, valued, false);
        for f in o.values(&[
            "-i",
            "-F",
            "--exclude-from",
            "--include-from",
            "--files-from",
            "--password-file",
        ]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        let port = o
            .value(&["-P", "--port"])
            .and_then(|p| p.parse().ok())
            .or(if name == "scp" { Some(22) } else { None });
        if name == "install" && o.has(&["-d", "--directory"]) {
            for f in &o.operands {
                self.path_op(Action::Write, f, ctx, None);
            }
            return Feed::default();
        }
        let (sources, dest): (Vec<&str>, Option<&str>) =
            match o.value(&["-t", "--target-directory"]) {
                Some(dir) => (o.operands.clone(), Some(dir)),
                None => match o.operands.split_last() {
                    Some((last, rest)) if !rest.is_empty() => (rest.to_vec(), Some(*last)),
                    // ln TARGET: the link is made here; rsync SRC lists it.
                    Some((only, _)) if matches!(name, "ln" | "link") => (vec![*only], Some(".")),
                    Some((only, _)) => (vec![*only], None),
                    None => (Vec::new(), None),
                },
            };
        for s in &sources {
            if let Some(host) = remote_host(s) {
                self.host_op(&host, port, None);
                if let Some(local) = loopback_path(s) {
                    self.tree_read(&local, ctx);
                }
                continue;
            }
            if name == "mv" {
                self.path_op(Action::Delete, s, ctx, None);
            } else if makes_links(name, &o) {
                // Nothing below a link's target is read: use through it is (`made_link`).
                self.path_op(Action::Read, s, ctx, None);
            } else {
                self.tree_read(s, ctx);
            }

            if name == "rsync" && o.has(&["--remove-source-files"]) {
                self.tree_delete(s, ctx);
            }
        }
        let Some(dest) = dest else {
            return Feed::default();
        };
        if let Some(host) = remote_host(dest) {
            self.host_op(&host, port, None);
            if let Some(local) = loopback_path(dest) {
                self.tree_write(&local, ctx);
            }
            return Feed::default();
        }
        let contents = |s: &&str| {
            s.ends_with("/.") || (name == "rsync" && s.ends_with('/') && remote_host(s).is_none())
        };
        // What the command knows a source holds (written earlier in this command), the
        // copy holds: `echo 'cmd' > a; cp a b; sh b` runs it.
        let known = |w: &Self, s: &str| w.file_feed(s, ctx).map(|f| f.joined());
        let whole = writes_whole(name, &o);
        if sources.iter().any(contents) {
            self.tree_write(dest, ctx);
        } else {
            let content = match sources.as_slice() {
                [only] => known(self, only),
                _ => None,
            };
            self.path_op(Action::Write, dest, ctx, content);
        }
        // `--delete*`: what the destination holds and the source does not goes.
        if name == "rsync" && o.flags.iter().any(|(f, _)| f.starts_with("--del")) {
            self.path_op(Action::Delete, dest, ctx, None);
        }
        // A copy of a download, or of a remote file (`scp host:f`), is a download.
        let downloaded = sources.iter().any(|s| {
            remote_host(s).is_some()
                || self.is_download(s, ctx)
                || (stdin.downloaded && flow::is_stdin_path(s))
        });
        // Into a directory: the file lands at DEST/NAME, which is what rules on files under a
        // protected directory need to see.
        let into_dir = lands_inside(dest, sources.len(), &o, ctx);
        if into_dir {
            let base = dest.trim_end_matches('/');
            for s in &sources {
                let s = s.trim_end_matches('/');
                let file = s.rsplit(['/', ':']).next().unwrap_or(s);
                if !file.is_empty() {
                    let content = known(self, s);
                    self.path_op(Action::Write, &format!("{base}/{file}"), ctx, content);
                    if whole {
                        self.tree_write(&format!("{base}/{file}"), ctx);
                    }
                    if downloaded {
                        self.downloaded_to(&format!("{base}/{file}"), ctx);
                        self.downloaded_tree(&format!("{base}/{file}"), ctx);
                    }
                }
            }
        } else {
            if whole {
                self.tree_write(dest, ctx);
            }
            if downloaded {
                self.downloaded_to(dest, ctx);
                self.downloaded_tree(dest, ctx);
            }
        }
        // A copy or link of a program runs as that program (`ln -s /bin/rm x; ./x`).
        if let [source] = sources.as_slice() {
            if into_dir {
                let file = source
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or("");
                let landed = format!("{}/{file}", dest.trim_end_matches('/'));
                self.copied_program(source, &landed, ctx);
            } else {
                self.copied_program(source, dest, ctx);
            }
        }
        // Known once the link itself is written: later writes go through it.
        if makes_links(name, &o) {
            self.made_links(&sources, dest, into_dir, &o, ctx);
        }
        Feed::default()
    }

    pub(super) fn tar(&mut self, args: &[String], ctx: &mut Context, stdin: &Feed) -> Feed {
        // The first word may be a bundle of letters without a dash (`tar czf out.tgz dir`).
        let mut args = args.to_vec();
        if let Some(first) = args.first_mut() {
            if !first.starts_with('-') && first.bytes().all(|b| b.is_ascii_alphabetic()) {
                first.insert(0, '-');
            }
        }
        let o = args::parse(
            &args,
            &[
                "-f",
                "-C",
                "-T",
                "-X",
                "-b",
                "-K",
                "-N",
                "-g",
                "-I",
                "--file",
                "--directory",
                "--files-from",
                "--exclude-from",
                "--exclude",
                "--use-compress-program",
                "--to-command",
                "--newer",
                "--listed-incremental",
                "--transform",
                "--owner",
                "--group",
                "--mode",
                "--checkpoint-action",
            ],
            false,
        );
        let archive = o.value(&["-f", "--file"]);
        let dir = o.value(&["-C", "--directory"]);
        let mut sub = ctx.clone();
        if let Some(d) = dir.and_then(|d| normalize::shell_path(d, ctx)) {
            sub.cwd = d;
        }
        for f in o.values(&["-T", "--files-from", "-X", "--exclude-from"]) {
            self.path_op(Action::Read, f, ctx, None);
        }
        let listed = self.listed_names(&o.values(&["-T", "--files-from"]), ctx);
        let create = o.has(&[
            "-c",
            "-r",
            "-u",
            "-A",
            "--create",
            "--append",
            "--update",
            "--concatenate",
        ]);
        let extract = o.has(&["-x", "--extract", "--get"]);
        if create {
            if let Some(a) = archive {
                self.path_op(Action::Write, a, ctx, None);
            }
            let remove = o.has(&["--remove-files"]);
            for f in o
                .operands
                .iter()
                .copied()
                .chain(listed.iter().map(String::as_str))
            {
                self.tree_read(f, &sub);
                if remove {
                    self.tree_delete(f, &sub);
                }
            }
        } else {
            if let Some(a) = archive {
                self.path_op(Action::Read, a, ctx, None);
            }
            // Unpacked from a download, every file it writes is downloaded.
            let downloaded = match archive.filter(|a| *a != "-") {
                Some(a) => self.is_download(a, ctx),
                None => stdin.downloaded,
            };
            if extract {
                if o.operands.is_empty() {
                    // Unpacked into a directory, named on the line or the working one:
                    // any name in it.
                    match dir {
                        Some(d) => self.tree_write(d, ctx),
                        None => self.tree_write(".", &sub),
                    }
                    if downloaded {
                        self.downloaded_tree(".", &sub);
                    }
                }
                for f in &o.operands {
                    self.path_op(Action::Write, f, &sub, None);
                    if downloaded {
                        self.downloaded_to(f, &sub);
                        self.downloaded_tree(f, &sub);
                    }
                }
            }
        }
        Feed::default()
    }

    /// The names list files hold (`tar -T F`), when this line wrote them: one a line.
    fn listed_names(&self, lists: &[&str], ctx: &Context) -> Vec<String> {
        let mut names = Vec::new();
        for f in lists {
            if let Some(feed) = self.file_feed(f, ctx) {
                let text = feed.joined();
                names.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .take(64)
                        .map(str::to_owned),
                );
            }
        }
        names
    }

    /// `git init` / `git clone` with a template directory (`--template`, `-c
    /// init.templateDir=`, `GIT_TEMPLATE_DIR`) copy its hooks into the new repository's:
    /// they are written whole, with whatever the template holds.
    fn template_hooks(&mut self, verb: &str, ro: &args::Opts<'_>, config: &[&str], ctx: &Context) {
        let repo = match verb {
            "init" => ro
                .operands
                .first()
                .map_or_else(|| ".".to_owned(), |r| (*r).to_owned()),
            "clone" => match ro.operands.as_slice() {
                [_, dest, ..] => (*dest).to_owned(),
                [url] => clone_dest(url),
                [] => return,
            },
            _ => return,
        };
        let template = ro
            .value(&["--template"])
            .or_else(|| {
                config.iter().rev().find_map(|c| {
                    c.split_once('=')
                        .filter(|(k, _)| k.eq_ignore_ascii_case("init.templatedir"))
                        .map(|(_, v)| v)
                })
            })
            .or_else(|| ctx.var("GIT_TEMPLATE_DIR"))
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        let Some(template) = template else {
            return;
        };
        self.tree_read(&template, ctx);
        let repo = repo.trim_end_matches('/');
        let hooks = if ro.has(&["--bare"]) {
            format!("{repo}/hooks")
        } else {
            format!("{repo}/.git/hooks")
        };
        self.tree_write(&hooks, ctx);
    }

    /// git: global options (`-C`, `-c` keys that run commands), then what the verb does.
    pub(super) fn git(&mut self, args: &[String], ctx: &mut Context, depth: usize) -> Feed {
        let o = args::parse(args, super::canon::GIT_GLOBAL_VALUED, true);
        let mut sub = ctx.clone();
        for d in o.values(&["-C"]) {
            if let Some(p) = normalize::shell_path(d, &sub) {
                sub.cwd = p;
            }
        }
        // The repository and work tree git is pointed at are what it reads (`git
        // --git-dir=~/.password-store/.git show`).
        for d in o.values(&["--git-dir", "--work-tree"]) {
            self.path_op(Action::Read, d, &sub, None);
        }
        // Config given by the environment, `--config-env` and files git is told to read
        // runs as `-c` config does.
        let given = self.git_given_config(&o.values(&["-c"]), &o.values(&["--config-env"]), &sub);
        for c in o
            .values(&["-c"])
            .into_iter()
            .chain(given.iter().map(String::as_str))
        {
            // -c core.sshCommand=… / alias.x=!cmd run commands.
            if let Some((key, value)) = c.split_once('=') {
                let key = key.to_ascii_lowercase();
                if runs_git_config(&key) {
                    self.script(value.trim_start_matches('!'), &mut sub.clone(), depth + 1);
                }
            }
        }
        let Some((verb, rest)) = o.rest.split_first() else {
            return Feed::default();
        };
        let ro = args::parse(rest, GIT_VERB_VALUED, false);
        if verb == "rev-parse" {
            self.path_op(Action::Read, ".", &sub, None);
            return git_dir_paths(rest, &sub);
        }
        self.template_hooks(verb, &ro, &o.values(&["-c"]), &sub);
        match verb.as_str() {
            "clone" => {
                let mut ops = ro.operands.iter();
                if let Some(url) = ops.next() {
                    self.git_remote(url, &sub);
                    let dest = ops
                        .next()
                        .map_or_else(|| clone_dest(url), |d| (*d).to_owned());
                    self.path_op(Action::Write, &dest, &sub, None);
                    self.downloaded_tree(&dest, &sub);
                }
            }
            "fetch" | "pull" | "push" | "ls-remote" | "remote" | "submodule" => {
                self.git_remote_verb(verb, &ro, &sub);
            }
            "clean" => {
                let target: Vec<&str> = if ro.operands.is_empty() {
                    vec!["."]
                } else {
                    ro.operands.clone()
                };
                // It removes what is untracked inside each directory, never the directory
                // itself (`git clean -fdx` in a project that sits directly in $HOME).
                if !ro.has(&["-n", "--dry-run"]) {
                    for t in target {
                        let entries = format!("{}/*", t.trim_end_matches('/'));
                        self.path_op(Action::Delete, &entries, &sub, None);
                    }
                }
            }
            "rm" => {
                // `--cached` leaves the working file; `-n` only lists.
                if !ro.has(&["--cached", "-n", "--dry-run"]) {
                    for t in &ro.operands {
                        self.path_op(Action::Delete, t, &sub, None);
                    }
                }
            }
            "mv" => {
                if let Some((dst, srcs)) = ro.operands.split_last() {
                    for s in srcs {
                        self.path_op(Action::Delete, s, &sub, None);
                    }
                    self.path_op(Action::Write, dst, &sub, None);
                }
            }
            "checkout" | "restore" | "reset" | "switch" | "merge" | "rebase" | "cherry-pick"
            | "revert" | "stash" | "apply" | "am" | "init" => {
                self.path_op(Action::Write, ".", &sub, None);
                for t in ro.operands.iter().filter(|t| path_like(t)) {
                    self.path_op(Action::Write, t, &sub, None);
                }
            }
            "config" => self.git_config_verb(&ro, &sub),
            "commit" | "add" | "stage" | "tag" | "branch" | "gc" | "notes" | "worktree" => {
                self.path_op(Action::Read, ".", &sub, None);
                self.path_op(Action::Write, ".git", &sub, None);
                for f in ro.values(&["-F", "--file"]) {
                    self.path_op(Action::Read, f, &sub, None);
                }
                // `git add -f ~/.netrc`: the file named is read into the repository (and
                // from there pushed); the whole tree (`.`, `-A`, `:/`) is the project's.
                if matches!(verb.as_str(), "add" | "stage") {
                    for t in ro
                        .operands
                        .iter()
                        .filter(|t| !matches!(**t, "." | "./" | "*") && !t.starts_with(':'))
                    {
                        self.path_op(Action::Read, t, &sub, None);
                    }
                }
            }
            _ => {
                self.path_op(Action::Read, ".", &sub, None);
                let elsewhere = !o.values(&["-C"]).is_empty();
                self.git_outputs(verb, &ro, &sub, elsewhere);
                // Verbs whose operands are files outside any repository (`diff --no-index A
                // B`, `hash-object F`): bare names too, where other verbs take revisions.
                let files = (verb == "diff" && ro.has(&["--no-index"]))
                    || matches!(verb.as_str(), "hash-object" | "check-ignore" | "stripspace");
                // After `--` every operand is a path (`git log -p -- credentials`).
                let pathspecs = rest
                    .iter()
                    .position(|a| a == "--")
                    .map_or(&[][..], |i| &rest[i + 1..]);
                let named = ro.operands.iter().filter(|t| files || path_like(t));
                for t in named.copied().chain(pathspecs.iter().map(String::as_str)) {
                    self.path_op(Action::Read, t, &sub, None);
                    if verb == "diff" && files && !pseudo_operand(t) {
                        // Two directories are compared file by file.
                        let tree = format!("{}/**", t.trim_end_matches('/'));
                        self.path_op(Action::Read, &tree, &sub, None);
                    }
                }
            }
        }
        Feed::default()
    }

    /// What git verbs write besides the repository: `archive -o F`, `format-patch -o
    /// DIR`, `--output=F` of the diff family, `bundle create F`; and the verbs that print
    /// or pack the whole tree of a repository outside the working directory (`git -C
    /// ~/.ssh archive HEAD`) read that tree.
    fn git_outputs(&mut self, verb: &str, ro: &args::Opts<'_>, sub: &Context, elsewhere: bool) {
        for out in ro.values(&["-o", "--output", "--output-directory"]) {
            if verb == "format-patch" {
                self.tree_write(out, sub);
            } else {
                self.path_op(Action::Write, out, sub, None);
            }
        }
        if verb == "bundle" && ro.operands.first() == Some(&"create") {
            if let Some(file) = ro.operands.get(1) {
                self.path_op(Action::Write, file, sub, None);
            }
        }
        let packs_tree = matches!(verb, "archive" | "bundle" | "fast-export" | "format-patch");
        if packs_tree && elsewhere {
            self.tree_read(".", sub);
        }
    }

    /// A build of a tree downloaded earlier in the line runs that tree's code
    /// (`git clone URL && make -C r`).
    fn build_of_download(&mut self, base: &str, args: &[String], ctx: &Context) {
        if self.flow.downloads.is_empty() {
            return;
        }
        if let Some(dir) = super::builds::build_dir(base, args) {
            let dir = dir.trim_end_matches('/');
            // A downloaded tree, or a build file of this tool downloaded into a tree of
            // the agent's (`curl -o package.json URL && npm install`).
            if self.is_download(&format!("{dir}/build"), ctx)
                || super::builds::build_files(base)
                    .iter()
                    .any(|f| self.is_downloaded_file(&format!("{dir}/{f}"), ctx))
            {
                self.runs_download("sh", Reach::Script);
            }
        }
    }

    /// A build or task runner whose build file this line wrote runs what the file says
    /// (`printf 'all:\n\tCMD' > Makefile && make`, a package.json's scripts, build.rs,
    /// conftest.py): its commands and code are walked as if run here.
    fn build_of_written(&mut self, base: &str, args: &[String], ctx: &Context, depth: usize) {
        // `yarn NAME`, `pnpm NAME`, `bun NAME` run a script by its bare name.
        let node = matches!(base, "npm" | "pnpm" | "yarn" | "bun").then_some(".");
        let Some(dir) = super::builds::build_dir(base, args).or(node) else {
            return;
        };
        let dir = dir.trim_end_matches('/');
        let named = super::builds::named_build_file(base, args);
        let files = super::builds::build_files(base)
            .iter()
            .map(|f| format!("{dir}/{f}"))
            .chain(named.map(str::to_owned));
        for file in files {
            let Some(text) = self.file_feed(&file, ctx).map(|f| f.joined()) else {
                continue;
            };
            match super::builds::file_kind(&file) {
                super::builds::Kind::Recipes => {
                    for line in super::builds::recipe_lines(&text) {
                        self.script(&line, &mut ctx.clone(), depth + 1);
                    }
                }
                super::builds::Kind::Scripts => {
                    for script in super::builds::package_scripts(&text) {
                        self.script(&script, &mut ctx.clone(), depth + 1);
                    }
                }
                super::builds::Kind::Code => self.code(&text, &mut ctx.clone(), depth + 1),
                super::builds::Kind::Data => {}
            }
        }
    }

    /// `-c KEY=VALUE` words for the config git gets besides its own `-c` words: set by
    /// `git config` earlier in the line, and [`Self::git_given_config`].
    fn git_config_words(&self, args: &[String], ctx: &Context) -> Vec<String> {
        let config_env: Vec<&str> = args
            .iter()
            .filter_map(|a| a.strip_prefix("--config-env="))
            .chain(
                args.windows(2)
                    .filter(|w| w[0] == "--config-env")
                    .map(|w| w[1].as_str()),
            )
            .collect();
        let minus_c: Vec<&str> = args
            .windows(2)
            .filter(|w| w[0] == "-c")
            .map(|w| w[1].as_str())
            .collect();
        let given = self.git_given_config(&minus_c, &config_env, ctx);
        self.git_config
            .iter()
            .chain(&given)
            .flat_map(|kv| ["-c".to_owned(), kv.clone()])
            .collect()
    }

    /// Config git gets for this command besides its `-c` words: the environment's
    /// (`GIT_CONFIG_COUNT`…, `GIT_CONFIG_PARAMETERS`), `--config-env`, and the entries of
    /// config files it is told to read (`GIT_CONFIG_GLOBAL`, `include.path`) — their text
    /// written earlier in the line, or on disk.
    fn git_given_config(
        &self,
        minus_c: &[&str],
        config_env: &[&str],
        ctx: &Context,
    ) -> Vec<String> {
        let mut config = super::gitconfig::given(ctx, config_env);
        let set = minus_c
            .iter()
            .copied()
            .chain(self.git_config.iter().map(String::as_str))
            .chain(config.iter().map(String::as_str));
        let files: Vec<String> = super::gitconfig::config_files(ctx, set)
            .into_iter()
            .map(str::to_owned)
            .collect();
        for file in files {
            let text = match self.file_feed(&file, ctx) {
                Some(feed) => feed.text.join("\n"),
                None => ctx
                    .host
                    .as_deref()
                    .zip(normalize::shell_path(&file, ctx))
                    .and_then(|(h, p)| super::gitconfig::read_file(h, std::path::Path::new(&p)))
                    .unwrap_or_default(),
            };
            config.extend(super::gitconfig::entries(&text));
        }
        config
    }

    /// `git config`: the file it reads, and writes unless it only queries; a value set is
    /// text of the call and config later git commands of the line run with.
    fn git_config_verb(&mut self, ro: &args::Opts<'_>, sub: &Context) {
        let file = if ro.has(&["--global"]) {
            "~/.gitconfig".to_owned()
        } else if ro.has(&["--system"]) {
            "/etc/gitconfig".to_owned()
        } else if let Some(f) = ro.value(&["-f", "--file"]) {
            f.to_owned()
        } else {
            ".git/config".to_owned()
        };
        self.path_op(Action::Read, &file, sub, None);
        let querying = ro.has(&["--get", "--get-all", "--get-regexp", "-l", "--list"])
            || ro.operands.len() < 2;
        if !querying {
            self.path_op(Action::Write, &file, sub, None);
            if let [key, value, ..] = ro.operands.as_slice() {
                self.out.text(*value);
                self.git_config.push(format!("{key}={value}"));
            }
        }
    }

    /// `git fetch|pull|push|ls-remote|remote|submodule`: the remote reached (named on the
    /// line, or configured), and what the verb changes in the repository.
    fn git_remote_verb(&mut self, verb: &str, ro: &args::Opts<'_>, sub: &Context) {
        let remote =
            |w: &str| w.contains("://") || w.starts_with("ext::") || remote_host(w).is_some();
        if verb == "remote"
            && !matches!(
                ro.operands.first(),
                Some(&("add" | "set-url" | "update" | "prune" | "show"))
            )
        {
            self.path_op(Action::Read, ".", sub, None);
            return;
        }
        // The repository is the first operand (what follows are refspecs such as
        // `HEAD:main`, which look like scp addresses).
        let target = match (verb, ro.operands.first()) {
            ("remote", Some(&("add" | "set-url"))) => ro.operands.get(2),
            ("remote", _) => ro.operands.get(1),
            ("submodule", _) => ro.operands.iter().find(|w| remote(w)),
            _ => ro.operands.first(),
        };
        // A remote by name, or none (the branch's): its URL is in the repository's
        // config. Submodule URLs live elsewhere (.gitmodules); left hostless.
        let configured = || {
            sub.host
                .as_deref()
                .filter(|_| verb != "submodule")
                .and_then(|host| {
                    super::gitconfig::remote_url(
                        host,
                        &sub.cwd,
                        target.map(|t| &**t),
                        verb == "push",
                    )
                })
        };
        match target {
            Some(t) if remote(t) => self.git_remote(t, sub),
            _ => match configured() {
                Some(url) => self.git_remote(&url, sub),
                None => self.out.op(Operation {
                    action: Some(Action::Network),
                    ..Operation::default()
                }),
            },
        }
        self.path_op(Action::Read, ".", sub, None);
        if matches!(verb, "fetch" | "pull" | "submodule") {
            self.path_op(Action::Write, ".git", sub, None);
        }
        if verb == "pull" {
            self.path_op(Action::Write, ".", sub, None);
        }
    }

    /// Files a command reads by the names it gets on stdin, one a line (`cpio -o`,
    /// `zip -@`): known text name by name, listed names as the globs they came from.
    pub(super) fn read_names_on_stdin(&mut self, stdin: &Feed, ctx: &Context) {
        let names: Vec<String> = stdin
            .text
            .iter()
            .flat_map(|t| super::items::xargs_items(t, Some('\n')))
            .chain(stdin.names.iter().cloned())
            .collect();
        for n in names {
            self.path_op(Action::Read, n.trim(), ctx, None);
        }
    }

    fn git_remote(&mut self, url: &str, ctx: &Context) {
        // `ext::CMD ARGS` (with `protocol.ext.allow`): git runs the command, `% ` a space.
        if let Some(cmd) = url.strip_prefix("ext::") {
            self.script(&ext_command(cmd), &mut ctx.clone(), 1);
            return;
        }
        if let Some(host) = remote_host(url) {
            self.host_op(&host, Some(22), None);
        } else if url.starts_with("file://") || !url.contains("://") {
            self.path_op(Action::Read, url, ctx, None);
        } else {
            self.url_op(url, None);
        }
    }

    pub(super) fn openssl(&mut self, args: &[String], ctx: &mut Context, stdin: &Feed) -> Feed {
        let Some((verb, rest)) = args.split_first() else {
            return Feed::default();
        };
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut i = 0;
        while let Some(a) = rest.get(i) {
            i += 1;
            let value = rest.get(i).map(String::as_str);
            match a.as_str() {
                "-in" | "-inkey" | "-key" | "-CAfile" | "-cert" | "-signkey" | "-kfile"
                | "-config" | "-verify" | "-prverify" | "-certfile" | "-CAkey" | "-paramfile" => {
                    reads.extend(value);
                    i += 1;
                }
                "-out" | "-keyout" => {
                    writes.extend(value);
                    i += 1;
                }
                "-passin" | "-passout" | "-pass" => {
                    if let Some(f) = value.and_then(|v| v.strip_prefix("file:")) {
                        reads.push(f);
                    }
                    i += 1;
                }
                "-connect" => {
                    if let Some(v) = value {
                        self.url_op(v, None);
                    }
                    i += 1;
                }
                _ => {}
            }
        }
        for f in reads {
            self.path_op(Action::Read, f, ctx, None);
        }
        for f in writes {
            self.path_op(Action::Write, f, ctx, None);
        }
        let decode = rest.iter().any(|a| a == "-d")
            && (verb == "base64" || rest.iter().any(|a| a == "-a" || a == "-base64"));
        if decode {
            return self.decoded(&stdin.joined());
        }
        Feed::default()
    }
}

/// Whether a base64/base32/xxd invocation decodes.
pub(super) fn decoding(name: &str, args: &[String]) -> bool {
    args.iter().any(|a| {
        if name == "xxd" {
            a == "-r"
                || a == "--revert"
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('r'))
        } else if name == "uudecode" {
            true
        } else {
            a == "--decode"
                || (a.starts_with('-')
                    && !a.starts_with("--")
                    && (a.contains('d') || a.contains('D')))
        }
    }) || name == "uudecode"
}

/// What `which`, `command -v` and `type -P` print for the names among `args`.
pub(super) fn program_paths(args: &[String]) -> Feed {
    let text: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(|a| super::resolve::program_path(a))
        .collect();
    if text.is_empty() {
        Feed::default()
    } else {
        Feed::text(text.join("\n"))
    }
}

/// Readers that only look at a file's metadata or a directory's names (`file`, `wc` and
/// checksums read the bytes and are not among them).
const METADATA_ONLY: &[&str] = &[
    "stat", "readlink", "ls", "dir", "vdir", "du", "tree", "lsattr", "getfacl",
];

/// Where `pushd` keeps the directories `popd` returns to, newest first, one per line.
pub(super) const DIRSTACK: &str = "DIRSTACK";

/// The directory stack as bash keeps it: the working directory, then the directories
/// `pushd` left, newest first.
pub(super) fn dir_stack(ctx: &Context) -> Vec<String> {
    std::iter::once(ctx.cwd.clone())
        .chain(
            ctx.var(DIRSTACK)
                .unwrap_or("")
                .split('\n')
                .filter(|d| !d.is_empty())
                .map(str::to_owned),
        )
        .collect()
}

/// Makes `stack` the directory stack: its first entry becomes the working directory.
pub(super) fn set_dir_stack(ctx: &mut Context, stack: &[String]) {
    let Some((top, rest)) = stack.split_first() else {
        return;
    };
    if *top != ctx.cwd {
        let old = std::mem::replace(&mut ctx.cwd, top.clone());
        set_var(ctx, "OLDPWD", &old);
    }
    set_var(ctx, DIRSTACK, &rest.join("\n"));
}

/// Which entry of a stack of `len` a `+N` (from the top) or `-N` (from the bottom) names,
/// as `pushd`, `popd` and `dirs` count them.
pub(super) fn stack_index(arg: &str, len: usize) -> Option<usize> {
    let (from_top, n) = match arg.as_bytes().first()? {
        b'+' => (true, &arg[1..]),
        b'-' => (false, &arg[1..]),
        _ => return None,
    };
    let n: usize = n.parse().ok()?;
    (n < len).then(|| if from_top { n } else { len - 1 - n })
}

/// `pushd` without a directory (the top two entries swap) and `pushd +N`/`-N` (the stack
/// turns until entry N is on top): the working directory becomes one already on the
/// stack. Whether it was one of those.
fn pushd_within_stack(args: &[String], ctx: &mut Context) -> bool {
    let no_cd = args.iter().any(|a| a == "-n");
    let operand = args.iter().find(|a| !matches!(a.as_str(), "-n" | "--"));
    let mut stack = dir_stack(ctx);
    let below = 1.min(stack.len() - 1);
    match operand {
        None if !no_cd => stack.swap(0, below),
        Some(arg) => match stack_index(arg, stack.len()) {
            Some(i) if !no_cd => stack.rotate_left(i),
            Some(_) => {}
            None => return false,
        },
        None => {}
    }
    set_dir_stack(ctx, &stack);
    true
}

/// What `env`, `printenv` and `export -p` print: the environment.
pub(super) fn environment_feed() -> Feed {
    Feed {
        environment: true,
        ..Feed::default()
    }
}

/// The paths a `find START -path PATTERN` test can select: PATTERN is matched against the
/// whole path as find writes it, which begins with START as written, so a pattern that
/// begins with START (or with a wildcard) is a glob of those paths under START's absolute
/// path. `None` for a pattern this cannot place (the walk of START stands).
fn find_path(written: &str, start: &str, pattern: &str) -> Option<Vec<String>> {
    let written = written.trim_end_matches('/');
    let rest = if pattern.starts_with(['*', '?']) {
        pattern
    } else {
        let rest = pattern.strip_prefix(written)?;
        if rest.is_empty() {
            return Some(vec![start.to_owned()]);
        }
        rest.strip_prefix('/')?
    };
    Some(
        super::find_names::path_globs(rest)
            .into_iter()
            .map(|g| format!("{start}/{g}"))
            .collect(),
    )
}

/// Whether git runs the value of config `key` (lower case) as a command: ssh and proxy
/// commands, editors and pagers (`pager.<verb>` too), helpers and drivers, hooks, `!`
/// aliases.
fn runs_git_config(key: &str) -> bool {
    let (section, name) = key.rsplit_once('.').unwrap_or(("", key));
    let section = section.split('.').next().unwrap_or(section);
    matches!(section, "alias" | "pager")
        || matches!(
            name,
            "sshcommand"
                | "fsmonitor"
                | "editor"
                | "pager"
                | "askpass"
                | "helper"
                | "external"
                | "program"
                | "textconv"
                | "clean"
                | "smudge"
                | "process"
                | "driver"
                | "cmd"
                | "command"
                | "alternaterefscommand"
                | "packobjectshook"
                | "gitproxy"
                | "difffilter"
                | "smtpserver"
                | "uploadpack"
                | "receivepack"
        )
}

/// The command line of git's `ext::` transport, quoted for the shell: words split at
/// spaces, `% ` a space within a word and `%%` a percent sign (`%S`, `%s`, `%G` stand for
/// git's own values and are kept as written).
fn ext_command(spec: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut chars = spec.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => match chars.next() {
                Some(' ') => word.push(' '),
                Some('%') => word.push('%'),
                Some(other) => {
                    word.push('%');
                    word.push(other);
                }
                None => {}
            },
            ' ' => words.push(std::mem::take(&mut word)),
            c => word.push(c),
        }
    }
    words.push(word);
    words
        .iter()
        .filter(|w| !w.is_empty())
        .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}
