//! The literals one of which every match of a regex contains, found from its syntax: a
//! text with none of them cannot match, so the regex need not be compiled for it. Shared
//! with `build.rs`, which finds them for the built-in packs when the crate is built; it
//! depends on `regex-syntax` alone.

use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{Class, Hir, HirKind};

/// `regex`'s own default nesting limit, so that what parses here is what `Regex::new` parses.
pub(crate) const NEST_LIMIT: u32 = 250;

/// More literals than this are not worth trying one by one before the regex.
const MAX_NEEDLES: usize = 64;

/// Literals one of which every match of `hir` contains: its prefix literals, its suffix
/// literals, or the required literals of one of its parts (`()` in a fork bomb's
/// `\w+\s*\(\)…`), whichever list has the longest shortest literal; `None` when no list
/// is finite, short and free of the empty literal (which every text contains).
pub(crate) fn needles(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    [ExtractKind::Prefix, ExtractKind::Suffix]
        .into_iter()
        .filter_map(|kind| {
            let seq = Extractor::new().kind(kind).extract(hir);
            Some(
                seq.literals()?
                    .iter()
                    .map(|l| l.as_bytes().to_vec())
                    .collect(),
            )
        })
        .chain(required(hir))
        .filter(|list: &Vec<Vec<u8>>| list.len() <= MAX_NEEDLES)
        .filter_map(|list| Some((shortest(&list)?, list)))
        .max_by_key(|(len, list)| (*len, std::cmp::Reverse(list.len())))
        .map(|(_, list)| list)
}

/// The length of the shortest literal of `list`, when none is empty.
fn shortest(list: &[Vec<u8>]) -> Option<usize> {
    list.iter().map(Vec::len).min().filter(|&n| n > 0)
}

/// Classes of at most this many characters stand for their characters.
const MAX_CLASS: usize = 4;

/// A class's characters as literals, when it has at most `MAX_CLASS` of them (only that
/// many are looked at).
fn class_members(class: &Class) -> Option<Vec<Vec<u8>>> {
    let members: Vec<Vec<u8>> = match class {
        Class::Unicode(c) => c
            .iter()
            .flat_map(|r| r.start()..=r.end())
            .take(MAX_CLASS + 1)
            .map(|c| c.to_string().into_bytes())
            .collect(),
        Class::Bytes(c) => c
            .iter()
            .flat_map(|r| r.start()..=r.end())
            .take(MAX_CLASS + 1)
            .map(|b| vec![b])
            .collect(),
    };
    (members.len() <= MAX_CLASS).then_some(members)
}

/// Literals one of which every match of `hir` contains, found part by part.
fn required(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    match hir.kind() {
        HirKind::Literal(lit) => Some(vec![lit.0.to_vec()]),
        HirKind::Class(class) => class_members(class),
        HirKind::Repetition(rep) if rep.min > 0 => required(&rep.sub),
        HirKind::Capture(cap) => required(&cap.sub),
        // Every part occurs in a match: the best part's literals do.
        HirKind::Concat(parts) => parts
            .iter()
            .filter_map(required)
            .filter(|list| list.len() <= MAX_NEEDLES)
            .filter_map(|list| Some((shortest(&list)?, list)))
            .max_by_key(|(len, list)| (*len, std::cmp::Reverse(list.len())))
            .map(|(_, list)| list),
        // One branch matches: the union of the branches' literals.
        HirKind::Alternation(branches) => {
            let mut all = Vec::new();
            for b in branches {
                all.extend(required(b)?);
            }
            Some(all)
        }
        HirKind::Empty | HirKind::Look(_) | HirKind::Repetition(_) => None,
    }
}
