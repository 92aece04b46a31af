//! A small evaluator of the string expressions inline code builds paths and commands with,
//! in the languages agents write one-liners in (Python, JavaScript, Ruby, Perl, PHP, awk):
//! literals (with f-string, template and `"…$x…"`/`"#{x}"` interpolation), concatenation
//! (`+`, Perl/PHP `.`, Lua `..`, juxtaposition), `%`/`.format`/`sprintf`, `/` on paths, path joins,
//! the home directory's many spellings, variables assigned earlier in the same code,
//! `chdir` then relative names, and the decoders an attacker hides a name behind (base64,
//! hex, reversal, rot13, character codes). What it cannot know it says so: a value is
//! partly known (a prefix) and may have gone through a computation it could not follow.
use base64::Engine as _;

use super::home_paths::{home_sources, user_sources};

/// How deep expressions nest before the rest is taken as unknown.
const MAX_DEPTH: usize = 12;
/// Work (characters looked at, expressions tried) in one piece of code; past it the code
/// is too complex to analyse. Ordinary code costs a few steps per character.
const MAX_STEPS: usize = 1_000_000;
/// Longest value built (longer ones are cut and become partly known).
const MAX_LEN: usize = 8192;

/// What an expression evaluates to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent facts about one value, each read on its own"
)]
pub(super) struct Value {
    /// The text, or the known start of it when `complete` is false. The home directory is
    /// spelled `~`.
    pub text: String,
    pub complete: bool,
    /// Built from the home directory.
    pub home: bool,
    /// Went through a computation that could not be followed (a decoder of an unknown
    /// value, a call of unknown effect on the name).
    pub computed: bool,
    /// Came out of a decoder (base64, hex, …): the text was hidden in the code.
    pub decoded: bool,
    /// A single literal, as written.
    pub literal: bool,
    /// A backtick literal without interpolation: Perl's, Ruby's and PHP's shell command.
    pub shell_literal: bool,
}

impl Value {
    fn text(s: impl Into<String>) -> Self {
        Self {
            text: s.into(),
            complete: true,
            ..Self::default()
        }
    }

    fn home() -> Self {
        Self {
            home: true,
            ..Self::text("~")
        }
    }

    fn unknown(computed: bool) -> Self {
        Self {
            computed,
            ..Self::default()
        }
    }

    /// `self` followed by `other`.
    fn concat(mut self, other: &Self) -> Self {
        self.literal = false;
        self.home |= other.home;
        self.computed |= other.computed;
        self.decoded |= other.decoded;
        if !self.complete {
            return self;
        }
        self.text.push_str(&other.text);
        self.complete = other.complete;
        if self.text.len() > MAX_LEN {
            let mut cut = MAX_LEN;
            while !self.text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.truncate(cut);
            self.complete = false;
        }
        self
    }

    /// `self` and `other` joined as path names.
    fn join(self, other: &Self) -> Self {
        if !self.complete || self.text.is_empty() || self.text.ends_with('/') {
            return self.concat(other);
        }
        self.concat(&Self::text("/")).concat(other)
    }

    /// The same value with its known text transformed (a decoder); an unknown value stays
    /// unknown and is now computed.
    fn map(mut self, f: impl FnOnce(&str) -> Option<String>) -> Self {
        self.literal = false;
        if let Some(t) = f(&self.text).filter(|_| self.complete) {
            self.text = t;
            self.decoded = true;
        } else {
            self.text.clear();
            self.complete = false;
            self.computed = true;
        }
        self
    }
}

/// A value the code builds, where it stands, and what it was given to.
#[derive(Clone, Debug)]
pub(super) struct Site {
    pub start: usize,
    pub end: usize,
    pub value: Value,
    /// The argument list of a call that runs a command (`subprocess.run([…])`,
    /// `spawn("rm", ["-rf", …])`, Ruby `system("rm", …)`), as argv.
    pub argv: Option<Vec<Value>>,
    /// The working directory the code set with `chdir` before this point.
    pub cwd: Option<Value>,
    /// The value was given to a `chdir` call.
    pub chdir: bool,
    /// The value (or `argv`) is a command that a call runs.
    pub runs: bool,
}

/// Every maximal value-building expression of `code`, in order, with `vars` (name, value)
/// known at the start (awk's `-v name=value`); `None` when the code is too complex to
/// analyse within the work limit.
pub(super) fn sites(code: &str, vars: &[(String, String)]) -> Option<Vec<Site>> {
    let mut p = Parser::new(code);
    p.vars = vars
        .iter()
        .map(|(k, v)| (k.clone(), Value::text(v.clone())))
        .collect();
    p.scan();
    (p.steps <= MAX_STEPS).then_some(p.sites)
}

/// Calls whose arguments are a command's argv (or, as a single string, a shell line); with
/// [`PATH_THEN_ARGV0`], those that take the program's path first.
const ARGV_CALLS: &[&str] = &[
    "system",
    "run",
    "call",
    "check_call",
    "check_output",
    "Popen",
    "spawn",
    "spawnSync",
    "execFile",
    "execFileSync",
    "create_subprocess_shell",
    "create_subprocess_exec",
    "execa",
    "execaSync",
    "capture2",
    "capture3",
    "popen",
    "proc_open",
    "Command",
];

/// Calls given the program's path and then its whole argv, `argv[0]` included (Python's
/// `os.exec*` and `os.spawn*`, `posix_spawn`).
const PATH_THEN_ARGV0: &[&str] = &[
    "execv",
    "execvp",
    "execve",
    "execl",
    "execlp",
    "execle",
    "execvpe",
    "spawnl",
    "spawnlp",
    "spawnve",
    "spawnvpe",
    "spawnv",
    "spawnvp",
    "posix_spawn",
    "posix_spawnp",
];

/// Names taken as identifiers in the code (Perl/PHP `$x` included).
fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$' || b == b'@'
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

struct Parser<'c> {
    code: &'c str,
    b: &'c [u8],
    pos: usize,
    vars: Vec<(String, Value)>,
    /// Where the home directory's spellings are, as (start, end), in order.
    homes: Vec<(usize, usize)>,
    /// Where the user's name is spelled, as (start, end), in order.
    users: Vec<(usize, usize)>,
    sites: Vec<Site>,
    cwd: Option<Value>,
    steps: usize,
    depth: usize,
}

impl<'c> Parser<'c> {
    fn new(code: &'c str) -> Self {
        Self {
            code,
            b: code.as_bytes(),
            pos: 0,
            vars: Vec::new(),
            homes: home_sources(code),
            users: user_sources(code),
            sites: Vec::new(),
            cwd: None,
            steps: 0,
            depth: 0,
        }
    }

