//! Serialising a session's conversation once instead of at every call.
//!
//! A model call sends the whole history, but between two calls of a session
//! only its end changes: a tool result, an answer, the next prompt. Turning
//! 10,000 messages into the provider's JSON again for every call costs tens
//! of milliseconds; this module keeps each finished part of the
//! conversation as the bytes it became and converts only what is new.
//!
//! The history is cut into segments before each user message (a prompt or
//! a steering message). Every segment but the last few is kept serialised
//! with a copy of the messages it came from; a segment is reused only when
//! its messages are equal to the copy, so an edit, a pruned tool result or
//! a compaction converts the changed segments again. The newest segments
//! are always converted afresh: they carry the provider's prompt-cache
//! markers, which move with every call. A provider describes its format
//! with a [`Format`]; where the cut would change the result (two segments
//! whose ends would have joined into one turn), the whole conversation is
//! converted afresh, so the bytes are always those of the uncached path.
//!
//! The segments live in a small table keyed by the request's cache key (the
//! session id) and the model, so that no caller has to carry them; it
//! holds the last [`SESSIONS`] sessions that called, and drops the oldest
//! while what it keeps passes [`MAX_BYTES`] (a session unloaded for being
//! idle, or long gone, must not stay in memory through this table).

use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::{Message, Model, Request};

/// How many sessions' conversations are kept.
const SESSIONS: usize = 16;
/// How many bytes of serialised conversation the table keeps at most (the
/// messages' copies come on top, about as large again).
const MAX_BYTES: usize = 32 * 1024 * 1024;

/// How a provider turns messages into the elements of its conversation
/// array (`messages`, `contents`, `input`).
pub(crate) struct Format<'a> {
    /// The elements for `messages`, without prompt-cache markers.
    pub convert: &'a dyn Fn(&[Message]) -> Vec<Value>,
    /// Puts the prompt-cache markers on the newest elements; returns how
    /// many it placed.
    pub mark: &'a dyn Fn(&mut [Value]) -> usize,
    /// How many markers `mark` places when it sees the whole conversation.
    pub marks: usize,
    /// What decides whether two neighbouring elements would have been one
    /// (their role, in formats that join the messages of one role into a
    /// turn); `None` where elements never join.
    pub joins_by: fn(&Value) -> Option<&str>,
}

/// The conversation array of `request` for `model`, serialised: the same
/// bytes as `serde_json::to_vec` of the elements that `format.convert` and
/// `format.mark` make of the whole history, computed mostly from the
/// segments an earlier call of the same session serialised.
pub(crate) fn serialised(model: &Model, request: &Request, format: &Format<'_>) -> Vec<u8> {
    let Some(session) = request.cache_key.as_deref() else {
        return fresh(&request.messages, format);
    };
    let key = (session.to_string(), model_key(model));
    let segments = {
        let mut table = TABLE.lock();
        match table.iter().position(|(k, _, _)| *k == key) {
            Some(index) => {
                let entry = table.remove(index);
                let segments = Arc::clone(&entry.1);
                table.push(entry);
                segments
            }
            None => {
                let segments = Arc::new(Mutex::new(Vec::new()));
                if table.len() >= SESSIONS {
                    table.remove(0);
                }
                table.push((key.clone(), Arc::clone(&segments), 0));
                segments
            }
        }
    };
    let body = {
        let mut kept = segments.lock();
        build(&request.messages, format, &mut kept)
    };
    let mut table = TABLE.lock();
    if let Some(entry) = table.iter_mut().find(|(k, _, _)| *k == key) {
        entry.2 = body.len();
    }
    evict(&mut table, MAX_BYTES);
    body
}

/// Drops the oldest sessions (never the newest, which just called) while
/// the table keeps more than `max` bytes.
fn evict(table: &mut Table, max: usize) {
    while table.len() > 1 && table.iter().map(|(_, _, bytes)| bytes).sum::<usize>() > max {
        table.remove(0);
    }
}

/// (session, model), its segments, the size of its last body.
type Table = Vec<((String, String), Arc<Mutex<Vec<Segment>>>, usize)>;

/// Sessions' segments, least recently used first.
static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(|| Mutex::new(Vec::new()));

/// What the conversion of a model depends on: all of it (the id, the
/// provider, the API, the flags that change the format).
fn model_key(model: &Model) -> String {
    format!("{model:?}")
}

/// One serialised segment of the history.
pub(crate) struct Segment {
    messages: Vec<Message>,
    /// Its elements, serialised and joined by commas.
    json: String,
    first: Option<String>,
    last: Option<String>,
}

