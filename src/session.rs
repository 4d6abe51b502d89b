//! Sessions on disk: one JSONL transcript per session, grouped by working
//! directory under `<data dir>/sessions/`.
//!
//! This module owns the file format ([`transcript`]), where transcripts
//! live, and how a transcript turns back into the history the agent loop
//! works on.

pub mod rewind;
pub mod stored;
pub mod transcript;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::agent::title::title_from;
use crate::agent::{AgentMessage, Mode};
use crate::llm::{Message, ThinkingLevel, ToolResultMessage};
use crate::tools::{CallInfo, Display};
use crate::workflow::run::UnfinishedWorkflow;
use transcript::{Entry, Record};

/// Why a session cannot work in the directory an editor gave.
#[derive(Debug, thiserror::Error)]
pub enum CwdError {
    #[error("cwd must be an absolute path, got {}", .0.display())]
    NotAbsolute(PathBuf),
    #[error("cwd {} does not exist; open a folder that exists", .0.display())]
    Missing(PathBuf),
    #[error("cwd {} is not a directory; open the folder that contains it", .0.display())]
    NotADirectory(PathBuf),
    #[error("cwd {} cannot be read: {source}", .path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Checks a session's working directory before anything is read from it
/// or written for it: tools, context files and transcripts all hang off it.
pub fn check_cwd(cwd: &Path) -> Result<(), CwdError> {
    if !cwd.is_absolute() {
        return Err(CwdError::NotAbsolute(cwd.to_path_buf()));
    }
    match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(CwdError::NotADirectory(cwd.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(CwdError::Missing(cwd.to_path_buf()))
        }
        Err(source) => Err(CwdError::Unreadable {
            path: cwd.to_path_buf(),
            source,
        }),
    }
}

/// The directory holding every session's transcript.
pub fn sessions_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("sessions")
}

/// `/home/me/project` → `--home-me-project--`: one directory per cwd, so a
/// project's sessions are listed without reading the others.
fn cwd_dir_name(cwd: &Path) -> String {
    let text = cwd.to_string_lossy();
    let slug: String = text
        .trim_start_matches(['/', '\\'])
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{slug}--")
}

/// Where the transcript of session `id` in `cwd` is written.
pub fn transcript_path(data_dir: &Path, cwd: &Path, id: &str) -> PathBuf {
    sessions_dir(data_dir)
        .join(cwd_dir_name(cwd))
        .join(format!("{id}.jsonl"))
}

/// Whether `id` can name a transcript file: nothing that could leave the
/// sessions directory (a separator, a leading dot) or name no file.
pub fn is_file_id(id: &str) -> bool {
    !(id.is_empty() || id.contains(['/', '\\', '\0']) || id.starts_with('.'))
}

/// Finds a session's transcript in any cwd's directory.
pub fn find(data_dir: &Path, id: &str) -> Option<PathBuf> {
    if !is_file_id(id) {
        return None;
    }
    let file = format!("{id}.jsonl");
    std::fs::read_dir(sessions_dir(data_dir))
        .ok()?
        .flatten()
        .map(|dir| dir.path().join(&file))
        .find(|path| path.is_file())
}

/// The header of the transcript at `path` (its first line only).
pub fn read_header(path: &Path) -> Option<transcript::Header> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).ok()?;
    let line = std::io::BufReader::new(file).lines().next()?.ok()?;
    serde_json::from_str(&line).ok()
}

/// What a tool result entry adds to the model's result, for replay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallRecord {
    pub call: Option<CallInfo>,
    pub display: Vec<Display>,
    pub details: serde_json::Value,
}

/// A transcript turned back into a live session's state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Restored {
    /// What the model sees: after a compaction, its summary and the kept
    /// messages.
    pub history: Vec<AgentMessage>,
    /// Everything the user saw, with a summary marker where each
    /// compaction happened; only kept once the session has compacted.
    pub shown: Option<Vec<AgentMessage>>,
    /// By call id.
    pub calls: HashMap<String, CallRecord>,
    pub model: Option<String>,
    pub thinking: Option<ThinkingLevel>,
    pub mode: Option<Mode>,
    /// The sandbox mode the user chose for the session.
    pub sandbox: Option<crate::tools::sandbox::SandboxMode>,
    /// What messages sent while the agent works do.
    pub queue: Option<crate::agent::QueueMode>,
    /// The client's instructions for the session, as it last gave them.
    pub client_prompt: Option<crate::context::ClientPrompt>,
    /// The latest model-written title, if any.
    pub title: Option<String>,
    /// The user named the session (a model no longer does).
    pub labelled: bool,
    /// A helper's run ended ([`Record::HelperEnd`]); a helper without one
    /// was interrupted.
    pub helper_ended: bool,
    /// When the model last answered (how old its prompt cache is).
    pub last_call: Option<std::time::SystemTime>,
    /// The transcript entry id of entries of [`Restored::visible`], by
    /// their index there: what an editor knows a message by
    /// (`messageId`), the same on every replay and as it was live.
    pub entry_ids: HashMap<usize, String>,
    /// The Claude Code session the last Claude Code run continued, and how
    /// many history entries it had seen by then.
    pub claude_code: Option<(String, usize)>,
    /// A workflow run that started and never ended (the process died):
    /// its start and the steps it finished, to resume it.
    pub unfinished_workflow: Option<UnfinishedWorkflow>,
    /// The runs with a checkpoint, oldest first: what `/rewind` lists.
    pub turns: Vec<rewind::Turn>,
    /// The rewinds `/redo` can reverse, the last on top.
    pub redo: Vec<rewind::Redoable>,
    /// A rewind whose files were being put back when the process died.
    pub unfinished_restore: Option<rewind::Unfinished>,
}

