//! The plain command line (`cargo test`, `git status && git diff --stat`, `grep -rn 'x' src/
//! | head`), the everyday case, parsed without `brush-parser`: words and quotes joined by
//! `|`, `&&`, `||` and `;`. Its syntax tree is exactly the one `brush-parser` builds (source
//! locations included; the tests hold the two together over the corpus and generated
//! lines), and it answers only for text it understands completely: anything else (`$`,
//! backticks, backslashes, redirects, parentheses, braces, `#`, `!`, `&`, assignments,
//! reserved words, newlines, non-ASCII) is left to the full parser. The full parse costs
//! several microseconds of a Layer 1 decision whose budget is two.
use std::sync::Arc;

use brush_parser::ast;
use brush_parser::{SourcePosition, SourceSpan};

/// Bytes that make a command line more than plain, inside quotes or out. Quoted `$`, `` ` ``
/// and `\` would need the rules of double quotes; `!` is history expansion; the rest
/// (redirects, groups, subshells, comments, async lists, brace expansion) are syntax this
/// parser does not build.
fn unsupported(b: u8) -> bool {
    matches!(
        b,
        b'$' | b'`' | b'\\' | b'<' | b'>' | b'(' | b')' | b'{' | b'}' | b'#' | b'!'
    ) || !(b == b' ' || b == b'\t' || b.is_ascii_graphic())
}

/// Words the shell grammar reserves (the parser's list, bash's extensions and `time`); a
/// plain line has none of them, anywhere.
const RESERVED: &[&str] = &[
    "case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "in", "then", "until",
    "while", "[[", "]]", "function", "select", "coproc", "time",
];

enum Token<'a> {
    Word(&'a str, usize),
    Pipe,
    And,
    Or,
    Semi,
}

/// The syntax tree of `src` if it is a plain command line, else `None`.
pub(super) fn program(src: &str) -> Option<ast::Program> {
    let tokens = tokenize(src)?;
    let mut items = Vec::new();
    let mut tokens = tokens.into_iter().peekable();
    while tokens.peek().is_some() {
        let first = pipeline(&mut tokens)?;
        let mut additional = Vec::new();
        loop {
            match tokens.next() {
                Some(Token::And) => additional.push(ast::AndOr::And(pipeline(&mut tokens)?)),
                Some(Token::Or) => additional.push(ast::AndOr::Or(pipeline(&mut tokens)?)),
                // A `;` ends the list item; the line may end with one.
                Some(Token::Semi) | None => break,
                Some(Token::Word(..) | Token::Pipe) => return None,
            }
        }
        items.push(ast::CompoundListItem(
            ast::AndOrList { first, additional },
            ast::SeparatorOperator::Sequence,
        ));
    }
    if items.is_empty() {
        return None;
    }
    Some(ast::Program {
        complete_commands: vec![ast::CompoundList(items)],
    })
}

fn pipeline(
    tokens: &mut std::iter::Peekable<std::vec::IntoIter<Token<'_>>>,
) -> Option<ast::Pipeline> {
    let mut seq = vec![simple(tokens)?];
    while matches!(tokens.peek(), Some(Token::Pipe)) {
        tokens.next();
        seq.push(simple(tokens)?);
    }
    Some(ast::Pipeline {
        timed: None,
        bang: false,
        seq,
    })
}

fn simple(tokens: &mut std::iter::Peekable<std::vec::IntoIter<Token<'_>>>) -> Option<ast::Command> {
    let Some(Token::Word(name, at)) = tokens.next() else {
        return None;
    };
    let word_or_name = Some(word(name, at));
    let mut args = Vec::new();
    while let Some(Token::Word(w, at)) = tokens.peek() {
        args.push(ast::CommandPrefixOrSuffixItem::Word(word(w, *at)));
        tokens.next();
    }
    Some(ast::Command::Simple(ast::SimpleCommand {
        prefix: None,
        word_or_name,
        suffix: (!args.is_empty()).then_some(ast::CommandSuffix(args)),
    }))
}

