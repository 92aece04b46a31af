//! Canonical forms, so that a rule written once matches every spelling of the same thing:
//! Unicode (NFKC, invisible characters stripped), paths (`~`, `$VAR`, `..`, `//`,
//! `file://`, symlinks), hosts (every IPv4 spelling `inet_aton` accepts, IPv4-mapped
//! IPv6, case, trailing dots) and encoded payloads (base64, hex).
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Component, Path, PathBuf};

use crate::host::Host;
use base64::Engine as _;
use unicode_normalization::UnicodeNormalization as _;

use super::operation::Context;

/// Characters that render as nothing (or reorder text) and would let `r\u{200b}m` pass for
/// something other than `rm`.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// NFKC with invisible characters removed: full-width `ｒｍ` becomes `rm`, `r\u{200b}m` too.
#[must_use]
pub fn text(s: &str) -> String {
    if s.is_ascii() {
        return s.to_owned();
    }
    s.chars().filter(|&c| !invisible(c)).nfkc().collect()
}

/// Appends the words of `s` to `out`, one space between them (a command line as rules see
/// it, however it was spaced), without collecting them first.
pub fn push_words(out: &mut String, s: &str) {
    for word in s.split_whitespace() {
        if !out.is_empty() && !out.ends_with(' ') {
            out.push(' ');
        }
        out.push_str(word);
    }
}

/// The words of `s`, one space between them.
#[must_use]
pub fn words(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_words(&mut out, s);
    out
}

