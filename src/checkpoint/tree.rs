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
    /// The root directory's stamp: whether its listing may have changed.
    root: Option<Stamp>,
    /// When the snapshot was begun (ns since the epoch). A file system
    /// stamps changes with a coarse clock (a tick of up to 10 ms), so a
    /// path changed within a tick of the snapshot may keep its stamp
    /// through a second change: such "racy" entries are read again next
    /// time, whatever their stamp says (git's rule for its index).
    taken_ns: i128,
}

/// How far before a snapshot a change may still share its stamp with a
/// later one: the file system clock's tick, with room to spare.
const RACY_NS: i128 = 50_000_000;

impl Snapshot {
    /// Entries stamped before this are settled: an equal stamp later
    /// means unchanged.
    fn settled_before(&self) -> i128 {
        self.taken_ns - RACY_NS
    }
}

fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
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
    let mut snapshot = Snapshot {
        entries: BTreeMap::new(),
        root: std::fs::symlink_metadata(root).ok().map(|m| stamp(&m)),
        taken_ns: now_ns(),
    };
    // A whole tree's new blobs go into packs, not a file each.
    let packing = store.packing();
    walk(
        root,
        root,
        None,
        &packing,
        previous,
        max_files,
        &mut snapshot,
    )?;
    packing.finish_pack()?;
    Ok(snapshot)
}

/// The walker over `dir` as checkpoints see a tree: the ignore files
/// respected with or without git, hidden files kept, `.git` left out,
/// links not followed; `depth` levels deep (`None`: all).
fn walker(dir: &Path, depth: Option<usize>) -> ignore::Walk {
    ignore::WalkBuilder::new(dir)
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .parents(true)
        .follow_links(false)
        .max_depth(depth)
        .filter_entry(|entry| entry.file_name() != ".git")
        .build()
}

/// Adds what is under `dir` (and `dir` itself, unless it is the root) to
/// `snapshot`, `depth` levels deep.
fn walk(
    root: &Path,
    dir: &Path,
    depth: Option<usize>,
    store: &Store,
    previous: Option<&Snapshot>,
    max_files: usize,
    snapshot: &mut Snapshot,
) -> io::Result<()> {
    // The paths first: a tree past `max_files`, or one whose files to copy
    // would not fit the store (`max_size`), is refused before anything of
    // it is copied; then their content, read on all the cores. Only a
    // first snapshot is measured: later ones copy just what changed, and
    // the store trims itself after the turn.
    let limits = store.limits();
    let mut to_copy: u64 = 0;
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in walker(dir, depth) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                tracing::debug!(%error, "a path the checkpoint cannot walk");
                continue;
            }
        };
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        if relative.as_os_str().is_empty() {
            continue;
        }
        if snapshot.entries.len() + paths.len() >= max_files {
            return Err(io::Error::other(format!(
                "{} holds more than {max_files} files outside its ignore files",
                root.display()
            )));
        }
        if previous.is_none()
            && let Some(size) = entry
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .filter(|size| *size <= limits.max_file)
        {
            to_copy += size;
            if to_copy > limits.max_size {
                return Err(io::Error::other(format!(
                    "{} holds more than {} bytes to copy, more than the checkpoint store may hold ([checkpoints] max_size)",
                    root.display(),
                    limits.max_size
                )));
            }
        }
        paths.push(relative.to_path_buf());
    }
    let settled = previous.map_or(i128::MIN, Snapshot::settled_before);
    let entries = crate::parallel::map_chunks(&paths, 64, |relative| {
        let previous = previous.and_then(|p| p.entries.get(relative));
        entry_of(&root.join(relative), store, previous, settled)
    });
    for (relative, entry) in paths.into_iter().zip(entries) {
        if let Some(entry) = entry? {
            snapshot.entries.insert(relative, entry);
        }
    }
    Ok(())
}

/// One path's change: what it was and what it is (`None`: nothing).
pub type PathChange = (PathBuf, Option<Entry>, Option<Entry>);

