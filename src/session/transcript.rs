//! The transcript format: one JSON object per line.
//!
//! The first line is a header (format version, session id, cwd, creation
//! time, parent session); every further line is an entry with an id, the id
//! of its parent entry and a timestamp, so a file can later hold branches.
//! Lines are appended whole and flushed at once by the session's single
//! writer, so a process killed at any moment leaves a file that loads: a
//! torn last line is skipped with a warning. Readers accept every format
//! version up to their own and ignore fields they do not know.
//!
//! ```text
//! {"type":"session","version":1,"id":"sess_1f2e","cwd":"/home/me/project","created":"2026-11-22T04:50:00.123Z"}
//! {"type":"message","id":"e1","parentId":null,"timestamp":"2026-11-22T04:50:01.000Z","message":{"role":"user","content":[{"type":"text","text":"What does hello.txt say?"}]}}
//! {"type":"message","id":"e2","parentId":"e1","timestamp":"2026-11-22T04:50:03.500Z","message":{"role":"assistant","content":[{"type":"tool_call","id":"toolu_01","name":"read","arguments":{"path":"hello.txt"}}],"provider":"anthropic","api":"anthropic-messages","model":"claude-sonnet-4-5","stop_reason":"tool_use","usage":{"input":9,"output":20,"cache_read":0,"cache_write":0}}}
//! {"type":"tool_result","id":"e3","parentId":"e2","timestamp":"2026-11-22T04:50:03.600Z","message":{"tool_call_id":"toolu_01","tool_name":"read","content":[{"type":"text","text":"hello"}],"is_error":false},"call":{"title":"Read hello.txt","kind":"read","locations":[{"path":"/home/me/project/hello.txt","line":null}]}}
//! {"type":"message","id":"e4","parentId":"e3","timestamp":"2026-11-22T04:50:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"It says hello."}],"provider":"anthropic","api":"anthropic-messages","model":"claude-sonnet-4-5","stop_reason":"stop","usage":{"input":40,"output":6,"cache_read":0,"cache_write":0}}}
//! {"type":"model_change","id":"e5","parentId":"e4","timestamp":"2026-11-22T04:51:00.000Z","model":"anthropic/claude-haiku-4-5"}
//! {"type":"mode_change","id":"e6","parentId":"e5","timestamp":"2026-11-22T04:51:10.000Z","mode":"accept-edits"}
//! ```
//!
//! Entry types ([`Record`]): `message` (user or assistant; user messages
//! carry the time line the model read with them as `time`; assistant
//! messages carry provider, api, model, auth profile, stop reason, error
//! and usage), `tool_result` (with what the editor was shown: `call`,
//! `display`, `details`), `model_change`, `thinking_change`, `mode_change`,
//! `queue_change`, `system_prompt`, `title`, `command`, `notice`,
//! `compaction`, `runtime`, `workflow`, and for checkpoints `checkpoint`
//! (what a run changed in the files), `rewind` and `redo` (the
//! conversation goes back, or forward again, and the files with it) and
//! `restore_end` (which files were put back).
//!
//! Versions: 1 is the first and current format. A pincer reads every
//! version up to its own and refuses newer files with a message that says
//! so. The example above is kept as `fixtures/sessions/v1.jsonl`, frozen:
//! every later pincer must still load it (`tests/it/sessions.rs`).

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::agent::{Mode, QueueMode};
use crate::checkpoint::turn::FileChange;
use crate::context::ClientPrompt;
use crate::llm::{Message, ThinkingLevel, ToolResultMessage};
use crate::tools::{CallInfo, Display};

mod read;

/// The format this pincer writes; it reads this and every older one.
pub const VERSION: u32 = 1;

/// The first line of a transcript.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// Always `"session"`.
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
    pub id: String,
    pub cwd: PathBuf,
    /// RFC 3339.
    pub created: String,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The session whose `task` call started this one (a helper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<String>,
    /// The helper's agent definition (`general-purpose` without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The parent's `task` call that started this helper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
}

impl Header {
    pub fn new(id: impl Into<String>, cwd: impl Into<PathBuf>, parent: Option<String>) -> Self {
        Self {
            kind: "session".to_string(),
            version: VERSION,
            id: id.into(),
            cwd: cwd.into(),
            created: now(),
            parent,
            spawned_by: None,
            agent: None,
            call: None,
        }
    }

    /// The header of a helper that session `by` started, as `agent`,
    /// with its `task` call `call`.
    pub fn spawned(
        mut self,
        by: impl Into<String>,
        agent: impl Into<String>,
        call: impl Into<String>,
    ) -> Self {
        self.spawned_by = Some(by.into());
        self.agent = Some(agent.into());
        self.call = Some(call.into());
        self
    }
}

