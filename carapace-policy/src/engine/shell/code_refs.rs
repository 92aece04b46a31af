//! File and process calls of inline code reached by other names than their own: a module
//! or a function imported under an alias (`import os as o`, `from os import remove as r`,
//! `const {execSync: x} = require('child_process')`, `rm = shutil.rmtree`), a call applied
//! to the items of a list through a loop variable or a function reference (`[shutil.rmtree(p)
//! for p in [...]]`, `map(os.remove, [...])`, `[...].forEach(p => fs.rmSync(p))`), and the
//! words that name a file call only on a file module (`os.remove(` deletes, `names.remove(`
//! edits a list).
//!
//! Everything here runs only on code handed to an interpreter, and each function looks for
//! a cheap marker first (` as `, `require(`, `for `, `map(`), so code without one costs a
//! few substring searches.
use crate::rules::Action;

/// Call names that are file operations only when called on a file module (or imported from
/// one): on anything else they are the language's collection methods (`list.remove`,
/// `Map.delete`, `Set.delete`, `Array#delete`).
pub(super) const AMBIGUOUS: &[&str] = &["remove(", "delete(", "rm("];

/// Receivers of file operations: modules and classes of the languages' standard libraries
/// and of the common file helpers.
const FILE_RECEIVERS: &[&str] = &[
    "os",
    "shutil",
    "fs",
    "fsp",
    "fse",
    "promises",
    "File",
    "FileUtils",
    "Files",
    "Dir",
    "Deno",
    "Path",
    "pathlib",
    "io",
    "FS",
    "rimraf",
];

/// Modules whose functions read, write, delete or run, as their import statements name them.
const FILE_MODULES: &[&str] = &[
    "os",
    "shutil",
    "pathlib",
    "subprocess",
    "fs",
    "fs/promises",
    "node:fs",
    "node:fs/promises",
    "fs-extra",
    "child_process",
    "node:child_process",
    "fileutils",
    "posix",
    "pty",
    "commands",
    "rimraf",
];

/// Whether `code` deletes files by some call: the unambiguous names anywhere, the
/// ambiguous ones only on a file module, an alias of one, or imported bare from one.
pub(super) fn deletes(code: &str, calls: &[&str]) -> bool {
    calls.iter().any(|c| {
        if AMBIGUOUS.contains(c) {
            code.match_indices(c)
                .any(|(at, _)| file_receiver(code, code.get(..at).unwrap_or("")))
        } else {
            code.contains(c)
        }
    })
}

/// Whether an ambiguous call that ends `before` (`os.remove(` without the name) is called
/// on a file module: `os.`, `o.` after `import os as o`, `fs.` after `const fs =
/// require('fs')`; or bare (`remove(`) in code that imports names from a file module.
pub(super) fn file_receiver(code: &str, before: &str) -> bool {
    let Some(head) = before
        .strip_suffix('.')
        .or_else(|| before.strip_suffix("::"))
    else {
        // Bare: `from os import remove`, Perl's and PHP's functions, Ruby's `rm` in a
        // FileUtils include, Julia's `rm(p; recursive=true)` (its Base has it, and
        // `homedir()` marks Julia's or Node's code).
        let bare = !before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$');
        return bare
            && (code.contains("from os")
                || code.contains("recursive=true")
                || code.contains("homedir()")
                || code.contains("from shutil")
                || code.contains("include FileUtils")
                || code.contains("import {")
                || code.contains("require(")
                || code.contains("use File::"));
    };
    let receiver_start = head
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .map_or(0, |i| i + 1);
    let receiver = head.get(receiver_start..).unwrap_or("");
    // `fs.promises.rm(`, `require('fs').rmSync(`, `Path(p).unlink(` are file calls too.
    if head.ends_with(')') {
        return head.contains("require(") || head.contains("Path(") || head.contains("open(");
    }
    FILE_RECEIVERS.contains(&receiver) || aliases(code).iter().any(|(a, _)| a == receiver)
}

