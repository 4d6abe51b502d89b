//! The gateway's methods: each checks its scope and its params, then acts
//! through the hub. The table in docs/gateway.md lists them with their
//! params and results.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ContentBlock, ImageContent, TextContent};
use serde_json::{Value, json};

use super::conn::{Conn, Need, Out};
use super::frames::{self, APPROVAL_NOT_FOUND, ErrorShape, FORBIDDEN, Request, now_ms};
use super::hub::{Hub, MAIN_KEY, Outcome, merge};
use crate::agent::AgentMessage;
use crate::config::QueueMode;
use crate::llm::{AssistantContent, Content, Message, ThinkingLevel};

/// Every method, for `hello-ok`.
pub const METHODS: &[&str] = &[
    "health",
    "chat.send",
    "chat.abort",
    "chat.history",
    "chat.subscribe",
    "chat.unsubscribe",
    "agent",
    "agent.wait",
    "sessions.list",
    "sessions.resolve",
    "sessions.get",
    "sessions.patch",
    "sessions.reset",
    "sessions.delete",
    "sessions.compact",
    "sessions.subscribe",
    "sessions.unsubscribe",
    "models.list",
    "exec.approval.get",
    "exec.approval.list",
    "exec.approval.resolve",
    "cron.list",
];

/// Every event, for `hello-ok`.
pub const EVENTS: &[&str] = &[
    "chat",
    "agent",
    "tick",
    "session.message",
    "sessions.changed",
    "exec.approval.requested",
    "exec.approval.resolved",
];

/// The longest session key.
const MAX_KEY: usize = 512;

type Reply = Result<Value, ErrorShape>;

/// Runs one request; the answer (or answers, for `agent`) go to the
/// client's outbox.
pub async fn call(hub: &Arc<Hub>, conn: &Arc<Conn>, request: Request) {
    let id = request.id.clone();
    let result = dispatch(hub, conn, request).await;
    let frame = match result {
        Ok(payload) => frames::ok(&id, &payload),
        Err(error) => frames::error(&id, &error),
    };
    conn.out.push(Out::Frame(frame));
}

/// Runs one request for an in-process client (a chat channel, the
/// scheduler) and returns its answer instead of queueing it as a frame.
/// Not for `agent`, whose first answer is a frame of its own.
pub async fn invoke(hub: &Arc<Hub>, conn: &Arc<Conn>, method: &str, params: Value) -> Reply {
    let request = Request {
        id: "in-process".to_string(),
        method: method.to_string(),
        params,
    };
    dispatch(hub, conn, request).await
}

fn need(conn: &Conn, need: Need) -> Result<(), ErrorShape> {
    if conn.scopes.allows(need) {
        return Ok(());
    }
    Err(
        ErrorShape::new(FORBIDDEN, format!("missing scope: {}", need.scope())).details(json!({
            "code": "MISSING_SCOPE",
            "missingScope": need.scope(),
            "requiredScopes": need.granted_by(),
        })),
    )
}

fn string<'a>(params: &'a Value, name: &str) -> Result<&'a str, ErrorShape> {
    match &params[name] {
        Value::String(s) => Ok(s),
        Value::Null => Err(ErrorShape::invalid(format!("`{name}` is required"))),
        _ => Err(ErrorShape::invalid(format!("`{name}` must be a string"))),
    }
}

fn optional<'a>(params: &'a Value, name: &str) -> Result<Option<&'a str>, ErrorShape> {
    match &params[name] {
        Value::String(s) => Ok(Some(s)),
        Value::Null => Ok(None),
        _ => Err(ErrorShape::invalid(format!("`{name}` must be a string"))),
    }
}

fn key_param<'a>(params: &'a Value, name: &str) -> Result<&'a str, ErrorShape> {
    let key = string(params, name)?;
    if key.is_empty() || key.chars().count() > MAX_KEY {
        return Err(ErrorShape::invalid(format!(
            "`{name}` must be 1 to {MAX_KEY} characters"
        )));
    }
    // Keys reach terminals (`pincer sessions list`), logs and file names:
    // one that could carry an escape sequence or reorder text is refused.
    let unsafe_char =
        |c: char| c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    if key.chars().any(unsafe_char) {
        return Err(ErrorShape::invalid(format!(
            "`{name}` holds a control character or a bidirectional override: a session key is printable text"
        )));
    }
    Ok(key)
}

fn limit(params: &Value, default: usize, max: usize) -> Result<usize, ErrorShape> {
    match &params["limit"] {
        Value::Null => Ok(default),
        value => value
            .as_u64()
            .map(|n| (n as usize).min(max))
            .ok_or_else(|| ErrorShape::invalid("`limit` must be a non-negative integer")),
    }
}

