//! The `find` tool: lists the files and directories under a directory whose
//! path matches a glob, the way `fd --glob --hidden` does, without running it.
//!
//! The walk is ripgrep's own (`ignore`): `.gitignore`, `.ignore` and the
//! global git excludes are honoured, hidden files are included, and `.git` is
//! never entered, so what the model finds is what it would find in the
//! project's source. A glob without `/` matches a name at any depth (`*.rs`);
//! one with `/` matches the whole path relative to the searched directory
//! (`src/**/*.rs`). Results come back sorted by path, whatever order the
//! parallel walk produced them in, so the same tree gives the same answer, and
//! they are held to the limit and 50 KB with a note saying how to narrow.
//!
//! This module also owns the glob and path-order rules `grep` shares.

use parking_lot::Mutex;
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{CallInfo, Location, MAX_BYTES, Tool, ToolContext, ToolKind, ToolOutput};

/// Results one call returns unless the model asks for another number.
const DEFAULT_LIMIT: usize = 1_000;

// Arguments of a `find` call; the field docs are the schema the model sees.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FindInput {
    /// Glob to match, e.g. `*.rs`, `Cargo.toml` or `src/**/*.ts`. A glob without `/` matches
    /// file and directory names at any depth; one with `/` matches the path relative to the
    /// searched directory.
    pub pattern: String,
    /// Directory to search, relative to the working directory or absolute (default: the
    /// working directory).
    pub path: Option<String>,
    /// Maximum number of results (default 1000).
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

pub struct FindTool;

impl Tool for FindTool {
    fn name(&self) -> &str {
        "find"
    }

    fn description(&self) -> &str {
        "Find files and directories by glob pattern, e.g. `*.rs`, `Cargo.toml` or \
         `src/**/*.ts`. A pattern without `/` matches names at any depth; one with `/` matches \
         the path relative to the searched directory. Searches the working directory or `path` \
         recursively, skipping what .gitignore/.ignore exclude and the .git directory; hidden \
         files are included. Returns one path per line, relative to the searched directory and \
         sorted, directories with a trailing `/`; at most `limit` results (default 1000) or \
         50 KB."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        super::schema_for::<FindInput>()
    }

    fn describe(&self, args: &serde_json::Value, cwd: &Path) -> CallInfo {
        let pattern = args
            .get("pattern")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let path = args.get("path").and_then(serde_json::Value::as_str);
        let root = super::resolve_path(cwd, path.unwrap_or("."));
        let title = match shown_path(cwd, &root, path) {
            Some(shown) => format!("Find {pattern} in {shown}"),
            None => format!("Find {pattern}"),
        };
        CallInfo {
            title: title.trim_end().to_string(),
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
            let input: FindInput = match super::parse_args(self.name(), args) {
                Ok(input) => input,
                Err(output) => return output,
            };
            let request = match Request::new(input, &ctx.cwd) {
                Ok(request) => request,
                Err(message) => return ToolOutput::error(message),
            };
            super::run_blocking("find", &ctx.cancel, move |cancel| find(&request, cancel)).await
        })
    }
}

/// A validated call.
struct Request {
    given: String,
    root: PathBuf,
    pattern: String,
    glob: PathGlob,
    limit: usize,
}

impl Request {
    fn new(input: FindInput, cwd: &Path) -> Result<Self, String> {
        let limit = parse_limit(input.limit, DEFAULT_LIMIT)?;
        let glob = PathGlob::new(&input.pattern).map_err(|e| {
            format!(
                "Invalid glob pattern \"{}\": {e}. Use `*` for any characters in a name, `**` \
                 for any directories, `{{a,b}}` for alternatives.",
                input.pattern
            )
        })?;
        let given = input.path.unwrap_or_else(|| ".".to_string());
        let root = super::resolve_path(cwd, &given);
        Ok(Self {
            given,
            root,
            pattern: input.pattern,
            glob,
            limit,
        })
    }
}

