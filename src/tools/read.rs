//! The `read` tool: shows the model a file's text, or the file itself when it
//! is an image.
//!
//! Text comes back exactly as stored (no line numbers), so what the model sees
//! is what `edit` must match. A single result is held to 2,000 lines and
//! 50 KB, cut at line boundaries, because one careless read of a log or a
//! generated file would otherwise fill the context window; the cut is always
//! announced with the `offset` that continues it, so nothing is silently lost.
//! Images are recognised by their bytes rather than their extension and are
//! sent as attachments (models accept up to about 4.5 MB of base64); binary and
//! non-UTF-8 files are refused with a hint instead of being shown as garbage.
//!
//! A file may be gigabytes, so a read never loads it: the kind of file is
//! judged from its size and first 8 KB, the requested lines are streamed
//! until one result is full, and the rest is only counted, a buffer at a
//! time. Only the returned range has to be valid UTF-8.

use std::io::{BufRead, Read as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{CallInfo, Location, Tool, ToolContext, ToolKind, ToolOutput};
use super::{MAX_BYTES, MAX_LINES};
use crate::llm::Content;

/// Largest base64 image providers accept in one block.
const MAX_IMAGE_BASE64_BYTES: usize = 4_718_592; // 4.5 MB
/// How much of a file is searched for NUL bytes to call it binary (as git does).
const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// Largest file whose text is asked of the editor (which sends it whole);
/// larger ones are streamed from disk.
const MAX_EDITOR_READ_BYTES: u64 = 8 * 1024 * 1024;
/// The read buffer when streaming a file.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// How far past the returned lines a read goes to count the file's lines
/// (or to measure one overlong line); beyond it the count is a lower bound,
/// so paging through a huge log does not scan all of it each time.
const COUNT_LIMIT_BYTES: u64 = 64 * 1024 * 1024;

// Arguments of a `read` call; the field docs are the schema the model sees.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadInput {
    /// Path to the file to read, relative to the working directory or absolute.
    pub path: String,
    /// Line number to start reading from (1-based); use it to continue a cut-off read.
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// Maximum number of lines to read.
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

pub struct ReadTool;

impl Tool for ReadTool {
    fn name(&self) -> &str {
        "read"
    }

    fn description(&self) -> &str {
        "Read a file. Text is returned exactly as stored, without line numbers, up to \
         2000 lines or 50 KB, whichever comes first; when the output is cut, a note at the end \
         gives the offset to continue from. Use offset (1-based line) and limit to read part of \
         a large file. Images (PNG, JPEG, GIF, WebP) are returned as image attachments. \
         Relative paths are resolved against the working directory."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        super::schema_for::<ReadInput>()
    }

    fn describe(&self, args: &serde_json::Value, cwd: &Path) -> CallInfo {
        let Some(path) = args.get("path").and_then(serde_json::Value::as_str) else {
            return CallInfo {
                title: "Read".to_string(),
                kind: ToolKind::Read,
                locations: Vec::new(),
            };
        };
        let offset = args.get("offset").and_then(serde_json::Value::as_u64);
        let resolved = super::resolve_path(cwd, path);
        let shown = match resolved.strip_prefix(cwd) {
            Ok(relative) if !relative.as_os_str().is_empty() => relative.display().to_string(),
            _ => path.to_string(),
        };
        let title = match offset {
            Some(line) => format!("Read {shown} (from line {line})"),
            None => format!("Read {shown}"),
        };
        CallInfo {
            title,
            kind: ToolKind::Read,
            locations: vec![Location {
                path: resolved,
                line: offset.and_then(|line| u32::try_from(line).ok()),
            }],
        }
    }

    fn mutating(&self) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: ReadInput = match super::parse_args(self.name(), args) {
                Ok(input) => input,
                Err(output) => return output,
            };
            tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => ToolOutput::error("Operation aborted"),
                output = read(input, ctx) => output,
            }
        })
    }
}

/// A validated request: where to read and which lines.
struct Request {
    /// The path as the model gave it, for messages.
    given: String,
    resolved: PathBuf,
    /// 1-based first line.
    offset: usize,
    limit: Option<usize>,
}