    /// A parser of a piece of `self`'s code (an interpolation), sharing its variables.
    fn sub<'s>(&self, code: &'s str) -> Parser<'s> {
        let mut p = Parser::new(code);
        p.vars.clone_from(&self.vars);
        p.depth = self.depth + 1;
        p.steps = self.steps;
        p
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Whether a string literal starts after `skip` bytes and any blanks.
    fn string_follows(&self, skip: usize) -> bool {
        self.b
            .get(self.pos + skip..)
            .and_then(|rest| rest.iter().find(|c| !matches!(c, b' ' | b'\t')))
            .is_some_and(|c| matches!(c, b'"' | b'\''))
    }

    fn at(&self, s: &str) -> bool {
        self.b
            .get(self.pos..)
            .is_some_and(|r| r.starts_with(s.as_bytes()))
    }

    /// Counts one character looked at; true once the work limit is passed.
    fn tick(&mut self) -> bool {
        self.steps += 1;
        self.steps > MAX_STEPS
    }

    fn spent(&mut self) -> bool {
        self.steps += 1;
        self.steps > MAX_STEPS || self.depth > MAX_DEPTH
    }

    /// Skips spaces and tabs; newlines too when `lines`.
    fn skip_ws(&mut self, lines: bool) {
        while let Some(c) = self.peek() {
            if c == b' ' || c == b'\t' || (lines && (c == b'\n' || c == b'\r')) {
                self.pos += 1;
            } else if c == b'\\' && self.b.get(self.pos + 1) == Some(&b'\n') {
                self.pos += 2;
            } else {
                break;
            }
        }
    }

    /// The whole code: every expression that builds a value, assignments remembered.
    fn scan(&mut self) {
        while let Some(c) = self.peek() {
            if self.spent() {
                return;
            }
            let prev_ident = self.pos > 0 && self.b.get(self.pos - 1).is_some_and(|p| is_ident(*p));
            if !prev_ident && (self.at("qx") || self.at("%x")) {
                let start = self.pos;
                if let Some(value) = self.quoted_command() {
                    self.sites.push(Site {
                        start,
                        end: self.pos,
                        value,
                        argv: None,
                        cwd: self.cwd.clone(),
                        chdir: false,
                        runs: true,
                    });
                    continue;
                }
                self.pos = start;
            }
            if (is_ident_start(c) && !prev_ident)
                || matches!(c, b'\'' | b'"' | b'`')
                || self.home_here().is_some()
            {
                let start = self.pos;
                if self.assignment() {
                    continue;
                }
                self.pos = start;
                if let Some(site) = self.call_site() {
                    self.sites.push(site);
                    continue;
                }
                self.pos = start;
                if let Some(value) = self.expr() {
                    self.push(start, value);
                    continue;
                }
                self.pos = start;
                self.skip_ident();
                if self.pos == start {
                    self.pos += 1;
                }
                continue;
            }
            if c == b'[' {
                // A list in statement position (`[os.remove(f) for f in glob(…)]`, a list
                // comprehension run for its effects): its value, and then, when that was not
                // all known, the calls inside it, which the value does not show.
                let start = self.pos;
                if let Some(value) = self.expr() {
                    let opaque = !value.complete || value.text.is_empty();
                    self.push(start, value);
                    if opaque {
                        self.pos = start + 1;
                    }
                    continue;
                }
                self.pos = start;
                if let Some(items) = self.list() {
                    let opaque = items.iter().any(|v| !v.complete || v.text.is_empty());
                    for v in items {
                        self.push(start, v);
                    }
                    if opaque {
                        self.pos = start + 1;
                    }
                    continue;
                }
                self.pos = start + 1;
                continue;
            }
            self.pos += utf8_len(c);
        }
    }

    fn push(&mut self, start: usize, value: Value) {
        let start = receiver_start(self.b, start);
        let chdir = self.before_is_chdir(start);
        let mut value = value;
        if !chdir {
            value = self.in_cwd(value);
        }
        self.sites.push(Site {
            start,
            end: self.pos,
            value: value.clone(),
            argv: None,
            cwd: self.cwd.clone(),
            chdir,
            runs: false,
        });
        if chdir {
            self.cwd = Some(self.in_cwd(value));
        }
    }

    /// A relative name after a `chdir` is under the directory it went to.
    fn in_cwd(&self, value: Value) -> Value {
        match &self.cwd {
            Some(dir)
                if value.complete
                    && !value.text.is_empty()
                    && !value.text.starts_with(['/', '~', '$'])
                    && !value.text.contains("://")
                    && !value.text.contains(char::is_whitespace) =>
            {
                dir.clone().join(&value)
            }
            _ => value,
        }
    }

    fn before_is_chdir(&self, start: usize) -> bool {
        let before = self.code.get(..start).unwrap_or("").trim_end();
        before.ends_with("chdir(") || before.ends_with("chdir") || before.ends_with("cd(")
    }

    /// `NAME = EXPR` (with `let`/`const`/`var`/`my`/`local` before it): the value is
    /// remembered under the name, and it is a site of its own.
    fn assignment(&mut self) -> bool {
        let start = self.pos;
        let Some(name) = self.ident() else {
            return false;
        };
        if matches!(
            name.as_str(),
            "let" | "const" | "var" | "my" | "our" | "local"
        ) {
            self.skip_ws(false);
            let inner = self.pos;
            if self.assignment() {
                return true;
            }
            self.pos = inner;
            return false;
        }
        self.skip_ws(false);
        if self.peek() != Some(b'=') || matches!(self.b.get(self.pos + 1), Some(b'=' | b'>' | b'~'))
        {
            return false;
        }
        self.pos += 1;
        self.skip_ws(false);
        let rhs = self.pos;
        let value = if let Some(site) = self.call_site() {
            let v = site.value.clone();
            self.sites.push(site);
            Some(v)
        } else {
            self.pos = rhs;
            self.expr()
        };
        self.vars.retain(|(k, _)| *k != name);
        match value {
            Some(v) => {
                self.vars.push((name, v.clone()));
                self.push(rhs, v);
            }
            None => self.pos = rhs.max(start + 1),
        }
        true
    }

    /// An identifier chain (`os.path.join`, `$ENV`, `File::Spec->catfile`).
    fn ident(&mut self) -> Option<String> {
        let start = self.pos;
        self.skip_ident();
        (self.pos > start).then(|| self.code.get(start..self.pos).unwrap_or("").to_owned())
    }

    fn skip_ident(&mut self) {
        loop {
            if !self.peek().is_some_and(is_ident_start) {
                return;
            }
            while self.peek().is_some_and(|c| is_ident(c) || c == b'@') {
                self.pos += 1;
            }
            let save = self.pos;
            let sep = if self.at("::") || self.at("->") {
                2
            } else if self.at(".") {
                1
            } else {
                return;
            };
            self.pos += sep;
            if !self.peek().is_some_and(is_ident_start) {
                self.pos = save;
                return;
            }
        }
    }

    /// A call that runs a command, with its argument list as argv.
    fn call_site(&mut self) -> Option<Site> {
        let start = self.pos;
        let name = self.ident()?;
        let last = name.rsplit(['.', ':', '>']).next().unwrap_or(&name);
        if !(ARGV_CALLS.contains(&last) || PATH_THEN_ARGV0.contains(&last)) {
            return None;
        }
        let args = if self.peek() == Some(b'(') {
            self.pos += 1;
            let mut args = self.args()?;
            // Deno's `new Deno.Command(PROGRAM, {args: [...]})`: the list in the options.
            if last == "Command" {
                let text = self.code.get(start..self.pos).unwrap_or("");
                if let Some(at) = text.find("args:").or_else(|| text.find("args :")) {
                    let rest = text[at + 4..].trim_start_matches([':', ' ']);
                    if let Some(items) = self.sub(rest).list() {
                        args.push(Arg::List(items));
                    }
                }
            }
            args
        } else {
            // Perl's `system qw(cat FILE)`: a list of words with no parentheses around it.
            let save = self.pos;
            self.skip_ws(false);
            let Some(items) = self.qw_list() else {
                self.pos = save;
                return None;
            };
            vec![Arg::List(items)]
        };
        let mut words = Vec::new();
        let mut lists = 0;
        for a in args {
            match a {
                Arg::Value(v) => words.push(v),
                Arg::List(items) => {
                    lists += 1;
                    words.extend(items);
                }
                Arg::Other => {}
            }
        }
        if words.is_empty() {
            return None;
        }
        // `os.execl(PATH, ARG0, …)`, `os.execv(PATH, [ARG0, …])`: the program is the path,
        // and ARG0 only its name as it sees it (`os.execl('/bin/sh', 'sh', '-c', CMD)`).
        if PATH_THEN_ARGV0.contains(&last) && words.len() > 1 {
            words.remove(1);
        }
        let site = Site {
            start,
            end: self.pos,
            value: words.first().cloned().unwrap_or_default(),
            argv: (lists > 0 || words.len() > 1).then_some(words),
            cwd: self.cwd.clone(),
            chdir: false,
            runs: true,
        };
        Some(site)
    }

    /// Arguments up to the closing `)`: values, lists of values, or something else.
    fn args(&mut self) -> Option<Vec<Arg>> {
        let mut out = Vec::new();
        loop {
            self.skip_ws(true);
            match self.peek()? {
                b')' => {
                    self.pos += 1;
                    return Some(out);
                }
                b',' => {
                    self.pos += 1;
                    continue;
                }
                _ => {}
            }
            if self.spent() {
                return None;
            }
            let start = self.pos;
            if let Some(n) = self.integer() {
                out.push(Arg::Value(n));
                continue;
            }
            if self.peek() == Some(b'[') {
                // A method on the list (`[99, 97].pack("c*")`) makes a value of it.
                if let Some(items) = self.list().filter(|_| self.peek() != Some(b'.')) {
                    out.push(Arg::List(items));
                    continue;
                }
                self.pos = start;
            }
            if let Some(items) = self.qw_list() {
                out.push(Arg::List(items));
                continue;
            }
            if let Some(v) = self.expr() {
                self.skip_ws(true);
                if matches!(self.peek(), Some(b',' | b')')) {
                    out.push(Arg::Value(v));
                    continue;
                }
            }
            self.pos = start;
            self.skip_other()?;
            out.push(Arg::Other);
        }
    }

    /// An integer argument standing alone (`fromCharCode(47, 104)`), as its digits.
    fn integer(&mut self) -> Option<Value> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits = self.code.get(start..self.pos).unwrap_or("");
        self.skip_ws(true);
        if !digits.is_empty() && matches!(self.peek(), Some(b',' | b')' | b']')) {
            return Some(Value::text(digits));
        }
        self.pos = start;
        None
    }

    /// Skips one argument that is not a value (`shell=True`, `{recursive: true}`).
    fn skip_other(&mut self) -> Option<()> {
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            if self.tick() {
                return None;
            }
            match c {
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' | b',' if depth == 0 => return Some(()),
                b')' | b']' | b'}' => depth -= 1,
                b'\'' | b'"' | b'`' => {
                    self.string(c)?;
                    continue;
                }
                _ => {}
            }
            self.pos += utf8_len(c);
        }
        None
    }

    /// `[a, b, …]` of values.
    /// Perl's `qw(a b c)` (or `qw[…]`, `qw{…}`, `qw<…>`, `qw/…/`): its words, as written.
    fn qw_list(&mut self) -> Option<Vec<Value>> {
        if !self.at("qw") {
            return None;
        }
        let open = *self.b.get(self.pos + 2)?;
        let close = match open {
            b'(' => b')',
            b'[' => b']',
            b'{' => b'}',
            b'<' => b'>',
            b'/' | b'|' | b'!' => open,
            _ => return None,
        };
        let body_start = self.pos + 3;
        let len = self.b.get(body_start..)?.iter().position(|&c| c == close)?;
        let body = self.code.get(body_start..body_start + len)?;
        self.pos = body_start + len + 1;
        Some(
            body.split_whitespace()
                .map(|w| Value {
                    literal: true,
                    ..Value::text(w)
                })
                .collect(),
        )
    }

    fn list(&mut self) -> Option<Vec<Value>> {
        if self.peek() != Some(b'[') {
            return None;
        }
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws(true);
            match self.peek()? {
                b']' => {
                    self.pos += 1;
                    return Some(items);
                }
                b',' => self.pos += 1,
                _ => {
                    if self.spent() {
                        return None;
                    }
                    match self.integer() {
                        Some(n) => items.push(n),
                        None => items.push(self.expr_or_unknown()?),
                    }
                }
            }
        }
    }

    /// An expression: terms joined by `+`, `.` (Perl, PHP), `/` (paths), `%` (Python's
    /// formatting) or juxtaposition (adjacent literals, awk).
    fn expr(&mut self) -> Option<Value> {
        self.depth += 1;
        let v = self.term().map(|first| self.operators(first));
        self.depth -= 1;
        v
    }

    fn operators(&mut self, mut v: Value) -> Value {
        loop {
            let save = self.pos;
            self.skip_ws(false);
            let c = self.peek();
            let next = self.b.get(self.pos + 1).copied();
            let joined = match (c, next) {
                (Some(b'+'), n) if n != Some(b'=') && n != Some(b'+') => {
                    self.pos += 1;
                    self.operand().map(|o| v.clone().concat(&o))
                }
                (Some(b'.'), Some(n))
                    if matches!(n, b' ' | b'\t' | b'\'' | b'"' | b'$') && !self.at("..") =>
                {
                    self.pos += 1;
                    self.operand().map(|o| v.clone().concat(&o))
                }
                // Julia's `*` joins strings (`homedir() * "/.netrc"`); elsewhere it
                // multiplies, so only a string or the home directory is joined by it.
                (Some(b'*'), n)
                    if !matches!(n, Some(b'*' | b'=')) && (v.home || self.string_follows(1)) =>
                {
                    self.pos += 1;
                    self.operand().map(|o| v.clone().concat(&o))
                }
                // Lua's `..` (not a third dot: `...` is varargs).
                (Some(b'.'), Some(b'.')) if !self.at("...") => {
                    self.pos += 2;
                    self.skip_ws(false);
                    self.operand().map(|o| v.clone().concat(&o))
                }
                (Some(b'/'), n) if !matches!(n, Some(b'/' | b'=' | b'*')) => {
                    self.pos += 1;
                    self.operand().map(|o| v.clone().join(&o))
                }
                (Some(b'%'), n) if n != Some(b'=') => {
                    self.pos += 1;
                    self.percent_args().map(|args| percent(v.clone(), &args))
                }
                (Some(b'\'' | b'"'), _) if self.pos > save => {
                    self.term().map(|o| v.clone().concat(&o))
                }
                (Some(_), _) if self.pos > save && self.home_here().is_some() => {
                    self.term().map(|o| v.clone().concat(&o))
                }
                _ => None,
            };
            match joined {
                Some(j) if !self.spent() => v = j,
                _ => {
                    self.pos = save;
                    return v;
                }
            }
        }
    }

    /// The right side of an operator: a term, or a name of unknown value.
    fn operand(&mut self) -> Option<Value> {
        self.skip_ws(true);
        self.expr_or_unknown_term()
    }

    fn expr_or_unknown_term(&mut self) -> Option<Value> {
        let start = self.pos;
        if let Some(v) = self.term() {
            return Some(v);
        }
        self.pos = start;
        self.unknown_term()
    }

    fn expr_or_unknown(&mut self) -> Option<Value> {
        let start = self.pos;
        if let Some(v) = self.expr() {
            return Some(v);
        }
        self.pos = start;
        let v = self.unknown_term()?;
        Some(self.operators(v))
    }

    /// A name, call or index of unknown value (`name`, `f(x)`, `a[0]`).
    fn unknown_term(&mut self) -> Option<Value> {
        let start = self.pos;
        self.skip_ident();
        if self.pos == start {
            if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
                    self.pos += 1;
                }
                return Some(Value::unknown(false));
            }
            return None;
        }
        let mut computed = false;
        while matches!(self.peek(), Some(b'(' | b'[')) {
            computed |= self.peek() == Some(b'(');
            self.balanced()?;
        }
        Some(Value::unknown(computed))
    }

    /// Skips a bracketed group.
    fn balanced(&mut self) -> Option<()> {
        let open = self.peek()?;
        let close = match open {
            b'(' => b')',
            b'[' => b']',
            b'{' => b'}',
            _ => return None,
        };
        self.pos += 1;
        let mut depth = 1usize;
        while let Some(c) = self.peek() {
            if self.tick() {
                return None;
            }
            if matches!(c, b'\'' | b'"' | b'`') {
                self.string(c)?;
                continue;
            }
            if c == open {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    self.pos += 1;
                    return Some(());
                }
            }
            self.pos += utf8_len(c);
        }
        None
    }

    /// `% x` or `% (x, y)`.
    fn percent_args(&mut self) -> Option<Vec<Value>> {
        self.skip_ws(false);
        if self.peek() == Some(b'(') {
            let start = self.pos;
            self.pos += 1;
            if let Some(args) = self.args() {
                return Some(args.into_iter().map(Arg::value).collect());
            }
            self.pos = start;
        }
        self.expr_or_unknown_term().map(|v| vec![v])
    }

    fn home_here(&self) -> Option<usize> {
        self.homes
            .iter()
            .find(|(s, _)| *s == self.pos)
            .map(|(_, e)| *e)
    }

    /// A primary value and what is applied to it after (`[::-1]`, `.format(…)`, …).
    fn term(&mut self) -> Option<Value> {
        if self.spent() {
            return None;
        }
        let v = self.primary()?;
        Some(self.postfix(v))
    }

    fn primary(&mut self) -> Option<Value> {
        if let Some(end) = self.home_here() {
            self.pos = end;
            return Some(Value::home());
        }
        if let Some(&(_, end)) = self.users.iter().find(|(s, _)| *s == self.pos) {
            // `"/home/" + getuser()`: someone's home, which one is not known here.
            self.pos = end;
            return Some(Value {
                home: true,
                ..Value::unknown(true)
            });
        }
        let c = self.peek()?;
        match c {
            b'\'' | b'"' | b'`' => self.literal(""),
            b'[' => {
                // `["cat", f].join(" ")`: a list joined into one string.
                let start = self.pos;
                let items = self.list()?;
                if self.at(".join(") {
                    self.pos += 6;
                    let args = self.args()?;
                    if let [Arg::Value(sep)] = args.as_slice() {
                        return Some(join_list(&items, sep));
                    }
                } else if self.at(".pack(") {
                    // Ruby's `[99, 97, 116].pack("U*")`: character codes (`U`, `c`, `C`)
                    // are the text; another template decodes in a way not followed here.
                    self.pos += 6;
                    let args = self.args()?;
                    return Some(match args.as_slice() {
                        [Arg::Value(t)] if t.complete && t.text.starts_with(['U', 'c', 'C']) => {
                            char_codes(&items)
                        }
                        _ => Value {
                            decoded: true,
                            ..Value::unknown(true)
                        },
                    });
                }
                self.pos = start;
                None
            }
            b'(' => {
                let start = self.pos;
                self.pos += 1;
                self.skip_ws(true);
                let v = self.expr();
                self.skip_ws(true);
                if v.is_some() && self.peek() == Some(b')') {
                    self.pos += 1;
                    return v;
                }
                self.pos = start;
                None
            }
            c if is_ident_start(c) => {
                let start = self.pos;
                let name = self.ident()?;
                // A string prefix: f"…", r'…', b"…", rb'…'.
                if name.len() <= 2
                    && name.chars().all(|c| "fFrRbBuU".contains(c))
                    && matches!(self.peek(), Some(b'\'' | b'"'))
                {
                    return self.literal(&name.to_ascii_lowercase());
                }
                if self.peek() == Some(b'(') {
                    let call = self.pos;
                    if let Some(v) = self.transform_call(&name) {
                        return Some(v);
                    }
                    // `require("os").homedir()`: a call of unknown value whose method
                    // gives one.
                    self.pos = call;
                    if self.balanced().is_some() && self.at(".") && !self.at("..") {
                        self.pos += 1;
                        if let Some(v) = self.primary() {
                            return Some(v);
                        }
                    }
                    self.pos = start;
                    return None;
                }
                if separator(&name) {
                    return Some(Value::text("/"));
                }
                if name == "Dir.pwd" {
                    return Some(Value::text("."));
                }
                let v = self.var(&name);
                if v.is_none() {
                    self.pos = start;
                }
                v
            }
            _ => None,
        }
    }

    fn var(&self, name: &str) -> Option<Value> {
        let bare = name.trim_start_matches(['$', '@']);
        self.vars
            .iter()
            .rev()
            .find(|(k, _)| k == name || k.trim_start_matches('$') == bare)
            .map(|(_, v)| Value {
                literal: false,
                ..v.clone()
            })
    }

    /// A string literal (`prefix`: Python's `f`, `r`, `b`), interpolation applied.
    fn literal(&mut self, prefix: &str) -> Option<Value> {
        let quote = self.peek()?;
        let start = self.pos;
        // Python's triple quotes.
        let triple = quote != b'`' && self.b.get(self.pos..self.pos + 3) == Some(&[quote; 3][..]);
        let parts = self.string_parts(quote, triple, prefix)?;
        // Backticks run a shell command in Perl, Ruby and PHP (interpolated or not); with
        // `${…}` they are a JavaScript template.
        let template = self
            .code
            .get(start..self.pos)
            .is_some_and(|raw| raw.contains("${"));
        let interpolates = prefix.contains('f') || quote != b'\'';
        let plain = !interpolates || parts.iter().all(|p| matches!(p, Part::Text(_)));
        let mut v = self.fold_parts(parts, interpolates);
        v.literal = plain;
        // Bun's and zx's `$` tag runs its template as a shell command.
        let tagged = start > 0 && self.b.get(start - 1) == Some(&b'$');
        v.shell_literal = quote == b'`' && (!template || tagged);
        Some(v)
    }

    /// Perl's `qx(…)` and Ruby's `%x(…)`: a shell command, interpolated.
    fn quoted_command(&mut self) -> Option<Value> {
        let open = self.b.get(self.pos + 2).copied()?;
        let close = match open {
            b'(' => b')',
            b'{' => b'}',
            b'[' => b']',
            b'<' => b'>',
            b'/' | b'|' | b'!' | b'#' => open,
            _ => return None,
        };
        self.pos += 2;
        let parts = self.string_parts(close, false, "")?;
        Some(self.fold_parts(parts, open != b'\''))
    }

    /// A literal's pieces as one value, interpolations evaluated.
    fn fold_parts(&mut self, parts: Vec<Part>, interpolates: bool) -> Value {
        let mut v = Value::text("");
        for part in parts {
            match part {
                Part::Text(t) => v = v.concat(&Value::text(t)),
                Part::Code(code) if interpolates => {
                    let mut p = self.sub(&code);
                    p.skip_ws(true);
                    let inner = p.expr_or_unknown().unwrap_or_else(|| Value::unknown(false));
                    self.steps = p.steps;
                    v = v.concat(&inner);
                    v.literal = false;
                }
                Part::Var(name) if interpolates => {
                    let inner = self.var(&name).unwrap_or_else(|| Value::unknown(false));
                    v = v.concat(&inner);
                    v.literal = false;
                }
                Part::Code(raw) | Part::Var(raw) => v = v.concat(&Value::text(raw)),
            }
        }
        v
    }

    /// Skips a string literal starting at the quote `quote` (for skipping only).
    fn string(&mut self, quote: u8) -> Option<()> {
        self.string_parts(quote, false, "r").map(|_| ())
    }

    /// A literal's text and interpolations: `{…}` in f-strings, `${…}` in templates and
    /// Perl/PHP strings, `#{…}` in Ruby's, `$name`/`$ENV{…}`/`$_SERVER[…]` in Perl's and
    /// PHP's.
    fn string_parts(&mut self, quote: u8, triple: bool, prefix: &str) -> Option<Vec<Part>> {
        let close_len = if triple { 3 } else { 1 };
        self.pos += close_len;
        let raw = prefix.contains('r');
        let fstring = prefix.contains('f');
        let mut parts = Vec::new();
        let mut text = String::new();
        loop {
            let c = self.peek()?;
            if self.tick() {
                return None;
            }
            if c == quote
                && (!triple || self.b.get(self.pos..self.pos + 3) == Some(&[quote; 3][..]))
            {
                self.pos += close_len;
                break;
            }
            if c == b'\\' && !(raw && quote == b'\'') {
                self.pos += 1;
                let e = self.peek()?;
                self.pos += 1;
                match e {
                    b'n' => text.push('\n'),
                    b't' => text.push('\t'),
                    b'x' => {
                        let hex = self.code.get(self.pos..self.pos + 2).unwrap_or("");
                        if let Ok(n) = u8::from_str_radix(hex, 16) {
                            text.push(char::from(n));
                            self.pos += 2;
                        } else {
                            text.push('x');
                        }
                    }
                    e if e.is_ascii() => text.push(char::from(e)),
                    _ => {
                        self.pos -= 1;
                    }
                }
                continue;
            }
            let interp_open = if fstring && c == b'{' {
                if self.b.get(self.pos + 1) == Some(&b'{') {
                    self.pos += 2;
                    text.push('{');
                    continue;
                }
                Some(1)
            } else if quote != b'\'' && (self.at("${") || self.at("#{")) {
                Some(2)
            } else if quote == b'"' && self.at("{$") {
                Some(1)
            } else {
                None
            };
            if let Some(skip) = interp_open {
                let body_start = self.pos + skip;
                self.pos = body_start - 1;
                self.balanced()?;
                let body = self.code.get(body_start..self.pos - 1).unwrap_or("");
                parts.push(Part::Text(std::mem::take(&mut text)));
                parts.push(Part::Code(body.to_owned()));
                continue;
            }
            if c == b'$' && quote != b'\'' && !fstring {
                if let Some(part) = self.dollar_var() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                    parts.push(part);
                    continue;
                }
            }
            let len = utf8_len(c);
            text.push_str(self.code.get(self.pos..self.pos + len).unwrap_or(""));
            self.pos += len;
        }
        parts.push(Part::Text(text));
        Some(parts)
    }

    /// `$name`, `$ENV{HOME}`, `$_SERVER["HOME"]` inside a double-quoted string.
    fn dollar_var(&mut self) -> Option<Part> {
        let start = self.pos;
        if let Some(end) = self.home_here() {
            self.pos = end;
            return Some(Part::Code(
                self.code.get(start..end).unwrap_or("").to_owned(),
            ));
        }
        self.pos += 1;
        let name_start = self.pos;
        while self.peek().is_some_and(is_ident) {
            self.pos += 1;
        }
        if self.pos == name_start {
            self.pos = start;
            return None;
        }
        let name = self.code.get(start..self.pos).unwrap_or("").to_owned();
        if name == "$HOME" {
            return Some(Part::Code("$HOME".into()));
        }
        Some(Part::Var(name))
    }

    /// `.method(…)`, `[::-1]` and the like after a value.
    fn postfix(&mut self, mut v: Value) -> Value {
        loop {
            if self.spent() {
                return v;
            }
            let save = self.pos;
            if self.at("[::-1]") {
                self.pos += 6;
                v = v.map(|t| Some(t.chars().rev().collect()));
                continue;
            }
            if self.peek() == Some(b'[') {
                if self.balanced().is_none() {
                    self.pos = save;
                    return v;
                }
                v = v.map(|_| None);
                continue;
            }
            if !self.at(".") || self.at("..") {
                return v;
            }
            self.pos += 1;
            let Some(name) = self.ident() else {
                self.pos = save;
                return v;
            };
            let args = if self.peek() == Some(b'(') {
                self.pos += 1;
                let Some(a) = self.args() else {
                    self.pos = save;
                    return v;
                };
                Some(a)
            } else {
                None
            };
            let Some(next) = method(v.clone(), &name, args.as_deref()) else {
                self.pos = save;
                return v;
            };
            v = next;
        }
    }

    /// A call that builds or decodes a value (`os.path.join(…)`, `b64decode(…)`, …).
    fn transform_call(&mut self, name: &str) -> Option<Value> {
        let last = name.rsplit(['.', ':', '>']).next().unwrap_or(name);
        // The working directory (`os.getcwd()`, `process.cwd()`, `Path.cwd()`): the
        // agent's, which relative paths already stand for.
        if working_dir_call(name, last) {
            self.pos += 1;
            self.args()?;
            return Some(Value::text("."));
        }
        // `os.sep.join([…])`: the separator's join of a list.
        if name.strip_suffix(".join").is_some_and(separator) {
            self.pos += 1;
            let args = self.args()?;
            return Some(match args.as_slice() {
                [Arg::List(items)] => join_list(items, &Value::text("/")),
                _ => Value::unknown(true),
            });
        }
        // Python's `map(chr, [99, 97, …])`: the characters of the codes.
        if name == "map"
            && self
                .code
                .get(self.pos + 1..)
                .unwrap_or("")
                .trim_start()
                .starts_with("chr")
        {
            self.pos += 1;
            let raw = self.args()?;
            let codes: Vec<Value> = raw
                .into_iter()
                .skip(1)
                .flat_map(|a| match a {
                    Arg::List(items) => items,
                    other => vec![other.value()],
                })
                .collect();
            return Some(char_codes(&codes));
        }
        let kind = call_kind(name, last)?;
        self.pos += 1;
        let raw = self.args()?;
        // Lists spread, for the calls that take their items (`bytes([47, 101])`,
        // `implode("/", [...])`).
        let spread: Vec<Value> = raw
            .iter()
            .flat_map(|a| match a {
                Arg::List(items) => items.clone(),
                other => vec![other.clone().value()],
            })
            .collect();
        let args: Vec<Value> = raw.into_iter().map(Arg::value).collect();
        let first = args
            .first()
            .cloned()
            .unwrap_or_else(|| Value::unknown(false));
        let second = args.get(1).map(|a| a.text.to_ascii_lowercase());
        // `parts.join("/")` on something unknown is an array's join, not a path join.
        let array_join = last == "join"
            && !(name == "join" || name.ends_with("path.join") || name.ends_with("File.join"))
            && args.len() < 2;
        let perl_join = name == "join"
            && first.complete
            && first.text.len() <= 1
            && args
                .get(1)
                .is_some_and(|a| a.home || a.text.starts_with(['/', '~']) || first.text.is_empty());
        Some(match kind {
            Call::Join if array_join => Value::unknown(true),
            Call::Join if perl_join => implode(&args),
            Call::Join => args.iter().skip(1).fold(first.clone(), Value::join),
            Call::Same => first,
            Call::ExpandPath => match args.get(1) {
                Some(dir) => dir.clone().join(&first),
                None => first,
            },
            Call::Implode => implode(&spread),
            Call::Base64 => first.map(base64_text),
            Call::Hex => first.map(hex_text),
            Call::Reverse => first.map(|t| Some(t.chars().rev().collect())),
            Call::Rot13 => first.map(|t| Some(rot13(t))),
            Call::Codecs => match second.as_deref() {
                Some("rot13" | "rot_13") => first.map(|t| Some(rot13(t))),
                Some("hex") => first.map(hex_text),
                Some("base64") => first.map(base64_text),
                _ => first.map(|_| None),
            },
            Call::Buffer => match second.as_deref() {
                Some("base64" | "base64url") => first.map(base64_text),
                Some("hex") => first.map(hex_text),
                _ => first,
            },
            Call::CharCodes => char_codes(&spread),
            Call::Sprintf => percent(first, args.get(1..).unwrap_or(&[])),
            Call::Pack if first.complete && first.text.starts_with('H') => args
                .get(1)
                .cloned()
                .unwrap_or_else(|| Value::unknown(true))
                .map(hex_text),
            Call::Pack | Call::Decoded => Value {
                decoded: true,
                ..Value::unknown(true)
            },
            Call::Computed => Value::unknown(true),
        })
    }
}

