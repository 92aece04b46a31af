//! `cargo xtask string-errors`: no `Result<…, String>` and no `anyhow` in the library code
//! of the policy crate and the daemon (issue 22). A string error can only be shown or
//! compared as text, and an `anyhow::Error` only shown or downcast; a `thiserror` enum lets
//! callers match on what went wrong and keeps the source error. `anyhow` belongs to the
//! binaries (`src/bin/`) and xtask, where an error's only use is a line for a person.
//!
//! The check follows each crate's module tree from `src/lib.rs`, so binaries (`src/bin/`,
//! which use `anyhow`) are not reached, and it skips `#[cfg(test)]` modules and items (tests
//! may fail with any text they like). Any path `Result<_, String>` counts: in a signature, a
//! field, a type alias, a closure's return type or a turbofish; so does `type Err = String`.
//! `anyhow` counts in any path (`anyhow::Result`, `anyhow::bail!`), any `use` of it, and any
//! mention inside a macro's arguments (`format!("{}", anyhow::anyhow!(…))`).
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use syn::visit::Visit;

/// The crates checked, by directory.
const CRATES: &[&str] = &["carapace-policy", "carapace-daemon"];

/// What one crate's library code holds that it should not, as `file:line` each.
#[derive(Debug, Default, PartialEq, Eq)]
struct Found {
    string_results: Vec<String>,
    anyhow: Vec<String>,
}

/// Checks every crate; the error lists each place.
pub fn check(root: &Path) -> Result<()> {
    let mut found = Found::default();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        let one = check_crate(&src).with_context(|| format!("reading {}", src.display()))?;
        found.string_results.extend(one.string_results);
        found.anyhow.extend(one.anyhow);
    }
    if found == Found::default() {
        println!(
            "string-errors: no Result<_, String> and no anyhow in the library code of {}",
            CRATES.join(", ")
        );
        return Ok(());
    }
    let root = format!("{}/", root.display());
    let list = |places: &[String]| {
        let mut text = String::new();
        for at in places {
            let at = at.strip_prefix(&root).unwrap_or(at);
            let _ = write!(text, "\n    {at}");
        }
        text
    };
    let mut report = Vec::new();
    if !found.string_results.is_empty() {
        report.push(format!(
            "{} Result<_, String> in library code:{}",
            found.string_results.len(),
            list(&found.string_results)
        ));
    }
    if !found.anyhow.is_empty() {
        report.push(format!(
            "{} uses of anyhow in library code (anyhow is for binaries and xtask):{}",
            found.anyhow.len(),
            list(&found.anyhow)
        ));
    }
    anyhow::bail!(
        "{}\ngive each an error enum (thiserror) whose variants say what went wrong",
        report.join("\n")
    )
}

/// `file:line` of each `Result<_, String>` and each use of `anyhow` in the crate whose
/// sources are in `src`.
fn check_crate(src: &Path) -> Result<Found> {
    let mut found = Found::default();
    let mut pending = vec![(src.join("lib.rs"), src.to_path_buf())];
    while let Some((file, dir)) = pending.pop() {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let Ok(ast) = syn::parse_file(&text) else {
            anyhow::bail!("{} does not parse", file.display());
        };
        let mut walk = Walk {
            file: &file,
            dirs: vec![dir],
            found: &mut found,
            modules: &mut pending,
        };
        walk.visit_file(&ast);
    }
    found.string_results.sort();
    found.anyhow.sort();
    found.anyhow.dedup();
    Ok(found)
}

/// Walks one file: records string results and the files of its non-test `mod x;` items.
struct Walk<'a> {
    file: &'a Path,
    /// Where the files of `mod x;` items are, innermost inline module last.
    dirs: Vec<PathBuf>,
    found: &'a mut Found,
    /// `(file, directory of its child modules)` still to read.
    modules: &'a mut Vec<(PathBuf, PathBuf)>,
}