fn find(request: &Request, cancel: &CancellationToken) -> ToolOutput {
    match std::fs::metadata(&request.root) {
        Ok(metadata) if metadata.is_dir() => {}
        Ok(_) => {
            return ToolOutput::error(format!(
                "{} is a file, not a directory; find searches directories. Use read to see the \
                 file.",
                request.given
            ));
        }
        Err(e) => return ToolOutput::error(describe_missing(&request.given, &request.root, &e)),
    }

    let shared = Mutex::new(Found::default());
    let mut builder = CollectorBuilder {
        request,
        cancel,
        shared: &shared,
    };
    walker(&request.root).build_parallel().visit(&mut builder);
    if cancel.is_cancelled() {
        return ToolOutput::error("Operation aborted");
    }
    let found = shared.into_inner();
    render(request, found)
}

/// What the walk found: the first `limit + 1` paths in path order, and how
/// many matched in all.
#[derive(Default)]
struct Found {
    paths: BTreeSet<RelPath>,
    total: usize,
}

impl Found {
    /// Adds `path`, keeping only the `cap` first paths.
    fn add(&mut self, path: RelPath, cap: usize) {
        self.paths.insert(path);
        if self.paths.len() > cap {
            self.paths.pop_last();
        }
    }
}

struct CollectorBuilder<'s> {
    request: &'s Request,
    cancel: &'s CancellationToken,
    shared: &'s Mutex<Found>,
}

impl<'s> ParallelVisitorBuilder<'s> for CollectorBuilder<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Collector {
            request: self.request,
            cancel: self.cancel,
            shared: self.shared,
            local: Found::default(),
        })
    }
}

/// One walker thread's share of the results; merged when the thread ends.
struct Collector<'s> {
    request: &'s Request,
    cancel: &'s CancellationToken,
    shared: &'s Mutex<Found>,
    local: Found,
}

impl ParallelVisitor for Collector<'_> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        if self.cancel.is_cancelled() {
            return WalkState::Quit;
        }
        // Unreadable directories are skipped, as fd does.
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        if entry.depth() == 0 {
            return WalkState::Continue;
        }
        let relative = relative_slash(&self.request.root, entry.path());
        if self.request.glob.is_match(&relative) {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            self.local.total += 1;
            // One more than the limit, so the render knows something was cut.
            self.local.add(
                RelPath::new(relative, is_dir),
                self.request.limit.saturating_add(1),
            );
        }
        WalkState::Continue
    }
}

impl Drop for Collector<'_> {
    fn drop(&mut self) {
        let local = std::mem::take(&mut self.local);
        let mut shared = self.shared.lock();
        shared.total += local.total;
        let cap = self.request.limit.saturating_add(1);
        for path in local.paths {
            shared.add(path, cap);
        }
    }
}

fn render(request: &Request, found: Found) -> ToolOutput {
    if found.total == 0 {
        return ToolOutput {
            details: json!({"count": 0, "truncated": false}),
            ..ToolOutput::ok(if request.given == "." {
                format!("No files found matching {}", request.pattern)
            } else {
                format!(
                    "No files found matching {} in {}",
                    request.pattern, request.given
                )
            })
        };
    }
    let mut output = String::new();
    let mut count = 0;
    let mut bytes_cut = false;
    for path in found.paths.iter().take(request.limit) {
        let line = path.display();
        let separator = usize::from(!output.is_empty());
        if output.len() + separator + line.len() > MAX_BYTES {
            bytes_cut = true;
            break;
        }
        if separator == 1 {
            output.push('\n');
        }
        output.push_str(&line);
        count += 1;
    }
    let truncated = count < found.total;
    if bytes_cut {
        output.push_str(&format!(
            "\n\n[50 KB output limit reached: showing {count} of {} results. Narrow the search \
             with a more specific pattern or path.]",
            found.total
        ));
    } else if truncated {
        output.push_str(&format!(
            "\n\n[{limit} results limit reached ({total} matched). Use limit={more} for more, or \
             narrow the search with a more specific pattern or path.]",
            limit = request.limit,
            total = found.total,
            more = request.limit.saturating_mul(2),
        ));
    }
    ToolOutput {
        details: json!({"count": count, "truncated": truncated}),
        ..ToolOutput::ok(output)
    }
}

