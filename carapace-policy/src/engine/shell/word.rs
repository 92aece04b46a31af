//! Word expansion as the shell would do it, as far as it can be done without running
//! anything: brace expansion, quote removal (`'…'`, `"…"`, `$'…'`, backslashes), parameter
//! expansion from the context, command substitution through a callback (the walker extracts
//! the inner command and reports what it would print, when that is known) and field
//! splitting of unquoted expansions. Tildes and glob characters are left in place: paths are
//! resolved by `normalize::path`, and rules match glob characters as written.
use super::super::operation::Context;
use super::param::{parameter, var, ELEMENT_BREAK};

/// Brace expansion stops here; `{a,b}{c,d}…` grows exponentially.
const MAX_ALTERNATIVES: usize = 64;

/// Runs a command substitution's inner text and returns its output, when known.
pub(super) type Subst<'a> = dyn FnMut(&str) -> String + 'a;

/// The fields a word expands to (several with braces or unquoted expansions with spaces).
pub(super) fn expand(raw: &str, ctx: &Context, subst: &mut Subst<'_>) -> Vec<String> {
    // Most words of a command line are plain (`grep`, `-rn`, `src/`): nothing in them quotes,
    // expands or braces, so they are their own one field. Walking them character by character
    // was a tenth of a shell decision.
    if is_plain(raw) {
        return if raw.is_empty() {
            Vec::new()
        } else {
            vec![raw.to_owned()]
        };
    }
    expand_marked(raw, ctx, subst)
}

/// Whether `raw` holds none of the characters word expansion acts on: quotes, escapes,
/// `$`, backticks and brace expressions.
fn is_plain(raw: &str) -> bool {
    !raw.bytes()
        .any(|b| matches!(b, b'\\' | b'\'' | b'"' | b'$' | b'`' | b'{'))
}

/// [`expand`] character by character.
fn expand_marked(raw: &str, ctx: &Context, subst: &mut Subst<'_>) -> Vec<String> {
    let mut fields = Vec::new();
    for alt in braces(raw) {
        let mut e = Expansion::new(ctx);
        e.word(&alt, ctx, subst);
        fields.extend(e.finish());
    }
    fields
}

/// One string, as an assignment value or a here-string is expanded: no braces, no splitting.
pub(super) fn expand_one(raw: &str, ctx: &Context, subst: &mut Subst<'_>) -> String {
    let mut e = Expansion {
        no_split: true,
        ..Expansion::new(ctx)
    };
    e.word(raw, ctx, subst);
    e.finish().join(" ")
}

/// A here-document body with an unquoted delimiter: `$…` and backticks expand, quotes are
/// literal.
pub(super) fn expand_heredoc(raw: &str, ctx: &Context, subst: &mut Subst<'_>) -> String {
    let mut e = Expansion {
        no_split: true,
        ..Expansion::new(ctx)
    };
    let chars: Vec<char> = raw.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if matches!(chars.get(i + 1), Some('$' | '`' | '\\')) => {
                e.push(chars[i + 1]);
                i += 2;
            }
            '$' => i = e.dollar(&chars, i, ctx, subst, true),
            '`' => i = e.backtick(&chars, i, subst, true),
            c => {
                e.push(c);
                i += 1;
            }
        }
    }
    e.finish().join(" ")
}

#[derive(Default)]
struct Expansion {
    fields: Vec<String>,
    current: String,
    /// Whether `current` holds anything, even an empty quoted string (`""` is a field).
    started: bool,
    no_split: bool,
    /// Field separators (`$IFS`).
    ifs: String,
}

impl Expansion {
    fn new(ctx: &Context) -> Self {
        Self {
            ifs: var(ctx, "IFS"),
            ..Self::default()
        }
    }

    fn push(&mut self, c: char) {
        self.current.push(c);
        self.started = true;
    }

    fn push_str(&mut self, s: &str) {
        self.current.push_str(s);
        self.started = true;
    }

