//! The `[checkpoints]` table: how much a project's checkpoint store may
//! hold. Only the user's config file sets it: a repository neither grows
//! the store on the user's disk nor shrinks what undo can put back.
//!
//! ```toml
//! [checkpoints]
//! enabled = true       # record what each turn changes (the default)
//! max_size = "500MB"   # the project's store, oldest versions dropped past it
//! max_file = "20MB"    # a larger file is listed as not restorable
//! max_files = 100000   # a larger working directory is not recorded
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::checkpoint::store::Limits;

/// The `[checkpoints]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckpointsConfig {
    /// Whether turns are recorded (default true).
    pub enabled: Option<bool>,
    /// What the project's store may hold (default 300 MB).
    pub max_size: Option<ByteSize>,
    /// The largest file a checkpoint keeps (default 10 MB).
    pub max_file: Option<ByteSize>,
    /// The most files (outside the ignore files) a working directory may
    /// hold for its turns to be recorded (default 100,000).
    pub max_files: Option<usize>,
}

impl CheckpointsConfig {
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    pub fn max_files(&self) -> usize {
        self.max_files
            .unwrap_or(crate::checkpoint::recording::MAX_FILES)
    }

    pub fn limits(&self) -> Limits {
        let default = Limits::default();
        Limits {
            max_size: self.max_size.map_or(default.max_size, |s| s.0),
            max_file: self.max_file.map_or(default.max_file, |s| s.0),
        }
    }
}

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

    #[test]
    fn the_table_gives_the_store_s_limits_with_defaults() {
        let config: CheckpointsConfig =
            toml::from_str("max_size = \"500MB\"\nmax_file = 1048576\n").unwrap();
        assert_eq!(
            config.limits(),
            Limits {
                max_size: 500_000_000,
                max_file: 1_048_576
            }
        );
        assert_eq!(CheckpointsConfig::default().limits(), Limits::default());
        let error = toml::from_str::<CheckpointsConfig>("max_size = \"1.2.3MB\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not a size"), "{error}");
        assert!(toml::from_str::<CheckpointsConfig>("max_sise = 1\n").is_err());
        let off: CheckpointsConfig = toml::from_str("enabled = false\nmax_files = 10\n").unwrap();
        assert!(!off.enabled());
        assert_eq!(off.max_files(), 10);
        assert!(CheckpointsConfig::default().enabled());
        assert_eq!(
            CheckpointsConfig::default().max_files(),
            crate::checkpoint::recording::MAX_FILES
        );
    }
}