/// The path separator's constant in the languages read here.
fn separator(name: &str) -> bool {
    matches!(
        name,
        "os.sep" | "path.sep" | "File::SEPARATOR" | "DIRECTORY_SEPARATOR" | "os.path.sep"
    )
}

/// Calls that give the process's working directory.
fn working_dir_call(name: &str, last: &str) -> bool {
    matches!(last, "getcwd" | "getcwdb" | "cwd")
        && matches!(
            name,
            "os.getcwd"
                | "os.getcwdb"
                | "getcwd"
                | "process.cwd"
                | "Path.cwd"
                | "pathlib.Path.cwd"
                | "Cwd::cwd"
                | "Cwd::getcwd"
                | "cwd"
                | "Deno.cwd"
        )
}

/// What a known call does to its arguments.
#[derive(Clone, Copy)]
enum Call {
    Join,
    Same,
    Base64,
    Hex,
    Reverse,
    Rot13,
    Codecs,
    Buffer,
    CharCodes,
    Sprintf,
    /// Ruby's `File.expand_path(name, dir)`.
    ExpandPath,
    /// PHP's `implode(sep, list)`, Perl's `join(SEP, LIST)`.
    Implode,
    /// Perl's `pack(TEMPLATE, …)`: `H*` is hex.
    Pack,
    /// Decodes its argument in a way not followed here (`decompress`, `unpack`): a value
    /// that is code hidden from the reading when it is run.
    Decoded,
    /// Computes something from its arguments that is not followed here.
    Computed,
}

