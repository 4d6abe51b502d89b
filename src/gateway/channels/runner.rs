//! A channel as a client of the gateway: what users write becomes a
//! message to the chat's session through the hub's typed API (what
//! `chat.send` does; the commands are `reset`, `abort_key`, `patch`,
//! `resolve_approval`), and the events of those sessions become messages
//! (streamed by editing where the platform can).
//!
//! One task per channel reads what the platform receives and the gateway's
//! events; it never waits on the platform. Each chat has a task of its own
//! that does the chat's I/O in order, so that a chat whose messages are
//! rate-limited holds up nobody else, and a reply's text is coalesced: the
//! chat task shows the latest text when the platform lets it, never every
//! delta.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{ContentBlock, TextContent};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::access::{self, Access};
use super::http::Backoff;
use super::split::split;
use super::{
    Button, Chat, ChatKind, Delivery, Failure, Incoming, Limits, Message, Platform, Press, Sent,
};
use crate::config::channels::Groups;
use crate::gateway::conn::{Conn, Outbox, Scopes};
use crate::gateway::frames::now_ms;
use crate::gateway::hub::{ChannelState, ChannelsStatus, Hub, Patch};
use crate::gateway::protocol::events::{ChatEvent, ChatState};
use crate::gateway::protocol::sessions::Row;
use crate::gateway::schedule::is_silent;

/// Bytes of events a channel may have waiting: a channel is in-process and
/// reads them at once, so this is only a bound on a stuck task.
const OUTBOX_LIMIT: usize = 256 * 1024 * 1024;

/// Characters a streamed reply has before its first message: a reply is
/// not announced with a notification for its first word.
const FIRST_SHOW: usize = 24;

/// Started runs remembered (a run's events all come within its life).
const MAX_STARTED: usize = 4096;

/// A chat task with nothing to do for this long ends.
const CHAT_IDLE: Duration = Duration::from_secs(600);

/// What the user configured for a channel, beside the platform's own keys.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// User ids allowed without pairing.
    pub allow: Vec<String>,
    pub groups: Groups,
    /// The channel's `[sandbox]` (its sessions are unattended).
    pub sandbox: crate::tools::sandbox::SandboxConfig,
}

/// The running channels of a gateway.
#[derive(Clone, Default)]
pub struct Channels {
    channels: Arc<HashMap<&'static str, Handle>>,
    /// The configured channels that could not start, with why.
    failed: Arc<Vec<ChannelState>>,
}

#[derive(Clone)]
struct Handle {
    platform: Arc<dyn Platform>,
    chats: Arc<Chats>,
    state: Arc<Mutex<ChannelState>>,
    sandbox: crate::tools::sandbox::SandboxConfig,
    /// The runner's connection to the hub.
    conn: Arc<Conn>,
}

impl ChannelsStatus for Channels {
    fn status(&self) -> Vec<ChannelState> {
        let mut states: Vec<ChannelState> = self
            .channels
            .values()
            .map(|handle| handle.state.lock().clone())
            .collect();
        states.sort_by_key(|state| state.name);
        states.extend(self.failed.iter().cloned());
        states
    }

    fn sandbox(&self, name: &str) -> Option<crate::tools::sandbox::SandboxConfig> {
        self.channels.get(name).map(|h| h.sandbox.clone())
    }

    fn conn(&self, name: &str) -> Option<Arc<Conn>> {
        self.channels.get(name).map(|h| h.conn.clone())
    }
}

impl Channels {
    /// The platform serving webhooks at `/channels/<name>`.
    pub fn platform(&self, name: &str) -> Option<Arc<dyn Platform>> {
        self.channels.get(name).map(|h| h.platform.clone())
    }

    pub fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<_> = self.channels.keys().copied().collect();
        names.sort_unstable();
        names
    }

    /// Sends `markdown` to the chat `target` names (a chat's session key,
    /// `telegram:dm:123`), for the heartbeat and cron jobs. A silent reply
    /// (`NO_REPLY`, `HEARTBEAT_OK`) is never sent.
    pub fn deliver(&self, target: &str, markdown: &str) -> Result<(), String> {
        let channel = target.split(':').next().unwrap_or_default();
        let handle = self
            .channels
            .get(channel)
            .ok_or_else(|| format!("no channel `{channel}` is running for target `{target}`"))?;
        let chat = Chat::from_key(channel, target).ok_or_else(|| {
            format!("`{target}` names no chat (`<channel>:<dm|group|thread>:<id>`)")
        })?;
        if is_silent(markdown) {
            return Ok(());
        }
        handle
            .chats
            .push(&handle.platform, chat, Op::Text(markdown.to_string()));
        Ok(())
    }
}

/// What a channel shares with the other replicas of a cluster.
#[derive(Clone)]
pub struct Shared {
    pub claims: Arc<dyn crate::cluster::Claims>,
    /// How often a replica that waits for an exclusive channel's lease
    /// asks for it again, and one that holds it checks it still does.
    pub every: Duration,
}

/// Starts each channel: its connection to the hub, its receiving loop
/// (restarted with backoff when it fails; a fatal failure stops that
/// channel only) and its runner. In a cluster (`shared`), an exclusive
/// platform's receiving runs on one replica at a time, and what any
/// replica receives is taken once.
pub fn start(hub: &Arc<Hub>, built: super::Built, shared: Option<Shared>) -> Channels {
    let mut channels = HashMap::new();
    for (platform, settings) in built.platforms {
        let name = platform.name();
        let chats = Arc::new(Chats::default());
        let state = Arc::new(Mutex::new(ChannelState {
            name,
            ..ChannelState::default()
        }));
        let sandbox = settings.sandbox.clone();
        let (deliveries, received) = mpsc::channel(1024);
        let lease = shared.clone().filter(|_| platform.exclusive());
        tokio::spawn(receive(platform.clone(), deliveries, state.clone(), lease));
        let mut runner = Runner::new(
            hub,
            platform.clone(),
            settings,
            chats.clone(),
            state.clone(),
        );
        channels.insert(
            name,
            Handle {
                platform,
                chats,
                state,
                sandbox,
                conn: runner.conn.clone(),
            },
        );
        runner.shared = shared.clone();
        tokio::spawn(runner.run(received));
    }
    let failed = built
        .failed
        .into_iter()
        .map(|(name, why)| ChannelState {
            name,
            last_error: Some(why),
            ..ChannelState::default()
        })
        .collect();
    Channels {
        channels: Arc::new(channels),
        failed: Arc::new(failed),
    }
}

