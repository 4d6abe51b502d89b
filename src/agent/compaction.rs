//! Keeping long sessions inside the model's window.
//!
//! The context size is the last model call's reported usage plus an
//! estimate (four characters a token, an image 1,200) for what came after.
//! When it passes the window minus a reserve, the oldest history, up to the
//! most recent ~20,000 tokens and never between a tool call and its result,
//! is replaced by a structured summary the model writes; a later compaction
//! updates the previous summary instead of starting over, and the files
//! read and modified so far accumulate across compactions. The raw history
//! stays in the transcript; only the model's context shrinks.

use std::collections::BTreeSet;

use futures::StreamExt;

use super::AgentMessage;
use crate::llm::{
    self, AssistantContent, Content, LlmError, Message, Model, Request, Secret, StreamConfig,
    StreamEvent, ThinkingLevel,
};

/// Tokens kept free for the model's answer and the next turn.
pub const DEFAULT_RESERVE_TOKENS: u64 = 16_384;
/// The reserve is raised to this for windows large enough to afford it.
pub const RESERVE_FLOOR: u64 = 20_000;
/// How much recent history survives a compaction unsummarised.
pub const KEEP_RECENT_TOKENS: u64 = 20_000;
/// What an image is counted as.
const IMAGE_TOKENS: u64 = 1_200;
/// Tool results are cut to this many characters in the summary request.
const RESULT_CHARS: usize = 2_000;

/// The text that introduces a summary to the model.
pub const SUMMARY_PREFIX: &str =
    "The conversation history before this point was compacted into the following summary:";

/// Compaction settings of a session.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub enabled: bool,
    pub reserve_tokens: u64,
    pub keep_recent_tokens: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            enabled: true,
            reserve_tokens: DEFAULT_RESERVE_TOKENS,
            keep_recent_tokens: KEEP_RECENT_TOKENS,
        }
    }
}

impl Settings {
    /// The reserve for a window: at least [`RESERVE_FLOOR`] when the
    /// window is more than twice that, and never more than half a small
    /// window.
    pub fn reserve(&self, window: u64) -> u64 {
        if window > 2 * RESERVE_FLOOR {
            self.reserve_tokens.max(RESERVE_FLOOR)
        } else {
            self.reserve_tokens.min(window / 2)
        }
    }

    /// Whether a context of `tokens` should be compacted before the next
    /// call to a model with `window`.
    pub fn needs_compaction(&self, tokens: u64, window: u64) -> bool {
        self.enabled && window > 0 && tokens > window.saturating_sub(self.reserve(window))
    }
}

/// Why a compaction runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The context passed the window minus the reserve.
    Threshold,
    /// The provider said the request was too large.
    Overflow,
    /// The user asked (`/compact`).
    Manual,
}

impl Reason {
    pub fn id(self) -> &'static str {
        match self {
            Reason::Threshold => "threshold",
            Reason::Overflow => "overflow",
            Reason::Manual => "manual",
        }
    }
}

