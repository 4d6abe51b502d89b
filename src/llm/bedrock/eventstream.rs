//! An incremental decoder for AWS event streams
//! (`application/vnd.amazon.eventstream`), the binary framing Bedrock's
//! streaming APIs use instead of server-sent events.
//!
//! A message is a prelude (total length and headers length, both u32
//! big-endian, then a CRC32 of those eight bytes), typed headers, a payload
//! and a CRC32 of everything before it. Bytes arrive in arbitrary chunks, so
//! the decoder buffers until a whole message is there; it checks the prelude
//! CRC as soon as the prelude is complete, so a corrupt length is caught
//! before the decoder waits for (or allocates) a message that will never
//! come. A decoding error is final: after a bad frame nothing that follows
//! can be trusted to start on a message boundary.
//!
//! The format is small and fixed; the only crate for it is
//! `aws-smithy-eventstream`, which would bring the smithy runtime along for
//! ninety lines of framing.

use bytes::{Buf, Bytes, BytesMut};

/// Total length and headers length.
const PRELUDE_LEN: usize = 8;
/// The prelude and its CRC.
const PRELUDE_WITH_CRC: usize = PRELUDE_LEN + 4;
/// A message with no headers and no payload: prelude, its CRC, message CRC.
const MIN_MESSAGE_LEN: usize = PRELUDE_WITH_CRC + 4;
/// AWS caps a message at 16 MiB and its headers at 128 KiB; anything larger
/// is a corrupt length, not a message worth buffering.
const MAX_MESSAGE_LEN: usize = 16 * 1024 * 1024;
const MAX_HEADERS_LEN: usize = 128 * 1024;

/// A header value; the type byte on the wire selects the variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderValue {
    Bool(bool),
    Byte(i8),
    Short(i16),
    Int(i32),
    Long(i64),
    Bytes(Vec<u8>),
    String(String),
    /// Milliseconds since the Unix epoch.
    Timestamp(i64),
    Uuid([u8; 16]),
}

impl HeaderValue {
    /// The wire type byte of this value.
    #[cfg(test)]
    fn type_byte(&self) -> u8 {
        match self {
            HeaderValue::Bool(true) => 0,
            HeaderValue::Bool(false) => 1,
            HeaderValue::Byte(_) => 2,
            HeaderValue::Short(_) => 3,
            HeaderValue::Int(_) => 4,
            HeaderValue::Long(_) => 5,
            HeaderValue::Bytes(_) => 6,
            HeaderValue::String(_) => 7,
            HeaderValue::Timestamp(_) => 8,
            HeaderValue::Uuid(_) => 9,
        }
    }
}

/// One decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub headers: Vec<(String, HeaderValue)>,
    pub payload: Bytes,
}

impl Message {
    /// The value of a string header (`:event-type`, `:message-type`, …).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find_map(|(n, value)| match value {
            HeaderValue::String(s) if n == name => Some(s.as_str()),
            _ => None,
        })
    }
}

/// Why the bytes are not an event stream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("prelude checksum mismatch (sent {sent:#010x}, computed {computed:#010x})")]
    PreludeCrc { sent: u32, computed: u32 },
    #[error("message checksum mismatch (sent {sent:#010x}, computed {computed:#010x})")]
    MessageCrc { sent: u32, computed: u32 },
    #[error("impossible lengths: message {total} bytes, headers {headers} bytes")]
    Length { total: usize, headers: usize },
    #[error("bad header: {0}")]
    Header(String),
    #[error("the stream was already corrupt")]
    AlreadyFailed,
}

/// Buffers bytes and yields whole, checked messages.
#[derive(Debug, Default)]
pub struct Decoder {
    buffer: BytesMut,
    failed: bool,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next whole message, if the buffer holds one. Messages are taken
    /// one at a time so that a reader can stop at its final event without
    /// judging the bytes after it. After an error the decoder stays failed.
    pub fn next_message(&mut self) -> Result<Option<Message>, DecodeError> {
        if self.failed {
            return Err(DecodeError::AlreadyFailed);
        }
        let next = self.decode_one();
        self.failed = next.is_err();
        next
    }

    /// Pushes a chunk and returns every message it completes.
    #[cfg(test)]
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Message>, DecodeError> {
        self.push(chunk);
        let mut messages = Vec::new();
        while let Some(message) = self.next_message()? {
            messages.push(message);
        }
        Ok(messages)
    }

