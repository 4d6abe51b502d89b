//! The `edit` tool: replaces exact pieces of a file's text.
//!
//! Every `oldText` is matched against the file as it was before the call, must
//! occur exactly once, and must not overlap another edit, so a batch of edits
//! means the same whatever order the model listed them in. When the exact text
//! is not there, a tolerant match forgives what models commonly get wrong
//! when they copy text (trailing whitespace, typographic quotes, dashes and
//! spaces) but still needs a single location, and only the matched range is
//! replaced: the rest of the file keeps its exact bytes. The model's text
//! may use LF or CRLF; it is given the file's line endings (judged by its
//! first line) before matching, and a BOM is kept out of the way, so a CRLF
//! file stays CRLF without converting the whole file there and back.
//!
//! The model gets a unified diff of what changed. Diffing a whole large file
//! line by line would cost far more than the edit, so only the regions around
//! the edits (plus context) are diffed, with line numbers of the whole file.
//! Reads and writes go through the session's workspace, so in an editor the
//! edit applies to what the user sees, unsaved changes included.

use std::borrow::Cow;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::json;
use similar::udiff::UnifiedHunkHeader;
use similar::{Algorithm, DiffOp, DiffTag};

use super::write::describe_file_call;
use super::{CallInfo, Display, Tool, ToolContext, ToolOutput};

/// Lines of unchanged text around each change in the model's diff.
const CONTEXT_LINES: usize = 3;
/// Most lines of diff the model gets back.
const MAX_DIFF_LINES: usize = 2_000;
/// Most bytes of diff the model gets back.
const MAX_DIFF_BYTES: usize = 50 * 1024;
/// How long the diff may take before it settles for a coarser answer (only
/// huge replacements get near it).
const DIFF_TIME_LIMIT: Duration = Duration::from_millis(50);
const BOM: char = '\u{feff}';

// Arguments of an `edit` call; the field docs are the schema the model sees.
// The legacy form with top-level `oldText`/`newText` (one edit) is also
// accepted (see the `Deserialize` impl), but not advertised.
#[derive(Debug, PartialEq, Eq, JsonSchema)]
pub struct EditInput {
    /// Path to the file to edit, relative to the working directory or absolute.
    pub path: String,
    /// One or more replacements. Each oldText is matched against the file as it is before this call (not after the other edits), must occur exactly once, and must not overlap the oldText of another edit.
    pub edits: Vec<Replacement>,
}

/// One replacement: oldText as it appears in the file, and the newText that replaces it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(inline)]
pub struct Replacement {
    /// The text to replace, copied exactly from the file (whitespace and line breaks included), with just enough surrounding lines to occur only once.
    pub old_text: String,
    /// The text to put in its place.
    pub new_text: String,
}

impl<'de> Deserialize<'de> for EditInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;

        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Raw {
            path: String,
            edits: Option<Vec<Replacement>>,
            old_text: Option<String>,
            new_text: Option<String>,
        }

        let raw = Raw::deserialize(deserializer)?;
        let given_edits = raw.edits.is_some();
        let mut edits = raw.edits.unwrap_or_default();
        match (raw.old_text, raw.new_text) {
            (Some(old_text), Some(new_text)) => edits.push(Replacement { old_text, new_text }),
            (None, None) if !given_edits => return Err(D::Error::missing_field("edits")),
            (None, None) => {}
            _ => {
                return Err(D::Error::custom(
                    "oldText and newText go together; better, pass them as \
                     edits: [{\"oldText\": ..., \"newText\": ...}]",
                ));
            }
        }
        if edits.is_empty() {
            return Err(D::Error::custom(
                "edits is empty; give at least one {\"oldText\", \"newText\"} pair",
            ));
        }
        Ok(Self {
            path: raw.path,
            edits,
        })
    }
}

pub struct EditTool;

impl Tool for EditTool {
    fn name(&self) -> &'static str {
        "edit"
    }

    fn description(&self) -> &'static str {
        "Edit a file by replacing exact text. Each edits[].oldText must match exactly one place \
         in the file as it is before this call (edits are not applied one after another) and \
         must not overlap another edit. Copy oldText exactly from the file, whitespace and line \
         breaks included, with just enough surrounding lines to make it unique; combine changes \
         to the same or neighbouring lines into one edit instead of including large unchanged \
         regions. Line endings (CRLF) and a byte order mark are kept. To create a file or \
         rewrite it whole, use write."
    }

    fn parameters(&self) -> serde_json::Value {
        super::schema_for::<EditInput>()
    }

    fn describe(&self, args: &serde_json::Value, cwd: &Path) -> CallInfo {
        describe_file_call("Edit", args, cwd)
    }

    fn mutating(&self) -> bool {
        true
    }

    fn preview<'a>(
        &'a self,
        args: &'a serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Vec<Display>> {
        Box::pin(async move {
            let Ok(input) = serde_json::from_value::<EditInput>(args.clone()) else {
                return Vec::new();
            };
            let Ok(plan) = plan(input, ctx).await else {
                return Vec::new();
            };
            vec![Display::Diff {
                path: plan.resolved,
                old_text: Some(plan.original),
                new_text: plan.updated,
            }]
        })
    }

    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: EditInput = match super::parse_args(self.name(), args) {
                Ok(input) => input,
                Err(output) => return output,
            };
            let plan = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return ToolOutput::error("Operation aborted"),
                plan = plan(input, ctx) => plan,
            };
            match plan {
                Ok(plan) => apply(plan, ctx).await,
                Err(output) => output,
            }
        })
    }
}

/// An edit worked out against the file's current text, not yet written.
struct Plan {
    /// The path as the model gave it, for messages.
    given: String,
    resolved: PathBuf,
    /// How the diff names the file (`a/<path>`, `b/<path>`).
    labels: (String, String),
    /// The text as read.
    original: String,
    /// The new text, with the file's BOM and line endings.
    updated: String,
    /// Bytes of BOM both texts start with (0 or 3); spans count from after it.
    bom_len: usize,
    /// Where each edit went, in file order.
    spans: Vec<Span>,
}