/// A compaction that happened.
#[derive(Clone, Debug, PartialEq)]
pub struct Compacted {
    /// The model's summary followed by the file lists.
    pub summary: String,
    /// Files read and modified in all the history summarised so far.
    pub files: FileOps,
    /// Messages the model still sees after the summary.
    pub kept: usize,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

/// Why a compaction could not be done.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("there is nothing old enough to summarise: the recent history alone fills the context")]
    NothingToCompact,
    #[error("the summary could not be written: {0}")]
    Llm(#[from] LlmError),
    #[error("the model returned an empty summary")]
    EmptySummary,
    #[error("compaction was cancelled")]
    Cancelled,
}

/// Estimated tokens of one message.
pub fn estimate(message: &Message) -> u64 {
    let chars: usize = match message {
        Message::User { content } => content.iter().map(content_chars).sum(),
        Message::ToolResult(result) => result.content.iter().map(content_chars).sum(),
        Message::Assistant(assistant) => assistant
            .content
            .iter()
            .map(|part| match part {
                AssistantContent::Text { text } => text.len(),
                AssistantContent::Thinking { thinking, .. } => thinking.len(),
                AssistantContent::ToolCall(call) => {
                    call.name.len() + call.arguments.to_string().len()
                }
            })
            .sum(),
    };
    let images = match message {
        Message::User { content } => count_images(content),
        Message::ToolResult(result) => count_images(&result.content),
        Message::Assistant(_) => 0,
    };
    (chars as u64).div_ceil(4) + images * IMAGE_TOKENS
}

fn content_chars(content: &Content) -> usize {
    match content {
        Content::Text { text } => text.len(),
        Content::Image { .. } => 0,
    }
}

fn count_images(content: &[Content]) -> u64 {
    content
        .iter()
        .filter(|c| matches!(c, Content::Image { .. }))
        .count() as u64
}

fn estimate_entry(entry: &AgentMessage) -> u64 {
    match entry {
        AgentMessage::Llm { message } => estimate(message),
        AgentMessage::Summary { summary, .. } => {
            (summary.len() + SUMMARY_PREFIX.len()).div_ceil(4) as u64
        }
        AgentMessage::Time { text } => text.len().div_ceil(4) as u64,
        AgentMessage::Notice { .. } => 0,
    }
}

/// The context's size: the last successful call's reported usage plus an
/// estimate for everything after it; all estimated (with the system
/// prompt) when no call has reported usage yet.
pub fn context_tokens(history: &[AgentMessage], system_prompt: &str) -> u64 {
    let last = history.iter().rposition(|entry| {
        matches!(entry, AgentMessage::Llm { message: Message::Assistant(a) }
            if a.usage.context_tokens() > 0 && a.stop_reason != llm::StopReason::Error)
    });
    match last {
        Some(index) => {
            let AgentMessage::Llm {
                message: Message::Assistant(assistant),
            } = &history[index]
            else {
                return 0;
            };
            assistant.usage.context_tokens()
                + history[index + 1..].iter().map(estimate_entry).sum::<u64>()
        }
        None => {
            (system_prompt.len() as u64).div_ceil(4)
                + history.iter().map(estimate_entry).sum::<u64>()
        }
    }
}

/// Where the kept history starts: walking back from the end until about
/// `keep_recent` tokens are covered, at a user or assistant message (never
/// at a tool result, which would part it from its call). `None` when no cut
/// leaves anything to summarise.
pub fn cut_point(history: &[AgentMessage], keep_recent: u64) -> Option<usize> {
    let start = usize::from(matches!(
        history.first(),
        Some(AgentMessage::Summary { .. })
    ));
    let mut kept = 0;
    let mut cut = None;
    for index in (start..history.len()).rev() {
        let entry = &history[index];
        kept += estimate_entry(entry);
        let cuttable = matches!(
            entry,
            AgentMessage::Llm {
                message: Message::User { .. } | Message::Assistant(_)
            }
        );
        if cuttable {
            // A user message keeps the time line before it.
            let with_time = index > 0 && matches!(history[index - 1], AgentMessage::Time { .. });
            cut = Some(if with_time { index - 1 } else { index });
            if kept >= keep_recent {
                break;
            }
        }
    }
    cut.filter(|&c| {
        c > start
            && history[start..c]
                .iter()
                .any(|entry| matches!(entry, AgentMessage::Llm { .. }))
    })
}

/// The files a stretch of history read and changed, from its tool calls.
///
/// The lists are cumulative: a compaction starts from the previous
/// summary's lists and adds what the newly summarised history touched, so
/// a file read before the first compaction is still named after the
/// tenth. They follow the model's summary as `<read-files>` and
/// `<modified-files>` sections (as in pi) and are stored beside it in the
/// transcript's compaction entry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileOps {
    /// Files only read (a file that was also changed is listed as modified).
    pub read: BTreeSet<String>,
    pub modified: BTreeSet<String>,
}

const READ_OPEN: &str = "<read-files>\n";
const READ_CLOSE: &str = "\n</read-files>";
const MODIFIED_OPEN: &str = "<modified-files>\n";
const MODIFIED_CLOSE: &str = "\n</modified-files>";

impl FileOps {
    /// From the `read`, `write` and `edit` calls of `messages`.
    pub fn collect(messages: &[&Message]) -> Self {
        let mut ops = FileOps::default();
        for message in messages {
            let Message::Assistant(assistant) = message else {
                continue;
            };
            for call in assistant.tool_calls() {
                let Some(path) = call.arguments.get("path").and_then(|p| p.as_str()) else {
                    continue;
                };
                match call.name.as_str() {
                    "read" => {
                        ops.read.insert(path.to_string());
                    }
                    "write" | "edit" => {
                        ops.modified.insert(path.to_string());
                    }
                    _ => {}
                }
            }
        }
        ops.normalise();
        ops
    }

    /// Adds `other`'s files to these.
    pub fn merge(&mut self, other: FileOps) {
        self.read.extend(other.read);
        self.modified.extend(other.modified);
        self.normalise();
    }

    /// A file that was changed is listed once, as modified.
    fn normalise(&mut self) {
        let modified = &self.modified;
        self.read.retain(|p| !modified.contains(p));
    }

    pub fn is_empty(&self) -> bool {
        self.read.is_empty() && self.modified.is_empty()
    }