    fn decode_one(&mut self) -> Result<Option<Message>, DecodeError> {
        if self.buffer.len() < PRELUDE_WITH_CRC {
            return Ok(None);
        }
        let total = be_u32(&self.buffer[0..4]) as usize;
        let headers_len = be_u32(&self.buffer[4..8]) as usize;
        let sent = be_u32(&self.buffer[8..12]);
        let computed = crc32fast::hash(&self.buffer[..PRELUDE_LEN]);
        if sent != computed {
            return Err(DecodeError::PreludeCrc { sent, computed });
        }
        if !(MIN_MESSAGE_LEN..=MAX_MESSAGE_LEN).contains(&total)
            || headers_len > MAX_HEADERS_LEN
            || headers_len > total - MIN_MESSAGE_LEN
        {
            return Err(DecodeError::Length {
                total,
                headers: headers_len,
            });
        }
        if self.buffer.len() < total {
            return Ok(None);
        }
        let mut frame = self.buffer.split_to(total).freeze();
        let sent = be_u32(&frame[total - 4..]);
        let computed = crc32fast::hash(&frame[..total - 4]);
        if sent != computed {
            return Err(DecodeError::MessageCrc { sent, computed });
        }
        frame.advance(PRELUDE_WITH_CRC);
        let headers = frame.split_to(headers_len);
        frame.truncate(frame.len() - 4);
        Ok(Some(Message {
            headers: parse_headers(headers)?,
            payload: frame,
        }))
    }
}

fn be_u32(bytes: &[u8]) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[..4]);
    u32::from_be_bytes(word)
}

/// Takes `n` bytes off the front, or says which header ran short.
fn take(bytes: &mut Bytes, n: usize, name: &str) -> Result<Bytes, DecodeError> {
    if bytes.remaining() < n {
        return Err(DecodeError::Header(format!(
            "header `{name}` runs past the end of the headers"
        )));
    }
    Ok(bytes.split_to(n))
}

fn parse_headers(mut bytes: Bytes) -> Result<Vec<(String, HeaderValue)>, DecodeError> {
    let mut headers = Vec::new();
    while bytes.has_remaining() {
        let name_len = usize::from(bytes.get_u8());
        let name = take(&mut bytes, name_len, "?")?;
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| DecodeError::Header("a header name is not UTF-8".to_string()))?;
        let kind = take(&mut bytes, 1, &name)?[0];
        let value = match kind {
            0 => HeaderValue::Bool(true),
            1 => HeaderValue::Bool(false),
            2 => HeaderValue::Byte(take(&mut bytes, 1, &name)?.get_i8()),
            3 => HeaderValue::Short(take(&mut bytes, 2, &name)?.get_i16()),
            4 => HeaderValue::Int(take(&mut bytes, 4, &name)?.get_i32()),
            5 => HeaderValue::Long(take(&mut bytes, 8, &name)?.get_i64()),
            6 | 7 => {
                let len = usize::from(take(&mut bytes, 2, &name)?.get_u16());
                let value = take(&mut bytes, len, &name)?.to_vec();
                if kind == 6 {
                    HeaderValue::Bytes(value)
                } else {
                    HeaderValue::String(String::from_utf8(value).map_err(|_| {
                        DecodeError::Header(format!("the value of `{name}` is not UTF-8"))
                    })?)
                }
            }
            8 => HeaderValue::Timestamp(take(&mut bytes, 8, &name)?.get_i64()),
            9 => {
                let mut uuid = [0; 16];
                uuid.copy_from_slice(&take(&mut bytes, 16, &name)?);
                HeaderValue::Uuid(uuid)
            }
            // The length of an unknown type is unknown, so nothing after it
            // can be read.
            other => {
                return Err(DecodeError::Header(format!(
                    "`{name}` has the unknown value type {other}"
                )));
            }
        };
        headers.push((name, value));
    }
    Ok(headers)
}

