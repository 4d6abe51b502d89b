//! The `---` front matter at the top of a `SKILL.md` or a prompt template.
//!
//! Skills and templates only need a few string fields (`name`,
//! `description`), so this reads the flat YAML subset they are written in
//! rather than pulling in a YAML parser: `key: value` lines with plain,
//! `"double"` or `'single'` quoted values, values continued on indented
//! lines, and `|`/`>` block values. Anything else (lists, nested maps)
//! belongs to keys pincer does not read and is passed over.

use std::collections::BTreeMap;

/// A file split into its front matter fields and the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FrontMatter<'a> {
    pub fields: BTreeMap<String, String>,
    /// Everything after the closing `---` line.
    pub body: &'a str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Error {
    /// The file does not start with a `---` line.
    Missing,
    /// A `---` line opens the front matter but none closes it.
    Unclosed,
}

/// Splits `text` into front matter and body.
pub(super) fn parse(text: &str) -> Result<FrontMatter<'_>, Error> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(Error::Missing)?;
    if first.trim_end() != "---" {
        return Err(Error::Missing);
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if line.trim_end() == "---" {
            return Ok(FrontMatter {
                fields: fields(&text[start..offset]),
                body: &text[offset + line.len()..],
            });
        }
        offset += line.len();
    }
    Err(Error::Unclosed)
}

/// How the lines of one value are joined.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    /// Plain or quoted: lines fold into one, separated by spaces.
    Flow,
    /// `|`: lines are kept.
    Literal,
    /// `>`: lines fold into one.
    Folded,
}

fn fields(yaml: &str) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    let mut current: Option<(String, Style, Vec<&str>)> = None;
    let mut finish = |current: Option<(String, Style, Vec<&str>)>| {
        if let Some((key, style, lines)) = current {
            let value = match style {
                Style::Literal => lines.join("\n"),
                Style::Flow => unquote(&lines.join(" ")),
                Style::Folded => lines.join(" "),
            };
            fields.insert(key, value.trim().to_owned());
        }
    };
    for line in yaml.lines() {
        let trimmed = line.trim();
        let indented = line.starts_with([' ', '\t']);
        if indented || trimmed.is_empty() {
            if let Some((_, style, lines)) = &mut current
                && (!trimmed.is_empty() || *style == Style::Literal)
            {
                lines.push(trimmed);
            }
            continue;
        }
        if trimmed.starts_with('#') {
            continue;
        }
        finish(current.take());
        if let Some((key, value)) = trimmed.split_once(':') {
            let value = value.trim();
            let (style, first) = if value.starts_with('|') {
                (Style::Literal, None)
            } else if value.starts_with('>') {
                (Style::Folded, None)
            } else {
                (Style::Flow, Some(value).filter(|v| !v.is_empty()))
            };
            current = Some((key.trim().to_owned(), style, first.into_iter().collect()));
        }
    }
    finish(current);
    fields
}

/// The value inside `"…"` (with `\"`, `\\`, `\n` escapes) or `'…'` (with
/// `''`), or the value itself when it is not quoted.
fn unquote(value: &str) -> String {
    let value = value.trim();
    if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        }
        return out;
    }
    if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        return inner.replace("''", "'");
    }
    value.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parsed(text: &str) -> (Vec<(String, String)>, &str) {
        let front = parse(text).unwrap();
        (front.fields.into_iter().collect(), front.body)
    }

    fn pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn plain_and_quoted_values() {
        let text = "---\nname: pdf-tools\ndescription: \"Fill \\\"forms\\\": PDFs\"\n\
                    license: 'it''s MIT'\n---\n# Body\n";
        assert_eq!(
            parsed(text),
            (
                pairs(&[
                    ("description", "Fill \"forms\": PDFs"),
                    ("license", "it's MIT"),
                    ("name", "pdf-tools"),
                ]),
                "# Body\n"
            )
        );
    }

    #[test]
    fn continued_and_block_values_and_skipped_structure() {
        let text = "---\r\nname: x\r\ndescription: one\r\n  two\r\nnotes: |\n  a\n\n  b\n\
                    folded: >-\n  c\n  d\nmetadata:\n  author: me\n# comment\n- stray\n---\n";
        assert_eq!(
            parsed(text),
            (
                pairs(&[
                    ("description", "one two"),
                    ("folded", "c d"),
                    ("metadata", "author: me"),
                    ("name", "x"),
                    ("notes", "a\n\nb"),
                ]),
                ""
            )
        );
    }

    #[test]
    fn missing_and_unclosed_front_matter() {
        assert_eq!(parse("# Title\n---\n"), Err(Error::Missing));
        assert_eq!(parse(""), Err(Error::Missing));
        assert_eq!(parse("---\nname: x\n"), Err(Error::Unclosed));
    }

    #[test]
    fn a_byte_order_mark_is_ignored() {
        assert_eq!(
            parsed("\u{feff}---\nname: x\n---\nbody"),
            (pairs(&[("name", "x")]), "body")
        );
    }
}
