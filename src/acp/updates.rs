//! How agent events look to an editor: the pure mapping from
//! [`AgentEvent`]s to ACP `session/update`s, and from ACP prompt content to
//! the model's [`Content`]. `pincer run --json` prints the same updates.

mod json;

use std::path::Path;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Cost, Diff, EmbeddedResourceResource, ImageContent, MessageId,
    SessionId, SessionNotification, SessionUpdate, StopReason, Terminal, TextContent,
    ToolCall as AcpToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind as AcpToolKind, UsageUpdate,
};

use crate::agent::{AgentEvent, RunStop};
use crate::llm::Content;
use crate::tools::{Display, ToolKind, ToolOutput};

/// The ACP stop reason of a run that did not fail.
pub fn stop_reason(stop: &RunStop) -> Option<StopReason> {
    Some(match stop {
        RunStop::EndTurn => StopReason::EndTurn,
        RunStop::MaxTokens => StopReason::MaxTokens,
        RunStop::Refusal => StopReason::Refusal,
        RunStop::Cancelled => StopReason::Cancelled,
        RunStop::MaxTurns => StopReason::MaxTurnRequests,
        // The user is told why in an agent message; the work so far stays.
        RunStop::LoopDetected(_) => StopReason::EndTurn,
        RunStop::Blocked(_) => StopReason::Refusal,
        RunStop::Failed(_) => return None,
    })
}

fn text_chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

pub fn kind(kind: ToolKind) -> AcpToolKind {
    match kind {
        ToolKind::Read => AcpToolKind::Read,
        ToolKind::Edit => AcpToolKind::Edit,
        ToolKind::Delete => AcpToolKind::Delete,
        ToolKind::Move => AcpToolKind::Move,
        ToolKind::Search => AcpToolKind::Search,
        ToolKind::Execute => AcpToolKind::Execute,
        ToolKind::Think => AcpToolKind::Think,
        ToolKind::Fetch => AcpToolKind::Fetch,
        ToolKind::Other => AcpToolKind::Other,
    }
}

fn output_content(content: &[Content]) -> Vec<ToolCallContent> {
    content
        .iter()
        .map(|c| {
            let block = match c {
                Content::Text { text } => ContentBlock::Text(TextContent::new(text.as_str())),
                Content::Image { data, mime_type } => {
                    ContentBlock::Image(ImageContent::new(data.as_str(), mime_type.as_str()))
                }
            };
            ToolCallContent::from(block)
        })
        .collect()
}

/// What the editor shows for a call's displays (diffs, terminals, text).
pub fn display_content(display: &[Display]) -> Vec<ToolCallContent> {
    display
        .iter()
        .map(|d| match d {
            Display::Text(text) => {
                ToolCallContent::from(ContentBlock::Text(TextContent::new(text.as_str())))
            }
            Display::Diff {
                path,
                old_text,
                new_text,
            } => ToolCallContent::Diff(
                Diff::new(path.clone(), new_text.as_str()).old_text(old_text.clone()),
            ),
            Display::Terminal(id) => ToolCallContent::Terminal(Terminal::new(id.clone())),
            // The plan itself goes out as a `plan` update (see `plan_update`);
            // the call shows the checklist.
            Display::Plan(todos) => {
                let text = if todos.is_empty() {
                    "The todo list is empty.".to_string()
                } else {
                    crate::tools::todo::checklist(todos)
                };
                ToolCallContent::from(ContentBlock::Text(TextContent::new(text)))
            }
            // The end of the output so far, as the other agents show a
            // command's output: a console block keeps its lines apart in
            // clients that render Markdown.
            Display::Live(live) => {
                ToolCallContent::from(ContentBlock::Text(TextContent::new(fenced(&live.tail))))
            }
        })
        .collect()
}

/// `text` as a Markdown `console` code block, fenced with more backticks
/// than any run of them inside, so the output cannot end the block.
pub fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}console\n{text}\n{fence}")
}