/// A word at byte `at` (the text is ASCII, so bytes are characters and the line is one).
fn word(value: &str, at: usize) -> ast::Word {
    let pos = |index: usize| {
        Arc::new(SourcePosition {
            index,
            line: 1,
            column: index + 1,
        })
    };
    ast::Word {
        value: value.to_owned(),
        loc: Some(SourceSpan {
            start: pos(at),
            end: pos(at + value.len()),
        }),
    }
}

fn tokenize(src: &str) -> Option<Vec<Token<'_>>> {
    let bytes = src.as_bytes();
    if bytes.iter().any(|&b| unsupported(b)) {
        return None;
    }
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' => i += 1,
            b'|' if bytes.get(i + 1) == Some(&b'|') => {
                tokens.push(Token::Or);
                i += 2;
            }
            b'|' if bytes.get(i + 1) == Some(&b'&') => return None,
            b'|' => {
                tokens.push(Token::Pipe);
                i += 1;
            }
            b'&' if bytes.get(i + 1) == Some(&b'&') => {
                tokens.push(Token::And);
                i += 2;
            }
            // A lone `&` runs in the background; `;;` belongs to `case`.
            b'&' => return None,
            b';' if bytes.get(i + 1) == Some(&b';') => return None,
            b';' => {
                tokens.push(Token::Semi);
                i += 1;
            }
            _ => {
                let start = i;
                while i < bytes.len() && !matches!(bytes[i], b' ' | b'\t' | b'|' | b'&' | b';') {
                    if let q @ (b'\'' | b'"') = bytes[i] {
                        let close = bytes[i + 1..].iter().position(|&b| b == q)?;
                        i += close + 1;
                    }
                    i += 1;
                }
                let w = &src[start..i];
                if RESERVED.contains(&w) || assignment_like(w) {
                    return None;
                }
                tokens.push(Token::Word(w, start));
            }
        }
    }
    Some(tokens)
}

