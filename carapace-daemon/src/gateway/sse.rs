//! Server-sent events, split incrementally out of a byte stream that arrives in arbitrary
//! chunks. Each event keeps its raw bytes, so an event the gateway lets through reaches the
//! agent byte for byte; its `event` name and `data` are parsed for the filters.
//!
//! Follows the WHATWG event-stream grammar: lines end in CRLF, LF or CR; a blank line ends
//! an event; `data:` lines join with `\n`; one space after the colon is dropped; lines
//! starting with `:` are comments.
use bytes::BytesMut;
use hyper::body::Bytes;

/// Largest event held while waiting for its end; a longer one fails the stream (closed).
pub const MAX_EVENT: usize = 16 << 20;

/// One event: its bytes as received (blank line included) and its parsed fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub raw: Bytes,
    /// The `event:` field, empty when absent.
    pub name: String,
    pub data: String,
}

impl Event {
    /// Parses the fields of `raw` (one whole event).
    #[must_use]
    pub fn parse(raw: Bytes) -> Self {
        let text = String::from_utf8_lossy(&raw);
        let mut name = String::new();
        let mut data: Option<String> = None;
        for line in lines(&text) {
            if line.is_empty() || line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => value.clone_into(&mut name),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
        Self {
            raw,
            name,
            data: data.unwrap_or_default(),
        }
    }

    /// The data as JSON, `None` when it is not JSON.
    #[must_use]
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// Formats an event the way the providers send them.
#[must_use]
pub fn format(name: &str, data: &serde_json::Value) -> Vec<u8> {
    if name.is_empty() {
        format!("data: {data}\n\n").into_bytes()
    } else {
        format!("event: {name}\ndata: {data}\n\n").into_bytes()
    }
}

fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("an event of the upstream's stream exceeds {MAX_EVENT} bytes")]
pub struct TooLong;

/// Splits a byte stream into events as they complete. Each event's bytes are cut off the
/// front of the buffer without a copy (a burst of events arrives in one read: copying the
/// rest after each cut cost as much again as the events).
#[derive(Debug, Default)]
pub struct Splitter {
    buf: BytesMut,
    /// Bytes of `buf` already scanned without finding the end of the event.
    scanned: usize,
}

impl Splitter {
    /// Adds a chunk and returns the events it completes.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Event>, TooLong> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.event_end() {
            let raw = self.buf.split_to(end).freeze();
            self.scanned = 0;
            events.push(Event::parse(raw));
        }
        if self.buf.len() > MAX_EVENT {
            return Err(TooLong);
        }
        Ok(events)
    }

    /// The end of the stream: what is left, an event without its blank line, if anything.
    pub fn finish(&mut self) -> Option<Event> {
        self.scanned = 0;
        (!self.buf.is_empty()).then(|| Event::parse(self.buf.split().freeze()))
    }

    /// Where the first complete event in `buf` ends (after its blank line). A CR at the end
    /// of the buffer may be the first half of a CRLF, so it does not end a line yet.
    fn event_end(&mut self) -> Option<usize> {
        let buf = &self.buf;
        // Resume where the last scan stopped (at the CR whose partner it could not see yet,
        // or at the end): nothing before it holds a blank line.
        let mut i = self.scanned;
        // Whether the bytes before `i` end a line (true at the start: an empty line there
        // ends an event, as a stream that starts with a blank line is one empty event).
        let mut at_line_start = i == 0 || matches!(buf.get(i - 1), Some(b'\n' | b'\r'));
        if i > 0 && buf.get(i - 1) == Some(&b'\r') && buf.get(i) == Some(&b'\n') {
            // We are between the CR and LF of one line ending.
            i += 1;
        }
        while i < buf.len() {
            let eol = match buf[i] {
                b'\n' => Some(i + 1),
                b'\r' => match buf.get(i + 1) {
                    Some(b'\n') => Some(i + 2),
                    Some(_) => Some(i + 1),
                    None => {
                        self.scanned = i;
                        return None;
                    }
                },
                _ => None,
            };
            match eol {
                Some(next) if at_line_start => return Some(next),
                Some(next) => {
                    at_line_start = true;
                    i = next;
                }
                None => {
                    at_line_start = false;
                    i += 1;
                }
            }
        }
        self.scanned = buf.len();
        None
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn split_all(input: &[u8], cuts: &[usize]) -> (Vec<Event>, Option<Event>) {
        let mut s = Splitter::default();
        let mut events = Vec::new();
        let mut at = 0;
        for &cut in cuts {
            let cut = cut.min(input.len()).max(at);
            events.extend(s.push(&input[at..cut]).expect("not too long"));
            at = cut;
        }
        events.extend(s.push(&input[at..]).expect("not too long"));
        (events, s.finish())
    }

    #[test]
    fn parses_names_data_and_line_endings() {
        let input = b"event: a\ndata: {\"x\":1}\n\n: comment\r\ndata:one\r\ndata: two\r\n\r\nevent:c\rdata: 3\r\r";
        let (mut events, rest) = split_all(input, &[]);
        // The last CR could be half of a CRLF: only the end of the stream settles it.
        events.extend(rest);
        let fields: Vec<(&str, &str)> = events
            .iter()
            .map(|e| (e.name.as_str(), e.data.as_str()))
            .collect();
        assert_eq!(fields, [("a", "{\"x\":1}"), ("", "one\ntwo"), ("c", "3")]);
        assert_eq!(&events[0].raw[..], b"event: a\ndata: {\"x\":1}\n\n");
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_ending() {
        let input = b"data: x\r\n\r\ndata: y\r\n\r\n";
        for cut in 0..input.len() {
            let (events, rest) = split_all(input, &[cut]);
            assert_eq!(rest, None, "cut at {cut}");
            assert_eq!(events.len(), 2, "cut at {cut}");
            assert_eq!(&events[0].raw[..], b"data: x\r\n\r\n");
        }
    }

    #[test]
    fn incomplete_events_wait_and_end_of_stream_flushes_them() {
        let mut s = Splitter::default();
        assert!(s.push(b"event: a\ndata: 1\n").unwrap().is_empty());
        let e = s.finish().expect("the partial event");
        assert_eq!((e.name.as_str(), e.data.as_str()), ("a", "1"));
        assert!(s.finish().is_none());
    }

    #[test]
    fn oversized_events_fail() {
        let mut s = Splitter::default();
        let big = vec![b'x'; MAX_EVENT + 1];
        assert_eq!(s.push(&big), Err(TooLong));
    }

    fn sse_like() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"data: ".to_vec()),
            Just(b"event: x".to_vec()),
            Just(b":".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..8),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        /// Whatever the bytes and however they are chunked: no panic, the raw bytes of the
        /// events and the rest give back the input exactly, and chunking changes nothing.
        #[test]
        fn roundtrips_and_ignores_chunking(
            input in sse_like(),
            cuts in proptest::collection::vec(0usize..400, 0..8),
        ) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            let (whole, whole_rest) = split_all(&input, &[]);
            let (chunked, chunked_rest) = split_all(&input, &cuts);
            let mut joined: Vec<u8> = chunked.iter().flat_map(|e| e.raw.to_vec()).collect();
            if let Some(rest) = &chunked_rest {
                joined.extend_from_slice(&rest.raw);
            }
            prop_assert_eq!(&joined, &input);
            prop_assert_eq!(whole, chunked);
            prop_assert_eq!(whole_rest, chunked_rest);
        }

        #[test]
        fn formatted_events_parse_back(name in "[a-z_]{0,12}", text in any::<String>()) {
            let data = serde_json::json!({"text": text});
            let bytes = format(&name, &data);
            let (events, rest) = split_all(&bytes, &[]);
            prop_assert_eq!(rest, None);
            prop_assert_eq!(events.len(), 1);
            prop_assert_eq!(&events[0].name, &name);
            prop_assert_eq!(events[0].json(), Some(data));
        }
    }
}