/// Names the code binds to a file module or to one of its functions, as (alias, what it
/// stands for): `import os as o` → (`o`, `os`); `from os import remove as r` → (`r`,
/// `remove`); `const fs = require('fs')` → (`fs`, `fs`); `const {execSync: x} =
/// require('child_process')` → (`x`, `execSync`); `rm = shutil.rmtree` → (`rm`, `shutil.rmtree`).
pub(super) fn aliases(code: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if !(code.contains(" as ") || code.contains("require") || code.contains('=')) {
        return out;
    }
    for stmt in code.split(['\n', ';']) {
        let stmt = stmt.trim();
        python_import(stmt, &mut out);
        js_require(stmt, &mut out);
        reference(stmt, &mut out);
    }
    out
}

/// `import os as o`, `import os.path as p`, `from os import remove as r, unlink as u`.
fn python_import(stmt: &str, out: &mut Vec<(String, String)>) {
    if let Some(rest) = stmt.strip_prefix("import ") {
        for part in rest.split(',') {
            if let Some((module, alias)) = part.split_once(" as ") {
                let module = module.trim();
                let root = module.split('.').next().unwrap_or(module);
                if FILE_MODULES.contains(&root) {
                    out.push((alias.trim().to_owned(), module.to_owned()));
                }
            }
        }
    } else if let Some(rest) = stmt.strip_prefix("from ") {
        let Some((module, names)) = rest.split_once(" import ") else {
            return;
        };
        let root = module.trim().split('.').next().unwrap_or("");
        if !FILE_MODULES.contains(&root) {
            return;
        }
        for part in names.trim_matches(['(', ')', ' ']).split(',') {
            if let Some((name, alias)) = part.split_once(" as ") {
                out.push((alias.trim().to_owned(), name.trim().to_owned()));
            }
        }
    }
}

/// `const fs = require('fs')`, `const {execSync: x, spawn} = require('child_process')`,
/// `const x = require('child_process').execSync`, `import * as f from 'fs'`, `import {rmSync
/// as r} from 'fs'`.
fn js_require(stmt: &str, out: &mut Vec<(String, String)>) {
    let stmt = stmt
        .trim_start_matches("const ")
        .trim_start_matches("let ")
        .trim_start_matches("var ");
    if let Some(rest) = stmt.strip_prefix("import ") {
        let Some((names, module)) = rest.rsplit_once(" from ") else {
            return;
        };
        if !FILE_MODULES.contains(&unquote(module)) {
            return;
        }
        if let Some(alias) = names.trim().strip_prefix("* as ") {
            out.push((alias.trim().to_owned(), unquote(module).to_owned()));
        } else {
            for part in names.trim_matches(['{', '}', ' ']).split(',') {
                if let Some((name, alias)) = part.split_once(" as ") {
                    out.push((alias.trim().to_owned(), name.trim().to_owned()));
                }
            }
        }
        return;
    }
    let Some((lhs, rhs)) = stmt.split_once('=') else {
        return;
    };
    let rhs = rhs.trim();
    let Some(module) = rhs
        .strip_prefix("require(")
        .and_then(|r| r.split_once(')'))
        .map(|(m, rest)| (unquote(m), rest))
    else {
        return;
    };
    let (module, member) = module;
    if !FILE_MODULES.contains(&module) {
        return;
    }
    let lhs = lhs.trim();
    if let Some(fields) = lhs.strip_prefix('{').and_then(|l| l.strip_suffix('}')) {
        for part in fields.split(',') {
            if let Some((name, alias)) = part.split_once(':') {
                out.push((alias.trim().to_owned(), name.trim().to_owned()));
            }
        }
    } else if let Some(member) = member.trim().strip_prefix('.') {
        out.push((lhs.to_owned(), ident_prefix(member).to_owned()));
    } else {
        out.push((lhs.to_owned(), module.to_owned()));
    }
}