/// The platform's receiving loop, kept alive; `state` says how it goes.
async fn receive(
    platform: Arc<dyn Platform>,
    deliveries: mpsc::Sender<Delivery>,
    state: Arc<Mutex<ChannelState>>,
    lease: Option<Shared>,
) {
    let name = platform.name();
    let lease_name = format!("channel:{name}");
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    let stopped = |why: Option<String>| {
        let mut state = state.lock();
        state.running = false;
        state.last_stop_ms = Some(now_ms());
        if why.is_some() {
            state.last_error = why;
        }
    };
    loop {
        if let Some(lease) = &lease {
            wait_for_lease(lease, &lease_name, &state, &deliveries).await;
            if deliveries.is_closed() {
                stopped(None);
                return;
            }
        }
        let started = Instant::now();
        {
            let mut state = state.lock();
            state.running = true;
            state.last_start_ms = Some(now_ms());
        }
        let receiving = platform.clone().receive(deliveries.clone());
        let result = match &lease {
            None => receiving.await,
            Some(lease) => tokio::select! {
                result = receiving => result,
                lost = lease_lost(lease, &lease_name) => Err(Failure::Transient(lost)),
            },
        };
        if let Err(failure) = &result {
            state.lock().last_error = Some(failure.to_string());
        }
        match result {
            Ok(()) => {
                stopped(None);
                return;
            }
            Err(Failure::Fatal(why)) => {
                tracing::error!(channel = name, "the channel stopped: {why}");
                crate::gateway::eprintln_log(&format!("channel {name} stopped: {why}"));
                stopped(Some(why));
                return;
            }
            Err(Failure::RateLimited(wait)) => {
                tracing::warn!(
                    channel = name,
                    wait_ms = wait.as_millis() as u64,
                    "rate limited"
                );
                tokio::time::sleep(wait).await;
            }
            Err(failure) => {
                // A connection that lasted a while was fine: start over.
                if started.elapsed() > Duration::from_secs(60) {
                    backoff.reset();
                }
                let wait = backoff.wait();
                tracing::warn!(channel = name, error = %failure, wait_ms = wait.as_millis() as u64, "receiving failed; retrying");
                tokio::time::sleep(wait).await;
            }
        }
        if deliveries.is_closed() {
            stopped(None);
            return;
        }
    }
}

/// Waits until this replica holds the channel's lease `name` (another
/// replica receives meanwhile), or the runner is gone.
async fn wait_for_lease(
    lease: &Shared,
    name: &str,
    state: &Mutex<ChannelState>,
    deliveries: &mpsc::Sender<Delivery>,
) {
    let mut said = false;
    loop {
        match lease.claims.hold(name).await {
            Ok(true) => {
                if said {
                    tracing::info!(lease = name, "this replica receives now");
                }
                return;
            }
            Ok(false) => {
                if !said {
                    tracing::info!(lease = name, "another replica receives");
                    said = true;
                }
                let mut state = state.lock();
                state.running = false;
                state.last_error = Some("another replica of the cluster receives".to_string());
            }
            Err(e) => {
                tracing::warn!(
                    lease = name,
                    "cannot ask the cluster's store for the lease: {e}"
                );
                state.lock().last_error = Some(format!("the cluster's store: {e}"));
            }
        }
        tokio::select! {
            () = tokio::time::sleep(lease.every) => {}
            () = deliveries.closed() => return,
        }
    }
}

/// Returns (why) once this replica no longer holds the lease `name`, or
/// cannot tell: a replica cut off from the store stops receiving before
/// its lease runs out for the others.
async fn lease_lost(lease: &Shared, name: &str) -> String {
    loop {
        tokio::time::sleep(lease.every).await;
        match lease.claims.hold(name).await {
            Ok(true) => {}
            Ok(false) => return "another replica of the cluster took the channel".to_string(),
            Err(e) => return format!("the cluster's store cannot say who receives: {e}"),
        }
    }
}

/// How long a press on a question this replica has not heard of waits
/// for it to be told over the cluster's bus.
const HEAR_QUESTION: Duration = Duration::from_secs(3);

struct Runner {
    hub: Arc<Hub>,
    /// The cluster's claims, in a cluster.
    shared: Option<Shared>,
    conn: Arc<Conn>,
    platform: Arc<dyn Platform>,
    name: &'static str,
    settings: Settings,
    access: PathBuf,
    chats: Arc<Chats>,
    /// Approvals asked in each chat, newest last (for answers by number).
    asked: HashMap<Chat, Vec<String>>,
    /// Runs of followed sessions that started (their lifecycle `start`),
    /// newest last, bounded. A run that never started was merged into
    /// another (a message collected or steered into a running turn): its
    /// `final` repeats that turn's text, which the turn itself shows.
    started: VecDeque<String>,
    /// The text so far of each started run that has not ended, built from
    /// the `chat` deltas: the runner takes deltas without the cumulative
    /// `message` (`pincer.chat-deltas`), so a long reply does not cost the
    /// gateway its whole text, serialised and parsed again, per delta.
    texts: HashMap<String, String>,
    /// Approvals answered from a chat (its answer told the user there).
    answered: std::collections::HashSet<String>,
    inbox: Option<crate::gateway::conn::Inbox>,
    /// The channel's state, for `channels.status`.
    state: Arc<Mutex<ChannelState>>,
}

