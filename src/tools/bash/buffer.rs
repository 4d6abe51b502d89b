//! What `bash` keeps of a command's output and what it shows the model.
//!
//! A build or test log can run to megabytes, and its end is where the
//! verdict is, so the model gets the last 2,000 lines or 50 KB, whichever is
//! smaller, cut at line boundaries (a single longer line keeps its tail).
//! Only that much is held in memory: once the output is longer, all of it
//! goes to a file in the system temp directory as it arrives, and the result
//! names the file so the model can grep it instead of running the command
//! again; the file keeps the head and the tail of a very long output (see
//! `files`). The shared [`Cleaner`] turns the terminal's bytes into lines
//! first.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use super::files::{CappedFile, HEAD_BYTES, OutputFiles, TAIL_BYTES};
use crate::tools::shell::{Cleaner, MAX_BYTES, MAX_LINES, Screen};

/// A line longer than this has its head moved to the full-output file, so one
/// endless line cannot fill memory.
const LINE_SPILL_BYTES: usize = 2 * MAX_BYTES;

/// What the model is shown of a command's output.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Rendered {
    /// The kept lines, without trailing newlines.
    pub(super) output: String,
    /// Says what was cut and where all of it is.
    pub(super) note: Option<String>,
    pub(super) truncated: bool,
    pub(super) full_output_path: Option<PathBuf>,
}

/// A command's output as it arrives: cleaned, and kept as [`Kept`] holds it.
#[derive(Debug)]
pub(super) struct OutputBuffer {
    cleaner: Cleaner,
    kept: Kept,
    /// Bumped on every push, so progress is only sent when something changed.
    version: u64,
}

impl OutputBuffer {
    /// A buffer whose full-output file, if any, belongs to `files`.
    pub(super) fn new(files: Arc<OutputFiles>) -> Self {
        Self {
            cleaner: Cleaner::default(),
            kept: Kept {
                files,
                line: String::new(),
                line_partial: false,
                lines: VecDeque::new(),
                lines_bytes: 0,
                completed: 0,
                spill: Spill::None,
            },
            version: 0,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.version += 1;
        self.cleaner.feed(bytes, &mut self.kept);
    }

    pub(super) fn version(&self) -> u64 {
        self.version
    }

    /// The last `max_bytes` or so of the output, for the live view.
    pub(super) fn tail(&self, max_bytes: usize) -> String {
        self.kept.tail(max_bytes)
    }

    /// Lines completed so far, including those no longer in memory.
    pub(super) fn completed_lines(&self) -> usize {
        self.kept.completed
    }

    /// The last completed lines still in memory, oldest first (a very long
    /// one only its end).
    pub(super) fn recent_lines(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.kept.lines.iter().map(|line| line.text.as_str())
    }

    /// The line being printed (its end, when it is very long).
    pub(super) fn current_line(&self) -> &str {
        &self.kept.line
    }

    /// The output has ended: a UTF-8 character it cut off becomes a
    /// replacement character, so the current line is final.
    pub(super) fn end(&mut self) {
        self.cleaner.finish(&mut self.kept);
    }

    /// What the model is shown, saving the full output if it is cut.
    pub(super) fn finish(mut self) -> Rendered {
        self.cleaner.finish(&mut self.kept);
        self.kept.render()
    }
}

/// A completed line kept in memory.
#[derive(Debug)]
struct Line {
    text: String,
    /// Its start went to the full-output file (the line was very long).
    partial: bool,
}

/// Where the full output goes once it is too long to show.
#[derive(Debug, Default)]
enum Spill {
    #[default]
    None,
    Open(CappedFile),
    Failed(String),
}

/// Cleaned output as a terminal would show it: the last lines in memory,
/// everything in a file once that is more than a result holds.
///
/// Invariant: while the spill file is open it holds every committed byte
/// (all completed lines and the spilled head of the current line), in order.
#[derive(Debug)]
struct Kept {
    /// Who owns (and removes) the full-output file.
    files: Arc<OutputFiles>,
    /// The line being printed (after carriage returns and backspaces),
    /// without any head already moved to the file.
    line: String,
    line_partial: bool,
    /// The last completed lines: at least those the result can show.
    lines: VecDeque<Line>,
    /// Bytes of `lines`, counting a newline after each.
    lines_bytes: usize,
    /// Lines completed so far, including those no longer in memory.
    completed: usize,
    spill: Spill,
}

impl Screen for Kept {
    fn print(&mut self, c: char) {
        if c == '\n' {
            self.complete_line();
            return;
        }
        self.line.push(c);
        if self.line.len() > LINE_SPILL_BYTES {
            self.spill_line_head();
        }
    }