/// `rm = shutil.rmtree`, `x = os.system`, `r = fs.rmSync`: a function of a file module
/// given another name.
fn reference(stmt: &str, out: &mut Vec<(String, String)>) {
    let stmt = stmt
        .trim_start_matches("const ")
        .trim_start_matches("let ")
        .trim_start_matches("var ")
        .trim_start_matches("my ");
    let Some((lhs, rhs)) = stmt.split_once('=') else {
        return;
    };
    let (lhs, rhs) = (lhs.trim(), rhs.trim());
    if rhs.starts_with('=') || !is_ident(lhs) {
        return;
    }
    let Some((receiver, name)) = rhs.rsplit_once('.') else {
        return;
    };
    let root = receiver.split('.').next().unwrap_or(receiver);
    // Written back whole (`os.remove`, not `remove`): the receiver says it is a file call.
    if is_ident(name) && (FILE_MODULES.contains(&root) || FILE_RECEIVERS.contains(&root)) {
        out.push((lhs.to_owned(), rhs.to_owned()));
    }
}

/// `code` with each alias of a function written as the function (`r(p)` → `remove(p)`,
/// `x('cmd')` → `execSync('cmd')`), so that the call tables recognise it; `None` when the
/// code names no such alias.
pub(super) fn unalias(code: &str) -> Option<String> {
    let attrs = dynamic_attributes(code);
    let base = attrs.as_deref().unwrap_or(code);
    let renames: Vec<(String, String)> = aliases(base)
        .into_iter()
        .filter(|(alias, name)| alias != name && !FILE_MODULES.contains(&name.as_str()))
        .collect();
    if renames.is_empty() {
        return attrs;
    }
    let mut out = base.to_owned();
    for (alias, name) in renames {
        out = replace_calls(&out, &alias, &name);
    }
    (out != code).then_some(out)
}

/// Attributes named by a string, written as attributes: `getattr(X, 'remove')(` →
/// `X.remove(`, `fs['rmSync'](` → `fs.rmSync(`; `None` when there are none.
fn dynamic_attributes(code: &str) -> Option<String> {
    if !code.contains("getattr(") && !code.contains("'](") && !code.contains("\"](") {
        return None;
    }
    let mut out = code.to_owned();
    for _ in 0..16 {
        let Some(next) = getattr_call(&out).or_else(|| bracket_call(&out)) else {
            break;
        };
        out = next;
    }
    (out != code).then_some(out)
}

/// The first `getattr(EXPR, 'NAME')(` rewritten as `EXPR.NAME(`.
fn getattr_call(code: &str) -> Option<String> {
    let at = code.find("getattr(")?;
    let args = &code[at + "getattr(".len()..];
    let comma = args.rfind_top_comma()?;
    let (target, rest) = args.split_at(comma);
    let rest = rest[1..].trim_start();
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let name_end = rest[1..].find(quote)? + 1;
    let name = &rest[1..name_end];
    let after = rest[name_end + 1..].trim_start().strip_prefix(')')?;
    if !is_ident(name) || !after.starts_with('(') {
        return None;
    }
    Some(format!("{}{}.{name}{after}", &code[..at], target.trim()))
}

/// The first `X['NAME'](` (or with double quotes) rewritten as `X.NAME(`.
fn bracket_call(code: &str) -> Option<String> {
    ["['", "[\""].iter().find_map(|open| {
        let close = if *open == "['" { "'](" } else { "\"](" };
        let mut from = 0;
        while let Some(i) = code[from..].find(open).map(|i| i + from) {
            let name_start = i + open.len();
            if let Some(j) = code[name_start..].find(close) {
                let name = &code[name_start..name_start + j];
                let receiver =
                    code[..i].ends_with(|c: char| c.is_alphanumeric() || c == ')' || c == '_');
                if is_ident(name) && receiver {
                    return Some(format!(
                        "{}.{name}({}",
                        &code[..i],
                        &code[name_start + j + close.len()..]
                    ));
                }
            }
            from = name_start;
        }
        None
    })
}

