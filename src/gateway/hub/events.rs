//! What sessions do, as the protocol's events: the registry's observer
//! feeds [`Hub::observe`], which keeps each run's text and turns every
//! update into `chat`, `agent`, `session.message` and `sessions.changed`
//! events for the clients that follow the session.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ContentBlock, SessionUpdate, ToolCallStatus};
use serde_json::{Value, json};

use super::{Audience, Hub, Outcome, Run, outcome_of};
use crate::acp::registry::Observed;
use crate::gateway::frames::now_ms;

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
                let data = json!({"phase": "start", "startedAt": now_ms()});
                self.agent(&run_id, run, "lifecycle", data);
                let message = json!({
                    "sessionKey": run.key,
                    "runId": run_id,
                    "message": {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": now_ms()},
                });
                self.broadcast("session.message", &message, Audience::Session(&session));
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
                let session = session.0.to_string();
                let ours = self
                    .state()
                    .asked
                    .remove(&(session.clone(), tool_call_id.clone()));
                if !ours {
                    let decision = option
                        .map(|(_, kind)| super::approvals::decision_of(kind).to_string())
                        .unwrap_or_else(|| "deny".to_string());
                    let payload = json!({
                        "id": format!("editor:{tool_call_id}"),
                        "decision": decision,
                        "sessionKey": self.key_of(&session),
                        "toolCallId": tool_call_id,
                        "resolvedBy": "editor",
                        "ts": now_ms(),
                    });
                    self.broadcast("exec.approval.resolved", &payload, Audience::Approvers);
                }
            }
            // A session the gateway creates is announced once its key names
            // it (see `open`); the others when they are prompted.
            Observed::Opened { .. } => {}
            Observed::Closed { session } => self.session_changed("close", &session.0),
        }
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
                let extra = json!({"deltaText": delta, "message": run.message()});
                self.chat(run_id, run, "delta", extra);
                let data = json!({"text": run.text, "delta": delta});
                self.agent(run_id, run, "assistant", data);
            }
            SessionUpdate::AgentThoughtChunk(chunk) => {
                let ContentBlock::Text(text) = chunk.content else {
                    return;
                };
                run.thinking.push_str(&text.text);
                let extra = json!({"deltaText": "", "message": run.message()});
                self.chat(run_id, run, "delta", extra);
                let data = json!({"text": run.thinking, "delta": text.text});
                self.agent(run_id, run, "thinking", data);
            }
            SessionUpdate::ToolCall(call) => {
                let id = call.tool_call_id.0.to_string();
                let value = serde_json::to_value(&call).unwrap_or_default();
                let name = tool_name(&value);
                run.tools.insert(id.clone(), name.clone());
                run.after_tool = true;
                let data = json!({
                    "phase": "start",
                    "name": name,
                    "toolCallId": id,
                    "title": call.title,
                    "args": call.raw_input.clone().unwrap_or_else(|| json!({})),
                });
                self.agent(run_id, run, "tool", data);
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                let name = run.tools.get(&id).cloned().unwrap_or_default();
                let value = serde_json::to_value(&update).unwrap_or_default();
                let content = tool_content(&value);
                match update.fields.status {
                    Some(ToolCallStatus::Completed) | Some(ToolCallStatus::Failed) => {
                        let failed = update.fields.status == Some(ToolCallStatus::Failed);
                        let data = json!({
                            "phase": "result",
                            "name": name,
                            "toolCallId": id,
                            "isError": failed,
                            "result": {"content": content},
                        });
                        self.agent(run_id, run, "tool", data);
                    }
                    _ if !content.is_empty() => {
                        let data = json!({
                            "phase": "update",
                            "name": name,
                            "toolCallId": id,
                            "partialResult": {"content": content},
                        });
                        self.agent(run_id, run, "tool", data);
                    }
                    _ => {}
                }
            }
            SessionUpdate::Plan(plan) => {
                let data = serde_json::to_value(&plan).unwrap_or_default();
                self.agent(run_id, run, "plan", data);
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

/// A tool update's content as text blocks.
fn tool_content(update: &Value) -> Vec<Value> {
    let mut blocks = Vec::new();
    for item in update["content"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("content") => {
                if let Some(text) = item["content"]["text"].as_str() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
            }
            Some("diff") => {
                let path = item["path"].as_str().unwrap_or_default();
                blocks.push(json!({"type": "text", "text": format!("Edited {path}")}));
            }
            _ => {}
        }
    }
    blocks
}
