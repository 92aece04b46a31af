//! Layer 1 against data: the built-in packs' fixtures and the evasion / day-to-day corpus.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::cases;
use crate::rules::builtin;

fn workspace(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn builtin_pack_fixtures() {
    let mut total = 0;
    let mut failures = Vec::new();
    for pack in builtin::NAMES {
        let rel = format!("rules/fixtures/{pack}.yaml");
        let file = cases::parse(&read(&workspace(&rel))).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let rules = file
            .rule_set(&format!("version: 1\nbuiltin: [{pack}]\n"))
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        failures.extend(cases::run(&file, &rules, &rel));
        total += file.cases.len();
        // Every rule of the pack has a must-block (or must-approve) and a must-allow case.
        for rule in rules.rules() {
            let named = |allow: bool| {
                file.cases.iter().any(|c| {
                    c.rule.as_deref() == Some(rule.id.as_str())
                        && (c.expect == crate::rules::Mode::Allow) == allow
                })
            };
            if !named(false) || !named(true) {
                failures.push(format!(
                    "{rel}: rule `{}` needs a must-block and a must-allow case naming it (`rule: {}`)",
                    rule.id, rule.id
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        total >= 300,
        "the built-in fixtures hold only {total} cases"
    );
}

#[test]
fn corpus() {
    let dir = workspace("tests/corpus");
    let mut total = 0;
    let mut failures = Vec::new();
    let files: BTreeSet<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    for path in files {
        let rel = format!(
            "tests/corpus/{}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
        let file = cases::parse(&read(&path)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let rules = file
            .rule_set("version: 1\n")
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        failures.extend(cases::run(&file, &rules, &rel));
        total += file.cases.len();
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(total >= 400, "the corpus holds only {total} cases");
}
