//! The profiles file on disk: read whole, changed under an exclusive lock,
//! written atomically with mode 0600.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::Profiles;

/// Why the profiles file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot access {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid auth profiles file: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// One agent's `auth-profiles.json`.
#[derive(Clone, Debug)]
pub struct Store {
    path: PathBuf,
}

impl Store {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// The profiles; an absent file is an empty set.
    pub fn read(&self) -> Result<Profiles, StoreError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| StoreError::Invalid {
                path: self.path.clone(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Profiles::default()),
            Err(e) => Err(self.io(e)),
        }
    }

    /// Holds the file's exclusive lock while `f` runs; other pincer
    /// processes wait for it.
    pub fn locked<T>(&self, f: impl FnOnce() -> T) -> Result<T, StoreError> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        }
        let lock_path = self.path.with_extension("json.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| self.io(e))?;
        lock.lock().map_err(|e| self.io(e))?;
        let out = f();
        // Dropping the file releases the lock; unlock first for clarity.
        let _ = lock.unlock();
        Ok(out)
    }

    /// Changes the profiles under the lock and writes them back.
    pub fn modify<T>(&self, change: impl FnOnce(&mut Profiles) -> T) -> Result<T, StoreError> {
        self.locked(|| {
            let mut profiles = self.read()?;
            let out = change(&mut profiles);
            self.write_locked(&profiles)?;
            Ok(out)
        })?
    }

    /// Writes the whole file (callers hold the lock): to a temporary file
    /// with mode 0600, then renamed over the old one.
    pub(crate) fn write_locked(&self, profiles: &Profiles) -> Result<(), StoreError> {
        let text = serde_json::to_vec_pretty(profiles).map_err(|e| StoreError::Invalid {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        let partial = self.path.with_extension("json.partial");
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(true).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&partial).map_err(|e| self.io(e))?;
        #[cfg(unix)]
        {
            // An existing partial file keeps its old mode; make sure.
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))
                .map_err(|e| self.io(e))?;
        }
        file.write_all(&text)
            .and_then(|()| file.sync_all())
            .map_err(|e| self.io(e))?;
        std::fs::rename(&partial, &self.path).map_err(|e| self.io(e))
    }
}
