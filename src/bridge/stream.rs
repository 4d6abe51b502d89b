//! The gateway's events as ACP updates, exactly once.
//!
//! OpenClaw's `chat` event carries the run's text so far (`message`); the
//! bridge keeps, per run, what it has already passed on (in bounded
//! memory: see [`Sent`]) and sends only what extends it, so a coalesced
//! delta, a repeated event or an event after a reconnect yields neither a
//! dropped nor a doubled character. pincer's gateway, told by the bridge's
//! `pincer.chat-deltas` cap, sends only the new text (`deltaText`, and
//! thinking as `agent` `thinking` deltas); the per-run `seq` of chat events
//! tells a repeat from news then. Tool events are kept per call id, so a start or a result
//! heard twice (or recovered from `chat.history` after a reconnect) is
//! passed on once.
//!
//! After a reconnect each prompt in flight is reconciled: `agent.wait`
//! says whether its run ended while the line was down, `chat.history`
//! gives the tool calls missed meanwhile, and a run the gateway no longer
//! knows (it restarted) ends the prompt with an error that says so.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{RequestPermissionOutcome, RequestPermissionRequest};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::sent::Sent;
use super::{Bridge, wire};
use crate::gateway::client::{ClientError, Incoming};
use crate::gateway::protocol::events::{ChatEvent, ChatState};

/// How long a prompt waits for a lost gateway to come back before it
/// fails (the run may go on there; `session/load` shows it later).
const DISCONNECT_GRACE: Duration = Duration::from_secs(30);

/// The most runs of other clients followed at once: a gateway that starts
/// runs it never ends cannot grow the bridge without bound.
const MAX_FOREIGN_RUNS: usize = 256;

/// The most tool calls remembered per run (a gateway could invent ids
/// without end); calls past it are not passed on.
const MAX_TOOLS: usize = 4096;

/// How this bridge's prompt for a run ends.
#[derive(Debug)]
pub enum Ending {
    /// An ACP stop reason.
    Stop(&'static str),
    /// A JSON-RPC error with this message.
    Error(String),
}

/// What the bridge has passed on of one run.
pub struct Run {
    pub key: String,
    /// This bridge's prompt, until it is answered.
    done: Option<oneshot::Sender<Ending>>,
    /// The editor cancelled it: what the run still says is dropped.
    cancelled: bool,
    /// The run's text and thinking as last heard, of which the editor has
    /// everything that extended the previous value.
    text: Sent,
    thinking: Sent,
    /// The last per-run `seq` of a chat event.
    chat_seq: u64,
    /// Tool calls by id: `true` once ended.
    tools: HashMap<String, Tool>,
}

struct Tool {
    name: String,
    title: Option<String>,
    ended: bool,
}

impl Run {
    pub fn ours(key: &str, done: oneshot::Sender<Ending>) -> Self {
        Self {
            done: Some(done),
            ..Self::theirs(key)
        }
    }

    /// A run another client started in a session this bridge has open.
    fn theirs(key: &str) -> Self {
        Self {
            key: key.to_string(),
            done: None,
            cancelled: false,
            text: Sent::default(),
            thinking: Sent::default(),
            chat_seq: 0,
            tools: HashMap::new(),
        }
    }

    pub fn is_pending(&self) -> bool {
        self.done.is_some()
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }

    pub fn settle(&mut self, ending: Ending) {
        if let Some(done) = self.done.take() {
            let _ = done.send(ending);
        }
    }

    pub fn cancel(&mut self) {
        self.cancelled = true;
        self.settle(Ending::Stop("cancelled"));
    }

    /// What a tool event adds: nothing for a start or an end heard before.
    fn tool(&mut self, phase: &str, data: &Value) -> Vec<Value> {
        let Some(id) = data["toolCallId"].as_str() else {
            return Vec::new();
        };
        let name = data["name"].as_str().unwrap_or("tool");
        let mut updates = Vec::new();
        let known = self.tools.contains_key(id);
        if !known && self.tools.len() >= MAX_TOOLS {
            return Vec::new();
        }
        if !known {
            let args = if data["args"].is_null() {
                json!({})
            } else {
                data["args"].clone()
            };
            let title = data["title"].as_str();
            updates.push(wire::tool_call(id, name, &args, title, "in_progress"));
            self.tools.insert(
                id.to_string(),
                Tool {
                    name: name.to_string(),
                    title: title.map(String::from),
                    ended: false,
                },
            );
        }
        let Some(tool) = self.tools.get_mut(id) else {
            return updates;
        };
        match phase {
            "update" if !tool.ended => {
                let content = wire::tool_content(&data["partialResult"]);
                if !content.is_empty() {
                    updates.push(json!({
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": id,
                        "status": "in_progress",
                        "content": content,
                    }));
                }
            }
            "result" if !tool.ended => {
                tool.ended = true;
                updates.push(wire::tool_done(
                    id,
                    &data["result"],
                    data["isError"] == true,
                ));
            }
            _ => {}
        }
        updates
    }

