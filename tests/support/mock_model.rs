//! A mock model server for tests and benchmarks: a real HTTP server on
//! 127.0.0.1 that answers the Anthropic Messages (`/v1/messages`) and OpenAI
//! Chat Completions (`/v1/chat/completions`) endpoints with queued replies,
//! usually SSE bodies from `fixtures/`.
//!
//! It records every request and checks it the way the real APIs do: each
//! tool result must answer a call the model made in the previous assistant
//! message, and each call must be answered. A malformed request gets a 400
//! and is listed in `violations()`, which tests assert to be empty.
//!
//! Requests that offer no tools are pincer's side calls (the session title
//! after the first turn), not turns of the agent loop. They are kept apart:
//! recorded in `side_requests()` and answered from their own queue
//! (`push_side`), or with a 503 when nothing is queued, so that tests of
//! the loop see only the loop's requests and titles stay the first prompt's
//! unless a test asks for one.
//!
//! It also serves Anthropic's real Claude Code CLI (`ANTHROPIC_BASE_URL`
//! pointing here), which pincer's Claude Code runtime runs: the CLI probes
//! `HEAD /` first, posts to `/v1/messages?beta=true`, puts `role: "system"`
//! messages into `messages` (its `mid-conversation-system-…` beta), and
//! makes side calls of its own (a session title) that are told apart from
//! its turns not by tools but by what they ask for (see `handle`); they
//! get a canned answer and never take the test's queued replies.
#![allow(dead_code)]

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::Notify;

/// One queued answer.
#[derive(Clone)]
pub enum Reply {
    /// An SSE body, sent event by event with `delay` between events, after
    /// `gate` (if any) has been opened.
    Sse {
        body: String,
        delay: Duration,
        gate: Option<Arc<Notify>>,
    },
    /// The first `prefix` events of `body`, then nothing: the stream stays
    /// open until the client goes away.
    Stall { body: String, events: usize },
    /// The first `events` events of `body`, then the connection breaks
    /// (the body fails, so the server drops the connection without ending
    /// the chunked body): a reset in the middle of a stream.
    Reset { body: String, events: usize },
    /// A binary body (an AWS event stream), sent in pieces of `chunk`
    /// bytes.
    Bytes {
        body: Vec<u8>,
        content_type: String,
        chunk: usize,
    },
    /// An HTTP error.
    Status {
        status: u16,
        body: String,
        headers: Vec<(String, String)>,
    },
    /// The events of `head`, then `keep_alive` every `every`, forever: a
    /// stream that stays alive without making progress.
    KeepAlive {
        head: String,
        keep_alive: String,
        every: Duration,
    },
    /// An answer with `status` whose body is `template` with `{header}`
    /// replaced by the value of the request's `header` (as a JSON string's
    /// contents): a provider that quotes the credential it was sent.
    Echo {
        status: u16,
        header: String,
        template: String,
    },
}

impl Reply {
    pub fn sse(body: impl Into<String>) -> Self {
        Reply::Sse {
            body: body.into(),
            delay: Duration::ZERO,
            gate: None,
        }
    }

    pub fn fixture(path: &str) -> Self {
        Self::sse(fixture(path))
    }

    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Reply::Status {
            status,
            body: body.into(),
            headers: Vec::new(),
        }
    }

    /// A redirect to `location`.
    pub fn redirect(status: u16, location: impl Into<String>) -> Self {
        Reply::Status {
            status,
            body: String::new(),
            headers: vec![("location".to_string(), location.into())],
        }
    }

    /// A 200 whose body is `body` with this content type, in one piece.
    pub fn ok_body(content_type: &str, body: impl Into<String>) -> Self {
        Reply::Bytes {
            body: body.into().into_bytes(),
            content_type: content_type.to_string(),
            chunk: usize::MAX,
        }
    }

    /// Fills in an [`Reply::Echo`] from the request's headers; other
    /// replies stay as they are.
    fn for_request(self, headers: &[(String, String)]) -> Self {
        match self {
            Reply::Echo {
                status,
                header,
                template,
            } => {
                let value = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(&header))
                    .map(|(_, v)| v.as_str())
                    .unwrap_or_default();
                let quoted = serde_json::to_string(value).unwrap();
                let body = template.replace("{header}", &quoted[1..quoted.len() - 1]);
                Reply::Status {
                    status,
                    body,
                    headers: Vec::new(),
                }
            }
            other => other,
        }
    }
}

