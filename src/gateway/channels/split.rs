//! Long replies cut into messages a chat platform accepts: each piece is
//! at most the platform's limit, cut where a reader expects a break (a
//! blank line, then a line end, then a space), and a code block cut in two
//! is closed at the end of one piece and opened again, with its language,
//! at the start of the next, so that each message renders on its own.

/// How a platform counts a message's length: Telegram counts UTF-16 code
/// units, the others characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    Chars,
    Utf16,
}

impl Measure {
    pub fn len(self, text: &str) -> usize {
        match self {
            Self::Chars => text.chars().count(),
            Self::Utf16 => text.encode_utf16().count(),
        }
    }

    fn char_len(self, c: char) -> usize {
        match self {
            Self::Chars => 1,
            Self::Utf16 => c.len_utf16(),
        }
    }
}

/// One block of the reply: a run of prose between blank lines, or a whole
/// fenced code block.
#[derive(Debug, PartialEq)]
enum Block<'a> {
    Prose(&'a str),
    /// The opening fence line (with its info string), the code, and the
    /// closing fence line (absent when the reply ends inside the block).
    Code {
        open: &'a str,
        body: Vec<&'a str>,
        close: Option<&'a str>,
    },
}

/// `text` in pieces of at most `limit` (by `measure`), none empty, which
/// joined with blank lines read as the original. A limit too small to hold
/// a code fence and one character cuts code without fences.
pub fn split(text: &str, limit: usize, measure: Measure) -> Vec<String> {
    let limit = limit.max(1);
    let text = text.trim_matches('\n');
    if text.is_empty() {
        return Vec::new();
    }
    if measure.len(text) <= limit {
        return vec![text.to_string()];
    }
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    for block in blocks(text) {
        for part in block_parts(&block, limit, measure) {
            let joined = if current.is_empty() {
                measure.len(&part)
            } else {
                measure.len(&current) + 2 + measure.len(&part)
            };
            if joined <= limit {
                if !current.is_empty() {
                    current.push_str("\n\n");
                }
                current.push_str(&part);
            } else {
                if !current.is_empty() {
                    pieces.push(std::mem::take(&mut current));
                }
                current = part;
            }
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    // Only a limit too small for fences cuts white space off on its own;
    // a message of nothing but that is no message.
    pieces.retain(|p| !p.trim().is_empty());
    pieces
}

/// The reply's blocks, in order.
fn blocks(text: &str) -> Vec<Block<'_>> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut blocks = Vec::new();
    let mut prose_start: Option<usize> = None;
    let mut i = 0;
    // Byte offsets of each line's start, to slice prose out of `text`.
    let mut starts = Vec::with_capacity(lines.len() + 1);
    let mut at = 0;
    for line in &lines {
        starts.push(at);
        at += line.len() + 1;
    }
    starts.push(text.len() + 1);
    let prose = |from: usize, to: usize| -> &str {
        let end = (starts[to] - 1).min(text.len());
        &text[starts[from]..end]
    };
    while i < lines.len() {
        let line = lines[i];
        if let Some(fence) = fence_of(line) {
            if let Some(start) = prose_start.take() {
                blocks.push(Block::Prose(prose(start, i)));
            }
            let mut body = Vec::new();
            let mut close = None;
            i += 1;
            while i < lines.len() {
                if closes(lines[i], fence) {
                    close = Some(lines[i]);
                    i += 1;
                    break;
                }
                body.push(lines[i]);
                i += 1;
            }
            blocks.push(Block::Code {
                open: line,
                body,
                close,
            });
            continue;
        }
        if line.trim().is_empty() {
            if let Some(start) = prose_start.take() {
                blocks.push(Block::Prose(prose(start, i)));
            }
        } else if prose_start.is_none() {
            prose_start = Some(i);
        }
        i += 1;
    }
    if let Some(start) = prose_start {
        blocks.push(Block::Prose(prose(start, lines.len())));
    }
    blocks
}

/// The fence a line opens (its character and length), if it opens one:
/// three or more backticks or tildes, indented at most three spaces.
fn fence_of(line: &str) -> Option<(char, usize)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let c = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = trimmed.chars().take_while(|x| *x == c).count();
    // A backtick fence's info string holds no backtick.
    (n >= 3 && !(c == '`' && trimmed[n..].contains('`'))).then_some((c, n))
}

