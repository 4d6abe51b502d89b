//! Slack (https://docs.slack.dev): Socket Mode (the default: a websocket
//! that `apps.connections.open` names, no public URL needed) or the Events
//! API (Slack posts to the gateway's `/channels/slack`, each request signed
//! with the app's signing secret); replies with the Web API
//! (`chat.postMessage`, `chat.update`), approvals as Block Kit buttons.
//!
//! Written on reqwest and tokio-tungstenite rather than slack-morphism:
//! pincer needs five Web API methods and three envelope shapes, an API URL
//! that can point anywhere (GovSlack, a test's mock, `ws://` included), and
//! an envelope acknowledged only once the gateway took what it carried,
//! which the crate's listener does itself (and it brings a second HTTP and
//! websocket stack).
//!
//! Nothing received is lost or run twice across a restart: an envelope is
//! acknowledged only after the runner took its message (Slack redelivers
//! what was not acknowledged), and what the runner took is remembered on
//! disk (`channels/slack/seen.json`), so a redelivery of it is only
//! acknowledged.

use parking_lot::Mutex;
use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message as Frame;

use super::http::{client, network, retry_after, retrying};
use super::{
    Button, Chat, Deliveries, Delivery, Failure, Incoming, Limits, Measure, Message, Platform,
    Press, Sent, WebhookRequest, WebhookResponse,
};
use crate::config::channels::{SlackConfig, SlackMode};

/// How long an envelope waits for the runner to take what it carried
/// before it is acknowledged anyway: Slack wants the acknowledgement
/// within 3 seconds, or retries (and disables an app that keeps failing).
/// The runner takes a message in milliseconds; past this it is stuck, and
/// what was taken is still remembered when it finally is.
const ACK_WAIT: Duration = Duration::from_millis(2500);

/// A request older (or newer) than this is refused: a replayed one.
const MAX_SKEW_SECS: i64 = 300;

/// Keys of taken events remembered (Slack retries for minutes, not days).
const SEEN_MAX: usize = 4096;

/// Socket Mode liveness: a ping this often, and a socket silent for
/// three of them is dead (a half-open connection otherwise looks alive).
const PING_EVERY: Duration = Duration::from_secs(30);

/// The longest markdown in one message: the `markdown` block's limit
/// ("the cumulative limit for all markdown blocks in a single payload is
/// 12,000 characters").
const MAX_MARKDOWN: usize = 12_000;

/// The notification text beside the blocks.
const MAX_FALLBACK: usize = 1000;

pub struct Slack {
    http: reqwest::Client,
    api: String,
    /// `xoxb-…`: never logged.
    bot_token: String,
    /// `xapp-…`, Socket Mode's.
    app_token: Option<String>,
    /// The Events API's signing secret.
    signing_secret: Option<String>,
    edit_interval: Duration,
    me: Mutex<Option<Me>>,
    /// For the Events API: where requests' events go.
    deliveries: Mutex<Option<Deliveries>>,
    seen: Arc<Mutex<Seen>>,
}

/// The bot's identity (`auth.test`): its messages are not for it, and a
/// mention of it addresses it.
#[derive(Clone, Debug, PartialEq)]
struct Me {
    user: String,
    bot: Option<String>,
}

impl Slack {
    /// The channel `config` describes; errors name what is missing.
    pub fn new(
        config: &SlackConfig,
        env: &dyn Fn(&str) -> Option<String>,
        data_dir: &std::path::Path,
    ) -> Result<Self, String> {
        let bot_token = config.bot_token().read(env)?;
        let (app_token, signing_secret) = match config.mode.unwrap_or_default() {
            SlackMode::Socket => (Some(config.app_token().read(env)?), None),
            SlackMode::Events => (None, Some(config.signing_secret().read(env)?)),
        };
        let file = data_dir.join("channels").join("slack").join("seen.json");
        Ok(Self {
            http: client(),
            api: config.api_url().to_string(),
            bot_token,
            app_token,
            signing_secret,
            edit_interval: Duration::from_millis(config.edit_interval_ms.unwrap_or(1000).max(100)),
            me: Mutex::new(None),
            deliveries: Mutex::new(None),
            seen: Arc::new(Mutex::new(Seen::load(file))),
        })
    }

    /// One Web API call with `token`; the whole answer of a success.
    async fn call(&self, method: &str, token: &str, body: &Value) -> Result<Value, Failure> {
        let response = self
            .http
            .post(format!("{}/{method}", self.api))
            .bearer_auth(token)
            .json(body)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(network)?;
        let status = response.status();
        let wait = retry_after(response.headers());
        if status.as_u16() == 429 {
            // The official SDKs wait 30 s when Slack does not say.
            return Err(Failure::RateLimited(
                wait.unwrap_or(Duration::from_secs(30)),
            ));
        }
        let bytes = response.bytes().await.map_err(network)?;
        let Ok(reply) = serde_json::from_slice::<Value>(&bytes) else {
            return Err(if status.is_server_error() {
                Failure::Transient(format!("Slack answered {status}"))
            } else {
                Failure::Refused(format!("Slack {method} answered {status} without JSON"))
            });
        };
        if reply["ok"] == true {
            return Ok(reply);
        }
        let error = reply["error"].as_str().unwrap_or("no error given");
        Err(failure(method, error, status.as_u16(), wait))
    }