fn call_kind(name: &str, last: &str) -> Option<Call> {
    Some(match last {
        "join" | "joinpath" | "catfile" | "catdir" | "resolve" | "abspath" | "realpath"
        | "normpath" | "normalize" | "realpathSync" | "Path" | "PurePath" | "PosixPath"
        | "Pathname" => Call::Join,
        // R's `file.path(…)` and `path.expand(…)`.
        "path" if name.ends_with("file.path") => Call::Join,
        "expand" if name.ends_with("path.expand") => Call::Same,
        "expand_path" | "absolute_path" => Call::ExpandPath,
        "expanduser" | "expandvars" | "str" | "String" | "fspath" | "new" | "strval" | "URL"
        | "normcase" => Call::Same,
        "implode" => Call::Implode,
        "b64decode" | "standard_b64decode" | "urlsafe_b64decode" | "decodebytes"
        | "decodestring" | "a2b_base64" | "atob" | "base64_decode" | "decode_base64"
        | "decode64" | "strict_decode64" | "urlsafe_decode64" => Call::Base64,
        "fromhex" | "unhexlify" | "a2b_hex" | "hex2bin" => Call::Hex,
        "strrev" | "reverse" => Call::Reverse,
        "str_rot13" => Call::Rot13,
        "decode" | "encode"
            if name.ends_with("codecs.decode") || name.ends_with("codecs.encode") =>
        {
            Call::Codecs
        }
        "from" if name.ends_with("Buffer.from") => Call::Buffer,
        "chr" | "fromCharCode" | "fromCodePoint" | "bytes" | "bytearray" => Call::CharCodes,
        "sprintf" | "format" if name == last || name.ends_with("String.format") => Call::Sprintf,
        "pack" => Call::Pack,
        "unescape" | "decodeURIComponent" | "decodeURI" | "unpack" | "unpack1" | "decompress"
        | "b32decode" | "b85decode" | "a85decode" | "fromBase64" | "urlsafe_b64decode_" => {
            Call::Decoded
        }
        "translate" | "maketrans" | "loads" | "gsub" | "tr" => Call::Computed,
        _ => return None,
    })
}