impl Plan {
    /// The old text after the BOM, which the edits were matched against.
    fn before(&self) -> &str {
        &self.original[self.bom_len..]
    }

    /// The new text after the BOM.
    fn after(&self) -> &str {
        &self.updated[self.bom_len..]
    }
}

/// One applied edit: the bytes it replaced in the old text and the bytes of
/// its replacement in the new one.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Span {
    old: Range<usize>,
    new: Range<usize>,
}

/// Reads the file and works out the new text, or says why not.
async fn plan(input: EditInput, ctx: &ToolContext) -> Result<Plan, ToolOutput> {
    let given = input.path;
    let resolved = super::resolve_path(&ctx.cwd, &given);
    if tokio::fs::metadata(&resolved)
        .await
        .is_ok_and(|m| m.is_dir())
    {
        return Err(ToolOutput::error(format!(
            "{given} is a directory, not a file; edit changes the text of one file."
        )));
    }
    let original = ctx
        .workspace
        .read_text(&resolved)
        .await
        .map_err(|e| read_error(&given, &e))?;

    let bom_len = if original.starts_with(BOM) {
        BOM.len_utf8()
    } else {
        0
    };
    let before = &original[bom_len..];
    // The edits take the file's line endings, rather than the file taking
    // LF for the match and CRLF again afterwards: the lines they do not
    // touch keep their exact bytes (even with mixed endings), and a large
    // file is not copied twice more.
    let eol = if uses_crlf(before) { "\r\n" } else { "\n" };

    let edits: Vec<(Cow<'_, str>, Cow<'_, str>)> = input
        .edits
        .iter()
        .map(|e| (to_lf(&e.old_text), to_lf(&e.new_text)))
        .collect();
    for (i, (old_text, new_text)) in edits.iter().enumerate() {
        let number = i + 1;
        if old_text.is_empty() {
            return Err(ToolOutput::error(format!(
                "The oldText of edit #{number} is empty; give the exact text to replace. To \
                 write a whole file, use write."
            )));
        }
        if old_text == new_text {
            return Err(ToolOutput::error(format!(
                "No changes made: edit #{number} has the same oldText and newText. Put the \
                 replacement text in newText."
            )));
        }
    }
    let edits: Vec<(Cow<'_, str>, Cow<'_, str>)> = edits
        .into_iter()
        .map(|(old_text, new_text)| (with_eol(old_text, eol), with_eol(new_text, eol)))
        .collect();

    let mut folded: Option<Folded> = None;
    let mut located: Vec<(usize, Range<usize>)> = Vec::with_capacity(edits.len());
    for (i, (old_text, _)) in edits.iter().enumerate() {
        let mut found = find_unique(before, old_text);
        if matches!(found, Found::None) {
            found = folded
                .get_or_insert_with(|| Folded::new(before))
                .find(before, old_text);
        }
        match found {
            Found::Once(range) => located.push((i, range)),
            Found::None => return Err(not_found(&given, i + 1, old_text)),
            Found::Many(count) => {
                return Err(ToolOutput::error(format!(
                    "Found {count} occurrences of the text for edit #{} in {given}; add more \
                     surrounding context to make it unique.",
                    i + 1
                )));
            }
        }
    }

    located.sort_by_key(|(_, range)| range.start);
    for pair in located.windows(2) {
        let [(a, first), (b, second)] = pair else {
            continue;
        };
        if second.start < first.end {
            let (a, b) = ((*a).min(*b) + 1, (*a).max(*b) + 1);
            return Err(ToolOutput::error(format!(
                "Edits #{a} and #{b} overlap in {given}; merge them into one edit, or make \
                 their oldText cover separate parts of the file."
            )));
        }
    }

    // Only a tolerant match can replace text with what is already there.
    if located
        .iter()
        .all(|(i, range)| before[range.clone()] == *edits[*i].1)
    {
        return Err(ToolOutput::error(format!(
            "No changes made to {given}: the edits leave the text as it is."
        )));
    }

    // Built front to back into a new string, which comes to the same as
    // applying the edits back to front in place, without moving the tail of
    // a large file once per edit.
    let growth: usize = edits.iter().map(|(_, new_text)| new_text.len()).sum();
    let mut updated = String::with_capacity(original.len() + growth);
    updated.push_str(&original[..bom_len]);
    let mut spans = Vec::with_capacity(located.len());
    let mut copied = 0;
    for (i, range) in &located {
        updated.push_str(&before[copied..range.start]);
        let start = updated.len() - bom_len;
        updated.push_str(&edits[*i].1);
        spans.push(Span {
            old: range.clone(),
            new: start..updated.len() - bom_len,
        });
        copied = range.end;
    }
    updated.push_str(&before[copied..]);

    let labels = match resolved.strip_prefix(&ctx.cwd) {
        Ok(relative) if !relative.as_os_str().is_empty() => {
            let relative = relative.display();
            (format!("a/{relative}"), format!("b/{relative}"))
        }
        _ => {
            let absolute = resolved.display().to_string();
            (absolute.clone(), absolute)
        }
    };
    Ok(Plan {
        given,
        resolved,
        labels,
        original,
        updated,
        bom_len,
        spans,
    })
}

/// Writes a worked-out edit and reports it.
async fn apply(plan: Plan, ctx: &ToolContext) -> ToolOutput {
    // Once started, the write runs to the end: a half-applied cancel would
    // leave the user guessing what the file holds.
    if let Err(e) = ctx
        .workspace
        .write_text(&plan.resolved, &plan.updated)
        .await
    {
        return ToolOutput::error(format!("Could not write {}: {e}", plan.given));
    }

    let diff = unified_diff(plan.before(), plan.after(), &plan.spans, &plan.labels);
    let first_changed_line = diff.first_changed_line.unwrap_or_else(|| {
        let start = plan.spans.first().map_or(0, |s| s.new.start);
        count_newlines(&plan.after().as_bytes()[..start]) + 1
    });
    let replacements = plan.spans.len();
    let mut text = format!(
        "Successfully replaced {replacements} block(s) in {}.",
        plan.given
    );
    if !diff.text.is_empty() {
        text.push_str("\n\n");
        text.push_str(diff.text.strip_suffix('\n').unwrap_or(&diff.text));
    }
    if diff.truncated {
        text.push_str(&format!(
            "\n\n[Diff truncated at {MAX_DIFF_LINES} lines or 50 KB. Read {} to see the rest \
             of the change.]",
            plan.given
        ));
    }
    let path = plan.resolved.display().to_string();
    let details = json!({
        "path": path,
        "replacements": replacements,
        "firstChangedLine": first_changed_line,
        "diff": diff.text,
    });
    ToolOutput {
        details,
        display: vec![Display::Diff {
            path: plan.resolved,
            old_text: Some(plan.original),
            new_text: plan.updated,
        }],
        ..ToolOutput::ok(text)
    }
}