async fn dispatch(hub: &Arc<Hub>, conn: &Arc<Conn>, request: Request) -> Reply {
    let params = if request.params.is_null() {
        json!({})
    } else {
        request.params
    };
    if !params.is_object() {
        return Err(ErrorShape::invalid("`params` must be an object"));
    }
    match request.method.as_str() {
        "health" => {
            need(conn, Need::Read)?;
            Ok(json!({"ok": true, "uptimeMs": hub.started.elapsed().as_millis() as u64}))
        }
        "chat.send" => {
            need(conn, Need::Write)?;
            let key = key_param(&params, "sessionKey")?;
            send(hub, conn, key, &params)
                .await
                .map(|(run, status)| json!({"runId": run, "status": status}))
        }
        "agent" => {
            need(conn, Need::Write)?;
            agent(hub, conn, &request.id, &params).await
        }
        "agent.wait" => {
            need(conn, Need::Read)?;
            agent_wait(hub, &params).await
        }
        "chat.abort" => {
            need(conn, Need::Write)?;
            let key = key_param(&params, "sessionKey")?;
            let run = optional(&params, "runId")?;
            let Some(session) = hub.lookup(key) else {
                return Ok(json!({"ok": true, "aborted": false, "runIds": []}));
            };
            let runs = hub.unfinished(&session);
            if run.is_some_and(|r| !runs.iter().any(|x| x == r)) || runs.is_empty() {
                return Ok(json!({"ok": true, "aborted": false, "runIds": []}));
            }
            let runs = hub.abort(&session)?;
            Ok(json!({"ok": true, "aborted": true, "runIds": runs}))
        }
        "chat.history" => {
            need(conn, Need::Read)?;
            let key = key_param(&params, "sessionKey")?;
            let limit = limit(&params, 200, 1000)?;
            let (session, messages) = history(hub, key, limit)?;
            match &session {
                Some(session) => hub.follow(conn, session),
                None => hub.follow_key(conn, key),
            }
            let thinking = session
                .as_deref()
                .and_then(|id| crate::session::find(hub.data_dir(), id))
                .and_then(|path| recent_settings(&path).thinking)
                .unwrap_or_else(|| Defaults::load(hub).thinking);
            Ok(
                json!({"sessionKey": key, "sessionId": session, "messages": messages, "thinkingLevel": thinking}),
            )
        }
        "chat.subscribe" => {
            need(conn, Need::Read)?;
            let key = key_param(&params, "sessionKey")?;
            if let Some(session) = hub.lookup(key) {
                hub.follow(conn, &session);
            } else if conn.scopes.allows(Need::Write) {
                let session = hub.open(key).await?;
                hub.follow(conn, &session);
            } else {
                // A reader watches sessions that exist; it creates none.
                hub.follow_key(conn, key);
            }
            Ok(json!({"ok": true}))
        }
        "chat.unsubscribe" => {
            need(conn, Need::Read)?;
            let key = key_param(&params, "sessionKey")?;
            let session = hub.lookup(key);
            hub.unfollow(conn, key, session.as_deref());
            Ok(json!({"ok": true}))
        }
        "sessions.get" => {
            need(conn, Need::Read)?;
            let key = key_param(&params, "key")?;
            let limit = limit(&params, 1000, usize::MAX)?;
            let (session, messages) = history(hub, key, limit)?;
            if let Some(session) = &session {
                hub.follow(conn, session);
            }
            Ok(json!({"key": key, "sessionId": session, "messages": messages}))
        }
        "sessions.list" => {
            need(conn, Need::Read)?;
            list(hub, &params)
        }
        "sessions.resolve" => {
            need(conn, Need::Read)?;
            resolve(hub, &params)
        }
        "sessions.patch" => {
            need(conn, Need::Write)?;
            patch(hub, conn, &params).await
        }
        "sessions.reset" => {
            need(conn, Need::Write)?;
            let key = key_param(&params, "key")?;
            let session = hub.reset(key).await?;
            Ok(json!({"ok": true, "key": key, "sessionId": session}))
        }
        "sessions.delete" => {
            need(conn, Need::Admin)?;
            let key = key_param(&params, "key")?;
            let Some(session) = hub.lookup(key) else {
                return Ok(json!({"ok": true, "key": key, "deleted": false}));
            };
            let _ = hub.abort(&session);
            let transcript = crate::session::find(hub.data_dir(), &session);
            let deleted = hub.link()?.delete_session(&session).await.is_ok();
            if let Some(transcript) = &transcript {
                hub.forget_usage(transcript);
            }
            hub.forget_key(key);
            if deleted {
                hub.announce_deleted(key, &session);
            }
            Ok(json!({"ok": true, "key": key, "deleted": deleted}))
        }
        "sessions.compact" => {
            need(conn, Need::Write)?;
            let key = key_param(&params, "key")?;
            let instructions = optional(&params, "instructions")?.unwrap_or_default();
            let session = hub.open(key).await?;
            let run = uuid::Uuid::new_v4().to_string();
            let text = format!("/compact {instructions}").trim_end().to_string();
            let waiter = {
                hub.send(
                    &session,
                    key,
                    &run,
                    vec![ContentBlock::Text(TextContent::new(text))],
                    Some(QueueMode::FollowUp),
                )?;
                hub.wait_for(&run)
            };
            if let Some(waiter) = waiter {
                let _ = waiter.await;
            }
            match hub.outcome(&run).flatten() {
                Some((Outcome::Ok { .. }, _, _)) => {
                    Ok(json!({"ok": true, "key": key, "compacted": true}))
                }
                Some((Outcome::Error { message, .. }, _, _)) => Err(ErrorShape::invalid(message)),
                _ => Err(ErrorShape::invalid("the compaction was cancelled")),
            }
        }
        "sessions.subscribe" | "sessions.unsubscribe" => {
            need(conn, Need::Read)?;
            conn.sessions_changed.store(
                request.method == "sessions.subscribe",
                std::sync::atomic::Ordering::Relaxed,
            );
            Ok(json!({"ok": true}))
        }
        "models.list" => {
            need(conn, Need::Read)?;
            models(hub)
        }
        "exec.approval.get" => {
            if !conn.scopes.allows(Need::Read) {
                need(conn, Need::Approvals)?;
            }
            let id = string(&params, "id")?;
            hub.approval(id).ok_or_else(|| not_found(id))
        }
        "exec.approval.list" => {
            if !conn.scopes.allows(Need::Read) {
                need(conn, Need::Approvals)?;
            }
            Ok(json!({"approvals": hub.approvals()}))
        }
        "exec.approval.resolve" => {
            need(conn, Need::Approvals)?;
            let id = string(&params, "id")?;
            let decision = string(&params, "decision")?;
            let allowed = hub.approval_decisions(id).ok_or_else(|| not_found(id))?;
            if !allowed.iter().any(|d| d == decision) {
                return Err(ErrorShape::invalid(format!(
                    "`decision` must be one of: {}",
                    allowed.join(", ")
                )));
            }
            if hub.settle(id, Some(decision), "client") {
                Ok(json!({"ok": true}))
            } else {
                Err(not_found(id))
            }
        }
        "cron.list" => {
            need(conn, Need::Read)?;
            Ok(cron_list(hub))
        }
        "connect" => Err(ErrorShape::invalid("already connected")),
        other => Err(ErrorShape::invalid(format!("unknown method: {other}"))),
    }
}

