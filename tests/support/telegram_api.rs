//! A local Telegram Bot API for the channel tests, written from
//! https://core.telegram.org/bots/api: `POST /bot<token>/<method>` with a
//! JSON body, answers in the `{"ok", "result"}` envelope, errors with
//! `error_code`, `description` and `parameters.retry_after`, exactly the
//! bodies Telegram sends (401 "Unauthorized", 429 "Too Many Requests:
//! retry after N", 400 "message is not modified", "message to edit not
//! found", "can't parse entities").
//!
//! `getUpdates` is a long poll with Telegram's confirmation rule: an update
//! stays until a call's `offset` passes it, so a client that does not store
//! its offset is given the same updates again; a second poll ends the one
//! waiting with 409 Conflict, as Telegram does with two bot instances. Sent messages are kept per
//! chat with their current text and keyboard, so a test reads a chat as
//! its user sees it.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::acp_client::TIMEOUT;

/// One call the bot made.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub body: Value,
    pub at: Instant,
    /// The answer's `error_code`, if it failed.
    pub error: Option<u64>,
}

/// A message as its chat shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub id: i64,
    pub chat: i64,
    /// The HTML the bot sent (last edit).
    pub html: String,
    /// The text the user sees (tags stripped, entities decoded).
    pub text: String,
    /// The inline keyboard's buttons: (text, callback_data).
    pub buttons: Vec<(String, String)>,
    pub edits: usize,
}

#[derive(Default)]
struct Inner {
    updates: VecDeque<Value>,
    calls: Vec<Call>,
    messages: Vec<Shown>,
    /// Methods that answer 429 next, with the retry_after to give.
    limited: HashMap<String, VecDeque<u64>>,
    /// Methods that fail next, with the HTTP status (a proxy's 502 page,
    /// not Telegram's JSON).
    failing: HashMap<String, VecDeque<u16>>,
    webhook: Option<String>,
}

pub struct TelegramApi {
    pub url: String,
    pub token: String,
    pub bot_id: i64,
    pub bot_username: String,
    state: Arc<Shared>,
}

