//! The coding tools and the trait the agent loop runs them through.
//!
//! A tool declares its model-facing JSON schema (generated from a typed input
//! struct, so doc comments become descriptions), how a call looks to a person
//! (title, kind, locations), whether a call needs the user's permission, and
//! how to run. Failures the model should see are results with `is_error`.

pub mod ask_user;
pub mod bash;
pub mod edit;
pub mod find;
pub mod globs;
pub mod grep;
pub mod jobs;
pub mod ls;
pub mod process;
pub mod read;
pub mod rules;
pub mod sandbox;
pub mod shell;
pub mod todo;
pub mod write;

use std::any::TypeId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::llm::Content;

/// Most lines of output one tool result shows (`read`, `bash`, `process`).
pub const MAX_LINES: usize = 2_000;
/// Most bytes of output one tool result shows (every tool that lists or
/// prints: `read`, `bash`, `process`, `grep`, `find`, `ls`).
pub const MAX_BYTES: usize = 50 * 1024;

/// What a tool call does, in the editor's vocabulary (ACP `ToolKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Think,
    Fetch,
    Other,
}

/// A file a tool call touches, for the editor to follow along.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Location {
    pub path: PathBuf,
    /// 1-based line.
    pub line: Option<u32>,
}

/// How a call is shown to a person.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallInfo {
    pub title: String,
    pub kind: ToolKind,
    pub locations: Vec<Location>,
}

/// What the editor shows for a call, besides the text the model gets.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Display {
    Text(String),
    /// A file change; `old_text` is `None` for a new file.
    Diff {
        path: PathBuf,
        old_text: Option<String>,
        new_text: String,
    },
    /// A terminal the editor created (ACP `terminal/create`), shown live.
    Terminal(String),
    /// The session's checklist as the `todo` tool wrote it: the editor
    /// shows it as its plan (an ACP `plan` update) besides the call.
    Plan(Vec<todo::TodoItem>),
    /// The output of a command pincer runs itself, while it runs: only
    /// ever progress, never a result.
    Live(LiveOutput),
}

/// What a command pincer runs itself has printed so far, cleaned as its
/// result is (no escape sequences, redraws collapsed, valid UTF-8), in the
/// two shapes editors show live output in.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LiveOutput {
    /// The end of the output so far, for a view that replaces what it
    /// showed (tool call content). Bounded.
    pub tail: String,
    /// The whole lines printed since the previous report (and, on the last
    /// report, the unfinished last line), for a view that appends (a
    /// terminal). Bounded: what does not fit is left out with a note.
    pub appended: String,
    /// How the command ended; set on the last report only.
    pub exit: Option<TerminalExit>,
}

/// What a call returns to the model (and, as `details`, to the editor).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Content>,
    pub is_error: bool,
    /// Structured output for the editor (`rawOutput`); not sent to the model.
    pub details: serde_json::Value,
    /// What the editor shows in place of `content` (a diff, a terminal);
    /// empty means `content` itself.
    pub display: Vec<Display>,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            content: vec![Content::text(text)],
            is_error: false,
            details: serde_json::Value::Null,
            display: Vec::new(),
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            content: vec![Content::text(text)],
            is_error: true,
            details: serde_json::Value::Null,
            display: Vec::new(),
        }
    }

    /// The text parts, joined by newlines (images left out).
    pub fn text(&self) -> String {
        text_of(&self.content)
    }

    /// With `note` after what it says, for the model and the editor.
    pub fn with_note(mut self, note: &str) -> Self {
        self.content.push(Content::text(note));
        if !self.display.is_empty() {
            self.display.push(Display::Text(note.to_string()));
        }
        self
    }
}

/// The text parts of a tool's output, one after another on their own lines.
pub fn text_of(content: &[Content]) -> String {
    let parts: Vec<&str> = content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text.as_str()),
            Content::Image { .. } => None,
        })
        .collect();
    parts.join("\n")
}

/// Reports what a running call has produced so far (it replaces what the
/// editor shows for the call).
pub type Progress = Arc<dyn Fn(Vec<Display>) + Send + Sync>;