    /// What a cumulative `message` adds to what was passed on.
    fn absorb(&mut self, event: &ChatEvent<'_>, fresh_seq: bool) -> Vec<Value> {
        let mut updates = Vec::new();
        if let Some(message) = &event.message {
            let thinking = message.joined(true);
            if let Some(new) = self.thinking.advance(&thinking) {
                updates.push(wire::thought_chunk(&new));
            }
            let text = message.joined(false);
            if let Some(new) = self.text.advance(&text) {
                updates.push(wire::message_chunk(&new));
            }
        } else if let Some(delta) = event.delta_text.as_deref()
            && fresh_seq
        {
            if event.replace {
                self.text.reset(delta);
            } else if !delta.is_empty() {
                self.text.push(delta);
                updates.push(wire::message_chunk(delta));
            }
        }
        updates
    }
}

/// Reads the connection's events until it is gone.
pub async fn pump(bridge: Arc<Bridge>, mut incoming: mpsc::UnboundedReceiver<Incoming>) {
    while let Some(heard) = incoming.recv().await {
        if let Incoming::Disconnected { .. } = &heard {
            let watcher = bridge.clone();
            tokio::spawn(async move { give_up_after_grace(&watcher).await });
        }
        bridge.heard(heard);
    }
}

/// Fails the prompts in flight when the gateway stays away.
async fn give_up_after_grace(bridge: &Bridge) {
    if bridge.client.up_within(DISCONNECT_GRACE).await {
        return;
    }
    let message = format!(
        "lost the gateway at {} during this turn and could not reach it again within {} s; \
         the run may go on there (session/load shows it once the gateway is back)",
        bridge.client.url(),
        DISCONNECT_GRACE.as_secs()
    );
    for run in bridge.state.lock().runs.values_mut() {
        run.settle(Ending::Error(message.clone()));
    }
}

/// One event from the gateway.
pub fn event(bridge: &Arc<Bridge>, name: &str, payload: Value) {
    match name {
        "chat" => chat(bridge, &payload),
        "agent" => agent(bridge, &payload),
        "session.message" => user_message(bridge, &payload),
        "exec.approval.requested" => {
            let request = &payload["request"];
            let decisions = payload["allowedDecisions"].as_array().map(|d| {
                d.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect::<Vec<_>>()
            });
            approval(
                bridge,
                Approval {
                    id: payload["id"].as_str().unwrap_or_default().to_string(),
                    key: request["sessionKey"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    tool_call_id: request["toolCallId"].as_str().map(String::from),
                    command: request["command"]
                        .as_str()
                        .or(request["commandPreview"].as_str())
                        .map(String::from),
                    title: None,
                    decisions,
                },
            );
        }
        _ => {}
    }
}

/// The run an event belongs to, created for a run another client started
/// in an open session; `None` for sessions this bridge has not open.
fn run_of<'a>(state: &'a mut super::State, run_id: &str, key: Option<&str>) -> Option<&'a mut Run> {
    if !state.runs.contains_key(run_id) {
        let key = key.filter(|k| state.sessions.contains_key(*k))?;
        let foreign = state.runs.values().filter(|r| !r.is_pending()).count();
        if foreign >= MAX_FOREIGN_RUNS {
            return None;
        }
        state.runs.insert(run_id.to_string(), Run::theirs(key));
    }
    state.runs.get_mut(run_id)
}

