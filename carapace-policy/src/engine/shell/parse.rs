//! The parser front: limits checked before `brush-parser` sees the text, the parse itself,
//! and the whitespace split used when parsing fails (so rules can still explain a refusal).
use brush_parser::ast::Program;

/// Longer command lines are refused rather than parsed.
pub(super) const MAX_LEN: usize = 256 * 1024;
/// Deepest nesting handed to the parser (it recurses per level; see the module docs).
pub(super) const MAX_NESTING: usize = 48;
/// The parser backtracks exponentially over unclosed `(` (subshell or arithmetic?) and
/// nested `case` (is `x)` a pattern?): 20 unclosed parentheses parse in ~50 ms, 28 in 10 s.
/// Real commands stay far below these.
pub(super) const MAX_AMBIGUOUS: usize = 20;
pub(super) const MAX_CASES: usize = 12;

/// Why a command line was not parsed; shown in the unparsable note the agent reads.
#[derive(Debug, thiserror::Error)]
pub(super) enum ParseError {
    #[error("it is {0} bytes long; the limit is {MAX_LEN}")]
    TooLong(usize),
    #[error("it is nested {0} levels deep; the limit is {MAX_NESTING}")]
    TooDeep(usize),
    #[error(
        "it nests {0} parentheses and case statements without closing them; the limit is \
         {MAX_AMBIGUOUS} ({MAX_CASES} for case)"
    )]
    TooAmbiguous(usize),
    /// brush-parser 0.4 unwraps the number into a u32 and panics.
    #[error("a redirection names a file descriptor number too large")]
    HugeFd,
    /// brush-parser 0.4's tokenizer loops forever, allocating, on a here-document whose tag
    /// is blank (`<<''`, `<<` and a carriage return) when the line ends in a backslash; a
    /// thread stuck there cannot be stopped, so such text is never parsed.
    #[error("a here-document has an empty or blank delimiter")]
    BlankHereTag,
    /// The parser's own message.
    #[error("{0}")]
    Syntax(String),
}

pub(super) fn program(src: &str) -> Result<Program, ParseError> {
    if src.len() > MAX_LEN {
        return Err(ParseError::TooLong(src.len()));
    }
    let n = nesting(src);
    if n.depth > MAX_NESTING {
        return Err(ParseError::TooDeep(n.depth));
    }
    if n.ambiguous > MAX_AMBIGUOUS || n.cases > MAX_CASES {
        return Err(ParseError::TooAmbiguous(n.ambiguous));
    }
    if huge_fd(src) {
        return Err(ParseError::HugeFd);
    }
    if blank_here_tag(src) {
        return Err(ParseError::BlankHereTag);
    }
    // The everyday command line needs no general parser (see `plain`).
    if let Some(program) = super::plain::program(src) {
        return Ok(program);
    }
    brush(src)
}

/// `src` parsed by `brush-parser` (the caller has checked the limits above).
pub(super) fn brush(src: &str) -> Result<Program, ParseError> {
    // brush-parser 0.4's tokenizer spins forever on some inputs that end inside a here-doc
    // tag (`a<<$(  `); a shell line ends with a newline anyway, and with one it reports them.
    let src = if src.ends_with('\n') {
        src.to_owned()
    } else {
        format!("{src}\n")
    };
    parse_text(&src).or_else(|e| {
        // brush-parser 0.4 has no `select`; its loop runs the body with the name set to
        // one of the words (or empty), as `for` runs it with each, so it is read as one.
        match select_as_for(&src) {
            Some(as_for) => parse_text(&as_for).map_err(|_| e),
            None => Err(e),
        }
    })
}

fn parse_text(src: &str) -> Result<Program, ParseError> {
    let options = brush_parser::ParserOptions::default();
    let mut reader = std::io::BufReader::new(src.as_bytes());
    let mut parser = brush_parser::Parser::new(&mut reader, &options);
    parser
        .parse_program()
        .map_err(|e| ParseError::Syntax(e.to_string()))
}