/// The id of the session's one plan in `plan_update`s: the `todo` list is
/// the only plan a session has, and each list replaces it.
pub const PLAN_ID: &str = "todo";

/// The plan a finished call hands the editor (the `todo` tool's list),
/// sent besides the call's own update; `None` for other calls and for
/// failed ones, which changed nothing.
///
/// A client that opted into plan operations (`clientCapabilities.plan: {}`)
/// gets a `plan_update` with the list as a Markdown checklist
/// (and `plan_removed` when the list is emptied); any other client the
/// classic `plan` with its entries.
pub fn plan_update(event: &AgentEvent, operations: bool) -> Option<SessionUpdate> {
    let AgentEvent::ToolExecutionEnd { output, .. } = event else {
        return None;
    };
    plan_after(output.into(), operations)
}

/// [`plan_update`] for a call that finished with `output`.
fn plan_after(output: Finished<'_>, operations: bool) -> Option<SessionUpdate> {
    if output.is_error {
        return None;
    }
    let todos = output.display.iter().find_map(|d| match d {
        Display::Plan(todos) => Some(todos),
        _ => None,
    })?;
    Some(plan_of(todos, operations))
}

/// The editor's plan showing `todos`: a `plan` with its entries, or for a
/// client that takes plan operations a markdown checklist (removed when
/// empty).
pub fn plan_of(todos: &[crate::tools::todo::TodoItem], operations: bool) -> SessionUpdate {
    use crate::tools::todo::{TodoPriority, TodoStatus};
    use agent_client_protocol::v1::schema::{Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus};
    if operations {
        use agent_client_protocol::v1::schema::{PlanRemoved, PlanUpdate, PlanUpdateContent};
        return if todos.is_empty() {
            SessionUpdate::PlanRemoved(PlanRemoved::new(PLAN_ID))
        } else {
            SessionUpdate::PlanUpdate(PlanUpdate::new(PlanUpdateContent::markdown(
                PLAN_ID,
                crate::tools::todo::checklist(todos),
            )))
        };
    }
    let entries = todos
        .iter()
        .map(|item| {
            let priority = match item.priority {
                Some(TodoPriority::High) => PlanEntryPriority::High,
                Some(TodoPriority::Low) => PlanEntryPriority::Low,
                Some(TodoPriority::Medium) | None => PlanEntryPriority::Medium,
            };
            let status = match item.status {
                TodoStatus::Pending => PlanEntryStatus::Pending,
                TodoStatus::InProgress => PlanEntryStatus::InProgress,
                TodoStatus::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry::new(item.content.as_str(), priority, status)
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

/// A finished call's output as its update reads it: a live
/// [`ToolOutput`]'s parts, or a stored result's (borrowed, so that a
/// replay copies each text once, into the update).
#[derive(Clone, Copy)]
struct Finished<'a> {
    content: &'a [Content],
    is_error: bool,
    details: &'a serde_json::Value,
    display: &'a [Display],
}

impl<'a> From<&'a ToolOutput> for Finished<'a> {
    fn from(output: &'a ToolOutput) -> Self {
        Self {
            content: &output.content,
            is_error: output.is_error,
            details: &output.details,
            display: &output.display,
        }
    }
}

/// The `rawOutput` of a finished call: the tool's details, or its text.
fn raw_output(output: Finished<'_>) -> serde_json::Value {
    if !output.details.is_null() {
        return output.details.clone();
    }
    serde_json::json!({ "output": crate::tools::text_of(output.content), "isError": output.is_error })
}

/// The update that shows a call starting.
fn call_started(call: &crate::llm::ToolCall, info: &crate::tools::CallInfo) -> SessionUpdate {
    let locations = info
        .locations
        .iter()
        .map(|l| ToolCallLocation::new(l.path.clone()).line(l.line))
        .collect::<Vec<_>>();
    SessionUpdate::ToolCall(
        AcpToolCall::new(call.id.clone(), info.title.clone())
            .name(call.name.clone())
            .kind(kind(info.kind))
            .status(ToolCallStatus::InProgress)
            .locations(locations)
            .raw_input(call.arguments.clone()),
    )
}

/// The update that shows a call's result.
fn call_finished(call_id: &str, tool_name: &str, output: Finished<'_>) -> SessionUpdate {
    let status = if output.is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let content = if output.display.is_empty() {
        output_content(output.content)
    } else {
        display_content(output.display)
    };
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new()
            .name(tool_name.to_string())
            .status(status)
            .content(content)
            .raw_output(raw_output(output)),
    ))
}