    async fn me(&self) -> Result<Me, Failure> {
        if let Some(me) = self.me.lock().clone() {
            return Ok(me);
        }
        let empty = json!({});
        let reply = retrying("auth.test", || {
            self.call("auth.test", &self.bot_token, &empty)
        })
        .await?;
        let me = Me {
            user: reply["user_id"].as_str().unwrap_or_default().to_string(),
            bot: reply["bot_id"].as_str().map(String::from),
        };
        *self.me.lock() = Some(me.clone());
        Ok(me)
    }

    /// Socket Mode: a connection after another, for as long as the runner
    /// runs. Slack asks for a new one (`disconnect`) every few hours.
    async fn socket(self: Arc<Self>, deliveries: Deliveries) -> Result<(), Failure> {
        let Some(app_token) = self.app_token.clone() else {
            return Err(Failure::Fatal(
                "Slack Socket Mode needs an app token (app_token_env)".to_string(),
            ));
        };
        let me = self.me().await?;
        loop {
            let empty = json!({});
            let opened = retrying("apps.connections.open", || {
                self.call("apps.connections.open", &app_token, &empty)
            })
            .await?;
            let Some(url) = opened["url"].as_str() else {
                return Err(Failure::Transient(
                    "apps.connections.open returned no url".to_string(),
                ));
            };
            match self.connection(url, &me, &deliveries).await? {
                Ended::Shutdown => return Ok(()),
                Ended::Refresh => tracing::debug!("Slack asked for a new connection"),
            }
        }
    }

    /// One Socket Mode connection, until Slack ends it.
    async fn connection(
        self: &Arc<Self>,
        url: &str,
        me: &Me,
        deliveries: &Deliveries,
    ) -> Result<Ended, Failure> {
        let connected = tokio::time::timeout(
            Duration::from_secs(30),
            tokio_tungstenite::connect_async_with_config(
                url,
                Some(crate::gateway::client::socket_config()),
                false,
            ),
        )
        .await
        .map_err(|_| Failure::Transient("the Slack websocket did not open".to_string()))?;
        // The URL carries a one-time ticket: errors say what, not where.
        let (socket, _) = connected
            .map_err(|e| Failure::Transient(format!("the Slack websocket did not open: {e}")))?;
        let (mut write, mut read) = socket.split();
        let (acks, mut to_ack) = mpsc::channel::<String>(1024);
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        let mut heard = tokio::time::Instant::now();
        loop {
            tokio::select! {
                frame = read.next() => {
                    heard = tokio::time::Instant::now();
                    let text = match frame {
                        Some(Ok(Frame::Text(text))) => text,
                        Some(Ok(Frame::Close(_))) | None => {
                            return Err(Failure::Transient("Slack closed the websocket".to_string()));
                        }
                        Some(Ok(_)) => continue,
                        Some(Err(e)) => {
                            return Err(Failure::Transient(format!("the Slack websocket failed: {e}")));
                        }
                    };
                    let Ok(frame) = serde_json::from_str::<Value>(&text) else {
                        continue;
                    };
                    match frame["type"].as_str() {
                        Some("hello") => tracing::debug!("Slack Socket Mode connected"),
                        Some("disconnect") => {
                            if frame["reason"] == "link_disabled" {
                                return Err(Failure::Fatal(
                                    "Socket Mode is turned off for the Slack app (link_disabled): turn it on in the app's settings, or use mode = \"events\"".to_string(),
                                ));
                            }
                            return Ok(Ended::Refresh);
                        }
                        _ => {}
                    }
                    let Some(envelope) = frame["envelope_id"].as_str() else {
                        continue;
                    };
                    let item = envelope_item(&frame, me);
                    let envelope = envelope.to_string();
                    match self.hand(item, deliveries).await {
                        Handed::Closed => return Ok(Ended::Shutdown),
                        Handed::Now => {
                            let _ = acks.try_send(envelope);
                        }
                        Handed::Taking(taken) => {
                            tokio::spawn(acknowledge(taken, envelope, acks.clone(), ACK_WAIT));
                        }
                    }
                }
                Some(envelope) = to_ack.recv() => {
                    let ack = json!({"envelope_id": envelope}).to_string();
                    write.send(Frame::text(ack)).await.map_err(|e| {
                        Failure::Transient(format!("cannot acknowledge a Slack envelope: {e}"))
                    })?;
                }
                _ = ping.tick() => {
                    if heard.elapsed() > PING_EVERY * 3 {
                        return Err(Failure::Transient("the Slack websocket went silent".to_string()));
                    }
                    write.send(Frame::Ping(Default::default())).await.map_err(|e| {
                        Failure::Transient(format!("the Slack websocket failed: {e}"))
                    })?;
                }
                _ = deliveries.closed() => return Ok(Ended::Shutdown),
            }
        }
    }