/// The scheduled runs: each `[[cron]]` job and the heartbeat, with their
/// next and last runs (the same as `pincer cron list --json`).
fn cron_list(hub: &Hub) -> Value {
    let Some(plan) = hub.scheduled.get() else {
        return json!({"jobs": [], "heartbeat": null});
    };
    let record = super::scheduler::Record::load(&plan.state_file).unwrap_or_default();
    super::scheduler::listing(plan, &record, &jiff::Zoned::now())
}

fn not_found(id: &str) -> ErrorShape {
    ErrorShape::new(APPROVAL_NOT_FOUND, format!("no pending approval {id}"))
}

/// The prompt of a `chat.send` or `agent`: its text and images.
fn content(params: &Value) -> Result<Vec<ContentBlock>, ErrorShape> {
    let message = string(params, "message")?;
    let mut blocks = vec![ContentBlock::Text(TextContent::new(message))];
    match &params["attachments"] {
        Value::Null => {}
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                blocks.push(attachment(i, item)?);
            }
        }
        _ => return Err(ErrorShape::invalid("`attachments` must be an array")),
    }
    Ok(blocks)
}

/// One attachment as a prompt block: an image, or a text file (what
/// `pincer acp --connect` makes of an editor's embedded resource), which
/// the agent reads as an embedded resource named `attachment:NAME`.
fn attachment(i: usize, item: &Value) -> Result<ContentBlock, ErrorShape> {
    use base64::Engine;
    let kind = item["type"].as_str().unwrap_or("image");
    let mime = item["mimeType"].as_str().unwrap_or_default();
    let data = item["content"].as_str().unwrap_or_default();
    // A browser reads a file as a data URL (`FileReader.readAsDataURL`):
    // its base64 body is the content, its type the default `mimeType`.
    let (mime, data) = match data
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((url_mime, body)) if mime.is_empty() => (url_mime, body),
        Some((_, body)) => (mime, body),
        None => (mime, data),
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| ErrorShape::invalid(format!("attachments[{i}].content is not base64")))?;
    if kind == "image" && mime.starts_with("image/") {
        return Ok(ContentBlock::Image(ImageContent::new(data, mime)));
    }
    if kind == "file" {
        let Ok(text) = String::from_utf8(decoded) else {
            return Err(ErrorShape::invalid(format!(
                "attachments[{i}]: only text files are accepted (this one is not UTF-8)"
            )));
        };
        let name = item["fileName"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map_or_else(|| format!("attachment-{}", i + 1), String::from);
        let mime = if mime.is_empty() { "text/plain" } else { mime };
        let block = json!({
            "type": "resource",
            "resource": {"uri": format!("attachment:{name}"), "mimeType": mime, "text": text},
        });
        return serde_json::from_value(block)
            .map_err(|e| ErrorShape::invalid(format!("attachments[{i}]: {e}")));
    }
    Err(ErrorShape::invalid(format!(
        "attachments[{i}]: only images (`type: \"image\"`, an image/* `mimeType`) and text files \
         (`type: \"file\"`) are accepted"
    )))
}

