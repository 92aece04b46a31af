//! A spanned YAML tree built from yaml-rust2's event parser, so that every diagnostic can
//! point at the line and column of the value it is about (yaml-rust2's own `Yaml` type
//! drops positions).

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A 1-based position in the rule file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// The line, from 1.
    pub line: usize,
    /// The column in characters, from 1.
    pub col: usize,
}

impl Span {
    fn from_marker(mark: Marker) -> Self {
        // yaml-rust2 lines are 1-based, columns 0-based.
        Self {
            line: mark.line().max(1),
            col: mark.col() + 1,
        }
    }
}

/// What a node holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// `quoted` tells `"1"` (a string) from `1` and `~` (a null) from `"~"`.
    Scalar {
        /// The text, unescaped.
        value: String,
        /// Written in quotes (single or double, or as a block scalar).
        quoted: bool,
    },
    /// A sequence's items, in order.
    Seq(Vec<Node>),
    /// A mapping's (key, value) pairs, in file order (duplicates kept for the validator).
    Map(Vec<(Node, Node)>),
    /// An alias (`*name`): refused by the validator rather than expanded, because expanding
    /// aliases lets a small file grow into a huge tree.
    Alias,
}

/// A YAML value with the position it starts at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The value.
    pub kind: NodeKind,
    /// Where it starts.
    pub span: Span,
}

impl Node {
    /// The scalar's text, if this is a scalar.
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar { value, .. } => Some(value),
            _ => None,
        }
    }

    /// A plain `~`, `null` or empty scalar.
    #[must_use]
    pub fn is_null(&self) -> bool {
        matches!(&self.kind, NodeKind::Scalar { value, quoted: false }
            if value.is_empty() || value == "~" || value == "null" || value == "Null" || value == "NULL")
    }

    /// A plain `true`/`false` scalar.
    #[must_use]
    pub(crate) fn as_bool(&self) -> Option<bool> {
        match &self.kind {
            NodeKind::Scalar {
                value,
                quoted: false,
            } => match value.as_str() {
                "true" | "True" | "TRUE" => Some(true),
                "false" | "False" | "FALSE" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// What kind of value this is, for "expected X, found Y" messages.
    #[must_use]
    pub fn describe(&self) -> &'static str {
        match &self.kind {
            NodeKind::Scalar { .. } if self.is_null() => "an empty value",
            NodeKind::Scalar { .. } => "a scalar",
            NodeKind::Seq(_) => "a list",
            NodeKind::Map(_) => "a mapping",
            NodeKind::Alias => "an alias",
        }
    }

    /// Looks a key up in a mapping (the first occurrence).
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            NodeKind::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

/// A YAML syntax error with its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// Where the parser stopped.
    pub span: Span,
    /// The parser's description of the problem.
    pub message: String,
}

/// Builds the tree from events; containers under construction live on a stack.
#[derive(Default)]
struct Builder {
    stack: Vec<(Node, Option<Node>)>,
    root: Option<Node>,
    /// Only the first document counts; later ones are reported by `parse`.
    documents: usize,
    /// Containers opened beyond [`MAX_DEPTH`], skipped whole: the tree is walked (and
    /// dropped) recursively, so its depth must stay bounded whatever the input.
    skipped: usize,
    too_deep: Option<Span>,
}

/// Deepest nesting a rule file may use; real rule files need fewer than ten levels.
pub const MAX_DEPTH: usize = 64;

impl Builder {
    fn push_value(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
            Some((parent, pending_key)) => match &mut parent.kind {
                NodeKind::Seq(items) => items.push(node),
                NodeKind::Map(entries) => match pending_key.take() {
                    None => {
                        // yaml-rust2 marks a block mapping's start after its first key; the
                        // key itself is where a reader looks for the mapping.
                        if entries.is_empty() {
                            parent.span = node.span;
                        }
                        *pending_key = Some(node);
                    }
                    Some(key) => entries.push((key, node)),
                },
                NodeKind::Scalar { .. } | NodeKind::Alias => {}
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let span = Span::from_marker(mark);
        if self.skipped > 0
            || (self.stack.len() >= MAX_DEPTH
                && matches!(ev, Event::SequenceStart(..) | Event::MappingStart(..)))
        {
            match ev {
                Event::SequenceStart(..) | Event::MappingStart(..) => {
                    self.too_deep.get_or_insert(span);
                    self.skipped += 1;
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    self.skipped = self.skipped.saturating_sub(1);
                }
                _ => {}
            }
            return;
        }
        match ev {
            Event::DocumentStart => self.documents += 1,
            Event::Scalar(value, style, _, _) => {
                let quoted = !matches!(style, TScalarStyle::Plain);
                self.push_value(Node {
                    kind: NodeKind::Scalar { value, quoted },
                    span,
                });
            }
            Event::Alias(_) => self.push_value(Node {
                kind: NodeKind::Alias,
                span,
            }),
            Event::SequenceStart(..) => {
                self.stack.push((
                    Node {
                        kind: NodeKind::Seq(Vec::new()),
                        span,
                    },
                    None,
                ));
            }
            Event::MappingStart(..) => {
                self.stack.push((
                    Node {
                        kind: NodeKind::Map(Vec::new()),
                        span,
                    },
                    None,
                ));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((node, _)) = self.stack.pop() {
                    self.push_value(node);
                }
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
    }
}

/// Parses the first YAML document of `text`; an empty file yields `None`.
pub fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut builder, true).map_err(|e| SyntaxError {
        span: Span::from_marker(*e.marker()),
        message: e.info().to_owned(),
    })?;
    if let Some(span) = builder.too_deep {
        return Err(SyntaxError {
            span,
            message: format!("nesting deeper than {MAX_DEPTH} levels"),
        });
    }
    if builder.documents > 1 {
        return Err(SyntaxError {
            span: Span { line: 1, col: 1 },
            message: "the file holds more than one YAML document".to_owned(),
        });
    }
    Ok(builder.root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_one_based() {
        let root = parse("version: 1\nrules:\n  - block: \"/etc/**\"\n")
            .unwrap()
            .unwrap();
        let rules = root.get("rules").unwrap();
        let NodeKind::Seq(items) = &rules.kind else {
            panic!("not a list")
        };
        let pattern = items[0].get("block").unwrap();
        assert_eq!(pattern.as_str(), Some("/etc/**"));
        assert_eq!(pattern.span, Span { line: 3, col: 12 });
        assert_eq!(items[0].span, Span { line: 3, col: 5 });
        assert_eq!(root.get("version").unwrap().span, Span { line: 1, col: 10 });
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse("rules:\n  - block: [a\n").unwrap_err();
        assert!(err.span.line >= 2, "{err:?}");
    }

    #[test]
    fn deep_nesting_is_refused_without_recursion() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        // yaml-rust2 stops at its own limit, which is deeper than ours.
        assert!(parse(&deep).is_err());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let err = parse(&deep).unwrap_err();
        assert!(err.message.contains("nesting deeper than"), "{err:?}");
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn empty_is_none_and_quotes_are_kept() {
        assert_eq!(parse("").unwrap(), None);
        let root = parse("a: \"1\"\nb: 1\n").unwrap().unwrap();
        assert!(matches!(
            root.get("a").unwrap().kind,
            NodeKind::Scalar { quoted: true, .. }
        ));
        assert!(matches!(
            root.get("b").unwrap().kind,
            NodeKind::Scalar { quoted: false, .. }
        ));
    }
}
