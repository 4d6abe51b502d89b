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

    /// The files [`Fixture::make_every_kind_of_change`] changes.
    pub fn prepare_every_kind_of_change(&self) {
        for (path, text) in [
            ("edited.txt", "one\n"),
            ("sed.txt", "old\n"),
            ("gone.txt", "bye\n"),
            ("moved.txt", "travel\n"),
            ("script.sh", "echo hi\n"),
        ] {
            self.write(path, text.as_bytes());
        }
    }

    /// What a turn's commands may do to files: an edit in place, `sed -i`
    /// (a new file renamed over the old), `rm`, `mv`, `chmod +x`, a new
    /// binary file and a new symlink.
    #[cfg(unix)]
    pub fn make_every_kind_of_change(&self) {
        use std::os::unix::fs::PermissionsExt;
        self.write("edited.txt", b"two\n");
        self.write("sed.tmp", b"new\n");
        std::fs::rename(self.at("sed.tmp"), self.at("sed.txt")).unwrap();
        std::fs::remove_file(self.at("gone.txt")).unwrap();
        std::fs::rename(self.at("moved.txt"), self.at("arrived.txt")).unwrap();
        std::fs::set_permissions(self.at("script.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        self.write("image.bin", &[0, 159, 146, 150, 255]);
        self.symlink("edited.txt", "alias");
    }

    pub fn scan(&self, previous: Option<&Snapshot>) -> Snapshot {
        scan(self.root(), &self.store, previous, 100_000).unwrap()
    }
}
