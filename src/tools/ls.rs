//! The `ls` tool: lists one directory's entries, so the model can look around
//! without a shell.
//!
//! Unlike `find`, it shows everything that is there: dotfiles and ignored
//! files too, since the question "what is in this directory" should not depend
//! on `.gitignore`. Names are sorted case-insensitively (ties in byte order),
//! the way people read listings; directories end in `/` and symbolic links
//! show their target (`name -> target`, with `/` after the name when the link
//! leads to a directory). A listing is held to the limit and 50 KB, with a
//! note when entries were left out.

use std::path::Path;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::find::{describe_missing, parse_limit, shown_path};
use super::{CallInfo, Location, MAX_BYTES, Tool, ToolContext, ToolKind, ToolOutput};

/// Entries one call returns unless the model asks for another number.
const DEFAULT_LIMIT: usize = 500;

// Arguments of an `ls` call; the field docs are the schema the model sees.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct LsInput {
    /// Directory to list, relative to the working directory or absolute (default: the working
    /// directory).
    pub path: Option<String>,
    /// Maximum number of entries to return (default 500).
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

pub struct LsTool;

impl Tool for LsTool {
    fn name(&self) -> &str {
        "ls"
    }

    fn description(&self) -> &str {
        "List a directory's contents (not recursive), including dotfiles. Entries are sorted \
         case-insensitively, directories end in `/`, symbolic links show `name -> target`. \
         Returns at most `limit` entries (default 500) or 50 KB. Use find to search a tree by \
         name and grep to search file contents."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        super::schema_for::<LsInput>()
    }