struct Shared {
    token: String,
    bot_id: i64,
    bot_username: String,
    inner: Mutex<Inner>,
    next_update: AtomicI64,
    next_message: AtomicI64,
    /// `getUpdates` calls waiting in their long poll now.
    polling: AtomicI64,
    /// The latest `getUpdates` call: an earlier one still waiting is
    /// ended with 409 Conflict, as Telegram ends it when a second bot
    /// instance polls.
    latest_poll: AtomicI64,
    /// A `getUpdates` that would confirm an update fails (502), as when
    /// the network breaks right after a poll.
    refuse_confirmations: std::sync::atomic::AtomicBool,
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl TelegramApi {
    pub async fn start() -> Self {
        let token = format!(
            "{}:AA{}",
            7_000_000_000u64 + rand_u32() as u64,
            uuid::Uuid::new_v4().simple()
        );
        let state = Arc::new(Shared {
            token: token.clone(),
            bot_id: 7_100_000_001,
            bot_username: "pincer_test_bot".into(),
            inner: Mutex::new(Inner::default()),
            next_update: AtomicI64::new(812_345_679),
            next_message: AtomicI64::new(100),
            polling: AtomicI64::new(0),
            latest_poll: AtomicI64::new(0),
            refuse_confirmations: std::sync::atomic::AtomicBool::new(false),
            changed: Notify::new(),
        });
        let app = axum::Router::new()
            .route(
                "/{bot}/{method}",
                axum::routing::post(handle).get(handle_get),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{addr}"),
            token,
            bot_id: state.bot_id,
            bot_username: state.bot_username.clone(),
            state,
        }
    }

    fn push_update(&self, mut update: Value) -> i64 {
        let id = self.state.next_update.fetch_add(1, Ordering::SeqCst);
        update["update_id"] = json!(id);
        self.state.lock().updates.push_back(update);
        self.state.changed.notify_waiters();
        id
    }

    fn user(id: i64) -> Value {
        json!({"id": id, "is_bot": false, "first_name": format!("User{id}"), "username": format!("user{id}"), "language_code": "en"})
    }

    /// A direct message from user `from`; returns its message id.
    pub fn dm(&self, from: i64, text: &str) -> i64 {
        let id = self.state.next_message.fetch_add(1, Ordering::SeqCst);
        self.push_update(json!({"message": {
            "message_id": id,
            "from": Self::user(from),
            "chat": {"id": from, "type": "private", "first_name": format!("User{from}")},
            "date": 1_764_020_000,
            "text": text,
        }}));
        id
    }

    /// A message in group `chat` from `from`, with `entities`.
    pub fn group(&self, chat: i64, from: i64, text: &str, entities: Value) -> i64 {
        let id = self.state.next_message.fetch_add(1, Ordering::SeqCst);
        self.push_update(json!({"message": {
            "message_id": id,
            "from": Self::user(from),
            "chat": {"id": chat, "type": "supergroup", "title": "Team"},
            "date": 1_764_020_000,
            "text": text,
            "entities": entities,
        }}));
        id
    }

    /// A message in group `chat` that mentions the bot first.
    pub fn mention(&self, chat: i64, from: i64, text: &str) -> i64 {
        let handle = format!("@{}", self.bot_username);
        let length = handle.encode_utf16().count();
        self.group(
            chat,
            from,
            &format!("{handle} {text}"),
            json!([{"type": "mention", "offset": 0, "length": length}]),
        )
    }

    /// User `from` presses the button with `data` under `message`.
    pub fn press(&self, from: i64, message: &Shown, data: &str) -> String {
        let id = format!("cq{}", uuid::Uuid::new_v4().simple());
        let chat_type = if message.chat > 0 {
            "private"
        } else {
            "supergroup"
        };
        self.push_update(json!({"callback_query": {
            "id": id,
            "from": Self::user(from),
            "message": {"message_id": message.id, "chat": {"id": message.chat, "type": chat_type}, "date": 1_764_020_001, "text": message.text},
            "chat_instance": "42",
            "data": data,
        }}));
        id
    }

    /// The next call to `method` answers 429 with `retry_after` seconds.
    pub fn rate_limit(&self, method: &str, retry_after: u64) {
        self.state
            .lock()
            .limited
            .entry(method.to_string())
            .or_default()
            .push_back(retry_after);
    }

    /// The next call to `method` fails with `status` and an HTML page, as
    /// a broken proxy or an outage answers.
    pub fn fail(&self, method: &str, status: u16) {
        self.state
            .lock()
            .failing
            .entry(method.to_string())
            .or_default()
            .push_back(status);
    }

    /// While `refuse` holds, a `getUpdates` whose offset would confirm an
    /// update fails with 502: the updates given stay unconfirmed.
    pub fn refuse_confirmations(&self, refuse: bool) {
        self.state
            .refuse_confirmations
            .store(refuse, Ordering::SeqCst);
        self.state.changed.notify_waiters();
    }

    /// `getUpdates` long polls waiting now.
    pub fn pollers(&self) -> i64 {
        self.state.polling.load(Ordering::SeqCst)
    }

    /// `getUpdates` calls ended by a later one (409 Conflict).
    pub fn conflicts(&self) -> usize {
        self.calls_of("getupdates")
            .iter()
            .filter(|c| c.error == Some(409))
            .count()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().calls.clone()
    }

    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// Messages in `chat`, oldest first.
    pub fn chat(&self, chat: i64) -> Vec<Shown> {
        self.state
            .lock()
            .messages
            .iter()
            .filter(|m| m.chat == chat)
            .cloned()
            .collect()
    }

    /// Whether a `getUpdates` long poll is waiting now.
    pub fn is_polling(&self) -> bool {
        self.state.polling.load(Ordering::SeqCst) > 0
    }

    /// Updates not yet confirmed by an offset.
    pub fn unconfirmed(&self) -> usize {
        self.state.lock().updates.len()
    }

    /// Waits until `check` holds of the API's state; panics with `what`
    /// and the calls so far after the deadline.
    pub async fn until<T>(&self, what: &str, mut check: impl FnMut(&Self) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let changed = self.state.changed.notified();
            if let Some(value) = check(self) {
                return value;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                if let Some(value) = check(self) {
                    return value;
                }
                let calls: Vec<String> = self
                    .calls()
                    .iter()
                    .map(|c| format!("{} {}", c.method, c.body))
                    .collect();
                panic!(
                    "Telegram mock: timed out waiting for {what}; calls:\n{}",
                    calls.join("\n")
                );
            }
        }
    }

