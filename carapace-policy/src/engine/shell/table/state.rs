//! Builtins that change this shell's state (`cd`, `export`, `read`, `set`) or print text
//! the walk keeps (`echo`, `printf`).

use super::super::super::operation::Context;
use super::super::args;
use super::super::commands::{dir_stack, environment_feed, set_dir_stack, stack_index};
use super::super::flow;
use super::super::names::{unescape, valid_name};
use super::super::param::ELEMENT_BREAK;
use super::super::vars::{set_var, unset_var};
use super::super::walk::{Feed, Walker};
use super::Call;

/// `cd` / `pushd`: the working directory of the commands after it.
pub(super) fn cd(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { name, args, .. } = call;
    w.cd(name, args, ctx)
}

/// `export`, `declare`, `local`, `readonly`: variables set (alone: the environment printed).
pub(super) fn export(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call {
        name, args, depth, ..
    } = call;
    super::super::declare::declare(name, args, ctx);
    // `export GIT_SSH_COMMAND='…'`: a command the programs after it run.
    for (var, value) in args.iter().filter_map(|a| a.split_once('=')) {
        w.environment_command(var, value, ctx, depth);
    }
    // `export`, `export -p`, `declare -x`: the exported variables, listed.
    let names = args.iter().any(|a| !a.starts_with('-'));
    if matches!(name, "export" | "declare" | "typeset") && !names {
        return environment_feed();
    }
    Feed::default()
}

/// `set` alone lists every variable.
pub(super) fn set_listing(_w: &mut Walker<'_>, _ctx: &mut Context, call: Call<'_>) -> Feed {
    let _ = call;
    environment_feed()
}

/// When the entry `set_listing` applies.
pub(super) fn when_set_listing(call: &Call<'_>) -> bool {
    let Call { args, .. } = call;
    args.is_empty()
}

/// `let i=1 j=i+1`: each argument an arithmetic assignment.
pub(super) fn let_(_w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    for expr in call.args {
        super::super::vars::arithmetic_assignments(expr, ctx);
    }
    Feed::default()
}

/// `read NAME…`: a line of stdin split into variables.
pub(super) fn read(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    // read NAME… <<< "a b": the line's words, the last name takes the rest.
    let o = args::parse(
        args,
        &["-a", "-d", "-n", "-N", "-p", "-t", "-u", "-i"],
        false,
    );
    // A name listed by `find`/`ls` stands in when the text is not known; what a
    // filter printed is not known either, though it may be run.
    let line = if stdin.approximate {
        w.keep_approximate(stdin.text.clone());
        super::super::walk::UNKNOWN.to_owned()
    } else if stdin.text.is_empty() {
        stdin.names.first().cloned().unwrap_or_default()
    } else {
        stdin.joined()
    };
    let line = line.lines().next().unwrap_or("");
    let ifs = ctx.var("IFS").unwrap_or(" \t\n").to_owned();
    let spans = ifs_fields(line, &ifs);
    if let Some(array) = o.value(&["-a"]) {
        let fields: Vec<&str> = spans.iter().map(|&(a, b)| &line[a..b]).collect();
        set_var(ctx, array, &fields.join(&ELEMENT_BREAK.to_string()));
        return Feed::default();
    }
    let mut words = spans.iter().map(|&(a, b)| &line[a..b]);
    let names: Vec<&str> = o
        .operands
        .iter()
        .copied()
        .filter(|n| valid_name(n))
        .collect();
    // A line of a download is downloaded text: `eval "$line"` runs it.
    let taint = if stdin.downloaded { flow::STREAMED } else { "" };
    for (i, n) in names.iter().enumerate() {
        let value = if i + 1 == names.len() {
            // The last name takes the rest of the line, its delimiters included
            // (`IFS=/ read -r a b <<< x/y/z` sets b to `y/z`).
            let rest = spans.get(i).map_or("", |&(a, _)| &line[a..]);
            let ws = |c: char| c.is_whitespace() && ifs.contains(c);
            rest.trim_end_matches(ws).to_owned()
        } else {
            words.next().unwrap_or("").to_owned()
        };
        set_var(ctx, n, &format!("{value}{taint}"));
    }
    if names.is_empty() {
        set_var(ctx, "REPLY", &format!("{line}{taint}"));
    }
    Feed::default()
}