/// Explains a failed read in terms of what the model can do about it.
fn read_error(given: &str, e: &std::io::Error) -> ToolOutput {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            ToolOutput::error(format!("{given} does not exist; use write to create it."))
        }
        std::io::ErrorKind::InvalidData => ToolOutput::error(format!(
            "{given} is not UTF-8 text (it is binary or in another encoding); edit only changes \
             text files. Use bash to change it."
        )),
        std::io::ErrorKind::PermissionDenied => ToolOutput::error(format!(
            "Permission denied reading {given}; edit cannot change it. Ask the user to change \
             its permissions."
        )),
        _ => ToolOutput::error(format!("Could not read {given}: {e}")),
    }
}

fn not_found(given: &str, number: usize, old_text: &str) -> ToolOutput {
    let first_line = old_text
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap_or(old_text)
        .trim();
    // A minified line would drown the message.
    let first_line = match first_line.char_indices().nth(100) {
        Some((cut, _)) => format!("{}…", &first_line[..cut]),
        None => first_line.to_string(),
    };
    ToolOutput::error(format!(
        "Could not find the text for edit #{number} in {given} (its oldText begins with \
         `{first_line}`). oldText must match the file exactly, whitespace and line breaks \
         included; only trailing whitespace, typographic quotes, dashes and special spaces may \
         differ. Read the file again and copy the text from it."
    ))
}

/// Whether the file's line endings are CRLF, judged by its first line ending.
fn uses_crlf(text: &str) -> bool {
    text.find('\n')
        .is_some_and(|i| i > 0 && text.as_bytes()[i - 1] == b'\r')
}

fn to_lf(text: &str) -> Cow<'_, str> {
    if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

/// LF-ended text with `eol` line endings.
fn with_eol<'a>(text: Cow<'a, str>, eol: &str) -> Cow<'a, str> {
    if eol == "\n" || !text.contains('\n') {
        text
    } else {
        Cow::Owned(text.replace('\n', eol))
    }
}

/// Where a piece of text occurs.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    None,
    Once(Range<usize>),
    /// More than once (overlapping occurrences count).
    Many(usize),
}

/// Finds `needle` in `haystack`, counting every occurrence when there is
/// more than one.
fn find_unique(haystack: &str, needle: &str) -> Found {
    let Some(first) = haystack.find(needle) else {
        return Found::None;
    };
    let step = needle.chars().next().map_or(1, char::len_utf8);
    let mut count = 1;
    let mut from = first + step;
    while let Some(i) = haystack.get(from..).and_then(|rest| rest.find(needle)) {
        count += 1;
        from += i + step;
    }
    if count == 1 {
        Found::Once(first..first + needle.len())
    } else {
        Found::Many(count)
    }
}

/// A copy of a text for tolerant matching: each line without trailing
/// whitespace, typographic quotes, dashes and spaces replaced by ASCII ones.
/// Characters map one to one within a line, so a position in the copy maps
/// back to the same character of the same line in the original.
struct Folded {
    text: String,
    /// Byte offsets of line starts in `text`.
    line_starts: Vec<usize>,
    /// Byte offsets of the same line starts in the original.
    source_line_starts: Vec<usize>,
}

impl Folded {
    fn new(source: &str) -> Self {
        let mut text = String::with_capacity(source.len());
        let mut line_starts = Vec::new();
        let mut source_line_starts = Vec::new();
        let mut source_pos = 0;
        for (i, line) in source.split('\n').enumerate() {
            if i > 0 {
                text.push('\n');
            }
            line_starts.push(text.len());
            source_line_starts.push(source_pos);
            fold_line(line, &mut text);
            source_pos += line.len() + 1;
        }
        Self {
            text,
            line_starts,
            source_line_starts,
        }
    }

    /// Finds `old_text`, folded the same way, and maps a single match back
    /// to a byte range of `source`.
    fn find(&self, source: &str, old_text: &str) -> Found {
        let needle = fold_text(old_text);
        if needle.trim().is_empty() {
            return Found::None;
        }
        match find_unique(&self.text, &needle) {
            Found::Once(range) => {
                let start = self.to_source(source, range.start);
                let mut end = self.to_source(source, range.end);
                // A match up to the end of a line takes the line's trailing
                // whitespace with it, which the model could not see (but
                // not the CR of a CRLF).
                let at_line_end = self
                    .text
                    .as_bytes()
                    .get(range.end)
                    .is_none_or(|&b| b == b'\n');
                if at_line_end && !needle.ends_with('\n') {
                    end = match source[end..].find('\n') {
                        Some(i) => {
                            let newline = end + i;
                            let body = &source[..newline];
                            body.strip_suffix('\r').map_or(newline, str::len).max(end)
                        }
                        None => source.len(),
                    };
                }
                Found::Once(start..end)
            }
            other => other,
        }
    }

    fn to_source(&self, source: &str, pos: usize) -> usize {
        let line = self
            .line_starts
            .partition_point(|&s| s <= pos)
            .saturating_sub(1);
        let column = self.text[self.line_starts[line]..pos].chars().count();
        let line_start = self.source_line_starts[line];
        source[line_start..]
            .char_indices()
            .nth(column)
            .map_or(source.len(), |(i, _)| line_start + i)
    }
}

fn fold_text(text: &str) -> String {
    let mut folded = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            folded.push('\n');
        }
        fold_line(line, &mut folded);
    }
    folded
}