    /// The result of an expansion; unquoted, it splits on whitespace like `$IFS` does.
    fn expanded(&mut self, value: &str, quoted: bool) {
        if value.contains(ELEMENT_BREAK) {
            // `"${a[@]}"`: one field per element, quoted or not.
            let mut elements = value.split(ELEMENT_BREAK).peekable();
            while let Some(e) = elements.next() {
                self.expanded(e, quoted);
                if elements.peek().is_some() {
                    if self.no_split {
                        self.push(' ');
                    } else {
                        self.fields.push(std::mem::take(&mut self.current));
                        self.started = false;
                    }
                }
            }
            return;
        }
        if quoted || self.no_split {
            self.push_str(value);
            return;
        }
        let ifs = self.ifs.clone();
        let mut pieces = value.split(|c: char| ifs.contains(c)).peekable();
        let mut first = true;
        while let Some(piece) = pieces.next() {
            if !first {
                if self.started && !self.current.is_empty() {
                    self.fields.push(std::mem::take(&mut self.current));
                }
                self.started = false;
            }
            first = false;
            if !piece.is_empty() || (pieces.peek().is_none() && self.started) {
                self.push_str(piece);
            }
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.started {
            self.fields.push(self.current);
        }
        self.fields
    }

    fn word(&mut self, raw: &str, ctx: &Context, subst: &mut Subst<'_>) {
        let chars: Vec<char> = raw.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => {
                    // Backslash-newline is a line continuation; otherwise the next character
                    // is literal.
                    if let Some(&c) = chars.get(i + 1) {
                        if c != '\n' {
                            self.push(c);
                        }
                    }
                    i += 2;
                }
                '\'' => {
                    self.started = true;
                    let end = find(&chars, i + 1, '\'');
                    self.push_str(&collect(&chars[i + 1..end]));
                    i = end + 1;
                }
                '"' => i = self.double_quoted(&chars, i + 1, ctx, subst),
                '$' if chars.get(i + 1) == Some(&'\'') => {
                    let (text, next) = ansi_c(&chars, i + 2);
                    self.push_str(&text);
                    i = next;
                }
                '$' if chars.get(i + 1) == Some(&'"') => {
                    i = self.double_quoted(&chars, i + 2, ctx, subst);
                }
                '$' => i = self.dollar(&chars, i, ctx, subst, false),
                '`' => i = self.backtick(&chars, i, subst, false),
                c => {
                    self.push(c);
                    i += 1;
                }
            }
        }
    }

    /// From just after an opening `"`; returns the index after the closing one.
    fn double_quoted(
        &mut self,
        chars: &[char],
        mut i: usize,
        ctx: &Context,
        subst: &mut Subst<'_>,
    ) -> usize {
        self.started = true;
        while i < chars.len() {
            match chars[i] {
                '"' => return i + 1,
                '\\' => match chars.get(i + 1) {
                    Some('\n') => i += 2,
                    Some(&c @ ('$' | '`' | '"' | '\\')) => {
                        self.push(c);
                        i += 2;
                    }
                    _ => {
                        self.push('\\');
                        i += 1;
                    }
                },
                '$' => i = self.dollar(chars, i, ctx, subst, true),
                '`' => i = self.backtick(chars, i, subst, true),
                c => {
                    self.push(c);
                    i += 1;
                }
            }
        }
        i
    }

    /// From a `$`; returns the index after the expansion.
    fn dollar(
        &mut self,
        chars: &[char],
        i: usize,
        ctx: &Context,
        subst: &mut Subst<'_>,
        quoted: bool,
    ) -> usize {
        match chars.get(i + 1) {
            Some('(') if chars.get(i + 2) == Some(&'(') => {
                // Arithmetic: its value is a number; substitutions inside it still run.
                let end = matching(chars, i + 2, '(', ')');
                let inner = collect(&chars[(i + 3).min(end)..end]);
                let value = expand_one(&inner, ctx, subst);
                // Evaluated as the shell does (`a[$((0+1))]`); what cannot be stands in as 0.
                let value = super::param::arithmetic(&value, ctx)
                    .unwrap_or(0)
                    .to_string();
                self.expanded(&value, quoted);
                (end + 2).min(chars.len())
            }
            Some('(') => {
                let end = matching(chars, i + 1, '(', ')');
                let inner = collect(&chars[i + 2..end.max(i + 2)]);
                let value = subst(&inner);
                self.expanded(value.trim_end_matches('\n'), quoted);
                end + 1
            }
            Some('{') => {
                let end = matching(chars, i + 1, '{', '}');
                let inner = collect(&chars[i + 2..end.max(i + 2)]);
                let value = parameter(&inner, ctx, &mut |w: &str| expand_one(w, ctx, subst));
                self.expanded(&value, quoted);
                end + 1
            }
            Some(&c) if c == '_' || c.is_ascii_alphabetic() => {
                let len = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .count();
                let name = collect(&chars[i + 1..i + 1 + len]);
                let value = var(ctx, &name);
                self.expanded(&value, quoted);
                i + 1 + len
            }
            Some(&c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                // Positional parameters are known inside `sh -c '…' ARGS`; the special ones
                // are not, and are empty in a fresh shell.
                let name = if c == '*' {
                    "@".to_owned()
                } else {
                    c.to_string()
                };
                let mut value = var(ctx, &name);
                if c == '*' && quoted {
                    // `"$*"` joins the parameters with IFS's first character (none when IFS
                    // is empty): `IFS=/; set -- root .ssh id_rsa; cat "/$*"`. They are kept
                    // joined by spaces, so a parameter's own spaces change too: a wider
                    // reading, never a narrower one.
                    if let Some(ifs) = ctx.var("IFS") {
                        let sep: String = ifs.chars().take(1).collect();
                        if sep != " " {
                            value = value.replace(' ', &sep);
                        }
                    }
                }
                self.started = true;
                // `"$@"` is one word per parameter, quoted or not.
                self.expanded(&value, quoted && c != '@');
                i + 2
            }
            _ => {
                self.push('$');
                i + 1
            }
        }
    }

    fn backtick(&mut self, chars: &[char], i: usize, subst: &mut Subst<'_>, quoted: bool) -> usize {
        let mut inner = String::new();
        let mut j = i + 1;
        while j < chars.len() && chars[j] != '`' {
            if chars[j] == '\\' && matches!(chars.get(j + 1), Some('`' | '\\' | '$')) {
                j += 1;
            }
            if let Some(&c) = chars.get(j) {
                inner.push(c);
            }
            j += 1;
        }
        let value = subst(&inner);
        self.expanded(value.trim_end_matches('\n'), quoted);
        j + 1
    }
}