// Failures are the call's result, returned once per call.
#[allow(clippy::result_large_err)]
async fn read(input: ReadInput, ctx: &ToolContext) -> ToolOutput {
    let offset = match input.offset {
        None => 1,
        Some(0) => {
            return ToolOutput::error(
                "offset is a 1-based line number, so 0 is not valid. Use offset=1 (or leave it \
                 out) to start at the first line.",
            );
        }
        Some(line) => usize::try_from(line).unwrap_or(usize::MAX),
    };
    let limit = match input.limit {
        Some(0) => {
            return ToolOutput::error(
                "limit must be at least 1. Leave it out to read as much as fits in one result.",
            );
        }
        other => other.map(|lines| usize::try_from(lines).unwrap_or(usize::MAX)),
    };
    let request = Arc::new(Request {
        resolved: super::resolve_path(&ctx.cwd, &input.path),
        given: input.path,
        offset,
        limit,
    });

    let probed = Arc::clone(&request);
    let kind = match blocking(&ctx.cancel, move |_| probe(&probed)).await {
        Ok(kind) => kind,
        Err(output) => return output,
    };
    match kind {
        Kind::Image { mime_type, size } => {
            let encoded_len = usize::try_from(size)
                .unwrap_or(usize::MAX)
                .div_ceil(3)
                .saturating_mul(4);
            if ctx.image_input && encoded_len > MAX_IMAGE_BASE64_BYTES {
                return image_too_large(&request.given, encoded_len);
            }
            let bytes = if ctx.image_input {
                match tokio::fs::read(&request.resolved).await {
                    Ok(bytes) => bytes,
                    Err(e) => return describe_io(&request, e),
                }
            } else {
                Vec::new()
            };
            image_output(&request, &bytes, size, mime_type, ctx.image_input)
        }
        Kind::Binary { size } => ToolOutput::error(format!(
            "{} is a binary file ({size} bytes); read cannot show it. Use bash tools such as \
             `file` or `xxd` to inspect it.",
            request.given
        )),
        // The editor may hold unsaved changes; its buffer is what the user
        // sees. A file too large for an editor buffer is read from disk.
        Kind::Text { size }
            if ctx.workspace.reads_from_editor() && size <= MAX_EDITOR_READ_BYTES =>
        {
            match ctx.workspace.read_text(&request.resolved).await {
                Ok(buffer) => {
                    let reader = std::io::Cursor::new(buffer.into_bytes());
                    match select_lines(reader, request.offset, request.limit, &ctx.cancel) {
                        Ok(selection) => text_output(&request, selection),
                        Err(e) => describe_io(&request, e),
                    }
                }
                Err(e) => ToolOutput::error(format!("{}: {e}", request.given)),
            }
        }
        Kind::Text { .. } => {
            let selected = Arc::clone(&request);
            let selection = blocking(&ctx.cancel, move |cancel| {
                let file = std::fs::File::open(&selected.resolved)
                    .map_err(|e| describe_io(&selected, e))?;
                let reader = std::io::BufReader::with_capacity(READ_BUFFER_BYTES, file);
                select_lines(reader, selected.offset, selected.limit, cancel)
                    .map_err(|e| describe_io(&selected, e))
            })
            .await;
            match selection {
                Ok(selection) => text_output(&request, selection),
                Err(output) => output,
            }
        }
    }
}

/// Runs file work on the blocking pool; a cancel answers at once.
#[allow(clippy::result_large_err)]
async fn blocking<T: Send + 'static>(
    cancel: &CancellationToken,
    work: impl FnOnce(&CancellationToken) -> Result<T, ToolOutput> + Send + 'static,
) -> Result<T, ToolOutput> {
    let token = cancel.clone();
    let job = tokio::task::spawn_blocking(move || work(&token));
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ToolOutput::error("Operation aborted")),
        joined = job => joined.unwrap_or_else(|e| Err(ToolOutput::error(format!("read failed: {e}")))),
    }
}

/// What a file is, judged by its metadata and its first bytes only.
enum Kind {
    Image { mime_type: &'static str, size: u64 },
    Binary { size: u64 },
    Text { size: u64 },
}

/// The usual failures as results that say what to do instead.
fn describe_io(request: &Request, e: std::io::Error) -> ToolOutput {
    let given = &request.given;
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            let looked = if Path::new(given) == request.resolved {
                String::new()
            } else {
                format!(" (looked for {})", request.resolved.display())
            };
            ToolOutput::error(format!(
                "{given} does not exist{looked}. Check the path; use ls to see which files \
                 are there."
            ))
        }
        std::io::ErrorKind::PermissionDenied => ToolOutput::error(format!(
            "Permission denied reading {given}. The file is not readable by this user; \
             read another file or ask the user to change its permissions."
        )),
        _ => ToolOutput::error(format!("Could not read {given}: {e}")),
    }
}

