//! The gateway's log file, for `logs.tail` (OpenClaw's log page and
//! `openclaw logs`): every line the gateway writes to stderr, and its
//! warnings, also go to `<data dir>/logs/gateway.log` as JSON lines
//! `{time, level, subsystem, message}`, the shape OpenClaw's clients parse.
//! The file is the user's alone (0600) and rotates at 10 MiB to
//! `gateway.log.1`, so it never holds more than 20 MiB.
//!
//! Nothing secret is logged anywhere by pincer; the file holds what
//! stderr holds.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// When the file is rotated.
const ROTATE_AT: u64 = 10 * 1024 * 1024;

static LOG: OnceLock<Mutex<LogFile>> = OnceLock::new();

struct LogFile {
    path: PathBuf,
    file: Option<File>,
    size: u64,
}

/// `<data dir>/logs/gateway.log`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("logs").join("gateway.log")
}

/// Starts writing the log file (once per process: the gateway's).
pub fn open(data_dir: &Path) {
    let path = path(data_dir);
    let _ = LOG.set(Mutex::new(LogFile {
        path,
        file: None,
        size: 0,
    }));
}

/// The file being written, if the gateway opened one.
pub fn current() -> Option<PathBuf> {
    LOG.get().map(|log| log.lock().path.clone())
}

/// Appends one line, if the gateway has a log file. A line that cannot be
/// written is dropped (stderr still has it).
pub fn write(level: &str, subsystem: &str, message: &str) {
    let Some(log) = LOG.get() else { return };
    let line = serde_json::json!({
        "time": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        "level": level,
        "subsystem": subsystem,
        "message": message,
    });
    let mut text = line.to_string();
    text.push('\n');
    let mut log = log.lock();
    if log.file.is_none() || log.size + text.len() as u64 > ROTATE_AT {
        if log.file.is_some() {
            let _ = std::fs::rename(&log.path, log.path.with_extension("log.1"));
        }
        if let Some(dir) = log.path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        log.file = options.open(&log.path).ok();
        log.size = log
            .file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
    }
    if let Some(file) = log.file.as_mut()
        && file.write_all(text.as_bytes()).is_ok()
    {
        log.size += text.len() as u64;
    }
}

/// A `tracing` layer that copies the events the filter lets through into
/// the log file (once the gateway opened one).
pub struct Layer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Layer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if LOG.get().is_none() {
            return;
        }
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if !self.0.is_empty() {
                    self.0.push(' ');
                }
                if field.name() == "message" {
                    self.0.push_str(&format!("{value:?}"));
                } else {
                    self.0.push_str(&format!("{}={value:?}", field.name()));
                }
            }
        }
        let mut text = Text(String::new());
        event.record(&mut text);
        let meta = event.metadata();
        write(
            &meta.level().as_str().to_ascii_lowercase(),
            meta.target(),
            &text.0,
        );
    }
}

/// `logs.tail`'s params (OpenClaw's `LogsTailParams`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TailParams {
    /// A byte offset a previous answer gave.
    pub cursor: Option<u64>,
    /// Lines at most (1–5,000; 500).
    pub limit: Option<u64>,
    /// Bytes read at most (1–1,000,000; 250,000).
    pub max_bytes: Option<u64>,
}

/// `logs.tail`'s answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tail {
    pub file: String,
    /// Where the next call goes on from: just after the last whole line.
    pub cursor: u64,
    pub size: u64,
    pub lines: Vec<String>,
    /// Older lines were left out (the first read, or more than a call
    /// takes).
    pub truncated: bool,
    /// The lines do not follow the cursor given: the file rotated, or the
    /// client fell more than `maxBytes` behind.
    pub reset: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_bytes: Option<u64>,
}