/// `src` with each `select` in a command's place spelled `for` (padded, so that columns in
/// messages stay right), or `None` when it has none.
fn select_as_for(src: &str) -> Option<String> {
    const WORD: &str = "select";
    let bytes = src.as_bytes();
    let mut out = src.to_owned();
    let mut found = false;
    for (at, _) in src.match_indices(WORD) {
        let after = bytes.get(at + WORD.len()).copied();
        if !after.is_some_and(|b| b == b' ' || b == b'\t') {
            continue;
        }
        let head = src[..at].trim_end_matches([' ', '\t']);
        let starts = head.is_empty()
            || head.ends_with([';', '&', '|', '(', '{', '\n', '!'])
            || ["do", "then", "else"].iter().any(|k| {
                head.strip_suffix(k).is_some_and(|h| {
                    h.is_empty() || h.ends_with([' ', '\t', ';', '\n', '{', '(', '&', '|'])
                })
            });
        if starts {
            out.replace_range(at..at + WORD.len(), "for   ");
            found = true;
        }
    }
    found.then_some(out)
}

/// Text short and shallow enough to parse and walk on the caller's thread: a small stack
/// suffices (`tests::light_commands_fit_a_small_stack` checks the worst case in a debug
/// build), and it stays clear of every input seen to make the parser backtrack for long
/// or spin (unclosed parentheses and `case`, here-doc tags).
pub(super) fn light(src: &str) -> bool {
    const MAX_LIGHT_LEN: usize = 2048;
    if src.len() > MAX_LIGHT_LEN || src.contains("<<") {
        return false;
    }
    let n = nesting(src);
    n.depth <= 6 && n.ambiguous <= 4 && n.cases <= 2
}

pub(super) struct Nesting {
    /// Brackets of every kind, backticks and compound-command keywords.
    pub depth: usize,
    /// Unclosed `(` plus unclosed `case`.
    pub ambiguous: usize,
    pub cases: usize,
}

