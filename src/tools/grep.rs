//! The `grep` tool: searches file contents for a regular expression with
//! ripgrep's own crates, in process, so no `rg` binary has to be installed.
//!
//! The walk is `find`'s (`ignore`, in parallel): `.gitignore`, `.ignore` and
//! the global git excludes are honoured, hidden files are searched (like
//! `rg --hidden`), `.git` is never entered, and binary files (a NUL byte) are
//! skipped. The searcher and matcher are `grep-searcher` and `grep-regex`, so
//! the regex syntax and speed are ripgrep's.
//!
//! A parallel walk finishes files in any order, but the model should get the
//! same answer for the same tree: results are ordered by path and the limit
//! keeps the first matches in that order. To keep memory bounded however
//! many files match, only the files that can still be among the first `limit`
//! matches are held, and a file sorting after all of them is only probed for
//! a first match (to know that something was cut). Like `rg -m`, at most
//! `limit` matching lines are taken from any one file.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkState};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::find::{
    PathGlob, RelPath, describe_missing, parse_limit, relative_slash, shown_path, walker,
};
use super::{CallInfo, Location, MAX_BYTES, Tool, ToolContext, ToolKind, ToolOutput};

/// Matching lines one call returns unless the model asks for another number.
const DEFAULT_LIMIT: usize = 100;
/// Longest line shown whole, in characters; minified files have lines of
/// megabytes.
const MAX_LINE_CHARS: usize = 500;

// Arguments of a `grep` call; the field docs are the schema the model sees.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrepInput {
    /// Regular expression to search for (Rust regex syntax, as in ripgrep), or plain text when
    /// `literal` is true.
    pub pattern: String,
    /// Directory or file to search, relative to the working directory or absolute (default: the
    /// working directory).
    pub path: Option<String>,
    /// Only search files matching this glob, e.g. `*.rs` or `src/**/*.ts`. A glob without `/`
    /// matches file names at any depth.
    pub glob: Option<String>,
    /// Match regardless of case.
    pub ignore_case: Option<bool>,
    /// Treat the pattern as plain text rather than a regular expression.
    pub literal: Option<bool>,
    /// Number of lines to show before and after each match.
    pub context: Option<u64>,
    /// Maximum number of matching lines to return (default 100).
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

pub struct GrepTool;

impl Tool for GrepTool {
    fn name(&self) -> &str {
        "grep"
    }

    fn description(&self) -> &str {
        "Search file contents for a regular expression (Rust regex syntax, as in ripgrep) or, \
         with literal, plain text. Searches the working directory or `path` (a directory or one \
         file) recursively, skipping what .gitignore/.ignore exclude, the .git directory and \
         binary files; hidden files are searched. Use glob to search only some files (e.g. \
         `*.rs`). Output lines are `path:line: text` for matches and `path-line- text` for \
         context lines, paths relative to the searched directory, sorted by path; `--` \
         separates groups of context. Returns at most `limit` matching lines (default 100) or \
         50 KB; lines longer than 500 characters are cut."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        super::schema_for::<GrepInput>()
    }

