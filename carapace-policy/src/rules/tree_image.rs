//! The built-in packs' YAML trees in a compact binary form, written by `build.rs` and read
//! back at run time: a one-call load (`hook --local`, `check --local`) otherwise spent about
//! 40 % of its instructions in yaml-rust2 parsing text that never changes. The tree read back
//! is the one `yaml::parse` gives (spans included), so validation and its diagnostics are
//! unchanged; `build.rs` includes this file too, so both sides share one format.
//!
//! Format, pre-order: one tag byte per node, its span (line, column) as LEB128 numbers, then
//! for a scalar its length and UTF-8 bytes, for a list or mapping its number of children
//! (a mapping's children are key, value pairs). The image of a file starts with 1 and its
//! root, or is the single byte 0 for an empty file.

use super::yaml::{Node, NodeKind, Span};

const PLAIN: u8 = 0;
const QUOTED: u8 = 1;
const SEQ: u8 = 2;
const MAP: u8 = 3;
const ALIAS: u8 = 4;

/// The image of a parsed file (`yaml::parse`'s `Ok` value).
#[must_use]
#[cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "the library reads images; build.rs and the tests write them"
    )
)]
pub fn encode(root: Option<&Node>) -> Vec<u8> {
    let mut out = Vec::new();
    match root {
        None => out.push(0),
        Some(node) => {
            out.push(1);
            node_into(node, &mut out);
        }
    }
    out
}

fn node_into(node: &Node, out: &mut Vec<u8>) {
    let tag = match &node.kind {
        NodeKind::Scalar { quoted: false, .. } => PLAIN,
        NodeKind::Scalar { quoted: true, .. } => QUOTED,
        NodeKind::Seq(_) => SEQ,
        NodeKind::Map(_) => MAP,
        NodeKind::Alias => ALIAS,
    };
    out.push(tag);
    number_into(node.span.line, out);
    number_into(node.span.col, out);
    match &node.kind {
        NodeKind::Scalar { value, .. } => {
            number_into(value.len(), out);
            out.extend_from_slice(value.as_bytes());
        }
        NodeKind::Seq(items) => {
            number_into(items.len(), out);
            for item in items {
                node_into(item, out);
            }
        }
        NodeKind::Map(entries) => {
            number_into(entries.len(), out);
            for (k, v) in entries {
                node_into(k, out);
                node_into(v, out);
            }
        }
        NodeKind::Alias => {}
    }
}

fn number_into(mut n: usize, out: &mut Vec<u8>) {
    loop {
        // Seven bits a byte, the high bit set while more follow (LEB128).
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// An image that does not read back (never one `build.rs` wrote: a test reads them all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// The tree an image holds (`None` for an empty file).
pub fn decode(image: &[u8]) -> Result<Option<Node>, Malformed> {
    let mut reader = Reader { rest: image };
    let root = match reader.byte() {
        Some(0) => None,
        Some(1) => Some(reader.node(0).ok_or(Malformed)?),
        _ => return Err(Malformed),
    };
    if reader.rest.is_empty() {
        Ok(root)
    } else {
        Err(Malformed)
    }
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(b)
    }

    fn number(&mut self) -> Option<usize> {
        let mut n = 0usize;
        for shift in (0..usize::BITS).step_by(7) {
            let b = self.byte()?;
            n |= usize::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    /// A node at nesting `depth` (bounded as `yaml::parse` bounds it, so that a malformed
    /// image cannot recurse without end).
    fn node(&mut self, depth: usize) -> Option<Node> {
        if depth > super::yaml::MAX_DEPTH {
            return None;
        }
        let tag = self.byte()?;
        let span = Span {
            line: self.number()?,
            col: self.number()?,
        };
        let kind = match tag {
            PLAIN | QUOTED => {
                let len = self.number()?;
                if len > self.rest.len() {
                    return None;
                }
                let (text, rest) = self.rest.split_at(len);
                self.rest = rest;
                NodeKind::Scalar {
                    value: std::str::from_utf8(text).ok()?.to_owned(),
                    quoted: tag == QUOTED,
                }
            }
            SEQ => {
                let n = self.number()?;
                // Each child takes at least four bytes: a count beyond that is malformed
                // (and must not reserve memory it names).
                let mut items = Vec::with_capacity(n.min(self.rest.len() / 4));
                for _ in 0..n {
                    items.push(self.node(depth + 1)?);
                }
                NodeKind::Seq(items)
            }
            MAP => {
                let n = self.number()?;
                let mut entries = Vec::with_capacity(n.min(self.rest.len() / 8));
                for _ in 0..n {
                    let k = self.node(depth + 1)?;
                    let v = self.node(depth + 1)?;
                    entries.push((k, v));
                }
                NodeKind::Map(entries)
            }
            ALIAS => NodeKind::Alias,
            _ => return None,
        };
        Some(Node { kind, span })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{builtin, yaml};

    #[test]
    fn every_pack_image_is_the_parsed_tree() {
        for name in builtin::NAMES {
            let text = builtin::text(name).unwrap();
            let parsed = yaml::parse(text).unwrap();
            let image = builtin::tree_image(name).unwrap();
            assert_eq!(decode(image), Ok(parsed.clone()), "pack {name}");
            assert_eq!(encode(parsed.as_ref()), image, "pack {name}");
        }
    }

    #[test]
    fn trees_round_trip() {
        let texts = [
            "",
            "a: 1\n",
            "a: &ref \"1\"\nb: [x, 'y', ~]\nc: *ref\n",
            "- {k: v, \"q\": [1, [2, [3]]]}\n- é: ü\n",
            &format!("k: {}\n", "long ".repeat(100)),
        ];
        for text in texts {
            let tree = yaml::parse(text).unwrap();
            assert_eq!(decode(&encode(tree.as_ref())), Ok(tree), "{text:?}");
        }
    }

    #[test]
    fn malformed_images_are_refused_without_panic() {
        let image = encode(yaml::parse("a: [b, {c: d}]\n").unwrap().as_ref());
        for cut in 0..image.len() {
            assert_eq!(decode(&image[..cut]), Err(Malformed), "cut at {cut}");
        }
        let mut long = image.clone();
        long.push(0);
        assert_eq!(decode(&long), Err(Malformed));
        assert_eq!(decode(&[2]), Err(Malformed));
        // A count far beyond the bytes left, and a nesting past the limit.
        assert_eq!(
            decode(&[1, SEQ, 1, 1, 0xff, 0xff, 0xff, 0x7f]),
            Err(Malformed)
        );
        let mut deep = vec![1];
        for _ in 0..=yaml::MAX_DEPTH + 1 {
            deep.extend_from_slice(&[SEQ, 1, 1, 1]);
        }
        assert_eq!(decode(&deep), Err(Malformed));
    }
}