/// A method applied to a value, or None when it is not one that builds values.
fn method(v: Value, name: &str, args: Option<&[Arg]>) -> Option<Value> {
    let arg = |i: usize| -> Option<&Value> {
        match args?.get(i)? {
            Arg::Value(v) => Some(v),
            _ => None,
        }
    };
    Some(match name {
        "decode" | "encode" | "toString" | "to_s" | "strip" | "trim" | "expanduser" | "resolve"
        | "absolute" | "as_posix" | "chomp" | "to_path" | "normalize" | "expand_path"
        | "realpath" | "rstrip" | "lstrip" | "trimEnd" | "trimStart" => Value {
            literal: false,
            ..v
        },
        "reverse" => v.map(|t| Some(t.chars().rev().collect())),
        "split" if arg(0).is_some_and(|a| a.complete && a.text.is_empty()) => Value {
            literal: false,
            ..v
        },
        "join" => match args {
            Some([Arg::List(items)]) => join_list(items, &v),
            // `''.join(text)`: a string's characters joined with nothing are the string.
            Some([Arg::Value(a)]) if v.complete && v.text.is_empty() && a.complete => a.clone(),
            Some([Arg::Value(a)]) if a.complete && a.text.is_empty() => Value {
                literal: false,
                ..v
            },
            // Ruby's `Pathname#join`, a path's join.
            Some([Arg::Value(a)]) if v.home || v.text.starts_with(['/', '~']) => v.join(a),
            _ => Value::unknown(true),
        },
        "joinpath" | "join_path" => args
            .unwrap_or(&[])
            .iter()
            .fold(v, |acc, a| acc.join(&a.clone().value())),
        "format" => percent_braces(v, args.unwrap_or(&[])),
        "replace" | "replaceAll" | "sub" | "gsub" => match (arg(0), arg(1)) {
            (Some(a), Some(b)) if a.complete && b.complete && !a.text.is_empty() => {
                let (from, to) = (a.text.clone(), b.text.clone());
                let mut out = v.map(|t| Some(t.replace(&from, &to)));
                out.decoded = false;
                out.home |= a.home || b.home;
                out
            }
            _ => v.map(|_| None),
        },
        "dir" | "pw_dir" | "homedir" if v.home => v,
        _ => return None,
    })
}