    fn describe(&self, args: &serde_json::Value, cwd: &Path) -> CallInfo {
        let text = |key: &str| args.get(key).and_then(serde_json::Value::as_str);
        let path = text("path");
        let root = super::resolve_path(cwd, path.unwrap_or("."));
        let mut title = match text("pattern") {
            Some(pattern) => format!("Grep \"{pattern}\""),
            None => "Grep".to_string(),
        };
        if let Some(shown) = shown_path(cwd, &root, path) {
            title.push_str(&format!(" in {shown}"));
        }
        if let Some(glob) = text("glob") {
            title.push_str(&format!(" ({glob})"));
        }
        CallInfo {
            title,
            kind: ToolKind::Search,
            locations: vec![Location {
                path: root,
                line: None,
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
            let input: GrepInput = match super::parse_args(self.name(), args) {
                Ok(input) => input,
                Err(output) => return output,
            };
            let request = match Request::new(input, &ctx.cwd) {
                Ok(request) => request,
                Err(message) => return ToolOutput::error(message),
            };
            super::run_blocking("grep", &ctx.cancel, move |cancel| grep(&request, cancel)).await
        })
    }
}

/// A validated call.
struct Request {
    given: String,
    root: PathBuf,
    matcher: RegexMatcher,
    glob: Option<PathGlob>,
    context: usize,
    limit: usize,
}

impl Request {
    fn new(input: GrepInput, cwd: &Path) -> Result<Self, String> {
        let limit = parse_limit(input.limit, DEFAULT_LIMIT)?;
        let literal = input.literal.unwrap_or(false);
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(input.ignore_case.unwrap_or(false))
            .fixed_strings(literal)
            .line_terminator(Some(b'\n'))
            .build(&input.pattern)
            .map_err(|e| {
                let hint = if literal {
                    String::new()
                } else {
                    " To search for the text as written, call grep again with literal: true."
                        .to_string()
                };
                format!(
                    "Invalid regex \"{}\": {}.{hint}",
                    input.pattern,
                    regex_error(&e.to_string())
                )
            })?;
        let glob = match input.glob {
            None => None,
            Some(glob) => Some(PathGlob::new(&glob).map_err(|e| {
                format!(
                    "Invalid glob \"{glob}\": {e}. Use `*` for any characters in a name, `**` \
                     for any directories, `{{a,b}}` for alternatives."
                )
            })?),
        };
        let given = input.path.unwrap_or_else(|| ".".to_string());
        let root = super::resolve_path(cwd, &given);
        let context = usize::try_from(input.context.unwrap_or(0)).unwrap_or(usize::MAX);
        Ok(Self {
            given,
            root,
            matcher,
            glob,
            context,
            limit,
        })
    }
}

/// The gist of a regex error. The full message draws a caret under the
/// pattern as the matcher rewrote it (wrapped in `(?:…)`), which would point
/// at the wrong place in the pattern the model wrote.
fn regex_error(message: &str) -> &str {
    message
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("error: "))
        .unwrap_or(message)
        .trim_end()
}

fn grep(request: &Request, cancel: &CancellationToken) -> ToolOutput {
    let root_is_file = match std::fs::metadata(&request.root) {
        Ok(metadata) if metadata.is_dir() => false,
        Ok(metadata) if metadata.is_file() => true,
        Ok(_) => {
            return ToolOutput::error(format!(
                "{} is not a regular file or directory (a device, socket or pipe); grep only \
                 searches files.",
                request.given
            ));
        }
        Err(e) => return ToolOutput::error(describe_missing(&request.given, &request.root, &e)),
    };

    let shared = Mutex::new(Collected::default());
    let mut builder = FileSearcherBuilder {
        request,
        root_is_file,
        cancel,
        shared: &shared,
    };
    walker(&request.root).build_parallel().visit(&mut builder);
    if cancel.is_cancelled() {
        return ToolOutput::error("Operation aborted");
    }
    let collected = shared.into_inner();
    render(request, collected)
}

/// A line of output as found: a match, a context line, or a gap between
/// groups of context.
enum Line {
    Match(Text),
    Context(Text),
    Break,
}

struct Text {
    number: u64,
    text: String,
    /// Whether `text` was cut at `MAX_LINE_CHARS`.
    cut: bool,
}

impl Text {
    fn new(number: Option<u64>, bytes: &[u8]) -> Self {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let text = String::from_utf8_lossy(bytes);
        // A line has at least as many bytes as characters.
        let cut_at = if text.len() > MAX_LINE_CHARS {
            text.char_indices().nth(MAX_LINE_CHARS).map(|(at, _)| at)
        } else {
            None
        };
        Self {
            number: number.unwrap_or(0),
            text: match cut_at {
                Some(at) => text[..at].to_string(),
                None => text.into_owned(),
            },
            cut: cut_at.is_some(),
        }
    }
}