/// What an entry records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// A user or assistant message, as the model sees it.
    Message {
        message: Message,
        /// The time line the model read closing a user message (see
        /// `AgentMessage::Time`), kept so that a loaded session sends its
        /// earlier messages byte for byte as before and the provider's
        /// prompt cache still matches. Absent in transcripts written
        /// before pincer kept it, and for assistant messages.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time: Option<String>,
    },
    /// A tool's result, with what the editor showed for the call.
    ToolResult {
        message: ToolResultMessage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<CallInfo>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        display: Vec<Display>,
        #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
        details: serde_json::Value,
    },
    ModelChange {
        model: String,
    },
    ThinkingChange {
        level: ThinkingLevel,
    },
    ModeChange {
        mode: Mode,
    },
    /// The sandbox the session's commands run in, as the user last chose
    /// it for this session.
    SandboxChange {
        sandbox: crate::tools::sandbox::SandboxMode,
    },
    /// What a message sent while the agent works does (`steer` or
    /// `follow-up`), as the user last chose it for this session.
    QueueChange {
        queue: QueueMode,
    },
    /// The instructions the client gave for the session (ACP's
    /// `systemPrompt`), as it last gave them; they hold until it gives
    /// others.
    SystemPrompt {
        prompt: ClientPrompt,
    },
    /// A better title for the session, written by a model after the first
    /// turn, or the user's own name for it (`by_user`: a gateway client
    /// renamed it); the latest one counts, and once the user named the
    /// session a model no longer does.
    Title {
        title: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_user: bool,
    },
    /// A command the user sent in place of a prompt (`/compact`): shown
    /// again as the user's message on replay, never sent to the model.
    Command {
        text: String,
    },
    /// Something pincer told the user; never sent to the model.
    Notice {
        text: String,
    },
    /// A helper's run ended (its last entry): how (`end_turn`,
    /// `cancelled`, `error`, …) and what it cost. A helper's transcript
    /// without one was interrupted (pincer was killed while it ran).
    HelperEnd {
        stop: String,
        #[serde(default)]
        cost: f64,
    },
    /// The history was compacted: the model now sees `summary` and then
    /// only the last `kept` of its messages. The older entries stay in the
    /// file. `read_files` and `modified_files` are the files the whole
    /// summarised history touched (cumulative across compactions; absent
    /// in transcripts written before pincer kept them).
    Compaction {
        summary: String,
        kept: usize,
        tokens_before: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        read_files: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modified_files: Vec<String>,
    },
    /// Which runtime answered the run that ends here (`claude-code`, or
    /// `native` when Claude Code could not and pincer's own loop did);
    /// a Claude Code run names the Claude Code session it continued, which
    /// a later run resumes.
    Runtime {
        runtime: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<String>,
    },
    /// A workflow run's start (`{"event": "start", "run", "workflow",
    /// "inputs"}`), each step it finished (`"step"`: `step`, `kind`,
    /// `input`, `output`, `error`) and its end (`"end"`: `ok`, `output` or
    /// `error`). A run with no end was interrupted and can be resumed from
    /// its last finished step. Never sent to the model.
    Workflow {
        data: serde_json::Value,
    },
    /// What a run changed in the working directory: each path as it was
    /// before the run's first change and after its last, and the files its
    /// tools wrote outside it (named, never restored). `prompt_id` is the
    /// user message (or command) that started the run; `off`: the
    /// session recorded no files (checkpoints off), so undo takes back
    /// only the conversation. Never sent to the model.
    Checkpoint {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_id: Option<String>,
        files: Vec<FileChange>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        outside: Vec<PathBuf>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        off: bool,
    },
    /// Undo or rewind: the conversation goes back to before the entry
    /// `to` (a run's prompt), and the entries after it leave what the
    /// model sees (they stay in the file). `files` are the paths put back,
    /// each from `before` (what the restore expects to find) to `after`
    /// (what it writes). Written before a file is touched; a
    /// `restore_end` follows once they are.
    Rewind {
        to: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<FileChange>,
    },
    /// Redo: the rewind `of` is reversed, its entries come back, and
    /// `files` are put back as for a rewind.
    Redo {
        of: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<FileChange>,
    },
    /// The files of the rewind or redo `of` were put back: `restored`
    /// were, `left` were not (with why). A rewind without one was cut off
    /// (the process died): the next load checks its files.
    RestoreEnd {
        of: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        restored: Vec<PathBuf>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left: Vec<LeftFile>,
    },
}

/// A file a restore did not put back, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftFile {
    pub path: PathBuf,
    pub why: String,
}

/// One line after the header.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub id: String,
    pub parent_id: Option<String>,
    /// RFC 3339 with milliseconds.
    pub timestamp: String,
    #[serde(flatten)]
    pub record: Record,
}

/// Why a transcript could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    #[error("cannot access {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a pincer transcript: {message}")]
    NotATranscript { path: PathBuf, message: String },
    #[error(
        "{path} was written by a newer pincer (format {version}, this one reads up to {VERSION}); update pincer"
    )]
    TooNew { path: PathBuf, version: u32 },
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// The data dir of a transcript at `<data dir>/sessions/<cwd dir>/<file>`.
fn data_dir_of(path: &Path) -> Option<&Path> {
    let sessions = path.parent()?.parent()?;
    (sessions.file_name()? == "sessions").then_some(sessions.parent()?)
}

