//! A working directory and a store of its own, for the checkpoint tests.

use std::path::{Path, PathBuf};

use super::store::{Limits, Store};
use super::tree::{Snapshot, scan};

pub(super) struct Fixture {
    _store_dir: tempfile::TempDir,
    work: tempfile::TempDir,
    pub store: Store,
}

/// A fixture whose store keeps files of up to `max_file` bytes.
pub(super) fn fixture(max_file: u64) -> Fixture {
    let store_dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        store_dir.path(),
        Limits {
            max_size: 1 << 30,
            max_file,
        },
    )
    .unwrap();
    Fixture {
        _store_dir: store_dir,
        work: tempfile::tempdir().unwrap(),
        store,
    }
}

impl Fixture {
    pub fn root(&self) -> &Path {
        self.work.path()
    }

    pub fn at(&self, path: &str) -> PathBuf {
        self.root().join(path)
    }

    /// Writes `bytes` at `path` under the root, making its directories.
    pub fn write(&self, path: &str, bytes: &[u8]) {
        let path = self.at(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    /// A symlink at `path` under the root, pointing to `target`.
    #[cfg(unix)]
    pub fn symlink(&self, target: impl AsRef<Path>, path: &str) {
        std::os::unix::fs::symlink(target, self.at(path)).unwrap();
    }

    pub fn scan(&self, previous: Option<&Snapshot>) -> Snapshot {
        scan(self.root(), &self.store, previous).unwrap()
    }
}
