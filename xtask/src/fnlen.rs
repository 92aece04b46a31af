//! `cargo xtask fn-length`: no function in the policy engine is longer than
//! [`MAX_LINES`] lines (issue 22). A long function is where a table hides as code (the shell
//! command table was a 1,400-line `match`); past this size it is split or made data.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use syn::visit::Visit;

/// The longest a function may be, from its signature to its closing brace.
pub const MAX_LINES: usize = 150;

/// The directories checked, relative to the workspace root.
const DIRS: &[&str] = &["carapace-policy/src/engine"];

/// Checks every `.rs` file under [`DIRS`]; the error lists each function too long.
pub fn check(root: &Path) -> Result<()> {
    let mut long = Vec::new();
    for dir in DIRS {
        long.extend(check_dir(&root.join(dir))?);
    }
    if long.is_empty() {
        println!(
            "fn-length: no function over {MAX_LINES} lines in {}",
            DIRS.join(", ")
        );
        return Ok(());
    }
    let mut text = String::new();
    let root = format!("{}/", root.display());
    for (at, name, lines) in &long {
        let at = at.strip_prefix(&root).unwrap_or(at);
        let _ = write!(text, "\n    {at}: `{name}` is {lines} lines");
    }
    anyhow::bail!(
        "{} function(s) over {MAX_LINES} lines; split each into named steps or make its \
         table data:{text}",
        long.len()
    )
}

/// `(file:line, name, lines)` of each function over the limit under `dir`.
fn check_dir(dir: &Path) -> Result<Vec<(String, String, usize)>> {
    let mut files = Vec::new();
    collect(dir, &mut files).with_context(|| format!("reading {}", dir.display()))?;
    files.sort();
    let mut long = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let Ok(ast) = syn::parse_file(&text) else {
            anyhow::bail!("{} does not parse", file.display());
        };
        let mut fns = Fns { found: Vec::new() };
        fns.visit_file(&ast);
        for (name, start, lines) in fns.found {
            if lines > MAX_LINES {
                long.push((format!("{}:{start}", file.display()), name, lines));
            }
        }
    }
    Ok(long)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Every function and method: name, first line, length in lines.
struct Fns {
    found: Vec<(String, usize, usize)>,
}

impl Fns {
    fn record(&mut self, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.fn_token.span.start().line;
        let end = block.brace_token.span.close().end().line;
        let name = &sig.ident;
        self.found
            .push((name.to_string(), start, end.saturating_sub(start) + 1));
    }
}

impl<'ast> Visit<'ast> for Fns {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.record(&f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.record(&f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_over_the_limit_fails_and_one_at_it_does_not() {
        let dir = std::env::temp_dir().join(format!("xtask-fnlen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("inner")).expect("mkdir");
        // Signature and closing brace count: 148 body lines make 150.
        let body = "    let _ = 1;\n".repeat(MAX_LINES - 2);
        std::fs::write(dir.join("a.rs"), format!("fn fits() {{\n{body}}}\n")).expect("write");
        assert!(check_dir(&dir).expect("reads").is_empty());
        std::fs::write(
            dir.join("inner/b.rs"),
            format!(
                "struct S;\nimpl S {{\n    fn long(&self) {{\n{body}    let _ = 2;\n    }}\n}}\n"
            ),
        )
        .expect("write");
        let long = check_dir(&dir).expect("reads");
        assert_eq!(long.len(), 1, "{long:?}");
        assert_eq!(long[0].1, "long");
        assert_eq!(long[0].2, MAX_LINES + 1);
        assert!(long[0].0.ends_with("b.rs:3"), "{long:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