/// The fields `read` splits a line into, as byte spans: IFS whitespace around fields is
/// trimmed and runs of it are one delimiter, while each other IFS character ends a field of
/// its own, empty ones included (`IFS=/ read -r a b <<< /home` sets a to the empty string).
fn ifs_fields(line: &str, ifs: &str) -> Vec<(usize, usize)> {
    if ifs.is_empty() {
        return vec![(0, line.len())];
    }
    let ws = |c: char| c.is_whitespace() && ifs.contains(c);
    let mut spans = Vec::new();
    let mut chars = line.char_indices().peekable();
    while chars.next_if(|&(_, c)| ws(c)).is_some() {}
    let mut start = chars.peek().map_or(line.len(), |&(i, _)| i);
    while let Some((i, c)) = chars.next() {
        if !ifs.contains(c) {
            continue;
        }
        // One delimiter: a run of IFS whitespace with at most one other IFS character.
        let mut hard = !ws(c);
        while let Some(&(_, n)) = chars.peek() {
            if ws(n) || (!hard && ifs.contains(n)) {
                hard |= !ws(n);
                chars.next();
            } else {
                break;
            }
        }
        spans.push((start, i));
        start = chars.peek().map_or(line.len(), |&(j, _)| j);
    }
    if start < line.len() {
        spans.push((start, line.len()));
    }
    spans
}

/// `mapfile` / `readarray`: stdin's lines into an array.
pub(super) fn mapfile(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, stdin, .. } = call;
    // mapfile -t NAME: one element per line of stdin.
    let o = args::parse(args, &["-d", "-n", "-O", "-s", "-u", "-C", "-c"], false);
    let name = o.operands.first().copied().unwrap_or("MAPFILE");
    // Names listed by `find`/`locate` stand in when the text is not known.
    let text = if stdin.approximate {
        w.keep_approximate(stdin.text.clone());
        super::super::walk::UNKNOWN.to_owned()
    } else if stdin.text.is_empty() {
        stdin.names.join("\n")
    } else {
        stdin.joined()
    };
    // `-s N` skips the first lines; `-O N` puts the first at index N.
    let number = |flag: &str| {
        o.value(&[flag])
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0)
    };
    let lines: Vec<&str> = std::iter::repeat_n("", number("-O").min(MAX_ORIGIN))
        .chain(text.lines().skip(number("-s")))
        .collect();
    // A download's lines stay tainted: `eval "${a[*]}"` runs them.
    let taint = if stdin.downloaded { flow::STREAMED } else { "" };
    if valid_name(name) && !(lines.is_empty() && taint.is_empty()) {
        let elements = lines.join(&ELEMENT_BREAK.to_string());
        set_var(ctx, name, &format!("{elements}{taint}"));
    }
    Feed::default()
}

/// The highest `mapfile -O` index filled in (elements before it are left empty).
const MAX_ORIGIN: usize = 64;

/// `set -- a b` / `set a b`: the positional parameters.
pub(super) fn set_positional(_w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    // `set -- a b`: the positional parameters.
    let params = args.strip_prefix(&["--".to_owned()]).unwrap_or(args);
    for i in 1..=9 {
        set_var(
            ctx,
            &i.to_string(),
            params.get(i - 1).map_or("", String::as_str),
        );
    }
    set_var(ctx, "@", &params.join(" "));
    set_var(ctx, "#", &params.len().to_string());
    Feed::default()
}

/// When the entry `set_positional` applies.
pub(super) fn when_set_positional(call: &Call<'_>) -> bool {
    let Call { args, .. } = call;
    args.first().is_some_and(|a| a == "--")
        || args.first().is_some_and(|a| !a.starts_with(['-', '+']))
}

/// `popd`: back to the directory the matching `pushd` left.
/// `popd +N`/`-N` drops entry N and moves only when it was the top; `popd -n` drops the
/// entry below the top and stays.
pub(super) fn popd(_w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let mut stack = dir_stack(ctx);
    if stack.len() < 2 {
        return Feed::default();
    }
    let no_cd = args.iter().any(|a| a == "-n");
    let at = match args.iter().find(|a| a.as_str() != "-n") {
        Some(arg) => stack_index(arg, stack.len()),
        None => Some(usize::from(no_cd)),
    };
    if let Some(at) = at {
        stack.remove(at);
        set_dir_stack(ctx, &stack);
    }
    Feed::default()
}

