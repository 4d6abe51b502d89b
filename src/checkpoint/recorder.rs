//! A session's checkpoint recorder: the working directory's last snapshot,
//! and the changes of the turn running now. Every call that may change
//! files (pincer's tools, commands, MCP tools, hooks) is wrapped in
//! [`Recorder::before_call`] and [`Recorder::after_call`]: the snapshot
//! before the call is taken anew, so what the user or the editor changed
//! between calls is not counted as the turn's, and what differs after the
//! call is. The calls of a turn merge into its [`TurnChanges`]. Each window
//! is made known to the project's other sessions ([`Presence`]): what
//! changed while another session's window was open too may be its change,
//! and is marked shared.

use std::io;
use std::path::{Path, PathBuf};

use super::presence::{Presence, new_tag};
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
    /// The session's calls between their `before_call` and `after_call`:
    /// the Claude Code runtime runs several at once.
    open_calls: usize,
    /// The last turn ended with a background job still running: what
    /// changed since counts with the next turn (the job may have made it).
    background: bool,
    turn: Option<TurnChanges>,
    max_files: usize,
    /// The kernel's word on what changed (`None`: every look compares
    /// every path's stamp).
    watcher: Option<Watcher>,
    /// This session's name among the windows of the project's sessions.
    tag: String,
    /// The window of the call running now.
    call: Option<Presence>,
    /// The window of the session's background jobs, while one runs.
    background_window: Option<Presence>,
}

