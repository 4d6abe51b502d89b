//! Putting files back: the step from one state of a set of paths to
//! another (undo goes from a turn's after-state to its before-state, redo
//! the other way). A restore never overwrites a change it did not make:
//! each path is compared with the state the checkpoint left it in, and a
//! path that differs (edited by hand, by the editor, by another session) is
//! a conflict, left alone unless the user confirms, and even then its
//! present content is kept in the store first. So is a change that may be
//! another session's (see [`super::presence`]). Paths stay inside the root:
//! a parent directory that became a symlink is never written through. Each
//! file is written to a temporary file beside it and renamed into place,
//! so a killed process leaves either the old or the restored file.

use std::io;
use std::path::{Component, Path, PathBuf};

use super::store::Store;
use super::tree::{Entry, Kind, NotKept, entry_of};

/// One path's move: what it should be now and what it becomes (`None`:
/// no file there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub path: PathBuf,
    pub expected: Option<Entry>,
    pub target: Option<Entry>,
    /// The change being taken back may be another session's (it ran at
    /// the same moment): asked about like a change made since.
    pub shared: bool,
}

/// A path that is not as the checkpoint left it, or whose change may be
/// another session's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub path: PathBuf,
    /// What is there now (`None`: nothing).
    pub found: Option<Entry>,
    /// As the checkpoint left it, but another session's call ran in the
    /// project while the change was made: it may be that session's.
    pub shared: bool,
}

/// What a restore would do, for the user to see before it happens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Paths that will be put back.
    pub ready: Vec<Step>,
    /// Paths changed since the checkpoint: restored only if confirmed.
    pub conflicts: Vec<(Step, Conflict)>,
    /// Paths whose earlier content was never kept, with why.
    pub not_restorable: Vec<(PathBuf, String)>,
}

/// Checks each step against what is under `root` now.
pub fn plan(root: &Path, store: &Store, steps: Vec<Step>) -> io::Result<Plan> {
    let mut plan = Plan::default();
    for step in steps {
        if let Some(reason) = step.target.as_ref().and_then(not_kept) {
            plan.not_restorable.push((step.path, reason));
            continue;
        }
        if let Some(Ok(Some(hash))) = step.target.as_ref().map(|t| &t.content)
            && !store.contains(*hash)
        {
            plan.not_restorable.push((
                step.path,
                "its copy is not in this machine's checkpoint store: dropped to keep it under [checkpoints] max_size, or kept on the machine that recorded it (another replica of a team gateway)"
                    .into(),
            ));
            continue;
        }
        if inside(root, &step.path).is_none() {
            plan.not_restorable
                .push((step.path, "it is outside the working directory".into()));
            continue;
        }
        let found = current(root, store, &step.path)?;
        let as_left = match (&found, &step.expected) {
            (None, None) => true,
            (Some(found), Some(expected)) => found.same_as(expected),
            _ => false,
        };
        if as_left && !step.shared {
            plan.ready.push(step);
        } else {
            let conflict = Conflict {
                path: step.path.clone(),
                found,
                shared: as_left,
            };
            plan.conflicts.push((step, conflict));
        }
    }
    Ok(plan)
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub restored: Vec<PathBuf>,
    pub failed: Vec<(PathBuf, String)>,
}

/// Carries out the ready steps, and the conflicting ones when `overwrite`
/// is true (their present content was kept in the store by [`plan`]).
pub fn apply(root: &Path, store: &Store, plan: &Plan, overwrite: bool) -> Report {
    let mut report = Report::default();
    let conflicting = plan.conflicts.iter().map(|(step, _)| step);
    let mut steps: Vec<&Step> = if overwrite {
        plan.ready.iter().chain(conflicting).collect()
    } else {
        plan.ready.iter().collect()
    };
    // Directories are made before what goes in them, shallow first, and
    // removed after what was in them, deep first.
    steps.sort_by_key(|step| {
        let depth = step.path.components().count();
        match (&step.target, &step.expected) {
            (
                Some(Entry {
                    kind: Kind::Dir { .. },
                    ..
                }),
                _,
            ) => (0, depth as isize),
            (
                None,
                Some(Entry {
                    kind: Kind::Dir { .. },
                    ..
                }),
            ) => (2, -(depth as isize)),
            _ => (1, 0),
        }
    });
    for step in steps {
        match restore_one(root, store, step) {
            Ok(()) => report.restored.push(step.path.clone()),
            Err(e) => report.failed.push((step.path.clone(), e.to_string())),
        }
    }
    report
}

