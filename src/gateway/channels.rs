//! Chat channels (Telegram, Slack, Discord, WhatsApp) bridged to the
//! gateway's sessions.
//!
//! Each channel is a [`Platform`]: the platform's own I/O only (receiving
//! by long polling, a websocket or a webhook; sending, editing, typing).
//! Everything else is shared and lives in [`runner`]: each channel is an
//! in-process client of the gateway, with a connection of its own, that
//! sends what users write with `chat.send` (so queue modes, idempotency and
//! approvals behave exactly as for any other client) and turns the events
//! of its sessions into messages. Around it: who may use a channel
//! ([`access`]: the allow-list and pairing codes), cutting a long reply
//! into messages the platform accepts ([`split`]) and the agent's markdown
//! in each platform's markup ([`format`]).

pub mod access;
pub mod discord;
pub mod format;
pub mod http;
pub mod runner;
pub mod slack;
pub mod split;
pub mod telegram;
pub mod whatsapp;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

pub use split::Measure;

/// What kind of conversation a chat is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChatKind {
    /// A direct message with one user.
    Dm,
    /// A group or channel.
    Group,
    /// A thread inside a group (or a forum topic).
    Thread,
}

impl ChatKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dm => "dm",
            Self::Group => "group",
            Self::Thread => "thread",
        }
    }
}

/// A conversation on a platform.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Chat {
    pub kind: ChatKind,
    /// The platform's id of the conversation: Telegram's chat id, Slack's
    /// or Discord's channel id, WhatsApp's phone number.
    pub id: String,
    /// The thread inside it (Telegram's topic, Slack's `thread_ts`), when
    /// `kind` is [`ChatKind::Thread`].
    pub thread: Option<String>,
}

impl Chat {
    pub fn dm(id: impl Into<String>) -> Self {
        Self {
            kind: ChatKind::Dm,
            id: id.into(),
            thread: None,
        }
    }

    pub fn group(id: impl Into<String>) -> Self {
        Self {
            kind: ChatKind::Group,
            id: id.into(),
            thread: None,
        }
    }

    pub fn thread(id: impl Into<String>, thread: impl Into<String>) -> Self {
        Self {
            kind: ChatKind::Thread,
            id: id.into(),
            thread: Some(thread.into()),
        }
    }

    /// The gateway session key of this chat on `channel`:
    /// `<channel>:<kind>:<id>`, and `:<thread>` for a thread.
    pub fn key(&self, channel: &str) -> String {
        match &self.thread {
            Some(thread) => format!("{channel}:{}:{}:{thread}", self.kind.as_str(), self.id),
            None => format!("{channel}:{}:{}", self.kind.as_str(), self.id),
        }
    }

    /// The channel whose chat a session key names, if it names one
    /// (`telegram:dm:42` is Telegram's).
    pub fn channel_of(key: &str) -> Option<&str> {
        let (channel, _) = key.split_once(':')?;
        Self::from_key(channel, key).map(|_| channel)
    }

    /// The chat a session key names on `channel`, if it names one.
    pub fn from_key(channel: &str, key: &str) -> Option<Self> {
        let rest = key.strip_prefix(channel)?.strip_prefix(':')?;
        let (kind, rest) = rest.split_once(':')?;
        let kind = match kind {
            "dm" => ChatKind::Dm,
            "group" => ChatKind::Group,
            "thread" => ChatKind::Thread,
            _ => return None,
        };
        if rest.is_empty() {
            return None;
        }
        match kind {
            ChatKind::Thread => {
                let (id, thread) = rest.rsplit_once(':')?;
                (!id.is_empty() && !thread.is_empty()).then(|| Self::thread(id, thread))
            }
            _ => Some(Self {
                kind,
                id: rest.to_string(),
                thread: None,
            }),
        }
    }
}

/// A message a user wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub chat: Chat,
    /// The platform's id of the author.
    pub user: String,
    /// The author's name, to show the owner when they pair.
    pub name: Option<String>,
    pub text: String,
    /// Unique on the channel (with the chat when ids are per chat): what
    /// makes a redelivered message a duplicate.
    pub id: String,
    /// The message addresses the bot: a direct message, a mention, a reply
    /// to one of its messages, or a command.
    pub mentioned: bool,
}

/// A button pressed under one of pincer's messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Press {
    pub chat: Chat,
    pub user: String,
    /// The button's data, as given in [`Button::data`].
    pub data: String,
    /// The platform's handle of the press, to answer it (Telegram's
    /// callback query id, Discord's interaction id and token, Slack's
    /// response URL); opaque to the runner.
    pub handle: String,
    /// The message the button was under, when the platform says.
    pub message: Option<Sent>,
}

