//! The WhatsApp Business Cloud API
//! (https://developers.facebook.com/docs/whatsapp/cloud-api): Meta posts
//! each message to the gateway's `/channels/whatsapp` webhook, signed with
//! the app secret, and pincer answers with `POST /{phone_number_id}/messages`.
//! The Cloud API cannot edit a sent message, so replies are sent whole;
//! approvals are interactive reply buttons.
//!
//! Written on reqwest rather than a WhatsApp crate: the existing ones are
//! small, stale or unproven, none checks webhook signatures, and pincer
//! needs three request bodies and a base URL that can point at a mock.
//!
//! Meta retries a webhook it did not see answered with 2xx for up to 36
//! hours, so the same message can arrive again after the gateway restarted
//! and forgot the idempotency keys it held in memory. The ids of messages
//! the gateway took are therefore kept on disk ([`Seen`]), a bounded list,
//! and a message whose id is there is acknowledged without a second run.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio::sync::watch;

use super::access::Access;
use super::http::{client, network, retry_after, retrying};
use super::{
    Button, Chat, Deliveries, Delivery, Failure, Incoming, Limits, Measure, Message, Platform,
    Press, Sent, WebhookRequest, WebhookResponse,
};
use crate::config::channels::WhatsAppConfig;

/// The header Meta signs each webhook request in.
const SIGNATURE_HEADER: &str = "x-hub-signature-256";

/// A text message's longest body, in characters.
const TEXT_MAX: usize = 4096;

/// An interactive message's longest body, in characters.
const BUTTON_BODY_MAX: usize = 1024;

/// Reply buttons per message, and a button title's longest length.
const MAX_BUTTONS: usize = 3;
const TITLE_MAX: usize = 20;

/// Message ids remembered, and for how long: Meta retries for 36 hours.
const SEEN_MAX: usize = 4096;
const SEEN_FOR_SECS: u64 = 7 * 24 * 3600;

/// What a user who sends a picture, a voice note or a file is told.
const ONLY_TEXT: &str = "I can only read text messages for now: please write your request.";

pub struct WhatsApp {
    graph: Graph,
    phone_number_id: String,
    verify_token: String,
    app_secret: String,
    allow: Vec<String>,
    access_file: PathBuf,
    seen: Mutex<Seen>,
    /// Where messages go, once the runner started.
    deliveries: watch::Sender<Option<Deliveries>>,
    /// The newest message received in each chat: the typing indicator is
    /// shown by marking it read.
    last_received: Mutex<HashMap<String, String>>,
}