impl Runner {
    fn new(
        hub: &Arc<Hub>,
        platform: Arc<dyn Platform>,
        settings: Settings,
        chats: Arc<Chats>,
        state: Arc<Mutex<ChannelState>>,
    ) -> Self {
        let (out, inbox) = Outbox::new(OUTBOX_LIMIT);
        let conn = Arc::new(Conn {
            id: hub.next_conn_id(),
            out,
            scopes: Scopes {
                read: true,
                write: true,
                approvals: true,
                admin: false,
            },
            tool_events: false,
            scoped: true,
            // Replies are built from the deltas (see `Runner::texts`).
            chat_deltas: true,
            sessions: Mutex::new(Default::default()),
            sessions_changed: Default::default(),
            presence: None,
        });
        hub.register(conn.clone());
        let name = platform.name();
        Self {
            hub: hub.clone(),
            shared: None,
            conn,
            access: access_file(hub),
            name,
            platform,
            settings,
            chats,
            asked: HashMap::new(),
            started: VecDeque::new(),
            texts: HashMap::new(),
            answered: Default::default(),
            inbox: Some(inbox),
            state,
        }
    }

    async fn run(mut self, mut received: mpsc::Receiver<Delivery>) {
        let Some(mut inbox) = self.inbox.take() else {
            return;
        };
        loop {
            tokio::select! {
                delivery = received.recv() => {
                    let Some(mut delivery) = delivery else { break };
                    {
                        // It receives: whatever failed before is over.
                        let mut state = self.state.lock();
                        state.last_inbound_ms = Some(now_ms());
                        state.last_error = None;
                    }
                    let incoming = std::mem::replace(
                        &mut delivery.incoming,
                        Incoming::Message(Message {
                            chat: Chat::dm(""),
                            user: String::new(),
                            name: None,
                            text: String::new(),
                            id: String::new(),
                            mentioned: false,
                        }),
                    );
                    match incoming {
                        Incoming::Message(message) => self.message(message).await,
                        Incoming::Press(press) => self.press(press).await,
                    }
                    delivery.finish();
                }
                out = inbox.rx.recv() => {
                    let Some(out) = out else { break };
                    inbox.written(&out);
                    for (name, payload) in out.events() {
                        if let Ok(payload) = serde_json::from_str::<Value>(payload) {
                            self.event(name, &payload);
                        }
                    }
                }
            }
        }
        self.hub.unregister(self.conn.id);
    }

    fn allowed(&self, user: &str) -> bool {
        if self.settings.allow.iter().any(|u| u == user) {
            return true;
        }
        // Read each time: `pincer channels approve` writes it from another
        // process.
        match Access::load(&self.access) {
            Ok(access) => access.allowed(self.name, user, &self.settings.allow),
            Err(e) => {
                tracing::warn!(channel = self.name, "{e}");
                false
            }
        }
    }

    fn say(&self, chat: &Chat, text: impl Into<String>) {
        self.chats
            .push(&self.platform, chat.clone(), Op::Text(text.into()));
    }

    /// Whether this replica takes what it received (`id`, the platform's),
    /// in a cluster: another replica may have been given it too (a
    /// webhook retried elsewhere, an update polled again after its poller
    /// died). A store that cannot say is told to the chat: the message is
    /// not run twice, nor lost without a word.
    async fn first(&self, chat: Option<&Chat>, id: &str) -> bool {
        let Some(shared) = &self.shared else {
            return true;
        };
        let id = if id.len() > 200 {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(id.as_bytes());
            digest.iter().map(|b| format!("{b:02x}")).collect()
        } else {
            id.to_string()
        };
        match shared.claims.first(&format!("{}:{id}", self.name)).await {
            Ok(first) => {
                if !first {
                    tracing::debug!(channel = self.name, "another replica took {id}");
                }
                first
            }
            Err(e) => {
                tracing::warn!(channel = self.name, "cannot take {id}: {e}");
                if let Some(chat) = chat {
                    self.say(
                        chat,
                        "⚠️ The gateway cannot reach its cluster's store right now; send that again in a moment.",
                    );
                }
                false
            }
        }
    }

    async fn message(&mut self, message: Message) {
        let chat = message.chat.clone();
        if message.user.is_empty() || message.text.trim().is_empty() {
            return;
        }
        if !message.id.is_empty()
            && !self
                .first(Some(&chat), &format!("{}:{}", chat.id, message.id))
                .await
        {
            return;
        }
        if chat.kind != ChatKind::Dm {
            let addressed = match self.settings.groups {
                Groups::Off => false,
                Groups::Always => true,
                Groups::Mention => message.mentioned,
            };
            if !addressed {
                return;
            }
        }
        if !self.allowed(&message.user) {
            // Strangers in a group get nothing; in a direct message, a
            // pairing code for the owner (and nothing else).
            if chat.kind == ChatKind::Dm {
                self.pair(&message);
            }
            return;
        }
        let text = message.text.trim();
        if let Some(answer) = self.answer_by_number(&chat, text) {
            return self.resolve(&chat, &answer.0, answer.1).await;
        }
        if let Some(command) = text.strip_prefix('/') {
            let (word, rest) = command
                .split_once(char::is_whitespace)
                .unwrap_or((command, ""));
            // `/status@pincer_bot` in a Telegram group.
            let word = word.split('@').next().unwrap_or(word).to_ascii_lowercase();
            if self.command(&chat, &word, rest.trim()).await {
                return;
            }
        }
        let key = chat.key(self.name);
        let run = format!("{}:{}:{}", self.name, chat.id, message.id);
        let run: String = run.chars().take(256).collect();
        let content = vec![ContentBlock::Text(TextContent::new(message.text))];
        match self
            .hub
            .submit_unattended(&self.conn, &key, &run, content, &self.settings.sandbox)
            .await
        {
            Ok(_) => self.chats.push(&self.platform, chat, Op::Busy),
            Err(error) => self.say(&chat, format!("⚠️ {}", error.message)),
        }
    }

    fn pair(&self, message: &Message) {
        let now = crate::gateway::frames::now_ms() / 1000;
        let result = Access::load(&self.access).and_then(|mut access| {
            access.pair(self.name, &message.user, message.name.as_deref(), now)
        });
        let text = match result {
            // Told already, within the minute: a stranger who keeps
            // writing must not spend the bot's rate limit on replies.
            Ok(pairing) if !pairing.reply => return,
            Ok(access::Pairing { code, .. }) => format!(
                "This assistant is private. To ask its owner for access, give them this code:\n\n{code}\n\nThey approve it with `pincer channels approve {code}`. The code lasts an hour."
            ),
            Err(e) => {
                tracing::warn!(channel = self.name, "pairing: {e}");
                "This assistant is private, and cannot take more access requests now. Try again later.".to_string()
            }
        };
        self.say(&message.chat, text);
    }