/// The update an editor should see for an event, if any. `total_cost` is the
/// session's running cost in USD, reported with usage.
pub fn session_update(event: &AgentEvent, total_cost: f64) -> Option<SessionUpdate> {
    Some(match event {
        AgentEvent::TextDelta(text) => SessionUpdate::AgentMessageChunk(text_chunk(text)),
        AgentEvent::ThinkingDelta(text) => SessionUpdate::AgentThoughtChunk(text_chunk(text)),
        AgentEvent::ToolExecutionStart { call, info } => call_started(call, info),
        AgentEvent::ToolExecutionEnd {
            call_id,
            tool_name,
            output,
        } => call_finished(call_id, tool_name, output.into()),
        // A live view that replaces what it shows has nothing to add before
        // the command printed, nor once it ended (the result follows)
        // unless lines came that `_meta.terminal_output` readers lack.
        AgentEvent::ToolExecutionUpdate { display, .. }
            if matches!(display.as_slice(), [Display::Live(live)]
                if live.tail.is_empty() || (live.exit.is_some() && live.appended.is_empty())) =>
        {
            return None;
        }
        AgentEvent::ToolExecutionUpdate { call_id, display } => {
            let mut update = ToolCallUpdate::new(
                call_id.clone(),
                ToolCallUpdateFields::new().content(display_content(display)),
            );
            // Clients that stream only Zed's `_meta.terminal_output` (stock
            // Emacs agent-shell reads it without advertising it, and skips
            // `content` until the call ends) get the new lines there too;
            // others ignore a `_meta` key they do not know.
            if let [Display::Live(live)] = display.as_slice()
                && !live.appended.is_empty()
            {
                let mut meta = agent_client_protocol::v1::schema::Meta::new();
                meta.insert(
                    "terminal_output".to_string(),
                    serde_json::json!({"terminal_id": call_id, "data": live.appended}),
                );
                update = update.meta(meta);
            }
            SessionUpdate::ToolCallUpdate(update)
        }
        AgentEvent::TurnEnd {
            context_tokens,
            context_window,
            ..
        } => SessionUpdate::UsageUpdate(
            UsageUpdate::new(*context_tokens, *context_window).cost(Cost::new(total_cost, "USD")),
        ),
        AgentEvent::AgentStart
        | AgentEvent::CompactionStart { .. }
        | AgentEvent::Failover { .. }
        | AgentEvent::Notice { .. }
        | AgentEvent::Checkpoint(_)
        | AgentEvent::Runtime { .. }
        | AgentEvent::CompactionEnd { .. }
        | AgentEvent::TurnStart
        | AgentEvent::MessageStart
        | AgentEvent::MessageEnd(_)
        | AgentEvent::Retry { .. }
        | AgentEvent::UserMessage { .. }
        | AgentEvent::AgentEnd { .. } => return None,
    })
}

/// What an editor without compaction updates is told when compaction
/// starts.
pub const COMPACTING: &str =
    "Compacting the conversation to stay within the model's context window…\n\n";

/// The message that marks a finished compaction (also in a replay).
pub fn compacted_text(tokens_before: u64, tokens_after: u64) -> String {
    if tokens_after > 0 {
        format!(
            "Context compacted: the older conversation is now a summary ({tokens_before} → about {tokens_after} tokens).\n\n"
        )
    } else {
        format!(
            "Context compacted: the older conversation is now a summary (from {tokens_before} tokens).\n\n"
        )
    }
}

