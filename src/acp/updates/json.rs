//! The replay's JSON writer: the bytes `serde_json::to_writer` writes
//! (compact), with a quicker string escape.
//!
//! A long session's replay is megabytes of text, much of it tool output
//! with a quote or a line break every few characters. serde_json looks at
//! such a string one byte at a time and hands every run between two escapes
//! to its writer on its own; escaping was the largest single cost of
//! `session/load`. Here a string is scanned eight bytes at a time and
//! gathered on the stack, about twice as fast on such text. Everything else (numbers, separators,
//! the raw values serde_json lets through) is written by serde_json's own
//! [`CompactFormatter`], so the output is the same byte for byte: the tests
//! compare the two on every kind of value serde can hand a serializer.

use serde::ser::{self, Serialize};
use serde_json::ser::{CompactFormatter, Formatter};

/// Appends `value` as compact JSON to `out`, exactly as
/// `serde_json::to_writer(out, value)` would.
pub fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), serde_json::Error> {
    value.serialize(&mut Writer { out })
}

/// What serde_json names the struct a `RawValue` serialises as, to let its
/// text through unchanged.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// The byte after `\` for the characters with a short escape, `u` for
/// the other control characters, 0 for what is written as it is.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// A high bit in each byte of `word` (little-endian) that is a control
/// character, a quote or a backslash. The lowest bit set is always such a
/// byte; bytes above it may be flagged wrongly (a borrow), so only the
/// lowest is used.
fn escape_mask(word: u64) -> u64 {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    let quote = zero_in(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_in(word ^ (ONES * u64::from(b'\\')));
    control | quote | backslash
}

/// Where the first byte to escape is in `bytes`, or its length.
fn first_escape(bytes: &[u8]) -> usize {
    let mut at = 0;
    while let Some(word) = bytes.get(at..at + 8)
        && let Ok(word) = <[u8; 8]>::try_from(word)
    {
        let mask = escape_mask(u64::from_le_bytes(word));
        if mask != 0 {
            return at + (mask.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    bytes[at..]
        .iter()
        .position(|byte| ESCAPE[usize::from(*byte)] != 0)
        .map_or(bytes.len(), |found| at + found)
}

/// `text` as a JSON string, escaped as serde_json escapes it.
///
/// Eight bytes are looked at a time, and the output is gathered in a
/// buffer on the stack: tool output has an escape every few bytes, and a
/// copy into the `Vec` for each run between two of them cost more than
/// the escaping.
fn write_str(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    const SIZE: usize = 512;
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // Most strings (keys, ids, prose) have nothing to escape, or not
    // before a while: up to the first escape they are copied as they are.
    let mut at = first_escape(bytes);
    out.extend_from_slice(&bytes[..at]);
    if at == bytes.len() {
        out.push(b'"');
        return;
    }
    let mut buffer = [0u8; SIZE];
    let mut used = 0;
    while at < bytes.len() {
        // Room for a word and an escape.
        if used > SIZE - 16 {
            out.extend_from_slice(&buffer[..used]);
            used = 0;
        }
        if let Some(word) = bytes.get(at..at + 8)
            && let Ok(word) = <[u8; 8]>::try_from(word)
        {
            // All eight go into the buffer; only those before the first
            // byte to escape count.
            buffer[used..used + 8].copy_from_slice(&word);
            let mask = escape_mask(u64::from_le_bytes(word));
            if mask == 0 {
                used += 8;
                at += 8;
                continue;
            }
            let clean = (mask.trailing_zeros() / 8) as usize;
            used += clean;
            at += clean;
        }
        let byte = bytes[at];
        match ESCAPE[usize::from(byte)] {
            0 => {
                buffer[used] = byte;
                used += 1;
            }
            b'u' => {
                buffer[used..used + 6].copy_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 0xf)],
                ]);
                used += 6;
            }
            escape => {
                buffer[used] = b'\\';
                buffer[used + 1] = escape;
                used += 2;
            }
        }
        at += 1;
    }
    out.extend_from_slice(&buffer[..used]);
    out.push(b'"');
}