    /// `1`, `2`, `3` (or the decision's word) answers the newest approval
    /// asked in the chat.
    fn answer_by_number(&self, chat: &Chat, text: &str) -> Option<(String, &'static str)> {
        let id = self.asked.get(chat)?.last()?.clone();
        let decision = match text.to_ascii_lowercase().trim_end_matches('.') {
            "1" | "allow" | "yes" | "y" => "allow-once",
            "2" | "always" => "allow-always",
            "3" | "deny" | "no" | "n" => "deny",
            _ => return None,
        };
        Some((id, decision))
    }

    async fn command(&mut self, chat: &Chat, word: &str, rest: &str) -> bool {
        let key = chat.key(self.name);
        let hub = &self.hub;
        let reply = match word {
            "new" | "reset" => {
                match hub.reset(&key, None).await {
                    Ok(_) => "Started a new session.".to_string(),
                    Err(e) => format!("⚠️ {}", e.message),
                }
            }
            "stop" => {
                match hub.abort_key(&key, None) {
                    Ok(Some(_)) => "Stopped.".to_string(),
                    Ok(None) => "Nothing is running.".to_string(),
                    Err(e) => format!("⚠️ {}", e.message),
                }
            }
            "model" if rest.is_empty() => {
                let current = self.row(&key).await;
                let models = hub.models();
                let mut text = match current.as_ref().and_then(|r| r.model.as_deref()) {
                    Some(model) => format!("Model: {}/{model}", current.as_ref().and_then(|r| r.model_provider.as_deref()).unwrap_or("?")),
                    None => "Model: the default".to_string(),
                };
                if let Ok(models) = models {
                    let names: Vec<String> = models
                        .iter()
                        .map(|m| format!("- {}", m.id))
                        .take(40)
                        .collect();
                    if !names.is_empty() {
                        text.push_str("\n\nAvailable:\n\n");
                        text.push_str(&names.join("\n"));
                        text.push_str("\n\nChange it with /model PROVIDER/MODEL");
                    }
                }
                text
            }
            "model" => {
                let patch = Patch {
                    model: Some(rest),
                    ..Patch::default()
                };
                match hub.patch(&key, patch).await {
                    Ok(_) => format!("Model set to {rest}."),
                    Err(e) => format!("⚠️ {}", e.message),
                }
            }
            "status" => match self.row(&key).await {
                None => "No session yet: write something to start one.".to_string(),
                Some(row) => status_text(&row, hub.lookup(&key).is_some_and(|s| !hub.unfinished(&s).is_empty())),
            },
            "start" | "help" => "Write to talk to the agent. Commands: /new (a new session), /stop (stop the reply), /undo (put back the last turn's files and take it out of the conversation), /redo, /model [name], /status.".to_string(),
            _ => return false,
        };
        self.say(chat, reply);
        true
    }

    /// The session's row as `sessions.list` shows it, unless archived.
    async fn row(&self, key: &str) -> Option<Row> {
        self.hub.row_of(key).filter(|row| !row.archived)
    }

    async fn press(&mut self, press: Press) {
        if !press.handle.is_empty() && !self.first(None, &format!("press:{}", press.handle)).await {
            return;
        }
        let note = if !self.allowed(&press.user) {
            "You may not answer this.".to_string()
        } else if let Some((id, decision)) = parse_answer(&press.data) {
            self.resolve_checked(&press.chat, &id, decision).await
        } else {
            "This button is not pincer's.".to_string()
        };
        let platform = self.platform.clone();
        tokio::spawn(async move {
            if let Err(e) = platform.answer(&press, &note).await {
                tracing::debug!(channel = platform.name(), error = %e, "answering a button");
            }
        });
    }

    async fn resolve(&mut self, chat: &Chat, id: &str, decision: &str) {
        let note = self.resolve_checked(chat, id, decision).await;
        self.say(chat, note);
    }

    /// Answers approval `id` from `chat`, which must be the chat whose
    /// session asked.
    async fn resolve_checked(&mut self, chat: &Chat, id: &str, decision: &str) -> String {
        let key = chat.key(self.name);
        let asked_here = self.hub.approval(id).is_some_and(|a| a.session_key == key);
        if !asked_here {
            // Asked by the chat's session on another replica of the
            // cluster (a webhook may bring the press to any): answered
            // there.
            // The press may come before the question, told over the bus,
            // reached this replica: it is waited for a moment.
            if self
                .hub
                .approval_key_elsewhere_within(id, HEAR_QUESTION)
                .await
                .as_deref()
                == Some(key.as_str())
            {
                return match self.hub.resolve_elsewhere(id, decision).await {
                    Ok(()) => {
                        self.answered.insert(id.to_string());
                        decision_text(decision).to_string()
                    }
                    Err(e) => format!("⚠️ {}", e.message),
                };
            }
            return "This question was already answered or has expired.".to_string();
        }
        match self.hub.resolve_approval(id, decision) {
            Ok(_) => {
                self.answered.insert(id.to_string());
                decision_text(decision).to_string()
            }
            Err(e) => format!("⚠️ {}", e.message),
        }
    }

    /// A run's text so far after a `chat` delta: the whole text when the
    /// delta carries it (`message`: the first this runner gets of a run),
    /// else the text before with `deltaText` added (or put in its place,
    /// `replace`).
    fn delta_text(&mut self, run: &str, event: &ChatEvent<'_>) -> String {
        let text = self.texts.entry(run.to_string()).or_default();
        apply_delta(text, event);
        text.clone()
    }

    fn chat_of(&self, payload: &Value) -> Option<Chat> {
        let key = payload["sessionKey"]
            .as_str()
            .or_else(|| payload["request"]["sessionKey"].as_str())?;
        Chat::from_key(self.name, key)
    }