fn fold_line(line: &str, out: &mut String) {
    let line = line.trim_end();
    if line.is_ascii() {
        out.push_str(line);
    } else {
        out.extend(line.chars().map(fold_char));
    }
}

fn fold_char(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{201b}' => '\'',
        '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{201f}' => '"',
        '\u{2010}'..='\u{2015}' => '-',
        '\u{00a0}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => ' ',
        c => c,
    }
}

/// The model's view of a change.
#[derive(Debug, Default, PartialEq, Eq)]
struct ModelDiff {
    /// A unified diff, cut to the size limits.
    text: String,
    /// 1-based line of the new text where the first change is.
    first_changed_line: Option<usize>,
    truncated: bool,
}

/// The unified diff of `before` and `after`, which differ only in `spans`
/// (in file order): the same hunks `similar` would give for the whole texts
/// with 3 lines of context, found by diffing only the regions around the
/// spans.
fn unified_diff(before: &str, after: &str, spans: &[Span], labels: &(String, String)) -> ModelDiff {
    let deadline = Instant::now().checked_add(DIFF_TIME_LIMIT);
    let mut out = CappedText::default();
    let mut first_changed_line = None;
    let mut old_lines_before = LineCounter::new(before);
    // Lines the new text has gained before the current region.
    let mut gained: isize = 0;
    let mut counted_spans = 0;
    for region in regions(before, spans) {
        for span in &spans[counted_spans..region.first_span] {
            gained += line_count(&after[span.new.clone()]) - line_count(&before[span.old.clone()]);
        }
        counted_spans = region.first_span;
        let old_line = old_lines_before.line_at(region.old.start);
        let new_line = old_line.saturating_add_signed(gained);
        let old: Vec<&str> = before[region.old].split_inclusive('\n').collect();
        let new: Vec<&str> = after[region.new].split_inclusive('\n').collect();
        let ops = similar::capture_diff_slices_deadline(Algorithm::Myers, &old, &new, deadline);
        for hunk in similar::group_diff_ops(ops, CONTEXT_LINES) {
            if hunk.is_empty() {
                continue;
            }
            if first_changed_line.is_none() {
                first_changed_line = hunk
                    .iter()
                    .find(|op| op.tag() != DiffTag::Equal)
                    .map(|op| new_line + op.new_range().start + 1);
            }
            if out.text.is_empty() {
                out.push(&format!("--- {}\n", labels.0));
                out.push(&format!("+++ {}\n", labels.1));
            }
            let shifted: Vec<DiffOp> = hunk
                .iter()
                .map(|op| shift(op, old_line, new_line))
                .collect();
            out.push(&format!("{}\n", UnifiedHunkHeader::new(&shifted)));
            for op in &hunk {
                let (tag, old_range, new_range) = op.as_tag_tuple();
                match tag {
                    DiffTag::Equal => out.change(' ', &old[old_range]),
                    DiffTag::Delete => out.change('-', &old[old_range]),
                    DiffTag::Insert => out.change('+', &new[new_range]),
                    DiffTag::Replace => {
                        out.change('-', &old[old_range]);
                        out.change('+', &new[new_range]);
                    }
                }
            }
            if out.full {
                return ModelDiff {
                    text: out.text,
                    first_changed_line,
                    truncated: true,
                };
            }
        }
    }
    ModelDiff {
        text: out.text,
        first_changed_line,
        truncated: false,
    }
}

/// A stretch of the old text and the matching stretch of the new one,
/// whole lines, holding one or more edits and their context.
struct Region {
    old: Range<usize>,
    new: Range<usize>,
    /// Index of the region's first span.
    first_span: usize,
}

/// The regions to diff: each span widened to whole lines plus the context,
/// merged where their context would join or touch (as hunks do).
fn regions(before: &str, spans: &[Span]) -> Vec<Region> {
    let mut regions: Vec<Region> = Vec::new();
    for (i, span) in spans.iter().enumerate() {
        let old_start = lines_back(before, line_start(before, span.old.start), CONTEXT_LINES);
        let old_end = lines_forward(before, line_end(before, span.old.end), CONTEXT_LINES);
        // The text between the region's edges and the span is unchanged
        // (an edit there would have merged the regions), so the new text
        // has it next to the replacement.
        let new_end = span.new.end + (old_end - span.old.end);
        match regions.last_mut() {
            Some(last) if last.old.end >= old_start => {
                last.old.end = old_end;
                last.new.end = new_end;
            }
            _ => regions.push(Region {
                old: old_start..old_end,
                new: span.new.start - (span.old.start - old_start)..new_end,
                first_span: i,
            }),
        }
    }
    regions
}

/// Start of the line holding byte `pos`.
fn line_start(text: &str, pos: usize) -> usize {
    text[..pos].rfind('\n').map_or(0, |i| i + 1)
}

/// End (after the newline) of the line holding byte `pos`.
fn line_end(text: &str, pos: usize) -> usize {
    text[pos..].find('\n').map_or(text.len(), |i| pos + i + 1)
}

/// The start of the line `count` lines before the one starting at `start`.
fn lines_back(text: &str, mut start: usize, count: usize) -> usize {
    for _ in 0..count {
        if start == 0 {
            break;
        }
        start = line_start(text, start - 1);
    }
    start
}

/// The end of the line `count` lines after the one ending at `end`.
fn lines_forward(text: &str, mut end: usize, count: usize) -> usize {
    for _ in 0..count {
        if end >= text.len() {
            break;
        }
        end = line_end(text, end);
    }
    end
}

fn shift(op: &DiffOp, old_line: usize, new_line: usize) -> DiffOp {
    match *op {
        DiffOp::Equal {
            old_index,
            new_index,
            len,
        } => DiffOp::Equal {
            old_index: old_index + old_line,
            new_index: new_index + new_line,
            len,
        },
        DiffOp::Delete {
            old_index,
            old_len,
            new_index,
        } => DiffOp::Delete {
            old_index: old_index + old_line,
            old_len,
            new_index: new_index + new_line,
        },
        DiffOp::Insert {
            old_index,
            new_index,
            new_len,
        } => DiffOp::Insert {
            old_index: old_index + old_line,
            new_index: new_index + new_line,
            new_len,
        },
        DiffOp::Replace {
            old_index,
            old_len,
            new_index,
            new_len,
        } => DiffOp::Replace {
            old_index: old_index + old_line,
            old_len,
            new_index: new_index + new_line,
            new_len,
        },
    }
}

