//! Quantities as people write them in config files: a size in bytes as a
//! number or with a unit (`"300MB"`, `"1.5 GiB"`). Shared by the tables
//! that take one (`[checkpoints]`, `[sandbox.limits]`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A size in bytes, written as a number of bytes or as text with a unit
/// (`"300MB"`, `"1.5 GiB"`, `"512kB"`; kB, MB, GB and TB are powers of
/// 1000, KiB, MiB, GiB and TiB of 1024).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(split);
        let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" | "k" => 1000,
            "mb" | "m" => 1000 * 1000,
            "gb" | "g" => 1000 * 1000 * 1000,
            "tb" | "t" => 1000 * 1000 * 1000 * 1000,
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            "tib" => 1 << 40,
            other => {
                return Err(format!(
                    "{text:?}: unknown unit {other:?} (use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)"
                ));
            }
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("{text:?} is not a size (write e.g. \"300MB\")"))?;
        let bytes = value * factor as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(format!("{text:?} is out of range"));
        }
        Ok(Self(bytes.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        for (size, unit) in UNITS {
            if self.0 >= size {
                return write!(f, "{:.1} {unit}", self.0 as f64 / size as f64);
            }
        }
        write!(f, "{} B", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Bytes(u64),
            Text(String),
        }
        match Written::deserialize(deserializer)? {
            Written::Bytes(n) => Ok(Self(n)),
            Written::Text(text) => Self::parse(&text).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn sizes_read_as_bytes_or_with_a_unit() {
        for (text, bytes) in [
            ("300MB", 300_000_000),
            ("1.5 GiB", 1_610_612_736),
            ("512kB", 512_000),
            ("10 MiB", 10_485_760),
            ("42", 42),
            ("7 b", 7),
        ] {
            assert_eq!(ByteSize::parse(text), Ok(ByteSize(bytes)), "{text}");
        }
        for bad in ["", "MB", "12 parsecs", "-5MB", "1e999GB"] {
            assert!(ByteSize::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(ByteSize(10_485_760).to_string(), "10.0 MiB");
        assert_eq!(ByteSize(900).to_string(), "900 B");
    }
}