impl Restored {
    /// The history as the user saw it (what `session/load` replays).
    pub fn visible(&self) -> &[AgentMessage] {
        self.shown.as_deref().unwrap_or(&self.history)
    }

    /// The transcript entry id of `visible()[index]`, if it has one.
    pub fn entry_id(&self, index: usize) -> Option<&str> {
        self.entry_ids.get(&index).map(String::as_str)
    }

    /// Pushes an entry that came from the transcript entry `id`. Indices
    /// in `visible()` never move: it only grows (the model's history may
    /// shrink, but then `shown` keeps everything).
    fn push_entry(&mut self, entry: AgentMessage, id: String) {
        self.entry_ids.insert(self.visible().len(), id);
        self.push(entry);
    }

    fn push(&mut self, entry: AgentMessage) {
        if let Some(shown) = &mut self.shown {
            shown.push(entry.clone());
        }
        self.history.push(entry);
    }
}

/// A message only the replay shows (what a workflow did): the model
/// never reads it.
fn show(restored: &mut Restored, message: Message, id: Option<String>) {
    let shown = restored
        .shown
        .get_or_insert_with(|| restored.history.clone());
    if let Some(id) = id {
        restored.entry_ids.insert(shown.len(), id);
    }
    shown.push(AgentMessage::Llm { message });
}

/// Said by the workflow, not by a model.
fn workflow_says(content: Vec<crate::llm::AssistantContent>) -> Message {
    Message::Assistant(crate::llm::AssistantMessage {
        content,
        provider: "pincer".to_string(),
        api: crate::llm::Api::AnthropicMessages,
        model: "workflow".to_string(),
        auth_profile: None,
        stop_reason: crate::llm::StopReason::Stop,
        error_message: None,
        usage: Default::default(),
    })
}

/// A workflow step on replay as it was live: a tool step as a tool call
/// with its result, an llm or workflow step as what it answered.
fn show_step(restored: &mut Restored, data: &serde_json::Value, id: String) {
    use crate::llm::AssistantContent;
    let step = data["step"].as_str().unwrap_or_default();
    let output = match &data["output"] {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match data["kind"].as_str() {
        Some("tool") => {
            let call_id = format!("{}:{step}", data["run"].as_str().unwrap_or_default());
            let title = format!("{} › {step}", data["workflow"].as_str().unwrap_or_default());
            restored.calls.insert(
                call_id.clone(),
                CallRecord {
                    call: Some(crate::tools::CallInfo {
                        title,
                        kind: crate::tools::ToolKind::Other,
                        locations: Vec::new(),
                    }),
                    ..CallRecord::default()
                },
            );
            let call = crate::llm::ToolCall {
                id: call_id.clone(),
                name: step.to_string(),
                arguments: data["input"].clone(),
                arguments_error: None,
            };
            show(
                restored,
                workflow_says(vec![AssistantContent::ToolCall(call)]),
                Some(id),
            );
            show(
                restored,
                Message::ToolResult(crate::llm::ToolResultMessage {
                    tool_call_id: call_id,
                    tool_name: step.to_string(),
                    content: vec![crate::llm::Content::text(output)],
                    is_error: data["error"].as_bool().unwrap_or(false),
                }),
                None,
            );
        }
        Some("llm" | "workflow") => show(
            restored,
            workflow_says(vec![AssistantContent::Text {
                text: format!("{step}: {output}\n"),
            }]),
            Some(id),
        ),
        _ => {}
    }
}

/// How a workflow run ended, as the live session said it.
fn show_end(restored: &mut Restored, data: &serde_json::Value, name: Option<&str>, id: String) {
    let name = name.unwrap_or("workflow");
    let text = if data["ok"] == true {
        let output = match &data["output"] {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        format!(
            "Workflow `{name}` finished ({} steps): {output}\n",
            data["steps"]
        )
    } else if data["error"] == "cancelled" {
        return;
    } else {
        format!(
            "Workflow `{name}` stopped: {}\n",
            data["error"].as_str().unwrap_or_default()
        )
    };
    show(
        restored,
        workflow_says(vec![crate::llm::AssistantContent::Text { text }]),
        Some(id),
    );
}

/// The result recorded for a call whose process was killed before the call
/// finished, so the history stays valid for the model.
pub const INTERRUPTED: &str = "This call was interrupted: pincer stopped before it finished, so its outcome is unknown. Check its effects before you run it again.";

/// Closes the calls of the last assistant message that got no result.
fn answer_open_calls(restored: &mut Restored, open: &mut Vec<(String, String)>) {
    for (id, name) in open.drain(..) {
        restored.push(AgentMessage::Llm {
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: id,
                tool_name: name,
                content: vec![crate::llm::Content::text(INTERRUPTED)],
                is_error: true,
            }),
        });
    }
}

/// Whether a history entry is a model call that failed or was cancelled
/// before it answered: no text and no tool call (at most the start of its
/// thinking, which providers do not take back without a signature).
pub fn is_failed_call(entry: &AgentMessage) -> bool {
    matches!(
        entry,
        AgentMessage::Llm {
            message: Message::Assistant(a),
        } if is_unanswered(a)
    )
}

fn is_unanswered(a: &crate::llm::AssistantMessage) -> bool {
    matches!(
        a.stop_reason,
        crate::llm::StopReason::Error | crate::llm::StopReason::Aborted
    ) && a.tool_calls().next().is_none()
        && a.text().trim().is_empty()
}

/// Where the latest prompt starts (its time line, if it has one), when the
/// model never answered it: the history ends with that user message and at
/// most failed or cancelled,
/// empty model calls. Such a prompt is taken out of what the model sees
/// (the user saw it fail, or stopped it), so that it is not sent again
/// glued to the next one.
pub fn unanswered_prompt(history: &[AgentMessage]) -> Option<usize> {
    let at = history.iter().rposition(|m| {
        matches!(
            m,
            AgentMessage::Llm {
                message: Message::User { .. }
            }
        )
    })?;
    let unanswered = history[at + 1..]
        .iter()
        .all(|m| is_failed_call(m) || matches!(m, AgentMessage::Notice { .. }));
    // Its time line goes with it.
    let with_time = at > 0 && matches!(history[at - 1], AgentMessage::Time { .. });
    unanswered.then_some(if with_time { at - 1 } else { at })
}