    fn event(&mut self, name: &str, payload: &Value) {
        match name {
            "chat" => {
                let Ok(event) = ChatEvent::deserialize(payload) else {
                    return;
                };
                let Some(chat) = event
                    .session_key
                    .as_deref()
                    .and_then(|key| Chat::from_key(self.name, key))
                else {
                    return;
                };
                let run = event.run_id.to_string();
                if !self.started.contains(&run) {
                    return;
                }
                let text = if event.state == ChatState::Delta {
                    self.delta_text(&run, &event)
                } else {
                    self.texts.remove(&run);
                    event
                        .message
                        .as_ref()
                        .map(|m| m.joined(false))
                        .unwrap_or_default()
                };
                let op = match event.state {
                    ChatState::Delta => Op::Stream {
                        run,
                        text,
                        end: None,
                    },
                    ChatState::Final => Op::Stream {
                        run,
                        text,
                        end: Some(End::Done),
                    },
                    ChatState::Aborted => Op::Stream {
                        run,
                        text,
                        end: Some(End::Aborted),
                    },
                    ChatState::Error => {
                        let why = event
                            .error_message
                            .as_deref()
                            .unwrap_or("the run failed")
                            .to_string();
                        Op::Stream {
                            run,
                            text,
                            end: Some(End::Error(why)),
                        }
                    }
                };
                self.chats.push(&self.platform, chat, op);
            }
            "agent" if payload["stream"] == "lifecycle" => {
                let Some(chat) = self.chat_of(payload) else {
                    return;
                };
                if payload["data"]["phase"] == "start" {
                    if let Some(run) = payload["runId"].as_str() {
                        if self.started.len() >= MAX_STARTED
                            && let Some(oldest) = self.started.pop_front()
                        {
                            self.texts.remove(&oldest);
                        }
                        self.started.push_back(run.to_string());
                    }
                    self.chats.push(&self.platform, chat, Op::Busy);
                }
            }
            "exec.approval.requested" => {
                let Some(chat) = self.chat_of(payload) else {
                    return;
                };
                let Some(id) = payload["id"].as_str() else {
                    return;
                };
                // In a cluster, a question another replica asked is heard
                // here too: that replica's channel puts it in the chat,
                // once.
                if self.hub.approval(id).is_none() {
                    return;
                }
                let request = &payload["request"];
                let what = request["command"]
                    .as_str()
                    .or_else(|| request["toolName"].as_str())
                    .unwrap_or("a tool");
                let decisions: Vec<String> = payload["allowedDecisions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d.as_str().map(String::from))
                    .collect();
                let decisions = if decisions.is_empty() {
                    vec!["allow-once".into(), "deny".into()]
                } else {
                    decisions
                };
                // A question of its own (an undo) names its choices, and
                // its title is the question; a tool's is a command to run.
                let own = payload["labels"].as_object().is_some_and(|l| !l.is_empty());
                let mut text = if own {
                    format!("🔐 {}", clip(what, 300))
                } else {
                    format!("🔐 The agent asks to run:\n```\n{}\n```", clip(what, 1500))
                };
                text.push_str(&shown(request));
                // The question's own words for its choices when it has
                // them (an undo offers "Restore", not "Allow once").
                let label = |d: &str| {
                    payload["labels"][d]
                        .as_str()
                        .filter(|l| !l.is_empty())
                        .map_or_else(|| decision_word(d).to_string(), |l| clip(l, 60))
                };
                if !self.platform.limits().buttons {
                    let codes: Vec<String> = decisions
                        .iter()
                        .filter_map(|d| Some(format!("{} {}", number_of(d)?, label(d))))
                        .collect();
                    text.push_str(&format!("\nReply {}.", codes.join(", ")));
                }
                let buttons = decisions
                    .iter()
                    .map(|d| Button {
                        label: label(d),
                        data: format!("ap:{id}:{d}"),
                        danger: d == "deny",
                    })
                    .collect();
                self.asked
                    .entry(chat.clone())
                    .or_default()
                    .push(id.to_string());
                self.chats.push(
                    &self.platform,
                    chat,
                    Op::Question {
                        id: id.to_string(),
                        text,
                        buttons,
                    },
                );
            }
            "exec.approval.resolved" => {
                let Some(chat) = self.chat_of(payload) else {
                    return;
                };
                let Some(id) = payload["id"].as_str() else {
                    return;
                };
                // Settled where it was put in the chat (in a cluster, the
                // replica that asked it).
                if !self
                    .asked
                    .get(&chat)
                    .is_some_and(|ids| ids.iter().any(|i| i == id))
                {
                    return;
                }
                if let Some(ids) = self.asked.get_mut(&chat) {
                    ids.retain(|i| i != id);
                    if ids.is_empty() {
                        self.asked.remove(&chat);
                    }
                }
                let decision = payload["decision"].as_str().unwrap_or("deny");
                let by = payload["resolvedBy"].as_str().unwrap_or_default();
                let note = if by == "timeout" {
                    "Not answered in time: rejected.".to_string()
                } else {
                    decision_text(decision).to_string()
                };
                // Where the question cannot be edited (WhatsApp), an
                // outcome the chat did not choose (a timeout, another
                // client) is said below it.
                let answered_here = self.answered.remove(id);
                if self.platform.limits().edit.is_none() && !answered_here {
                    self.say(&chat, note.clone());
                }
                self.chats.push(
                    &self.platform,
                    chat,
                    Op::Settled {
                        id: id.to_string(),
                        note,
                    },
                );
            }
            _ => {}
        }
    }
}

fn access_file(hub: &Hub) -> PathBuf {
    super::access_file(hub.data_dir())
}

fn parse_answer(data: &str) -> Option<(String, &'static str)> {
    let rest = data.strip_prefix("ap:")?;
    let (id, decision) = rest.rsplit_once(':')?;
    let decision = match decision {
        "allow-once" => "allow-once",
        "allow-always" => "allow-always",
        "deny" => "deny",
        _ => return None,
    };
    Some((id.to_string(), decision))
}

fn number_of(decision: &str) -> Option<u8> {
    match decision {
        "allow-once" => Some(1),
        "allow-always" => Some(2),
        "deny" => Some(3),
        _ => None,
    }
}

fn decision_word(decision: &str) -> &'static str {
    match decision {
        "allow-once" => "Allow once",
        "allow-always" => "Always allow",
        _ => "Deny",
    }
}

fn decision_text(decision: &str) -> &'static str {
    match decision {
        "allow-once" => "✅ Allowed once.",
        "allow-always" => "✅ Always allowed.",
        _ => "❌ Denied.",
    }
}

