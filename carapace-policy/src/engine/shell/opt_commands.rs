//! Commands that programs run because an option names them, whatever the program does
//! otherwise: tar's `--to-command`, `--use-compress-program` and `--checkpoint-action=exec=`,
//! rsync's `-e`, zip's `-TT`, scp's `-S`, and the editor commands of vim and ex (`-c
//! ':!CMD'`, `-c 'r FILE'`, `-c 'w FILE'`). Each is walked as the shell line (or the file
//! operation) it is, on top of what the program's own entry says about its arguments.
use super::super::operation::Context;
use super::walk::Walker;
use crate::rules::Action;

/// The options of `name` whose value is a shell command it runs (a match, so that the
/// names of every other program cost one comparison of lengths and bytes).
fn command_options(name: &str) -> &'static [&'static str] {
    match name {
        "tar" | "bsdtar" | "gtar" => &[
            "--to-command",
            "--use-compress-program",
            "-I",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
            "-F",
            "--rsh-command",
        ],
        "rsync" => &["-e", "--rsh"],
        "zip" => &["-TT", "--unzip-command"],
        "scp" | "sftp" => &["-S"],
        // `flock -c`, `script -c` and `su -c` are their table entries' own.
        _ => &[],
    }
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
        let options = command_options(name);
        if options.is_empty() {
            return;
        }
        for value in option_values(args, options) {
            // `--checkpoint-action=exec=CMD` (also `exec:CMD` in older tars).
            let value = value
                .strip_prefix("exec=")
                .or_else(|| value.strip_prefix("exec:"))
                .unwrap_or(value);
            self.script(value, &mut ctx.clone(), depth + 1);
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

/// The values of `options` in `args`: `-o VALUE`, `--opt VALUE`, `--opt=VALUE`, and a one-
/// letter option's value attached (`-essh`). Operands after `--` are not options.
fn option_values<'a>(args: &'a [String], options: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if a == "--" {
            break;
        }
        for opt in options {
            if a == opt {
                if let Some(v) = args.get(i) {
                    out.push(v.as_str());
                    i += 1;
                }
            } else if let Some(v) = a.strip_prefix(opt) {
                let attached = if opt.starts_with("--") {
                    v.strip_prefix('=')
                } else if opt.len() == 2 {
                    Some(v)
                } else {
                    None
                };
                if let Some(v) = attached.filter(|v| !v.is_empty()) {
                    out.push(v);
                }
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
    use super::{ex_commands, option_values};

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn option_values_in_every_spelling() {
        let args = words(&["-essh -p 2", "--rsh=sh -c x", "-e", "ssh", "--", "-e", "no"]);
        assert_eq!(
            option_values(&args, &["-e", "--rsh"]),
            vec!["ssh -p 2", "sh -c x", "ssh"]
        );
        let args = words(&["-T", "-TT", "cat x", "-TTy"]);
        assert_eq!(option_values(&args, &["-TT"]), vec!["cat x"]);
    }

    #[test]
    fn editor_commands() {
        let args = words(&["-sc", "w! x|q", "+10", "+/re", "+:!ls", "--cmd", "r y", "f"]);
        assert_eq!(ex_commands(&args), vec!["w! x|q", ":!ls", "r y"]);
    }
}