/// After a run that failed (`error`) or was cancelled (`None`): the end to
/// record for a prompt the model never answered, when no failed or
/// cancelled call records it already (the run ended before any model
/// call: a context overflow compaction could not fix, a cancel during the
/// trust question). `restore` drops such a prompt from what the model
/// sees, as the live session does.
pub fn unanswered_end(
    history: &[AgentMessage],
    model: &crate::llm::Model,
    error: Option<&crate::llm::LlmError>,
) -> Option<Record> {
    let at = unanswered_prompt(history)?;
    if history[at..].iter().any(is_failed_call) {
        return None;
    }
    Some(Record::Message {
        message: Message::Assistant(crate::llm::AssistantMessage {
            content: Vec::new(),
            provider: model.provider.clone(),
            api: model.api,
            model: model.id.clone(),
            auth_profile: None,
            stop_reason: match error {
                Some(_) => crate::llm::StopReason::Error,
                None => crate::llm::StopReason::Aborted,
            },
            error_message: error.map(ToString::to_string),
            usage: Default::default(),
        }),
        time: None,
    })
}

/// Takes a prompt whose model call failed before any answer out of what
/// the model sees; the user still sees it on replay, with its error.
fn drop_unanswered(restored: &mut Restored) {
    if let Some(at) = unanswered_prompt(&restored.history) {
        restored
            .shown
            .get_or_insert_with(|| restored.history.clone());
        restored.history.truncate(at);
    }
}

/// Rebuilds the history (and the last model, thinking level and mode) from
/// a transcript's entries. Calls cut off by a killed process get an error
/// result, since every call must have one.
pub fn restore(entries: Vec<Entry>) -> Restored {
    let effective = rewind::effective(entries);
    let mut restored = Restored {
        turns: rewind::turns(&effective.entries),
        redo: effective.redo,
        unfinished_restore: effective.unfinished,
        ..Restored::default()
    };
    let entries = effective.entries;
    // About one message per entry: no growing and copying on the way.
    restored.history.reserve(entries.len());
    restored.entry_ids.reserve(entries.len());
    // Calls of the latest assistant message still waiting for a result.
    let mut open: Vec<(String, String)> = Vec::new();
    for entry in entries {
        match entry.record {
            Record::Message { message, time } => {
                answer_open_calls(&mut restored, &mut open);
                // The time line the model read with this user message,
                // before it as in a live session's history.
                if let (Some(text), Message::User { .. }) = (time, &message) {
                    restored.push(AgentMessage::Time { text });
                }
                if let Message::Assistant(assistant) = &message {
                    restored.last_call = humantime::parse_rfc3339_weak(&entry.timestamp).ok();
                    open = assistant
                        .tool_calls()
                        .map(|c| (c.id.clone(), c.name.clone()))
                        .collect();
                }
                let failed = matches!(&message, Message::Assistant(a) if is_unanswered(a));
                restored.push_entry(AgentMessage::Llm { message }, entry.id);
                if failed {
                    drop_unanswered(&mut restored);
                }
            }
            Record::ToolResult {
                message,
                call,
                display,
                details,
            } => {
                // A result no open call asked for (a call Claude Code sent
                // without saying which tool_use it answered) is not
                // something a model can be sent.
                if !open.iter().any(|(id, _)| *id == message.tool_call_id) {
                    continue;
                }
                open.retain(|(id, _)| *id != message.tool_call_id);
                restored.calls.insert(
                    message.tool_call_id.clone(),
                    CallRecord {
                        call,
                        display,
                        details,
                    },
                );
                restored.push(AgentMessage::Llm {
                    message: Message::ToolResult(message),
                });
            }
            Record::ModelChange { model } => restored.model = Some(model),
            Record::ThinkingChange { level } => restored.thinking = Some(level),
            Record::ModeChange { mode } => restored.mode = Some(mode),
            Record::SandboxChange { sandbox } => restored.sandbox = Some(sandbox),
            Record::QueueChange { queue } => restored.queue = Some(queue),
            Record::SystemPrompt { prompt } => restored.client_prompt = Some(prompt),
            Record::Title { title, by_user } => {
                restored.title = Some(title);
                restored.labelled |= by_user;
            }
            Record::Notice { text } => {
                restored.push(AgentMessage::Notice { text });
            }
            Record::HelperEnd { .. } => restored.helper_ended = true,
            Record::Workflow { data } => match data["event"].as_str() {
                Some("start") => {
                    restored.unfinished_workflow = Some(UnfinishedWorkflow {
                        run: data["run"].as_str().unwrap_or_default().to_string(),
                        workflow: data["workflow"].as_str().unwrap_or_default().to_string(),
                        inputs: data["inputs"].clone(),
                        steps: Vec::new(),
                    });
                }
                Some("step") => {
                    show_step(&mut restored, &data, entry.id);
                    if let Some(run) = restored
                        .unfinished_workflow
                        .as_mut()
                        .filter(|r| data["run"] == r.run.as_str())
                        // The steps of workflows it called run again with
                        // their step.
                        .filter(|r| data["workflow"] == r.workflow.as_str())
                    {
                        run.steps.push((
                            data["step"].as_str().unwrap_or_default().to_string(),
                            data["output"].clone(),
                            data["error"].as_bool().unwrap_or(false),
                        ));
                    }
                }
                Some("end") => {
                    let name = restored
                        .unfinished_workflow
                        .take()
                        .filter(|r| data["run"] == r.run.as_str())
                        .map(|r| r.workflow);
                    show_end(&mut restored, &data, name.as_deref(), entry.id);
                }
                _ => {}
            },
            Record::Runtime { runtime, resume } => {
                if runtime == crate::agent::claude_code::RUNTIME
                    && let Some(resume) = resume
                {
                    restored.claude_code = Some((resume, restored.history.len()));
                }
            }
            // What the user typed, for the replay alone.
            Record::Command { text } => {
                let shown = restored
                    .shown
                    .get_or_insert_with(|| restored.history.clone());
                restored.entry_ids.insert(shown.len(), entry.id);
                shown.push(AgentMessage::Llm {
                    message: Message::User {
                        content: vec![crate::llm::Content::text(text)],
                    },
                });
            }
            // For undo and rewind (`turns`), and the rewinds themselves
            // are applied already.
            Record::Checkpoint { .. }
            | Record::Rewind { .. }
            | Record::Redo { .. }
            | Record::RestoreEnd { .. } => {}
            // The summary text carries its file lists; the entry's own
            // copy of them is for readers of the transcript.
            Record::Compaction {
                summary,
                kept,
                tokens_before,
                ..
            } => {
                // Calls cut off before the compaction were answered then.
                answer_open_calls(&mut restored, &mut open);
                let shown = restored
                    .shown
                    .get_or_insert_with(|| restored.history.clone());
                shown.push(AgentMessage::Summary {
                    summary: summary.clone(),
                    tokens_before,
                });
                crate::agent::compaction::restore(
                    &mut restored.history,
                    summary,
                    kept,
                    tokens_before,
                );
            }
        }
    }
    answer_open_calls(&mut restored, &mut open);
    restored
}

