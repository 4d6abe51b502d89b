//! The gateway's shared state: its clients, the session keys, the runs and
//! the approvals, and the translation of what sessions do (the ACP
//! registry's observer) into the protocol's `chat`, `agent`, `session.*`
//! and `exec.approval.*` events.
//!
//! Runs: `chat.send`'s idempotency key is the run id, passed to the agent
//! as the prompt's tag. The observer says when the agent starts and ends
//! each tagged prompt, in order with the prompt's updates, so every event
//! of a run, tool events included, goes out before its `final`. A prompt
//! an editor typed (no tag) gets a run id here, so clients following the
//! session see it too.
//!
//! Idle sessions: the sessions the gateway opened stay loaded while they
//! are used; one that has had no run, nothing queued and no approval
//! waiting for `[gateway] session_idle_secs` is unloaded (its transcript
//! stays) and loaded again, transparently, by the next [`Hub::open`]. So a
//! gateway that has served thousands of sessions holds what its busy ones
//! need, not what every session it ever opened did.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    ContentBlock, RequestPermissionRequest, RequestPermissionResponse, StopReason,
};
use serde_json::{Value, json};

use super::conn::{Conn, Need, Out};
use super::frames::now_ms;
use super::link::{Approver, Link};
use crate::acp::registry::Registry;

mod approvals;
mod events;
mod usage;
mod view;

pub use approvals::not_found;
pub use usage::Used;
pub use view::Patch;
pub(super) use view::millis;

use approvals::preview;

/// How long a finished run answers a repeated idempotency key.
const DEDUPE_TTL: Duration = Duration::from_secs(300);

/// How long `collect` waits for more messages after a run ends before it
/// sends what it gathered.
const COLLECT_DEBOUNCE: Duration = Duration::from_millis(250);

/// Keys without a session that scoped clients may wait on, in all.
const MAX_WAITING_KEYS: usize = 4096;

/// The main session's key.
pub const MAIN_KEY: &str = "agent:main:main";

/// The longest session key.
const MAX_KEY: usize = 512;

/// The longest run id (a client's idempotency key).
const MAX_RUN_ID: usize = 256;

/// Checks a session key from outside: 1 to [`MAX_KEY`] printable
/// characters. `name` is the param that carried it, for the error.
pub fn check_key(name: &str, key: &str) -> Result<(), Failure> {
    if key.is_empty() || key.chars().count() > MAX_KEY {
        return Err(Failure::invalid(format!(
            "`{name}` must be 1 to {MAX_KEY} characters"
        )));
    }
    // Keys reach terminals (`pincer sessions list`), logs and file names:
    // one that could carry an escape sequence or reorder text is refused.
    let unsafe_char =
        |c: char| c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    if key.chars().any(unsafe_char) {
        return Err(Failure::invalid(format!(
            "`{name}` holds a control character or a bidirectional override: a session key is printable text"
        )));
    }
    Ok(())
}

/// Checks a run id (`chat.send`'s `idempotencyKey`): 1 to [`MAX_RUN_ID`]
/// bytes.
pub fn check_run_id(run: &str) -> Result<(), Failure> {
    if run.is_empty() || run.len() > MAX_RUN_ID {
        return Err(Failure::invalid(
            "`idempotencyKey` must be 1 to 256 characters",
        ));
    }
    Ok(())
}

pub struct Hub {
    pub registry: Arc<Registry>,
    link: OnceLock<Link>,
    pub cwd: PathBuf,
    pub data_dir: PathBuf,
    pub approval_timeout: Duration,
    pub started: Instant,
    /// Names this process's life (hello-ok's `server.bootId`): a client
    /// that sees it change knows the runs it followed are gone.
    pub boot_id: String,
    next_conn: AtomicU64,
    conns: Mutex<Conns>,
    keys: Mutex<KeyMap>,
    /// Wakes the saver of `keys.json` (see [`KeyMap`]).
    keys_dirty: tokio::sync::Notify,
    /// Set once the saver runs.
    keys_saver: OnceLock<()>,
    /// One write of `keys.json` at a time, in the order of the changes.
    keys_writing: Mutex<()>,
    /// Opening sessions one at a time: two first messages to one new key
    /// make one session.
    opening: tokio::sync::Mutex<()>,
    state: Mutex<State>,
    /// What the transcripts record of usage, read incrementally.
    scans: Mutex<usage::Scans>,
    /// The `[[cron]]` jobs and `[heartbeat]` the gateway runs (`cron.list`).
    pub scheduled: OnceLock<Arc<dyn Scheduled>>,
}

/// What `cron.list` shows of the gateway's own runs. The scheduler sits
/// above the hub (it sends through it), so the hub holds it by this
/// trait, not by its type.
pub trait Scheduled: Send + Sync {
    /// Each job and the heartbeat, with their next and last runs (the
    /// same as `pincer cron list --json`).
    fn listing(&self) -> Value;
}

/// The clients, indexed for the events of one session: those that follow
/// every session, and per session those that follow only the ones they
/// used (`session-scoped-events`), so that an event costs its recipients,
/// not every client.
#[derive(Default)]
struct Conns {
    all: HashMap<u64, Arc<Conn>>,
    unscoped: Vec<Arc<Conn>>,
    by_session: HashMap<String, Vec<Arc<Conn>>>,
    /// Scoped clients that asked about a key before it named a session:
    /// they follow the session it gets.
    by_new_key: HashMap<String, Vec<Arc<Conn>>>,
}

