//! The user's answers to "trust this project?", kept under `PINCER_HOME`
//! (never in the working tree, where a repository could write its own).
//!
//! An answer is keyed by the project's canonical root and holds the hash of
//! the project files whose keys need trust. When those files change, the
//! stored answer no longer applies and the project is untrusted again: a
//! repository cannot ride on an earlier "yes" given to other content.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What the user decided about one project.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    Trusted,
    /// "Always reject": do not ask again while the content is the same.
    Rejected,
}

/// One remembered decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The hash of the project's trust-relevant files when the user decided.
    pub hash: String,
    pub decision: Decision,
    /// When, as RFC 3339.
    pub at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct StoreFile {
    /// Canonical project root → decision.
    projects: BTreeMap<String, Entry>,
}

/// Why the trust store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot access {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid trust file ({message}); fix or delete it")]
    Invalid { path: PathBuf, message: String },
}

/// `trust.toml` in the user's config dir.
#[derive(Clone, Debug)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    pub fn new(config_dir: &Path) -> Self {
        Self {
            path: config_dir.join("trust.toml"),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> TrustError {
        TrustError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn read(&self) -> Result<StoreFile, TrustError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => toml::from_str(&text).map_err(|e| TrustError::Invalid {
                path: self.path.clone(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StoreFile::default()),
            Err(e) => Err(self.io(e)),
        }
    }

    /// The decision stored for `root`, whatever its hash.
    pub fn get(&self, root: &Path) -> Result<Option<Entry>, TrustError> {
        Ok(self.read()?.projects.remove(&key(root)))
    }

    /// Every remembered decision, by project root.
    pub fn list(&self) -> Result<Vec<(String, Entry)>, TrustError> {
        Ok(self.read()?.projects.into_iter().collect())
    }

    /// Remembers `decision` for `root` with the content `hash`.
    pub fn set(&self, root: &Path, hash: &str, decision: Decision) -> Result<(), TrustError> {
        let entry = Entry {
            hash: hash.to_string(),
            decision,
            at: jiff::Timestamp::now().to_string(),
        };
        self.modify(|file| {
            file.projects.insert(key(root), entry);
        })
    }

    /// Forgets `root`; whether there was anything to forget.
    pub fn remove(&self, root: &Path) -> Result<bool, TrustError> {
        let mut removed = false;
        self.modify(|file| removed = file.projects.remove(&key(root)).is_some())?;
        Ok(removed)
    }

    /// Read-modify-write under an exclusive lock, so that two pincer
    /// processes answering at once both keep their answer.
    fn modify(&self, change: impl FnOnce(&mut StoreFile)) -> Result<(), TrustError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| self.io(e))?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.path.with_extension("toml.lock"))
            .map_err(|e| self.io(e))?;
        lock.lock().map_err(|e| self.io(e))?;
        let mut file = self.read()?;
        change(&mut file);
        let text = toml::to_string(&file).map_err(|e| TrustError::Invalid {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let header =
            "# Projects whose configuration you trusted or rejected (pincer trust / untrust).\n";
        write_private(&self.path, format!("{header}{text}").as_bytes()).map_err(|e| self.io(e))
    }
}

/// The key a project is stored under: its canonical path.
fn key(root: &Path) -> String {
    std::fs::canonicalize(root)
        .unwrap_or_else(|_| root.to_path_buf())
        .display()
        .to_string()
}

/// Creates `dir` (and parents) so that only the user can enter the last one.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        if !dir.exists() {
            return std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
        }
        Ok(())
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

/// Writes `bytes` to `path` atomically and durably (a temporary file,
/// synced, renamed over it), readable by the user only.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_private(path, bytes, true)
}

/// Puts `bytes` in place at `path` as a whole (a temporary file renamed
/// over it), readable by the user only; `durable` syncs it before the
/// rename. Each write has a temporary file of its own: two writers of one
/// file (two tasks saving a record at once) each put a whole file in
/// place, where with one shared name the second's rename failed and the
/// content could be a mix of both.
pub fn replace_private(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}-{write}.partial", std::process::id()));
    let partial = path.with_file_name(name);
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.create_new(true).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&partial)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        std::fs::rename(&partial, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writes_of_one_file_each_put_a_whole_file_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record.json");
        let contents: Vec<Vec<u8>> = (0..8u8)
            .map(|i| vec![b'a' + i; 1000 + 300 * usize::from(i)])
            .collect();
        for _ in 0..20 {
            std::thread::scope(|scope| {
                for bytes in &contents {
                    let path = &path;
                    scope.spawn(move || replace_private(path, bytes, false).unwrap());
                }
            });
            let now = std::fs::read(&path).unwrap();
            assert!(
                contents.contains(&now),
                "a mix of writes: {} bytes",
                now.len()
            );
        }
        // Nothing but the file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("record.json")]);
    }

    #[test]
    fn decisions_round_trip_and_are_private() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let store = TrustStore::new(&home.path().join("state"));
        assert_eq!(store.get(project.path()).unwrap(), None);
        store.set(project.path(), "abc", Decision::Trusted).unwrap();
        let entry = store.get(project.path()).unwrap().unwrap();
        assert_eq!(
            (entry.hash.as_str(), entry.decision),
            ("abc", Decision::Trusted)
        );
        store
            .set(project.path(), "def", Decision::Rejected)
            .unwrap();
        assert_eq!(store.list().unwrap().len(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
            let dir = std::fs::metadata(home.path().join("state")).unwrap();
            assert_eq!(dir.permissions().mode() & 0o777, 0o700);
        }
        assert!(store.remove(project.path()).unwrap());
        assert!(!store.remove(project.path()).unwrap());
        assert_eq!(store.get(project.path()).unwrap(), None);
    }

    #[test]
    fn a_broken_file_is_an_error_that_names_it() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("trust.toml"), "projects = 3").unwrap();
        let err = TrustStore::new(home.path()).get(home.path()).unwrap_err();
        assert!(err.to_string().contains("trust.toml"), "{err}");
    }
}