/// Checks that the path is a regular file and sniffs its first bytes, without
/// reading the rest: a file may be gigabytes.
// The error is the call's result, returned once per call.
#[allow(clippy::result_large_err)]
fn probe(request: &Request) -> Result<Kind, ToolOutput> {
    let given = &request.given;
    let metadata = std::fs::metadata(&request.resolved).map_err(|e| describe_io(request, e))?;
    if metadata.is_dir() {
        return Err(ToolOutput::error(format!(
            "{given} is a directory, not a file. Use ls to list its contents."
        )));
    }
    if !metadata.is_file() {
        // FIFOs and devices can block forever or never end.
        return Err(ToolOutput::error(format!(
            "{given} is not a regular file (a device, socket or pipe); read only reads files."
        )));
    }
    let size = metadata.len();
    let file = std::fs::File::open(&request.resolved).map_err(|e| describe_io(request, e))?;
    let mut prefix = Vec::with_capacity(BINARY_SNIFF_BYTES);
    file.take(BINARY_SNIFF_BYTES as u64)
        .read_to_end(&mut prefix)
        .map_err(|e| describe_io(request, e))?;
    Ok(if let Some(mime_type) = sniff_image(&prefix) {
        Kind::Image { mime_type, size }
    } else if prefix.contains(&0) {
        Kind::Binary { size }
    } else {
        Kind::Text { size }
    })
}

/// The lines of a read, taken from a stream without holding more than one
/// result's worth of it.
#[derive(Debug, Default, PartialEq)]
struct Selection {
    /// Lines from the requested offset, each with its terminator (a BOM
    /// removed from line 1), as many as fit in one result.
    lines: Vec<Vec<u8>>,
    /// Where the first kept line starts in the file, for encoding errors.
    first_byte: u64,
    /// The length of the line at the offset, when it alone is over the
    /// byte limit (nothing is kept then), and whether it was measured to
    /// its end.
    oversized_first: Option<(u64, bool)>,
    /// Lines in the whole file (a last line without a newline counts)...
    total: usize,
    /// ...unless counting stopped at [`COUNT_LIMIT_BYTES`]: then at least
    /// that many.
    total_exact: bool,
}

/// One line as [`next_line`] measured it.
struct LineLength {
    /// Bytes with the terminator.
    with_end: u64,
    /// Bytes without `\n` or `\r\n`.
    body: u64,
    /// False when measuring stopped at the scan limit.
    complete: bool,
}

/// Reads one line, keeping at most `keep` bytes of it in `out` and looking
/// at no more than `scan` bytes; `None` at the end of the input.
fn next_line(
    reader: &mut impl BufRead,
    keep: usize,
    scan: u64,
    out: &mut Vec<u8>,
) -> std::io::Result<Option<LineLength>> {
    let mut length = 0u64;
    let mut last_two = [0u8; 2];
    loop {
        if length >= scan {
            return Ok(Some(LineLength {
                with_end: length,
                body: length,
                complete: false,
            }));
        }
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buffer.is_empty() {
            return Ok((length > 0).then_some(LineLength {
                with_end: length,
                body: length,
                complete: true,
            }));
        }
        let (taken, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        let room = keep.saturating_sub(out.len());
        out.extend_from_slice(&buffer[..taken.min(room)]);
        match taken {
            1 => last_two = [last_two[1], buffer[0]],
            n => last_two = [buffer[n - 2], buffer[n - 1]],
        }
        length += taken as u64;
        reader.consume(taken);
        if done {
            let crlf = length >= 2 && last_two == *b"\r\n";
            return Ok(Some(LineLength {
                with_end: length,
                body: length - if crlf { 2 } else { 1 },
                complete: true,
            }));
        }
    }
}

/// Counts the lines left in `reader` (it is at the start of a line),
/// looking at no more than `scan` bytes; `false` with the count so far when
/// there was more.
fn count_lines(
    reader: &mut impl BufRead,
    scan: u64,
    cancel: &CancellationToken,
) -> std::io::Result<(usize, bool)> {
    let mut lines = 0;
    let mut last = b'\n';
    let mut scanned = 0u64;
    loop {
        if cancel.is_cancelled() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "the read was cancelled",
            ));
        }
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let Some(&end) = buffer.last() else {
            return Ok((lines + usize::from(last != b'\n'), true));
        };
        if scanned >= scan {
            return Ok((lines, false));
        }
        lines += buffer.iter().filter(|&&b| b == b'\n').count();
        last = end;
        let n = buffer.len();
        scanned += n as u64;
        reader.consume(n);
    }
}

const BOM: &[u8] = "\u{feff}".as_bytes();