#[derive(Default)]
struct State {
    runs: HashMap<String, Run>,
    finished: VecDeque<(Instant, String)>,
    live: HashMap<String, Live>,
    approvals: HashMap<String, Approval>,
    /// When each session the gateway opened was last used (opened, sent
    /// to, a run ended): the idle sweep unloads those quiet long enough.
    used: HashMap<String, Instant>,
    /// Questions the gateway itself was asked, `(session, tool call)`, until
    /// the agent says they are settled: those are not the editor's.
    asked: std::collections::HashSet<(String, String)>,
}

/// A session's runs as the gateway follows them.
#[derive(Default)]
struct Live {
    /// The run the agent works on now.
    active: Option<String>,
    /// Gateway runs sent and not yet ended, in order (to know busy).
    pending: Vec<String>,
    /// `sessions.patch`'s queue mode (per message `queueMode` wins).
    queue_mode: Option<QueueMode>,
    /// Messages `collect` holds until the running run ends.
    collected: Vec<Collected>,
    flush_scheduled: bool,
    /// The last usage report (`agent` `stream:"usage"`'s data).
    usage: Option<Value>,
}

impl Live {
    /// Nothing runs, waits or is held for the session.
    fn is_quiet(&self) -> bool {
        self.active.is_none()
            && self.pending.is_empty()
            && self.collected.is_empty()
            && !self.flush_scheduled
    }
}

struct Collected {
    run: String,
    key: String,
    content: Vec<ContentBlock>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueMode {
    Steer,
    FollowUp,
    Collect,
    Interrupt,
}

impl QueueMode {
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "steer" => Some(Self::Steer),
            "followup" | "follow-up" | "follow_up" => Some(Self::FollowUp),
            "collect" => Some(Self::Collect),
            "interrupt" => Some(Self::Interrupt),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steer => "steer",
            Self::FollowUp => "followup",
            Self::Collect => "collect",
            Self::Interrupt => "interrupt",
        }
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Ok { stop: &'static str },
    Aborted,
    Error { message: String, kind: &'static str },
}

struct Run {
    session: String,
    key: String,
    outcome: Option<Outcome>,
    text: String,
    thinking: String,
    /// Text after a tool call starts a new paragraph.
    after_tool: bool,
    chat_seq: u64,
    agent_seq: u64,
    /// The run's tool calls by id: their name and ACP kind, which the
    /// updates after the start do not repeat.
    tools: HashMap<String, ToolInfo>,
    /// The last usage report (`agent` `stream:"usage"`'s data), which the
    /// run's `final` repeats.
    usage: Option<Value>,
    waiters: Vec<tokio::sync::oneshot::Sender<()>>,
    /// Runs `collect` joined into this one; they end with it.
    members: Vec<String>,
    /// Clients of `pincer.chat-deltas` that have had the run's whole text
    /// (with their first delta of it): the next deltas carry the new text
    /// only.
    primed: std::collections::HashSet<u64>,
}

impl Run {
    fn new(session: &str, key: &str) -> Self {
        Self {
            session: session.to_string(),
            key: key.to_string(),
            outcome: None,
            text: String::new(),
            thinking: String::new(),
            after_tool: false,
            chat_seq: 0,
            agent_seq: 0,
            tools: HashMap::new(),
            usage: None,
            waiters: Vec::new(),
            members: Vec::new(),
            primed: Default::default(),
        }
    }

    fn message(&self) -> Value {
        let mut content = Vec::new();
        if !self.thinking.is_empty() {
            content.push(json!({"type": "thinking", "thinking": self.thinking}));
        }
        content.push(json!({"type": "text", "text": self.text}));
        json!({"role": "assistant", "content": content, "timestamp": now_ms()})
    }
}

/// What a run remembers of a tool call after its start.
#[derive(Clone, Default)]
struct ToolInfo {
    name: String,
    kind: String,
}

/// A permission question waiting for a client.
struct Approval {
    session: String,
    key: String,
    tool_call_id: String,
    tool_name: String,
    command: String,
    /// `(decision, option id)` in the order offered.
    decisions: Vec<(String, String)>,
    created_ms: u64,
    expires_ms: u64,
    reply: Option<tokio::sync::oneshot::Sender<Option<String>>>,
}

impl Approval {
    fn describe(&self, id: &str) -> Value {
        let decisions: Vec<&str> = self.decisions.iter().map(|(d, _)| d.as_str()).collect();
        json!({
            "id": id,
            "commandText": self.command,
            "commandPreview": preview(&self.command),
            "allowedDecisions": decisions,
            "host": "gateway",
            "agentId": "main",
            "sessionKey": self.key,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "createdAtMs": self.created_ms,
            "expiresAtMs": self.expires_ms,
        })
    }
}

/// Session keys and the pincer sessions they name, kept on disk.
///
/// A gateway with thousands of chats creates keys one after another: the
/// file is written by one saver task that takes every change made while it
/// was writing in its next write (see [`Hub::keys_changed`]), not once per
/// key, and events find a session's key through an index, not a scan.
struct KeyMap {
    path: PathBuf,
    keys: BTreeMap<String, String>,
    /// The key of each named session: the first in key order when several
    /// name it.
    by_session: HashMap<String, String>,
    /// Sessions a reset replaced: kept on disk (and by `pincer sessions
    /// list`), no longer listed by the gateway.
    archived: std::collections::BTreeSet<String>,
    /// Changes not yet written.
    dirty: bool,
}

/// `keys.json`, borrowed for writing.
#[derive(serde::Serialize)]
struct StoredKeys<'a> {
    keys: &'a BTreeMap<String, String>,
    archived: &'a std::collections::BTreeSet<String>,
}

impl KeyMap {
    fn load(path: PathBuf) -> Self {
        let stored = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .unwrap_or_default();
        let keys: BTreeMap<String, String> =
            serde_json::from_value(stored["keys"].clone()).unwrap_or_default();
        let archived = serde_json::from_value(stored["archived"].clone()).unwrap_or_default();
        let mut by_session = HashMap::new();
        // In key order, so the first key of a session wins.
        for (key, id) in &keys {
            by_session.entry(id.clone()).or_insert_with(|| key.clone());
        }
        Self {
            path,
            keys,
            by_session,
            archived,
            dirty: false,
        }
    }

