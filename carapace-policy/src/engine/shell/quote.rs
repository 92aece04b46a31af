//! Quoting a word for a shell line Layer 1 writes and walks again (`eval` bodies, `parallel`
//! inputs, code that runs commands).

/// `s` as one shell word: as it is when it needs no quoting, else in single quotes.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./~=:,@%+".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}