/// Counts lines up to increasing positions of one text, scanning each byte
/// once.
struct LineCounter<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text: text.as_bytes(),
            pos: 0,
            line: 0,
        }
    }

    /// The 0-based line starting at `pos` (which must not go backwards).
    fn line_at(&mut self, pos: usize) -> usize {
        self.line += count_newlines(&self.text[self.pos..pos]);
        self.pos = pos;
        self.line
    }
}

fn count_newlines(bytes: &[u8]) -> usize {
    // A byte-wide count per block of 255 lets the compiler compare and add
    // a whole vector of bytes at a time: ten times faster than counting
    // into a usize.
    bytes
        .chunks(255)
        .map(|block| usize::from(block.iter().fold(0u8, |n, &b| n + u8::from(b == b'\n'))))
        .sum()
}

/// Newlines in a short text, signed for differences.
fn line_count(text: &str) -> isize {
    isize::try_from(count_newlines(text.as_bytes())).unwrap_or(isize::MAX)
}

/// Diff text held to the size limits, cut at whole lines.
#[derive(Default)]
struct CappedText {
    text: String,
    lines: usize,
    full: bool,
}

impl CappedText {
    fn push(&mut self, line: &str) {
        if self.full {
            return;
        }
        if self.lines + 1 > MAX_DIFF_LINES || self.text.len() + line.len() > MAX_DIFF_BYTES {
            self.full = true;
            return;
        }
        self.text.push_str(line);
        self.lines += 1;
    }

    /// Adds lines with a sign, shown with LF endings whatever the file's.
    fn change(&mut self, sign: char, lines: &[&str]) {
        for line in lines {
            let mut shown = String::with_capacity(line.len() + 1);
            shown.push(sign);
            match line.strip_suffix('\n') {
                Some(body) => {
                    shown.push_str(body.strip_suffix('\r').unwrap_or(body));
                    shown.push('\n');
                }
                None => {
                    shown.push_str(line);
                    shown.push_str("\n\\ No newline at end of file\n");
                }
            }
            self.push(&shown);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::tools::Workspace;
    use pretty_assertions::assert_eq;

    struct Fixture {
        dir: tempfile::TempDir,
        ctx: ToolContext,
    }

    impl Fixture {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let ctx = ToolContext::local(dir.path().to_path_buf());
            Self { dir, ctx }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
            let path = self.path(name);
            std::fs::write(&path, contents).unwrap();
            path
        }

        fn contents(&self, name: &str) -> String {
            std::fs::read_to_string(self.path(name)).unwrap()
        }

        async fn edit(&self, args: serde_json::Value) -> ToolOutput {
            EditTool.execute(args, &self.ctx).await
        }
    }

    /// What a successful edit of `a.txt` returns.
    struct Expected<'a> {
        path: &'a Path,
        replacements: usize,
        first_changed_line: usize,
        diff: &'a str,
        old_text: &'a str,
        new_text: &'a str,
    }

    fn edited(e: Expected<'_>) -> ToolOutput {
        let name = e.path.file_name().unwrap().to_string_lossy();
        ToolOutput {
            details: json!({
                "path": e.path.display().to_string(),
                "replacements": e.replacements,
                "firstChangedLine": e.first_changed_line,
                "diff": e.diff,
            }),
            display: vec![Display::Diff {
                path: e.path.to_path_buf(),
                old_text: Some(e.old_text.to_string()),
                new_text: e.new_text.to_string(),
            }],
            ..ToolOutput::ok(format!(
                "Successfully replaced {} block(s) in {name}.\n\n{}",
                e.replacements,
                e.diff.strip_suffix('\n').unwrap()
            ))
        }
    }

    fn one(old_text: &str, new_text: &str) -> serde_json::Value {
        json!({"path": "a.txt", "edits": [{"oldText": old_text, "newText": new_text}]})
    }

    #[tokio::test]
    async fn replaces_a_unique_exact_match() {
        let f = Fixture::new();
        let old = "fn main() {\n    println!(\"hi\");\n}\n";
        let path = f.file("a.txt", old);
        let new = "fn main() {\n    println!(\"hello\");\n}\n";
        assert_eq!(
            f.edit(one("println!(\"hi\")", "println!(\"hello\")")).await,
            edited(Expected {
                path: &path,
                replacements: 1,
                first_changed_line: 2,
                diff: "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n fn main() {\n-    println!(\"hi\");\n+    println!(\"hello\");\n }\n",
                old_text: old,
                new_text: new,
            })
        );
        assert_eq!(f.contents("a.txt"), new);
    }

    #[tokio::test]
    async fn all_edits_match_the_original_text() {
        let f = Fixture::new();
        let path = f.file("a.txt", "alpha\nbeta\n");
        // Applied one after another, the second oldText would match twice.
        let args = json!({"path": "a.txt", "edits": [
            {"oldText": "alpha", "newText": "beta"},
            {"oldText": "beta\n", "newText": "gamma\n"},
        ]});
        assert_eq!(
            f.edit(args).await,
            edited(Expected {
                path: &path,
                replacements: 2,
                first_changed_line: 1,
                diff: "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-alpha\n beta\n+gamma\n",
                old_text: "alpha\nbeta\n",
                new_text: "beta\ngamma\n",
            })
        );
    }