/// Reads `fixtures/<path>`.
pub fn fixture(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("fixture {}: {e}", full.display()))
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    /// The query string, if any (the Claude Code CLI posts to
    /// `/v1/messages?beta=true`).
    pub query: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    /// When it arrived (for latency benchmarks).
    pub at: std::time::Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Inner {
    replies: VecDeque<Reply>,
    requests: Vec<Recorded>,
    side_replies: VecDeque<Reply>,
    side_requests: Vec<Recorded>,
    violations: Vec<String>,
    /// Replies for the request whose last message's text holds the
    /// needle (see [`MockModel::push_for`]), taken before the queue's.
    addressed: Vec<(String, Reply)>,
}

#[derive(Clone)]
pub struct MockModel {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    arrived: Arc<Notify>,
    _server: Arc<tokio::task::JoinHandle<()>>,
}

impl MockModel {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let arrived = Arc::new(Notify::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Anthropic takes requests up to 32 MB; axum's default of 2 MB
        // would refuse a long session's history as no provider does.
        let app = axum::Router::new()
            .fallback(handle)
            .layer(axum::extract::DefaultBodyLimit::max(32 * 1024 * 1024))
            .with_state((inner.clone(), arrived.clone()));
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            addr,
            inner,
            arrived,
            _server: Arc::new(server),
        }
    }

    /// For `ANTHROPIC_BASE_URL` (a host root).
    pub fn anthropic_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// For `OPENAI_BASE_URL` (including `/v1`).
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, reply: Reply) {
        self.inner.lock().unwrap().replies.push_back(reply);
    }

    /// Queues `reply` for the first request whose last message's text
    /// contains `needle` (a helper's job, say), whenever it comes:
    /// requests that run at the same time get their own answers.
    pub fn push_for(&self, needle: &str, reply: Reply) {
        self.inner
            .lock()
            .unwrap()
            .addressed
            .push((needle.to_string(), reply));
    }

    /// Queues the answer to the next side call (a request without tools).
    pub fn push_side(&self, reply: Reply) {
        self.inner.lock().unwrap().side_replies.push_back(reply);
    }

    pub fn side_requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().side_requests.clone()
    }

    /// Waits until `n` side calls have arrived, or panics after `timeout`.
    pub async fn wait_for_side_requests(&self, n: usize, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.arrived.notified();
            if self.inner.lock().unwrap().side_requests.len() >= n {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "expected {n} side requests, got {}",
                    self.inner.lock().unwrap().side_requests.len()
                );
            }
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().requests.clone()
    }

    pub fn violations(&self) -> Vec<String> {
        self.inner.lock().unwrap().violations.clone()
    }

    /// Waits until `n` requests have arrived, or panics after `timeout`.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.arrived.notified();
            if self.inner.lock().unwrap().requests.len() >= n {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "expected {n} model requests, got {}",
                    self.inner.lock().unwrap().requests.len()
                );
            }
        }
    }
}

type AppState = (Arc<Mutex<Inner>>, Arc<Notify>);