    /// Waits until `chat` shows messages whose texts satisfy `check`.
    pub async fn until_chat(
        &self,
        chat: i64,
        what: &str,
        check: impl Fn(&[Shown]) -> bool,
    ) -> Vec<Shown> {
        self.until(what, |api| {
            let shown = api.chat(chat);
            check(&shown).then_some(shown)
        })
        .await
    }
}

fn rand_u32() -> u32 {
    uuid::Uuid::new_v4().as_u128() as u32 % 100_000_000
}

fn error(status: u16, description: &str, parameters: Option<Value>) -> (u16, Value) {
    let mut body = json!({"ok": false, "error_code": status, "description": description});
    if let Some(parameters) = parameters {
        body["parameters"] = parameters;
    }
    (status, body)
}

async fn handle_get(state: State<Arc<Shared>>, path: Path<(String, String)>) -> Response {
    handle(state, path, axum::body::Bytes::new()).await
}

async fn handle(
    State(state): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    let method = method.to_ascii_lowercase();
    let body: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(body) => body,
            Err(_) => return reply(error(400, "Bad Request: invalid JSON", None)),
        }
    };
    let failing = state
        .lock()
        .failing
        .get_mut(&method)
        .and_then(|queue| queue.pop_front());
    if let Some(status) = failing {
        state.lock().calls.push(Call {
            method,
            body,
            at: Instant::now(),
            error: Some(status as u64),
        });
        state.changed.notify_waiters();
        return (
            axum::http::StatusCode::from_u16(status).unwrap(),
            [(axum::http::header::CONTENT_TYPE, "text/html")],
            "<html><body><h1>502 Bad Gateway</h1></body></html>",
        )
            .into_response();
    }
    let (status, answer) = if bot.strip_prefix("bot") != Some(state.token.as_str()) {
        error(401, "Unauthorized", None)
    } else if let Some(retry) = state
        .lock()
        .limited
        .get_mut(&method)
        .and_then(|queue| queue.pop_front())
    {
        error(
            429,
            &format!("Too Many Requests: retry after {retry}"),
            Some(json!({"retry_after": retry})),
        )
    } else {
        answer(&state, &method, &body).await
    };
    {
        let mut inner = state.lock();
        inner.calls.push(Call {
            method: method.clone(),
            body,
            at: Instant::now(),
            error: (answer["ok"] != true).then(|| answer["error_code"].as_u64().unwrap_or(0)),
        });
    }
    state.changed.notify_waiters();
    reply((status, answer))
}