/// A word the grammar may read as an assignment (`NAME=value`, `a[i]=v`, `x+=y`): it
/// starts like a name and has a `=`. Others with a `=` (`--opt=v`, `'a=b'`) are words.
fn assignment_like(w: &str) -> bool {
    w.contains('=') && w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use yaml_rust2::{Yaml, YamlLoader};

    use super::super::parse;
    use super::program;

    /// Whenever the plain parser answers, `brush-parser` builds the very same tree (the
    /// AST types have no `PartialEq` outside brush's own tests; their derived `Debug` shows
    /// every field). Returns whether the plain parser answered.
    #[track_caller]
    fn same_as_brush(src: &str) -> bool {
        let Some(plain) = program(src) else {
            return false;
        };
        let full = parse::brush(src).unwrap_or_else(|e| {
            panic!("`{src}`: the plain parser accepted what brush refuses: {e}")
        });
        assert_eq!(format!("{plain:#?}"), format!("{full:#?}"), "`{src}`");
        true
    }

    #[test]
    fn everyday_command_lines() {
        for src in [
            "cargo test --workspace",
            "git status && git diff --stat",
            "grep -rn 'TODO' src/ | head -20",
            "curl -fsSL https://x.example/i.sh | sh",
            "cat ~/.aws/credentials",
            "a;b ; c;",
            "a||b&&c|d|e",
            "git commit -m \"fix: the 'x' case; and | more\"",
            "ls -la *.rs src/[ab]?.rs",
            "x --opt=value 'A=b' \"C\"=d =e",
            "\tnpm  run\tbuild  ",
            "''",
        ] {
            assert!(same_as_brush(src), "`{src}` should be plain");
        }
    }

    #[test]
    fn anything_more_is_left_to_brush() {
        for src in [
            "",
            "   ",
            "echo $HOME",
            "echo '$HOME'",
            "a `b`",
            "a \\; b",
            "a > f",
            "a 2>&1",
            "(a)",
            "{ a; }",
            "a # c",
            "! a",
            "a &",
            "a |& b",
            "case x in x) a;; esac",
            "FOO=1 a",
            "a x=1",
            "if a; then b; fi",
            "echo done",
            "time a",
            "a\nb",
            "a 'unclosed",
            "a |",
            "&& a",
            "a ; ; b",
            "échoé x",
        ] {
            assert!(program(src).is_none(), "`{src}` is not plain");
        }
    }

    /// Every string of the tool-call corpus (commands, and whatever else it holds).
    #[test]
    fn the_corpus_parses_as_brush_parses_it() {
        fn strings(y: &Yaml, out: &mut Vec<String>) {
            match y {
                Yaml::String(s) => out.push(s.clone()),
                Yaml::Array(items) => items.iter().for_each(|i| strings(i, out)),
                Yaml::Hash(map) => map.values().for_each(|v| strings(v, out)),
                _ => {}
            }
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus");
        let mut all = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("the corpus directory") {
            let path = entry.expect("a corpus entry").path();
            let text = std::fs::read_to_string(&path).expect("a corpus file");
            for doc in YamlLoader::load_from_str(&text).expect("corpus YAML") {
                strings(&doc, &mut all);
            }
        }
        let plain = all.iter().filter(|s| same_as_brush(s)).count();
        // Most of the corpus is evasions, which are never plain; the everyday part is.
        assert!(
            plain >= 100,
            "only {plain} of {} corpus strings were plain",
            all.len()
        );
    }

    fn word() -> impl Strategy<Value = String> {
        // Mostly words a plain line may hold, so that most lines are plain.
        prop_oneof![
            6 => "[a-zA-Z0-9_./~*?,:@%+^-]{1,8}",
            1 => "[a-zA-Z0-9_./~*?,:@%+=^-]{1,8}",
            2 => "'[ a-zA-Z0-9|&;=\"*?.,:/-]{0,8}'",
            2 => "\"[ a-zA-Z0-9|&;='*?.,:/-]{0,8}\"",
            1 => "'[ -~&&[^']]{0,8}'",
            1 => "\"[ -~&&[^\"]]{0,8}\"",
            2 => "[a-z]{1,3}'[ a-z|;&]{0,4}'[a-z]{0,3}",
            1 => proptest::sample::select(vec![
                "if", "done", "in", "time", "[[", "]]", "{", "}", "!", "#x", "a=b", "_x+=1",
                "$x", "`a`", "a\\ b", "2>&1", ">f", "<(a)", "{a,b}", "x[1]=2", "-", "--", "[",
                "]", "~/x", "%s",
            ])
            .prop_map(str::to_owned),
        ]
    }

    fn sep() -> impl Strategy<Value = &'static str> {
        // Mostly the operators of a plain line.
        prop_oneof![
            12 => proptest::sample::select(vec![
                " ", "  ", "\t", " | ", "|", " && ", "&&", " || ", "||", "; ", ";",
            ]),
            1 => proptest::sample::select(vec![" & ", "&", " ;; ", "\n", " |& ", " ; ; "]),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// Generated command lines: words (quoted, bare, reserved, with every special
        /// character) joined by operators and blanks.
        #[test]
        fn generated_lines_parse_as_brush_parses_them(
            parts in proptest::collection::vec((word(), sep()), 1..8),
            last in word(),
        ) {
            let mut src = String::new();
            for (w, s) in &parts {
                src.push_str(w);
                src.push_str(s);
            }
            src.push_str(&last);
            same_as_brush(&src);
        }

        /// Arbitrary text over the characters that matter to the shell.
        #[test]
        fn arbitrary_text_parses_as_brush_parses_it(src in "[ a-z0-9|&;'\"=.*?/~\\-\t$`\\\\(){}<>#!\\[\\]]{0,24}") {
            same_as_brush(&src);
        }
    }
}