/// `implode(sep, [a, b])` / `join(SEP, a, b)`: the rest joined with the first.
fn implode(args: &[Value]) -> Value {
    match args.split_first() {
        Some((sep, rest)) => join_list(rest, sep),
        None => Value::unknown(false),
    }
}

/// The items of a list joined with `sep` (Python's `sep.join([…])`, JavaScript's
/// `[…].join(sep)`).
fn join_list(items: &[Value], sep: &Value) -> Value {
    let mut out = Value::text("");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out = out.concat(sep);
        }
        out = out.concat(item);
    }
    if !sep.complete {
        out = out.map(|_| None);
    }
    out
}

/// One argument of a call.
#[derive(Clone, Debug)]
enum Arg {
    Value(Value),
    List(Vec<Value>),
    Other,
}

impl Arg {
    fn value(self) -> Value {
        match self {
            Self::Value(v) => v,
            Self::List(_) | Self::Other => Value::unknown(false),
        }
    }
}

/// A piece of a string literal.
enum Part {
    Text(String),
    /// An interpolated expression.
    Code(String),
    /// An interpolated variable (`$name`).
    Var(String),
}

/// `'%s/x' % a`, `sprintf("%s/x", a)`: each `%s` (`%d`, `%r`) takes the next argument.
fn percent(fmt: Value, args: &[Value]) -> Value {
    if !fmt.complete {
        return fmt;
    }
    let mut out = Value {
        home: fmt.home,
        computed: fmt.computed,
        ..Value::text("")
    };
    let mut args = args.iter();
    let mut chars = fmt.text.chars().peekable();
    let mut text = String::new();
    while let Some(c) = chars.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        match chars.next() {
            Some('%') | None => text.push('%'),
            Some('s' | 'd' | 'r' | 'i' | 'v') => {
                out = out.concat(&Value::text(std::mem::take(&mut text)));
                out = out.concat(args.next().unwrap_or(&Value::unknown(false)));
            }
            Some(other) => {
                text.push('%');
                text.push(other);
            }
        }
    }
    out.concat(&Value::text(text))
}