/// Streams `reader` to pick the lines from `offset` (1-based) that fit in one
/// result, at most `limit` of them, and counts the rest.
fn select_lines(
    mut reader: impl BufRead,
    offset: usize,
    limit: Option<usize>,
    cancel: &CancellationToken,
) -> std::io::Result<Selection> {
    let mut selection = Selection::default();
    let mut line_no = 0usize;
    let mut position = 0u64;
    let mut scratch = Vec::new();
    let wanted = limit.unwrap_or(usize::MAX).min(MAX_LINES);
    let mut bytes = 0u64;
    let mut skipping = true;
    while line_no + 1 < offset {
        if line_no.is_multiple_of(4096) && cancel.is_cancelled() {
            break;
        }
        match next_line(&mut reader, 0, u64::MAX, &mut scratch)? {
            Some(length) => {
                line_no += 1;
                position += length.with_end;
            }
            None => {
                skipping = false;
                break;
            }
        }
    }
    if skipping || offset == 1 {
        selection.first_byte = position;
        while selection.lines.len() < wanted {
            let mut line = Vec::new();
            let keep = MAX_BYTES + 2 + BOM.len();
            let Some(length) = next_line(&mut reader, keep, COUNT_LIMIT_BYTES, &mut line)? else {
                break;
            };
            line_no += 1;
            let mut body = length.body;
            if line_no == 1 && line.starts_with(BOM) {
                line.drain(..BOM.len());
                body -= BOM.len() as u64;
                selection.first_byte += BOM.len() as u64;
            }
            if selection.lines.is_empty() && body > MAX_BYTES as u64 {
                selection.oversized_first = Some((body, length.complete));
                if !length.complete {
                    selection.total = line_no;
                    return Ok(selection);
                }
                break;
            }
            if bytes + body > MAX_BYTES as u64 {
                break;
            }
            bytes += line.len() as u64;
            selection.lines.push(line);
        }
    }
    let (rest, exact) = count_lines(&mut reader, COUNT_LIMIT_BYTES, cancel)?;
    selection.total = line_no + rest;
    selection.total_exact = exact;
    Ok(selection)
}

/// The image type of `bytes` by its magic number, whatever the file is named.
fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn image_too_large(given: &str, encoded_len: usize) -> ToolOutput {
    ToolOutput::error(format!(
        "{given} is an image too large to send: {:.1} MB as base64, over the 4.5 MB limit, \
         and read cannot resize images. Make a smaller copy with bash (e.g. ImageMagick: \
         `convert {given} -resize 2000x2000 small.png`) and read that.",
        encoded_len as f64 / (1024.0 * 1024.0)
    ))
}

fn image_output(
    request: &Request,
    bytes: &[u8],
    size: u64,
    mime_type: &str,
    image_input: bool,
) -> ToolOutput {
    let given = &request.given;
    let details = json!({
        "path": request.resolved.display().to_string(),
        "mimeType": mime_type,
        "bytes": size,
    });
    if !image_input {
        return ToolOutput {
            details,
            ..ToolOutput::ok(format!(
                "Read image file {given} [{mime_type}, {size} bytes]. The image was omitted \
                 because the current model does not accept images."
            ))
        };
    }
    ToolOutput {
        content: vec![
            Content::text(format!("Read image file {given} [{mime_type}]")),
            Content::Image {
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
                mime_type: mime_type.to_string(),
            },
        ],
        is_error: false,
        details,
        display: Vec::new(),
    }
}

/// Shows the selected lines and says how to go on, bounded to what one
/// result may hold.
fn text_output(request: &Request, selection: Selection) -> ToolOutput {
    let total = selection.total;
    let exact = selection.total_exact;
    // "of 2500", or "of more than 1200000" when counting stopped.
    let of_total = if exact {
        total.to_string()
    } else {
        format!("more than {total}")
    };
    let start = request.offset;
    let path = request.resolved.display().to_string();
    let details = |end_line: usize, truncated: bool| {
        json!({
            "path": path,
            "startLine": start,
            "endLine": end_line,
            "totalLines": exact.then_some(total),
            "truncated": truncated,
        })
    };

    if total == 0 && start == 1 {
        return ToolOutput {
            details: details(0, false),
            ..ToolOutput::ok(format!("[{} is empty.]", request.given))
        };
    }
    if start > total {
        return ToolOutput::error(format!(
            "Offset {start} is beyond the end of the file ({total} lines)"
        ));
    }

    let first = start - 1;
    // Past the counted lines when counting stopped: the file goes on.
    let end_of_file = if exact { total } else { usize::MAX };
    let end_by_limit = request.limit.map_or(end_of_file, |limit| {
        first.saturating_add(limit).min(end_of_file)
    });

    if let Some((first_line_bytes, measured)) = selection.oversized_first {
        let size = if measured {
            format!("{:.1} KB", first_line_bytes as f64 / 1024.0)
        } else {
            format!("more than {} MB", first_line_bytes / (1024 * 1024))
        };
        return ToolOutput {
            details: details(start - 1, true),
            ..ToolOutput::ok(format!(
                "[Line {start} is {size}, beyond the 50 KB limit. Use bash: sed -n '{start}p' {} | head -c {MAX_BYTES}]",
                crate::tools::shell::quote(&path),
            ))
        };
    }

    let taken = selection.lines.len();
    let end_line = first + taken;
    let truncated = end_line < end_by_limit;

    let mut joined = selection.lines.concat();
    let text = match String::from_utf8(std::mem::take(&mut joined)) {
        Ok(text) => text,
        Err(e) => {
            return ToolOutput::error(format!(
                "{} is not valid UTF-8 text (the first invalid byte is at offset {}); read \
                 cannot show it. If it is in another encoding, convert it with bash \
                 (e.g. `iconv -f latin1 -t utf-8`).",
                request.given,
                selection.first_byte + e.utf8_error().valid_up_to() as u64
            ));
        }
    };
    let mut output = without_terminator(&text).to_string();
    if truncated {
        output.push_str(&format!(
            "\n\n[Showing lines {start}-{end_line} of {of_total}. Use offset={} to continue.]",
            end_line + 1
        ));
    } else if end_by_limit < total {
        let more = total - end_by_limit;
        let more = if exact {
            more.to_string()
        } else {
            format!("More than {more}")
        };
        output.push_str(&format!(
            "\n\n[{more} more lines in file. Use offset={} to continue.]",
            end_by_limit + 1
        ));
    } else if !exact {
        output.push_str(&format!(
            "\n\n[More lines in file. Use offset={} to continue.]",
            end_by_limit + 1
        ));
    }
    ToolOutput {
        details: details(end_line, truncated),
        ..ToolOutput::ok(output)
    }
}

