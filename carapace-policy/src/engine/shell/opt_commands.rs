//! Commands that programs run because an option names them, whatever the program does
//! otherwise: tar's `--to-command`, `--use-compress-program` and `--checkpoint-action=exec=`,
//! rsync's `-e`, zip's `-TT`, scp's `-S`, and the editor commands of vim and ex (`-c
//! ':!CMD'`, `-c 'r FILE'`, `-c 'w FILE'`). Each is walked as the shell line (or the file
//! operation) it is, on top of what the program's own entry says about its arguments.
use super::super::operation::Context;
use super::flow::Reach;
use super::walk::Walker;
use crate::rules::Action;

/// How a program spells the options whose value is a command it runs. Short options are
/// parsed as getopt does, which needs every short option that takes a value: in
/// `tar -xvI"sh -c …"` the `I` takes the rest of the cluster, and in `tar -xfI a.tar`
/// nothing after `f` is an option.
struct CommandOptions {
    /// Letters of every short option that takes a value (the command ones included).
    short_valued: &'static str,
    /// Letters of the short options whose value is a command.
    short_code: &'static str,
    /// Long options whose value is a command; `getopt_long` takes any unambiguous prefix of
    /// them (`--use-compress`, `--rs`), so a prefix is read as the option.
    long_code: &'static [&'static str],
    /// Options outside getopt (zip's `-TT`): only `OPT VALUE` and `OPT=VALUE`.
    exact: &'static [&'static str],
    /// The first argument may be a bundle of letters without a dash whose values follow
    /// in order (`tar xvfI a.tar CMD`).
    bundled: bool,
}

impl CommandOptions {
    const NONE: CommandOptions = CommandOptions {
        short_valued: "",
        short_code: "",
        long_code: &[],
        exact: &[],
        bundled: false,
    };
}

/// The command options of `name` (a match, so that the names of every other program cost
/// one comparison of lengths and bytes).
fn command_options(name: &str) -> Option<&'static CommandOptions> {
    const TAR: CommandOptions = CommandOptions {
        short_valued: "bCfFgHIKLNTVX",
        short_code: "IF",
        long_code: &[
            "--to-command",
            "--use-compress-program",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
            "--rsh-command",
        ],
        exact: &[],
        bundled: true,
    };
    const RSYNC: CommandOptions = CommandOptions {
        short_valued: "eBTfM@",
        short_code: "e",
        long_code: &["--rsh"],
        ..CommandOptions::NONE
    };
    const ZIP: CommandOptions = CommandOptions {
        long_code: &["--unzip-command"],
        exact: &["-TT"],
        ..CommandOptions::NONE
    };
    const SCP: CommandOptions = CommandOptions {
        short_valued: "BbcDFiJlLoPRSsX",
        short_code: "S",
        ..CommandOptions::NONE
    };
    match name {
        "tar" | "bsdtar" | "gtar" => Some(&TAR),
        "rsync" => Some(&RSYNC),
        "zip" => Some(&ZIP),
        "scp" | "sftp" => Some(&SCP),
        // `flock -c`, `script -c` and `su -c` are their table entries' own.
        _ => None,
    }
}

/// What a program makes of an environment variable it is given.
enum Environment {
    /// A command line it runs (`GIT_SSH_COMMAND`, `PAGER`, `LESSOPEN='|cmd %s'`).
    Command,
    /// A script a shell sources before anything else: `BASH_ENV` for a non-interactive
    /// bash, `ENV` for an interactive sh (a tool may start one: `sh -i`).
    Sourced,
    /// Files the program loads as its own code before it starts (`LD_PRELOAD=/tmp/x.so`,
    /// `NODE_OPTIONS='--require ./x.js'`, `RUBYOPT=-r./x`, `PYTHONSTARTUP`): each is run.
    Loaded,
}