/// `chat.send` and `agent`: the run id and the ack status.
async fn send(
    hub: &Arc<Hub>,
    conn: &Arc<Conn>,
    key: &str,
    params: &Value,
) -> Result<(String, &'static str), ErrorShape> {
    let run = string(params, "idempotencyKey")?;
    if run.is_empty() || run.len() > 256 {
        return Err(ErrorShape::invalid(
            "`idempotencyKey` must be 1 to 256 characters",
        ));
    }
    if let Some(status) = hub.known_run(run) {
        return Ok((run.to_string(), status));
    }
    let blocks = content(params)?;
    let mode = match optional(params, "queueMode")? {
        None => None,
        Some(mode) => Some(QueueMode::from_wire(mode).ok_or_else(|| {
            ErrorShape::invalid("`queueMode` must be steer, followup, collect or interrupt")
        })?),
    };
    let session = hub.open(key).await?;
    hub.follow(conn, &session);
    // Two sends with one key racing past the check above: the first wins.
    if let Some(status) = hub.known_run(run) {
        return Ok((run.to_string(), status));
    }
    hub.send(&session, key, run, blocks, mode)?;
    Ok((run.to_string(), "started"))
}

async fn agent(hub: &Arc<Hub>, conn: &Arc<Conn>, id: &str, params: &Value) -> Reply {
    let key = match optional(params, "sessionKey")? {
        Some(_) => key_param(params, "sessionKey")?,
        None => MAIN_KEY,
    };
    let (run, status) = send(hub, conn, key, params).await?;
    let accepted = json!({
        "runId": run,
        "sessionKey": key,
        "agentId": "main",
        "status": if status == "started" { "accepted" } else { status },
        "acceptedAt": now_ms(),
    });
    conn.out.push(Out::Frame(frames::ok(id, &accepted)));
    if let Some(waiter) = hub.wait_for(&run) {
        let _ = waiter.await;
    }
    let (outcome, text, _) = hub
        .outcome(&run)
        .flatten()
        .ok_or_else(|| ErrorShape::invalid("the run is gone"))?;
    Ok(final_result(&run, &outcome, &text))
}

fn final_result(run: &str, outcome: &Outcome, text: &str) -> Value {
    match outcome {
        Outcome::Ok { stop } => json!({
            "runId": run,
            "status": "ok",
            "summary": text,
            "result": {"text": text, "stopReason": stop},
        }),
        Outcome::Aborted => json!({
            "runId": run,
            "status": "error",
            "summary": "aborted",
            "error": "aborted",
            "result": {"text": text, "stopReason": "aborted"},
        }),
        Outcome::Error { message, .. } => json!({
            "runId": run,
            "status": "error",
            "summary": message,
            "error": message,
            "result": {"text": text, "stopReason": "error"},
        }),
    }
}

async fn agent_wait(hub: &Arc<Hub>, params: &Value) -> Reply {
    let run = string(params, "runId")?;
    let timeout = match &params["timeoutMs"] {
        Value::Null => 30_000,
        value => value
            .as_u64()
            .ok_or_else(|| ErrorShape::invalid("`timeoutMs` must be a non-negative integer"))?,
    };
    let Some(state) = hub.outcome(run) else {
        return Err(ErrorShape::invalid(format!("unknown run {run}")));
    };
    if state.is_none()
        && let Some(waiter) = hub.wait_for(run)
    {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(timeout), waiter).await;
    }
    match hub.outcome(run).flatten() {
        None => Ok(json!({"runId": run, "status": "timeout"})),
        Some((Outcome::Ok { .. }, text, _)) => Ok(json!({
            "runId": run,
            "status": "ok",
            "terminalReply": {"disposition": "visible", "text": text},
        })),
        Some((Outcome::Aborted, _, _)) => {
            Ok(json!({"runId": run, "status": "error", "error": "aborted"}))
        }
        Some((Outcome::Error { message, .. }, _, _)) => {
            Ok(json!({"runId": run, "status": "error", "error": message}))
        }
    }
}

