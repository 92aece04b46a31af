//! Adds one exception to a rule file's text, line by line, so that the user's comments,
//! order and layout stay as they were and a diff shows only what was added. Whatever the
//! edit did is then checked on the parsed trees: the new file must be the old one plus the
//! one exception ([`same_but_for`]), or the edit is refused.
use super::super::yaml::{self, Node, NodeKind, Span};

/// Where the exception goes.
#[derive(Clone, Copy, Debug)]
pub(super) enum Place<'a> {
    /// Into the `except:` of the rule of this file that starts at `span`.
    Rule(Span),
    /// Into the file's `exceptions:` entry for this built-in rule (made if missing).
    Override(&'a str),
}

/// Why the rule file's text could not be edited for the exception.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EditError {
    #[error("line {line}: {message}")]
    Yaml { line: usize, message: String },
    /// A layout this edit does not handle (the message says where, and to edit by hand).
    #[error("{0}")]
    Layout(&'static str),
}

/// The file's text with `entry` (YAML text of one exception) added at `place`, and
/// `comment` (one line, without `#`) above it.
pub(super) fn add_exception(
    text: &str,
    place: Place<'_>,
    entry: &str,
    comment: &str,
) -> Result<String, EditError> {
    let root = yaml::parse(text)
        .map_err(|e| EditError::Yaml {
            line: e.span.line,
            message: e.message,
        })?
        .ok_or(EditError::Layout("the rule file is empty"))?;
    let mut lines = Lines::new(text);
    let comment = format!("# {}", one_line(comment));
    match place {
        Place::Rule(span) => {
            let item = rule_item(&root, span)
                .ok_or(EditError::Layout("the rule is not in this file's `rules:`"))?;
            add_to_mapping(&mut lines, item, entry, &comment)?;
        }
        Place::Override(id) => match root.get("exceptions") {
            None => {
                let indent = "  ";
                lines.append(&[
                    "exceptions:".to_owned(),
                    format!("{indent}{comment}"),
                    format!("{indent}- rule: {}", quoted(id)),
                    format!("{indent}  except:"),
                    format!("{indent}    - {entry}"),
                ]);
            }
            Some(list) => match &list.kind {
                NodeKind::Seq(items) if !is_flow(&lines, list) => {
                    if let Some(item) = items
                        .iter()
                        .find(|i| i.get("rule").and_then(Node::as_str) == Some(id))
                    {
                        add_to_mapping(&mut lines, item, entry, &comment)?;
                    } else {
                        let first = items
                            .first()
                            .ok_or(EditError::Layout("`exceptions:` is empty"))?;
                        let indent = lines.indent(first.span.line);
                        let end = lines.block_end(
                            first.span.line,
                            Block::Items(indent),
                            text_end(&root, list),
                        );
                        let pad = " ".repeat(indent);
                        lines.insert_after(
                            end,
                            &[
                                format!("{pad}{comment}"),
                                format!("{pad}- rule: {}", quoted(id)),
                                format!("{pad}  except:"),
                                format!("{pad}    - {entry}"),
                            ],
                        );
                    }
                }
                _ => {
                    return Err(EditError::Layout(
                        "`exceptions:` is not a block list; add the entry by hand",
                    ))
                }
            },
        },
    }
    Ok(lines.join())
}

/// One line of comment text: control characters (a newline would end the comment and
/// start YAML) become spaces.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A YAML double-quoted scalar (JSON strings are valid ones).
pub(super) fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn rule_item(root: &Node, span: Span) -> Option<&Node> {
    match &root.get("rules")?.kind {
        NodeKind::Seq(items) => items.iter().find(|i| i.span == span),
        _ => None,
    }
}

fn is_flow(lines: &Lines, node: &Node) -> bool {
    flow_open(lines, node).is_some()
}

