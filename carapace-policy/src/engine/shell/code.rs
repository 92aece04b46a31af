//! Interpreters (`python`, `node`, `perl`, …): script files are read and executed; inline
//! code is text, and its string literals are read conservatively: paths become reads (writes
//! or deletes when the call around them says so), URLs network operations, and strings
//! handed to `system`/`popen`/`exec`-like calls are walked as shell commands.
use base64::Engine as _;

use super::super::normalize;
use super::super::operation::{Context, Operation};
use super::args;
use super::code_env;
use super::code_eval;
use super::code_refs;
use super::flow::{self, Reach};
use super::names::path_like;
use super::quote::shell_quote;
use super::vars;
use super::walk::{Feed, Walker};
use crate::rules::Action;

/// Calls whose string argument is a shell command.
/// Most printed values one walk keeps for its interpreters' output.
const MAX_PRINTED: usize = 16;

/// Calls that print their argument to the code's output (`print('cat ~/.ssh/config')`
/// shows a command to a person; the output piped to a shell is that shell's script).
const PRINT_CALLS: &[&str] = &[
    "print(",
    "print ",
    "println(",
    "println!(",
    "puts(",
    "puts ",
    "console.log(",
    "console.error(",
    "console.info(",
    "echo ",
    "say ",
    "say(",
    "warn(",
    "warn ",
    "pp(",
];

const SHELL_CALLS: &[&str] = &[
    "system(",
    "popen(",
    // Lua: `os.execute("…")`, and `os.execute "…"` (a call with one string needs no
    // parentheses there); `io.popen` is caught by `popen(`.
    "os.execute(",
    "os.execute",
    "io.popen",
    "exec(",
    "execSync(",
    "spawnSync(",
    "spawn(",
    "check_output(",
    "check_call(",
    "call(",
    "run(",
    "Popen(",
    "getoutput(",
    "getstatusoutput(",
    "shell_exec(",
    "passthru(",
    "proc_open(",
    "qx(",
    "%x(",
    "capture2(",
    "capture3(",
    "execFile(",
    "execFileSync(",
    "system ",
    "exec ",
    "Command(",
];
/// Calls that delete the path they are given.
const DELETE_CALLS: &[&str] = &[
    "remove(",
    "unlink(",
    "rmtree(",
    "rmdir(",
    "unlinkSync(",
    "rmSync(",
    "rmdirSync(",
    "removedirs(",
    "rm(",
    "rm_rf(",
    "rm_r(",
    "delete(",
    "unlink ",
    "remove_tree(",
    "rimraf(",
    "rimrafSync(",
    "removeSync(",
    "emptyDirSync(",
    "rm_f(",
    "rmrf(",
    "remove_dir_all(",
];
/// Calls that list a tree below the path they are given (`os.walk(ROOT)`, `Path(ROOT).rglob`,
/// `fs.readdirSync(ROOT)`, Ruby's `Find.find(ROOT)`): in code that also deletes, the names
/// they yield are what gets deleted, so the tree is.
const WALK_CALLS: &[&str] = &[
    "walk(",
    "fwalk(",
    "rglob(",
    "glob(",
    "iglob(",
    "scandir(",
    "listdir(",
    "readdirSync(",
    "readdir(",
    "opendir(",
    "Find.find(",
    "Dir.glob(",
    "Dir.children(",
    "Dir.each_child(",
    "Dir.entries(",
    "WalkDir::new(",
    "read_dir(",
];

/// Calls that read the path they are given (the relative names they take are paths).
const READ_CALLS: &[&str] = &[
    "open(",
    "fopen(",
    "file(",
    "readFileSync(",
    "readFile(",
    "createReadStream(",
    "readlines(",
    "foreach(",
    "file_get_contents(",
    "readfile(",
    "readTextFileSync(",
    "readTextFile(",
    "readFileStr(",
    "Bun.file(",
    "openSync(",
    "File.new(",
    "readJsonSync(",
    "readJSON(",
    "io.open(",
    "io.lines(",
    "IO.read(",
    "File.read(",
    "File.open(",
    "File.readlines(",
    "File.foreach(",
    "File.binread(",
    "open_file(",
    "loadtxt(",
    "read_csv(",
    "getline <",
    "getline<",
    "copytree(",
    "make_archive(",
    "tarfile.open(",
    "ZipFile(",
];
/// Calls that write the path they are given.
const WRITE_CALLS: &[&str] = &[
    "writeFile(",
    "writeFileSync(",
    "appendFile(",
    "appendFileSync(",
    "write_text(",
    "write_bytes(",
    "createWriteStream(",
    "copyfile(",
    "copy(",
    "copy2(",
    "move(",
    "rename(",
    "renameSync(",
    "copyFileSync(",
    "chmod(",
    "chown(",
    "symlink(",
    "symlinkSync(",
    "makedirs(",
    "mkdir(",
    "mkdirSync(",
    "touch(",
    "file_put_contents(",
    "IO.write(",
    "File.write(",
];

/// Writing calls whose first argument is only read (or, for a link, named).
const COPY_CALLS: &[&str] = &[
    "copyfile(",
    "copy(",
    "copy2(",
    "copytree(",
    "copyFileSync(",
    "copyFile(",
    "cpSync(",
    "cp_r(",
    "copy_tree(",
    "symlink(",
    "symlinkSync(",
];

/// Copy calls that copy a directory with everything below it.
const TREE_COPY_CALLS: &[&str] = &["copytree(", "cpSync(", "cp_r(", "copy_tree("];

/// Options of an interpreter (by family name): those that take a value, those whose value
/// is code (`python -c`), and those whose value is a file of code (`php -f`, `R --file`).
type InterpreterOptions = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