/// A session's messages from its transcript (none for a key not used yet).
fn history(hub: &Hub, key: &str, limit: usize) -> Result<(Option<String>, Vec<Value>), ErrorShape> {
    let Some(session) = hub.lookup(key) else {
        return Ok((None, Vec::new()));
    };
    let Some(path) = crate::session::find(hub.data_dir(), &session) else {
        return Ok((Some(session), Vec::new()));
    };
    let loaded = crate::session::transcript::load(&path)
        .map_err(|e| ErrorShape::invalid(format!("cannot read the session: {e}")))?;
    let times: std::collections::HashMap<String, u64> = loaded
        .entries
        .iter()
        .map(|e| (e.id.clone(), millis(&e.timestamp)))
        .collect();
    let restored = crate::session::restore(loaded.entries);
    // A message restored without an entry of its own (a result pincer
    // supplied for a call cut short) takes the time of the one before.
    let mut last = 0;
    let mut messages: Vec<Value> = Vec::new();
    for (i, entry) in restored.visible().iter().enumerate() {
        if let Some(time) = restored.entry_ids.get(&i).and_then(|id| times.get(id)) {
            last = *time;
        }
        if let Some(mut shown) = message(entry, &restored.calls) {
            shown["timestamp"] = json!(last);
            messages.push(shown);
        }
    }
    if messages.len() > limit {
        messages.drain(..messages.len() - limit);
    }
    Ok((Some(session), messages))
}

/// One history entry as the protocol shows it; what the transcript kept
/// of each call (`calls`, by id) gives a tool call its `kind` and `title`
/// and an edit's result its `diffs`, as the live tool events had them.
fn message(
    entry: &AgentMessage,
    calls: &std::collections::HashMap<String, crate::session::CallRecord>,
) -> Option<Value> {
    let AgentMessage::Llm { message } = entry else {
        return None;
    };
    let info = |id: &str| calls.get(id).and_then(|c| c.call.as_ref());
    Some(match message {
        Message::User { content } => json!({
            "role": "user",
            "content": content.iter().map(user_block).collect::<Vec<_>>(),
        }),
        Message::Assistant(assistant) => json!({
            "role": "assistant",
            "content": assistant.content.iter().map(|c| match c {
                AssistantContent::Text { text } => json!({"type": "text", "text": text}),
                AssistantContent::Thinking { thinking, redacted, .. } => {
                    json!({"type": "thinking", "thinking": if *redacted { "" } else { thinking.as_str() }})
                }
                AssistantContent::ToolCall(call) => {
                    let mut block = json!({
                        "type": "toolCall", "id": call.id, "name": call.name, "arguments": call.arguments,
                    });
                    if let Some(info) = info(&call.id) {
                        block["kind"] = json!(info.kind);
                        block["title"] = json!(info.title);
                    }
                    block
                }
            }).collect::<Vec<_>>(),
            "model": assistant.model,
            "provider": assistant.provider,
        }),
        Message::ToolResult(result) => {
            let mut shown = json!({
                "role": "toolResult",
                "toolCallId": result.tool_call_id,
                "toolName": result.tool_name,
                "content": result.content.iter().map(user_block).collect::<Vec<_>>(),
                "isError": result.is_error,
            });
            if let Some(info) = info(&result.tool_call_id) {
                shown["kind"] = json!(info.kind);
            }
            let diffs: Vec<Value> = calls
                .get(&result.tool_call_id)
                .into_iter()
                .flat_map(|c| &c.display)
                .filter_map(|d| match d {
                    crate::tools::Display::Diff {
                        path,
                        old_text,
                        new_text,
                    } => Some(json!({"path": path, "oldText": old_text, "newText": new_text})),
                    _ => None,
                })
                .collect();
            if !diffs.is_empty() {
                shown["diffs"] = json!(diffs);
            }
            shown
        }
    })
}

fn user_block(content: &Content) -> Value {
    match content {
        Content::Text { text } => json!({"type": "text", "text": text}),
        Content::Image { mime_type, .. } => json!({"type": "image", "mimeType": mime_type}),
    }
}

