//! Which paths of a tree changed since the last look, from the kernel
//! (Linux's inotify) instead of a `stat` of every file: what makes the
//! snapshots around each call cost next to nothing when a command changed
//! little. Every directory the snapshot holds is watched (ignored ones,
//! such as `target/`, are not, so a build's output costs nothing either);
//! a write or a mode change reads its file again, and a name added,
//! removed or renamed is looked at (see [`super::tree::update_seen`]).
//!
//! The kernel queues an event before the call that caused it returns, so
//! once a command has exited, everything it did is in the queue. A queue
//! that overflowed, a watch the kernel refused (past the user's
//! `max_user_watches`) or a platform without inotify makes the recorder
//! fall back to comparing every path's stamp ([`super::tree::update`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What changed since the last [`Watcher::changed`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// Directories whose listing changed (or whose own mode did: their
    /// parent is listed).
    pub dirs: BTreeSet<PathBuf>,
    /// Paths written to or changed in mode.
    pub paths: BTreeSet<PathBuf>,
    /// Names added, removed or renamed in a directory.
    pub named: BTreeSet<PathBuf>,
}

#[cfg(target_os = "linux")]
mod imp {
    use super::*;
    use nix::errno::Errno;
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
    use std::collections::HashMap;

    pub struct Watcher {
        inotify: Inotify,
        dirs: HashMap<WatchDescriptor, PathBuf>,
    }

    const LISTING: AddWatchFlags = AddWatchFlags::IN_CREATE
        .union(AddWatchFlags::IN_DELETE)
        .union(AddWatchFlags::IN_MOVED_FROM)
        .union(AddWatchFlags::IN_MOVED_TO);

    fn mask() -> AddWatchFlags {
        LISTING
            | AddWatchFlags::IN_MODIFY
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_DONT_FOLLOW
            | AddWatchFlags::IN_ONLYDIR
    }

    impl Watcher {
        pub fn new() -> std::io::Result<Self> {
            let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
            Ok(Self {
                inotify,
                dirs: HashMap::new(),
            })
        }

        /// Watches the directory `relative` under `root`.
        pub fn watch(&mut self, root: &Path, relative: &Path) -> std::io::Result<()> {
            let wd = self.inotify.add_watch(&root.join(relative), mask())?;
            self.dirs.insert(wd, relative.to_path_buf());
            Ok(())
        }

        /// How many directories are watched.
        pub fn count(&self) -> usize {
            self.dirs.len()
        }

        /// What changed since the last call; `None`: the kernel dropped
        /// events (its queue overflowed), so anything may have.
        pub fn changed(&mut self) -> Option<Changed> {
            let mut changed = Changed::default();
            loop {
                let events = match self.inotify.read_events() {
                    Ok(events) => events,
                    Err(Errno::EAGAIN) => return Some(changed),
                    Err(error) => {
                        tracing::debug!(%error, "cannot read the checkpoint's file events");
                        return None;
                    }
                };
                for event in events {
                    if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                        return None;
                    }
                    let Some(dir) = self.dirs.get(&event.wd).cloned() else {
                        continue;
                    };
                    if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                        self.dirs.remove(&event.wd);
                    }
                    match event.name {
                        // The directory itself: gone, moved, or its mode.
                        None => {
                            changed
                                .dirs
                                .insert(dir.parent().map(Path::to_path_buf).unwrap_or_default());
                        }
                        Some(name) => {
                            let path = dir.join(name);
                            if event.mask.intersects(LISTING) {
                                changed.named.insert(path);
                            } else if event.mask.contains(AddWatchFlags::IN_ISDIR) {
                                // A subdirectory's mode: its entry is
                                // in this listing.
                                changed.dirs.insert(dir);
                            } else {
                                changed.paths.insert(path);
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::*;

    /// No watching here: every look compares every path's stamp.
    pub struct Watcher;

    impl Watcher {
        pub fn new() -> std::io::Result<Self> {
            Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "file events are watched on Linux only",
            ))
        }

        pub fn watch(&mut self, _root: &Path, _relative: &Path) -> std::io::Result<()> {
            Ok(())
        }

        pub fn changed(&mut self) -> Option<Changed> {
            None
        }

        pub fn count(&self) -> usize {
            0
        }
    }
}

pub use imp::Watcher;