/// The options of the interpreter `name`.
fn interpreter_options(name: &str) -> InterpreterOptions {
    match name {
        "python" => (&["-c", "-m", "-W", "-X", "-Q"], &["-c"], &[]),
        "node" | "nodejs" => (
            &[
                "-e",
                "--eval",
                "-p",
                "--print",
                "-r",
                "--require",
                "--import",
                "--loader",
                "--experimental-loader",
                "--input-type",
                "-C",
                "--conditions",
                "--env-file",
                "--title",
                "--inspect-port",
            ],
            &["-e", "--eval", "-p", "--print"],
            &["--env-file", "-r", "--require", "--import"],
        ),
        "perl" => (
            &["-e", "-E", "-I", "-M", "-m", "-x", "-C"],
            &["-e", "-E"],
            &[],
        ),
        "ruby" | "irb" => (&["-e", "-r", "-I", "-C", "-E", "-F", "-W"], &["-e"], &[]),
        "php" => (
            &[
                "-r", "-f", "-c", "-d", "-B", "-R", "-F", "-E", "-t", "-z", "-S",
            ],
            &["-r", "-B", "-R", "-E"],
            &["-f", "-F"],
        ),
        "lua" | "luajit" => (&["-e", "-l"], &["-e"], &[]),
        "Rscript" | "osascript" | "tclsh" | "julia" => (&["-e", "-E"], &["-e", "-E"], &[]),
        "R" => (&["-e", "-f", "--file"], &["-e"], &["-f", "--file"]),
        "ts-node" | "tsx" => (
            &[
                "-e",
                "--eval",
                "-p",
                "--print",
                "-r",
                "--require",
                "-P",
                "--project",
            ],
            &["-e", "--eval", "-p", "--print"],
            &["-r", "--require"],
        ),
        "ipython" => (&["-c", "-m", "-i"], &["-c"], &[]),
        "sbcl" => (
            &["--eval", "--load", "--script"],
            &["--eval"],
            &["--load", "--script"],
        ),
        "clisp" => (&["-x", "-i"], &["-x"], &["-i"]),
        "guile" => (&["-c", "-l", "-s", "-e"], &["-c"], &["-l", "-s"]),
        "racket" => (&["-e", "-f", "-t", "-l"], &["-e"], &["-f", "-t"]),
        "elixir" => (&["-e", "-r"], &["-e"], &["-r"]),
        "groovy" | "scala" => (&["-e"], &["-e"], &[]),
        "expect" => (&["-c", "-f"], &["-c"], &["-f"]),
        "deno" | "bun" => (
            &[
                "-e",
                "--eval",
                "--config",
                "-c",
                "--import-map",
                "--env-file",
            ],
            &["-e", "--eval"],
            &["--config", "-c", "--import-map", "--env-file"],
        ),
        _ => (&[], &[], &[]),
    }
}