fn millis(rfc3339: &str) -> u64 {
    humantime::parse_rfc3339(rfc3339)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// What a session's transcript ends on: its model, thinking level and
/// permission mode as last set (the last assistant message or change), read
/// from the file's tail so that a listing does not read whole transcripts.
#[derive(Default)]
struct Recent {
    model: Option<String>,
    thinking: Option<String>,
    mode: Option<String>,
    queue: Option<QueueMode>,
}

fn recent_settings(path: &std::path::Path) -> Recent {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 256 * 1024;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Recent::default();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL)));
    let mut tail = Vec::new();
    let _ = file.take(TAIL).read_to_end(&mut tail);
    let text = String::from_utf8_lossy(&tail);
    let mut recent = Recent::default();
    for line in text.lines().rev() {
        if recent.model.is_some()
            && recent.thinking.is_some()
            && recent.mode.is_some()
            && recent.queue.is_some()
        {
            break;
        }
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match entry["type"].as_str() {
            Some("model_change") if recent.model.is_none() => {
                recent.model = entry["model"].as_str().map(String::from);
            }
            Some("thinking_change") if recent.thinking.is_none() => {
                recent.thinking = entry["level"].as_str().map(String::from);
            }
            Some("mode_change") if recent.mode.is_none() => {
                recent.mode = entry["mode"].as_str().map(String::from);
            }
            Some("queue_change") if recent.queue.is_none() => {
                recent.queue = entry["queue"].as_str().and_then(QueueMode::from_wire);
            }
            Some("message")
                if recent.model.is_none() && entry["message"]["role"] == "assistant" =>
            {
                let message = &entry["message"];
                if let (Some(provider), Some(id)) =
                    (message["provider"].as_str(), message["model"].as_str())
                {
                    recent.model = Some(format!("{provider}/{id}"));
                }
            }
            _ => {}
        }
    }
    recent
}

/// The model, thinking level and mode a session without records of its own
/// has: the configured defaults, read once per request.
struct Defaults {
    settings: Option<crate::config::Settings>,
    model: Option<String>,
    thinking: String,
    mode: String,
}

impl Defaults {
    fn load(hub: &Hub) -> Self {
        let settings = crate::config::Settings::load_from_process(&hub.cwd).ok();
        Self {
            model: settings
                .as_ref()
                .and_then(|s| s.default_model(None).ok())
                .map(|m| m.full_id()),
            thinking: settings
                .as_ref()
                .map_or("off", |s| s.thinking().as_str())
                .to_string(),
            mode: settings
                .as_ref()
                .map(|s| s.default_mode())
                .unwrap_or_default()
                .id()
                .to_string(),
            settings,
        }
    }

    /// A model's context window, in tokens.
    fn window(&self, model: Option<&str>) -> Option<u64> {
        let (settings, model) = self.settings.as_ref().zip(model)?;
        settings
            .catalog
            .resolve(model)
            .ok()
            .map(|m| m.context_window)
    }

    /// The thinking levels a model offers (`off` alone without reasoning).
    fn levels(&self, model: Option<&str>) -> Vec<Value> {
        let reasoning = self
            .settings
            .as_ref()
            .zip(model)
            .and_then(|(s, m)| s.catalog.resolve(m).ok())
            .is_some_and(|m| m.reasoning);
        let levels: &[ThinkingLevel] = if reasoning {
            &ThinkingLevel::ALL
        } else {
            &[ThinkingLevel::Off]
        };
        levels
            .iter()
            .map(|l| json!({"id": l.as_str(), "label": l.as_str()}))
            .collect()
    }
}

/// `hello-ok`'s `snapshot.sessionDefaults`: OpenClaw's three keys, and
/// what a new session here starts with (its directory, model, thinking
/// level, permission mode and queue mode), so that a client such as
/// `pincer acp --connect` can show a session's options before it has a
/// transcript.
pub fn session_defaults(hub: &Hub) -> Value {
    let defaults = Defaults::load(hub);
    let modes: Vec<Value> = crate::agent::Mode::ALL
        .iter()
        .map(|m| json!({"id": m.id(), "name": m.name(), "description": m.description()}))
        .collect();
    json!({
        "defaultAgentId": "main",
        "mainKey": "main",
        "mainSessionKey": super::hub::MAIN_KEY,
        "cwd": hub.cwd,
        "model": defaults.model,
        "thinkingLevel": defaults.thinking,
        "thinkingLevels": defaults.levels(defaults.model.as_deref()),
        "permissionMode": defaults.mode,
        "permissionModes": modes,
        "queueMode": QueueMode::Steer.wire(),
    })
}