fn closes(line: &str, (c, n): (char, usize)) -> bool {
    let trimmed = line.trim();
    trimmed.len() >= n && trimmed.chars().all(|x| x == c)
}

/// A block as parts that each fit in `limit`.
fn block_parts(block: &Block<'_>, limit: usize, measure: Measure) -> Vec<String> {
    match block {
        Block::Prose(text) => prose_parts(text, limit, measure),
        Block::Code { open, body, close } => {
            let whole = {
                let mut s = (*open).to_string();
                for line in body {
                    s.push('\n');
                    s.push_str(line);
                }
                if let Some(close) = close {
                    s.push('\n');
                    s.push_str(close);
                }
                s
            };
            if measure.len(&whole) <= limit {
                return vec![whole];
            }
            let open = open.trim_start();
            let fence: String = open
                .chars()
                .take_while(|c| *c == '`' || *c == '~')
                .collect();
            // Room for the code once the fences and their line ends are in.
            let frame = measure.len(open) + 1 + 1 + measure.len(&fence);
            if frame >= limit {
                return hard_cut(&body.join("\n"), limit, measure);
            }
            let room = limit - frame;
            let mut parts = Vec::new();
            let mut code = String::new();
            let mut flush = |code: &mut String| {
                if !code.is_empty() {
                    parts.push(format!("{open}\n{code}\n{fence}"));
                    code.clear();
                }
            };
            for line in body {
                for piece in hard_cut(line, room, measure).into_iter().chain(
                    // An empty line is a line too.
                    line.is_empty().then(String::new),
                ) {
                    let joined = if code.is_empty() {
                        measure.len(&piece)
                    } else {
                        measure.len(&code) + 1 + measure.len(&piece)
                    };
                    if joined > room && !code.is_empty() {
                        flush(&mut code);
                    }
                    if !code.is_empty() {
                        code.push('\n');
                    }
                    code.push_str(&piece);
                }
            }
            flush(&mut code);
            parts
        }
    }
}