/// The walk `find` and `grep` share: ripgrep's ignore rules with hidden
/// files included (like `rg --hidden`), never entering `.git`.
pub(super) fn walker(root: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// Reads a `limit` argument: absent is `default`, zero is refused.
pub(super) fn parse_limit(limit: Option<u64>, default: usize) -> Result<usize, String> {
    match limit {
        None => Ok(default),
        Some(0) => Err("limit must be at least 1. Leave it out for the default.".to_string()),
        Some(n) => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
    }
}

/// The error text for a search path that cannot be opened.
pub(super) fn describe_missing(given: &str, resolved: &Path, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            let looked = if Path::new(given) == resolved {
                String::new()
            } else {
                format!(" (looked for {})", resolved.display())
            };
            format!(
                "{given} does not exist{looked}. Check the path; use ls to see which files are \
                 there."
            )
        }
        std::io::ErrorKind::PermissionDenied => format!(
            "Permission denied reading {given}. It is not readable by this user; search \
             somewhere else or ask the user to change its permissions."
        ),
        _ => format!("Could not read {given}: {e}"),
    }
}

/// How a search path appears in a call's title: relative to the cwd when
/// inside it, as given otherwise; `None` for the cwd itself.
pub(super) fn shown_path(cwd: &Path, resolved: &Path, given: Option<&str>) -> Option<String> {
    match resolved.strip_prefix(cwd) {
        Ok(relative) if relative.as_os_str().is_empty() => None,
        Ok(relative) => Some(relative_slash(Path::new(""), relative)),
        Err(_) => given.map(str::to_string),
    }
}

/// `path` relative to `root` with `/` between components, or the whole path
/// when it is not under `root`.
pub(super) fn relative_slash(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(relative) => {
            let parts: Vec<_> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect();
            parts.join("/")
        }
        Err(_) => path.display().to_string(),
    }
}

/// A glob as `find` and `grep` read it: without `/` it matches the last
/// component of a path (so `*.rs` finds files at any depth, as `fd --glob`
/// does); with `/` it matches the whole relative path, and `*` stays within
/// one component while `**` spans any number.
pub(super) struct PathGlob {
    matcher: GlobMatcher,
    whole_path: bool,
}

impl PathGlob {
    pub(super) fn new(pattern: &str) -> Result<Self, globset::Error> {
        // `./src/*.rs` and `/src/*.rs` mean the same as `src/*.rs` here.
        let pattern = pattern.trim_start_matches("./").trim_start_matches('/');
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()?
            .compile_matcher();
        Ok(Self {
            matcher,
            whole_path: pattern.contains('/'),
        })
    }

    /// Whether `relative` (with `/` separators) matches.
    pub(super) fn is_match(&self, relative: &str) -> bool {
        if self.whole_path {
            self.matcher.is_match(relative)
        } else {
            let name = relative.rsplit('/').next().unwrap_or(relative);
            self.matcher.is_match(name)
        }
    }
}

/// A relative path (with `/` separators) ordered component by component, so
/// a directory's contents follow it directly: `a`, `a/b`, `a.txt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RelPath {
    path: String,
    is_dir: bool,
}

impl RelPath {
    pub(super) fn new(path: String, is_dir: bool) -> Self {
        Self { path, is_dir }
    }

    pub(super) fn as_str(&self) -> &str {
        &self.path
    }

    /// The path as shown: directories end in `/`.
    fn display(&self) -> String {
        if self.is_dir {
            format!("{}/", self.path)
        } else {
            self.path.clone()
        }
    }
}

impl Ord for RelPath {
    fn cmp(&self, other: &Self) -> Ordering {
        self.path
            .split('/')
            .cmp(other.path.split('/'))
            .then(self.is_dir.cmp(&other.is_dir))
    }
}

impl PartialOrd for RelPath {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
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