/// The byte index of the last comma of `s` outside brackets and quotes, before the
/// bracket that closes `s`'s argument list.
trait TopComma {
    fn rfind_top_comma(&self) -> Option<usize>;
}

impl TopComma for str {
    fn rfind_top_comma(&self) -> Option<usize> {
        let mut depth = 0i32;
        let mut quote = None;
        let mut last = None;
        for (i, c) in self.char_indices() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (None, '\'' | '"') => quote = Some(c),
                (None, '(' | '[' | '{') => depth += 1,
                (None, ')' | ']' | '}') if depth == 0 => return last,
                (None, ')' | ']' | '}') => depth -= 1,
                (None, ',') if depth == 0 => last = Some(i),
                // Inside quotes, and any other character.
                _ => {}
            }
        }
        None
    }
}

/// `alias(` → `name(` and `alias.` → `name.` where `alias` is a whole identifier (not
/// `x.alias(` or `myalias(`).
fn replace_calls(code: &str, alias: &str, name: &str) -> String {
    if alias.is_empty() {
        return code.to_owned();
    }
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(alias) {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        let after = tail.get(alias.len()..).unwrap_or("");
        // A call of the alias, or an attribute of it (`P.home()` after `import Path as P`).
        let used = after.starts_with(['(', '.']);
        let whole =
            !out.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '.' || c == '$');
        out.push_str(if whole && used { name } else { alias });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// What a call does to the items of the list a value stands in, when the list is iterated
/// into a call: `for p in [V]` / `[CALL(p) for p in [V]]` with `CALL(p` elsewhere in the
/// code, `map(CALL, [V])`, or `[V].forEach(p => CALL(p))` / `[V].map(CALL)`. `file_call`
/// says what a call name (ending in `(`) does.
pub(super) fn iterated_action(
    code: &str,
    before: &str,
    after: &str,
    file_call: impl Fn(&str) -> Option<Action>,
) -> Option<Action> {
    let head = before.trim_end().trim_end_matches(['[', '(', '{', ' ']);
    // `map(shutil.rmtree, [V])`, `list(map(os.remove, glob(…)))`.
    if let Some(func) = head.strip_suffix(',') {
        if let Some(call) = func.trim_end().rsplit_once("map(").map(|(_, f)| f.trim()) {
            if let Some(a) = file_call(&format!("{call}(")) {
                return Some(a);
            }
        }
    }
    // `for p in [V]`, `for r, d, fs in os.walk(V)`.
    if let Some(head) = head.strip_suffix(" in") {
        let names = head.rsplit_once("for ").map(|(_, n)| n)?;
        return names
            .split(',')
            .map(str::trim)
            .filter(|n| is_ident(n))
            .find_map(|n| applied_to(code, n, &file_call));
    }
    // `[V].forEach(p => CALL(p))`, `[V].map(fs.unlinkSync)`, `.forEach(function (p) {…})`.
    let rest = after.trim_start().trim_start_matches([']', ')', ' ']);
    let rest = rest
        .strip_prefix(".forEach(")
        .or_else(|| rest.strip_prefix(".map("))
        .or_else(|| rest.strip_prefix(".each"))?;
    let rest = rest.trim_start().trim_start_matches("function");
    let params = rest.trim_start().trim_start_matches(['(', '{', '|', ' ']);
    let end = params
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(params.len());
    let (name, tail) = params.split_at(end);
    if tail.trim_start().starts_with(['=', ')', '|', ',']) && is_ident(name) {
        applied_to(code, name, &file_call)
    } else {
        file_call(&format!("{}(", ident_prefix(params)))
    }
}

/// What the first file call whose first argument is `name` does (`rmtree(p`, `os.remove(p)`).
fn applied_to(
    code: &str,
    name: &str,
    file_call: &impl Fn(&str) -> Option<Action>,
) -> Option<Action> {
    code.match_indices(name).find_map(|(at, _)| {
        let before = code.get(..at)?.trim_end();
        let after = code.get(at + name.len()..)?;
        let whole = !after.starts_with(|c: char| c.is_alphanumeric() || c == '_')
            && !before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '.');
        (whole && before.ends_with('('))
            .then(|| file_call(before))
            .flatten()
    })
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

/// The identifier chain at the start of `s` (`fs.unlinkSync` of `fs.unlinkSync)`).
fn ident_prefix(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '.'))
        .unwrap_or(s.len());
    s.get(..end).unwrap_or("")
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches(['\'', '"', '`', ';', ' '])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(c: &str) -> Option<Action> {
        let c = c.trim_end();
        if ["rmtree(", "remove(", "unlinkSync(", "rmSync("]
            .iter()
            .any(|d| c.ends_with(d))
        {
            Some(Action::Delete)
        } else {
            None
        }
    }

    #[test]
    fn collection_methods_are_not_deletes() {
        let calls = &["remove(", "delete(", "rm(", "rmtree("];
        assert!(!deletes("names = ['a']; names.remove('a')", calls));
        assert!(!deletes("const m = new Map(); m.delete('a')", calls));
        assert!(!deletes("a = Dir.children(Dir.home); a.delete('x')", calls));
        assert!(deletes("import os; os.remove('a')", calls));
        assert!(deletes("import os as o; o.remove('a')", calls));
        assert!(deletes("from os import remove; remove('a')", calls));
        assert!(deletes(
            "const fs = require('fs'); fs.promises.rm('a')",
            calls
        ));
        assert!(deletes("import shutil; shutil.rmtree('a')", calls));
    }

    #[test]
    fn aliases_are_read() {
        assert_eq!(
            unalias("from os import remove as r; r('/x')").as_deref(),
            Some("from os import remove as r; remove('/x')")
        );
        assert_eq!(
            unalias("const {execSync: x} = require('child_process'); x('ls')").as_deref(),
            Some("const {execSync: x} = require('child_process'); execSync('ls')")
        );
        assert_eq!(
            unalias("import shutil; rm = shutil.rmtree; rm('/x'); farm('/y')").as_deref(),
            Some("import shutil; rm = shutil.rmtree; shutil.rmtree('/x'); farm('/y')")
        );
        assert_eq!(
            unalias("getattr(__import__('os'), 'remove')('/x')").as_deref(),
            Some("__import__('os').remove('/x')")
        );
        assert_eq!(
            unalias("require('fs')['rmSync']('/x')").as_deref(),
            Some("require('fs').rmSync('/x')")
        );
        assert_eq!(unalias("d = {}; d['k'] = 1; print(d['k'])"), None);
        assert_eq!(unalias("import os; print(os.listdir('.'))"), None);
        assert_eq!(unalias("x = a + b; print(x)"), None);
    }

    #[test]
    fn items_reach_the_call_they_are_iterated_into() {
        let code = "[shutil.rmtree(p) for p in ['/x']]";
        let at = code.find("'/x'").unwrap_or(0);
        assert_eq!(
            iterated_action(code, &code[..at], &code[at + 4..], call),
            Some(Action::Delete)
        );
        let code = "list(map(shutil.rmtree, ['/x']))";
        let at = code.find("'/x'").unwrap_or(0);
        assert_eq!(
            iterated_action(code, &code[..at], &code[at + 4..], call),
            Some(Action::Delete)
        );
        let code = "['/x'].forEach(p => fs.rmSync(p))";
        assert_eq!(
            iterated_action(code, "[", &code[5..], call),
            Some(Action::Delete)
        );
        let code = "[print(p) for p in ['/x']]";
        let at = code.find("'/x'").unwrap_or(0);
        assert_eq!(
            iterated_action(code, &code[..at], &code[at + 4..], call),
            None
        );
    }
}