impl Walker<'_> {
    /// An interpreter of another language: its code (`-c`, `-e`), script file or stdin.
    #[expect(
        clippy::too_many_lines,
        reason = "one pass: code options, files, then the script or stdin it runs"
    )]
    pub fn interpreter(
        &mut self,
        name: &str,
        args: &[String],
        ctx: &mut Context,
        depth: usize,
        stdin: &Feed,
    ) -> Feed {
        let (valued, code_flags, file_flags) = interpreter_options(name);
        if matches!(name, "pwsh" | "powershell") {
            // Only options (`-`, `-NoProfile`, `-Command -`): the code comes on stdin.
            if stdin.downloaded && args.iter().all(|a| a.starts_with('-')) {
                self.runs_download(name, Reach::Stdin);
            }
            self.code_from_download(name, &args.join(" "));
            self.powershell(args, ctx, depth);
            return Feed::default();
        }
        // `sbcl --script` with no file reads the script on stdin.
        let args = &script_flag_value(name, args);
        // python -m MODULE: what follows is the module's, not python's.
        let (args, module_args): (&[String], &[String]) = if matches!(name, "python" | "ipython") {
            split_python_module(args)
        } else {
            (args, &[])
        };
        let o = args::parse(args, valued, true);
        if name == "perl" {
            self.perl_modules(args, ctx, depth);
        }
        for f in o.values(file_flags) {
            self.path_op(Action::Read, f, ctx, None);
            if name == "php" {
                self.path_op(Action::Execute, f, ctx, None);
            }
            self.script_source(name, f, stdin, ctx);
        }
        // php -S ADDR serves its document root (-t DIR, else the working directory).
        if name == "php" && o.has(&["-S"]) {
            self.tree_read(o.value(&["-t"]).unwrap_or("."), ctx);
        }
        // ruby -run -e httpd [DIR]: un.rb's file server, the working directory by default.
        if name == "ruby"
            && o.values(&["-r"]).contains(&"un")
            && o.values(&["-e"]).iter().any(|c| c.trim() == "httpd")
        {
            let dir = o
                .operands
                .iter()
                .copied()
                .chain(o.rest.iter().map(String::as_str))
                .find(|a| !a.starts_with('-'));
            self.tree_read(dir.unwrap_or("."), ctx);
        }
        let codes = o.values(code_flags);
        let mut rest = o.rest;
        // deno run FILE / bun run FILE / deno eval CODE.
        if matches!(name, "deno" | "bun") {
            match rest.first().map(String::as_str) {
                Some("eval" | "-e") => {
                    if let Some(c) = rest.get(1) {
                        self.code(c, ctx, depth);
                    }
                    return Feed::default();
                }
                Some("run" | "x" | "exec" | "test") => rest = &rest[1..],
                _ => {}
            }
            // Options of the subcommand come before the file.
            while rest.first().is_some_and(|a| a.starts_with('-')) {
                rest = &rest[1..];
            }
        }
        let module = o
            .value(&["-m"])
            .or_else(|| {
                args.last()
                    .and_then(|a| a.strip_prefix("-m"))
                    .filter(|m| !m.is_empty())
            })
            .filter(|_| matches!(name, "python" | "ipython"));
        if let Some(m) = module {
            rest = module_args;
            self.python_module(m, module_args, ctx);
        }
        let mut script_args = rest;
        // Code that fetches prints what it fetched, or runs it.
        let mut fetched = false;
        let printed_before = self.printed.len();
        if !codes.is_empty() {
            for c in codes {
                self.tcl(name, c, ctx, depth);
                self.code_from_download(name, c);
                fetched |= flow::fetches_url(c);
                if flow::evaluates_values(c) && (flow::fetches_url(c) || stdin.downloaded) {
                    self.runs_download(name, Reach::Stdin);
                }
                self.code(c, ctx, depth);
            }
        } else if module.is_some()
            || (!o.values(file_flags).is_empty() && matches!(name, "php" | "R" | "sbcl"))
            || (name == "R" && rest.first().is_some_and(|c| c == "CMD"))
        {
            // python -m MODULE ARGS…: the arguments follow.
        } else if let Some((script, after)) =
            rest.split_first().filter(|(s, _)| *s != "-" && name != "R")
        {
            self.interpreted_script(name, script, after, stdin, ctx, depth);
            script_args = after;
        } else {
            if stdin.downloaded {
                self.runs_download(name, Reach::Stdin);
            }
            let code = stdin.joined();
            if !code.is_empty() {
                self.tcl(name, &code, ctx, depth);
                self.code(&code, ctx, depth);
            }
            script_args = rest.get(1..).unwrap_or(&[]);
        }
        // perl -i edits the files it is given.
        let edits = name == "perl" && o.has(&["-i"]);
        for a in script_args {
            if edits {
                self.path_op(Action::Read, a, ctx, None);
                self.path_op(Action::Write, a, ctx, None);
            } else if path_like(a) {
                self.path_op(Action::Read, a, ctx, None);
            }
        }
        // What its code printed is its output, as far as known: code in it runs when a
        // shell reads it (`python3 -c "print('cat F')" | sh`), but it is no exact value.
        let printed: Vec<String> = self
            .printed
            .drain(printed_before.min(self.printed.len())..)
            .collect();
        Feed {
            downloaded: fetched,
            approximate: !printed.is_empty(),
            text: printed,
            ..Feed::default()
        }
    }

    /// `perl -I/tmp/m -MEvil` (and PERL5OPT's switches, as set when perl starts): modules
    /// the line wrote are loaded as code.
    fn perl_modules(&mut self, args: &[String], ctx: &Context, depth: usize) {
        let words: Vec<&str> = ctx
            .var("PERL5OPT")
            .unwrap_or("")
            .split_whitespace()
            .chain(args.iter().map(String::as_str))
            .collect();
        for file in super::opt_commands::perl_module_files(&words, ctx) {
            self.loaded_code(&file, ctx, depth);
        }
    }

    /// An interpreter running the script file `script` with arguments `after`.
    fn interpreted_script(
        &mut self,
        name: &str,
        script: &str,
        after: &[String],
        stdin: &Feed,
        ctx: &mut Context,
        depth: usize,
    ) {
        self.path_op(Action::Read, script, ctx, None);
        self.path_op(Action::Execute, script, ctx, None);
        self.script_source(name, script, stdin, ctx);
        // `deno run https://…`: the script is fetched and run.
        if flow::fetches_url(script) {
            self.runs_download(name, Reach::Script);
        }
        if let Some(feed) = self.fd_feed(script) {
            self.code(&feed.joined(), ctx, depth);
        }
        // A script written earlier in the line (`echo CODE > x.py; python3 x.py`): its code
        // is known, and read as inline code is.
        if let Some(code) = self.file_feed(script, ctx).map(|f| f.joined()) {
            if !code.is_empty() {
                self.tcl(name, &code, ctx, depth);
                self.code(&code, ctx, depth);
            }
        }
        if name == "python" && script.rsplit('/').next() == Some("setup.py") {
            for dir in super::installs::setup_py(after, ctx) {
                self.tree_write(&dir, ctx);
            }
        }
    }

    /// Tcl's code (`tclsh`, `wish`, `expect`) as the shell commands with its effects
    /// (`tcl`): its words need no quotes, so the string reading misses its paths.
    fn tcl(&mut self, name: &str, code: &str, ctx: &Context, depth: usize) {
        if matches!(name, "tclsh" | "wish" | "expect") && depth <= super::MAX_DEPTH {
            let shell = super::tcl::as_shell(code);
            if !shell.is_empty() {
                self.script(&shell, &mut ctx.clone(), depth + 1);
            }
        }
    }

    /// `python -m MODULE ARGS…` for the standard modules that read or serve whole trees:
    /// `http.server` serves its directory (the working one by default), `zipfile -c` and
    /// `tarfile -c` archive theirs.
    fn python_module(&mut self, module: &str, args: &[String], ctx: &Context) {
        match module {
            "pip" => {
                for dir in self.pip_dirs(args, ctx) {
                    self.tree_write(&dir, ctx);
                }
            }
            "http.server" | "SimpleHTTPServer" => {
                let o = args::parse(args, &["-d", "--directory", "-b", "--bind"], false);
                let dir = o.value(&["-d", "--directory"]).unwrap_or(".");
                self.tree_read(dir, ctx);
            }
            "zipfile" | "tarfile" => {
                let o = args::parse(args, &["-c", "--create", "-e", "--extract"], false);
                if let Some(out) = o.value(&["-c", "--create"]) {
                    self.path_op(Action::Write, out, ctx, None);
                    for src in &o.operands {
                        self.tree_read(src, ctx);
                    }
                }
                if let Some(archive) = o.value(&["-e", "--extract"]) {
                    self.path_op(Action::Read, archive, ctx, None);
                    for dest in &o.operands {
                        self.path_op(Action::Write, dest, ctx, None);
                    }
                }
            }
            // A module of the working directory's (`curl … > x.py; python3 -m x`): a
            // downloaded one is downloaded code run.
            _ if self.flow.downloads.is_empty() => {}
            _ => {
                let path = module.replace('.', "/");
                if self.is_download(&format!("{path}.py"), ctx)
                    || self.is_download(&format!("{path}/__main__.py"), ctx)
                {
                    self.runs_download("python", Reach::Script);
                }
            }
        }
    }

    /// sed's script commands that reach files and the shell: `r FILE` / `R FILE` read,
    /// `w FILE` / `W FILE` (and `s///w FILE`) write, `e COMMAND` runs a command.
    pub fn sed_script(&mut self, script: &str, ctx: &Context, depth: usize) {
        for line in script.lines().flat_map(super::sed::commands).take(256) {
            let (cmd, arg) = line;
            match cmd {
                'r' | 'R' if !arg.is_empty() => self.path_op(Action::Read, arg, ctx, None),
                'w' | 'W' if !arg.is_empty() => self.path_op(Action::Write, arg, ctx, None),
                'e' if !arg.is_empty() => {
                    // `s/x/cat ~\/.netrc/e`: the delimiter escaped in a replacement is itself.
                    let command = if arg.contains("\\/") {
                        std::borrow::Cow::Owned(arg.replace("\\/", "/"))
                    } else {
                        std::borrow::Cow::Borrowed(arg)
                    };
                    self.script(&command, &mut ctx.clone(), depth + 1);
                }
                _ => {}
            }
        }
    }

    /// PowerShell takes single-dash long options in any case; `-Command` takes the rest of
    /// the line. Its aliases (cat, rm, curl, …) read like shell commands but its syntax does
    /// not parse as one, so the code's words are taken as they come.
    fn powershell(&mut self, args: &[String], ctx: &mut Context, depth: usize) {
        let mut i = 0;
        while let Some(a) = args.get(i) {
            i += 1;
            let next = args.get(i).map(String::as_str);
            let code = match a.to_ascii_lowercase().as_str() {
                "-command" | "-c" => {
                    let code = args[i..].join(" ");
                    i = args.len();
                    Some(code)
                }
                "-encodedcommand" | "-enc" | "-e" | "-ec" => {
                    i += 1;
                    next.and_then(utf16_base64)
                }
                "-file" | "-f" => {
                    i += 1;
                    if let Some(f) = next {
                        self.path_op(Action::Read, f, ctx, None);
                        self.path_op(Action::Execute, f, ctx, None);
                    }
                    None
                }
                "-executionpolicy" | "-ep" | "-workingdirectory" | "-wd" | "-configurationname"
                | "-outputformat" | "-of" | "-inputformat" | "-if" | "-settingsfile" => {
                    i += 1;
                    None
                }
                f if f.starts_with('-') => None,
                _ => {
                    self.path_op(Action::Read, a, ctx, None);
                    self.path_op(Action::Execute, a, ctx, None);
                    break;
                }
            };
            if let Some(code) = code {
                self.code(&code, ctx, depth);
                self.rough(&code, ctx, depth);
            }
        }
    }

    /// Inline code of any language: text for content rules, and the values it builds.
    pub fn code(&mut self, code: &str, ctx: &mut Context, depth: usize) {
        self.code_with(code, ctx, depth, &[]);
    }

    /// [`Self::code`] with variables known before it runs (awk's `-v name=value`): every
    /// value the code builds (`code_eval`) is a path (read, written or deleted as the call
    /// around it says), a URL, or a command handed to a shell.
    pub fn code_with(
        &mut self,
        code: &str,
        ctx: &mut Context,
        depth: usize,
        vars: &[(String, String)],
    ) {
        self.out.text(code);
        if depth > super::MAX_DEPTH || !self.spend(1) {
            return;
        }
        // A function imported or assigned under another name is read as itself.
        let unaliased = code_refs::unalias(code);
        let code = unaliased.as_deref().unwrap_or(code);
        // Variables the code gives the programs it starts (`os.environ['GIT_SSH_COMMAND']
        // = …`, `env={'GIT_CONFIG_COUNT': …}`): what they make run is walked, and the
        // commands below run with them set.
        let env = code_env::assignments(code);
        let mut own;
        let ctx: &mut Context = if env.is_empty() {
            ctx
        } else {
            own = ctx.clone();
            for (name, value) in &env {
                self.environment_command(name, value, &own, depth);
                vars::set_var(&mut own, name, value);
            }
            &mut own
        };
        let Some(sites) = code_eval::sites(code, vars) else {
            self.out
                .unparsable("the inline code is too complex to analyse (work limit reached)");
            return;
        };
        if fetches_and_evaluates(code) {
            // `fetch(URL).then(r => r.text()).then(eval)`: the fetched text is handed to the
            // language's own evaluator by reference, where no call site shows it.
            self.runs_download("code", Reach::Stdin);
        }
        let whole = Whole {
            code,
            deletes: code_refs::deletes(code, DELETE_CALLS),
            shell_pipe: super::pipe_writes::opens_shell_for_writing(code),
        };
        let remote = remote_stdio(code);
        if remote && RUNS.iter().any(|r| code.contains(r)) {
            // Whatever it runs may come from the connection (`system $_ while <>`).
            self.runs_download("sh", Reach::Stdin);
        }
        for site in sites {
            if !self.spend(1) {
                return;
            }
            let before = code
                .get(floor_boundary(code, site.start.saturating_sub(64))..site.start)
                .unwrap_or("");
            let after = code.get(site.end..).unwrap_or("");
            if remote {
                self.remote_runner(&site, before);
            }
            self.site(&site, before, after, ctx, depth, &whole);
        }
    }

    /// In code that wires a connection to the standard descriptors ([`remote_stdio`]), a
    /// shell or interpreter it starts reads its commands from the other end: a reverse
    /// shell, which the `remote-code` pack names as downloaded code run.
    fn remote_runner(&mut self, site: &code_eval::Site, before: &str) {
        let program = match &site.argv {
            Some(argv) => argv.first().filter(|v| v.complete).map(|v| v.text.clone()),
            None if site.runs
                || site.value.shell_literal
                || ends_with_call(before, SHELL_CALLS) =>
            {
                site.value.text.split_whitespace().next().map(str::to_owned)
            }
            None => None,
        };
        let Some(program) = program else {
            return;
        };
        let runner = super::names::family(&program).to_owned();
        if super::names::is_shell(&runner) || super::names::is_interpreter(&runner) {
            self.runs_download(&runner, Reach::Stdin);
        }
    }

    /// What one value the code builds does, from the call it stands in.
    fn site(
        &mut self,
        site: &code_eval::Site,
        before: &str,
        after: &str,
        ctx: &Context,
        depth: usize,
        whole: &Whole,
    ) {
        let value = &site.value;
        if site.chdir {
            return;
        }
        if let Some(argv) = &site.argv {
            self.argv_command(argv, ctx, depth);
            return;
        }
        if site.runs {
            if value.complete {
                self.script(&value.text, &mut ctx.clone(), depth + 1);
            }
            return;
        }
        if ends_with_call(before, EVAL_CALLS) && value.decoded {
            // Code hidden behind a decoder and run: its own code, or a shell command.
            if value.complete {
                self.code(&value.text, &mut ctx.clone(), depth + 1);
                if super::parse::program(&value.text).is_ok() {
                    self.script(&value.text, &mut ctx.clone(), depth + 1);
                }
            } else {
                self.unknown_target(Action::Execute, value, ctx);
            }
            return;
        }
        // Written into a shell the code opened (`open(F, "|sh"); print F "CMD"`), and
        // awk's `print "CMD" | "sh"`: the text is the shell's script.
        if value.complete
            && (awk_prints_to_shell(after)
                || (whole.shell_pipe && super::pipe_writes::written_here(before)))
        {
            self.script(&value.text, &mut ctx.clone(), depth + 1);
            return;
        }
        if value.shell_literal || ends_with_call(before, SHELL_CALLS) || awk_pipe(before, after) {
            if value.complete {
                self.script(&value.text, &mut ctx.clone(), depth + 1);
            } else if value.computed {
                self.unknown_target(Action::Execute, value, ctx);
            }
            return;
        }
        if value.complete && value.text.contains("://") {
            self.url_op(value.text.trim(), None);
            return;
        }
        // An address written alone is where the code connects
        // (`socket.create_connection(('169.254.169.254', 80))`, `{host: '…'}`).
        if value.complete && value.text.parse::<std::net::IpAddr>().is_ok() {
            self.host_op(&value.text, None, None);
            return;
        }
        // A command line written out where no call shows that it runs
        // (`getattr(os, 'sys' + 'tem')('cat F')`, a table of commands run later): walked
        // as one when its first word is a program that reads, copies or sends files.
        if value.complete && ends_with_call(before, PRINT_CALLS) {
            // Printed, not run: the interpreter's output, which a shell may read.
            if self.printed.len() < MAX_PRINTED {
                self.printed.push(value.text.clone());
            }
        } else if value.complete && looks_like_command(&value.text) {
            self.script(&value.text, &mut ctx.clone(), depth + 1);
        }
        self.path_site(site, before, after, ctx, whole);
    }

    /// A value that may be a path: written out, relative in a call that opens files, or
    /// partly unknown next to one (an unknown target).
    fn path_site(
        &mut self,
        site: &code_eval::Site,
        before: &str,
        after: &str,
        ctx: &Context,
        whole: &Whole,
    ) {
        let value = &site.value;
        let before_trim = before.trim_end();
        let file_call = |b: &str| file_call(whole.code, b);
        // The call the value is given to, the method called on it (`Path(p).read_text()`),
        // or the call the items of its list are handed to (`[rmtree(p) for p in [V]]`).
        let opens = file_call(before_trim)
            .or_else(|| after_action(after))
            .or_else(|| code_refs::iterated_action(whole.code, before, after, file_call));
        if opens.is_none() && whole.deletes && walks(before_trim, after) {
            self.walked_and_deleted(value, ctx);
            return;
        }
        // Perl's open(F, ">/path") and friends carry the mode in the string.
        let text = value.text.as_str();
        let (mode_write, path) = match text
            .strip_prefix(">>")
            .or_else(|| text.strip_prefix('>'))
            .or_else(|| text.strip_prefix("+<"))
        {
            Some(p) => (true, p.trim_start()),
            None => (false, text.strip_prefix('<').map_or(text, str::trim_start)),
        };
        let action = if mode_write
            || redirects_into(before_trim)
            || (opens != Some(Action::Delete) && write_mode_after(whole.code, before_trim, after))
        {
            Action::Write
        } else {
            opens.unwrap_or_else(|| call_action(whole.code, before, after))
        };
        if !value.complete {
            if opens.is_some() && (value.computed || value.home || path.starts_with('~')) {
                self.unknown_target(action, value, ctx);
            } else if written_path(path) && !path.is_empty() {
                self.path_op(action, path, ctx, None);
            }
            return;
        }
        // A name decoded but only printed is not opened.
        if value.decoded && opens.is_none() {
            return;
        }
        let bare_home = path == "~" && value.home;
        if (written_path(path) && !(bare_home && opens.is_none()))
            || (opens.is_some() && relative_name(path))
            || (site.cwd.is_some() && relative_name(path))
        {
            self.path_op(action, path, ctx, None);
            // A directory copied whole (`copytree`, `cpSync(…, {recursive})`) is read
            // whole.
            if action == Action::Read && ends_with_call(before, TREE_COPY_CALLS) {
                self.tree_read(path, ctx);
            }
        }
    }

    /// A tree listed by code that deletes what it lists: everything below the root is
    /// deleted (the names come from the listing, so no call site shows them).
    fn walked_and_deleted(&mut self, value: &code_eval::Value, ctx: &Context) {
        let root = value.text.trim_end_matches('/');
        if value.complete && (written_path(value.text.as_str()) || relative_name(root)) {
            self.path_op(Action::Delete, &format!("{root}/**"), ctx, None);
        } else if value.computed || value.home {
            self.unknown_target(Action::Delete, value, ctx);
        }
    }

    /// A command built as an argv list (`subprocess.run(["rm", "-rf", "/etc"])`): its
    /// words quoted for the shell and walked as a command line.
    fn argv_command(&mut self, argv: &[code_eval::Value], ctx: &Context, depth: usize) {
        let words: Vec<String> = argv
            .iter()
            .filter(|v| v.complete)
            .map(|v| shell_quote(&v.text))
            .collect();
        if argv.iter().any(|v| !v.complete && v.computed) {
            if let Some(v) = argv.iter().find(|v| !v.complete) {
                self.unknown_target(Action::Execute, v, ctx);
            }
        }
        if !words.is_empty() {
            self.script(&words.join(" "), &mut ctx.clone(), depth + 1);
        }
    }

    /// An operation on a path the code computes and the analysis could not follow: the
    /// known start of it and anything below (`PATH/**`, or `/**`), marked unknown so that
    /// rules answer with their mode for an unknown target.
    fn unknown_target(&mut self, action: Action, value: &code_eval::Value, ctx: &Context) {
        let known = value.text.trim_end_matches('/');
        let glob = if known.is_empty() || !written_path(known) {
            "/**".to_owned()
        } else {
            format!("{known}/**")
        };
        if let Some(path) = normalize::path(&glob, ctx) {
            let mut op = Operation::path(action, path);
            op.unknown = true;
            self.out.op(op);
        }
    }
}

