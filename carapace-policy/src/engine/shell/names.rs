//! What a command word is, by its name or its shape: the family a program belongs to
//! (`python3.12` is `python`), shells and interpreters, words that look like paths or
//! remote places. Plain string functions, used by the command table and the taint flow
//! alike (so neither depends on the other for them).
use super::super::normalize;

/// The name a command is looked up by: `/usr/bin/python3.12` → `python`, `mkfs.ext4` →
/// `mkfs`. Called for every simple command several times (the table, the flow, the stop
/// lines), so it looks at bytes and tries only the families the name's first letter allows.
pub(super) fn family(word: &str) -> &str {
    let base = word
        .as_bytes()
        .iter()
        .rposition(|&b| b == b'/')
        .map_or(word, |i| &word[i + 1..]);
    // A version suffix: nothing or digits and dots (`3.12`).
    let versioned = |prefix: &str| {
        base.strip_prefix(prefix)
            .is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    };
    let families: &[(&str, &'static str)] = match base.as_bytes().first() {
        Some(b'm') if base.starts_with("mkfs.") => return "mkfs",
        // `pip-3.12`, as some distributions name it.
        Some(b'p')
            if base.strip_prefix("pip-").is_some_and(|v| {
                !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            }) =>
        {
            return "pip"
        }
        Some(b'p') => &[
            ("python", "python"),
            ("pypy", "python"),
            ("perl5", "perl"),
            ("php", "php"),
            ("pip", "pip"),
        ],
        Some(b'i') => &[("ipython", "ipython")],
        Some(b'r') => &[("ruby", "ruby")],
        Some(b'n') => &[("node", "node")],
        Some(b'l') => &[("lua", "lua")],
        Some(b't') => &[("tclsh", "tclsh")],
        Some(b'w') => &[("wish", "wish")],
        _ => &[],
    };
    families
        .iter()
        .find(|(prefix, _)| versioned(prefix))
        .map_or(base, |(_, fam)| fam)
}

/// A word that names a file rather than a value: rules want to see it as a path.
/// A word that could name a file in the working directory: no option, scheme, `host:`,
/// assignment or spaces.
pub(super) fn bare_name(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with('-')
        && !word.contains([':', '=', ' ', '@', '$', '\n'])
        && !word.bytes().all(|b| b.is_ascii_digit())
}

pub(super) fn path_like(word: &str) -> bool {
    !word.contains("://")
        && (word.contains('/') || word.starts_with('~') || word.starts_with('.') && word.len() > 1)
}

/// Interpreters of other languages (by [`family`] name): `-c`/`-e` code, a script file,
/// or code on stdin.
pub(super) fn is_interpreter(name: &str) -> bool {
    INTERPRETERS.contains(&name)
}

/// The interpreters [`is_interpreter`] knows, as the command table lists them.
pub(super) const INTERPRETERS: &[&str] = &[
    "python",
    "node",
    "nodejs",
    "ruby",
    "perl",
    "php",
    "lua",
    "luajit",
    "deno",
    "bun",
    "Rscript",
    "tclsh",
    "pwsh",
    "powershell",
    "osascript",
    "irb",
    "julia",
    "R",
    "ts-node",
    "tsx",
    "ipython",
    "sbcl",
    "clisp",
    "guile",
    "racket",
    "elixir",
    "groovy",
    "jshell",
    "scala",
    "swift",
    "expect",
    "wish",
];

/// Shells that take `-c STRING`, a script file, or read stdin.
pub(super) fn is_shell(name: &str) -> bool {
    SHELLS.contains(&name)
}

/// The shells [`is_shell`] knows, as the command table lists them.
pub(super) const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "fish", "rbash", "posh", "csh",
    "tcsh", "ksh93", "pdksh",
];

