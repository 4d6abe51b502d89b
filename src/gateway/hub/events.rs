//! What sessions do, as the protocol's events: the registry's observer
//! feeds [`Hub::observe`], which keeps each run's text and turns every
//! update into `chat`, `agent`, `session.message` and `sessions.changed`
//! events for the clients that follow the session.
//!
//! A streamed chunk costs each client about its own size: the `agent`
//! `assistant`/`thinking` events carry the new text only, and the run's
//! whole text so far rides on `chat` deltas only for the clients that read
//! it (OpenClaw's; pincer's own declare [`CHAT_DELTAS_CAP`](crate::gateway::conn::CHAT_DELTAS_CAP)).

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ContentBlock, PlanEntryStatus, SessionUpdate, ToolCallStatus,
};
use serde_json::Value;

use std::borrow::Cow;

use super::{Audience, Hub, Outcome, Run, ToolInfo, outcome_of};
use crate::acp::registry::Observed;
use crate::gateway::conn::{Conn, Out, Text};
use crate::gateway::frames::now_ms;
use crate::gateway::protocol::approvals::Diff;
use crate::gateway::protocol::events::{
    CardChanged, ChatEvent, ChatMessage, ChatState, Delta, Lifecycle, MessageBlock, SessionMessage,
    ToolOutput, ToolStep, Usage,
};

impl Hub {
    pub(super) fn observe(self: &Arc<Self>, event: Observed) {
        match event {
            Observed::PromptStarted { session, tag, text } => {
                let session = session.0.to_string();
                let key = self.key_of(&session);
                let mut state = self.state();
                let run_id = tag.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                let run = state
                    .runs
                    .entry(run_id.clone())
                    .or_insert_with(|| Run::new(&session, &key));
                self.agent(&run_id, run, "lifecycle", Lifecycle::start(now_ms()));
                let message = SessionMessage {
                    session_key: &run.key,
                    run_id: &run_id,
                    spawned_by: None,
                    message: ChatMessage::user(&text, now_ms()),
                };
                // The client that sent it shows it already (OpenClaw's
                // TUI matches its copy to the stored message later).
                let origin = run.origin;
                self.broadcast_except(
                    "session.message",
                    &message,
                    Audience::Session(&session),
                    origin,
                );
                let prompts = state.prompts.entry(session.clone()).or_default();
                if prompts.len() >= super::MAX_PROMPT_RUNS {
                    prompts.pop_front();
                }
                prompts.push_back((run_id.clone(), text));
                let live = state.live.entry(session).or_default();
                live.active = Some(run_id);
            }
            Observed::Update(notification) => {
                let session = notification.session_id.0.to_string();
                let mut state = self.state();
                let active = state.live.get(&session).and_then(|l| l.active.clone());
                match (active, notification.update) {
                    (_, SessionUpdate::SessionInfoUpdate(_)) => {
                        drop(state);
                        self.session_changed("title", &session);
                    }
                    (_, SessionUpdate::AvailableCommandsUpdate(update)) => {
                        // The session's slash commands, for `commands.list`.
                        let commands = Arc::new(update.available_commands);
                        state.last_commands = Some(commands.clone());
                        state.live.entry(session).or_default().commands = Some(commands);
                    }
                    (active, SessionUpdate::UsageUpdate(usage)) => {
                        let live = state.live.entry(session).or_default();
                        // A report without a cost (after `/compact`) leaves
                        // the session's cost as it was.
                        let cost = usage
                            .cost
                            .as_ref()
                            .map(|c| c.amount)
                            .or_else(|| live.usage.as_ref().and_then(|u| u.cost_usd));
                        let data = Usage {
                            context_tokens: Some(usage.used),
                            context_window: Some(usage.size),
                            cost_usd: cost,
                        };
                        live.usage = Some(data.clone());
                        if let Some(run_id) = active
                            && let Some(run) = state.runs.get_mut(&run_id)
                        {
                            run.usage = Some(data.clone());
                            self.agent(&run_id, run, "usage", data);
                        }
                    }
                    (active, SessionUpdate::Plan(plan)) => {
                        let revision = state.cards.get(&session).map_or(0, |c| c.revision) + 1;
                        let steps = plan
                            .entries
                            .iter()
                            .take(super::CARD_STEPS)
                            .map(|entry| {
                                let status = match entry.status {
                                    PlanEntryStatus::InProgress => "in_progress",
                                    PlanEntryStatus::Completed => "completed",
                                    _ => "pending",
                                };
                                (cut(&entry.content, super::CARD_STEP_BYTES), status)
                            })
                            .collect();
                        keep_card(
                            &mut state.cards,
                            session.clone(),
                            super::Card {
                                revision,
                                updated_at: now_ms(),
                                steps,
                            },
                        );
                        if let Some(run_id) = active
                            && let Some(run) = state.runs.get_mut(&run_id)
                        {
                            self.agent(&run_id, run, "plan", &plan);
                        }
                        drop(state);
                        // OpenClaw's clients read the card again when told.
                        let key = self.key_of(&session);
                        self.broadcast(
                            "progressCard.changed",
                            &CardChanged {
                                session_key: &key,
                                revision,
                            },
                            Audience::Session(&session),
                        );
                    }
                    (Some(run_id), update) => {
                        if let Some(run) = state.runs.get_mut(&run_id) {
                            self.apply(&run_id, run, update);
                        }
                    }
                    (None, _) => {}
                }
            }
            Observed::PromptEnded {
                session,
                tag,
                result,
            } => {
                let session = session.0.to_string();
                let run_id = match tag {
                    Some(tag) => Some(tag),
                    None => self
                        .state()
                        .live
                        .get(&session)
                        .and_then(|l| l.active.clone()),
                };
                let Some(run_id) = run_id else { return };
                let outcome = match result {
                    Ok(stop) => outcome_of(stop),
                    Err(message) => Outcome::Error {
                        kind: "unknown",
                        message,
                    },
                };
                self.finish(&run_id, outcome);
            }
            Observed::PermissionResolved {
                session,
                tool_call_id,
                option,
            } => {
                self.permission_resolved(session.0.to_string(), tool_call_id, option);
            }
            // Work that outlived its turn ended: a turn starts with what
            // it said, after whatever the session is doing (as a
            // scheduled run would), and its clients see it as any run.
            Observed::BackgroundFinished { session, text } => {
                let session = session.0.to_string();
                let key = self.key_of(&session);
                let run_id = format!("background-{}", uuid::Uuid::new_v4().simple());
                let content = vec![ContentBlock::Text(
                    agent_client_protocol::v1::schema::TextContent::new(text),
                )];
                if let Err(e) = self.send(
                    &session,
                    &key,
                    &run_id,
                    content,
                    Some(super::QueueMode::FollowUp),
                ) {
                    tracing::warn!(session, error = ?e, "cannot start a turn for finished background work");
                }
            }
            event @ Observed::HelperStarted { .. } => self.helper_started(event),
            event @ Observed::HelperEnded { .. } => self.helper_ended(event),
            // A session the gateway creates is announced once its key names
            // it (see `open`); the others when they are prompted.
            Observed::Opened { .. } => {}
            Observed::Closed { session } => self.session_changed("close", &session.0),
        }
    }