    /// Names `id` with `key`; returns the session it named before.
    fn insert(&mut self, key: &str, id: &str) -> Option<String> {
        let old = self.keys.insert(key.to_string(), id.to_string());
        if let Some(old) = &old {
            self.unindex(key, old);
        }
        let first = self
            .by_session
            .entry(id.to_string())
            .or_insert_with(|| key.to_string());
        if key < first.as_str() {
            *first = key.to_string();
        }
        self.dirty = true;
        old
    }

    /// Forgets `key`; returns the session it named.
    fn remove(&mut self, key: &str) -> Option<String> {
        let old = self.keys.remove(key)?;
        self.unindex(key, &old);
        self.dirty = true;
        Some(old)
    }

    /// `key` no longer names `id`: its index entry goes to the session's
    /// next key, if another names it (rare: a scan).
    fn unindex(&mut self, key: &str, id: &str) {
        if self.by_session.get(id).is_some_and(|k| k == key) {
            self.by_session.remove(id);
            if let Some((next, _)) = self.keys.iter().find(|(_, named)| named.as_str() == id) {
                self.by_session.insert(id.to_string(), next.clone());
            }
        }
    }

    /// What to write, if anything changed since the last write.
    fn take_changes(&mut self) -> Option<(PathBuf, Vec<u8>)> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let stored = StoredKeys {
            keys: &self.keys,
            archived: &self.archived,
        };
        match serde_json::to_vec(&stored) {
            Ok(bytes) => Some((self.path.clone(), bytes)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot serialise the gateway's session keys");
                None
            }
        }
    }
}

/// Writes `keys.json`: the user's alone, like the transcripts (session keys
/// name the user's chats: a Telegram user id, a Slack channel).
fn write_keys(path: &Path, bytes: &[u8]) {
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        tracing::warn!(error = %e, "cannot create {}", dir.display());
        return;
    }
    if let Err(e) = crate::config::trust::write_private(path, bytes) {
        tracing::warn!(error = %e, "cannot save the gateway's session keys");
    }
}

/// An error a method answers with, as text for the client.
pub type Failure = super::frames::ErrorShape;

impl Hub {
    pub fn new(
        registry: Arc<Registry>,
        cwd: PathBuf,
        data_dir: PathBuf,
        approval_timeout: Duration,
    ) -> Arc<Self> {
        let keys = KeyMap::load(data_dir.join("gateway").join("keys.json"));
        Arc::new(Self {
            registry,
            link: OnceLock::new(),
            cwd,
            data_dir,
            approval_timeout,
            started: Instant::now(),
            boot_id: uuid::Uuid::new_v4().to_string(),
            next_conn: AtomicU64::new(1),
            conns: Mutex::new(Conns::default()),
            keys: Mutex::new(keys),
            keys_dirty: tokio::sync::Notify::new(),
            keys_saver: OnceLock::new(),
            keys_writing: Mutex::new(()),
            opening: tokio::sync::Mutex::new(()),
            state: Mutex::new(State::default()),
            scans: Mutex::new(usage::Scans::default()),
            scheduled: OnceLock::new(),
        })
    }

    /// Connects the hub to the agent and starts following the sessions.
    pub async fn start(self: &Arc<Self>, model: Option<String>) -> Result<(), String> {
        let Some(mut observed) = self.registry.observe() else {
            return Err("the sessions already have an observer".to_string());
        };
        let approver: Arc<dyn Approver> = Arc::new(HubApprover(self.clone()));
        let link = Link::start(self.registry.clone(), model, approver)
            .await
            .map_err(|e| format!("cannot start the gateway's agent connection: {e}"))?;
        let _ = self.link.set(link);
        let hub = self.clone();
        tokio::spawn(async move {
            while let Some(event) = observed.recv().await {
                hub.observe(event);
            }
        });
        let saver = self.clone();
        if self.keys_saver.set(()).is_ok() {
            tokio::spawn(async move {
                loop {
                    saver.keys_dirty.notified().await;
                    let hub = saver.clone();
                    if let Err(e) = tokio::task::spawn_blocking(move || hub.write_keys()).await {
                        tracing::warn!(error = %e, "the gateway's session keys were not saved");
                    }
                }
            });
        }
        Ok(())
    }

    pub fn link(&self) -> Result<&Link, Failure> {
        self.link
            .get()
            .ok_or_else(|| Failure::new(super::frames::UNAVAILABLE, "the agent is not ready"))
    }

    fn state(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }

