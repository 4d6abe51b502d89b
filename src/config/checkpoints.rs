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

use serde::{Deserialize, Serialize};

use crate::checkpoint::store::Limits;
pub use crate::units::ByteSize;

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

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

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
