//! A session's checkpoints as its runs use them: the [`Recorder`], opened
//! when a run first calls something that may change files (the first
//! snapshot reads the whole tree, which a session that never changes a
//! file should not pay for), and turned off for the session, with a reason
//! said once, when the tree cannot be recorded (too many files, a store
//! that cannot be written).
//!
//! Its methods do blocking file work: the agent calls them off the async
//! threads.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::recorder::Recorder;
use super::store::{Limits, Store};
use super::turn::TurnChanges;

/// The most files a working directory may hold (outside its ignore files)
/// for its turns to be recorded, unless the config says otherwise.
pub const MAX_FILES: usize = 100_000;

pub struct Recording {
    root: PathBuf,
    store_dir: PathBuf,
    limits: Limits,
    max_files: usize,
    state: parking_lot::Mutex<State>,
}

struct State {
    phase: Phase,
    /// A turn is running (begun before the recorder was opened, too).
    in_turn: bool,
}

enum Phase {
    NotYet,
    Open(Box<Recorder>),
    /// Checkpoints are off for this session; the reason is said once.
    Off {
        reason: String,
        said: bool,
    },
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("root", &self.root)
            .field("store_dir", &self.store_dir)
            .finish_non_exhaustive()
    }
}

impl Recording {
    /// Checkpoints of the tree under `root`, kept in the store at
    /// `store_dir` (the project's, see [`super::store_dir`]).
    pub fn new(root: &Path, store_dir: &Path, limits: Limits, max_files: usize) -> Self {
        Self {
            root: root.to_path_buf(),
            store_dir: store_dir.to_path_buf(),
            limits,
            max_files,
            state: parking_lot::Mutex::new(State {
                phase: Phase::NotYet,
                in_turn: false,
            }),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The project's store (for a restore).
    pub fn open_store(&self) -> std::io::Result<Store> {
        Store::open(&self.store_dir, self.limits)
    }

    /// A run begins: the calls until [`Recording::end_turn`] are its (and
    /// what a background job of the last run changed since it ended).
    pub fn begin_turn(&self) {
        let mut state = self.state.lock();
        state.in_turn = true;
        if let Phase::Open(recorder) = &mut state.phase {
            recorder.begin_turn();
        }
    }

    /// Before a call that may change files; opens the recorder the first
    /// time. `Some(reason)`, once: checkpoints are off for the session.
    /// `background`: a job the session started still runs, and what
    /// changed since the last call counts as the turn's.
    pub fn before_call(&self, background: bool) -> Option<String> {
        let mut state = self.state.lock();
        if let Phase::NotYet = state.phase {
            state.phase = match self.open() {
                Ok(mut recorder) => {
                    if state.in_turn {
                        recorder.begin_turn();
                    }
                    Phase::Open(Box::new(recorder))
                }
                Err(reason) => Phase::Off {
                    reason,
                    said: false,
                },
            };
        }
        let failed = match &mut state.phase {
            Phase::Open(recorder) => recorder.before_call(background).err(),
            _ => None,
        };
        if let Some(error) = failed {
            state.phase = Phase::Off {
                reason: format!("the working directory cannot be read ({error})"),
                said: false,
            };
        }
        match &mut state.phase {
            Phase::Off { reason, said } if !*said => {
                *said = true;
                Some(format!(
                    "Checkpoints are off for this session: {reason}. Undo cannot put files back."
                ))
            }
            _ => None,
        }
    }

    /// After the call: what it changed joins the turn's changes.
    /// `background`: a job the session started runs on. `own`: paths
    /// (relative to the root) the call wrote itself.
    pub fn after_call(&self, background: bool, own: &[PathBuf]) {
        let mut state = self.state.lock();
        let failed = match &mut state.phase {
            Phase::Open(recorder) => recorder.after_call_owning(background, own).err(),
            _ => None,
        };
        if let Some(error) = failed {
            // The turn's record would miss this call's changes: none is
            // better than a wrong one.
            state.phase = Phase::Off {
                reason: format!("the working directory cannot be read ({error})"),
                said: false,
            };
        }
    }

    /// A file outside the working directory that a call of the run wrote.
    pub fn note_outside(&self, path: &Path) {
        let mut state = self.state.lock();
        if let Phase::Open(recorder) = &mut state.phase {
            recorder.note_outside(path);
        }
    }

    /// The run ended: what it changed (`None` when checkpoints are off).
    /// Past the store's size, its oldest versions are dropped, except
    /// those this turn and the files as they are now need.
    pub fn end_turn(&self, background: bool) -> Option<TurnChanges> {
        let mut state = self.state.lock();
        state.in_turn = false;
        match &mut state.phase {
            Phase::NotYet => Some(TurnChanges::default()),
            Phase::Off { .. } => None,
            Phase::Open(recorder) => {
                let turn = recorder.end_turn(background);
                if !turn.files.is_empty() {
                    let mut keep: HashSet<_> = recorder.hashes().collect();
                    for change in &turn.files {
                        for entry in [&change.before, &change.after].into_iter().flatten() {
                            if let Ok(Some(hash)) = entry.content {
                                keep.insert(hash);
                            }
                        }
                    }
                    if let Err(error) = recorder.store().trim(&keep) {
                        tracing::warn!(%error, "cannot trim the checkpoint store");
                    }
                }
                Some(turn)
            }
        }
    }

    fn open(&self) -> Result<Recorder, String> {
        let store = Store::open(&self.store_dir, self.limits).map_err(|e| {
            format!(
                "the checkpoint store {} cannot be opened ({e})",
                self.store_dir.display()
            )
        })?;
        let recorder = Recorder::open(&self.root, store, self.max_files)
            .map_err(|e| format!("the working directory cannot be recorded ({e})"))?;
        let keep: HashSet<_> = recorder.hashes().collect();
        if let Err(error) = recorder.store().trim(&keep) {
            tracing::warn!(%error, "cannot trim the checkpoint store");
        }
        Ok(recorder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_records_its_turns_and_says_once_when_it_cannot() {
        let store = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        std::fs::write(work.path().join("a"), "1").unwrap();
        let recording = Recording::new(work.path(), store.path(), Limits::default(), 3);
        // A run that calls nothing records nothing and opens no store.
        recording.begin_turn();
        assert_eq!(recording.end_turn(false), Some(TurnChanges::default()));
        assert!(!store.path().join("objects").exists());

        recording.begin_turn();
        assert_eq!(recording.before_call(false), None);
        std::fs::write(work.path().join("a"), "2").unwrap();
        recording.after_call(false, &[]);
        let turn = recording.end_turn(false).unwrap();
        assert_eq!(turn.files.len(), 1);

        // Past its file limit the session's checkpoints turn off, said once.
        for name in ["b", "c", "d"] {
            std::fs::write(work.path().join(name), "x").unwrap();
        }
        recording.begin_turn();
        let said = recording.before_call(false).unwrap();
        assert!(said.contains("more than 3 files"), "{said}");
        recording.after_call(false, &[]);
        assert_eq!(recording.before_call(false), None);
        assert_eq!(recording.end_turn(false), None);
    }
}