fn status_text(row: &Row, busy: bool) -> String {
    let mut lines = vec![format!(
        "- Model: {}/{}",
        row.model_provider.as_deref().unwrap_or("?"),
        row.model.as_deref().unwrap_or("default")
    )];
    if let Some(used) = row.total_tokens {
        match row.context_tokens {
            Some(window) if window > 0 => lines.push(format!(
                "- Context: {used} of {window} tokens ({}%)",
                used * 100 / window
            )),
            _ => lines.push(format!("- Context: {used} tokens")),
        }
    }
    lines.push(format!("- Cost: ${:.4}", row.cost_usd));
    if let Some(mode) = row.queue_mode {
        lines.push(format!("- Queue mode: {mode}"));
    }
    lines.push(format!("- Thinking: {}", row.thinking_level));
    lines.push(if busy {
        "- Working.".into()
    } else {
        "- Idle.".into()
    });
    lines.join("\n")
}

/// The most files a question in a chat names with their changed lines.
const MAX_CHAT_DIFFS: usize = 10;

/// What a question says besides its title, for a chat: its text (an
/// undo's files, what overwriting would lose) and each diff's file with
/// the lines it adds and removes (a chat shows no diff well).
fn shown(request: &Value) -> String {
    let mut out = String::new();
    if let Some(details) = request["details"].as_str().filter(|d| !d.is_empty()) {
        out.push('\n');
        out.push_str(&clip(details, 1500));
    }
    let diffs: Vec<&Value> = request["diffs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["path"].is_string())
        .collect();
    let cwd = request["cwd"].as_str().unwrap_or_default();
    for diff in diffs.iter().take(MAX_CHAT_DIFFS) {
        let path = diff["path"].as_str().unwrap_or_default();
        let path = path
            .strip_prefix(cwd)
            .filter(|_| !cwd.is_empty())
            .map_or(path, |p| p.trim_start_matches('/'));
        let (added, removed) = changed_lines(
            diff["oldText"].as_str().unwrap_or_default(),
            diff["newText"].as_str().unwrap_or_default(),
        );
        out.push_str(&format!("\n• {} (+{added} −{removed})", clip(path, 200)));
    }
    if diffs.len() > MAX_CHAT_DIFFS {
        out.push_str(&format!("\n• and {} more", diffs.len() - MAX_CHAT_DIFFS));
    }
    out
}

/// How many lines `new` has that `old` has not, and the other way round.
fn changed_lines(old: &str, new: &str) -> (usize, usize) {
    let mut counts: HashMap<&str, isize> = HashMap::new();
    for line in old.lines() {
        *counts.entry(line).or_default() -= 1;
    }
    for line in new.lines() {
        *counts.entry(line).or_default() += 1;
    }
    let added = counts
        .values()
        .filter(|n| **n > 0)
        .map(|n| n.unsigned_abs())
        .sum();
    let removed = counts
        .values()
        .filter(|n| **n < 0)
        .map(|n| n.unsigned_abs())
        .sum();
    (added, removed)
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(max).collect();
    clipped.push('…');
    clipped
}

/// Brings `text` up to date with one `chat` delta (see
/// [`Runner::delta_text`]).
fn apply_delta(text: &mut String, event: &ChatEvent<'_>) {
    if let Some(message) = &event.message {
        *text = message.joined(false);
    } else {
        if event.replace {
            text.clear();
        }
        text.push_str(event.delta_text.as_deref().unwrap_or_default());
    }
}

// ----- chats -----

#[derive(Clone, Debug, PartialEq)]
enum End {
    Done,
    Aborted,
    Error(String),
}

/// Something to do in a chat, in order.
#[derive(Debug)]
enum Op {
    /// A message of pincer's own (a command's answer, a delivery).
    Text(String),
    /// A run of the chat's session started: show typing until it ends.
    Busy,
    /// A run's text so far (cumulative), and how it ended.
    Stream {
        run: String,
        text: String,
        end: Option<End>,
    },
    Question {
        id: String,
        text: String,
        buttons: Vec<Button>,
    },
    Settled {
        id: String,
        note: String,
    },
}

/// The chat tasks of one channel.
#[derive(Default)]
struct Chats {
    chats: Mutex<HashMap<Chat, Arc<Mailbox>>>,
}

#[derive(Default)]
struct Mailbox {
    state: Mutex<Waiting>,
    notify: Notify,
}

#[derive(Default)]
struct Waiting {
    ops: VecDeque<Op>,
    /// The newest text of each run still streaming (coalesced: one entry
    /// per run, whatever the number of deltas).
    streams: Vec<(String, String, Option<End>)>,
    busy: bool,
    closed: bool,
}

impl Chats {
    fn push(&self, platform: &Arc<dyn Platform>, chat: Chat, op: Op) {
        let mut chats = self.chats.lock();
        // Chats that went quiet leave the map now and then, so that many
        // chats over time (strangers each given a pairing code) do not
        // grow it for good.
        if !chats.contains_key(&chat) && chats.len() >= 256 && chats.len().is_power_of_two() {
            chats.retain(|_, mailbox| !mailbox.lock().closed);
        }
        loop {
            let mailbox = chats
                .entry(chat.clone())
                .or_insert_with(|| ChatTask::start(platform, &chat))
                .clone();
            let mut waiting = mailbox.lock();
            if waiting.closed {
                // Its task ended when the chat went quiet (it closes only
                // under this lock, with nothing waiting): a new one.
                drop(waiting);
                chats.remove(&chat);
                continue;
            }
            match op {
                Op::Stream { run, text, end } => {
                    match waiting.streams.iter_mut().find(|(r, ..)| *r == run) {
                        // Events of one run arrive in order; nothing
                        // replaces its end.
                        Some(stream) if stream.2.is_none() => {
                            stream.1 = text;
                            stream.2 = end;
                        }
                        Some(_) => {}
                        None => waiting.streams.push((run, text, end)),
                    }
                }
                Op::Busy => waiting.busy = true,
                op => waiting.ops.push_back(op),
            }
            drop(waiting);
            mailbox.notify.notify_one();
            return;
        }
    }
}

impl Mailbox {
    fn lock(&self) -> parking_lot::MutexGuard<'_, Waiting> {
        self.state.lock()
    }
}

