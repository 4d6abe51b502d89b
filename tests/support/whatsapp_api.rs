//! A mock of the WhatsApp Business Cloud API for the WhatsApp channel's
//! tests, on 127.0.0.1, written from Meta's documentation (see
//! /work/plan18-telegram-whatsapp.md part 2): both sides of it.
//!
//! The Graph side ([`GraphApi`]) answers `POST /{phone_number_id}/messages`
//! (under a `/vNN.N` prefix) as the Cloud API does: a wrong bearer token
//! gets 401 with Graph's error 190, a body breaking the API's limits (a
//! text over 4096 characters, more than three reply buttons, a title over
//! 20, a read receipt for an unknown message) a 400 with error 100, and
//! queued faults (a rate limit's code) come back in Graph's error shape.
//! It records every request with the time it came.
//!
//! The Meta side ([`Meta`]) does what Meta's servers do to the gateway's
//! `/channels/whatsapp`: the verification GET, and notifications POSTed
//! with `X-Hub-Signature-256` (HMAC-SHA256 of the raw body with the app
//! secret).
#![allow(dead_code)]

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::Notify;

/// One request the Graph side received.
#[derive(Clone, Debug)]
pub struct Sent {
    pub at: Instant,
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
    /// What the mock answered.
    pub status: u16,
}

impl Sent {
    /// A message (text or interactive), not a read receipt.
    pub fn is_message(&self) -> bool {
        self.body.get("status").is_none()
    }
}

#[derive(Default)]
struct Inner {
    requests: Vec<Sent>,
    /// Answers for the next messages: (HTTP status, Graph error code).
    faults: VecDeque<(u16, u64)>,
    /// Inbound wamids (a read receipt must name one).
    inbound: HashSet<String>,
    next: u64,
}

struct Shared {
    token: String,
    phone_number_id: String,
    inner: Mutex<Inner>,
    changed: Notify,
}