/// A line without its `\n` or `\r\n`.
fn without_terminator(line: &str) -> &str {
    match line.strip_suffix('\n') {
        Some(body) => body.strip_suffix('\r').unwrap_or(body),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// The smallest valid PNG (1×1, transparent).
    const PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];

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

        fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> String {
            let path = self.dir.path().join(name);
            std::fs::write(&path, contents).unwrap();
            path.display().to_string()
        }

        async fn read(&self, args: serde_json::Value) -> ToolOutput {
            ReadTool.execute(args, &self.ctx).await
        }
    }

    fn text(output: &str, details: serde_json::Value) -> ToolOutput {
        ToolOutput {
            details,
            ..ToolOutput::ok(output)
        }
    }

    fn text_details(
        path: &str,
        start: usize,
        end: usize,
        total: usize,
        truncated: bool,
    ) -> serde_json::Value {
        json!({
            "path": path,
            "startLine": start,
            "endLine": end,
            "totalLines": total,
            "truncated": truncated,
        })
    }

    fn numbered_lines(count: usize) -> String {
        (1..=count).map(|i| format!("line {i}\n")).collect()
    }

    #[tokio::test]
    async fn reads_a_small_file_whole() {
        let f = Fixture::new();
        let path = f.write("a.txt", "one\ntwo\n\nfour\n");
        assert_eq!(
            f.read(json!({"path": "a.txt"})).await,
            text("one\ntwo\n\nfour", text_details(&path, 1, 4, 4, false))
        );
    }

    #[tokio::test]
    async fn file_without_final_newline_is_read_whole() {
        let f = Fixture::new();
        let path = f.write("a.txt", "one\ntwo");
        assert_eq!(
            f.read(json!({"path": path})).await,
            text("one\ntwo", text_details(&path, 1, 2, 2, false))
        );
    }

    #[tokio::test]
    async fn offset_and_limit_select_lines_and_say_how_to_continue() {
        let f = Fixture::new();
        let path = f.write("a.txt", numbered_lines(10));
        assert_eq!(
            f.read(json!({"path": "a.txt", "offset": 3, "limit": 4}))
                .await,
            text(
                "line 3\nline 4\nline 5\nline 6\n\n[4 more lines in file. Use offset=7 to continue.]",
                text_details(&path, 3, 6, 10, false)
            )
        );
        // A limit reaching exactly the end has nothing more to announce.
        assert_eq!(
            f.read(json!({"path": "a.txt", "offset": 9, "limit": 2}))
                .await,
            text("line 9\nline 10", text_details(&path, 9, 10, 10, false))
        );
    }

    #[tokio::test]
    async fn unknown_arguments_are_ignored() {
        let f = Fixture::new();
        let path = f.write("a.txt", "x\n");
        assert_eq!(
            f.read(json!({"path": "a.txt", "encoding": "utf-8"})).await,
            text("x", text_details(&path, 1, 1, 1, false))
        );
    }

    #[tokio::test]
    async fn offset_zero_and_limit_zero_are_rejected() {
        let f = Fixture::new();
        f.write("a.txt", "x\n");
        assert_eq!(
            f.read(json!({"path": "a.txt", "offset": 0})).await,
            ToolOutput::error(
                "offset is a 1-based line number, so 0 is not valid. Use offset=1 (or leave it \
                 out) to start at the first line."
            )
        );
        assert_eq!(
            f.read(json!({"path": "a.txt", "limit": 0})).await,
            ToolOutput::error(
                "limit must be at least 1. Leave it out to read as much as fits in one result."
            )
        );
    }

    #[tokio::test]
    async fn long_file_is_cut_at_2000_lines() {
        let f = Fixture::new();
        let path = f.write("long.txt", numbered_lines(2_500));
        let mut expected = (1..=2_000)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        expected.push_str("\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]");
        assert_eq!(
            f.read(json!({"path": "long.txt"})).await,
            text(&expected, text_details(&path, 1, 2_000, 2_500, true))
        );

        let rest = (2_001..=2_500)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            f.read(json!({"path": "long.txt", "offset": 2001})).await,
            text(&rest, text_details(&path, 2_001, 2_500, 2_500, false))
        );
    }

    #[tokio::test]
    async fn long_lines_hit_the_50_kb_cap_before_the_line_cap() {
        let f = Fixture::new();
        // 100 lines of 1,000 bytes (plus newline): 51 lines would be 51,050
        // bytes, 52 would pass 51,200.
        let line = "x".repeat(1_000);
        let path = f.write("wide.txt", format!("{line}\n").repeat(100));
        let mut expected = vec![line.as_str(); 51].join("\n");
        assert_eq!(expected.len(), 51_050);
        expected.push_str("\n\n[Showing lines 1-51 of 100. Use offset=52 to continue.]");
        assert_eq!(
            f.read(json!({"path": "wide.txt"})).await,
            text(&expected, text_details(&path, 1, 51, 100, true))
        );
    }

    #[tokio::test]
    async fn a_first_line_over_50_kb_gets_a_sed_hint() {
        let f = Fixture::new();
        let path = f.write("huge.txt", format!("{}\nshort\n", "y".repeat(60_000)));
        assert_eq!(
            f.read(json!({"path": "huge.txt"})).await,
            text(
                &format!(
                    "[Line 1 is 58.6 KB, beyond the 50 KB limit. Use bash: sed -n '1p' {path} | head -c 51200]"
                ),
                text_details(&path, 1, 0, 2, true)
            )
        );
        assert_eq!(
            f.read(json!({"path": "huge.txt", "offset": 2})).await,
            text("short", text_details(&path, 2, 2, 2, false))
        );
    }

    #[test]
    fn selection_is_the_same_whatever_the_buffer_size() {
        let long = "z".repeat(MAX_BYTES + 10);
        let text = format!("\u{feff}one\r\ntwo\n\nfour\n{long}\nlast");
        let select = |capacity: usize, offset: usize, limit: Option<usize>| {
            let reader = std::io::BufReader::with_capacity(capacity, text.as_bytes());
            select_lines(reader, offset, limit, &CancellationToken::new()).unwrap()
        };
        assert_eq!(
            select(READ_BUFFER_BYTES, 1, None),
            Selection {
                lines: vec![
                    b"one\r\n".to_vec(),
                    b"two\n".to_vec(),
                    b"\n".to_vec(),
                    b"four\n".to_vec()
                ],
                first_byte: 3,
                oversized_first: None,
                total: 6,
                total_exact: true,
            }
        );
        assert_eq!(
            select(READ_BUFFER_BYTES, 5, None),
            Selection {
                lines: Vec::new(),
                first_byte: 18,
                oversized_first: Some((long.len() as u64, true)),
                total: 6,
                total_exact: true,
            }
        );
        for capacity in 1..=17 {
            for (offset, limit) in [(1, None), (2, Some(2)), (5, None), (6, None), (9, None)] {
                assert_eq!(
                    select(capacity, offset, limit),
                    select(READ_BUFFER_BYTES, offset, limit),
                    "capacity {capacity}, offset {offset}"
                );
            }
        }
    }

    #[tokio::test]
    async fn only_the_returned_lines_must_be_utf8() {
        let f = Fixture::new();
        let mut bytes = numbered_lines(3).into_bytes();
        bytes.extend_from_slice(b"caf\xe9\n");
        let path = f.write("mixed.txt", &bytes);
        assert_eq!(
            f.read(json!({"path": "mixed.txt", "limit": 3})).await,
            text(
                "line 1\nline 2\nline 3\n\n[1 more lines in file. Use offset=4 to continue.]",
                text_details(&path, 1, 3, 4, false)
            )
        );
        assert_eq!(
            f.read(json!({"path": "mixed.txt", "offset": 4})).await,
            ToolOutput::error(
                "mixed.txt is not valid UTF-8 text (the first invalid byte is at offset 24); \
                 read cannot show it. If it is in another encoding, convert it with bash \
                 (e.g. `iconv -f latin1 -t utf-8`)."
            )
        );
    }

    #[tokio::test]
    async fn a_huge_sparse_file_is_streamed() {
        let f = Fixture::new();
        // 20,000 lines of text, then zeros (a hole) up to 2 GiB, read in
        // pieces without ever being held in memory.
        let path = f.write("huge.log", numbered_lines(20_000));
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(2 << 30)
            .unwrap();
        let details = |start: usize, end: usize, truncated: bool| {
            json!({
                "path": path,
                "startLine": start,
                "endLine": end,
                "totalLines": null,
                "truncated": truncated,
            })
        };
        assert_eq!(
            f.read(json!({"path": "huge.log", "limit": 2})).await,
            text(
                "line 1\nline 2\n\n[More than 19998 more lines in file. Use offset=3 to continue.]",
                details(1, 2, false)
            )
        );
        let mut expected = (19_001..=20_000)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        expected.push_str("\n\n[More lines in file. Use offset=20001 to continue.]");
        assert_eq!(
            f.read(json!({"path": "huge.log", "offset": 19_001, "limit": 1000}))
                .await,
            text(&expected, details(19_001, 20_000, false))
        );
        assert_eq!(
            f.read(json!({"path": "huge.log", "offset": 20_001})).await,
            text(
                &format!(
                    "[Line 20001 is more than 64 MB, beyond the 50 KB limit. Use bash: sed -n '20001p' {path} | head -c 51200]"
                ),
                details(20_001, 20_000, true)
            )
        );
        let mut head = (1..=2_000)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        head.push_str(
            "\n\n[Showing lines 1-2000 of more than 20000. Use offset=2001 to continue.]",
        );
        assert_eq!(
            f.read(json!({"path": "huge.log"})).await,
            text(&head, details(1, 2_000, true))
        );
    }

    #[test]
    fn odd_paths_are_quoted_for_the_shell() {
        assert_eq!(
            crate::tools::shell::quote("/tmp/a-b_c.txt"),
            "/tmp/a-b_c.txt"
        );
        assert_eq!(
            crate::tools::shell::quote("/tmp/it's here"),
            r"'/tmp/it'\''s here'"
        );
    }

    #[tokio::test]
    async fn offset_beyond_the_end_is_an_error() {
        let f = Fixture::new();
        f.write("a.txt", "one\ntwo\nthree\n");
        assert_eq!(
            f.read(json!({"path": "a.txt", "offset": 4})).await,
            ToolOutput::error("Offset 4 is beyond the end of the file (3 lines)")
        );
    }

    #[tokio::test]
    async fn empty_file_says_so() {
        let f = Fixture::new();
        let path = f.write("empty.txt", "");
        assert_eq!(
            f.read(json!({"path": "empty.txt"})).await,
            text("[empty.txt is empty.]", text_details(&path, 1, 0, 0, false))
        );
        assert_eq!(
            f.read(json!({"path": "empty.txt", "offset": 2})).await,
            ToolOutput::error("Offset 2 is beyond the end of the file (0 lines)")
        );
    }

    #[tokio::test]
    async fn directory_points_to_ls() {
        let f = Fixture::new();
        std::fs::create_dir(f.dir.path().join("src")).unwrap();
        assert_eq!(
            f.read(json!({"path": "src"})).await,
            ToolOutput::error("src is a directory, not a file. Use ls to list its contents.")
        );
    }

    #[tokio::test]
    async fn missing_file_says_it_does_not_exist() {
        let f = Fixture::new();
        let resolved = f.dir.path().join("nope.txt");
        assert_eq!(
            f.read(json!({"path": "nope.txt"})).await,
            ToolOutput::error(format!(
                "nope.txt does not exist (looked for {}). Check the path; use ls to see which \
                 files are there.",
                resolved.display()
            ))
        );
        let absolute = resolved.display().to_string();
        assert_eq!(
            f.read(json!({"path": absolute})).await,
            ToolOutput::error(format!(
                "{absolute} does not exist. Check the path; use ls to see which files are there."
            ))
        );
    }

    #[tokio::test]
    async fn binary_file_is_refused() {
        let f = Fixture::new();
        f.write("prog.bin", b"\x7fELF\x02\x01\x01\x00\x00\x00rest");
        assert_eq!(
            f.read(json!({"path": "prog.bin"})).await,
            ToolOutput::error(
                "prog.bin is a binary file (14 bytes); read cannot show it. Use bash tools such \
                 as `file` or `xxd` to inspect it."
            )
        );
    }

    #[tokio::test]
    async fn invalid_utf8_names_the_first_bad_byte() {
        let f = Fixture::new();
        f.write("latin1.txt", b"caf\xe9 au lait\n");
        assert_eq!(
            f.read(json!({"path": "latin1.txt"})).await,
            ToolOutput::error(
                "latin1.txt is not valid UTF-8 text (the first invalid byte is at offset 3); \
                 read cannot show it. If it is in another encoding, convert it with bash \
                 (e.g. `iconv -f latin1 -t utf-8`)."
            )
        );
    }

    #[tokio::test]
    async fn crlf_is_kept_and_bom_is_stripped() {
        let f = Fixture::new();
        let path = f.write("dos.txt", "\u{feff}one\r\ntwo\r\nthree\r\n");
        assert_eq!(
            f.read(json!({"path": "dos.txt"})).await,
            text("one\r\ntwo\r\nthree", text_details(&path, 1, 3, 3, false))
        );
        assert_eq!(
            f.read(json!({"path": "dos.txt", "limit": 1})).await,
            text(
                "one\n\n[2 more lines in file. Use offset=2 to continue.]",
                text_details(&path, 1, 1, 3, false)
            )
        );
    }

    #[tokio::test]
    async fn png_is_detected_by_content_and_sent_as_an_image() {
        let f = Fixture::new();
        let path = f.write("not-really.txt", PNG);
        let details = json!({"path": path, "mimeType": "image/png", "bytes": PNG.len()});
        assert_eq!(
            f.read(json!({"path": "not-really.txt"})).await,
            ToolOutput {
                content: vec![
                    Content::text("Read image file not-really.txt [image/png]"),
                    Content::Image {
                        data: base64::engine::general_purpose::STANDARD.encode(PNG),
                        mime_type: "image/png".to_string(),
                    },
                ],
                is_error: false,
                details,
                display: Vec::new(),
            }
        );
    }

    #[tokio::test]
    async fn png_is_omitted_for_models_without_image_input() {
        let mut f = Fixture::new();
        f.ctx.image_input = false;
        let path = f.write("not-really.txt", PNG);
        assert_eq!(
            f.read(json!({"path": "not-really.txt"})).await,
            text(
                "Read image file not-really.txt [image/png, 67 bytes]. The image was omitted \
                 because the current model does not accept images.",
                json!({"path": path, "mimeType": "image/png", "bytes": 67})
            )
        );
    }

    #[tokio::test]
    async fn oversized_image_is_refused() {
        let f = Fixture::new();
        let mut big = PNG.to_vec();
        big.resize(4 * 1024 * 1024, 0);
        f.write("big.png", &big);
        assert_eq!(
            f.read(json!({"path": "big.png"})).await,
            ToolOutput::error(
                "big.png is an image too large to send: 5.3 MB as base64, over the 4.5 MB limit, \
                 and read cannot resize images. Make a smaller copy with bash (e.g. ImageMagick: \
                 `convert big.png -resize 2000x2000 small.png`) and read that."
            )
        );
    }

    #[test]
    fn image_types_are_sniffed_by_magic_bytes() {
        assert_eq!(sniff_image(PNG), Some("image/png"));
        assert_eq!(
            sniff_image(b"\xff\xd8\xff\xe0\x00\x10JFIF"),
            Some("image/jpeg")
        );
        assert_eq!(sniff_image(b"GIF87a\x01\x00"), Some("image/gif"));
        assert_eq!(sniff_image(b"GIF89a\x01\x00"), Some("image/gif"));
        assert_eq!(
            sniff_image(b"RIFF\x24\x00\x00\x00WEBPVP8 "),
            Some("image/webp")
        );
        assert_eq!(sniff_image(b"RIFF\x24\x00\x00\x00WAVEfmt "), None);
        assert_eq!(sniff_image(b"GIF8"), None);
        assert_eq!(sniff_image(b"plain text"), None);
    }

    #[test]
    fn describe_shows_the_path_relative_to_cwd_and_the_offset() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            ReadTool.describe(
                &json!({"path": "/work/project/src/a.rs", "offset": 40}),
                cwd
            ),
            CallInfo {
                title: "Read src/a.rs (from line 40)".to_string(),
                kind: ToolKind::Read,
                locations: vec![Location {
                    path: PathBuf::from("/work/project/src/a.rs"),
                    line: Some(40),
                }],
            }
        );
        assert_eq!(
            ReadTool.describe(&json!({"path": "/etc/hosts"}), cwd),
            CallInfo {
                title: "Read /etc/hosts".to_string(),
                kind: ToolKind::Read,
                locations: vec![Location {
                    path: PathBuf::from("/etc/hosts"),
                    line: None,
                }],
            }
        );
    }

    #[tokio::test]
    async fn cancelled_read_is_aborted() {
        let f = Fixture::new();
        f.write("a.txt", "x\n");
        f.ctx.cancel.cancel();
        assert_eq!(
            f.read(json!({"path": "a.txt"})).await,
            ToolOutput::error("Operation aborted")
        );
    }

    #[test]
    fn schema_describes_path_offset_and_limit() {
        assert_eq!(
            *ReadTool.parameters(),
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path to the file to read, relative to the working directory or absolute."
                    },
                    "offset": {
                        "type": ["integer", "null"],
                        "format": "uint64",
                        "minimum": 1,
                        "description": "Line number to start reading from (1-based); use it to continue a cut-off read."
                    },
                    "limit": {
                        "type": ["integer", "null"],
                        "format": "uint64",
                        "minimum": 1,
                        "description": "Maximum number of lines to read."
                    }
                },
                "required": ["path"]
            })
        );
    }
}
