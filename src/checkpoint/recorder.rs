//! A session's checkpoint recorder: the working directory's last snapshot,
//! and the changes of the turn running now. Every call that may change
//! files (pincer's tools, commands, MCP tools, hooks) is wrapped in
//! [`Recorder::before_call`] and [`Recorder::after_call`]: the snapshot
//! before the call is taken anew, so what the user or the editor changed
//! between calls is not counted as the turn's, and what differs after the
//! call is. The calls of a turn merge into its [`TurnChanges`].

use std::io;
use std::path::{Path, PathBuf};

use super::store::Store;
use super::tree::{Kind, PathChange, Snapshot, scan, update, update_seen};
use super::turn::TurnChanges;
use super::watch::Watcher;

/// The most directories one recorder watches: the user's inotify watches
/// (`max_user_watches`, as low as 8,192 on older kernels) are shared with
/// every other program's, an editor's file watcher first.
pub const MAX_WATCHES: usize = 4096;

pub struct Recorder {
    root: PathBuf,
    store: Store,
    /// The last snapshot: taken by `before_call`, it is what the
    /// matching `after_call` compares with.
    last: Snapshot,
    /// Between a `before_call` and its `after_call`.
    in_call: bool,
    /// The last turn ended with a background job still running: what
    /// changed since counts with the next turn (the job may have made it).
    background: bool,
    turn: Option<TurnChanges>,
    max_files: usize,
    /// The kernel's word on what changed (`None`: every look compares
    /// every path's stamp).
    watcher: Option<Watcher>,
}

