//! What the `bash` and `process` tools share: both run a command line with
//! `bash -c` under a pseudo-terminal, so both need the same way to start the
//! shell as the leader of its own process group and end that group, the same
//! cleaning of what a program prints to a terminal into the plain text the
//! model reads, the same limit on how much of it one result shows, and the
//! same reading of a command line into the commands a permission covers.
//!
//! The tools differ in when they look at the output (`bash` once the command
//! ends, `process` whenever the model polls) and in how long the shell lives,
//! so what they keep of the output and how they report it stays with each
//! tool.

mod env;
mod group;
mod output;
// Process groups, sessions and a subreaper on Unix; `taskkill /T` on
// Windows (see `crate::process_group`).
#[cfg(unix)]
mod reaper;
#[cfg(windows)]
#[path = "shell/reaper_windows.rs"]
mod reaper;
mod scopes;

pub use env::{ShellConfig, ShellEnv};
pub(super) use group::{
    CHECK_INTERVAL, Shell, group_alive, read_chunks, signal_group, spawn, terminate_group,
    wait_until,
};
pub(super) use output::{Cleaner, Screen};
pub(super) use reaper::{ShellRegistration, kill_command};
pub use reaper::{become_subreaper, start_reaping};
pub use scopes::{CommandLine, WriteTarget, analyze, command_prefixes};

/// The files `command` writes to (redirections, `tee`) as call locations.
pub(super) fn write_locations(command: &str, cwd: &std::path::Path) -> Vec<super::Location> {
    analyze(command)
        .write_paths(cwd)
        .into_iter()
        .map(|path| super::Location { path, line: None })
        .collect()
}

/// `text` as one word of a POSIX shell command: as it is when it holds
/// only characters no shell treats specially, else in single quotes.
pub fn quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

pub(super) use super::{MAX_BYTES, MAX_LINES};

/// `text` as a model should read it: terminal escapes and control
/// characters other than newlines and tabs removed. Text without any is
/// returned as it is (`\r\n` line ends included).
pub fn clean_text(text: &str) -> std::borrow::Cow<'_, str> {
    let mut chars = text.chars().peekable();
    let mut dirty = false;
    while let Some(c) = chars.next() {
        let allowed = c == '\n' || c == '\t' || (c == '\r' && chars.peek() == Some(&'\n'));
        if (c.is_control() && !allowed) || c == '\u{9b}' {
            dirty = true;
            break;
        }
    }
    if !dirty {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut cleaner = Cleaner::default();
    let mut out = String::with_capacity(text.len());
    cleaner.feed(text.as_bytes(), &mut out);
    cleaner.finish(&mut out);
    std::borrow::Cow::Owned(out)
}

/// Room over the limits for the note a tool adds to output it already cut
/// to them ("[Showing lines 1-2000 of 3000. Use offset=2001 …]"), so that
/// the note, which says how to get the rest, is not what gets cut.
const NOTE_LINES: usize = 4;
const NOTE_BYTES: usize = 1024;

/// Keeps the head of `text` within [`MAX_LINES`] and [`MAX_BYTES`], cut at
/// a line end, with a note saying how much was left out. Text within the
/// limits plus a tool's note is left alone.
pub fn truncate_head(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_BYTES + NOTE_BYTES && text.lines().count() <= MAX_LINES + NOTE_LINES {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        if n == MAX_LINES || end + line.len() > MAX_BYTES {
            break;
        }
        end += line.len();
    }
    if end == 0 {
        // One huge first line: cut it at a character boundary.
        end = MAX_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
    }
    let left = &text[end..];
    std::borrow::Cow::Owned(format!(
        "{}\n[… {} more lines ({} bytes) left out; the limit is {MAX_LINES} lines or {} KB]",
        text[..end].trim_end_matches('\n'),
        left.lines().count(),
        left.len(),
        MAX_BYTES / 1024
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn output_a_tool_cut_to_the_limits_keeps_its_note() {
        let lines: String = (1..=MAX_LINES).map(|i| format!("{i}\n")).collect();
        let noted =
            format!("{lines}\n[Showing lines 1-2000 of 3000. Use offset=2001 to continue.]");
        assert_eq!(truncate_head(&noted), noted.as_str());
        let over = format!("{lines}{}", "x\n".repeat(NOTE_LINES + 1));
        assert_eq!(
            truncate_head(&over),
            format!(
                "{}\n[… {} more lines ({} bytes) left out; the limit is 2000 lines or 50 KB]",
                lines.trim_end(),
                NOTE_LINES + 1,
                2 * (NOTE_LINES + 1)
            )
        );
    }
}
