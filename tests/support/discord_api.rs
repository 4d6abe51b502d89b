//! A local Discord for tests: REST (axum on 127.0.0.1, under `/api/v10`)
//! and the gateway websocket (tokio-tungstenite on another port), speaking
//! the documented shapes (docs.discord.com/developers: Gateway, Gateway
//! Events, Opcodes and Status Codes, Message, Interactions).
//!
//! The gateway sends Hello, answers Identify with READY (a fresh session,
//! `resume_gateway_url` pointing at `/resume` of itself) and Resume by
//! replaying every dispatch after the given sequence number and RESUMED;
//! it answers heartbeats with ACKs (unless told not to), and closes with
//! 4004 on a wrong token, as Discord does. Dispatches a test injects go to
//! the newest session's log, so that those sent while no socket is open
//! are replayed on Resume. REST checks `Authorization: Bot <token>` (401
//! otherwise), records every request, and can answer 429 with
//! `Retry-After` and `retry_after` as Discord does.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response as WsResponse};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// The bot's user id in READY.
pub const BOT_ID: &str = "1000000000000000099";

/// One REST request.
#[derive(Clone, Debug)]
pub struct Rest {
    pub method: String,
    /// After `/api/v10`.
    pub path: String,
    pub body: Value,
    pub status: u16,
    pub at: Instant,
}

/// One gateway connection as the mock saw it.
#[derive(Clone, Debug, Default)]
pub struct Connection {
    /// The request's path and query (`/?v=10&encoding=json`).
    pub target: String,
    /// Every payload the client sent, in order.
    pub sent: Vec<Value>,
}

enum Command {
    Send(Value),
    /// Ends the TCP connection without a close frame.
    Drop,
    Close(u16),
}

struct SessionLog {
    seq: u64,
    dispatches: Vec<Value>,
}

struct State_ {
    token: String,
    ws_url: String,
    rest: Vec<Rest>,
    connections: Vec<Connection>,
    sessions: HashMap<String, SessionLog>,
    /// The newest session: where dispatches go.
    session: Option<String>,
    /// The live connection (its index) and the session it serves.
    live: Option<(usize, String, mpsc::UnboundedSender<Command>)>,
    next_id: u64,
    rate_limits: VecDeque<(String, String, f64)>,
    heartbeat_interval: u64,
    ack: bool,
}

#[derive(Clone)]
pub struct DiscordApi {
    /// `http://127.0.0.1:PORT/api/v10`: the `api_url`.
    pub api_url: String,
    /// `ws://127.0.0.1:PORT`: what `GET /gateway/bot` answers.
    pub gateway_url: String,
    state: Arc<Mutex<State_>>,
}

