//! Finds, once per build, the literals of every `re:` pattern in the built-in packs
//! (`rules/builtin/*.yaml`), so that `carapace hook --local` and `check --local`, which load
//! the packs for a single call, parse none of them (`rules::lazy_regex`). A pattern of a
//! pack that does not parse fails the build.
//!
//! It also writes each pack's spanned YAML tree in the compact form `rules::tree_image`
//! reads, so that those one-call loads do not parse the packs' YAML either.

use std::fmt::Write as _;
use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

#[path = "src/rules/needles.rs"]
mod needles;

// The library's own parser and image format, so that the image is exactly the tree the
// library would build from the text.
#[path = "src/rules/yaml.rs"]
#[allow(
    dead_code,
    reason = "build.rs uses the parser, not the tree's accessors"
)]
mod yaml;

#[path = "src/rules/tree_image.rs"]
#[allow(dead_code, reason = "build.rs writes images and never reads them")]
mod tree_image;

fn main() {
    let packs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules/builtin");
    println!("cargo:rerun-if-changed={}", packs.display());
    println!("cargo:rerun-if-changed=src/rules/needles.rs");
    println!("cargo:rerun-if-changed=src/rules/yaml.rs");
    println!("cargo:rerun-if-changed=src/rules/tree_image.rs");
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut found = std::collections::BTreeMap::new();
    let mut files: Vec<_> = std::fs::read_dir(&packs)
        .unwrap_or_else(|e| panic!("{}: {e}", packs.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for file in files {
        println!("cargo:rerun-if-changed={}", file.display());
        let text =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let tree = yaml::parse(&text)
            .unwrap_or_else(|e| panic!("{}: {}: {}", file.display(), e.span.line, e.message));
        let image = out_dir.join(
            file.with_extension("tree")
                .file_name()
                .expect("a file name"),
        );
        std::fs::write(&image, tree_image::encode(tree.as_ref()))
            .unwrap_or_else(|e| panic!("{}: {e}", image.display()));
        let docs =
            YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for doc in &docs {
            regexes(doc, &mut |source| {
                let hir = regex_syntax::ParserBuilder::new()
                    .nest_limit(needles::NEST_LIMIT)
                    .build()
                    .parse(source)
                    .unwrap_or_else(|e| panic!("{}: `re:{source}`: {e}", file.display()));
                found.insert(source.to_owned(), needles::needles(&hir));
            });
        }
    }
    let mut out = String::from("static BUILTIN: &[(&str, Option<&[&[u8]]>)] = &[\n");
    for (source, list) in &found {
        let list = list.as_ref().map_or_else(
            || "None".to_owned(),
            |l| {
                let items: Vec<String> = l.iter().map(|n| format!("&{n:?}")).collect();
                format!("Some(&[{}])", items.join(", "))
            },
        );
        writeln!(out, "    ({source:?}, {list}),").expect("writing to a String");
    }
    out.push_str("];\n");
    let dest = out_dir.join("builtin_regexes.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
}

/// Calls `f` with each `re:` pattern among the strings of `node`; under a `run:` item with
/// `ignore-case: true`, as that item builds it (`(?i)` in front).
fn regexes(node: &Yaml, f: &mut impl FnMut(&str)) {
    walk(node, false, f);
}

fn walk(node: &Yaml, ignore_case: bool, f: &mut impl FnMut(&str)) {
    match node {
        Yaml::String(s) => {
            if let Some(re) = s.strip_prefix("re:") {
                if ignore_case {
                    f(&format!("(?i){re}"));
                } else {
                    f(re);
                }
            }
        }
        Yaml::Array(items) => items.iter().for_each(|i| walk(i, ignore_case, f)),
        Yaml::Hash(map) => {
            let ic = ignore_case
                || map.get(&Yaml::String("ignore-case".to_owned())) == Some(&Yaml::Boolean(true));
            map.values().for_each(|v| walk(v, ic, f));
        }
        _ => {}
    }
}
