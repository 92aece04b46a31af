//! `${…}` parameter expansion with bash's operators applied to the value, not to its text:
//! case changes (`${x,,}` `${x^^}` `${x^}` `${x~~}`), substrings with negative or computed
//! offsets (`${p: -4}`, `${p:1+1}`), prefix and suffix removal and substitution by glob
//! pattern (`${p#*/}`, `${p%%.*}`, `${p//[0-9]/}`, `${p/#X/}`), indirection (`${!x}`) and
//! array elements (`${a[1]}`, `${a[-1]}`, `${a[@]:1}`). A path hidden behind any of these is
//! the path the shell would open.

use super::super::operation::Context;

/// Arrays are kept as one variable per element (`a[0]`, `a[1]`, …) plus their count
/// (`a[#]`); `$a` is element 0, as in bash.
pub(super) fn element_name(array: &str, index: usize) -> String {
    format!("{array}[{index}]")
}

pub(super) fn count_name(array: &str) -> String {
    format!("{array}[#]")
}

/// The keys of associative array `array` (`declare -A`), separated by [`ELEMENT_BREAK`];
/// its presence makes the array associative: `${m[key]}` is looked up by key, not index.
pub(super) fn keys_name(array: &str) -> String {
    format!("{array}[%]")
}

pub(super) fn is_assoc(ctx: &Context, array: &str) -> bool {
    ctx.var(&keys_name(array)).is_some()
}

/// Every element of `array`, separated by [`ELEMENT_BREAK`] (`${a[@]}`).
pub(super) fn elements(ctx: &Context, array: &str) -> String {
    if let Some(keys) = ctx.var(&keys_name(array)) {
        return keys
            .split(ELEMENT_BREAK)
            .filter(|k| !k.is_empty())
            .map(|k| var(ctx, &format!("{array}[{k}]")))
            .collect::<Vec<_>>()
            .join(&ELEMENT_BREAK.to_string());
    }
    let count: usize = ctx
        .var(&count_name(array))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| usize::from(ctx.var(array).is_some()));
    (0..count)
        .map(|i| element(ctx, array, i))
        .collect::<Vec<_>>()
        .join(&ELEMENT_BREAK.to_string())
}

/// Separates the elements of `"${a[@]}"`: each is a field of its own even when quoted.
pub(super) const ELEMENT_BREAK: char = '\u{1}';

/// `${…}` without the braces. `expand` expands a word inside it (`${x:-WORD}`): word
/// expansion and parameter expansion recurse into each other, and the word side lives in
/// `word`, which calls this one.
pub(super) fn parameter(
    inner: &str,
    ctx: &Context,
    expand: &mut dyn FnMut(&str) -> String,
) -> String {
    if let Some(target) = inner.strip_prefix('!') {
        // ${!name}: the variable named by name's value.
        return if valid_name(target) {
            var(ctx, &var(ctx, target))
        } else {
            String::new()
        };
    }
    if let Some(spec) = inner
        .strip_prefix(['@', '*'])
        .and_then(|r| r.strip_prefix(':'))
        .filter(|r| !r.starts_with(['-', '=', '+', '?']))
    {
        return positional_slice(spec, ctx, expand);
    }
    if inner.len() > 1 && inner.starts_with('#') {
        // Lengths: nothing a path could be made of.
        return String::new();
    }
    let name_len = inner
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(inner.len(), |(i, _)| i);
    let (name, op) = inner.split_at(name_len);
    // A nameref's expansions are those of the variable it names.
    let name = ctx.referent(name);
    let (value, op) = match op.strip_prefix('[') {
        Some(sub) => {
            let Some(end) = sub.find(']') else {
                return var(ctx, name);
            };
            (subscript(ctx, name, &sub[..end], expand), &sub[end + 1..])
        }
        None => (var(ctx, name), op),
    };
    let set = ctx.var(name).is_some() || name == "IFS";
    operator(value, set, op, ctx, expand)
}

/// The value of `name[sub]`: one element, or all of them for `@` / `*`.
fn subscript(
    ctx: &Context,
    name: &str,
    sub: &str,
    expand: &mut dyn FnMut(&str) -> String,
) -> String {
    if sub == "@" || sub == "*" {
        return elements(ctx, name);
    }
    if is_assoc(ctx, name) {
        let key = expand(sub);
        return var(ctx, &format!("{name}[{key}]"));
    }
    let count: usize = ctx
        .var(&count_name(name))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| usize::from(ctx.var(name).is_some()));
    let index = arithmetic(&expand(sub), ctx).unwrap_or(0);
    let index = if index < 0 {
        i64::try_from(count).unwrap_or(0) + index
    } else {
        index
    };
    usize::try_from(index).map_or_else(|_| String::new(), |i| element(ctx, name, i))
}

