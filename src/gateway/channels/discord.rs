//! Discord: the gateway websocket (v10, JSON) for what users write and the
//! buttons they press, and REST (`{api_url}/channels/...`) for replies,
//! streamed edits, typing and answers to button presses.
//!
//! Hand-written on reqwest and tokio-tungstenite rather than serenity or
//! twilight: pincer needs five REST calls and one shard, an `api_url` and a
//! `gateway_url` that can point anywhere (a test's mock), and the sequence
//! number stored only after the gateway took each dispatch, which a
//! framework's event loop hides. The wire facts (opcodes, close codes,
//! intents, callback types) follow Discord's developer documentation.
//!
//! What survives a restart: the gateway session (its id, resume URL and the
//! last sequence number the runner took) is kept in the data dir. On a
//! successful Resume, Discord replays every dispatch after that sequence
//! number and then sends RESUMED, so nothing written while pincer was down
//! is lost, as long as the session is still resumable (Discord keeps it a
//! few minutes after the connection drops; it says Invalid Session
//! otherwise, and what was written before the new Identify is not
//! replayed).

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::http::{Backoff, client, network, retry_after};
use super::{
    Button, Chat, ChatKind, Deliveries, Delivery, Failure, Incoming, Limits, Measure, Message,
    Platform, Press, Sent,
};
use crate::config::channels::DiscordConfig;

/// GUILD_MESSAGES (1 << 9) | DIRECT_MESSAGES (1 << 12) | MESSAGE_CONTENT
/// (1 << 15, privileged: enabled in the Developer Portal, else close 4014).
pub const INTENTS: u64 = 37376;

/// The close code pincer uses when it means to resume: 1000 and 1001 end
/// the session (the docs: any other code keeps it resumable).
const RESUMABLE_CLOSE: u16 = 4000;

/// Longest wait for the socket to open and for Hello.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections to a session's resume URL that may fail in a row before
/// the session is given up.
const MAX_FAILED_RESUMES: u32 = 3;

/// Largest gateway frame taken (a READY of a big bot is a few MB).
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Whether a close code means the channel cannot work: no reconnect.
fn fatal_close(code: u16) -> Option<&'static str> {
    match code {
        4004 => Some(
            "Discord refused the bot token (close 4004, authentication failed): check the token in [channels.discord] (token_env or token_file)",
        ),
        4010 => Some("Discord refused the shard (close 4010, invalid shard)"),
        4011 => {
            Some("Discord requires sharding for this bot (close 4011); pincer runs one shard only")
        }
        4012 => Some("Discord refused the API version (close 4012); pincer speaks v10"),
        4013 => Some("Discord refused the intents (close 4013, invalid intents)"),
        4014 => Some(
            "Discord refused the intents (close 4014, disallowed intents): enable the Message Content intent for the bot in the Developer Portal",
        ),
        _ => None,
    }
}

/// Close codes after which the session cannot be resumed: identify anew.
fn new_session_close(code: u16) -> bool {
    matches!(code, 4003 | 4007 | 4009)
}

/// The gateway session, as kept between connections and restarts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Session {
    session_id: String,
    resume_url: String,
    /// The last sequence number: received (in memory), or taken by the
    /// runner (on disk).
    seq: u64,
}

pub struct Discord {
    http: reqwest::Client,
    api: String,
    /// Never logged.
    token: String,
    gateway_url: Option<String>,
    edit_interval: Duration,
    /// Where the session is kept across restarts.
    session_file: PathBuf,
    session: Mutex<Option<Session>>,
    /// The bot's own user id (from READY).
    me: Mutex<Option<String>>,
    /// `GET /gateway/bot`'s URL, asked once.
    identify_url: Mutex<Option<String>>,
}

/// How one connection ended, when it did not fail for good.
#[derive(Debug, PartialEq)]
enum Ended {
    /// The runner is gone.
    Shutdown,
    /// Reconnect and resume (op 7, a zombie, a drop, op 9 `true`).
    Resume { healthy: bool, why: String },
    /// Reconnect and identify anew (op 9 `false`, 4007, 4009).
    Identify { why: String },
}

impl Discord {
    /// The channel `config` describes; errors name what is missing.
    pub fn new(
        config: &DiscordConfig,
        env: &dyn Fn(&str) -> Option<String>,
        data_dir: &std::path::Path,
    ) -> Result<Self, String> {
        let token = config.token().read(env)?;
        let session_file = data_dir
            .join("channels")
            .join("discord")
            .join("session.json");
        let session = std::fs::read(&session_file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Session>(&bytes).ok())
            .filter(|s| !s.session_id.is_empty() && !s.resume_url.is_empty());
        Ok(Self {
            http: client(),
            api: config.api_url().to_string(),
            token,
            gateway_url: config.gateway_url().map(|u| u.trim().to_string()),
            edit_interval: Duration::from_millis(config.edit_interval_ms.unwrap_or(1000).max(100)),
            session_file,
            session: Mutex::new(session),
            me: Mutex::new(None),
            identify_url: Mutex::new(None),
        })
    }