    /// The sections that follow the model's summary: empty when no file
    /// was touched, else each non-empty list, one path a line.
    pub fn render(&self) -> String {
        let mut sections = Vec::new();
        for (open, files, close) in [
            (READ_OPEN, &self.read, READ_CLOSE),
            (MODIFIED_OPEN, &self.modified, MODIFIED_CLOSE),
        ] {
            if !files.is_empty() {
                let list: Vec<&str> = files.iter().map(String::as_str).collect();
                sections.push(format!("{open}{}{close}", list.join("\n")));
            }
        }
        if sections.is_empty() {
            String::new()
        } else {
            format!("\n\n{}", sections.join("\n\n"))
        }
    }

    /// Splits a summary written by [`compact`] into the model's text and
    /// the file lists that [`FileOps::render`] appended to it.
    pub fn split(summary: &str) -> (&str, FileOps) {
        let mut ops = FileOps::default();
        let mut text = summary.trim_end();
        for (open, close, modified) in [
            (MODIFIED_OPEN, MODIFIED_CLOSE, true),
            (READ_OPEN, READ_CLOSE, false),
        ] {
            let Some(body) = text.strip_suffix(close) else {
                continue;
            };
            let Some(start) = body.rfind(open) else {
                continue;
            };
            let files = body[start + open.len()..]
                .lines()
                .filter(|l| !l.is_empty())
                .map(String::from);
            if modified {
                ops.modified.extend(files);
            } else {
                ops.read.extend(files);
            }
            text = body[..start].trim_end();
        }
        ops.normalise();
        (text, ops)
    }
}

const SUMMARY_SYSTEM: &str = "You are a context summarization assistant. Your task is to read \
a conversation between a user and an AI coding assistant, then produce a structured summary \
that another instance of the assistant will use to continue the work. Do NOT continue the \
conversation. Do NOT respond to any questions in the conversation. ONLY output the structured \
summary.";

const SUMMARY_FORMAT: &str = "Use this format (keep each section short; write \"(none)\" for \
an empty one):

## Goal
What the user is trying to accomplish.

## Constraints
Requirements and preferences the user stated.

## Progress
### Done
### In Progress
### Blocked

## Key Decisions
Decisions made and why.

## Next Steps
What should happen next, in order.

## Critical Context
Exact names, paths, commands, error messages and values needed to continue.";

/// Serialises messages for the summariser: one labelled block per part,
/// tool results cut to [`RESULT_CHARS`].
pub fn serialize(messages: &[&Message]) -> String {
    let mut out = String::new();
    for message in messages {
        match message {
            Message::User { content } => {
                out.push_str("[User]: ");
                out.push_str(&text_of(content));
                out.push_str("\n\n");
            }
            Message::Assistant(assistant) => {
                let text = assistant.text();
                if !text.trim().is_empty() {
                    out.push_str(&format!("[Assistant]: {}\n\n", text.trim()));
                }
                let calls: Vec<String> = assistant
                    .tool_calls()
                    .map(|c| format!("{}({})", c.name, c.arguments))
                    .collect();
                if !calls.is_empty() {
                    out.push_str(&format!("[Assistant tool calls]: {}\n\n", calls.join("; ")));
                }
            }
            Message::ToolResult(result) => {
                let text = text_of(&result.content);
                let mut cut: String = text.chars().take(RESULT_CHARS).collect();
                if text.chars().count() > RESULT_CHARS {
                    cut.push_str(" […]");
                }
                let label = if result.is_error {
                    "Tool error"
                } else {
                    "Tool result"
                };
                out.push_str(&format!("[{label}]: {cut}\n\n"));
            }
        }
    }
    out
}