    /// Hands `item` to the runner unless it was taken before.
    async fn hand(&self, item: Option<Item>, deliveries: &Deliveries) -> Handed {
        let Some(Item { key, incoming }) = item else {
            return Handed::Now;
        };
        if !self.lock_seen().start(&key) {
            tracing::debug!(key, "a Slack event delivered again; acknowledged only");
            return Handed::Now;
        }
        let (delivery, done) = Delivery::new(incoming);
        if deliveries.send(delivery).await.is_err() {
            self.lock_seen().forget(&key);
            return Handed::Closed;
        }
        let (taken, waiting) = oneshot::channel();
        let seen = self.seen.clone();
        tokio::spawn(async move {
            let ok = done.await.is_ok();
            {
                let mut seen = seen.lock();
                if ok {
                    seen.taken(&key);
                } else {
                    seen.forget(&key);
                }
            }
            let _ = taken.send(ok);
        });
        Handed::Taking(waiting)
    }

    fn lock_seen(&self) -> parking_lot::MutexGuard<'_, Seen> {
        self.seen.lock()
    }

    /// The Events API's request check: a fresh timestamp and the signature
    /// `v0=HMAC-SHA256(secret, "v0:{timestamp}:{body}")`, compared in
    /// constant time.
    fn signed(&self, request: &WebhookRequest, now: i64) -> bool {
        let Some(secret) = &self.signing_secret else {
            return false;
        };
        verify(secret, &request.headers, &request.body, now)
    }
}

/// Acknowledges `envelope` once the runner took what it carried, or at
/// Slack's deadline.
async fn acknowledge(
    taken: oneshot::Receiver<bool>,
    envelope: String,
    acks: mpsc::Sender<String>,
    deadline: Duration,
) {
    let _ = tokio::time::timeout(deadline, taken).await;
    let _ = acks.send(envelope).await;
}

/// How a connection ended.
enum Ended {
    Shutdown,
    Refresh,
}

/// What became of a received item.
enum Handed {
    /// Nothing for the runner (or taken before): acknowledge at once.
    Now,
    /// Handed; `true` once the runner took it.
    Taking(oneshot::Receiver<bool>),
    /// The runner is gone.
    Closed,
}

/// Something for the runner, and the key that makes a redelivery of it a
/// duplicate.
#[derive(Debug, PartialEq)]
struct Item {
    key: String,
    incoming: Incoming,
}

/// Keys of what the runner took (on disk, so that a restart remembers)
/// and of what it is taking.
struct Seen {
    file: PathBuf,
    taken: VecDeque<String>,
    index: HashSet<String>,
    taking: HashSet<String>,
}