/// Brings `snapshot` (an earlier [`scan`] of `root`) up to date and says
/// what changed. Only directories whose own stamp moved (a name was
/// added, removed or renamed in them) are listed again; every other path
/// is one `lstat`, spread over the cores, and read only if its stamp
/// moved. A change to an ignore file makes it a whole [`scan`] again,
/// since what is ignored may have changed anywhere below it.
pub fn update(
    root: &Path,
    store: &Store,
    snapshot: &mut Snapshot,
    max_files: usize,
) -> io::Result<Vec<PathChange>> {
    let taken_ns = now_ns();
    let settled = snapshot.settled_before();
    let root_now = std::fs::symlink_metadata(root).map(|m| stamp(&m))?;
    let racy = |s: &Stamp| s.changed_ns >= settled || s.modified_ns >= settled;
    // Directories whose listing may have changed, shallow first.
    let mut listed: Vec<PathBuf> = Vec::new();
    if snapshot.root != Some(root_now) || racy(&root_now) {
        listed.push(PathBuf::new());
    }
    let dirs: Vec<(&PathBuf, &Entry)> = snapshot
        .entries
        .iter()
        .filter(|(_, e)| matches!(e.kind, Kind::Dir { .. }))
        .collect();
    for (path, entry) in dirs {
        let moved = std::fs::symlink_metadata(root.join(path)).map_or(true, |m| {
            let now = stamp(&m);
            !m.is_dir() || now != entry.stamp || racy(&now)
        });
        if moved {
            listed.push(path.clone());
        }
    }
    refresh(
        root, store, snapshot, listed, None, settled, max_files, taken_ns,
    )
}

/// [`update`] with what a [`super::watch::Watcher`] saw: only those
/// directories are listed again and those paths read again.
pub fn update_seen(
    root: &Path,
    store: &Store,
    snapshot: &mut Snapshot,
    seen: super::watch::Changed,
    max_files: usize,
) -> io::Result<Vec<PathChange>> {
    let taken_ns = now_ns();
    let mut listed: Vec<PathBuf> = seen.dirs.into_iter().collect();
    let mut paths = Vec::new();
    for path in seen.paths {
        let is_dir = snapshot
            .entries
            .get(&path)
            .is_some_and(|e| matches!(e.kind, Kind::Dir { .. }));
        if is_dir {
            listed.push(path.parent().map(Path::to_path_buf).unwrap_or_default());
        } else {
            paths.push(path);
        }
    }
    // A name added, removed or renamed. A file or link the snapshot has
    // is looked at alone (a restore renames a file into place), unless
    // it became a directory; a name it does not have and that is gone
    // again (a temporary file) changed nothing; anything else lists its
    // directory again, where the ignore files say what counts.
    for path in seen.named {
        let parent = || path.parent().map(Path::to_path_buf).unwrap_or_default();
        let now = std::fs::symlink_metadata(root.join(&path));
        match snapshot.entries.get(&path) {
            Some(entry) if !matches!(entry.kind, Kind::Dir { .. }) => {
                if now.is_ok_and(|m| m.is_dir()) {
                    listed.push(parent());
                } else {
                    paths.push(path);
                }
            }
            Some(_) => listed.push(parent()),
            None if now.is_ok() => listed.push(parent()),
            None => {}
        }
    }
    listed.sort();
    listed.dedup();
    paths.sort();
    paths.dedup();
    // Each path had an event: it is read again whatever its stamp.
    refresh(
        root,
        store,
        snapshot,
        listed,
        Some(paths),
        i128::MAX,
        max_files,
        taken_ns,
    )
}

