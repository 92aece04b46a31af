//! `cargo xtask cycles`: no module of a crate may reach itself again through `use` paths
//! (issue 22). Modules are files (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`); an edge is
//! any `crate::…`, `super::…` or `self::…` path in a file (outside `#[cfg(test)]` items) that
//! names an item of another module. A module using its ancestors is not an edge (a child
//! lives in its parent's context); everything else is, and a strongly connected group of
//! two or more modules is a cycle, reported with the places that make it.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use syn::visit::Visit;

/// The crates checked, by directory.
const CRATES: &[&str] = &[
    "carapace-common",
    "carapace-policy",
    "carapace-daemon",
    "carapace-ebpf",
    "xtask",
];

/// One crate's modules (`a::b`, root `""`) and the uses between them.
#[derive(Default)]
struct Graph {
    files: BTreeMap<String, PathBuf>,
    /// from → to → the first place (`file:line`) that uses it.
    edges: BTreeMap<String, BTreeMap<String, String>>,
}

/// Checks every crate; the error lists each cycle.
pub fn check(root: &Path) -> Result<()> {
    check_crates(root, CRATES)
}

fn check_crates(root: &Path, crates: &[&str]) -> Result<()> {
    let mut report = Vec::new();
    for krate in crates {
        let src = root.join(krate).join("src");
        let graph = graph(&src).with_context(|| format!("reading {}", src.display()))?;
        for cycle in cycles(&graph) {
            let mut text = format!("{krate}: {}", cycle.join(" → "));
            for (i, from) in cycle.iter().enumerate() {
                let to = &cycle[(i + 1) % cycle.len()];
                if let Some(at) = graph.edges.get(from).and_then(|e| e.get(to)) {
                    let _ = write!(text, "\n    {} uses {}: {at}", show(from), show(to));
                }
            }
            report.push(text);
        }
    }
    if report.is_empty() {
        println!("cycles: none between the modules of {}", crates.join(", "));
        return Ok(());
    }
    anyhow::bail!(
        "{} module cycle(s); break each by moving what both sides need into a module \
         of its own, or by passing it in:\n{}",
        report.len(),
        report.join("\n")
    )
}

fn show(module: &str) -> &str {
    if module.is_empty() {
        "the crate root"
    } else {
        module
    }
}

fn graph(src: &Path) -> Result<Graph> {
    let mut g = Graph::default();
    collect(src, src, &mut g.files)?;
    let modules: BTreeSet<String> = g.files.keys().cloned().collect();
    for (module, file) in &g.files {
        let text = std::fs::read_to_string(file)?;
        let Ok(ast) = syn::parse_file(&text) else {
            anyhow::bail!("{} does not parse", file.display());
        };
        let mut uses = Uses {
            module,
            modules: &modules,
            found: BTreeMap::new(),
        };
        uses.visit_file(&ast);
        let edges = g.edges.entry(module.clone()).or_default();
        for (to, line) in uses.found {
            edges
                .entry(to)
                .or_insert_with(|| format!("{}:{line}", file.display()));
        }
    }
    Ok(g)
}

/// Every `.rs` file under `dir` as a module path; `src/bin` holds separate crates.
fn collect(src: &Path, dir: &Path, out: &mut BTreeMap<String, PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            if path != src.join("bin") {
                collect(src, &path, out)?;
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(src)?.with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            parts.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            parts.pop();
        }
        out.insert(parts.join("::"), path);
    }
    Ok(())
}

struct Uses<'a> {
    module: &'a str,
    modules: &'a BTreeSet<String>,
    /// Module → line of its first use.
    found: BTreeMap<String, usize>,
}

impl Uses<'_> {
    /// Records the module a path names (the longest module prefix of its absolute form).
    fn record(&mut self, segments: &[String], line: usize) {
        let mut abs: Vec<String> = match segments.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("super" | "self") => self
                .module
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            _ => return,
        };
        let mut rest = segments;
        if rest.first().is_some_and(|s| s == "crate" || s == "self") {
            rest = &rest[1..];
        }
        while rest.first().is_some_and(|s| s == "super") {
            abs.pop();
            rest = &rest[1..];
        }
        abs.extend(rest.iter().cloned());
        let target = (0..=abs.len())
            .rev()
            .map(|n| abs[..n].join("::"))
            .find(|m| self.modules.contains(m))
            .unwrap_or_default();
        let ancestor = target.is_empty()
            || self.module == target
            || self.module.starts_with(&format!("{target}::"));
        if !ancestor {
            self.found.entry(target).or_insert(line);
        }
    }
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

fn line(span: proc_macro2::Span) -> usize {
    span.start().line
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut paths = Vec::new();
        flatten(&u.tree, &mut Vec::new(), &mut paths);
        for p in paths {
            self.record(&p, line(u.use_token.span));
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = p.segments.first() {
            self.record(&segments, line(first.ident.span()));
        }
        syn::visit::visit_path(self, p);
    }
}

/// Every path a `use` tree names (`a::{b, c::d}` → `a::b`, `a::c::d`).
fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut p = prefix.clone();
            if n.ident != "self" {
                p.push(n.ident.to_string());
            }
            out.push(p);
        }
        syn::UseTree::Rename(r) => {
            let mut p = prefix.clone();
            p.push(r.ident.to_string());
            out.push(p);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten(t, prefix, out);
            }
        }
    }
}

/// The strongly connected groups of two or more modules (Tarjan), each in an order that
/// follows its edges where it can.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        g: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let targets: Vec<&'g str> =
            s.g.edges
                .get(v)
                .map(|e| e.keys().map(String::as_str).collect())
                .unwrap_or_default();
        for w in targets {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.reverse();
                s.out.push(group);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.files.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, file: &str, text: &str) {
        let path = root.join("k/src").join(file);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn a_cycle_between_siblings_fails_and_a_child_using_its_parent_does_not() {
        let dir = std::env::temp_dir().join(format!("xtask-cycles-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(&dir, "lib.rs", "mod a;\nmod b;\npub struct Root;\n");
        write(
            &dir,
            "a/mod.rs",
            "mod inner;\nuse crate::b::B;\npub struct A;\n",
        );
        write(&dir, "a/inner.rs", "use super::A;\nuse crate::Root;\n");
        write(
            &dir,
            "b.rs",
            "pub struct B;\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
        );
        check_crates(&dir, &["k"]).expect("no cycle: tests and parents do not count");
        // b now names an item of a (in an expression), and a uses b.
        write(
            &dir,
            "b.rs",
            "pub struct B;\nfn f() { let _ = crate::a::A; }\n",
        );
        let err = check_crates(&dir, &["k"]).expect_err("a cycle");
        let text = format!("{err:#}");
        assert!(text.contains("1 module cycle"), "{text}");
        assert!(
            text.contains("a uses b") && text.contains("b.rs:2"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