/// Expands `$VAR`, `${VAR}` (and `${VAR:-default}`) from the context; unknown variables
/// expand to nothing, as in a shell.
#[must_use]
pub fn expand_vars(s: &str, ctx: &Context) -> String {
    if !s.contains('$') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(braced) = after.strip_prefix('{') {
            if let Some(end) = braced.find('}') {
                let inner = &braced[..end];
                let (name, default) = match inner.split_once(":-").or_else(|| inner.split_once('-'))
                {
                    Some((n, d)) => (n, Some(d)),
                    None => (inner, None),
                };
                match ctx.var(name) {
                    Some(v) if !v.is_empty() => out.push_str(v),
                    _ => out.push_str(default.unwrap_or("")),
                }
                rest = &braced[end + 1..];
                continue;
            }
        }
        let len = after
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(after.len(), |(j, _)| j);
        if len == 0 {
            out.push('$');
        } else {
            out.push_str(ctx.var(&after[..len]).unwrap_or(""));
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex_val(bytes[i + 1]), hex_val(bytes[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_val(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// What follows the scheme of a `file://` URL (the scheme in any case: `FILE://`).
#[must_use]
pub fn file_url_path(raw: &str) -> Option<&str> {
    let scheme = raw.get(..7)?;
    scheme
        .eq_ignore_ascii_case("file://")
        .then(|| raw.get(7..))
        .flatten()
}

/// The absolute, normalised form of a path as an agent wrote it, relative to `ctx`.
/// Returns `None` for an empty path.
#[must_use]
pub fn path(raw: &str, ctx: &Context) -> Option<String> {
    resolve(raw, ctx, true)
}

/// [`path`] for a word the shell analysis already expanded: a `$` left in it is a literal
/// character (`cat '$HOME/x'` reads a directory named `$HOME`), not a variable to expand
/// a second time.
#[must_use]
pub fn shell_path(raw: &str, ctx: &Context) -> Option<String> {
    resolve(raw, ctx, false)
}

fn resolve(raw: &str, ctx: &Context, expand: bool) -> Option<String> {
    let raw = text(raw.trim());
    let raw = match file_url_path(&raw) {
        // file://host/path: only the local host makes sense; keep the path part.
        Some(rest) => {
            let rest = rest.strip_prefix("localhost").unwrap_or(rest);
            let rest = rest.split(['?', '#']).next().unwrap_or(rest);
            percent_decode(rest)
        }
        None => raw,
    };
    let raw = if expand { expand_vars(&raw, ctx) } else { raw };
    if raw.is_empty() {
        return None;
    }
    let home = if ctx.home.is_empty() { "/" } else { &ctx.home };
    // `~+` is the working directory, `~-` the previous one (unknown without `cd` before);
    // `~N`, `~+N` and `~-N` are entries of the directory stack `pushd` built.
    let tilde_dir = |t: &str| match t {
        "~+" => Some(ctx.cwd.clone()),
        "~-" => Some(ctx.var("OLDPWD").unwrap_or("/**").to_owned()),
        _ => stack_entry(t, ctx),
    };
    let (head, tail) = raw.split_once('/').unwrap_or((raw.as_str(), ""));
    let joined = if let Some(dir) = tilde_dir(head) {
        format!("{dir}/{tail}")
    } else if raw == "~" {
        home.to_owned()
    } else if let Some(rest) = raw.strip_prefix("~/") {
        format!("{home}/{rest}")
    } else if let Some(named) = raw.strip_prefix('~') {
        // ~user/…: the user's home, which on this machine lives next to ours.
        let (user, rest) = named.split_once('/').unwrap_or((named, ""));
        let parent = Path::new(home)
            .parent()
            .map_or("/home".into(), |p| p.display().to_string());
        let base = if user == "root" {
            "/root".to_owned()
        } else {
            format!("{parent}/{user}")
        };
        format!("{base}/{rest}")
    } else if raw.starts_with('/') {
        raw
    } else {
        let cwd = if ctx.cwd.is_empty() { "/" } else { &ctx.cwd };
        let mut joined = String::with_capacity(cwd.len() + 1 + raw.len());
        joined.push_str(cwd);
        joined.push('/');
        joined.push_str(&raw);
        joined
    };
    if joined.contains("/proc/") || joined.contains("/dev/fd/") {
        let (seen, literal) = as_agent_sees(&joined, ctx);
        // A link of /proc left as written (`/proc/self/fd/3`) would resolve against the
        // checker's own process, not the agent's.
        return Some(match &ctx.host {
            Some(host) if !literal => resolve_symlinks(&**host, &seen),
            _ => seen,
        });
    }
    let lexical = lexical(&joined);
    Some(match &ctx.host {
        Some(host) => resolve_symlinks(&**host, &lexical),
        None => lexical,
    })
}

/// `~N`, `~+N` (the Nth directory of `dirs`, 0 the working one) and `~-N` (counted from
/// the bottom); an entry the stack does not hold is not known.
fn stack_entry(tilde: &str, ctx: &Context) -> Option<String> {
    let spec = tilde.strip_prefix('~')?;
    let (from_bottom, digits) = match spec.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, spec.strip_prefix('+').unwrap_or(spec)),
    };
    let n: usize = digits.parse().ok().filter(|_| !digits.is_empty())?;
    // `pushd` keeps the stack newest first, one directory a line (see shell/commands.rs).
    let mut dirs = vec![ctx.cwd.as_str()];
    dirs.extend(
        ctx.var("DIRSTACK")
            .unwrap_or("")
            .lines()
            .filter(|l| !l.is_empty()),
    );
    let index = if from_bottom {
        dirs.len().checked_sub(n + 1)
    } else {
        Some(n)
    };
    Some(
        index
            .and_then(|i| dirs.get(i))
            .map_or("/**", |d| *d)
            .to_owned(),
    )
}

/// What a number the shell could not know stands for at a place of /proc that takes one:
/// `/proc/$BASHPID/root/…` and `/proc/$(pgrep bash)/cwd/…` reach here as `/proc//root/…`.
const SOME_NUMBER: &str = "[0-9]*";

/// Which process a `/proc/WHO` (or `/proc/PID/task/WHO`) component names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Process {
    /// `self`, `thread-self`: the agent's own process.
    Own,
    /// A number: some process, perhaps another one.
    Other,
    /// A pattern or a number not known (`*`, `[0-9]*`): any process, the agent's included.
    Unknown,
}

fn process(who: &str) -> Option<Process> {
    match who {
        "self" | "thread-self" => Some(Process::Own),
        _ if !who.is_empty() && who.bytes().all(|b| b.is_ascii_digit()) => Some(Process::Other),
        _ if who.contains(['*', '?', '[']) => Some(Process::Unknown),
        _ => None,
    }
}

/// [`lexical`] for a path through /proc (or /dev/fd), with the process links followed as the
/// agent's process sees them, before any `..` after them: `/proc/self/cwd` (and
/// `thread-self`, and a thread's `task/TID`) is the agent's working directory,
/// `/proc/PID/root` the root (sessions cannot chroot), another process's `cwd` an unknown
/// directory (`**`, which patterns are matched against as a glob), `fd/N` the path the
/// shell opened as descriptor N, or an unknown directory. Links a path only names (`exe`,
/// `fd/N` with nothing below it) are kept as written; the flag says so.
fn as_agent_sees<'a>(path: &'a str, ctx: &'a Context) -> (String, bool) {
    let mut parts: Vec<&str> = Vec::new();
    let mut literal = false;
    let components: Vec<&str> = path.split('/').collect();
    let last_named = components
        .iter()
        .rposition(|p| !matches!(*p, "" | "."))
        .unwrap_or(0);
    for (i, &part) in components.iter().enumerate() {
        // Whether the path goes on below this component (a link ending the path is named,
        // not followed).
        let below = i < last_named;
        let part = if part.is_empty() && below && takes_number(&parts) {
            SOME_NUMBER
        } else {
            part
        };
        match part {
            "" | "." => {}
            // The parent of an unknown directory is unknown too.
            ".." if parts.last() == Some(&"**") => {}
            ".." => {
                parts.pop();
            }
            p => {
                parts.push(p);
                if let Some(named) = follow(&mut parts, below, ctx) {
                    literal = named;
                }
            }
        }
    }
    (absolute(&parts, path.len()), literal)
}

/// Places of /proc where a number stands: a process, a thread, a descriptor.
fn takes_number(parts: &[&str]) -> bool {
    match parts {
        ["proc"] | ["dev", "fd"] => true,
        ["proc", who, "task" | "fd"] => process(who).is_some(),
        ["proc", who, "task", tid, "fd"] => thread(who, tid).is_some(),
        _ => false,
    }
}

/// Who `/proc/WHO/task/TID` is: a thread's links are its process's, and the agent's own
/// threads are the agent. A TID of `self` is the shell's own PID (`task/$$`, which the walk
/// expands to `self`): its main thread.
fn thread(who: &str, tid: &str) -> Option<Process> {
    let whose = process(who)?;
    let thread = process(tid)?;
    Some(if whose == Process::Own {
        Process::Own
    } else {
        thread
    })
}

/// The process link `parts` ends with: whose, which link, and the descriptor of `fd/N`.
fn process_link<'a>(parts: &[&'a str]) -> Option<(Process, &'a str, Option<&'a str>)> {
    match *parts {
        ["proc", who, "fd", fd] => Some((process(who)?, "fd", Some(fd))),
        ["proc", who, "task", tid, "fd", fd] => Some((thread(who, tid)?, "fd", Some(fd))),
        ["dev", "fd", fd] => Some((Process::Own, "fd", Some(fd))),
        ["proc", who, link] => Some((process(who)?, link, None)),
        ["proc", who, "task", tid, link] => Some((thread(who, tid)?, link, None)),
        _ => None,
    }
}

