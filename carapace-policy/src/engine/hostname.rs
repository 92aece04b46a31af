//! Host-name coverage as every layer judges it: a rule name `example.com` covers the name
//! and its subdomains, `*.example.com` the subdomains only. Shared by Layer 1's network
//! match (`evaluate`) and the per-session resolver's verdicts (`names`).

/// Whether rule name `pattern` (`example.com`, `*.example.com`, a trailing dot allowed)
/// covers `name`. ASCII case is ignored; both sides are plain host names.
#[must_use]
pub fn covers(pattern: &str, name: &str) -> bool {
    let pattern = pattern.trim_end_matches('.');
    let name = name.trim_end_matches('.');
    match pattern.strip_prefix("*.") {
        Some(parent) => is_subdomain(name, parent),
        None => name.eq_ignore_ascii_case(pattern) || is_subdomain(name, pattern),
    }
}

/// `name` is `<something>.parent`. Compares bytes so that no slice can split a character.
fn is_subdomain(name: &str, parent: &str) -> bool {
    let (name, parent) = (name.as_bytes(), parent.as_bytes());
    name.len() > parent.len() + 1
        && name[name.len() - parent.len() - 1] == b'.'
        && name[name.len() - parent.len()..].eq_ignore_ascii_case(parent)
}
