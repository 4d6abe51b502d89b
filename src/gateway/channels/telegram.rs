//! Telegram's Bot API (https://core.telegram.org/bots/api): long polling
//! with `getUpdates` (the default) or a webhook posted to the gateway's
//! `/channels/telegram`; replies in Telegram's HTML parse mode, streamed by
//! `editMessageText`; approvals as inline keyboards.
//!
//! Written on reqwest rather than a bot framework (teloxide, frankenstein):
//! pincer needs eight methods, a base URL that can point anywhere (a local
//! Bot API server, a test's mock), and the offset stored only after the
//! gateway accepted each update, which a framework's dispatcher hides.

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use super::http::{client, network, retrying};
use super::{
    Button, Chat, ChatKind, Deliveries, Delivery, Failure, Incoming, Limits, Measure, Message,
    Platform, Press, Sent, WebhookRequest, WebhookResponse,
};
use crate::config::channels::{TelegramConfig, TelegramMode};

/// The header Telegram sends a webhook's secret in.
const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// What pincer asks Telegram for.
const UPDATES: &[&str] = &["message", "callback_query"];

pub struct Telegram {
    http: reqwest::Client,
    /// `{api_url}/bot{token}`: never logged (it carries the token).
    base: String,
    mode: TelegramMode,
    secret: Option<String>,
    webhook_url: Option<String>,
    poll_timeout: u64,
    edit_interval: Duration,
    /// Where the next update's offset is kept.
    offset_file: PathBuf,
    me: Mutex<Option<Me>>,
    /// For the webhook: where updates go.
    deliveries: Mutex<Option<Deliveries>>,
}

#[derive(Clone, Debug)]
struct Me {
    id: i64,
    username: String,
}