/// The column index of the `{` or `[` that opens a flow collection on the node's line: the
/// parser places a collection at its first entry (or at the closing bracket when empty).
fn flow_open(lines: &Lines, node: &Node) -> Option<usize> {
    let chars: Vec<char> = lines.line(node.span.line).chars().collect();
    let at = node.span.col.checked_sub(1)?;
    match chars.get(at)? {
        '{' | '[' => return Some(at),
        '}' | ']' => {}
        _ if !matches!(node.kind, NodeKind::Map(_) | NodeKind::Seq(_)) => return None,
        _ => {}
    }
    let before = chars[..at].iter().rposition(|c| !c.is_whitespace())?;
    matches!(chars[before], '{' | '[').then_some(before)
}

/// The first line after `node` that belongs to something else: the start of the next
/// top-level key after it (or past the end).
fn text_end(root: &Node, node: &Node) -> usize {
    match &root.kind {
        NodeKind::Map(entries) => entries
            .iter()
            .map(|(k, _)| k.span.line)
            .filter(|l| *l > node.span.line)
            .min()
            .unwrap_or(usize::MAX),
        _ => usize::MAX,
    }
}

/// Adds `entry` to the `except:` of a rule mapping (block or one-line flow).
fn add_to_mapping(
    lines: &mut Lines,
    item: &Node,
    entry: &str,
    comment: &str,
) -> Result<(), EditError> {
    let NodeKind::Map(entries) = &item.kind else {
        return Err(EditError::Layout("the rule is not a mapping"));
    };
    let except = entries
        .iter()
        .find(|(k, _)| k.as_str() == Some("except"))
        .map(|(k, v)| (k, v));
    if is_flow(lines, item) {
        return add_to_flow_mapping(lines, item, except.map(|(_, v)| v), entry, comment);
    }
    let key_indent = item.span.col - 1;
    let pad = " ".repeat(key_indent);
    let end = lines.block_end(item.span.line, Block::Keys(key_indent), usize::MAX);
    match except {
        None => {
            lines.insert_after(
                end,
                &[
                    format!("{pad}{comment}"),
                    format!("{pad}except:"),
                    format!("{pad}  - {entry}"),
                ],
            );
        }
        Some((k, v)) => {
            match &v.kind {
                NodeKind::Seq(items) if !is_flow(lines, v) => {
                    let first = items
                        .first()
                        .ok_or(EditError::Layout("the rule's `except:` is empty"))?;
                    let dash = lines.indent(first.span.line);
                    // The list ends where the rule's next key (or the rule) does.
                    let next_key = entries
                        .iter()
                        .map(|(k, _)| k.span.line)
                        .filter(|l| *l > k.span.line)
                        .min()
                        .unwrap_or(usize::MAX);
                    let end =
                        lines.block_end(first.span.line, Block::Items(dash), next_key.min(end + 1));
                    let dpad = " ".repeat(dash);
                    lines.insert_after(
                        end,
                        &[format!("{dpad}{comment}"), format!("{dpad}- {entry}")],
                    );
                }
                NodeKind::Seq(items) if v.span.line == k.span.line => {
                    let close = lines
                        .closing(
                            v.span.line,
                            flow_open(lines, v).ok_or(EditError::Layout("not a flow list"))?,
                        )
                        .ok_or(EditError::Layout(
                            "the `except: [ … ]` does not end on its line; edit it by hand",
                        ))?;
                    let sep = if items.is_empty() { "" } else { ", " };
                    let at = lines.before_spaces(v.span.line, close);
                    lines.insert_at(v.span.line, at, &format!("{sep}{entry}"));
                    lines.insert_after(k.span.line - 1, &[format!("{pad}{comment}")]);
                }
                NodeKind::Scalar { value, .. } if v.span.line == k.span.line && !v.is_null() => {
                    // `except: X` becomes `except: ["X", ENTRY]`: the value is written quoted,
                    // since a plain `**/x` would read as an alias inside brackets.
                    let start = v.span.col - 1;
                    let stop = lines
                        .scalar_end(v.span.line, start)
                        .ok_or(EditError::Layout(
                            "the `except:` value does not end on its line; edit it by hand",
                        ))?;
                    lines.replace(
                        v.span.line,
                        start,
                        stop,
                        &format!("[{}, {entry}]", quoted(value)),
                    );
                    lines.insert_after(k.span.line - 1, &[format!("{pad}{comment}")]);
                }
                _ => return Err(EditError::Layout(
                    "the rule's `except:` has a form this edit does not handle; edit it by hand",
                )),
            }
        }
    }
    Ok(())
}