/// How a turn that ended in an error is shown on replay (live, the prompt
/// answered with the error).
pub fn failed_text(error: &str) -> String {
    format!("The prompt failed: {}\n\n", error.trim_end())
}

/// An agent message chunk of plain text that is a message of its own (a
/// notice, an error, a compaction marker), so that clients which group
/// chunks by `messageId` do not run it into the model's answer.
pub fn agent_text(text: &str) -> SessionUpdate {
    agent_text_as(format!("notice-{}", uuid::Uuid::new_v4()), text)
}

/// [`agent_text`] under a known message id (one a replay gives again).
pub fn agent_text_as(message_id: String, text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(text_chunk(text).message_id(MessageId::new(message_id)))
}

/// The `messageId` of the thinking of the assistant message stored as
/// transcript entry `entry` (its text goes by `entry` itself): thoughts
/// are a message of their own for the editor.
pub fn thought_id(entry: &str) -> String {
    format!("{entry}-thought")
}

/// The `messageId` of the error shown after the assistant message stored
/// as transcript entry `entry`.
fn error_id(entry: &str) -> String {
    format!("{entry}-error")
}

/// The `messageId` of the start notice of a session's `n`th compaction
/// (its end goes by [`compaction_id`]).
pub fn compaction_start_id(n: u64) -> String {
    format!("{}-start", compaction_id(n))
}

/// Marks a message chunk as part of the message stored as transcript entry
/// `entry`: text and user chunks go by the entry's id, thoughts by
/// [`thought_id`]. Chunks that already have an id (a message of their
/// own) and other updates pass unchanged.
pub fn in_message(update: SessionUpdate, entry: &str) -> SessionUpdate {
    match update {
        SessionUpdate::AgentMessageChunk(ContentChunk {
            message_id: Some(_),
            ..
        })
        | SessionUpdate::AgentThoughtChunk(ContentChunk {
            message_id: Some(_),
            ..
        }) => update,
        SessionUpdate::AgentMessageChunk(chunk) => {
            SessionUpdate::AgentMessageChunk(chunk.message_id(entry))
        }
        SessionUpdate::UserMessageChunk(chunk) => {
            SessionUpdate::UserMessageChunk(chunk.message_id(entry))
        }
        SessionUpdate::AgentThoughtChunk(chunk) => {
            SessionUpdate::AgentThoughtChunk(chunk.message_id(MessageId::new(thought_id(entry))))
        }
        other => other,
    }
}

/// What the replay may use of the client's capabilities.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplayOptions {
    /// The client shows `compaction_update`s (`session.compaction`).
    pub compaction: bool,
    /// The client takes `plan_update`s (`plan`).
    pub plan_operations: bool,
}

/// The updates that show a restored session's history to an editor, in the
/// same shape the live turn had (`session/load`). Usage is not replayed.
pub fn replay(restored: &crate::session::Restored, options: ReplayOptions) -> Vec<SessionUpdate> {
    let mut out = Vec::new();
    replay_part(
        restored,
        &numbered(restored.visible()),
        options,
        &mut |update| out.push(update),
    );
    out
}

/// Each entry with its index and the number of compactions before it, so
/// that a replayed message or compaction gets the same id wherever the
/// history is split.
fn numbered(history: &[crate::agent::AgentMessage]) -> Vec<Numbered<'_>> {
    let mut compactions = 0;
    history
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let numbered = (index, compactions, entry);
            if matches!(entry, crate::agent::AgentMessage::Summary { .. }) {
                compactions += 1;
            }
            numbered
        })
        .collect()
}

/// An entry of the shown history, its index there and the number of
/// compactions before it.
type Numbered<'a> = (usize, u64, &'a crate::agent::AgentMessage);

/// The id of a session's `n`th compaction (from 0), live and on replay.
pub fn compaction_id(n: u64) -> String {
    format!("compaction-{n}")
}

