//! Who else is changing files in this project at the same moment. A
//! snapshot before and after a call says what changed, not who changed it:
//! when two sessions (in this process or another) run calls in one
//! directory at once, each sees the other's changes in its window. Neither
//! can tell them apart, so both mark what they saw then as *shared*, and a
//! restore treats a shared file as changed since (listed, left alone
//! unless the user says overwrite): an undo in one session never silently
//! takes back another's change.
//!
//! Each window that records changes holds a marker file in the store's
//! `present/` directory for its whole length: made before its first
//! snapshot, removed after its last look. On entering, a window lists the
//! markers there (another session's marker means they overlap) and appends
//! a byte to each, so that the other learns of it even if it is gone by
//! then; on each look it lists them again and checks whether its own
//! marker grew. Of two windows that overlap, at least one sees the other's
//! marker on entering (both made theirs before listing), and the other
//! sees it then, on its look, or by the byte it got.
//!
//! A marker names its session, process id and the process's start time: a
//! marker whose process is gone (killed) is stale, removed and ignored.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// One window's marker.
#[derive(Debug)]
pub struct Presence {
    dir: PathBuf,
    name: String,
    tag: String,
    /// The marker's length at the last look: it grows by a byte for each
    /// window of another session that began since.
    len: u64,
    /// Another session's marker was there at the last look.
    others: bool,
}

impl Presence {
    /// A window of the session `tag` begins, in the store at `store_dir`.
    /// Call it before the window's first snapshot.
    pub fn enter(store_dir: &Path, tag: &str) -> io::Result<Self> {
        let dir = store_dir.join("present");
        create_private_dir(&dir)?;
        let pid = std::process::id();
        let stamp = process_stamp(pid).unwrap_or_else(|| format!("{pid}.0"));
        let name = format!("{tag}.{stamp}");
        let name = format!("{name}.{}", unique());
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(&name))?;
        let mut presence = Self {
            dir,
            name,
            tag: tag.to_string(),
            len: 0,
            others: false,
        };
        let others = presence.others()?;
        for other in &others {
            // Tells the other window it is not alone, should it end
            // before it looks again; it may be gone already.
            if let Ok(mut file) = OpenOptions::new()
                .append(true)
                .open(presence.dir.join(other))
            {
                let _ = file.write_all(b".");
            }
        }
        presence.others = !others.is_empty();
        Ok(presence)
    }

    /// Whether another session's window overlapped this one since it
    /// began or since the last look. Call it after the snapshot that
    /// ends the interval.
    pub fn look(&mut self) -> bool {
        let others = match self.others() {
            Ok(others) => !others.is_empty(),
            // Cannot tell: taken as shared.
            Err(_) => true,
        };
        let len = std::fs::metadata(self.dir.join(&self.name))
            .map(|m| m.len())
            .unwrap_or(u64::MAX);
        let shared = self.others || others || len != self.len;
        self.others = others;
        self.len = len;
        shared
    }

    /// The markers of other sessions' windows whose process still runs;
    /// stale ones are removed.
    fn others(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        let prefix = format!("{}.", self.tag);
        for entry in std::fs::read_dir(&self.dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) {
                continue;
            }
            match alive(&name) {
                Some(true) => out.push(name),
                Some(false) => {
                    let _ = std::fs::remove_file(self.dir.join(&name));
                }
                None => {}
            }
        }
        Ok(out)
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.dir.join(&self.name));
    }
}

/// A session's tag: random, so that two sessions never share one.
pub fn new_tag() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        // Still distinct within the process.
        bytes = unique().to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// `<pid>.<start>`: the process and when it started (so that a reused
/// process id does not keep a dead session's marker alive).
fn process_stamp(pid: u32) -> Option<String> {
    Some(format!("{pid}.{}", start_time(pid)?))
}

/// Whether the process that made the marker `name` still runs; `None`
/// for a name that is not a marker's (left alone, and not counted: a
/// stray file must not make every window shared).
fn alive(name: &str) -> Option<bool> {
    let mut parts = name.split('.');
    let (Some(_tag), Some(pid), Some(start), Some(_n)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let pid = pid.parse::<u32>().ok()?;
    if pid == std::process::id() {
        return Some(true);
    }
    Some(start_time(pid).is_some_and(|now| now == start))
}

/// When the process started, in clock ticks since boot (field 22 of
/// `/proc/PID/stat`); `None` when it does not run.
#[cfg(target_os = "linux")]
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19).map(str::to_string)
}

/// Elsewhere a process is alive while a signal can reach it.
#[cfg(all(unix, not(target_os = "linux")))]
fn start_time(pid: u32) -> Option<String> {
    use nix::{errno::Errno, sys::signal::kill, unistd::Pid};
    let pid = Pid::from_raw(i32::try_from(pid).ok()?);
    match kill(pid, None) {
        Err(Errno::ESRCH) => None,
        _ => Some("0".into()),
    }
}

/// Without a way to ask, every marker's process is taken as running.
#[cfg(not(unix))]
fn start_time(_pid: u32) -> Option<String> {
    Some("0".into())
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_alone_is_not_shared() {
        let store = tempfile::tempdir().unwrap();
        let mut window = Presence::enter(store.path(), "aaaa").unwrap();
        assert!(!window.look());
        assert!(!window.look());
        // The session's own other windows (a background job's) do not count.
        let _own = Presence::enter(store.path(), "aaaa").unwrap();
        assert!(!window.look());
        drop(window);
        drop(_own);
        assert_eq!(
            std::fs::read_dir(store.path().join("present"))
                .unwrap()
                .count(),
            0
        );
    }

    #[test]
    fn windows_that_overlap_both_know_it_whichever_began_and_ended_first() {
        let store = tempfile::tempdir().unwrap();
        // B begins and ends while A runs: A learns it from the byte B left.
        let mut a = Presence::enter(store.path(), "aaaa").unwrap();
        let mut b = Presence::enter(store.path(), "bbbb").unwrap();
        assert!(b.look());
        drop(b);
        assert!(a.look());
        // That interval is over: the next one is A's alone.
        assert!(!a.look());
        // C begins while A runs and is still there at A's look.
        let mut c = Presence::enter(store.path(), "cccc").unwrap();
        assert!(a.look());
        // C was there when the next interval began: it overlaps too,
        // though C ends before A looks again.
        assert!(c.look());
        drop(c);
        assert!(a.look());
        assert!(!a.look());
    }

    #[test]
    fn a_marker_whose_process_is_gone_is_removed_and_ignored() {
        let store = tempfile::tempdir().unwrap();
        let present = store.path().join("present");
        std::fs::create_dir_all(&present).unwrap();
        // A process that ran and ended.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let stale = present.join(format!("dead.{pid}.12345.0"));
        std::fs::write(&stale, "").unwrap();
        // A running process's id with another start time: the id was
        // reused since the marker was made.
        let reused = present.join("old.1.999999999999.0");
        std::fs::write(&reused, "").unwrap();
        let mut window = Presence::enter(store.path(), "aaaa").unwrap();
        assert!(!window.look());
        assert!(!stale.exists() && !reused.exists());
        // A marker of a live process of another pincer counts.
        // A file that is no marker is neither counted nor removed.
        let stray = present.join("notes.txt");
        std::fs::write(&stray, "").unwrap();
        assert!(!window.look());
        assert!(stray.exists());
        let live = present.join(format!("live.{}.0", process_stamp(1).unwrap()));
        std::fs::write(&live, "").unwrap();
        assert!(window.look());
    }
}