impl Telegram {
    /// The channel `config` describes; errors name what is missing.
    pub fn new(
        config: &TelegramConfig,
        env: &dyn Fn(&str) -> Option<String>,
        data_dir: &std::path::Path,
    ) -> Result<Self, String> {
        let token = config.token().read(env)?;
        let mode = config.mode.unwrap_or_default();
        let secret = match mode {
            TelegramMode::Polling => None,
            TelegramMode::Webhook => {
                let secret = config.webhook_secret().read(env)?;
                if secret.len() > 256
                    || !secret
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    return Err(
                        "the Telegram webhook secret must be 1 to 256 of A-Z, a-z, 0-9, _ and -"
                            .to_string(),
                    );
                }
                Some(secret)
            }
        };
        Ok(Self {
            http: client(),
            base: format!("{}/bot{token}", config.api_url()),
            mode,
            secret,
            webhook_url: config.webhook_url.clone().filter(|u| !u.trim().is_empty()),
            poll_timeout: config.poll_timeout_secs.unwrap_or(30).min(50),
            edit_interval: Duration::from_millis(config.edit_interval_ms.unwrap_or(1000).max(100)),
            offset_file: data_dir.join("channels").join("telegram").join("offset"),
            me: Mutex::new(None),
            deliveries: Mutex::new(None),
        })
    }

    /// One Bot API call; the `result` of a success.
    async fn call(&self, method: &str, body: &Value, timeout: Duration) -> Result<Value, Failure> {
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .json(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(network)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(network)?;
        let Ok(reply) = serde_json::from_slice::<Value>(&bytes) else {
            return Err(if status.is_server_error() || status.as_u16() == 429 {
                Failure::Transient(format!("Telegram answered {status}"))
            } else {
                Failure::Refused(format!("Telegram answered {status} without JSON"))
            });
        };
        if reply["ok"] == true {
            return Ok(reply["result"].clone());
        }
        let code = reply["error_code"]
            .as_u64()
            .unwrap_or(status.as_u16() as u64);
        let description = reply["description"]
            .as_str()
            .unwrap_or("no description")
            .to_string();
        Err(match code {
            429 => Failure::RateLimited(Duration::from_secs(
                reply["parameters"]["retry_after"].as_u64().unwrap_or(5),
            )),
            401 | 404 => Failure::Fatal(format!(
                "Telegram refused the bot token ({description}); check [channels.telegram]"
            )),
            409 => Failure::Transient(format!("Telegram: {description}")),
            500.. => Failure::Transient(format!("Telegram: {description}")),
            _ => Failure::Refused(format!("Telegram {method}: {description}")),
        })
    }

    async fn me(&self) -> Result<Me, Failure> {
        if let Some(me) = self.me.lock().clone() {
            return Ok(me);
        }
        let empty = json!({});
        let user = retrying("getMe", || {
            self.call("getMe", &empty, Duration::from_secs(30))
        })
        .await?;
        let me = Me {
            id: user["id"].as_i64().unwrap_or_default(),
            username: user["username"].as_str().unwrap_or_default().to_string(),
        };
        *self.me.lock() = Some(me.clone());
        Ok(me)
    }

    fn stored_offset(&self) -> Option<i64> {
        std::fs::read_to_string(&self.offset_file)
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    fn store_offset(&self, offset: i64) -> Result<(), Failure> {
        let dir = self
            .offset_file
            .parent()
            .unwrap_or(std::path::Path::new("."));
        crate::config::trust::create_private_dir(dir)
            .and_then(|()| {
                crate::config::trust::write_private(
                    &self.offset_file,
                    offset.to_string().as_bytes(),
                )
            })
            .map_err(|e| {
                Failure::Fatal(format!(
                    "cannot store the Telegram offset in {}: {e}",
                    self.offset_file.display()
                ))
            })
    }

    async fn poll(self: Arc<Self>, deliveries: Deliveries) -> Result<(), Failure> {
        let me = self.me().await?;
        // getUpdates does not work while a webhook is set; pending
        // updates stay.
        let keep = json!({"drop_pending_updates": false});
        retrying("deleteWebhook", || {
            self.call("deleteWebhook", &keep, Duration::from_secs(30))
        })
        .await?;
        loop {
            let mut body = json!({"timeout": self.poll_timeout, "allowed_updates": UPDATES});
            let stored = self.stored_offset();
            if let Some(offset) = stored {
                body["offset"] = json!(offset);
            }
            let wait = Duration::from_secs(self.poll_timeout + 15);
            let updates = self.call("getUpdates", &body, wait).await?;
            let mut next = stored;
            let mut handed = Vec::new();
            for update in updates.as_array().into_iter().flatten() {
                let Some(id) = update["update_id"].as_i64() else {
                    continue;
                };
                if stored.is_some_and(|offset| id < offset) {
                    continue;
                }
                next = Some(next.map_or(id + 1, |n| n.max(id + 1)));
                if let Some(incoming) = incoming(update, &me) {
                    let (delivery, done) = Delivery::new(incoming);
                    if deliveries.send(delivery).await.is_err() {
                        return Ok(());
                    }
                    handed.push(done);
                }
            }
            // Confirmed to Telegram (by the next call's offset) only once
            // the gateway has taken every update of the batch.
            for done in handed {
                if done.await.is_err() {
                    return Ok(());
                }
            }
            if let Some(next) = next
                && Some(next) != stored
            {
                self.store_offset(next)?;
            }
        }
    }

    fn chat_id(chat: &Chat) -> Value {
        chat.id
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| json!(chat.id))
    }

    fn keyboard(buttons: &[Button]) -> Value {
        let row: Vec<Value> = buttons
            .iter()
            .map(|b| {
                let mut button = json!({"text": b.label, "callback_data": b.data});
                if b.danger {
                    button["style"] = json!("danger");
                }
                button
            })
            .collect();
        if row.is_empty() {
            json!({"inline_keyboard": []})
        } else {
            json!({"inline_keyboard": [row]})
        }
    }
}