    /// One REST call; the JSON answer (`null` for 204).
    async fn rest(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.api))
            .header(
                reqwest::header::AUTHORIZATION,
                format!("Bot {}", self.token),
            )
            // Discord asks bots for this form of User-Agent.
            .header(
                reqwest::header::USER_AGENT,
                concat!(
                    "DiscordBot (https://github.com/pincer, ",
                    env!("CARGO_PKG_VERSION"),
                    ")"
                ),
            )
            .timeout(Duration::from_secs(30));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(network)?;
        let status = response.status();
        let header_wait = retry_after(response.headers());
        let bytes = response.bytes().await.map_err(network)?;
        let reply: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(reply);
        }
        let what = format!("Discord {method} {}", route(path));
        Err(failure(&what, status.as_u16(), header_wait, &reply))
    }

    /// Where to identify: the configured URL, else `GET /gateway/bot`'s
    /// (asked once: the docs say not to cache it for long, but within one
    /// run of the gateway is fine).
    async fn identify_url(&self) -> Result<String, Failure> {
        if let Some(url) = &self.gateway_url {
            return Ok(url.clone());
        }
        if let Some(url) = self.identify_url.lock().clone() {
            return Ok(url);
        }
        let reply = super::http::retrying("GET /gateway/bot", || {
            self.rest(reqwest::Method::GET, "/gateway/bot", None)
        })
        .await?;
        let url = reply["url"]
            .as_str()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| Failure::Transient("GET /gateway/bot returned no url".to_string()))?
            .to_string();
        *self.identify_url.lock() = Some(url.clone());
        Ok(url)
    }

    fn store_session(&self, session: Option<&Session>) {
        let result = match session {
            Some(session) => serde_json::to_vec(session)
                .map_err(std::io::Error::other)
                .and_then(|bytes| {
                    if let Some(dir) = self.session_file.parent() {
                        crate::config::trust::create_private_dir(dir)?;
                    }
                    crate::config::trust::write_private(&self.session_file, &bytes)
                }),
            None => match std::fs::remove_file(&self.session_file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
        };
        if let Err(e) = result {
            tracing::warn!(
                channel = "discord",
                "cannot store the Discord session in {}: {e}",
                self.session_file.display()
            );
        }
    }

    /// Forgets the session: the next connection identifies.
    fn forget_session(&self) {
        *self.session.lock() = None;
        self.store_session(None);
    }

    /// Connects, identifies or resumes, and hands what users write to
    /// `deliveries` until the connection ends.
    async fn connection(
        self: &Arc<Self>,
        deliveries: &Deliveries,
        keeper: &mpsc::UnboundedSender<Taken>,
    ) -> Result<Ended, Failure> {
        let resume = self.session.lock().clone();
        let url = match &resume {
            Some(session) => session.resume_url.clone(),
            None => self.identify_url().await?,
        };
        let address = gateway_address(&url);
        let mut socket = dial(&address).await?;

        // Hello comes first (an op 7 may come instead: reconnect).
        let hello = tokio::time::timeout(CONNECT_TIMEOUT, next_payload(&mut socket))
            .await
            .map_err(|_| Failure::Transient("the Discord gateway sent no Hello".to_string()))??;
        let interval = match hello["op"].as_u64() {
            Some(10) => hello["d"]["heartbeat_interval"]
                .as_u64()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
                .ok_or_else(|| Failure::Transient("a Hello without an interval".to_string()))?,
            Some(7) => {
                return Ok(Ended::Resume {
                    healthy: false,
                    why: "Reconnect before Hello".into(),
                });
            }
            _ => {
                return Err(Failure::Transient(format!(
                    "the Discord gateway began with op {} instead of Hello",
                    hello["op"]
                )));
            }
        };
        let mut seq = resume.as_ref().map(|s| s.seq);
        let opening = match &resume {
            Some(session) => json!({"op": 6, "d": {
                "token": self.token,
                "session_id": session.session_id,
                "seq": session.seq,
            }}),
            None => json!({"op": 2, "d": {
                "token": self.token,
                "intents": INTENTS,
                "properties": {"os": std::env::consts::OS, "browser": "pincer", "device": "pincer"},
            }}),
        };
        send(&mut socket, &opening).await?;

        // The first heartbeat after `interval * jitter`, then every
        // `interval`; an ACK must come between two of them.
        let mut next_beat = Instant::now() + interval.mul_f64(jitter());
        let mut acked = true;
        let mut ready = false;
        loop {
            let frame = tokio::select! {
                _ = deliveries.closed() => {
                    // Not 1000: a restarted gateway resumes this session.
                    close(&mut socket, RESUMABLE_CLOSE).await;
                    return Ok(Ended::Shutdown);
                }
                _ = tokio::time::sleep_until(next_beat) => {
                    if !acked {
                        close(&mut socket, RESUMABLE_CLOSE).await;
                        return Ok(Ended::Resume { healthy: ready, why: "no heartbeat ACK (a zombie connection)".into() });
                    }
                    if let Err(e) = send(&mut socket, &json!({"op": 1, "d": seq})).await {
                        return Ok(Ended::Resume { healthy: ready, why: e.to_string() });
                    }
                    acked = false;
                    next_beat = Instant::now() + interval;
                    continue;
                }
                frame = socket.next() => frame,
            };
            let text = match frame {
                Some(Ok(Frame::Text(text))) => text,
                Some(Ok(Frame::Close(close))) => {
                    let code = close.as_ref().map(|c| u16::from(c.code));
                    let reason = close
                        .as_ref()
                        .map(|c| c.reason.to_string())
                        .unwrap_or_default();
                    if let Some(why) = code.and_then(fatal_close) {
                        return Err(Failure::Fatal(why.to_string()));
                    }
                    return match code {
                        Some(code) if new_session_close(code) => Ok(Ended::Identify {
                            why: format!("closed with {code} {reason}"),
                        }),
                        _ => Ok(Ended::Resume {
                            healthy: ready,
                            why: format!("closed with {code:?} {reason}"),
                        }),
                    };
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    return Ok(Ended::Resume {
                        healthy: ready,
                        why: format!("the socket failed: {e}"),
                    });
                }
                None => {
                    return Ok(Ended::Resume {
                        healthy: ready,
                        why: "the socket closed".into(),
                    });
                }
            };
            let Ok(payload) = serde_json::from_str::<Value>(&text) else {
                tracing::debug!(channel = "discord", "a frame that is not JSON");
                continue;
            };
            match payload["op"].as_u64() {
                Some(0) => {
                    if let Some(s) = payload["s"].as_u64() {
                        seq = Some(s);
                    }
                    let kind = payload["t"].as_str().unwrap_or_default();
                    let data = &payload["d"];
                    match kind {
                        "READY" => {
                            let session = Session {
                                session_id: data["session_id"].as_str().unwrap_or_default().into(),
                                resume_url: data["resume_gateway_url"]
                                    .as_str()
                                    .unwrap_or(&url)
                                    .into(),
                                seq: seq.unwrap_or(0),
                            };
                            *self.me.lock() = data["user"]["id"].as_str().map(String::from);
                            *self.session.lock() = Some(session);
                            ready = true;
                        }
                        "RESUMED" => ready = true,
                        _ => {}
                    }
                    if let Some(session) = self.session.lock().as_mut()
                        && let Some(s) = seq
                    {
                        session.seq = s;
                    }
                    let me = self.me.lock().clone().unwrap_or_default();
                    let done = match incoming(kind, data, &me) {
                        Some(incoming) => {
                            let (delivery, done) = Delivery::new(incoming);
                            if deliveries.send(delivery).await.is_err() {
                                return Ok(Ended::Shutdown);
                            }
                            Some(done)
                        }
                        None => None,
                    };
                    if let (Some(s), Some(session)) =
                        (payload["s"].as_u64(), self.session.lock().clone())
                    {
                        let _ = keeper.send(Taken {
                            session: Session { seq: s, ..session },
                            done,
                        });
                    }
                }
                // The gateway asks for a heartbeat now.
                Some(1) => {
                    if let Err(e) = send(&mut socket, &json!({"op": 1, "d": seq})).await {
                        return Ok(Ended::Resume {
                            healthy: ready,
                            why: e.to_string(),
                        });
                    }
                }
                Some(7) => {
                    close(&mut socket, RESUMABLE_CLOSE).await;
                    return Ok(Ended::Resume {
                        healthy: ready,
                        why: "Discord asked to reconnect (op 7)".into(),
                    });
                }
                Some(9) => {
                    close(&mut socket, RESUMABLE_CLOSE).await;
                    return Ok(if payload["d"] == true {
                        Ended::Resume {
                            healthy: false,
                            why: "Invalid Session (resumable)".into(),
                        }
                    } else {
                        Ended::Identify {
                            why: "Invalid Session (op 9)".into(),
                        }
                    });
                }
                Some(11) => acked = true,
                _ => {}
            }
        }
    }

    /// Keeps the sequence number of each dispatch once the runner took it
    /// (and every one before it): what a restart resumes from.
    async fn keep(self: Arc<Self>, mut taken: mpsc::UnboundedReceiver<Taken>) {
        while let Some(item) = taken.recv().await {
            if let Some(done) = item.done {
                // Dropped: the runner is gone, and this one was not taken.
                if done.await.is_err() {
                    return;
                }
            }
            let current = self
                .session
                .lock()
                .as_ref()
                .map(|s| s.session_id == item.session.session_id)
                .unwrap_or(false);
            // In a burst, one write for the last of it.
            if current && taken.is_empty() {
                self.store_session(Some(&item.session));
            }
        }
    }

    fn channel_of(chat: &Chat) -> &str {
        // A thread is a channel of its own (see `chat_of`).
        chat.thread.as_deref().unwrap_or(&chat.id)
    }

    fn body(text: &str, buttons: &[Button]) -> Value {
        let rows: Vec<Value> = buttons
            .chunks(5)
            .map(|row| {
                let row: Vec<Value> = row
                    .iter()
                    .map(|b| {
                        json!({
                            "type": 2,
                            "style": if b.danger { 4 } else { 2 },
                            "label": b.label.chars().take(80).collect::<String>(),
                            "custom_id": b.data,
                        })
                    })
                    .collect();
                json!({"type": 1, "components": row})
            })
            .collect();
        json!({
            "content": text,
            "components": rows,
            // The agent's text never pings: no @everyone, @here, roles or
            // users, whatever it writes.
            "allowed_mentions": {"parse": []},
        })
    }
}