/// A streamed reply being shown.
struct Showing {
    run: String,
    /// Bytes of the run's text shown in earlier messages (before a
    /// question cut the reply).
    offset: usize,
    messages: Vec<(Sent, String)>,
    last_edit: Option<Instant>,
}

struct ChatTask {
    platform: Arc<dyn Platform>,
    limits: Limits,
    chat: Chat,
    mailbox: Arc<Mailbox>,
    questions: HashMap<String, (Sent, String)>,
    showing: Option<Showing>,
    /// Runs already shown to their end.
    ended: VecDeque<String>,
    typing_until: Option<Instant>,
    last_typing: Option<Instant>,
}

impl ChatTask {
    /// A chat's task, running; its mailbox.
    fn start(platform: &Arc<dyn Platform>, chat: &Chat) -> Arc<Mailbox> {
        let mailbox = Arc::new(Mailbox::default());
        let task = ChatTask::new(platform.clone(), chat.clone(), mailbox.clone());
        tokio::spawn(task.run());
        mailbox
    }

    fn new(platform: Arc<dyn Platform>, chat: Chat, mailbox: Arc<Mailbox>) -> Self {
        let limits = platform.limits();
        Self {
            platform,
            limits,
            chat,
            mailbox,
            questions: HashMap::new(),
            showing: None,
            ended: VecDeque::new(),
            typing_until: None,
            last_typing: None,
        }
    }