/// Something received.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    Message(Message),
    Press(Press),
}

/// A received item handed to the runner. `done` is answered once the
/// runner has dealt with it (the gateway accepted the message, or it was
/// refused or a duplicate): only then may the platform side forget it
/// (store Telegram's offset, acknowledge Slack's envelope), so that nothing
/// is lost when the gateway stops in between.
#[derive(Debug)]
pub struct Delivery {
    pub incoming: Incoming,
    pub done: Option<oneshot::Sender<()>>,
}

impl Delivery {
    pub fn new(incoming: Incoming) -> (Self, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (
            Self {
                incoming,
                done: Some(tx),
            },
            rx,
        )
    }

    fn finish(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

/// Where a platform puts what it receives.
pub type Deliveries = mpsc::Sender<Delivery>;

/// A button under a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Button {
    pub label: String,
    /// Given back in [`Press::data`]; at most 64 bytes (Telegram's limit).
    pub data: String,
    /// Shown as the dangerous choice where the platform can (a red button).
    pub danger: bool,
}

/// A message pincer sent, to edit it later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    pub chat: Chat,
    pub id: String,
}

/// What a platform accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest message, in `measure`'s units, after formatting.
    pub max: usize,
    pub measure: Measure,
    /// Least time between two edits of a streamed reply; `None`: messages
    /// cannot be edited, so replies are sent whole.
    pub edit: Option<Duration>,
    /// How often a typing indicator is renewed; `None`: the platform has
    /// none.
    pub typing: Option<Duration>,
    /// Messages can carry buttons; without, an approval is answered by
    /// replying with its number.
    pub buttons: bool,
}

/// How a platform call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// Told to wait (HTTP 429 and its retry-after).
    #[error("rate limited for {0:?}")]
    RateLimited(Duration),
    /// Worth trying again: the network, a 5xx, a dropped socket.
    #[error("{0}")]
    Transient(String),
    /// This request was refused (a message gone, a chat not found); the
    /// channel goes on.
    #[error("{0}")]
    Refused(String),
    /// The channel cannot work (a bad token, missing permissions): it
    /// stops, and says why.
    #[error("{0}")]
    Fatal(String),
}

/// `<data dir>/channels/access.json`: who may use the channels besides
/// the users each channel's `allow` names.
pub fn access_file(data_dir: &std::path::Path) -> std::path::PathBuf {
    data_dir.join("channels").join("access.json")
}

/// The largest webhook body taken (platforms send a few KB).
pub const WEBHOOK_MAX_BODY: usize = 1024 * 1024;

/// The channels `config` turns on, each with its settings. A channel that
/// cannot start (a token missing) is left out with a line on stderr: one
/// broken channel never stops the others or the gateway.
pub fn build(
    config: &crate::config::channels::ChannelsConfig,
    env: &dyn Fn(&str) -> Option<String>,
    data_dir: &std::path::Path,
) -> Built {
    let mut platforms: Vec<(Arc<dyn Platform>, runner::Settings)> = Vec::new();
    let failures = std::cell::RefCell::new(Vec::new());
    let failed = |name: &'static str, why: String| {
        crate::gateway::eprintln_log(&format!("channel {name} not started: {why}"));
        failures.borrow_mut().push((name, why));
    };
    if let Some(telegram) = &config.telegram
        && telegram.enabled != Some(false)
    {
        match telegram::Telegram::new(telegram, env, data_dir) {
            Ok(platform) => platforms.push((
                Arc::new(platform),
                runner::Settings {
                    allow: telegram.allow.clone(),
                    groups: telegram.groups.unwrap_or_default(),
                    sandbox: telegram.sandbox.clone(),
                },
            )),
            Err(why) => failed("telegram", why),
        }
    }
    if let Some(discord) = &config.discord
        && discord.enabled != Some(false)
    {
        match discord::Discord::new(discord, env, data_dir) {
            Ok(platform) => platforms.push((
                Arc::new(platform),
                runner::Settings {
                    allow: discord.allow.clone(),
                    groups: discord.groups.unwrap_or_default(),
                    sandbox: discord.sandbox.clone(),
                },
            )),
            Err(why) => failed("discord", why),
        }
    }
    if let Some(whatsapp) = &config.whatsapp
        && whatsapp.enabled != Some(false)
    {
        match whatsapp::WhatsApp::new(whatsapp, env, data_dir) {
            Ok(platform) => platforms.push((
                Arc::new(platform),
                runner::Settings {
                    allow: whatsapp.allow.clone(),
                    // Cloud API chats are direct messages.
                    groups: Default::default(),
                    sandbox: whatsapp.sandbox.clone(),
                },
            )),
            Err(why) => failed("whatsapp", why),
        }
    }
    if let Some(slack) = &config.slack
        && slack.enabled != Some(false)
    {
        match slack::Slack::new(slack, env, data_dir) {
            Ok(platform) => platforms.push((
                Arc::new(platform),
                runner::Settings {
                    allow: slack.allow.clone(),
                    groups: slack.groups.unwrap_or_default(),
                    sandbox: slack.sandbox.clone(),
                },
            )),
            Err(why) => failed("slack", why),
        }
    }
    Built {
        platforms,
        failed: failures.into_inner(),
    }
}