fn reply((status, body): (u16, Value)) -> Response {
    (
        axum::http::StatusCode::from_u16(status).unwrap(),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(result: Value) -> (u16, Value) {
    (200, json!({"ok": true, "result": result}))
}

async fn answer(state: &Arc<Shared>, method: &str, body: &Value) -> (u16, Value) {
    match method {
        "getme" => ok(json!({
            "id": state.bot_id, "is_bot": true, "first_name": "Pincer",
            "username": state.bot_username, "can_join_groups": true,
            "can_read_all_group_messages": false, "supports_inline_queries": false,
        })),
        "deletewebhook" => {
            state.lock().webhook = None;
            ok(json!(true))
        }
        "setwebhook" => {
            state.lock().webhook = body["url"].as_str().map(String::from);
            ok(json!(true))
        }
        "getupdates" => get_updates(state, body).await,
        "sendmessage" => {
            let Some(chat) = body["chat_id"].as_i64() else {
                return error(400, "Bad Request: chat_id is empty", None);
            };
            let html = body["text"].as_str().unwrap_or_default();
            let text = match visible(html, body["parse_mode"].as_str()) {
                Ok(text) => text,
                Err(why) => {
                    return error(
                        400,
                        &format!("Bad Request: can't parse entities: {why}"),
                        None,
                    );
                }
            };
            if text.trim().is_empty() {
                return error(400, "Bad Request: message text is empty", None);
            }
            if text.encode_utf16().count() > 4096 {
                return error(400, "Bad Request: message is too long", None);
            }
            let buttons = match keyboard(&body["reply_markup"]) {
                Ok(buttons) => buttons,
                Err(why) => return error(400, &format!("Bad Request: {why}"), None),
            };
            let id = state.next_message.fetch_add(1, Ordering::SeqCst);
            state.lock().messages.push(Shown {
                id,
                chat,
                html: html.to_string(),
                text: text.clone(),
                buttons,
                edits: 0,
            });
            ok(
                json!({"message_id": id, "from": {"id": state.bot_id, "is_bot": true, "first_name": "Pincer", "username": state.bot_username},
                "chat": {"id": chat, "type": if chat > 0 {"private"} else {"supergroup"}}, "date": 1_764_020_002, "text": text}),
            )
        }
        "editmessagetext" => {
            let (Some(chat), Some(id)) = (body["chat_id"].as_i64(), body["message_id"].as_i64())
            else {
                return error(
                    400,
                    "Bad Request: message identifier is not specified",
                    None,
                );
            };
            let html = body["text"].as_str().unwrap_or_default();
            let text = match visible(html, body["parse_mode"].as_str()) {
                Ok(text) => text,
                Err(why) => {
                    return error(
                        400,
                        &format!("Bad Request: can't parse entities: {why}"),
                        None,
                    );
                }
            };
            if text.encode_utf16().count() > 4096 {
                return error(400, "Bad Request: MESSAGE_TOO_LONG", None);
            }
            let buttons = match keyboard(&body["reply_markup"]) {
                Ok(buttons) => buttons,
                Err(why) => return error(400, &format!("Bad Request: {why}"), None),
            };
            let mut inner = state.lock();
            let Some(message) = inner
                .messages
                .iter_mut()
                .find(|m| m.chat == chat && m.id == id)
            else {
                return error(400, "Bad Request: message to edit not found", None);
            };
            if message.html == html && message.buttons == buttons {
                return error(
                    400,
                    "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
                    None,
                );
            }
            message.html = html.to_string();
            message.text = text.clone();
            message.buttons = buttons;
            message.edits += 1;
            ok(
                json!({"message_id": id, "chat": {"id": chat}, "date": 1_764_020_002, "edit_date": 1_764_020_003, "text": text}),
            )
        }
        "sendchataction" => {
            if body["action"] != "typing" || body["chat_id"].as_i64().is_none() {
                return error(400, "Bad Request: wrong parameter action in request", None);
            }
            ok(json!(true))
        }
        "answercallbackquery" => {
            if body["callback_query_id"].as_str().is_none() {
                return error(
                    400,
                    "Bad Request: query is too old and response timeout expired or query ID is invalid",
                    None,
                );
            }
            ok(json!(true))
        }
        _ => error(404, "Not Found", None),
    }
}

async fn get_updates(state: &Arc<Shared>, body: &Value) -> (u16, Value) {
    if state.lock().webhook.is_some() {
        return error(
            409,
            "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
            None,
        );
    }
    if state.refuse_confirmations.load(Ordering::SeqCst)
        && let Some(offset) = body["offset"].as_i64()
        && state
            .lock()
            .updates
            .iter()
            .any(|u| u["update_id"].as_i64().unwrap_or(0) < offset)
    {
        return error(502, "Bad Gateway", None);
    }
    let timeout = body["timeout"].as_u64().unwrap_or(0).min(60);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let mine = state.latest_poll.fetch_add(1, Ordering::SeqCst) + 1;
    state.polling.fetch_add(1, Ordering::SeqCst);
    state.changed.notify_waiters();
    // Counted out also when the server drops the call (its client went).
    struct Waiting<'a>(&'a Shared);
    impl Drop for Waiting<'_> {
        fn drop(&mut self) {
            self.0.polling.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let _waiting = Waiting(state);
    poll(state, body, deadline, mine).await
}

async fn poll(
    state: &Arc<Shared>,
    body: &Value,
    deadline: tokio::time::Instant,
    mine: i64,
) -> (u16, Value) {
    loop {
        let changed = state.changed.notified();
        if state.latest_poll.load(Ordering::SeqCst) != mine {
            return error(
                409,
                "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                None,
            );
        }
        {
            let mut inner = state.lock();
            if let Some(offset) = body["offset"].as_i64() {
                // Confirmed: every update below the offset is forgotten.
                inner
                    .updates
                    .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            }
            let limit = body["limit"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
            let updates: Vec<Value> = inner.updates.iter().take(limit).cloned().collect();
            if !updates.is_empty() {
                return ok(json!(updates));
            }
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            return ok(json!([]));
        }
    }
}

fn keyboard(markup: &Value) -> Result<Vec<(String, String)>, String> {
    let mut buttons = Vec::new();
    let Some(rows) = markup.get("inline_keyboard") else {
        return Ok(buttons);
    };
    for button in rows
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r.as_array().into_iter().flatten())
    {
        let text = button["text"].as_str().unwrap_or_default();
        let data = button["callback_data"].as_str().unwrap_or_default();
        if text.is_empty() {
            return Err("BUTTON_TEXT_EMPTY".into());
        }
        if data.is_empty() || data.len() > 64 {
            return Err("BUTTON_DATA_INVALID".into());
        }
        buttons.push((text.to_string(), data.to_string()));
    }
    Ok(buttons)
}

/// The text a user sees of a message sent in HTML parse mode, checked as
/// Telegram checks it: only its tags, closed in order, and only the named
/// entities `&lt;`, `&gt;`, `&amp;`, `&quot;` (and numeric ones).
pub fn visible(text: &str, parse_mode: Option<&str>) -> Result<String, String> {
    if parse_mode != Some("HTML") {
        return Ok(text.to_string());
    }
    const TAGS: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "code",
        "pre",
        "blockquote",
        "tg-emoji",
    ];
    let mut out = String::new();
    let mut open: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(['<', '&']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if rest.starts_with('<') {
            let end = rest.find('>').ok_or("unclosed start tag")?;
            let tag = &rest[1..end];
            rest = &rest[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                let name = name.trim();
                match open.pop() {
                    Some(top) if top == name => {}
                    _ => return Err(format!("unmatched end tag \"{name}\"")),
                }
            } else {
                let name = tag.split_whitespace().next().unwrap_or_default();
                if !TAGS.contains(&name) {
                    return Err(format!("unsupported start tag \"{name}\""));
                }
                if name == "a" {
                    let href = tag
                        .split_once("href=\"")
                        .map(|(_, h)| h)
                        .unwrap_or_default();
                    if !(href.starts_with("http://")
                        || href.starts_with("https://")
                        || href.starts_with("mailto:")
                        || href.starts_with("tg://"))
                    {
                        return Err("unsupported URL protocol".into());
                    }
                }
                open.push(name.to_string());
            }
        } else {
            let end = rest.find(';').ok_or("unclosed entity")?;
            let entity = &rest[1..end];
            rest = &rest[end + 1..];
            let decoded = match entity {
                "lt" => '<',
                "gt" => '>',
                "amp" => '&',
                "quot" => '"',
                e if e.starts_with("#x") => u32::from_str_radix(&e[2..], 16)
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or("bad entity")?,
                e if e.starts_with('#') => e[1..]
                    .parse()
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or("bad entity")?,
                _ => return Err(format!("unsupported entity \"&{entity};\"")),
            };
            out.push(decoded);
        }
    }
    out.push_str(rest);
    if let Some(tag) = open.pop() {
        return Err(format!(
            "can't find end tag corresponding to start tag \"{tag}\""
        ));
    }
    Ok(out)
}
