//! Readers and filters: decoders, text tools, `sed`/`awk`/`jq`, interpreters.

use super::super::super::normalize;
use super::super::super::operation::Context;
use super::super::super::patch;
use super::super::args;
use super::super::commands::{decoding, UNIQ_VALUED};
use super::super::walk::{Feed, Walker};
use super::Call;
use crate::rules::Action;

/// Decoders (`base64 -d`, `xxd -r`): what they print is what the payload decodes to.
pub(super) fn decoder(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name, args, stdin, ..
    } = call;
    let o = args::parse(args, &["-w", "--wrap", "-s", "-l", "-c", "-g", "-o"], false);
    let mut input = stdin.joined();
    for f in &o.operands {
        if name == "xxd" && o.operands.len() == 2 && *f == o.operands[1] {
            w.path_op(Action::Write, f, ctx, None);
        } else {
            w.path_op(Action::Read, f, ctx, None);
            if let Some(feed) = w.file_feed(f, ctx) {
                input.push_str(&feed.joined());
            }
        }
    }
    w.decoded(&input)
}

/// When the entry `decoder` applies.
pub(super) fn when_decoder(call: &Call<'_>) -> bool {
    let Call { name, args, .. } = call;
    decoding(name, args)
}

/// `tr` given text: the translated text.
pub(super) fn tr(w: &mut Walker<'_>, _ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    // `echo CREDENTIALS | tr A-Z a-z`: the translated text.
    let text = super::super::textops::tr(&stdin.joined(), args);
    w.out.text(text.as_str());
    Feed::text(text)
}

/// When the entry `tr` applies.
pub(super) fn when_tr(call: &Call<'_>) -> bool {
    let Call { stdin, .. } = call;
    !stdin.text.is_empty()
}

/// `rev` given text: each line reversed.
pub(super) fn rev(w: &mut Walker<'_>, _ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { stdin, .. } = call;
    let text: String = stdin
        .joined()
        .lines()
        .map(|l| l.chars().rev().collect::<String>())
        .collect::<Vec<_>>()
        .join("\n");
    w.out.text(text.as_str());
    Feed::text(text)
}

/// When the entry `rev` applies.
pub(super) fn when_rev(call: &Call<'_>) -> bool {
    let Call { stdin, .. } = call;
    !stdin.text.is_empty()
}

/// `uniq IN OUT` writes OUT.
pub(super) fn uniq(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let o = args::parse(args, UNIQ_VALUED, false);
    if let [input, output, ..] = o.operands.as_slice() {
        w.path_op(Action::Read, input, ctx, None);
        w.path_op(Action::Write, output, ctx, None);
    }
    Feed::default()
}

/// When the entry `uniq` applies.
pub(super) fn when_uniq(call: &Call<'_>) -> bool {
    let Call { args, .. } = call;
    args::parse(args, UNIQ_VALUED, false).operands.len() > 1
}

/// Commands that print a path computed from their operands (`cd "$(dirname …)"`).
pub(super) fn pwd(_w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let _ = call;
    Feed::text(ctx.cwd.clone())
}

/// `dirname`, `basename`, `realpath`: the path they print.
/// `mktemp [-d] [-p DIR] [TEMPLATE]`: the name it prints, with its `X`s as written (the
/// random letters are not known, but the place is: `f=$(mktemp); curl -o "$f" …; sh "$f"`
/// runs the file the download saved). Every call prints the same name here, which can only
/// join flows that real names would keep apart.
pub(super) fn mktemp(_w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    // `--tmpdir` takes its value only as `--tmpdir=DIR`.
    let o = args::parse(call.args, &["-p", "--suffix"], false);
    let template = o.operands.first().copied().unwrap_or("tmp.XXXXXXXXXX");
    let dir = o.value(&["-p", "--tmpdir"]).filter(|d| !d.is_empty());
    let in_tmp = o.operands.is_empty() || o.has(&["-t", "--tmpdir"]) || dir.is_some();
    let name = match (dir, in_tmp && !template.contains('/')) {
        (Some(d), true) => format!("{}/{template}", d.trim_end_matches('/')),
        (None, true) => format!("{}/{template}", ctx.var("TMPDIR").unwrap_or("/tmp")),
        (_, false) => template.to_owned(),
    };
    Feed::text(name)
}

pub(super) fn path_name(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { name, args, .. } = call;
    let o = args::parse(
        args,
        &["-s", "--suffix", "--relative-to", "--relative-base"],
        false,
    );
    let printed: Vec<String> = o
        .operands
        .iter()
        .map(|a| match name {
            "dirname" => a
                .trim_end_matches('/')
                .rsplit_once('/')
                .map_or(".", |(d, _)| if d.is_empty() { "/" } else { d })
                .to_owned(),
            "basename" => a
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_owned(),
            // realpath names the file; it reads nothing of it.
            _ => normalize::shell_path(a, ctx).unwrap_or_else(|| (*a).to_owned()),
        })
        .collect();
    let text = printed.join("\n");
    w.out.text(text.as_str());
    Feed::text(text)
}

/// When the entry `path_name` applies.
pub(super) fn when_path_name(call: &Call<'_>) -> bool {
    let Call { name, args, .. } = call;
    // `readlink -f`/`-e`/`-m` prints the resolved path, as realpath does (alone, it
    // prints a link's target, which the analysis does not know).
    !args.is_empty()
        && (*name != "readlink"
            || args.iter().any(|a| {
                a.starts_with("--canonicalize")
                    || (a.starts_with('-') && !a.starts_with("--") && a.contains(['f', 'e', 'm']))
            }))
}