    /// A `chat` delta: `deltaText` is the new text. Clients that build the
    /// text from deltas
    /// ([`CHAT_DELTAS_CAP`](crate::gateway::conn::CHAT_DELTAS_CAP)) get
    /// just that, once they have had the run's whole text so far
    /// (`message`) with their first delta of the run (a client that
    /// connected again mid-run misses nothing); the others always get
    /// `message` too, as OpenClaw's clients read it. `message` is built
    /// only when one of them listens.
    fn chat_delta(&self, run_id: &str, run: &mut Run, delta: &str) {
        for (conn, payload) in self.chat_deltas(run_id, run, delta) {
            conn.out.push(Out::Event("chat", payload));
        }
    }

    /// [`Hub::chat_delta`]'s payload for each of its listeners.
    fn chat_deltas(&self, run_id: &str, run: &mut Run, delta: &str) -> Vec<(Arc<Conn>, Arc<str>)> {
        run.chat_seq += 1;
        let (lean, full): (Vec<_>, Vec<_>) = self
            .audience(Audience::Session(&run.session))
            .into_iter()
            .partition(|conn| conn.chat_deltas && run.primed.contains(&conn.id));
        for conn in full.iter().filter(|conn| conn.chat_deltas) {
            run.primed.insert(conn.id);
        }
        let mut event = ChatEvent::new(run_id, ChatState::Delta);
        event.session_key = Some(Cow::Borrowed(&run.key));
        event.seq = Some(run.chat_seq);
        event.delta_text = Some(Cow::Borrowed(delta));
        let mut payloads = Vec::with_capacity(lean.len() + full.len());
        let mut send = |conns: Vec<Arc<Conn>>, event: &ChatEvent<'_>| {
            let payload: Arc<str> = Arc::from(event.encode());
            payloads.extend(conns.into_iter().map(|conn| (conn, payload.clone())));
        };
        if !lean.is_empty() {
            send(lean, &event);
        }
        if !full.is_empty() {
            event.message = Some(run.message());
            send(full, &event);
        }
        payloads
    }

    /// One `session/update` of a run as protocol events.
    fn apply(&self, run_id: &str, run: &mut Run, update: SessionUpdate) {
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                let ContentBlock::Text(text) = chunk.content else {
                    return;
                };
                if text.text.is_empty() {
                    return;
                }
                let mut delta = text.text;
                if run.after_tool && !run.text.is_empty() {
                    delta.insert_str(0, "\n\n");
                }
                run.after_tool = false;
                run.text.push_str(&delta);
                // The new text only: `chat` carries the cumulative text to
                // the clients that need it, and it is not sent twice. Both
                // go to the same listeners, queued as one: a client gets
                // them in one write.
                let chats = self.chat_deltas(run_id, run, &delta);
                let agent = self.agent_payload(
                    run_id,
                    run,
                    "assistant",
                    Delta {
                        delta: Cow::Borrowed(&delta),
                    },
                );
                for (conn, chat) in chats {
                    conn.out.push(Out::Text(Box::new(Text {
                        chat,
                        agent: agent.clone(),
                    })));
                }
            }
            SessionUpdate::AgentThoughtChunk(chunk) => {
                let ContentBlock::Text(text) = chunk.content else {
                    return;
                };
                run.thinking.push_str(&text.text);
                // The delta before the snapshot that includes it: a client
                // that takes both sees the snapshot add nothing.
                self.agent(
                    run_id,
                    run,
                    "thinking",
                    Delta {
                        delta: Cow::Borrowed(&text.text),
                    },
                );
                self.chat_delta(run_id, run, "");
            }
            SessionUpdate::ToolCall(call) => {
                let id = call.tool_call_id.0.to_string();
                let value = serde_json::to_value(&call).unwrap_or_default();
                let info = ToolInfo {
                    name: tool_name(&value),
                    kind: tool_kind(&value).to_string(),
                };
                run.tools.insert(id.clone(), info.clone());
                run.after_tool = true;
                let data = ToolStep {
                    phase: "start",
                    name: info.name,
                    kind: info.kind,
                    tool_call_id: id,
                    title: Some(call.title.clone()),
                    args: Some(
                        call.raw_input
                            .clone()
                            .unwrap_or_else(|| Value::Object(Default::default())),
                    ),
                    is_error: None,
                    result: None,
                    partial_result: None,
                    diffs: Vec::new(),
                    output: None,
                };
                self.agent(run_id, run, "tool", data);
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                let value = serde_json::to_value(&update).unwrap_or_default();
                let info = {
                    let info = run.tools.entry(id.clone()).or_default();
                    if info.name.is_empty() {
                        info.name = tool_name(&value);
                    }
                    if let Some(kind) = value["kind"].as_str() {
                        info.kind = kind.to_string();
                    } else if info.kind.is_empty() {
                        info.kind = tool_kind(&value).to_string();
                    }
                    info.clone()
                };
                let content = tool_content(&value);
                let diffs = tool_diffs(&value);
                let output = (info.kind == "execute")
                    .then(|| command_output(&value))
                    .flatten();
                let ended = matches!(
                    update.fields.status,
                    Some(ToolCallStatus::Completed | ToolCallStatus::Failed)
                );
                if !ended && content.is_empty() {
                    return;
                }
                let content = Some(ToolOutput { content });
                let data = ToolStep {
                    phase: if ended { "result" } else { "update" },
                    name: info.name,
                    kind: info.kind,
                    tool_call_id: id,
                    title: None,
                    args: None,
                    is_error: ended.then_some(update.fields.status == Some(ToolCallStatus::Failed)),
                    result: if ended { content.clone() } else { None },
                    partial_result: if ended { None } else { content },
                    diffs,
                    output,
                };
                self.agent(run_id, run, "tool", data);
            }
            _ => {}
        }
    }
}