/// The Graph API side of the mock.
pub struct GraphApi {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GraphApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn graph_error(status: u16, code: u64, message: &str) -> Response {
    let body = json!({"error": {
        "message": message,
        "type": "OAuthException",
        "code": code,
        "error_data": {"messaging_product": "whatsapp", "details": message},
        "fbtrace_id": "AbCdEfGhIjK",
    }});
    (
        StatusCode::from_u16(status).unwrap(),
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(body: Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

impl GraphApi {
    /// A Graph API for the business number `phone_number_id` that takes
    /// `token`.
    pub async fn start(token: &str, phone_number_id: &str) -> Self {
        let shared = Arc::new(Shared {
            token: token.to_string(),
            phone_number_id: phone_number_id.to_string(),
            inner: Mutex::new(Inner::default()),
            changed: Notify::new(),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { addr, shared, task }
    }

    /// The `api_url` of `[channels.whatsapp]`.
    pub fn url(&self) -> String {
        format!("http://{}/v21.0", self.addr)
    }

    /// The next `count` messages fail with Graph error `code` (HTTP
    /// `status`).
    pub fn fail_next(&self, count: usize, status: u16, code: u64) {
        let mut inner = self.shared.inner.lock().unwrap();
        for _ in 0..count {
            inner.faults.push_back((status, code));
        }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Sent> {
        self.shared.inner.lock().unwrap().requests.clone()
    }

    /// The messages accepted so far (read receipts and refusals left out).
    pub fn messages(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_message() && r.status == 200)
            .map(|r| r.body)
            .collect()
    }

    /// Waits until `count` messages were accepted; returns them all.
    pub async fn wait_messages(&self, count: usize, timeout: Duration) -> Vec<Value> {
        self.wait_for(
            timeout,
            |api| api.messages().len() >= count,
            &format!("{count} messages"),
        )
        .await;
        self.messages()
    }

    /// Waits until `done` holds, failing with what was sent.
    pub async fn wait_for(&self, timeout: Duration, done: impl Fn(&Self) -> bool, what: &str) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            if done(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "the Graph API mock never saw {what}; requests: {:#?}",
                    self.requests()
                        .iter()
                        .map(|r| (r.status, r.body.clone()))
                        .collect::<Vec<_>>()
                );
            }
        }
    }

    fn note_inbound(&self, wamid: &str) {
        self.shared
            .inner
            .lock()
            .unwrap()
            .inbound
            .insert(wamid.to_string());
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let response = answer(&shared, &path, authorization.as_deref(), &parsed);
    let mut inner = shared.inner.lock().unwrap();
    inner.requests.push(Sent {
        at: Instant::now(),
        path,
        authorization,
        body: parsed,
        status: response.status().as_u16(),
    });
    drop(inner);
    shared.changed.notify_waiters();
    response
}

fn answer(shared: &Shared, path: &str, authorization: Option<&str>, body: &Value) -> Response {
    // `/v21.0/{phone_number_id}/messages`.
    let mut parts = path.trim_start_matches('/').split('/');
    let version = parts.next().unwrap_or_default();
    let id = parts.next().unwrap_or_default();
    let edge = parts.next().unwrap_or_default();
    if !version.starts_with('v') || edge != "messages" || parts.next().is_some() {
        return graph_error(400, 100, "Unknown path components");
    }
    if authorization != Some(&format!("Bearer {}", shared.token)) {
        return graph_error(
            401,
            190,
            "Invalid OAuth access token - Cannot parse access token",
        );
    }
    if id != shared.phone_number_id {
        return graph_error(
            400,
            100,
            &format!("Unsupported post request. Object with ID '{id}' does not exist"),
        );
    }
    if body["messaging_product"] != "whatsapp" {
        return graph_error(400, 100, "The parameter messaging_product is required.");
    }
    let mut inner = shared.inner.lock().unwrap();
    if body["status"] == "read" {
        let known = body["message_id"]
            .as_str()
            .is_some_and(|m| inner.inbound.contains(m));
        if !known {
            return graph_error(400, 100, "Invalid parameter: message_id");
        }
        return ok(json!({"success": true}));
    }
    if let Some(invalid) = invalid_message(body) {
        return graph_error(400, 100, &format!("(#100) Invalid parameter: {invalid}"));
    }
    if let Some((status, code)) = inner.faults.pop_front() {
        let message = match code {
            131056 => "(Business Account, Consumer Account) pair rate limit hit",
            130429 => "Rate limit hit",
            190 => "Error validating access token: Session has expired",
            _ => "Fault",
        };
        return graph_error(status, code, message);
    }
    inner.next += 1;
    let wamid = format!("wamid.out{}", inner.next);
    let to = body["to"].as_str().unwrap_or_default();
    ok(json!({
        "messaging_product": "whatsapp",
        "contacts": [{"input": to, "wa_id": to}],
        "messages": [{"id": wamid}],
    }))
}

/// What breaks the Cloud API's rules in a message, if anything.
fn invalid_message(body: &Value) -> Option<String> {
    let to = body["to"].as_str().unwrap_or_default();
    if to.is_empty()
        || !to
            .trim_start_matches('+')
            .bytes()
            .all(|b| b.is_ascii_digit())
    {
        return Some(format!("to `{to}`"));
    }
    match body["type"].as_str() {
        Some("text") => {
            let text = body["text"]["body"].as_str().unwrap_or_default();
            let chars = text.chars().count();
            (chars == 0 || chars > 4096).then(|| format!("text.body of {chars} characters"))
        }
        Some("interactive") => {
            let interactive = &body["interactive"];
            if interactive["type"] != "button" {
                return Some("interactive.type".into());
            }
            let text = interactive["body"]["text"].as_str().unwrap_or_default();
            if text.is_empty() || text.chars().count() > 1024 {
                return Some("interactive.body.text".into());
            }
            let Some(buttons) = interactive["action"]["buttons"].as_array() else {
                return Some("interactive.action.buttons".into());
            };
            if buttons.is_empty() || buttons.len() > 3 {
                return Some(format!("{} buttons", buttons.len()));
            }
            let mut titles = HashSet::new();
            for button in buttons {
                let title = button["reply"]["title"].as_str().unwrap_or_default();
                let id = button["reply"]["id"].as_str().unwrap_or_default();
                if button["type"] != "reply"
                    || title.is_empty()
                    || title.chars().count() > 20
                    || id.is_empty()
                    || id.len() > 256
                    || !titles.insert(title)
                {
                    return Some(format!("button {button}"));
                }
            }
            None
        }
        other => Some(format!("type {other:?}")),
    }
}

/// Meta's side: what its servers send to the gateway's webhook.
pub struct Meta {
    /// `http://ADDR/channels/whatsapp`.
    pub url: String,
    pub app_secret: String,
    pub phone_number_id: String,
    http: reqwest::Client,
}

/// `sha256=` and the HMAC-SHA256 of `body` with `secret`, in hex.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

impl Meta {
    pub fn new(gateway: SocketAddr, app_secret: &str, phone_number_id: &str) -> Self {
        Self {
            url: format!("http://{gateway}/channels/whatsapp"),
            app_secret: app_secret.to_string(),
            phone_number_id: phone_number_id.to_string(),
            http: reqwest::Client::new(),
        }
    }

    /// The verification request; the status and the body answered.
    pub async fn verify(&self, mode: &str, token: &str, challenge: &str) -> (u16, String) {
        let response = self
            .http
            .get(&self.url)
            .query(&[
                ("hub.mode", mode),
                ("hub.challenge", challenge),
                ("hub.verify_token", token),
            ])
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    }

    /// POSTs `body` exactly with `signature` (none: no header).
    pub async fn post_raw(&self, body: &[u8], signature: Option<&str>) -> (u16, String) {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(signature) = signature {
            request = request.header("x-hub-signature-256", signature);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    }

    /// POSTs a notification signed with the app secret; the mock `api`
    /// learns the wamids in it (read receipts name them).
    pub async fn notify(&self, api: &GraphApi, body: &Value) -> (u16, String) {
        for change in body["entry"][0]["changes"].as_array().into_iter().flatten() {
            for message in change["value"]["messages"].as_array().into_iter().flatten() {
                if let Some(id) = message["id"].as_str() {
                    api.note_inbound(id);
                }
            }
        }
        let bytes = serde_json::to_vec(body).unwrap();
        self.post_raw(&bytes, Some(&signature(&self.app_secret, &bytes)))
            .await
    }

    /// A notification carrying `messages` from `from` (named `name`).
    pub fn envelope(&self, from: &str, name: &str, messages: Vec<Value>) -> Value {
        json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550783881", "phone_number_id": self.phone_number_id},
                "contacts": [{"profile": {"name": name}, "wa_id": from}],
                "messages": messages,
            }}]}],
        })
    }
}

/// A text message `wamid` from `from`.
pub fn text_message(from: &str, wamid: &str, text: &str) -> Value {
    json!({"from": from, "id": wamid, "timestamp": "1739321024", "type": "text",
        "text": {"body": text}})
}

/// The answer of a reply button `id` (titled `title`) pressed under
/// pincer's message `context`.
pub fn button_reply(from: &str, wamid: &str, context: &str, id: &str, title: &str) -> Value {
    json!({"context": {"from": "15550783881", "id": context},
        "from": from, "id": wamid, "timestamp": "1739321025", "type": "interactive",
        "interactive": {"type": "button_reply", "button_reply": {"id": id, "title": title}}})
}

/// A status notification (pincer's message `wamid` was delivered).
pub fn delivered_status(meta: &Meta, to: &str, wamid: &str) -> Value {
    json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": meta.phone_number_id},
            "statuses": [{"id": wamid, "status": "delivered", "timestamp": "1750857384",
                "recipient_id": to}],
        }}]}],
    })
}