/// Follows the process link `parts` ends with, if it is one. Returns whether the path now
/// names a link left as written (`Some(true)`), a place reached through links
/// (`Some(false)`), or nothing changed (`None`).
fn follow<'a>(parts: &mut Vec<&'a str>, below: bool, ctx: &'a Context) -> Option<bool> {
    let (whose, link, fd) = process_link(parts)?;
    if let Some(fd) = fd {
        return below.then(|| descriptor(parts, whose, fd, ctx));
    }
    match (link, whose) {
        // A pattern over processes is followed only into what is below it: listing
        // `/proc/*/cwd` names the links.
        ("root" | "cwd", Process::Unknown) if !below => Some(true),
        ("root", _) => {
            parts.clear();
            Some(false)
        }
        ("cwd", Process::Own) => {
            parts.clear();
            parts.extend(ctx.cwd.split('/').filter(|c| !c.is_empty()));
            Some(false)
        }
        ("cwd", _) => {
            parts.clear();
            parts.push("**");
            Some(false)
        }
        _ => Some(true),
    }
}

/// `fd/N/…`: below the path the agent's shell opened as N (`exec 3< DIR`) when the
/// process may be the agent's own, below an unknown directory otherwise.
fn descriptor<'a>(parts: &mut Vec<&'a str>, whose: Process, fd: &str, ctx: &'a Context) -> bool {
    let opened = ctx.descriptor(fd).filter(|_| whose != Process::Other);
    parts.clear();
    match opened {
        Some(path) => parts.extend(path.split('/').filter(|c| !c.is_empty())),
        None => parts.push("**"),
    }
    false
}