impl Recorder {
    /// A recorder for the tree under `root`; its first snapshot reads and
    /// stores every file (unchanged ones are shared with the project's
    /// other sessions by content).
    /// A tree of more than `max_files` files is refused (see [`scan`]).
    pub fn open(root: &Path, store: Store, max_files: usize) -> io::Result<Self> {
        // Watched before the first look, so that nothing done meanwhile
        // goes unseen.
        let mut watcher = Watcher::new().ok();
        if let Some(w) = &mut watcher
            && w.watch(root, Path::new("")).is_err()
        {
            watcher = None;
        }
        let last = scan(root, &store, None, max_files)?;
        let mut recorder = Self {
            root: root.to_path_buf(),
            store,
            last,
            in_call: false,
            background: false,
            turn: None,
            max_files,
            watcher,
        };
        let dirs: Vec<PathBuf> = recorder.dirs().cloned().collect();
        if dirs.len() >= MAX_WATCHES {
            // The user's inotify watches are shared with their editor's
            // file watchers: a huge tree is compared by stamps instead.
            recorder.watcher = None;
        }
        recorder.watch(&dirs);
        if recorder.watcher.is_some() {
            // What changed in a directory between its scan and its watch.
            update(
                &recorder.root,
                &recorder.store,
                &mut recorder.last,
                max_files,
            )?;
        }
        Ok(recorder)
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Brings the last snapshot up to date: from the watcher's events when
    /// there is one, else by comparing every path's stamp.
    fn refresh(&mut self) -> io::Result<Vec<PathChange>> {
        let seen = self.watcher.as_mut().and_then(Watcher::changed);
        let changes = match seen {
            Some(seen) => update_seen(
                &self.root,
                &self.store,
                &mut self.last,
                seen,
                self.max_files,
            )?,
            None => update(&self.root, &self.store, &mut self.last, self.max_files)?,
        };
        // New directories are watched too (the events of what was made in
        // them before the watch are covered: the update listed them whole).
        let made: Vec<PathBuf> = changes
            .iter()
            .filter(|(_, before, after)| {
                before.is_none()
                    && after
                        .as_ref()
                        .is_some_and(|e| matches!(e.kind, Kind::Dir { .. }))
            })
            .map(|(path, _, _)| path.clone())
            .collect();
        self.watch(&made);
        Ok(changes)
    }

    fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        self.last
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.kind, Kind::Dir { .. }))
            .map(|(p, _)| p)
    }

    /// Watches `dirs`; past the kernel's limit or [`MAX_WATCHES`], stops
    /// watching at all.
    fn watch(&mut self, dirs: &[PathBuf]) {
        let Some(watcher) = &mut self.watcher else {
            return;
        };
        if watcher.count() + dirs.len() > MAX_WATCHES {
            self.watcher = None;
            return;
        }
        for dir in dirs {
            if let Err(error) = watcher.watch(&self.root, dir) {
                tracing::debug!(%error, "cannot watch {}; comparing stamps instead", dir.display());
                self.watcher = None;
                return;
            }
        }
    }

    /// The blobs the files hold as last seen.
    pub fn hashes(&self) -> impl Iterator<Item = super::store::Hash> + '_ {
        self.last
            .entries
            .values()
            .filter_map(|e| e.content.clone().ok().flatten())
    }

    /// A turn begins: calls until [`Recorder::end_turn`] count as its.
    pub fn begin_turn(&mut self) {
        self.turn = Some(TurnChanges::default());
        if std::mem::take(&mut self.background)
            && let Err(error) = self.count_changes()
        {
            tracing::debug!(%error, "cannot count a background job's changes");
        }
    }

    /// Before a call that may change files. With `background` (a job the
    /// session started is still running), what changed since the last
    /// snapshot counts as the turn's too: the job may have made it.
    pub fn before_call(&mut self, background: bool) -> io::Result<()> {
        self.in_call = false;
        if background && self.turn.is_some() {
            self.in_call = true;
            return self.count_changes();
        }
        self.refresh()?;
        self.in_call = true;
        Ok(())
    }

    /// What changed since the last snapshot joins the turn's changes.
    fn count_changes(&mut self) -> io::Result<()> {
        let changes = self.refresh()?;
        if let Some(turn) = &mut self.turn {
            turn.merge(TurnChanges::from_changes(changes));
        }
        Ok(())
    }

    /// After it: what changed since [`Recorder::before_call`] joins the
    /// turn's changes. Without a `before_call` (it failed), nothing is
    /// counted.
    pub fn after_call(&mut self) -> io::Result<()> {
        if !std::mem::take(&mut self.in_call) {
            return Ok(());
        }
        self.count_changes()
    }

    /// A file outside the root that a call of the turn wrote: named in the
    /// turn's record, never restored.
    pub fn note_outside(&mut self, path: &Path) {
        if let Some(turn) = &mut self.turn
            && !turn.outside.iter().any(|p| p == path)
        {
            turn.outside.push(path.to_path_buf());
        }
    }

    /// The turn ends; what it changed. With `background` (a job of the
    /// session still runs), what changed since its last call counts too.
    pub fn end_turn(&mut self, background: bool) -> TurnChanges {
        self.in_call = false;
        if background && let Err(error) = self.count_changes() {
            tracing::debug!(%error, "cannot count a background job's changes");
        }
        self.background = background;
        self.turn.take().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::checkpoint::restore::{apply, plan};
    use crate::checkpoint::store::Limits;

    #[test]
    fn a_turn_counts_its_calls_changes_and_not_the_user_s_between_them() {
        let store_dir = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let root = work.path();
        std::fs::write(root.join("code.rs"), "v1\n").unwrap();
        std::fs::write(root.join("notes.md"), "mine\n").unwrap();
        let store = Store::open(store_dir.path(), Limits::default()).unwrap();
        let mut recorder = Recorder::open(root, store, 1000).unwrap();

        recorder.begin_turn();
        recorder.before_call(false).unwrap();
        std::fs::write(root.join("code.rs"), "v2\n").unwrap();
        recorder.after_call().unwrap();
        // The user edits notes.md while the model thinks.
        std::fs::write(root.join("notes.md"), "mine, edited\n").unwrap();
        recorder.before_call(false).unwrap();
        std::fs::write(root.join("new.rs"), "new\n").unwrap();
        recorder.after_call().unwrap();
        let turn = recorder.end_turn(false);

        let paths: Vec<&Path> = turn.files.iter().map(|c| c.path.as_path()).collect();
        assert_eq!(paths, [Path::new("code.rs"), Path::new("new.rs")]);
        // Undo takes back the turn's changes and leaves the user's.
        let undo = plan(root, recorder.store(), turn.undo()).unwrap();
        assert!(undo.conflicts.is_empty(), "{:?}", undo.conflicts);
        assert!(
            apply(root, recorder.store(), &undo, false)
                .failed
                .is_empty()
        );
        assert_eq!(
            std::fs::read_to_string(root.join("code.rs")).unwrap(),
            "v1\n"
        );
        assert!(!root.join("new.rs").exists());
        assert_eq!(
            std::fs::read_to_string(root.join("notes.md")).unwrap(),
            "mine, edited\n"
        );
        // Outside a turn nothing is counted.
        recorder.before_call(false).unwrap();
        std::fs::write(root.join("code.rs"), "v9\n").unwrap();
        recorder.after_call().unwrap();
        assert_eq!(recorder.end_turn(false), TurnChanges::default());
    }
}
