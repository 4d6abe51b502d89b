//! The `write` tool: creates a file, or replaces one whole, with the text the
//! model gives.
//!
//! Text goes through the session's workspace, so in an editor the new content
//! lands in the editor's buffer and review UI rather than behind its back; the
//! previous content is read the same way (it may be an unsaved buffer) so the
//! editor can show the change as a diff. Parent directories are created on the
//! local disk first, because neither the disk nor ACP's `fs/write_text_file`
//! creates them.

use std::path::Path;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{CallInfo, Display, Location, Tool, ToolContext, ToolKind, ToolOutput};

// Arguments of a `write` call; the field docs are the schema the model sees.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteInput {
    /// Path to the file to write, relative to the working directory or absolute.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

pub struct WriteTool;

impl Tool for WriteTool {
    fn name(&self) -> &str {
        "write"
    }

    fn writes_only_its_locations(&self) -> bool {
        true
    }

    fn description(&self) -> &str {
        "Write content to a file. Creates the file if it does not exist and overwrites it if it \
         does, creating parent directories as needed. Use it for new files and complete \
         rewrites; to change part of an existing file, use edit. Relative paths are resolved \
         against the working directory."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        super::schema_for::<WriteInput>()
    }

    fn describe(&self, args: &serde_json::Value, cwd: &Path) -> CallInfo {
        describe_file_call("Write", args, cwd)
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
            let Ok(input) = serde_json::from_value::<WriteInput>(args.clone()) else {
                return Vec::new();
            };
            let resolved = super::resolve_path(&ctx.cwd, &input.path);
            if is_dir(&resolved).await {
                return Vec::new();
            }
            let old_text = read_existing(ctx, &resolved).await;
            vec![Display::Diff {
                path: resolved,
                old_text,
                new_text: input.content,
            }]
        })
    }

    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: WriteInput = match super::parse_args(self.name(), args) {
                Ok(input) => input,
                Err(output) => return output,
            };
            write(input, ctx).await
        })
    }
}

async fn write(input: WriteInput, ctx: &ToolContext) -> ToolOutput {
    let given = input.path;
    if given.trim().is_empty() {
        // An empty path resolves to the working directory itself, which
        // would only produce a puzzling "is a directory".
        return ToolOutput::error(
            "write needs `path`: the file to create or overwrite, e.g. \"src/main.rs\"; \
             the path given was empty.",
        );
    }
    let resolved = super::resolve_path(&ctx.cwd, &given);
    if is_dir(&resolved).await {
        return ToolOutput::error(format!(
            "{given} is a directory; write needs the path of a file to create or overwrite."
        ));
    }
    let prepared = async {
        if let Some(parent) = resolved.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|e| {
                ToolOutput::error(format!(
                    "Could not create the directory {} for {given}: {e}",
                    parent.display()
                ))
            })?;
        }
        Ok(read_existing(ctx, &resolved).await)
    };
    let old_text = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => return ToolOutput::error("Operation aborted"),
        prepared = prepared => match prepared {
            Ok(old_text) => old_text,
            Err(output) => return output,
        },
    };
    // Once started, the write runs to the end: a half-applied cancel would
    // leave the user guessing what the file holds.
    if let Err(e) = ctx.workspace.write_text(&resolved, &input.content).await {
        return ToolOutput::error(format!("Could not write {given}: {e}"));
    }
    let bytes = input.content.len();
    ToolOutput {
        details: json!({
            "path": resolved.display().to_string(),
            "bytes": bytes,
            "created": old_text.is_none(),
        }),
        display: vec![Display::Diff {
            path: resolved,
            old_text,
            new_text: input.content,
        }],
        ..ToolOutput::ok(format!("Successfully wrote {bytes} bytes to {given}"))
    }
}

/// The current text of a file the workspace has, or `None` when it is new
/// (or not text, in which case there is nothing to show a diff against).
async fn read_existing(ctx: &ToolContext, path: &Path) -> Option<String> {
    match ctx.workspace.read_text(path).await {
        Ok(text) => Some(text),
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::debug!(path = %path.display(), error = %e, "write: no previous text to diff against");
            }
            None
        }
    }
}

async fn is_dir(path: &Path) -> bool {
    tokio::fs::metadata(path).await.is_ok_and(|m| m.is_dir())
}

/// Title and location of a call that changes one file (`write`, `edit`):
/// `<verb> <path relative to cwd>`.
pub(crate) fn describe_file_call(verb: &str, args: &serde_json::Value, cwd: &Path) -> CallInfo {
    let Some(path) = args.get("path").and_then(serde_json::Value::as_str) else {
        return CallInfo {
            title: verb.to_string(),
            kind: ToolKind::Edit,
            locations: Vec::new(),
        };
    };
    let resolved = super::resolve_path(cwd, path);
    CallInfo {
        title: format!("{verb} {}", shown_path(&resolved, cwd, path)),
        kind: ToolKind::Edit,
        locations: vec![Location {
            path: resolved,
            line: None,
        }],
    }
}