/// The channels [`build`] made, and those it could not, with why.
pub struct Built {
    pub platforms: Vec<(Arc<dyn Platform>, runner::Settings)>,
    pub failed: Vec<(&'static str, String)>,
}

/// A webhook request to `/channels/<name>` on the gateway's listener.
#[derive(Debug)]
pub struct WebhookRequest {
    pub method: axum::http::Method,
    /// The path after `/channels/<name>`.
    pub path: String,
    pub query: Option<String>,
    pub headers: axum::http::HeaderMap,
    pub body: bytes::Bytes,
}

/// A webhook's answer.
#[derive(Debug, PartialEq, Eq)]
pub struct WebhookResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl WebhookResponse {
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into(),
        }
    }

    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Self {
            status,
            content_type: "application/json",
            body: body.to_string(),
        }
    }
}

/// One chat platform's I/O.
#[async_trait::async_trait]
pub trait Platform: Send + Sync + 'static {
    /// The channel's name (`telegram`): the first part of its session keys.
    fn name(&self) -> &'static str;

    fn limits(&self) -> Limits;

    /// One piece of the agent's markdown in the platform's markup.
    fn format(&self, markdown: &str) -> String;

    /// Receives until the connection fails, handing each item to
    /// `deliveries`. An `Err` other than [`Failure::Fatal`] is retried with
    /// backoff; `Ok` means the runner is shutting down. A webhook-only
    /// platform keeps `deliveries` for [`Platform::webhook`] and waits.
    async fn receive(self: Arc<Self>, deliveries: Deliveries) -> Result<(), Failure>;

    /// Its receiving is a connection the platform allows one of per bot
    /// (Telegram's `getUpdates`, Discord's gateway): in a cluster, one
    /// replica at a time receives, under a lease. A webhook's requests
    /// land on any replica.
    fn exclusive(&self) -> bool {
        false
    }

    async fn send(&self, chat: &Chat, text: &str, buttons: &[Button]) -> Result<Sent, Failure>;

    /// Replaces a sent message's text (and buttons: none removes them).
    async fn edit(&self, sent: &Sent, text: &str, buttons: &[Button]) -> Result<(), Failure>;

    /// Shows that the agent is working.
    async fn typing(&self, chat: &Chat) -> Result<(), Failure>;

    /// Acknowledges a button press, with a short note for the user.
    async fn answer(&self, press: &Press, note: &str) -> Result<(), Failure>;

    /// Looks at a webhook request's head before any byte of its body is
    /// read: a request the platform can refuse from its headers alone (a
    /// wrong secret) is answered at once, so a stranger cannot make the
    /// gateway wait for and hold a body. `None` reads the body and calls
    /// [`Platform::webhook`], which checks everything again (a signature
    /// over the body, say).
    fn check_head(
        &self,
        _method: &axum::http::Method,
        _path: &str,
        _headers: &axum::http::HeaderMap,
    ) -> Option<WebhookResponse> {
        None
    }

    /// A request to the gateway's `/channels/<name>` (webhook modes).
    async fn webhook(&self, _request: WebhookRequest) -> WebhookResponse {
        WebhookResponse::new(404, "not found")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_s_key_names_it_back() {
        for chat in [
            Chat::dm("123"),
            Chat::group("-100200"),
            Chat::thread("C042", "1712345678.000100"),
            Chat::thread("-100:1", "7"),
        ] {
            let key = chat.key("telegram");
            assert_eq!(Chat::from_key("telegram", &key), Some(chat), "{key}");
        }
        assert_eq!(Chat::dm("5").key("slack"), "slack:dm:5");
        for key in [
            "telegram:dm:",
            "telegram:room:1",
            "slack:dm:1",
            "telegramx:dm:1",
            "telegram:thread:1",
            "telegram",
        ] {
            assert_eq!(Chat::from_key("telegram", key), None, "{key}");
        }
        assert_eq!(Chat::channel_of("discord:thread:C1:T2"), Some("discord"));
        for key in ["agent:main:main", "main", "telegram:room:1", "acp-bridge:x"] {
            assert_eq!(Chat::channel_of(key), None, "{key}");
        }
    }
}