/// A stored session as a list shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub id: String,
    pub cwd: PathBuf,
    /// The user's name for the session, else the model's, else its first
    /// prompt's first line.
    pub title: Option<String>,
    /// The user's name for the session, if the user gave it one.
    pub label: Option<String>,
    /// RFC 3339: when the transcript last changed.
    pub updated_at: String,
    pub path: PathBuf,
    /// A helper's: the session whose `task` call started it.
    pub spawned_by: Option<String>,
    /// A helper's agent definition.
    pub agent: Option<String>,
    /// A helper whose run never ended (pincer was killed while it ran,
    /// or it runs now).
    pub interrupted: bool,
    /// A helper's parent `task` call.
    pub call: Option<String>,
    /// How a helper's run ended (an ACP stop reason's name, `error`),
    /// when it did.
    pub helper_stop: Option<String>,
    modified: std::time::SystemTime,
}

impl Summary {
    /// When its transcript last changed.
    pub fn modified(&self) -> std::time::SystemTime {
        self.modified
    }
}

/// Where the latest model-written title of a session is kept next to its
/// transcript, so that listing sessions reads one small file instead of a
/// whole transcript. The transcript's `title` entry stays the record.
pub fn title_path(transcript: &Path) -> PathBuf {
    transcript.with_extension("title")
}

/// Where the user's own name for a session is kept next to its transcript
/// (for listings, like [`title_path`]); it wins over the model's title.
pub fn label_path(transcript: &Path) -> PathBuf {
    transcript.with_extension("label")
}

/// Where the title of a session's first prompt (its first line, as
/// [`title_from`] makes it; empty for a prompt without text) is kept next
/// to its transcript once the prompt is written, so that listing sessions
/// never reads the prompt itself, which may be megabytes. Transcripts
/// written before this file existed are read once by the listing, which
/// then writes it.
pub fn prompt_title_path(transcript: &Path) -> PathBuf {
    transcript.with_extension("prompt")
}

/// Saves the title of a session's first prompt beside its transcript.
pub fn save_prompt_title(transcript: &Path, title: &str) -> std::io::Result<()> {
    save_beside(&prompt_title_path(transcript), title)
}

/// Saves a session's title beside its transcript (atomically: a listing
/// never sees half a title), readable by the user alone like the
/// transcript.
pub fn save_title(transcript: &Path, title: &str) -> std::io::Result<()> {
    save_beside(&title_path(transcript), title)
}

/// Saves the user's name for a session beside its transcript.
pub fn save_label(transcript: &Path, label: &str) -> std::io::Result<()> {
    save_beside(&label_path(transcript), label)
}

/// Writes `title` to `path` whole (two writers at once, such as two
/// listings filling in a prompt's title, each put a whole file in place),
/// readable by the user alone. Not synced: a title lost in a crash is
/// written again.
fn save_beside(path: &Path, title: &str) -> std::io::Result<()> {
    crate::config::trust::replace_private(path, title.as_bytes(), false)
}

/// Transcripts hold everything said and every file read in a session, so
/// they are the user's alone: files `0600`, directories `0700`, whatever
/// the umask (it only removes bits, and these are set at creation).
const FILE_MODE: u32 = 0o600;
const DIR_MODE: u32 = 0o700;

/// Options that create a file readable by its owner alone.
pub(crate) fn private_file() -> std::fs::OpenOptions {
    #[allow(unused_mut)]
    let mut options = std::fs::OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, FILE_MODE);
    options
}

/// Creates `dir` and its missing parents for the owner alone, and narrows
/// the session directories an older pincer made readable by others.
pub(crate) fn create_private_dir(data_dir: &Path, dir: &Path) -> std::io::Result<()> {
    #[allow(unused_mut)]
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    builder.create(dir)?;
    let sessions = sessions_dir(data_dir);
    for dir in dir.ancestors().take_while(|d| d.starts_with(&sessions)) {
        narrow(dir, DIR_MODE);
    }
    Ok(())
}