/// Removes `.`, `..` and repeated slashes without touching the filesystem.
#[must_use]
pub fn lexical(path: &str) -> String {
    // Most paths are already in this form.
    if path == "/"
        || (path.starts_with('/')
            && path.as_bytes()[1..]
                .split(|b| *b == b'/')
                .all(|p| !matches!(p, b"" | b"." | b"..")))
    {
        return path.to_owned();
    }
    // One pass into the answer: `..` cuts it back to its last `/` (no list of names).
    let mut out = String::with_capacity(path.len() + 1);
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => out.truncate(out.rfind('/').unwrap_or(0)),
            p => {
                out.push('/');
                out.push_str(p);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// `/a/b` of the names `[a, b]` (`/` of none).
fn absolute(parts: &[&str], capacity: usize) -> String {
    let mut out = String::with_capacity(capacity);
    for p in parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Resolves symlinks in the longest existing prefix of `path` (the rest may not exist yet,
/// e.g. a file about to be written through a symlinked directory).
fn resolve_symlinks(host: &dyn Host, path: &str) -> String {
    let p = Path::new(path);
    let mut existing = p.to_path_buf();
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Some(real) = host.canonicalize(&existing) {
            let mut out: PathBuf = real;
            for t in tail.iter().rev() {
                out.push(t);
            }
            return lexical(&out.to_string_lossy());
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(Component::Normal(name))) => {
                tail.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => return path.to_owned(),
        }
    }
}

/// Parses an IPv4 address in any form `inet_aton` accepts: `a.b.c.d`, `a.b.c`, `a.b`, a
/// single 32-bit number, each part decimal, octal (`0…`) or hex (`0x…`).
#[must_use]
pub fn inet_aton(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut nums = Vec::with_capacity(parts.len());
    for p in &parts {
        let n = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            u32::from_str_radix(h, 16).ok()?
        } else if p.len() > 1 && p.starts_with('0') {
            u32::from_str_radix(&p[1..], 8).ok()?
        } else {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse::<u32>().ok()?
        };
        nums.push(n);
    }
    let (head, last) = nums.split_at(nums.len() - 1);
    if head.iter().any(|&n| n > 255) {
        return None;
    }
    let last_bits = 8 * (4 - head.len() as u32);
    if last_bits < 32 && last[0] >= 1 << last_bits {
        return None;
    }
    let mut v: u32 = 0;
    for (i, &n) in head.iter().enumerate() {
        v |= n << (24 - 8 * i as u32);
    }
    Some(Ipv4Addr::from(v | last[0]))
}

/// A host as rules compare it: IP literals in canonical form (IPv4-mapped IPv6 as IPv4),
/// names lower-case without a trailing dot.
#[must_use]
pub fn host(raw: &str) -> String {
    let h = text(raw.trim()).to_ascii_lowercase();
    let h = h.trim_start_matches('[').trim_end_matches(']');
    let h = h.split('%').next().unwrap_or(h).trim_end_matches('.');
    if let Some(ip) = ip(h) {
        return ip.to_string();
    }
    h.to_owned()
}

/// An IP literal in any spelling, IPv4-mapped IPv6 folded to IPv4.
#[must_use]
pub fn ip(s: &str) -> Option<IpAddr> {
    if let Ok(v6) = s.parse::<Ipv6Addr>() {
        return Some(match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        });
    }
    if s.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
        return inet_aton(s).map(IpAddr::V4);
    }
    None
}

/// Schemes whose URLs WHATWG parsers (browsers, Node's `fetch` and `URL`, which most agents'
/// web tools use) read leniently: any run of `/` and `\\` after `scheme:`, none included,
/// leads to the host, and `\\` ends the host like `/`.
const SPECIAL_SCHEMES: &[&str] = &["http", "https", "ws", "wss", "ftp"];