async fn handle(
    State((inner, arrived)): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Routes match on the path alone, so `/v1/messages?beta=true` (the
    // Claude Code CLI) is `/v1/messages`.
    let path = uri.path().to_string();
    let query = uri.query().map(str::to_string);
    let cli = has_beta(&headers, "claude-code-");
    let system_messages = has_beta(&headers, "mid-conversation-system-");
    // The CLI's reachability probe, a `HEAD /` (not a GET); its answer does
    // not matter to the CLI (a 404 works too), and it is not a model call.
    // A `GET /` stays an unexpected path (400): `pincer doctor`'s probe
    // test expects that.
    if method == Method::HEAD && path == "/" {
        return Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .unwrap();
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let request_headers = headers.clone();
    let problem = match path.as_str() {
        "/v1/messages" if system_messages => check_anthropic_mid_conversation_system(&body).err(),
        "/v1/messages" => check_anthropic(&body).err(),
        "/v1/chat/completions" => check_openai(&body).err(),
        // OpenAI Responses, Gemini and Bedrock: their own tests check the
        // bodies; here only that the right endpoint was called.
        "/v1/responses" => None,
        p if p.starts_with("/v1beta/models/") && p.ends_with(":streamGenerateContent") => None,
        p if p.starts_with("/model/") && p.ends_with("/converse-stream") => None,
        other => Some(format!("unexpected path {other}")),
    };
    // The Claude Code CLI's side calls are told apart from its turns by
    // what they ask for, not by tools: with `--tools ""` and no MCP server
    // a turn offers no tools either. Its session title call (2.1.197, on a
    // `generate_session_title` control request) streams like a turn but
    // asks for structured output (`output_config.format`, a JSON schema
    // with a `title`), which a turn never does; and a call that does not
    // stream (`"stream": false`) is never a turn's. Both are recorded in
    // `side_requests()` and answered by `claude_cli_side_reply` without
    // taking a queued reply, so the test's replies go to the turn.
    let cli_side = cli
        && (body["stream"] != Value::Bool(true) || body["output_config"].get("format").is_some());
    // Bedrock puts its tools under `toolConfig`.
    let side = !cli
        && body
            .get("tools")
            .is_none_or(|tools| tools.as_array().is_some_and(Vec::is_empty))
        && body.get("toolConfig").is_none();
    let reply = {
        let mut inner = inner.lock().unwrap();
        let recorded = Recorded {
            path,
            query,
            headers,
            body,
            at: std::time::Instant::now(),
        };
        if cli_side && problem.is_none() {
            let reply = claude_cli_side_reply(&recorded.body);
            inner.side_requests.push(recorded);
            Some(reply)
        } else if side && problem.is_none() {
            inner.side_requests.push(recorded);
            Some(inner.side_replies.pop_front().unwrap_or(Reply::Status {
                status: 503,
                body: r#"{"error":{"message":"mock: no side reply queued"}}"#.to_string(),
                headers: Vec::new(),
            }))
        } else {
            inner.requests.push(recorded);
            if let Some(problem) = &problem {
                inner.violations.push(problem.clone());
            }
            let last = last_message_text(&inner.requests.last().unwrap().body);
            let addressed = inner
                .addressed
                .iter()
                .position(|(needle, _)| last.contains(needle.as_str()));
            let reply = match addressed {
                Some(i) => Some(inner.addressed.remove(i).1),
                None => inner.replies.pop_front(),
            };
            if reply.is_none() && problem.is_none() {
                inner
                    .violations
                    .push("a model request arrived with no reply queued".to_string());
            }
            reply
        }
    };
    arrived.notify_waiters();
    if let Some(problem) = problem {
        return error_response(400, &problem);
    }
    match reply {
        None => error_response(500, "mock: no reply queued"),
        Some(reply) => respond(reply.for_request(&request_headers)).await,
    }
}

/// The text of a request's last message (Anthropic's blocks or OpenAI's
/// string), tool results left out.
pub fn last_message_text(body: &Value) -> String {
    let Some(last) = body["messages"].as_array().and_then(|m| m.last()) else {
        return String::new();
    };
    match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

async fn respond(reply: Reply) -> Response {
    match reply {
        Reply::Status {
            status,
            body,
            headers,
        } => {
            let mut response = Response::builder().status(status);
            for (k, v) in headers {
                response = response.header(k, v);
            }
            response
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap()
        }
        Reply::Sse { body, delay, gate } => {
            let events = split_events(&body);
            let stream = async_stream(events, delay, gate);
            sse_response(Body::from_stream(stream))
        }
        Reply::Bytes {
            body,
            content_type,
            chunk,
        } => {
            let pieces: Vec<Result<Bytes, std::io::Error>> = body
                .chunks(chunk.max(1))
                .map(|c| Ok(Bytes::copy_from_slice(c)))
                .collect();
            Response::builder()
                .status(StatusCode::OK)
                .header("content-type", content_type)
                .body(Body::from_stream(futures::stream::iter(pieces)))
                .unwrap()
        }
        Reply::Stall {
            body,
            events: count,
        } => {
            let mut events = split_events(&body);
            events.truncate(count);
            let head = futures::stream::iter(
                events
                    .into_iter()
                    .map(|e| Ok::<_, std::io::Error>(Bytes::from(e))),
            );
            let stream = futures::StreamExt::chain(head, futures::stream::pending());
            sse_response(Body::from_stream(stream))
        }
        Reply::Reset {
            body,
            events: count,
        } => {
            let mut events = split_events(&body);
            events.truncate(count);
            let head = futures::stream::iter(
                events
                    .into_iter()
                    .map(|e| Ok::<_, std::io::Error>(Bytes::from(e))),
            );
            // A pause first, so that hyper flushes the events before the
            // failing body makes it drop the connection.
            let reset = futures::stream::once(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err::<Bytes, _>(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "mock: connection reset",
                ))
            });
            sse_response(Body::from_stream(futures::StreamExt::chain(head, reset)))
        }
        Reply::KeepAlive {
            head,
            keep_alive,
            every,
        } => {
            let head = futures::stream::iter(
                split_events(&head)
                    .into_iter()
                    .map(|e| Ok::<_, std::io::Error>(Bytes::from(e))),
            );
            let pings = futures::stream::unfold((), move |()| {
                let keep_alive = keep_alive.clone();
                async move {
                    tokio::time::sleep(every).await;
                    Some((Ok::<_, std::io::Error>(Bytes::from(keep_alive)), ()))
                }
            });
            sse_response(Body::from_stream(futures::StreamExt::chain(head, pings)))
        }
        // Filled in by `Reply::for_request` before it gets here.
        Reply::Echo { status, .. } => error_response(status, "mock: an unfilled echo"),
    }
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap()
}

fn error_response(status: u16, message: &str) -> Response {
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message}
    });
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// Splits an SSE body into events, each keeping its blank-line terminator.
fn split_events(body: &str) -> Vec<String> {
    let normalized = body.replace("\r\n", "\n");
    normalized
        .split_inclusive("\n\n")
        .map(str::to_string)
        .collect()
}

