//! A mock OpenClaw gateway (release 2026.9.6, protocol 4) for testing
//! `pincer acp --connect` against OpenClaw rather than against pincer's own
//! gateway. It is a real websocket server on 127.0.0.1 that speaks the frames
//! `../shared/GATEWAY-NOTES.md` records from the real gateway and its bridge:
//! `connect.challenge` on open, the `connect` check and OpenClaw's refusal
//! (§3), `hello-ok`, `tick` events and a per-connection event `seq` (§2, §3),
//! the methods the bridge uses with their result and error shapes (§5, §8).
//!
//! Each `chat.send` is answered `{runId, status:"started"}` and then plays
//! the next queued [`Script`]: recorded event frames from
//! `fixtures/openclaw-gateway/NAME.jsonl` (OpenClaw's shapes, §6) with
//! `$RUN` and `$KEY` replaced by the run id and the session key, and control
//! lines that make the gateway wait for the client or drop every connection.
//! Runs are the gateway's, not a connection's: a run goes on while no client
//! is connected, and events sent then are lost, as on the real gateway.
//!
//! The mock records every request (also `connect`) for assertions. Nothing in
//! it knows pincer: a bridge that passes against it handles what OpenClaw's
//! gateway sends.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::acp_client::TIMEOUT;

/// The release the mock claims in `hello-ok` (`server.version`).
pub const OPENCLAW_VERSION: &str = "2026.9.6";

/// The protocol version OpenClaw 2026.9.6 serves to operators (§1).
const PROTOCOL: u64 = 4;

/// A fixed clock for rows and history the mock makes itself, so that tests
/// can compare whole values (2026-11-24T07:14:34.767Z).
pub const MOCK_NOW_MS: u64 = 1_795_504_474_767;

/// The methods the mock serves, as `hello-ok.features.methods` lists them.
const METHODS: &[&str] = &[
    "sessions.list",
    "sessions.resolve",
    "sessions.reset",
    "sessions.get",
    "sessions.patch",
    "chat.history",
    "chat.send",
    "chat.abort",
    "agent.wait",
    "exec.approval.get",
    "exec.approval.resolve",
    "models.list",
];

/// One request the gateway received.
#[derive(Clone, Debug)]
pub struct Request {
    /// Which connection sent it (1 for the first accepted socket; 0 for the
    /// `chat.send` of another client, [`OpenClawGateway::run_elsewhere`]).
    pub connection: usize,
    pub method: String,
    pub params: Value,
}

/// One step of a script.
#[derive(Clone, Debug)]
pub enum Step {
    /// An event frame (`{"type":"event","event":…,"payload":…}`), sent to
    /// every connected client with that connection's next `seq`.
    Event(Value),
    /// Waits until the gateway has received this method for the run: a
    /// `chat.abort` of the run (or of its session without a run id), an
    /// `exec.approval.resolve` of the approval the script last requested,
    /// else any request of that method since the run started.
    WaitFor(String),
    /// Closes every connection without a close frame (a network drop); the
    /// run goes on.
    Drop,
    /// Waits until a client has completed a handshake after the last drop.
    WaitReconnect,
}

/// What the gateway plays for one `chat.send`.
#[derive(Clone, Debug, Default)]
pub struct Script {
    pub steps: Vec<Step>,
}

impl Script {
    /// Reads `fixtures/openclaw-gateway/NAME.jsonl`. One JSON value a line:
    /// an event frame in OpenClaw's shape (without the per-connection `seq`,
    /// which the mock adds), or a control line: `{"mock":"wait","for":METHOD}`,
    /// `{"mock":"wait","for":"reconnect"}`, `{"mock":"drop"}`. Blank lines
    /// and lines starting with `//` (where a fixture cites its source) are
    /// skipped.
    pub fn fixture(name: &str) -> Self {
        let path = fixture_dir().join(format!("{name}.jsonl"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let steps = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with("//"))
            .map(|line| {
                let value: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{}: bad line {line}: {e}", path.display()));
                Step::parse(value)
            })
            .collect();
        Self { steps }
    }
}

impl Step {
    fn parse(value: Value) -> Self {
        match (value["mock"].as_str(), value["for"].as_str()) {
            (None, _) => {
                assert_eq!(value["type"], "event", "a script line is an event: {value}");
                Step::Event(value)
            }
            (Some("drop"), _) => Step::Drop,
            (Some("wait"), Some("reconnect")) => Step::WaitReconnect,
            (Some("wait"), Some(method)) => Step::WaitFor(method.to_string()),
            _ => panic!("unknown control line {value}"),
        }
    }
}

/// `fixtures/openclaw-gateway/`.
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/openclaw-gateway")
}