fn chat(bridge: &Bridge, payload: &Value) {
    // A frame whose fields have the wrong types (or a state no gateway
    // sends) is dropped whole, as OpenClaw's clients drop it: half of a
    // broken frame is no safer.
    let event = match ChatEvent::deserialize(payload) {
        Ok(event) => event,
        Err(e) => {
            tracing::warn!(
                run = payload["runId"].as_str().unwrap_or_default(),
                error = %e,
                "the gateway sent a malformed chat event; dropped"
            );
            return;
        }
    };
    let run_id = event.run_id.as_ref();
    let ending = match event.state {
        ChatState::Final => Some(match event.stop_reason.as_deref() {
            Some("max_tokens" | "length") => Ending::Stop("max_tokens"),
            _ => Ending::Stop("end_turn"),
        }),
        ChatState::Aborted => Some(Ending::Stop("cancelled")),
        ChatState::Error if event.error_kind.as_deref() == Some("refusal") => {
            Some(Ending::Stop("refusal"))
        }
        ChatState::Error => Some(Ending::Error(
            event
                .error_message
                .as_deref()
                .unwrap_or("the gateway reported an error for this turn")
                .to_string(),
        )),
        ChatState::Delta => None,
    };
    let mut state = bridge.state.lock();
    let Some(run) = run_of(&mut state, run_id, event.session_key.as_deref()) else {
        return;
    };
    if run.cancelled {
        // The editor has its answer; the run's end only frees it.
        if ending.is_some() {
            state.runs.remove(run_id);
        }
        return;
    }
    let fresh = match event.seq {
        Some(seq) if seq <= run.chat_seq => return,
        Some(seq) => {
            let next = seq == run.chat_seq + 1;
            run.chat_seq = seq;
            next
        }
        None => true,
    };
    let updates = run.absorb(&event, fresh);
    let key = run.key.clone();
    // The updates go out before the prompt's answer.
    for update in updates {
        bridge.notify(&key, update);
    }
    if let Some(ending) = ending
        && let Some(mut run) = state.runs.remove(run_id)
    {
        run.settle(ending);
    }
}

fn agent(bridge: &Arc<Bridge>, payload: &Value) {
    let (Some(run_id), Some(key)) = (payload["runId"].as_str(), payload["sessionKey"].as_str())
    else {
        return;
    };
    let data = &payload["data"];
    match payload["stream"].as_str() {
        Some("tool") => {
            let mut state = bridge.state.lock();
            let Some(run) = run_of(&mut state, run_id, Some(key)) else {
                return;
            };
            if run.cancelled {
                return;
            }
            let updates = run.tool(data["phase"].as_str().unwrap_or_default(), data);
            let key = run.key.clone();
            for update in updates {
                bridge.notify(&key, update);
            }
        }
        // pincer's gateway sends this bridge no cumulative `message` with
        // its deltas (the `pincer.chat-deltas` cap): thinking comes as
        // deltas here. Another gateway's thinking is read from `message`.
        Some("thinking") if bridge.client.hello().is_some_and(|h| h.is_pincer()) => {
            let Some(delta) = data["delta"].as_str().filter(|d| !d.is_empty()) else {
                return;
            };
            let mut state = bridge.state.lock();
            let Some(run) = run_of(&mut state, run_id, Some(key)) else {
                return;
            };
            if run.cancelled {
                return;
            }
            run.thinking.push(delta);
            let key = run.key.clone();
            bridge.notify(&key, wire::thought_chunk(delta));
        }
        Some("approval") if data["phase"] == "requested" => {
            let Some(id) = data["approvalId"].as_str() else {
                return;
            };
            approval(
                bridge,
                Approval {
                    id: id.to_string(),
                    key: key.to_string(),
                    tool_call_id: data["toolCallId"].as_str().map(String::from),
                    command: data["command"].as_str().map(String::from),
                    title: data["title"].as_str().map(String::from),
                    decisions: None,
                },
            );
        }
        _ => {}
    }
}

/// A prompt another client sent to an open session.
fn user_message(bridge: &Bridge, payload: &Value) {
    let (Some(key), Some(run_id)) = (payload["sessionKey"].as_str(), payload["runId"].as_str())
    else {
        return;
    };
    let state = bridge.state.lock();
    if !state.sessions.contains_key(key) || state.runs.get(run_id).is_some_and(Run::is_pending) {
        return;
    }
    drop(state);
    let text = wire::joined(&payload["message"]["content"], "text");
    if !text.is_empty() {
        bridge.notify(key, wire::user_chunk(&text));
    }
}

/// A permission question from the gateway.
struct Approval {
    id: String,
    key: String,
    tool_call_id: Option<String>,
    command: Option<String>,
    title: Option<String>,
    decisions: Option<Vec<String>>,
}

