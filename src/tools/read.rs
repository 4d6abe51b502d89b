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

use std::path::{Path, PathBuf};

use base64::Engine as _;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{CallInfo, Location, Tool, ToolContext, ToolKind, ToolOutput};
use crate::llm::Content;

/// Most lines one read returns.
const MAX_LINES: usize = 2_000;
/// Most bytes of text one read returns.
const MAX_BYTES: usize = 50 * 1024;
/// Largest base64 image providers accept in one block.
const MAX_IMAGE_BASE64_BYTES: usize = 4_718_592; // 4.5 MB
/// How much of a file is searched for NUL bytes to call it binary (as git does).
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

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

    fn parameters(&self) -> serde_json::Value {
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
    let request = Request {
        resolved: super::resolve_path(&ctx.cwd, &input.path),
        given: input.path,
        offset,
        limit,
    };

    let bytes = match load(&request).await {
        Ok(bytes) => bytes,
        Err(output) => return output,
    };

    if let Some(mime_type) = sniff_image(&bytes) {
        return image_output(&request, &bytes, mime_type, ctx.image_input);
    }

    let sniffed = &bytes[..bytes.len().min(BINARY_SNIFF_BYTES)];
    if sniffed.contains(&0) {
        return ToolOutput::error(format!(
            "{} is a binary file ({} bytes); read cannot show it. Use bash tools such as \
             `file` or `xxd` to inspect it.",
            request.given,
            bytes.len()
        ));
    }

    let text = match std::str::from_utf8(&bytes) {
        Ok(text) => text,
        Err(e) => {
            return ToolOutput::error(format!(
                "{} is not valid UTF-8 text (the first invalid byte is at offset {}); read \
                 cannot show it. If it is in another encoding, convert it with bash \
                 (e.g. `iconv -f latin1 -t utf-8`).",
                request.given,
                e.valid_up_to()
            ));
        }
    };
    // The editor may hold unsaved changes; its buffer is what the user sees.
    if ctx.workspace.reads_from_editor() {
        return match ctx.workspace.read_text(&request.resolved).await {
            Ok(buffer) => text_output(&request, buffer.strip_prefix('\u{feff}').unwrap_or(&buffer)),
            Err(e) => ToolOutput::error(format!("{}: {e}", request.given)),
        };
    }
    text_output(&request, text.strip_prefix('\u{feff}').unwrap_or(text))
}

/// Reads the whole file, turning the usual failures into results that say
/// what to do instead.
async fn load(request: &Request) -> Result<Vec<u8>, ToolOutput> {
    let given = &request.given;
    let describe_io = |e: std::io::Error| match e.kind() {
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
    };

    let metadata = tokio::fs::metadata(&request.resolved)
        .await
        .map_err(describe_io)?;
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
    tokio::fs::read(&request.resolved)
        .await
        .map_err(describe_io)
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

fn image_output(request: &Request, bytes: &[u8], mime_type: &str, image_input: bool) -> ToolOutput {
    let given = &request.given;
    let details = json!({
        "path": request.resolved.display().to_string(),
        "mimeType": mime_type,
        "bytes": bytes.len(),
    });
    if !image_input {
        return ToolOutput {
            details,
            ..ToolOutput::ok(format!(
                "Read image file {given} [{mime_type}, {} bytes]. The image was omitted because \
                 the current model does not accept images.",
                bytes.len()
            ))
        };
    }
    let encoded_len = bytes.len().div_ceil(3) * 4;
    if encoded_len > MAX_IMAGE_BASE64_BYTES {
        return ToolOutput::error(format!(
            "{given} is an image too large to send: {:.1} MB as base64, over the 4.5 MB limit, \
             and read cannot resize images. Make a smaller copy with bash (e.g. ImageMagick: \
             `convert {given} -resize 2000x2000 small.png`) and read that.",
            encoded_len as f64 / (1024.0 * 1024.0)
        ));
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

/// Selects the requested lines of `text` and bounds them to what one result
/// may hold.
fn text_output(request: &Request, text: &str) -> ToolOutput {
    // Each line keeps its terminator so the shown text is byte-for-byte the
    // file's (CRLF included); a final newline does not start another line.
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = lines.len();
    let start = request.offset;
    let path = request.resolved.display().to_string();
    let details = |end_line: usize, truncated: bool| {
        json!({
            "path": path,
            "startLine": start,
            "endLine": end_line,
            "totalLines": total,
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
    let end_by_limit = request
        .limit
        .map_or(total, |limit| first.saturating_add(limit).min(total));
    let selected = &lines[first..end_by_limit];

    let first_line_bytes = without_terminator(selected[0]).len();
    if first_line_bytes > MAX_BYTES {
        return ToolOutput {
            details: details(start - 1, true),
            ..ToolOutput::ok(format!(
                "[Line {start} is {:.1} KB, beyond the 50 KB limit. Use bash: sed -n '{start}p' {} | head -c {MAX_BYTES}]",
                first_line_bytes as f64 / 1024.0,
                shell_quote(&path),
            ))
        };
    }

    let mut bytes = 0;
    let mut taken = 0;
    for line in selected.iter().take(MAX_LINES) {
        if bytes + without_terminator(line).len() > MAX_BYTES {
            break;
        }
        bytes += line.len();
        taken += 1;
    }
    let end_line = first + taken;
    let truncated = taken < selected.len();

    let mut output = lines[first..end_line].concat();
    let kept = without_terminator(&output).len();
    output.truncate(kept);
    if truncated {
        output.push_str(&format!(
            "\n\n[Showing lines {start}-{end_line} of {total}. Use offset={} to continue.]",
            end_line + 1
        ));
    } else if end_by_limit < total {
        output.push_str(&format!(
            "\n\n[{} more lines in file. Use offset={} to continue.]",
            total - end_by_limit,
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

/// Quotes `s` for a POSIX shell when it holds anything but plain path characters.
fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
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
    fn odd_paths_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("/tmp/a-b_c.txt"), "/tmp/a-b_c.txt");
        assert_eq!(shell_quote("/tmp/it's here"), r"'/tmp/it'\''s here'");
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
            ReadTool.parameters(),
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