/// What a REST error answer means for the caller.
fn failure(what: &str, status: u16, header_wait: Option<Duration>, reply: &Value) -> Failure {
    let message = reply["message"].as_str().unwrap_or("no message");
    match status {
        // The body's `retry_after` (float seconds) is the precise one; the
        // `Retry-After` header rounds up.
        429 => Failure::RateLimited(
            reply["retry_after"]
                .as_f64()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(Duration::from_secs_f64)
                .or(header_wait)
                .unwrap_or(Duration::from_secs(1)),
        ),
        401 => Failure::Fatal(format!(
            "Discord refused the bot token ({what}: {message}); check the token in [channels.discord] (token_env or token_file)"
        )),
        500.. => Failure::Transient(format!("{what}: {status}")),
        // 403 (missing permissions), 404 (a channel or message gone), and
        // other refusals of this one request: the channel goes on.
        _ => Failure::Refused(format!("{what}: {status} {message}")),
    }
}

/// A dispatch handed on: its sequence number is kept once `done` fires.
struct Taken {
    session: Session,
    done: Option<tokio::sync::oneshot::Receiver<()>>,
}

/// A REST path without its ids, for messages (ids are not secret, but
/// interaction tokens are).
fn route(path: &str) -> String {
    if path.starts_with("/interactions/") {
        return "/interactions/{id}/{token}/callback".to_string();
    }
    path.split('/')
        .enumerate()
        .map(|(i, part)| {
            if i > 0 && part.bytes().any(|b| b.is_ascii_digit()) && part.len() > 8 {
                "{id}"
            } else {
                part
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A random factor in [0, 1) for the first heartbeat.
fn jitter() -> f64 {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// The websocket address of a gateway URL: version 10, JSON, no
/// compression.
fn gateway_address(url: &str) -> String {
    let url = url.trim();
    let base = url.split('?').next().unwrap_or(url).trim_end_matches('/');
    format!("{base}/?v=10&encoding=json")
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn dial(address: &str) -> Result<Socket, Failure> {
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME))
        .read_buffer_size(crate::gateway::client::READ_BUFFER);
    let connector = if address.starts_with("wss:") {
        Some(tokio_tungstenite::Connector::Rustls(tls_config()?))
    } else {
        Some(tokio_tungstenite::Connector::Plain)
    };
    let dialled = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio_tungstenite::connect_async_tls_with_config(address, Some(config), true, connector),
    )
    .await
    .map_err(|_| Failure::Transient("the Discord gateway did not answer".to_string()))?;
    let (socket, _) = dialled
        .map_err(|e| Failure::Transient(format!("cannot reach the Discord gateway: {e}")))?;
    Ok(socket)
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, Failure> {
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    if let Some(config) = CONFIG.get() {
        return Ok(config.clone());
    }
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Failure::Fatal(format!("TLS for the Discord gateway: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(CONFIG.get_or_init(|| Arc::new(config)).clone())
}

/// The next JSON payload (Hello), skipping pings.
async fn next_payload(socket: &mut Socket) -> Result<Value, Failure> {
    loop {
        match socket.next().await {
            Some(Ok(Frame::Text(text))) => {
                return serde_json::from_str(&text).map_err(|_| {
                    Failure::Transient("the Discord gateway sent a frame that is not JSON".into())
                });
            }
            Some(Ok(Frame::Close(close))) => {
                let code = close.as_ref().map(|c| u16::from(c.code)).unwrap_or(1005);
                return Err(match fatal_close(code) {
                    Some(why) => Failure::Fatal(why.to_string()),
                    None => Failure::Transient(format!("the Discord gateway closed with {code}")),
                });
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(Failure::Transient(format!("the Discord gateway: {e}"))),
            None => return Err(Failure::Transient("the Discord gateway closed".into())),
        }
    }
}

async fn send(socket: &mut Socket, payload: &Value) -> Result<(), Failure> {
    socket
        .send(Frame::Text(payload.to_string().into()))
        .await
        .map_err(|e| Failure::Transient(format!("sending to the Discord gateway: {e}")))
}

async fn close(socket: &mut Socket, code: u16) {
    let frame = CloseFrame {
        code: CloseCode::from(code),
        reason: "".into(),
    };
    let _ = tokio::time::timeout(
        Duration::from_secs(2),
        socket.send(Frame::Close(Some(frame))),
    )
    .await;
}

/// What pincer makes of a dispatch (none: nothing for the agent).
fn incoming(kind: &str, data: &Value, me: &str) -> Option<Incoming> {
    match kind {
        "MESSAGE_CREATE" => message(data, me).map(Incoming::Message),
        "INTERACTION_CREATE" => press(data).map(Incoming::Press),
        _ => None,
    }
}

/// The chat a message or an interaction is in. Without `guild_id` it is a
/// direct message. A thread is a channel of its own whose messages carry
/// its id as `channel_id`; it is told apart by `channel_type` (10, 11, 12:
/// announcement, public and private threads), which the gateway adds to
/// MESSAGE_CREATE, or by `position`, which only messages in threads have.
/// Its chat is `(guild, thread)`, so that its session key names both.
fn chat_of(channel: &str, guild: Option<&str>, channel_type: Option<u64>, in_thread: bool) -> Chat {
    match guild {
        None => Chat::dm(channel),
        Some(guild) => {
            let thread = match channel_type {
                Some(t) => matches!(t, 10..=12),
                None => in_thread,
            };
            if thread {
                Chat::thread(guild, channel)
            } else {
                Chat::group(channel)
            }
        }
    }
}

fn message(data: &Value, me: &str) -> Option<Message> {
    let author = &data["author"];
    let user = author["id"].as_str()?;
    // Bots (pincer itself among them) and webhooks never talk to the agent.
    if author["bot"] == true || user == me || data.get("webhook_id").is_some() {
        return None;
    }
    // DEFAULT and REPLY; joins, pins and the like are not for the agent.
    if !matches!(data["type"].as_u64(), Some(0) | Some(19) | None) {
        return None;
    }
    let content = data["content"].as_str()?;
    let chat = chat_of(
        data["channel_id"].as_str()?,
        data["guild_id"].as_str(),
        data["channel_type"].as_u64(),
        data.get("position").is_some(),
    );
    let mentioned = chat.kind == ChatKind::Dm
        || (!me.is_empty()
            && (data["mentions"]
                .as_array()
                .is_some_and(|m| m.iter().any(|u| u["id"] == me))
                || data["referenced_message"]["author"]["id"] == me));
    let text = if me.is_empty() {
        content.trim().to_string()
    } else {
        content
            .replace(&format!("<@{me}>"), "")
            .replace(&format!("<@!{me}>"), "")
            .trim()
            .to_string()
    };
    let name = data["member"]["nick"]
        .as_str()
        .or_else(|| author["global_name"].as_str())
        .or_else(|| author["username"].as_str())
        .map(String::from);
    Some(Message {
        chat,
        user: user.to_string(),
        name,
        text,
        id: data["id"].as_str()?.to_string(),
        mentioned,
    })
}

fn press(data: &Value) -> Option<Press> {
    // MESSAGE_COMPONENT only.
    if data["type"].as_u64() != Some(3) {
        return None;
    }
    // `member` in a guild, `user` in a direct message.
    let user = data["member"]["user"]["id"]
        .as_str()
        .or_else(|| data["user"]["id"].as_str())?;
    let channel = data["channel_id"]
        .as_str()
        .or_else(|| data["channel"]["id"].as_str())?;
    let chat = chat_of(
        channel,
        data["guild_id"].as_str(),
        data["channel"]["type"].as_u64(),
        data["message"].get("position").is_some(),
    );
    let id = data["id"].as_str()?;
    let token = data["token"].as_str()?;
    Some(Press {
        user: user.to_string(),
        data: data["data"]["custom_id"].as_str()?.to_string(),
        handle: format!("{id}/{token}"),
        message: data["message"]["id"].as_str().map(|id| Sent {
            chat: chat.clone(),
            id: id.to_string(),
        }),
        chat,
    })
}

#[async_trait::async_trait]
impl Platform for Discord {
    fn name(&self) -> &'static str {
        "discord"
    }

    fn limits(&self) -> Limits {
        Limits {
            max: 2000,
            measure: Measure::Chars,
            edit: Some(self.edit_interval),
            // "Generally bots should not use this route. However, if a bot
            // is responding to a command and expects the computation to
            // take a few seconds": it lasts 10 s.
            typing: Some(Duration::from_secs(8)),
            buttons: true,
        }
    }

    fn format(&self, markdown: &str) -> String {
        // Discord renders markdown itself.
        markdown.to_string()
    }

    fn exclusive(&self) -> bool {
        // Each connection to Discord's gateway gets every event.
        true
    }

    async fn receive(self: Arc<Self>, deliveries: Deliveries) -> Result<(), Failure> {
        let (keeper, taken) = mpsc::unbounded_channel();
        let _keeping = AbortOnDrop(tokio::spawn(self.clone().keep(taken)));
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let mut failed_resumes = 0;
        loop {
            let ended = match self.connection(&deliveries, &keeper).await {
                Ok(ended) => {
                    failed_resumes = 0;
                    ended
                }
                Err(Failure::Fatal(why)) => return Err(Failure::Fatal(why)),
                Err(failure) => {
                    // A resume URL that stays unreachable (kept from a
                    // run long ago, or a host gone) is given up for a new
                    // session at the gateway's URL.
                    if self.session.lock().is_some() {
                        failed_resumes += 1;
                        if failed_resumes >= MAX_FAILED_RESUMES {
                            failed_resumes = 0;
                            self.forget_session();
                        }
                    }
                    let wait = backoff.wait();
                    tracing::warn!(channel = "discord", error = %failure, wait_ms = wait.as_millis() as u64, "connecting failed; retrying");
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            match ended {
                Ended::Shutdown => return Ok(()),
                Ended::Resume { healthy, why } => {
                    tracing::info!(channel = "discord", "reconnecting to resume: {why}");
                    if healthy {
                        backoff.reset();
                    } else {
                        tokio::time::sleep(backoff.wait()).await;
                    }
                }
                Ended::Identify { why } => {
                    tracing::info!(channel = "discord", "starting a new session: {why}");
                    self.forget_session();
                    // The docs: wait a random 1 to 5 s before identifying
                    // again.
                    let wait = Duration::from_millis(1000 + (jitter() * 4000.0) as u64);
                    tokio::time::sleep(wait).await;
                }
            }
            if deliveries.is_closed() {
                return Ok(());
            }
        }
    }

    async fn send(&self, chat: &Chat, text: &str, buttons: &[Button]) -> Result<Sent, Failure> {
        let path = format!("/channels/{}/messages", Self::channel_of(chat));
        let message = self
            .rest(
                reqwest::Method::POST,
                &path,
                Some(&Self::body(text, buttons)),
            )
            .await?;
        let id = message["id"]
            .as_str()
            .ok_or_else(|| Failure::Refused("Discord returned a message without an id".into()))?;
        Ok(Sent {
            chat: chat.clone(),
            id: id.to_string(),
        })
    }

    async fn edit(&self, sent: &Sent, text: &str, buttons: &[Button]) -> Result<(), Failure> {
        let path = format!(
            "/channels/{}/messages/{}",
            Self::channel_of(&sent.chat),
            sent.id
        );
        self.rest(
            reqwest::Method::PATCH,
            &path,
            Some(&Self::body(text, buttons)),
        )
        .await
        .map(|_| ())
    }

    async fn typing(&self, chat: &Chat) -> Result<(), Failure> {
        let path = format!("/channels/{}/typing", Self::channel_of(chat));
        self.rest(reqwest::Method::POST, &path, None)
            .await
            .map(|_| ())
    }

    /// Type 6 (DEFERRED_UPDATE_MESSAGE): Discord stops showing the press
    /// as pending, and the question is edited by the runner (its text with
    /// the decision, without buttons) when the approval is settled, the
    /// one path that also covers answers from elsewhere and timeouts. Type
    /// 7 would write the same message from two places.
    async fn answer(&self, press: &Press, _note: &str) -> Result<(), Failure> {
        let path = format!("/interactions/{}/callback", press.handle);
        self.rest(reqwest::Method::POST, &path, Some(&json!({"type": 6})))
            .await
            .map(|_| ())
    }
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "1000000000000000099";

    fn create(extra: Value) -> Value {
        let mut data = json!({
            "id": "1300000000000000001", "channel_id": "1200000000000000001",
            "author": {"id": "1000000000000000001", "username": "alice", "global_name": "Alice", "discriminator": "0", "avatar": null},
            "content": "hello", "timestamp": "2026-11-24T21:00:00.000000+00:00", "edited_timestamp": null,
            "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
            "attachments": [], "embeds": [], "pinned": false, "type": 0, "flags": 0,
        });
        for (k, v) in extra.as_object().unwrap() {
            data[k] = v.clone();
        }
        data
    }

    fn message_of(data: Value) -> Message {
        match incoming("MESSAGE_CREATE", &data, ME) {
            Some(Incoming::Message(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_direct_message_is_a_dm_addressed_to_the_bot() {
        assert_eq!(
            message_of(create(json!({}))),
            Message {
                chat: Chat::dm("1200000000000000001"),
                user: "1000000000000000001".into(),
                name: Some("Alice".into()),
                text: "hello".into(),
                id: "1300000000000000001".into(),
                mentioned: true,
            }
        );
    }

    #[test]
    fn a_guild_message_needs_a_mention_or_a_reply_and_loses_the_mention() {
        let guild = json!({"guild_id": "1100000000000000001", "channel_type": 0,
            "member": {"nick": "Ali", "roles": []}});
        let plain = message_of(create(guild.clone()));
        assert_eq!(
            (plain.chat, plain.mentioned),
            (Chat::group("1200000000000000001"), false)
        );

        let mut mention = guild.clone();
        mention["content"] = json!(format!("<@{ME}> run the tests"));
        mention["mentions"] = json!([{"id": ME, "username": "pincer", "bot": true}]);
        let m = message_of(create(mention));
        assert_eq!(
            (m.text.as_str(), m.mentioned, m.name.as_deref()),
            ("run the tests", true, Some("Ali"))
        );

        let mut old_form = guild.clone();
        old_form["content"] = json!(format!("hey <@!{ME}>, hi"));
        old_form["mentions"] = json!([{"id": ME}]);
        assert_eq!(message_of(create(old_form)).text, "hey , hi");

        let mut reply = guild.clone();
        reply["type"] = json!(19);
        reply["message_reference"] = json!({"message_id": "5"});
        reply["referenced_message"] = json!({"id": "5", "author": {"id": ME, "bot": true}});
        assert!(message_of(create(reply)).mentioned);

        // Someone else mentioned, or @everyone: not addressed to pincer.
        let mut other = guild.clone();
        other["mentions"] = json!([{"id": "42"}]);
        other["mention_everyone"] = json!(true);
        assert!(!message_of(create(other)).mentioned);
    }

    #[test]
    fn a_thread_is_told_by_its_channel_type_or_position() {
        for extra in [
            json!({"guild_id": "11", "channel_type": 11}),
            json!({"guild_id": "11", "channel_type": 12}),
            json!({"guild_id": "11", "position": 3}),
        ] {
            let m = message_of(create(extra.clone()));
            assert_eq!(m.chat, Chat::thread("11", "1200000000000000001"), "{extra}");
            assert_eq!(Discord::channel_of(&m.chat), "1200000000000000001");
            assert_eq!(
                m.chat.key("discord"),
                "discord:thread:11:1200000000000000001"
            );
        }
        let m = message_of(create(json!({"guild_id": "11", "channel_type": 0})));
        assert_eq!(m.chat.key("discord"), "discord:group:1200000000000000001");
    }

    #[test]
    fn bots_webhooks_itself_and_system_messages_are_not_for_the_agent() {
        for extra in [
            json!({"author": {"id": "7", "username": "other", "bot": true}}),
            json!({"author": {"id": ME, "username": "pincer"}}),
            json!({"webhook_id": "9"}),
            json!({"type": 7}),
            json!({"content": null}),
        ] {
            assert_eq!(
                incoming("MESSAGE_CREATE", &create(extra.clone()), ME),
                None,
                "{extra}"
            );
        }
        assert_eq!(incoming("TYPING_START", &create(json!({})), ME), None);
    }

    #[test]
    fn a_button_press_names_its_chat_user_data_and_handle() {
        let guild = json!({"id": "1400000000000000001", "application_id": ME, "type": 3,
            "token": "aW50ZXJhY3Rpb24", "version": 1, "channel_id": "1200000000000000001",
            "guild_id": "1100000000000000001", "channel": {"id": "1200000000000000001", "type": 0},
            "member": {"user": {"id": "1000000000000000001", "username": "alice"}, "roles": []},
            "data": {"custom_id": "ap:7f3a:allow-once", "component_type": 2},
            "message": {"id": "1300000000000000007", "channel_id": "1200000000000000001"}});
        let Some(Incoming::Press(p)) = incoming("INTERACTION_CREATE", &guild, ME) else {
            panic!()
        };
        let chat = Chat::group("1200000000000000001");
        assert_eq!(
            p,
            Press {
                chat: chat.clone(),
                user: "1000000000000000001".into(),
                data: "ap:7f3a:allow-once".into(),
                handle: "1400000000000000001/aW50ZXJhY3Rpb24".into(),
                message: Some(Sent {
                    chat,
                    id: "1300000000000000007".into()
                }),
            }
        );
        let mut dm = guild.clone();
        dm.as_object_mut().unwrap().remove("guild_id");
        dm.as_object_mut().unwrap().remove("member");
        dm["user"] = json!({"id": "5"});
        dm["channel"]["type"] = json!(1);
        let Some(Incoming::Press(p)) = incoming("INTERACTION_CREATE", &dm, ME) else {
            panic!()
        };
        assert_eq!(
            (p.chat, p.user.as_str()),
            (Chat::dm("1200000000000000001"), "5")
        );
        // A slash command (type 2) is not a press.
        let mut command = guild;
        command["type"] = json!(2);
        assert_eq!(incoming("INTERACTION_CREATE", &command, ME), None);
    }

    #[test]
    fn buttons_are_an_action_row_and_nothing_pings() {
        let body = Discord::body(
            "@everyone look",
            &[
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
            ],
        );
        assert_eq!(
            body,
            json!({"content": "@everyone look", "allowed_mentions": {"parse": []},
                "components": [{"type": 1, "components": [
                    {"type": 2, "style": 2, "label": "Allow once", "custom_id": "ap:1:allow-once"},
                    {"type": 2, "style": 4, "label": "Deny", "custom_id": "ap:1:deny"}]}]})
        );
        assert_eq!(Discord::body("x", &[])["components"], json!([]));
    }

    #[test]
    fn close_codes_sort_into_fatal_new_session_and_resume() {
        for code in [4004, 4010, 4011, 4012, 4013, 4014] {
            assert!(fatal_close(code).is_some(), "{code}");
        }
        for code in [1000, 1001, 4000, 4001, 4002, 4003, 4005, 4007, 4008, 4009] {
            assert!(fatal_close(code).is_none(), "{code}");
        }
        assert!(new_session_close(4007) && new_session_close(4009));
        assert!(!new_session_close(4000));
        assert_eq!(INTENTS, (1 << 9) | (1 << 12) | (1 << 15));
    }

    #[test]
    fn rest_errors_become_rate_limits_refusals_and_fatal_failures() {
        let limited =
            json!({"message": "You are being rate limited.", "retry_after": 0.25, "global": false});
        assert_eq!(
            failure("x", 429, Some(Duration::from_secs(1)), &limited),
            Failure::RateLimited(Duration::from_millis(250))
        );
        // Without the body's field, the header.
        assert_eq!(
            failure("x", 429, Some(Duration::from_secs(3)), &Value::Null),
            Failure::RateLimited(Duration::from_secs(3))
        );
        let unauthorized = json!({"message": "401: Unauthorized", "code": 0});
        assert!(
            matches!(failure("x", 401, None, &unauthorized), Failure::Fatal(why) if why.contains("[channels.discord]"))
        );
        let missing = json!({"message": "Missing Access", "code": 50001});
        assert_eq!(
            failure("Discord POST /channels/{id}/messages", 403, None, &missing),
            Failure::Refused("Discord POST /channels/{id}/messages: 403 Missing Access".into())
        );
        assert!(matches!(
            failure("x", 404, None, &Value::Null),
            Failure::Refused(_)
        ));
        assert!(matches!(
            failure("x", 502, None, &Value::Null),
            Failure::Transient(_)
        ));
    }

    #[test]
    fn gateway_addresses_ask_for_v10_json() {
        assert_eq!(
            gateway_address("wss://gateway.discord.gg"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            gateway_address("ws://127.0.0.1:5/gw/?v=9"),
            "ws://127.0.0.1:5/gw/?v=10&encoding=json"
        );
        assert_eq!(
            route("/interactions/1400000000000000001/secret-token/callback"),
            "/interactions/{id}/{token}/callback"
        );
        assert_eq!(
            route("/channels/1200000000000000001/messages"),
            "/channels/{id}/messages"
        );
    }
}
