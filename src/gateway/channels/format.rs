//! The agent's markdown in each chat platform's own markup. Telegram takes
//! a small HTML subset (only `&`, `<` and `>` need escaping, where its
//! MarkdownV2 has eighteen context-dependent characters); WhatsApp has a
//! markdown of its own (`*bold*`, `_italic_`, `~strike~`, fenced
//! monospace). Slack and Discord read the agent's markdown as it is.
//!
//! Model text is data: nothing in it becomes markup the platform would act
//! on. Links are kept only for `http`, `https` and `mailto`; images become
//! links (a chat never loads them on the model's say-so).

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// `markdown` as Telegram HTML (`parse_mode: "HTML"`).
pub fn telegram_html(markdown: &str) -> String {
    let mut out = String::new();
    let mut lists: Vec<Option<u64>> = Vec::new();
    // A link's target, shown after its text when it cannot be a link.
    let mut links: Vec<Option<String>> = Vec::new();
    let mut in_code_block = false;
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => {}
                Tag::Heading { .. } => out.push_str("<b>"),
                Tag::BlockQuote(_) => out.push_str("<blockquote>"),
                Tag::CodeBlock(kind) => {
                    in_code_block = true;
                    match kind {
                        CodeBlockKind::Fenced(info) if !language(&info).is_empty() => {
                            out.push_str("<pre><code class=\"language-");
                            out.push_str(&escape(language(&info)));
                            out.push_str("\">");
                        }
                        _ => out.push_str("<pre><code>"),
                    }
                }
                Tag::List(start) => lists.push(start),
                Tag::Item => item(&mut out, &mut lists, "• "),
                Tag::Emphasis => out.push_str("<i>"),
                Tag::Strong => out.push_str("<b>"),
                Tag::Strikethrough => out.push_str("<s>"),
                Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                    if safe_url(&dest_url) {
                        out.push_str("<a href=\"");
                        out.push_str(&escape(&dest_url));
                        out.push_str("\">");
                        links.push(None);
                    } else {
                        links.push(Some(dest_url.to_string()));
                    }
                }
                Tag::Table(_) => out.push_str("<pre>"),
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => out.push_str("\n\n"),
                TagEnd::Heading(level) => {
                    out.push_str("</b>");
                    out.push_str(if level <= HeadingLevel::H2 {
                        "\n\n"
                    } else {
                        "\n"
                    });
                }
                TagEnd::BlockQuote(_) => {
                    trim_newlines(&mut out);
                    out.push_str("</blockquote>\n\n");
                }
                TagEnd::CodeBlock => {
                    in_code_block = false;
                    if out.ends_with('\n') {
                        out.pop();
                    }
                    out.push_str("</code></pre>\n\n");
                }
                TagEnd::List(_) => end_list(&mut out, &mut lists),
                TagEnd::Item => {
                    trim_newlines(&mut out);
                    out.push('\n');
                }
                TagEnd::Emphasis => out.push_str("</i>"),
                TagEnd::Strong => out.push_str("</b>"),
                TagEnd::Strikethrough => out.push_str("</s>"),
                TagEnd::Link | TagEnd::Image => match links.pop().flatten() {
                    None => out.push_str("</a>"),
                    Some(url) if !url.is_empty() => {
                        out.push_str(" (");
                        out.push_str(&escape(&url));
                        out.push(')');
                    }
                    Some(_) => {}
                },
                TagEnd::TableCell => out.push_str(CELL),
                TagEnd::TableHead | TagEnd::TableRow => end_row(&mut out),
                TagEnd::Table => {
                    trim_newlines(&mut out);
                    out.push_str("</pre>\n\n");
                }
                _ => {}
            },
            Event::Text(text) => out.push_str(&escape(&text)),
            Event::Code(code) => {
                out.push_str("<code>");
                out.push_str(&escape(&code));
                out.push_str("</code>");
            }
            // Raw HTML in model text is text.
            Event::Html(html) | Event::InlineHtml(html) => out.push_str(&escape(&html)),
            Event::SoftBreak => out.push(if in_code_block { '\n' } else { ' ' }),
            Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("——————\n\n"),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            _ => {}
        }
    }
    out.trim_end().to_string()
}

