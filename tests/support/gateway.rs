//! End-to-end support for the websocket gateway: spawns the real
//! `pincer gateway --port 0` in a [`Sandbox`] with a mock model, learns its
//! port from the `pincer gateway: listening on ws://HOST:PORT` line, and
//! speaks the gateway protocol (docs/gateway.md) with a real websocket
//! client (tokio-tungstenite). Every wait has a deadline; nothing sleeps.
//!
//! A [`Client`] can connect from any loopback address (127.0.0.2, …) so
//! that tests of per-peer limits have more than one peer on one machine.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::{TcpSocket, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::Notify;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};

use super::acp_client::{Sandbox, TIMEOUT};
use super::mock_model::MockModel;

/// A fresh strong token for one test (well over the 16-character minimum).
pub fn new_token() -> String {
    format!("gw-{}", uuid::Uuid::new_v4().simple())
}

/// Writes the user's `$PINCER_HOME/config.toml` with a `[gateway]` table
/// whose body is `body` (TOML lines such as `tick_interval_ms = 200`).
pub fn write_gateway_config(sandbox: &Sandbox, body: &str) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!("[gateway]\n{body}\n"),
    )
    .unwrap();
}

/// `pincer gateway --port 0 <extra>` in `sandbox`, talking to `mock`, with
/// `token` (if any) in `PINCER_GATEWAY_TOKEN`.
pub fn gateway_command(
    sandbox: &Sandbox,
    mock: &MockModel,
    token: Option<&str>,
    extra: &[&str],
) -> Command {
    let mut args = vec!["gateway", "--port", "0"];
    args.extend_from_slice(extra);
    let mut cmd = sandbox.command(&args);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .stdin(Stdio::null());
    if let Some(token) = token {
        cmd.env("PINCER_GATEWAY_TOKEN", token);
    }
    cmd
}

/// What the gateway wrote to stderr so far, shared with its reader task.
#[derive(Clone, Default)]
pub struct StderrLog {
    text: Arc<Mutex<String>>,
    changed: Arc<Notify>,
    ended: Arc<Mutex<bool>>,
}

impl StderrLog {
    pub fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// Waits until a stderr line satisfies `find` (which returns what it
    /// found), or stderr ends, or `timeout` passes.
    pub async fn wait_line<T>(
        &self,
        timeout: Duration,
        mut find: impl FnMut(&str) -> Option<T>,
    ) -> Option<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if let Some(found) = self.text().lines().find_map(&mut find) {
                return Some(found);
            }
            if *self.ended.lock().unwrap() {
                return None;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }
}

/// A running `pincer gateway`.
pub struct Gateway {
    pub child: Child,
    /// Where it listens, as announced (the host may be 0.0.0.0).
    pub announced: SocketAddr,
    /// Where a loopback client reaches it.
    pub addr: SocketAddr,
    pub token: Option<String>,
    pub stderr: StderrLog,
}

/// The `HOST:PORT` of a `pincer gateway: listening on ws://HOST:PORT` line.
pub fn parse_listening(line: &str) -> Option<SocketAddr> {
    let rest = line
        .trim()
        .strip_prefix("pincer gateway: listening on ws://")?;
    rest.trim_end_matches('/').parse().ok()
}