const DECISIONS: [(&str, &str, &str); 3] = [
    ("allow-once", "Allow once", "allow_once"),
    ("allow-always", "Always allow", "allow_always"),
    ("deny", "Deny", "reject_once"),
];

/// Asks the editor, once per approval id, and answers the gateway.
fn approval(bridge: &Arc<Bridge>, approval: Approval) {
    if approval.id.is_empty() {
        return;
    }
    let tool = {
        let mut state = bridge.state.lock();
        if !state.sessions.contains_key(&approval.key)
            || !state.approvals.insert(approval.id.clone())
        {
            return;
        }
        approval.tool_call_id.as_ref().and_then(|id| {
            state
                .runs
                .values()
                .find_map(|run| run.tools.get(id))
                .map(|tool| (tool.name.clone(), tool.title.clone()))
        })
    };
    let bridge = bridge.clone();
    tokio::spawn(async move {
        let decision = ask(&bridge, &approval, tool).await;
        let params = json!({"id": approval.id, "decision": decision});
        match bridge
            .client
            .request(
                "exec.approval.resolve",
                params,
                super::CONNECT_WAIT,
                Some(Duration::from_secs(30)),
            )
            .await
        {
            Ok(_) => {}
            // Another client, the editor of the gateway, or its timeout
            // settled it first.
            Err(ClientError::Rpc { message, .. }) => {
                tracing::info!(id = %approval.id, %message, "the approval was already settled");
            }
            Err(e) => tracing::warn!(error = %e, "could not answer an approval"),
        }
    });
}