/// [`make_private`] for what an older pincer (or the user) made: a failure
/// is told, not fatal, as the session can still be written.
pub(crate) fn narrow(path: &Path, mode: u32) {
    let result = std::fs::metadata(path).and_then(|meta| make_private(path, &meta, mode));
    if let Err(error) = result {
        tracing::warn!(path = %path.display(), %error, "cannot make this readable by its owner alone");
    }
}

/// Takes group and other permissions off `path` if it has any.
fn make_private(path: &Path, meta: &std::fs::Metadata, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        }
    }
    #[cfg(not(unix))]
    let _ = (path, meta, mode);
    Ok(())
}

pub(crate) fn narrow_file(path: &Path) {
    narrow(path, FILE_MODE);
}

/// Removes a session: its transcript, its titles and its label.
pub fn delete(transcript: &Path) -> std::io::Result<()> {
    std::fs::remove_file(transcript)?;
    for beside in [
        title_path(transcript),
        label_path(transcript),
        prompt_title_path(transcript),
    ] {
        match std::fs::remove_file(beside) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// How long a transcript that was never prompted is kept (from its last
/// change): long enough for a client that creates a session in one process
/// and prompts it from the next (`acpx sessions new`, then `acpx prompt`),
/// short enough that sessions editors open and never use do not pile up.
pub const UNPROMPTED_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// What [`summarize`] found in a transcript.
enum Found {
    Listed(Box<Summary>),
    /// A session that never got a prompt, last changed then.
    Unprompted(std::time::SystemTime),
}

/// Reads what a list needs: the header line, and the title from the small
/// files beside the transcript (the user's label, the model's title, the
/// first prompt's title). Only a transcript without them (never prompted,
/// or written before the first prompt's title was kept beside it) is read
/// further, up to its first prompt, and the title found is then saved
/// beside it, so the body is read once at most. A session that never got
/// a prompt is not listed: there is nothing in it to go back to yet.
fn summarize(path: &Path) -> Option<Found> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).ok()?;
    let modified = file.metadata().and_then(|m| m.modified()).ok()?;
    let mut lines = std::io::BufReader::new(file).lines();
    let header: transcript::Header = serde_json::from_str(&lines.next()?.ok()?).ok()?;
    // The user's label is kept whole (it was checked when it was given).
    let label = std::fs::read_to_string(label_path(path))
        .ok()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty());
    let mut title = label.clone().or_else(|| {
        std::fs::read_to_string(title_path(path))
            .ok()
            .and_then(|t| title_from(&t))
    });
    // A model-written title comes after a turn, so the session had one.
    if title.is_none() {
        title = match std::fs::read_to_string(prompt_title_path(path)) {
            Ok(prompt) => title_from(&prompt),
            Err(_) => match first_prompt_title(lines) {
                Some(found) => {
                    let kept = found.as_deref().unwrap_or_default();
                    if let Err(error) = save_prompt_title(path, kept) {
                        tracing::debug!(path = %path.display(), %error, "cannot keep the first prompt's title beside the transcript");
                    }
                    found
                }
                None => return Some(Found::Unprompted(modified)),
            },
        };
    }
    let helper_stop = header.spawned_by.as_ref().and_then(|_| helper_end(path));
    let interrupted = header.spawned_by.is_some() && helper_stop.is_none();
    Some(Found::Listed(Box::new(Summary {
        id: header.id,
        cwd: header.cwd,
        title,
        label,
        updated_at: humantime::format_rfc3339_seconds(modified).to_string(),
        path: path.to_path_buf(),
        spawned_by: header.spawned_by,
        agent: header.agent,
        interrupted,
        call: header.call,
        helper_stop,
        modified,
    })))
}

/// The stop of a helper's `helper_end` entry, when its transcript ends
/// with one (read from the file's end: a helper's last entry is that).
fn helper_end(path: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(16 * 1024);
    let mut tail = String::new();
    file.seek(SeekFrom::Start(start)).ok()?;
    file.read_to_string(&mut tail).ok()?;
    let last = tail.lines().rev().find(|l| !l.trim().is_empty())?;
    match serde_json::from_str::<Entry>(last).ok()?.record {
        Record::HelperEnd { stop, .. } => Some(stop),
        _ => None,
    }
}

/// `sessions` (newest first) with each helper right under the session
/// that started it, and its depth: 0 for a session of its own, 1 for its
/// helpers, … A helper whose parent is not listed stands on its own.
pub fn nested(sessions: &[Summary]) -> Vec<(usize, &Summary)> {
    let ids: std::collections::HashSet<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
    let is_root = |s: &Summary| s.spawned_by.as_deref().is_none_or(|p| !ids.contains(p));
    let mut out = Vec::with_capacity(sessions.len());
    let mut stack: Vec<(usize, &Summary)> = sessions
        .iter()
        .filter(|s| is_root(s))
        .rev()
        .map(|s| (0, s))
        .collect();
    let mut placed: std::collections::HashSet<&str> = std::collections::HashSet::new();
    while let Some((depth, session)) = stack.pop() {
        if !placed.insert(session.id.as_str()) {
            continue;
        }
        out.push((depth, session));
        // Helpers in the order they started (oldest first).
        let mut children: Vec<&Summary> = sessions
            .iter()
            .filter(|s| s.spawned_by.as_deref() == Some(session.id.as_str()))
            .collect();
        children.sort_by(|a, b| a.modified.cmp(&b.modified).then_with(|| a.id.cmp(&b.id)));
        for child in children.into_iter().rev() {
            stack.push((depth + 1, child));
        }
    }
    // Helpers whose parents name each other (a damaged file) still show.
    for session in sessions {
        if placed.insert(session.id.as_str()) {
            out.push((0, session));
        }
    }
    out
}