/// Upper bounds on how deep the parser will recurse and how much it may backtrack:
/// brackets of every kind, backticks (nested ones are escaped once more per level) and
/// compound-command keywords. Quotes are ignored on purpose, which can only overestimate.
pub(super) fn nesting(src: &str) -> Nesting {
    let mut depth = 0usize;
    let mut parens = 0usize;
    let mut cases = 0usize;
    let mut n = Nesting {
        depth: 0,
        ambiguous: 0,
        cases: 0,
    };
    let mut backslashes = 0usize;
    // Bytes, not characters: every byte that matters is ASCII, and no byte of a multi-byte
    // character is (which `tests::nesting_reads_bytes_as_it_read_characters` checks).
    let bytes = src.as_bytes();
    let mut word_start = 0usize;
    for (i, &b) in bytes.iter().chain(std::iter::once(&b' ')).enumerate() {
        if !b.is_ascii_alphabetic() {
            match &bytes[word_start..i] {
                b"case" => {
                    depth += 1;
                    cases += 1;
                }
                b"esac" => {
                    depth = depth.saturating_sub(1);
                    cases = cases.saturating_sub(1);
                }
                b"if" | b"while" | b"until" | b"for" | b"select" | b"function" => depth += 1,
                b"fi" | b"done" => depth = depth.saturating_sub(1),
                _ => {}
            }
            word_start = i + 1;
        }
        match b {
            b'(' => {
                depth += 1;
                parens += 1;
            }
            b')' => {
                depth = depth.saturating_sub(1);
                parens = parens.saturating_sub(1);
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'`' => n.depth = n.depth.max(depth + backslashes + 1),
            _ => {}
        }
        backslashes = if b == b'\\' { backslashes + 1 } else { 0 };
        n.depth = n.depth.max(depth);
        n.ambiguous = n.ambiguous.max(parens + cases);
        n.cases = n.cases.max(cases);
    }
    n
}

/// `99999999999>x`: a run of ten or more digits right before a redirection operator.
fn huge_fd(src: &str) -> bool {
    let mut digits = 0usize;
    for b in src.bytes() {
        if b.is_ascii_digit() {
            digits += 1;
        } else {
            if digits >= 10 && (b == b'<' || b == b'>') {
                return true;
            }
            digits = 0;
        }
    }
    false
}

/// A here-document operator (`<<`, `<<-`, not `<<<`) whose tag word is nothing but quotes,
/// backslashes, whitespace and control characters. Quotes are not tracked (`echo "<<''"`
/// counts too), which can only refuse more.
fn blank_here_tag(src: &str) -> bool {
    let bytes = src.as_bytes();
    let mut i = 0;
    while let Some(at) = src[i..].find("<<").map(|p| p + i) {
        i = at + 2;
        if bytes.get(i) == Some(&b'<') {
            // A here-string; skip all of `<<<`.
            i += 1;
            continue;
        }
        let mut rest = &src[i..];
        rest = rest.strip_prefix('-').unwrap_or(rest);
        let rest = rest.trim_start_matches([' ', '\t']);
        let end = rest
            .find([' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')'])
            .unwrap_or(rest.len());
        let tag = &rest[..end];
        if !tag.is_empty()
            && tag
                .chars()
                .all(|c| matches!(c, '\'' | '"' | '\\') || c.is_whitespace() || c.is_control())
        {
            return true;
        }
    }
    false
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{blank_here_tag, nesting, Nesting};

    #[test]
    fn blank_here_tags_are_found() {
        for src in [
            "<<''>\\",
            "x <<\"\" >\\",
            "<<\r>\\",
            "<<-\r>\\",
            "<<\u{c}&\\",
            "cat <<'' ; echo",
        ] {
            assert!(blank_here_tag(src), "{src:?}");
        }
        for src in [
            "cat <<EOF\nx\nEOF\n",
            "cat <<'EOF'\nx\nEOF",
            "cat <<< 'x'",
            "echo $((1<<2))",
            "cat <<- \"E O F\"\n",
            "cat <<",
        ] {
            assert!(!blank_here_tag(src), "{src:?}");
        }
    }

    /// The character-by-character reading `nesting` replaced.
    fn by_chars(src: &str) -> (usize, usize, usize) {
        let (mut depth, mut parens, mut cases) = (0usize, 0usize, 0usize);
        let mut n = Nesting {
            depth: 0,
            ambiguous: 0,
            cases: 0,
        };
        let mut backslashes = 0usize;
        let mut word = String::new();
        for c in src.chars().chain(std::iter::once(' ')) {
            if c.is_ascii_alphabetic() {
                if word.len() < 16 {
                    word.push(c);
                }
            } else {
                match word.as_str() {
                    "case" => {
                        depth += 1;
                        cases += 1;
                    }
                    "esac" => {
                        depth = depth.saturating_sub(1);
                        cases = cases.saturating_sub(1);
                    }
                    "if" | "while" | "until" | "for" | "select" | "function" => depth += 1,
                    "fi" | "done" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                word.clear();
            }
            match c {
                '(' => {
                    depth += 1;
                    parens += 1;
                }
                ')' => {
                    depth = depth.saturating_sub(1);
                    parens = parens.saturating_sub(1);
                }
                '{' | '[' => depth += 1,
                '}' | ']' => depth = depth.saturating_sub(1),
                '`' => n.depth = n.depth.max(depth + backslashes + 1),
                _ => {}
            }
            backslashes = if c == '\\' { backslashes + 1 } else { 0 };
            n.depth = n.depth.max(depth);
            n.ambiguous = n.ambiguous.max(parens + cases);
            n.cases = n.cases.max(cases);
        }
        (n.depth, n.ambiguous, n.cases)
    }

    proptest! {
        #[test]
        fn nesting_reads_bytes_as_it_read_characters(
            src in "(case|esac|if|fi|for|done|while|function|[a-z]{1,20}|[()\\[\\]{}`\\\\ ;]|é|€|\\PC)*",
        ) {
            let n = nesting(&src);
            prop_assert_eq!((n.depth, n.ambiguous, n.cases), by_chars(&src));
        }
    }
}
