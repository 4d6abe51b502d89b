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
    fn name(&self) -> &str {
        "edit"
    }

    fn writes_only_its_locations(&self) -> bool {
        true
    }

    fn description(&self) -> &str {
        "Edit a file by replacing exact text. Each edits[].oldText must match exactly one place \
         in the file as it is before this call (edits are not applied one after another) and \
         must not overlap another edit. Copy oldText exactly from the file, whitespace and line \
         breaks included, with just enough surrounding lines to make it unique; combine changes \
         to the same or neighbouring lines into one edit instead of including large unchanged \
         regions. Line endings (CRLF) and a byte order mark are kept. To create a file or \
         rewrite it whole, use write."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
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
mod tests;
