//! Tests of the edit tool: matching, tolerant matching, line endings, the
//! diffs for the model and the editor, and editing through the workspace.

use parking_lot::Mutex;
use std::collections::HashMap;
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
        let text = self.buffers.lock().get(path).cloned();
        Box::pin(
            async move { text.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound)) },
        )
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
async fn edits_the_workspace_text_not_the_disk() {
    let mut f = Fixture::new();
    let path = f.file("a.txt", "saved text\n");
    let editor = Arc::new(FakeEditor::default());
    editor
        .buffers
        .lock()
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
        *editor.writes.lock(),
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
        *EditTool.parameters(),
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