/// The code as a whole, for what one value's site depends on beyond its neighbourhood.
struct Whole<'c> {
    code: &'c str,
    /// Some call in it deletes files.
    deletes: bool,
    /// It starts a shell with a pipe it writes to ([`super::pipe_writes`]).
    shell_pipe: bool,
}

/// Whether the delete call that ends `before` deletes files: `os.remove(` does,
/// `names.remove(` (a list's method) does not.
fn deletes_here(code: &str, before: &str) -> bool {
    let trimmed = before.trim_end();
    match code_refs::AMBIGUOUS.iter().find(|c| trimmed.ends_with(*c)) {
        Some(call) => code_refs::file_receiver(code, &trimmed[..trimmed.len() - call.len()]),
        None => true,
    }
}

/// Calls whose string argument is code of the same language, run.
const EVAL_CALLS: &[&str] = &["exec(", "eval(", "eval", "exec", "compile(", "Function("];

/// awk's pipes to and from a command: `"CMD" | getline`, `print … | "CMD"`.
fn awk_pipe(before: &str, after: &str) -> bool {
    let from = after
        .trim_start()
        .strip_prefix('|')
        .is_some_and(|r| r.trim_start().starts_with("getline"));
    let b = before.trim_end();
    let to = b.ends_with('|') && !b.ends_with("||") && b.contains("print");
    from || to
}