impl DiscordApi {
    /// A mock that accepts `token`.
    pub async fn start(token: &str) -> Self {
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let ws = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api_url = format!("http://{}/api/v10", http.local_addr().unwrap());
        let gateway_url = format!("ws://{}", ws.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State_ {
            token: token.to_string(),
            ws_url: gateway_url.clone(),
            rest: Vec::new(),
            connections: Vec::new(),
            sessions: HashMap::new(),
            session: None,
            live: None,
            next_id: 1_500_000_000_000_000_000,
            rate_limits: VecDeque::new(),
            heartbeat_interval: 1000,
            ack: true,
        }));
        let app = axum::Router::new().fallback(rest).with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(http, app).await;
        });
        let accepting = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = ws.accept().await {
                tokio::spawn(gateway(stream, accepting.clone()));
            }
        });
        Self {
            api_url,
            gateway_url,
            state,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State_> {
        self.state.lock().unwrap()
    }

    pub fn rest(&self) -> Vec<Rest> {
        self.lock().rest.clone()
    }

    /// The successful requests of `method` whose path ends with `suffix`.
    pub fn calls(&self, method: &str, suffix: &str) -> Vec<Rest> {
        self.rest()
            .into_iter()
            .filter(|r| r.method == method && r.path.ends_with(suffix) && r.status < 300)
            .collect()
    }

    /// Messages created (POSTs answered 200), in order.
    pub fn posts(&self) -> Vec<Rest> {
        self.rest()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/messages") && r.status == 200)
            .collect()
    }

    /// The text each created message shows now (after its edits), in the
    /// order they were created, with the id each got.
    pub fn shown(&self) -> Vec<(String, Value)> {
        let mut shown: Vec<(String, Value)> = Vec::new();
        for r in self.rest() {
            if r.status != 200 {
                continue;
            }
            if r.method == "POST" && r.path.ends_with("/messages") {
                shown.push((r.body["__id"].as_str().unwrap().to_string(), r.body.clone()));
            } else if r.method == "PATCH" {
                let id = r.path.rsplit('/').next().unwrap().to_string();
                if let Some(entry) = shown.iter_mut().find(|(i, _)| *i == id) {
                    entry.1 = r.body.clone();
                }
            }
        }
        shown
    }

    /// The contents of [`DiscordApi::shown`].
    pub fn texts(&self) -> Vec<String> {
        self.shown()
            .into_iter()
            .map(|(_, b)| b["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    pub fn connections(&self) -> Vec<Connection> {
        self.lock().connections.clone()
    }

    /// Whether a socket is open and identified or resumed.
    pub fn connected(&self) -> bool {
        self.lock().live.is_some()
    }

    /// The index of the open, identified or resumed connection.
    pub fn live(&self) -> Option<usize> {
        self.lock().live.as_ref().map(|(i, ..)| *i)
    }

    /// The current session id (after READY).
    pub fn session_id(&self) -> Option<String> {
        self.lock().session.clone()
    }

    /// The sequence number of the newest dispatch of the current session.
    pub fn seq(&self) -> u64 {
        let state = self.lock();
        state
            .session
            .as_ref()
            .and_then(|s| state.sessions.get(s))
            .map(|l| l.seq)
            .unwrap_or(0)
    }

    /// The next 429 for `method` on a path containing `path`.
    pub fn rate_limit(&self, method: &str, path: &str, retry_after: f64) {
        self.lock()
            .rate_limits
            .push_back((method.to_string(), path.to_string(), retry_after));
    }

    pub fn set_heartbeat_interval(&self, ms: u64) {
        self.lock().heartbeat_interval = ms;
    }

    /// Stops (or resumes) answering heartbeats.
    pub fn ack_heartbeats(&self, ack: bool) {
        self.lock().ack = ack;
    }

    /// A dispatch in the current session (sent now when a socket is open,
    /// replayed on Resume otherwise); its sequence number.
    pub fn dispatch(&self, kind: &str, data: Value) -> u64 {
        let mut state = self.lock();
        let session = state.session.clone().expect("no session: wait for READY");
        let log = state.sessions.get_mut(&session).unwrap();
        log.seq += 1;
        let payload = json!({"op": 0, "s": log.seq, "t": kind, "d": data});
        log.dispatches.push(payload.clone());
        let seq = log.seq;
        if let Some((_, live_session, tx)) = &state.live
            && *live_session == session
        {
            let _ = tx.send(Command::Send(payload));
        }
        seq
    }

    /// Sends an opcode payload (op 7, op 9, op 1) on the open socket.
    pub fn send_op(&self, payload: Value) {
        if let Some((_, _, tx)) = &self.lock().live {
            let _ = tx.send(Command::Send(payload));
        }
    }

    /// Ends the open socket without a close frame.
    pub fn drop_socket(&self) {
        if let Some((_, _, tx)) = self.lock().live.take() {
            let _ = tx.send(Command::Drop);
        }
    }

    pub fn close_socket(&self, code: u16) {
        if let Some((_, _, tx)) = self.lock().live.take() {
            let _ = tx.send(Command::Close(code));
        }
    }

    fn next_id(&self) -> String {
        let mut state = self.lock();
        state.next_id += 1;
        state.next_id.to_string()
    }

    /// A direct message from `user` in DM channel `channel`; its id.
    pub fn dm(&self, user: &str, channel: &str, content: &str) -> String {
        let id = self.next_id();
        self.dispatch(
            "MESSAGE_CREATE",
            json!({
                "id": id, "channel_id": channel,
                "author": {"id": user, "username": format!("user{user}"), "global_name": null, "discriminator": "0", "avatar": null},
                "content": content, "timestamp": "2026-11-24T21:00:00.000000+00:00", "edited_timestamp": null,
                "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
                "attachments": [], "embeds": [], "pinned": false, "type": 0, "flags": 0,
            }),
        );
        id
    }

    /// A message in guild channel `channel`, mentioning the bot when
    /// `mention`.
    pub fn guild_message(
        &self,
        user: &str,
        guild: &str,
        channel: &str,
        content: &str,
        mention: bool,
    ) -> String {
        let id = self.next_id();
        let mentions = if mention {
            json!([{"id": BOT_ID, "username": "pincer", "bot": true, "discriminator": "0"}])
        } else {
            json!([])
        };
        self.dispatch(
            "MESSAGE_CREATE",
            json!({
                "id": id, "channel_id": channel, "guild_id": guild, "channel_type": 0,
                "author": {"id": user, "username": format!("user{user}"), "discriminator": "0", "avatar": null},
                "member": {"roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00"},
                "content": content, "timestamp": "2026-11-24T21:00:00.000000+00:00", "edited_timestamp": null,
                "tts": false, "mention_everyone": false, "mentions": mentions, "mention_roles": [],
                "attachments": [], "embeds": [], "pinned": false, "type": 0, "flags": 0,
            }),
        );
        id
    }

    /// A press of the button `custom_id` under message `message` by `user`
    /// in DM channel `channel`; the interaction's id and token.
    pub fn press_in_dm(
        &self,
        user: &str,
        channel: &str,
        message: &str,
        custom_id: &str,
    ) -> (String, String) {
        let id = self.next_id();
        let token = format!("itoken-{}", uuid::Uuid::new_v4().simple());
        self.dispatch(
            "INTERACTION_CREATE",
            json!({
                "id": id, "application_id": BOT_ID, "type": 3, "token": token, "version": 1,
                "channel_id": channel, "channel": {"id": channel, "type": 1},
                "user": {"id": user, "username": format!("user{user}")},
                "data": {"custom_id": custom_id, "component_type": 2},
                "message": {"id": message, "channel_id": channel},
            }),
        );
        (id, token)
    }
}

async fn rest(
    State(state): State<Arc<Mutex<State_>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path()
        .strip_prefix("/api/v10")
        .unwrap_or(uri.path())
        .to_string();
    let mut body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut state = state.lock().unwrap();
    let record = |state: &mut State_, status: u16, body: Value| {
        state.rest.push(Rest {
            method: method.to_string(),
            path: path.clone(),
            body,
            status,
            at: Instant::now(),
        });
    };
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if auth != format!("Bot {}", state.token) {
        record(&mut state, 401, body);
        return json_response(
            StatusCode::UNAUTHORIZED,
            json!({"message": "401: Unauthorized", "code": 0}),
        );
    }
    let limited = state
        .rate_limits
        .iter()
        .position(|(m, p, _)| *m == method.as_str() && path.contains(p.as_str()));
    if let Some(index) = limited {
        let (_, _, retry_after) = state.rate_limits.remove(index).unwrap();
        record(&mut state, 429, body);
        let mut response = json_response(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"message": "You are being rate limited.", "retry_after": retry_after, "global": false}),
        );
        let h = response.headers_mut();
        h.insert(
            "retry-after",
            retry_after.ceil().to_string().parse().unwrap(),
        );
        h.insert("x-ratelimit-limit", "5".parse().unwrap());
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert(
            "x-ratelimit-reset-after",
            retry_after.to_string().parse().unwrap(),
        );
        h.insert("x-ratelimit-scope", "user".parse().unwrap());
        return response;
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method.as_str(), parts.as_slice()) {
        ("GET", ["gateway", "bot"]) => {
            let url = state.ws_url.clone();
            record(&mut state, 200, body);
            json_response(
                StatusCode::OK,
                json!({"url": url, "shards": 1, "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}}),
            )
        }
        ("POST", ["channels", channel, "messages"]) => {
            state.next_id += 1;
            let id = state.next_id.to_string();
            let message = message_object(&id, channel, &body);
            body["__id"] = json!(id);
            record(&mut state, 200, body);
            json_response(StatusCode::OK, message)
        }
        ("PATCH", ["channels", channel, "messages", id]) => {
            let message = message_object(id, channel, &body);
            record(&mut state, 200, body);
            json_response(StatusCode::OK, message)
        }
        ("POST", ["channels", _, "typing"]) | ("POST", ["interactions", _, _, "callback"]) => {
            record(&mut state, 204, body);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => {
            record(&mut state, 404, body);
            json_response(
                StatusCode::NOT_FOUND,
                json!({"message": "404: Not Found", "code": 0}),
            )
        }
    }
}

/// A JSON body with its content type, as Discord answers.
fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn message_object(id: &str, channel: &str, body: &Value) -> Value {
    json!({
        "id": id, "channel_id": channel, "type": 0,
        "author": {"id": BOT_ID, "username": "pincer", "bot": true, "discriminator": "0", "avatar": null},
        "content": body["content"].clone(), "components": body["components"].clone(),
        "timestamp": "2026-11-24T21:00:01.000000+00:00", "edited_timestamp": null,
        "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
        "attachments": [], "embeds": [], "pinned": false, "flags": 0,
    })
}

// tungstenite's callback returns its error response by value.
#[allow(clippy::result_large_err)]
async fn gateway(stream: tokio::net::TcpStream, state: Arc<Mutex<State_>>) {
    let target = Arc::new(Mutex::new(String::new()));
    let seen = target.clone();
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(
        stream,
        move |request: &Request, response: WsResponse| {
            *seen.lock().unwrap() = request.uri().to_string();
            Ok(response)
        },
    )
    .await
    else {
        return;
    };
    let (index, interval) = {
        let mut s = state.lock().unwrap();
        s.connections.push(Connection {
            target: target.lock().unwrap().clone(),
            sent: Vec::new(),
        });
        (s.connections.len() - 1, s.heartbeat_interval)
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": interval}, "s": null, "t": null});
    if socket
        .send(Frame::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let (tx, mut commands) = mpsc::unbounded_channel();
    let mut identified = false;
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(Command::Send(payload)) => {
                    if socket.send(Frame::Text(payload.to_string().into())).await.is_err() {
                        break;
                    }
                }
                Some(Command::Close(code)) => {
                    let frame = CloseFrame { code: CloseCode::from(code), reason: "".into() };
                    let _ = socket.send(Frame::Close(Some(frame))).await;
                    break;
                }
                Some(Command::Drop) | None => break,
            },
            frame = socket.next() => {
                let Some(Ok(frame)) = frame else { break };
                let Frame::Text(text) = frame else { continue };
                let Ok(payload) = serde_json::from_str::<Value>(&text) else {
                    let frame = CloseFrame { code: CloseCode::from(4002), reason: "decode error".into() };
                    let _ = socket.send(Frame::Close(Some(frame))).await;
                    break;
                };
                let replies = {
                    let mut s = state.lock().unwrap();
                    s.connections[index].sent.push(payload.clone());
                    handle(&mut s, index, &tx, &payload, &mut identified)
                };
                let mut closed = false;
                for reply in replies {
                    match reply {
                        Command::Send(p) => {
                            if socket.send(Frame::Text(p.to_string().into())).await.is_err() {
                                closed = true;
                            }
                        }
                        Command::Close(code) => {
                            let frame = CloseFrame { code: CloseCode::from(code), reason: "".into() };
                            let _ = socket.send(Frame::Close(Some(frame))).await;
                            closed = true;
                        }
                        Command::Drop => closed = true,
                    }
                }
                if closed {
                    break;
                }
            }
        }
    }
    let mut s = state.lock().unwrap();
    if s.live.as_ref().is_some_and(|(i, ..)| *i == index) {
        s.live = None;
    }
}

/// What the gateway answers to a client's payload.
fn handle(
    s: &mut State_,
    index: usize,
    tx: &mpsc::UnboundedSender<Command>,
    payload: &Value,
    identified: &mut bool,
) -> Vec<Command> {
    let d = &payload["d"];
    match payload["op"].as_u64() {
        Some(1) if s.ack => vec![Command::Send(
            json!({"op": 11, "d": null, "s": null, "t": null}),
        )],
        Some(1) => vec![],
        Some(2) if *identified => vec![Command::Close(4005)],
        Some(2) => {
            if d["token"] != s.token.as_str() {
                return vec![Command::Close(4004)];
            }
            if d["intents"].as_u64().is_none() {
                return vec![Command::Close(4013)];
            }
            *identified = true;
            let session = uuid::Uuid::new_v4().simple().to_string();
            let ready = json!({"op": 0, "s": 1, "t": "READY", "d": {
                "v": 10, "user": {"id": BOT_ID, "username": "pincer", "bot": true, "discriminator": "0"},
                "guilds": [], "session_id": session,
                "resume_gateway_url": format!("{}/resume", s.ws_url),
                "application": {"id": BOT_ID, "flags": 0}}});
            s.sessions.insert(
                session.clone(),
                SessionLog {
                    seq: 1,
                    dispatches: vec![ready.clone()],
                },
            );
            s.session = Some(session.clone());
            s.live = Some((index, session, tx.clone()));
            vec![Command::Send(ready)]
        }
        Some(6) => {
            let session = d["session_id"].as_str().unwrap_or_default().to_string();
            let seq = d["seq"].as_u64().unwrap_or(0);
            if d["token"] != s.token.as_str() {
                return vec![Command::Close(4004)];
            }
            let Some(log) = s.sessions.get_mut(&session) else {
                return vec![Command::Send(
                    json!({"op": 9, "d": false, "s": null, "t": null}),
                )];
            };
            *identified = true;
            let mut replies: Vec<Command> = log
                .dispatches
                .iter()
                .filter(|p| p["s"].as_u64().unwrap_or(0) > seq)
                .cloned()
                .map(Command::Send)
                .collect();
            log.seq += 1;
            let resumed = json!({"op": 0, "s": log.seq, "t": "RESUMED", "d": {}});
            log.dispatches.push(resumed.clone());
            replies.push(Command::Send(resumed));
            s.live = Some((index, session, tx.clone()));
            replies
        }
        _ if !*identified => vec![Command::Close(4003)],
        _ => vec![Command::Close(4001)],
    }
}