    #[tokio::test]
    async fn accepts_the_legacy_top_level_form() {
        let f = Fixture::new();
        f.file("a.txt", "one\ntwo\n");
        let output = f
            .edit(json!({"path": "a.txt", "oldText": "two", "newText": "2"}))
            .await;
        assert_eq!(
            (output.is_error, f.contents("a.txt")),
            (false, "one\n2\n".to_string())
        );
        assert_eq!(
            serde_json::from_value::<EditInput>(json!({
                "path": "a.txt",
                "edits": [{"oldText": "a", "newText": "b"}],
                "oldText": "c",
                "newText": "d",
            }))
            .unwrap(),
            EditInput {
                path: "a.txt".to_string(),
                edits: vec![
                    Replacement {
                        old_text: "a".to_string(),
                        new_text: "b".to_string()
                    },
                    Replacement {
                        old_text: "c".to_string(),
                        new_text: "d".to_string()
                    },
                ],
            }
        );
    }

    #[tokio::test]
    async fn malformed_arguments_say_what_is_wrong() {
        let f = Fixture::new();
        f.file("a.txt", "x\n");
        let cases = [
            (
                json!({"path": "a.txt"}),
                "Invalid arguments for edit: missing field `edits`. Check the tool's parameter \
                 schema and call it again.",
            ),
            (
                json!({"path": "a.txt", "edits": []}),
                "Invalid arguments for edit: edits is empty; give at least one {\"oldText\", \
                 \"newText\"} pair. Check the tool's parameter schema and call it again.",
            ),
            (
                json!({"path": "a.txt", "oldText": "x"}),
                "Invalid arguments for edit: oldText and newText go together; better, pass them \
                 as edits: [{\"oldText\": ..., \"newText\": ...}]. Check the tool's parameter \
                 schema and call it again.",
            ),
            (
                json!({"path": "a.txt", "edits": [{"oldText": "x", "newText": "y", "all": true}]}),
                "Invalid arguments for edit: unknown field `all`, expected `oldText` or \
                 `newText`. Check the tool's parameter schema and call it again.",
            ),
        ];
        for (args, message) in cases {
            assert_eq!(f.edit(args).await, ToolOutput::error(message));
        }
        assert_eq!(f.contents("a.txt"), "x\n");
    }

    #[tokio::test]
    async fn text_not_found_names_the_edit() {
        let f = Fixture::new();
        f.file("a.txt", "one\ntwo\n");
        let args = json!({"path": "a.txt", "edits": [
            {"oldText": "one", "newText": "1"},
            {"oldText": "\n  three\nfour", "newText": "3"},
        ]});
        assert_eq!(
            f.edit(args).await,
            ToolOutput::error(
                "Could not find the text for edit #2 in a.txt (its oldText begins with \
                 `three`). oldText must match the file exactly, whitespace and line breaks \
                 included; only trailing whitespace, typographic quotes, dashes and special \
                 spaces may differ. Read the file again and copy the text from it."
            )
        );
        assert_eq!(f.contents("a.txt"), "one\ntwo\n");
    }

    #[tokio::test]
    async fn ambiguous_text_gives_the_count() {
        let f = Fixture::new();
        f.file("a.txt", "x = 1;\ny = 1;\nz = 1;\n");
        assert_eq!(
            f.edit(one(" = 1;", " = 2;")).await,
            ToolOutput::error(
                "Found 3 occurrences of the text for edit #1 in a.txt; add more surrounding \
                 context to make it unique."
            )
        );
        // Overlapping occurrences count too.
        f.file("a.txt", "aaa\n");
        assert_eq!(
            f.edit(one("aa", "b")).await,
            ToolOutput::error(
                "Found 2 occurrences of the text for edit #1 in a.txt; add more surrounding \
                 context to make it unique."
            )
        );
    }

    #[tokio::test]
    async fn overlapping_edits_are_refused() {
        let f = Fixture::new();
        f.file("a.txt", "one two three\n");
        let args = json!({"path": "a.txt", "edits": [
            {"oldText": "two three", "newText": "2 3"},
            {"oldText": "\n", "newText": "!\n"},
            {"oldText": "one two", "newText": "1 2"},
        ]});
        assert_eq!(
            f.edit(args).await,
            ToolOutput::error(
                "Edits #1 and #3 overlap in a.txt; merge them into one edit, or make their \
                 oldText cover separate parts of the file."
            )
        );
        assert_eq!(f.contents("a.txt"), "one two three\n");
    }

    #[tokio::test]
    async fn edits_that_change_nothing_are_errors() {
        let f = Fixture::new();
        f.file("a.txt", "it’s\n");
        assert_eq!(
            f.edit(one("same", "same")).await,
            ToolOutput::error(
                "No changes made: edit #1 has the same oldText and newText. Put the replacement \
                 text in newText."
            )
        );
        // Matched tolerantly, the new text is what the file already holds.
        assert_eq!(
            f.edit(one("it's", "it’s")).await,
            ToolOutput::error("No changes made to a.txt: the edits leave the text as it is.")
        );
        assert_eq!(
            f.edit(one("", "x")).await,
            ToolOutput::error(
                "The oldText of edit #1 is empty; give the exact text to replace. To write a \
                 whole file, use write."
            )
        );
    }

    #[tokio::test]
    async fn tolerant_match_forgives_quotes_dashes_spaces_and_trailing_whitespace() {
        let f = Fixture::new();
        let cases = [
            // Smart quotes in the file, straight ones in oldText.
            (
                "say(“hi”, ‘there’);\nkeep “this”\n",
                "say(\"hi\", 'there');",
                "say(\"hello\");",
                "say(\"hello\");\nkeep “this”\n",
            ),
            // Trailing spaces in the file, not in oldText, and the reverse;
            // the matched line's trailing spaces go with it.
            ("a  \nb\t\nc \n", "a\nb  \nc", "x\ny\nz", "x\ny\nz\n"),
            // An em dash and an en dash in the file.
            (
                "// one — two – three\n",
                "one - two - three",
                "1-2-3",
                "// 1-2-3\n",
            ),
            // A non-breaking and a narrow no-break space in the file.
            (
                "let\u{a0}x =\u{202f}1; // note\u{a0}kept\n",
                "let x = 1;",
                "let y = 2;",
                "let y = 2; // note\u{a0}kept\n",
            ),
            // Typographic text in oldText, ASCII in the file.
            ("a -- \"b\"\n", "a —— “b”", "c", "c\n"),
        ];
        for (file, old_text, new_text, expected) in cases {
            f.file("a.txt", file);
            let output = f.edit(one(old_text, new_text)).await;
            assert_eq!(
                (output.is_error, f.contents("a.txt")),
                (false, expected.to_string()),
                "{output:?}"
            );
        }
    }