/// Where files are read and written: the local disk, or the editor (which
/// sees unsaved buffers and puts edits into its review UI).
pub trait Workspace: Send + Sync {
    /// The text of a file as the user sees it.
    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, std::io::Result<String>>;
    /// Replaces a file's text, creating the file (its directory exists).
    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        text: &'a str,
    ) -> BoxFuture<'a, std::io::Result<()>>;
    /// Whether `read_text` asks the editor, which may differ from the disk.
    fn reads_from_editor(&self) -> bool {
        false
    }
}

/// Files on the local disk.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalWorkspace;

impl Workspace for LocalWorkspace {
    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, std::io::Result<String>> {
        Box::pin(tokio::fs::read_to_string(path))
    }

    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        text: &'a str,
    ) -> BoxFuture<'a, std::io::Result<()>> {
        Box::pin(tokio::fs::write(path, text))
    }
}

/// A command to run in an editor terminal (ACP `terminal/create`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalCommand {
    pub command: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// Bytes of output the editor keeps (it drops the oldest).
    pub output_byte_limit: Option<u64>,
}

/// How a terminal's process ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TerminalExit {
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
}

/// What an editor terminal has printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TerminalOutput {
    pub output: String,
    pub truncated: bool,
    pub exit: Option<TerminalExit>,
}

/// Terminals the editor runs for pincer (when it advertises `terminal`).
pub trait Terminals: Send + Sync {
    /// Starts the command; returns the terminal id.
    fn create(&self, command: TerminalCommand) -> BoxFuture<'_, std::io::Result<String>>;
    fn output<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<TerminalOutput>>;
    fn wait_for_exit<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<TerminalExit>>;
    fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<()>>;
    /// Frees the terminal; the editor keeps showing its output.
    fn release<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<()>>;
}

/// Everything a running call may use.
#[derive(Clone)]
pub struct ToolContext {
    /// The session's working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    /// Cancelled when the user cancels the run.
    pub cancel: CancellationToken,
    /// Whether the model accepts images (otherwise tools describe them).
    pub image_input: bool,
    pub workspace: Arc<dyn Workspace>,
    /// Editor terminals, when the editor offers them.
    pub terminals: Option<Arc<dyn Terminals>>,
    pub progress: Progress,
    /// The id of the call being run (what the editor shows it under).
    pub call_id: String,
    /// Who can answer the model's questions (`ask_user`); `None`: no one.
    pub ask: Option<Arc<dyn ask_user::AskUser>>,
    /// The sandbox the call's commands run in; `None`: unconfined.
    pub confine: Option<sandbox::Confinement>,
}

impl ToolContext {
    /// A context on the local disk with no editor attached.
    pub fn local(cwd: PathBuf) -> Self {
        Self {
            cwd,
            cancel: CancellationToken::new(),
            image_input: true,
            workspace: Arc::new(LocalWorkspace),
            terminals: None,
            progress: Arc::new(|_| {}),
            call_id: String::new(),
            ask: None,
            confine: None,
        }
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("cwd", &self.cwd)
            .field("image_input", &self.image_input)
            .field("terminals", &self.terminals.is_some())
            .finish_non_exhaustive()
    }
}

