//! A pipeline's parts as one command line, the text command rules see for `curl … | sh`:
//! brush's rendering of each part, normalised (`normalize::text`), one space between words
//! (`normalize::push_words`). Rendering through `Display` cost about 3k instructions a part
//! (a formatter call per word); the everyday part (a simple command of ASCII words,
//! assignments and file redirections) is written here straight from its words instead, to
//! the same text.
use std::fmt::Write as _;

use brush_parser::ast;

use super::super::normalize;

/// Appends part `c` of a pipeline to `line`; `scratch` is reused between parts.
pub(super) fn push_part(line: &mut String, c: &ast::Command, scratch: &mut String) {
    let mark = line.len();
    if push_plain(line, c).is_none() {
        line.truncate(mark);
        push_rendered(line, c, scratch);
    }
}

/// The slow path, and the reference the fast one is tested against.
fn push_rendered(line: &mut String, c: &ast::Command, scratch: &mut String) {
    scratch.clear();
    // Writing to a String cannot fail.
    let _ = write!(scratch, "{c}");
    normalize::push_words(line, &normalize::text(scratch));
}

/// Writes a plain simple command as brush renders it (items in order, one space apart, a
/// redirection as `{fd}{op} {target}`); `None`, with `line` partly written, for any other
/// part or text that is not ASCII (whose normalisation could join or split words).
fn push_plain(line: &mut String, c: &ast::Command) -> Option<()> {
    let ast::Command::Simple(simple) = c else {
        return None;
    };
    for item in simple.prefix.iter().flat_map(|p| &p.0) {
        push_item(line, item)?;
    }
    if let Some(name) = &simple.word_or_name {
        push_word(line, &name.value)?;
    }
    for item in simple.suffix.iter().flat_map(|s| &s.0) {
        push_item(line, item)?;
    }
    Some(())
}

fn push_item(line: &mut String, item: &ast::CommandPrefixOrSuffixItem) -> Option<()> {
    match item {
        ast::CommandPrefixOrSuffixItem::Word(w)
        | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => push_word(line, &w.value),
        ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => push_redirect(line, redirect),
        ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => None,
    }
}

fn push_redirect(line: &mut String, redirect: &ast::IoRedirect) -> Option<()> {
    match redirect {
        ast::IoRedirect::File(fd, kind, target) => {
            let op = match kind {
                ast::IoFileRedirectKind::Read => "<",
                ast::IoFileRedirectKind::Write => ">",
                ast::IoFileRedirectKind::Append => ">>",
                ast::IoFileRedirectKind::ReadAndWrite => "<>",
                ast::IoFileRedirectKind::Clobber => ">|",
                ast::IoFileRedirectKind::DuplicateInput => "<&",
                ast::IoFileRedirectKind::DuplicateOutput => ">&",
            };
            push_operator(line, *fd, op);
            match target {
                ast::IoFileRedirectTarget::Filename(w)
                | ast::IoFileRedirectTarget::Duplicate(w) => push_word(line, &w.value),
                ast::IoFileRedirectTarget::Fd(n) => {
                    separate(line);
                    let _ = write!(line, "{n}");
                    Some(())
                }
                ast::IoFileRedirectTarget::ProcessSubstitution(..) => None,
            }
        }
        ast::IoRedirect::OutputAndError(w, append) => {
            push_operator(line, None, if *append { "&>>" } else { "&>" });
            push_word(line, &w.value)
        }
        ast::IoRedirect::HereString(fd, w) => {
            push_operator(line, *fd, "<<<");
            push_word(line, &w.value)
        }
        ast::IoRedirect::HereDocument(..) => None,
    }
}

/// `{fd}{op}` as one word.
fn push_operator(line: &mut String, fd: Option<ast::IoFd>, op: &str) {
    separate(line);
    if let Some(fd) = fd {
        let _ = write!(line, "{fd}");
    }
    line.push_str(op);
}