/// `'{}/x'.format(a)`, `'{0}/{1}'.format(a, b)`.
fn percent_braces(fmt: Value, args: &[Arg]) -> Value {
    if !fmt.complete {
        return fmt;
    }
    let values: Vec<Value> = args.iter().cloned().map(Arg::value).collect();
    let mut out = Value {
        home: fmt.home,
        ..Value::text("")
    };
    let mut next = 0usize;
    let mut rest = fmt.text.as_str();
    while let Some(open) = rest.find('{') {
        out = out.concat(&Value::text(rest.get(..open).unwrap_or("")));
        let after = rest.get(open + 1..).unwrap_or("");
        if let Some(tail) = after.strip_prefix('{') {
            out = out.concat(&Value::text("{"));
            rest = tail;
            continue;
        }
        let Some(close) = after.find('}') else {
            rest = "";
            break;
        };
        let field = after.get(..close).unwrap_or("");
        let index = field.split([':', '!']).next().unwrap_or("");
        let value = if index.is_empty() {
            next += 1;
            values.get(next - 1)
        } else {
            index.parse::<usize>().ok().and_then(|i| values.get(i))
        };
        out = out.concat(value.unwrap_or(&Value::unknown(false)));
        rest = after.get(close + 1..).unwrap_or("");
    }
    out.concat(&Value::text(rest.replace("}}", "}")))
}

fn char_codes(args: &[Value]) -> Value {
    let mut out = String::new();
    for a in args {
        match a.text.trim().parse::<u32>().ok().and_then(char::from_u32) {
            Some(c) if a.complete => out.push(c),
            _ => return Value::unknown(true),
        }
    }
    Value {
        decoded: true,
        ..Value::text(out)
    }
}

fn base64_text(s: &str) -> Option<String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let s = s.trim();
    let bytes = STANDARD
        .decode(s)
        .or_else(|_| STANDARD_NO_PAD.decode(s))
        .or_else(|_| URL_SAFE.decode(s))
        .or_else(|_| URL_SAFE_NO_PAD.decode(s))
        .ok()?;
    String::from_utf8(bytes).ok()
}

fn hex_text(s: &str) -> Option<String> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = digits
        .chunks_exact(2)
        .map(|p| {
            let hi = char::from(p[0]).to_digit(16)?;
            let lo = char::from(p[1]).to_digit(16)?;
            u8::try_from(hi * 16 + lo).ok()
        })
        .collect();
    String::from_utf8(bytes?).ok()
}

fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='m' | 'A'..='M' => char::from_u32(u32::from(c) + 13).unwrap_or(c),
            'n'..='z' | 'N'..='Z' => char::from_u32(u32::from(c) - 13).unwrap_or(c),
            _ => c,
        })
        .collect()
}