pub trait Tool: Send + Sync {
    /// The name the model calls it by (owned by the tool: MCP tools are
    /// named at run time).
    fn name(&self) -> &str;
    /// One paragraph for the model.
    fn description(&self) -> &str;
    /// JSON Schema of the arguments, shared rather than copied for every
    /// model call of every session.
    fn parameters(&self) -> Arc<serde_json::Value>;
    /// Title, kind and locations of a call, for the editor. The locations
    /// are also the paths the permission check looks at.
    fn describe(&self, args: &serde_json::Value, cwd: &Path) -> CallInfo;
    /// Whether the tool changes the machine (write, edit, commands). Such
    /// calls ask first, and are not offered in read-only modes.
    fn mutating(&self) -> bool;
    /// What "always allow" remembers for this call: for a shell command the
    /// prefix of each command in it ("cargo test"), empty for the tool as a
    /// whole.
    fn permission_scopes(&self, _args: &serde_json::Value) -> Vec<String> {
        Vec::new()
    }
    /// What the editor should show when asking permission (the diff of an
    /// edit), computed without changing anything.
    fn preview<'a>(
        &'a self,
        _args: &'a serde_json::Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Vec<Display>> {
        Box::pin(async { Vec::new() })
    }
    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput>;
    /// Whether the tool has work of its session running between turns (a
    /// background process): such a session is not unloaded when idle.
    fn holds_work(&self) -> bool {
        false
    }
    /// Whether a call may change files in the working directory (the
    /// checkpoint records it). Tools whose kind says they only read need
    /// not say so; one that waits for the user, and changes nothing, does.
    fn may_change_files(&self) -> bool {
        true
    }
    /// Whether a call writes just the paths its `describe` names, itself
    /// (pincer's `write` and `edit`): a change there during the call is
    /// the call's, even if another session's command ran at the same
    /// moment (see `checkpoint::presence`).
    fn writes_only_its_locations(&self) -> bool {
        false
    }
    /// Whether a call runs a command (`bash`, `process`): such calls run
    /// in the session's sandbox ([`ToolContext::confine`]).
    fn runs_commands(&self) -> bool {
        false
    }
}

/// Tools that come and go while a session runs (an MCP server starts,
/// crashes, or announces a changed list). The loop asks before every model
/// call, so a change shows up at the next turn.
pub trait ToolSource: Send + Sync + std::fmt::Debug {
    /// The tools available now.
    fn tools(&self) -> BoxFuture<'_, Vec<Arc<dyn Tool>>>;
}

/// A schema [`schema_for`] made, and the check of arguments compiled from
/// it on the first call that needs it.
struct Generated {
    schema: Arc<serde_json::Value>,
    check: OnceLock<Result<Arc<crate::json_schema::Schema>, String>>,
}

/// The schemas [`schema_for`] made, by input type: kept for the process.
static GENERATED: parking_lot::Mutex<BTreeMap<TypeId, Arc<Generated>>> =
    parking_lot::Mutex::new(BTreeMap::new());

/// The JSON Schema of a typed tool input, in the plain form providers accept
/// (no `$schema`, no title). Generated once per type for the whole process.
pub fn schema_for<T: JsonSchema + 'static>() -> Arc<serde_json::Value> {
    if let Some(found) = GENERATED.lock().get(&TypeId::of::<T>()) {
        return found.schema.clone();
    }
    let schema = schemars::SchemaGenerator::new(schemars::generate::SchemaSettings::draft07())
        .into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
    }
    GENERATED
        .lock()
        .entry(TypeId::of::<T>())
        .or_insert_with(|| {
            Arc::new(Generated {
                schema: Arc::new(value),
                check: OnceLock::new(),
            })
        })
        .schema
        .clone()
}

/// The check of a call's arguments against `schema`, a tool's parameters;
/// `Err` says why the schema does not compile. One that [`schema_for`]
/// made is compiled once for the process and not checked against its
/// meta-schema (a test checks every built-in tool's); any other (an MCP
/// server's) is checked and compiled on each call.
pub fn arguments_check(
    schema: &Arc<serde_json::Value>,
) -> Result<Arc<crate::json_schema::Schema>, String> {
    let generated = GENERATED
        .lock()
        .values()
        .find(|g| Arc::ptr_eq(&g.schema, schema))
        .cloned();
    match generated {
        Some(generated) => generated
            .check
            .get_or_init(|| {
                crate::json_schema::Schema::known_valid(&generated.schema).map(Arc::new)
            })
            .clone(),
        None => crate::json_schema::Schema::compile(schema).map(Arc::new),
    }
}

/// Parses a call's arguments, or explains to the model what was wrong.
// The error is the call's result, returned once per call; boxing it would
// only add noise to every tool.
#[allow(clippy::result_large_err)]
pub fn parse_args<T: DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ToolOutput> {
    serde_json::from_value(args).map_err(|e| {
        ToolOutput::error(format!(
            "Invalid arguments for {tool}: {e}. Check the tool's parameter schema and call it again."
        ))
    })
}

