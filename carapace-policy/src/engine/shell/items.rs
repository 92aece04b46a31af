//! How programs that take their arguments from input (`xargs`, `parallel`) cut that input
//! into items.

/// The items xargs reads from `text`: split at `delimiter` (`-0`, `-d`), else at blanks
/// (a NUL among them ends an item too).
pub(super) fn xargs_items(text: &str, delimiter: Option<char>) -> Vec<String> {
    let items: Vec<&str> = match delimiter {
        Some(d) => text.split(d).collect(),
        None => text
            .split(|c: char| c.is_whitespace() || c == '\0')
            .collect(),
    };
    items
        .into_iter()
        .map(|i| i.trim_end_matches('\n'))
        .filter(|i| !i.is_empty())
        .map(str::to_owned)
        .collect()
}
