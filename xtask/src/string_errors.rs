//! `cargo xtask string-errors`: no `Result<…, String>` in the library code of the policy
//! crate and the daemon (issue 22). A string error can only be shown or compared as text;
//! a `thiserror` enum lets callers match on what went wrong and keeps the source error.
//!
//! The check follows each crate's module tree from `src/lib.rs`, so binaries (`src/bin/`,
//! which use `anyhow`) are not reached, and it skips `#[cfg(test)]` modules and items (tests
//! may fail with any text they like). Any path `Result<_, String>` counts: in a signature, a
//! field, a type alias, a closure's return type or a turbofish; so does `type Err = String`.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use syn::visit::Visit;

/// The crates checked, by directory.
const CRATES: &[&str] = &["carapace-policy", "carapace-daemon"];

/// Checks every crate; the error lists each place.
pub fn check(root: &Path) -> Result<()> {
    let mut found = Vec::new();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        found.extend(check_crate(&src).with_context(|| format!("reading {}", src.display()))?);
    }
    if found.is_empty() {
        println!(
            "string-errors: no Result<_, String> in {}",
            CRATES.join(", ")
        );
        return Ok(());
    }
    let mut text = String::new();
    let root = format!("{}/", root.display());
    for at in &found {
        let at = at.strip_prefix(&root).unwrap_or(at);
        let _ = write!(text, "\n    {at}");
    }
    anyhow::bail!(
        "{} Result<_, String> in library code; give each an error enum (thiserror) whose \
         variants say what went wrong:{text}",
        found.len()
    )
}

/// `file:line` of each `Result<_, String>` in the crate whose sources are in `src`.
fn check_crate(src: &Path) -> Result<Vec<String>> {
    let mut found = Vec::new();
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
    found.sort();
    Ok(found)
}

/// Walks one file: records string results and the files of its non-test `mod x;` items.
struct Walk<'a> {
    file: &'a Path,
    /// Where the files of `mod x;` items are, innermost inline module last.
    dirs: Vec<PathBuf>,
    found: &'a mut Vec<String>,
    /// `(file, directory of its child modules)` still to read.
    modules: &'a mut Vec<(PathBuf, PathBuf)>,
}

impl Walk<'_> {
    fn dir(&self) -> &Path {
        self.dirs.last().map_or(Path::new("."), PathBuf::as_path)
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
            let line = t.ident.span().start().line;
            self.found.push(format!("{}:{line}", self.file.display()));
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
            self.found.push(format!("{}:{line}", self.file.display()));
        }
        syn::visit::visit_path(self, path);
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
        assert_eq!(check_crate(&dir).expect("reads"), Vec::<String>::new());

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
        assert_eq!(found, vec![b(3), b(6), lib]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