    #[tokio::test]
    async fn exact_match_comes_first_and_a_tolerant_one_must_be_unique_too() {
        let f = Fixture::new();
        f.file("a.txt", "“a”\n\"a\"\n");
        let output = f.edit(one("\"a\"", "b")).await;
        assert_eq!(
            (output.is_error, f.contents("a.txt")),
            (false, "“a”\nb\n".to_string())
        );
        f.file("a.txt", "“a” \n\"a\"  \n");
        assert_eq!(
            f.edit(one("\"a\"\n", "b\n")).await,
            ToolOutput::error(
                "Found 2 occurrences of the text for edit #1 in a.txt; add more surrounding \
                 context to make it unique."
            )
        );
    }

    #[tokio::test]
    async fn crlf_file_stays_crlf() {
        let f = Fixture::new();
        let old = "one\r\ntwo\r\nthree\r\n";
        let path = f.file("a.txt", old);
        // oldText with LF or CRLF both match; newText lines get CRLF.
        let args = json!({"path": "a.txt", "edits": [
            {"oldText": "one\ntwo", "newText": "1\n2\n2.5"},
            {"oldText": "three\r\n", "newText": "3\r\n"},
        ]});
        let new = "1\r\n2\r\n2.5\r\n3\r\n";
        assert_eq!(
            f.edit(args).await,
            edited(Expected {
                path: &path,
                replacements: 2,
                first_changed_line: 1,
                diff: "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,4 @@\n-one\n-two\n-three\n+1\n+2\n+2.5\n+3\n",
                old_text: old,
                new_text: new,
            })
        );
        assert_eq!(f.contents("a.txt"), new);
    }

    #[tokio::test]
    async fn untouched_lines_keep_their_endings() {
        let f = Fixture::new();
        // Mostly CRLF, with one LF line, which stays as it is.
        f.file("a.txt", "one\r\ntwo\nthree\r\nfour\r\n");
        let output = f.edit(one("three\nfour", "3\n4")).await;
        assert_eq!(
            (output.is_error, f.contents("a.txt")),
            (false, "one\r\ntwo\n3\r\n4\r\n".to_string())
        );
        // A tolerant match in a CRLF file leaves the CRs in place.
        f.file("a.txt", "a “q”  \r\nb\r\n");
        let output = f.edit(one("a \"q\"", "a 'q'")).await;
        assert_eq!(
            (output.is_error, f.contents("a.txt")),
            (false, "a 'q'\r\nb\r\n".to_string())
        );
        f.file("a.txt", "x\r\na “q”  \r\nb\r\n");
        let output = f.edit(one("a \"q\"\nb\n", "c\n")).await;
        assert_eq!(
            (output.is_error, f.contents("a.txt")),
            (false, "x\r\nc\r\n".to_string())
        );
    }

    #[tokio::test]
    async fn bom_is_kept() {
        let f = Fixture::new();
        let old = "\u{feff}first\nsecond\n";
        let path = f.file("a.txt", old);
        let new = "\u{feff}1st\nsecond\n";
        assert_eq!(
            f.edit(one("first", "1st")).await,
            edited(Expected {
                path: &path,
                replacements: 1,
                first_changed_line: 1,
                diff: "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-first\n+1st\n second\n",
                old_text: old,
                new_text: new,
            })
        );
        assert_eq!(f.contents("a.txt"), new);

        let old = "\u{feff}a\r\nb\r\n";
        f.file("a.txt", old);
        let output = f.edit(one("b", "c")).await;
        assert_eq!(
            (output.is_error, f.contents("a.txt")),
            (false, "\u{feff}a\r\nc\r\n".to_string())
        );
    }

    #[tokio::test]
    async fn unreadable_targets_are_errors() {
        let f = Fixture::new();
        assert_eq!(
            f.edit(one("a", "b")).await,
            ToolOutput::error("a.txt does not exist; use write to create it.")
        );
        std::fs::create_dir(f.path("src")).unwrap();
        assert_eq!(
            f.edit(json!({"path": "src", "edits": [{"oldText": "a", "newText": "b"}]}))
                .await,
            ToolOutput::error("src is a directory, not a file; edit changes the text of one file.")
        );
        f.file("a.txt", b"caf\xe9\n");
        assert_eq!(
            f.edit(one("caf", "cafe")).await,
            ToolOutput::error(
                "a.txt is not UTF-8 text (it is binary or in another encoding); edit only \
                 changes text files. Use bash to change it."
            )
        );
    }

    #[tokio::test]
    async fn model_diff_has_whole_file_line_numbers_and_separate_hunks() {
        let f = Fixture::new();
        let old: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        let path = f.file("a.txt", &old);
        let args = json!({"path": "a.txt", "edits": [
            {"oldText": "line 30\n", "newText": ""},
            {"oldText": "line 10\nline 11\n", "newText": "ten\neleven\nten and a half\n"},
            {"oldText": "line 40\n", "newText": "line 40"},
        ]});
        let output = f.edit(args).await;
        assert_eq!(
            output.text(),
            "Successfully replaced 3 block(s) in a.txt.\n\
             \n\
             --- a/a.txt\n\
             +++ b/a.txt\n\
             @@ -7,8 +7,9 @@\n \
             line 7\n \
             line 8\n \
             line 9\n\
             -line 10\n\
             -line 11\n\
             +ten\n\
             +eleven\n\
             +ten and a half\n \
             line 12\n \
             line 13\n \
             line 14\n\
             @@ -27,7 +28,6 @@\n \
             line 27\n \
             line 28\n \
             line 29\n\
             -line 30\n \
             line 31\n \
             line 32\n \
             line 33\n\
             @@ -37,4 +37,4 @@\n \
             line 37\n \
             line 38\n \
             line 39\n\
             -line 40\n\
             +line 40\n\
             \\ No newline at end of file"
        );
        assert_eq!(output.details["firstChangedLine"], json!(10));
        assert_eq!(output.details["path"], json!(path.display().to_string()));
    }