/// The editor's decision on an approval: one of the gateway's decisions,
/// `deny` for anything else.
async fn ask(
    bridge: &Bridge,
    approval: &Approval,
    tool: Option<(String, Option<String>)>,
) -> String {
    let decisions = match &approval.decisions {
        Some(d) if !d.is_empty() => d.clone(),
        _ => bridge
            .client
            .request(
                "exec.approval.get",
                json!({"id": approval.id}),
                super::CONNECT_WAIT,
                Some(Duration::from_secs(30)),
            )
            .await
            .ok()
            .and_then(|got| {
                got["allowedDecisions"].as_array().map(|d| {
                    d.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
            })
            .filter(|d: &Vec<String>| !d.is_empty())
            .unwrap_or_else(|| DECISIONS.iter().map(|(d, _, _)| d.to_string()).collect()),
    };
    let options: Vec<Value> = DECISIONS
        .iter()
        .filter(|(id, _, _)| decisions.iter().any(|d| d == id))
        .map(|(id, name, kind)| json!({"optionId": id, "name": name, "kind": kind}))
        .collect();
    if options.is_empty() || bridge.editor_gone() {
        return "deny".to_string();
    }
    let (name, tool_title) = tool.unzip();
    let kind = name.as_deref().map_or("execute", wire::tool_kind);
    let title = tool_title
        .flatten()
        .or_else(|| approval.title.clone())
        .or_else(|| approval.command.clone())
        .unwrap_or_else(|| "Run a command".to_string());
    let request = json!({
        "sessionId": approval.key,
        "toolCall": {
            "toolCallId": approval.tool_call_id.clone().unwrap_or_else(|| approval.id.clone()),
            "title": title,
            "kind": kind,
            "status": "pending",
            "rawInput": {"approvalId": approval.id, "command": approval.command},
        },
        "options": options,
    });
    let Ok(request) = serde_json::from_value::<RequestPermissionRequest>(request) else {
        return "deny".to_string();
    };
    let Some(cx) = bridge.cx.get() else {
        return "deny".to_string();
    };
    let answer = tokio::select! {
        answer = cx.send_request(request).block_task() => answer,
        () = bridge.drain.closed() => return "deny".to_string(),
    };
    match answer.map(|a| a.outcome) {
        Ok(RequestPermissionOutcome::Selected(selected)) => {
            let chosen = selected.option_id.0.to_string();
            if decisions.contains(&chosen) {
                chosen
            } else {
                "deny".to_string()
            }
        }
        _ => "deny".to_string(),
    }
}

/// After a reconnect: settles or catches up each prompt in flight. A
/// gateway that `restarted` (its `bootId` changed) has lost them all,
/// whatever `agent.wait` would say of a run id it never saw.
pub async fn reconcile(bridge: &Arc<Bridge>, restarted: bool) {
    let pending: Vec<(String, String)> = bridge
        .state
        .lock()
        .runs
        .iter()
        .filter(|(_, run)| run.is_pending())
        .map(|(id, run)| (id.clone(), run.key.clone()))
        .collect();
    for (run_id, key) in pending {
        let waited = if restarted {
            None
        } else {
            Some(
                bridge
                    .client
                    .request(
                        "agent.wait",
                        json!({"runId": run_id, "timeoutMs": 0}),
                        super::CONNECT_WAIT,
                        Some(Duration::from_secs(30)),
                    )
                    .await,
            )
        };
        let status = match &waited {
            None | Some(Err(ClientError::Rpc { .. })) => "unknown".to_string(),
            Some(Ok(answer)) => answer["status"].as_str().unwrap_or("timeout").to_string(),
            Some(Err(_)) => continue,
        };
        let waited = waited.and_then(Result::ok);
        catch_up_tools(bridge, &run_id, &key).await;
        let ending = match status.as_str() {
            "timeout" => None,
            "ok" => {
                let text = waited
                    .as_ref()
                    .and_then(|a| a["terminalReply"]["text"].as_str())
                    .unwrap_or_default()
                    .to_string();
                let mut state = bridge.state.lock();
                if let Some(run) = state.runs.get_mut(&run_id)
                    && let Some(new) = run.text.advance(&text)
                {
                    bridge.notify(&key, wire::message_chunk(&new));
                }
                Some(Ending::Stop("end_turn"))
            }
            "error" => {
                let error = waited
                    .as_ref()
                    .and_then(|a| a["error"].as_str())
                    .unwrap_or("the turn failed on the gateway")
                    .to_string();
                Some(if error == "aborted" {
                    Ending::Stop("cancelled")
                } else {
                    Ending::Error(error)
                })
            }
            _ => Some(Ending::Error(format!(
                "the gateway at {} no longer knows this turn (it restarted?); it was interrupted. \
                 Send the prompt again to go on: the session keeps what was saved.",
                bridge.client.url()
            ))),
        };
        if let Some(ending) = ending {
            let mut state = bridge.state.lock();
            if let Some(run) = state.runs.get_mut(&run_id) {
                run.settle(ending);
            }
            state.runs.remove(&run_id);
        }
    }
}

/// Tool calls of a run that ended or started while the line was down,
/// from the session's history: those after its last user message.
async fn catch_up_tools(bridge: &Bridge, run_id: &str, key: &str) {
    let Ok(history) = bridge
        .client
        .request(
            "chat.history",
            json!({"sessionKey": key, "limit": 200}),
            super::CONNECT_WAIT,
            Some(Duration::from_secs(30)),
        )
        .await
    else {
        return;
    };
    let messages = history["messages"].as_array().cloned().unwrap_or_default();
    let start = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .map_or(0, |i| i + 1);
    let mut state = bridge.state.lock();
    let Some(run) = state.runs.get_mut(run_id) else {
        return;
    };
    let mut updates = Vec::new();
    for message in &messages[start..] {
        match message["role"].as_str() {
            Some("assistant") => {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "toolCall" {
                        let data = json!({"toolCallId": block["id"], "name": block["name"], "args": block["arguments"]});
                        updates.extend(run.tool("start", &data));
                    }
                }
            }
            Some("toolResult") => {
                let data = json!({
                    "toolCallId": message["toolCallId"],
                    "name": message["toolName"],
                    "isError": message["isError"],
                    "result": {"content": message["content"]},
                });
                updates.extend(run.tool("result", &data));
            }
            _ => {}
        }
    }
    for update in updates {
        bridge.notify(key, update);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    fn texts(updates: &[Value]) -> String {
        updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .map(|u| u["content"]["text"].as_str().unwrap())
            .collect()
    }

    fn delta(seq: u64, text: &str) -> Value {
        json!({"seq": seq, "state": "delta", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})
    }

    /// A `chat` delta as the bridge reads it (run `r` unless it names one).
    fn event(payload: &Value) -> ChatEvent<'static> {
        let mut payload = payload.clone();
        payload["runId"] = json!("r");
        if payload.get("state").is_none() {
            payload["state"] = json!("delta");
        }
        // Kept for the test's life, as the frame a pump reads is.
        let payload: &'static Value = Box::leak(Box::new(payload));
        ChatEvent::deserialize(payload).unwrap()
    }

    #[test]
    fn cumulative_messages_give_each_character_once() {
        let (tx, _rx) = oneshot::channel();
        let mut run = Run::ours("k", tx);
        let mut sent = Vec::new();
        // Coalesced, repeated and out-of-date snapshots.
        for (seq, text) in [
            (1, "Hel"),
            (2, "Hello, wor"),
            (3, "Hello, world"),
            (4, "Hello"),
        ] {
            sent.extend(run.absorb(&event(&delta(seq, text)), true));
        }
        sent.extend(run.absorb(&event(&delta(5, "Hello, world! Ünïcode ✓")), true));
        assert_eq!(texts(&sent), "Hello, world! Ünïcode ✓");
    }

    #[test]
    fn a_rewrite_sends_nothing_for_what_changed_and_goes_on_from_it() {
        let (tx, _rx) = oneshot::channel();
        let mut run = Run::ours("k", tx);
        let mut sent = run.absorb(&event(&delta(1, "[[tag]] Hi")), true);
        sent.extend(run.absorb(&event(&delta(2, "Hi")), true));
        sent.extend(run.absorb(&event(&delta(3, "Hi there")), true));
        assert_eq!(texts(&sent), "[[tag]] Hi there");
    }

    #[test]
    fn delta_text_alone_is_taken_in_sequence() {
        let (tx, _rx) = oneshot::channel();
        let mut run = Run::ours("k", tx);
        let mut sent = run.absorb(&event(&json!({"deltaText": "a"})), true);
        sent.extend(run.absorb(&event(&json!({"deltaText": "b"})), false));
        sent.extend(run.absorb(&event(&json!({"deltaText": "c"})), true));
        assert_eq!(texts(&sent), "ac");
    }

    #[test]
    fn thinking_blocks_become_thought_chunks() {
        let (tx, _rx) = oneshot::channel();
        let mut run = Run::ours("k", tx);
        let payload = json!({"message": {"content": [{"type": "thinking", "thinking": "let me see"}, {"type": "text", "text": ""}]}});
        assert_eq!(
            run.absorb(&event(&payload), true),
            vec![wire::thought_chunk("let me see")]
        );
    }

    #[test]
    fn a_gateway_inventing_tool_calls_is_remembered_up_to_a_bound() {
        let (tx, _rx) = tokio::sync::oneshot::channel();
        let mut run = Run::ours("k", tx);
        for n in 0..MAX_TOOLS + 100 {
            let id = format!("tc{n}");
            run.tool("start", &json!({"toolCallId": id, "name": "read"}));
        }
        assert_eq!(run.tools.len(), MAX_TOOLS);
        let past = run.tool("start", &json!({"toolCallId": "one-more", "name": "read"}));
        assert_eq!(past, Vec::<Value>::new());
    }

    #[test]
    fn a_gateway_starting_runs_it_never_ends_is_followed_up_to_a_bound() {
        let mut state = crate::bridge::State::default();
        state.sessions.insert("k".into(), Default::default());
        for n in 0..MAX_FOREIGN_RUNS + 100 {
            let _ = run_of(&mut state, &format!("run{n}"), Some("k"));
        }
        assert_eq!(state.runs.len(), MAX_FOREIGN_RUNS);
        // A run of a session the bridge has not open is never followed.
        assert!(run_of(&mut state, "run0", Some("k")).is_some());
        assert!(run_of(&mut state, "other", Some("not-open")).is_none());
    }

    #[test]
    fn a_tool_heard_twice_is_passed_on_once() {
        let (tx, _rx) = oneshot::channel();
        let mut run = Run::ours("k", tx);
        let start = json!({"toolCallId": "t", "name": "bash", "args": {"command": "ls"}});
        let result = json!({"toolCallId": "t", "name": "bash", "isError": true, "result": {"content": [{"type": "text", "text": "no"}]}});
        let mut updates = run.tool("start", &start);
        updates.extend(run.tool("start", &start));
        updates.extend(run.tool("result", &result));
        updates.extend(run.tool("result", &result));
        assert_eq!(updates.len(), 2);
        assert_eq!(updates[0]["kind"], "execute");
        assert_eq!(updates[0]["title"], "bash: command: ls");
        assert_eq!(updates[1]["status"], "failed");
    }
}