    fn keys(&self) -> parking_lot::MutexGuard<'_, KeyMap> {
        self.keys.lock()
    }

    fn conns(&self) -> parking_lot::MutexGuard<'_, Conns> {
        self.conns.lock()
    }

    pub fn next_conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    pub fn register(&self, conn: Arc<Conn>) {
        let mut conns = self.conns();
        if !conn.scoped {
            conns.unscoped.push(conn.clone());
        }
        conns.all.insert(conn.id, conn);
    }

    pub fn unregister(&self, id: u64) {
        let mut conns = self.conns();
        let Some(conn) = conns.all.remove(&id) else {
            return;
        };
        conns.unscoped.retain(|c| c.id != id);
        conns.by_new_key.retain(|_, list| {
            list.retain(|c| c.id != id);
            !list.is_empty()
        });
        let sessions: Vec<String> = conn.sessions.lock().iter().cloned().collect();
        for session in sessions {
            if let Some(list) = conns.by_session.get_mut(&session) {
                list.retain(|c| c.id != id);
                if list.is_empty() {
                    conns.by_session.remove(&session);
                }
            }
        }
    }

    /// `conn` asked about `key`, which names no session yet: a scoped
    /// client hears the events of the session the key gets.
    ///
    /// Only a client that may write waits for a key: one that may only
    /// read watches sessions that exist (it could otherwise grow the hub's
    /// memory with every key it made up, and it cannot create the session
    /// it waits for anyway).
    pub fn follow_key(&self, conn: &Arc<Conn>, key: &str) {
        if !conn.scoped || !conn.scopes.allows(Need::Write) {
            return;
        }
        let mut conns = self.conns();
        // Every key a client asks about waits here until it names a
        // session or the client leaves: a client may not grow it at will.
        let full =
            conns.by_new_key.len() >= MAX_WAITING_KEYS && !conns.by_new_key.contains_key(key);
        if conns.all.contains_key(&conn.id) && !full {
            let list = conns.by_new_key.entry(key.to_string()).or_default();
            if list.len() < 64 && !list.iter().any(|c| c.id == conn.id) {
                list.push(conn.clone());
            }
        }
    }

    /// `conn` used `session`: a scoped client hears its events from now on.
    pub fn follow(&self, conn: &Arc<Conn>, session: &str) {
        if !conn.scoped || !conn.sessions.lock().insert(session.to_string()) {
            return;
        }
        let mut conns = self.conns();
        if conns.all.contains_key(&conn.id) {
            conns
                .by_session
                .entry(session.to_string())
                .or_default()
                .push(conn.clone());
        }
    }

    /// `conn` no longer shows `key` (`chat.unsubscribe`): a scoped client
    /// stops hearing the events of the session it names (`session`) and
    /// no longer waits for the key to name one.
    pub fn unfollow(&self, conn: &Arc<Conn>, key: &str, session: Option<&str>) {
        if !conn.scoped {
            return;
        }
        // The client's own set first, then the index, as `follow` does.
        let followed = session.is_some_and(|s| conn.sessions.lock().remove(s));
        let mut conns = self.conns();
        if let Some(list) = conns.by_new_key.get_mut(key) {
            list.retain(|c| c.id != conn.id);
            if list.is_empty() {
                conns.by_new_key.remove(key);
            }
        }
        if let Some(session) = session.filter(|_| followed)
            && let Some(list) = conns.by_session.get_mut(session)
        {
            list.retain(|c| c.id != conn.id);
            if list.is_empty() {
                conns.by_session.remove(session);
            }
        }
    }

    // ----- events -----

    /// Sends an event to every client that may and wants to hear it.
    fn broadcast(&self, name: &'static str, payload: &Value, to: Audience<'_>) {
        let payload: Arc<str> = Arc::from(payload.to_string());
        for conn in self.audience(to) {
            conn.out.push(Out::Event(name, payload.clone()));
        }
    }

    /// The clients that may and want to hear an event for `to`.
    fn audience(&self, to: Audience<'_>) -> Vec<Arc<Conn>> {
        let mut conns: Vec<Arc<Conn>> = {
            let conns = self.conns();
            match to {
                Audience::Session(session) | Audience::Tool(session) => conns
                    .unscoped
                    .iter()
                    .chain(conns.by_session.get(session).into_iter().flatten())
                    .cloned()
                    .collect(),
                _ => conns.all.values().cloned().collect(),
            }
        };
        conns.retain(|conn| match to {
            Audience::Session(_) => conn.scopes.allows(Need::Read),
            Audience::Tool(_) => conn.scopes.allows(Need::Read) && conn.tool_events,
            Audience::Approvers => conn.scopes.allows(Need::Approvals),
            Audience::SessionWatchers => {
                conn.scopes.allows(Need::Read)
                    && conn
                        .sessions_changed
                        .load(std::sync::atomic::Ordering::Relaxed)
            }
            Audience::All => true,
        });
        conns
    }

    pub fn tick(&self) {
        self.broadcast("tick", &json!({ "ts": now_ms() }), Audience::All);
    }

    fn session_changed(&self, reason: &str, session: &str) {
        let key = self.key_of(session);
        self.session_changed_as(reason, &key, session);
    }

    fn session_changed_as(&self, reason: &str, key: &str, session: &str) {
        self.broadcast(
            "sessions.changed",
            &json!({"reason": reason, "key": key, "sessionId": session, "ts": now_ms()}),
            Audience::SessionWatchers,
        );
    }

    /// `sessions.delete` removed the session `key` named (the key no
    /// longer names it, so the event carries the key it had).
    pub fn announce_deleted(&self, key: &str, session: &str) {
        self.session_changed_as("delete", key, session);
    }

    /// `sessions.patch` changed the session (its label or settings):
    /// the event carries its row as `session`, as OpenClaw's does.
    pub fn announce_patched(&self, key: &str, session: &str, row: Option<Value>) {
        let mut payload =
            json!({"reason": "patch", "key": key, "sessionId": session, "ts": now_ms()});
        if let Some(row) = row {
            payload["session"] = row;
        }
        self.broadcast("sessions.changed", &payload, Audience::SessionWatchers);
    }

    fn chat(&self, run_id: &str, run: &mut Run, state: &str, extra: Value) {
        run.chat_seq += 1;
        let mut payload = json!({
            "runId": run_id,
            "sessionKey": run.key,
            "seq": run.chat_seq,
            "state": state,
        });
        merge(&mut payload, extra);
        self.broadcast("chat", &payload, Audience::Session(&run.session));
    }

    fn agent(&self, run_id: &str, run: &mut Run, stream: &str, data: Value) {
        run.agent_seq += 1;
        let payload = json!({
            "runId": run_id,
            "sessionKey": run.key,
            "seq": run.agent_seq,
            "stream": stream,
            "ts": now_ms(),
            "data": data,
        });
        let to = if stream == "tool" {
            Audience::Tool(&run.session)
        } else {
            Audience::Session(&run.session)
        };
        self.broadcast("agent", &payload, to);
    }

    // ----- keys and sessions -----

    /// The key events of a session carry: the one it was given to, else
    /// its id.
    pub fn key_of(&self, session: &str) -> String {
        self.keys()
            .by_session
            .get(session)
            .cloned()
            .unwrap_or_else(|| session.to_string())
    }

    /// The keys changed: the saver writes them (at once if it is not
    /// running, as before [`Hub::start`]).
    fn keys_changed(&self) {
        if self.keys_saver.get().is_some() {
            self.keys_dirty.notify_one();
        } else {
            self.write_keys();
        }
    }

    /// Writes the keys if they changed since the last write. The write
    /// itself happens outside the lock; only the saver task (or a caller
    /// before it starts, or at shutdown) writes, one at a time.
    pub fn write_keys(&self) {
        let _one = self.keys_writing.lock();
        let changes = self.keys().take_changes();
        if let Some((path, bytes)) = changes {
            write_keys(&path, &bytes);
        }
    }

    /// The session a key names, if it names one yet.
    pub fn lookup(&self, key: &str) -> Option<String> {
        if let Some(id) = self.keys().keys.get(key) {
            return Some(id.clone());
        }
        (self.registry.is_open(key) || crate::session::find(&self.data_dir, key).is_some())
            .then(|| key.to_string())
    }

    /// The session a key names, opened (created on first use).
    pub async fn open(&self, key: &str) -> Result<String, Failure> {
        let _one = self.opening.lock().await;
        let link = self.link()?;
        if let Some(id) = self.lookup(key) {
            if self.registry.is_open(&id) {
                self.used(&id);
                return Ok(id);
            }
            // Unloaded while idle, or from an earlier run of the gateway:
            // loaded again from its transcript, in the cwd it names.
            if let Some(header) = crate::session::find(&self.data_dir, &id)
                .and_then(|path| crate::session::read_header(&path))
            {
                link.load_session(&id, header.cwd).await.map_err(|e| {
                    Failure::invalid(format!(
                        "cannot open session {key}: {}",
                        super::link::error_text(&e)
                    ))
                })?;
                self.used(&id);
                return Ok(id);
            }
        }
        let id = link.new_session(self.cwd.clone()).await.map_err(|e| {
            Failure::invalid(format!(
                "cannot create a session for {key}: {}",
                super::link::error_text(&e)
            ))
        })?;
        self.used(&id);
        self.keys().insert(key, &id);
        self.keys_changed();
        let waiting = self.conns().by_new_key.remove(key).unwrap_or_default();
        for conn in waiting {
            self.follow(&conn, &id);
        }
        self.session_changed("create", &id);
        Ok(id)
    }

    /// Gives `key` a fresh session; the old transcript stays.
    pub async fn reset(&self, key: &str) -> Result<String, Failure> {
        check_key("key", key)?;
        if let Some(old) = self.lookup(key) {
            self.link()?.cancel(&old);
        }
        let _one = self.opening.lock().await;
        let id = self
            .link()?
            .new_session(self.cwd.clone())
            .await
            .map_err(|e| Failure::invalid(super::link::error_text(&e)))?;
        self.used(&id);
        {
            let mut keys = self.keys();
            if let Some(old) = keys.insert(key, &id) {
                keys.archived.insert(old);
            }
        }
        self.keys_changed();
        self.session_changed("reset", &id);
        Ok(id)
    }

    /// Whether a reset replaced this session.
    pub fn is_archived(&self, session: &str) -> bool {
        self.keys().archived.contains(session)
    }

    pub fn forget_key(&self, key: &str) {
        let removed = self.keys().remove(key).is_some();
        if removed {
            self.keys_changed();
        }
    }

    pub fn set_queue_mode(&self, session: &str, mode: QueueMode) {
        self.state()
            .live
            .entry(session.to_string())
            .or_default()
            .queue_mode = Some(mode);
    }

    /// The session's last usage report in this process:
    /// `{contextTokens, contextWindow, costUsd}`.
    pub fn live_usage(&self, session: &str) -> Option<Value> {
        self.state().live.get(session).and_then(|l| l.usage.clone())
    }

    /// The usage a transcript records (for sessions without a report).
    pub fn recorded_usage(&self, transcript: &Path) -> Used {
        self.scans.lock().used(transcript)
    }

    /// Forgets what was read of a deleted session's transcript.
    pub fn forget_usage(&self, transcript: &Path) {
        self.scans.lock().forget(transcript);
    }

    pub fn queue_mode(&self, session: &str) -> Option<QueueMode> {
        self.state().live.get(session).and_then(|l| l.queue_mode)
    }

    // ----- runs -----

    /// What a repeated idempotency key answers: `None` for a new one.
    pub fn known_run(&self, run_id: &str) -> Option<&'static str> {
        let state = self.state();
        let run = state.runs.get(run_id)?;
        Some(match &run.outcome {
            None => "in_flight",
            Some(Outcome::Error { .. }) => "error",
            Some(Outcome::Aborted) => "timeout",
            Some(Outcome::Ok { .. }) => "ok",
        })
    }

    /// A message for the session `key` names (opened, or created on first
    /// use) as run `run`: `chat.send` and `agent`, a channel's message, a
    /// scheduled run. `conn` follows the session from now on. A run id
    /// known already is not sent again: the answer is that run's status
    /// (see [`Hub::known_run`]), else `started`.
    pub async fn submit(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        key: &str,
        run: &str,
        content: Vec<ContentBlock>,
        mode: Option<QueueMode>,
    ) -> Result<&'static str, Failure> {
        check_key("sessionKey", key)?;
        check_run_id(run)?;
        if let Some(status) = self.known_run(run) {
            return Ok(status);
        }
        let session = self.open(key).await?;
        self.follow(conn, &session);
        // Two sends with one run id racing past the check above: the
        // first wins.
        if let Some(status) = self.known_run(run) {
            return Ok(status);
        }
        self.send(&session, key, run, content, mode)?;
        Ok("started")
    }

    /// Stops what runs for the session `key` names (`chat.abort`): only
    /// if `run` is one of its runs, when given. Returns the runs stopped,
    /// or `None` when nothing was.
    pub fn abort_key(
        self: &Arc<Self>,
        key: &str,
        run: Option<&str>,
    ) -> Result<Option<Vec<String>>, Failure> {
        check_key("sessionKey", key)?;
        let Some(session) = self.lookup(key) else {
            return Ok(None);
        };
        let runs = self.unfinished(&session);
        if run.is_some_and(|r| !runs.iter().any(|x| x == r)) || runs.is_empty() {
            return Ok(None);
        }
        self.abort(&session).map(Some)
    }

    /// Sends a message to a session as run `run_id`, following the queue
    /// mode when the session is busy.
    pub fn send(
        self: &Arc<Self>,
        session: &str,
        key: &str,
        run_id: &str,
        content: Vec<ContentBlock>,
        mode: Option<QueueMode>,
    ) -> Result<(), Failure> {
        let link = self.link()?.clone();
        let mut state = self.prune();
        state.used.insert(session.to_string(), Instant::now());
        let live = state.live.entry(session.to_string()).or_default();
        // Without a mode of the message's or one set here, the session's
        // own (`sessions.patch` recorded it in the transcript, an editor
        // may have chosen it) decides: steer or follow-up.
        let mode = mode.or(live.queue_mode);
        let busy = live.active.is_some() || !live.pending.is_empty();
        if busy && mode == Some(QueueMode::Collect) {
            live.collected.push(Collected {
                run: run_id.to_string(),
                key: key.to_string(),
                content,
            });
            state
                .runs
                .insert(run_id.to_string(), Run::new(session, key));
            return Ok(());
        }
        live.pending.push(run_id.to_string());
        state
            .runs
            .insert(run_id.to_string(), Run::new(session, key));
        drop(state);
        if busy && mode == Some(QueueMode::Interrupt) {
            link.cancel(session);
        }
        let queue = match mode {
            Some(QueueMode::FollowUp) => Some("follow-up"),
            Some(QueueMode::Steer) => Some("steer"),
            _ => None,
        };
        self.dispatch(
            link,
            session.to_string(),
            run_id.to_string(),
            content,
            queue,
        );
        Ok(())
    }

    fn dispatch(
        self: &Arc<Self>,
        link: Link,
        session: String,
        run_id: String,
        content: Vec<ContentBlock>,
        queue: Option<&'static str>,
    ) {
        let hub = self.clone();
        tokio::spawn(async move {
            let result = link.prompt(&session, content, &run_id, queue).await;
            // The observer ends the run, after its last update; this is for
            // a prompt the agent never got to tell about.
            let waiter = hub.wait_for(&run_id);
            if let Some(waiter) = waiter
                && tokio::time::timeout(Duration::from_secs(2), waiter)
                    .await
                    .is_err()
            {
                let outcome = match result {
                    Ok(stop) => outcome_of(stop),
                    Err(e) => Outcome::Error {
                        message: super::link::error_text(&e),
                        kind: "unknown",
                    },
                };
                hub.finish(&run_id, outcome);
            }
        });
    }

    /// A receiver that fires when the run ends (`None`: it has ended or is
    /// unknown).
    pub fn wait_for(&self, run_id: &str) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let mut state = self.state();
        let run = state.runs.get_mut(run_id)?;
        if run.outcome.is_some() {
            return None;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        run.waiters.push(tx);
        Some(rx)
    }

    /// How a run ended, with its text: `None` while it runs.
    pub fn outcome(&self, run_id: &str) -> Option<Option<(Outcome, String, String)>> {
        let state = self.state();
        let run = state.runs.get(run_id)?;
        Some(
            run.outcome
                .clone()
                .map(|o| (o, run.text.clone(), run.key.clone())),
        )
    }

    /// The runs of a session not yet ended (the running one first).
    pub fn unfinished(&self, session: &str) -> Vec<String> {
        let state = self.state();
        let mut runs: Vec<String> = Vec::new();
        if let Some(live) = state.live.get(session) {
            runs.extend(live.active.iter().cloned());
            runs.extend(
                live.pending
                    .iter()
                    .filter(|r| !runs.contains(r))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            runs.extend(live.collected.iter().map(|c| c.run.clone()));
        }
        runs
    }

    /// Aborts a session's runs: the agent's, and messages `collect` holds.
    pub fn abort(self: &Arc<Self>, session: &str) -> Result<Vec<String>, Failure> {
        let runs = self.unfinished(session);
        let collected: Vec<String> = {
            let mut state = self.state();
            state
                .live
                .get_mut(session)
                .map(|l| std::mem::take(&mut l.collected))
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.run)
                .collect()
        };
        for run in &collected {
            self.finish(run, Outcome::Aborted);
        }
        self.link()?.cancel(session);
        Ok(runs)
    }

    /// Drops runs that ended long enough ago.
    fn prune(&self) -> parking_lot::MutexGuard<'_, State> {
        let mut state = self.state();
        while let Some((at, _)) = state.finished.front() {
            if at.elapsed() < DEDUPE_TTL {
                break;
            }
            if let Some((_, id)) = state.finished.pop_front() {
                state.runs.remove(&id);
            }
        }
        state
    }

    /// Ends a run (once): its last chat event and lifecycle end, and
    /// whoever waits for it.
    pub fn finish(self: &Arc<Self>, run_id: &str, outcome: Outcome) {
        let mut state = self.state();
        let Some(run) = state.runs.get_mut(run_id) else {
            return;
        };
        if run.outcome.is_some() {
            return;
        }
        run.outcome = Some(outcome.clone());
        let session = run.session.clone();
        let members = std::mem::take(&mut run.members);
        self.end_events(run_id, run, &outcome);
        for waiter in run.waiters.drain(..) {
            let _ = waiter.send(());
        }
        let message = run.message();
        let text = run.text.clone();
        state
            .finished
            .push_back((Instant::now(), run_id.to_string()));
        for member in members {
            if let Some(run) = state.runs.get_mut(&member)
                && run.outcome.is_none()
            {
                run.outcome = Some(outcome.clone());
                run.text = text.clone();
                let extra = match &outcome {
                    Outcome::Ok { stop } => json!({"message": message, "stopReason": stop}),
                    _ => json!({"stopReason": "aborted"}),
                };
                let state_name = if matches!(outcome, Outcome::Ok { .. }) {
                    "final"
                } else {
                    "aborted"
                };
                self.chat(&member, run, state_name, extra);
                for waiter in run.waiters.drain(..) {
                    let _ = waiter.send(());
                }
                state.finished.push_back((Instant::now(), member));
            }
        }
        state.used.insert(session.clone(), Instant::now());
        let flush = if let Some(live) = state.live.get_mut(&session) {
            live.pending.retain(|r| r != run_id);
            if live.active.as_deref() == Some(run_id) {
                live.active = None;
            }
            let idle = live.active.is_none() && live.pending.is_empty();
            let flush = idle && !live.collected.is_empty() && !live.flush_scheduled;
            if flush {
                live.flush_scheduled = true;
            }
            flush
        } else {
            false
        };
        // Approvals of the session that nobody answered are moot now.
        let moot: Vec<String> = state
            .approvals
            .iter()
            .filter(|(_, a)| a.session == session)
            .map(|(id, _)| id.clone())
            .collect();
        drop(state);
        for id in moot {
            self.settle(&id, None, "cancelled");
        }
        self.session_changed("send", &session);
        if flush {
            self.schedule_flush(session);
        }
    }

    fn end_events(&self, run_id: &str, run: &mut Run, outcome: &Outcome) {
        match outcome {
            Outcome::Ok { stop } => {
                let mut extra = json!({"message": run.message(), "stopReason": stop});
                if let Some(usage) = &run.usage {
                    extra["usage"] = usage.clone();
                }
                self.chat(run_id, run, "final", extra);
                let data = json!({"phase": "end", "endedAt": now_ms()});
                self.agent(run_id, run, "lifecycle", data);
            }
            Outcome::Aborted => {
                let mut extra = json!({"message": run.message(), "stopReason": "aborted"});
                if let Some(usage) = &run.usage {
                    extra["usage"] = usage.clone();
                }
                self.chat(run_id, run, "aborted", extra);
                let data = json!({"phase": "end", "endedAt": now_ms(), "aborted": true});
                self.agent(run_id, run, "lifecycle", data);
            }
            Outcome::Error { message, kind } => {
                let extra = json!({"errorMessage": message, "errorKind": kind});
                self.chat(run_id, run, "error", extra);
                let data = json!({"phase": "error", "endedAt": now_ms(), "error": message});
                self.agent(run_id, run, "lifecycle", data);
            }
        }
    }

    /// Sends what `collect` gathered as one message, once no more come.
    fn schedule_flush(self: &Arc<Self>, session: String) {
        let Some(link) = self.link.get().cloned() else {
            return;
        };
        let state_session = session.clone();
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(COLLECT_DEBOUNCE).await;
            let batch = {
                let mut state = this.state();
                let Some(live) = state.live.get_mut(&state_session) else {
                    return;
                };
                live.flush_scheduled = false;
                if live.active.is_some() || !live.pending.is_empty() {
                    return;
                }
                std::mem::take(&mut live.collected)
            };
            let Some(first) = batch.first() else { return };
            let lead = first.run.clone();
            let mut content = Vec::new();
            for (i, item) in batch.iter().enumerate() {
                if i > 0 {
                    content.push(ContentBlock::Text(
                        agent_client_protocol::v1::schema::TextContent::new("\n\n"),
                    ));
                }
                content.extend(item.content.iter().cloned());
            }
            {
                let mut state = this.state();
                if let Some(run) = state.runs.get_mut(&lead) {
                    run.members = batch.iter().skip(1).map(|c| c.run.clone()).collect();
                    run.key = first.key.clone();
                }
                if let Some(live) = state.live.get_mut(&state_session) {
                    live.pending.push(lead.clone());
                }
            }
            this.dispatch(link, session, lead, join_text(content), None);
        });
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    // ----- idle sessions -----

    /// Notes that `session` was used now.
    fn used(&self, session: &str) {
        self.state()
            .used
            .insert(session.to_string(), Instant::now());
    }

    /// Unloads, every little while, the sessions idle for `idle` (see the
    /// module's comment), for as long as the process runs.
    pub fn unload_idle_after(self: &Arc<Self>, idle: Duration) {
        let period = (idle / 4).clamp(Duration::from_millis(250), Duration::from_secs(60));
        let hub = self.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let unloaded = hub.unload_idle(idle).await;
                if unloaded > 0 {
                    tracing::debug!(unloaded, "unloaded idle sessions");
                }
            }
        });
    }

    /// Unloads the gateway's sessions that have been quiet for `idle`: no
    /// run, nothing queued or collected, no approval waiting, and the
    /// agent idle too (no turn, no background process). Returns how many.
    /// Holds the opening lock meanwhile, so a session is never unloaded
    /// between [`Hub::open`] and its use; and `open` marks a session used,
    /// so its caller has `idle` to use it.
    pub async fn unload_idle(&self, idle: Duration) -> usize {
        let _one = self.opening.lock().await;
        let mut unloaded = 0;
        for session in self.registry.observer_sessions() {
            let quiet = {
                let state = self.state();
                state
                    .used
                    .get(&session)
                    .is_none_or(|at| at.elapsed() >= idle)
                    && state.live.get(&session).is_none_or(Live::is_quiet)
                    && !state.approvals.values().any(|a| a.session == session)
            };
            if quiet && self.registry.unload_idle(&session) {
                self.release(&session);
                tracing::debug!(session, "unloaded an idle session");
                unloaded += 1;
            }
        }
        // What is kept of sessions no longer open (closed or deleted
        // elsewhere) goes too, except a chosen queue mode; the opening
        // lock keeps a session from opening meanwhile.
        {
            let mut state = self.state();
            let registry = &self.registry;
            state.used.retain(|session, _| registry.is_open(session));
            state.live.retain(|session, live| {
                registry.is_open(session) || !live.is_quiet() || live.queue_mode.is_some()
            });
        }
        drop(_one);
        // Runs past their deduplication time go too, even with no new
        // message to prune them.
        drop(self.prune());
        unloaded
    }

    /// Forgets what the hub kept of an unloaded session, except the queue
    /// mode a client chose for it (`sessions.patch`), which holds when it
    /// comes back.
    fn release(&self, session: &str) {
        let mut state = self.state();
        state.used.remove(session);
        let queue_mode = state.live.remove(session).and_then(|l| l.queue_mode);
        if let Some(queue_mode) = queue_mode {
            state.live.insert(
                session.to_string(),
                Live {
                    queue_mode: Some(queue_mode),
                    ..Live::default()
                },
            );
        }
        state.asked.retain(|(s, _)| s != session);
    }
}