/// The variables whose value a program runs, whichever program reads them: a value set
/// for one command (`GIT_SSH_COMMAND='…' git fetch`) or exported for later ones is walked
/// as the code it is. A match on the name, so other variables cost one comparison.
fn environment(name: &str) -> Option<Environment> {
    match name {
        "GIT_SSH_COMMAND"
        | "GIT_SSH"
        | "GIT_PROXY_COMMAND"
        | "GIT_EXTERNAL_DIFF"
        | "GIT_PAGER"
        | "GIT_EDITOR"
        | "GIT_SEQUENCE_EDITOR"
        | "GIT_ASKPASS"
        | "SSH_ASKPASS"
        | "RSYNC_RSH"
        | "RSYNC_CONNECT_PROG"
        | "CVS_RSH"
        | "PAGER"
        | "MANPAGER"
        | "SYSTEMD_PAGER"
        | "EDITOR"
        | "VISUAL"
        | "LESSOPEN"
        | "LESSCLOSE"
        | "BROWSER"
        | "PROMPT_COMMAND" => Some(Environment::Command),
        "BASH_ENV" | "ENV" => Some(Environment::Sourced),
        "LD_PRELOAD" | "LD_AUDIT" | "NODE_OPTIONS" | "RUBYOPT" | "PYTHONSTARTUP" | "PERL5OPT" => {
            Some(Environment::Loaded)
        }
        _ => None,
    }
}

/// Whether a program acts on variable `name` beyond reading it as data: it runs its value
/// ([`environment`]) or takes git config from it (`GIT_CONFIG_COUNT`…).
pub(super) fn acts_on_variable(name: &str) -> bool {
    environment(name).is_some()
        || matches!(
            name,
            "GIT_CONFIG_COUNT"
                | "GIT_CONFIG_PARAMETERS"
                | "GIT_CONFIG_GLOBAL"
                | "GIT_CONFIG_SYSTEM"
                | "GIT_CONFIG"
        )
        || ["GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"].iter().any(|p| {
            name.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// The files a loader variable's value names ([`Environment::Loaded`]): `LD_PRELOAD`'s
/// list (`:` or blank separated), and the files the interpreters' options load (`node
/// --require F` / `-r F` / `--import F` / `--loader F`, `ruby -rF`).
fn loaded_files<'v>(name: &str, value: &'v str) -> Vec<&'v str> {
    match name {
        "LD_PRELOAD" | "LD_AUDIT" => value
            .split([':', ' ', '\t'])
            .filter(|f| !f.is_empty())
            .collect(),
        "PYTHONSTARTUP" => vec![value.trim()],
        _ => {
            let mut out = Vec::new();
            let mut words = value.split_whitespace();
            while let Some(word) = words.next() {
                let (option, attached) = match word.split_once('=') {
                    Some((o, v)) => (o, Some(v)),
                    None => (word, None),
                };
                if matches!(
                    option,
                    "-r" | "--require" | "--import" | "--loader" | "--experimental-loader"
                ) {
                    out.extend(attached.or_else(|| words.next()));
                } else if let Some(file) = word.strip_prefix("-r").filter(|f| !f.is_empty()) {
                    out.push(file);
                }
            }
            out
        }
    }
}

/// The files Perl's switches load as code (`-MFoo::Bar`, `-mFoo`, `-d:Trace`), found in the
/// directories `-I` and `PERL5LIB` add (`-I/tmp/m -MEvil` loads `/tmp/m/Evil.pm`). Perl
/// searches its own library too, which holds no file this line could have written.
pub(super) fn perl_module_files(switches: &[&str], ctx: &Context) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    let mut modules: Vec<String> = Vec::new();
    let mut words = switches.iter();
    while let Some(word) = words.next() {
        if let Some(dir) = word.strip_prefix("-I") {
            let dir = if dir.is_empty() {
                words.next().copied()
            } else {
                Some(dir)
            };
            dirs.extend(dir.map(str::to_owned));
        } else if let Some(module) = word.strip_prefix("-M").or_else(|| word.strip_prefix("-m")) {
            let module = if module.is_empty() {
                words.next().copied()
            } else {
                Some(module)
            };
            // `-M-Foo` is `no Foo`, which loads Foo.pm all the same.
            modules.extend(
                module
                    .map(|m| m.trim_start_matches('-'))
                    .map(|m| m.split(['=', ' ']).next().unwrap_or(m).to_owned()),
            );
        } else if let Some(debugger) = word
            .strip_prefix("-d:")
            .or_else(|| word.strip_prefix("-dt:"))
        {
            let module = debugger.split('=').next().unwrap_or(debugger);
            modules.push(format!("Devel::{module}"));
        }
    }
    if modules.is_empty() {
        return Vec::new();
    }
    if let Some(lib) = ctx.var("PERL5LIB") {
        dirs.extend(lib.split(':').filter(|d| !d.is_empty()).map(str::to_owned));
    }
    let mut files = Vec::new();
    for dir in &dirs {
        for module in &modules {
            if module.is_empty()
                || !module
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
            {
                continue;
            }
            let rel = module.replace("::", "/");
            let dir = if dir.contains('/') {
                dir.clone()
            } else {
                format!("./{dir}")
            };
            files.push(format!("{}/{rel}.pm", dir.trim_end_matches('/')));
        }
    }
    files
}