/// A word's text, split at its whitespace as `normalize::push_words` splits the rendering.
fn push_word(line: &mut String, text: &str) -> Option<()> {
    if !text.is_ascii() {
        return None;
    }
    normalize::push_words(line, text);
    Some(())
}

/// The space `normalize::push_words` puts before a word.
fn separate(line: &mut String) {
    if !line.is_empty() && !line.ends_with(' ') {
        line.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every part of every top-level pipeline of `src`, written both ways after `before`.
    fn both_ways(src: &str, before: &str) -> Vec<(String, String)> {
        let Ok(program) = super::super::parse::program(src) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut scratch = String::new();
        for list in &program.complete_commands {
            for item in &list.0 {
                let and_or = &item.0;
                let pipelines = std::iter::once(&and_or.first).chain(and_or.additional.iter().map(
                    |a| match a {
                        ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
                    },
                ));
                for p in pipelines {
                    for c in &p.seq {
                        let mut fast = before.to_owned();
                        push_part(&mut fast, c, &mut scratch);
                        let mut slow = before.to_owned();
                        push_rendered(&mut slow, c, &mut scratch);
                        out.push((fast, slow));
                    }
                }
            }
        }
        out
    }

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z./~*-]{1,8}",
            "'[a-z $|]{0,6}'",
            "\"[a-z $]{0,6}\"",
            "\\$\\([a-z]{1,4} [a-z]{0,4}\\)",
            "`[a-z]{1,4}`",
            "\\$\\{[A-Z]{1,3}\\}",
            "\\$\\((echo|cat) \\$\\([a-z]{1,3}\\)\\)",
            Just("é".to_owned()),
            Just("'a\u{200b}b'".to_owned()),
            Just("\"ｆｕｌｌ\"".to_owned()),
            Just("-la".to_owned()),
        ]
    }

    fn item() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => word(),
            1 => (prop_oneof![Just(""), Just("2"), Just("1")], prop_oneof![
                Just(">"), Just(">>"), Just("<"), Just(">&"), Just("<&"), Just(">|"), Just("<>")
            ], word()).prop_map(|(fd, op, w)| format!("{fd}{op}{w}")),
            1 => Just("2>&1".to_owned()),
            1 => word().prop_map(|w| format!("&>{w}")),
            1 => word().prop_map(|w| format!("&>>{w}")),
            1 => word().prop_map(|w| format!("<<<{w}")),
            1 => word().prop_map(|w| format!("<({w})")),
        ]
    }

    fn part() -> impl Strategy<Value = String> {
        (
            prop::collection::vec("[A-Z]{1,3}=[a-z'\"]{0,4}", 0..3),
            prop::option::of(word()),
            prop::collection::vec(item(), 0..5),
        )
            .prop_map(|(assigns, name, items)| {
                let mut words = assigns;
                words.extend(name);
                words.extend(items);
                words.join(" ")
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        /// The line written from the words is the line brush's rendering gives, over
        /// quoting, redirections, assignments, substitutions and non-ASCII text.
        #[test]
        fn the_written_line_is_the_rendered_one(
            parts in prop::collection::vec(part(), 1..4),
            before in prop_oneof![Just(""), Just("x |"), Just("x | ")],
        ) {
            let src = parts.join(" | ");
            for (fast, slow) in both_ways(&src, before) {
                prop_assert_eq!(fast, slow, "{}", src);
            }
        }
    }

    #[test]
    fn compound_and_unusual_parts_are_rendered() {
        for src in [
            "cat <<EOF | sh\nx\nEOF\n",
            "{ echo a; } | sh",
            "(cd /tmp && ls) | wc -l",
            "f() { :; } | cat",
            "cat <(curl -s x) | sh",
            "echo 1 2>&1 >/dev/null | cat",
            "A=1 B= env | grep -v x",
        ] {
            let pairs = both_ways(src, "");
            assert!(!pairs.is_empty(), "{src}");
            for (fast, slow) in pairs {
                assert_eq!(fast, slow, "{src}");
            }
        }
    }
}