/// Runs the disk- or CPU-heavy part of a call on the blocking pool, so the
/// async thread (one, in `pincer acp`) stays free, and answers at once when
/// the call is cancelled. `work` gets the call's token to stop early too.
pub async fn run_blocking<F>(tool: &str, cancel: &CancellationToken, work: F) -> ToolOutput
where
    F: FnOnce(&CancellationToken) -> ToolOutput + Send + 'static,
{
    let token = cancel.clone();
    let job = tokio::task::spawn_blocking(move || work(&token));
    tokio::select! {
        biased;
        () = cancel.cancelled() => ToolOutput::error("Operation aborted"),
        joined = job => joined.unwrap_or_else(|e| ToolOutput::error(format!("{tool} failed: {e}"))),
    }
}

/// Resolves a path a model gave: `~` is the home directory, relative paths
/// are relative to the session's cwd. The path is not canonicalised (it may
/// not exist yet).
pub fn resolve_path(cwd: &Path, path: &str) -> PathBuf {
    let expanded = if path == "~" {
        directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf())
    } else if let Some(rest) = path.strip_prefix("~/") {
        directories::BaseDirs::new().map(|d| d.home_dir().join(rest))
    } else {
        None
    };
    let path = expanded.unwrap_or_else(|| PathBuf::from(path));
    let joined = if path.is_absolute() {
        path
    } else {
        cwd.join(path)
    };
    normalize(&joined)
}

/// Removes `.` and resolves `..` lexically, so `cwd/../x` is seen as outside.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Whether `path` lies inside `root`, following symlinks where they exist so
/// a link inside the project that points out of it counts as outside — also
/// a dangling one, since writing through it creates its target.
pub fn is_inside(root: &Path, path: &Path) -> bool {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    resolve_links(path, MAX_LINK_HOPS).starts_with(&root)
}

/// How many symlinks [`resolve_links`] follows before giving up (as the
/// kernel's `ELOOP` limit).
const MAX_LINK_HOPS: u32 = 40;