/// Host and port of a URL (`scheme://[user@]host[:port]/…`, or a bare `host[:port]/…`),
/// read as a WHATWG parser reads it: surrounding control characters and spaces dropped,
/// tabs and newlines inside dropped, and for the special schemes `https:///h`, `https:h`
/// and `https://h\\x` all naming `h`.
#[must_use]
pub fn url(raw: &str) -> Option<(String, Option<u16>)> {
    url_read(raw, true)
}

/// Every host a client may take `raw` to name: [`url`]'s reading, and for the special
/// schemes also curl's, which keeps `\\` in the authority (`https://a.example\\@b.example/`
/// is `a.example` to Node and `b.example` to curl).
#[must_use]
pub fn urls(raw: &str) -> Vec<(String, Option<u16>)> {
    let mut out: Vec<_> = url_read(raw, true).into_iter().collect();
    // The readings differ only where a backslash is, which NFKC can make of other
    // characters (U+FF3C): a plain ASCII text without one is read once.
    if raw.is_ascii() && !raw.contains('\\') {
        return out;
    }
    if let Some(other) = url_read(raw, false) {
        if !out.contains(&other) {
            out.push(other);
        }
    }
    out
}

/// [`url`], with `\\` ending a special URL's host (`backslash_ends`, as WHATWG parsers do)
/// or not (as curl does).
fn url_read(raw: &str, backslash_ends: bool) -> Option<(String, Option<u16>)> {
    let raw: String = text(raw.trim_matches(|c: char| c <= ' '))
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let (scheme, rest) = match raw.split_once("://") {
        Some((s, r)) => (s.to_ascii_lowercase(), r),
        None => match raw.split_once(':') {
            Some((s, r)) if SPECIAL_SCHEMES.contains(&s.to_ascii_lowercase().as_str()) => {
                (s.to_ascii_lowercase(), r)
            }
            _ => (String::new(), raw.as_str()),
        },
    };
    if scheme == "file" {
        return None;
    }
    let special = SPECIAL_SCHEMES.contains(&scheme.as_str());
    let rest = if special {
        rest.trim_start_matches(['/', '\\'])
    } else {
        rest
    };
    let ends: &[char] = if special && backslash_ends {
        &['/', '\\', '?', '#']
    } else {
        &['/', '?', '#']
    };
    let authority = rest.split(ends).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host_part, port) = if let Some(end) = authority.strip_prefix('[').and_then(|a| a.find(']'))
    {
        let h = &authority[1..=end];
        let port = authority[end + 2..]
            .strip_prefix(':')
            .and_then(|p| p.parse().ok());
        (h, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, p.parse().ok()),
            _ => (authority, None),
        }
    };
    if host_part.is_empty() {
        return None;
    }
    let port = port.or(match scheme.as_str() {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        "ftp" => Some(21),
        "ssh" | "sftp" => Some(22),
        _ => None,
    });
    Some((host(&percent_decode(host_part)), port))
}

/// Base64 and hex payloads hidden in `s` (runs long enough to carry a command), decoded
/// when they decode to text. Callers rescan what comes back.
#[must_use]
pub fn decode_payloads(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let separator = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '\'' | '"' | '`' | ';' | '|' | '&' | '(' | ')' | '<' | '>'
            )
    };
    for token in s.split(separator) {
        if token.len() < 8 {
            continue;
        }
        let t = token.trim_end_matches('=');
        if t.len() % 2 == 0 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            if let Some(d) = decode_hex(t) {
                out.push(d);
                continue;
            }
        }
        if let Some(d) = decode_hex_escapes(token) {
            out.push(d);
            continue;
        }
        if token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=-_".contains(&b))
        {
            let engines = [
                base64::engine::general_purpose::STANDARD_NO_PAD,
                base64::engine::general_purpose::URL_SAFE_NO_PAD,
            ];
            if let Some(d) = engines
                .iter()
                .find_map(|e| e.decode(t).ok())
                .and_then(printable)
            {
                out.push(d);
            }
        }
    }
    out
}

fn decode_hex(t: &str) -> Option<String> {
    let bytes: Option<Vec<u8>> = (0..t.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&t[i..i + 2], 16).ok())
        .collect();
    printable(bytes?)
}