/// The tool's name, from which OpenClaw's clients infer a kind: the
/// update's `name`, else a name of its kind.
pub(super) fn tool_name(call: &Value) -> String {
    if let Some(name) = call["name"].as_str().filter(|n| !n.is_empty()) {
        return name.to_string();
    }
    match call["kind"].as_str().unwrap_or_default() {
        "read" => "read",
        "edit" => "edit",
        "delete" => "delete",
        "move" => "move",
        "search" => "grep",
        "execute" => "bash",
        "fetch" => "fetch",
        "think" => "think",
        _ => "tool",
    }
    .to_string()
}

/// The ACP kind of a tool call (`read`, `edit`, `delete`, `move`,
/// `search`, `execute`, `think`, `fetch`, `other`), for clients that draw
/// calls by kind.
pub(super) fn tool_kind(call: &Value) -> &str {
    match call["kind"].as_str() {
        Some(kind) if !kind.is_empty() => kind,
        _ => "other",
    }
}

/// A tool update's diffs (ACP `diff` content), for clients that show an
/// edit as a diff: `{path, oldText, newText}`, `oldText` null for a new
/// file.
fn tool_diffs(update: &Value) -> Vec<Diff> {
    update["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "diff")
        .map(|item| Diff {
            path: item["path"].as_str().unwrap_or_default().to_string(),
            old_text: item["oldText"].as_str().map(String::from),
            new_text: item["newText"].as_str().unwrap_or_default().to_string(),
        })
        .collect()
}

/// A command's output as plain text: pincer's shell tool shows it to
/// editors as a Markdown `console` block (see `acp::updates::fenced`),
/// which a terminal view wants without the fence.
fn command_output(update: &Value) -> Option<String> {
    update["content"]
        .as_array()?
        .iter()
        .filter(|item| item["type"] == "content")
        .find_map(|item| item["content"]["text"].as_str())
        .map(unfenced)
}

/// The body of a Markdown code block fenced with backticks and labelled
/// `console`, the text as it was given when it is not one.
fn unfenced(text: &str) -> String {
    let body = text.split_once('\n').and_then(|(open, rest)| {
        let fence = open.strip_suffix("console")?;
        if fence.len() < 3 || !fence.chars().all(|c| c == '`') {
            return None;
        }
        let body = rest.strip_suffix(fence)?;
        Some(body.strip_suffix('\n').unwrap_or(body))
    });
    body.unwrap_or(text).to_string()
}

/// A tool update's content as text blocks.
fn tool_content(update: &Value) -> Vec<MessageBlock<'static>> {
    let mut blocks = Vec::new();
    for item in update["content"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("content") => {
                if let Some(text) = item["content"]["text"].as_str() {
                    blocks.push(MessageBlock::Text {
                        text: Cow::Owned(text.to_string()),
                    });
                }
            }
            Some("diff") => {
                let path = item["path"].as_str().unwrap_or_default();
                blocks.push(MessageBlock::Text {
                    text: Cow::Owned(format!("Edited {path}")),
                });
            }
            _ => {}
        }
    }
    blocks
}