/// Prose that does not fit: cut at line ends, then at spaces, then
/// anywhere.
fn prose_parts(text: &str, limit: usize, measure: Measure) -> Vec<String> {
    if measure.len(text) <= limit {
        return vec![text.to_string()];
    }
    let mut parts = Vec::new();
    let mut current = String::new();
    for line in text.split('\n') {
        for word_run in fit_words(line, limit, measure) {
            let joined = if current.is_empty() {
                measure.len(&word_run)
            } else {
                measure.len(&current) + 1 + measure.len(&word_run)
            };
            if joined > limit && !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push('\n');
            }
            current.push_str(&word_run);
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// A line as runs of whole words that each fit; a word longer than the
/// limit is cut anywhere.
fn fit_words(line: &str, limit: usize, measure: Measure) -> Vec<String> {
    if measure.len(line) <= limit {
        return vec![line.to_string()];
    }
    let mut runs = Vec::new();
    let mut current = String::new();
    for word in line.split(' ') {
        for piece in hard_cut(word, limit, measure) {
            let joined = if current.is_empty() {
                measure.len(&piece)
            } else {
                measure.len(&current) + 1 + measure.len(&piece)
            };
            if joined > limit && !current.is_empty() {
                runs.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(&piece);
        }
    }
    if !current.is_empty() {
        runs.push(current);
    }
    runs
}

/// `text` cut into pieces of at most `limit`, between characters (never
/// inside one, nor between a UTF-16 surrogate pair's halves).
fn hard_cut(text: &str, limit: usize, measure: Measure) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut used = 0;
    for c in text.chars() {
        let size = measure.char_len(c);
        if used + size > limit && !current.is_empty() {
            pieces.push(std::mem::take(&mut current));
            used = 0;
        }
        current.push(c);
        used += size;
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn check(pieces: &[String], limit: usize, measure: Measure) {
        for piece in pieces {
            assert!(
                measure.len(piece) <= limit,
                "{} > {limit}: {piece:?}",
                measure.len(piece)
            );
            assert!(!piece.trim().is_empty(), "an empty piece in {pieces:?}");
        }
    }

    /// The text without fence lines and white space.
    fn content(text: &str) -> String {
        text.lines()
            .filter(|l| !l.trim_start().starts_with("```"))
            .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
            .collect()
    }

    #[test]
    fn a_short_reply_is_one_piece_and_an_empty_one_none() {
        assert_eq!(split("Hello.", 10, Measure::Chars), vec!["Hello."]);
        assert_eq!(split("\n\n", 10, Measure::Chars), Vec::<String>::new());
    }

    #[test]
    fn paragraphs_are_kept_whole_and_packed() {
        let text = "First paragraph.\n\nSecond one.\n\nThird paragraph here.";
        let pieces = split(text, 30, Measure::Chars);
        assert_eq!(
            pieces,
            vec!["First paragraph.\n\nSecond one.", "Third paragraph here."]
        );
    }

    #[test]
    fn a_long_paragraph_is_cut_at_line_ends_then_spaces() {
        let text = "one two three\nfour five six seven eight";
        assert_eq!(
            split(text, 15, Measure::Chars),
            vec!["one two three", "four five six", "seven eight"]
        );
    }

    #[test]
    fn a_code_block_cut_in_two_is_closed_and_reopened_with_its_language() {
        let code: Vec<String> = (0..6).map(|i| format!("let x{i} = {i};")).collect();
        let text = format!("Here:\n\n```rust\n{}\n```\n\nDone.", code.join("\n"));
        let pieces = split(&text, 45, Measure::Chars);
        check(&pieces, 45, Measure::Chars);
        assert_eq!(
            pieces,
            vec![
                "Here:\n\n```rust\nlet x0 = 0;\nlet x1 = 1;\n```",
                "```rust\nlet x2 = 2;\nlet x3 = 3;\n```",
                "```rust\nlet x4 = 4;\nlet x5 = 5;\n```\n\nDone.",
            ]
        );
    }

    #[test]
    fn blank_lines_inside_code_stay_in_the_code() {
        let text = "```\na\n\nb\n```";
        assert_eq!(split(text, 100, Measure::Chars), vec![text]);
        let blocks = blocks(text);
        assert_eq!(
            blocks,
            vec![Block::Code {
                open: "```",
                body: vec!["a", "", "b"],
                close: Some("```"),
            }]
        );
    }

    #[test]
    fn a_reply_ending_inside_code_still_closes_each_piece() {
        let text = format!("```py\n{}", "print(1)\n".repeat(10));
        let pieces = split(text.trim_end(), 40, Measure::Chars);
        check(&pieces, 40, Measure::Chars);
        for piece in &pieces {
            assert!(
                piece.starts_with("```py\n") && piece.ends_with("\n```"),
                "{piece:?}"
            );
        }
    }

    #[test]
    fn telegram_counts_utf16_and_a_pair_is_never_cut() {
        // Each emoji is two UTF-16 units.
        let text = "😀".repeat(5);
        let pieces = split(&text, 4, Measure::Utf16);
        assert_eq!(pieces, vec!["😀😀", "😀😀", "😀"]);
        assert_eq!(split(&text, 4, Measure::Chars), vec!["😀😀😀😀", "😀"]);
    }

    #[test]
    fn every_piece_fits_for_any_limit() {
        let text = "Intro with some words.\n\n```rust\nfn main() {\n    println!(\"a very long line of code that goes on\");\n}\n```\n\n- a list item\n- another one that is longer\n\nwordwordwordwordwordwordwordword end.";
        for limit in 1..120 {
            for measure in [Measure::Chars, Measure::Utf16] {
                let pieces = split(text, limit, measure);
                check(&pieces, limit, measure);
                // Nothing is lost: every character outside the fences and
                // the white space is still there, in order.
                assert_eq!(content(&pieces.join("\n")), content(text), "limit {limit}");
            }
        }
    }
}