pub(super) fn valid_name(k: &str) -> bool {
    !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `[user@]host:path` as scp, rsync and git write a remote side (not `./a:b`, not `/x:y`,
/// not `C:\`).
pub(super) fn remote_host(word: &str) -> Option<String> {
    if let Some(rest) = word.strip_prefix("rsync://") {
        let authority = rest.split('/').next().unwrap_or(rest);
        let host = authority.rsplit('@').next().unwrap_or(authority);
        return Some(normalize::host(host.split(':').next().unwrap_or(host)));
    }
    if word.contains("://") || word.starts_with(['/', '.', '~']) {
        return None;
    }
    let (authority, _) = word.split_once(':')?;
    if authority.contains('/') || authority.is_empty() || authority.len() == 1 {
        return None;
    }
    let host = authority.rsplit('@').next().unwrap_or(authority);
    (!host.is_empty()).then(|| normalize::host(host.trim_start_matches('[').trim_end_matches(']')))
}

/// Whether `host` (as [`normalize::host`] gives it) is this machine's loopback: a copy to
/// or from it, or a command run there, is one on this machine's files (`scp
/// localhost:.ssh/id_rsa .`, `ssh 127.0.0.1 cat ~/.netrc`).
pub(super) fn loopback(host: &str) -> bool {
    matches!(
        host,
        "localhost"
            | "localhost.localdomain"
            | "ip6-localhost"
            | "ip6-loopback"
            | "::1"
            | "0.0.0.0"
    ) || host.starts_with("127.")
        || host.ends_with(".localhost")
}

/// The local path a `HOST:PATH` word on a loopback host names: relative to the home, as
/// ssh starts there (another user's home is not told apart).
pub(super) fn loopback_path(word: &str) -> Option<String> {
    let host = remote_host(word)?;
    if !loopback(&host) || word.starts_with("rsync://") {
        return None;
    }
    let path = match word.find("]:") {
        Some(at) => &word[at + 2..],
        None => word.split_once(':').map_or("", |(_, p)| p),
    };
    // The remote side's `~` and relative paths are the login user's home: `root@localhost:`
    // is /root, not the agent's own home.
    let home = match login_user(word) {
        Some(user) => format!("~{user}"),
        None => "~".to_owned(),
    };
    Some(if path.starts_with('/') {
        path.to_owned()
    } else if let Some(rest) = path
        .strip_prefix('~')
        .filter(|r| r.is_empty() || r.starts_with('/'))
    {
        format!("{home}{rest}")
    } else if path.starts_with('~') {
        path.to_owned()
    } else {
        format!("{home}/{path}")
    })
}

/// The user a remote spelling logs in as (`root@host:…`, `ssh://root@host`), when given.
pub(super) fn login_user(word: &str) -> Option<&str> {
    let rest = ["rsync://", "ssh://", "sftp://", "scp://"]
        .iter()
        .find_map(|s| word.strip_prefix(s))
        .unwrap_or(word);
    let authority = rest.split(['/', ':']).next().unwrap_or(rest);
    let at = rest.find('@')?;
    // `host:dir@x` has no user: the `@` must come before the host's `:` or `/`.
    if at >= authority.len() {
        return None;
    }
    let user = &rest[..at];
    (!user.is_empty()
        && user
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')))
    .then_some(user)
}

/// `echo -e` / `printf` escapes: `\n`, `\t`, `\xHH`, `\0NNN`, `\NNN`, `\uHHHH`.
pub(super) fn unescape(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4];
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '\\' || i + 1 >= chars.len() {
            bytes.extend_from_slice(chars[i].encode_utf8(&mut buf).as_bytes());
            i += 1;
            continue;
        }
        let esc = chars[i + 1];
        i += 2;
        if super::word::common_escape(esc, &chars, &mut i, &mut bytes) {
            continue;
        }
        match esc {
            '\\' => bytes.push(b'\\'),
            '0' => {
                let (v, n) = super::word::radix_prefix(&chars[i..], 8, 3);
                bytes.push(v as u8);
                i += n;
            }
            '1'..='7' => {
                let (v, n) = super::word::radix_prefix(&chars[i - 1..], 8, 3);
                bytes.push(v as u8);
                i += n - 1;
            }
            other => {
                bytes.push(b'\\');
                bytes.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// [`super::family`] as it was written before it dispatched on the first letter: every
    /// family tried in turn.
    fn family_every_prefix(word: &str) -> &str {
        let base = word.rsplit('/').next().unwrap_or(word);
        if base.starts_with("mkfs.") {
            return "mkfs";
        }
        if base
            .strip_prefix("pip-")
            .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
        {
            return "pip";
        }
        for (prefix, fam) in [
            ("python", "python"),
            ("pypy", "python"),
            ("ipython", "ipython"),
            ("perl5", "perl"),
            ("ruby", "ruby"),
            ("php", "php"),
            ("node", "node"),
            ("lua", "lua"),
            ("pip", "pip"),
            ("tclsh", "tclsh"),
            ("wish", "wish"),
        ] {
            if base.starts_with(prefix)
                && base[prefix.len()..]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b == b'.')
            {
                return fam;
            }
        }
        base
    }

    proptest! {
        #[test]
        fn family_agrees_with_trying_every_prefix(
            dir in prop_oneof![Just(""), Just("/usr/bin/"), Just("./"), Just("a/b/"), Just("/")],
            stem in prop_oneof![
                Just("python"), Just("pypy"), Just("ipython"), Just("perl5"), Just("perl"),
                Just("ruby"), Just("php"), Just("node"), Just("lua"), Just("pip"), Just("pip-"),
                Just("tclsh"), Just("wish"), Just("mkfs."), Just("mkfs"), Just("git"), Just(""),
                Just("é"), Just("p"), Just("nodejs"),
            ],
            tail in "[0-9.a-z/-]{0,5}",
        ) {
            let word = format!("{dir}{stem}{tail}");
            prop_assert_eq!(super::family(&word), family_every_prefix(&word), "{}", word);
        }
    }
}