struct HubApprover(Arc<Hub>);

impl Approver for HubApprover {
    fn ask(
        &self,
        request: RequestPermissionRequest,
    ) -> futures::future::BoxFuture<'static, RequestPermissionResponse> {
        Box::pin(self.0.clone().ask(request))
    }
}

#[derive(Clone, Copy)]
enum Audience<'a> {
    Session(&'a str),
    Tool(&'a str),
    Approvers,
    SessionWatchers,
    All,
}

/// Adds `extra`'s fields to the object `into`.
pub(super) fn merge(into: &mut Value, extra: Value) {
    if let (Some(into), Value::Object(extra)) = (into.as_object_mut(), extra) {
        into.extend(extra);
    }
}

fn outcome_of(stop: StopReason) -> Outcome {
    match stop {
        StopReason::EndTurn => Outcome::Ok { stop: "stop" },
        StopReason::MaxTokens => Outcome::Ok { stop: "max_tokens" },
        StopReason::MaxTurnRequests => Outcome::Ok { stop: "max_turns" },
        StopReason::Refusal => Outcome::Error {
            message: "the model refused to answer".to_string(),
            kind: "refusal",
        },
        StopReason::Cancelled => Outcome::Aborted,
        _ => Outcome::Ok { stop: "stop" },
    }
}

/// Joins adjacent text blocks (a collected batch reads as one message).
fn join_text(blocks: Vec<ContentBlock>) -> Vec<ContentBlock> {
    let mut out: Vec<ContentBlock> = Vec::new();
    for block in blocks {
        match (out.last_mut(), block) {
            (Some(ContentBlock::Text(last)), ContentBlock::Text(next)) => {
                last.text.push_str(&next.text);
            }
            (_, block) => out.push(block),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_s_key_is_found_by_its_index_and_survives_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway/keys.json");
        let mut keys = KeyMap::load(path.clone());
        assert_eq!(keys.insert("b:chat", "s1"), None);
        assert_eq!(keys.insert("a:alias", "s1"), None);
        // The first key in order names the session, as a scan found it.
        assert_eq!(
            keys.by_session.get("s1").map(String::as_str),
            Some("a:alias")
        );
        assert_eq!(keys.remove("a:alias"), Some("s1".to_string()));
        assert_eq!(
            keys.by_session.get("s1").map(String::as_str),
            Some("b:chat")
        );
        // A reset gives the key another session; the old one has no key.
        assert_eq!(keys.insert("b:chat", "s2"), Some("s1".to_string()));
        assert_eq!(keys.by_session.get("s1"), None);
        assert_eq!(
            keys.by_session.get("s2").map(String::as_str),
            Some("b:chat")
        );

        // Written only when something changed, and read back the same.
        let (to, bytes) = keys.take_changes().unwrap();
        assert_eq!(keys.take_changes(), None);
        write_keys(&to, &bytes);
        let again = KeyMap::load(path);
        assert_eq!(again.keys, keys.keys);
        assert_eq!(again.by_session, keys.by_session);
    }
}