impl Gateway {
    /// Spawns `cmd` and waits for its listening line; panics with its
    /// stderr if it exits or stays silent.
    pub async fn spawn(mut cmd: Command, token: Option<&str>) -> Self {
        let mut child = cmd.spawn().unwrap();
        let stderr = spawn_stderr_reader(&mut child);
        let announced = stderr.wait_line(TIMEOUT, parse_listening).await;
        let Some(announced) = announced else {
            let status = child.try_wait().unwrap();
            panic!(
                "pincer gateway did not announce its port (exit: {status:?}); stderr:\n{}",
                stderr.text()
            );
        };
        let addr = if announced.ip().is_unspecified() {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), announced.port())
        } else {
            announced
        };
        Self {
            child,
            announced,
            addr,
            token: token.map(str::to_string),
            stderr,
        }
    }

    /// The usual gateway of a test: a token in the environment, the
    /// sandbox's config (write it first), the mock model.
    pub async fn start(sandbox: &Sandbox, mock: &MockModel) -> Self {
        let token = new_token();
        Self::spawn(
            gateway_command(sandbox, mock, Some(&token), &[]),
            Some(&token),
        )
        .await
    }

    pub fn url(&self) -> String {
        format!("ws://{}/", self.addr)
    }

    /// An operator with every scope (none asked for) and the
    /// `tool-events` cap.
    pub async fn admin(&self) -> Client {
        self.operator(&[], &["tool-events"]).await
    }

    /// An operator that asked for `scopes` and `caps`, connected with the
    /// gateway's token; panics unless `hello-ok` came back.
    pub async fn operator(&self, scopes: &[&str], caps: &[&str]) -> Client {
        let mut client = Client::open(self.addr).await;
        let params = connect_params(self.token.as_deref(), scopes, caps);
        client.connect_ok(params).await;
        client
    }

    /// Kills the process and returns everything it wrote to stderr.
    pub async fn stop(mut self) -> String {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(TIMEOUT, self.child.wait()).await;
        let _ = self.stderr.wait_line(TIMEOUT, |_| None::<()>).await;
        self.stderr.text()
    }
}

/// Reads the child's stderr into a [`StderrLog`] as it comes.
pub fn spawn_stderr_reader(child: &mut Child) -> StderrLog {
    let log = StderrLog::default();
    let stderr = child.stderr.take().unwrap();
    let writer = log.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut text = writer.text.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
            drop(text);
            writer.changed.notify_waiters();
        }
        *writer.ended.lock().unwrap() = true;
        writer.changed.notify_waiters();
    });
    log
}

/// `connect` params as OpenClaw's bridge sends them (protocol 4, role
/// operator), with `token` as `auth.token` when given.
pub fn connect_params(token: Option<&str>, scopes: &[&str], caps: &[&str]) -> Value {
    let mut params = json!({
        "minProtocol": 4,
        "maxProtocol": 4,
        "client": {"id": "test", "displayName": "pincer tests", "version": "0", "platform": "linux", "mode": "test"},
        "caps": caps,
        "role": "operator",
        "scopes": scopes,
    });
    if let Some(token) = token {
        params["auth"] = json!({"token": token});
    }
    params
}

/// What a read from the socket gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A JSON text frame.
    Json(Value),
    /// A text frame that is not JSON.
    Text(String),
    /// A binary frame.
    Binary(Vec<u8>),
    /// A close frame: code and reason.
    Close(Option<(u16, String)>),
    /// The connection ended without a close frame (or with an error).
    Ended(String),
}

/// A websocket client of the gateway.
pub struct Client {
    ws: WebSocketStream<TcpStream>,
    /// Frames read but not yet consumed (responses and events).
    backlog: VecDeque<Value>,
    /// Every event received, in order (the challenge included).
    pub events: Vec<Value>,
    /// Every JSON frame received, in order.
    pub received: Vec<Value>,
    /// How the connection ended, once it has.
    pub closed: Option<Frame>,
    pub challenge: Value,
    pub hello: Value,
    next_id: u64,
}

/// Why an upgrade failed: the HTTP status, or the error text.
#[derive(Debug)]
pub enum Refused {
    Http(u16),
    Other(String),
}

impl Client {
    /// Opens a websocket from 127.0.0.1 and reads the `connect.challenge`.
    pub async fn open(addr: SocketAddr) -> Self {
        Self::open_with(addr, Ipv4Addr::LOCALHOST, "/", &[])
            .await
            .unwrap_or_else(|e| panic!("the websocket upgrade failed: {e:?}"))
    }