/// Where the receiver of a method call ending at `pos` starts (`require("os").homedir()`
/// → at `require`), so that the call around the whole expression is what comes before it.
fn receiver_start(b: &[u8], mut pos: usize) -> usize {
    for _ in 0..16 {
        if pos == 0 || b.get(pos - 1) != Some(&b'.') {
            return pos;
        }
        let mut p = pos - 1;
        if p > 0 && b.get(p - 1) == Some(&b')') {
            let mut depth = 0usize;
            loop {
                if p == 0 {
                    return pos;
                }
                p -= 1;
                match b.get(p) {
                    Some(b')') => depth += 1,
                    Some(b'(') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
            }
        }
        let end = p;
        while p > 0 && b.get(p - 1).is_some_and(|c| is_ident(*c)) {
            p -= 1;
        }
        if p == end {
            return pos;
        }
        pos = p;
    }
    pos
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xf0.. => 4,
        0xe0.. => 3,
        0xc0.. => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The values `code` builds, as `text` (complete) or `text…` (partly known), with
    /// `?` for a computation that could not be followed.
    fn values(code: &str) -> Vec<String> {
        sites(code, &[("f".into(), "/etc/hosts".into())])
            .unwrap_or_default()
            .into_iter()
            .filter(|s| !s.value.text.is_empty() || !s.value.complete)
            .map(|s| {
                let v = s.value;
                let mut t = v.text;
                if !v.complete {
                    t.push('…');
                }
                if v.computed {
                    t.push('?');
                }
                t
            })
            .collect()
    }

    fn has(code: &str, want: &str) {
        let got = values(code);
        assert!(got.iter().any(|v| v == want), "{code}: {got:?}");
    }

    #[test]
    fn calls_inside_a_list_in_statement_position() {
        has(
            "[print(open('/home/alice/.ssh/id_rsa').read())]",
            "/home/alice/.ssh/id_rsa",
        );
        has(
            "import glob,os; [os.remove(f) for f in glob.glob('/home/alice/.ssh/*')]",
            "/home/alice/.ssh/*",
        );
        has("[x for x in [os.path.expanduser('~')]]", "~");
        // Deep nesting ends within the work limit (a value, or the limit's `None`).
        let deep = format!("{}open('/x'){}", "[".repeat(3000), "]".repeat(3000));
        let _ = sites(&deep, &[]);
    }

    #[test]
    fn concatenation_and_formatting() {
        has(
            "open('/home/alice/.a' + 'ws/credentials')",
            "/home/alice/.aws/credentials",
        );
        has(
            "open('/home/alice/.aws/' 'credentials')",
            "/home/alice/.aws/credentials",
        );
        has(
            "open('%s/.aws/%s' % (os.environ['HOME'], 'config'))",
            "~/.aws/config",
        );
        has("open('{}/.netrc'.format(Path.home()))", "~/.netrc");
        has("open('{1}/{0}'.format('.netrc', Path.home()))", "~/.netrc");
        has(r#"open(f"{os.environ['HOME']}/.netrc")"#, "~/.netrc");
        has("readFileSync(`${os.homedir()}/.netrc`)", "~/.netrc");
        has(r##"File.read("#{ENV["HOME"]}/.netrc")"##, "~/.netrc");
        has(r#"open F, "<", "$ENV{HOME}/.netrc""#, "~/.netrc");
        has(
            r#"file_get_contents($_SERVER["HOME"] . "/.netrc")"#,
            "~/.netrc",
        );
        has(r#"sprintf("%s/.netrc", $ENV{HOME})"#, "~/.netrc");
        has(r#"getline l < (ENVIRON["HOME"] "/.netrc")"#, "~/.netrc");
        has(
            "(Path('~').expanduser() / '.aws' / 'credentials')",
            "~/.aws/credentials",
        );
        has(
            "path.join(require('os').homedir(), '.aws', 'credentials')",
            "~/.aws/credentials",
        );
        has(
            "['cat', os.homedir() + '/.netrc'].join(' ')",
            "cat ~/.netrc",
        );
    }

    #[test]
    fn variables_and_chdir() {
        has("h = os.environ['HOME']\nopen(h + '/.netrc')", "~/.netrc");
        has("my $h = $ENV{HOME}; open(F, \"$h/.netrc\")", "~/.netrc");
        has(
            "const h = require('os').homedir(); fs.readFileSync(h + '/.netrc')",
            "~/.netrc",
        );
        has("getline l < f", "/etc/hosts");
        has("os.chdir('/srv'); open('data.db')", "/srv/data.db");
        has(
            "Dir.chdir(Dir.home + '/.aws'); File.read('credentials')",
            "~/.aws/credentials",
        );
    }

    #[test]
    fn decoders() {
        has("open('crten./ecila/emoh/'[::-1])", "/home/alice/.netrc");
        has(
            "b64decode('L2hvbWUvYWxpY2UvLm5ldHJj').decode()",
            "/home/alice/.netrc",
        );
        has(
            "bytes.fromhex('2f6574632f686f737473').decode()",
            "/etc/hosts",
        );
        has(
            "Buffer.from('2f6574632f686f737473', 'hex').toString()",
            "/etc/hosts",
        );
        has("codecs.decode('/rgp/ubfgf', 'rot13')", "/etc/hosts");
        has("strrev('stsoh/cte/')", "/etc/hosts");
        has("'stsoh/cte/'.split('').reverse().join('')", "/etc/hosts");
        has("String.fromCharCode(47, 101, 116, 99)", "/etc");
        has("''.join(['/et', 'c/hosts'])", "/etc/hosts");
        has("'/x/YY'.replace('YY', 'hosts')", "/x/hosts");
    }

    #[test]
    fn what_is_not_known_is_said_so() {
        has("open(os.path.join(os.environ['HOME'], name))", "~/…");
        has("open(b64decode(sys.argv[1]))", "…?");
        has("open(''.join(map(chr, codes)))", "…?");
        has("open(Dir.home + '/' + ARGV[0])", "~/…");
        assert!(values("print(len(x))").is_empty());
    }

    #[test]
    fn commands_built_as_argv() {
        let s = sites("subprocess.run(['rm', '-rf', '/etc'])", &[]).unwrap_or_default();
        let argv: Vec<String> = s
            .iter()
            .find_map(|s| s.argv.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.text)
            .collect();
        assert_eq!(argv, ["rm", "-rf", "/etc"]);
        let s = sites("os.system('c' + 'at ~/.netrc')", &[]).unwrap_or_default();
        assert!(s.iter().any(|s| s.runs && s.value.text == "cat ~/.netrc"));
    }

    #[test]
    fn deep_or_long_code_stays_bounded() {
        // Quadratic shapes (nested unknown calls, unterminated quotes) hit the work limit
        // rather than running on.
        let nested = "f(".repeat(20_000);
        let start = std::time::Instant::now();
        let _ = sites(&nested, &[]);
        let quotes = "'a\n".repeat(20_000);
        let _ = sites(&quotes, &[]);
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        // An ordinary script of some size is analysed whole.
        let script =
            "import os\nh = os.environ['HOME']\nprint(open(h + '/x').read())\n".repeat(400);
        assert!(sites(&script, &[]).is_some());
        let deep = format!("{}'a'{}", "(".repeat(5000), ")".repeat(5000));
        let _ = sites(&deep, &[]);
        let long = "'a' + ".repeat(20_000);
        let _ = sites(&long, &[]);
        let interp = format!("f\"{}\"", "{f'".repeat(2000));
        let _ = sites(&interp, &[]);
    }

    proptest! {
        /// Any text: no panic.
        #[test]
        fn never_panics(code in "[ -~\\n]{0,200}") {
            let _ = sites(&code, &[]);
        }

        /// Wrapping a statement in a list (`[STMT]`, a comprehension run for its effects)
        /// never hides a value the statement builds.
        #[test]
        fn a_list_around_a_statement_hides_nothing(
            call in prop_oneof![Just("open"), Just("os.remove"), Just("shutil.rmtree"), Just("print(open")],
            path in prop_oneof![Just("/home/alice/.ssh/id_rsa"), Just("/etc/shadow"), Just("~/.aws/credentials")],
            tail in prop_oneof![Just(""), Just(".read()"), Just(" for _ in range(1)")],
            outer in prop_oneof![Just(""), Just("x = "), Just("print(")],
        ) {
            let close = if call.contains('(') { "))" } else { ")" };
            let stmt = format!("{call}('{path}'{close}{tail}");
            let wrapped = format!("{outer}[{stmt}]{}", if outer == "print(" { ")" } else { "" });
            let got = values(&wrapped);
            prop_assert!(got.iter().any(|v| v == path), "{wrapped}: {got:?}");
        }

        #[test]
        fn never_panics_on_code_like_text(parts in proptest::collection::vec(prop_oneof![
            Just("'"), Just("\""), Just("`"), Just("${"), Just("#{"), Just("{"), Just("}"),
            Just("("), Just(")"), Just("["), Just("]"), Just("."), Just("+"), Just("/"),
            Just("%"), Just(","), Just("os.environ['HOME']"), Just("join("), Just("b64decode("),
            Just("[::-1]"), Just("f'"), Just("$ENV{HOME}"), Just("x = "), Just("chdir("),
            Just("é"), Just("\\"), Just("\n"), Just("a"),
        ], 0..40)) {
            let _ = sites(&parts.concat(), &[]);
        }
    }
}
