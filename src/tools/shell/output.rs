//! Turning what a program writes to a terminal into the plain text a model
//! reads.
//!
//! Even with `TERM=dumb`, programs print colours, cursor moves, window
//! titles and progress bars that redraw their line with `\r`. The
//! [`Cleaner`] drops escape sequences and control characters, decodes UTF-8
//! (a read can end inside a character, or inside an escape sequence, so
//! state is kept across chunks), and turns `\r` and backspace into edits of
//! the line being printed, so only its last state is kept. Where the lines
//! live is the caller's: a [`Screen`] receives the edits, which lets `bash`
//! keep a bounded tail with a spill file and `process` keep a plain string
//! until it is polled.

/// An escape string (OSC, DCS…) longer than this is taken as garbage.
const MAX_ESCAPE_STRING: usize = 4 * 1024;

/// Where cleaned output goes: lines as a terminal shows them, the last one
/// still being printed.
pub(crate) trait Screen {
    /// Prints a character on the current line: text, a tab, or `\n`, which
    /// ends the line.
    fn print(&mut self, c: char);
    /// Empties the current line: a `\r` came, and now text that prints over
    /// it.
    fn clear_line(&mut self);
    /// Erases the last character of the current line, if it has any.
    fn backspace(&mut self);
}

/// A string whose text after the last `\n` is the line being printed.
impl Screen for String {
    fn print(&mut self, c: char) {
        self.push(c);
    }

    fn clear_line(&mut self) {
        let line_start = self.rfind('\n').map_or(0, |at| at + 1);
        self.truncate(line_start);
    }

    fn backspace(&mut self) {
        if !self.ends_with('\n') {
            self.pop();
        }
    }
}

/// Where the cleaner is inside an escape sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    /// After ESC.
    Esc,
    /// ESC followed by intermediate bytes (`ESC ( B`).
    EscIntermediate,
    /// A control sequence (`ESC [ … final`).
    Csi,
    /// A string (OSC, DCS, SOS, PM, APC) up to BEL or ST.
    String,
    /// ESC inside a string: `\` ends it.
    StringEsc,
}

/// Turns terminal output into text as it arrives, chunk by chunk: escape
/// sequences (colours, cursor moves, titles) and control characters are
/// dropped, `\r\n` is a newline, a lone `\r` (a progress bar redrawing its
/// line) makes the text after it replace the line, and backspace erases a
/// character. Bytes that are not UTF-8 become replacement characters.
#[derive(Debug, Default)]
pub(crate) struct Cleaner {
    escape: Escape,
    /// Bytes of the escape string being skipped.
    string_len: usize,
    /// A `\r` came last: what follows prints over the line, unless it is
    /// `\n`.
    carriage_return: bool,
    /// The start of a UTF-8 character cut off at the end of the last chunk.
    incomplete: Vec<u8>,
}