/// What a connection's task is told to send.
enum Out {
    Event(Value),
    /// Close the socket without a close frame, after what is queued.
    Drop,
}

struct Conn {
    id: usize,
    tx: mpsc::UnboundedSender<Out>,
}

/// A run the gateway started for a `chat.send`.
struct Run {
    session_key: String,
    /// The last per-run `seq` of its `chat` events.
    chat_seq: u64,
    /// What `agent.wait` answers once the run has ended.
    outcome: Option<Value>,
    /// Whether its script waits for `chat.abort` (else the mock ends the run
    /// itself on an abort).
    script_waits_for_abort: bool,
    /// Its script, until the run starts playing it.
    script: Option<Script>,
    /// The index of its `chat.send` in the request log: a wait of its
    /// script looks at requests from there on.
    first_request: usize,
    task: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    conns: Vec<Conn>,
    next_conn: usize,
    /// Completed handshakes.
    hellos: usize,
    /// While set, a `connect` waits for its answer (a slow gateway).
    hold_hellos: bool,
    scripts: VecDeque<Script>,
    runs: HashMap<String, Run>,
    /// `sessions.list` rows, in the order they are listed.
    rows: Vec<Value>,
    /// `chat.history` / `sessions.get` messages per session key.
    history: HashMap<String, Vec<Value>>,
    /// Pending approvals: the `exec.approval.requested` payload by id.
    approvals: HashMap<String, Value>,
    models: Vec<Value>,
    /// `hello-ok`'s `server.bootId`: a new one after [`OpenClawGateway::restart`].
    boot_id: String,
}

struct Shared {
    token: String,
    tick_interval_ms: u64,
    state: Mutex<State>,
    /// Bumped on every change of `state`, for waits without polling.
    version: watch::Sender<u64>,
}

impl Shared {
    fn change<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let out = f(&mut self.state.lock().unwrap());
        self.version.send_modify(|v| *v += 1);
        out
    }

    /// Waits, without a deadline, until `done` holds.
    async fn until(&self, mut done: impl FnMut(&State) -> bool) {
        let mut seen = self.version.subscribe();
        loop {
            if done(&self.state.lock().unwrap()) {
                return;
            }
            if seen.changed().await.is_err() {
                return;
            }
        }
    }

    fn broadcast(&self, frame: Value) {
        let state = self.state.lock().unwrap();
        for conn in &state.conns {
            let _ = conn.tx.send(Out::Event(frame.clone()));
        }
    }

    fn drop_connections(&self) {
        self.change(|state| {
            for conn in state.conns.drain(..) {
                let _ = conn.tx.send(Out::Drop);
            }
        });
    }
}

/// A running mock OpenClaw gateway; it stops when dropped.
pub struct OpenClawGateway {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for OpenClawGateway {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.drop_connections();
        for run in self.shared.state.lock().unwrap().runs.values_mut() {
            if let Some(task) = run.task.take() {
                task.abort();
            }
        }
    }
}