/// What pincer makes of an update (none: nothing for the agent).
fn incoming(update: &Value, me: &Me) -> Option<Incoming> {
    if let Some(query) = update.get("callback_query") {
        let message = &query["message"];
        let chat = chat_of(message)?;
        return Some(Incoming::Press(Press {
            user: query["from"]["id"].as_i64()?.to_string(),
            data: query["data"].as_str()?.to_string(),
            handle: query["id"].as_str()?.to_string(),
            message: message["message_id"].as_i64().map(|id| Sent {
                chat: chat.clone(),
                id: id.to_string(),
            }),
            chat,
        }));
    }
    let message = update.get("message")?;
    let from = &message["from"];
    if from["is_bot"] == true {
        return None;
    }
    let text = message["text"]
        .as_str()
        .or_else(|| message["caption"].as_str())?;
    let chat = chat_of(message)?;
    let (mentioned, text) = match chat.kind {
        ChatKind::Dm => (true, text.to_string()),
        _ => addressed(message, text, me),
    };
    let name = [from["first_name"].as_str(), from["last_name"].as_str()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    let name = match from["username"].as_str() {
        Some(username) if name.is_empty() => format!("@{username}"),
        Some(username) => format!("{name} (@{username})"),
        None => name,
    };
    Some(Incoming::Message(Message {
        chat,
        user: from["id"].as_i64()?.to_string(),
        name: (!name.is_empty()).then_some(name),
        text,
        id: message["message_id"].as_i64()?.to_string(),
        mentioned,
    }))
}

fn chat_of(message: &Value) -> Option<Chat> {
    let chat = &message["chat"];
    let id = chat["id"].as_i64()?.to_string();
    match chat["type"].as_str()? {
        "private" => Some(Chat::dm(id)),
        "group" | "supergroup" => match message["message_thread_id"].as_i64() {
            Some(thread) if message["is_topic_message"] == true => {
                Some(Chat::thread(id, thread.to_string()))
            }
            _ => Some(Chat::group(id)),
        },
        _ => None,
    }
}

/// Whether a group message addresses the bot (a mention, a command to it,
/// a reply to it), and its text without the mention.
fn addressed(message: &Value, text: &str, me: &Me) -> (bool, String) {
    let handle = format!("@{}", me.username);
    let units: Vec<u16> = text.encode_utf16().collect();
    let mut mentioned = message["reply_to_message"]["from"]["id"].as_i64() == Some(me.id);
    let mut cut: Option<(usize, usize)> = None;
    let entities = message["entities"]
        .as_array()
        .or_else(|| message["caption_entities"].as_array());
    for entity in entities.into_iter().flatten() {
        let (Some(offset), Some(length)) = (entity["offset"].as_u64(), entity["length"].as_u64())
        else {
            continue;
        };
        let (offset, length) = (offset as usize, length as usize);
        let Some(slice) = units.get(offset..offset.saturating_add(length)) else {
            continue;
        };
        let piece = String::from_utf16_lossy(slice);
        match entity["type"].as_str() {
            Some("mention") if !me.username.is_empty() && piece.eq_ignore_ascii_case(&handle) => {
                mentioned = true;
                cut.get_or_insert((offset, length));
            }
            Some("text_mention") if entity["user"]["id"].as_i64() == Some(me.id) => {
                mentioned = true;
            }
            Some("bot_command") => {
                let lower = piece.to_ascii_lowercase();
                if !me.username.is_empty() && lower.ends_with(&handle.to_ascii_lowercase()) {
                    mentioned = true;
                } else if offset == 0 && !piece.contains('@') {
                    // A bare command in a group is for every bot there;
                    // Telegram delivers it in privacy mode, so it counts.
                    mentioned = true;
                }
            }
            _ => {}
        }
    }
    let text = match cut {
        Some((offset, length)) => {
            let mut rest = units[..offset].to_vec();
            rest.extend_from_slice(&units[offset + length..]);
            String::from_utf16_lossy(&rest).trim().to_string()
        }
        None => text.to_string(),
    };
    (mentioned, text)
}

#[async_trait::async_trait]
impl Platform for Telegram {
    fn name(&self) -> &'static str {
        "telegram"
    }

    fn limits(&self) -> Limits {
        Limits {
            max: 4096,
            measure: Measure::Utf16,
            edit: Some(self.edit_interval),
            // "The status is set for 5 seconds or less."
            typing: Some(Duration::from_secs(4)),
            buttons: true,
        }
    }

    fn format(&self, markdown: &str) -> String {
        super::format::telegram_html(markdown)
    }

    fn exclusive(&self) -> bool {
        // Telegram ends a `getUpdates` with 409 Conflict when another
        // starts; a webhook is set once, for every replica behind it.
        self.mode == TelegramMode::Polling
    }

    async fn receive(self: Arc<Self>, deliveries: Deliveries) -> Result<(), Failure> {
        match self.mode {
            TelegramMode::Polling => self.poll(deliveries).await,
            TelegramMode::Webhook => {
                self.me().await?;
                if let Some(url) = &self.webhook_url {
                    let body = json!({
                        "url": url,
                        "secret_token": self.secret,
                        "allowed_updates": UPDATES,
                    });
                    retrying("setWebhook", || {
                        self.call("setWebhook", &body, Duration::from_secs(30))
                    })
                    .await?;
                }
                *self.deliveries.lock() = Some(deliveries.clone());
                deliveries.closed().await;
                Ok(())
            }
        }
    }

    async fn send(&self, chat: &Chat, text: &str, buttons: &[Button]) -> Result<Sent, Failure> {
        let mut body = json!({
            "chat_id": Self::chat_id(chat),
            "text": text,
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": true},
        });
        if let Some(thread) = chat.thread.as_deref().and_then(|t| t.parse::<i64>().ok()) {
            body["message_thread_id"] = json!(thread);
        }
        if !buttons.is_empty() {
            body["reply_markup"] = Self::keyboard(buttons);
        }
        let message = self
            .call("sendMessage", &body, Duration::from_secs(30))
            .await?;
        let id = message["message_id"]
            .as_i64()
            .ok_or_else(|| Failure::Refused("sendMessage returned no message_id".to_string()))?;
        Ok(Sent {
            chat: chat.clone(),
            id: id.to_string(),
        })
    }

    async fn edit(&self, sent: &Sent, text: &str, buttons: &[Button]) -> Result<(), Failure> {
        let body = json!({
            "chat_id": Self::chat_id(&sent.chat),
            "message_id": sent.id.parse::<i64>().unwrap_or_default(),
            "text": text,
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": true},
            "reply_markup": Self::keyboard(buttons),
        });
        match self
            .call("editMessageText", &body, Duration::from_secs(30))
            .await
        {
            Ok(_) => Ok(()),
            Err(Failure::Refused(why)) if why.contains("message is not modified") => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn typing(&self, chat: &Chat) -> Result<(), Failure> {
        let mut body = json!({"chat_id": Self::chat_id(chat), "action": "typing"});
        if let Some(thread) = chat.thread.as_deref().and_then(|t| t.parse::<i64>().ok()) {
            body["message_thread_id"] = json!(thread);
        }
        self.call("sendChatAction", &body, Duration::from_secs(15))
            .await
            .map(|_| ())
    }

    async fn answer(&self, press: &Press, note: &str) -> Result<(), Failure> {
        let note: String = note.chars().take(200).collect();
        let body = json!({"callback_query_id": press.handle, "text": note});
        self.call("answerCallbackQuery", &body, Duration::from_secs(15))
            .await
            .map(|_| ())
    }

    fn check_head(
        &self,
        method: &axum::http::Method,
        _path: &str,
        headers: &axum::http::HeaderMap,
    ) -> Option<WebhookResponse> {
        let Some(secret) = &self.secret else {
            return Some(WebhookResponse::new(404, "not found"));
        };
        if method != axum::http::Method::POST {
            return Some(WebhookResponse::new(405, "method not allowed"));
        }
        let given = headers
            .get(SECRET_HEADER)
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        if !bool::from(given.ct_eq(secret.as_bytes())) {
            return Some(WebhookResponse::new(401, "unauthorized"));
        }
        None
    }

    async fn webhook(&self, request: WebhookRequest) -> WebhookResponse {
        // The gateway asked before reading the body; asking again keeps
        // this safe for any other caller.
        if let Some(refused) = self.check_head(&request.method, &request.path, &request.headers) {
            return refused;
        }
        let Ok(update) = serde_json::from_slice::<Value>(&request.body) else {
            return WebhookResponse::new(400, "the body is not an update");
        };
        let me = match self.me().await {
            Ok(me) => me,
            Err(_) => return WebhookResponse::new(503, "not ready"),
        };
        let Some(incoming) = incoming(&update, &me) else {
            return WebhookResponse::new(200, "");
        };
        let deliveries = self.deliveries.lock().clone();
        let Some(deliveries) = deliveries else {
            // Not started yet: Telegram tries again later.
            return WebhookResponse::new(503, "not ready");
        };
        let (delivery, done) = Delivery::new(incoming);
        if deliveries.send(delivery).await.is_err() {
            return WebhookResponse::new(503, "shutting down");
        }
        // 200 only once the gateway took it: otherwise Telegram retries.
        match tokio::time::timeout(Duration::from_secs(30), done).await {
            Ok(Ok(())) => WebhookResponse::new(200, ""),
            _ => WebhookResponse::new(503, "not taken"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Me {
        Me {
            id: 99,
            username: "pincer_bot".into(),
        }
    }

    #[test]
    fn a_private_message_is_a_dm_and_a_group_needs_a_mention() {
        let update = json!({"update_id": 1, "message": {
            "message_id": 7, "from": {"id": 5, "is_bot": false, "first_name": "Ana", "username": "ana"},
            "chat": {"id": 5, "type": "private"}, "text": "hello"}});
        let Some(Incoming::Message(m)) = incoming(&update, &me()) else {
            panic!()
        };
        assert_eq!(
            (m.chat, m.user.as_str(), m.id.as_str(), m.mentioned),
            (Chat::dm("5"), "5", "7", true)
        );
        assert_eq!(m.name.as_deref(), Some("Ana (@ana)"));

        // "héllo 👋 @pincer_bot, hi": the mention's offset is in UTF-16 units.
        let text = "héllo 👋 @pincer_bot, hi";
        let offset = "héllo 👋 ".encode_utf16().count();
        let update = json!({"update_id": 2, "message": {
            "message_id": 8, "from": {"id": 5, "is_bot": false, "first_name": "Ana"},
            "chat": {"id": -100, "type": "supergroup"}, "text": text,
            "entities": [{"type": "mention", "offset": offset, "length": 11}]}});
        let Some(Incoming::Message(m)) = incoming(&update, &me()) else {
            panic!()
        };
        assert!(m.mentioned);
        assert_eq!(m.chat, Chat::group("-100"));
        assert_eq!(m.text, "héllo 👋 , hi");

        let plain = json!({"update_id": 3, "message": {
            "message_id": 9, "from": {"id": 5, "is_bot": false, "first_name": "Ana"},
            "chat": {"id": -100, "type": "group"}, "text": "@someone_else hi",
            "entities": [{"type": "mention", "offset": 0, "length": 13}]}});
        let Some(Incoming::Message(m)) = incoming(&plain, &me()) else {
            panic!()
        };
        assert!(!m.mentioned);

        let reply = json!({"update_id": 4, "message": {
            "message_id": 10, "from": {"id": 5, "is_bot": false, "first_name": "Ana"},
            "chat": {"id": -100, "type": "supergroup"}, "text": "and this?", "message_thread_id": 3,
            "is_topic_message": true, "reply_to_message": {"message_id": 2, "from": {"id": 99, "is_bot": true}}}});
        let Some(Incoming::Message(m)) = incoming(&reply, &me()) else {
            panic!()
        };
        assert!(m.mentioned);
        assert_eq!(m.chat, Chat::thread("-100", "3"));
    }

    #[test]
    fn bots_channels_and_updates_without_text_are_not_for_the_agent() {
        for update in [
            json!({"update_id": 1, "message": {"message_id": 1, "from": {"id": 7, "is_bot": true}, "chat": {"id": 7, "type": "private"}, "text": "hi"}}),
            json!({"update_id": 1, "message": {"message_id": 1, "from": {"id": 7, "is_bot": false}, "chat": {"id": -7, "type": "channel"}, "text": "hi"}}),
            json!({"update_id": 1, "message": {"message_id": 1, "from": {"id": 7, "is_bot": false}, "chat": {"id": 7, "type": "private"}, "sticker": {}}}),
            json!({"update_id": 1, "edited_message": {}}),
            json!({"update_id": 1, "message": "nonsense"}),
        ] {
            assert_eq!(incoming(&update, &me()), None, "{update}");
        }
    }

    #[test]
    fn a_button_press_names_its_chat_user_and_data() {
        let update = json!({"update_id": 5, "callback_query": {
            "id": "cq1", "from": {"id": 5, "is_bot": false, "first_name": "Ana"},
            "message": {"message_id": 12, "chat": {"id": 5, "type": "private"}, "date": 1},
            "chat_instance": "x", "data": "ap:abc:deny"}});
        let Some(Incoming::Press(p)) = incoming(&update, &me()) else {
            panic!()
        };
        assert_eq!(
            (
                p.chat.clone(),
                p.user.as_str(),
                p.data.as_str(),
                p.handle.as_str()
            ),
            (Chat::dm("5"), "5", "ap:abc:deny", "cq1")
        );
        assert_eq!(
            p.message,
            Some(Sent {
                chat: Chat::dm("5"),
                id: "12".into()
            })
        );
    }
}
