//! The few fields of a streamed event that say whether it can carry a tool call, read
//! without building the event's JSON tree. Most events of an answer are text deltas; the
//! filters let those through on this reading alone and parse the rest in full.
//!
//! Reading is strict where it matters: the whole text must be one valid JSON value (unknown
//! fields are skipped but checked), and a duplicate or mistyped field fails the reading, so
//! the caller falls back to the full parse, which is what a client would act on.
use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;

/// `type` and `index` of an Anthropic event (`content_block_delta` at index 2).
#[derive(Deserialize)]
pub struct Anthropic<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    pub index: Option<u64>,
}

/// `type` and `output_index` of an event of the `OpenAI` Responses API.
#[derive(Deserialize)]
pub struct Responses<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    pub output_index: Option<u64>,
}

/// A Chat Completions chunk, down to whether any choice's delta carries a call.
#[derive(Deserialize)]
pub struct Chat {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    delta: Option<Delta>,
}

#[derive(Deserialize)]
struct Delta {
    tool_calls: Option<IgnoredAny>,
    function_call: Option<IgnoredAny>,
}

impl Chat {
    /// No choice's delta has a `tool_calls` or `function_call` (null counts as none).
    pub fn without_calls(&self) -> bool {
        self.choices.iter().all(|c| {
            c.delta
                .as_ref()
                .is_none_or(|d| d.tool_calls.is_none() && d.function_call.is_none())
        })
    }
}

/// Reads `T` from an event's data; `None` when the data is not exactly that shape.
pub fn read<'a, T: Deserialize<'a>>(data: &'a str) -> Option<T> {
    serde_json::from_str(data).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_read_only_from_exact_json() {
        let a: Anthropic<'_> = read(
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"hi"}}"#,
        )
        .expect("a delta");
        assert_eq!((a.kind.as_ref(), a.index), ("content_block_delta", Some(3)));
        // Two `type` fields, an index that is no number, trailing text, or broken JSON:
        // no head, so the full reading decides.
        for bad in [
            r#"{"type":"content_block_delta","index":0,"type":"content_block_start"}"#,
            r#"{"type":"content_block_delta","index":"0"}"#,
            r#"{"type":"content_block_delta","index":0} x"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"text":"#,
        ] {
            assert!(read::<Anthropic<'_>>(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_chat_chunk_says_whether_it_carries_calls() {
        let text: Chat = read(
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"hi","tool_calls":null},"finish_reason":null}]}"#,
        )
        .expect("a chunk");
        assert!(text.without_calls());
        let call: Chat = read(
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"x"}}]}}]}"#,
        )
        .expect("a chunk");
        assert!(!call.without_calls());
        let legacy: Chat =
            read(r#"{"choices":[{"delta":{"function_call":{"name":"x"}}}]}"#).expect("a chunk");
        assert!(!legacy.without_calls());
        // A duplicate `tool_calls` (the second one could be the one a client keeps) fails.
        assert!(read::<Chat>(
            r#"{"choices":[{"delta":{"tool_calls":null,"tool_calls":[{"index":0}]}}]}"#
        )
        .is_none());
    }
}