impl WhatsApp {
    /// The channel `config` describes; errors name what is missing.
    pub fn new(
        config: &WhatsAppConfig,
        env: &dyn Fn(&str) -> Option<String>,
        data_dir: &Path,
    ) -> Result<Self, String> {
        let phone_number_id = config
            .phone_number_id
            .as_deref()
            .map(str::trim)
            .unwrap_or_default()
            .to_string();
        if phone_number_id.is_empty() {
            return Err("[channels.whatsapp] needs `phone_number_id`: the id of the business phone number (WhatsApp Manager, or the app's API Setup page), not the number itself".to_string());
        }
        if !phone_number_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(format!(
                "[channels.whatsapp] phone_number_id `{phone_number_id}` is not an id (digits, as Meta shows it)"
            ));
        }
        let token = config.token().read(env)?;
        let verify_token = config.verify_token().read(env)?;
        let app_secret = config.app_secret().read(env)?;
        let dir = data_dir.join("channels").join("whatsapp");
        Ok(Self {
            graph: Graph {
                http: client(),
                url: format!("{}/{phone_number_id}/messages", config.api_url()),
                token,
            },
            phone_number_id,
            verify_token,
            app_secret,
            allow: config.allow.clone(),
            access_file: super::access_file(data_dir),
            seen: Mutex::new(Seen::load(dir.join("seen"), now_secs())),
            deliveries: watch::Sender::new(None),
            last_received: Mutex::new(HashMap::new()),
        })
    }

    /// Where messages go; a request that comes while the gateway starts
    /// waits a moment for the runner.
    async fn deliveries(&self) -> Option<Deliveries> {
        let mut ready = self.deliveries.subscribe();
        let waited =
            tokio::time::timeout(Duration::from_secs(10), ready.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(deliveries)) => deliveries.clone(),
            _ => None,
        }
    }

    fn allowed(&self, user: &str) -> bool {
        self.allow.iter().any(|u| u == user)
            || Access::load(&self.access_file)
                .map(|a| a.allowed("whatsapp", user, &self.allow))
                .unwrap_or(false)
    }

    /// `GET`: Meta checks the callback URL with the verify token.
    fn verify(&self, query: Option<&str>) -> WebhookResponse {
        let mut mode = None;
        let mut token = None;
        let mut challenge = None;
        for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match key.as_ref() {
                "hub.mode" => mode = Some(value.into_owned()),
                "hub.verify_token" => token = Some(value.into_owned()),
                "hub.challenge" => challenge = Some(value.into_owned()),
                _ => {}
            }
        }
        let token_ok =
            token.is_some_and(|t| bool::from(t.as_bytes().ct_eq(self.verify_token.as_bytes())));
        match (mode.as_deref(), challenge) {
            (Some("subscribe"), Some(challenge)) if token_ok && challenge.len() <= 512 => {
                WebhookResponse::new(200, challenge)
            }
            _ => WebhookResponse::new(403, "forbidden"),
        }
    }

    /// `POST`: a signed batch of notifications.
    async fn notify(&self, request: WebhookRequest) -> WebhookResponse {
        let signature = request
            .headers
            .get(SIGNATURE_HEADER)
            .and_then(|v| v.to_str().ok());
        if !signed(self.app_secret.as_bytes(), &request.body, signature) {
            tracing::warn!(
                channel = "whatsapp",
                "refused a webhook request without a valid X-Hub-Signature-256"
            );
            return WebhookResponse::new(401, "unauthorized");
        }
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return WebhookResponse::new(400, "the body is not JSON");
        };
        let Some(deliveries) = self.deliveries().await else {
            // Not started yet: Meta tries again.
            return WebhookResponse::new(503, "not ready");
        };
        for inbound in parse(&body, &self.phone_number_id) {
            let seen = self.seen.lock().contains(&inbound.id);
            if seen {
                continue;
            }
            match inbound.what {
                What::Incoming(incoming) => {
                    self.last_received
                        .lock()
                        .insert(inbound.from.clone(), inbound.id.clone());
                    let (delivery, done) = Delivery::new(incoming);
                    if deliveries.send(delivery).await.is_err() {
                        return WebhookResponse::new(503, "shutting down");
                    }
                    // 200 only once the gateway took it: otherwise Meta
                    // retries, and the messages taken before are in the
                    // seen list.
                    match tokio::time::timeout(Duration::from_secs(30), done).await {
                        Ok(Ok(())) => {}
                        _ => return WebhookResponse::new(503, "not taken"),
                    }
                }
                What::Unsupported(kind) => {
                    // Only users who may talk to the agent hear about it:
                    // a stranger's picture gets nothing (their text gets a
                    // pairing code from the runner).
                    if self.allowed(&inbound.from) {
                        tracing::info!(channel = "whatsapp", kind, "a message pincer cannot read");
                        self.say_only_text(&inbound.from, &inbound.id);
                    }
                }
            }
            self.seen.lock().record(&inbound.id, now_secs());
        }
        WebhookResponse::new(200, "")
    }

    /// Tells `to` that only text is understood, quoting their message, in
    /// the background (the webhook answers at once).
    fn say_only_text(&self, to: &str, quoted: &str) {
        let body = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "text",
            "context": {"message_id": quoted},
            "text": {"preview_url": false, "body": ONLY_TEXT},
        });
        let graph = self.graph.clone();
        tokio::spawn(async move {
            if let Err(e) = retrying("send", || graph.post("send", &body)).await {
                tracing::warn!(channel = "whatsapp", error = %e, "cannot send a message");
            }
        });
    }

    fn text_body(chat: &Chat, text: &str) -> Value {
        json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": chat.id,
            "type": "text",
            "text": {"preview_url": false, "body": text},
        })
    }

    fn buttons_body(chat: &Chat, text: &str, buttons: &[Button]) -> Result<Value, Failure> {
        let mut titles = HashSet::new();
        let mut list = Vec::new();
        for button in buttons.iter().take(MAX_BUTTONS) {
            let title: String = button.label.chars().take(TITLE_MAX).collect();
            if button.data.len() > 256 || !titles.insert(title.clone()) {
                return Err(Failure::Refused(format!(
                    "a WhatsApp button needs a unique title and an id of at most 256 bytes: {title}"
                )));
            }
            list.push(json!({"type": "reply", "reply": {"id": button.data, "title": title}}));
        }
        if buttons.len() > MAX_BUTTONS {
            tracing::warn!(
                channel = "whatsapp",
                buttons = buttons.len(),
                "WhatsApp shows at most 3 reply buttons"
            );
        }
        Ok(json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": chat.id,
            "type": "interactive",
            "interactive": {
                "type": "button",
                "body": {"text": text},
                "action": {"buttons": list},
            },
        }))
    }
}