/// The replay of `part`, a stretch of `restored.history`, one update at a
/// time.
fn replay_part(
    restored: &crate::session::Restored,
    part: &[Numbered<'_>],
    options: ReplayOptions,
    out: &mut dyn FnMut(SessionUpdate),
) {
    use crate::agent::AgentMessage;
    use crate::llm::{AssistantContent, Message};
    for &(index, compactions, entry) in part {
        // Entries without one (calls answered for a killed process) have
        // no message chunks.
        let entry_id = restored.entry_id(index).unwrap_or_default();
        let mut out = |update: SessionUpdate| out(in_message(update, entry_id));
        let message = match entry {
            AgentMessage::Llm { message } => message,
            AgentMessage::Summary {
                summary,
                tokens_before,
            } => {
                out(if options.compaction {
                    use agent_client_protocol::v1::schema::{CompactionStatus, CompactionUpdate};
                    SessionUpdate::CompactionUpdate(
                        CompactionUpdate::new(
                            compaction_id(compactions),
                            CompactionStatus::Completed,
                        )
                        .summary(vec![ContentBlock::Text(TextContent::new(summary.as_str()))]),
                    )
                } else {
                    agent_text_as(
                        compaction_id(compactions),
                        &compacted_text(*tokens_before, 0),
                    )
                });
                continue;
            }
            AgentMessage::Notice { .. } | AgentMessage::Time { .. } => continue,
        };
        match message {
            Message::User { content } => {
                for part in content {
                    let block = match part {
                        Content::Text { text } => {
                            ContentBlock::Text(TextContent::new(text.as_str()))
                        }
                        Content::Image { data, mime_type } => ContentBlock::Image(
                            ImageContent::new(data.as_str(), mime_type.as_str()),
                        ),
                    };
                    out(SessionUpdate::UserMessageChunk(ContentChunk::new(block)));
                }
            }
            Message::Assistant(message) => {
                for part in &message.content {
                    let update = match part {
                        // A silent reply stays silent on replay too.
                        AssistantContent::Text { text } if crate::agent::is_silent(text) => {
                            continue;
                        }
                        AssistantContent::Text { text } => {
                            SessionUpdate::AgentMessageChunk(text_chunk(text))
                        }
                        AssistantContent::Thinking {
                            thinking,
                            redacted: false,
                            ..
                        } => SessionUpdate::AgentThoughtChunk(text_chunk(thinking)),
                        AssistantContent::Thinking { .. } => continue,
                        AssistantContent::ToolCall(call) => {
                            match restored.calls.get(&call.id).and_then(|r| r.call.as_ref()) {
                                Some(info) => call_started(call, info),
                                None => call_started(
                                    call,
                                    &crate::tools::CallInfo {
                                        title: call.name.clone(),
                                        kind: ToolKind::Other,
                                        locations: Vec::new(),
                                    },
                                ),
                            }
                        }
                    };
                    out(update);
                }
                // The error that ended the turn, after whatever streamed
                // before it, where the user saw the prompt fail.
                if message.stop_reason == crate::llm::StopReason::Error {
                    let error = message
                        .error_message
                        .as_deref()
                        .unwrap_or("the model call failed");
                    out(agent_text_as(error_id(entry_id), &failed_text(error)));
                }
            }
            Message::ToolResult(result) => {
                let record = restored.calls.get(&result.tool_call_id);
                let output = Finished {
                    content: &result.content,
                    is_error: result.is_error,
                    details: record.map_or(&serde_json::Value::Null, |r| &r.details),
                    display: record.map_or(&[], |r| r.display.as_slice()),
                };
                out(call_finished(
                    &result.tool_call_id,
                    &result.tool_name,
                    output,
                ));
                if let Some(update) = plan_after(output, options.plan_operations) {
                    out(update);
                }
            }
        }
    }
}

/// Replay blocks of at most about this many bytes go to stdout at a time
/// (a pipe's buffer: the first reaches the editor early).
const REPLAY_BLOCK: usize = 64 * 1024;

/// The replay of a restored session as ready-to-send JSON-RPC
/// `session/update` notifications, one per line, in blocks of lines.
///
/// Replaying a long session is what an editor waits for when it reopens
/// it, so the history is split across the machine's cores and each part
/// is turned into updates and serialised on its own thread; the blocks
/// come back in history order.
pub fn replay_lines(session_id: &SessionId, restored: &crate::session::Restored) -> Vec<String> {
    replay_lines_with(session_id, restored, ReplayOptions::default())
}

/// [`replay_lines`] for a client with `options`.
pub fn replay_lines_with(
    session_id: &SessionId,
    restored: &crate::session::Restored,
    options: ReplayOptions,
) -> Vec<String> {
    let mut blocks = Vec::new();
    stream_replay(session_id, restored, options, &mut |block| {
        blocks.push(block);
        true
    });
    blocks
}

/// [`replay_lines_with`], each block handed to `emit` in history order as
/// soon as it is ready, so that sending the first overlaps serialising the
/// rest. Stops when `emit` returns false (the editor is gone).
pub fn stream_replay(
    session_id: &SessionId,
    restored: &crate::session::Restored,
    options: ReplayOptions,
    emit: &mut dyn FnMut(String) -> bool,
) {
    #[derive(serde::Serialize)]
    struct Notification<'a> {
        jsonrpc: &'static str,
        method: &'static str,
        params: &'a SessionNotification,
    }
    // Serialised straight into the block; JSON is UTF-8, so the block
    // always converts (a failure would only drop the block, with a warning).
    let finish = |block: Vec<u8>| {
        String::from_utf8(block)
            .inspect_err(|e| tracing::warn!(error = %e, "a replay block is not UTF-8"))
            .ok()
    };
    let serialise = |part: &[Numbered<'_>], out: &mut dyn FnMut(String)| {
        let mut block: Vec<u8> = Vec::with_capacity(REPLAY_BLOCK + REPLAY_BLOCK / 4);
        replay_part(restored, part, options, &mut |update| {
            let params = SessionNotification::new(session_id.clone(), update);
            let line = Notification {
                jsonrpc: "2.0",
                method: "session/update",
                params: &params,
            };
            let before = block.len();
            match json::write(&mut block, &line) {
                Ok(()) => block.push(b'\n'),
                Err(e) => {
                    // What it wrote before failing is not a line.
                    block.truncate(before);
                    tracing::warn!(error = %e, "cannot serialise a replayed update");
                }
            }
            if block.len() >= REPLAY_BLOCK {
                let full = std::mem::replace(
                    &mut block,
                    Vec::with_capacity(REPLAY_BLOCK + REPLAY_BLOCK / 4),
                );
                out_block(finish(full), out);
            }
        });
        if !block.is_empty() {
            out_block(finish(block), out);
        }
    };
    crate::parallel::stream_chunks(&numbered(restored.visible()), 512, serialise, emit);
}