    async fn run(mut self) {
        let mut idle_since = Instant::now();
        loop {
            let wake = self.next_wake();
            tokio::select! {
                _ = self.mailbox.notify.notified() => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
            let worked = self.work().await;
            if worked {
                idle_since = Instant::now();
            } else if idle_since.elapsed() > CHAT_IDLE && self.showing.is_none() {
                let mut waiting = self.mailbox.lock();
                if waiting.ops.is_empty() && waiting.streams.is_empty() {
                    waiting.closed = true;
                    return;
                }
            }
        }
    }

    fn next_wake(&self) -> Instant {
        let far = Instant::now() + Duration::from_secs(60);
        let mut wake = far;
        if let (Some(showing), Some(interval)) = (&self.showing, self.limits.edit)
            && let Some(last) = showing.last_edit
        {
            wake = wake.min(last + interval);
        }
        if let (Some(_), Some(every)) = (self.typing_until, self.limits.typing) {
            wake = wake.min(
                self.last_typing
                    .map(|t| t + every)
                    .unwrap_or_else(Instant::now),
            );
        }
        wake
    }

    /// Does what is waiting; `true` when there was something.
    async fn work(&mut self) -> bool {
        let mut worked = false;
        loop {
            let (op, busy) = {
                let mut waiting = self.mailbox.lock();
                (waiting.ops.pop_front(), std::mem::take(&mut waiting.busy))
            };
            if busy {
                self.typing_until = Some(Instant::now() + Duration::from_secs(600));
                worked = true;
            }
            match op {
                Some(op) => {
                    // What comes now goes below the reply being shown.
                    self.flush().await;
                    self.apply(op).await;
                    worked = true;
                }
                None => break,
            }
        }
        worked |= self.stream().await;
        self.typing().await;
        worked
    }

    async fn apply(&mut self, op: Op) {
        match op {
            Op::Text(markdown) => {
                for piece in self.pieces(&markdown) {
                    self.send(&piece, &[]).await;
                }
            }
            Op::Question { id, text, buttons } => {
                let formatted = self.platform.format(&text);
                if let Some(sent) = self.send(&formatted, &buttons).await {
                    self.questions.insert(id, (sent, formatted));
                }
            }
            Op::Settled { id, note } => {
                if let Some((sent, text)) = self.questions.remove(&id) {
                    let text = format!("{text}\n\n{}", self.platform.format(&note));
                    let platform = self.platform.clone();
                    if let Err(e) =
                        super::http::retrying("edit", || platform.edit(&sent, &text, &[])).await
                    {
                        tracing::debug!(channel = platform.name(), error = %e, "settling a question");
                    }
                }
            }
            Op::Busy | Op::Stream { .. } => {}
        }
    }

    /// Moves the front stream along: starts it, shows its newest text, and
    /// ends it. `true` when it did something.
    async fn stream(&mut self) -> bool {
        let front = {
            let waiting = self.mailbox.lock();
            waiting.streams.first().cloned()
        };
        let Some((run, text, end)) = front else {
            return false;
        };
        if self.ended.contains(&run) {
            self.pop_stream(&run);
            return true;
        }
        if self.showing.as_ref().is_none_or(|s| s.run != run) {
            self.showing = Some(Showing {
                run: run.clone(),
                offset: 0,
                messages: Vec::new(),
                last_edit: None,
            });
        }
        match &end {
            None => {
                if self.limits.edit.is_some() {
                    self.show(&text, false).await;
                }
            }
            Some(end) => {
                self.show(&text, true).await;
                match end {
                    End::Done => {}
                    End::Aborted => {
                        self.send(&self.platform.format("_(stopped)_"), &[]).await;
                    }
                    End::Error(why) => {
                        let text = self.platform.format(&format!("⚠️ {why}"));
                        self.send(&text, &[]).await;
                    }
                }
                self.showing = None;
                self.typing_until = None;
                self.ended.push_back(run.clone());
                if self.ended.len() > 64 {
                    self.ended.pop_front();
                }
                self.pop_stream(&run);
            }
        }
        true
    }

    fn pop_stream(&self, run: &str) {
        let mut waiting = self.mailbox.lock();
        waiting.streams.retain(|(r, ..)| r != run);
    }

    /// Shows the stream's `text` (past its offset): edits the messages
    /// that changed and sends the ones that are new, at most once per
    /// edit interval unless `now`.
    async fn show(&mut self, text: &str, now: bool) {
        let Some(showing) = &self.showing else { return };
        let visible = text.get(showing.offset..).unwrap_or_default();
        let trimmed = visible.trim();
        if !now {
            // A reply that may still turn out to be silent, or that has
            // barely begun, waits.
            if trimmed.len() < FIRST_SHOW && showing.messages.is_empty() {
                return;
            }
            if might_be_silent(trimmed) {
                return;
            }
            if let (Some(last), Some(interval)) = (showing.last_edit, self.limits.edit)
                && last.elapsed() < interval
            {
                return;
            }
        }
        if trimmed.is_empty() || (showing.messages.is_empty() && is_silent(trimmed)) {
            return;
        }
        let pieces = self.pieces(visible);
        let platform = self.platform.clone();
        for (i, piece) in pieces.into_iter().enumerate() {
            let Some(showing) = self.showing.as_mut() else {
                return;
            };
            match showing.messages.get(i) {
                Some((_, shown)) if *shown == piece => {}
                Some((sent, _)) => {
                    let sent = sent.clone();
                    let result = if now {
                        super::http::retrying("edit", || platform.edit(&sent, &piece, &[])).await
                    } else {
                        platform.edit(&sent, &piece, &[]).await
                    };
                    match result {
                        Ok(()) => {
                            if let Some(showing) = self.showing.as_mut() {
                                showing.messages[i].1 = piece;
                                showing.last_edit = Some(Instant::now());
                            }
                        }
                        Err(Failure::RateLimited(wait)) => {
                            // Shown later: the next edit carries the text.
                            if let Some(showing) = self.showing.as_mut() {
                                showing.last_edit = Some(Instant::now() + wait);
                            }
                            return;
                        }
                        Err(e) => {
                            tracing::debug!(channel = platform.name(), error = %e, "editing a reply");
                            return;
                        }
                    }
                }
                None => {
                    let Some(sent) = self.send(&piece, &[]).await else {
                        return;
                    };
                    if let Some(showing) = self.showing.as_mut() {
                        showing.messages.push((sent, piece));
                        showing.last_edit = Some(Instant::now());
                    }
                }
            }
        }
    }

    /// Ends the reply being shown (shown whole) so that what comes next
    /// goes below: a question cuts a reply in two.
    async fn flush(&mut self) {
        let front = {
            let waiting = self.mailbox.lock();
            waiting.streams.first().cloned()
        };
        let (Some((run, text, _)), Some(showing)) = (front, &self.showing) else {
            return;
        };
        let visible = text.get(showing.offset..).unwrap_or_default().trim();
        if showing.run != run || (showing.messages.is_empty() && might_be_silent(visible)) {
            return;
        }
        self.show(&text, true).await;
        if let Some(showing) = self.showing.as_mut() {
            showing.offset = text.len();
            showing.messages.clear();
        }
    }

    /// `markdown` cut into messages under the platform's limit, each in
    /// its markup.
    fn pieces(&self, markdown: &str) -> Vec<String> {
        let max = self.limits.max;
        let measure = self.limits.measure;
        let mut limit = max;
        loop {
            let pieces: Vec<String> = split(markdown, limit, measure)
                .iter()
                .map(|p| self.platform.format(p))
                .collect();
            // Markup can be longer than the markdown (escapes, tags):
            // split finer until every piece fits.
            if limit <= 64 || pieces.iter().all(|p| measure.len(p) <= max) {
                return pieces;
            }
            limit = limit * 3 / 4;
        }
    }

    async fn send(&mut self, text: &str, buttons: &[Button]) -> Option<Sent> {
        let platform = self.platform.clone();
        let chat = self.chat.clone();
        match super::http::retrying("send", || platform.send(&chat, text, buttons)).await {
            Ok(sent) => Some(sent),
            Err(e) => {
                tracing::warn!(channel = platform.name(), error = %e, "cannot send a message");
                None
            }
        }
    }

    async fn typing(&mut self) {
        let (Some(until), Some(every)) = (self.typing_until, self.limits.typing) else {
            return;
        };
        if Instant::now() > until {
            self.typing_until = None;
            return;
        }
        if self.last_typing.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.last_typing = Some(Instant::now());
        if let Err(e) = self.platform.typing(&self.chat).await {
            tracing::debug!(channel = self.platform.name(), error = %e, "typing");
        }
    }
}

/// Whether a reply so far could still become a silent one.
fn might_be_silent(text: &str) -> bool {
    [crate::context::SILENT_REPLY, "HEARTBEAT_OK"]
        .iter()
        .any(|token| {
            token.starts_with(text) || (text.starts_with(token) && text.len() <= token.len() + 300)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reply_is_built_from_the_whole_first_delta_then_the_new_text() {
        let mut text = String::new();
        let message =
            |t: &str| json!({"role": "assistant", "content": [{"type": "text", "text": t}]});
        let steps = [
            (
                json!({"deltaText": "lo", "message": message("Hel lo")}),
                "Hel lo",
            ),
            (json!({"deltaText": ", wor"}), "Hel lo, wor"),
            (json!({"deltaText": "ld."}), "Hel lo, world."),
            (
                json!({"deltaText": "Hello, world.", "replace": true}),
                "Hello, world.",
            ),
            (json!({"deltaText": " Bye."}), "Hello, world. Bye."),
        ];
        for (mut delta, expected) in steps {
            delta["runId"] = json!("r");
            delta["state"] = json!("delta");
            let event = ChatEvent::deserialize(&delta).unwrap();
            apply_delta(&mut text, &event);
            assert_eq!(text, expected, "after {delta}");
        }
    }

    #[test]
    fn answers_are_pincer_s_own_buttons_only() {
        assert_eq!(
            parse_answer("ap:1b2c-3d:allow-always"),
            Some(("1b2c-3d".to_string(), "allow-always"))
        );
        for data in ["ap:x:maybe", "xx:1:deny", "ap:deny", ""] {
            assert_eq!(parse_answer(data), None, "{data}");
        }
    }

    #[test]
    fn a_reply_is_held_while_it_may_still_be_silent() {
        for text in [
            "N",
            "NO_RE",
            "NO_REPLY",
            "HEARTBEAT",
            "HEARTBEAT_OK all fine",
        ] {
            assert!(might_be_silent(text), "{text}");
        }
        for text in ["No, ", "Here is the plan", "NOTE: x"] {
            assert!(!might_be_silent(text), "{text}");
        }
    }
}