fn row(hub: &Hub, summary: &crate::session::Summary, defaults: &Defaults) -> Value {
    let key = hub.key_of(&summary.id);
    let title = summary.title.clone().unwrap_or_default();
    let recent = recent_settings(&summary.path);
    let model = recent.model.or_else(|| defaults.model.clone());
    let thinking = recent.thinking.unwrap_or_else(|| defaults.thinking.clone());
    let (provider, model_id) = match model.as_deref().and_then(|m| m.split_once('/')) {
        Some((provider, id)) => (Some(provider.to_string()), Some(id.to_string())),
        None => (None, model.clone()),
    };
    let mut row = json!({
        "key": key,
        "sessionId": summary.id,
        "kind": "direct",
        "updatedAt": millis(&summary.updated_at),
        "label": summary.label,
        "derivedTitle": title,
        "displayName": title,
        "spawnedCwd": summary.cwd,
        "model": model_id,
        "modelProvider": provider,
        "thinkingLevel": thinking,
        "thinkingLevels": defaults.levels(model.as_deref()),
        "permissionMode": recent.mode.unwrap_or_else(|| defaults.mode.clone()),
        "queueMode": hub.queue_mode(&summary.id).or(recent.queue).map(|m| m.wire()),
    });
    merge(
        &mut row,
        usage_fields(hub, summary, model.as_deref(), defaults),
    );
    row
}

/// A row's usage: OpenClaw's `totalTokens` (the tokens in the context now,
/// with `totalTokensFresh`) and `contextTokens` (the model's window), and
/// the session's cost so far, from the last report of a session that ran
/// in this process, else from its transcript.
fn usage_fields(
    hub: &Hub,
    summary: &crate::session::Summary,
    model: Option<&str>,
    defaults: &Defaults,
) -> Value {
    let recorded = hub.recorded_usage(&summary.path);
    let live = hub.live_usage(&summary.id).unwrap_or_default();
    let tokens = live["contextTokens"].as_u64().or(recorded.context_tokens);
    let window = live["contextWindow"]
        .as_u64()
        .or_else(|| defaults.window(model));
    let cost = live["costUsd"].as_f64().unwrap_or(recorded.cost_usd);
    json!({
        "totalTokens": tokens,
        "totalTokensFresh": tokens.is_some(),
        "contextTokens": window,
        "costUsd": cost,
    })
}

fn list(hub: &Hub, params: &Value) -> Reply {
    let limit = limit(params, 100, 1000)?;
    let offset = params["offset"].as_u64().unwrap_or(0) as usize;
    let search = optional(params, "search")?.map(str::to_lowercase);
    let defaults = Defaults::load(hub);
    let matching: Vec<crate::session::Summary> = crate::session::list(hub.data_dir(), None)
        .into_iter()
        .filter(|s| !hub.is_archived(&s.id))
        .filter(|s| match &search {
            None => true,
            Some(search) => [
                hub.key_of(&s.id),
                s.id.clone(),
                s.title.clone().unwrap_or_default(),
            ]
            .iter()
            .any(|v| v.to_lowercase().contains(search)),
        })
        .collect();
    let count = matching.len();
    let page: Vec<Value> = matching
        .iter()
        .skip(offset)
        .take(limit)
        .map(|s| row(hub, s, &defaults))
        .collect();
    Ok(json!({
        "sessions": page,
        "hasMore": offset + limit < count,
        "count": count,
        "ts": now_ms(),
    }))
}

fn resolve(hub: &Hub, params: &Value) -> Reply {
    let wanted = optional(params, "key")?
        .or(optional(params, "sessionId")?)
        .or(optional(params, "label")?)
        .ok_or_else(|| ErrorShape::invalid("give `key`, `sessionId` or `label`"))?;
    let sessions = crate::session::list(hub.data_dir(), None);
    let found = hub.lookup(wanted).or_else(|| {
        sessions
            .iter()
            .find(|s| s.title.as_deref() == Some(wanted) || s.id.starts_with(wanted))
            .map(|s| s.id.clone())
    });
    match found {
        Some(session) => Ok(json!({
            "ok": true,
            "key": hub.key_of(&session),
            "agentId": "main",
            "sessionId": session,
        })),
        None if params["allowMissing"].as_bool() == Some(true) => Ok(json!({"ok": false})),
        None => Err(ErrorShape::invalid(format!("no session matches {wanted}"))),
    }
}

/// The longest session label, in characters.
const MAX_LABEL: usize = 200;