/// Whether `text` reads as a command line of a program that reads, copies, sends or runs
/// files: such a program, then at least one word.
fn looks_like_command(text: &str) -> bool {
    let mut words = text.split_whitespace();
    let (Some(program), Some(_)) = (words.next(), words.next()) else {
        return false;
    };
    matches!(
        program.rsplit('/').next().unwrap_or(program),
        "cat"
            | "head"
            | "tail"
            | "less"
            | "more"
            | "cp"
            | "mv"
            | "rm"
            | "tar"
            | "zip"
            | "scp"
            | "rsync"
            | "curl"
            | "wget"
            | "nc"
            | "ncat"
            | "sh"
            | "bash"
            | "zsh"
            | "dash"
            | "base64"
            | "xxd"
            | "od"
            | "strings"
            | "tee"
            | "dd"
            | "chmod"
            | "ln"
            | "gpg"
            | "ssh"
            | "git"
    )
}

/// Whether the text before `after` is printed into a shell (`print "CMD" | "sh"`).
fn awk_prints_to_shell(after: &str) -> bool {
    after
        .trim_start()
        .strip_prefix('|')
        .map(str::trim_start)
        .and_then(|r| r.strip_prefix('"'))
        .and_then(|r| r.split_once('"'))
        .is_some_and(|(cmd, _)| {
            let program = cmd.split_whitespace().next().unwrap_or("");
            super::names::is_shell(super::names::family(program))
        })
}