    #[test]
    fn region_diff_equals_the_whole_file_diff() {
        let old: String = (1..=60).map(|i| format!("line {}\n", i % 7)).collect();
        // Edits at chosen byte ranges: start, middle, far apart, close
        // together, at the very end, and touching.
        let ranges: Vec<Vec<(Range<usize>, &str)>> = vec![
            vec![(0..7, "first\n")],
            vec![(70..77, "")],
            vec![(14..21, "a\nb\n"), (35..42, "c\n")],
            vec![(14..21, "a\n"), (200..207, "z\n"), (300..307, "q\nr\n")],
            vec![(old.len() - 7..old.len(), "end")],
            vec![(21..28, "x\n"), (28..35, "y\n")],
            vec![(3..5, "NE"), (100..101, "")],
            vec![(0..old.len(), "everything\n")],
        ];
        for edits in ranges {
            let mut new = String::new();
            let mut spans = Vec::new();
            let mut copied = 0;
            for (range, text) in &edits {
                new.push_str(&old[copied..range.start]);
                let start = new.len();
                new.push_str(text);
                spans.push(Span {
                    old: range.clone(),
                    new: start..new.len(),
                });
                copied = range.end;
            }
            new.push_str(&old[copied..]);
            let labels = ("a/f".to_string(), "b/f".to_string());
            let expected = similar::TextDiff::from_lines(old.as_str(), new.as_str())
                .unified_diff()
                .context_radius(3)
                .header("a/f", "b/f")
                .to_string();
            assert_eq!(
                unified_diff(&old, &new, &spans, &labels).text,
                expected,
                "{edits:?}"
            );
        }
    }

    #[tokio::test]
    async fn long_diffs_are_cut_with_a_note() {
        let f = Fixture::new();
        let old: String = (0..3000).map(|i| format!("old {i}\n")).collect();
        f.file("a.txt", &old);
        let new: String = (0..3000).map(|i| format!("new {i}\n")).collect();
        let output = f.edit(one(&old, &new)).await;
        let text = output.text();
        let (diff, note) = text
            .split_once("\n\n[Diff")
            .map(|(diff, note)| (diff.to_string(), format!("[Diff{note}")))
            .unwrap();
        assert_eq!(
            note,
            "[Diff truncated at 2000 lines or 50 KB. Read a.txt to see the rest of the change.]"
        );
        let shown = diff.lines().count();
        assert_eq!(shown, 2 + 2_000, "the summary, a blank line, then the diff");
        assert_eq!(f.contents("a.txt"), new);
    }

    #[tokio::test]
    async fn preview_shows_the_change_without_making_it() {
        let f = Fixture::new();
        let old = "a\r\nb\r\n";
        let path = f.file("a.txt", old);
        assert_eq!(
            EditTool.preview(&one("b", "c"), &f.ctx).await,
            vec![Display::Diff {
                path,
                old_text: Some(old.to_string()),
                new_text: "a\r\nc\r\n".to_string(),
            }]
        );
        assert_eq!(f.contents("a.txt"), old);
        assert_eq!(EditTool.preview(&one("zzz", "c"), &f.ctx).await, Vec::new());
    }

    /// An editor: serves its buffers, records writes, never touches the disk.
    #[derive(Default)]
    struct FakeEditor {
        buffers: Mutex<HashMap<PathBuf, String>>,
        writes: Mutex<Vec<(PathBuf, String)>>,
    }

    impl Workspace for FakeEditor {
        fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, std::io::Result<String>> {
            let text = self.buffers.lock().unwrap().get(path).cloned();
            Box::pin(async move {
                text.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
            })
        }

        fn write_text<'a>(
            &'a self,
            path: &'a Path,
            text: &'a str,
        ) -> BoxFuture<'a, std::io::Result<()>> {
            self.writes
                .lock()
                .unwrap()
                .push((path.to_path_buf(), text.to_string()));
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn edits_the_workspace_text_not_the_disk() {
        let mut f = Fixture::new();
        let path = f.file("a.txt", "saved text\n");
        let editor = Arc::new(FakeEditor::default());
        editor
            .buffers
            .lock()
            .unwrap()
            .insert(path.clone(), "unsaved text\n".to_string());
        f.ctx.workspace = editor.clone();
        assert_eq!(
            f.edit(one("unsaved", "edited")).await,
            edited(Expected {
                path: &path,
                replacements: 1,
                first_changed_line: 1,
                diff: "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-unsaved text\n+edited text\n",
                old_text: "unsaved text\n",
                new_text: "edited text\n",
            })
        );
        assert_eq!(
            *editor.writes.lock().unwrap(),
            vec![(path, "edited text\n".to_string())]
        );
        assert_eq!(f.contents("a.txt"), "saved text\n");
    }

    #[test]
    fn describe_names_the_file() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            EditTool.describe(&one("a", "b"), cwd),
            CallInfo {
                title: "Edit a.txt".to_string(),
                kind: super::super::ToolKind::Edit,
                locations: vec![super::super::Location {
                    path: PathBuf::from("/work/project/a.txt"),
                    line: None,
                }],
            }
        );
    }

    #[test]
    fn schema_documents_the_edits_form() {
        assert_eq!(
            EditTool.parameters(),
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path to the file to edit, relative to the working directory or absolute."
                    },
                    "edits": {
                        "type": "array",
                        "description": "One or more replacements. Each oldText is matched against the file as it is before this call (not after the other edits), must occur exactly once, and must not overlap the oldText of another edit.",
                        "items": {
                            "type": "object",
                            "description": "One replacement: oldText as it appears in the file, and the newText that replaces it.",
                            "properties": {
                                "oldText": {
                                    "type": "string",
                                    "description": "The text to replace, copied exactly from the file (whitespace and line breaks included), with just enough surrounding lines to occur only once."
                                },
                                "newText": {
                                    "type": "string",
                                    "description": "The text to put in its place."
                                }
                            },
                            "required": ["oldText", "newText"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["path", "edits"]
            })
        );
    }
}
