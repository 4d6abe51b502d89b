//! A local Slack for the channel tests: the Web API methods pincer calls
//! (`auth.test`, `apps.connections.open`, `chat.postMessage`,
//! `chat.update`, `chat.postEphemeral`) on loopback HTTP, and a Socket Mode
//! websocket, speaking the shapes of docs.slack.dev (as collected in the
//! issue-18 research notes).
//!
//! Like Slack, it answers HTTP 200 with `{"ok": false, "error": …}`:
//! `not_authed` without a bearer token, `invalid_auth` with a wrong one
//! (the app token only for `apps.connections.open`, the bot token for the
//! rest); a message over the markdown block's 12,000 characters is
//! `invalid_blocks`; `chat.update` keeps blocks it was not given. A test
//! scripts failures (a 429 with `Retry-After`) per method.
//!
//! Socket Mode: `apps.connections.open` hands out a one-time ticket; the
//! websocket refuses any other. Each connection gets `hello`, then every
//! envelope not yet acknowledged (again, with `retry_attempt` counting the
//! deliveries, as Slack redelivers); an envelope is acknowledged by
//! `{"envelope_id": …}`. A test can make acknowledgements get lost (the
//! gateway dying before Slack heard it) and send `disconnect`.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request};

use super::acp_client::TIMEOUT;

/// Said to a connection's task: end the connection.
const DROP: &str = "\u{0}drop";

/// The bot's identity `auth.test` answers.
pub const BOT_USER: &str = "UBOT";
pub const BOT_ID: &str = "BBOT";

/// One Web API call.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub authorization: Option<String>,
    pub body: Value,
    pub at: Instant,
    /// What the mock answered: `ok` true or not.
    pub ok: bool,
}