fn element(ctx: &Context, name: &str, i: usize) -> String {
    match ctx.var(&element_name(name, i)) {
        Some(v) => v.to_owned(),
        None if i == 0 => var(ctx, name),
        None => String::new(),
    }
}

/// The operator part of `${name…}` applied to `value`.
fn operator(
    value: String,
    set: bool,
    op: &str,
    ctx: &Context,
    expand: &mut dyn FnMut(&str) -> String,
) -> String {
    let (colon, rest) = match op.strip_prefix(':') {
        Some(r) if r.starts_with(['-', '=', '+', '?']) => (true, r),
        _ => (false, op),
    };
    let present = if colon { !value.is_empty() } else { set };
    let mut it = rest.chars();
    match it.next() {
        Some('-' | '=') if present => value,
        Some('-' | '=') => expand(it.as_str()),
        Some('+') if present => expand(it.as_str()),
        Some('+') => String::new(),
        Some('#') => {
            let longest = rest.starts_with("##");
            let pat = expand(rest.trim_start_matches('#'));
            remove_prefix(&value, &pat, longest)
        }
        Some('%') => {
            let longest = rest.starts_with("%%");
            let pat = expand(rest.trim_start_matches('%'));
            remove_suffix(&value, &pat, longest)
        }
        Some('/') => substitute(&value, &rest[1..], expand),
        Some(':') => substring(&value, &rest[1..], ctx, expand),
        Some(',' | '^' | '~') => change_case(&value, rest),
        // No operator, `?` and the rest: the value itself.
        _ => value,
    }
}

fn change_case(value: &str, op: &str) -> String {
    let all = op.len() > 1 && op.as_bytes()[0] == op.as_bytes()[1];
    let flip = |c: char| -> String {
        match op.as_bytes()[0] {
            b',' => c.to_lowercase().collect(),
            b'^' => c.to_uppercase().collect(),
            _ if c.is_lowercase() => c.to_uppercase().collect(),
            _ => c.to_lowercase().collect(),
        }
    };
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        if all || i == 0 {
            out.push_str(&flip(c));
        } else {
            out.push(c);
        }
    }
    out
}

fn substring(
    value: &str,
    spec: &str,
    ctx: &Context,
    expand: &mut dyn FnMut(&str) -> String,
) -> String {
    let chars: Vec<char> = value.chars().collect();
    let (start, end) = slice_bounds(spec, chars.len(), 0, ctx, expand);
    chars
        .get(start..end.max(start))
        .unwrap_or(&[])
        .iter()
        .collect()
}

/// The `start..end` that `OFF[:LEN]` (`spec`, arithmetic) selects of `count` items, as bash
/// counts: a negative offset from the end (not before `first`), a negative length as an end
/// counted back.
fn slice_bounds(
    spec: &str,
    count: usize,
    first: i64,
    ctx: &Context,
    expand: &mut dyn FnMut(&str) -> String,
) -> (usize, usize) {
    let n = i64::try_from(count).unwrap_or(i64::MAX);
    let (off, len) = match spec.split_once(':') {
        Some((o, l)) => (o, Some(l)),
        None => (spec, None),
    };
    let off = arithmetic(&expand(off), ctx).unwrap_or(0);
    let start = if off < 0 {
        (n + off).max(first)
    } else {
        off.min(n)
    };
    let end = match len.map(|l| arithmetic(&expand(l), ctx).unwrap_or(0)) {
        None => n,
        Some(l) if l < 0 => (n + l).max(start),
        Some(l) => start.saturating_add(l).min(n),
    };
    (
        usize::try_from(start).unwrap_or(0),
        usize::try_from(end).unwrap_or(0),
    )
}

/// `${@:OFF}`, `${@:OFF:LEN}`, `${@: -1}`: positional parameters from OFF (`$0` is 0), as
/// `$@` is kept (joined by spaces).
fn positional_slice(spec: &str, ctx: &Context, expand: &mut dyn FnMut(&str) -> String) -> String {
    let all = var(ctx, "@");
    let params: Vec<&str> = std::iter::once(ctx.var("0").unwrap_or(""))
        .chain(all.split(' ').filter(|p| !p.is_empty()))
        .collect();
    // A negative offset counts back from the last parameter, not from `$0`.
    let (start, end) = slice_bounds(spec, params.len(), 1, ctx, expand);
    params.get(start..end.max(start)).unwrap_or(&[]).join(" ")
}