/// Encodes one message; the test half of the format, used to turn readable
/// fixtures into the bytes Bedrock sends.
#[cfg(test)]
pub fn encode(headers: &[(&str, HeaderValue)], payload: &[u8]) -> Vec<u8> {
    let mut encoded_headers = Vec::new();
    for (name, value) in headers {
        encoded_headers.push(name.len() as u8);
        encoded_headers.extend_from_slice(name.as_bytes());
        encoded_headers.push(value.type_byte());
        match value {
            HeaderValue::Bool(_) => {}
            HeaderValue::Byte(v) => encoded_headers.extend_from_slice(&v.to_be_bytes()),
            HeaderValue::Short(v) => encoded_headers.extend_from_slice(&v.to_be_bytes()),
            HeaderValue::Int(v) => encoded_headers.extend_from_slice(&v.to_be_bytes()),
            HeaderValue::Long(v) | HeaderValue::Timestamp(v) => {
                encoded_headers.extend_from_slice(&v.to_be_bytes())
            }
            HeaderValue::Bytes(v) => {
                encoded_headers.extend_from_slice(&(v.len() as u16).to_be_bytes());
                encoded_headers.extend_from_slice(v);
            }
            HeaderValue::String(v) => {
                encoded_headers.extend_from_slice(&(v.len() as u16).to_be_bytes());
                encoded_headers.extend_from_slice(v.as_bytes());
            }
            HeaderValue::Uuid(v) => encoded_headers.extend_from_slice(v),
        }
    }
    let total = MIN_MESSAGE_LEN + encoded_headers.len() + payload.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(encoded_headers.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out.extend_from_slice(&encoded_headers);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn string(value: &str) -> HeaderValue {
        HeaderValue::String(value.to_string())
    }

    fn event(kind: &str, payload: &str) -> Vec<u8> {
        encode(
            &[
                (":event-type", string(kind)),
                (":content-type", string("application/json")),
                (":message-type", string("event")),
            ],
            payload.as_bytes(),
        )
    }

    fn message(headers: &[(&str, HeaderValue)], payload: &str) -> Message {
        Message {
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.clone()))
                .collect(),
            payload: Bytes::copy_from_slice(payload.as_bytes()),
        }
    }

    /// Vectors from the Elixir `event_stream` package's documentation: bytes
    /// this crate's encoder did not produce.
    #[test]
    fn decodes_independently_published_frames() {
        let no_headers: &[u8] = &[
            0, 0, 0, 30, 0, 0, 0, 0, 186, 242, 246, 138, 123, 34, 102, 111, 111, 34, 58, 32, 34,
            98, 97, 114, 34, 125, 174, 114, 88, 228,
        ];
        let with_header: &[u8] = &[
            0, 0, 0, 62, 0, 0, 0, 32, 64, 93, 249, 70, 12, 99, 111, 110, 116, 101, 110, 116, 45,
            116, 121, 112, 101, 7, 0, 16, 97, 112, 112, 108, 105, 99, 97, 116, 105, 111, 110, 47,
            106, 115, 111, 110, 123, 34, 102, 111, 111, 34, 58, 32, 34, 98, 97, 114, 34, 125, 111,
            162, 191, 59,
        ];
        let mut decoder = Decoder::new();
        let input = [no_headers, with_header].concat();
        assert_eq!(
            decoder.feed(&input).unwrap(),
            vec![
                message(&[], r#"{"foo": "bar"}"#),
                message(
                    &[("content-type", string("application/json"))],
                    r#"{"foo": "bar"}"#
                ),
            ]
        );
        // And the encoder agrees with them byte for byte.
        assert_eq!(encode(&[], br#"{"foo": "bar"}"#), no_headers);
        assert_eq!(
            encode(
                &[("content-type", string("application/json"))],
                br#"{"foo": "bar"}"#
            ),
            with_header
        );
    }

    #[test]
    fn every_split_of_a_multi_frame_stream_decodes_the_same() {
        let input = [
            event("messageStart", r#"{"role":"assistant"}"#),
            event(
                "contentBlockDelta",
                r#"{"contentBlockIndex":0,"delta":{"text":"Hé"}}"#,
            ),
            event("messageStop", r#"{"stopReason":"end_turn"}"#),
        ]
        .concat();
        let whole = Decoder::new().feed(&input).unwrap();
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[1].header(":event-type"), Some("contentBlockDelta"));
        for split in 0..=input.len() {
            let mut decoder = Decoder::new();
            let mut messages = decoder.feed(&input[..split]).unwrap();
            messages.extend(decoder.feed(&input[split..]).unwrap());
            assert_eq!(messages, whole, "split at byte {split}");
        }
        // Byte by byte, too.
        let mut decoder = Decoder::new();
        let mut messages = Vec::new();
        for byte in &input {
            messages.extend(decoder.feed(std::slice::from_ref(byte)).unwrap());
        }
        assert_eq!(messages, whole);
    }

    #[test]
    fn every_header_type_is_read_and_skipped_past() {
        let headers = [
            ("t", HeaderValue::Bool(true)),
            ("f", HeaderValue::Bool(false)),
            ("byte", HeaderValue::Byte(-3)),
            ("short", HeaderValue::Short(-300)),
            ("int", HeaderValue::Int(70_000)),
            ("long", HeaderValue::Long(-5_000_000_000)),
            ("bytes", HeaderValue::Bytes(vec![0, 255, 7])),
            ("time", HeaderValue::Timestamp(1_700_000_000_000)),
            ("id", HeaderValue::Uuid([9; 16])),
            (":event-type", string("metadata")),
        ];
        let decoded = Decoder::new()
            .feed(&encode(&headers, b"{}"))
            .unwrap()
            .remove(0);
        assert_eq!(decoded, message(&headers, "{}"));
        assert_eq!(decoded.header(":event-type"), Some("metadata"));
        // A typed header is not a string header.
        assert_eq!(decoded.header("int"), None);
    }

    #[test]
    fn bad_checksums_are_rejected() {
        let good = event("messageStop", r#"{"stopReason":"end_turn"}"#);

        let mut bad_payload = good.clone();
        let at = bad_payload.len() - 6;
        bad_payload[at] ^= 1;
        assert!(matches!(
            Decoder::new().feed(&bad_payload),
            Err(DecodeError::MessageCrc { .. })
        ));

        let mut bad_message_crc = good.clone();
        let last = bad_message_crc.len() - 1;
        bad_message_crc[last] ^= 0x80;
        assert!(matches!(
            Decoder::new().feed(&bad_message_crc),
            Err(DecodeError::MessageCrc { .. })
        ));

        // A corrupt length fails on the prelude alone, without waiting for
        // the gigabytes it announces.
        let mut bad_length = good.clone();
        bad_length[0] = 0x40;
        let mut decoder = Decoder::new();
        assert!(matches!(
            decoder.feed(&bad_length[..12]),
            Err(DecodeError::PreludeCrc { .. })
        ));
        // The decoder stays failed.
        assert_eq!(decoder.feed(&good), Err(DecodeError::AlreadyFailed));
    }

    #[test]
    fn impossible_lengths_and_unknown_header_types_are_errors() {
        // A checksummed prelude announcing headers longer than the message.
        let mut prelude = Vec::new();
        prelude.extend_from_slice(&20u32.to_be_bytes());
        prelude.extend_from_slice(&10u32.to_be_bytes());
        prelude.extend_from_slice(&crc32fast::hash(&prelude).to_be_bytes());
        assert_eq!(
            Decoder::new().feed(&prelude),
            Err(DecodeError::Length {
                total: 20,
                headers: 10
            })
        );

        // Header type 10 does not exist; its length cannot be known.
        let mut frame = encode(&[("x", HeaderValue::Bool(true))], b"");
        let type_at = PRELUDE_WITH_CRC + 2;
        frame[type_at] = 10;
        let len = frame.len();
        let crc = crc32fast::hash(&frame[..len - 4]).to_be_bytes();
        frame[len - 4..].copy_from_slice(&crc);
        let Err(DecodeError::Header(message)) = Decoder::new().feed(&frame) else {
            panic!("an unknown header type must fail");
        };
        assert_eq!(message, "`x` has the unknown value type 10");

        // A string header whose length runs past the headers.
        let mut frame = encode(&[("s", string("abc"))], b"{}");
        let len_at = PRELUDE_WITH_CRC + 3;
        frame[len_at + 1] = 200;
        let len = frame.len();
        let crc = crc32fast::hash(&frame[..len - 4]).to_be_bytes();
        frame[len - 4..].copy_from_slice(&crc);
        assert!(matches!(
            Decoder::new().feed(&frame),
            Err(DecodeError::Header(_))
        ));
    }

    #[test]
    fn a_message_is_yielded_only_when_complete() {
        let frame = event("metadata", "{}");
        let mut decoder = Decoder::new();
        assert_eq!(decoder.feed(&frame[..frame.len() - 1]).unwrap(), vec![]);
        assert_eq!(decoder.feed(&frame[frame.len() - 1..]).unwrap().len(), 1);
        assert_eq!(decoder.next_message(), Ok(None));
    }
}
