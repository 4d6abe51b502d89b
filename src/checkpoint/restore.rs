//! Putting files back: the step from one state of a set of paths to
//! another (undo goes from a turn's after-state to its before-state, redo
//! the other way). A restore never overwrites a change it did not make:
//! each path is compared with the state the checkpoint left it in, and a
//! path that differs (edited by hand, by the editor, by another session) is
//! a conflict, left alone unless the user confirms, and even then its
//! present content is kept in the store first. Paths stay inside the root:
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
}

/// A path that is not as the checkpoint left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub path: PathBuf,
    /// What is there now (`None`: nothing).
    pub found: Option<Entry>,
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
        let Some(path) = inside(root, &step.path) else {
            plan.not_restorable
                .push((step.path, "it is outside the working directory".into()));
            continue;
        };
        let found = if parents_are_directories(root, &step.path) {
            entry_of(&path, store, None)?
        } else {
            None
        };
        let as_left = match (&found, &step.expected) {
            (None, None) => true,
            (Some(found), Some(expected)) => found.same_as(expected),
            _ => false,
        };
        if as_left {
            plan.ready.push(step);
        } else {
            let conflict = Conflict {
                path: step.path.clone(),
                found,
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
    let steps: Vec<&Step> = if overwrite {
        plan.ready.iter().chain(conflicting).collect()
    } else {
        plan.ready.iter().collect()
    };
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
    match &step.target {
        None => match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a directory is there now",
            )),
            Ok(_) => std::fs::remove_file(&path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        },
        Some(entry) => {
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
            set_mode(&file, *mode)?;
            file.sync_all()
        }
        (Kind::File { .. }, _) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "its content was not kept",
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