/// `shopt`: the glob options later words expand with.
pub(super) fn shopt(_w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    if let Some(options) = super::super::globopts::shopt(ctx, args) {
        set_var(ctx, super::super::globopts::variable(), &options);
    }
    Feed::default()
}

/// `shift [N]`: the positional parameters, moved down.
pub(super) fn shift(_w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let n = args
        .first()
        .and_then(|a| a.parse::<usize>().ok())
        .unwrap_or(1);
    let params: Vec<String> = (1..=9)
        .map(|i| ctx.var(&i.to_string()).unwrap_or("").to_owned())
        .skip(n)
        .collect();
    for i in 1..=9 {
        set_var(
            ctx,
            &i.to_string(),
            params.get(i - 1).map_or("", String::as_str),
        );
    }
    Feed::default()
}

/// `unset NAME…`.
pub(super) fn unset(_w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    for a in args.iter().filter(|a| !a.starts_with('-')) {
        unset_var(ctx, a);
    }
    Feed::default()
}

/// `alias NAME=VALUE`: the value is walked now, and runs when the name does.
pub(super) fn alias(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, depth, .. } = call;
    for a in args {
        if let Some((k, v)) = a.split_once('=') {
            w.out.text(v);
            w.aliases.push((k.to_owned(), v.to_owned()));
            // Also walk it now: an alias defined is an alias about to be used.
            w.script(v, &mut ctx.clone(), depth + 1);
        }
    }
    Feed::default()
}

/// `echo` (`-e`: escapes): the text it prints.
pub(super) fn echo(w: &mut Walker<'_>, _ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let mut escapes = false;
    let mut no_newline = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a.len() > 1 && a.starts_with('-') && a[1..].bytes().all(|b| b"neE".contains(&b)) {
            escapes |= a.contains('e');
            no_newline |= a.contains('n');
            i += 1;
        } else {
            break;
        }
    }
    let text = args[i..].join(" ");
    let text = if escapes { unescape(&text) } else { text };
    w.out.text(text.as_str());
    Feed {
        open_end: no_newline,
        ..Feed::text(text)
    }
}

/// `printf` (`-v VAR`): the text it prints, or the variable it sets.
pub(super) fn printf(w: &mut Walker<'_>, ctx: &mut Context, call: Call<'_>) -> Feed {
    let Call { args, .. } = call;
    let o = args::parse(args, &["-v"], true);
    // Arguments are tilde-expanded before `%.18s` cuts them (the walk leaves
    // tildes for paths to resolve).
    let filled: Vec<String> = o
        .rest
        .iter()
        .enumerate()
        .map(|(i, a)| match a.strip_prefix('~') {
            Some(rest) if i > 0 && (rest.is_empty() || rest.starts_with('/')) => {
                format!("{}{rest}", ctx.home)
            }
            _ => a.clone(),
        })
        .collect();
    let text = super::super::printf::printf(&filled);
    w.out.text(text.as_str());
    match o.value(&["-v"]) {
        Some(var) => {
            set_var(ctx, var, &text);
            Feed::default()
        }
        None => Feed {
            open_end: !text.is_empty() && !text.ends_with('\n'),
            ..Feed::text(text)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::ifs_fields;

    fn fields<'a>(line: &'a str, ifs: &str) -> Vec<&'a str> {
        ifs_fields(line, ifs)
            .into_iter()
            .map(|(a, b)| &line[a..b])
            .collect()
    }

    #[test]
    fn fields_split_as_read_splits_them() {
        assert_eq!(fields("  a  b ", " \t\n"), ["a", "b"]);
        assert_eq!(fields("/home/u/.netrc", "/"), ["", "home", "u", ".netrc"]);
        assert_eq!(fields("a::b/", ":/"), ["a", "", "b"]);
        assert_eq!(fields("a , b", " ,"), ["a", "b"]);
        assert_eq!(fields("a b", ""), ["a b"]);
    }
}