impl Walk<'_> {
    fn dir(&self) -> &Path {
        self.dirs.last().map_or(Path::new("."), PathBuf::as_path)
    }

    fn string_result_at(&mut self, line: usize) {
        let at = format!("{}:{line}", self.file.display());
        self.found.string_results.push(at);
    }

    fn anyhow_at(&mut self, span: proc_macro2::Span) {
        let at = format!("{}:{}", self.file.display(), span.start().line);
        self.found.anyhow.push(at);
    }

    /// The file of `mod name;` declared here, and the directory of its own children.
    fn module_file(&self, name: &str, attrs: &[syn::Attribute]) -> Option<(PathBuf, PathBuf)> {
        if let Some(path) = path_attr(attrs) {
            // `#[path]` is relative to the declaring file's directory.
            let file = self.file.parent()?.join(path);
            let dir = file.with_extension("");
            return Some((file, dir));
        }
        let flat = self.dir().join(format!("{name}.rs"));
        if flat.exists() {
            return Some((flat, self.dir().join(name)));
        }
        let nested = self.dir().join(name).join("mod.rs");
        nested.exists().then(|| (nested, self.dir().join(name)))
    }
}

impl<'ast> Visit<'ast> for Walk<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !item_attrs(item).iter().any(is_cfg_test) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Fn(f) => &f.attrs,
            syn::ImplItem::Const(c) => &c.attrs,
            syn::ImplItem::Type(t) => &t.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !attrs.iter().any(is_cfg_test) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_impl_item_type(&mut self, t: &'ast syn::ImplItemType) {
        // `type Err = String` in `FromStr` (or `Error` in `TryFrom`) is the same thing.
        if (t.ident == "Err" || t.ident == "Error") && is_string(&t.ty) {
            self.string_result_at(t.ident.span().start().line);
        }
        syn::visit::visit_impl_item_type(self, t);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let name = m.ident.to_string();
        if m.content.is_none() {
            if let Some(found) = self.module_file(&name, &m.attrs) {
                self.modules.push(found);
            }
            return;
        }
        let inner = self.dir().join(&name);
        self.dirs.push(inner);
        syn::visit::visit_item_mod(self, m);
        self.dirs.pop();
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if is_string_result(path) {
            let line = path
                .segments
                .last()
                .map_or(0, |s| s.ident.span().start().line);
            self.string_result_at(line);
        }
        if let Some(first) = path.segments.first().filter(|s| s.ident == "anyhow") {
            self.anyhow_at(first.ident.span());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        // Only the tree's root names a crate (`use a::anyhow` is someone else's).
        if let Some(span) = names_anyhow(&item.tree) {
            self.anyhow_at(span);
        }
        syn::visit::visit_item_use(self, item);
    }

    fn visit_item_extern_crate(&mut self, item: &'ast syn::ItemExternCrate) {
        if item.ident == "anyhow" {
            self.anyhow_at(item.ident.span());
        }
        syn::visit::visit_item_extern_crate(self, item);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        // A macro's arguments are tokens, not syntax the visitor walks.
        if let Some(span) = anyhow_token(mac.tokens.clone()) {
            self.anyhow_at(span);
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// `Result<T, String>` (any path ending in `Result`, with `String` or
/// `std::string::String` as its second argument).
fn is_string_result(path: &syn::Path) -> bool {
    let Some(last) = path.segments.last() else {
        return false;
    };
    if last.ident != "Result" {
        return false;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return false;
    };
    let types: Vec<_> = args
        .args
        .iter()
        .filter_map(|a| match a {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect();
    matches!(types.as_slice(), [_, error] if is_string(error))
}

/// Where a `use` tree's root is the `anyhow` crate (`use anyhow::…`, `use {anyhow::…, …}`).
fn names_anyhow(tree: &syn::UseTree) -> Option<proc_macro2::Span> {
    match tree {
        syn::UseTree::Path(p) if p.ident == "anyhow" => Some(p.ident.span()),
        syn::UseTree::Name(n) if n.ident == "anyhow" => Some(n.ident.span()),
        syn::UseTree::Rename(r) if r.ident == "anyhow" => Some(r.ident.span()),
        syn::UseTree::Group(g) => g.items.iter().find_map(names_anyhow),
        _ => None,
    }
}

/// The first `anyhow` identifier among a macro's tokens, however deeply grouped.
fn anyhow_token(tokens: proc_macro2::TokenStream) -> Option<proc_macro2::Span> {
    tokens.into_iter().find_map(|token| match token {
        proc_macro2::TokenTree::Ident(i) if i == "anyhow" => Some(i.span()),
        proc_macro2::TokenTree::Group(g) => anyhow_token(g.stream()),
        _ => None,
    })
}

/// `String`, however its path is written.
fn is_string(ty: &syn::Type) -> bool {
    matches!(ty, syn::Type::Path(p)
        if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "String"))
}

fn is_cfg_test(attr: &syn::Attribute) -> bool {
    attr.path().is_ident("cfg")
        && attr
            .parse_args::<syn::Ident>()
            .is_ok_and(|ident| ident == "test")
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, file: &str, text: &str) {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn a_string_error_in_library_code_fails_and_one_in_tests_or_binaries_does_not() {
        let dir = std::env::temp_dir().join(format!("xtask-string-errors-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(
            &dir,
            "lib.rs",
            "mod a;\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nfn t() -> Result<(), String> { Ok(()) }\n",
        );
        write(
            &dir,
            "a/mod.rs",
            "mod b;\nfn io() -> std::io::Result<String> { todo!() }\n",
        );
        write(
            &dir,
            "a/b.rs",
            "pub enum E {}\nfn ok() -> Result<u8, E> { todo!() }\n",
        );
        write(
            &dir,
            "tests.rs",
            "fn t() -> Result<(), String> { Ok(()) }\n",
        );
        write(
            &dir,
            "bin/x.rs",
            "fn main() -> Result<(), String> { Ok(()) }\n",
        );
        assert_eq!(check_crate(&dir).expect("reads"), Found::default());

        // A field two lines into a nested module's file, and a closure in an inline module.
        write(
            &dir,
            "a/b.rs",
            "pub enum E {}\nstruct S {\n    r: Option<Result<u8, String>>,\n}\nimpl std::str::FromStr for E {\n    type Err = String;\n}\n",
        );
        write(
            &dir,
            "lib.rs",
            "mod a;\nmod inner {\n    fn f() { let _ = |x: u8| -> Result<u8, std::string::String> { Ok(x) }; }\n}\n",
        );
        let found = check_crate(&dir).expect("reads");
        let b = |line| format!("{}:{line}", dir.join("a/b.rs").display());
        let lib = format!("{}:3", dir.join("lib.rs").display());
        assert_eq!(found.string_results, vec![b(3), b(6), lib]);
        assert_eq!(found.anyhow, Vec::<String>::new());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn anyhow_in_library_code_fails_and_in_tests_or_binaries_does_not() {
        let dir = std::env::temp_dir().join(format!("xtask-anyhow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(
            &dir,
            "lib.rs",
            "mod a;\n#[cfg(test)]\nmod tests {\n    fn t() -> anyhow::Result<()> { Ok(()) }\n}\n",
        );
        // Someone else's `anyhow` module, and the word in a string, are not the crate.
        write(
            &dir,
            "a.rs",
            "use crate::errors::anyhow;\nfn f() -> String { format!(\"anyhow\") }\n",
        );
        write(
            &dir,
            "bin/x.rs",
            "use anyhow::Context as _;\nfn main() -> anyhow::Result<()> { Ok(()) }\n",
        );
        assert_eq!(check_crate(&dir).expect("reads"), Found::default());

        // A `use` (also inside a group), a signature, a macro path, and a mention inside
        // another macro's arguments, each on its own line.
        write(
            &dir,
            "a.rs",
            "use anyhow::Context as _;\nuse {std::io, anyhow::bail};\n\
             fn f() -> anyhow::Result<()> {\n    anyhow::ensure!(true, \"x\");\n\
             \x20   let _ = vec![anyhow::anyhow!(\"y\")];\n    Ok(())\n}\n",
        );
        let found = check_crate(&dir).expect("reads");
        let a = |line| format!("{}:{line}", dir.join("a.rs").display());
        assert_eq!(found.anyhow, vec![a(1), a(2), a(3), a(4), a(5)]);
        assert_eq!(found.string_results, Vec::<String>::new());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
