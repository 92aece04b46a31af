//! `declare`, `typeset`, `local`, `export` and `readonly`: the assignments they make, with
//! the attributes that change what later expansions see — a nameref (`-n`: `$r` is the
//! variable it names), an associative array (`-A`: `${m[key]}` by key) and lists of
//! elements with explicit keys or indices (`([k]=v [3]=w)`).
use super::super::operation::Context;
use super::param::{self, ELEMENT_BREAK};
use super::vars::{set_scalar, set_var};

/// Runs `name args…` (one of the declaring builtins) against `ctx`.
pub(super) fn declare(name: &str, args: &[String], ctx: &mut Context) {
    // Attributes are `-x`, `-rn`…; `+x` takes one away. `export -n` un-exports.
    let flags: String = args
        .iter()
        .filter(|a| a.starts_with('-') && !a.contains('='))
        .flat_map(|a| a.chars().skip(1))
        .collect();
    let nameref = flags.contains('n') && name != "export";
    let assoc = flags.contains('A');
    // `-l`/`-u`: the value is stored in lower or upper case (`declare -l p=/HOME/…`).
    let case: Option<fn(&str) -> String> = match (flags.contains('l'), flags.contains('u')) {
        (true, _) => Some(str::to_lowercase),
        (_, true) => Some(str::to_uppercase),
        _ => None,
    };
    for a in args.iter().filter(|a| !a.starts_with(['-', '+'])) {
        let (k, v) = match a.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (a.as_str(), None),
        };
        let append = k.ends_with('+');
        let k = k.trim_end_matches('+');
        if !valid_name(k) {
            continue;
        }
        if nameref {
            if let Some(target) = v.filter(|t| !t.is_empty()) {
                ctx.set_nameref(k, target);
            }
            continue;
        }
        if assoc && !param::is_assoc(ctx, k) {
            set_scalar(ctx, &param::keys_name(k), "");
        }
        let Some(v) = v else {
            continue;
        };
        let cased = case.map(|f| f(v));
        let v = cased.as_deref().unwrap_or(v);
        match v.strip_prefix('(').and_then(|l| l.strip_suffix(')')) {
            Some(list) => elements(ctx, k, list, append),
            None if append => {
                let joined = format!("{}{v}", ctx.var(k).unwrap_or(""));
                set_var(ctx, k, &joined);
            }
            None => set_var(ctx, k, v),
        }
    }
}

/// `k=(a b)`, `k=([key]=v …)`: the builtin sees the list as one word of text.
fn elements(ctx: &mut Context, array: &str, list: &str, append: bool) {
    // A quoted list (`declare -a a='([0]="cat" [1]="F")'`) is still a compound
    // assignment to declare, and its values lose their quotes as the words of one do.
    let unquoted: Vec<String> = list
        .split_whitespace()
        .map(|item| {
            let (head, value) = match item.split_once("]=") {
                Some((k, v)) if item.starts_with('[') => (&item[..=k.len() + 1], v),
                _ => ("", item),
            };
            let bare = ['"', '\'']
                .iter()
                .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
                .unwrap_or(value);
            format!("{head}{bare}")
        })
        .collect();
    let items: Vec<&str> = unquoted.iter().map(String::as_str).collect();
    let keyed = |item: &str| {
        item.strip_prefix('[')
            .and_then(|rest| rest.split_once("]="))
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
    };
    if !items.iter().any(|i| keyed(i).is_some()) && !param::is_assoc(ctx, array) {
        let mut all: Vec<String> = Vec::new();
        if append {
            all.extend(
                param::elements(ctx, array)
                    .split(ELEMENT_BREAK)
                    .filter(|e| !e.is_empty())
                    .map(str::to_owned),
            );
        }
        all.extend(items.iter().map(|i| (*i).to_owned()));
        set_var(ctx, array, &all.join(&ELEMENT_BREAK.to_string()));
        return;
    }
    let assoc = param::is_assoc(ctx, array);
    let mut next = 0usize;
    for item in items {
        let (key, value) = keyed(item).unwrap_or_else(|| (next.to_string(), item.to_owned()));
        let key = if assoc {
            key
        } else {
            match param::arithmetic(&key, ctx).and_then(|i| usize::try_from(i).ok()) {
                Some(i) => {
                    next = i + 1;
                    i.to_string()
                }
                None => continue,
            }
        };
        set_var(ctx, &format!("{array}[{key}]"), &value);
    }
}

fn valid_name(k: &str) -> bool {
    !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
