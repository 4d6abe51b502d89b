//! A session's history as OpenClaw's clients read it (`chat.history`,
//! `chat.startup`, `sessions.get`, `sessions.branches.list`): the
//! transcript's messages as [`chat::HistoryMessage`]s, each named with the
//! run the gateway saw it in, cut to a count or a size.

use crate::agent::AgentMessage;
use crate::gateway::frames::ErrorShape;
use crate::gateway::hub::{Hub, millis};
use crate::gateway::protocol::chat;
use crate::llm::{AssistantContent, Content, Message};

/// `maxBytes`: the oldest messages are left out until the rest fit;
/// whether any were.
pub(super) fn cut_to_bytes(
    messages: &mut Vec<chat::HistoryMessage>,
    max_bytes: Option<u64>,
) -> bool {
    let Some(max) = max_bytes else {
        return false;
    };
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let size = |m: &chat::HistoryMessage| serde_json::to_vec(m).map_or(0, |bytes| bytes.len());
    let sizes: Vec<usize> = messages.iter().map(size).collect();
    let mut total: usize = sizes.iter().sum();
    let mut cut = 0;
    while total > max && messages.len() - cut > 1 {
        total -= sizes[cut];
        cut += 1;
    }
    messages.drain(..cut);
    cut > 0
}

/// A session's messages from its transcript (none for a key not used yet).
/// `elsewhere`: the session and its transcript's text as the cluster's
/// store holds it, for a key another replica has
/// ([`Hub::transcript_elsewhere`]).
pub(super) fn history(
    hub: &Hub,
    key: &str,
    limit: usize,
    elsewhere: Option<(String, String)>,
) -> Result<(Option<String>, Vec<chat::HistoryMessage>), ErrorShape> {
    let unreadable = |e: crate::session::transcript::TranscriptError| {
        ErrorShape::invalid(format!("cannot read the session: {e}"))
    };
    let (session, loaded) = match (hub.lookup(key), elsewhere) {
        (Some(session), _) => {
            let Some(path) = crate::session::find(hub.data_dir(), &session) else {
                return Ok((Some(session), Vec::new()));
            };
            let loaded = crate::session::transcript::load(&path).map_err(unreadable)?;
            (session, loaded)
        }
        (None, Some((session, text))) => {
            let loaded =
                crate::session::transcript::parse(std::path::Path::new(&session), text.as_bytes())
                    .map_err(unreadable)?;
            (session, loaded)
        }
        (None, None) => return Ok((None, Vec::new())),
    };
    let times: std::collections::HashMap<String, u64> = loaded
        .entries
        .iter()
        .map(|e| (e.id.clone(), millis(&e.timestamp)))
        .collect();
    let restored = crate::session::restore(loaded.entries);
    // A message restored without an entry of its own (a result pincer
    // supplied for a call cut short) takes the time of the one before.
    let mut last = 0;
    let mut messages: Vec<chat::HistoryMessage> = Vec::new();
    for (i, entry) in restored.visible().iter().enumerate() {
        let id = restored.entry_ids.get(&i);
        if let Some(time) = id.and_then(|id| times.get(id)) {
            last = *time;
        }
        let Some(body) = message(entry, &restored.calls) else {
            continue;
        };
        // A prompt that started a turn can be rewound to or forked from
        // (`sessions.rewind`, `sessions.fork`).
        let prompt = id.filter(|_| matches!(body, chat::HistoryBody::User { .. }));
        messages.push(chat::HistoryMessage {
            body,
            timestamp: last,
            id: prompt.cloned(),
            turn: prompt
                .and_then(|id| restored.turns.iter().position(|t| t.prompt_id == *id))
                .map(|turn| turn + 1),
            // OpenClaw's message metadata: the entry's id and its place,
            // which its clients match their own copies on.
            meta: chat::MessageMeta {
                seq: messages.len() + 1,
                id: id.cloned(),
                ..Default::default()
            },
        });
    }
    tag_runs(&mut messages, &hub.prompt_runs(&session));
    if messages.len() > limit {
        messages.drain(..messages.len() - limit);
    }
    Ok((Some(session), messages))
}

