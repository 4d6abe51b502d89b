//! What a working directory holds, file by file, and what changed between
//! two such snapshots. A command's changes cannot be known before it runs,
//! so the checkpoint takes a snapshot before and after each call and keeps
//! the content of every file in the store: the first snapshot of a session
//! reads the whole tree, later ones only the files whose metadata moved
//! (size, modification and change times, inode, mode). The ignore files are
//! respected (`target/` and `node_modules/` are not copied) with or without
//! git, `.git` itself is left to git, and symlinks are recorded as links,
//! never followed.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::store::{Hash, PutError, Store};

/// A file's kind and what restoring it needs besides its content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Kind {
    /// A regular file and its permission bits.
    File { mode: u32 },
    /// A symbolic link and where it points (as written, not resolved).
    Symlink { target: PathBuf },
    /// A directory and its permission bits: recorded so that undo removes
    /// the directories a turn made and makes again those it removed.
    Dir { mode: u32 },
}

/// Why a file's content is not in the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotKept {
    TooLarge { size: u64 },
    Unreadable(String),
}

/// One path of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    #[serde(flatten)]
    pub kind: Kind,
    /// The content's blob, or why there is none (a symlink has none and
    /// needs none).
    pub content: Result<Option<Hash>, NotKept>,
    stamp: Stamp,
}

impl Entry {
    /// An entry for content that is not on disk (an editor's unsaved
    /// buffer), kept in the store as `content`.
    pub fn unsaved(kind: Kind, content: Hash) -> Self {
        Self {
            kind,
            content: Ok(Some(content)),
            stamp: Stamp {
                size: 0,
                modified_ns: 0,
                changed_ns: 0,
                inode: 0,
            },
        }
    }

    /// Whether `other` holds the same thing (kind, mode, target, content),
    /// whatever its times say.
    pub fn same_as(&self, other: &Entry) -> bool {
        self.kind == other.kind && self.content == other.content
    }
}

/// The metadata that moves when a file is written, renamed over or
/// changed in mode: equal stamps mean the content need not be read again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    size: u64,
    modified_ns: i128,
    changed_ns: i128,
    inode: u64,
}

/// The files of a tree, by path relative to its root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub entries: BTreeMap<PathBuf, Entry>,
}

/// A difference between two snapshots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Created { path: PathBuf },
    Deleted { path: PathBuf, before: Entry },
    Modified { path: PathBuf, before: Entry },
}

impl Change {
    pub fn path(&self) -> &Path {
        match self {
            Change::Created { path }
            | Change::Deleted { path, .. }
            | Change::Modified { path, .. } => path,
        }
    }
}

/// The files under `root` now, their content kept in `store`. Files whose
/// stamp equals their entry in `previous` are not read again. A tree of
/// more than `max_files` files is an error: a session started in a home
/// directory or at `/` must not copy it whole.
pub fn scan(
    root: &Path,
    store: &Store,
    previous: Option<&Snapshot>,
    max_files: usize,
) -> io::Result<Snapshot> {
    let mut snapshot = Snapshot::default();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .parents(true)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build();
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                tracing::debug!(%error, "a path the checkpoint cannot walk");
                continue;
            }
        };
        let path = entry.path();
        let Ok(relative) = path.strip_prefix(root) else {
            continue;
        };
        if relative.as_os_str().is_empty() {
            continue;
        }
        let previous = previous.and_then(|p| p.entries.get(relative));
        if let Some(entry) = entry_of(path, store, previous)? {
            if snapshot.entries.len() >= max_files {
                return Err(io::Error::other(format!(
                    "{} holds more than {max_files} files outside its ignore files",
                    root.display()
                )));
            }
            snapshot.entries.insert(relative.to_path_buf(), entry);
        }
    }
    Ok(snapshot)
}

/// The entry for what is at `path` now (`None`: nothing, or neither a
/// file, a symlink nor a directory), its content kept in `store` unless
/// `previous` has the same stamp.
pub fn entry_of(path: &Path, store: &Store, previous: Option<&Entry>) -> io::Result<Option<Entry>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let stamp = stamp(&meta);
    let file_type = meta.file_type();
    let kind = if file_type.is_symlink() {
        Kind::Symlink {
            target: std::fs::read_link(path)?,
        }
    } else if file_type.is_file() {
        Kind::File { mode: mode(&meta) }
    } else if file_type.is_dir() {
        Kind::Dir { mode: mode(&meta) }
    } else {
        return Ok(None);
    };
    if let Some(before) = previous
        && before.stamp == stamp
        && before.kind == kind
    {
        return Ok(Some(before.clone()));
    }
    let content = match kind {
        Kind::Symlink { .. } | Kind::Dir { .. } => Ok(None),
        Kind::File { .. } => match store.put_file(path) {
            Ok(hash) => Ok(Some(hash)),
            Err(PutError::TooLarge { size, .. }) => Err(NotKept::TooLarge { size }),
            // Gone between the stat and the read.
            Err(PutError::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(PutError::Io(e)) => Err(NotKept::Unreadable(e.to_string())),
        },
    };
    Ok(Some(Entry {
        kind,
        content,
        stamp,
    }))
}

/// What changed from `before` to `after`, by path.
pub fn changes(before: &Snapshot, after: &Snapshot) -> Vec<Change> {
    let mut out = Vec::new();
    for (path, old) in &before.entries {
        match after.entries.get(path) {
            None => out.push(Change::Deleted {
                path: path.clone(),
                before: old.clone(),
            }),
            Some(new) if !old.same_as(new) => out.push(Change::Modified {
                path: path.clone(),
                before: old.clone(),
            }),
            Some(_) => {}
        }
    }
    for path in after.entries.keys() {
        if !before.entries.contains_key(path) {
            out.push(Change::Created { path: path.clone() });
        }
    }
    out.sort_by(|a, b| a.path().cmp(b.path()));
    out
}

#[cfg(unix)]
fn stamp(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    Stamp {
        size: meta.len(),
        modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        changed_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        inode: meta.ino(),
    }
}

#[cfg(not(unix))]
fn stamp(meta: &std::fs::Metadata) -> Stamp {
    let ns = |t: io::Result<std::time::SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128)
    };
    Stamp {
        size: meta.len(),
        modified_ns: ns(meta.modified()),
        changed_ns: ns(meta.created()),
        inode: 0,
    }
}

#[cfg(unix)]
fn mode(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode(meta: &std::fs::Metadata) -> u32 {
    if meta.permissions().readonly() {
        0o444
    } else {
        0o644
    }
}

#[cfg(test)]
#[path = "tree/tests.rs"]
mod tests;