/// What a call that opens the path it is given does with it, when the call before the
/// value is one (`open(`, `readFileSync(`, `rmtree(`, Perl's `open F, "<",`, awk's
/// `getline <`).
fn file_call(code: &str, before: &str) -> Option<Action> {
    // `rmtree(*['/x'])`, `os.remove(*('/x',))`: the items unpacked are the arguments.
    // The value is the list itself, or an item of it.
    let b = before.trim_end();
    let b = b.strip_suffix(['[', '(']).map_or(b, str::trim_end);
    if let Some(call) = b
        .strip_suffix('*')
        .filter(|b| b.trim_end().ends_with(['(', ',']))
    {
        return file_call(code, call.trim_end());
    }
    if ends_with_call(before, DELETE_CALLS) && deletes_here(code, before) {
        return Some(Action::Delete);
    }
    // `copy(SRC, DST)`: the source is read; the destination (after a comma, so not here)
    // is written.
    if ends_with_call(before, COPY_CALLS) {
        return Some(Action::Read);
    }
    if ends_with_call(before, WRITE_CALLS) {
        return Some(Action::Write);
    }
    if ends_with_call(before, READ_CALLS) || (before.ends_with('<') && before.contains("getline")) {
        return Some(Action::Read);
    }
    // Perl's three-argument open: open(F, "<", PATH).
    let mode = before.strip_suffix(',')?.trim_end();
    let mode = mode
        .strip_suffix(['"', '\''])?
        .trim_end_matches(['"', '\''].as_slice());
    let mode = mode.rsplit(['"', '\'']).next().unwrap_or(mode);
    match mode.trim() {
        "<" => Some(Action::Read),
        ">" | ">>" | "+<" | "+>" => Some(Action::Write),
        _ => None,
    }
}