fn restore_one(root: &Path, store: &Store, step: &Step) -> io::Result<()> {
    let path = inside(root, &step.path).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path is outside the working directory",
        )
    })?;
    ensure_parents(root, &step.path)?;
    let there = match std::fs::symlink_metadata(&path) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    match &step.target {
        None => match there {
            Some(meta) if meta.is_dir() => std::fs::remove_dir(&path).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("the directory is not empty or cannot be removed ({e})"),
                )
            }),
            Some(_) => std::fs::remove_file(&path),
            None => Ok(()),
        },
        Some(Entry {
            kind: Kind::Dir { mode },
            ..
        }) => {
            match there {
                Some(meta) if meta.is_dir() => {}
                Some(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "a file is where the directory was",
                    ));
                }
                None => std::fs::create_dir(&path)?,
            }
            set_dir_mode(&path, *mode)
        }
        Some(entry) => {
            if there.as_ref().is_some_and(std::fs::Metadata::is_dir) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a directory is there now",
                ));
            }
            let temp = temp_beside(&path);
            let written = write_entry(&temp, store, entry);
            let renamed = written.and_then(|()| std::fs::rename(&temp, &path));
            if renamed.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            renamed
        }
    }
}

fn write_entry(temp: &Path, store: &Store, entry: &Entry) -> io::Result<()> {
    match (&entry.kind, &entry.content) {
        (Kind::Symlink { target }, _) => symlink(target, temp),
        (Kind::File { mode }, Ok(Some(hash))) => {
            let bytes = store.read(*hash)?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(temp)?;
            io::Write::write_all(&mut file, &bytes)?;
            // No sync: the rename that follows makes a killed process
            // leave the old file or the new one, never a torn one.
            set_mode(&file, *mode)
        }
        (Kind::File { .. }, _) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "its content was not kept",
        )),
        (Kind::Dir { .. }, _) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a directory is not written as a file",
        )),
    }
}

#[cfg(unix)]
fn symlink(target: &Path, at: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, at)
}

#[cfg(not(unix))]
fn symlink(_target: &Path, _at: &Path) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "symlinks are restored on Unix only",
    ))
}

#[cfg(unix)]
fn set_dir_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_dir_mode(_path: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}

#[cfg(unix)]
fn set_mode(file: &std::fs::File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(file: &std::fs::File, mode: u32) -> io::Result<()> {
    let mut permissions = file.metadata()?.permissions();
    permissions.set_readonly(mode & 0o222 == 0);
    file.set_permissions(permissions)
}

fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.pincer-restore-{}", std::process::id()))
}

/// Why an entry cannot be written back, if it cannot.
fn not_kept(entry: &Entry) -> Option<String> {
    match &entry.content {
        Err(NotKept::TooLarge { size }) => Some(format!(
            "it was {size} bytes, too large to keep (see [checkpoints] max_file)"
        )),
        Err(NotKept::Unreadable(why)) => Some(format!("it could not be read ({why})")),
        Ok(_) => None,
    }
}

/// What is at `relative` under `root` now (`None`: nothing, or a path
/// outside the root or under a directory that became a symlink), its
/// content kept in `store`.
pub fn current(root: &Path, store: &Store, relative: &Path) -> io::Result<Option<Entry>> {
    match inside(root, relative) {
        Some(path) if parents_are_directories(root, relative) => {
            entry_of(&path, store, None, i128::MIN)
        }
        _ => Ok(None),
    }
}

/// `root` joined with `relative` if `relative` names a path strictly
/// inside it (no `..`, no absolute part).
fn inside(root: &Path, relative: &Path) -> Option<PathBuf> {
    let normal = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    (normal && relative.components().next().is_some()).then(|| root.join(relative))
}

/// Whether every directory between `root` and `relative`'s last part is a
/// real directory (none missing, none a symlink).
fn parents_are_directories(root: &Path, relative: &Path) -> bool {
    walk_parents(root, relative, false).is_ok()
}

/// Creates the missing directories between `root` and `relative`'s last
/// part; refuses one that is a symlink or not a directory.
fn ensure_parents(root: &Path, relative: &Path) -> io::Result<()> {
    walk_parents(root, relative, true)
}

/// Checks each directory between `root` and `relative`'s last part,
/// creating a missing one when `create` is set.
fn walk_parents(root: &Path, relative: &Path, create: bool) -> io::Result<()> {
    let mut at = root.to_path_buf();
    let parts: Vec<_> = relative.components().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is no longer a directory (a symlink or a file): nothing is written through it",
                        at.display()
                    ),
                ));
            }
            Err(e) if create && e.kind() == io::ErrorKind::NotFound => std::fs::create_dir(&at)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "restore/tests.rs"]
mod tests;