/// Whether a program runs what `name`'s value says: a command line, a script it sources,
/// files it loads as code.
pub(super) fn makes_run(name: &str) -> bool {
    environment(name).is_some()
}

/// Editors whose `-c`/`--cmd`/`+` values are ex commands.
fn ex_editor(name: &str) -> bool {
    matches!(
        name,
        "vi" | "vim" | "nvim" | "ex" | "view" | "rvim" | "vimdiff" | "gvim"
    )
}

impl Walker<'_> {
    /// The commands `name`'s options make it run, and the files its editor commands read
    /// and write. A match on the name first: other programs cost nothing more.
    pub(super) fn option_commands(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &Context,
        depth: usize,
    ) {
        if ex_editor(name) {
            for cmd in ex_commands(args) {
                self.ex_command(cmd, ctx, depth);
            }
            return;
        }
        let Some(options) = command_options(name) else {
            return;
        };
        for value in option_values(args, options) {
            // `--checkpoint-action=exec=CMD` (also `exec:CMD` in older tars).
            let value = value
                .strip_prefix("exec=")
                .or_else(|| value.strip_prefix("exec:"))
                .unwrap_or(value);
            self.script(value, &mut ctx.clone(), depth + 1);
        }
    }

    /// A variable set to a command some program runs (see [`environment`]).
    pub(super) fn environment_command(
        &mut self,
        name: &str,
        value: &str,
        ctx: &Context,
        depth: usize,
    ) {
        match environment(name) {
            Some(Environment::Command) => {
                // less's input preprocessor is `|CMD %s` or `||CMD %s`.
                let code = value.trim_start_matches(['|', '-']);
                self.script(code, &mut ctx.clone(), depth + 1);
            }
            // sh's `ENV` is a common name for other things (`ENV=production`): only a
            // path is a script.
            Some(Environment::Sourced)
                if !value.is_empty() && (name != "ENV" || value.contains('/')) =>
            {
                // The shell expands the value first (parameters, command substitution,
                // arithmetic): `BASH_ENV='$(curl -s URL | sh)'` runs the download.
                if value.contains(['$', '`']) {
                    self.script(&format!(": {value}"), &mut ctx.clone(), depth + 1);
                }
                self.script_file(value, &mut ctx.clone(), depth + 1, true);
            }
            Some(Environment::Loaded) => {
                let files: Vec<String> = if name == "PERL5OPT" {
                    let words: Vec<&str> = value.split_whitespace().collect();
                    perl_module_files(&words, ctx)
                } else {
                    loaded_files(name, value)
                        .into_iter()
                        .map(str::to_owned)
                        .collect()
                };
                for file in files {
                    // Only a file that is a path is loaded from one (`-r ts-node/register`
                    // is a package): bare names are looked up where Layer 1 cannot see.
                    if file.contains('/') {
                        self.loaded_code(&file, ctx, depth);
                    }
                }
            }
            _ => {}
        }
    }

    /// A file a program loads as its own code before it starts: run, and when this line
    /// wrote it, its code is what runs (`echo CODE > /tmp/m/X.pm; PERL5OPT=-MX …`).
    pub(super) fn loaded_code(&mut self, file: &str, ctx: &Context, depth: usize) {
        self.path_op(Action::Execute, file, ctx, None);
        if self.is_download(file, ctx) {
            self.runs_download("sh", Reach::Script);
        }
        if let Some(code) = self.file_feed(file, ctx).map(|f| f.joined()) {
            if !code.is_empty() {
                self.code(&code, &mut ctx.clone(), depth + 1);
            }
        }
    }

    /// One ex command line (`:!cat x`, `r FILE`, `w! FILE | q`).
    fn ex_command(&mut self, line: &str, ctx: &Context, depth: usize) {
        let mut rest = line;
        for _ in 0..32 {
            let cmd = rest.trim_start_matches([' ', '\t', ':']);
            if cmd.is_empty() {
                return;
            }
            // `!CMD` takes the rest of the line, bars included.
            if let Some(shell) = cmd.strip_prefix('!') {
                self.script(shell, &mut ctx.clone(), depth + 1);
                return;
            }
            let (this, next) = cmd.split_once('|').unwrap_or((cmd, ""));
            let name_end = this
                .find(|c: char| !c.is_ascii_alphabetic())
                .unwrap_or(this.len());
            let (word, arg) = this.split_at(name_end);
            let arg = arg.trim_start_matches('!').trim();
            // `r !CMD`, `w !CMD`: the text goes through a command (the rest of the line).
            if let Some(shell) = arg.strip_prefix('!') {
                let shell = cmd.split_once('!').map_or(shell, |(_, s)| s);
                let shell = shell.trim_start_matches('!');
                self.script(shell, &mut ctx.clone(), depth + 1);
                return;
            }
            let action = match word {
                "r" | "re" | "rea" | "read" | "so" | "sou" | "sour" | "sourc" | "source" | "e"
                | "ed" | "edi" | "edit" | "sp" | "split" | "vs" | "vsplit" | "tabe" | "tabedit"
                | "new" | "vne" | "vnew" => Some(Action::Read),
                "w" | "wr" | "wri" | "writ" | "write" | "wq" | "x" | "xi" | "xit" | "exi"
                | "exit" | "sav" | "saveas" | "up" | "update" | "wa" | "wall" => {
                    Some(Action::Write)
                }
                _ => None,
            };
            if let (Some(action), false) = (action, arg.is_empty()) {
                // `w >> FILE` appends.
                let file = arg.trim_start_matches('>').trim();
                if !file.is_empty() {
                    self.path_op(action, file, ctx, None);
                }
            }
            rest = next;
        }
    }
}