/// What kind of block [`Lines::block_end`] follows.
#[derive(Clone, Copy, Debug)]
enum Block {
    Keys(usize),
    Items(usize),
}

/// [`add_to_mapping`] for a one-line `{ … }` rule.
fn add_to_flow_mapping(
    lines: &mut Lines,
    item: &Node,
    except: Option<&Node>,
    entry: &str,
    comment: &str,
) -> Result<(), EditError> {
    let line = item.span.line;
    let open = flow_open(lines, item).ok_or(EditError::Layout("not a flow mapping"))?;
    let close = lines.closing(line, open).ok_or(EditError::Layout(
        "the rule's `{ … }` does not end on its line; edit it by hand",
    ))?;
    let pad = " ".repeat(lines.indent(line));
    match except {
        None => {
            let at = lines.before_spaces(line, close);
            lines.insert_at(line, at, &format!(", except: [{entry}]"));
        }
        Some(v)
            if v.span.line == line && matches!(v.kind, NodeKind::Seq(_)) && is_flow(lines, v) =>
        {
            let vclose = lines
                .closing(
                    line,
                    flow_open(lines, v).ok_or(EditError::Layout("not a flow list"))?,
                )
                .ok_or(EditError::Layout(
                    "the `except: [ … ]` does not end on its line",
                ))?;
            let sep = if matches!(&v.kind, NodeKind::Seq(s) if s.is_empty()) {
                ""
            } else {
                ", "
            };
            let at = lines.before_spaces(line, vclose);
            lines.insert_at(line, at, &format!("{sep}{entry}"));
        }
        Some(_) => {
            return Err(EditError::Layout(
                "the rule's `except:` is not a one-line list; edit it by hand",
            ))
        }
    }
    lines.insert_after(line - 1, &[format!("{pad}{comment}")]);
    Ok(())
}

/// The file as lines (1-based in the API), with the line ending it used.
struct Lines {
    lines: Vec<String>,
    /// The text ended with a newline.
    final_newline: bool,
}

impl Lines {
    fn new(text: &str) -> Self {
        let final_newline = text.ends_with('\n') || text.is_empty();
        let body = text.strip_suffix('\n').unwrap_or(text);
        Self {
            lines: if body.is_empty() && text.is_empty() {
                Vec::new()
            } else {
                body.split('\n').map(str::to_owned).collect()
            },
            final_newline,
        }
    }

    fn join(&self) -> String {
        let mut out = self.lines.join("\n");
        if self.final_newline || !out.is_empty() {
            out.push('\n');
        }
        out
    }

    fn line(&self, n: usize) -> &str {
        n.checked_sub(1)
            .and_then(|i| self.lines.get(i))
            .map_or("", String::as_str)
    }

    /// Byte offset of the character at column index `col` (0-based) of line `n`.
    fn byte_of(&self, n: usize, col: usize) -> Option<usize> {
        let line = self.line(n);
        line.char_indices()
            .map(|(b, _)| b)
            .chain(std::iter::once(line.len()))
            .nth(col)
    }

    fn indent(&self, n: usize) -> usize {
        let line = self.line(n);
        line.len() - line.trim_start_matches(' ').len()
    }

    /// Whether line `n` holds only a comment or nothing.
    fn is_filler(&self, n: usize) -> bool {
        let t = self.line(n).trim_start();
        t.is_empty() || t.starts_with('#')
    }

    /// The last line of the block that starts at line `start`, before line `limit`. A
    /// mapping's block (`Block::Keys(k)`, keys at column index `k`) holds the lines indented
    /// at least `k`; a list's (`Block::Items(d)`, dashes at `d`) the lines indented more
    /// than `d` and the further `- ` items at `d`. Trailing comments and blank lines are
    /// left to what follows.
    fn block_end(&self, start: usize, block: Block, limit: usize) -> usize {
        let mut end = start;
        let mut n = start + 1;
        while n <= self.lines.len() && n < limit {
            if !self.is_filler(n) {
                let ind = self.indent(n);
                let inside = match block {
                    Block::Keys(k) => ind >= k,
                    Block::Items(d) => {
                        ind > d || (ind == d && self.line(n).trim_start().starts_with('-'))
                    }
                };
                if !inside {
                    break;
                }
                end = n;
            }
            n += 1;
        }
        end
    }