/// An answer a test scripts for the next call of a method.
#[derive(Clone, Debug)]
pub struct Scripted {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

struct Envelope {
    id: String,
    frame: Value,
    deliveries: u64,
    acked: bool,
}

#[derive(Default)]
struct Inner {
    bot_token: String,
    app_token: String,
    /// The websocket's address.
    ws: String,
    calls: Vec<Call>,
    /// Messages by ts: their channel and current body.
    messages: BTreeMap<String, Value>,
    scripted: HashMap<String, VecDeque<Scripted>>,
    next_ts: u64,
    tickets: HashSet<String>,
    /// The open Socket Mode connection (newest), by number.
    socket: Option<(u64, mpsc::UnboundedSender<String>)>,
    connections: u64,
    envelopes: Vec<Envelope>,
    /// Every acknowledgement received (also the lost ones).
    acks: Vec<String>,
    lose_acks: bool,
    next_event: u64,
}

#[derive(Clone)]
pub struct SlackApi {
    /// The Web API's base URL (`[channels.slack] api_url`).
    pub url: String,
    pub ws_addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    changed: Arc<Notify>,
}

impl SlackApi {
    pub async fn start(bot_token: &str, app_token: &str) -> Self {
        let ws = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ws_addr = ws.local_addr().unwrap();
        let inner = Arc::new(Mutex::new(Inner {
            bot_token: bot_token.to_string(),
            app_token: app_token.to_string(),
            ws: ws_addr.to_string(),
            next_ts: 1,
            ..Default::default()
        }));
        let changed = Arc::new(Notify::new());
        let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = http.local_addr().unwrap();
        let mock = Self {
            url: format!("http://{addr}/api"),
            ws_addr,
            inner,
            changed,
        };
        let app = axum::Router::new()
            .fallback(web_api)
            .with_state(mock.clone());
        tokio::spawn(async move {
            axum::serve(http, app).await.unwrap();
        });
        let server = mock.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = ws.accept().await {
                tokio::spawn(server.clone().socket(stream));
            }
        });
        mock
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap()
    }

    fn changed(&self) {
        self.changed.notify_waiters();
    }

    /// Waits until `done` holds on the mock's state, failing with `what`.
    pub async fn wait(&self, what: &str, mut done: impl FnMut(&SlackApi) -> bool) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let notified = self.changed.notified();
            if done(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() && !done(self) {
                panic!(
                    "{what}: not within {TIMEOUT:?}; calls: {:#?}",
                    self.calls()
                        .iter()
                        .map(|c| (c.method.clone(), c.body.clone()))
                        .collect::<Vec<_>>()
                );
            }
        }
    }

    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The calls of `method`, in order.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// The bodies of `method`'s calls that succeeded.
    pub fn bodies_of(&self, method: &str) -> Vec<Value> {
        self.calls_of(method)
            .into_iter()
            .filter(|c| c.ok)
            .map(|c| c.body)
            .collect()
    }

    /// Messages posted (in order of their ts) as they are now.
    pub fn messages(&self) -> Vec<(String, Value)> {
        self.lock()
            .messages
            .iter()
            .map(|(ts, m)| (ts.clone(), m.clone()))
            .collect()
    }

    /// The markdown of every message posted, in order, as it is now.
    pub fn texts(&self) -> Vec<String> {
        self.messages()
            .iter()
            .map(|(_, m)| markdown_of(m))
            .collect()
    }

    /// The next call of `method` answers this.
    pub fn script(&self, method: &str, scripted: Scripted) {
        self.lock()
            .scripted
            .entry(method.to_string())
            .or_default()
            .push_back(scripted);
    }

    /// The next call of `method` is told to wait `seconds`, as Slack does.
    pub fn rate_limit(&self, method: &str, seconds: u64) {
        self.script(
            method,
            Scripted {
                status: 429,
                headers: vec![("retry-after".into(), seconds.to_string())],
                body: json!({"ok": false, "error": "ratelimited"}),
            },
        );
    }

    // ----- Socket Mode -----

    /// Sends `event` in an `events_api` envelope (now, or to the next
    /// connection); returns the envelope's id.
    pub fn push_event(&self, event: Value) -> String {
        let event_id = {
            let mut inner = self.lock();
            inner.next_event += 1;
            format!("Ev{:08}", inner.next_event)
        };
        let payload = event_callback(event, &event_id);
        self.push_envelope("events_api", payload)
    }

    /// Sends an `interactive` envelope (a `block_actions` payload).
    pub fn push_interactive(&self, payload: Value) -> String {
        self.push_envelope("interactive", payload)
    }

    fn push_envelope(&self, kind: &str, payload: Value) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let mut frame = json!({"envelope_id": id, "type": kind, "payload": payload,
            "accepts_response_payload": false});
        if kind == "events_api" {
            frame["retry_attempt"] = json!(0);
            frame["retry_reason"] = json!("");
        }
        let mut inner = self.lock();
        inner.envelopes.push(Envelope {
            id: id.clone(),
            frame,
            deliveries: 0,
            acked: false,
        });
        if let Some((_, socket)) = inner.socket.clone() {
            let last = inner.envelopes.len() - 1;
            let text = deliver(&mut inner.envelopes[last]);
            let _ = socket.send(text);
        }
        id
    }

    /// Sends `{"type": "disconnect", "reason": reason}` on the open
    /// connection.
    pub fn disconnect(&self, reason: &str) {
        let frame =
            json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-1"}});
        if let Some((_, socket)) = self.lock().socket.clone() {
            let _ = socket.send(frame.to_string());
        }
    }

    /// Drops the open connection without a word (a network failure).
    pub fn drop_connection(&self) {
        if let Some((_, socket)) = self.lock().socket.clone() {
            let _ = socket.send(DROP.to_string());
        }
    }

    /// Acknowledgements from now on are lost (`false`: heard again).
    pub fn lose_acks(&self, lose: bool) {
        self.lock().lose_acks = lose;
    }

    pub fn acked(&self, envelope: &str) -> bool {
        self.lock()
            .envelopes
            .iter()
            .any(|e| e.id == envelope && e.acked)
    }

    /// Every acknowledgement the gateway sent, lost ones too.
    pub fn acks(&self) -> Vec<String> {
        self.lock().acks.clone()
    }

    /// How often envelope `id` was delivered.
    pub fn deliveries(&self, envelope: &str) -> u64 {
        self.lock()
            .envelopes
            .iter()
            .find(|e| e.id == envelope)
            .map_or(0, |e| e.deliveries)
    }

    /// Socket Mode connections opened so far.
    pub fn connections(&self) -> u64 {
        self.lock().connections
    }

    pub fn connected(&self) -> bool {
        self.lock().socket.is_some()
    }

    // The handshake callback's error type is tungstenite's, not ours.
    #[allow(clippy::result_large_err)]
    async fn socket(self, stream: tokio::net::TcpStream) {
        let mock = self.clone();
        let check = move |request: &Request, response| {
            let ticket = request
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("ticket=")))
                .unwrap_or_default()
                .to_string();
            if request.uri().path() == "/link/" && mock.lock().tickets.remove(&ticket) {
                Ok(response)
            } else {
                let mut refused = ErrorResponse::new(Some("invalid ticket".to_string()));
                *refused.status_mut() = StatusCode::UNAUTHORIZED;
                Err(refused)
            }
        };
        let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
            return;
        };
        let (mut write, mut read) = ws.split();
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let number = {
            let mut inner = self.lock();
            inner.connections += 1;
            let number = inner.connections;
            inner.socket = Some((number, tx.clone()));
            let hello = json!({"type": "hello", "num_connections": 1,
                "connection_info": {"app_id": "A1"},
                "debug_info": {"host": "applink-1", "build_number": 1, "approximate_connection_time": 18060}});
            let _ = tx.send(hello.to_string());
            for envelope in inner.envelopes.iter_mut().filter(|e| !e.acked) {
                let _ = tx.send(deliver(envelope));
            }
            number
        };
        self.changed();
        loop {
            tokio::select! {
                out = rx.recv() => {
                    let Some(out) = out else { break };
                    if out == DROP {
                        break;
                    }
                    if write.send(Message::text(out)).await.is_err() {
                        break;
                    }
                }
                frame = read.next() => {
                    match frame {
                        Some(Ok(Message::Text(text))) => {
                            let Ok(frame) = serde_json::from_str::<Value>(&text) else { continue };
                            if let Some(id) = frame["envelope_id"].as_str() {
                                let mut inner = self.lock();
                                inner.acks.push(id.to_string());
                                if !inner.lose_acks
                                    && let Some(e) = inner.envelopes.iter_mut().find(|e| e.id == id)
                                {
                                    e.acked = true;
                                }
                                drop(inner);
                                self.changed();
                            }
                        }
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                        Some(Ok(_)) => {}
                    }
                }
            }
        }
        let mut inner = self.lock();
        if inner.socket.as_ref().is_some_and(|(n, _)| *n == number) {
            inner.socket = None;
        }
        drop(inner);
        self.changed();
    }
}

