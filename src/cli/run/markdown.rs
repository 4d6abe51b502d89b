//! The answer as a person at a terminal reads it: Markdown drawn with
//! ANSI styles (bold headings and strong text, italics, code in colour,
//! bullets for list items, dim quotes and fences) instead of its raw marks.
//! Only when stdout is a terminal and `NO_COLOR` is unset; a pipe gets the
//! model's text byte for byte.
//!
//! The answer streams, so it is drawn a line at a time: a line is shown
//! once it is complete (or the answer ends). Each line is parsed on its own
//! by pulldown-cmark, except inside a fenced code block, whose lines are
//! shown as they are, in colour. A construct that spans lines (a paragraph
//! wrapped by the model) loses nothing by this: its lines read the same.

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

const BOLD: &str = "\x1b[1m";
const ITALIC: &str = "\x1b[3m";
const DIM: &str = "\x1b[2m";
const CODE: &str = "\x1b[36m";
const HEADING: &str = "\x1b[1;4m";
const RESET: &str = "\x1b[0m";

/// Turns streamed answer text into styled lines.
#[derive(Debug, Default)]
pub struct Renderer {
    /// The line being received, not yet shown.
    pending: String,
    /// Inside a fenced code block: its fence (the backticks or tildes).
    fence: Option<String>,
}

impl Renderer {
    /// Takes a piece of the answer; returns what can be shown now (whole
    /// lines, styled, each with its newline).
    pub fn push(&mut self, text: &str) -> String {
        self.pending.push_str(text);
        let mut out = String::new();
        while let Some(end) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=end).collect();
            out.push_str(&self.line(line.trim_end_matches('\n')));
            out.push('\n');
        }
        out
    }

    /// The rest of the answer (a last line without a newline), at its end.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        self.fence = None;
        if rest.is_empty() {
            rest
        } else {
            self.line(&rest)
        }
    }

    fn line(&mut self, line: &str) -> String {
        let trimmed = line.trim_start();
        if let Some(fence) = &self.fence {
            // A fence closes with at least as many of its marks, alone.
            let closes = opening_fence(trimmed.trim_end()).is_some_and(|f| {
                f.starts_with(fence.as_str()) && f.len() == trimmed.trim_end().len()
            });
            if closes {
                self.fence = None;
                return format!("{DIM}{line}{RESET}");
            }
            return format!("{CODE}{line}{RESET}");
        }
        if let Some(fence) = opening_fence(trimmed) {
            self.fence = Some(fence);
            return format!("{DIM}{line}{RESET}");
        }
        inline(line)
    }
}

/// The fence a line opens a code block with: three or more backticks or
/// tildes.
fn opening_fence(line: &str) -> Option<String> {
    let mark = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let fence: String = line.chars().take_while(|c| *c == mark).collect();
    (fence.chars().count() >= 3).then_some(fence)
}

/// One line outside code blocks, drawn from its Markdown events.
fn inline(line: &str) -> String {
    if line.trim().is_empty() {
        return line.to_string();
    }
    let indent = &line[..line.len() - line.trim_start().len()];
    let mut out = String::from(indent);
    // Styles open now, re-applied after each reset.
    let mut open: Vec<&'static str> = Vec::new();
    // The number of the next item of an ordered list.
    let mut number: Option<u64> = None;
    let restyle = |open: &[&'static str]| -> String {
        let mut s = String::from(RESET);
        for style in open {
            s.push_str(style);
        }
        s
    };
    for event in Parser::new(line) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                open.push(if level == HeadingLevel::H1 {
                    HEADING
                } else {
                    BOLD
                });
                out.push_str(open.last().copied().unwrap_or(BOLD));
            }
            Event::Start(Tag::Strong) => {
                open.push(BOLD);
                out.push_str(BOLD);
            }
            Event::Start(Tag::Emphasis) => {
                open.push(ITALIC);
                out.push_str(ITALIC);
            }
            Event::Start(Tag::BlockQuote(_)) => {
                open.push(DIM);
                out.push_str(DIM);
                out.push_str("│ ");
            }
            Event::Start(Tag::List(first)) => number = first,
            // An ordered item keeps its number; others get a bullet.
            Event::Start(Tag::Item) => match number.as_mut() {
                Some(n) => {
                    out.push_str(&format!("{n}. "));
                    *n += 1;
                }
                None => out.push_str("• "),
            },
            Event::Start(Tag::Link { .. }) => {}
            Event::End(TagEnd::Link) => {}
            Event::End(
                TagEnd::Heading(_) | TagEnd::Strong | TagEnd::Emphasis | TagEnd::BlockQuote(_),
            ) => {
                open.pop();
                out.push_str(&restyle(&open));
            }
            Event::Code(code) => {
                out.push_str(CODE);
                out.push_str(&code);
                out.push_str(&restyle(&open));
            }
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => {
                out.push_str(&text);
            }
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::Rule => out.push_str(&format!("{DIM}{}{RESET}", "─".repeat(40))),
            _ => {}
        }
    }
    if !open.is_empty() {
        out.push_str(RESET);
    }
    // A line that is all markup the parser dropped (a lone `-`) shows as
    // it was.
    if out.trim().is_empty() {
        return line.to_string();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(text: &str) -> String {
        let mut r = Renderer::default();
        let mut out = r.push(text);
        out.push_str(&r.finish());
        out
    }

    #[test]
    fn marks_become_styles() {
        assert_eq!(
            render("# Title\nSome **bold** and *it* with `code`.\n"),
            format!(
                "{HEADING}Title{RESET}\nSome {BOLD}bold{RESET} and {ITALIC}it{RESET} with {CODE}code{RESET}.\n"
            )
        );
        assert_eq!(render("- one\n2. two\n"), "• one\n2. two\n");
        assert_eq!(render("> quoted\n"), format!("{DIM}│ quoted{RESET}\n"));
    }

    #[test]
    fn code_blocks_are_shown_as_they_are() {
        assert_eq!(
            render("```rust\nlet **x** = `y`;\n```\nafter\n"),
            format!("{DIM}```rust{RESET}\n{CODE}let **x** = `y`;{RESET}\n{DIM}```{RESET}\nafter\n")
        );
    }

    #[test]
    fn lines_are_shown_once_complete_and_the_rest_at_the_end() {
        let mut r = Renderer::default();
        assert_eq!(r.push("Some **bo"), "");
        assert_eq!(
            r.push("ld** text\nand"),
            format!("Some {BOLD}bold{RESET} text\n")
        );
        assert_eq!(r.finish(), "and");
    }
}