/// One file's lines, in order.
#[derive(Default)]
struct Hits {
    lines: Vec<Line>,
    matches: usize,
}

impl Hits {
    /// Keeps the first `n` matches and the context after the last of them.
    fn keep(&mut self, n: usize, context: usize) {
        if n == 0 {
            *self = Self::default();
            return;
        }
        let mut seen = 0;
        let mut end = self.lines.len();
        let mut last_match = None;
        for (i, line) in self.lines.iter().enumerate() {
            match (line, last_match) {
                (Line::Match(text), None) => {
                    seen += 1;
                    if seen == n {
                        last_match = Some(text.number);
                    }
                }
                (Line::Context(text), Some(number))
                    if text.number <= number.saturating_add(context as u64) => {}
                (_, Some(_)) => {
                    end = i;
                    break;
                }
                (_, None) => {}
            }
        }
        self.lines.truncate(end);
        self.matches = seen.min(n);
    }
}

/// Receives one file's search results.
struct FileSink<'a> {
    hits: Hits,
    /// How many matches to take; one more means the file was cut.
    cap: usize,
    more: bool,
    binary: bool,
    cancel: &'a CancellationToken,
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.hits.matches == self.cap {
            self.more = true;
            return Ok(false);
        }
        if self.cancel.is_cancelled() {
            return Ok(false);
        }
        self.hits
            .lines
            .push(Line::Match(Text::new(found.line_number(), found.bytes())));
        self.hits.matches += 1;
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, line: &SinkContext<'_>) -> Result<bool, Self::Error> {
        self.hits
            .lines
            .push(Line::Context(Text::new(line.line_number(), line.bytes())));
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if !self.hits.lines.is_empty() {
            self.hits.lines.push(Line::Break);
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _offset: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// The files that can still be among the first `limit` matches in path
/// order.
#[derive(Default)]
struct Collected {
    files: BTreeMap<RelPath, Hits>,
    total: usize,
    /// Whether some match was left out.
    more: bool,
}

impl Collected {
    /// How many matches to take from the file at `path`: none when the
    /// matches held already fill the limit and all sort before it (then the
    /// file is only probed, to learn whether something is cut).
    fn cap_for(&self, path: &RelPath, limit: usize) -> usize {
        match self.files.last_key_value() {
            Some((last, _)) if self.total >= limit && path > last => 0,
            _ => limit,
        }
    }

    fn add(&mut self, path: RelPath, hits: Hits, more: bool, limit: usize) {
        self.more |= more;
        if hits.matches == 0 {
            return;
        }
        self.total += hits.matches;
        self.files.insert(path, hits);
        // Drop the last files while the others still fill the limit.
        while let Some(last) = self.files.last_entry() {
            let matches = last.get().matches;
            if self.total - matches < limit {
                break;
            }
            last.remove();
            self.total -= matches;
            self.more = true;
        }
    }
}

struct FileSearcherBuilder<'s> {
    request: &'s Request,
    root_is_file: bool,
    cancel: &'s CancellationToken,
    shared: &'s Mutex<Collected>,
}

impl<'s> ParallelVisitorBuilder<'s> for FileSearcherBuilder<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        let searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .before_context(self.request.context)
            .after_context(self.request.context)
            .build();
        Box::new(FileSearcher {
            request: self.request,
            root_is_file: self.root_is_file,
            cancel: self.cancel,
            shared: self.shared,
            searcher,
        })
    }
}

/// One walker thread: searches the files it is given.
struct FileSearcher<'s> {
    request: &'s Request,
    root_is_file: bool,
    cancel: &'s CancellationToken,
    shared: &'s Mutex<Collected>,
    searcher: Searcher,
}