/// Which window an interval was seen in.
#[derive(Clone, Copy)]
enum Window {
    Call,
    Background,
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
            open_calls: 0,
            background: false,
            turn: None,
            max_files,
            watcher,
            tag: new_tag(),
            call: None,
            background_window: None,
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
                let is_dir = |e: &Option<super::tree::Entry>| {
                    e.as_ref()
                        .is_some_and(|e| matches!(e.kind, Kind::Dir { .. }))
                };
                is_dir(after) && !is_dir(before)
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
            && let Err(error) = self.count_changes(Window::Background, &[])
        {
            tracing::debug!(%error, "cannot count a background job's changes");
        }
    }

    /// Before a call that may change files. With `background` (a job the
    /// session started is still running), what changed since the last
    /// snapshot counts as the turn's too: the job may have made it.
    /// Another call of the session's already open: what changed so far is
    /// counted (it is the open one's), and both go on in one window.
    pub fn before_call(&mut self, background: bool) -> io::Result<()> {
        self.keep_background_window(background);
        if self.open_calls > 0 {
            self.open_calls += 1;
            return self.count_changes(Window::Call, &[]);
        }
        // Known to the other sessions before the snapshot it begins with.
        self.call = self.enter();
        if background && self.turn.is_some() {
            self.open_calls = 1;
            return self.count_changes(Window::Background, &[]);
        }
        self.refresh()?;
        self.open_calls = 1;
        Ok(())
    }

    /// What changed since the last snapshot joins the turn's changes,
    /// marked shared when another session's window overlapped the
    /// interval (looked at after the snapshot that ends it).
    /// `own`: paths the call wrote itself, whose change is not shared.
    fn count_changes(&mut self, window: Window, own: &[PathBuf]) -> io::Result<()> {
        let changes = self.refresh()?;
        let shared = match window {
            Window::Call => self.call.as_mut().is_some_and(Presence::look),
            Window::Background => self.background_window.as_mut().is_some_and(Presence::look),
        };
        if let Some(turn) = &mut self.turn {
            let (mine, rest): (Vec<_>, Vec<_>) = changes
                .into_iter()
                .partition(|(path, _, _)| own.contains(path));
            turn.merge(TurnChanges::from_changes(rest, shared));
            turn.merge(TurnChanges::from_changes(mine, false));
        }
        Ok(())
    }

    /// After it: what changed since [`Recorder::before_call`] joins the
    /// turn's changes. Without a `before_call` (it failed), nothing is
    /// counted. `background`: a job of the session runs on (the call may
    /// have started it); its window opens before the call's closes.
    pub fn after_call(&mut self, background: bool) -> io::Result<()> {
        self.after_call_owning(background, &[])
    }

    /// [`Recorder::after_call`] for a call that wrote the paths `own`
    /// (relative to the root) itself (pincer's `write` and `edit`): their
    /// changes are the call's even if another session's call ran at the
    /// same moment.
    pub fn after_call_owning(&mut self, background: bool, own: &[PathBuf]) -> io::Result<()> {
        self.keep_background_window(background);
        if self.open_calls == 0 {
            self.call = None;
            return Ok(());
        }
        self.open_calls -= 1;
        let counted = self.count_changes(Window::Call, own);
        if self.open_calls == 0 {
            self.call = None;
        }
        counted
    }

    /// A window of this session's, or none when the store cannot be
    /// written (its blobs could not be either).
    fn enter(&self) -> Option<Presence> {
        Presence::enter(self.store.dir(), &self.tag)
            .inspect_err(|error| tracing::debug!(%error, "cannot mark a checkpoint window"))
            .ok()
    }

    /// Opens the background jobs' window while one runs, closes it after.
    fn keep_background_window(&mut self, background: bool) {
        if !background {
            self.background_window = None;
        } else if self.background_window.is_none() {
            self.background_window = self.enter();
        }
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
        self.open_calls = 0;
        self.call = None;
        if background && let Err(error) = self.count_changes(Window::Background, &[]) {
            tracing::debug!(%error, "cannot count a background job's changes");
        }
        self.keep_background_window(background);
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
        recorder.after_call(false).unwrap();
        // The user edits notes.md while the model thinks.
        std::fs::write(root.join("notes.md"), "mine, edited\n").unwrap();
        recorder.before_call(false).unwrap();
        std::fs::write(root.join("new.rs"), "new\n").unwrap();
        recorder.after_call(false).unwrap();
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
        recorder.after_call(false).unwrap();
        assert_eq!(recorder.end_turn(false), TurnChanges::default());
    }

    #[test]
    fn what_changed_while_two_sessions_calls_ran_at_once_is_shared_and_else_not() {
        let store_dir = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let root = work.path();
        std::fs::write(root.join("a.txt"), "a1\n").unwrap();
        std::fs::write(root.join("b.txt"), "b1\n").unwrap();
        let open = || {
            let store = Store::open(store_dir.path(), Limits::default()).unwrap();
            Recorder::open(root, store, 1000).unwrap()
        };
        let (mut first, mut second) = (open(), open());
        let shared = |turn: &TurnChanges| -> Vec<(String, bool)> {
            turn.files
                .iter()
                .map(|c| (c.path.display().to_string(), c.shared))
                .collect()
        };

        // One after the other: each its own.
        first.begin_turn();
        second.begin_turn();
        first.before_call(false).unwrap();
        std::fs::write(root.join("a.txt"), "a2\n").unwrap();
        first.after_call(false).unwrap();
        second.before_call(false).unwrap();
        std::fs::write(root.join("b.txt"), "b2\n").unwrap();
        second.after_call(false).unwrap();
        assert_eq!(shared(&first.end_turn(false)), [("a.txt".into(), false)]);
        assert_eq!(shared(&second.end_turn(false)), [("b.txt".into(), false)]);

        // At the same moment: each sees both changes, and cannot tell
        // whose they are.
        first.begin_turn();
        second.begin_turn();
        first.before_call(false).unwrap();
        second.before_call(false).unwrap();
        std::fs::write(root.join("a.txt"), "a3\n").unwrap();
        std::fs::write(root.join("b.txt"), "b3\n").unwrap();
        second.after_call(false).unwrap();
        first.after_call(false).unwrap();
        let both = [("a.txt".to_string(), true), ("b.txt".to_string(), true)];
        assert_eq!(shared(&first.end_turn(false)), both);
        assert_eq!(shared(&second.end_turn(false)), both);

        // A file the first session's own edit wrote is its own, whatever
        // ran meanwhile; the second cannot know that, and asks.
        first.begin_turn();
        second.begin_turn();
        second.before_call(false).unwrap();
        first.before_call(false).unwrap();
        std::fs::write(root.join("a.txt"), "a4\n").unwrap();
        first
            .after_call_owning(false, &[PathBuf::from("a.txt")])
            .unwrap();
        second.after_call(false).unwrap();
        assert_eq!(shared(&first.end_turn(false)), [("a.txt".into(), false)]);
        assert_eq!(shared(&second.end_turn(false)), [("a.txt".into(), true)]);

        // A session's background job runs on after its turn: what another
        // session's call sees meanwhile may be the job's.
        first.begin_turn();
        first.before_call(false).unwrap();
        first.after_call(true).unwrap();
        first.end_turn(true);
        second.begin_turn();
        second.before_call(false).unwrap();
        std::fs::write(root.join("b.txt"), "b4\n").unwrap();
        second.after_call(false).unwrap();
        assert_eq!(shared(&second.end_turn(false)), [("b.txt".into(), true)]);
        // The job ended: the next call is the session's alone.
        first.begin_turn();
        first.before_call(false).unwrap();
        first.after_call(false).unwrap();
        first.end_turn(false);
        second.begin_turn();
        second.before_call(false).unwrap();
        std::fs::write(root.join("b.txt"), "b5\n").unwrap();
        second.after_call(false).unwrap();
        assert_eq!(shared(&second.end_turn(false)), [("b.txt".into(), false)]);
    }

    #[test]
    fn calls_of_one_session_that_run_at_once_count_every_change() {
        let store_dir = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let root = work.path();
        let store = Store::open(store_dir.path(), Limits::default()).unwrap();
        let mut recorder = Recorder::open(root, store, 1000).unwrap();
        recorder.begin_turn();
        recorder.before_call(false).unwrap();
        std::fs::write(root.join("one.txt"), "1").unwrap();
        // A second call starts while the first runs.
        recorder.before_call(false).unwrap();
        std::fs::write(root.join("two.txt"), "2").unwrap();
        recorder.after_call(false).unwrap();
        std::fs::write(root.join("three.txt"), "3").unwrap();
        recorder.after_call(false).unwrap();
        let turn = recorder.end_turn(false);
        let paths: Vec<(&Path, bool)> = turn
            .files
            .iter()
            .map(|c| (c.path.as_path(), c.shared))
            .collect();
        assert_eq!(
            paths,
            [
                (Path::new("one.txt"), false),
                (Path::new("three.txt"), false),
                (Path::new("two.txt"), false)
            ]
        );
    }

    /// Each path with what it holds, whatever its times.
    fn held(snapshot: &Snapshot) -> Vec<String> {
        snapshot
            .entries
            .iter()
            .map(|(p, e)| format!("{} {:?} {:?}", p.display(), e.kind, e.content))
            .collect()
    }

    #[cfg(unix)]
    #[test]
    fn what_the_kernel_says_changed_brings_the_snapshot_where_a_whole_scan_does() {
        use crate::checkpoint::fixture::fixture;
        use crate::checkpoint::tree::changes;
        let f = fixture(1 << 20);
        f.prepare_every_kind_of_change();
        f.write(".gitignore", b"*.log\n");
        f.write("old/deep/a.txt", b"a\n");
        f.write("kept/c.txt", b"c\n");
        f.write("kept/f.txt", b"f\n");
        let before = f.scan(None);
        let mut recorder = Recorder::open(f.root(), f.store.clone(), 1000).unwrap();
        assert!(recorder.watcher.is_some());
        recorder.begin_turn();
        recorder.before_call(false).unwrap();
        f.make_every_kind_of_change();
        std::fs::remove_dir_all(f.at("old")).unwrap();
        f.write("new/deep/d.txt", b"d\n");
        // Written beside and renamed over a known file, as a restore does.
        f.write("kept/.c.txt.tmp", b"C\n");
        std::fs::rename(f.at("kept/.c.txt.tmp"), f.at("kept/c.txt")).unwrap();
        // A file that comes and goes; one the ignore file leaves out.
        f.write("kept/scratch", b"x\n");
        std::fs::remove_file(f.at("kept/scratch")).unwrap();
        f.write("kept/run.log", b"noise\n");
        // A known file that becomes a directory.
        std::fs::remove_file(f.at("kept/f.txt")).unwrap();
        f.write("kept/f.txt/inner.txt", b"in\n");
        recorder.after_call(false).unwrap();
        let turn = recorder.end_turn(false);

        let whole = f.scan(None);
        assert_eq!(held(&recorder.last), held(&whole));
        let found: Vec<PathBuf> = turn.files.into_iter().map(|c| c.path).collect();
        let expected: Vec<PathBuf> = changes(&before, &whole)
            .into_iter()
            .map(|c| c.path().to_path_buf())
            .collect();
        assert_eq!(found, expected);

        // The directory that was a file is watched now; a directory
        // replaced by a file takes what was under it along.
        recorder.begin_turn();
        recorder.before_call(false).unwrap();
        f.write("kept/f.txt/inner.txt", b"again\n");
        std::fs::remove_dir_all(f.at("new/deep")).unwrap();
        f.write("new/deep", b"a file now\n");
        recorder.after_call(false).unwrap();
        let turn = recorder.end_turn(false);
        let whole_again = f.scan(None);
        assert_eq!(held(&recorder.last), held(&whole_again));
        let found: Vec<PathBuf> = turn.files.into_iter().map(|c| c.path).collect();
        let expected: Vec<PathBuf> = changes(&whole, &whole_again)
            .into_iter()
            .map(|c| c.path().to_path_buf())
            .collect();
        assert_eq!(found, expected);
    }
}