    fn clear_line(&mut self) {
        self.line.clear();
    }

    fn backspace(&mut self) {
        self.line.pop();
    }
}

impl Kept {
    fn complete_line(&mut self) {
        let text = std::mem::take(&mut self.line);
        let partial = std::mem::take(&mut self.line_partial);
        self.write_spill(&text);
        self.write_spill("\n");
        self.completed += 1;
        self.lines_bytes += text.len() + 1;
        self.lines.push_back(Line { text, partial });
        self.trim();
    }

    /// Forgets lines the result can no longer show (after saving them).
    fn trim(&mut self) {
        while let Some(front) = self.lines.front() {
            let rest = self.lines_bytes - (front.text.len() + 1);
            if self.lines.len() <= MAX_LINES && rest <= MAX_BYTES {
                break;
            }
            self.open_spill();
            self.lines_bytes = rest;
            self.lines.pop_front();
        }
    }

    /// Moves all but the last `MAX_BYTES` of an overlong current line to the
    /// file.
    fn spill_line_head(&mut self) {
        self.open_spill();
        let cut = self.line.floor_char_boundary(self.line.len() - MAX_BYTES);
        let head: String = self.line.drain(..cut).collect();
        self.write_spill(&head);
        self.line_partial = true;
    }

    /// Opens the full-output file and writes what is in memory (everything
    /// so far, since nothing is forgotten before the file exists).
    fn open_spill(&mut self) {
        if !matches!(self.spill, Spill::None) {
            return;
        }
        self.spill = match self.files.create() {
            Ok((path, file)) => Spill::Open(CappedFile::new(path, file)),
            Err(e) => Spill::Failed(e.to_string()),
        };
        let lines: Vec<String> = self
            .lines
            .iter()
            .map(|line| format!("{}\n", line.text))
            .collect();
        for line in lines {
            self.write_spill(&line);
        }
    }

    fn write_spill(&mut self, text: &str) {
        if let Spill::Open(file) = &mut self.spill
            && let Err(e) = file.write(text)
        {
            self.spill = Spill::Failed(e.to_string());
        }
    }

    /// The last `max_bytes` or so of the output, for the live view.
    fn tail(&self, max_bytes: usize) -> String {
        let mut parts = vec![self.line.as_str()];
        let mut bytes = self.line.len();
        for line in self.lines.iter().rev() {
            if bytes >= max_bytes {
                break;
            }
            parts.push(&line.text);
            bytes += line.text.len() + 1;
        }
        parts.reverse();
        let text = parts.join("\n");
        let start = text.len().saturating_sub(max_bytes);
        let start = text.ceil_char_boundary(start);
        text[start..].trim_end_matches('\n').to_string()
    }