fn text_of(content: &[Content]) -> String {
    content
        .iter()
        .map(|c| match c {
            Content::Text { text } => text.as_str(),
            Content::Image { .. } => "[image]",
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The request that asks the model for a summary of `messages`, updating
/// `previous` when there is one.
pub fn summary_request(
    model: &Model,
    previous: Option<&str>,
    messages: &[&Message],
    instructions: Option<&str>,
    reserve: u64,
) -> Request {
    let mut prompt = format!("<conversation>\n{}</conversation>\n\n", serialize(messages));
    match previous {
        Some(previous) => prompt.push_str(&format!(
            "<previous-summary>\n{previous}\n</previous-summary>\n\nThe conversation above continues \
             from the previous summary. UPDATE the previous summary with it: keep what still holds, \
             move finished work to Done, add new decisions and next steps, drop what is obsolete.\n\n"
        )),
        None => prompt.push_str("Summarise the conversation above.\n\n"),
    }
    prompt.push_str(SUMMARY_FORMAT);
    if let Some(instructions) = instructions.filter(|i| !i.trim().is_empty()) {
        prompt.push_str(&format!(
            "\n\nThe user asked for this focus: {}",
            instructions.trim()
        ));
    }
    Request {
        system: SUMMARY_SYSTEM.to_string(),
        messages: vec![Message::User {
            content: vec![Content::text(prompt)],
        }],
        tools: Vec::new(),
        thinking: ThinkingLevel::Off,
        max_tokens: Some((reserve * 4 / 5).clamp(1_024, model.max_tokens.max(1_024))),
        cache_key: None,
        cache_retention: Default::default(),
    }
}

/// Summarises the history before the cut and replaces it with the summary.
#[allow(clippy::too_many_arguments)]
pub async fn compact(
    client: &reqwest::Client,
    model: &Model,
    key: Option<&Secret>,
    stream: StreamConfig,
    settings: &Settings,
    history: &mut Vec<AgentMessage>,
    system_prompt: &str,
    instructions: Option<&str>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Compacted, CompactError> {
    let tokens_before = context_tokens(history, system_prompt);
    // When even the recent history is too much (a small window, or the
    // user asked), keep only the latest message.
    let cut = cut_point(history, settings.keep_recent_tokens)
        .or_else(|| cut_point(history, 0))
        .ok_or(CompactError::NothingToCompact)?;
    // The previous summary is updated without its file lists, which are
    // merged here and appended again below.
    let (previous, mut files) = match history.first() {
        Some(AgentMessage::Summary { summary, .. }) => {
            let (text, files) = FileOps::split(summary);
            (Some(text.to_string()), files)
        }
        _ => (None, FileOps::default()),
    };
    let old: Vec<&Message> = history[..cut]
        .iter()
        .filter_map(|entry| match entry {
            AgentMessage::Llm { message } => Some(message),
            _ => None,
        })
        .collect();
    let request = summary_request(
        model,
        previous.as_deref(),
        &old,
        instructions,
        settings.reserve(model.context_window),
    );
    files.merge(FileOps::collect(&old));
    let mut text = String::new();
    let mut events = llm::stream(client, model, key, &request, stream);
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            () = cancel.cancelled() => return Err(CompactError::Cancelled),
        };
        match next {
            Some(Ok(StreamEvent::TextDelta(delta))) => text.push_str(&delta),
            Some(Ok(_)) => {}
            Some(Err(error)) => return Err(error.into()),
            None => break,
        }
    }
    if text.trim().is_empty() {
        return Err(CompactError::EmptySummary);
    }
    let summary = format!("{}{}", text.trim(), files.render());
    let kept = apply(history, cut, summary.clone(), tokens_before);
    Ok(Compacted {
        summary,
        files,
        kept,
        tokens_before,
        tokens_after: context_tokens_estimate(history, system_prompt),
    })
}

/// Replaces everything before `cut` with the summary; returns how many
/// model-visible messages were kept after it.
pub fn apply(
    history: &mut Vec<AgentMessage>,
    cut: usize,
    summary: String,
    tokens_before: u64,
) -> usize {
    let kept: Vec<AgentMessage> = history.drain(cut..).collect();
    history.clear();
    history.push(AgentMessage::Summary {
        summary,
        tokens_before,
    });
    let count = kept
        .iter()
        .filter(|e| matches!(e, AgentMessage::Llm { .. }))
        .count();
    history.extend(kept);
    count
}

/// Rebuilds the same state from a transcript: keeps the last `kept`
/// model-visible messages of `history` behind the summary.
pub fn restore(history: &mut Vec<AgentMessage>, summary: String, kept: usize, tokens_before: u64) {
    let mut seen = 0;
    let mut cut = history.len();
    for index in (0..history.len()).rev() {
        if seen == kept {
            break;
        }
        if matches!(history[index], AgentMessage::Llm { .. }) {
            seen += 1;
        }
        cut = index;
    }
    // The first kept message keeps its time line, as `cut_point` keeps it.
    if cut > 0 && cut < history.len() && matches!(history[cut - 1], AgentMessage::Time { .. }) {
        cut -= 1;
    }
    apply(history, cut, summary, tokens_before);
}

/// The context size right after a compaction, before any call reports
/// usage: all estimated.
fn context_tokens_estimate(history: &[AgentMessage], system_prompt: &str) -> u64 {
    (system_prompt.len() as u64).div_ceil(4) + history.iter().map(estimate_entry).sum::<u64>()
}

#[cfg(test)]
#[path = "compaction/tests.rs"]
mod tests;