/// Appends entries to one transcript. There is one writer per session.
///
/// A new session's file is written when the session is created, header
/// only: a session that was never prompted can still be resumed or loaded
/// by another process (a client that creates a session in one process and
/// prompts it from the next). Listings skip such files until they hold a
/// message, and [`super::sweep_unprompted`] removes them after a while.
///
/// The file is not held open: every append opens it, writes whole lines in
/// one call and closes it again, so that a process with thousands of
/// sessions holds no descriptor per session.
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    /// The header line, to write the file again if it vanished before the
    /// session was ever prompted (the sweep of never-prompted files).
    header: String,
    /// Whether a message (or workflow run) is in the file: from then on a
    /// vanished file was deleted on purpose and is not brought back.
    prompted: bool,
    /// Looks for the first prompt until it is written, to keep its title
    /// beside the transcript for listings ([`super::prompt_title_path`]);
    /// `None` once it has been.
    prompt_title: Option<super::PromptTitle>,
    /// A write failed part-way: the file may end in a torn line, which the
    /// next write closes first.
    check_end: bool,
    last_id: Option<String>,
    next: u64,
}

impl Writer {
    /// A new transcript at `path` with `header`, written at once (see
    /// [`Writer`]); the file must not exist yet.
    pub fn create(path: &Path, header: &Header) -> Result<Self, TranscriptError> {
        let line = serde_json::to_string(header).map_err(|e| TranscriptError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        let writer = Self {
            path: path.to_path_buf(),
            header: line,
            prompted: false,
            prompt_title: Some(super::PromptTitle::default()),
            check_end: false,
            last_id: None,
            next: 1,
        };
        let mut file = writer.open_new()?;
        let header = writer.header_bytes();
        write_bytes(&mut file, &header).map_err(|source| TranscriptError::Io {
            path: writer.path.clone(),
            source,
        })?;
        crate::cluster::transcript_written(&writer.path, &header);
        Ok(writer)
    }

    /// Whether the transcript is on disk: from its creation on, unless a
    /// never-prompted one was swept meanwhile (the next write brings it
    /// back) or the session was deleted.
    pub fn is_written(&self) -> bool {
        self.path.is_file()
    }

    fn header_bytes(&self) -> Vec<u8> {
        let mut bytes = self.header.clone().into_bytes();
        bytes.push(b'\n');
        bytes
    }

    /// Creates the file of a new transcript (its directories for the user
    /// alone); it must not exist yet.
    fn open_new(&self) -> Result<std::fs::File, TranscriptError> {
        let path = &self.path;
        let io = |source| TranscriptError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let (Some(dir), Some(data_dir)) = (path.parent(), data_dir_of(path)) {
            super::create_private_dir(data_dir, dir).map_err(io)?;
        } else if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        super::private_file()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(io)
    }

    /// Continues an existing transcript after its last entry. A torn last
    /// line (the process was killed mid-write) is closed with a newline
    /// first, so it stays one skipped line instead of spoiling the next.
    pub fn append_to(path: &Path, loaded: &Transcript) -> Result<Self, TranscriptError> {
        let io = |source| TranscriptError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        // Transcripts an older pincer wrote readable by others are narrowed.
        super::narrow_file(path);
        if let (Some(dir), Some(data_dir)) = (path.parent(), data_dir_of(path)) {
            super::create_private_dir(data_dir, dir).map_err(io)?;
        }
        close_torn_line(&mut file).map_err(io)?;
        let header =
            serde_json::to_string(&loaded.header).map_err(|e| io(std::io::Error::other(e)))?;
        let mut prompt_title = Some(super::PromptTitle::default());
        for entry in &loaded.entries {
            if let Some(tracker) = &mut prompt_title
                && let Some(found) = tracker.see(&entry.record)
            {
                // A transcript from before the title was kept beside it.
                if !super::prompt_title_path(path).exists() {
                    keep_prompt_title(path, found.as_deref());
                }
                prompt_title = None;
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            header,
            prompted: loaded.entries.iter().any(|e| starts_use(&e.record)),
            prompt_title,
            check_end: false,
            last_id: loaded.entries.last().map(|e| e.id.clone()),
            next: loaded
                .entries
                .iter()
                .filter_map(|e| e.id.strip_prefix('e')?.parse::<u64>().ok())
                .max()
                .unwrap_or(0)
                + 1,
        })
    }

    /// The transcript's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as a child of the last entry; returns its id.
    pub fn append(&mut self, record: Record) -> Result<String, TranscriptError> {
        let id = self.reserve();
        self.append_as(id, record)
    }

    /// Takes the id the next entry would get, for an entry that is written
    /// later ([`Writer::append_as`]): an assistant message streams to the
    /// editor under its id before it is complete enough to store, and other
    /// entries (a retry notice) may be stored meanwhile.
    pub fn reserve(&mut self) -> String {
        let id = format!("e{}", self.next);
        self.next += 1;
        id
    }

    /// Appends one record under an id from [`Writer::reserve`].
    pub fn append_as(&mut self, id: String, record: Record) -> Result<String, TranscriptError> {
        let starts = starts_use(&record);
        let entry = Entry {
            id: id.clone(),
            parent_id: self.last_id.clone(),
            timestamp: now(),
            record,
        };
        let mut line = serde_json::to_string(&entry).map_err(|e| TranscriptError::Io {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push('\n');
        self.write_line(line.as_bytes())?;
        if starts {
            self.prompted = true;
        }
        if let Some(tracker) = &mut self.prompt_title
            && let Some(found) = tracker.see(&entry.record)
        {
            keep_prompt_title(&self.path, found.as_deref());
            self.prompt_title = None;
        }
        self.last_id = Some(id.clone());
        Ok(id)
    }

    /// Writes one whole line in one call, so a kill leaves at most one torn
    /// line at the end, and closes the file again. A never-prompted file
    /// that vanished (swept as abandoned while its session stayed open) is
    /// written again, header first.
    fn write_line(&mut self, line: &[u8]) -> Result<(), TranscriptError> {
        let io = |source| TranscriptError::Io {
            path: self.path.clone(),
            source,
        };
        let opened = std::fs::OpenOptions::new()
            .read(self.check_end)
            .append(true)
            .open(&self.path);
        let (mut file, bytes) = match opened {
            Ok(file) => (file, line.to_vec()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !self.prompted => {
                let mut bytes = self.header_bytes();
                bytes.extend_from_slice(line);
                (self.open_new()?, bytes)
            }
            Err(e) => return Err(io(e)),
        };
        if self.check_end {
            close_torn_line(&mut file).map_err(io)?;
            self.check_end = false;
        }
        if let Err(e) = write_bytes(&mut file, &bytes) {
            self.check_end = true;
            return Err(io(e));
        }
        // The header went to the cluster's store when the transcript was
        // created: one written again after a sweep is not stored twice.
        crate::cluster::transcript_written(&self.path, line);
        Ok(())
    }
}

/// Saves the first prompt's title beside the transcript. A failure costs
/// only speed: a listing then reads the transcript up to the prompt.
fn keep_prompt_title(path: &Path, title: Option<&str>) {
    if let Err(error) = super::save_prompt_title(path, title.unwrap_or_default()) {
        tracing::debug!(path = %path.display(), %error, "cannot keep the first prompt's title beside the transcript");
    }
}

/// Whether a record shows the session in use: a message, or a workflow the
/// user ran. Until one, the session is not listed.
fn starts_use(record: &Record) -> bool {
    matches!(record, Record::Message { .. } | Record::Workflow { .. })
}

/// Writes and flushes `bytes` in one call.
fn write_bytes(file: &mut std::fs::File, bytes: &[u8]) -> std::io::Result<()> {
    file.write_all(bytes).and_then(|()| file.flush())
}

/// Ends a torn last line (a kill or a failed write mid-line) with a
/// newline, so the next entry starts afresh. `file` is open for reading
/// and appending.
fn close_torn_line(file: &mut std::fs::File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8; 1];
    file.seek(std::io::SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] != b'\n' {
        file.write_all(b"\n")?;
    }
    Ok(())
}

/// A transcript as read from disk.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    pub header: Header,
    pub entries: Vec<Entry>,
    /// Lines that could not be read (a torn last line after a kill), with
    /// their line numbers; they were skipped.
    pub skipped: Vec<usize>,
}

/// Reads a transcript. A line that does not parse is skipped with a
/// warning; only a missing or foreign header is an error.
///
/// The file is read in one go and long transcripts are parsed on several
/// threads: loading is what an editor waits for when it reopens a session.
pub fn load(path: &Path) -> Result<Transcript, TranscriptError> {
    let bytes = read_whole(path).map_err(|source| TranscriptError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &bytes)
}

/// A transcript's text read from elsewhere than a file (a cluster's
/// store): `path` only names it in errors.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Transcript, TranscriptError> {
    let (first, rest) = match memchr::memchr(b'\n', bytes) {
        Some(end) => (&bytes[..end], &bytes[end + 1..]),
        None => (bytes, &[][..]),
    };
    let not_a_transcript = |message: String| TranscriptError::NotATranscript {
        path: path.to_path_buf(),
        message,
    };
    if first.iter().all(u8::is_ascii_whitespace) {
        return Err(not_a_transcript("the file is empty".to_string()));
    }
    let header: Header = serde_json::from_slice(first)
        .map_err(|e| not_a_transcript(format!("the first line is not a session header ({e})")))?;
    if header.kind != "session" {
        return Err(not_a_transcript(format!(
            "the header's type is `{}`, not `session`",
            header.kind
        )));
    }
    if header.version > VERSION {
        return Err(TranscriptError::TooNew {
            path: path.to_path_buf(),
            version: header.version,
        });
    }
    // Line numbers start at 1 and the header is line 1. (memchr finds the
    // line ends many bytes at a time: a long transcript is megabytes.)
    let mut lines: Vec<(usize, &[u8])> = Vec::new();
    let mut start = 0;
    let ends = memchr::memchr_iter(b'\n', rest).chain(std::iter::once(rest.len()));
    for (index, end) in ends.enumerate() {
        let line = &rest[start..end];
        if !line.iter().all(u8::is_ascii_whitespace) {
            lines.push((index + 2, line));
        }
        start = end + 1;
    }
    // Each entry is moved once, from the thread that parsed it into its
    // place, rather than gathered per thread and then copied over.
    let mut entries = Vec::with_capacity(lines.len());
    let mut skipped = Vec::new();
    parse_lines(&lines, &mut |(number, result)| {
        match result {
            Ok(entry) => entries.push(entry),
            Err(e) => {
                // Invalid UTF-8 or JSON is what a torn write looks like.
                tracing::warn!(path = %path.display(), line = number, error = %e, "skipping an unreadable transcript line");
                skipped.push(number);
            }
        }
        true
    });
    Ok(Transcript {
        header,
        entries,
        skipped,
    })
}

/// From this size a file is read in two halves at once.
const READ_IN_HALVES_FROM: usize = 1 << 20;

/// Reads a whole file, a long one in two halves at once on two cores:
/// most of the time a long read takes is the kernel giving the buffer its
/// pages, which two cores do in half the time.
fn read_whole(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        let len = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
        if len >= READ_IN_HALVES_FROM && len < isize::MAX as usize && crate::parallel::cores() >= 2
        {
            // Zeroed, so that the allocator hands over fresh pages without
            // touching them: the reads fault them in, each half on its own core.
            let mut bytes = vec![0u8; len];
            let (first, second) = bytes.split_at_mut(len / 2);
            let read = std::thread::scope(|scope| {
                let other = scope.spawn(|| file.read_exact_at(second, (len / 2) as u64));
                let mine = file.read_exact_at(first, 0);
                let other = other
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                mine.and(other)
            });
            match read {
                Ok(()) => return Ok(bytes),
                // Shortened meanwhile: read what there is now, below.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
                Err(e) => return Err(e),
            }
        }
    }
    // (Reads at an offset leave the file's position at its start.)
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Below this many lines one thread is quicker than several.
const PARALLEL_FROM: usize = 512;

type Parsed = (usize, Result<Entry, serde_json::Error>);

/// Parses numbered lines into entries, handed to `take` in order, using
/// the machine's cores for long transcripts.
fn parse_lines(lines: &[(usize, &[u8])], take: &mut dyn FnMut(Parsed) -> bool) {
    // A line is checked to be UTF-8 as a whole, which is quicker than
    // serde_json checking each string in it on its own.
    let parse = |chunk: &[(usize, &[u8])], out: &mut dyn FnMut(Parsed)| {
        for (number, line) in chunk {
            let entry = match std::str::from_utf8(line) {
                Ok(line) => serde_json::from_str::<Entry>(line),
                Err(e) => Err(<serde_json::Error as serde::de::Error>::custom(e)),
            };
            out((*number, entry));
        }
    };
    crate::parallel::stream_chunks(lines, PARALLEL_FROM, parse, take)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Content;
    use pretty_assertions::assert_eq;

    fn user(text: &str) -> Record {
        Record::Message {
            message: Message::User {
                content: vec![Content::text(text)],
            },
            time: None,
        }
    }

    fn write_sample(path: &Path) -> Vec<Record> {
        let records = vec![
            user("hello"),
            Record::ToolResult {
                message: ToolResultMessage {
                    tool_call_id: "toolu_01".into(),
                    tool_name: "edit".into(),
                    content: vec![Content::text("Successfully replaced 1 block(s)")],
                    is_error: false,
                },
                call: Some(CallInfo {
                    title: "Edit a.txt".into(),
                    kind: crate::tools::ToolKind::Edit,
                    locations: vec![crate::tools::Location {
                        path: "/p/a.txt".into(),
                        line: Some(3),
                    }],
                }),
                display: vec![Display::Diff {
                    path: "/p/a.txt".into(),
                    old_text: Some("a\n".into()),
                    new_text: "b\n".into(),
                }],
                details: serde_json::json!({"replacements": 1}),
            },
            Record::ModelChange {
                model: "openai/gpt-5".into(),
            },
            Record::ThinkingChange {
                level: ThinkingLevel::High,
            },
            Record::ModeChange {
                mode: Mode::AcceptEdits,
            },
            Record::QueueChange {
                queue: QueueMode::FollowUp,
            },
            Record::Notice {
                text: "retrying".into(),
            },
            Record::Command {
                text: "/compact keep the parser notes".into(),
            },
            Record::Title {
                title: "Fix the parser".into(),
                by_user: true,
            },
            Record::Compaction {
                summary: "## Goal\nFix the parser".into(),
                kept: 3,
                tokens_before: 180_000,
                read_files: vec!["src/lexer.rs".into()],
                modified_files: vec!["src/parser.rs".into()],
            },
        ];
        let mut writer = Writer::create(path, &Header::new("sess_1", "/p", None)).unwrap();
        for record in &records {
            writer.append(record.clone()).unwrap();
        }
        records
    }

    /// An entry reads the same whichever order its keys come in: `type`
    /// before `message` (as pincer writes it) reads the message in one
    /// pass, after it keeps it raw first. Unknown keys are skipped; a
    /// missing `type`, `id` or `timestamp` is an error.
    #[test]
    fn entries_read_the_same_in_any_key_order() {
        let message = r#"{"role":"user","content":[{"type":"text","text":"hi"}]}"#;
        let result = r#"{"tool_call_id":"t1","tool_name":"read","content":[{"type":"text","text":"x"}],"is_error":false}"#;
        for (kind, message) in [("message", message), ("tool_result", result)] {
            let first = format!(
                r#"{{"type":"{kind}","id":"e1","parentId":null,"timestamp":"t","message":{message},"future":[1,{{"a":2}}]}}"#
            );
            let last = format!(
                r#"{{"id":"e1","future":{{"b":[]}},"message":{message},"timestamp":"t","type":"{kind}"}}"#
            );
            let first: Entry = serde_json::from_str(&first).unwrap();
            let last: Entry = serde_json::from_str(&last).unwrap();
            assert_eq!(first, last);
            assert_eq!(first.id, "e1");
            assert_eq!(first.parent_id, None);
        }
        for (text, missing) in [
            (r#"{"id":"e1","timestamp":"t","message":{}}"#, "type"),
            (r#"{"type":"notice","timestamp":"t","text":"x"}"#, "id"),
            (r#"{"type":"notice","id":"e1","text":"x"}"#, "timestamp"),
        ] {
            let error = serde_json::from_str::<Entry>(text).unwrap_err().to_string();
            assert!(
                error.contains(&format!("missing field `{missing}`")),
                "{error}"
            );
        }
        let error =
            serde_json::from_str::<Entry>(r#"{"type":"message","id":"e1","timestamp":"t"}"#)
                .unwrap_err()
                .to_string();
        assert!(
            error.contains("a `message` entry needs `message`"),
            "{error}"
        );
        let error = serde_json::from_str::<Entry>(
            r#"{"type":"message","id":"e1","timestamp":"t","message":{"role":"user"}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("missing field `content`"), "{error}");
    }

    /// The client's prompt sits in its own `prompt` object, so its `mode`
    /// and `text` never meet the `mode` and `text` of other entry types.
    #[test]
    fn a_client_prompt_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let record = Record::SystemPrompt {
            prompt: ClientPrompt {
                mode: crate::context::ClientPromptMode::Override,
                text: "You review code.".into(),
            },
        };
        let mut writer = Writer::create(&path, &Header::new("sess_1", "/p", None)).unwrap();
        writer.append(record.clone()).unwrap();
        writer.append(user("hello")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!(
            (&line["type"], &line["prompt"]),
            (
                &serde_json::json!("system_prompt"),
                &serde_json::json!({"mode": "override", "text": "You review code."})
            )
        );
        let loaded = load(&path).unwrap();
        let got: Vec<Record> = loaded.entries.iter().map(|e| e.record.clone()).collect();
        assert_eq!(got, vec![record, user("hello")]);
    }

    /// The descriptors of this process that name `path`.
    fn descriptors_of(path: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
            .count()
    }

    /// A session holds no descriptor between writes: a gateway with
    /// thousands of sessions must not run out of them.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_writer_holds_no_descriptor_between_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut writer = Writer::create(&path, &Header::new("sess_fd", "/p", None)).unwrap();
        assert_eq!(descriptors_of(&path), 0);
        writer.append(user("one")).unwrap();
        assert_eq!(descriptors_of(&path), 0);
        let loaded = load(&path).unwrap();
        let mut again = Writer::append_to(&path, &loaded).unwrap();
        again.append(user("two")).unwrap();
        assert_eq!(descriptors_of(&path), 0);
        let got: Vec<Record> = load(&path)
            .unwrap()
            .entries
            .into_iter()
            .map(|e| e.record)
            .collect();
        assert_eq!(got, vec![user("one"), user("two")]);
    }

    /// In a cluster every line also goes to the store: a transcript
    /// swept before its first prompt and written again gives it the
    /// header once.
    #[test]
    fn a_transcript_written_again_after_a_sweep_gives_the_store_its_header_once() {
        let stored: std::sync::Arc<parking_lot::Mutex<Vec<String>>> = Default::default();
        let into = stored.clone();
        crate::cluster::hand_transcripts_to(std::sync::Arc::new(
            move |session: &str, lines: Vec<String>| {
                if session == "sess_swept" {
                    into.lock().extend(lines);
                }
            },
        ));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sess_swept.jsonl");
        let mut writer = Writer::create(&path, &Header::new("sess_swept", "/p", None)).unwrap();
        std::fs::remove_file(&path).unwrap();
        writer.append(user("hello")).unwrap();
        writer.append(user("again")).unwrap();
        let lines = stored.lock().clone();
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(lines[0].contains("sess_swept"), "{}", lines[0]);
        assert!(
            lines[1].contains("hello") && lines[2].contains("again"),
            "{lines:#?}"
        );
        // The file has it once too.
        assert_eq!(load(&path).unwrap().entries.len(), 2);
    }

    /// A new session is on disk before its first prompt (another process
    /// may resume it), private to its owner; if its file vanishes before
    /// the first prompt (swept as abandoned), the next write brings it
    /// back, header first.
    #[test]
    fn a_new_transcript_is_written_at_once_and_comes_back_if_swept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut writer = Writer::create(&path, &Header::new("sess_new", "/p", None)).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(
            (loaded.header.id.as_str(), loaded.entries.len()),
            ("sess_new", 0)
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_file(&path).unwrap();
        assert!(!writer.is_written());
        writer
            .append(Record::ModeChange {
                mode: Mode::AcceptEdits,
            })
            .unwrap();
        writer.append(user("hello")).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.header.id, "sess_new");
        assert_eq!(loaded.entries.len(), 2);
        // Once prompted, a removed transcript was deleted on purpose.
        std::fs::remove_file(&path).unwrap();
        assert!(writer.append(user("again")).is_err());
        assert!(!path.exists());
    }

    #[test]
    fn the_sandbox_the_user_chose_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        write_sample(&path);
        let loaded = load(&path).unwrap();
        let mut writer = Writer::append_to(&path, &loaded).unwrap();
        let change = Record::SandboxChange {
            sandbox: crate::tools::sandbox::SandboxMode::ReadOnly,
        };
        writer.append(change.clone()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.lines()
                .last()
                .unwrap()
                .contains(r#""type":"sandbox_change""#),
            "{text}"
        );
        let reloaded = load(&path).unwrap();
        assert_eq!(reloaded.entries.len(), loaded.entries.len() + 1);
        assert_eq!(reloaded.entries.last().unwrap().record, change);
    }

    /// A helper's transcript: its header names its parent, definition and
    /// call, and its end (how it stopped, what it cost) reads back, which
    /// is what tells an ended helper from an interrupted one.
    #[test]
    fn a_helpers_header_and_end_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let header = Header::new("sess_h", "/", None).spawned("sess_p", "reviewer", "t7");
        let mut writer = Writer::create(&path, &header).unwrap();
        writer.append(user("review it")).unwrap();
        let end = Record::HelperEnd {
            stop: "cancelled".into(),
            cost: 0.25,
        };
        writer.append(end.clone()).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.skipped, Vec::<usize>::new());
        assert_eq!(loaded.header, header);
        assert_eq!(loaded.header.call.as_deref(), Some("t7"));
        assert_eq!(loaded.entries.last().unwrap().record, end);
    }

    #[test]
    fn entries_round_trip_in_order_with_parent_links() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let records = write_sample(&path);
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.header.id, "sess_1");
        assert_eq!(loaded.header.version, VERSION);
        assert_eq!(loaded.skipped, Vec::<usize>::new());
        let got: Vec<Record> = loaded.entries.iter().map(|e| e.record.clone()).collect();
        assert_eq!(got, records);
        let parents: Vec<Option<&str>> = loaded
            .entries
            .iter()
            .map(|e| e.parent_id.as_deref())
            .collect();
        assert_eq!(
            parents,
            vec![
                None,
                Some("e1"),
                Some("e2"),
                Some("e3"),
                Some("e4"),
                Some("e5"),
                Some("e6"),
                Some("e7"),
                Some("e8"),
                Some("e9")
            ]
        );

        // Appending later continues the chain.
        let mut writer = Writer::append_to(&path, &loaded).unwrap();
        assert_eq!(writer.append(user("again")).unwrap(), "e11");
        let reloaded = load(&path).unwrap();
        assert_eq!(
            reloaded.entries.last().unwrap().parent_id.as_deref(),
            Some("e10")
        );
    }

