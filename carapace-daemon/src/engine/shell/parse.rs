//! The parser front: limits checked before `brush-parser` sees the text, the parse itself,
//! and the whitespace split used when parsing fails (so rules can still explain a refusal).
use brush_parser::ast::Program;

/// Longer command lines are refused rather than parsed.
pub(super) const MAX_LEN: usize = 256 * 1024;
/// Deepest nesting handed to the parser (it recurses per level; see the module docs).
pub(super) const MAX_NESTING: usize = 48;

pub(super) fn program(src: &str) -> Result<Program, String> {
    if src.len() > MAX_LEN {
        return Err(format!(
            "it is {} bytes long; the limit is {MAX_LEN}",
            src.len()
        ));
    }
    let depth = nesting(src);
    if depth > MAX_NESTING {
        return Err(format!(
            "it is nested {depth} levels deep; the limit is {MAX_NESTING}"
        ));
    }
    // brush-parser 0.4's tokenizer spins forever on some inputs that end inside a here-doc
    // tag (`a<<$(  `); a shell line ends with a newline anyway, and with one it reports them.
    let src = if src.ends_with('\n') {
        src.to_owned()
    } else {
        format!("{src}\n")
    };
    let options = brush_parser::ParserOptions::default();
    let mut reader = std::io::BufReader::new(src.as_bytes());
    let mut parser = brush_parser::Parser::new(&mut reader, &options);
    parser.parse_program().map_err(|e| e.to_string())
}

/// An upper bound on how deep the parser will recurse: brackets of every kind, backticks
/// (nested ones are escaped once more per level) and compound-command keywords. Quotes are
/// ignored on purpose, which can only overestimate.
pub(super) fn nesting(src: &str) -> usize {
    let mut depth = 0usize;
    let mut max = 0usize;
    let mut backslashes = 0usize;
    let mut word = String::new();
    for c in src.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphabetic() {
            word.push(c);
        } else {
            match word.as_str() {
                "if" | "while" | "until" | "for" | "case" | "select" | "function" => depth += 1,
                "fi" | "done" | "esac" => depth = depth.saturating_sub(1),
                _ => {}
            }
            word.clear();
        }
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            '`' => max = max.max(depth + backslashes + 1),
            _ => {}
        }
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
        max = max.max(depth);
    }
    max
}

/// Best-effort words of a command line that does not parse: split on whitespace and control
/// operators, quotes dropped. Only used to give rules something to explain a refusal with.
pub(super) fn rough_commands(src: &str) -> Vec<Vec<String>> {
    src.split(['\n', ';', '|', '&', '(', ')', '`'])
        .map(|part| {
            part.split_whitespace()
                .map(|w| w.replace(['\'', '"', '\\'], ""))
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|words| !words.is_empty())
        .collect()
}