/// `sessions.patch`'s `label`: the user's name for the session, one line
/// of 1 to [`MAX_LABEL`] characters (surrounding spaces dropped).
fn label_param(params: &Value) -> Result<Option<&str>, ErrorShape> {
    let Some(label) = optional(params, "label")? else {
        return Ok(None);
    };
    let label = label.trim();
    if label.is_empty() {
        return Err(ErrorShape::invalid(
            "`label` is empty: give the session a name of 1 to 200 characters",
        ));
    }
    if label.chars().count() > MAX_LABEL {
        return Err(ErrorShape::invalid(format!(
            "`label` has {} characters: a session name has at most {MAX_LABEL}",
            label.chars().count()
        )));
    }
    if label.chars().any(char::is_control) {
        return Err(ErrorShape::invalid(
            "`label` holds a control character (a line break, a tab, …): a session name is one line of text",
        ));
    }
    Ok(Some(label))
}

async fn patch(hub: &Arc<Hub>, conn: &Conn, params: &Value) -> Reply {
    let key = key_param(params, "key")?;
    let label = label_param(params)?;
    // `bypass` runs every tool without asking: turning it on answers every
    // approval to come, so it takes the scope that answers approvals.
    if optional(params, "permissionMode")?.and_then(crate::agent::permission::Mode::parse)
        == Some(crate::agent::permission::Mode::Bypass)
    {
        need(conn, Need::Approvals)?;
    }
    if let Some(model) = optional(params, "model")? {
        known_model(hub, model)?;
    }
    let session = hub.open(key).await?;
    let link = hub.link()?;
    if let Some(label) = label {
        match hub.registry.rename(&session, label) {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                return Err(ErrorShape::invalid(format!(
                    "cannot save the name of session {key}: {e}"
                )));
            }
            None => {
                return Err(ErrorShape::invalid(format!(
                    "session {key} is not open; try again"
                )));
            }
        }
    }
    let options = [
        ("model", crate::acp::MODEL_OPTION),
        ("thinkingLevel", crate::acp::THOUGHT_OPTION),
        ("permissionMode", crate::acp::MODE_OPTION),
    ];
    for (field, option) in options {
        if let Some(value) = optional(params, field)? {
            link.set_option(&session, option, value)
                .await
                .map_err(|e| {
                    ErrorShape::invalid(format!("{field}: {}", super::link::error_text(&e)))
                })?;
        }
    }
    if let Some(mode) = optional(params, "queueMode")? {
        let mode = QueueMode::from_wire(mode).ok_or_else(|| {
            ErrorShape::invalid("`queueMode` must be steer, followup, collect or interrupt")
        })?;
        let acp = match mode {
            QueueMode::FollowUp | QueueMode::Collect => "follow-up",
            QueueMode::Steer | QueueMode::Interrupt => "steer",
        };
        link.set_option(&session, crate::acp::QUEUE_OPTION, acp)
            .await
            .map_err(|e| ErrorShape::invalid(super::link::error_text(&e)))?;
        hub.set_queue_mode(&session, mode);
    }
    let entry = crate::session::list(hub.data_dir(), None)
        .iter()
        .find(|s| s.id == session)
        .map(|s| row(hub, s, &Defaults::load(hub)));
    hub.announce_patched(key, &session, entry.clone());
    Ok(json!({"ok": true, "key": key, "sessionId": session, "entry": entry}))
}

/// Refuses a model that `models.list` would not offer: `sessions.patch`
/// takes a model from the catalog (built in, or from the user's
/// providers), not any string that names a provider. Whether its
/// credential is present is the session's own check (as in `pincer acp`).
fn known_model(hub: &Hub, model: &str) -> Result<(), ErrorShape> {
    let settings = crate::config::Settings::load_from_process(&hub.cwd)
        .map_err(|e| ErrorShape::invalid(e.to_string()))?;
    let resolved = settings
        .catalog
        .resolve(model)
        .map_err(|e| ErrorShape::invalid(format!("model: {e}")))?;
    let full_id = resolved.full_id();
    if settings
        .catalog
        .listed_models()
        .any(|m| m.full_id() == full_id)
    {
        return Ok(());
    }
    Err(ErrorShape::invalid(format!(
        "model: unknown model `{model}`; `models.list` names the models this gateway offers (a model of your own is listed under [[providers.<name>.models]] in the config)"
    )))
}

fn models(hub: &Hub) -> Reply {
    let settings = crate::config::Settings::load_from_process(&hub.cwd)
        .map_err(|e| ErrorShape::invalid(e.to_string()))?;
    let models: Vec<Value> = settings
        .catalog
        .listed_models()
        .filter(|m| settings.can_offer(m))
        .map(|m| {
            json!({
                "id": m.full_id(),
                "name": m.name,
                "provider": m.provider,
                "contextWindow": m.context_window,
                "reasoning": m.reasoning,
            })
        })
        .collect();
    Ok(json!({ "models": models }))
}