/// The messages endpoint with its token: cheap to clone into a task.
#[derive(Clone)]
struct Graph {
    http: reqwest::Client,
    /// `{api_url}/{phone_number_id}/messages`.
    url: String,
    /// Never logged.
    token: String,
}

impl Graph {
    /// One call; the answer of a success.
    async fn post(&self, what: &str, body: &Value) -> Result<Value, Failure> {
        let response = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .json(body)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(network)?;
        let status = response.status().as_u16();
        let wait = retry_after(response.headers());
        let bytes = response.bytes().await.map_err(network)?;
        let reply = serde_json::from_slice::<Value>(&bytes).ok();
        match reply {
            Some(reply) if (200..300).contains(&status) && reply.get("error").is_none() => {
                Ok(reply)
            }
            reply => Err(failure(what, status, reply.as_ref(), wait)),
        }
    }
}

/// How a Graph API error fails, by its `error.code` (Meta's advice: not by
/// the HTTP status, which differs for the same error).
fn failure(what: &str, status: u16, reply: Option<&Value>, wait: Option<Duration>) -> Failure {
    let error = reply.map(|r| &r["error"]);
    let code = error.and_then(|e| e["code"].as_u64());
    let message = error
        .and_then(|e| e["message"].as_str())
        .unwrap_or("no message");
    let details = error
        .and_then(|e| e["error_data"]["details"].as_str())
        .map(|d| format!(": {d}"))
        .unwrap_or_default();
    // No Retry-After comes with these: waits from what each limit counts.
    let limited = |default: u64| Failure::RateLimited(wait.unwrap_or(Duration::from_secs(default)));
    match code {
        // The number's messages per second.
        Some(130429) => limited(1),
        // To one user: about one message every 6 seconds.
        Some(131056) => limited(6),
        // The app's or the account's calls per hour; marked as spam.
        Some(4) | Some(80007) | Some(131048) => limited(60),
        Some(190) => Failure::Fatal(format!(
            "WhatsApp refused the access token ({message}); set a valid one for [channels.whatsapp] (a System User token does not expire)"
        )),
        // Meta's own trouble: "try again later".
        Some(1) | Some(2) | Some(131000) | Some(131016) => {
            Failure::Transient(format!("WhatsApp: {message}{details}"))
        }
        Some(code) => Failure::Refused(format!("WhatsApp {what}: (#{code}) {message}{details}")),
        None if status == 401 => Failure::Fatal(
            "WhatsApp refused the access token; set a valid one for [channels.whatsapp]"
                .to_string(),
        ),
        None if status == 429 => limited(6),
        None if status >= 500 => Failure::Transient(format!("WhatsApp answered {status}")),
        None => Failure::Refused(format!("WhatsApp {what}: answered {status}")),
    }
}