/// The frame of an envelope's next delivery.
fn deliver(envelope: &mut Envelope) -> String {
    if envelope.frame.get("retry_attempt").is_some() {
        envelope.frame["retry_attempt"] = json!(envelope.deliveries);
        envelope.frame["retry_reason"] = json!(if envelope.deliveries == 0 {
            ""
        } else {
            "timeout"
        });
    }
    envelope.deliveries += 1;
    envelope.frame.to_string()
}

/// The Events API body of `event` (also a Socket Mode `events_api`
/// envelope's payload).
pub fn event_callback(event: Value, event_id: &str) -> Value {
    json!({"token": "one-long-verification-token", "team_id": "T1", "api_app_id": "A1",
        "event": event, "type": "event_callback", "authed_teams": ["T1"],
        "event_id": event_id, "event_time": 1_700_000_000})
}

/// A `message.im` event from `user` in DM channel `channel`.
pub fn dm(channel: &str, user: &str, text: &str, ts: &str) -> Value {
    json!({"type": "message", "channel": channel, "user": user, "text": text,
        "ts": ts, "event_ts": ts, "channel_type": "im"})
}

/// A `message.channels` event (in a thread when `thread` is given).
pub fn channel_message(
    channel: &str,
    user: &str,
    text: &str,
    ts: &str,
    thread: Option<&str>,
) -> Value {
    let mut event = json!({"type": "message", "channel": channel, "user": user, "text": text,
        "ts": ts, "event_ts": ts, "channel_type": "channel"});
    if let Some(thread) = thread {
        event["thread_ts"] = json!(thread);
    }
    event
}

/// A `block_actions` payload: `user` pressed the button `value` under
/// message `ts` in `channel`.
pub fn block_actions(channel: &str, user: &str, ts: &str, value: &str) -> Value {
    json!({"type": "block_actions",
        "user": {"id": user, "username": "someone", "team_id": "T1"},
        "api_app_id": "A1", "token": "one-long-verification-token", "trigger_id": "1.2.abc",
        "team": {"id": "T1", "domain": "test"},
        "container": {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
        "channel": {"id": channel, "name": "directmessage"},
        "message": {"type": "message", "ts": ts, "user": BOT_USER, "bot_id": BOT_ID, "text": "…"},
        "response_url": "https://hooks.slack.com/actions/T1/1/abc",
        "actions": [{"action_id": value, "block_id": "b1", "value": value, "type": "button",
            "text": {"type": "plain_text", "text": "…"}, "action_ts": format!("{}", 1_700_000_100u64 + (ts.len() as u64))}]})
}

/// `v0=HMAC-SHA256(secret, "v0:{timestamp}:{body}")`: how Slack signs a
/// request to the Events API.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:").as_bytes());
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("v0={hex}")
}