/// `grep`, `rg`, `ag`…: files searched, what they print.
pub(super) fn grep(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name,
        args,
        depth,
        stdin,
    } = call;
    w.grep(name, args, ctx, depth, stdin)
}

/// `sed`: its script (which may run commands), files read or edited in place.
pub(super) fn sed(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    let o = args::parse(
        args,
        &["-e", "-f", "-l", "--expression", "--file", "--line-length"],
        false,
    );
    let mut scripts = o.values(&["-e", "--expression"]);
    let mut files = o.operands.clone();
    if scripts.is_empty() && o.values(&["-f", "--file"]).is_empty() && !files.is_empty() {
        scripts.push(files.remove(0));
    }
    for s in &scripts {
        w.out.text(*s);
        w.sed_script(s, ctx, depth);
    }
    w.sed_runs_input(&scripts, &files, &stdin, ctx);
    for f in o.values(&["-f", "--file"]) {
        w.path_op(Action::Read, f, ctx, None);
    }
    let in_place = o.has(&["-i", "-I", "--in-place"]);
    // Filtering its stdin, sed prints it edited (`… | sed s/X/e/ | sh`).
    let printed = if files.is_empty() && o.values(&["-f", "--file"]).is_empty() {
        Feed {
            text: stdin
                .text
                .iter()
                .map(|t| super::super::textops::sed(t, &scripts))
                .collect(),
            approximate: true,
            ..stdin
        }
    } else {
        Feed::default()
    };
    for f in files {
        w.path_op(Action::Read, f, ctx, None);
        if in_place {
            w.path_op(Action::Write, f, ctx, None);
        }
    }
    printed
}

/// `awk`: its program (which may run commands), files read.
pub(super) fn awk(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        args, depth, stdin, ..
    } = call;
    let o = args::parse(
        args,
        &[
            "-f",
            "-v",
            "-F",
            "--file",
            "--assign",
            "--field-separator",
            "-i",
            "--include",
            "-l",
            "--load",
            "-E",
            "--exec",
        ],
        false,
    );
    let progs = o.values(&["-f", "--file", "-E", "--exec", "-i", "--include"]);
    let mut files = o.operands.clone();
    for f in &progs {
        // `-f -`, `-f /dev/stdin`: the program is read from stdin (a download piped in is
        // run, a here-document's text is the program).
        if *f == "-" || super::super::flow::is_stdin_path(f) {
            w.script_source("awk", "/dev/stdin", &stdin, ctx);
            let code = stdin.joined();
            if !code.is_empty() {
                w.code(&code, ctx, depth);
            }
            continue;
        }
        w.path_op(Action::Read, f, ctx, None);
        w.script_source("awk", f, &stdin, ctx);
        // A program file this line wrote: its code is known.
        if let Some(code) = w.file_feed(f, ctx).map(|feed| feed.joined()) {
            if !code.is_empty() {
                w.code(&code, ctx, depth);
            }
        }
    }
    if progs.is_empty() && !files.is_empty() {
        let prog = files.remove(0);
        w.awk_runs_input(prog, &files, &stdin, ctx);
        // `-v name=value` is known to the program before it runs.
        let vars: Vec<(String, String)> = o
            .values(&["-v", "--assign"])
            .into_iter()
            .filter_map(|a| a.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        w.code_with(prog, ctx, depth, &vars);
    }
    let files: Vec<&str> = files.into_iter().filter(|f| !f.contains('=')).collect();
    for f in &files {
        w.path_op(Action::Read, f, ctx, None);
    }
    // Filtering its stdin, awk prints something made of it: the text stands
    // for it (`… | awk 1 | sh`).
    if files.is_empty() && progs.is_empty() {
        Feed {
            approximate: true,
            ..stdin
        }
    } else {
        Feed::default()
    }
}

/// `jq`, `yq`: files read.
pub(super) fn jq(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let o = args::parse(
        args,
        &[
            "-f",
            "--from-file",
            "--arg",
            "--argjson",
            "--slurpfile",
            "--rawfile",
            "--indent",
            "-L",
            "--tab",
            "--args",
            "--jsonargs",
        ],
        false,
    );
    let mut files = o.operands.clone();
    if o.value(&["-f", "--from-file"]).is_none() && !files.is_empty() {
        files.remove(0);
    }
    for f in files.into_iter().chain(o.values(&["-f", "--from-file"])) {
        w.path_op(Action::Read, f, ctx, None);
    }
    // --slurpfile NAME FILE / --rawfile NAME FILE: the file is the next word.
    for (i, a) in args.iter().enumerate() {
        if matches!(a.as_str(), "--slurpfile" | "--rawfile") {
            if let Some(f) = args.get(i + 2) {
                w.path_op(Action::Read, f, ctx, None);
            }
        }
    }
    Feed::default()
}

/// Interpreters of other languages: their code, script file or stdin.
pub(super) fn interpreter(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name,
        args,
        depth,
        stdin,
    } = call;
    w.interpreter(name, args, ctx, depth, &stdin)
}

/// Codex's patch tool run from its shell (`apply_patch "$PATCH"`, or the patch
/// on stdin from a here-doc): every file the patch names is changed.
pub(super) fn apply_patch(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    let text = args.first().cloned().unwrap_or_else(|| stdin.joined());
    for change in patch::changes(&text) {
        let content = (change.action == Action::Write).then(|| text.clone());
        w.path_op(change.action, &change.path, ctx, content);
    }
    Feed::default()
}
