//! The gateway's core: its clients, the session keys, the runs and the
//! approvals, and the translation of what sessions do (the ACP registry's
//! observer) into the protocol's `chat`, `agent`, `session.*` and
//! `exec.approval.*` events. Its typed API (`submit`, `abort_key`,
//! `reset`, `patch`, `session_rows`, `resolve_approval`, …) is what the
//! wire methods (`gateway::methods`) and the in-process clients (chat
//! channels, the scheduler) call; it imports none of them.
//!
//! This file holds the state and the clients; `keys` the session keys,
//! `runs` the runs and queue modes, `events` the observer's translation,
//! `approvals` the permission questions, `idle` the unloading of quiet
//! sessions, `view` the rows and defaults the protocol shows, `usage`
//! what transcripts record of usage, `presence` who is connected.
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
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    ContentBlock, RequestPermissionRequest, RequestPermissionResponse, StopReason,
};
use serde_json::Value;

use super::conn::{Conn, Need, Out};
use super::frames::now_ms;
use super::link::{Approver, Link};
use crate::acp::registry::Registry;
use crate::config::QueueMode;
use crate::gateway::protocol::approvals as asked;
use crate::gateway::protocol::events::{
    AgentEvent, ChatEvent, ChatMessage, ChatState, CronRun, SessionsChanged, Tick, Usage,
};

mod approvals;
mod cluster;
mod events;
mod helpers;
mod idle;
mod keys;
mod presence;
mod replay;
mod runs;
mod told;
mod usage;
mod view;

pub use approvals::not_found;
pub use cluster::{PatchAsked, RowsAsked, RowsElsewhere};
pub use usage::Used;
pub(super) use view::millis;
pub use view::{Archived, Patch, RowQuery};

use approvals::preview;
use keys::KeyMap;

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
    /// The chat channels the gateway runs (`channels.status`).
    pub channels: OnceLock<Arc<dyn ChannelsStatus>>,
    /// The other replicas of a cluster, once on its bus.
    peers: OnceLock<cluster::Peers>,
    /// The cluster's store of sessions, in a cluster.
    stored: OnceLock<cluster::Stored>,
}

/// What `channels.status` shows of the chat channels. They sit above the
/// hub (they send through it), so the hub holds them by this.
pub trait ChannelsStatus: Send + Sync {
    /// Each configured channel: those running, then those that could not
    /// start.
    fn status(&self) -> Vec<ChannelState>;
    /// The sandbox of the channel `name` as this gateway's config sets it
    /// (its sessions run unattended in it); `None` when it runs no such
    /// channel.
    fn sandbox(&self, name: &str) -> Option<crate::tools::sandbox::SandboxConfig>;
    /// The connection through which the channel `name` follows its
    /// sessions: a session it follows has its replies sent to its chat.
    fn conn(&self, name: &str) -> Option<Arc<crate::gateway::conn::Conn>>;
}

/// One chat channel's state (milliseconds since the epoch).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChannelState {
    pub name: &'static str,
    /// Its receiving loop runs (it is retried after a failure; a fatal
    /// one, or a channel that could not start, stops it).
    pub running: bool,
    pub last_start_ms: Option<u64>,
    pub last_stop_ms: Option<u64>,
    /// Why it last failed, cleared when it receives again.
    pub last_error: Option<String>,
    /// When a message from the platform last came in.
    pub last_inbound_ms: Option<u64>,
}