fn remove_prefix(value: &str, pat: &str, longest: bool) -> String {
    if too_long(value, pat) {
        return value.to_owned();
    }
    let cuts: Vec<usize> = boundaries(value);
    let mut order: Box<dyn Iterator<Item = &usize>> = if longest {
        Box::new(cuts.iter().rev())
    } else {
        Box::new(cuts.iter())
    };
    order
        .find(|&&i| glob_matches(pat, &value[..i]))
        .map_or_else(|| value.to_owned(), |&i| value[i..].to_owned())
}

fn remove_suffix(value: &str, pat: &str, longest: bool) -> String {
    if too_long(value, pat) {
        return value.to_owned();
    }
    let cuts: Vec<usize> = boundaries(value);
    let mut order: Box<dyn Iterator<Item = &usize>> = if longest {
        Box::new(cuts.iter())
    } else {
        Box::new(cuts.iter().rev())
    };
    order
        .find(|&&i| glob_matches(pat, &value[i..]))
        .map_or_else(|| value.to_owned(), |&i| value[..i].to_owned())
}

/// `${v/pat/rep}`, `${v//pat/rep}`, `${v/#pat/rep}`, `${v/%pat/rep}`: the longest match at
/// the first (or every) place the pattern matches.
fn substitute(value: &str, spec: &str, expand: &mut dyn FnMut(&str) -> String) -> String {
    let (mode, body) = match spec.chars().next() {
        Some(c @ ('/' | '#' | '%')) => (Some(c), &spec[1..]),
        _ => (None, spec),
    };
    // The pattern ends at the first `/` not escaped (`${x/\/tmp/$HOME}`).
    let end = body
        .char_indices()
        .find(|&(i, c)| c == '/' && !body[..i].ends_with('\\'))
        .map_or(body.len(), |(i, _)| i);
    let pat = body[..end].replace("\\/", "/");
    let rep = body.get(end + 1..).unwrap_or("");
    let pat = expand(&pat);
    let rep = expand(rep);
    if pat.is_empty() || too_long(value, &pat) {
        return value.to_owned();
    }
    let cuts = boundaries(value);
    match mode {
        Some('#') => cuts
            .iter()
            .rev()
            .find(|&&e| glob_matches(&pat, &value[..e]))
            .map_or_else(|| value.to_owned(), |&e| format!("{rep}{}", &value[e..])),
        Some('%') => cuts
            .iter()
            .find(|&&s| glob_matches(&pat, &value[s..]))
            .map_or_else(|| value.to_owned(), |&s| format!("{}{rep}", &value[..s])),
        _ => {
            let all = mode == Some('/');
            let mut out = String::new();
            let mut at = 0;
            while at < value.len() {
                let found = cuts
                    .iter()
                    .rev()
                    .filter(|&&e| e > at)
                    .find(|&&e| glob_matches(&pat, &value[at..e]));
                if let Some(&e) = found {
                    out.push_str(&rep);
                    at = e;
                    if !all {
                        out.push_str(&value[at..]);
                        return out;
                    }
                } else {
                    let next = cuts
                        .iter()
                        .find(|&&c| c > at)
                        .copied()
                        .unwrap_or(value.len());
                    out.push_str(&value[at..next]);
                    at = next;
                }
            }
            out
        }
    }
}

/// Pattern operators match at every cut of the value (and substitution at every start
/// against every end): values and patterns longer than these are left as they are, which
/// keeps a call's work bounded. No path component an agent hides is that long.
const MAX_VALUE: usize = 256;
const MAX_PATTERN: usize = 128;

fn too_long(value: &str, pat: &str) -> bool {
    value.len() > MAX_VALUE || pat.len() > MAX_PATTERN
}

/// Every char boundary of `s`, both ends included.
fn boundaries(s: &str) -> Vec<usize> {
    s.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()))
        .collect()
}

/// Values longer than this are not matched by pattern (the matcher backtracks).
const MAX_MATCHED: usize = 4096;