impl Cleaner {
    pub(crate) fn feed(&mut self, bytes: &[u8], screen: &mut impl Screen) {
        let joined;
        let mut rest = if self.incomplete.is_empty() {
            bytes
        } else {
            let mut buffer = std::mem::take(&mut self.incomplete);
            buffer.extend_from_slice(bytes);
            joined = buffer;
            &joined[..]
        };
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    self.chars(text, screen);
                    return;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    self.chars(std::str::from_utf8(valid).unwrap_or_default(), screen);
                    match e.error_len() {
                        Some(bad) => {
                            self.char('\u{fffd}', screen);
                            rest = &after[bad..];
                        }
                        None => {
                            self.incomplete = after.to_vec();
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Output ended: a cut-off UTF-8 character becomes a replacement
    /// character.
    pub(crate) fn finish(&mut self, screen: &mut impl Screen) {
        if !self.incomplete.is_empty() {
            self.incomplete.clear();
            self.char('\u{fffd}', screen);
        }
    }

    fn chars(&mut self, text: &str, screen: &mut impl Screen) {
        for c in text.chars() {
            self.char(c, screen);
        }
    }

    fn char(&mut self, c: char, screen: &mut impl Screen) {
        match self.escape {
            Escape::None => self.text(c, screen),
            Escape::Esc => match c {
                '[' => self.escape = Escape::Csi,
                ']' | 'P' | 'X' | '^' | '_' => {
                    self.escape = Escape::String;
                    self.string_len = 0;
                }
                ' '..='/' => self.escape = Escape::EscIntermediate,
                // The final character of a two-character sequence.
                '0'..='~' => self.escape = Escape::None,
                // Not a sequence after all (another ESC starts a new one).
                c => {
                    self.escape = Escape::None;
                    self.text(c, screen);
                }
            },
            Escape::EscIntermediate => match c {
                ' '..='/' => {}
                '0'..='~' => self.escape = Escape::None,
                c => {
                    self.escape = Escape::None;
                    self.text(c, screen);
                }
            },
            Escape::Csi => match c {
                // Parameters and intermediates.
                ' '..='?' => {}
                // The final character.
                '@'..='~' => self.escape = Escape::None,
                // Malformed: drop the sequence, keep the character.
                c => {
                    self.escape = Escape::None;
                    self.text(c, screen);
                }
            },
            Escape::String => match c {
                '\u{7}' | '\u{9c}' => self.escape = Escape::None,
                '\u{1b}' => self.escape = Escape::StringEsc,
                c => {
                    self.string_len += c.len_utf8();
                    // An unterminated string must not swallow the rest.
                    if c == '\n' || self.string_len > MAX_ESCAPE_STRING {
                        self.escape = Escape::None;
                        self.text(c, screen);
                    }
                }
            },
            Escape::StringEsc => {
                if c == '\\' {
                    self.escape = Escape::None;
                } else {
                    self.escape = Escape::Esc;
                    self.char(c, screen);
                }
            }
        }
    }

    /// A character outside any escape sequence.
    fn text(&mut self, c: char, screen: &mut impl Screen) {
        match c {
            '\u{1b}' => self.escape = Escape::Esc,
            '\n' => {
                self.carriage_return = false;
                screen.print('\n');
            }
            '\r' => self.carriage_return = true,
            '\u{8}' if !self.carriage_return => screen.backspace(),
            // After `\r` the cursor is at the start of the line already.
            '\u{8}' => {}
            c if c == '\t' || !c.is_control() => {
                if std::mem::take(&mut self.carriage_return) {
                    screen.clear_line();
                }
                screen.print(c);
            }
            // Other control characters (bell, NUL, DEL, C1 controls…).
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// Feeds `input` to a cleaner split at every byte boundary (and in one
    /// piece); every split must give the same text.
    fn clean_split(input: &[u8]) -> String {
        let whole = {
            let mut cleaner = Cleaner::default();
            let mut out = String::new();
            cleaner.feed(input, &mut out);
            cleaner.finish(&mut out);
            out
        };
        for at in 0..=input.len() {
            let mut cleaner = Cleaner::default();
            let mut out = String::new();
            cleaner.feed(&input[..at], &mut out);
            cleaner.feed(&input[at..], &mut out);
            cleaner.finish(&mut out);
            assert_eq!(out, whole, "split at {at}");
        }
        whole
    }

    #[test]
    fn cleaner_removes_escapes_and_keeps_text() {
        assert_eq!(
            clean_split(b"\x1b[1;32mgreen\x1b[0m plain\r\n\x1b]0;title\x07next\x1b(B\r\n"),
            "green plain\nnext\n"
        );
        assert_eq!(
            clean_split("caf\u{e9} \u{1f600}\r\n".as_bytes()),
            "caf\u{e9} \u{1f600}\n"
        );
        assert_eq!(
            clean_split(b"a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b"),
            "alinkb"
        );
        assert_eq!(clean_split(b"bell\x07 nul\x00 ok\tx"), "bell nul ok\tx");
    }

    #[test]
    fn carriage_return_redraws_the_line_and_backspace_erases() {
        assert_eq!(
            clean_split(b"first\r\n10%\r50%\r\x1b[K100%\r\ndone"),
            "first\n100%\ndone"
        );
        assert_eq!(clean_split(b"abx\x08c\n\x08z"), "abc\nz");
    }

    /// Cases where the two tools' cleaners used to differ; the merged one
    /// keeps the behaviour closer to a terminal's.
    #[test]
    fn sequences_end_where_a_terminal_ends_them() {
        // A second ESC starts a new sequence; a control character ends one.
        assert_eq!(clean_split(b"\x1b\x1b[31mred\x1b\ndone"), "red\ndone");
        // The C1 string terminator ends a string; other C1 controls go.
        assert_eq!(clean_split("a\u{1b}]0;t\u{9c}b\u{85}c".as_bytes()), "abc");
        // Backspace right after `\r` has nothing to erase.
        assert_eq!(clean_split(b"abc\r\x08\n"), "abc\n");
        // An unterminated string gives up after MAX_ESCAPE_STRING bytes.
        let mut out = String::new();
        let garbage = "x".repeat(MAX_ESCAPE_STRING + 3);
        Cleaner::default().feed(format!("a\u{1b}]{garbage}").as_bytes(), &mut out);
        assert_eq!(out, "axxx");
    }

    #[test]
    fn invalid_and_cut_off_utf8_become_replacement_characters() {
        assert_eq!(clean_split(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(clean_split(b"end\xe2\x82"), "end\u{fffd}");
    }
}