/// What `cron.list` shows of the gateway's own runs. The scheduler sits
/// above the hub (it sends through it), so the hub holds it by this
/// trait, not by its type.
pub trait Scheduled: Send + Sync {
    /// The jobs as OpenClaw's records, and each job and the heartbeat
    /// with their next and last runs (the same as `pincer cron list
    /// --json`), from one read of the runs' file.
    fn listed(&self) -> (Vec<super::protocol::cron::Job>, Value);
    /// The jobs as OpenClaw's records.
    fn records(&self) -> Vec<super::protocol::cron::Job>;
    /// The file of their last runs.
    fn store_path(&self) -> &std::path::Path;
    /// The heartbeat's last run that ended, as OpenClaw's heartbeat event
    /// (`last-heartbeat`); `None` before the first, or with no heartbeat.
    fn last_heartbeat(&self) -> Option<Value>;
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
    /// The running helpers, by session.
    helpers: HashMap<String, helpers::HelperOf>,
    /// Per session, its latest runs and their prompts' text (at most
    /// [`MAX_PROMPT_RUNS`]), oldest first: `chat.history` names the run of
    /// each message by them.
    prompts: HashMap<String, VecDeque<(String, String)>>,
    /// The slash commands a session announced last (any session's).
    last_commands: Option<Arc<Vec<agent_client_protocol::v1::schema::AvailableCommand>>>,
    /// Each session's plan as OpenClaw's progress card (at most
    /// [`MAX_CARDS`], the least recently changed dropped first).
    cards: HashMap<String, Card>,
}

/// The sessions whose progress cards the hub keeps: with OpenClaw's
/// limits on a card's steps, at most about 6.5 MB of cards.
const MAX_CARDS: usize = 256;

/// A session's plan, as OpenClaw's progress card: its steps in order, each
/// `pending`, `in_progress` or `completed`; `revision` counts the changes.
#[derive(Clone, Debug)]
pub struct Card {
    pub revision: u64,
    pub updated_at: u64,
    pub steps: Vec<(String, &'static str)>,
}

/// The most steps a card shows, and the longest step (OpenClaw's limits).
const CARD_STEPS: usize = 50;
const CARD_STEP_BYTES: usize = 512;

/// The runs of a session whose prompts `chat.history` can name.
const MAX_PROMPT_RUNS: usize = 64;

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
    usage: Option<Usage>,
    /// `sessions.patch`'s `verboseLevel`, for the clients that show tool
    /// calls by it.
    verbose: Option<String>,
    /// The slash commands the session announced last.
    commands: Option<Arc<Vec<agent_client_protocol::v1::schema::AvailableCommand>>>,
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
    usage: Option<Usage>,
    waiters: Vec<tokio::sync::oneshot::Sender<()>>,
    /// Runs `collect` joined into this one; they end with it.
    members: Vec<String>,
    /// Clients of `pincer.chat-deltas` that have had the run's whole text
    /// (with their first delta of it): the next deltas carry the new text
    /// only.
    primed: std::collections::HashSet<u64>,
    /// A helper's run: its parent's key (OpenClaw's `spawnedBy`).
    spawned_by: Option<String>,
    /// The client that sent the run's message: it shows that message
    /// already, so its `session.message` goes to the others only.
    origin: Option<u64>,
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
            spawned_by: None,
            origin: None,
        }
    }

    /// The reply so far, as a `chat` event's `message`.
    fn message(&self) -> ChatMessage<'_> {
        ChatMessage::assistant(&self.thinking, &self.text, now_ms())
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
    /// `(decision, the option's own name)`: what the question calls each
    /// choice (a restore's "Restore" rather than "Allow once").
    labels: Vec<(String, String)>,
    /// The question's text beyond its title, and its diffs (a restore's
    /// files, an edit's change).
    details: String,
    diffs: Vec<asked::Diff>,
    created_ms: u64,
    expires_ms: u64,
    reply: Option<tokio::sync::oneshot::Sender<Option<String>>>,
}

impl Approval {
    fn describe(&self, id: &str) -> asked::Approval {
        asked::Approval {
            id: id.to_string(),
            command_text: self.command.clone(),
            command_preview: preview(&self.command),
            allowed_decisions: self.decisions.iter().map(|(d, _)| d.clone()).collect(),
            labels: self.labels.iter().cloned().collect(),
            host: "gateway",
            agent_id: "main",
            details: self.details.clone(),
            diffs: self.diffs.clone(),
            session_key: self.key.clone(),
            tool_call_id: self.tool_call_id.clone(),
            tool_name: self.tool_name.clone(),
            created_at_ms: self.created_ms,
            expires_at_ms: self.expires_ms,
            request: None,
        }
    }
}