/// `\x63\x61\x74` as printf and `echo -e` take it.
fn decode_hex_escapes(t: &str) -> Option<String> {
    if !t.contains("\\x") {
        return None;
    }
    let mut bytes = Vec::new();
    let mut rest = t;
    while !rest.is_empty() {
        if let Some(h) = rest.strip_prefix("\\x") {
            let v = u8::from_str_radix(h.get(..2)?, 16).ok()?;
            bytes.push(v);
            rest = &h[2..];
        } else {
            let c = rest.chars().next()?;
            let mut buf = [0; 4];
            bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            rest = &rest[c.len_utf8()..];
        }
    }
    printable(bytes)
}

/// Decoded bytes that are text a shell or a rule could act on (not random binary).
fn printable(bytes: Vec<u8>) -> Option<String> {
    let s = String::from_utf8(bytes).ok()?;
    let good = s
        .chars()
        .filter(|c| !c.is_control() || c.is_whitespace())
        .count();
    (s.len() >= 4 && good * 10 >= s.chars().count() * 9).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The shortcut for paths already in lexical form changes no answer.
        #[test]
        fn lexical_is_idempotent_and_its_shortcut_exact(path in "[/a.]{0,12}") {
            let slow = {
                let parts: Vec<&str> = path
                    .split('/')
                    .filter(|p| !p.is_empty() && *p != ".")
                    .fold(Vec::new(), |mut v, p| {
                        if p == ".." { v.pop(); } else { v.push(p); }
                        v
                    });
                format!("/{}", parts.join("/"))
            };
            proptest::prop_assert_eq!(lexical(&path), slow.clone());
            proptest::prop_assert_eq!(lexical(&slow), slow);
        }
    }

    fn ctx() -> Context {
        Context {
            cwd: "/home/alice/project".into(),
            home: "/home/alice".into(),
            env: vec![("KEYS".into(), "/home/alice/.ssh".into())],
            host: None,
        }
    }

    #[test]
    fn paths_take_every_spelling() {
        let c = ctx();
        for (raw, want) in [
            ("~/.ssh/id_rsa", "/home/alice/.ssh/id_rsa"),
            ("$HOME/.ssh/id_rsa", "/home/alice/.ssh/id_rsa"),
            ("${HOME}/.ssh//id_rsa", "/home/alice/.ssh/id_rsa"),
            ("$KEYS/id_rsa", "/home/alice/.ssh/id_rsa"),
            ("../.ssh/./id_rsa", "/home/alice/.ssh/id_rsa"),
            ("src/../../.ssh/id_rsa", "/home/alice/.ssh/id_rsa"),
            (
                "file:///home/alice/.ssh/id%5Frsa",
                "/home/alice/.ssh/id_rsa",
            ),
            ("/../../etc/passwd", "/etc/passwd"),
            ("~root/.bashrc", "/root/.bashrc"),
            ("～/.ssh/id_rsa", "/home/alice/.ssh/id_rsa"),
            ("/etc/pass\u{200b}wd", "/etc/passwd"),
        ] {
            assert_eq!(path(raw, &c).as_deref(), Some(want), "{raw}");
        }
    }

    #[test]
    fn proc_links_as_the_agent_sees_them() {
        let mut c = ctx();
        c.set_descriptor("3", Some("/home/alice/.aws".into()));
        for (raw, want) in [
            ("/proc/self/cwd/.env", "/home/alice/project/.env"),
            // A PID the shell could not know (`$BASHPID`) leaves `/proc//`.
            ("/proc//root/home/alice/.netrc", "/home/alice/.netrc"),
            ("/proc//cwd/.env", "/**/.env"),
            ("/proc/[0-9]*/root/etc/shadow", "/etc/shadow"),
            ("/proc/*/cwd/../.env", "/**/.env"),
            (
                "/proc/self/task/*/root/home/alice/.netrc",
                "/home/alice/.netrc",
            ),
            ("/proc/1/task/1/root/etc/shadow", "/etc/shadow"),
            ("/proc/self/task//cwd/x", "/home/alice/project/x"),
            (
                "/proc/self/fd/3/credentials",
                "/home/alice/.aws/credentials",
            ),
            ("/dev/fd/3/credentials", "/home/alice/.aws/credentials"),
            ("/proc/self/fd/3/../.netrc", "/home/alice/.netrc"),
            ("/proc//fd/3/credentials", "/home/alice/.aws/credentials"),
            ("/proc/self/fd/4/credentials", "/**/credentials"),
            ("/proc/1/fd/3/credentials", "/**/credentials"),
            ("/dev/fd//x", "/**/x"),
            // Links named, not followed.
            ("/proc/*/cwd", "/proc/*/cwd"),
            ("/proc/self/fd/3", "/proc/self/fd/3"),
            ("/dev/fd/63", "/dev/fd/63"),
            ("/proc//status", "/proc/[0-9]*/status"),
            ("/proc/self/task/*/stat", "/proc/self/task/*/stat"),
            ("/proc/cpuinfo", "/proc/cpuinfo"),
        ] {
            assert_eq!(path(raw, &c).as_deref(), Some(want), "{raw}");
        }
    }

    #[test]
    fn hosts_take_every_spelling() {
        for raw in [
            "169.254.169.254",
            "2852039166",
            "0xa9fea9fe",
            "0251.0376.0251.0376",
            "169.254.43518",
            "[::ffff:169.254.169.254]",
            "::ffff:a9fe:a9fe",
            "169.254.169.254.",
        ] {
            assert_eq!(host(raw), "169.254.169.254", "{raw}");
        }
        assert_eq!(
            host("Metadata.Google.Internal."),
            "metadata.google.internal"
        );
        assert_eq!(host("256.1.1.1"), "256.1.1.1");
    }

    #[test]
    fn urls() {
        assert_eq!(
            url("https://user@Example.com:8443/x?y"),
            Some(("example.com".into(), Some(8443)))
        );
        assert_eq!(url("http://[::1]/"), Some(("::1".into(), Some(80))));
        assert_eq!(
            url("http://0xa9fea9fe/latest"),
            Some(("169.254.169.254".into(), Some(80)))
        );
        assert_eq!(url("example.org/path"), Some(("example.org".into(), None)));
        assert_eq!(
            url("example.org:8080/x"),
            Some(("example.org".into(), Some(8080)))
        );
        assert_eq!(url("file:///etc/passwd"), None);
        // Spellings a WHATWG parser (Node's fetch, browsers) reads as the same host.
        let metadata = Some(("169.254.169.254".into(), Some(443)));
        for spelling in [
            "https:///169.254.169.254/latest",
            "https:169.254.169.254/latest",
            "https://169.254.169.254\\latest",
            "HTTPS:\\\\169.254.169.254",
            "\u{1} https://169.254.169.254/ ",
            "ht\ttps://169.254.\n169.254/",
        ] {
            assert_eq!(url(spelling), metadata, "{spelling:?}");
        }
        // Node reads the first host, curl the second: both are judged.
        assert_eq!(
            super::urls("https://good.example\\@169.254.169.254/"),
            [
                ("good.example".into(), Some(443)),
                ("169.254.169.254".into(), Some(443))
            ]
        );
        // A backslash NFKC makes of a fullwidth one is read both ways too.
        assert!(super::urls("https://good.example\u{ff3c}@169.254.169.254/")
            .contains(&("169.254.169.254".into(), Some(443))));
        assert_eq!(
            super::urls("https://a.example/x"),
            [("a.example".into(), Some(443))]
        );
        assert_eq!(
            url("ssh://git@host.example:2222/x"),
            Some(("host.example".into(), Some(2222)))
        );
    }

    #[test]
    fn payloads_decode() {
        assert_eq!(
            decode_payloads("echo Y2F0IC9ldGMvc2hhZG93 | base64 -d | sh"),
            vec!["cat /etc/shadow"]
        );
        assert_eq!(
            decode_payloads("echo 636174202f6574632f736861646f77 | xxd -r -p"),
            vec!["cat /etc/shadow"]
        );
        assert_eq!(
            decode_payloads("printf '\\x63\\x61\\x74\\x20\\x2f\\x65\\x74\\x63'"),
            vec!["cat /etc"]
        );
        assert!(decode_payloads("git commit -m 'refactor parser'").is_empty());
    }

    #[test]
    fn unicode() {
        assert_eq!(text("ｒｍ -rf /"), "rm -rf /");
        assert_eq!(text("r\u{200b}m\u{feff}"), "rm");
    }
}