/// The values of the command options in `args`, parsed as the program's getopt does:
/// `-o VALUE`, `-oVALUE`, a cluster ending in one (`-xvIzstd`, `-ave CMD`), `--opt VALUE`,
/// `--opt=VALUE` and their unambiguous prefixes, and tar's dashless first bundle.
/// Operands after `--` are not options.
fn option_values<'a>(args: &'a [String], spec: &CommandOptions) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if a == "--" {
            break;
        }
        if let Some(opt) = spec.exact.iter().find(|o| a.starts_with(**o)) {
            match &a[opt.len()..] {
                "" => {
                    out.extend(args.get(i).map(String::as_str));
                    i += 1;
                }
                attached => out.extend(attached.strip_prefix('=')),
            }
        } else if let Some(long) = a.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let code = !name.is_empty()
                && spec
                    .long_code
                    .iter()
                    .any(|o| o.get(2..).is_some_and(|o| o.starts_with(name)));
            if code {
                if let Some(v) = value {
                    out.push(v);
                } else {
                    out.extend(args.get(i).map(String::as_str));
                    i += 1;
                }
            }
        } else if let Some(cluster) = a.strip_prefix('-').filter(|c| !c.is_empty()) {
            // The first letter that takes a value takes the rest of the cluster, or the
            // next argument when nothing is left.
            if let Some((j, c)) = cluster
                .char_indices()
                .find(|(_, c)| spec.short_valued.contains(*c))
            {
                let attached = &cluster[j + c.len_utf8()..];
                let value = if attached.is_empty() {
                    i += 1;
                    args.get(i - 1).map(String::as_str)
                } else {
                    Some(attached)
                };
                if spec.short_code.contains(c) {
                    out.extend(value);
                }
            }
        } else if i == 1 && spec.bundled {
            // `tar xvfI a.tar CMD`: each letter that takes a value takes the next argument.
            for c in a.chars().filter(|c| spec.short_valued.contains(*c)) {
                if spec.short_code.contains(c) {
                    out.extend(args.get(i).map(String::as_str));
                }
                i += 1;
            }
        }
    }
    out
}