/// `${name:=word}` and `${name=word}` in a raw word, outside single quotes, nested ones
/// included: (name, whether `:` made an empty value count as unset, the raw word). The
/// expansion assigns the word to the variable, which keeps it for the commands after.
pub(super) fn default_assignments(raw: &str) -> Vec<(String, bool, String)> {
    let mut found = Vec::new();
    defaults_within(raw, 0, &mut found);
    found
}

/// Nesting of `${a:=${b:=…}}` followed, at most (each level scans its text again).
const MAX_DEFAULT_NESTING: usize = 4;

fn defaults_within(raw: &str, nesting: usize, found: &mut Vec<(String, bool, String)>) {
    let chars: Vec<char> = raw.chars().collect();
    let mut in_double = false;
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '\'' if !in_double => i = find(&chars, i + 1, '\''),
            '"' => in_double = !in_double,
            '$' if chars.get(i + 1) == Some(&'{') => {
                let end = matching(&chars, i + 1, '{', '}');
                let inner = collect(&chars[(i + 2).min(end)..end]);
                let name_len = inner
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(inner.len());
                let (name, op) = inner.split_at(name_len);
                let assigned = op
                    .strip_prefix(":=")
                    .map(|w| (true, w))
                    .or_else(|| op.strip_prefix('=').map(|w| (false, w)));
                if let Some((colon, word)) = assigned.filter(|_| !name.is_empty()) {
                    if nesting < MAX_DEFAULT_NESTING {
                        defaults_within(word, nesting + 1, found);
                    }
                    found.push((name.to_owned(), colon, word.to_owned()));
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
}

fn collect(chars: &[char]) -> String {
    chars.iter().collect()
}

/// Index of the next `c` at or after `from`, or the end.
fn find(chars: &[char], from: usize, c: char) -> usize {
    chars
        .get(from..)
        .and_then(|rest| rest.iter().position(|&x| x == c))
        .map_or(chars.len(), |p| from + p)
}

/// Index of the bracket closing the one at `open`, skipping quoted text; the end when
/// unbalanced.
fn matching(chars: &[char], open: usize, left: char, right: char) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '\'' if left == '(' => i = find(chars, i + 1, '\''),
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            c if c == left => depth += 1,
            c if c == right => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

/// `$'…'` from just after the opening quote: the text with ANSI-C escapes decoded, and the
/// index after the closing quote.
fn ansi_c(chars: &[char], mut i: usize) -> (String, usize) {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4];
    while i < chars.len() && chars[i] != '\'' {
        if chars[i] != '\\' {
            bytes.extend_from_slice(chars[i].encode_utf8(&mut buf).as_bytes());
            i += 1;
            continue;
        }
        let Some(&esc) = chars.get(i + 1) else {
            i += 1;
            break;
        };
        i += 2;
        if common_escape(esc, chars, &mut i, &mut bytes) {
            continue;
        }
        match esc {
            'E' => bytes.push(0x1b),
            '0'..='7' => {
                let (v, n) = radix_prefix(&chars[i - 1..], 8, 3);
                bytes.push(v as u8);
                i += n - 1;
            }
            'c' => {
                if let Some(&c) = chars.get(i) {
                    bytes.push((c as u32 & 0x1f) as u8);
                    i += 1;
                }
            }
            other => bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes()),
        }
    }
    (String::from_utf8_lossy(&bytes).into_owned(), i + 1)
}

