//! The files `bash` saves full outputs to: where they go, how large they may
//! grow, and when they are removed.
//!
//! A full output is there for the model to grep while the session lasts,
//! not forever: a busy session leaves dozens, each up to a few megabytes, in
//! the system temp directory. So each session's `bash` tool owns the files
//! it wrote and removes them when the session ends (the tool set is dropped
//! with the session, and at the end of `pincer acp` or `pincer run`). A
//! pincer that was killed cannot clean up, so at startup
//! [`sweep_stale`] removes the files of pincer processes that are gone: the
//! file name carries the writer's pid, and a file is only removed when that
//! process no longer exists, which is safe with several pincers running at
//! once (files of the old unnamed format are removed after a day).
//!
//! A file keeps at most [`HEAD_BYTES`] from the start of the output and
//! [`TAIL_BYTES`] from its end, with a line between them saying how much
//! was left out: a command printing without end must not fill the disk.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bytes a full-output file keeps from the start of the output...
pub(super) const HEAD_BYTES: usize = 1024 * 1024;
/// ...and from its end.
pub(super) const TAIL_BYTES: usize = 1024 * 1024;
/// Files of the format without a pid are removed when older than this.
const STALE_AGE: Duration = Duration::from_secs(24 * 60 * 60);
const PREFIX: &str = "pincer-bash-";
const SUFFIX: &str = ".log";

/// The full-output files one session's `bash` wrote; removed on drop.
#[derive(Debug, Default)]
pub struct OutputFiles {
    paths: Mutex<Vec<PathBuf>>,
}

impl OutputFiles {
    /// A new file for a command's full output, readable only by this user.
    pub(super) fn create(&self) -> std::io::Result<(PathBuf, File)> {
        let name = format!(
            "{PREFIX}{}-{}{SUFFIX}",
            std::process::id(),
            uuid::Uuid::new_v4()
        );
        let path = std::env::temp_dir().join(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        // Elsewhere the temp dir is per user already (Windows' %TEMP%).
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&path)?;
        self.lock().push(path.clone());
        Ok((path, file))
    }

    /// Removes every file written so far.
    pub fn remove_all(&self) {
        for path in std::mem::take(&mut *self.lock()) {
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a bash output file");
            }
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Vec<PathBuf>> {
        self.paths.lock()
    }
}

impl Drop for OutputFiles {
    fn drop(&mut self) {
        self.remove_all();
    }
}

/// Removes, from `dir`, the full-output files of pincer processes that no
/// longer run (and of the old format, once a day old); only this user's.
/// Returns how many it removed.
pub fn sweep_stale(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(stem) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.strip_suffix(SUFFIX))
        else {
            continue;
        };
        let Ok(metadata) = entry.path().symlink_metadata() else {
            continue;
        };
        if !metadata.is_file() || !owned_by_me(&metadata) {
            continue;
        }
        let stale = match owner_pid(stem) {
            Some(pid) => !process_exists(pid),
            None => metadata
                .modified()
                .ok()
                .and_then(|at| at.elapsed().ok())
                .is_some_and(|age| age > STALE_AGE),
        };
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Removes this process's full-output files from `dir`.
pub fn remove_process_output_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id() as i32;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let mine = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.strip_suffix(SUFFIX))
            .and_then(owner_pid)
            == Some(me);
        if mine {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The pid in `<pid>-<uuid>`, the name of a file this version writes.
fn owner_pid(stem: &str) -> Option<i32> {
    let (pid, rest) = stem.split_once('-')?;
    uuid::Uuid::parse_str(rest).ok()?;
    pid.parse().ok().filter(|&pid| pid > 0)
}

use crate::process_group::process_exists;

/// Whether this user owns the file. Windows' temp dir is per user, so
/// there every file in it counts as this user's.
fn owned_by_me(metadata: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        crate::process_group::current_uid() == Some(metadata.uid())
    }
    #[cfg(not(unix))]
    {
        let _ = metadata;
        true
    }
}

/// A full-output file being written: the head goes to disk, the tail is
/// held (at most [`TAIL_BYTES`]) until the output ends.
#[derive(Debug)]
pub(super) struct CappedFile {
    path: PathBuf,
    file: BufWriter<File>,
    head: usize,
    tail: VecDeque<u8>,
    /// Bytes dropped from the front of the tail.
    dropped: u64,
}

impl CappedFile {
    pub(super) fn new(path: PathBuf, file: File) -> Self {
        Self {
            path,
            file: BufWriter::new(file),
            head: 0,
            tail: VecDeque::new(),
            dropped: 0,
        }
    }

