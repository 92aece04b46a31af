//! Redaction of free text before it is written anywhere (ledger, log): well-known token
//! formats, private key blocks, `Authorization:` headers, passwords in URLs and `KEY=value`
//! pairs whose key names a secret.
//!
//! The token formats are the ones the `credentials` pack's content rules look for
//! (`secrets-in-outgoing-data`); a test checks that every sample those rules catch is
//! redacted here too, so the two lists cannot drift apart unnoticed.
use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// What a redacted secret is replaced with.
pub const MARK: &str = "[REDACTED]";

/// Tokens recognised by their shape alone.
const TOKENS: &str = concat!(
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    r"|gh[pousr]_[A-Za-z0-9]{36,}",
    r"|github_pat_[A-Za-z0-9_]{40,}",
    r"|glpat-[A-Za-z0-9_-]{20,}",
    r"|xox[abposr]-[A-Za-z0-9-]{10,}",
    r"|sk-ant-[A-Za-z0-9_-]{20,}",
    r"|sk-(?:proj-)?[A-Za-z0-9_-]{32,}",
    r"|AIza[0-9A-Za-z_-]{35}",
    r"|[sr]k_(?:live|test)_[0-9A-Za-z]{16,}",
    r"|npm_[A-Za-z0-9]{36}",
    r"|pypi-[A-Za-z0-9_-]{50,}",
    // JSON Web Tokens: three base64url parts, the first two starting with `{"`.
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
);

static TOKEN: LazyLock<Regex> = LazyLock::new(|| Regex::new(TOKENS).expect("valid regex"));

/// A private key block, up to its END line, or to the end of the text when cut off.
static PRIVATE_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
    )
    .expect("valid regex")
});

/// `Authorization: Bearer …` / `Basic …` / `token …` (headers in curl commands, HTTP calls).
static AUTH_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b((?:proxy-)?authorization\s*:\s*(?:bearer|basic|token|digest)?\s*)[^\s'\x22\\]+",
    )
    .expect("valid regex")
});

/// `scheme://user:password@host`.
static URL_PASSWORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\x22]+:)[^\s@/'\x22]+@").expect("valid regex")
});

/// `NAME=value`, `NAME: value`, `"name": "value"`, `--password=value` where the name says
/// secret. The value stops at whitespace or a quote.
static KEY_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)((?:\b|--?)[A-Za-z0-9_.-]*(?:secret|token|passw(?:or)?d|passwd|pwd|api[_-]?key|access[_-]?key|private[_-]?key|credentials?|auth[_-]?key|session[_-]?key|client[_-]?secret)[A-Za-z0-9_.-]*["']?\s*[=:]\s*["']?)([^\s"',;&|]+)"#,
    )
    .expect("valid regex")
});

/// `text` with every secret it recognises replaced by [`MARK`]. Borrowed when there was
/// nothing to redact.
#[must_use]
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    let mark = |caps: &regex::Captures<'_>| format!("{}{MARK}", &caps[1]);
    for (re, keep_prefix) in [
        (&*PRIVATE_KEY, false),
        (&*AUTH_HEADER, true),
        (&*URL_PASSWORD, true),
        (&*KEY_VALUE, true),
        (&*TOKEN, false),
    ] {
        if !re.is_match(&out) {
            continue;
        }
        let replaced = if keep_prefix {
            re.replace_all(&out, |c: &regex::Captures<'_>| {
                let mut s = mark(c);
                // The URL pattern consumed the `@` that ends the password.
                if c[0].ends_with('@') {
                    s.push('@');
                }
                s
            })
            .into_owned()
        } else {
            re.replace_all(&out, MARK).into_owned()
        };
        out = Cow::Owned(replaced);
    }
    out
}

/// Whether `text` holds something [`redact`] would remove.
#[must_use]
pub fn has_secret(text: &str) -> bool {
    matches!(redact(text), Cow::Owned(_))
}

/// [`redact`] into an owned string, `None` for empty text.
#[must_use]
pub fn field(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| redact(text).into_owned())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// One sample per token format (made up; none is a real credential).
    const SAMPLES: &[&str] = &[
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAZZZZZZZZZZZZZZZZ",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01",
        "glpat-abcdefghij0123456789",
        "xoxb-1234567890-abcdefghij",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEF",
        "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
        "sk_live_abcdefghijklmnopqrstuvwx",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0dXZ3",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    ];

    #[test]
    fn every_token_format_is_redacted_in_context() {
        for s in SAMPLES {
            let text = format!("curl -d 'x={s}' https://example.invalid # {s}");
            let out = redact(&text);
            assert!(!out.contains(s), "{s} survived: {out}");
            assert!(out.contains(MARK), "{out}");
        }
    }

    #[test]
    fn the_credentials_packs_secret_patterns_are_covered() {
        // Every sample the pack's content rule catches must be redacted here too.
        let pack = carapace_policy::rules::builtin::text("credentials").expect("credentials pack");
        let line = pack
            .lines()
            .find(|l| l.contains("match: { content: \"re:") && l.contains("AKIA"))
            .expect("the secrets rule");
        let re = line
            .split("\"re:")
            .nth(1)
            .and_then(|r| r.strip_suffix("\" }"))
            .expect("a content regex");
        let re = Regex::new(&re.replace("\\\\", "\\")).expect("the pack's regex compiles");
        let mut caught = 0;
        for s in SAMPLES {
            if re.is_match(s) {
                caught += 1;
                assert!(has_secret(s), "the pack catches {s} but redact does not");
            }
        }
        assert!(caught >= 10, "the pack regex matched only {caught} samples");
    }

    #[test]
    fn key_value_secrets_keep_their_names() {
        let cases = [
            (
                "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG",
                "export AWS_SECRET_ACCESS_KEY=[REDACTED]",
            ),
            (
                "DB_PASSWORD='hunter2' ./run",
                "DB_PASSWORD='[REDACTED]' ./run",
            ),
            ("{\"api_key\": \"abc123\"}", "{\"api_key\": \"[REDACTED]\"}"),
            (
                "mysql --password=s3cr3t -u root",
                "mysql --password=[REDACTED] -u root",
            ),
            (
                "curl -H 'Authorization: Bearer abc.def'",
                "curl -H 'Authorization: Bearer [REDACTED]'",
            ),
            (
                "git clone https://bob:pa55@git.example/x",
                "git clone https://bob:[REDACTED]@git.example/x",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact(input), want, "{input}");
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        for s in [
            "read /home/u/.ssh/id_rsa",
            "cargo test -p carapace-daemon",
            "token budget: 4096",
            "the password rule blocked this",
        ] {
            assert!(matches!(redact(s), Cow::Borrowed(_)), "{s} → {}", redact(s));
        }
    }

    proptest! {
        #[test]
        fn redaction_never_panics_and_removes_embedded_tokens(
            before in ".{0,40}", after in ".{0,40}", i in 0..SAMPLES.len()
        ) {
            let text = format!("{before} {} {after}", SAMPLES[i]);
            let out = redact(&text);
            prop_assert!(!out.contains(SAMPLES[i]));
        }
    }
}