/// Writing into a `Vec` cannot fail; serde_json's formatter still returns
/// an `io::Result`.
fn io(result: std::io::Result<()>) -> Result<(), serde_json::Error> {
    result.map_err(serde_json::Error::io)
}

impl<'a, 'w> ser::Serializer for &'a mut Writer<'w> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = Compound<'a, 'w>;
    type SerializeTuple = Compound<'a, 'w>;
    type SerializeTupleStruct = Compound<'a, 'w>;
    type SerializeTupleVariant = Compound<'a, 'w>;
    type SerializeMap = Compound<'a, 'w>;
    type SerializeStruct = Compound<'a, 'w>;
    type SerializeStructVariant = Compound<'a, 'w>;

    fn serialize_bool(self, v: bool) -> Result<(), Self::Error> {
        io(CompactFormatter.write_bool(self.out, v))
    }
    fn serialize_i8(self, v: i8) -> Result<(), Self::Error> {
        io(CompactFormatter.write_i8(self.out, v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), Self::Error> {
        io(CompactFormatter.write_i16(self.out, v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), Self::Error> {
        io(CompactFormatter.write_i32(self.out, v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), Self::Error> {
        io(CompactFormatter.write_i64(self.out, v))
    }
    fn serialize_i128(self, v: i128) -> Result<(), Self::Error> {
        io(CompactFormatter.write_i128(self.out, v))
    }
    fn serialize_u8(self, v: u8) -> Result<(), Self::Error> {
        io(CompactFormatter.write_u8(self.out, v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Self::Error> {
        io(CompactFormatter.write_u16(self.out, v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Self::Error> {
        io(CompactFormatter.write_u32(self.out, v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), Self::Error> {
        io(CompactFormatter.write_u64(self.out, v))
    }
    fn serialize_u128(self, v: u128) -> Result<(), Self::Error> {
        io(CompactFormatter.write_u128(self.out, v))
    }
    fn serialize_f32(self, v: f32) -> Result<(), Self::Error> {
        if v.is_finite() {
            io(CompactFormatter.write_f32(self.out, v))
        } else {
            io(CompactFormatter.write_null(self.out))
        }
    }
    fn serialize_f64(self, v: f64) -> Result<(), Self::Error> {
        if v.is_finite() {
            io(CompactFormatter.write_f64(self.out, v))
        } else {
            io(CompactFormatter.write_null(self.out))
        }
    }
    fn serialize_char(self, v: char) -> Result<(), Self::Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Self::Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Self::Error> {
        io(CompactFormatter.write_byte_array(self.out, v))
    }
    fn serialize_none(self) -> Result<(), Self::Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Self::Error> {
        io(CompactFormatter.write_null(self.out))
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Self::Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Self::Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'a, 'w>, Self::Error> {
        self.out.push(b'[');
        if len == Some(0) {
            self.out.push(b']');
            return Ok(Compound::new(self, State::Closed));
        }
        Ok(Compound::new(self, State::First))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'w>, Self::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, Self::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, Self::Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'a, 'w>, Self::Error> {
        self.out.push(b'{');
        if len == Some(0) {
            self.out.push(b'}');
            return Ok(Compound::new(self, State::Closed));
        }
        Ok(Compound::new(self, State::First))
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, Self::Error> {
        if name == RAW_VALUE {
            return Ok(Compound::new(self, State::Raw));
        }
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, Self::Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        self.serialize_map(Some(len))
    }
}

/// Where a sequence or map is: before its first element, after one, already
/// closed (it was empty), or a `RawValue` whose one field is the text.
#[derive(Clone, Copy, PartialEq)]
enum State {
    First,
    Rest,
    Closed,
    Raw,
}

struct Compound<'a, 'w> {
    writer: &'a mut Writer<'w>,
    state: State,
}

impl<'a, 'w> Compound<'a, 'w> {
    fn new(writer: &'a mut Writer<'w>, state: State) -> Self {
        Self { writer, state }
    }

    /// The comma before every element but the first.
    fn separate(&mut self) {
        if self.state == State::Rest {
            self.writer.out.push(b',');
        }
        self.state = State::Rest;
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), serde_json::Error> {
        self.separate();
        value.serialize(&mut *self.writer)
    }

    fn key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), serde_json::Error> {
        self.separate();
        key.serialize(KeyWriter {
            out: &mut *self.writer.out,
        })?;
        self.writer.out.push(b':');
        Ok(())
    }

    fn close(self, end: u8) {
        if self.state != State::Closed {
            self.writer.out.push(end);
        }
    }

    /// Closes a variant's value and the object around it.
    fn close_variant(self, end: u8) {
        let state = self.state;
        if state != State::Closed {
            self.writer.out.push(end);
        }
        self.writer.out.push(b'}');
    }
}

/// The sequence-like `Serialize…` traits: elements, then `]`.
macro_rules! sequence {
    ($($name:ident::$method:ident),*) => {$(
        impl ser::$name for Compound<'_, '_> {
            type Ok = ();
            type Error = serde_json::Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Self::Error> {
                self.close(b']');
                Ok(())
            }
        }
    )*};
}

sequence!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close_variant(b']');
        Ok(())
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Self::Error> {
        self.key(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close(b'}');
        Ok(())
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        if self.state == State::Raw {
            // serde_json's RawValue: its one field is JSON text, written as
            // it is.
            return value.serialize(RawWriter {
                out: &mut *self.writer.out,
            });
        }
        self.separate();
        write_str(self.writer.out, key);
        self.writer.out.push(b':');
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Self::Error> {
        if self.state != State::Raw {
            self.close(b'}');
        }
        Ok(())
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        self.separate();
        write_str(self.writer.out, key);
        self.writer.out.push(b':');
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close_variant(b'}');
        Ok(())
    }
}

/// The methods of a serializer that only takes scalars: a newtype
/// variant, a sequence or a map is refused with `$error()`.
macro_rules! refuse_compounds {
    ($error:ident) => {
        type SerializeSeq = ser::Impossible<(), serde_json::Error>;
        type SerializeTuple = ser::Impossible<(), serde_json::Error>;
        type SerializeTupleStruct = ser::Impossible<(), serde_json::Error>;
        type SerializeTupleVariant = ser::Impossible<(), serde_json::Error>;
        type SerializeMap = ser::Impossible<(), serde_json::Error>;
        type SerializeStruct = ser::Impossible<(), serde_json::Error>;
        type SerializeStructVariant = ser::Impossible<(), serde_json::Error>;

        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _value: &T,
        ) -> Result<(), Self::Error> {
            Err($error())
        }
        fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Self::Error> {
            Err($error())
        }
        fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Self::Error> {
            Err($error())
        }
        fn serialize_tuple_struct(
            self,
            _name: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeTupleStruct, Self::Error> {
            Err($error())
        }
        fn serialize_tuple_variant(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeTupleVariant, Self::Error> {
            Err($error())
        }
        fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Self::Error> {
            Err($error())
        }
        fn serialize_struct(
            self,
            _name: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeStruct, Self::Error> {
            Err($error())
        }
        fn serialize_struct_variant(
            self,
            _name: &'static str,
            _index: u32,
            _variant: &'static str,
            _len: usize,
        ) -> Result<Self::SerializeStructVariant, Self::Error> {
            Err($error())
        }
    };
}

fn key_must_be_a_string() -> serde_json::Error {
    ser::Error::custom("key must be a string")
}

/// A map key: serde_json writes strings as they are and numbers and
/// booleans quoted, and refuses anything else.
struct KeyWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl KeyWriter<'_> {
    fn quoted(
        self,
        write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
    ) -> Result<(), serde_json::Error> {
        self.out.push(b'"');
        io(write(self.out))?;
        self.out.push(b'"');
        Ok(())
    }
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = serde_json::Error;

    fn serialize_str(self, v: &str) -> Result<(), Self::Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Self::Error> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Self::Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_bool(self, v: bool) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_bool(out, v))
    }
    fn serialize_i8(self, v: i8) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_i8(out, v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_i16(out, v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_i32(out, v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_i64(out, v))
    }
    fn serialize_i128(self, v: i128) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_i128(out, v))
    }
    fn serialize_u8(self, v: u8) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_u8(out, v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_u16(out, v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_u32(out, v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_u64(out, v))
    }
    fn serialize_u128(self, v: u128) -> Result<(), Self::Error> {
        self.quoted(|out| CompactFormatter.write_u128(out, v))
    }
    fn serialize_f32(self, v: f32) -> Result<(), Self::Error> {
        if !v.is_finite() {
            return Err(ser::Error::custom("float key must be finite"));
        }
        self.quoted(|out| CompactFormatter.write_f32(out, v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Self::Error> {
        if !v.is_finite() {
            return Err(ser::Error::custom("float key must be finite"));
        }
        self.quoted(|out| CompactFormatter.write_f64(out, v))
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Self::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<(), Self::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Self::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Self::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Self::Error> {
        Err(key_must_be_a_string())
    }
    refuse_compounds!(key_must_be_a_string);
}

/// The text of a `RawValue`, written as it is (serde_json checked it is
/// JSON when the value was made).
struct RawWriter<'a> {
    out: &'a mut Vec<u8>,
}

fn not_raw() -> serde_json::Error {
    ser::Error::custom("a raw JSON value must be a string")
}

impl ser::Serializer for RawWriter<'_> {
    type Ok = ();
    type Error = serde_json::Error;

    fn serialize_str(self, v: &str) -> Result<(), Self::Error> {
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }
    fn serialize_bool(self, _v: bool) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_i8(self, _v: i8) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_i16(self, _v: i16) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_i32(self, _v: i32) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_i64(self, _v: i64) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_u8(self, _v: u8) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_u16(self, _v: u16) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_u32(self, _v: u32) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_u64(self, _v: u64) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_f32(self, _v: f32) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_f64(self, _v: f64) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_char(self, _v: char) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_none(self) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_unit(self) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<(), Self::Error> {
        Err(not_raw())
    }
    refuse_compounds!(not_raw);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    /// `value` written here and by serde_json: the same bytes, or both fail.
    fn same<T: Serialize + ?Sized>(value: &T) {
        let theirs = serde_json::to_vec(value);
        let mut ours = Vec::new();
        let result = write(&mut ours, value);
        match theirs {
            Ok(theirs) => {
                result.unwrap();
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&theirs)
                );
            }
            Err(e) => assert!(result.is_err(), "serde_json refused it ({e}), this did not"),
        }
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for byte in 0u8..0x80 {
            same(&char::from(byte).to_string());
        }
        same("");
        same("é ü — 日本語 🦀 \u{7f} \u{2028}");
        // An escape at every place in and around eight-byte words.
        for len in 0..40 {
            for at in 0..len {
                for special in ['"', '\\', '\n', '\u{1}', '\u{1f}', 'é', '\u{7f}'] {
                    let text: String = (0..len)
                        .map(|i| if i == at { special } else { 'a' })
                        .collect();
                    same(&text);
                }
            }
        }
        same("fn main() {\n    println!(\"hello\");\n}\n\t\r\u{8}\u{c}");
    }

    #[derive(serde::Serialize)]
    struct Unit;

    #[derive(serde::Serialize)]
    struct Pair(u8, &'static str);

    #[derive(serde::Serialize)]
    struct Wrapper(String);

    #[derive(serde::Serialize)]
    enum Outer {
        Plain,
        Newtype(u32),
        Tuple(i8, f32),
        EmptyTuple(),
        Struct { a: bool, b: Option<u8> },
        EmptyStruct {},
    }

    #[derive(serde::Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        One { text: String },
        Two(Inner),
        Three,
    }

    #[derive(serde::Serialize)]
    #[serde(tag = "t", content = "c")]
    enum Adjacent {
        A(u8),
        B { x: String },
    }

    #[derive(serde::Serialize)]
    #[serde(untagged)]
    enum Untagged {
        N(u64),
        S(String),
    }

    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Inner {
        some_field: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        #[serde(flatten)]
        rest: BTreeMap<String, serde_json::Value>,
    }

    struct Bytes(&'static [u8]);

    impl Serialize for Bytes {
        fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.serialize_bytes(self.0)
        }
    }

    #[test]
    fn every_kind_of_value_is_written_as_serde_json_writes_it() {
        same(&json!({
            "null": null, "t": true, "f": false,
            "numbers": [0, 1, -1, u64::MAX, i64::MIN, 0.0, -0.0, 0.1, 1e21, 1.5e-7, f64::MAX, 12.5],
            "nested": {"a": [[], {}, [{}], {"b": "c\n"}], "": ""},
        }));
        same(&(
            f64::NAN,
            f64::INFINITY,
            f32::NEG_INFINITY,
            1.25f32,
            i128::MIN,
            u128::MAX,
        ));
        same(&('x', '"', Unit, Pair(7, "seven"), Wrapper("w".into())));
        same(&Bytes(b"\x00\x01abc"));
        same(&Bytes(b""));
        same(&[
            Outer::Plain,
            Outer::Newtype(3),
            Outer::Tuple(-2, 0.5),
            Outer::EmptyTuple(),
            Outer::Struct { a: true, b: None },
            Outer::EmptyStruct {},
        ]);
        let rest = BTreeMap::from([("extra".to_string(), json!([1, "two"]))]);
        same(&[
            Tagged::One { text: "t\"".into() },
            Tagged::Two(Inner {
                some_field: None,
                skipped: None,
                rest,
            }),
            Tagged::Three,
        ]);
        same(&[Adjacent::A(1), Adjacent::B { x: "y".into() }]);
        same(&[Untagged::N(5), Untagged::S("s".into())]);
        same(&Option::<u8>::None);
        same(&Some(Some(4)));
        same(&Vec::<u8>::new());
        same(&BTreeMap::<String, u8>::new());
        let raw = serde_json::value::RawValue::from_string(r#"{"kept": [1, 2] }"#.into()).unwrap();
        same(&(&raw, vec![&raw]));
    }

    #[test]
    fn map_keys_are_quoted_or_refused_as_serde_json_does() {
        same(&BTreeMap::from([(1u8, 'a'), (2, 'b')]));
        same(&BTreeMap::from([(-3i64, 0), (i64::MAX, 1)]));
        same(&BTreeMap::from([(true, 1), (false, 0)]));
        same(&BTreeMap::from([('k', 1)]));
        same(&BTreeMap::from([(Some("some"), 1)]));
        same(&BTreeMap::from(
            [(Wrapper("newtype".into()), 1)].map(|(k, v)| (k.0, v)),
        ));
        same(&std::collections::HashMap::from([(1.5f64.to_bits(), 1)]));
        // Keys serde_json refuses.
        same(&BTreeMap::from([(vec![1], 1)]));
        same(&BTreeMap::from([(Option::<u8>::None, 1)]));
        same(&BTreeMap::from([((), 1)]));
    }

    #[test]
    fn a_replayed_update_is_the_json_the_acp_crate_writes() {
        use agent_client_protocol::v1::schema::{
            ContentBlock, ContentChunk, Diff, SessionNotification, SessionUpdate, TextContent,
            ToolCall, ToolCallContent, ToolCallStatus,
        };
        let updates = [
            SessionUpdate::AgentMessageChunk(
                ContentChunk::new(ContentBlock::Text(TextContent::new("said \"hi\"\n")))
                    .message_id("e2"),
            ),
            SessionUpdate::ToolCall(
                ToolCall::new("toolu_1", "Edit `a.rs`")
                    .status(ToolCallStatus::InProgress)
                    .raw_input(json!({"path": "a.rs", "n": 1.5}))
                    .content(vec![ToolCallContent::Diff(
                        Diff::new("/p/a.rs", "new\n").old_text("old\t".to_string()),
                    )]),
            ),
        ];
        for update in updates {
            same(&SessionNotification::new("sess_1", update));
        }
    }
}