/// `path` with every symlink followed, including a final one whose target
/// does not exist: the longest existing prefix is canonicalised, and a
/// missing component that is itself a link is replaced by its target.
fn resolve_links(path: &Path, hops: u32) -> PathBuf {
    let mut probe = path.to_path_buf();
    let mut tail = Vec::new();
    loop {
        if let Ok(mut resolved) = probe.canonicalize() {
            resolved.extend(tail.iter().rev());
            return resolved;
        }
        if hops > 0
            && let Ok(target) = std::fs::read_link(&probe)
        {
            // A dangling link: go on from where it points.
            let mut next = match probe.parent() {
                Some(parent) if target.is_relative() => {
                    normalize(&resolve_links(parent, hops - 1).join(target))
                }
                _ => normalize(&target),
            };
            next.extend(tail.iter().rev());
            return resolve_links(&next, hops - 1);
        }
        match (probe.file_name().map(|n| n.to_os_string()), probe.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name);
                probe = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Process-wide setup for a pincer that runs tools (`pincer acp`, `pincer
/// run`), at startup: on Linux pincer becomes a child subreaper, so that
/// what a command started cannot escape its end by leaving its process
/// group (see `shell::reaper`), and full-output files left behind by pincer
/// processes that are gone are removed.
pub fn prepare_process() {
    shell::become_subreaper();
    // On this thread, before anything else: a listing of the temp dir is
    // quick, and a thread of its own would cost more memory than it saves
    // time.
    let removed = bash::sweep_stale_output_files(&std::env::temp_dir());
    if removed > 0 {
        tracing::debug!(removed, "removed stale bash output files");
    }
}

/// At the end of a pincer that ran tools: its sessions are over, so their
/// full-output files go (each session's are also removed when it ends).
pub fn end_process() {
    bash::remove_process_output_files(&std::env::temp_dir());
}

/// The built-in tool set, fresh for one session (background processes
/// and full-output files belong to the session that started them), with
/// commands getting the environment by the built-in rules.
pub fn builtin() -> Vec<Arc<dyn Tool>> {
    builtin_with(Arc::default())
}

/// The built-in tool set for a session whose commands inherit what `env`
/// lets through (see [`shell::ShellEnv::new`]; a session's come from
/// its config's `[shell]`).
pub fn builtin_with(env: Arc<shell::ShellEnv>) -> Vec<Arc<dyn Tool>> {
    with_process(env.clone(), process::ProcessTool::with_env(env))
}

/// [`builtin_with`] for a session whose background jobs are `jobs`: each
/// `process` command is one.
pub fn builtin_with_jobs(env: Arc<shell::ShellEnv>, jobs: Arc<jobs::Jobs>) -> Vec<Arc<dyn Tool>> {
    with_process(env.clone(), process::ProcessTool::with_jobs(env, jobs))
}

fn with_process(env: Arc<shell::ShellEnv>, process: process::ProcessTool) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(read::ReadTool),
        Arc::new(write::WriteTool),
        Arc::new(edit::EditTool),
        Arc::new(bash::BashTool::new(Arc::clone(&env))),
        Arc::new(process),
        Arc::new(grep::GrepTool),
        Arc::new(find::FindTool),
        Arc::new(ls::LsTool),
        Arc::new(ask_user::AskUserTool),
        Arc::new(todo::TodoTool),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_against_cwd_and_dotdot_leaves_it() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            resolve_path(cwd, "src/a.rs"),
            PathBuf::from("/work/project/src/a.rs")
        );
        assert_eq!(
            resolve_path(cwd, "../other/x"),
            PathBuf::from("/work/other/x")
        );
        assert_eq!(resolve_path(cwd, "/etc/hosts"), PathBuf::from("/etc/hosts"));
    }

    #[test]
    fn each_built_in_tools_schema_is_valid_and_its_check_compiled_once() {
        for tool in builtin() {
            let schema = tool.parameters();
            // Calls skip this check for pincer's own schemas.
            if let Err(e) = crate::json_schema::Schema::compile(&schema) {
                panic!("{}: {e}", tool.name());
            }
            let first = arguments_check(&schema).unwrap();
            let again = arguments_check(&tool.parameters()).unwrap();
            assert!(Arc::ptr_eq(&first, &again), "{}", tool.name());
        }
        // Anyone else's schema (an MCP server's) is checked, each time: an
        // equal copy of a built-in one is not taken for it.
        let copy = Arc::new((*builtin()[0].parameters()).clone());
        let first = arguments_check(&copy).unwrap();
        assert!(!Arc::ptr_eq(&first, &arguments_check(&copy).unwrap()));
        let invalid = Arc::new(serde_json::json!({"type": "objekt"}));
        assert!(arguments_check(&invalid).is_err());
    }

    #[test]
    fn inside_follows_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        assert!(is_inside(dir.path(), &dir.path().join("new/file.txt")));
        #[cfg(unix)]
        assert!(!is_inside(dir.path(), &dir.path().join("link/secret")));
        assert!(!is_inside(dir.path(), outside.path()));
    }

    #[cfg(unix)]
    #[test]
    fn a_dangling_link_is_where_it_points() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let link = |name: &str, target: &Path| {
            std::os::unix::fs::symlink(target, dir.path().join(name)).unwrap();
        };
        link("out", &outside.path().join("missing/file"));
        link("in", Path::new("sub/new.txt"));
        link("up", Path::new("../elsewhere"));
        link("chain", Path::new("out"));
        link("loop", Path::new("loop"));
        assert!(!is_inside(dir.path(), &dir.path().join("out")));
        assert!(!is_inside(dir.path(), &dir.path().join("chain")));
        assert!(!is_inside(dir.path(), &dir.path().join("up")));
        assert!(is_inside(dir.path(), &dir.path().join("in")));
        assert!(is_inside(dir.path(), &dir.path().join("loop")));
    }
}