/// `markdown` in WhatsApp's formatting.
pub fn whatsapp(markdown: &str) -> String {
    let mut out = String::new();
    let mut lists: Vec<Option<u64>> = Vec::new();
    let mut links: Vec<String> = Vec::new();
    let mut quote = 0usize;
    for event in Parser::new_ext(markdown, options()) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Heading { .. } | Tag::Strong => out.push('*'),
                Tag::Emphasis => out.push('_'),
                Tag::Strikethrough => out.push('~'),
                Tag::BlockQuote(_) => {
                    quote += 1;
                    out.push_str("> ");
                }
                Tag::CodeBlock(_) => out.push_str("```\n"),
                Tag::List(start) => lists.push(start),
                Tag::Item => item(&mut out, &mut lists, "- "),
                Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                    links.push(dest_url.to_string());
                }
                Tag::Table(_) => out.push_str("```\n"),
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => out.push_str(if quote > 0 { "\n" } else { "\n\n" }),
                TagEnd::Heading(_) => out.push_str("*\n\n"),
                TagEnd::Strong => out.push('*'),
                TagEnd::Emphasis => out.push('_'),
                TagEnd::Strikethrough => out.push('~'),
                TagEnd::BlockQuote(_) => {
                    quote = quote.saturating_sub(1);
                    trim_newlines(&mut out);
                    out.push_str("\n\n");
                }
                TagEnd::CodeBlock => {
                    if !out.ends_with('\n') {
                        out.push('\n');
                    }
                    out.push_str("```\n\n");
                }
                TagEnd::List(_) => end_list(&mut out, &mut lists),
                TagEnd::Item => {
                    trim_newlines(&mut out);
                    out.push('\n');
                }
                TagEnd::Link | TagEnd::Image => {
                    if let Some(url) = links.pop().filter(|u| safe_url(u)) {
                        out.push_str(" (");
                        out.push_str(&url);
                        out.push(')');
                    }
                }
                TagEnd::TableCell => out.push_str(CELL),
                TagEnd::TableHead | TagEnd::TableRow => end_row(&mut out),
                TagEnd::Table => out.push_str("```\n\n"),
                _ => {}
            },
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => {
                if quote > 0 && out.ends_with('\n') {
                    out.push_str("> ");
                }
                out.push_str(&text);
            }
            Event::Code(code) => {
                out.push('`');
                out.push_str(&code);
                out.push('`');
            }
            Event::SoftBreak => out.push(' '),
            Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("——————\n\n"),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            _ => {}
        }
    }
    out.trim_end().to_string()
}

fn options() -> Options {
    Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS
}

/// A fenced block's language: the info string's first word.
fn language(info: &str) -> &str {
    info.split_whitespace().next().unwrap_or_default()
}

/// Only web and mail links are links; `javascript:`, `data:`, `tg:` and
/// relative targets are not.
fn safe_url(url: &str) -> bool {
    url::Url::parse(url.trim()).is_ok_and(|u| matches!(u.scheme(), "http" | "https" | "mailto"))
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// A list item's start: its indent, then its number or `bullet`.
fn item(out: &mut String, lists: &mut [Option<u64>], bullet: &str) {
    out.push_str(&"  ".repeat(lists.len().saturating_sub(1)));
    match lists.last_mut() {
        Some(Some(n)) => {
            out.push_str(&format!("{n}. "));
            *n += 1;
        }
        _ => out.push_str(bullet),
    }
}

fn end_list(out: &mut String, lists: &mut Vec<Option<u64>>) {
    lists.pop();
    if lists.is_empty() {
        trim_newlines(out);
        out.push_str("\n\n");
    }
}

/// Between a table's cells, in monospace.
const CELL: &str = " | ";

fn end_row(out: &mut String) {
    if out.ends_with(CELL) {
        out.truncate(out.len() - CELL.len());
    }
    out.push('\n');
}

fn trim_newlines(out: &mut String) {
    while out.ends_with('\n') {
        out.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn telegram_gets_its_html_subset() {
        let markdown = "# Plan\n\nSome **bold**, *italic*, ~~gone~~ and `code` with [docs](https://example.com/a?b=1&c=2).\n\n- one\n- two\n\n1. first\n2. second\n\n```rust\nfn main() {}\n```\n\n> quoted";
        assert_eq!(
            telegram_html(markdown),
            "<b>Plan</b>\n\nSome <b>bold</b>, <i>italic</i>, <s>gone</s> and <code>code</code> with \
             <a href=\"https://example.com/a?b=1&amp;c=2\">docs</a>.\n\n• one\n• two\n\n1. first\n2. second\n\n\
             <pre><code class=\"language-rust\">fn main() {}</code></pre>\n\n<blockquote>quoted</blockquote>"
        );
    }

    #[test]
    fn markup_in_model_text_stays_text_for_telegram() {
        assert_eq!(
            telegram_html("<b>not bold</b> & <a href=\"x\">x</a>\n\n```\n<script>\n```"),
            "&lt;b&gt;not bold&lt;/b&gt; &amp; &lt;a href=&quot;x&quot;&gt;x&lt;/a&gt;\n\n\
             <pre><code>&lt;script&gt;</code></pre>"
        );
        // An info string cannot break out of the class attribute.
        assert_eq!(
            telegram_html("```a\"><b>x\nbody\n```"),
            "<pre><code class=\"language-a&quot;&gt;&lt;b&gt;x\">body</code></pre>"
        );
    }

    #[test]
    fn only_web_and_mail_links_are_links() {
        assert_eq!(
            telegram_html(
                "[a](javascript:alert(1)) [b](tg://user?id=1) [c](mailto:x@y.z) ![pic](http://t/p.png)"
            ),
            "a (javascript:alert(1)) b (tg://user?id=1) <a href=\"mailto:x@y.z\">c</a> <a href=\"http://t/p.png\">pic</a>"
        );
    }

    #[test]
    fn a_table_is_monospace() {
        assert_eq!(
            telegram_html("| a | b |\n|---|---|\n| 1 | 2 |"),
            "<pre>a | b\n1 | 2</pre>"
        );
    }

    #[test]
    fn whatsapp_gets_its_own_markup() {
        let markdown = "## Title\n\n**bold**, *it*, ~~old~~, `x` and [site](https://e.com).\n\n- a\n- b\n\n```py\nprint(1)\n```";
        assert_eq!(
            whatsapp(markdown),
            "*Title*\n\n*bold*, _it_, ~old~, `x` and site (https://e.com).\n\n- a\n- b\n\n```\nprint(1)\n```"
        );
        assert_eq!(whatsapp("[x](javascript:alert(1))"), "x");
    }
}