impl Seen {
    fn load(file: PathBuf) -> Self {
        let taken: VecDeque<String> = std::fs::read(&file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Self {
            file,
            index: taken.iter().cloned().collect(),
            taken,
            taking: HashSet::new(),
        }
    }

    /// `false` when `key` was taken or is being taken.
    fn start(&mut self, key: &str) -> bool {
        if self.index.contains(key) || self.taking.contains(key) {
            return false;
        }
        self.taking.insert(key.to_string());
        true
    }

    fn forget(&mut self, key: &str) {
        self.taking.remove(key);
    }

    fn taken(&mut self, key: &str) {
        self.taking.remove(key);
        if !self.index.insert(key.to_string()) {
            return;
        }
        self.taken.push_back(key.to_string());
        while self.taken.len() > SEEN_MAX {
            if let Some(old) = self.taken.pop_front() {
                self.index.remove(&old);
            }
        }
        let stored = serde_json::to_vec(&self.taken).unwrap_or_default();
        let written = match self.file.parent() {
            Some(dir) => std::fs::create_dir_all(dir),
            None => Ok(()),
        }
        .and_then(|()| crate::config::trust::write_private(&self.file, &stored));
        if let Err(e) = written {
            tracing::warn!(
                "cannot store what Slack delivered in {}: {e}",
                self.file.display()
            );
        }
    }
}

/// An `ok: false` answer as a [`Failure`].
fn failure(method: &str, error: &str, status: u16, wait: Option<Duration>) -> Failure {
    match error {
        "ratelimited" | "rate_limited" => {
            Failure::RateLimited(wait.unwrap_or(Duration::from_secs(30)))
        }
        "invalid_auth"
        | "not_authed"
        | "account_inactive"
        | "token_revoked"
        | "token_expired"
        | "not_allowed_token_type"
        | "no_permission"
        | "missing_scope" => Failure::Fatal(format!(
            "Slack refused the token for {method} ({error}); check the tokens and scopes of [channels.slack]"
        )),
        "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout" => {
            Failure::Transient(format!("Slack {method}: {error}"))
        }
        _ if status >= 500 => Failure::Transient(format!("Slack {method}: {error}")),
        _ => Failure::Refused(format!("Slack {method}: {error}")),
    }
}

/// Whether `headers` sign `body` with `secret` at a time near `now`.
fn verify(secret: &str, headers: &axum::http::HeaderMap, body: &[u8], now: i64) -> bool {
    let Some(timestamp) = headers
        .get("x-slack-request-timestamp")
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Ok(seconds) = timestamp.trim().parse::<i64>() else {
        return false;
    };
    if now.abs_diff(seconds) > MAX_SKEW_SECS as u64 {
        return false;
    }
    let given = headers
        .get("x-slack-signature")
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    let digest = super::http::hmac_sha256_hex(
        secret.as_bytes(),
        &[b"v0:", timestamp.as_bytes(), b":", body],
    );
    super::http::same_signature(given, &format!("v0={digest}"))
}

/// What a Socket Mode envelope carries for the runner.
fn envelope_item(envelope: &Value, me: &Me) -> Option<Item> {
    let payload = &envelope["payload"];
    match envelope["type"].as_str()? {
        "events_api" => event_item(payload, me),
        "interactive" => interaction_item(payload),
        // Slash commands are not configured for pincer: acknowledged only.
        _ => None,
    }
}

/// What an Events API body (`event_callback`) carries for the runner.
fn event_item(body: &Value, me: &Me) -> Option<Item> {
    if body["type"] != "event_callback" {
        return None;
    }
    let event = &body["event"];
    let kind = event["type"].as_str()?;
    if kind != "message" && kind != "app_mention" {
        return None;
    }
    // Edits, deletions, joins and bots' posts (ours included) are not
    // someone talking to the agent; a thread reply also posted to the
    // channel and a message with a file are.
    if let Some(subtype) = event["subtype"].as_str()
        && subtype != "thread_broadcast"
        && subtype != "file_share"
    {
        return None;
    }
    if event.get("bot_id").is_some_and(|b| !b.is_null())
        || event.get("edited").is_some()
        || event["hidden"] == true
    {
        return None;
    }
    let user = event["user"].as_str()?;
    if user == me.user {
        return None;
    }
    let channel = event["channel"].as_str()?;
    let ts = event["ts"].as_str()?;
    let text = event["text"].as_str().unwrap_or_default();
    let direct = match event["channel_type"].as_str() {
        Some(kind) => kind == "im",
        None => channel.starts_with('D'),
    };
    let chat = chat_of(channel, event["thread_ts"].as_str(), direct);
    let mention = format!("<@{}", me.user);
    let mentioned = direct
        || kind == "app_mention"
        || (!me.user.is_empty() && text.contains(&mention))
        || (!me.user.is_empty() && event["parent_user_id"].as_str() == Some(&me.user));
    let profile = &event["user_profile"];
    let name = [&profile["display_name"], &profile["real_name"]]
        .into_iter()
        .filter_map(|n| n.as_str())
        .find(|n| !n.is_empty())
        .map(String::from);
    Some(Item {
        // `message` and `app_mention` of one post share its ts: one key,
        // so a mention subscribed both ways runs once.
        key: format!("m:{channel}:{ts}"),
        incoming: Incoming::Message(Message {
            chat,
            user: user.to_string(),
            name,
            text: unescape(&without_mention(text, &me.user)),
            id: ts.to_string(),
            mentioned,
        }),
    })
}

/// A button pressed (`block_actions`), from Socket Mode or a form post.
fn interaction_item(payload: &Value) -> Option<Item> {
    if payload["type"] != "block_actions" {
        return None;
    }
    let action = payload["actions"].as_array()?.first()?;
    let data = action["value"]
        .as_str()
        .or_else(|| action["action_id"].as_str())?;
    let channel = payload["channel"]["id"]
        .as_str()
        .or_else(|| payload["container"]["channel_id"].as_str())?;
    let message_ts = payload["container"]["message_ts"]
        .as_str()
        .or_else(|| payload["message"]["ts"].as_str())?;
    let thread = payload["message"]["thread_ts"]
        .as_str()
        .or_else(|| payload["container"]["thread_ts"].as_str());
    let chat = chat_of(channel, thread, channel.starts_with('D'));
    let user = payload["user"]["id"].as_str()?;
    let action_ts = action["action_ts"].as_str().unwrap_or(message_ts);
    Some(Item {
        key: format!("p:{channel}:{message_ts}:{user}:{action_ts}"),
        incoming: Incoming::Press(Press {
            user: user.to_string(),
            data: data.to_string(),
            handle: payload["response_url"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            message: Some(Sent {
                chat: chat.clone(),
                id: message_ts.to_string(),
            }),
            chat,
        }),
    })
}

/// The chat of a post in `channel`: its thread when it is in one, else
/// the direct message or the channel.
fn chat_of(channel: &str, thread: Option<&str>, direct: bool) -> Chat {
    match thread {
        Some(thread) if !thread.is_empty() => Chat::thread(channel, thread),
        _ if direct => Chat::dm(channel),
        _ => Chat::group(channel),
    }
}

/// `text` without mentions of `user` (`<@U1>` or `<@U1|name>`).
fn without_mention(text: &str, user: &str) -> String {
    if user.is_empty() {
        return text.trim().to_string();
    }
    let mention = format!("<@{user}");
    let mut rest = text;
    let mut out = String::with_capacity(text.len());
    while let Some(at) = rest.find(&mention) {
        let after = &rest[at + mention.len()..];
        match after.find('>') {
            Some(end) if after.starts_with('>') || after.starts_with('|') => {
                out.push_str(&rest[..at]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str(&rest[..at + mention.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Slack escapes exactly `&`, `<` and `>` in message text.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A message's content: the agent's markdown in a `markdown` block (Slack
/// renders standard markdown there, so nothing is converted), the buttons
/// in an `actions` block, and a notification text.
///
/// Why blocks and not `markdown_text`: that argument "should not be used
/// in conjunction with blocks or text", so a question could not carry its
/// buttons; and `chat.update` keeps a message's blocks unless it is given
/// new ones, so one shape for every message makes each edit replace the
/// whole message (a settled question loses its buttons).
fn content(markdown: &str, buttons: &[Button]) -> Value {
    let mut blocks = vec![json!({"type": "markdown", "text": markdown})];
    if !buttons.is_empty() {
        let elements: Vec<Value> = buttons
            .iter()
            .map(|b| {
                let mut button = json!({
                    "type": "button",
                    "text": {"type": "plain_text", "text": b.label},
                    "action_id": b.data,
                    "value": b.data,
                });
                if b.danger {
                    button["style"] = json!("danger");
                }
                button
            })
            .collect();
        blocks.push(json!({"type": "actions", "elements": elements}));
    }
    // The fallback is mrkdwn: escaped, so the agent's text cannot ping a
    // channel (`<!channel>`) from a notification.
    let mut fallback: String = markdown.chars().take(MAX_FALLBACK).collect();
    if fallback.len() < markdown.len() {
        fallback.push('…');
    }
    json!({"text": escape(&fallback), "blocks": blocks})
}

#[async_trait::async_trait]
impl Platform for Slack {
    fn name(&self) -> &'static str {
        "slack"
    }

    fn limits(&self) -> Limits {
        Limits {
            max: MAX_MARKDOWN,
            measure: Measure::Chars,
            edit: Some(self.edit_interval),
            // Slack has no typing indicator for apps outside its "AI app"
            // assistant threads (`assistant.threads.setStatus` fails in a
            // plain DM or channel); the streamed edits show the work.
            typing: None,
            buttons: true,
        }
    }

    fn format(&self, markdown: &str) -> String {
        // Sent in a `markdown` block: Slack converts it.
        markdown.to_string()
    }

    async fn receive(self: Arc<Self>, deliveries: Deliveries) -> Result<(), Failure> {
        if self.app_token.is_some() {
            return self.socket(deliveries).await;
        }
        self.me().await?;
        *self.deliveries.lock() = Some(deliveries.clone());
        deliveries.closed().await;
        Ok(())
    }

    async fn send(&self, chat: &Chat, text: &str, buttons: &[Button]) -> Result<Sent, Failure> {
        let mut body = content(text, buttons);
        body["channel"] = json!(chat.id);
        body["unfurl_links"] = json!(false);
        body["unfurl_media"] = json!(false);
        if let Some(thread) = &chat.thread {
            body["thread_ts"] = json!(thread);
        }
        let reply = self
            .call("chat.postMessage", &self.bot_token, &body)
            .await?;
        let ts = reply["ts"]
            .as_str()
            .ok_or_else(|| Failure::Refused("chat.postMessage returned no ts".to_string()))?;
        Ok(Sent {
            chat: chat.clone(),
            id: ts.to_string(),
        })
    }

    async fn edit(&self, sent: &Sent, text: &str, buttons: &[Button]) -> Result<(), Failure> {
        let mut body = content(text, buttons);
        body["channel"] = json!(sent.chat.id);
        body["ts"] = json!(sent.id);
        self.call("chat.update", &self.bot_token, &body)
            .await
            .map(|_| ())
    }

    async fn typing(&self, _chat: &Chat) -> Result<(), Failure> {
        Ok(())
    }

    /// Slack itself needs nothing but the envelope's acknowledgement (sent
    /// once the runner took the press), and the question's edit shows the
    /// decision to everyone. The note goes to the presser alone as an
    /// ephemeral message, because a refused press (a stranger's, an
    /// expired question's) changes nothing anyone would see otherwise.
    async fn answer(&self, press: &Press, note: &str) -> Result<(), Failure> {
        let mut body = json!({
            "channel": press.chat.id,
            "user": press.user,
            "text": escape(note),
        });
        if let Some(thread) = &press.chat.thread {
            body["thread_ts"] = json!(thread);
        }
        self.call("chat.postEphemeral", &self.bot_token, &body)
            .await
            .map(|_| ())
    }

    async fn webhook(&self, request: WebhookRequest) -> WebhookResponse {
        if self.signing_secret.is_none() {
            return WebhookResponse::new(404, "not found");
        }
        if request.method != axum::http::Method::POST {
            return WebhookResponse::new(405, "method not allowed");
        }
        let now = (crate::gateway::frames::now_ms() / 1000) as i64;
        if !self.signed(&request, now) {
            return WebhookResponse::new(401, "unauthorized");
        }
        let form = request
            .headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        let body: Option<Value> = if form {
            url::form_urlencoded::parse(&request.body)
                .find(|(name, _)| name == "payload")
                .and_then(|(_, payload)| serde_json::from_str(&payload).ok())
        } else {
            serde_json::from_slice(&request.body).ok()
        };
        let Some(body) = body else {
            return WebhookResponse::new(400, "the body is not a Slack request");
        };
        if body["type"] == "url_verification" {
            let challenge = body["challenge"].as_str().unwrap_or_default();
            return WebhookResponse::json(200, &json!({"challenge": challenge}));
        }
        let item = if form {
            interaction_item(&body)
        } else {
            let me = match self.me().await {
                Ok(me) => me,
                Err(_) => return WebhookResponse::new(503, "not ready"),
            };
            event_item(&body, &me)
        };
        if item.is_none() {
            return WebhookResponse::new(200, "");
        }
        let deliveries = self.deliveries.lock().clone();
        let Some(deliveries) = deliveries else {
            // Not started yet: Slack tries again.
            return WebhookResponse::new(503, "not ready");
        };
        match self.hand(item, &deliveries).await {
            Handed::Now => WebhookResponse::new(200, ""),
            Handed::Closed => WebhookResponse::new(503, "shutting down"),
            // 200 once the gateway took it, or at Slack's deadline (the
            // same trade as Socket Mode's acknowledgement).
            Handed::Taking(taken) => {
                let _ = tokio::time::timeout(ACK_WAIT, taken).await;
                WebhookResponse::new(200, "")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::channels::ChatKind;
    use pretty_assertions::assert_eq;

    fn me() -> Me {
        Me {
            user: "UBOT".into(),
            bot: Some("BBOT".into()),
        }
    }

    fn callback(event: Value) -> Value {
        json!({"token": "x", "team_id": "T1", "api_app_id": "A1", "event": event,
               "type": "event_callback", "event_id": "Ev1", "event_time": 1})
    }

    fn message_of(item: Option<Item>) -> (String, Message) {
        match item {
            Some(Item {
                key,
                incoming: Incoming::Message(m),
            }) => (key, m),
            other => panic!("not a message: {other:?}"),
        }
    }

    #[test]
    fn a_direct_message_is_a_dm_addressed_to_the_bot() {
        let body = callback(
            json!({"type": "message", "channel": "D024BE91L", "user": "U2147483697",
            "text": "Hello &amp; &lt;b&gt;", "ts": "1355517523.000005", "event_ts": "1355517523.000005",
            "channel_type": "im", "user_profile": {"display_name": "", "real_name": "Ana"}}),
        );
        let (key, message) = message_of(event_item(&body, &me()));
        assert_eq!(key, "m:D024BE91L:1355517523.000005");
        assert_eq!(
            message,
            Message {
                chat: Chat::dm("D024BE91L"),
                user: "U2147483697".into(),
                name: Some("Ana".into()),
                text: "Hello & <b>".into(),
                id: "1355517523.000005".into(),
                mentioned: true,
            }
        );
    }

    #[test]
    fn a_channel_message_is_addressed_only_by_a_mention_which_is_cut_out() {
        let mention = callback(json!({"type": "message", "channel": "C1", "user": "U1",
            "text": "<@UBOT> run  the tests <@UBOT|pincer>", "ts": "2.0", "channel_type": "channel"}));
        let (key, message) = message_of(event_item(&mention, &me()));
        assert_eq!(key, "m:C1:2.0");
        assert_eq!(
            (message.chat, message.text.as_str(), message.mentioned),
            (Chat::group("C1"), "run the tests", true)
        );
        let app_mention = callback(json!({"type": "app_mention", "channel": "C1", "user": "U1",
            "text": "<@UBOT> run the tests", "ts": "2.0", "event_ts": "2.0"}));
        let (key, message) = message_of(event_item(&app_mention, &me()));
        // The same post by both subscriptions: the same key.
        assert_eq!((key.as_str(), message.mentioned), ("m:C1:2.0", true));
        let other = callback(json!({"type": "message", "channel": "C1", "user": "U1",
            "text": "<@UOTHER> hi", "ts": "3.0", "channel_type": "channel"}));
        let (_, message) = message_of(event_item(&other, &me()));
        assert_eq!(
            (message.mentioned, message.text.as_str()),
            (false, "<@UOTHER> hi")
        );
    }

    #[test]
    fn a_thread_reply_is_the_thread_s_chat() {
        let body = callback(json!({"type": "message", "channel": "C1", "user": "U1",
            "text": "<@UBOT> and this?", "ts": "5.0", "thread_ts": "4.0", "channel_type": "channel"}));
        let (_, message) = message_of(event_item(&body, &me()));
        assert_eq!(message.chat, Chat::thread("C1", "4.0"));
        assert_eq!(message.chat.kind, ChatKind::Thread);
        // A reply in a thread the bot started addresses it.
        let body = callback(json!({"type": "message", "channel": "C1", "user": "U1",
            "text": "more", "ts": "6.0", "thread_ts": "4.0", "parent_user_id": "UBOT",
            "channel_type": "channel"}));
        assert!(message_of(event_item(&body, &me())).1.mentioned);
    }

    #[test]
    fn bots_edits_own_posts_and_other_events_are_not_for_the_agent() {
        for event in [
            json!({"type": "message", "subtype": "bot_message", "channel": "D1", "bot_id": "B9", "text": "hi", "ts": "1.0", "channel_type": "im"}),
            json!({"type": "message", "channel": "D1", "user": "U1", "bot_id": "B9", "text": "hi", "ts": "1.0", "channel_type": "im"}),
            json!({"type": "message", "channel": "D1", "user": "UBOT", "text": "hi", "ts": "1.0", "channel_type": "im"}),
            json!({"type": "message", "subtype": "message_changed", "hidden": true, "channel": "D1", "ts": "1.0", "channel_type": "im", "message": {"user": "U1", "text": "x"}}),
            json!({"type": "message", "subtype": "channel_join", "channel": "C1", "user": "U1", "text": "joined", "ts": "1.0"}),
            json!({"type": "message", "channel": "D1", "user": "U1", "text": "x", "ts": "1.0", "edited": {"user": "U1", "ts": "2.0"}}),
            json!({"type": "reaction_added", "user": "U1", "reaction": "eyes"}),
            json!({"type": "message", "channel": "D1", "text": "no user", "ts": "1.0"}),
        ] {
            assert_eq!(event_item(&callback(event.clone()), &me()), None, "{event}");
        }
        assert_eq!(
            event_item(
                &json!({"type": "url_verification", "challenge": "c"}),
                &me()
            ),
            None
        );
    }

    #[test]
    fn envelopes_carry_events_and_button_presses() {
        let press = json!({"type": "block_actions", "user": {"id": "U1", "username": "ana", "team_id": "T1"},
            "api_app_id": "A1", "trigger_id": "t", "response_url": "https://hooks.slack.com/actions/1",
            "container": {"type": "message", "message_ts": "9.0", "channel_id": "C1", "is_ephemeral": false},
            "channel": {"id": "C1", "name": "general"},
            "message": {"type": "message", "ts": "9.0", "thread_ts": "8.0", "text": "q"},
            "actions": [{"action_id": "ap:x:deny", "block_id": "b", "value": "ap:x:deny",
                         "type": "button", "action_ts": "10.0"}]});
        let envelope = json!({"envelope_id": "e1", "type": "interactive", "payload": press,
            "accepts_response_payload": false});
        let Some(Item {
            key,
            incoming: Incoming::Press(p),
        }) = envelope_item(&envelope, &me())
        else {
            panic!("not a press")
        };
        assert_eq!(key, "p:C1:9.0:U1:10.0");
        assert_eq!(
            p,
            Press {
                chat: Chat::thread("C1", "8.0"),
                user: "U1".into(),
                data: "ap:x:deny".into(),
                handle: "https://hooks.slack.com/actions/1".into(),
                message: Some(Sent {
                    chat: Chat::thread("C1", "8.0"),
                    id: "9.0".into()
                }),
            }
        );
        let events = json!({"envelope_id": "e2", "type": "events_api", "retry_attempt": 1,
            "retry_reason": "timeout", "accepts_response_payload": false,
            "payload": callback(json!({"type": "message", "channel": "D1", "user": "U1",
                "text": "hi", "ts": "1.0", "channel_type": "im"}))});
        assert_eq!(message_of(envelope_item(&events, &me())).0, "m:D1:1.0");
        let command =
            json!({"envelope_id": "e3", "type": "slash_commands", "payload": {"command": "/x"}});
        assert_eq!(envelope_item(&command, &me()), None);
    }

    fn signed_headers(secret: &str, timestamp: &str, body: &[u8]) -> axum::http::HeaderMap {
        let hex = crate::gateway::channels::http::hmac_sha256_hex(
            secret.as_bytes(),
            &[format!("v0:{timestamp}:").as_bytes(), body],
        );
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("x-slack-request-timestamp", timestamp.parse().unwrap());
        headers.insert("x-slack-signature", format!("v0={hex}").parse().unwrap());
        headers
    }

    #[test]
    fn a_request_is_taken_only_signed_with_the_secret_and_fresh() {
        let body = br#"{"type":"event_callback"}"#;
        let now = 1_700_000_000;
        let good = signed_headers("s3cret", "1700000000", body);
        assert!(verify("s3cret", &good, body, now));
        assert!(verify("s3cret", &good, body, now + 300));
        assert!(!verify("s3cret", &good, body, now + 301), "stale");
        assert!(!verify("s3cret", &good, body, now - 301), "from the future");
        assert!(!verify("other", &good, body, now), "another secret");
        assert!(!verify("s3cret", &good, b"{}", now), "another body");
        let mut missing = good.clone();
        missing.remove("x-slack-signature");
        assert!(!verify("s3cret", &missing, body, now));
        let mut no_time = good.clone();
        no_time.remove("x-slack-request-timestamp");
        assert!(!verify("s3cret", &no_time, body, now));
        // A signature for another timestamp does not pass with this one.
        let mut moved = signed_headers("s3cret", "1700000100", body);
        moved.insert("x-slack-request-timestamp", "1700000000".parse().unwrap());
        assert!(!verify("s3cret", &moved, body, now));
    }

    #[test]
    fn errors_map_to_what_the_runner_does_about_them() {
        let wait = Some(Duration::from_secs(7));
        assert_eq!(
            failure("chat.postMessage", "ratelimited", 429, wait),
            Failure::RateLimited(Duration::from_secs(7))
        );
        assert_eq!(
            failure("chat.update", "ratelimited", 200, None),
            Failure::RateLimited(Duration::from_secs(30))
        );
        for error in [
            "invalid_auth",
            "not_authed",
            "account_inactive",
            "token_revoked",
        ] {
            assert!(
                matches!(failure("auth.test", error, 200, None), Failure::Fatal(_)),
                "{error}"
            );
        }
        assert!(matches!(
            failure("chat.update", "internal_error", 200, None),
            Failure::Transient(_)
        ));
        assert_eq!(
            failure("chat.update", "message_not_found", 200, None),
            Failure::Refused("Slack chat.update: message_not_found".into())
        );
    }

    #[test]
    fn a_message_is_markdown_in_a_block_with_buttons_beside_it() {
        let buttons = [
            Button {
                label: "Allow once".into(),
                data: "ap:1:allow-once".into(),
                danger: false,
            },
            Button {
                label: "Deny".into(),
                data: "ap:1:deny".into(),
                danger: true,
            },
        ];
        assert_eq!(
            content("**Run** `<!channel> & x`?", &buttons),
            json!({"text": "**Run** `&lt;!channel&gt; &amp; x`?", "blocks": [
                {"type": "markdown", "text": "**Run** `<!channel> & x`?"},
                {"type": "actions", "elements": [
                    {"type": "button", "text": {"type": "plain_text", "text": "Allow once"},
                     "action_id": "ap:1:allow-once", "value": "ap:1:allow-once"},
                    {"type": "button", "text": {"type": "plain_text", "text": "Deny"},
                     "action_id": "ap:1:deny", "value": "ap:1:deny", "style": "danger"}]}]})
        );
        let long = "é".repeat(MAX_FALLBACK + 5);
        let text = content(&long, &[])["text"].as_str().unwrap().to_string();
        assert_eq!(text.chars().count(), MAX_FALLBACK + 1);
    }

    fn slack(dir: &std::path::Path) -> Slack {
        let config = SlackConfig {
            api_url: Some("http://127.0.0.1:9".into()),
            ..Default::default()
        };
        let env = |k: &str| match k {
            "SLACK_BOT_TOKEN" => Some("xoxb-1".to_string()),
            "SLACK_APP_TOKEN" => Some("xapp-1".to_string()),
            _ => None,
        };
        Slack::new(&config, &env, dir).unwrap()
    }

    fn item(ts: &str) -> Option<Item> {
        Some(Item {
            key: format!("m:D1:{ts}"),
            incoming: Incoming::Message(Message {
                chat: Chat::dm("D1"),
                user: "U1".into(),
                name: None,
                text: "hi".into(),
                id: ts.into(),
                mentioned: true,
            }),
        })
    }

    #[tokio::test]
    async fn the_acknowledgement_waits_for_the_runner_up_to_slack_s_deadline() {
        // Slack's deadline is ACK_WAIT; a shorter one keeps the test quick
        // (and long enough that a loaded machine still answers within it).
        let deadline = Duration::from_secs(1);
        let dir = tempfile::tempdir().unwrap();
        let slack = slack(dir.path());
        let (tx, mut rx) = mpsc::channel(8);
        let (acks, mut acked) = mpsc::channel(8);
        let started = std::time::Instant::now();
        for ts in ["1.0", "2.0"] {
            let Handed::Taking(taken) = slack.hand(item(ts), &tx).await else {
                panic!("not handed")
            };
            tokio::spawn(acknowledge(taken, format!("e{ts}"), acks.clone(), deadline));
        }
        let mut first = rx.recv().await.unwrap();
        let _second = rx.recv().await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(acked.try_recv().is_err(), "acknowledged before taken");
        first.finish();
        assert_eq!(acked.recv().await.as_deref(), Some("e1.0"));
        assert!(started.elapsed() < deadline, "not acknowledged when taken");
        // The runner never takes the second: acknowledged at the deadline
        // all the same, so that Slack does not count the app as failing.
        assert_eq!(acked.recv().await.as_deref(), Some("e2.0"));
        assert!(started.elapsed() >= deadline);
    }

    #[tokio::test]
    async fn an_envelope_is_acknowledged_once_taken_and_remembered_across_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let first = slack(dir.path());
        let (tx, mut rx) = mpsc::channel(8);
        let Handed::Taking(mut taken) = first.hand(item("1.0"), &tx).await else {
            panic!("not handed")
        };
        let mut delivery = rx.recv().await.unwrap();
        // Not acknowledged while the runner has not taken it…
        tokio::task::yield_now().await;
        assert!(taken.try_recv().is_err());
        // …and a redelivery meanwhile is not handed twice.
        assert!(matches!(first.hand(item("1.0"), &tx).await, Handed::Now));
        delivery.finish();
        assert_eq!(taken.await, Ok(true));
        assert!(matches!(first.hand(item("1.0"), &tx).await, Handed::Now));
        // A gateway started later knows it too; a new message it hands.
        let second = slack(dir.path());
        assert!(matches!(second.hand(item("1.0"), &tx).await, Handed::Now));
        assert!(matches!(
            second.hand(item("2.0"), &tx).await,
            Handed::Taking(_)
        ));
        // One the runner dropped untaken is handed again when redelivered.
        let mut delivery = rx.recv().await.unwrap();
        delivery.done.take();
        tokio::task::yield_now().await;
        assert!(matches!(
            second.hand(item("2.0"), &tx).await,
            Handed::Taking(_)
        ));
        assert!(matches!(second.hand(None, &tx).await, Handed::Now));
    }
}