fn out_block(block: Option<String>, out: &mut dyn FnMut(String)) {
    if let Some(block) = block {
        out(block);
    }
}

/// Why a prompt block could not be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PromptError {
    #[error("audio prompts are not supported")]
    Audio,
    #[error("this kind of prompt content is not supported")]
    Unsupported,
}

/// Turns ACP prompt blocks into what the model sees. Linked files are read
/// (`resource_link`), embedded ones inlined (`resource`), images passed on.
pub async fn prompt_content(
    blocks: Vec<ContentBlock>,
    cwd: &Path,
) -> Result<Vec<Content>, PromptError> {
    let mut out = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block {
            ContentBlock::Text(text) => out.push(Content::text(text.text)),
            ContentBlock::Image(image) => out.push(Content::Image {
                data: image.data,
                mime_type: image.mime_type,
            }),
            ContentBlock::Audio(_) => return Err(PromptError::Audio),
            ContentBlock::ResourceLink(link) => {
                out.push(Content::text(read_link(&link.uri, &link.name, cwd).await));
            }
            ContentBlock::Resource(resource) => match resource.resource {
                EmbeddedResourceResource::TextResourceContents(text) => {
                    out.push(Content::text(embedded_block(&text.uri, &text.text)));
                }
                EmbeddedResourceResource::BlobResourceContents(blob) => {
                    match blob.mime_type.as_deref() {
                        Some(mime) if mime.starts_with("image/") => out.push(Content::Image {
                            data: blob.blob,
                            mime_type: mime.to_string(),
                        }),
                        mime => out.push(Content::text(format!(
                            "[Attached binary resource {} ({}) is not shown.]",
                            blob.uri,
                            mime.unwrap_or("unknown type")
                        ))),
                    }
                }
                _ => return Err(PromptError::Unsupported),
            },
            _ => return Err(PromptError::Unsupported),
        }
    }
    Ok(out)
}