/// `text` cut to at most `max` bytes, at a character's edge.
fn cut(text: &str, max: usize) -> String {
    text[..text.floor_char_boundary(max)].to_string()
}

/// Keeps `card` as `session`'s, dropping the least recently changed card
/// when [`super::MAX_CARDS`] sessions have one already.
fn keep_card(
    cards: &mut std::collections::HashMap<String, super::Card>,
    session: String,
    card: super::Card,
) {
    if !cards.contains_key(&session)
        && cards.len() >= super::MAX_CARDS
        && let Some(oldest) = cards
            .iter()
            .min_by_key(|(_, card)| card.updated_at)
            .map(|(id, _)| id.clone())
    {
        cards.remove(&oldest);
    }
    cards.insert(session, card);
}

#[cfg(test)]
mod card_tests {
    use super::*;

    #[test]
    fn a_step_is_cut_at_a_character_s_edge() {
        assert_eq!(cut("plan", 512), "plan");
        // "é" is two bytes: a cut in its middle leaves it out.
        assert_eq!(cut("aé", 2), "a");
        assert_eq!(cut(&"x".repeat(600), 512).len(), 512);
    }

    #[test]
    fn the_cards_kept_are_bounded_and_the_oldest_goes_first() {
        let card = |at: u64| super::super::Card {
            revision: 1,
            updated_at: at,
            steps: Vec::new(),
        };
        let mut cards = std::collections::HashMap::new();
        for n in 0..super::super::MAX_CARDS {
            keep_card(&mut cards, format!("s{n}"), card(n as u64 + 10));
        }
        // A session that has one changes it in place.
        keep_card(&mut cards, "s0".into(), card(5_000));
        assert_eq!(cards.len(), super::super::MAX_CARDS);
        // A new one drops the least recently changed (s1 now).
        keep_card(&mut cards, "new".into(), card(6_000));
        assert_eq!(cards.len(), super::super::MAX_CARDS);
        assert!(cards.contains_key("s0") && cards.contains_key("new"));
        assert!(!cards.contains_key("s1"));
    }
}