    /// An assistant message streams under the id it is stored with later,
    /// whatever is stored meanwhile; the next process continues after it.
    #[test]
    fn a_reserved_id_is_kept_for_its_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut writer = Writer::create(&path, &Header::new("sess_r", "/", None)).unwrap();
        assert_eq!(writer.append(user("one")).unwrap(), "e1");
        let reserved = writer.reserve();
        assert_eq!(reserved, "e2");
        let notice = Record::Notice {
            text: "retrying".into(),
        };
        assert_eq!(writer.append(notice).unwrap(), "e3");
        assert_eq!(writer.append_as(reserved, user("two")).unwrap(), "e2");
        let loaded = load(&path).unwrap();
        let ids: Vec<(&str, Option<&str>)> = loaded
            .entries
            .iter()
            .map(|e| (e.id.as_str(), e.parent_id.as_deref()))
            .collect();
        assert_eq!(
            ids,
            vec![("e1", None), ("e3", Some("e1")), ("e2", Some("e3"))]
        );
        let mut writer = Writer::append_to(&path, &loaded).unwrap();
        assert_eq!(writer.append(user("three")).unwrap(), "e4");
    }

    #[test]
    fn a_file_cut_anywhere_still_loads_everything_before_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        write_sample(&path);
        let full = std::fs::read(&path).unwrap();
        let header_len = full.iter().position(|b| *b == b'\n').unwrap() + 1;
        let cut_path = dir.path().join("cut.jsonl");
        for cut in header_len..=full.len() {
            std::fs::write(&cut_path, &full[..cut]).unwrap();
            let loaded = load(&cut_path).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            let complete_lines = full[header_len..cut]
                .iter()
                .filter(|b| **b == b'\n')
                .count();
            let last_newline = full[..cut].iter().rposition(|b| *b == b'\n').unwrap();
            let tail = &full[last_newline + 1..cut];
            // A tail that stops right before its newline is a whole entry.
            let tail_whole = !tail.is_empty() && full.get(cut) == Some(&b'\n');
            let tail_torn = !tail.is_empty() && !tail_whole;
            assert_eq!(
                loaded.entries.len(),
                complete_lines + usize::from(tail_whole),
                "cut at {cut}"
            );
            assert_eq!(loaded.skipped.len(), usize::from(tail_torn), "cut at {cut}");
        }
    }

    #[test]
    fn appending_after_a_torn_line_keeps_the_new_entries_readable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        write_sample(&path);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(b"{\"type\":\"notice\",\"id\":\"e11\",\"par");
        std::fs::write(&path, &bytes).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.entries.len(), 10);
        let mut writer = Writer::append_to(&path, &loaded).unwrap();
        writer.append(user("after the crash")).unwrap();
        let reloaded = load(&path).unwrap();
        assert_eq!(reloaded.entries.len(), 11);
        assert_eq!(reloaded.skipped, vec![12]);
        assert_eq!(reloaded.entries[10].record, user("after the crash"));
        assert_eq!(reloaded.entries[10].parent_id.as_deref(), Some("e10"));
    }

    #[test]
    fn entries_of_unknown_types_or_missing_fields_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let head =
            r#"{"type":"session","version":1,"id":"x","cwd":"/","created":"2026-01-01T00:00:00Z"}"#;
        let good = r#"{"type":"model_change","id":"e3","parentId":null,"timestamp":"t","model":"a/b","extra":1}"#;
        let lines = [
            head,
            r#"{"type":"hologram","id":"e1","parentId":null,"timestamp":"t"}"#,
            r#"{"type":"model_change","id":"e2","parentId":null,"timestamp":"t"}"#,
            r#"{"type":"message","id":"e2","parentId":null,"timestamp":"t","message":{"role":"robot"}}"#,
            good,
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.skipped, vec![2, 3, 4]);
        assert_eq!(
            loaded.entries[0].record,
            Record::ModelChange {
                model: "a/b".into()
            }
        );
    }

    #[test]
    fn a_long_transcript_is_read_in_halves_as_it_is_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut text = String::from(
            r#"{"type":"session","version":1,"id":"x","cwd":"/","created":"2026-01-01T00:00:00Z"}"#,
        );
        let mut count = 0;
        while text.len() <= 2 * READ_IN_HALVES_FROM {
            count += 1;
            text.push_str(&format!(
                "\n{{\"type\":\"notice\",\"id\":\"e{count}\",\"parentId\":null,\"timestamp\":\"t\",\"text\":\"notice {count} {}\"}}",
                "é".repeat(count % 97)
            ));
        }
        std::fs::write(&path, &text).unwrap();
        assert_eq!(read_whole(&path).unwrap(), text.as_bytes());
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.skipped, Vec::<usize>::new());
        assert_eq!(loaded.entries.len(), count);
        assert_eq!(
            loaded.entries[count / 2].record,
            Record::Notice {
                text: format!(
                    "notice {} {}",
                    count / 2 + 1,
                    "é".repeat((count / 2 + 1) % 97)
                )
            }
        );
    }

    #[test]
    fn a_line_that_is_not_utf8_is_skipped_and_the_rest_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut bytes = br#"{"type":"session","version":1,"id":"x","cwd":"/","created":"2026-01-01T00:00:00Z"}"#.to_vec();
        bytes.extend_from_slice(b"\n{\"type\":\"notice\",\"id\":\"e1\",\"parentId\":null,\"timestamp\":\"t\",\"text\":\"caf\xc3\"}\n");
        bytes.extend_from_slice(br#"{"type":"notice","id":"e2","parentId":null,"timestamp":"t","text":"caf\u00e9 \u2014 ok"}"#);
        std::fs::write(&path, &bytes).unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(loaded.skipped, vec![2]);
        assert_eq!(
            loaded.entries.iter().map(|e| &e.record).collect::<Vec<_>>(),
            vec![&Record::Notice {
                text: "café — ok".into()
            }]
        );
    }

    #[test]
    fn newer_formats_and_foreign_files_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "{\"type\":\"session\",\"version\":99,\"id\":\"x\",\"cwd\":\"/\",\"created\":\"2030-01-01T00:00:00Z\"}\n").unwrap();
        assert!(matches!(
            load(&path),
            Err(TranscriptError::TooNew { version: 99, .. })
        ));
        std::fs::write(&path, "not json\n").unwrap();
        assert!(matches!(
            load(&path),
            Err(TranscriptError::NotATranscript { .. })
        ));
        std::fs::write(&path, "").unwrap();
        assert!(matches!(
            load(&path),
            Err(TranscriptError::NotATranscript { .. })
        ));
    }

    #[test]
    fn unknown_fields_from_later_versions_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(
            &path,
            "{\"type\":\"session\",\"version\":1,\"id\":\"x\",\"cwd\":\"/\",\"created\":\"2026-01-01T00:00:00Z\",\"future\":true}\n\
             {\"type\":\"notice\",\"id\":\"e1\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00Z\",\"text\":\"hi\",\"extra\":1}\n",
        )
        .unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(
            loaded.entries[0].record,
            Record::Notice { text: "hi".into() }
        );
    }
}