impl OpenClawGateway {
    /// Listens on 127.0.0.1 (a free port), accepting `token`, promising
    /// ticks every `tick_interval_ms` in `hello-ok` (and sending one every
    /// half of it, as a live gateway keeps well inside the window).
    pub async fn start(token: &str, tick_interval_ms: u64) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = State {
            models: default_models(),
            boot_id: uuid::Uuid::new_v4().to_string(),
            ..State::default()
        };
        let shared = Arc::new(Shared {
            token: token.to_string(),
            tick_interval_ms,
            state: Mutex::new(state),
            version: watch::channel(0).0,
        });
        let accepting = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let id = accepting.change(|state| {
                    state.next_conn += 1;
                    state.next_conn
                });
                tokio::spawn(serve(accepting.clone(), id, socket));
            }
        });
        Self { addr, shared, task }
    }

    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Queues the script the next `chat.send` plays.
    pub fn queue(&self, script: Script) {
        self.shared.change(|state| state.scripts.push_back(script));
    }

    /// Starts a run of `key` as another client would (a chat channel, the
    /// Control UI): no request from the bridge, just the script's events.
    /// Returns its run id.
    pub fn run_elsewhere(&self, key: &str, script: Script) -> String {
        let run_id = uuid::Uuid::new_v4().to_string();
        let params =
            json!({"sessionKey": key, "message": "from elsewhere", "idempotencyKey": run_id});
        self.shared.change(|state| {
            // Recorded as the other client's request (connection 0), so that
            // the run's waits start from it.
            state.requests.push(Request {
                connection: 0,
                method: "chat.send".to_string(),
                params: params.clone(),
            });
            begin_run(state, &params, script);
        });
        start_run(&self.shared, &params);
        run_id
    }

    /// Adds a `sessions.list` row (OpenClaw's row shape, §5).
    pub fn add_session(&self, row: Value) {
        self.shared.change(|state| state.rows.push(row));
    }

    /// Sets the transcript `chat.history` and `sessions.get` return for `key`.
    pub fn set_history(&self, key: &str, messages: Vec<Value>) {
        self.shared
            .change(|state| state.history.insert(key.to_string(), messages));
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// The params of every request of `method`, in order.
    pub fn params_of(&self, method: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method)
            .map(|r| r.params)
            .collect()
    }

    /// Waits (up to [`TIMEOUT`]) until `count` requests of `method` have
    /// arrived; returns their params.
    pub async fn wait_requests(&self, method: &str, count: usize) -> Vec<Value> {
        let waited = tokio::time::timeout(
            TIMEOUT,
            self.shared.until(|state| {
                state.requests.iter().filter(|r| r.method == method).count() >= count
            }),
        )
        .await;
        let got = self.params_of(method);
        assert!(
            waited.is_ok(),
            "the OpenClaw mock did not receive {count} × {method} within {TIMEOUT:?}; requests: {:?}",
            self.requests()
                .iter()
                .map(|r| r.method.as_str())
                .collect::<Vec<_>>()
        );
        got
    }

    /// Completed handshakes so far.
    pub fn hellos(&self) -> usize {
        self.shared.state.lock().unwrap().hellos
    }

    /// While `hold` is set, every `connect` waits for its answer, as on a
    /// slow gateway; clearing it lets the held ones through.
    pub fn hold_hellos(&self, hold: bool) {
        self.shared.change(|state| state.hold_hellos = hold);
    }

    /// Closes every connection without a close frame (a network drop).
    pub fn drop_connections(&self) {
        self.shared.drop_connections();
    }

    /// Plays a gateway process that restarted at the same address: its
    /// runs are gone (`agent.wait` answers `timeout` for a run it never
    /// heard of, as for one still going), its `bootId` is new, and every
    /// client is cut off.
    pub fn restart(&self) {
        self.shared.change(|state| {
            for run in state.runs.values_mut() {
                if let Some(task) = run.task.take() {
                    task.abort();
                }
            }
            state.runs.clear();
            state.boot_id = uuid::Uuid::new_v4().to_string();
        });
        self.shared.drop_connections();
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn default_models() -> Vec<Value> {
    vec![
        json!({"id": "claude-sonnet-4-6", "name": "Claude Sonnet 4.6", "provider": "anthropic", "contextWindow": 200000, "reasoning": true}),
        json!({"id": "gpt-5.2", "name": "GPT-5.2", "provider": "openai", "contextWindow": 400000, "reasoning": true}),
    ]
}

fn text_frame(value: &Value) -> Message {
    Message::text(value.to_string())
}

fn res_ok(id: &Value, payload: Value) -> Value {
    json!({"type": "res", "id": id, "ok": true, "payload": payload})
}

/// An OpenClaw error response (`ErrorShape`, §3).
fn res_err(id: &Value, code: &str, message: &str, details: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(details) = details {
        error["details"] = details;
    }
    json!({"type": "res", "id": id, "ok": false, "error": error})
}

async fn close_with(ws: &mut WebSocketStream<TcpStream>, code: CloseCode, reason: &str) {
    let frame = CloseFrame {
        code,
        reason: reason.to_string().into(),
    };
    let _ = ws.send(Message::Close(Some(frame))).await;
}

/// Reads the next JSON text frame; `None` when the socket ends.
async fn next_json(ws: &mut WebSocketStream<TcpStream>) -> Option<Value> {
    loop {
        match ws.next().await? {
            Ok(Message::Text(text)) => {
                if let Ok(value) = serde_json::from_str(&text) {
                    return Some(value);
                }
            }
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// One connection: the handshake (§3), then requests, events and ticks.
async fn serve(shared: Arc<Shared>, id: usize, socket: TcpStream) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(socket).await else {
        return;
    };
    let challenge = json!({"type": "event", "event": "connect.challenge",
        "payload": {"nonce": uuid::Uuid::new_v4().to_string(), "ts": now_ms()}});
    if ws.send(text_frame(&challenge)).await.is_err() {
        return;
    }
    let Some(connect) = next_json(&mut ws).await else {
        return;
    };
    let req_id = connect["id"].clone();
    let params = connect["params"].clone();
    shared.change(|state| {
        state.requests.push(Request {
            connection: id,
            method: connect["method"].as_str().unwrap_or_default().to_string(),
            params: params.clone(),
        })
    });
    shared.until(|state| !state.hold_hellos).await;
    if connect["type"] != "req" || connect["method"] != "connect" {
        let refusal = res_err(
            &req_id,
            "INVALID_REQUEST",
            "invalid handshake: first request must be connect",
            None,
        );
        let _ = ws.send(text_frame(&refusal)).await;
        close_with(&mut ws, CloseCode::Policy, "invalid-handshake").await;
        return;
    }
    let (min, max) = (
        params["minProtocol"].as_u64().unwrap_or(0),
        params["maxProtocol"].as_u64().unwrap_or(0),
    );
    if !(min <= PROTOCOL && PROTOCOL <= max) {
        let details = json!({"code": "PROTOCOL_MISMATCH", "clientMinProtocol": min,
            "clientMaxProtocol": max, "expectedProtocol": 4, "minimumProbeProtocol": 3});
        let refusal = res_err(
            &req_id,
            "INVALID_REQUEST",
            "protocol mismatch",
            Some(details),
        );
        let _ = ws.send(text_frame(&refusal)).await;
        close_with(&mut ws, CloseCode::Protocol, "protocol mismatch").await;
        return;
    }
    let refusal = match params["auth"]["token"].as_str() {
        Some(token) if token == shared.token => None,
        Some(_) => Some((
            "unauthorized: gateway token mismatch (set gateway.remote.token to match gateway.auth.token)",
            json!({"code": "AUTH_TOKEN_MISMATCH", "authReason": "token_mismatch"}),
        )),
        None => Some((
            "unauthorized: gateway token missing (set gateway.remote.token to match gateway.auth.token)",
            json!({"code": "AUTH_TOKEN_MISSING", "authReason": "token_missing"}),
        )),
    };
    if let Some((message, details)) = refusal {
        let refusal = res_err(&req_id, "INVALID_REQUEST", message, Some(details));
        let _ = ws.send(text_frame(&refusal)).await;
        close_with(&mut ws, CloseCode::Policy, "unauthorized").await;
        return;
    }
    let boot_id = shared.state.lock().unwrap().boot_id.clone();
    let hello = hello_ok(shared.tick_interval_ms, &boot_id);
    if ws.send(text_frame(&res_ok(&req_id, hello))).await.is_err() {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    shared.change(|state| {
        state.hellos += 1;
        state.conns.push(Conn { id, tx });
    });

    let mut seq: u64 = 0;
    let half = Duration::from_millis((shared.tick_interval_ms / 2).max(1));
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + half, half);
    loop {
        let event = tokio::select! {
            frame = next_json(&mut ws) => {
                let Some(frame) = frame else { break };
                if frame["type"] != "req" {
                    continue;
                }
                let response = handle(&shared, id, &frame);
                if ws.send(text_frame(&response)).await.is_err() {
                    break;
                }
                // A run starts after its `started` answer is on the wire.
                if frame["method"] == "chat.send" && response["payload"]["status"] == "started" {
                    start_run(&shared, &frame["params"]);
                }
                continue;
            }
            out = rx.recv() => match out {
                Some(Out::Event(frame)) => frame,
                Some(Out::Drop) | None => break,
            },
            _ = ticks.tick() => json!({"type": "event", "event": "tick", "payload": {"ts": now_ms()}}),
        };
        seq += 1;
        let mut event = event;
        event["seq"] = json!(seq);
        if ws.send(text_frame(&event)).await.is_err() {
            break;
        }
    }
    shared.change(|state| state.conns.retain(|c| c.id != id));
}

/// `hello-ok` in the full shape of `HelloOkSchema` (§3), as OpenClaw
/// 2026.9.6 sends it: nothing in it names pincer.
fn hello_ok(tick_interval_ms: u64, boot_id: &str) -> Value {
    json!({
        "type": "hello-ok",
        "protocol": PROTOCOL,
        "server": {"version": OPENCLAW_VERSION, "connId": uuid::Uuid::new_v4().to_string(), "bootId": boot_id},
        "features": {
            "methods": METHODS,
            "events": ["chat", "agent", "tick", "presence", "sessions.changed",
                       "exec.approval.requested", "exec.approval.resolved", "shutdown"],
        },
        "snapshot": {
            "presence": [],
            "health": {},
            "stateVersion": {"presence": 0, "health": 0},
            "uptimeMs": 1234,
            "sessionDefaults": {"defaultAgentId": "main", "mainKey": "main", "mainSessionKey": "agent:main:main"},
            "authMode": "token",
        },
        "auth": {"role": "operator", "scopes": ["operator.admin"], "method": "token"},
        "policy": {"maxPayload": 26_214_400, "maxBufferedBytes": 52_428_800, "tickIntervalMs": tick_interval_ms},
    })
}

fn invalid(id: &Value, message: String) -> Value {
    res_err(id, "INVALID_REQUEST", &message, None)
}

/// Answers one request (after the handshake) and records it.
fn handle(shared: &Shared, conn: usize, frame: &Value) -> Value {
    let id = &frame["id"];
    let method = frame["method"].as_str().unwrap_or_default();
    let params = frame.get("params").cloned().unwrap_or(json!({}));
    shared.change(|state| {
        state.requests.push(Request {
            connection: conn,
            method: method.to_string(),
            params: params.clone(),
        });
        // The real server validates params with closed schemas (§5); the mock
        // checks the required fields, enough to catch a malformed request.
        let required: &[&str] = match method {
            "chat.send" => &["sessionKey", "message", "idempotencyKey"],
            "chat.abort" | "chat.history" => &["sessionKey"],
            "sessions.reset" | "sessions.get" | "sessions.patch" => &["key"],
            "agent.wait" => &["runId"],
            "exec.approval.get" => &["id"],
            "exec.approval.resolve" => &["id", "decision"],
            _ => &[],
        };
        if let Some(missing) = required.iter().find(|k| params.get(**k).is_none()) {
            return invalid(
                id,
                format!("invalid {method} params: must have required property '{missing}'"),
            );
        }
        match method {
            "sessions.list" => sessions_list(state, id, &params),
            "sessions.resolve" => sessions_resolve(state, id, &params),
            "sessions.reset" => {
                let key = params["key"].as_str().unwrap_or_default();
                state.history.remove(key);
                res_ok(id, json!({"ok": true, "key": key}))
            }
            "sessions.get" => {
                let key = params["key"].as_str().unwrap_or_default();
                let messages = state.history.get(key).cloned().unwrap_or_default();
                res_ok(id, json!({"messages": messages}))
            }
            "chat.history" => chat_history(state, id, &params),
            "sessions.patch" => sessions_patch(state, id, &params),
            "chat.send" => chat_send(state, id, &params),
            "chat.abort" => chat_abort(state, id, &params),
            "agent.wait" => {
                let run = params["runId"].as_str().unwrap_or_default();
                let outcome = state.runs.get(run).and_then(|r| r.outcome.clone());
                res_ok(id, outcome.unwrap_or(json!({"status": "timeout"})))
            }
            "exec.approval.get" => {
                let approval = params["id"].as_str().unwrap_or_default();
                match state.approvals.get(approval) {
                    Some(requested) => res_ok(id, approval_record(requested)),
                    None => approval_not_found(id),
                }
            }
            "exec.approval.resolve" => {
                let approval = params["id"].as_str().unwrap_or_default();
                let decision = params["decision"].as_str().unwrap_or_default();
                if !["allow-once", "allow-always", "deny"].contains(&decision) {
                    return invalid(id, format!("invalid decision: {decision}"));
                }
                match state.approvals.remove(approval) {
                    Some(_) => res_ok(id, json!({"ok": true})),
                    None => approval_not_found(id),
                }
            }
            "models.list" => res_ok(id, json!({"models": state.models})),
            _ => invalid(id, format!("unknown method: {method}")),
        }
    })
}

fn approval_not_found(id: &Value) -> Value {
    res_err(
        id,
        "APPROVAL_NOT_FOUND",
        "unknown or expired approval id",
        None,
    )
}

/// `exec.approval.get`'s answer for a requested approval (§5).
fn approval_record(requested: &Value) -> Value {
    let request = &requested["request"];
    let command = request["command"]
        .as_str()
        .or(request["commandPreview"].as_str())
        .unwrap_or_default();
    json!({
        "id": requested["id"],
        "commandText": command,
        "commandPreview": command,
        "allowedDecisions": ["allow-once", "allow-always", "deny"],
        "host": request["host"],
        "nodeId": null,
        "agentId": request["agentId"],
        "expiresAtMs": requested["expiresAtMs"],
    })
}

fn row_matches(row: &Value, search: &str) -> bool {
    ["key", "derivedTitle", "displayName", "label"]
        .iter()
        .any(|field| row[*field].as_str().is_some_and(|v| v.contains(search)))
}

fn sessions_list(state: &State, id: &Value, params: &Value) -> Value {
    let search = params["search"].as_str().unwrap_or_default();
    let matching: Vec<&Value> = state
        .rows
        .iter()
        .filter(|row| row_matches(row, search))
        .collect();
    let offset = params["offset"].as_u64().unwrap_or(0) as usize;
    let limit = params["limit"].as_u64().unwrap_or(50) as usize;
    let page: Vec<Value> = matching
        .iter()
        .skip(offset)
        .take(limit)
        .map(|row| (*row).clone())
        .collect();
    let has_more = offset + page.len() < matching.len();
    res_ok(
        id,
        json!({"ts": MOCK_NOW_MS, "count": page.len(), "sessions": page, "hasMore": has_more}),
    )
}

/// `sessions.resolve` (§5) by key or label. An unknown one is an error: the
/// exact wording of OpenClaw's is not recorded in the notes.
fn sessions_resolve(state: &State, id: &Value, params: &Value) -> Value {
    let found = state.rows.iter().find(|row| {
        (params["key"].is_string() && row["key"] == params["key"])
            || (params["label"].is_string() && row["label"] == params["label"])
    });
    match found {
        Some(row) => res_ok(
            id,
            json!({"ok": true, "key": row["key"], "agentId": "main", "displayName": row["displayName"]}),
        ),
        None => {
            let asked = params["key"]
                .as_str()
                .or(params["label"].as_str())
                .unwrap_or_default();
            invalid(id, format!("No session found: {asked}"))
        }
    }
}

fn chat_history(state: &State, id: &Value, params: &Value) -> Value {
    let key = params["sessionKey"].as_str().unwrap_or_default();
    let limit = params["limit"].as_u64().unwrap_or(200) as usize;
    if limit > 1000 {
        return invalid(
            id,
            "invalid chat.history params: limit must be <= 1000".to_string(),
        );
    }
    let messages = state.history.get(key).cloned().unwrap_or_default();
    let skip = messages.len().saturating_sub(limit);
    let messages: Vec<Value> = messages.into_iter().skip(skip).collect();
    res_ok(id, json!({"sessionKey": key, "messages": messages}))
}

fn sessions_patch(state: &mut State, id: &Value, params: &Value) -> Value {
    let key = params["key"].as_str().unwrap_or_default();
    let Some(row) = state.rows.iter_mut().find(|row| row["key"] == key) else {
        return res_ok(id, json!({"ok": true, "key": key}));
    };
    for (field, value) in params.as_object().into_iter().flatten() {
        if field != "key" {
            row[field] = value.clone();
        }
    }
    res_ok(id, json!({"ok": true, "key": key, "entry": row}))
}

/// `chat.send` (§5): a repeated idempotency key answers the run's state
/// (§4); a new one starts a run with the next queued script.
fn chat_send(state: &mut State, id: &Value, params: &Value) -> Value {
    let run_id = params["idempotencyKey"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some(run) = state.runs.get(&run_id) {
        let status = if run.outcome.is_some() {
            "ok"
        } else {
            "in_flight"
        };
        return res_ok(id, json!({"runId": run_id, "status": status}));
    }
    let Some(script) = state.scripts.pop_front() else {
        return res_err(
            id,
            "UNAVAILABLE",
            "the OpenClaw mock has no script queued for this chat.send",
            None,
        );
    };
    begin_run(state, params, script);
    res_ok(id, json!({"runId": run_id, "status": "started"}))
}

/// Makes the run of a `chat.send` (`params`) that will play `script`: the
/// session's row (the gateway creates a session on first use, §4), the
/// user's message in its transcript, and the run's record.
fn begin_run(state: &mut State, params: &Value, script: Script) {
    let run_id = params["idempotencyKey"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let key = params["sessionKey"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !state.rows.iter().any(|row| row["key"] == key.as_str()) {
        let title: String = params["message"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .take(60)
            .collect();
        state.rows.push(
            json!({"key": key, "kind": "direct", "updatedAt": MOCK_NOW_MS, "derivedTitle": title}),
        );
    }
    state.history.entry(key.clone()).or_default().push(json!({
        "role": "user",
        "content": [{"type": "text", "text": params["message"]}],
        "timestamp": MOCK_NOW_MS,
    }));
    let waits_for_abort = script
        .steps
        .iter()
        .any(|s| matches!(s, Step::WaitFor(m) if m == "chat.abort"));
    state.runs.insert(
        run_id.clone(),
        Run {
            session_key: key,
            chat_seq: 0,
            outcome: None,
            script_waits_for_abort: waits_for_abort,
            script: Some(script),
            first_request: state.requests.len() - 1,
            task: None,
        },
    );
}

/// `chat.abort {sessionKey, runId?}`: a script that waits for it goes on
/// (its next lines are the abort's events); any other running run of the
/// session ends with a `chat` `aborted` event from the mock.
fn chat_abort(state: &mut State, id: &Value, params: &Value) -> Value {
    let key = params["sessionKey"].as_str().unwrap_or_default();
    let asked = params["runId"].as_str();
    let mut aborted = Vec::new();
    for (run_id, run) in state.runs.iter_mut() {
        let ours = run.session_key == key && asked.is_none_or(|r| r == run_id);
        if !ours || run.outcome.is_some() {
            continue;
        }
        aborted.push(json!(run_id));
        if run.script_waits_for_abort {
            continue;
        }
        if let Some(task) = run.task.take() {
            task.abort();
        }
        run.chat_seq += 1;
        run.outcome = Some(json!({"status": "error", "error": "aborted"}));
        let frame = json!({"type": "event", "event": "chat", "payload": {
            "runId": run_id, "sessionKey": key, "seq": run.chat_seq, "state": "aborted", "stopReason": "aborted"}});
        for conn in &state.conns {
            let _ = conn.tx.send(Out::Event(frame.clone()));
        }
    }
    res_ok(
        id,
        json!({"ok": true, "aborted": !aborted.is_empty(), "runIds": aborted}),
    )
}

/// Replaces `$RUN` and `$KEY` in every string of `value`.
fn fill(value: &Value, run: &str, key: &str) -> Value {
    match value {
        Value::String(s) => Value::String(s.replace("$RUN", run).replace("$KEY", key)),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, run, key)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, run, key)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The text blocks of a chat `message`, joined as OpenClaw joins them.
fn message_text(message: &Value) -> String {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Starts playing the script `chat_send` queued for this run.
fn start_run(shared: &Arc<Shared>, params: &Value) {
    let run_id = params["idempotencyKey"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let key = params["sessionKey"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let script = shared.change(|state| {
        let run = state.runs.get_mut(&run_id)?;
        Some((run.script.take()?, run.first_request))
    });
    let Some((script, first_request)) = script else {
        return;
    };
    let player = shared.clone();
    let run = run_id.clone();
    let task = tokio::spawn(async move { play(player, script, first_request, run, key).await });
    shared.change(|state| {
        if let Some(r) = state.runs.get_mut(&run_id) {
            r.task = Some(task);
        }
    });
}

async fn play(shared: Arc<Shared>, script: Script, first_request: usize, run: String, key: String) {
    let mut approval: Option<String> = None;
    let mut hellos_at_drop = 0;
    for step in script.steps {
        match step {
            Step::Event(frame) => {
                let frame = fill(&frame, &run, &key);
                observe(&shared, &frame, &run, &mut approval);
                shared.broadcast(frame);
            }
            Step::WaitFor(method) => {
                let approval = approval.clone();
                shared
                    .until(|state| {
                        state.requests[first_request..].iter().any(|r| {
                            r.method == method
                                && match method.as_str() {
                                    "chat.abort" => {
                                        r.params["runId"] == run.as_str()
                                            || (r.params["runId"].is_null()
                                                && r.params["sessionKey"] == key.as_str())
                                    }
                                    "exec.approval.resolve" => {
                                        approval.as_deref().is_some_and(|a| r.params["id"] == a)
                                    }
                                    _ => true,
                                }
                        })
                    })
                    .await;
            }
            Step::Drop => {
                hellos_at_drop = shared.state.lock().unwrap().hellos;
                shared.drop_connections();
            }
            Step::WaitReconnect => {
                shared.until(|state| state.hellos > hellos_at_drop).await;
            }
        }
    }
}

/// Keeps what the gateway knows about a run from the events it sends: the
/// per-run chat `seq`, the outcome `agent.wait` reports, the final reply in
/// the transcript, and pending approvals.
fn observe(shared: &Shared, frame: &Value, run: &str, approval: &mut Option<String>) {
    let payload = &frame["payload"];
    if frame["event"] == "exec.approval.requested" {
        let id = payload["id"].as_str().unwrap_or_default().to_string();
        *approval = Some(id.clone());
        shared.change(|state| state.approvals.insert(id, payload.clone()));
        return;
    }
    // The legacy approval path (`agent` `stream:"approval"`, §6) is the
    // same pending approval, kept in the shape of the requested event.
    if frame["event"] == "agent" && payload["stream"] == "approval" {
        let data = &payload["data"];
        let id = data["approvalId"].as_str().unwrap_or_default().to_string();
        *approval = Some(id.clone());
        let requested = json!({"approvalKind": "exec", "id": id, "request": {
            "command": data["command"], "sessionKey": payload["sessionKey"],
            "toolCallId": data["toolCallId"], "host": data["host"]}});
        shared.change(|state| state.approvals.insert(id, requested));
        return;
    }
    if frame["event"] != "chat" {
        return;
    }
    shared.change(|state| {
        let Some(r) = state.runs.get_mut(run) else {
            return;
        };
        r.chat_seq = r.chat_seq.max(payload["seq"].as_u64().unwrap_or(0));
        let outcome = match payload["state"].as_str() {
            Some("final") => {
                let text = message_text(&payload["message"]);
                json!({"status": "ok", "terminalReply": {"disposition": "visible", "text": text}})
            }
            Some("error") => json!({"status": "error", "error": payload["errorMessage"]}),
            Some("aborted") => json!({"status": "error", "error": "aborted"}),
            _ => return,
        };
        r.outcome = Some(outcome);
        if payload["state"] == "final" && payload["message"].is_object() {
            let key = r.session_key.clone();
            state
                .history
                .entry(key)
                .or_default()
                .push(payload["message"].clone());
        }
    });
}