/// The title of a transcript's first prompt, read from its entries after
/// the header: `Some(None)` for a prompt without text, `None` when the
/// first 64 entries hold no prompt (the session was never prompted).
fn first_prompt_title(
    lines: impl Iterator<Item = std::io::Result<String>>,
) -> Option<Option<String>> {
    let mut tracker = PromptTitle::default();
    for line in lines.take(64) {
        let Ok(line) = line else { break };
        if let Ok(entry) = serde_json::from_str::<Entry>(&line)
            && let Some(found) = tracker.see(&entry.record)
        {
            return Some(found);
        }
    }
    None
}

/// Finds the title a listing shows for a session without a label or a
/// model-written title, entry by entry: the first line of the first user
/// message's text, or, for a session that ran a workflow first, of the
/// command the user typed before it. The transcript's writer uses it to
/// keep that title beside the transcript; the listing, for transcripts
/// written before.
#[derive(Debug, Default)]
pub(crate) struct PromptTitle {
    command: Option<String>,
}

impl PromptTitle {
    /// `Some(title)` once `record` is the first prompt.
    pub(crate) fn see(&mut self, record: &Record) -> Option<Option<String>> {
        match record {
            Record::Message {
                message: Message::User { content },
                ..
            } => Some(content.iter().find_map(|c| match c {
                crate::llm::Content::Text { text } => title_from(text),
                crate::llm::Content::Image { .. } => None,
            })),
            Record::Command { text } => {
                self.command = Some(text.clone());
                None
            }
            // A session that ran a workflow did something worth listing.
            Record::Workflow { .. } => Some(self.command.as_deref().and_then(title_from)),
            _ => None,
        }
    }
}

/// Stored sessions, newest first; only those of `cwd` when given.
/// Transcripts of sessions never prompted are not listed, and those older
/// than [`UNPROMPTED_TTL`] are removed on the way (see [`sweep`]).
pub fn list(data_dir: &Path, cwd: Option<&Path>) -> Vec<Summary> {
    let dirs: Vec<PathBuf> = match cwd {
        Some(cwd) => vec![sessions_dir(data_dir).join(cwd_dir_name(cwd))],
        None => std::fs::read_dir(sessions_dir(data_dir))
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default(),
    };
    let mut sessions: Vec<Summary> = dirs
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| match summarize(&p)? {
            Found::Listed(summary) => Some(*summary),
            Found::Unprompted(modified) => {
                sweep(&p, modified, UNPROMPTED_TTL);
                None
            }
        })
        .filter(|s| cwd.is_none_or(|cwd| s.cwd == cwd))
        .collect();
    sessions.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.id.cmp(&b.id)));
    sessions
}

/// One stored session's summary, as [`list`] gives it (`None` for an
/// unknown id, or a session never prompted): reads that transcript only.
pub fn summary(data_dir: &Path, id: &str) -> Option<Summary> {
    match summarize(&find(data_dir, id)?)? {
        Found::Listed(summary) => Some(*summary),
        Found::Unprompted(_) => None,
    }
}

