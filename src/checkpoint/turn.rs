//! What one turn changed, as the transcript keeps it: each path with what
//! it was before the turn's first change and after its last. A turn runs
//! several calls, each compared before and after; their changes are merged
//! into the turn's, so undo restores the state before the turn whatever
//! happened in between, and a file the turn created and deleted again is
//! no change at all. Only changed paths are recorded, never a whole tree.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::restore::Step;
use super::tree::Entry;
#[cfg(test)]
use super::tree::{Snapshot, changes};

/// One path's change (`None`: no file there).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: PathBuf,
    pub before: Option<Entry>,
    pub after: Option<Entry>,
    /// Changed while another session's call ran in the project too: it may
    /// be that session's change (see [`super::presence`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// A turn's changes, by path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnChanges {
    pub files: Vec<FileChange>,
    /// Files the turn's own tools wrote outside the working directory:
    /// never recorded nor restored, only named to the user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside: Vec<PathBuf>,
}

impl TurnChanges {
    /// The changes from `before` to `after` (one call's).
    #[cfg(test)]
    pub(crate) fn between(before: &Snapshot, after: &Snapshot) -> Self {
        let files = changes(before, after)
            .into_iter()
            .map(|change| {
                let path = change.path().to_path_buf();
                FileChange {
                    before: before.entries.get(&path).cloned(),
                    after: after.entries.get(&path).cloned(),
                    path,
                    shared: false,
                }
            })
            .collect();
        Self {
            files,
            outside: Vec::new(),
        }
    }

    /// The changes [`super::tree::update`] found; `shared`: another
    /// session's call ran meanwhile.
    pub fn from_changes(changes: Vec<super::tree::PathChange>, shared: bool) -> Self {
        Self {
            files: changes
                .into_iter()
                .map(|(path, before, after)| FileChange {
                    path,
                    before,
                    after,
                    shared,
                })
                .collect(),
            outside: Vec::new(),
        }
    }

    /// Adds a later call's changes: a path keeps its first `before` and
    /// takes the later `after`, and is shared if either change was; one
    /// that ends as it began is dropped.
    pub fn merge(&mut self, later: TurnChanges) {
        for path in later.outside {
            if !self.outside.contains(&path) {
                self.outside.push(path);
            }
        }
        let mut by_path: BTreeMap<PathBuf, FileChange> = std::mem::take(&mut self.files)
            .into_iter()
            .map(|c| (c.path.clone(), c))
            .collect();
        for change in later.files {
            match by_path.get_mut(&change.path) {
                Some(known) => {
                    known.after = change.after;
                    known.shared |= change.shared;
                }
                None => {
                    by_path.insert(change.path.clone(), change);
                }
            }
        }
        self.files = by_path
            .into_values()
            .filter(|c| !same(c.before.as_ref(), c.after.as_ref()))
            .collect();
    }

    /// The steps that put the paths back as they were before the turn.
    pub fn undo(&self) -> Vec<Step> {
        self.files
            .iter()
            .map(|c| Step {
                path: c.path.clone(),
                expected: c.after.clone(),
                target: c.before.clone(),
                shared: c.shared,
            })
            .collect()
    }

    /// The steps that make the turn's changes again after an undo.
    pub fn redo(&self) -> Vec<Step> {
        self.files
            .iter()
            .map(|c| Step {
                path: c.path.clone(),
                expected: c.before.clone(),
                target: c.after.clone(),
                shared: false,
            })
            .collect()
    }
}

fn same(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.same_as(b),
        _ => false,
    }
}

#[cfg(test)]
#[path = "turn/tests.rs"]
mod tests;