/// The ex commands of an editor's line: `-c CMD`, `--cmd CMD`, `+CMD`, and `-c` at the end
/// of a cluster (`ex -sc CMD`).
fn ex_commands(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if a == "--" {
            break;
        }
        if a == "--cmd" || (a.starts_with('-') && !a.starts_with("--") && a.ends_with('c')) {
            if let Some(v) = args.get(i) {
                out.push(v.as_str());
                i += 1;
            }
        } else if let Some(cmd) = a.strip_prefix('+').filter(|c| !c.is_empty()) {
            // `+N` is a line number, `+/re` a search: neither runs anything.
            if !cmd.starts_with(|c: char| c.is_ascii_digit() || c == '/' || c == '?') {
                out.push(cmd);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{command_options, ex_commands, option_values};

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| (*w).to_owned()).collect()
    }

    fn values(name: &str, args: &[&str]) -> Vec<String> {
        let spec = command_options(name).expect("a program with command options");
        let args = words(args);
        option_values(&args, spec)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn option_values_in_every_spelling() {
        let args = ["-essh -p 2", "--rsh=sh -c x", "-e", "ssh", "--", "-e", "no"];
        assert_eq!(values("rsync", &args), ["ssh -p 2", "sh -c x", "ssh"]);
        assert_eq!(values("zip", &["-T", "-TT", "cat x", "-TTy"]), ["cat x"]);
    }

    #[test]
    fn clusters_prefixes_and_bundles_as_getopt_reads_them() {
        // The command option at the end of a cluster, its value attached or next.
        assert_eq!(values("tar", &["-xIzstd", "-f", "a"]), ["zstd"]);
        assert_eq!(values("tar", &["-xvIsh -c x", "-f", "a"]), ["sh -c x"]);
        assert_eq!(values("rsync", &["-ave", "sh -c x", "s", "d"]), ["sh -c x"]);
        assert_eq!(values("scp", &["-qSx", "a", "h:b"]), ["x"]);
        // A letter that takes a value before it: the rest is that value, not an option.
        assert!(values("tar", &["-cfI", "a"]).is_empty());
        assert!(values("rsync", &["-avB1024", "-Teo", "s", "d"]).is_empty());
        // Unambiguous prefixes of long options.
        assert_eq!(
            values("tar", &["--use-compress=x", "--to-comm", "y"]),
            ["x", "y"]
        );
        assert_eq!(values("rsync", &["--rs=x"]), ["x"]);
        assert!(values("tar", &["--verbose", "--", "--to-command=x"]).is_empty());
        // tar's dashless bundle takes its values in order.
        assert_eq!(values("tar", &["xvfI", "a.tar", "x"]), ["x"]);
        assert_eq!(values("tar", &["xIf", "x", "a.tar"]), ["x"]);
        assert!(values("tar", &["xvf", "a.tar", "xI"]).is_empty());
    }

    #[test]
    fn editor_commands() {
        let args = words(&["-sc", "w! x|q", "+10", "+/re", "+:!ls", "--cmd", "r y", "f"]);
        assert_eq!(ex_commands(&args), vec!["w! x|q", ":!ls", "r y"]);
    }
}

#[cfg(test)]
mod perl_module_tests {
    use super::*;

    #[test]
    fn modules_are_found_in_the_directories_given() {
        let ctx = Context::default();
        assert_eq!(
            perl_module_files(&["-I/tmp/m", "-MEvil"], &ctx),
            ["/tmp/m/Evil.pm"]
        );
        assert_eq!(
            perl_module_files(&["-I", "lib", "-MFoo::Bar=baz", "-d:Trace"], &ctx),
            ["./lib/Foo/Bar.pm", "./lib/Devel/Trace.pm"]
        );
        // Perl's own library is not where this line writes.
        assert!(perl_module_files(&["-MCarp"], &ctx).is_empty());
        assert!(perl_module_files(&["-I/tmp/m"], &ctx).is_empty());
    }
}