/// Whether `signature` (`sha256=<hex>`) is the HMAC-SHA256 of `body` with
/// the app secret, compared in constant time.
fn signed(secret: &[u8], body: &[u8], signature: Option<&str>) -> bool {
    let Some(given) = signature.and_then(|s| s.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let expected = super::http::hmac_sha256_hex(secret, &[body]);
    super::http::same_signature(given.to_ascii_lowercase().as_bytes(), &expected)
}

/// A message of a notification.
#[derive(Debug, PartialEq)]
struct Inbound {
    /// The wamid.
    id: String,
    from: String,
    what: What,
}

#[derive(Debug, PartialEq)]
enum What {
    Incoming(Incoming),
    /// A kind pincer does not read (a picture, a voice note, …).
    Unsupported(String),
}

/// The messages of a webhook body meant for `phone_number_id`, in order.
/// Statuses (sent, delivered, read) are not messages; a failed one is
/// logged. Reactions and system notices are not for the agent.
fn parse(body: &Value, phone_number_id: &str) -> Vec<Inbound> {
    let mut found = Vec::new();
    if body["object"] != "whatsapp_business_account" {
        return found;
    }
    let changes = body["entry"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|entry| entry["changes"].as_array().into_iter().flatten());
    for change in changes {
        if change["field"] != "messages" {
            continue;
        }
        let value = &change["value"];
        if value["metadata"]["phone_number_id"] != phone_number_id {
            continue;
        }
        for status in value["statuses"].as_array().into_iter().flatten() {
            if status["status"] == "failed" {
                for error in status["errors"].as_array().into_iter().flatten() {
                    tracing::warn!(
                        channel = "whatsapp",
                        code = error["code"].as_u64().unwrap_or_default(),
                        "a message was not delivered: {}",
                        error["title"].as_str().unwrap_or("no reason given")
                    );
                }
            }
        }
        for error in value["errors"].as_array().into_iter().flatten() {
            tracing::warn!(
                channel = "whatsapp",
                code = error["code"].as_u64().unwrap_or_default(),
                "WhatsApp reported an error: {}",
                error["title"].as_str().unwrap_or("no reason given")
            );
        }
        let contacts = value["contacts"].as_array();
        for message in value["messages"].as_array().into_iter().flatten() {
            if let Some(inbound) = inbound(message, contacts) {
                found.push(inbound);
            }
        }
    }
    found
}

fn inbound(message: &Value, contacts: Option<&Vec<Value>>) -> Option<Inbound> {
    let id = message["id"]
        .as_str()
        .filter(|s| !s.is_empty())?
        .to_string();
    let from = message["from"]
        .as_str()
        .filter(|s| !s.is_empty())?
        .to_string();
    let chat = Chat::dm(&from);
    let kind = message["type"].as_str().unwrap_or_default();
    let what = match kind {
        "text" => {
            let name = contacts
                .into_iter()
                .flatten()
                .find(|c| c["wa_id"] == from.as_str())
                .and_then(|c| c["profile"]["name"].as_str())
                .filter(|n| !n.trim().is_empty())
                .map(String::from);
            What::Incoming(Incoming::Message(Message {
                chat,
                user: from.clone(),
                name,
                text: message["text"]["body"].as_str()?.to_string(),
                id: id.clone(),
                mentioned: true,
            }))
        }
        "interactive" => {
            let interactive = &message["interactive"];
            let reply = match interactive["type"].as_str()? {
                "button_reply" => &interactive["button_reply"],
                "list_reply" => &interactive["list_reply"],
                _ => return None,
            };
            What::Incoming(Incoming::Press(Press {
                message: message["context"]["id"].as_str().map(|quoted| Sent {
                    chat: chat.clone(),
                    id: quoted.to_string(),
                }),
                chat,
                user: from.clone(),
                data: reply["id"].as_str()?.to_string(),
                handle: id.clone(),
            }))
        }
        // Not addressed to anyone: a reaction to a message, a notice that
        // the user changed their number.
        "reaction" | "system" | "" => return None,
        other => What::Unsupported(other.to_string()),
    };
    Some(Inbound { id, from, what })
}

fn now_secs() -> u64 {
    crate::gateway::frames::now_ms() / 1000
}

/// The ids of the messages the gateway took, on disk: one `SECS ID` line
/// each, appended, and rewritten with the newest when it grows past twice
/// the bound.
struct Seen {
    file: PathBuf,
    /// How many ids are kept ([`SEEN_MAX`]).
    max: usize,
    ids: HashSet<String>,
    order: VecDeque<(u64, String)>,
    lines: usize,
}

impl Seen {
    fn load(file: PathBuf, now: u64) -> Self {
        Self::load_keeping(file, SEEN_MAX, now)
    }

    fn load_keeping(file: PathBuf, max: usize, now: u64) -> Self {
        let mut seen = Self {
            file,
            max,
            ids: HashSet::new(),
            order: VecDeque::new(),
            lines: 0,
        };
        let text = std::fs::read_to_string(&seen.file).unwrap_or_default();
        for line in text.lines() {
            seen.lines += 1;
            let Some((secs, id)) = line.split_once(' ') else {
                continue;
            };
            let Ok(secs) = secs.parse::<u64>() else {
                continue;
            };
            if now.saturating_sub(secs) <= SEEN_FOR_SECS && seen.ids.insert(id.to_string()) {
                seen.order.push_back((secs, id.to_string()));
            }
        }
        seen.trim(now);
        seen
    }

    fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    fn trim(&mut self, now: u64) {
        while let Some((secs, id)) = self.order.front() {
            if self.order.len() <= self.max && now.saturating_sub(*secs) <= SEEN_FOR_SECS {
                break;
            }
            self.ids.remove(id);
            self.order.pop_front();
        }
    }

    fn record(&mut self, id: &str, now: u64) {
        // An id is a wamid (base64): never a line break or a space, but a
        // body is not to be trusted.
        if id.contains(char::is_whitespace) || !self.ids.insert(id.to_string()) {
            return;
        }
        self.order.push_back((now, id.to_string()));
        self.trim(now);
        let result = if self.lines >= 2 * self.max {
            let text: String = self
                .order
                .iter()
                .map(|(secs, id)| format!("{secs} {id}\n"))
                .collect();
            self.lines = self.order.len();
            crate::config::trust::write_private(&self.file, text.as_bytes())
        } else {
            self.lines += 1;
            append_private(&self.file, format!("{now} {id}\n").as_bytes())
        };
        if let Err(e) = result {
            tracing::warn!(
                channel = "whatsapp",
                "cannot record a message id in {}: {e}; a redelivery after a restart may run again",
                self.file.display()
            );
        }
    }
}

fn append_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_data()
}