    pub(super) fn write(&mut self, text: &str) -> std::io::Result<()> {
        let mut rest = text;
        if self.head < HEAD_BYTES {
            let cut = rest.floor_char_boundary((HEAD_BYTES - self.head).min(rest.len()));
            self.file.write_all(&rest.as_bytes()[..cut])?;
            self.head += cut;
            if cut == rest.len() {
                return Ok(());
            }
            // The head is full (a character that did not fit starts the tail).
            self.head = HEAD_BYTES;
            rest = &rest[cut..];
        }
        self.tail.extend(rest.as_bytes());
        let excess = self.tail.len().saturating_sub(TAIL_BYTES);
        if excess > 0 {
            self.tail.drain(..excess);
            self.dropped += excess as u64;
        }
        Ok(())
    }

    /// Writes the tail (after a note of what was left out, if anything was)
    /// and returns the path and the bytes left out.
    pub(super) fn finish(mut self) -> std::io::Result<(PathBuf, u64)> {
        let tail = self.tail.make_contiguous();
        let mut start = 0;
        if self.dropped > 0 {
            // Start the tail at a line, so it is whole text.
            start = tail.iter().position(|&b| b == b'\n').map_or(0, |at| at + 1);
            while start < tail.len() && (tail[start] & 0xc0) == 0x80 {
                start += 1;
            }
            let left_out = self.dropped + start as u64;
            writeln!(
                self.file,
                "\n[… {left_out} bytes left out here by pincer: this file keeps the first {} \
                 MB and the last {} MB of the output …]",
                HEAD_BYTES / (1024 * 1024),
                TAIL_BYTES / (1024 * 1024)
            )?;
            self.dropped = left_out;
        }
        self.file.write_all(&tail[start..])?;
        self.file.flush()?;
        Ok((self.path, self.dropped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_long_output_keeps_its_head_and_tail_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.log");
        let mut file = CappedFile::new(path.clone(), File::create(&path).unwrap());
        let line = |i: usize| format!("{i:07} {}\n", "x".repeat(92));
        // 100-byte lines: 30,000 of them is 3 MB.
        let all: String = (0..30_000).map(line).collect();
        for chunk in all.as_bytes().chunks(4096) {
            file.write(std::str::from_utf8(chunk).unwrap()).unwrap();
        }
        let (written, left_out) = file.finish().unwrap();
        assert_eq!(written, path);
        let text = std::fs::read_to_string(&path).unwrap();
        let head = &all[..HEAD_BYTES];
        // The tail starts at the first whole line of the last megabyte.
        let tail_start = all.len() - TAIL_BYTES;
        let tail_start = tail_start + all[tail_start..].find('\n').unwrap() + 1;
        assert_eq!(left_out, (tail_start - HEAD_BYTES) as u64);
        assert_eq!(
            text,
            format!(
                "{head}\n[… {left_out} bytes left out here by pincer: this file keeps the first 1 \
                 MB and the last 1 MB of the output …]\n{}",
                &all[tail_start..]
            )
        );
        assert!(text.len() <= HEAD_BYTES + TAIL_BYTES + 200);
    }

    #[test]
    fn a_short_output_is_kept_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.log");
        let mut file = CappedFile::new(path.clone(), File::create(&path).unwrap());
        file.write("héllo\n").unwrap();
        assert_eq!(file.finish().unwrap(), (path.clone(), 0));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "héllo\n");
    }

    #[test]
    fn files_are_removed_with_their_owner_and_stale_ones_by_the_sweep() {
        let files = OutputFiles::default();
        let (path, _) = files.create().unwrap();
        assert!(path.exists());
        drop(files);
        assert!(!path.exists());

        let dir = tempfile::tempdir().unwrap();
        let mine = format!(
            "{PREFIX}{}-{}{SUFFIX}",
            std::process::id(),
            uuid::Uuid::new_v4()
        );
        // Beyond the largest pid Linux hands out: never a running process.
        let gone = format!("{PREFIX}4194399-{}{SUFFIX}", uuid::Uuid::new_v4());
        let other = "pincer-bash-notes.txt";
        for name in [&mine, &gone, other] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        assert_eq!(sweep_stale(dir.path()), 1);
        assert!(dir.path().join(&mine).exists());
        assert!(!dir.path().join(&gone).exists());
        assert!(dir.path().join(other).exists());
    }
}
