//! What the editor is shown of a command while it runs, when pincer runs
//! it itself (the editor offers no terminal of its own).
//!
//! Editors show live output in one of two ways: as the call's content,
//! which each report replaces (so it carries the end of the output so far),
//! or as a terminal that each report appends to (Zed's `terminal_output`
//! extension, so it carries what is new). [`LiveReporter`] makes both from
//! the same cleaned output the result is made of, so what the user watches
//! is what the model gets: no escape sequences, carriage-return redraws
//! collapsed, valid UTF-8 however the reads split a character. Only whole
//! lines are appended until the command ends, because a line still being
//! printed may yet be redrawn and an appending view cannot take it back.
//!
//! Both shapes are bounded, so a command that floods its output costs the
//! editor a few kilobytes per report, not megabytes: the content keeps its
//! tail, and an append that would be longer leaves its oldest lines out
//! with a note saying how many.

use super::buffer::OutputBuffer;
use crate::tools::{LiveOutput, TerminalExit};

/// Most bytes of output in one report, in either shape.
pub(super) const LIVE_BYTES: usize = 16 * 1024;

/// What was already reported of one command's output.
#[derive(Debug, Default)]
pub(super) struct LiveReporter {
    /// The buffer's version at the last report.
    version: u64,
    /// Completed lines already appended (or left out with a note).
    appended_lines: usize,
}

impl LiveReporter {
    /// A report of what changed since the last one, if anything did.
    pub(super) fn report(&mut self, output: &OutputBuffer) -> Option<LiveOutput> {
        if output.version() == self.version {
            return None;
        }
        self.version = output.version();
        Some(LiveOutput {
            tail: output.tail(LIVE_BYTES),
            appended: self.append(output, false),
            exit: None,
        })
    }

    /// The last report: what is left to append, the unfinished last line
    /// included, and how the command ended. Call [`OutputBuffer::end`]
    /// first.
    pub(super) fn finish(&mut self, output: &OutputBuffer, exit: TerminalExit) -> LiveOutput {
        self.version = output.version();
        LiveOutput {
            tail: output.tail(LIVE_BYTES),
            appended: self.append(output, true),
            exit: Some(exit),
        }
    }

    /// The lines completed since the last report (and the current line when
    /// `with_current`), newest kept when they do not all fit.
    fn append(&mut self, output: &OutputBuffer, with_current: bool) -> String {
        let completed = output.completed_lines();
        let new = completed - self.appended_lines;
        self.appended_lines = completed;

        // Collected newest first; each piece with the newline it ended with.
        let mut pieces: Vec<String> = Vec::new();
        let mut bytes = 0;
        let current = output.current_line();
        if with_current && !current.is_empty() {
            let piece = tail_of(current, LIVE_BYTES);
            bytes += piece.len();
            pieces.push(piece.to_string());
        }
        let mut taken = 0;
        for line in output.recent_lines().rev().take(new) {
            if bytes + line.len() + 1 > LIVE_BYTES {
                if pieces.is_empty() {
                    // One line longer than a report: its end.
                    pieces.push(format!("{}\n", tail_of(line, LIVE_BYTES - 1)));
                    taken += 1;
                }
                break;
            }
            bytes += line.len() + 1;
            pieces.push(format!("{line}\n"));
            taken += 1;
        }
        let left_out = new - taken;
        if left_out > 0 {
            pieces.push(format!(
                "[… {left_out} line{} not shown …]\n",
                if left_out == 1 { "" } else { "s" }
            ));
        }
        pieces.reverse();
        pieces.concat()
    }
}

/// The last `max_bytes` or so of `text`, starting at a character boundary.
fn tail_of(text: &str, max_bytes: usize) -> &str {
    let start = text.ceil_char_boundary(text.len().saturating_sub(max_bytes));
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::bash::OutputFiles;
    use pretty_assertions::assert_eq;
    use std::sync::Arc;

    fn buffer() -> OutputBuffer {
        OutputBuffer::new(Arc::new(OutputFiles::default()))
    }

    fn exited(code: u32) -> TerminalExit {
        TerminalExit {
            exit_code: Some(code),
            signal: None,
        }
    }

    #[test]
    fn appends_whole_lines_and_the_last_line_at_the_end() {
        let mut output = buffer();
        let mut live = LiveReporter::default();
        assert_eq!(live.report(&output), None);
        output.push(b"one\r\ntw");
        assert_eq!(
            live.report(&output),
            Some(LiveOutput {
                tail: "one\ntw".to_string(),
                appended: "one\n".to_string(),
                exit: None,
            })
        );
        assert_eq!(live.report(&output), None, "nothing new");
        output.push(b"o\r\n50%\r100%");
        output.end();
        assert_eq!(
            live.finish(&output, exited(0)),
            LiveOutput {
                tail: "one\ntwo\n100%".to_string(),
                appended: "two\n100%".to_string(),
                exit: Some(exited(0)),
            }
        );
    }

    #[test]
    fn a_character_split_across_reads_arrives_whole() {
        let mut output = buffer();
        let mut live = LiveReporter::default();
        output.push(b"caf\xc3");
        let first = live.report(&output).unwrap();
        assert_eq!((first.tail.as_str(), first.appended.as_str()), ("caf", ""));
        output.push(b"\xa9\n\xe2\x82");
        let second = live.report(&output).unwrap();
        assert_eq!(
            (second.tail.as_str(), second.appended.as_str()),
            ("caf\u{e9}", "caf\u{e9}\n")
        );
        output.push(b"\xac\n");
        assert_eq!(live.report(&output).unwrap().appended, "\u{20ac}\n");
    }

    #[test]
    fn a_flood_is_cut_to_its_newest_lines_with_a_note() {
        let mut output = buffer();
        let mut live = LiveReporter::default();
        let text: String = (0..100_000).map(|i| format!("line {i}\n")).collect();
        output.push(text.as_bytes());
        let report = live.report(&output).unwrap();
        assert!(
            report.appended.len() <= LIVE_BYTES + 40,
            "{}",
            report.appended.len()
        );
        assert!(report.tail.len() <= LIVE_BYTES);
        let first = report.appended.lines().next().unwrap();
        let kept = report.appended.lines().count() - 1;
        assert_eq!(first, format!("[… {} lines not shown …]", 100_000 - kept));
        assert!(report.appended.ends_with("line 99999\n"));
        // The next report starts where this one ended.
        output.push(b"more\n");
        assert_eq!(live.report(&output).unwrap().appended, "more\n");
    }

    #[test]
    fn one_very_long_line_keeps_its_end() {
        let mut output = buffer();
        let mut live = LiveReporter::default();
        let line = "x".repeat(3 * LIVE_BYTES);
        output.push(format!("{line}\n").as_bytes());
        let report = live.report(&output).unwrap();
        assert_eq!(report.appended, format!("{}\n", "x".repeat(LIVE_BYTES - 1)));
    }
}
