//! Host names as a server-name check accepts them: the bytes must be a DNS host name the
//! rules can judge, so that the name checked is the name the server reads.

/// Longest host name (RFC 1035, without the trailing dot).
const MAX_NAME: usize = 253;
/// Longest label.
const MAX_LABEL: usize = 63;

/// `bytes` as a lowercase host name: ASCII letters, digits, `-` and `_` (seen in service
/// names), dot-separated labels of 1 to 63 bytes, at most 253 in all, no trailing dot.
/// `None` for anything else (an empty name, an empty label, a space, a byte past ASCII,
/// a percent sign), which no server would read as the same name.
pub fn host_name(bytes: &[u8]) -> Option<String> {
    if bytes.is_empty() || bytes.len() > MAX_NAME {
        return None;
    }
    for label in bytes.split(|b| *b == b'.') {
        let ok = !label.is_empty()
            && label.len() <= MAX_LABEL
            && label
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_');
        if !ok {
            return None;
        }
    }
    // Only ASCII passed the check above.
    Some(String::from_utf8_lossy(bytes).to_ascii_lowercase())
}