/// Names the run of each message the gateway saw start: a user message
/// whose text is a recent run's prompt (matched from the newest back), and
/// what answered it up to the next user message. OpenClaw's clients match
/// the messages they showed while the run streamed to these
/// (`__openclaw.runId`, and a user message's `idempotencyKey`,
/// `<run>:user`), so that a history read after a run replaces them
/// instead of repeating them.
fn tag_runs(messages: &mut [chat::HistoryMessage], runs: &[(String, String)]) {
    let mut runs = runs.iter().rev().peekable();
    let mut owner: Vec<Option<&str>> = vec![None; messages.len()];
    for (i, message) in messages.iter().enumerate().rev() {
        if !message.is_user() {
            continue;
        }
        let text = message.user_text();
        // Skip the runs whose prompt is not here (a command, a message
        // joined to another); the first that matches is this one's.
        while let Some((_, prompt)) = runs.peek() {
            if *prompt == text {
                break;
            }
            runs.next();
        }
        match runs.next() {
            Some((run, _)) => owner[i] = Some(run.as_str()),
            None => break,
        }
    }
    let mut current: Option<&str> = None;
    for (message, owner) in messages.iter_mut().zip(owner) {
        if message.is_user() {
            current = owner;
            if let Some(run) = owner {
                message.meta.idempotency_key = Some(format!("{run}:user"));
            }
        }
        if let Some(run) = current {
            message.meta.run_id = Some(run.to_string());
        }
    }
}

/// An assistant message's stop as OpenClaw's messages say it.
fn stop_name(stop: crate::llm::StopReason) -> &'static str {
    use crate::llm::StopReason;
    match stop {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "toolUse",
        StopReason::Refusal | StopReason::Error => "error",
        StopReason::Aborted => "aborted",
    }
}

/// One history entry as the protocol shows it; what the transcript kept
/// of each call (`calls`, by id) gives a tool call its `kind` and `title`
/// and an edit's result its `diffs`, as the live tool events had them.
fn message(
    entry: &AgentMessage,
    calls: &std::collections::HashMap<String, crate::session::CallRecord>,
) -> Option<chat::HistoryBody> {
    use chat::{AssistantBlock, HistoryBody};
    let AgentMessage::Llm { message } = entry else {
        return None;
    };
    let info = |id: &str| calls.get(id).and_then(|c| c.call.as_ref());
    Some(match message {
        Message::User { content } => HistoryBody::User {
            content: content.iter().map(user_block).collect(),
        },
        Message::Assistant(assistant) => HistoryBody::Assistant {
            content: assistant
                .content
                .iter()
                .map(|c| match c {
                    AssistantContent::Text { text } => AssistantBlock::Text { text: text.clone() },
                    AssistantContent::Thinking {
                        thinking, redacted, ..
                    } => AssistantBlock::Thinking {
                        thinking: if *redacted {
                            String::new()
                        } else {
                            thinking.clone()
                        },
                    },
                    AssistantContent::ToolCall(call) => AssistantBlock::ToolCall {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        kind: info(&call.id).map(|info| info.kind),
                        title: info(&call.id).map(|info| info.title.clone()),
                    },
                })
                .collect(),
            model: assistant.model.clone(),
            provider: assistant.provider.clone(),
            stop_reason: stop_name(assistant.stop_reason),
        },
        Message::ToolResult(result) => HistoryBody::ToolResult {
            tool_call_id: result.tool_call_id.clone(),
            tool_name: result.tool_name.clone(),
            content: result.content.iter().map(user_block).collect(),
            is_error: result.is_error,
            kind: info(&result.tool_call_id).map(|info| info.kind),
            diffs: calls
                .get(&result.tool_call_id)
                .into_iter()
                .flat_map(|c| &c.display)
                .filter_map(|d| match d {
                    crate::tools::Display::Diff {
                        path,
                        old_text,
                        new_text,
                    } => Some(chat::HistoryDiff {
                        path: path.clone(),
                        old_text: old_text.clone(),
                        new_text: new_text.clone(),
                    }),
                    _ => None,
                })
                .collect(),
        },
    })
}

/// A message's block as `chat.history` shows it. A picture's bytes stay
/// out, as OpenClaw's history leaves them out: it is marked `omitted`,
/// with its size.
fn user_block(content: &Content) -> chat::HistoryBlock {
    match content {
        Content::Text { text } => chat::HistoryBlock::Text { text: text.clone() },
        Content::Image { mime_type, data } => {
            let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
            chat::HistoryBlock::Image {
                mime_type: mime_type.clone(),
                omitted: true,
                bytes: (data.len() / 4 * 3).saturating_sub(padding),
            }
        }
    }
}