/// The lines of `path` after `cursor` (OpenClaw's `readLogSlice`): without
/// a cursor, the last `max_bytes`; a cursor past the end (the file
/// rotated) starts over from the tail; more than `max_bytes` behind skips
/// ahead. Only whole lines are returned; a partial first line of a read
/// that starts mid-file is dropped.
pub fn tail(path: &Path, params: &TailParams) -> Result<Tail, String> {
    let limit = params.limit.unwrap_or(500).clamp(1, 5000) as usize;
    let max_bytes = params.max_bytes.unwrap_or(250_000).clamp(1, 1_000_000);
    let file_name = path.display().to_string();
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Tail {
                file: file_name,
                cursor: 0,
                size: 0,
                lines: Vec::new(),
                truncated: false,
                reset: params.cursor.is_some_and(|c| c > 0),
                skipped_bytes: None,
            });
        }
        Err(e) => return Err(format!("log read failed: {e}")),
    };
    let size = file
        .metadata()
        .map_err(|e| format!("log read failed: {e}"))?
        .len();
    let (start, mut truncated, reset, skipped) = match params.cursor {
        None => {
            let start = size.saturating_sub(max_bytes);
            (start, start > 0, false, None)
        }
        Some(cursor) if cursor > size => {
            let start = size.saturating_sub(max_bytes);
            (start, start > 0, true, None)
        }
        Some(cursor) if size - cursor > max_bytes => {
            let start = size - max_bytes;
            (start, true, true, Some(start - cursor))
        }
        Some(cursor) => (cursor, false, false, None),
    };
    file.seek(SeekFrom::Start(start))
        .map_err(|e| format!("log read failed: {e}"))?;
    let mut bytes = Vec::with_capacity((size - start) as usize);
    file.take(size - start)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("log read failed: {e}"))?;
    // Whole lines only: up to the last newline; from the first one when
    // the read starts mid-line.
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut begin = 0;
    let mid_line = start > 0 && params.cursor != Some(start);
    if mid_line {
        begin = bytes[..end]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(end, |i| i + 1);
    }
    let mut lines: Vec<String> = String::from_utf8_lossy(&bytes[begin..end])
        .lines()
        .map(str::to_string)
        .collect();
    if lines.len() > limit {
        lines.drain(..lines.len() - limit);
        truncated = true;
    }
    Ok(Tail {
        file: file_name,
        cursor: start + end as u64,
        size,
        lines,
        truncated,
        reset,
        skipped_bytes: skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(cursor: Option<u64>, limit: Option<u64>, max_bytes: Option<u64>) -> TailParams {
        TailParams {
            cursor,
            limit,
            max_bytes,
        }
    }

    #[test]
    fn a_tail_follows_its_cursor_in_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.log");
        std::fs::write(&path, "one\ntwo\nthr").unwrap();
        let first = tail(&path, &params(None, None, None)).unwrap();
        assert_eq!(first.lines, ["one", "two"]);
        assert_eq!((first.cursor, first.size), (8, 11));
        assert!(!first.truncated && !first.reset);
        std::fs::write(&path, "one\ntwo\nthree\nfour\n").unwrap();
        let next = tail(&path, &params(Some(first.cursor), None, None)).unwrap();
        assert_eq!(next.lines, ["three", "four"]);
        assert_eq!(next.cursor, 19);
        // Nothing new: nothing, same cursor.
        let again = tail(&path, &params(Some(next.cursor), None, None)).unwrap();
        assert!(again.lines.is_empty());
        assert_eq!(again.cursor, 19);
    }

    #[test]
    fn a_tail_starts_over_after_a_rotation_and_skips_what_is_too_far_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.log");
        std::fs::write(&path, "a\nb\n").unwrap();
        let rotated = tail(&path, &params(Some(100), None, None)).unwrap();
        assert!(rotated.reset);
        assert_eq!(rotated.lines, ["a", "b"]);
        let body: String = (0..100).map(|i| format!("line {i:03}\n")).collect();
        std::fs::write(&path, &body).unwrap();
        let behind = tail(&path, &params(Some(0), None, Some(95))).unwrap();
        assert!(behind.reset && behind.truncated);
        assert_eq!(behind.skipped_bytes, Some(body.len() as u64 - 95));
        // The partial line the read started in is dropped.
        assert_eq!(behind.lines.first().map(String::as_str), Some("line 090"));
        assert_eq!(behind.lines.last().map(String::as_str), Some("line 099"));
        let few = tail(&path, &params(None, Some(3), None)).unwrap();
        assert_eq!(few.lines, ["line 097", "line 098", "line 099"]);
        assert!(few.truncated);
    }

    #[test]
    fn a_missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let none = tail(
            &dir.path().join("gateway.log"),
            &params(Some(5), None, None),
        )
        .unwrap();
        assert!(none.lines.is_empty() && none.reset);
    }
}