/// The escapes `$'…'`, `echo -e` and `printf` agree on (`\n \t \r \a \b \e \f \v`,
/// `\xHH`, `\uHHHH`, `\UHHHHHHHH`): appends the decoded bytes and advances `i` past the
/// escape's digits; `false` for any other escape, which each dialect decodes its own way.
pub(super) fn common_escape(esc: char, chars: &[char], i: &mut usize, bytes: &mut Vec<u8>) -> bool {
    match esc {
        'n' => bytes.push(b'\n'),
        't' => bytes.push(b'\t'),
        'r' => bytes.push(b'\r'),
        'a' => bytes.push(7),
        'b' => bytes.push(8),
        'e' => bytes.push(0x1b),
        'f' => bytes.push(0x0c),
        'v' => bytes.push(0x0b),
        'x' => {
            let (v, n) = radix_prefix(&chars[*i..], 16, 2);
            if n == 0 {
                bytes.extend_from_slice(b"\\x");
            } else {
                bytes.push(v as u8);
            }
            *i += n;
        }
        'u' | 'U' => {
            let (v, n) = radix_prefix(&chars[*i..], 16, if esc == 'u' { 4 } else { 8 });
            if let Some(c) = char::from_u32(v).filter(|_| n > 0) {
                let mut buf = [0u8; 4];
                bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            *i += n;
        }
        _ => return false,
    }
    true
}

/// The value of up to `max` leading digits in `radix`, and how many there were.
pub(super) fn radix_prefix(chars: &[char], radix: u32, max: usize) -> (u32, usize) {
    let mut v = 0u32;
    let mut n = 0;
    for c in chars.iter().take(max) {
        let Some(d) = c.to_digit(radix) else { break };
        v = v.wrapping_mul(radix).wrapping_add(d);
        n += 1;
    }
    (v, n)
}

/// Brace expansion of a raw word (quotes are honoured: `'{a,b}'` stays as it is).
pub(super) fn braces(raw: &str) -> Vec<String> {
    let mut out = vec![raw.to_owned()];
    let mut done = Vec::new();
    let mut rounds = 0;
    while let Some(w) = out.pop() {
        rounds += 1;
        if rounds > MAX_ALTERNATIVES * 4 || done.len() + out.len() >= MAX_ALTERNATIVES {
            done.push(w);
            continue;
        }
        match brace_once(&w) {
            Some(alts) => out.extend(alts.into_iter().rev()),
            None => done.push(w),
        }
    }
    done.truncate(MAX_ALTERNATIVES);
    done
}

/// Expands the first brace expression in `w`, or `None` when there is none.
fn brace_once(w: &str) -> Option<Vec<String>> {
    let chars: Vec<char> = w.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '\'' => i = find(&chars, i + 1, '\''),
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            '$' if chars.get(i + 1) == Some(&'{') => i = matching(&chars, i + 1, '{', '}'),
            '{' => {
                let end = matching(&chars, i, '{', '}');
                if end < chars.len() {
                    if let Some(alts) = brace_members(&chars[i + 1..end]) {
                        let pre = collect(&chars[..i]);
                        let post = collect(&chars[end + 1..]);
                        return Some(alts.iter().map(|a| format!("{pre}{a}{post}")).collect());
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The members of `{…}`: comma-separated at the top level, or a `a..b` sequence.
fn brace_members(body: &[char]) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            '\\' => i += 1,
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(collect(&body[start..i]));
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if !parts.is_empty() {
        parts.push(collect(&body[start.min(body.len())..]));
        return Some(parts);
    }
    sequence(&collect(body))
}

/// `{1..5}`, `{a..e}`, `{0..10..2}`.
fn sequence(body: &str) -> Option<Vec<String>> {
    let mut it = body.split("..");
    let (a, b) = (it.next()?, it.next()?);
    let step: i64 = it.next().map_or(Ok(1), str::parse).ok()?;
    let step = step.unsigned_abs().max(1) as usize;
    if let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>()) {
        let (lo, hi) = (a.min(b), a.max(b));
        let mut v: Vec<String> = (lo..=hi)
            .step_by(step)
            .take(MAX_ALTERNATIVES)
            .map(|n| n.to_string())
            .collect();
        if a > b {
            v.reverse();
        }
        return Some(v);
    }
    let (mut ca, mut cb) = (a.chars(), b.chars());
    match (ca.next(), ca.next(), cb.next(), cb.next()) {
        (Some(a), None, Some(b), None) if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
            let (lo, hi) = (a.min(b), a.max(b));
            Some(
                (lo..=hi)
                    .step_by(step)
                    .take(MAX_ALTERNATIVES)
                    .map(String::from)
                    .collect(),
            )
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The plain-word shortcut gives what the character walk gives, for any word.
        #[test]
        fn plain_words_expand_as_the_walk_does(
            raw in proptest::collection::vec(
                prop_oneof![
                    "[a-c0-2~*?/.=@ -]{0,3}",
                    Just("{a,b}".to_owned()),
                    Just("{1..3}".to_owned()),
                    Just(",".to_owned()),
                    "[{}$'\"`\\\\\t]",
                ],
                0..6,
            ).prop_map(|parts| parts.concat())
        ) {
            let ctx = Context::default();
            let mut subst = |_: &str| String::new();
            let fast = expand(&raw, &ctx, &mut subst);
            let walked = expand_marked(&raw, &ctx, &mut subst);
            prop_assert_eq!(fast, walked);
        }
    }
}