/// awk's `print > FILE` and `print >> (DIR "/name")` (not an arrow, `=>` or `->`).
fn redirects_into(before: &str) -> bool {
    let b = before.trim_end_matches('(').trim_end();
    b.ends_with('>') && !b.ends_with("=>") && !b.ends_with("->")
}

/// Whether the code before a value ends with one of `calls` (those spelled with a trailing
/// space, `system "…"`, before the value's own spacing is trimmed).
fn ends_with_call(before: &str, calls: &[&str]) -> bool {
    let trimmed = before.trim_end();
    calls
        .iter()
        .any(|c| trimmed.ends_with(c) || (c.ends_with(' ') && before.ends_with(c)))
}

/// `(Path.home() / "x").write_text(…)`: the method called on the path after it.
fn after_action(after: &str) -> Option<Action> {
    let rest = after.trim_start().trim_start_matches(')').trim_start();
    let method = rest.strip_prefix('.')?;
    if ["unlink(", "rmdir(", "rmtree("]
        .iter()
        .any(|m| method.starts_with(m))
    {
        Some(Action::Delete)
    } else if [
        "write_text(",
        "write_bytes(",
        "touch(",
        "mkdir(",
        "symlink_to(",
        "chmod(",
        "rename(",
        "replace(",
        "hardlink_to(",
    ]
    .iter()
    .any(|m| method.starts_with(m))
    {
        Some(Action::Write)
    } else if [
        "read_text(",
        "read_bytes(",
        "open(",
        "readlines(",
        "iterdir(",
    ]
    .iter()
    .any(|m| method.starts_with(m))
        // Ruby's `Pathname.new(p).read` without parentheses.
        || ["read", "binread", "readlines", "each_line"].iter().any(|m| {
            method
                .strip_prefix(m)
                .is_some_and(|r| !r.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        })
    {
        Some(Action::Read)
    } else {
        None
    }
}

/// Whether the value is the root handed to a call that lists a tree (`os.walk(ROOT)`), or
/// the path a tree-listing method is called on (`Path(ROOT).rglob("*")`).
fn walks(before: &str, after: &str) -> bool {
    if ends_with_call(before, WALK_CALLS) {
        return true;
    }
    let rest = after.trim_start().trim_start_matches(')').trim_start();
    rest.strip_prefix('.').is_some_and(|m| {
        ["rglob(", "glob(", "iterdir(", "walk("]
            .iter()
            .any(|c| m.starts_with(c))
    })
}

/// A value written as a path: absolute, from home, or explicitly relative.
fn written_path(path: &str) -> bool {
    (path.starts_with('/')
        || path.starts_with('~')
        || path.starts_with("./")
        || path.starts_with("../")
        || path.starts_with("$HOME"))
        && !path.contains(['\n', '\0'])
        && path.len() < 4096
}

/// A bare relative name (`.env`, `data/x.json`) that a call opening files takes as a path.
fn relative_name(path: &str) -> bool {
    !path.is_empty()
        && path.len() < 4096
        && !path.starts_with('-')
        && !path.contains("://")
        && !path.contains(char::is_whitespace)
        && !path.contains('\0')
}

/// What the call a value stands in does with it when no call that opens files says: a
/// write when a writing call comes shortly before it (`copy(src, dst)`) or an `open` mode
/// that writes follows it (`open(p, "w")`), else a read.
fn call_action(code: &str, before: &str, after: &str) -> Action {
    if WRITE_CALLS.iter().any(|c| before.contains(c)) || write_mode_after(code, before, after) {
        Action::Write
    } else {
        Action::Read
    }
}

/// `open('/x', 'w')`, `open(os.path.join(…), "a")`: the mode after the path, with only a
/// comma (and the closing of a join) between, is one that writes: a literal that does, a
/// name assigned one in the code (`m = 'w'; open(p, m)`) or not assigned a literal at all
/// (a mode the analysis cannot know may write), or `os.open` flags that do (`O_WRONLY`).
fn write_mode_after(code: &str, before: &str, after: &str) -> bool {
    let rest = after.trim_start().trim_start_matches(')').trim_start();
    let Some(rest) = rest.strip_prefix(',') else {
        return false;
    };
    let rest = rest.trim_start();
    // open(p, mode="a"), File.open(p, mode: "a").
    let keyword = rest
        .strip_prefix("mode")
        .filter(|r| r.trim_start().starts_with(['=', ':']));
    let rest = keyword.map_or(rest, |r| {
        r.trim_start().trim_start_matches(['=', ':']).trim_start()
    });
    let Some(quote) = rest.chars().next().filter(|c| matches!(c, '\'' | '"')) else {
        // Only an `open` call takes a mode there (`copy(src, dst)` takes a path).
        let open = ["open(", "fopen(", "openSync("]
            .iter()
            .any(|c| before.trim_end().ends_with(c));
        return open && mode_expression_writes(code, rest, keyword.is_some());
    };
    let Some(mode) = rest[1..].split(quote).next() else {
        return false;
    };
    literal_mode_writes(mode)
}

fn literal_mode_writes(mode: &str) -> bool {
    mode.len() <= 4 && (mode.starts_with(['w', 'a', 'x']) || mode.contains('+'))
}

/// A mode given to `open` as an expression: `os.O_WRONLY | os.O_CREAT` flags, or a name.
/// Keyword arguments in that place (`encoding=…`) and numbers are not modes.
fn mode_expression_writes(code: &str, rest: &str, keyword: bool) -> bool {
    let arg = rest.split([',', ')']).next().unwrap_or("").trim();
    if ["O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"]
        .iter()
        .any(|f| arg.contains(f))
    {
        return true;
    }
    let name_like = !arg.is_empty()
        && arg.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && arg.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !name_like
        || arg.contains("O_RDONLY")
        || (rest[arg.len()..].trim_start().starts_with('=') && !keyword)
    {
        return false;
    }
    match assigned_literal(code, arg) {
        Some(mode) => literal_mode_writes(mode),
        None => true,
    }
}

/// The string literal `name` is assigned in the code (`m = 'w'`, `m='a'`), if any.
fn assigned_literal<'c>(code: &'c str, name: &str) -> Option<&'c str> {
    let mut from = 0;
    while let Some(at) = code[from..].find(name) {
        let start = from + at;
        from = start + name.len();
        let whole_word =
            !code[..start].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        let rest = code[from..].trim_start();
        let Some(value) = rest.strip_prefix('=').filter(|r| !r.starts_with('=')) else {
            continue;
        };
        let value = value.trim_start();
        let Some(quote) = value.chars().next().filter(|c| matches!(c, '\'' | '"')) else {
            continue;
        };
        if whole_word {
            return value[1..].split(quote).next();
        }
    }
    None
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Python's own options and, after `-m MODULE` (or `-mMODULE`), the module's arguments.
fn split_python_module(args: &[String]) -> (&[String], &[String]) {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-m" => {
                let end = (i + 2).min(args.len());
                return (&args[..end], &args[end..]);
            }
            m if m.starts_with("-m") => return (&args[..=i], &args[i + 1..]),
            "-W" | "-X" | "-Q" => i += 2,
            "-c" | "-" => break,
            f if f.starts_with('-') => i += 1,
            _ => break,
        }
    }
    (args, &[])
}