impl ParallelVisitor for FileSearcher<'_> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        if self.cancel.is_cancelled() {
            return WalkState::Quit;
        }
        // Unreadable directories are skipped, as rg does (it also warns).
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return WalkState::Continue;
        }
        let relative = if self.root_is_file {
            entry.file_name().to_string_lossy().into_owned()
        } else {
            relative_slash(&self.request.root, entry.path())
        };
        // A file named as the search path is searched whatever the glob.
        if let Some(glob) = &self.request.glob
            && !self.root_is_file
            && !glob.is_match(&relative)
        {
            return WalkState::Continue;
        }
        let path = RelPath::new(relative, false);
        let limit = self.request.limit;
        let cap = self.lock().cap_for(&path, limit);
        let mut sink = FileSink {
            hits: Hits::default(),
            cap,
            more: false,
            binary: false,
            cancel: self.cancel,
        };
        let searched = self
            .searcher
            .search_path(&self.request.matcher, entry.path(), &mut sink);
        // Files that cannot be read (gone, no permission) are skipped.
        if searched.is_err() || sink.binary {
            return WalkState::Continue;
        }
        if sink.more {
            // The lines after the last match taken may hold the next match's
            // leading context.
            sink.hits.keep(cap, self.request.context);
        }
        if sink.hits.matches > 0 || sink.more {
            self.lock().add(path, sink.hits, sink.more, limit);
        }
        WalkState::Continue
    }
}

impl FileSearcher<'_> {
    fn lock(&self) -> parking_lot::MutexGuard<'_, Collected> {
        self.shared.lock()
    }
}

/// Formats the first `limit` matches in path order, held to `MAX_BYTES`.
fn render(request: &Request, mut collected: Collected) -> ToolOutput {
    if collected.files.is_empty() {
        return ToolOutput {
            details: json!({"matches": 0, "files": 0, "truncated": false}),
            ..ToolOutput::ok("No matches found")
        };
    }

    let mut truncated = collected.more;
    let mut remaining = request.limit;
    let mut output = String::new();
    let mut matches = 0;
    let mut files = 0;
    let mut any_cut = false;
    let mut bytes_cut = false;
    'files: for (path, hits) in &mut collected.files {
        if remaining == 0 {
            truncated = true;
            break;
        }
        if hits.matches > remaining {
            hits.keep(remaining, request.context);
            truncated = true;
        }
        remaining -= hits.matches;
        let mut lines = Vec::with_capacity(hits.lines.len() + 1);
        if request.context > 0 && !output.is_empty() {
            lines.push(("--".to_string(), false, false));
        }
        for line in &hits.lines {
            lines.push(match line {
                Line::Match(t) => (format_line(path, ':', t), true, t.cut),
                Line::Context(t) => (format_line(path, '-', t), false, t.cut),
                Line::Break => ("--".to_string(), false, false),
            });
        }
        let mut counted = false;
        for (line, is_match, cut) in lines {
            let separator = usize::from(!output.is_empty());
            if output.len() + separator + line.len() > MAX_BYTES {
                bytes_cut = true;
                break 'files;
            }
            if separator == 1 {
                output.push('\n');
            }
            output.push_str(&line);
            any_cut |= cut;
            if is_match {
                matches += 1;
                if !counted {
                    files += 1;
                    counted = true;
                }
            }
        }
    }
    if bytes_cut {
        truncated = true;
        // A separator with nothing after it helps no one.
        if let Some(kept) = output.strip_suffix("\n--") {
            output.truncate(kept.len());
        }
    }

    let mut notes = Vec::new();
    if bytes_cut {
        notes.push(format!(
            "50 KB output limit reached after {matches} matches. Narrow the search with a more \
             specific pattern, path or glob."
        ));
    } else if truncated {
        notes.push(format!(
            "{limit} matches limit reached. Use limit={more} for more, or narrow the search with \
             a more specific pattern, path or glob.",
            limit = request.limit,
            more = request.limit.saturating_mul(2),
        ));
    }
    if any_cut {
        notes.push(format!(
            "Lines longer than {MAX_LINE_CHARS} characters were cut; use read to see them whole."
        ));
    }
    if !notes.is_empty() {
        output.push_str(&format!("\n\n[{}]", notes.join(" ")));
    }
    ToolOutput {
        details: json!({"matches": matches, "files": files, "truncated": truncated}),
        ..ToolOutput::ok(output)
    }
}