fn file_block(uri: &str, text: &str) -> String {
    format!("<file uri=\"{uri}\">\n{text}\n</file>")
}

/// Limit on a file pulled into the prompt (linked or embedded); bigger files
/// are cut and the model is told to read the rest with its tools. Only this
/// much is ever read, whatever the file's size.
const MAX_LINKED_BYTES: usize = 256 * 1024;

async fn read_link(uri: &str, name: &str, cwd: &Path) -> String {
    let Some(path) = file_path(uri, cwd) else {
        return format!("[Linked resource {name}: {uri}]");
    };
    // Only regular files are read: a link may name /dev/zero (endless), a
    // FIFO (a read that never returns) or a device, and a project can
    // commit a symlink to any of them.
    match tokio::fs::metadata(&path).await {
        Ok(meta) if meta.is_dir() => {
            return format!(
                "[Linked directory {}; use the tools to look inside.]",
                path.display()
            );
        }
        Ok(meta) if !meta.is_file() => return not_a_file(&path, &meta),
        Err(e) => return format!("[Linked file {} could not be read: {e}]", path.display()),
        Ok(_) => {}
    }
    match read_capped(&path).await {
        Ok((bytes, cut)) => {
            let mut block = file_block(uri, &utf8_prefix(&bytes));
            if cut {
                block.push_str(&cut_note(&path.display().to_string()));
            }
            block
        }
        Err(e) => format!("[Linked file {} could not be read: {e}]", path.display()),
    }
}

/// The note for a linked path that is not a regular file.
fn not_a_file(path: &Path, meta: &std::fs::Metadata) -> String {
    #[cfg(unix)]
    let kind = {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            "a named pipe (FIFO)"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else if t.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        }
    };
    #[cfg(not(unix))]
    let kind = {
        let _ = meta;
        "not a regular file"
    };
    format!(
        "[Linked file {} was not read: it is {kind}, and only regular files are attached.]",
        path.display()
    )
}

/// At most [`MAX_LINKED_BYTES`] of a regular file, and whether there was
/// more. The opened file is checked again, in case the path was swapped
/// since it was looked at; it is opened without blocking, so a FIFO
/// swapped in meanwhile cannot hang the open.
async fn read_capped(path: &Path) -> std::io::Result<(Vec<u8>, bool)> {
    use tokio::io::AsyncReadExt;
    let mut options = tokio::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    options.custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits());
    let file = options.open(path).await?;
    let meta = file.metadata().await?;
    if !meta.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    let mut bytes = Vec::with_capacity((meta.len() as usize).min(MAX_LINKED_BYTES + 1));
    file.take(MAX_LINKED_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .await?;
    let cut = bytes.len() > MAX_LINKED_BYTES;
    bytes.truncate(MAX_LINKED_BYTES);
    Ok((bytes, cut))
}

/// The text of `bytes`, without a character the cut split in two.
fn utf8_prefix(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => String::from_utf8_lossy(&bytes[..e.valid_up_to()]),
        _ => String::from_utf8_lossy(bytes),
    }
}