    /// What the model is shown, saving the full output if it is cut.
    fn render(mut self) -> Rendered {
        let has_current = !self.line.is_empty() || self.line_partial;
        let total = self.completed + usize::from(has_current);
        let current = has_current.then_some((self.line.as_str(), self.line_partial));
        let candidates = self
            .lines
            .iter()
            .map(|line| (line.text.as_str(), line.partial))
            .chain(current)
            .rev();

        let mut shown: Vec<&str> = Vec::new();
        let mut bytes = 0;
        let mut byte_limited = false;
        let mut line_cut = false;
        for (text, partial) in candidates {
            if shown.len() == MAX_LINES {
                break;
            }
            if shown.is_empty() && (partial || text.len() > MAX_BYTES) {
                let start = text.ceil_char_boundary(text.len().saturating_sub(MAX_BYTES));
                shown.push(&text[start..]);
                line_cut = true;
                break;
            }
            if partial || bytes + text.len() > MAX_BYTES {
                byte_limited = true;
                break;
            }
            bytes += text.len() + 1;
            shown.push(text);
        }
        shown.reverse();
        let output = shown.join("\n").trim_end_matches('\n').to_string();
        let truncated = line_cut || shown.len() < total;
        let shown_count = shown.len();
        if !truncated {
            return Rendered {
                output,
                ..Rendered::default()
            };
        }

        self.open_spill();
        let line = std::mem::take(&mut self.line);
        self.write_spill(&line);
        let (where_, full_output_path) = match std::mem::take(&mut self.spill) {
            Spill::Open(file) => match file.finish() {
                Ok((path, 0)) => (format!("Full output: {}", path.display()), Some(path)),
                Ok((path, left_out)) => (
                    format!(
                        "Full output: {} (its first {} MB and last {} MB; the {left_out} bytes \
                         between were left out)",
                        path.display(),
                        HEAD_BYTES / (1024 * 1024),
                        TAIL_BYTES / (1024 * 1024)
                    ),
                    Some(path),
                ),
                Err(e) => (format!("The full output could not be saved: {e}"), None),
            },
            Spill::Failed(e) => (format!("The full output could not be saved: {e}"), None),
            Spill::None => (String::new(), None),
        };
        let note = if line_cut {
            format!("[Showing the last 50 KB of line {total}. {where_}]")
        } else {
            let first = total - shown_count + 1;
            let limit = if byte_limited { " (50 KB limit)" } else { "" };
            format!("[Showing lines {first}-{total} of {total}{limit}. {where_}]")
        };
        Rendered {
            output,
            note: Some(note),
            truncated,
            full_output_path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// Full-output files of the tests, kept until the process ends.
    fn files() -> Arc<OutputFiles> {
        static FILES: std::sync::OnceLock<Arc<OutputFiles>> = std::sync::OnceLock::new();
        Arc::clone(FILES.get_or_init(Arc::default))
    }

    fn render(chunks: &[&[u8]]) -> Rendered {
        let mut buffer = OutputBuffer::new(files());
        for chunk in chunks {
            buffer.push(chunk);
        }
        buffer.finish()
    }

    fn plain(output: &str) -> Rendered {
        Rendered {
            output: output.to_string(),
            ..Rendered::default()
        }
    }

    #[test]
    fn cleaning_is_the_same_however_the_bytes_are_split() {
        let input = "caf\u{e9} \u{1b}[1;31mbold\u{1b}[0m\r\n\u{1b}]0;title\u{7}tab\there\r\n\
                     \u{1b}(Bx\u{1b}P1;2|data\u{1b}\\y\u{7}\u{0}z\r\n50%\r100%\r\n\
                     ab\u{8}c\r\n\u{1b}[?25l\u{1b}[2Kdone"
            .as_bytes();
        let whole = render(&[input]);
        assert_eq!(
            whole,
            plain("caf\u{e9} bold\ntab\there\nxyz\n100%\nac\ndone")
        );
        for split in 1..input.len() {
            let (a, b) = input.split_at(split);
            assert_eq!(render(&[a, b]), whole, "split at byte {split}");
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(
            render(&[b"a\xffb\n", b"\xe2\x82"]),
            plain("a\u{fffd}b\n\u{fffd}")
        );
    }

    #[test]
    fn byte_limit_cuts_at_line_boundaries() {
        // 1,000 lines of 100 bytes (with the newline): about 101 KB.
        let line = "x".repeat(99);
        let text: String = (0..1000).map(|_| format!("{line}\n")).collect();
        let rendered = render(&[text.as_bytes()]);
        let path = rendered.full_output_path.clone().expect("saved");
        // 512 lines of 100 bytes fit in 51,200 bytes (the last without its newline).
        let kept = vec![line.as_str(); 512].join("\n");
        assert_eq!(
            rendered,
            Rendered {
                output: kept,
                note: Some(format!(
                    "[Showing lines 489-1000 of 1000 (50 KB limit). Full output: {}]",
                    path.display()
                )),
                truncated: true,
                full_output_path: Some(path.clone()),
            }
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_single_long_line_keeps_its_tail() {
        // Long enough to be spilled to the file several times over.
        let text: String = (0..50_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let text = format!("first\n{}", text.repeat(7));
        let chunks: Vec<&[u8]> = text.as_bytes().chunks(4096).collect();
        let rendered = render(&chunks);
        let path = rendered.full_output_path.clone().expect("saved");
        assert_eq!(
            rendered,
            Rendered {
                output: text[text.len() - MAX_BYTES..].to_string(),
                note: Some(format!(
                    "[Showing the last 50 KB of line 2. Full output: {}]",
                    path.display()
                )),
                truncated: true,
                full_output_path: Some(path.clone()),
            }
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn exactly_the_limits_is_not_truncated() {
        let text: String = (1..=MAX_LINES).map(|i| format!("{i}\n")).collect();
        assert_eq!(render(&[text.as_bytes()]), plain(text.trim_end()));
        let line = "y".repeat(MAX_BYTES);
        assert_eq!(render(&[line.as_bytes(), b"\n"]), plain(&line));
    }

    #[test]
    fn progress_tail_is_the_end_of_the_output() {
        let mut buffer = OutputBuffer::new(files());
        buffer.push(b"one\r\ntwo\r\nthr");
        assert_eq!(buffer.tail(100), "one\ntwo\nthr");
        assert_eq!(buffer.tail(5), "o\nthr");
    }
}