/// How a path is named to a person: relative to the cwd when inside it,
/// else as the model gave it.
pub(crate) fn shown_path(resolved: &Path, cwd: &Path, given: &str) -> String {
    match resolved.strip_prefix(cwd) {
        Ok(relative) if !relative.as_os_str().is_empty() => relative.display().to_string(),
        _ => given.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::Arc;

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

        async fn write(&self, args: serde_json::Value) -> ToolOutput {
            WriteTool.execute(args, &self.ctx).await
        }
    }

    fn written(text: &str, path: &Path, old_text: Option<&str>, new_text: &str) -> ToolOutput {
        ToolOutput {
            details: json!({
                "path": path.display().to_string(),
                "bytes": new_text.len(),
                "created": old_text.is_none(),
            }),
            display: vec![Display::Diff {
                path: path.to_path_buf(),
                old_text: old_text.map(str::to_string),
                new_text: new_text.to_string(),
            }],
            ..ToolOutput::ok(text)
        }
    }

    #[tokio::test]
    async fn creates_a_new_file_in_new_nested_directories() {
        let f = Fixture::new();
        let path = f.path("src/deep/er/new.rs");
        assert_eq!(
            f.write(json!({"path": "src/deep/er/new.rs", "content": "fn main() {}\n"}))
                .await,
            written(
                "Successfully wrote 13 bytes to src/deep/er/new.rs",
                &path,
                None,
                "fn main() {}\n"
            )
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "fn main() {}\n");
    }

    #[tokio::test]
    async fn overwrites_an_existing_file_and_shows_the_old_text() {
        let f = Fixture::new();
        let path = f.path("a.txt");
        std::fs::write(&path, "old\n").unwrap();
        assert_eq!(
            f.write(json!({"path": path.display().to_string(), "content": "né\n"}))
                .await,
            written(
                &format!("Successfully wrote 4 bytes to {}", path.display()),
                &path,
                Some("old\n"),
                "né\n"
            )
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "né\n");
    }

    #[tokio::test]
    async fn preview_shows_the_diff_without_writing() {
        let f = Fixture::new();
        let path = f.path("a.txt");
        std::fs::write(&path, "old\n").unwrap();
        let args = json!({"path": "a.txt", "content": "new\n"});
        assert_eq!(
            WriteTool.preview(&args, &f.ctx).await,
            vec![Display::Diff {
                path: path.clone(),
                old_text: Some("old\n".to_string()),
                new_text: "new\n".to_string(),
            }]
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");

        let args = json!({"path": "new/b.txt", "content": "b"});
        assert_eq!(
            WriteTool.preview(&args, &f.ctx).await,
            vec![Display::Diff {
                path: f.path("new/b.txt"),
                old_text: None,
                new_text: "b".to_string(),
            }]
        );
        assert!(!f.path("new").exists());
    }

    #[tokio::test]
    async fn an_empty_path_is_an_error_that_says_so() {
        let f = Fixture::new();
        for path in ["", "  "] {
            assert_eq!(
                WriteTool
                    .execute(json!({"path": path, "content": "x"}), &f.ctx)
                    .await,
                ToolOutput::error(
                    "write needs `path`: the file to create or overwrite, e.g. \"src/main.rs\"; \
                     the path given was empty."
                )
            );
        }
    }

    #[tokio::test]
    async fn a_directory_path_is_an_error() {
        let f = Fixture::new();
        std::fs::create_dir(f.path("src")).unwrap();
        assert_eq!(
            f.write(json!({"path": "src", "content": "x"})).await,
            ToolOutput::error(
                "src is a directory; write needs the path of a file to create or overwrite."
            )
        );
        assert_eq!(
            WriteTool
                .preview(&json!({"path": "src", "content": "x"}), &f.ctx)
                .await,
            Vec::new()
        );
    }

    /// An editor: serves its buffers, records writes, never touches the disk.
    #[derive(Default)]
    struct FakeEditor {
        buffers: Mutex<HashMap<PathBuf, String>>,
        writes: Mutex<Vec<(PathBuf, String)>>,
    }

    impl Workspace for FakeEditor {
        fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, std::io::Result<String>> {
            let text = self.buffers.lock().get(path).cloned();
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
                .push((path.to_path_buf(), text.to_string()));
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn reads_and_writes_through_the_workspace() {
        let mut f = Fixture::new();
        let path = f.path("a.txt");
        std::fs::write(&path, "on disk\n").unwrap();
        let editor = Arc::new(FakeEditor::default());
        editor
            .buffers
            .lock()
            .insert(path.clone(), "unsaved buffer\n".to_string());
        f.ctx.workspace = editor.clone();
        assert_eq!(
            f.write(json!({"path": "a.txt", "content": "new\n"})).await,
            written(
                "Successfully wrote 4 bytes to a.txt",
                &path,
                Some("unsaved buffer\n"),
                "new\n"
            )
        );
        assert_eq!(
            *editor.writes.lock(),
            vec![(path.clone(), "new\n".to_string())]
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "on disk\n");
    }

    #[test]
    fn describe_shows_the_path_relative_to_cwd() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            WriteTool.describe(&json!({"path": "src/a.rs", "content": ""}), cwd),
            CallInfo {
                title: "Write src/a.rs".to_string(),
                kind: ToolKind::Edit,
                locations: vec![Location {
                    path: PathBuf::from("/work/project/src/a.rs"),
                    line: None,
                }],
            }
        );
    }

    #[test]
    fn schema_requires_path_and_content() {
        assert_eq!(
            *WriteTool.parameters(),
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path to the file to write, relative to the working directory or absolute."
                    },
                    "content": {
                        "type": "string",
                        "description": "The complete new content of the file."
                    }
                },
                "required": ["path", "content"]
            })
        );
    }
}
