//! Equivalent spellings of one call never change Layer 1's decision, against every built-in
//! pack: a forge tool's verb, field names and ref forms; a force push of the current branch
//! however git is told it; a file a tool names in any of the shapes tools name files.
use proptest::prelude::*;
use serde_json::{json, Value};

use super::{check, Activation, Context, ToolCall};
use crate::rules::{Homes, Mode, Options, RuleSet};

fn rules() -> RuleSet {
    let opts = Options {
        homes: Homes::fixed(["/home/alice"]),
        resolver: |_| None,
        host: crate::host::real::host(),
    };
    RuleSet::parse_with("t", "version: 1\n", &opts).expect("the built-in packs compile")
}

fn decide(rules: &RuleSet, call: &Value) -> Mode {
    let ctx = Context {
        cwd: "/home/alice/project".into(),
        home: "/home/alice".into(),
        env: Vec::new(),
        host: None,
    };
    let call = ToolCall::from_json(call).expect("a call");
    check(rules, &call, &ctx, &Activation::default()).decision
}

/// `snake_case`, `camelCase`, `PascalCase` and `kebab-case` of the same words.
fn spelled(words: &[&str], style: usize) -> String {
    let cap = |w: &str| {
        let mut c = w.chars();
        c.next()
            .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
            .unwrap_or_default()
    };
    match style % 4 {
        0 => words.join("_"),
        1 => words
            .iter()
            .enumerate()
            .map(|(i, w)| if i == 0 { (*w).to_owned() } else { cap(w) })
            .collect(),
        2 => words.iter().map(|w| cap(w)).collect(),
        _ => words.join("-"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A forge tool deleting a shared branch waits for approval whatever its verb, its
    /// name's and fields' spelling, the ref's form or the server; a feature branch passes.
    #[test]
    fn forge_branch_deletes_in_any_spelling(
        verb in prop::sample::select(vec!["delete", "remove", "purge", "drop", "wipe", "erase", "destroy"]),
        style in 0usize..4,
        key_style in 0usize..4,
        form in prop::sample::select(vec!["main", "heads/main", "refs/heads/main"]),
        server in prop::sample::select(vec!["github", "gitlab", "gitea", "code_host"]),
        shared in any::<bool>(),
    ) {
        let rules = rules();
        let tool = format!("mcp__{server}__{}", spelled(&[verb, "branch"], style));
        let branch = if shared { form.to_owned() } else { form.replace("main", "feature/x") };
        let mut input = serde_json::Map::new();
        input.insert(spelled(&["owner"], key_style), json!("alice"));
        input.insert(spelled(&["repo"], key_style), json!("project"));
        input.insert(spelled(&["branch", "name"], key_style), json!(branch));
        let want = if shared { Mode::Approve } else { Mode::Allow };
        prop_assert_eq!(decide(&rules, &json!({"tool": tool, "input": input})), want);
    }

    /// A force push of the current branch, however it is named and forced, waits for
    /// approval; the same push to a named feature branch passes.
    #[test]
    fn force_pushes_of_the_current_branch_in_any_spelling(
        force in prop::sample::select(vec!["-f", "--force", "--force-with-lease", "-fu", "--force-if-includes --force-with-lease"]),
        head in prop::sample::select(vec!["HEAD", "@"]),
        flags_last in any::<bool>(),
        feature in any::<bool>(),
    ) {
        let rules = rules();
        let target = if feature { format!("{head}:feature/x") } else { head.to_owned() };
        let line = if flags_last {
            format!("git push origin {target} {force}")
        } else {
            format!("git push {force} origin {target}")
        };
        let want = if feature { Mode::Allow } else { Mode::Approve };
        prop_assert_eq!(decide(&rules, &json!({"tool": "Bash", "input": {"command": line}})), want);
    }

    /// A file an MCP tool reads or writes is the same file however the call names it: a
    /// path, a one-item list, a plural field, a file URI, a base directory with a relative
    /// path, a nested request object.
    #[test]
    fn a_file_named_in_any_shape_is_the_same_file(
        shape in 0usize..7,
        write in any::<bool>(),
        protected in any::<bool>(),
    ) {
        let rules = rules();
        let (rel, abs) = if protected {
            (".bashrc", "/home/alice/.bashrc")
        } else {
            ("project/notes.md", "/home/alice/project/notes.md")
        };
        let tool = if write { "mcp__fs__write_file" } else { "mcp__fs__read_file" };
        let mut input = match shape {
            0 => json!({"path": abs}),
            1 => json!({"path": [abs]}),
            2 => json!({"paths": abs}),
            3 => json!({"uri": format!("file://{abs}")}),
            4 => json!({"root": "/home/alice", "path": rel}),
            5 => json!({"request": {"path": abs}}),
            _ => json!({"base_dir": "~", "relative_path": rel}),
        };
        if write {
            input["content"] = json!("x");
        }
        let call = json!({"tool": tool, "input": input});
        let direct = json!({"tool": tool, "input": if write { json!({"path": abs, "content": "x"}) } else { json!({"path": abs}) }});
        prop_assert_eq!(decide(&rules, &call), decide(&rules, &direct));
        if protected && write {
            prop_assert_eq!(decide(&rules, &call), Mode::Block);
        }
    }

    /// A version-control server's tool deleting a branch, with no forge shape (no owner,
    /// repo or project), is read as the forge's: a shared branch waits for approval
    /// whatever the server's name, the verb and the spellings; a feature branch passes.
    #[test]
    fn vcs_server_branch_deletes_in_any_spelling(
        server in prop::sample::select(vec!["vcs", "scm", "source_control", "git", "repo", "versionControl"]),
        verb in prop::sample::select(vec!["delete", "remove", "purge", "drop", "wipe"]),
        noun in prop::sample::select(vec!["branch", "ref"]),
        style in 0usize..4,
        key in prop::sample::select(vec!["branch", "ref", "branch_name", "name"]),
        form in prop::sample::select(vec!["main", "heads/main", "refs/heads/main"]),
        shared in any::<bool>(),
    ) {
        let rules = rules();
        let tool = format!("mcp__{server}__{}", spelled(&[verb, noun], style));
        let branch = if shared { form.to_owned() } else { form.replace("main", "topic-1") };
        let call = json!({"tool": tool, "input": {key: branch}});
        let want = if shared { Mode::Approve } else { Mode::Allow };
        prop_assert_eq!(decide(&rules, &call), want);
    }

    /// A name written as a glob, a brace list or one of bash's extended patterns that
    /// lists it decides as the name written out, protected or not; a negation alone
    /// decides as the `*` it narrows.
    #[test]
    fn a_name_in_any_pattern_spelling_decides_as_written(
        spelling in 0usize..7,
        protected in any::<bool>(),
        delete in any::<bool>(),
    ) {
        let rules = rules();
        let (dir, name) = if protected { ("~/.ssh", "id_rsa") } else { ("~/project/src", "main.rs") };
        let (head, tail) = name.split_at(1);
        let spelled = match spelling {
            0 => format!("[{head}]{tail}"),
            1 => format!("@({name})"),
            2 => format!("@({name}|zz)"),
            3 => format!("{head}@({tail}|zz)"),
            4 => format!("{{{name},zz}}"),
            5 => format!("?(x){name}"),
            _ => format!("{head}+({tail})"),
        };
        let cmd = if delete { "rm -rf" } else { "cat" };
        let line = |n: &str| json!({"tool": "Bash", "input": {"command": format!("shopt -s extglob; {cmd} {dir}/{n}")}});
        prop_assert_eq!(decide(&rules, &line(&spelled)), decide(&rules, &line(name)));
        let every = |n: &str| json!({"tool": "Bash", "input": {"command": format!("shopt -s extglob; {cmd} {dir}/{n}")}});
        prop_assert_eq!(decide(&rules, &every("!(zz)")), decide(&rules, &every("*")));
    }

    /// Tcl's ways of reading a file or running a command decide as the shell command with
    /// the same effect.
    #[test]
    fn tcl_reads_decide_as_the_shell_command(
        spelling in 0usize..6,
        protected in any::<bool>(),
        stdin in any::<bool>(),
    ) {
        let rules = rules();
        let file = if protected { "/home/alice/.netrc" } else { "/home/alice/project/README.md" };
        let tcl = match spelling {
            0 => format!("exec cat {file}"),
            1 => format!("puts [exec cat {file}]"),
            2 => format!("set f [open {file}]; puts [read $f]"),
            3 => format!("set f [open {file} r]"),
            4 => format!("set p {file}; exec cat $p"),
            _ => format!("proc r {{}} {{ exec cat {file} }}; r"),
        };
        let line = if stdin { format!("echo '{tcl}' | tclsh") } else { format!("tclsh <<< '{tcl}'") };
        let call = json!({"tool": "Bash", "input": {"command": line}});
        let direct = json!({"tool": "Bash", "input": {"command": format!("cat {file}")}});
        prop_assert_eq!(decide(&rules, &call), decide(&rules, &direct));
    }

    /// A variable given in a tool call's environment object decides as the same variable
    /// assigned before the command in the shell: what it makes run (a command line, a
    /// script sourced, a file loaded) is read either way.
    #[test]
    fn an_environment_object_decides_as_the_shell_assignment(
        which in 0usize..8,
        protected in any::<bool>(),
        key in prop::sample::select(vec!["env", "environment", "env_vars", "envs"]),
        command in prop::sample::select(vec!["git log", "bash x.sh", "node x.js", "python3 x.py"]),
    ) {
        let rules = rules();
        let file = if protected { "/home/alice/.netrc" } else { "/home/alice/project/README.md" };
        let (name, value) = match which {
            0 => ("BASH_ENV", file.to_owned()),
            1 => ("LD_PRELOAD", file.to_owned()),
            2 => ("NODE_OPTIONS", format!("--require {file}")),
            3 => ("PYTHONSTARTUP", file.to_owned()),
            4 => ("RUBYOPT", format!("-r{file}")),
            5 => ("GIT_SSH_COMMAND", format!("cat {file}")),
            6 => ("PAGER", format!("cat {file}")),
            _ => ("EDITOR", format!("cp {file} /tmp/x;")),
        };
        let call = json!({"tool": "mcp__shell__run", "input": {"command": command, key: {name: value}}});
        let line = json!({"tool": "Bash", "input": {"command": format!("{name}='{value}' {command}")}});
        prop_assert_eq!(decide(&rules, &call), decide(&rules, &line));
    }

    /// A write through a link made earlier in the line decides as the write of the link's
    /// target, however the link is made and the write spelled.
    #[test]
    fn a_write_through_a_link_decides_as_the_write_of_its_target(
        link in 0usize..7,
        write in 0usize..4,
        protected in any::<bool>(),
    ) {
        let rules = rules();
        let target = if protected { "/home/alice/.bashrc" } else { "/home/alice/project/notes.txt" };
        let (made, name) = match link {
            0 => (format!("ln -s {target} l"), "l"),
            1 => (format!("ln -sf {target} l"), "l"),
            2 => (format!("ln {target} l"), "l"),
            3 => (format!("cp -s {target} l"), "l"),
            4 => (format!("cp -l {target} l"), "l"),
            5 => (format!("link {target} l"), "l"),
            _ => (format!("mkdir -p d && ln -s {target} d/"), if protected { "d/.bashrc" } else { "d/notes.txt" }),
        };
        let writes = |f: &str| match write {
            0 => format!("echo x >> {f}"),
            1 => format!("printf x > {f}"),
            2 => format!("echo x | tee -a {f}"),
            _ => format!("cp /tmp/x {f}"),
        };
        let through = json!({"tool": "Bash", "input": {"command": format!("{made} && {}", writes(name))}});
        let direct = json!({"tool": "Bash", "input": {"command": writes(target)}});
        prop_assert_eq!(decide(&rules, &through), decide(&rules, &direct));
    }

    /// A read through a link to a directory made earlier in the line decides as the read
    /// of the same name below the directory, however the link is made and the read
    /// spelled; and the link alone to a wide directory is no read of what lies below it.
    #[test]
    fn a_read_through_a_link_decides_as_the_read_of_its_target(
        link in 0usize..5,
        read in 0usize..6,
        protected in any::<bool>(),
    ) {
        let rules = rules();
        let file = if protected { ".netrc" } else { "project/README.md" };
        let made = match link {
            0 => "ln -s ~ h",
            1 => "ln -sfn $HOME h",
            2 => "cp -s -r ~ h",
            3 => "ln -s /home/alice/ h",
            _ => "ln -rs ~ h",
        };
        let reads = |f: &str| match read {
            0 => format!("cat {f}"),
            1 => format!("base64 {f}"),
            2 => format!("tar cf - {f} | gzip"),
            3 => format!("python3 -c \"print(open('{f}').read())\""),
            4 => format!("grep -r x {f}"),
            _ => format!("head -c 100 < {f}"),
        };
        let through = json!({"tool": "Bash", "input": {"command": format!("{made} && {}", reads(&format!("h/{file}")))}});
        let direct = json!({"tool": "Bash", "input": {"command": reads(&format!("/home/alice/{file}"))}});
        prop_assert_eq!(decide(&rules, &through), decide(&rules, &direct));
        let alone = json!({"tool": "Bash", "input": {"command": made}});
        prop_assert_eq!(decide(&rules, &alone), Mode::Allow);
    }

    /// A copy to or from this machine as another user (`root@localhost:F`, `ssh -l root
    /// localhost cat F`) decides as the same copy of that user's file, named by its path.
    #[test]
    fn a_loopback_login_decides_as_that_users_file(
        user in prop::sample::select(vec!["root", "alice"]),
        spelling in 0usize..5,
        protected in any::<bool>(),
    ) {
        let rules = rules();
        let home = if user == "root" { "/root" } else { "/home/alice" };
        let rel = if protected { ".netrc" } else { "notes.txt" };
        let (remote, direct) = match spelling {
            0 => (format!("scp {user}@localhost:{rel} /tmp/x"), format!("cp {home}/{rel} /tmp/x")),
            1 => (format!("scp {user}@127.0.0.1:~/{rel} /tmp/x"), format!("cp {home}/{rel} /tmp/x")),
            2 => (format!("rsync -a {user}@localhost:{rel} /tmp/x"), format!("cp {home}/{rel} /tmp/x")),
            3 => (format!("ssh {user}@localhost cat {rel}"), format!("cat {home}/{rel}")),
            _ => (format!("ssh -l {user} localhost 'cat ~/{rel}'"), format!("cat {home}/{rel}")),
        };
        let a = json!({"tool": "Bash", "input": {"command": remote}});
        let b = json!({"tool": "Bash", "input": {"command": direct}});
        prop_assert_eq!(decide(&rules, &a) == Mode::Block, decide(&rules, &b) == Mode::Block);
    }
}