/// The common part of [`update`] and [`update_seen`]: `listed`
/// directories are listed again; `checked` paths (`None`: every path
/// outside them) are compared, an equal stamp from before `settled` taken
/// as no change.
#[allow(clippy::too_many_arguments)]
fn refresh(
    root: &Path,
    store: &Store,
    snapshot: &mut Snapshot,
    mut listed: Vec<PathBuf>,
    checked: Option<Vec<PathBuf>>,
    settled: i128,
    max_files: usize,
    taken_ns: i128,
) -> io::Result<Vec<PathChange>> {
    let root_now = std::fs::symlink_metadata(root).map(|m| stamp(&m))?;
    // An ignore file that changed, came or went changes what is recorded
    // anywhere below it: then the whole tree is scanned again.
    let ignore_names = [".gitignore", ".ignore"];
    let is_ignore_file = |p: &Path| {
        p.file_name()
            .is_some_and(|n| ignore_names.iter().any(|i| n == *i))
    };
    let candidates: Vec<&PathBuf> = match &checked {
        None => snapshot
            .entries
            .keys()
            .filter(|p| is_ignore_file(p))
            .collect(),
        Some(paths) => paths.iter().filter(|p| is_ignore_file(p)).collect(),
    };
    let ignore_moved = candidates.into_iter().any(|p| {
        let Some(e) = snapshot.entries.get(p) else {
            return false;
        };
        entry_of(&root.join(p), store, Some(e), settled)
            .ok()
            .flatten()
            .is_none_or(|now| !now.same_as(e))
    }) || listed.iter().any(|dir| {
        ignore_names.iter().any(|name| {
            let path = dir.join(name);
            snapshot.entries.contains_key(&path)
                != std::fs::symlink_metadata(root.join(&path)).is_ok()
        })
    });
    if ignore_moved {
        let now = scan(root, store, Some(snapshot), max_files)?;
        let found = changes(snapshot, &now)
            .into_iter()
            .map(|c| {
                let path = c.path().to_path_buf();
                let was = snapshot.entries.get(&path).cloned();
                let is = now.entries.get(&path).cloned();
                (path, was, is)
            })
            .collect();
        *snapshot = now;
        return Ok(found);
    }
    let is_listed = |path: &Path| {
        let parent = path.parent().unwrap_or(Path::new(""));
        listed.iter().any(|d| d == parent)
    };
    // Every other path (or those seen): is it as it was?
    let checked: Vec<(&PathBuf, &Entry)> = match &checked {
        None => snapshot
            .entries
            .iter()
            .filter(|(p, e)| !matches!(e.kind, Kind::Dir { .. }) && !is_listed(p))
            .collect(),
        Some(paths) => paths
            .iter()
            .filter(|p| !is_listed(p))
            .filter_map(|p| snapshot.entries.get_key_value(p))
            .collect(),
    };
    let now = crate::parallel::map_chunks(&checked, 2048, |(path, entry)| {
        entry_of(&root.join(path), store, Some(entry), settled)
    });
    let mut changes: Vec<PathChange> = Vec::new();
    let mut updated: Vec<(PathBuf, Option<Entry>)> = Vec::new();
    for ((path, before), now) in checked.into_iter().zip(now) {
        let now = now?;
        let same = now.as_ref().is_some_and(|n| n.same_as(before));
        if !same {
            changes.push((path.clone(), Some(before.clone()), now.clone()));
        }
        if now.as_ref() != Some(before) {
            updated.push((path.clone(), now));
        }
    }
    for (path, now) in updated {
        match now {
            Some(entry) => snapshot.entries.insert(path, entry),
            None => snapshot.entries.remove(&path),
        };
    }
    // The directories listed again: what is in them now.
    listed.sort_by_key(|d| d.components().count());
    for dir in listed {
        if !dir.as_os_str().is_empty() && !snapshot.entries.contains_key(&dir) {
            // Gone with its parent, already.
            continue;
        }
        relist(root, &dir, store, snapshot, max_files, &mut changes)?;
    }
    snapshot.root = Some(root_now);
    snapshot.taken_ns = taken_ns;
    if snapshot.entries.len() > max_files {
        return Err(io::Error::other(format!(
            "{} holds more than {max_files} files outside its ignore files",
            root.display()
        )));
    }
    changes.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(changes)
}