    /// The byte after the bracket matching the one at column index `open` of line `n`
    /// (quotes skipped); `None` when it does not close on the line.
    fn closing(&self, n: usize, open: usize) -> Option<usize> {
        let line = self.line(n);
        let start = self.byte_of(n, open)?;
        let mut depth = 0usize;
        let mut quote: Option<char> = None;
        let mut chars = line[start..].char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match quote {
                Some('"') if c == '\\' => {
                    chars.next();
                }
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '"' | '\'' => quote = Some(c),
                    '[' | '{' => depth += 1,
                    ']' | '}' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(start + i);
                        }
                    }
                    _ => {}
                },
            }
        }
        None
    }

    /// The byte after a one-line scalar that starts at column index `start` of line `n`.
    fn scalar_end(&self, n: usize, start: usize) -> Option<usize> {
        let line = self.line(n);
        let from = self.byte_of(n, start)?;
        let rest = &line[from..];
        let end = match rest.chars().next()? {
            q @ ('"' | '\'') => {
                let mut chars = rest.char_indices().skip(1);
                loop {
                    let (i, c) = chars.next()?;
                    if q == '"' && c == '\\' {
                        chars.next();
                    } else if c == q {
                        if q == '\'' && rest[i + 1..].starts_with('\'') {
                            chars.next();
                            continue;
                        }
                        break from + i + 1;
                    }
                }
            }
            _ => {
                from + rest
                    .find(" #")
                    .unwrap_or(rest.len())
                    .min(rest.trim_end().len())
            }
        };
        // A plain scalar continued on the next line is not a one-line value.
        let next = n + 1;
        if next <= self.lines.len() && !self.is_filler(next) && self.indent(next) > self.indent(n) {
            return None;
        }
        Some(end)
    }

    /// The byte where the spaces that end at `byte` of line `n` start (so `[a ]` takes a
    /// new item after `a`, not after the space).
    fn before_spaces(&self, n: usize, byte: usize) -> usize {
        let line = self.line(n);
        line.get(..byte).map_or(byte, |s| s.trim_end().len())
    }

    fn insert_after(&mut self, n: usize, new: &[String]) {
        let at = n.min(self.lines.len());
        self.lines.splice(at..at, new.iter().cloned());
    }

    fn append(&mut self, new: &[String]) {
        self.lines.extend(new.iter().cloned());
        self.final_newline = true;
    }

    fn insert_at(&mut self, n: usize, byte: usize, s: &str) {
        if let Some(line) = n.checked_sub(1).and_then(|i| self.lines.get_mut(i)) {
            line.insert_str(byte, s);
        }
    }

    fn replace(&mut self, n: usize, start_col: usize, stop: usize, s: &str) {
        let Some(start) = self.byte_of(n, start_col) else {
            return;
        };
        if let Some(line) = n.checked_sub(1).and_then(|i| self.lines.get_mut(i)) {
            line.replace_range(start..stop, s);
        }
    }
}

/// A parsed tree without positions, to compare two files' contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    Scalar(String),
    Seq(Vec<Shape>),
    Map(Vec<(Shape, Shape)>),
    Alias,
}