/// Whether the shell pattern `pat` matches all of `text`: `*`, `?`, bracket expressions
/// with ranges, negation and POSIX classes, and backslash escapes.
pub(super) fn glob_matches(pat: &str, text: &str) -> bool {
    if text.len() > MAX_MATCHED || pat.len() > MAX_MATCHED {
        return false;
    }
    let p: Vec<char> = pat.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matching with one backtrack point for the last `*`: linear enough.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some('?') => Some(pi + 1),
            Some('[') => bracket(&p, pi, t[ti]),
            Some('\\') if pi + 1 < p.len() => (p[pi + 1] == t[ti]).then_some(pi + 2),
            Some(&c) => (c == t[ti]).then_some(pi + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                ti += 1;
            }
            (None, Some((sp, st))) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A bracket expression at `p[open]` against `c`: the index after it when it matches, `None`
/// when it does not; an unclosed `[` is a literal `[`.
fn bracket(p: &[char], open: usize, c: char) -> Option<usize> {
    let mut i = open + 1;
    let negated = matches!(p.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < p.len() && (p[i] != ']' || first) {
        first = false;
        if p[i] == '[' && p.get(i + 1) == Some(&':') {
            let rest: String = p[i + 2..].iter().collect();
            if let Some(end) = rest.find(":]") {
                hit |= posix_class(&rest[..end], c);
                i += 2 + rest[..end].chars().count() + 2;
                continue;
            }
        }
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&e| e != ']') {
            hit |= (p[i]..=p[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= p[i] == c;
            i += 1;
        }
    }
    if i >= p.len() {
        return (c == '[').then_some(open + 1);
    }
    (hit != negated).then_some(i + 1)
}

pub(super) fn posix_class(name: &str, c: char) -> bool {
    match name {
        "alpha" => c.is_alphabetic(),
        "digit" => c.is_ascii_digit(),
        "alnum" => c.is_alphanumeric(),
        "upper" => c.is_uppercase(),
        "lower" => c.is_lowercase(),
        "space" => c.is_whitespace(),
        "blank" => c == ' ' || c == '\t',
        "punct" => c.is_ascii_punctuation(),
        "xdigit" => c.is_ascii_hexdigit(),
        "cntrl" => c.is_control(),
        "print" => !c.is_control(),
        "graph" => !c.is_control() && !c.is_whitespace(),
        "word" => c.is_alphanumeric() || c == '_',
        _ => false,
    }
}

/// Integer arithmetic as `$((…))` and offsets do it: `+ - * / %`, parentheses, unary minus,
/// numbers and variables; `None` for anything else.
pub(super) fn arithmetic(expr: &str, ctx: &Context) -> Option<i64> {
    let tokens: Vec<char> = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let mut at = 0;
    let v = sum(&tokens, &mut at, ctx, 0)?;
    (at == tokens.len()).then_some(v)
}

/// Nesting deeper than this is not evaluated.
const MAX_NESTING: usize = 32;

fn sum(t: &[char], at: &mut usize, ctx: &Context, depth: usize) -> Option<i64> {
    let mut v = product(t, at, ctx, depth)?;
    while let Some(&op @ ('+' | '-')) = t.get(*at) {
        *at += 1;
        let r = product(t, at, ctx, depth)?;
        v = if op == '+' {
            v.checked_add(r)?
        } else {
            v.checked_sub(r)?
        };
    }
    Some(v)
}

fn product(t: &[char], at: &mut usize, ctx: &Context, depth: usize) -> Option<i64> {
    let mut v = unary(t, at, ctx, depth)?;
    while let Some(&op @ ('*' | '/' | '%')) = t.get(*at) {
        *at += 1;
        let r = unary(t, at, ctx, depth)?;
        v = match op {
            '*' => v.checked_mul(r)?,
            '/' => v.checked_div(r)?,
            _ => v.checked_rem(r)?,
        };
    }
    Some(v)
}

fn unary(t: &[char], at: &mut usize, ctx: &Context, depth: usize) -> Option<i64> {
    if depth > MAX_NESTING {
        return None;
    }
    match t.get(*at)? {
        '-' => {
            *at += 1;
            unary(t, at, ctx, depth + 1)?.checked_neg()
        }
        '+' => {
            *at += 1;
            unary(t, at, ctx, depth + 1)
        }
        '(' => {
            *at += 1;
            let v = sum(t, at, ctx, depth + 1)?;
            (t.get(*at) == Some(&')')).then(|| *at += 1)?;
            Some(v)
        }
        c if c.is_ascii_digit() => {
            let start = *at;
            while t.get(*at).is_some_and(char::is_ascii_digit) {
                *at += 1;
            }
            t[start..*at].iter().collect::<String>().parse().ok()
        }
        c if c.is_ascii_alphabetic() || *c == '_' || *c == '$' => {
            if *c == '$' {
                *at += 1;
            }
            let start = *at;
            while t
                .get(*at)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                *at += 1;
            }
            let name: String = t[start..*at].iter().collect();
            let value = ctx.var(&name).unwrap_or("0").trim();
            Some(value.parse().unwrap_or(0))
        }
        _ => None,
    }
}

/// A variable's value; `IFS` has its default when unset (`cat${IFS}/etc/shadow` is a classic).
/// The shell's own PID (`$$`, `$BASHPID`) is not known, but the process is: the agent's
/// shell, whose `/proc/PID/cwd` and `fd/N` are this walk's (`/proc/$$/cwd/…`), so it reads
/// as `self`.
pub(super) fn var(ctx: &Context, name: &str) -> String {
    match ctx.var(name) {
        Some(v) => v.to_owned(),
        None if name == "IFS" => " \t\n".to_owned(),
        None if name == "$" || name == "BASHPID" => "self".to_owned(),
        None => String::new(),
    }
}

pub(super) fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(vars: &[(&str, &str)]) -> Context {
        Context {
            cwd: "/w".into(),
            home: "/home/a".into(),
            env: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            host: None,
        }
    }

    fn expand(inner: &str, vars: &[(&str, &str)]) -> String {
        let c = ctx(vars);
        let mut word = |w: &str| super::super::word::expand_one(w, &c, &mut |_| String::new());
        parameter(inner, &c, &mut word)
    }

    #[test]
    fn operators_apply_to_the_value() {
        let v = [
            ("d", ".AWS"),
            ("p", "xx.aws"),
            ("q", "a/b/.aws"),
            ("f", "cred.bak"),
        ];
        assert_eq!(expand("d,,", &v), ".aws");
        assert_eq!(expand("d~~", &v), ".aws");
        assert_eq!(expand("p^^", &v), "XX.AWS");
        assert_eq!(expand("p^", &v), "Xx.aws");
        assert_eq!(expand("p: -4", &v), ".aws");
        assert_eq!(expand("p:(-4)", &v), ".aws");
        assert_eq!(expand("p:1+1", &v), ".aws");
        assert_eq!(expand("p:2:2", &v), ".a");
        assert_eq!(expand("q#*/", &v), "b/.aws");
        assert_eq!(expand("q##*/", &v), ".aws");
        assert_eq!(expand("f%.*", &v), "cred");
        assert_eq!(expand("q%/*", &v), "a/b");
        assert_eq!(expand("q%%/*", &v), "a");
        assert_eq!(expand("p/x*./", &v), "aws");
        assert_eq!(expand("q//[ab]/", &v), "//.ws");
        assert_eq!(expand("p/#xx/", &v), ".aws");
        assert_eq!(expand("p/%aws/ssh", &v), "xx.ssh");
        assert_eq!(expand("p/#zz/", &v), "xx.aws");
    }

    #[test]
    fn array_elements() {
        let v = [("a", "x"), ("a[0]", "x"), ("a[1]", "~/y"), ("a[#]", "2")];
        assert_eq!(expand("a[1]", &v), "~/y");
        assert_eq!(expand("a[-1]", &v), "~/y");
        assert_eq!(expand("a[@]", &v), format!("x{ELEMENT_BREAK}~/y"));
        assert_eq!(expand("a", &v), "x");
    }

    #[test]
    fn glob_patterns() {
        assert!(glob_matches("*.rs", "main.rs"));
        assert!(glob_matches("[[:lower:]]x", "ax"));
        assert!(!glob_matches("[!a]x", "ax"));
        assert!(glob_matches("a\\*", "a*"));
        assert!(glob_matches("[", "["));
        assert!(!glob_matches("a?", "a"));
    }

    #[test]
    fn arithmetic_is_bounded() {
        let c = ctx(&[("n", "3")]);
        assert_eq!(arithmetic("1+2*n", &c), Some(7));
        assert_eq!(arithmetic("-(4)", &c), Some(-4));
        assert_eq!(arithmetic("9223372036854775807+1", &c), None);
        assert_eq!(arithmetic("1/0", &c), None);
        assert_eq!(arithmetic(&"(".repeat(100), &c), None);
    }

    #[test]
    fn positional_slices() {
        let vars = [
            ("0", "sh"),
            ("@", "a b c"),
            ("1", "a"),
            ("2", "b"),
            ("3", "c"),
        ];
        assert_eq!(expand("@:2", &vars), "b c");
        assert_eq!(expand("@:1:2", &vars), "a b");
        assert_eq!(expand("*: -1", &vars), "c");
        assert_eq!(expand("@:0:1", &vars), "sh");
        assert_eq!(expand("@:9", &vars), "");
    }
}