        /// Creates files (with their directories); a name ending in `/` is an
        /// empty directory.
        fn files(&self, names: &[&str]) {
            for name in names {
                let path = self.dir.path().join(name);
                if name.ends_with('/') {
                    std::fs::create_dir_all(&path).unwrap();
                } else {
                    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                    std::fs::write(&path, "x\n").unwrap();
                }
            }
        }

        async fn find(&self, args: serde_json::Value) -> ToolOutput {
            FindTool.execute(args, &self.ctx).await
        }
    }

    fn listing(text: &str, count: usize, truncated: bool) -> ToolOutput {
        ToolOutput {
            details: json!({"count": count, "truncated": truncated}),
            ..ToolOutput::ok(text)
        }
    }

    #[tokio::test]
    async fn name_glob_matches_at_any_depth_sorted_by_path() {
        let f = Fixture::new();
        f.files(&[
            "main.rs",
            "src/lib.rs",
            "src/tools/grep.rs",
            "src/tools.rs",
            "src-old/x.rs",
            "README.md",
            "src/notes.txt",
        ]);
        assert_eq!(
            f.find(json!({"pattern": "*.rs"})).await,
            listing(
                "main.rs\nsrc/lib.rs\nsrc/tools/grep.rs\nsrc/tools.rs\nsrc-old/x.rs",
                5,
                false
            )
        );
    }

    #[tokio::test]
    async fn path_glob_matches_the_relative_path() {
        let f = Fixture::new();
        f.files(&["a.rs", "src/b.rs", "src/deep/c.rs", "other/src/d.rs"]);
        assert_eq!(
            f.find(json!({"pattern": "src/*.rs"})).await,
            listing("src/b.rs", 1, false)
        );
        assert_eq!(
            f.find(json!({"pattern": "src/**/*.rs"})).await,
            listing("src/b.rs\nsrc/deep/c.rs", 2, false)
        );
        assert_eq!(
            f.find(json!({"pattern": "**/src/*.rs"})).await,
            listing("other/src/d.rs\nsrc/b.rs", 2, false)
        );
    }

    #[tokio::test]
    async fn paths_are_relative_to_the_given_directory() {
        let f = Fixture::new();
        f.files(&["a.toml", "sub/b.toml", "sub/inner/c.toml"]);
        assert_eq!(
            f.find(json!({"pattern": "*.toml", "path": "sub"})).await,
            listing("b.toml\ninner/c.toml", 2, false)
        );
    }

    #[tokio::test]
    async fn gitignored_files_are_left_out_hidden_ones_kept_and_git_skipped() {
        let f = Fixture::new();
        f.files(&[
            ".git/config",
            ".git/HEAD.rs",
            ".gitignore",
            "target/debug/build.rs",
            "generated.rs",
            "kept.rs",
            ".hidden/secret.rs",
        ]);
        std::fs::write(f.dir.path().join(".gitignore"), "target/\ngenerated.rs\n").unwrap();
        assert_eq!(
            f.find(json!({"pattern": "*.rs"})).await,
            listing(".hidden/secret.rs\nkept.rs", 2, false)
        );
    }

    #[tokio::test]
    async fn directories_are_marked_with_a_slash() {
        let f = Fixture::new();
        f.files(&["tests/", "src/tests/unit.rs", "tests.rs"]);
        assert_eq!(
            f.find(json!({"pattern": "tests*"})).await,
            listing("src/tests/\ntests/\ntests.rs", 3, false)
        );
    }

    #[tokio::test]
    async fn limit_keeps_the_first_paths_and_says_how_to_get_more() {
        let f = Fixture::new();
        f.files(&["e.txt", "d.txt", "c.txt", "b.txt", "a.txt"]);
        assert_eq!(
            f.find(json!({"pattern": "*.txt", "limit": 2})).await,
            listing(
                "a.txt\nb.txt\n\n[2 results limit reached (5 matched). Use limit=4 for more, or \
                 narrow the search with a more specific pattern or path.]",
                2,
                true
            )
        );
    }

    #[tokio::test]
    async fn output_is_held_to_50_kb() {
        let f = Fixture::new();
        let names: Vec<String> = (0..400)
            .map(|i| format!("{i:03}-{}.txt", "n".repeat(150)))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        f.files(&refs);
        let output = f.find(json!({"pattern": "*.txt"})).await;
        // Names of 158 bytes and a newline each: 322 fit in 51,200 bytes.
        let shown = names[..322].join("\n");
        assert_eq!(
            output,
            listing(
                &format!(
                    "{shown}\n\n[50 KB output limit reached: showing 322 of 400 results. \
                     Narrow the search with a more specific pattern or path.]"
                ),
                322,
                true
            )
        );
    }

    #[tokio::test]
    async fn nothing_found_says_so() {
        let f = Fixture::new();
        f.files(&["a.txt"]);
        assert_eq!(
            f.find(json!({"pattern": "*.rs"})).await,
            listing("No files found matching *.rs", 0, false)
        );
    }

    #[tokio::test]
    async fn bad_inputs_are_explained() {
        let f = Fixture::new();
        f.files(&["a.txt"]);
        assert_eq!(
            f.find(json!({"pattern": "a[", "limit": 3})).await,
            ToolOutput::error(
                "Invalid glob pattern \"a[\": error parsing glob 'a[': unclosed character class; \
                 missing ']'. Use `*` for any characters in a name, `**` for any directories, \
                 `{a,b}` for alternatives."
            )
        );
        assert_eq!(
            f.find(json!({"pattern": "*", "limit": 0})).await,
            ToolOutput::error("limit must be at least 1. Leave it out for the default.")
        );
        assert_eq!(
            f.find(json!({"pattern": "*", "path": "a.txt"})).await,
            ToolOutput::error(
                "a.txt is a file, not a directory; find searches directories. Use read to see \
                 the file."
            )
        );
        assert_eq!(
            f.find(json!({"pattern": "*", "path": "nope"})).await,
            ToolOutput::error(format!(
                "nope does not exist (looked for {}). Check the path; use ls to see which files \
                 are there.",
                f.dir.path().join("nope").display()
            ))
        );
    }

    #[tokio::test]
    async fn cancelled_find_is_aborted() {
        let f = Fixture::new();
        f.files(&["a.txt"]);
        f.ctx.cancel.cancel();
        assert_eq!(
            f.find(json!({"pattern": "*"})).await,
            ToolOutput::error("Operation aborted")
        );
        // The walk itself stops too, not only the wait for it.
        let request = Request::new(
            FindInput {
                pattern: "*".to_string(),
                path: None,
                limit: None,
            },
            f.dir.path(),
        )
        .unwrap();
        assert_eq!(
            find(&request, &f.ctx.cancel),
            ToolOutput::error("Operation aborted")
        );
    }

    #[test]
    fn describe_names_the_pattern_and_the_directory() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            FindTool.describe(&json!({"pattern": "*.rs"}), cwd),
            CallInfo {
                title: "Find *.rs".to_string(),
                kind: ToolKind::Search,
                locations: vec![Location {
                    path: PathBuf::from("/work/project"),
                    line: None,
                }],
            }
        );
        assert_eq!(
            FindTool.describe(&json!({"pattern": "*.rs", "path": "../other"}), cwd),
            CallInfo {
                title: "Find *.rs in ../other".to_string(),
                kind: ToolKind::Search,
                locations: vec![Location {
                    path: PathBuf::from("/work/other"),
                    line: None,
                }],
            }
        );
        assert_eq!(
            FindTool
                .describe(&json!({"pattern": "*.rs", "path": "src"}), cwd)
                .title,
            "Find *.rs in src"
        );
    }

    #[test]
    fn paths_order_by_component() {
        let mut paths = [
            RelPath::new("a.txt".into(), false),
            RelPath::new("a/b".into(), false),
            RelPath::new("a".into(), true),
            RelPath::new("a-b".into(), false),
        ];
        paths.sort();
        let shown: Vec<String> = paths.iter().map(RelPath::display).collect();
        assert_eq!(shown, ["a/", "a/b", "a-b", "a.txt"]);
    }
}