/// Lists `dir` again: new names are read (a new directory whole), gone
/// ones leave with everything under them, and the rest are compared.
fn relist(
    root: &Path,
    dir: &Path,
    store: &Store,
    snapshot: &mut Snapshot,
    max_files: usize,
    changes: &mut Vec<PathChange>,
) -> io::Result<()> {
    let absolute = root.join(dir);
    let mut seen: Vec<PathBuf> = Vec::new();
    let here = std::fs::symlink_metadata(&absolute);
    if here.as_ref().is_ok_and(|m| m.is_dir()) {
        let mut found = Snapshot::default();
        walk(
            root,
            &absolute,
            Some(1),
            store,
            Some(snapshot),
            usize::MAX,
            &mut found,
        )?;
        for (path, entry) in found.entries {
            if path == dir {
                if let Some(before) = snapshot.entries.get(&path)
                    && !before.same_as(&entry)
                {
                    changes.push((path.clone(), Some(before.clone()), Some(entry.clone())));
                }
                snapshot.entries.insert(path, entry);
                continue;
            }
            seen.push(path.clone());
            let is_dir = |e: &Entry| matches!(e.kind, Kind::Dir { .. });
            let was = snapshot.entries.get(&path).cloned();
            if let Some(before) = &was
                && is_dir(before)
                && !is_dir(&entry)
            {
                // A directory replaced by a file: what was under it is gone.
                remove_under(snapshot, &path, changes);
            }
            match was {
                Some(before) if is_dir(&before) || !is_dir(&entry) => {
                    if !before.same_as(&entry) {
                        changes.push((path.clone(), Some(before), Some(entry.clone())));
                    }
                    snapshot.entries.insert(path, entry);
                }
                // A new directory, or one that replaced a file: all of it.
                was if is_dir(&entry) => {
                    let mut new = Snapshot::default();
                    walk(
                        root,
                        &root.join(&path),
                        None,
                        store,
                        None,
                        max_files,
                        &mut new,
                    )?;
                    for (under, entry) in new.entries {
                        let before = if under == path { was.clone() } else { None };
                        changes.push((under.clone(), before, Some(entry.clone())));
                        snapshot.entries.insert(under, entry);
                    }
                }
                // A new file or link.
                _ => {
                    changes.push((path.clone(), None, Some(entry.clone())));
                    snapshot.entries.insert(path, entry);
                }
            }
        }
    }
    // What was in `dir` and is not now (nor what was under it).
    let gone: Vec<PathBuf> = snapshot
        .entries
        .keys()
        .filter(|p| {
            p.parent().unwrap_or(Path::new("")) == dir && !seen.contains(p) && p.as_path() != dir
        })
        .cloned()
        .collect();
    for path in gone {
        if let Some(before) = snapshot.entries.remove(&path) {
            changes.push((path.clone(), Some(before), None));
        }
        remove_under(snapshot, &path, changes);
    }
    Ok(())
}

/// Takes what is under the directory `dir` out of `snapshot`, as changes.
fn remove_under(snapshot: &mut Snapshot, dir: &Path, changes: &mut Vec<PathChange>) {
    let under: Vec<PathBuf> = snapshot
        .entries
        .range(dir.to_path_buf()..)
        .skip_while(|(p, _)| p.as_path() == dir)
        .take_while(|(p, _)| p.starts_with(dir))
        .map(|(p, _)| p.clone())
        .collect();
    for p in under {
        if let Some(before) = snapshot.entries.remove(&p) {
            changes.push((p, Some(before), None));
        }
    }
}

/// The entry for what is at `path` now (`None`: nothing, or neither a
/// file, a symlink nor a directory), its content kept in `store` unless
/// `previous` has the same stamp, changed before `settled` (ns).
pub fn entry_of(
    path: &Path,
    store: &Store,
    previous: Option<&Entry>,
    settled: i128,
) -> io::Result<Option<Entry>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        // Gone, or a directory above it is a file now.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
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
        && stamp.changed_ns < settled
        && stamp.modified_ns < settled
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
