//! Shell variables as an assignment sets them: scalars, arrays and their elements,
//! associative arrays' keys, namerefs. Shared by the walk, the builtins that set variables
//! and arithmetic assignments.
use super::super::operation::Context;
use super::param;

pub(super) fn set_var(ctx: &mut Context, name: &str, value: &str) {
    // Through a nameref, the variable it names is set (`declare -n r=x; r=v`).
    let name = &match name.split_once('[') {
        Some((base, rest)) => format!("{}[{rest}", ctx.referent(base)),
        None => ctx.referent(name).to_owned(),
    };
    if value.contains(param::ELEMENT_BREAK) {
        set_array(ctx, name, value);
        return;
    }
    if let Some((array, index)) = name.strip_suffix(']').and_then(|n| n.split_once('[')) {
        if let Some(keys) = ctx.var(&param::keys_name(array)).map(str::to_owned) {
            // An associative array's element: its key joins the list.
            let listed = keys.split(param::ELEMENT_BREAK).any(|k| k == index);
            if !listed {
                let keys = format!("{keys}{}{index}", param::ELEMENT_BREAK);
                set_scalar(ctx, &param::keys_name(array), &keys);
            }
            set_scalar(ctx, name, value);
            return;
        }
        // One element: the array grows to hold it; element 0 is also `$array`.
        let count: usize = ctx
            .var(&param::count_name(array))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| usize::from(ctx.var(array).is_some()));
        if let Ok(i) = index.parse::<usize>() {
            if i == 0 {
                set_scalar(ctx, array, value);
            }
            set_scalar(
                ctx,
                &param::count_name(array),
                &count.max(i + 1).to_string(),
            );
        }
        set_scalar(ctx, name, value);
        return;
    }
    set_scalar(ctx, name, value);
}

/// `name=(a b c)`: the elements (separated by `param::ELEMENT_BREAK`) and their count.
fn set_array(ctx: &mut Context, name: &str, value: &str) {
    let elements: Vec<&str> = value.split(param::ELEMENT_BREAK).collect();
    for (i, e) in elements.iter().enumerate().take(MAX_ELEMENTS) {
        set_scalar(ctx, &param::element_name(name, i), e);
    }
    let count = elements.len().min(MAX_ELEMENTS);
    set_scalar(ctx, &param::count_name(name), &count.to_string());
    set_scalar(ctx, name, elements.first().copied().unwrap_or(""));
}

/// Elements of one array that are tracked, at most.
const MAX_ELEMENTS: usize = 64;

pub(super) fn set_scalar(ctx: &mut Context, name: &str, value: &str) {
    // (`PWD=DIR` changes the variable, not the directory: only `cd` moves.)
    if name == "HOME" {
        value.clone_into(&mut ctx.home);
    }
    match ctx.env.iter_mut().find(|(k, _)| k == name) {
        Some((_, v)) => value.clone_into(v),
        None => ctx.env.push((name.to_owned(), value.to_owned())),
    }
}

pub(super) fn unset_var(ctx: &mut Context, name: &str) {
    ctx.env.retain(|(k, _)| k != name);
}

/// The assignments of `let` and `(( … ))` (`i=1`, `i+=2`, `i++`, comma-separated), each
/// evaluated as it comes: indices built this way (`((i=1)); cat "${a[i]}"`) are known.
/// What cannot be evaluated unsets the name, so that it is not read as a stale value.
pub(super) fn arithmetic_assignments(expr: &str, ctx: &mut Context) {
    for part in expr.split(',') {
        let part = part.trim();
        let (name, value) =
            if let Some(name) = part.strip_suffix("++").or_else(|| part.strip_prefix("++")) {
                (
                    name.trim(),
                    param::arithmetic(&format!("{}+1", name.trim()), ctx),
                )
            } else if let Some(name) = part.strip_suffix("--").or_else(|| part.strip_prefix("--")) {
                (
                    name.trim(),
                    param::arithmetic(&format!("{}-1", name.trim()), ctx),
                )
            } else if let Some((lhs, rhs)) = part.split_once('=') {
                // `==`, `<=`, `>=`, `!=` compare; `+=`, `-=`, `*=` update.
                if rhs.starts_with('=') || lhs.ends_with(['<', '>', '!']) {
                    continue;
                }
                match lhs.trim().strip_suffix(['+', '-', '*', '/', '%']) {
                    Some(name) => {
                        let op = &lhs.trim()[name.len()..];
                        let name = name.trim();
                        (name, param::arithmetic(&format!("{name}{op}({rhs})"), ctx))
                    }
                    None => (lhs.trim(), param::arithmetic(rhs, ctx)),
                }
            } else {
                continue;
            };
        if !param::valid_name(name) {
            continue;
        }
        match value {
            Some(v) => set_var(ctx, name, &v.to_string()),
            None => unset_var(ctx, name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_assignments_set_what_they_can_evaluate() {
        let mut c = Context {
            env: vec![("n".into(), "3".into()), ("stale".into(), "7".into())],
            ..Context::default()
        };
        arithmetic_assignments("i=1, j = i+n, j++, k+=2, i==4, stale=x/0", &mut c);
        assert_eq!(c.var("i"), Some("1"));
        assert_eq!(c.var("j"), Some("5"));
        assert_eq!(c.var("k"), Some("2"));
        // A value that cannot be known leaves no stale one behind.
        assert_eq!(c.var("stale"), None);
    }
}