#[async_trait::async_trait]
impl Platform for WhatsApp {
    fn name(&self) -> &'static str {
        "whatsapp"
    }

    fn limits(&self) -> Limits {
        Limits {
            max: TEXT_MAX,
            measure: Measure::Chars,
            // No edit API: replies are sent whole.
            edit: None,
            // The indicator lasts 25 seconds or until the reply.
            typing: Some(Duration::from_secs(20)),
            buttons: true,
        }
    }

    fn format(&self, markdown: &str) -> String {
        super::format::whatsapp(markdown)
    }

    async fn receive(self: Arc<Self>, deliveries: Deliveries) -> Result<(), Failure> {
        // Webhook only: the Cloud API has no polling.
        self.deliveries.send_replace(Some(deliveries.clone()));
        deliveries.closed().await;
        self.deliveries.send_replace(None);
        Ok(())
    }

    async fn send(&self, chat: &Chat, text: &str, buttons: &[Button]) -> Result<Sent, Failure> {
        let body = if buttons.is_empty() {
            Self::text_body(chat, text)
        } else if text.chars().count() > BUTTON_BODY_MAX {
            // An interactive body takes 1024 characters: the question goes
            // first as text, the buttons under a short line.
            self.graph
                .post("send", &Self::text_body(chat, text))
                .await?;
            Self::buttons_body(chat, "Your answer:", buttons)?
        } else {
            Self::buttons_body(chat, text, buttons)?
        };
        let reply = self.graph.post("send", &body).await?;
        let id = reply["messages"][0]["id"]
            .as_str()
            .ok_or_else(|| Failure::Refused("WhatsApp returned no message id".to_string()))?;
        Ok(Sent {
            chat: chat.clone(),
            id: id.to_string(),
        })
    }

    async fn edit(&self, _sent: &Sent, _text: &str, _buttons: &[Button]) -> Result<(), Failure> {
        Err(Failure::Refused(
            "the WhatsApp Cloud API cannot edit a sent message".to_string(),
        ))
    }

    async fn typing(&self, chat: &Chat) -> Result<(), Failure> {
        let last = self.last_received.lock().get(&chat.id).cloned();
        // The indicator belongs to a received message: none, none shown.
        let Some(message_id) = last else {
            return Ok(());
        };
        let body = json!({
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
            "typing_indicator": {"type": "text"},
        });
        self.graph.post("typing", &body).await.map(|_| ())
    }

    async fn answer(&self, press: &Press, note: &str) -> Result<(), Failure> {
        // No acknowledgement exists for a button: the note is a reply
        // quoting the question.
        let mut body = Self::text_body(&press.chat, &self.format(note));
        if let Some(question) = &press.message {
            body["context"] = json!({"message_id": question.id});
        }
        retrying("answer", || self.graph.post("answer", &body))
            .await
            .map(|_| ())
    }

    async fn webhook(&self, request: WebhookRequest) -> WebhookResponse {
        if request.path != "/" {
            return WebhookResponse::new(404, "not found");
        }
        match request.method {
            axum::http::Method::GET => self.verify(request.query.as_deref()),
            axum::http::Method::POST => self.notify(request).await,
            _ => WebhookResponse::new(405, "method not allowed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &str, body: &[u8]) -> String {
        let hex = crate::gateway::channels::http::hmac_sha256_hex(secret.as_bytes(), &[body]);
        format!("sha256={hex}")
    }

    #[test]
    fn a_signature_is_the_hmac_of_the_raw_body_with_the_app_secret() {
        let body = br#"{"object":"whatsapp_business_account","entry":[]}"#;
        let good = sign("app-secret", body);
        assert!(signed(b"app-secret", body, Some(&good)));
        assert!(signed(
            b"app-secret",
            body,
            Some(&good.to_ascii_uppercase().replace("SHA256=", "sha256="))
        ));
        // The same JSON re-serialised with a space is another body.
        assert!(!signed(
            b"app-secret",
            br#"{"object": "whatsapp_business_account","entry":[]}"#,
            Some(&good)
        ));
        assert!(!signed(b"other-secret", body, Some(&good)));
        for bad in [
            None,
            Some(""),
            Some("sha256="),
            Some(&good[7..]),
            Some(&good[..good.len() - 1]),
        ] {
            assert!(!signed(b"app-secret", body, bad), "{bad:?}");
        }
        // Meta's legacy SHA-1 header is not a SHA-256 signature.
        assert!(!signed(
            b"app-secret",
            body,
            Some(&good.replace("sha256=", "sha1="))
        ));
        // The example of Meta's page: lowercase hex of 64 characters.
        assert_eq!(good.len(), "sha256=".len() + 64);
    }

    fn envelope(value: Value) -> Value {
        json!({"object": "whatsapp_business_account", "entry": [{"id": "WABA", "changes": [
            {"field": "messages", "value": value}]}]})
    }

    #[test]
    fn text_messages_and_button_replies_are_read_with_the_sender_s_name() {
        let body = envelope(json!({
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550783881", "phone_number_id": "1065"},
        "contacts": [{"profile": {"name": "Sheena Nelson"}, "wa_id": "16505551234"}],
        "messages": [
            {"from": "16505551234", "id": "wamid.A", "timestamp": "1739321024",
             "type": "text", "text": {"body": "hello"}},
            {"context": {"from": "15550783881", "id": "wamid.Q"},
             "from": "16505551234", "id": "wamid.B", "timestamp": "1739321025",
             "type": "interactive",
             "interactive": {"type": "button_reply", "button_reply": {"id": "ap:7:deny", "title": "Deny"}}},
            {"from": "16505551234", "id": "wamid.C", "timestamp": "1739321026",
             "type": "image", "image": {"id": "m1", "mime_type": "image/jpeg"}},
            {"from": "16505551234", "id": "wamid.D", "timestamp": "1739321026",
             "type": "reaction", "reaction": {"message_id": "wamid.Q", "emoji": "👍"}},
        ]}));
        let chat = Chat::dm("16505551234");
        assert_eq!(
            parse(&body, "1065"),
            vec![
                Inbound {
                    id: "wamid.A".into(),
                    from: "16505551234".into(),
                    what: What::Incoming(Incoming::Message(Message {
                        chat: chat.clone(),
                        user: "16505551234".into(),
                        name: Some("Sheena Nelson".into()),
                        text: "hello".into(),
                        id: "wamid.A".into(),
                        mentioned: true,
                    })),
                },
                Inbound {
                    id: "wamid.B".into(),
                    from: "16505551234".into(),
                    what: What::Incoming(Incoming::Press(Press {
                        chat: chat.clone(),
                        user: "16505551234".into(),
                        data: "ap:7:deny".into(),
                        handle: "wamid.B".into(),
                        message: Some(Sent {
                            chat: chat.clone(),
                            id: "wamid.Q".into()
                        }),
                    })),
                },
                Inbound {
                    id: "wamid.C".into(),
                    from: "16505551234".into(),
                    what: What::Unsupported("image".into()),
                },
            ]
        );
        // Another business number of the same app: not this channel's.
        assert_eq!(parse(&body, "9999"), vec![]);
    }

    #[test]
    fn statuses_other_objects_and_malformed_messages_are_not_messages() {
        let statuses = envelope(json!({
            "metadata": {"phone_number_id": "1065"},
            "statuses": [{"id": "wamid.S", "status": "delivered", "timestamp": "1", "recipient_id": "1"},
                         {"id": "wamid.F", "status": "failed", "timestamp": "1", "recipient_id": "1",
                          "errors": [{"code": 131047, "title": "Re-engagement message"}]}]}));
        assert_eq!(parse(&statuses, "1065"), vec![]);
        let mut page = envelope(json!({"metadata": {"phone_number_id": "1065"},
            "messages": [{"from": "1", "id": "wamid.X", "type": "text", "text": {"body": "hi"}}]}));
        assert_eq!(parse(&page, "1065").len(), 1);
        page["object"] = json!("page");
        assert_eq!(parse(&page, "1065"), vec![]);
        for message in [
            json!({"id": "wamid.X", "type": "text", "text": {"body": "no sender"}}),
            json!({"from": "1", "type": "text", "text": {"body": "no id"}}),
            json!({"from": "1", "id": "wamid.X", "type": "text"}),
            json!({"from": "1", "id": "wamid.X", "type": "interactive", "interactive": {"type": "nfm_reply"}}),
            json!({"from": "1", "id": "wamid.X", "type": "system", "system": {"body": "changed number"}}),
        ] {
            let body = envelope(
                json!({"metadata": {"phone_number_id": "1065"}, "messages": [message.clone()]}),
            );
            assert_eq!(parse(&body, "1065"), vec![], "{message}");
        }
        assert_eq!(parse(&json!("nonsense"), "1065"), vec![]);
    }

    #[test]
    fn graph_errors_are_classified_by_their_code() {
        let error = |code: u64| json!({"error": {"message": "m", "type": "OAuthException", "code": code, "fbtrace_id": "x"}});
        let secs = Duration::from_secs;
        assert_eq!(
            failure("send", 400, Some(&error(131056)), None),
            Failure::RateLimited(secs(6))
        );
        assert_eq!(
            failure("send", 429, Some(&error(130429)), None),
            Failure::RateLimited(secs(1))
        );
        for code in [4, 80007, 131048] {
            assert_eq!(
                failure("send", 400, Some(&error(code)), None),
                Failure::RateLimited(secs(60)),
                "{code}"
            );
        }
        assert_eq!(
            failure("send", 400, Some(&error(131056)), Some(secs(9))),
            Failure::RateLimited(secs(9))
        );
        assert!(matches!(
            failure("send", 401, Some(&error(190)), None),
            Failure::Fatal(_)
        ));
        assert!(matches!(
            failure("send", 500, Some(&error(131000)), None),
            Failure::Transient(_)
        ));
        assert_eq!(
            failure("send", 400, Some(&error(131047)), None),
            Failure::Refused("WhatsApp send: (#131047) m".into())
        );
        assert!(matches!(
            failure("send", 502, None, None),
            Failure::Transient(_)
        ));
        assert!(matches!(
            failure("send", 401, None, None),
            Failure::Fatal(_)
        ));
        assert!(matches!(
            failure("send", 404, None, None),
            Failure::Refused(_)
        ));
    }

    #[test]
    fn the_seen_list_survives_a_reload_is_bounded_and_forgets_old_ids() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("channels/whatsapp/seen");
        let now = 1_800_000_000;
        let mut seen = Seen::load(file.clone(), now);
        seen.record("wamid.1", now - SEEN_FOR_SECS - 10);
        seen.record("wamid.2", now);
        seen.record("bad id", now);
        let seen = Seen::load(file.clone(), now);
        assert!(seen.contains("wamid.2"));
        assert!(!seen.contains("wamid.1"), "older than a week");
        assert!(!seen.contains("bad id"));
        let max = 8;
        let mut seen = Seen::load_keeping(file.clone(), max, now);
        for i in 0..max * 5 + 3 {
            seen.record(&format!("wamid.n{i}"), now);
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            assert!(lines <= 2 * max, "{lines}");
        }
        let seen = Seen::load_keeping(file, max, now);
        let kept: Vec<&str> = seen.order.iter().map(|(_, id)| id.as_str()).collect();
        let newest: Vec<String> = (max * 4 + 3..max * 5 + 3)
            .map(|i| format!("wamid.n{i}"))
            .collect();
        assert_eq!(kept, newest);
    }

    #[test]
    fn a_missing_phone_number_id_is_named() {
        let env = |_: &str| Some("x".to_string());
        let dir = tempfile::tempdir().unwrap();
        let Err(error) = WhatsApp::new(&WhatsAppConfig::default(), &env, dir.path()) else {
            panic!("started without a phone number id")
        };
        assert!(error.contains("phone_number_id"), "{error}");
        let config = WhatsAppConfig {
            phone_number_id: Some("../evil".into()),
            ..Default::default()
        };
        assert!(WhatsApp::new(&config, &env, dir.path()).is_err());
    }

    #[test]
    fn approvals_are_reply_buttons_with_short_titles() {
        let buttons = [
            Button {
                label: "Allow once".into(),
                data: "ap:1:allow-once".into(),
                danger: false,
            },
            Button {
                label: "Always allow for this session".into(),
                data: "ap:1:allow-always".into(),
                danger: false,
            },
            Button {
                label: "Deny".into(),
                data: "ap:1:deny".into(),
                danger: true,
            },
        ];
        let body = WhatsApp::buttons_body(&Chat::dm("1"), "Run ls?", &buttons).unwrap();
        assert_eq!(
            body,
            json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": "1",
                "type": "interactive", "interactive": {"type": "button", "body": {"text": "Run ls?"},
                "action": {"buttons": [
                    {"type": "reply", "reply": {"id": "ap:1:allow-once", "title": "Allow once"}},
                    {"type": "reply", "reply": {"id": "ap:1:allow-always", "title": "Always allow for thi"}},
                    {"type": "reply", "reply": {"id": "ap:1:deny", "title": "Deny"}}]}}})
        );
    }
}