/// The whole conversation converted and serialised afresh.
pub(crate) fn fresh(messages: &[Message], format: &Format<'_>) -> Vec<u8> {
    let mut elements = (format.convert)(messages);
    (format.mark)(&mut elements);
    serde_json::to_vec(&elements).unwrap_or_default()
}

/// Where the segments start: at 0 and before every later user message.
fn starts(messages: &[Message]) -> Vec<usize> {
    std::iter::once(0)
        .chain(
            messages
                .iter()
                .enumerate()
                .skip(1)
                .filter(|(_, m)| matches!(m, Message::User { .. }))
                .map(|(i, _)| i),
        )
        .collect()
}

/// [`serialised`] with the session's segments `kept`, which it updates.
pub(crate) fn build(messages: &[Message], format: &Format<'_>, kept: &mut Vec<Segment>) -> Vec<u8> {
    let starts = starts(messages);
    // The newest segments, converted afresh, must hold every marker the
    // whole conversation would get.
    let mut tail_segment = starts.len().saturating_sub(2);
    let mut tail = loop {
        let mut elements = (format.convert)(&messages[starts[tail_segment]..]);
        let placed = (format.mark)(&mut elements);
        if placed >= format.marks || tail_segment == 0 {
            break elements;
        }
        tail_segment -= 1;
    };
    let mut segments: Vec<Segment> = Vec::with_capacity(tail_segment);
    let mut old = std::mem::take(kept).into_iter();
    for (index, &start) in starts[..tail_segment].iter().enumerate() {
        let part = &messages[start..starts[index + 1]];
        let reused = old.next().filter(|segment| segment.messages == part);
        let segment = match reused {
            Some(segment) => segment,
            None => {
                let elements = (format.convert)(part);
                let json = serde_json::to_string(&elements).unwrap_or_default();
                Segment {
                    messages: part.to_vec(),
                    json: json[1..json.len() - 1].to_string(),
                    first: elements
                        .first()
                        .and_then(format.joins_by)
                        .map(str::to_string),
                    last: elements
                        .last()
                        .and_then(format.joins_by)
                        .map(str::to_string),
                }
            }
        };
        segments.push(segment);
    }
    // Each cut must fall between elements that would not have joined.
    let tail_first = tail.first().and_then(format.joins_by).map(str::to_string);
    let mut previous: Option<&Option<String>> = None;
    let mut separable = true;
    for segment in &segments {
        if segment.json.is_empty() {
            separable = false;
            break;
        }
        if let Some(last) = previous
            && last.is_some()
            && *last == segment.first
        {
            separable = false;
            break;
        }
        previous = Some(&segment.last);
    }
    if let Some(last) = previous
        && (tail.is_empty() || (last.is_some() && *last == tail_first))
    {
        separable = false;
    }
    if !separable {
        *kept = segments;
        return fresh(messages, format);
    }
    let tail_json = serde_json::to_vec(&std::mem::take(&mut tail)).unwrap_or_default();
    if segments.is_empty() {
        // The tail is the whole conversation.
        return tail_json;
    }
    let size = segments.iter().map(|s| s.json.len() + 1).sum::<usize>() + tail_json.len();
    let mut out = Vec::with_capacity(size);
    out.push(b'[');
    for segment in &segments {
        out.extend_from_slice(segment.json.as_bytes());
        out.push(b',');
    }
    // The tail is not empty (checked above); its brackets are dropped.
    out.extend_from_slice(&tail_json[1..tail_json.len() - 1]);
    out.push(b']');
    *kept = segments;
    out
}

/// `element` (serialised) put in front of the serialised array `array`.
pub(crate) fn prepend(element: &Value, array: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(array.len() + 256);
    out.push(b'[');
    let _ = serde_json::to_writer(&mut out, element);
    if array.len() > 2 {
        out.push(b',');
        out.extend_from_slice(&array[1..]);
    } else {
        out.push(b']');
    }
    out
}

/// Serialises `body` with the conversation under `key` given as serialised
/// bytes: the bytes `serde_json::to_vec` gives for the body with the
/// conversation in place (its compact form: no spaces, keys in the map's
/// order).
pub(crate) fn body_with(body: &Map<String, Value>, key: &str, conversation: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(conversation.len() + 4096);
    out.push(b'{');
    for (index, (name, value)) in body.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        // Writing to a Vec cannot fail, nor can serialising a Value.
        let _ = serde_json::to_writer(&mut out, name);
        out.push(b':');
        if name == key {
            out.extend_from_slice(conversation);
        } else {
            let _ = serde_json::to_writer(&mut out, value);
        }
    }
    out.push(b'}');
    out
}

#[cfg(test)]
#[path = "conversation/tests.rs"]
mod tests;
