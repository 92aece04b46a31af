//! The shell options that change what a glob names: `shopt -s nocaseglob` (letters match
//! either case) and `dotglob` (a leading wildcard matches hidden names too; a non-empty
//! `GLOBIGNORE` turns it on as well). A written glob is rewritten into the plain glob that
//! names the same files, so that rules meet it as bash would expand it.

use std::borrow::Cow;

use super::super::operation::Context;

/// Where `shopt -s` records options: bash's own read-only list of them.
const OPTIONS: &str = "BASHOPTS";

/// `shopt -s|-u NAME…`: the new value of the option list.
pub(super) fn shopt(ctx: &Context, args: &[String]) -> Option<String> {
    let set = match args.first().map(String::as_str) {
        Some("-s") => true,
        Some("-u") => false,
        _ => return None,
    };
    let mut on: Vec<String> = ctx
        .var(OPTIONS)
        .unwrap_or("")
        .split(':')
        .filter(|o| !o.is_empty())
        .map(str::to_owned)
        .collect();
    for name in args.iter().skip(1).filter(|a| !a.starts_with('-')) {
        on.retain(|o| o != name);
        if set {
            on.push(name.clone());
        }
    }
    Some(on.join(":"))
}

pub(super) fn variable() -> &'static str {
    OPTIONS
}

fn enabled(ctx: &Context, name: &str) -> bool {
    ctx.var(OPTIONS)
        .is_some_and(|v| v.split(':').any(|o| o == name))
}

/// `[c]` (a class of one character) written as `c` (escaped if it is a wildcard itself).
fn single_classes(raw: &str) -> Cow<'_, str> {
    let b = raw.as_bytes();
    let is_single = |i: usize| {
        b[i] == b'['
            && (i == 0 || b[i - 1] != b'\\')
            && b.get(i + 2) == Some(&b']')
            && b.get(i + 1)
                .is_some_and(|c| c.is_ascii() && !matches!(c, b'!' | b'^' | b']' | b'/' | b'\\'))
    };
    if !(0..b.len()).any(is_single) {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < b.len() {
        if is_single(i) {
            let c = char::from(b[i + 1]);
            if matches!(c, '*' | '?' | '[' | '{' | '}') {
                out.push('\\');
            }
            out.push(c);
            i += 3;
        } else {
            let ch = raw[i..].chars().next().unwrap_or('\0');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    Cow::Owned(out)
}

/// `raw` as the glob that names what bash would match with the options in force.
pub(super) fn apply<'a>(raw: &'a str, ctx: &Context) -> Cow<'a, str> {
    // Most paths have no wildcard: no option lookup, no copy.
    if !raw.contains(['*', '?', '[']) {
        return Cow::Borrowed(raw);
    }
    // `known_host[s]` names one file, `known_hosts`: written so, rules' exceptions for the
    // file apply to it as they do to its plain name. (Under nocaseglob `[s]` is `[sS]`.)
    if enabled(ctx, "nocaseglob") {
        return with_options(raw, ctx);
    }
    match single_classes(raw) {
        Cow::Borrowed(raw) => with_options(raw, ctx),
        Cow::Owned(plain) => Cow::Owned(with_options(&plain, ctx).into_owned()),
    }
}

fn with_options<'a>(raw: &'a str, ctx: &Context) -> Cow<'a, str> {
    let nocase = enabled(ctx, "nocaseglob");
    let dotglob = enabled(ctx, "dotglob") || ctx.var("GLOBIGNORE").is_some_and(|g| !g.is_empty());
    if !(nocase || dotglob) {
        return Cow::Borrowed(raw);
    }
    let rewritten = raw
        .split('/')
        .map(|name| {
            if !name.contains(['*', '?', '[']) {
                // Names without wildcards are looked up as written.
                return name.to_owned();
            }
            let name = if nocase {
                caseless(name)
            } else {
                name.to_owned()
            };
            if dotglob && name.starts_with(['*', '?', '[']) {
                format!("{{.,}}{name}")
            } else {
                name
            }
        })
        .collect::<Vec<_>>()
        .join("/");
    Cow::Owned(rewritten)
}

/// Each letter as a class of both its cases (`.AW?` → `.[aA][wW]?`); letters already in a
/// bracket expression get their other case added.
pub(super) fn caseless(name: &str) -> String {
    let mut out = String::with_capacity(name.len() * 3);
    let mut in_class = false;
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        match c {
            // An escaped character stays as written (`\*` is a star).
            '\\' => {
                out.push(c);
                out.extend(chars.next());
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            c if c.is_ascii_alphabetic() && in_class => {
                out.push(c.to_ascii_lowercase());
                out.push(c.to_ascii_uppercase());
            }
            c if c.is_ascii_alphabetic() => {
                out.push('[');
                out.push(c.to_ascii_lowercase());
                out.push(c.to_ascii_uppercase());
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(opts: &str) -> Context {
        Context {
            env: vec![(OPTIONS.to_owned(), opts.to_owned())],
            ..Context::default()
        }
    }

    #[test]
    fn a_class_of_one_character_is_that_character() {
        assert_eq!(
            apply("~/.ssh/known_host[s]", &ctx("")),
            "~/.ssh/known_hosts"
        );
        assert_eq!(apply("a[*]b[!x][^y][]]", &ctx("")), "a\\*b[!x][^y][]]");
        assert_eq!(apply("a\\[b]", &ctx("")), "a\\[b]");
        assert_eq!(apply("[ab]", &ctx("")), "[ab]");
    }

    #[test]
    fn options_rewrite_only_the_names_with_wildcards() {
        assert_eq!(
            apply("~/.AW?/cred", &ctx("nocaseglob")),
            "~/.[aA][wW]?/cred"
        );
        assert_eq!(
            apply("~/.NETR[C]", &ctx("nocaseglob")),
            "~/.[nN][eE][tT][rR][cC]"
        );
        assert_eq!(apply("src/*", &ctx("dotglob")), "src/{.,}*");
        assert_eq!(apply("src/*", &ctx("")), "src/*");
        assert_eq!(apply("README", &ctx("nocaseglob")), "README");
    }

    #[test]
    fn shopt_sets_and_unsets() {
        let c = ctx("extglob");
        let args: Vec<String> = ["-s", "dotglob", "nocaseglob"].map(String::from).to_vec();
        assert_eq!(
            shopt(&c, &args).as_deref(),
            Some("extglob:dotglob:nocaseglob")
        );
        let args: Vec<String> = ["-u", "extglob"].map(String::from).to_vec();
        assert_eq!(shopt(&c, &args).as_deref(), Some(""));
    }
}
