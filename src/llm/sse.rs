//! An incremental decoder for server-sent events (the WHATWG
//! `text/event-stream` format) over a byte stream.
//!
//! Bytes arrive in arbitrary chunks: a chunk may end inside a line, inside a
//! `\r\n` pair, or inside a multi-byte UTF-8 character. The decoder keeps the
//! unfinished line as bytes and decodes only whole lines, so every split of
//! the input yields the same events. (The `eventsource-stream` crate decodes
//! UTF-8 per chunk, which is exactly what breaks on such splits.)

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field; empty means the default type `message`.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    pub id: Option<String>,
}

#[derive(Debug, Default)]
pub struct Decoder {
    line: Vec<u8>,
    /// The previous chunk ended with `\r`; a leading `\n` belongs to it.
    after_cr: bool,
    /// Whether the first line has been seen (a BOM may precede it).
    started: bool,
    event: String,
    data: String,
    has_data: bool,
    id: Option<String>,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes and returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        let mut rest = bytes;
        if self.after_cr {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..pos]);
            let terminator = rest[pos];
            rest = &rest[pos + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.process_line(&line) {
                events.push(event);
            }
        }
        self.line.extend_from_slice(rest);
        events
    }

    /// Ends the stream. Per the spec an event without its blank line is
    /// discarded, so nothing is returned; callers detect cut-off streams by
    /// their provider's final event instead.
    pub fn finish(&mut self) {
        self.line.clear();
        self.reset_event();
    }

    fn process_line(&mut self, raw: &[u8]) -> Option<Event> {
        let mut line = String::from_utf8_lossy(raw);
        if !self.started {
            self.started = true;
            if let Some(stripped) = line.strip_prefix('\u{feff}') {
                line = stripped.to_string().into();
            }
        }
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<Event> {
        if !self.has_data {
            self.event.clear();
            return None;
        }
        let event = Event {
            event: std::mem::take(&mut self.event),
            data: std::mem::take(&mut self.data),
            id: self.id.clone(),
        };
        self.has_data = false;
        Some(event)
    }

    fn reset_event(&mut self) {
        self.event.clear();
        self.data.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn ev(event: &str, data: &str) -> Event {
        Event {
            event: event.to_string(),
            data: data.to_string(),
            id: None,
        }
    }

    /// The events of a provider's fixture, which the decoder must give the
    /// same wherever the bytes are split in two. A provider's parser sees
    /// nothing but these events, so its tests parse them once instead of
    /// once per split point (which took 40 s of a test run in debug
    /// builds).
    pub(crate) fn events_at_every_split(input: &[u8]) -> Vec<Event> {
        let whole = decode_in_two(input, input.len());
        for split in 0..input.len() {
            assert_eq!(decode_in_two(input, split), whole, "split at byte {split}");
        }
        whole
    }

    fn decode_in_two(input: &[u8], split: usize) -> Vec<Event> {
        let mut d = Decoder::new();
        let mut out = d.feed(&input[..split]);
        out.extend(d.feed(&input[split..]));
        out
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let input = "\u{feff}event: message_start\ndata: {\"a\":\"héllo → 😀\"}\r\n\r\n: keep-alive\r\rdata: one\ndata: two\n\nevent: x\ndata\n\n"
            .as_bytes();
        let expected = vec![
            ev("message_start", "{\"a\":\"héllo → 😀\"}"),
            ev("", "one\ntwo"),
            ev("x", ""),
        ];
        for split in 0..=input.len() {
            assert_eq!(decode_in_two(input, split), expected, "split at {split}");
        }
        // And one byte at a time.
        let mut d = Decoder::new();
        let all: Vec<Event> = input.iter().flat_map(|b| d.feed(&[*b])).collect();
        assert_eq!(all, expected);
    }

    #[test]
    fn every_pair_of_split_points_gives_the_same_events() {
        let input = "data: {\"x\":\"ü\"}\r\n\r\nevent: done\ndata: [DONE]\n\n".as_bytes();
        let expected = vec![ev("", "{\"x\":\"ü\"}"), ev("done", "[DONE]")];
        for a in 0..=input.len() {
            for b in a..=input.len() {
                let mut d = Decoder::new();
                let mut out = d.feed(&input[..a]);
                out.extend(d.feed(&input[a..b]));
                out.extend(d.feed(&input[b..]));
                assert_eq!(out, expected, "splits at {a}, {b}");
            }
        }
    }

    #[test]
    fn an_event_without_its_blank_line_is_not_dispatched() {
        let mut d = Decoder::new();
        assert_eq!(d.feed(b"data: partial\n"), vec![]);
        d.finish();
        assert_eq!(d.feed(b"data: next\n\n"), vec![ev("", "next")]);
    }

    #[test]
    fn ids_and_single_space_stripping() {
        let mut d = Decoder::new();
        let out = d.feed(b"id: 7\ndata:  two spaces\n\n");
        assert_eq!(
            out,
            vec![Event {
                event: String::new(),
                data: " two spaces".to_string(),
                id: Some("7".to_string()),
            }]
        );
    }
}