/// An error a method answers with, as text for the client.
pub type Failure = super::frames::ErrorShape;

impl Hub {
    /// A hub with no agent linked, its directories `dir` (unit tests).
    #[cfg(test)]
    pub(crate) fn for_test(dir: &Path) -> Arc<Self> {
        Self::new(
            Registry::new(),
            dir.to_path_buf(),
            dir.to_path_buf(),
            Duration::from_secs(60),
        )
    }

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
            channels: OnceLock::new(),
            peers: OnceLock::new(),
            stored: OnceLock::new(),
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
            while let Some(mut event) = observed.recv().await {
                hub.tell_peers(&mut event);
                hub.mark_run(&event);
                hub.observe(event);
            }
        });
        let saver = self.clone();
        if self.keys_saver.set(()).is_ok() {
            tokio::spawn(async move {
                keys::save_changes(&saver.keys_dirty, keys::WRITE_SPACING, || {
                    let hub = saver.clone();
                    async move {
                        if let Err(e) = tokio::task::spawn_blocking(move || hub.write_keys()).await
                        {
                            tracing::warn!(error = %e, "the gateway's session keys were not saved");
                        }
                    }
                })
                .await
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

    /// Session `session`'s latest runs and their prompts, oldest first.
    pub fn prompt_runs(&self, session: &str) -> Vec<(String, String)> {
        self.state()
            .prompts
            .get(session)
            .map(|runs| runs.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn conns(&self) -> parking_lot::MutexGuard<'_, Conns> {
        self.conns.lock()
    }

    /// The slash commands of `session` as it announced them last; else
    /// those any session announced last (the built-in ones are the same
    /// for all, skills and templates are those of the gateway's
    /// directory); `None` before any session announced.
    pub fn commands(
        &self,
        session: Option<&str>,
    ) -> Option<Arc<Vec<agent_client_protocol::v1::schema::AvailableCommand>>> {
        let state = self.state();
        session
            .and_then(|s| state.live.get(s))
            .and_then(|live| live.commands.clone())
            .or_else(|| state.last_commands.clone())
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
    fn broadcast(&self, name: &'static str, payload: &impl Serialize, to: Audience<'_>) {
        self.broadcast_except(name, payload, to, None);
    }

    /// [`Hub::broadcast`] to all but connection `except`.
    fn broadcast_except(
        &self,
        name: &'static str,
        payload: &impl Serialize,
        to: Audience<'_>,
        except: Option<u64>,
    ) {
        let payload: Arc<str> = Arc::from(serde_json::to_string(payload).unwrap_or_default());
        for conn in self.audience(to) {
            if Some(conn.id) != except {
                conn.out.push(Out::Event(name, payload.clone()));
            }
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
            Audience::Readers => conn.scopes.allows(Need::Read),
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
        self.broadcast("tick", &Tick { ts: now_ms() }, Audience::All);
    }

    fn session_changed(&self, reason: &str, session: &str) {
        let key = self.key_of(session);
        self.session_changed_as(reason, &key, session);
    }

    fn session_changed_as(&self, reason: &str, key: &str, session: &str) {
        self.broadcast(
            "sessions.changed",
            &SessionsChanged {
                reason,
                key,
                session_id: session,
                ts: now_ms(),
                session: None,
            },
            Audience::SessionWatchers,
        );
    }

    /// A scheduled job's run `action` ("started", "finished"): OpenClaw's
    /// `cron` event, with the job as `cron.get` gives it.
    pub fn announce_cron(&self, job: &str, action: &'static str) {
        let record = self
            .scheduled
            .get()
            .and_then(|s| s.records().into_iter().find(|r| r.id == job));
        let finished = action == "finished";
        let state = record.as_ref().map(|record| &record.state);
        let payload = CronRun {
            job_id: job,
            action,
            run_at_ms: state.map(|s| s.last_run_at_ms),
            next_run_at_ms: state.map(|s| s.next_run_at_ms),
            status: state.filter(|_| finished).map(|s| s.last_run_status),
            error: state.filter(|_| finished).map(|s| s.last_error.clone()),
            duration_ms: state.filter(|_| finished).map(|s| s.last_duration_ms),
            job: record.clone(),
        };
        self.broadcast("cron", &payload, Audience::Readers);
    }

    /// `sessions.delete` removed the session `key` named: what the hub
    /// kept of it (its progress card) goes, and its watchers are told (the
    /// key no longer names it, so the event carries the key it had).
    pub fn deleted(&self, key: &str, session: &str) {
        self.state().cards.remove(session);
        self.session_changed_as("delete", key, session);
    }

    /// `sessions.patch` changed the session (its label or settings):
    /// the event carries its row as `session`, as OpenClaw's does.
    pub fn announce_patched(
        &self,
        key: &str,
        session: &str,
        row: Option<crate::gateway::protocol::sessions::Row>,
    ) {
        let payload = SessionsChanged {
            reason: "patch",
            key,
            session_id: session,
            ts: now_ms(),
            session: row,
        };
        self.broadcast("sessions.changed", &payload, Audience::SessionWatchers);
    }

    /// A run's `chat` event that ends it (`final`, `aborted`, `error`):
    /// `fill` sets what the state says.
    fn chat(
        &self,
        run_id: &str,
        run: &mut Run,
        state: ChatState,
        fill: impl for<'a> FnOnce(&mut ChatEvent<'a>, &'a Run),
    ) {
        run.chat_seq += 1;
        let mut event = ChatEvent::new(run_id, state);
        event.session_key = Some(Cow::Borrowed(&run.key));
        event.seq = Some(run.chat_seq);
        event.spawned_by = run.spawned_by.as_deref().map(Cow::Borrowed);
        fill(&mut event, run);
        let payload: Arc<str> = Arc::from(event.encode());
        for conn in self.audience(Audience::Session(&run.session)) {
            conn.out.push(Out::Event("chat", payload.clone()));
        }
    }

    fn agent<D: Serialize>(&self, run_id: &str, run: &mut Run, stream: &str, data: D) {
        let payload = self.agent_payload(run_id, run, stream, data);
        let to = if stream == "tool" {
            Audience::Tool(&run.session)
        } else {
            Audience::Session(&run.session)
        };
        for conn in self.audience(to) {
            conn.out.push(Out::Event("agent", payload.clone()));
        }
    }

    /// An `agent` event's payload, the run's next.
    fn agent_payload<D: Serialize>(
        &self,
        run_id: &str,
        run: &mut Run,
        stream: &str,
        data: D,
    ) -> Arc<str> {
        run.agent_seq += 1;
        let event = AgentEvent {
            run_id: Cow::Borrowed(run_id),
            session_key: Some(Cow::Borrowed(&run.key)),
            seq: Some(run.agent_seq),
            stream: Cow::Borrowed(stream),
            ts: Some(now_ms()),
            data,
            spawned_by: run.spawned_by.as_deref().map(Cow::Borrowed),
        };
        Arc::from(serde_json::to_string(&event).unwrap_or_default())
    }

    pub fn set_queue_mode(&self, session: &str, mode: QueueMode) {
        self.state()
            .live
            .entry(session.to_string())
            .or_default()
            .queue_mode = Some(mode);
    }

    /// The session's last usage report in this process.
    pub fn live_usage(&self, session: &str) -> Option<Usage> {
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

    /// The session's plan as a progress card, once it has one.
    pub fn card(&self, session: &str) -> Option<Card> {
        self.state().cards.get(session).cloned()
    }

    /// The session's `verboseLevel` (`off` until a client sets it).
    pub fn verbose_of(&self, session: &str) -> String {
        self.state()
            .live
            .get(session)
            .and_then(|l| l.verbose.clone())
            .unwrap_or_else(|| "off".to_string())
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
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
    /// Every client that may read.
    Readers,
    All,
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