    fn describe(&self, args: &serde_json::Value, cwd: &Path) -> CallInfo {
        let path = args.get("path").and_then(serde_json::Value::as_str);
        let resolved = super::resolve_path(cwd, path.unwrap_or("."));
        let shown = shown_path(cwd, &resolved, path).unwrap_or_else(|| ".".to_string());
        CallInfo {
            title: format!("List {shown}"),
            kind: ToolKind::Read,
            locations: vec![Location {
                path: resolved,
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
            let input: LsInput = match super::parse_args(self.name(), args) {
                Ok(input) => input,
                Err(output) => return output,
            };
            let limit = match parse_limit(input.limit, DEFAULT_LIMIT) {
                Ok(limit) => limit,
                Err(message) => return ToolOutput::error(message),
            };
            let given = input.path.unwrap_or_else(|| ".".to_string());
            let resolved = super::resolve_path(&ctx.cwd, &given);
            super::run_blocking("ls", &ctx.cancel, move |cancel| {
                list(&given, &resolved, limit, cancel)
            })
            .await
        })
    }
}

/// One directory entry as shown.
struct Entry {
    /// Lower-cased name, the primary sort key.
    folded: String,
    name: String,
    line: String,
}

fn list(given: &str, dir: &Path, limit: usize, cancel: &CancellationToken) -> ToolOutput {
    let read_dir = match std::fs::read_dir(dir) {
        Ok(read_dir) => read_dir,
        Err(e) => {
            return ToolOutput::error(match std::fs::metadata(dir) {
                Ok(metadata) if !metadata.is_dir() => {
                    format!("{given} is a file, not a directory. Use read to see its contents.")
                }
                _ => describe_missing(given, dir, &e),
            });
        }
    };

    let mut entries = Vec::new();
    for entry in read_dir {
        if cancel.is_cancelled() {
            return ToolOutput::error("Operation aborted");
        }
        // An entry that vanished or cannot be stat'ed mid-listing is left out.
        let Ok(entry) = entry else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let line = if file_type.is_symlink() {
            let path = entry.path();
            let target = std::fs::read_link(&path)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".to_string());
            // A dangling link is not a directory.
            let slash = if path.is_dir() { "/" } else { "" };
            format!("{name}{slash} -> {target}")
        } else if file_type.is_dir() {
            format!("{name}/")
        } else {
            name.clone()
        };
        entries.push(Entry {
            folded: name.to_lowercase(),
            name,
            line,
        });
    }

    if entries.is_empty() {
        return ToolOutput {
            details: json!({"count": 0, "truncated": false}),
            ..ToolOutput::ok("(empty directory)")
        };
    }
    entries.sort_unstable_by(|a, b| a.folded.cmp(&b.folded).then_with(|| a.name.cmp(&b.name)));

    let total = entries.len();
    let mut output = String::new();
    let mut count = 0;
    let mut bytes_cut = false;
    for entry in entries.iter().take(limit) {
        let separator = usize::from(!output.is_empty());
        if output.len() + separator + entry.line.len() > MAX_BYTES {
            bytes_cut = true;
            break;
        }
        if separator == 1 {
            output.push('\n');
        }
        output.push_str(&entry.line);
        count += 1;
    }
    let truncated = count < total;
    if bytes_cut {
        output.push_str(&format!(
            "\n\n[50 KB output limit reached: showing {count} of {total} entries. Use find \
             with a pattern to look for specific names.]"
        ));
    } else if truncated {
        output.push_str(&format!(
            "\n\n[{limit} entries limit reached ({total} in the directory). Use limit={} for \
             more, or find with a pattern to look for specific names.]",
            limit.saturating_mul(2)
        ));
    }
    ToolOutput {
        details: json!({"count": count, "truncated": truncated}),
        ..ToolOutput::ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::path::PathBuf;

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

        async fn ls(&self, args: serde_json::Value) -> ToolOutput {
            LsTool.execute(args, &self.ctx).await
        }
    }

    fn listing(text: &str, count: usize, truncated: bool) -> ToolOutput {
        ToolOutput {
            details: json!({"count": count, "truncated": truncated}),
            ..ToolOutput::ok(text)
        }
    }

    #[tokio::test]
    async fn entries_are_sorted_case_insensitively_with_dirs_marked_and_dotfiles_shown() {
        let f = Fixture::new();
        f.files(&[
            "b.txt",
            "README.md",
            "Cargo.toml",
            "src/lib.rs",
            ".gitignore",
            ".github/",
            "a.txt",
            "B.txt",
            "target/",
        ]);
        // Ignore rules do not hide anything from ls.
        std::fs::write(f.dir.path().join(".gitignore"), "target/\n").unwrap();
        assert_eq!(
            f.ls(json!({})).await,
            listing(
                ".github/\n.gitignore\na.txt\nB.txt\nb.txt\nCargo.toml\nREADME.md\nsrc/\ntarget/",
                9,
                false
            )
        );
        assert_eq!(
            f.ls(json!({"path": "src"})).await,
            listing("lib.rs", 1, false)
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn symlinks_show_their_target() {
        let f = Fixture::new();
        f.files(&["real/", "file.txt"]);
        std::os::unix::fs::symlink("real", f.dir.path().join("to-dir")).unwrap();
        std::os::unix::fs::symlink("file.txt", f.dir.path().join("to-file")).unwrap();
        std::os::unix::fs::symlink("missing", f.dir.path().join("dangling")).unwrap();
        assert_eq!(
            f.ls(json!({})).await,
            listing(
                "dangling -> missing\nfile.txt\nreal/\nto-dir/ -> real\nto-file -> file.txt",
                5,
                false
            )
        );
    }

    #[tokio::test]
    async fn limit_keeps_the_first_entries_and_says_how_to_get_more() {
        let f = Fixture::new();
        f.files(&["d", "c/", "b", "a"]);
        assert_eq!(
            f.ls(json!({"limit": 3})).await,
            listing(
                "a\nb\nc/\n\n[3 entries limit reached (4 in the directory). Use limit=6 for \
                 more, or find with a pattern to look for specific names.]",
                3,
                true
            )
        );
    }

    #[tokio::test]
    async fn output_is_held_to_50_kb() {
        let f = Fixture::new();
        let names: Vec<String> = (0..400)
            .map(|i| format!("{i:03}-{}", "n".repeat(196)))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        f.files(&refs);
        // Names of 200 bytes and a newline each: 254 fit in 51,200 bytes.
        let shown = names[..254].join("\n");
        assert_eq!(
            f.ls(json!({})).await,
            listing(
                &format!(
                    "{shown}\n\n[50 KB output limit reached: showing 254 of 400 entries. Use \
                     find with a pattern to look for specific names.]"
                ),
                254,
                true
            )
        );
    }

    #[tokio::test]
    async fn empty_directory_says_so() {
        let f = Fixture::new();
        f.files(&["empty/"]);
        assert_eq!(
            f.ls(json!({"path": "empty"})).await,
            listing("(empty directory)", 0, false)
        );
    }

    #[tokio::test]
    async fn files_missing_paths_and_bad_limits_are_errors() {
        let f = Fixture::new();
        f.files(&["a.txt"]);
        assert_eq!(
            f.ls(json!({"path": "a.txt"})).await,
            ToolOutput::error("a.txt is a file, not a directory. Use read to see its contents.")
        );
        assert_eq!(
            f.ls(json!({"path": "nope"})).await,
            ToolOutput::error(format!(
                "nope does not exist (looked for {}). Check the path; use ls to see which files \
                 are there.",
                f.dir.path().join("nope").display()
            ))
        );
        assert_eq!(
            f.ls(json!({"limit": 0})).await,
            ToolOutput::error("limit must be at least 1. Leave it out for the default.")
        );
    }

    #[tokio::test]
    async fn cancelled_listing_is_aborted() {
        let f = Fixture::new();
        f.files(&["a.txt"]);
        f.ctx.cancel.cancel();
        assert_eq!(
            f.ls(json!({})).await,
            ToolOutput::error("Operation aborted")
        );
        assert_eq!(
            list(".", f.dir.path(), 10, &f.ctx.cancel),
            ToolOutput::error("Operation aborted")
        );
    }

    #[test]
    fn describe_names_the_directory() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            LsTool.describe(&json!({}), cwd),
            CallInfo {
                title: "List .".to_string(),
                kind: ToolKind::Read,
                locations: vec![Location {
                    path: PathBuf::from("/work/project"),
                    line: None,
                }],
            }
        );
        assert_eq!(
            LsTool.describe(&json!({"path": "src/tools"}), cwd),
            CallInfo {
                title: "List src/tools".to_string(),
                kind: ToolKind::Read,
                locations: vec![Location {
                    path: PathBuf::from("/work/project/src/tools"),
                    line: None,
                }],
            }
        );
    }
}