/// PowerShell's `-EncodedCommand`: base64 of UTF-16LE.
fn utf16_base64(s: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .ok()?;
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).ok()
}

/// `sbcl --script` reads its script from stdin when no file follows; written `-` so the
/// option table need not know that its value is optional.
fn script_flag_value(name: &str, args: &[String]) -> Vec<String> {
    let mut out = args.to_vec();
    if name == "sbcl" {
        if let Some(i) = out.iter().position(|a| a == "--script") {
            if out.get(i + 1).is_none_or(|next| next.starts_with('-')) {
                out.insert(i + 1, "/dev/stdin".to_owned());
            }
        }
    }
    out
}

/// Whether inline code fetches a URL and hands text to the language's evaluator as a
/// function value (a promise's continuation, a callback), the spelling the call-site
/// analysis cannot follow.
fn fetches_and_evaluates(code: &str) -> bool {
    const FETCHES: &[&str] = &[
        "fetch(",
        "axios",
        "http.get(",
        "https.get(",
        "('http').get(",
        "('https').get(",
        "(\"http\").get(",
        "(\"https\").get(",
        "got(",
        "request(",
    ];
    const EVALUATES: &[&str] = &[
        "then(eval)",
        "then(Function",
        "then(new Function",
        "then(vm.runInThisContext)",
        "then(vm.runInNewContext)",
        "(eval)",
    ];
    code.contains("://")
        && FETCHES.iter().any(|f| code.contains(f))
        && EVALUATES.iter().any(|e| code.contains(e))
}

/// Words of code that starts programs, in the languages agents write one-liners in.
const RUNS: &[&str] = &[
    "system", "exec", "spawn", "popen", "Popen", "call(", "`", "%x",
];

/// Whether inline code connects a socket and puts it on a program's standard descriptors
/// (`os.dup2(s.fileno(), 0)`, Perl's `open(STDIN, ">&S")`, `stdin=s`, a `<&3` handed to the
/// shell, `pty.spawn` on a connected process, Node's `socket.pipe(sh.stdin)`), the shape of
/// every reverse shell written in an interpreter.
fn remote_stdio(code: &str) -> bool {
    const CONNECTS: &[&str] = &[
        "socket.socket(",
        "create_connection(",
        ".connect((",
        "fsockopen(",
        "stream_socket_client(",
        "IO::Socket",
        "connect(S",
        "sockaddr_in(",
        "TCPSocket.",
        "UDPSocket.",
        "net.connect(",
        "net.createConnection(",
        "net.Socket(",
        "require(\"net\")",
        "require('net')",
        "/inet/tcp/",
        "/dev/tcp/",
    ];
    const WIRES: &[&str] = &[
        "dup2(",
        "STDIN,\">&",
        "STDIN, \">&",
        "STDIN,\"<&",
        "STDIN, \"<&",
        "stdin=s",
        "stdin=sock",
        "stdin=conn",
        "pty.spawn(",
        "<&3",
        "<&%d",
        ".pipe(sh.stdin",
        ".pipe(p.stdin",
        "stdio: [s",
        "reopen(",
        "fdopen(",
        "|& getline",
    ];
    CONNECTS.iter().any(|c| code.contains(c)) && WIRES.iter().any(|w| code.contains(w))
}