impl Shape {
    pub(super) fn of(node: &Node) -> Self {
        match &node.kind {
            NodeKind::Scalar { value, .. } => Self::Scalar(value.clone()),
            NodeKind::Seq(items) => Self::Seq(items.iter().map(Self::of).collect()),
            NodeKind::Map(entries) => Self::Map(
                entries
                    .iter()
                    .map(|(k, v)| (Self::of(k), Self::of(v)))
                    .collect(),
            ),
            NodeKind::Alias => Self::Alias,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Self> {
        match self {
            Self::Map(entries) => entries
                .iter_mut()
                .find(|(k, _)| *k == Self::Scalar(key.to_owned()))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// `except:` of this mapping with `entry` added, as the edit writes it.
    fn add_except(&mut self, entry: Self) -> Option<()> {
        let Self::Map(entries) = self else {
            return None;
        };
        match entries
            .iter_mut()
            .find(|(k, _)| *k == Self::Scalar("except".into()))
        {
            None => entries.push((Self::Scalar("except".into()), Self::Seq(vec![entry]))),
            Some((_, v)) => match v {
                Self::Seq(items) => items.push(entry),
                Self::Scalar(_) => *v = Self::Seq(vec![v.clone(), entry]),
                _ => return None,
            },
        }
        Some(())
    }
}

/// Whether `new` is `old` with exactly `entry` added at `place`: the guard that no edit
/// changed anything else (a value cut short, a comment that became text, a rule moved).
pub(super) fn same_but_for(old: &str, new: &str, place: Place<'_>, entry: &str) -> bool {
    let parse = |t: &str| yaml::parse(t).ok().flatten();
    let (Some(old_root), Some(new_root), Some(entry)) = (parse(old), parse(new), parse(entry))
    else {
        return false;
    };
    let entry = Shape::of(&entry);
    let mut want = Shape::of(&old_root);
    let done = match place {
        Place::Rule(span) => {
            let index = match old_root.get("rules").map(|r| &r.kind) {
                Some(NodeKind::Seq(items)) => items.iter().position(|i| i.span == span),
                _ => None,
            };
            match (index, want.get_mut("rules")) {
                (Some(i), Some(Shape::Seq(items))) => {
                    items.get_mut(i).and_then(|r| r.add_except(entry))
                }
                _ => None,
            }
        }
        Place::Override(id) => {
            let fresh = Shape::Map(vec![
                (Shape::Scalar("rule".into()), Shape::Scalar(id.to_owned())),
                (
                    Shape::Scalar("except".into()),
                    Shape::Seq(vec![entry.clone()]),
                ),
            ]);
            match want.get_mut("exceptions") {
                Some(Shape::Seq(items)) => {
                    let names = |i: &Shape| {
                        matches!(i, Shape::Map(e) if e.iter().any(|(k, v)| {
                            *k == Shape::Scalar("rule".into()) && *v == Shape::Scalar(id.to_owned())
                        }))
                    };
                    if let Some(item) = items.iter_mut().find(|i| names(i)) {
                        item.add_except(entry)
                    } else {
                        items.push(fresh);
                        Some(())
                    }
                }
                Some(_) => None,
                None => match &mut want {
                    Shape::Map(entries) => {
                        entries.push((Shape::Scalar("exceptions".into()), Shape::Seq(vec![fresh])));
                        Some(())
                    }
                    _ => None,
                },
            }
        }
    };
    done.is_some() && want == Shape::of(&new_root)
}

/// A unified diff of two texts that differ in one place (what `add_exception` makes):
/// the changed lines with up to three lines of context on each side.
#[must_use]
pub fn diff(origin: &str, old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    if head == a.len() && head == b.len() {
        return String::new();
    }
    let ctx = 3;
    let from = head.saturating_sub(ctx);
    let a_to = (a.len() - tail + ctx).min(a.len());
    let b_to = (b.len() - tail + ctx).min(b.len());
    let mut out = format!(
        "--- {origin}\n+++ {origin}\n@@ -{},{} +{},{} @@\n",
        from + 1,
        a_to - from,
        from + 1,
        b_to - from
    );
    let lines = a[from..head]
        .iter()
        .map(|l| (' ', l))
        .chain(a[head..a.len() - tail].iter().map(|l| ('-', l)))
        .chain(b[head..b.len() - tail].iter().map(|l| ('+', l)))
        .chain(b[b.len() - tail..b_to].iter().map(|l| (' ', l)));
    for (sign, l) in lines {
        out.push(sign);
        out.push_str(l);
        out.push('\n');
    }
    out
}