/// `path:12: text` for a match (`separator` ':'), `path-12- text` for context.
fn format_line(path: &RelPath, separator: char, line: &Text) -> String {
    let cut = if line.cut { "… [truncated]" } else { "" };
    format!(
        "{path}{separator}{number}{separator} {text}{cut}",
        path = path.as_str(),
        number = line.number,
        text = line.text,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
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

        fn write(&self, name: &str, contents: impl AsRef<[u8]>) {
            let path = self.dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, contents).unwrap();
        }

        async fn grep(&self, args: serde_json::Value) -> ToolOutput {
            GrepTool.execute(args, &self.ctx).await
        }
    }

    fn found(text: &str, matches: usize, files: usize, truncated: bool) -> ToolOutput {
        ToolOutput {
            details: json!({"matches": matches, "files": files, "truncated": truncated}),
            ..ToolOutput::ok(text)
        }
    }

    fn no_matches() -> ToolOutput {
        found("No matches found", 0, 0, false)
    }

    #[tokio::test]
    async fn matches_are_listed_by_path_with_line_numbers() {
        let f = Fixture::new();
        f.write(
            "src/main.rs",
            "fn main() {\n    let x = 1;\r\n    let y = 2;\n}\n",
        );
        f.write("b.txt", "let it be\n");
        f.write("src/lib.rs", "pub mod x;\n");
        assert_eq!(
            f.grep(json!({"pattern": r"let \w"})).await,
            found(
                "b.txt:1: let it be\nsrc/main.rs:2:     let x = 1;\nsrc/main.rs:3:     let y = 2;",
                3,
                2,
                false
            )
        );
    }

    #[tokio::test]
    async fn ignored_files_and_git_are_skipped_but_hidden_files_searched() {
        let f = Fixture::new();
        f.write(".git/config", "needle\n");
        f.write(".gitignore", "target/\n*.log\n");
        f.write(".ignore", "vendor/\n");
        f.write("target/out.rs", "needle\n");
        f.write("debug.log", "needle\n");
        f.write("vendor/lib.rs", "needle\n");
        f.write(".config/settings.toml", "needle = true\n");
        f.write("src/a.rs", "// needle\n");
        assert_eq!(
            f.grep(json!({"pattern": "needle"})).await,
            found(
                ".config/settings.toml:1: needle = true\nsrc/a.rs:1: // needle",
                2,
                2,
                false
            )
        );
    }

    #[tokio::test]
    async fn glob_limits_the_files_searched() {
        let f = Fixture::new();
        f.write("a.rs", "needle\n");
        f.write("src/b.rs", "needle\n");
        f.write("src/deep/c.rs", "needle\n");
        f.write("src/d.md", "needle\n");
        assert_eq!(
            f.grep(json!({"pattern": "needle", "glob": "*.rs"})).await,
            found(
                "a.rs:1: needle\nsrc/b.rs:1: needle\nsrc/deep/c.rs:1: needle",
                3,
                3,
                false
            )
        );
        assert_eq!(
            f.grep(json!({"pattern": "needle", "glob": "src/*.rs"}))
                .await,
            found("src/b.rs:1: needle", 1, 1, false)
        );
        assert_eq!(
            f.grep(json!({"pattern": "needle", "glob": "*.{md,txt}"}))
                .await,
            found("src/d.md:1: needle", 1, 1, false)
        );
    }

    #[tokio::test]
    async fn ignore_case_matches_any_case() {
        let f = Fixture::new();
        f.write("a.txt", "Hello\nhello\nHELLO\nhelp\n");
        assert_eq!(
            f.grep(json!({"pattern": "hello"})).await,
            found("a.txt:2: hello", 1, 1, false)
        );
        assert_eq!(
            f.grep(json!({"pattern": "hello", "ignoreCase": true}))
                .await,
            found(
                "a.txt:1: Hello\na.txt:2: hello\na.txt:3: HELLO",
                3,
                1,
                false
            )
        );
    }

    #[tokio::test]
    async fn literal_searches_for_the_text_as_written() {
        let f = Fixture::new();
        f.write("a.txt", "call(x.y)\ncallAx.y)\n");
        assert_eq!(
            f.grep(json!({"pattern": "(x.y)", "literal": true})).await,
            found("a.txt:1: call(x.y)", 1, 1, false)
        );
        assert_eq!(
            f.grep(json!({"pattern": "call(x", "literal": true})).await,
            found("a.txt:1: call(x.y)", 1, 1, false)
        );
    }

    #[tokio::test]
    async fn invalid_regex_names_the_error_and_suggests_literal() {
        let f = Fixture::new();
        f.write("a.txt", "call(x\n");
        assert_eq!(
            f.grep(json!({"pattern": "call(x"})).await,
            ToolOutput::error(
                "Invalid regex \"call(x\": unclosed group. To search for the text as written, \
                 call grep again with literal: true."
            )
        );
    }

    #[tokio::test]
    async fn context_lines_are_marked_and_groups_separated() {
        let f = Fixture::new();
        f.write(
            "a.txt",
            "one\nmatch two\nthree\nfour\nfive\nsix\nseven\nmatch eight\nnine\n",
        );
        f.write("b.txt", "match\nafter\n");
        f.write("c.txt", "a\nmatch\nb\nmatch\nc\n");
        assert_eq!(
            f.grep(json!({"pattern": "match", "context": 1})).await,
            found(
                "a.txt-1- one\n\
                 a.txt:2: match two\n\
                 a.txt-3- three\n\
                 --\n\
                 a.txt-7- seven\n\
                 a.txt:8: match eight\n\
                 a.txt-9- nine\n\
                 --\n\
                 b.txt:1: match\n\
                 b.txt-2- after\n\
                 --\n\
                 c.txt-1- a\n\
                 c.txt:2: match\n\
                 c.txt-3- b\n\
                 c.txt:4: match\n\
                 c.txt-5- c",
                5,
                3,
                false
            )
        );
    }

    #[tokio::test]
    async fn limit_keeps_the_first_matches_in_path_order() {
        let f = Fixture::new();
        f.write("c.txt", "hit\nhit\n");
        f.write("a.txt", "hit\nhit\n");
        f.write("b.txt", "hit\nhit\n");
        assert_eq!(
            f.grep(json!({"pattern": "hit", "limit": 3})).await,
            found(
                "a.txt:1: hit\na.txt:2: hit\nb.txt:1: hit\n\n[3 matches limit reached. Use \
                 limit=6 for more, or narrow the search with a more specific pattern, path or \
                 glob.]",
                3,
                2,
                true
            )
        );
        // Exactly the limit is not a cut.
        assert_eq!(
            f.grep(json!({"pattern": "hit", "limit": 6})).await,
            found(
                "a.txt:1: hit\na.txt:2: hit\nb.txt:1: hit\nb.txt:2: hit\nc.txt:1: hit\nc.txt:2: hit",
                6,
                3,
                false
            )
        );
    }

    #[tokio::test]
    async fn limit_within_a_file_keeps_the_last_match_context() {
        let f = Fixture::new();
        f.write("a.txt", "hit\nx\nhit\ny\nz\nhit\nw\n");
        assert_eq!(
            f.grep(json!({"pattern": "hit", "limit": 2, "context": 1}))
                .await,
            found(
                "a.txt:1: hit\na.txt-2- x\na.txt:3: hit\na.txt-4- y\n\n[2 matches limit reached. \
                 Use limit=4 for more, or narrow the search with a more specific pattern, path \
                 or glob.]",
                2,
                1,
                true
            )
        );
    }

    #[tokio::test]
    async fn limit_holds_across_many_files() {
        let f = Fixture::new();
        for i in 0..300 {
            f.write(&format!("d{}/f{i:03}.txt", i % 7), "hit\nhit\n");
        }
        let output = f.grep(json!({"pattern": "hit", "limit": 5})).await;
        assert_eq!(
            output,
            found(
                "d0/f000.txt:1: hit\nd0/f000.txt:2: hit\nd0/f007.txt:1: hit\nd0/f007.txt:2: hit\n\
                 d0/f014.txt:1: hit\n\n[5 matches limit reached. Use limit=10 for more, or \
                 narrow the search with a more specific pattern, path or glob.]",
                5,
                3,
                true
            )
        );
    }

    #[tokio::test]
    async fn output_is_held_to_50_kb() {
        let f = Fixture::new();
        // `fNNN.txt:1: ` is 12 bytes, so each output line is 500 bytes.
        let text = format!("needle{}", "x".repeat(482));
        for i in 0..150 {
            f.write(&format!("f{i:03}.txt"), format!("{text}\n"));
        }
        // 500 bytes and a newline a line: 102 lines fit in 51,200 bytes.
        let shown: Vec<String> = (0..102).map(|i| format!("f{i:03}.txt:1: {text}")).collect();
        assert_eq!(
            f.grep(json!({"pattern": "needle", "limit": 1000})).await,
            found(
                &format!(
                    "{}\n\n[50 KB output limit reached after 102 matches. Narrow the search with \
                     a more specific pattern, path or glob.]",
                    shown.join("\n")
                ),
                102,
                102,
                true
            )
        );
    }

    #[tokio::test]
    async fn binary_files_are_skipped() {
        let f = Fixture::new();
        f.write("prog.bin", b"needle\x00\x01\x02needle\n");
        // A NUL past the first buffer the searcher reads: the matches before
        // it were already found when the file turned out to be binary.
        let mut late = b"needle\n".to_vec();
        late.extend(b"hay\n".repeat(100_000));
        late.push(0);
        f.write("late.bin", late);
        f.write("text.txt", "needle\n");
        assert_eq!(
            f.grep(json!({"pattern": "needle"})).await,
            found("text.txt:1: needle", 1, 1, false)
        );
    }

    #[tokio::test]
    async fn a_file_path_searches_just_that_file() {
        let f = Fixture::new();
        f.write("src/a.rs", "one\nneedle\n");
        f.write("src/b.rs", "needle\n");
        // Named explicitly, a file is searched even if ignored or off-glob.
        f.write(".git/HEAD", "ref\n");
        f.write(".gitignore", "src/a.rs\n");
        assert_eq!(
            f.grep(json!({"pattern": "needle", "path": "src/a.rs", "glob": "*.md"}))
                .await,
            found("a.rs:2: needle", 1, 1, false)
        );
        assert_eq!(
            f.grep(json!({"pattern": "needle", "path": "src"})).await,
            found("b.rs:1: needle", 1, 1, false)
        );
    }

    #[tokio::test]
    async fn long_lines_are_cut() {
        let f = Fixture::new();
        let long = format!("needle {}", "é".repeat(600));
        f.write("min.js", format!("{long}\nneedle short\n"));
        let kept: String = long.chars().take(500).collect();
        assert_eq!(
            f.grep(json!({"pattern": "needle"})).await,
            found(
                &format!(
                    "min.js:1: {kept}… [truncated]\nmin.js:2: needle short\n\n[Lines longer \
                     than 500 characters were cut; use read to see them whole.]"
                ),
                2,
                1,
                false
            )
        );
    }

    #[tokio::test]
    async fn nothing_found_says_so() {
        let f = Fixture::new();
        f.write("a.txt", "hay\n");
        assert_eq!(f.grep(json!({"pattern": "needle"})).await, no_matches());
    }

    #[tokio::test]
    async fn bad_paths_and_limits_are_errors() {
        let f = Fixture::new();
        assert_eq!(
            f.grep(json!({"pattern": "x", "path": "nope"})).await,
            ToolOutput::error(format!(
                "nope does not exist (looked for {}). Check the path; use ls to see which files \
                 are there.",
                f.dir.path().join("nope").display()
            ))
        );
        assert_eq!(
            f.grep(json!({"pattern": "x", "limit": 0})).await,
            ToolOutput::error("limit must be at least 1. Leave it out for the default.")
        );
        assert_eq!(
            f.grep(json!({"pattern": "x", "glob": "a[b"})).await,
            ToolOutput::error(
                "Invalid glob \"a[b\": error parsing glob 'a[b': unclosed character class; \
                 missing ']'. Use `*` for any characters in a name, `**` for any directories, \
                 `{a,b}` for alternatives."
            )
        );
    }

    #[tokio::test]
    async fn cancelled_grep_is_aborted() {
        let f = Fixture::new();
        f.write("a.txt", "needle\n");
        f.ctx.cancel.cancel();
        assert_eq!(
            f.grep(json!({"pattern": "needle"})).await,
            ToolOutput::error("Operation aborted")
        );
        // The search itself stops too, not only the wait for it.
        let request = Request::new(
            serde_json::from_value(json!({"pattern": "needle"})).unwrap(),
            f.dir.path(),
        )
        .unwrap();
        assert_eq!(
            grep(&request, &f.ctx.cancel),
            ToolOutput::error("Operation aborted")
        );
    }

    #[test]
    fn keep_trims_to_the_last_match_and_its_context() {
        let text = |number| Text {
            number,
            text: String::new(),
            cut: false,
        };
        let mut hits = Hits {
            lines: vec![
                Line::Match(text(1)),
                Line::Context(text(2)),
                Line::Context(text(3)),
                Line::Break,
                Line::Context(text(8)),
                Line::Match(text(9)),
            ],
            matches: 2,
        };
        hits.keep(1, 1);
        assert_eq!(hits.matches, 1);
        assert_eq!(hits.lines.len(), 2);
    }

    #[test]
    fn describe_shows_pattern_path_and_glob() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            GrepTool.describe(&json!({"pattern": "fn main"}), cwd),
            CallInfo {
                title: "Grep \"fn main\"".to_string(),
                kind: ToolKind::Search,
                locations: vec![Location {
                    path: PathBuf::from("/work/project"),
                    line: None,
                }],
            }
        );
        assert_eq!(
            GrepTool.describe(
                &json!({"pattern": "todo", "path": "src", "glob": "*.rs"}),
                cwd
            ),
            CallInfo {
                title: "Grep \"todo\" in src (*.rs)".to_string(),
                kind: ToolKind::Search,
                locations: vec![Location {
                    path: PathBuf::from("/work/project/src"),
                    line: None,
                }],
            }
        );
        assert_eq!(
            GrepTool
                .describe(&json!({"pattern": "x", "path": "/etc"}), cwd)
                .title,
            "Grep \"x\" in /etc"
        );
    }

    #[test]
    fn schema_uses_camel_case_names() {
        let schema = GrepTool.parameters();
        let mut names: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        names.sort();
        assert_eq!(
            names,
            [
                "context",
                "glob",
                "ignoreCase",
                "limit",
                "literal",
                "path",
                "pattern"
            ]
        );
        assert_eq!(schema["required"], json!(["pattern"]));
    }
}