/// Removes a never-prompted session's files if it has not changed for
/// `ttl`: a session created and abandoned (an editor's new tab, a client
/// that never came back) leaves nothing behind for long.
fn sweep(path: &Path, modified: std::time::SystemTime, ttl: std::time::Duration) {
    let old = modified.elapsed().is_ok_and(|age| age >= ttl);
    if !old {
        return;
    }
    match delete(path) {
        Ok(()) => {
            tracing::debug!(path = %path.display(), "removed a session that was never prompted")
        }
        Err(error) => {
            tracing::debug!(path = %path.display(), %error, "cannot remove a session that was never prompted")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_that_could_leave_the_sessions_directory_names_no_file() {
        assert!(is_file_id("sess_0123"));
        for bad in ["", "../../etc/passwd", "a/b", "a\\b", ".hidden", "a\0b"] {
            assert!(!is_file_id(bad), "{bad:?}");
        }
    }

    /// One session's summary is the one the list gives, without reading
    /// the others; a session never prompted, or an unknown id, has none.
    #[test]
    fn one_session_s_summary_is_its_listed_one() {
        let data = tempfile::tempdir().unwrap();
        let cwd = Path::new("/work/project");
        for (id, prompt) in [
            ("sess_a", Some("fix the parser")),
            ("sess_b", Some("add a test")),
            ("sess_c", None),
        ] {
            let path = transcript_path(data.path(), cwd, id);
            let mut writer =
                transcript::Writer::create(&path, &transcript::Header::new(id, cwd, None)).unwrap();
            if let Some(prompt) = prompt {
                writer.append(user(prompt)).unwrap();
            }
        }
        let listed = list(data.path(), None);
        assert_eq!(listed.len(), 2);
        for from_list in &listed {
            let one = summary(data.path(), &from_list.id).unwrap();
            assert_eq!(
                (&one.id, &one.title, &one.cwd, one.modified),
                (
                    &from_list.id,
                    &from_list.title,
                    &from_list.cwd,
                    from_list.modified
                )
            );
        }
        assert!(summary(data.path(), "sess_c").is_none(), "never prompted");
        assert!(summary(data.path(), "sess_none").is_none());
        assert!(summary(data.path(), "../sess_a").is_none());
    }

    /// Sessions never prompted are not listed; once unchanged for a day
    /// they are removed by the listing.
    #[test]
    fn never_prompted_sessions_are_unlisted_and_swept_when_old() {
        let data = tempfile::tempdir().unwrap();
        let cwd = Path::new("/work/project");
        let write = |id: &str, prompted: bool, age_hours: u64| {
            let path = transcript_path(data.path(), cwd, id);
            let header = transcript::Header::new(id, cwd, None);
            let mut writer = transcript::Writer::create(&path, &header).unwrap();
            if prompted {
                writer.append(user("hello")).unwrap();
            }
            let when =
                std::time::SystemTime::now() - std::time::Duration::from_secs(age_hours * 3600);
            std::fs::File::options()
                .append(true)
                .open(&path)
                .unwrap()
                .set_modified(when)
                .unwrap();
            path
        };
        let fresh = write("sess_fresh", false, 1);
        let old = write("sess_old", false, 25);
        let used = write("sess_used", true, 48);
        let listed: Vec<String> = list(data.path(), Some(cwd))
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(listed, vec!["sess_used".to_string()]);
        assert_eq!(
            [fresh.exists(), old.exists(), used.exists()],
            [true, false, true]
        );
        assert_eq!(find(data.path(), "sess_fresh"), Some(fresh));
    }

    #[test]
    fn transcripts_are_grouped_by_cwd_and_found_by_id() {
        let data = tempfile::tempdir().unwrap();
        let path = transcript_path(data.path(), Path::new("/home/me/project"), "sess_a");
        assert!(path.ends_with("sessions/--home-me-project--/sess_a.jsonl"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "").unwrap();
        assert_eq!(find(data.path(), "sess_a"), Some(path));
        assert_eq!(find(data.path(), "sess_b"), None);
        assert_eq!(find(data.path(), "../sess_a"), None);
    }

    fn entry(n: usize, record: Record) -> Entry {
        Entry {
            id: format!("e{n}"),
            parent_id: None,
            timestamp: "2026-11-22T07:00:00.000Z".into(),
            record,
        }
    }

    /// A session whose first prompt is huge lists with that prompt's title
    /// without its transcript being read past the header: the body is
    /// replaced by bytes that are not JSON, and the title still comes back.
    /// A transcript from before the title was kept beside it is read once,
    /// and the title is kept beside it from then on.
    #[test]
    fn listing_takes_the_first_prompt_s_title_without_reading_the_transcript() {
        let data = tempfile::tempdir().unwrap();
        let cwd = Path::new("/work/project");
        let path = transcript_path(data.path(), cwd, "sess_huge");
        let header = transcript::Header::new("sess_huge", cwd, None);
        let mut writer = transcript::Writer::create(&path, &header).unwrap();
        writer
            .append(transcript::Record::Command {
                text: "/model x".into(),
            })
            .unwrap();
        let prompt = format!("Fix the parser\n{}", "x".repeat(4_000_000));
        writer.append(user(&prompt)).unwrap();
        writer.append(user("a later prompt")).unwrap();
        let titles = || -> Vec<Option<String>> {
            list(data.path(), Some(cwd))
                .into_iter()
                .map(|s| s.title)
                .collect()
        };
        assert_eq!(titles(), vec![Some("Fix the parser".to_string())]);

        let header_line = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string();
        std::fs::write(
            &path,
            format!("{header_line}\n{}\n", "\u{1}garbage".repeat(1000)),
        )
        .unwrap();
        assert_eq!(titles(), vec![Some("Fix the parser".to_string())]);

        // Written by an older pincer: no title beside it.
        let old = transcript_path(data.path(), cwd, "sess_old");
        let mut writer =
            transcript::Writer::create(&old, &transcript::Header::new("sess_old", cwd, None))
                .unwrap();
        writer.append(user("An old session")).unwrap();
        std::fs::remove_file(prompt_title_path(&old)).unwrap();
        let listed = list(data.path(), Some(cwd));
        let old_title = listed.iter().find(|s| s.id == "sess_old").unwrap();
        assert_eq!(old_title.title.as_deref(), Some("An old session"));
        assert_eq!(
            std::fs::read_to_string(prompt_title_path(&old)).unwrap(),
            "An old session"
        );
    }

    fn user(text: &str) -> Record {
        Record::Message {
            message: Message::User {
                content: vec![crate::llm::Content::text(text)],
            },
            time: None,
        }
    }

    fn assistant(text: &str, stop_reason: crate::llm::StopReason) -> Record {
        Record::Message {
            message: Message::Assistant(crate::llm::AssistantMessage {
                content: if text.is_empty() {
                    Vec::new()
                } else {
                    vec![crate::llm::AssistantContent::Text { text: text.into() }]
                },
                provider: "anthropic".into(),
                api: crate::llm::Api::AnthropicMessages,
                model: "claude-sonnet-4-5".into(),
                auth_profile: None,
                stop_reason,
                error_message: (stop_reason == crate::llm::StopReason::Error)
                    .then(|| "refused".to_string()),
                usage: Default::default(),
            }),
            time: None,
        }
    }

    /// The client's instructions as it last gave them count; they are
    /// session state, not something the model or the user sees in history.
    #[test]
    fn the_latest_client_prompt_is_restored() {
        use crate::context::{ClientPrompt, ClientPromptMode};
        let first = ClientPrompt::append("Answer in French.");
        let second = ClientPrompt {
            mode: ClientPromptMode::Override,
            text: "You are a reviewer.".into(),
        };
        let restored = restore(vec![
            entry(1, Record::SystemPrompt { prompt: first }),
            entry(2, user("hi")),
            entry(3, assistant("salut", crate::llm::StopReason::Stop)),
            entry(
                4,
                Record::SystemPrompt {
                    prompt: second.clone(),
                },
            ),
        ]);
        assert_eq!(restored.client_prompt, Some(second));
        assert_eq!(restored.history.len(), 2);
    }

    fn timed_user(text: &str, time: &str) -> Record {
        Record::Message {
            message: Message::User {
                content: vec![crate::llm::Content::text(text)],
            },
            time: Some(time.into()),
        }
    }

    fn time(text: &str) -> AgentMessage {
        AgentMessage::Time { text: text.into() }
    }

    fn llm(record: Record) -> AgentMessage {
        match record {
            Record::Message { message, .. } => AgentMessage::Llm { message },
            _ => unreachable!(),
        }
    }

    /// A user message's stored time line comes back before it, as the
    /// live history had it; a transcript from before pincer stored them
    /// loads without; a compaction keeps the first kept message's line; a
    /// prompt the model never answered leaves with its line.
    #[test]
    fn time_lines_come_back_from_the_transcript_where_they_were_live() {
        let answer = || assistant("answer", crate::llm::StopReason::Stop);
        let restored = restore(vec![
            entry(1, timed_user("first", "Current time: 09:00")),
            entry(2, answer()),
            entry(3, user("old style")),
            entry(4, answer()),
        ]);
        let expected = vec![
            time("Current time: 09:00"),
            llm(user("first")),
            llm(answer()),
            llm(user("old style")),
            llm(answer()),
        ];
        assert_eq!(restored.history, expected);
        // The ids of what the editor is shown do not count time lines.
        assert_eq!(restored.entry_id(1), Some("e1"));
        assert_eq!(restored.entry_id(0), None);

        let compacted = restore(vec![
            entry(1, timed_user("first", "Current time: 09:00")),
            entry(2, answer()),
            entry(3, timed_user("second", "Current time: 09:05")),
            entry(4, answer()),
            entry(
                5,
                Record::Compaction {
                    summary: "## Goal".into(),
                    kept: 2,
                    tokens_before: 100,
                    read_files: Vec::new(),
                    modified_files: Vec::new(),
                },
            ),
        ]);
        assert_eq!(
            compacted.history[1..],
            [
                time("Current time: 09:05"),
                llm(user("second")),
                llm(answer())
            ]
        );

        let failed = restore(vec![
            entry(1, timed_user("first", "Current time: 09:00")),
            entry(2, answer()),
            entry(3, timed_user("lost", "Current time: 09:05")),
            entry(4, assistant("", crate::llm::StopReason::Error)),
        ]);
        assert_eq!(
            failed.history,
            vec![
                time("Current time: 09:00"),
                llm(user("first")),
                llm(answer())
            ]
        );
    }

    /// Every shown entry keeps its transcript entry's id (its `messageId`),
    /// also where the model's history dropped or summarised it.
    #[test]
    fn shown_entries_keep_their_transcript_ids() {
        let restored = restore(vec![
            entry(1, user("first")),
            entry(2, assistant("", crate::llm::StopReason::Error)),
            entry(3, user("second")),
            entry(4, assistant("answer", crate::llm::StopReason::Stop)),
            entry(
                5,
                Record::Command {
                    text: "/compact".into(),
                },
            ),
            entry(
                6,
                Record::Compaction {
                    summary: "## Goal".into(),
                    kept: 0,
                    tokens_before: 100,
                    read_files: Vec::new(),
                    modified_files: Vec::new(),
                },
            ),
            entry(7, user("third")),
        ]);
        let ids: Vec<Option<&str>> = (0..restored.visible().len())
            .map(|i| restored.entry_id(i))
            .collect();
        assert_eq!(
            ids,
            vec![
                Some("e1"),
                Some("e2"),
                Some("e3"),
                Some("e4"),
                Some("e5"),
                None,
                Some("e7")
            ]
        );
    }

    /// Also in transcripts written before pincer took failed prompts out:
    /// the model never sees a prompt it did not answer; the user does.
    #[test]
    fn a_prompt_whose_call_failed_before_any_answer_leaves_the_history() {
        use crate::llm::StopReason;
        let records = vec![
            user("What model are you?"),
            assistant("", StopReason::Error),
            user("What model are you now?"),
            assistant("Sonnet.", StopReason::Stop),
            user("Use a tool"),
            assistant("Reading.", StopReason::Error),
        ];
        let entries: Vec<Entry> = records
            .iter()
            .cloned()
            .enumerate()
            .map(|(n, r)| entry(n, r))
            .collect();
        let restored = restore(entries);
        let messages = |records: &[Record]| -> Vec<AgentMessage> {
            records
                .iter()
                .map(|r| match r {
                    Record::Message { message, .. } => AgentMessage::Llm {
                        message: message.clone(),
                    },
                    _ => unreachable!(),
                })
                .collect()
        };
        // A call that failed after some output keeps its prompt.
        assert_eq!(restored.history, messages(&records[2..]));
        assert_eq!(restored.visible(), messages(&records).as_slice());
    }

    #[test]
    fn compactions_leave_the_model_the_latest_summary_and_the_user_everything() {
        let texts = ["one", "two", "three", "four", "five"];
        let mut entries: Vec<Entry> = Vec::new();
        for (n, text) in texts.iter().take(3).enumerate() {
            entries.push(entry(n, user(text)));
        }
        entries.push(entry(
            3,
            Record::Compaction {
                summary: "first summary".into(),
                kept: 1,
                tokens_before: 100,
                read_files: Vec::new(),
                modified_files: Vec::new(),
            },
        ));
        entries.push(entry(4, user("four")));
        entries.push(entry(5, user("five")));
        entries.push(entry(
            6,
            Record::Compaction {
                summary: "second summary".into(),
                kept: 2,
                tokens_before: 200,
                read_files: Vec::new(),
                modified_files: Vec::new(),
            },
        ));
        let restored = restore(entries);
        let llm_user = |text: &str| AgentMessage::Llm {
            message: Message::User {
                content: vec![crate::llm::Content::text(text)],
            },
        };
        let summary = |text: &str, tokens_before| AgentMessage::Summary {
            summary: text.into(),
            tokens_before,
        };
        assert_eq!(
            restored.history,
            vec![
                summary("second summary", 200),
                llm_user("four"),
                llm_user("five")
            ]
        );
        assert_eq!(
            restored.visible(),
            vec![
                llm_user("one"),
                llm_user("two"),
                llm_user("three"),
                summary("first summary", 100),
                llm_user("four"),
                llm_user("five"),
                summary("second summary", 200),
            ]
        );
    }
}
