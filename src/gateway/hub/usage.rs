//! What a session has used, read from its transcript for the session rows
//! (`totalTokens`, `contextTokens`, `costUsd`) of sessions the gateway has
//! not seen a usage report for in this process: the tokens the context
//! held after the last model call, and the cost of every call so far.
//!
//! A transcript only grows (whole lines are appended), so each one is read
//! once: the hub remembers how far it read and what it added up, and a
//! later listing reads only what was appended since.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A session's usage as its transcript records it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Used {
    /// The tokens in the context after the last model call that reported
    /// usage; `None` before any, and after a compaction until the next.
    pub context_tokens: Option<u64>,
    /// The cost of every model call of the session, in USD.
    pub cost_usd: f64,
}

/// How far each transcript was read, and its sums so far.
#[derive(Default)]
pub struct Scans {
    scans: HashMap<PathBuf, Scan>,
}

#[derive(Default)]
struct Scan {
    offset: u64,
    used: Used,
}

impl Scans {
    /// The usage the transcript at `path` records, reading only what was
    /// appended since the last call for it.
    pub fn used(&mut self, path: &Path) -> Used {
        let scan = self.scans.entry(path.to_path_buf()).or_default();
        let Ok(mut file) = std::fs::File::open(path) else {
            return scan.used.clone();
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < scan.offset {
            // Not the file it was (replaced): read it again.
            *scan = Scan::default();
        }
        if len == scan.offset || file.seek(SeekFrom::Start(scan.offset)).is_err() {
            return scan.used.clone();
        }
        // Line by line: a long transcript read for the first time costs
        // one line's memory, not the file's.
        let mut reader = BufReader::new(file.take(len - scan.offset));
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                // A line being written (no line end yet) is read next
                // time, whole.
                Ok(n) if n > 0 && line.ends_with(b"\n") => {
                    add(&mut scan.used, &line[..n - 1]);
                    scan.offset += n as u64;
                }
                _ => break,
            }
        }
        scan.used.clone()
    }

    /// Forgets a transcript (its session was deleted).
    pub fn forget(&mut self, path: &Path) {
        self.scans.remove(path);
    }
}

/// Adds one transcript line to `used`.
fn add(used: &mut Used, line: &[u8]) {
    // Most lines are neither; they are not parsed.
    let wanted = |needle: &[u8]| line.windows(needle.len()).any(|w| w == needle);
    if !wanted(b"\"assistant\"") && !wanted(b"\"compaction\"") {
        return;
    }
    let Ok(entry) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    match entry["type"].as_str() {
        Some("compaction") => used.context_tokens = None,
        Some("message") if entry["message"]["role"] == "assistant" => {
            let message = &entry["message"];
            let usage = &message["usage"];
            used.cost_usd += usage["cost"]["total"].as_f64().unwrap_or(0.0);
            let tokens: u64 = ["input", "output", "cache_read", "cache_write"]
                .iter()
                .filter_map(|field| usage[*field].as_u64())
                .sum();
            if tokens > 0 && message["stop_reason"] != "error" {
                used.context_tokens = Some(tokens);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assistant(input: u64, output: u64, cost: f64, stop: &str) -> String {
        serde_json::json!({"type": "message", "id": "e", "parentId": null, "timestamp": "t",
            "message": {"role": "assistant", "content": [], "stop_reason": stop,
                "usage": {"input": input, "output": output, "cache_read": 0, "cache_write": 0,
                    "cost": {"input": 0.0, "output": 0.0, "cache_read": 0.0, "cache_write": 0.0, "total": cost}}}})
        .to_string()
    }

    #[test]
    fn usage_adds_up_across_appends_and_a_compaction_makes_the_context_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut scans = Scans::default();
        let header = r#"{"type":"session","version":1,"id":"s","cwd":"/","created":"t"}"#;
        std::fs::write(
            &path,
            format!("{header}\n{}\n", assistant(10, 2, 0.5, "stop")),
        )
        .unwrap();
        assert_eq!(
            scans.used(&path),
            Used {
                context_tokens: Some(12),
                cost_usd: 0.5
            }
        );
        // A half-written line waits; a failed call costs but keeps the count.
        let more = format!(
            "{}\n{}",
            assistant(0, 0, 0.25, "error"),
            assistant(30, 5, 1.0, "stop")
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, more.as_bytes()).unwrap();
        assert_eq!(
            scans.used(&path),
            Used {
                context_tokens: Some(12),
                cost_usd: 0.75
            }
        );
        std::io::Write::write_all(&mut file, b"\n").unwrap();
        assert_eq!(
            scans.used(&path),
            Used {
                context_tokens: Some(35),
                cost_usd: 1.75
            }
        );
        let compaction = r#"{"type":"compaction","id":"c","parentId":null,"timestamp":"t","summary":"s","kept":1,"tokens_before":35}"#;
        std::io::Write::write_all(&mut file, format!("{compaction}\n").as_bytes()).unwrap();
        assert_eq!(
            scans.used(&path),
            Used {
                context_tokens: None,
                cost_usd: 1.75
            }
        );
    }
}