/// The markdown of a message body pincer sent (its `markdown` blocks).
pub fn markdown_of(message: &Value) -> String {
    message["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "markdown")
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("")
}

/// The `value`s of a message's buttons.
pub fn buttons_of(message: &Value) -> Vec<String> {
    message["blocks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "actions")
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["value"].as_str().map(String::from))
        .collect()
}

fn answer(status: u16, headers: &[(String, String)], body: &Value) -> Response {
    let mut response = (
        StatusCode::from_u16(status).unwrap(),
        [("content-type", "application/json; charset=utf-8")],
        body.to_string(),
    )
        .into_response();
    for (name, value) in headers {
        response.headers_mut().insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    response
}

async fn web_api(
    State(mock): State<SlackApi>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(method) = uri.path().strip_prefix("/api/") else {
        return answer(404, &[], &json!({"ok": false, "error": "unknown_method"}));
    };
    let method = method.to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let (status, extra, reply) = {
        let mut inner = mock.lock();
        let wanted = if method == "apps.connections.open" {
            inner.app_token.clone()
        } else {
            inner.bot_token.clone()
        };
        let (status, extra, reply) = match authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "))
        {
            None => (200, Vec::new(), json!({"ok": false, "error": "not_authed"})),
            Some(token) if token != wanted => (
                200,
                Vec::new(),
                json!({"ok": false, "error": "invalid_auth"}),
            ),
            Some(_) => match inner.scripted.get_mut(&method).and_then(|q| q.pop_front()) {
                Some(scripted) => (scripted.status, scripted.headers, scripted.body),
                None => (200, Vec::new(), call(&mut inner, &method, &body)),
            },
        };
        inner.calls.push(Call {
            method: method.clone(),
            authorization: authorization.clone(),
            body: body.clone(),
            at: Instant::now(),
            ok: reply["ok"] == true,
        });
        (status, extra, reply)
    };
    mock.changed();
    answer(status, &extra, &reply)
}

/// A method's answer (the token was right).
fn call(inner: &mut Inner, method: &str, body: &Value) -> Value {
    match method {
        "auth.test" => json!({"ok": true, "url": "https://pincer-test.slack.com/", "team": "Test",
            "user": "pincer", "team_id": "T1", "user_id": BOT_USER, "bot_id": BOT_ID}),
        "apps.connections.open" => {
            let ticket = uuid::Uuid::new_v4().simple().to_string();
            inner.tickets.insert(ticket.clone());
            json!({"ok": true, "url": format!("ws://{}/link/?ticket={ticket}&app_id=A1", inner.ws)})
        }
        "chat.postMessage" => {
            let Some(channel) = body["channel"].as_str() else {
                return json!({"ok": false, "error": "channel_not_found"});
            };
            if let Some(error) = invalid(body) {
                return json!({"ok": false, "error": error});
            }
            let ts = format!("1700000000.{:06}", inner.next_ts);
            inner.next_ts += 1;
            let mut message = body.clone();
            message["ts"] = json!(ts);
            inner.messages.insert(ts.clone(), message.clone());
            json!({"ok": true, "channel": channel, "ts": ts, "message": message})
        }
        "chat.update" => {
            let (Some(channel), Some(ts)) = (body["channel"].as_str(), body["ts"].as_str()) else {
                return json!({"ok": false, "error": "message_not_found"});
            };
            if let Some(error) = invalid(body) {
                return json!({"ok": false, "error": error});
            }
            let Some(message) = inner.messages.get_mut(ts) else {
                return json!({"ok": false, "error": "message_not_found"});
            };
            if message["channel"] != channel {
                return json!({"ok": false, "error": "message_not_found"});
            }
            for key in ["text", "blocks"] {
                if let Some(value) = body.get(key) {
                    message[key] = value.clone();
                }
            }
            json!({"ok": true, "channel": channel, "ts": ts, "text": body["text"]})
        }
        "chat.postEphemeral" => {
            if body["channel"].as_str().is_none() || body["user"].as_str().is_none() {
                return json!({"ok": false, "error": "channel_not_found"});
            }
            let ts = format!("1700000000.{:06}", inner.next_ts);
            inner.next_ts += 1;
            json!({"ok": true, "message_ts": ts})
        }
        _ => json!({"ok": false, "error": "unknown_method"}),
    }
}

/// Slack's checks of a message's content.
fn invalid(body: &Value) -> Option<&'static str> {
    let blocks = body["blocks"].as_array();
    if body["text"].as_str().is_none_or(str::is_empty) && blocks.is_none_or(|b| b.is_empty()) {
        return Some("no_text");
    }
    let markdown: usize = blocks
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "markdown")
        .filter_map(|b| b["text"].as_str())
        .map(|t| t.chars().count())
        .sum();
    if markdown > 12_000 || blocks.is_some_and(|b| b.len() > 50) {
        return Some("invalid_blocks");
    }
    let ids: Vec<&str> = blocks
        .into_iter()
        .flatten()
        .flat_map(|b| b["elements"].as_array().into_iter().flatten())
        .filter_map(|e| e["action_id"].as_str())
        .collect();
    if ids.iter().any(|id| id.len() > 255) || ids.len() != ids.iter().collect::<HashSet<_>>().len()
    {
        return Some("invalid_blocks");
    }
    None
}