fn async_stream(
    events: Vec<String>,
    delay: Duration,
    gate: Option<Arc<Notify>>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::unfold(
        (events.into_iter(), delay, gate, true),
        |(mut events, delay, gate, first)| async move {
            if first {
                if let Some(gate) = &gate {
                    gate.notified().await;
                }
            } else if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let event = events.next()?;
            Some((Ok(Bytes::from(event)), (events, delay, gate, false)))
        },
    )
}

/// Whether the request's `anthropic-beta` list has a beta named
/// `prefix…`. The Claude Code CLI announces itself with its `claude-code-…`
/// beta (pincer's own Anthropic client never sends that one).
fn has_beta(headers: &HeaderMap, prefix: &str) -> bool {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|beta| beta.trim().starts_with(prefix))
}

/// The text of the mock's answer to the Claude Code CLI's side calls: a
/// session title as the title call's JSON schema asks for it.
pub const CLAUDE_CLI_SIDE_TEXT: &str = r#"{"title":"Mock session title"}"#;

/// The answer to a side call of the Claude Code CLI (`body` is its
/// request): [`CLAUDE_CLI_SIDE_TEXT`] as an SSE stream when it streams,
/// else as a plain Messages API response.
fn claude_cli_side_reply(body: &Value) -> Reply {
    use serde_json::json;
    let message = |content: Value, stop_reason: Value| {
        json!({
            "id": "msg_mock_side", "type": "message", "role": "assistant",
            "model": body["model"], "content": content,
            "stop_reason": stop_reason, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 3}
        })
    };
    let text = json!({"type": "text", "text": CLAUDE_CLI_SIDE_TEXT});
    if body["stream"] != Value::Bool(true) {
        let body = message(json!([text]), json!("end_turn"));
        return Reply::ok_body("application/json", body.to_string());
    }
    let events = [
        json!({"type": "message_start", "message": message(json!([]), Value::Null)}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": CLAUDE_CLI_SIDE_TEXT}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
               "usage": {"output_tokens": 3}}),
        json!({"type": "message_stop"}),
    ];
    Reply::sse(
        events
            .iter()
            .map(|event| {
                format!(
                    "event: {}\ndata: {event}\n\n",
                    event["type"].as_str().unwrap()
                )
            })
            .collect::<String>(),
    )
}