    /// Opens a websocket from `from` (a loopback address) to `path` with
    /// extra request `headers`, and reads the challenge. An upgrade that
    /// fails is returned as [`Refused`].
    pub async fn open_with(
        addr: SocketAddr,
        from: Ipv4Addr,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<Self, Refused> {
        let mut client = Self::upgrade(addr, from, path, headers, None).await?;
        let challenge = client.next_frame().await;
        let Frame::Json(challenge) = challenge else {
            panic!("the first frame was not the challenge: {challenge:?}");
        };
        assert_eq!(
            challenge["event"], "connect.challenge",
            "first frame: {challenge}"
        );
        client.challenge = challenge;
        Ok(client)
    }

    /// Only the websocket upgrade (no frame read), with a small receive
    /// buffer when `recv_buffer` is given.
    pub async fn upgrade(
        addr: SocketAddr,
        from: Ipv4Addr,
        path: &str,
        headers: &[(&str, &str)],
        recv_buffer: Option<u32>,
    ) -> Result<Self, Refused> {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(IpAddr::V4(from), 0)).unwrap();
        if let Some(size) = recv_buffer {
            socket.set_recv_buffer_size(size).unwrap();
        }
        let stream = tokio::time::timeout(TIMEOUT, socket.connect(addr))
            .await
            .expect("TCP connect timed out")
            .map_err(|e| Refused::Other(format!("TCP connect: {e}")))?;
        let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
        for (name, value) in headers {
            request.headers_mut().insert(
                tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        // No client-side cap on what the server sends: the tests check the
        // server's limits, not tungstenite's.
        let config = WebSocketConfig::default()
            .max_message_size(None)
            .max_frame_size(None);
        let upgraded = tokio::time::timeout(
            TIMEOUT,
            tokio_tungstenite::client_async_with_config(request, stream, Some(config)),
        )
        .await
        .expect("the websocket upgrade timed out");
        match upgraded {
            Ok((ws, _response)) => Ok(Self {
                ws,
                backlog: VecDeque::new(),
                events: Vec::new(),
                received: Vec::new(),
                closed: None,
                challenge: Value::Null,
                hello: Value::Null,
                next_id: 0,
            }),
            Err(tungstenite::Error::Http(response)) => {
                Err(Refused::Http(response.status().as_u16()))
            }
            Err(e) => Err(Refused::Other(e.to_string())),
        }
    }

    /// Sends `params` as the `connect` request and returns its `res`.
    pub async fn connect(&mut self, params: Value) -> Value {
        self.call("connect", params).await
    }

    /// Connects and asserts `hello-ok`; returns its payload.
    pub async fn connect_ok(&mut self, params: Value) -> Value {
        let res = self.connect(params).await;
        assert_eq!(res["ok"], json!(true), "connect failed: {res}");
        assert_eq!(res["payload"]["type"], "hello-ok", "{res}");
        self.hello = res["payload"].clone();
        self.hello.clone()
    }

    pub async fn send_json(&mut self, frame: &Value) {
        self.send_message(Message::text(frame.to_string())).await;
    }

    pub async fn send_text(&mut self, text: &str) {
        self.send_message(Message::text(text.to_string())).await;
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.send_message(Message::binary(bytes)).await;
    }

    /// Sends a message; a connection the server already closed is not an
    /// error here (the test reads the close next).
    pub async fn send_message(&mut self, message: Message) {
        let _ = tokio::time::timeout(TIMEOUT, self.ws.send(message))
            .await
            .expect("sending a frame timed out");
    }

    /// Writes bytes to the TCP stream under the websocket as they are: for
    /// frames tungstenite would never send (a header announcing more than
    /// follows).
    pub async fn write_raw(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        let stream = self.ws.get_mut();
        let _ = tokio::time::timeout(TIMEOUT, stream.write_all(bytes)).await;
        let _ = stream.flush().await;
    }

    /// Sends a request and returns its id.
    pub async fn request(&mut self, method: &str, params: Value) -> String {
        self.next_id += 1;
        let id = format!("{}:{}", self.next_id, uuid::Uuid::new_v4());
        self.send_json(&json!({"type": "req", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next frame from the socket within `TIMEOUT` (not the backlog).
    pub async fn next_frame(&mut self) -> Frame {
        self.next_frame_within(TIMEOUT)
            .await
            .unwrap_or_else(|| panic!("no frame from the gateway within {TIMEOUT:?}"))
    }

    /// The next frame from the socket, or `None` after `timeout`.
    pub async fn next_frame_within(&mut self, timeout: Duration) -> Option<Frame> {
        if let Some(closed) = &self.closed {
            return Some(closed.clone());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let read = tokio::time::timeout_at(deadline, self.ws.next())
                .await
                .ok()?;
            let frame = match read {
                None => Frame::Ended("the stream ended".to_string()),
                Some(Err(e)) => Frame::Ended(e.to_string()),
                Some(Ok(Message::Text(text))) => match serde_json::from_str::<Value>(&text) {
                    Ok(value) => {
                        self.received.push(value.clone());
                        if value["type"] == "event" {
                            self.events.push(value.clone());
                        }
                        Frame::Json(value)
                    }
                    Err(_) => Frame::Text(text.to_string()),
                },
                Some(Ok(Message::Binary(bytes))) => Frame::Binary(bytes.to_vec()),
                Some(Ok(Message::Close(close))) => {
                    Frame::Close(close.map(|c| (u16::from(c.code), c.reason.to_string())))
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
            };
            if matches!(frame, Frame::Close(_) | Frame::Ended(_)) {
                self.closed = Some(frame.clone());
            }
            return Some(frame);
        }
    }

    /// The next JSON frame before `deadline`; panics on a close, anything
    /// else, or the deadline (one deadline for a whole wait, so that ticks
    /// and other events cannot stretch it).
    async fn next_json(&mut self, waiting_for: &str, deadline: tokio::time::Instant) -> Value {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match self.next_frame_within(left).await {
            Some(Frame::Json(value)) => value,
            None => panic!(
                "no {waiting_for} within {TIMEOUT:?}; received: {}",
                shown(&self.received)
            ),
            Some(other) => panic!(
                "while waiting for {waiting_for}: {other:?}; received before: {}",
                shown(&self.received)
            ),
        }
    }

    /// The `res` with `id`; other frames stay in the backlog.
    pub async fn response(&mut self, id: &str) -> Value {
        if let Some(pos) = self
            .backlog
            .iter()
            .position(|f| f["type"] == "res" && f["id"] == id)
        {
            return self.backlog.remove(pos).unwrap();
        }
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let frame = self
                .next_json(&format!("the response to {id}"), deadline)
                .await;
            if frame["type"] == "res" && frame["id"] == id {
                return frame;
            }
            self.backlog.push_back(frame);
        }
    }

    /// Sends a request and returns its whole `res` frame.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(&id).await
    }

    /// Sends a request and returns its payload; panics unless `ok`.
    pub async fn call_ok(&mut self, method: &str, params: Value) -> Value {
        let res = self.call(method, params).await;
        assert_eq!(res["ok"], json!(true), "{method} failed: {res}");
        res["payload"].clone()
    }

    /// The first unconsumed frame that satisfies `pred` (whole frame).
    pub async fn next_where(&mut self, what: &str, mut pred: impl FnMut(&Value) -> bool) -> Value {
        if let Some(pos) = self.backlog.iter().position(&mut pred) {
            return self.backlog.remove(pos).unwrap();
        }
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let frame = self.next_json(what, deadline).await;
            if pred(&frame) {
                return frame;
            }
            self.backlog.push_back(frame);
        }
    }

    /// The next unconsumed event called `name` (whole frame).
    pub async fn next_event(&mut self, name: &str) -> Value {
        self.next_where(&format!("a {name} event"), |f| {
            f["type"] == "event" && f["event"] == name
        })
        .await
    }

    /// The `chat` event with `state` for `run_id` (whole frame).
    pub async fn chat_state(&mut self, run_id: &str, state: &str) -> Value {
        self.next_where(&format!("chat {state} of {run_id}"), |f| {
            f["event"] == "chat"
                && f["payload"]["runId"] == run_id
                && f["payload"]["state"] == state
        })
        .await
    }

    /// Reads until the run's `chat` event is terminal (`final`, `aborted`,
    /// `error`); returns it.
    pub async fn chat_end(&mut self, run_id: &str) -> Value {
        self.next_where(&format!("the end of run {run_id}"), |f| {
            f["event"] == "chat"
                && f["payload"]["runId"] == run_id
                && matches!(
                    f["payload"]["state"].as_str(),
                    Some("final" | "aborted" | "error")
                )
        })
        .await
    }

    /// Every event received so far called `name`, payloads only.
    pub fn payloads_of(&self, name: &str) -> Vec<Value> {
        self.events
            .iter()
            .filter(|e| e["event"] == name)
            .map(|e| e["payload"].clone())
            .collect()
    }

    /// Reads until the connection ends (within `TIMEOUT` in all);
    /// returns the close (or end) and every JSON frame before it.
    pub async fn until_closed(&mut self) -> (Frame, Vec<Value>) {
        let mut before: Vec<Value> = self.backlog.drain(..).collect();
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let frame = self.next_frame_within(left).await.unwrap_or_else(|| {
                panic!("the gateway did not close the connection within {TIMEOUT:?}")
            });
            match frame {
                Frame::Json(value) => before.push(value),
                frame @ (Frame::Close(_) | Frame::Ended(_)) => return (frame, before),
                _ => {}
            }
        }
    }

    /// Sends `chat.send` and returns the run id it answered.
    pub async fn chat_send(&mut self, key: &str, message: &str) -> String {
        let run = uuid::Uuid::new_v4().to_string();
        let payload = self
            .call_ok(
                "chat.send",
                json!({"sessionKey": key, "message": message, "idempotencyKey": run}),
            )
            .await;
        assert_eq!(payload, json!({"runId": run, "status": "started"}));
        run
    }
}

/// A unique session key, as the bridge makes them.
pub fn new_key() -> String {
    format!("acp-bridge:{}", uuid::Uuid::new_v4())
}

/// The close code and reason of a [`Frame::Close`]; panics otherwise.
pub fn close_of(frame: &Frame) -> (u16, String) {
    match frame {
        Frame::Close(Some((code, reason))) => (*code, reason.clone()),
        other => panic!("expected a close frame, got {other:?}"),
    }
}

/// Frames for a failure message, each cut to 400 characters, the last 30.
fn shown(frames: &[Value]) -> String {
    frames
        .iter()
        .rev()
        .take(30)
        .rev()
        .map(|f| f.to_string().chars().take(400).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `pincer acp --gateway` on a free loopback port, with the mock model and
/// `token`; returns the editor's connection and the gateway's address.
pub async fn acp_with_gateway(
    sandbox: &Sandbox,
    mock: &MockModel,
    token: &str,
) -> (super::acp_client::Acp, std::net::SocketAddr) {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    let gateway_arg = format!("--gateway={addr}");
    let mut cmd = sandbox.command(&["acp", &gateway_arg]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("PINCER_GATEWAY_TOKEN", token);
    let acp = super::acp_client::Acp::spawn(cmd);
    // Listening once a websocket opens.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        match Client::open_with(addr, std::net::Ipv4Addr::LOCALHOST, "/", &[]).await {
            Ok(_) => break,
            Err(e) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "pincer acp --gateway never listened on {addr}: {e:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    (acp, addr)
}