fn cut_note(what: &str) -> String {
    format!(
        "\n[The file is longer than {} KB and was cut there; read the rest of {what} with the read tool.]",
        MAX_LINKED_BYTES / 1024
    )
}

/// An embedded file's text, held to the same limit as a linked one.
fn embedded_block(uri: &str, text: &str) -> String {
    if text.len() <= MAX_LINKED_BYTES {
        return file_block(uri, text);
    }
    let mut end = MAX_LINKED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut block = file_block(uri, &text[..end]);
    block.push_str(&cut_note(uri));
    block
}

/// The local path of a `file://` URI, without Zed's `#L5:15` or `?symbol=`.
fn file_path(uri: &str, cwd: &Path) -> Option<std::path::PathBuf> {
    let mut url = url::Url::parse(uri).ok()?;
    if url.scheme() != "file" {
        return None;
    }
    url.set_fragment(None);
    url.set_query(None);
    let path = url.to_file_path().ok()?;
    Some(if path.is_absolute() {
        path
    } else {
        cwd.join(path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        BlobResourceContents, EmbeddedResource, ResourceLink, TextResourceContents,
    };
    use pretty_assertions::assert_eq;

    #[test]
    fn output_cannot_close_its_console_block() {
        assert_eq!(fenced("ok"), "```console\nok\n```");
        assert_eq!(
            fenced("a\n```\nb ````"),
            "`````console\na\n```\nb ````\n`````"
        );
    }

    #[tokio::test]
    async fn links_are_read_and_resources_inlined() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a b.rs");
        std::fs::write(&file, "fn main() {}").unwrap();
        let uri = url::Url::from_file_path(&file).unwrap().to_string();
        let blocks = vec![
            ContentBlock::Text(TextContent::new("look at")),
            ContentBlock::ResourceLink(ResourceLink::new("a b.rs", format!("{uri}#L1:1"))),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn x() {}",
                    "file:///x.rs",
                )),
            )),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::BlobResourceContents(
                    BlobResourceContents::new("aGk=", "file:///p.png").mime_type("image/png"),
                ),
            )),
            ContentBlock::Image(ImageContent::new("aW1n", "image/jpeg")),
        ];
        let content = prompt_content(blocks, dir.path()).await.unwrap();
        assert_eq!(
            content,
            vec![
                Content::text("look at"),
                Content::text(format!(
                    "<file uri=\"{uri}#L1:1\">\nfn main() {{}}\n</file>"
                )),
                Content::text("<file uri=\"file:///x.rs\">\nfn x() {}\n</file>"),
                Content::Image {
                    data: "aGk=".into(),
                    mime_type: "image/png".into()
                },
                Content::Image {
                    data: "aW1n".into(),
                    mime_type: "image/jpeg".into()
                },
            ]
        );
    }

    #[tokio::test]
    async fn missing_linked_files_are_reported_to_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let content = prompt_content(
            vec![ContentBlock::ResourceLink(ResourceLink::new(
                "gone",
                "file:///definitely/not/here.txt",
            ))],
            dir.path(),
        )
        .await
        .unwrap();
        let Content::Text { text } = &content[0] else {
            panic!("expected text")
        };
        assert!(text.starts_with("[Linked file /definitely/not/here.txt could not be read"));
    }

    #[test]
    fn cuts_keep_whole_characters() {
        assert_eq!(utf8_prefix("aé".as_bytes()), "aé");
        assert_eq!(utf8_prefix(&"aé".as_bytes()[..2]), "a");
        assert_eq!(utf8_prefix(b"a\xffb"), "a\u{fffd}b");
        let text = format!("{}é", "x".repeat(MAX_LINKED_BYTES - 1));
        let block = embedded_block("file:///big", &text);
        assert_eq!(
            block,
            format!(
                "<file uri=\"file:///big\">\n{}\n</file>\n[The file is longer than 256 KB and was cut there; read the rest of file:///big with the read tool.]",
                "x".repeat(MAX_LINKED_BYTES - 1)
            )
        );
    }
}