/// [`check_anthropic`] for requests with the `mid-conversation-system-…`
/// beta (the Claude Code CLI sends it): with it the API takes
/// `{"role": "system", "content": "…"}` messages between the others,
/// outside the user/assistant alternation (the CLI puts the list of agent
/// types after the first user message). Only those are skipped: everything
/// else is held to the same rules.
pub fn check_anthropic_mid_conversation_system(body: &Value) -> Result<(), String> {
    let mut body = body.clone();
    if let Some(messages) = body["messages"].as_array_mut() {
        messages.retain(|m| m["role"] != "system");
    }
    check_anthropic(&body)
}

/// Anthropic's rules: roles alternate starting with user; every tool_use in
/// an assistant message is answered by a tool_result in the next user
/// message, and every tool_result answers such a tool_use.
pub fn check_anthropic(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("messages is missing")?;
    if body["model"].as_str().is_none() {
        return Err("model is missing".into());
    }
    if body["max_tokens"].as_u64().is_none() {
        return Err("max_tokens is missing".into());
    }
    let mut open: HashSet<String> = HashSet::new();
    let mut expected_role = "user";
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role != expected_role {
            return Err(format!(
                "message {i} has role {role}, expected {expected_role}"
            ));
        }
        expected_role = if role == "user" { "assistant" } else { "user" };
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        if role == "user" {
            let mut answered = HashSet::new();
            for block in &blocks {
                if block["type"] == "tool_result" {
                    let id = block["tool_use_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    if !open.contains(&id) {
                        return Err(format!("tool_result {id} answers no tool_use"));
                    }
                    answered.insert(id);
                }
            }
            if answered != open {
                return Err(format!(
                    "tool_use ids without a result: {:?}",
                    open.difference(&answered)
                ));
            }
            open.clear();
        } else {
            for block in &blocks {
                if block["type"] == "text" && block["text"].as_str().unwrap_or_default().is_empty()
                {
                    return Err(format!("message {i} has an empty text block"));
                }
                if block["type"] == "tool_use" {
                    open.insert(block["id"].as_str().unwrap_or_default().to_string());
                }
            }
        }
    }
    if !open.is_empty() {
        return Err(format!("tool_use ids without a result: {open:?}"));
    }
    Ok(())
}

/// OpenAI's rules: every `tool` message answers a call of the preceding
/// assistant message, and every call is answered before the next
/// non-tool message.
pub fn check_openai(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("messages is missing")?;
    if body["model"].as_str().is_none() {
        return Err("model is missing".into());
    }
    let mut open: HashSet<String> = HashSet::new();
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        match role {
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                if !open.remove(id) {
                    return Err(format!("tool message {i} answers no call ({id})"));
                }
            }
            _ => {
                if !open.is_empty() {
                    return Err(format!(
                        "calls without a result before message {i}: {open:?}"
                    ));
                }
                if role == "assistant" {
                    for call in message["tool_calls"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                    {
                        open.insert(call["id"].as_str().unwrap_or_default().to_string());
                    }
                }
            }
        }
    }
    if !open.is_empty() {
        return Err(format!("calls without a result: {open:?}"));
    }
    Ok(())
}
