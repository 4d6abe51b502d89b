//! The hub in a cluster (`[cluster] bus`): what its sessions do is told
//! to the other replicas, and what theirs do reaches its own clients as if
//! the sessions ran here.
//!
//! A session runs on one replica, the one that opened it. That replica
//! publishes the session's events on the bus ([`Told`]), in the order its
//! registry told them; every other replica feeds them to its own
//! [`Hub::observe`], so a client on any replica gets the same `chat` and
//! `agent` events, from the same run ids, in the same order. The
//! approvals a run asks for are told the same way, and a client anywhere
//! answers them, aborts a run or sends a message: the replica it is
//! connected to asks the session's own replica ([`Asked`]), which acts as
//! if its own client had.
//!
//! A replica remembers the sessions it heard of (at most
//! [`MAX_REMOTE_SESSIONS`], the one that least recently changed its key or
//! replica forgotten first) and
//! the approvals waiting elsewhere (at most [`MAX_REMOTE_APPROVALS`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use agent_client_protocol::v1::schema::{ContentBlock, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use std::path::PathBuf;
use std::time::Duration;

use super::told::{Envelope, Telling, Told};
use super::{Audience, Failure, Hub, QueueMode};
use crate::acp::registry::Observed;
use crate::cluster::bus::{Bus, EVENTS};
use crate::cluster::{EventSink, Orphan, Placed, RunEvent, Sessions};
use crate::gateway::frames::{APPROVAL_NOT_FOUND, FORBIDDEN, INVALID_REQUEST, UNAVAILABLE};

/// The sessions of other replicas a replica remembers.
const MAX_REMOTE_SESSIONS: usize = 65_536;
/// The approvals waiting on other replicas a replica remembers.
const MAX_REMOTE_APPROVALS: usize = 4_096;

/// The hub's part of the cluster: the bus and what it heard.
pub(crate) struct Peers {
    bus: Arc<Bus>,
    heard: parking_lot::Mutex<Heard>,
    /// The runs going here, numbering their events as they are told.
    telling: parking_lot::Mutex<Telling>,
    /// Where the told events are stored, with a store.
    events: Option<EventSink>,
}

/// What this replica knows of the other replicas' sessions.
#[derive(Default)]
struct Heard {
    /// Session id → its key and the replica that runs it.
    sessions: HashMap<String, Elsewhere>,
    /// Key → session id, for the sessions above.
    keys: HashMap<String, String>,
    /// The sessions in the order they were last heard of.
    order: VecDeque<String>,
    /// Approval id → the question, waiting on another replica.
    approvals: HashMap<String, RemoteApproval>,
    approval_order: VecDeque<String>,
}

/// A session that runs on another replica.
#[derive(Clone, Debug)]
pub struct Elsewhere {
    pub session: String,
    pub key: String,
    pub replica: String,
}

struct RemoteApproval {
    replica: String,
    /// The session whose run asked: its end, or its replica's, ends the
    /// question.
    session: String,
    decisions: Vec<String>,
    /// The question as `exec.approvals.list` lists it.
    listed: Box<RawValue>,
}

/// An approval asked here, as [`Hub::tell_asked`] tells it: the
/// `exec.approval.requested` payload, the `exec.approvals.list` entry, the
/// run's `agent` approval event, and the decisions offered.
pub(super) struct AskedHere<'a, E, L, P> {
    pub event: &'a E,
    pub listed: &'a L,
    pub phase: &'a P,
    pub decisions: Vec<String>,
}

/// What one replica asks the replica that runs a session.
#[derive(Serialize, Deserialize)]
// Externally tagged: an internally tagged enum buffers its content,
// which a `RawValue` inside cannot be read from.
#[serde(rename_all = "camelCase")]
enum Asked {
    Send {
        key: String,
        run: String,
        content: Vec<ContentBlock>,
        mode: Option<String>,
        /// A chat channel's message: the session runs unattended, in the
        /// sandbox the replica that runs it sets for that channel (never
        /// one the message names).
        #[serde(default)]
        unattended: bool,
        /// The message is in the store's run queue: it runs where it is
        /// claimed.
        #[serde(default)]
        queued: bool,
    },
    Abort {
        key: String,
        run: Option<String>,
    },
    Resolve {
        id: String,
        decision: String,
    },
    /// `sessions.reset` of a session the replica runs: the new session.
    Reset {
        key: String,
        expected: Option<String>,
    },
    /// `sessions.patch` of a session the replica runs, checked by the
    /// replica the client asked: its id and row.
    Patch {
        key: String,
        patch: PatchAsked,
    },
    /// `sessions.delete` of a session the replica runs: whether it was
    /// deleted.
    Delete {
        key: String,
        archived_only: bool,
        expected: Option<String>,
    },
    /// Its own sessions' rows, as `sessions.list` lists them.
    Rows(RowsAsked),
}

/// A `sessions.patch` for a session another replica runs, as the
/// replica the client asked checked it (the model resolved, the scopes
/// met); [`super::Patch`] with owned fields, `archived` and the session
/// the key must name.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchAsked {
    pub label: Option<String>,
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub permission_mode: Option<String>,
    pub queue_mode: Option<String>,
    pub verbose: Option<String>,
    pub archived: Option<bool>,
    pub expected: Option<String>,
}

/// What `sessions.list` asks of every other replica: the rows of its own
/// sessions, from the first, to merge with this replica's
/// ([`Hub::rows_elsewhere`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RowsAsked {
    pub search: Option<String>,
    /// `exclude`, `include` or `only`.
    pub archived: String,
    pub limit: usize,
    pub active_minutes: Option<u64>,
    pub last_message: bool,
    pub spawned_by: Option<String>,
    pub no_helpers: bool,
    pub busy_only: bool,
}

/// The rows another replica answered with, and how many sessions matched
/// there.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct RowsElsewhere {
    pub rows: Vec<serde_json::Value>,
    pub count: usize,
}

/// A message in the store's run queue ([`Sessions::enqueue`]).
#[derive(Serialize, Deserialize)]
struct Queued {
    content: Vec<ContentBlock>,
    mode: Option<String>,
    #[serde(default)]
    unattended: bool,
}

/// How long `sessions.list` waits for the other replicas' rows.
const ROWS_TIMEOUT: Duration = Duration::from_secs(5);

/// Its answer: the method's result, or its error.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Answer {
    Ok(serde_json::Value),
    Error { code: String, message: String },
}

impl Peers {
    /// This replica's name on the bus.
    pub(super) fn replica(&self) -> &str {
        self.bus.replica()
    }

    pub(crate) fn new(bus: Arc<Bus>, events: Option<EventSink>) -> Self {
        Self {
            bus,
            heard: parking_lot::Mutex::new(Heard::default()),
            telling: parking_lot::Mutex::new(Telling::default()),
            events,
        }
    }
}

impl Heard {
    /// Notes a session heard of. Cheap for one already known as it was
    /// (every event of a run comes through here).
    fn remember(&mut self, elsewhere: Elsewhere) {
        if self
            .sessions
            .get(&elsewhere.session)
            .is_some_and(|known| known.key == elsewhere.key && known.replica == elsewhere.replica)
        {
            return;
        }
        let session = elsewhere.session.clone();
        match self.sessions.insert(session.clone(), elsewhere.clone()) {
            Some(old) => {
                if old.key != elsewhere.key && self.keys.get(&old.key) == Some(&session) {
                    self.keys.remove(&old.key);
                }
                if let Some(at) = self.order.iter().position(|s| *s == session) {
                    self.order.remove(at);
                }
            }
            None => {
                while self.sessions.len() > MAX_REMOTE_SESSIONS {
                    let Some(oldest) = self.order.pop_front() else {
                        break;
                    };
                    self.forget(&oldest);
                }
            }
        }
        self.keys.insert(elsewhere.key, session.clone());
        self.order.push_back(session);
    }

    fn forget(&mut self, session: &str) {
        if let Some(old) = self.sessions.remove(session)
            && self.keys.get(&old.key).map(String::as_str) == Some(session)
        {
            self.keys.remove(&old.key);
        }
        self.end_approvals(session);
    }

    /// The questions `session`'s run asked are over: its run ended (on
    /// its replica, or as interrupted by the replica that took the
    /// session over from a dead one).
    fn end_approvals(&mut self, session: &str) {
        let before = self.approvals.len();
        self.approvals.retain(|_, a| a.session != session);
        if self.approvals.len() != before {
            let approvals = &self.approvals;
            self.approval_order.retain(|id| approvals.contains_key(id));
        }
    }
}

impl Hub {
    /// Joins the cluster's bus: this hub's sessions are told on it, and
    /// the other replicas' are heard from it and acted on when asked.
    pub async fn join_bus(self: &Arc<Self>, bus: Arc<Bus>) -> Result<(), String> {
        let events = bus.hear(EVENTS).await?;
        let mut requests = bus.requests().await?;
        bus.flush().await?;
        let sink = self.stored.get().and_then(|s| s.sessions.write_events());
        if self.peers.set(Peers::new(bus.clone(), sink)).is_err() {
            return Err("the hub is on a bus already".to_string());
        }
        // The runs going elsewhere now are read from their first event;
        // what the bus tells of them meanwhile waits.
        let going = match self.stored.get() {
            Some(stored) => match stored.sessions.runs_elsewhere().await {
                Ok(runs) => runs,
                Err(e) => {
                    tracing::warn!(
                        "cluster: cannot read the runs going on the other replicas: {e}"
                    );
                    Vec::new()
                }
            },
            None => Vec::new(),
        };
        let hub = self.clone();
        tokio::spawn(async move { hub.follow_peers(events, going).await });
        let hub = self.clone();
        tokio::spawn(async move {
            while let Some(asked) = requests.recv().await {
                let hub = hub.clone();
                let bus = bus.clone();
                tokio::spawn(async move {
                    let answer = match serde_json::from_slice::<Asked>(&asked.payload) {
                        Ok(request) => hub.act(request).await,
                        Err(e) => Answer::Error {
                            code: INVALID_REQUEST.to_string(),
                            message: format!("a malformed request from a replica: {e}"),
                        },
                    };
                    bus.answer(asked, serde_json::to_vec(&answer).unwrap_or_default())
                        .await;
                });
            }
        });
        Ok(())
    }

    /// Tells the other replicas what the registry told this hub. An
    /// editor's prompt (no tag) gets its run id here, so that every
    /// replica names its run alike.
    pub(super) fn tell_peers(&self, event: &mut Observed) {
        let Some(peers) = self.peers.get() else {
            return;
        };
        let told = match event {
            Observed::PromptStarted { session, tag, text } => {
                let run = tag
                    .get_or_insert_with(|| uuid::Uuid::new_v4().to_string())
                    .clone();
                let session = session.0.to_string();
                Told::Started {
                    key: self.key_of(&session),
                    session,
                    run,
                    text: text.clone(),
                }
            }
            Observed::Update(notification) => Told::Update {
                key: self.key_of(&notification.session_id.0),
                notification: Box::new(notification.clone()),
            },
            Observed::PromptEnded {
                session,
                tag,
                result,
            } => Told::Ended {
                key: self.key_of(&session.0),
                session: session.0.to_string(),
                run: tag.clone(),
                result: result.clone(),
            },
            Observed::PermissionResolved {
                session,
                tool_call_id,
                option,
            } => Told::PermissionResolved {
                key: self.key_of(&session.0),
                session: session.0.to_string(),
                tool_call_id: tool_call_id.clone(),
                option: option.clone(),
            },
            Observed::Closed { session } => Told::Closed {
                key: self.key_of(&session.0),
                session: session.0.to_string(),
            },
            // Helpers and background work stay with their replica for now;
            // a session opened is told with its first run.
            Observed::BackgroundFinished { .. }
            | Observed::HelperStarted { .. }
            | Observed::HelperEnded { .. }
            | Observed::Opened { .. } => return,
        };
        peers.publish(told);
    }

    /// Tells the other replicas about an approval asked here.
    pub(super) fn tell_asked<E: Serialize, L: Serialize, P: Serialize>(
        &self,
        id: &str,
        session: &str,
        key: &str,
        tool_call_id: &str,
        asked: AskedHere<'_, E, L, P>,
    ) {
        let Some(peers) = self.peers.get() else {
            return;
        };
        let (Some(event), Some(listed), Some(phase)) =
            (raw(asked.event), raw(asked.listed), raw(asked.phase))
        else {
            return;
        };
        peers.publish(Told::Asked {
            id: id.to_string(),
            session: session.to_string(),
            key: key.to_string(),
            tool_call_id: tool_call_id.to_string(),
            decisions: asked.decisions,
            event,
            listed,
            phase,
        });
    }

    /// Tells the other replicas an approval asked here was settled.
    pub(super) fn tell_settled(&self, id: &str, event: &impl Serialize) {
        let Some(peers) = self.peers.get() else {
            return;
        };
        if let Some(event) = raw(event) {
            peers.publish(Told::Settled {
                id: id.to_string(),
                event,
            });
        }
    }

    /// What another replica told: its sessions' events reach this hub's
    /// clients as if they ran here.
    pub(super) fn heard(self: &Arc<Self>, envelope: Envelope) {
        let Some(peers) = self.peers.get() else {
            return;
        };
        let from = envelope.from;
        if from == peers.bus.replica() {
            return;
        }
        let remember = |session: &str, key: &str| {
            peers.heard.lock().remember(Elsewhere {
                session: session.to_string(),
                key: key.to_string(),
                replica: from.clone(),
            });
        };
        let observed = match envelope.told {
            Told::Started {
                session,
                key,
                run,
                text,
            } => {
                remember(&session, &key);
                Observed::PromptStarted {
                    session: SessionId::new(session),
                    tag: Some(run),
                    text,
                }
            }
            Told::Update { key, notification } => {
                remember(&notification.session_id.0, &key);
                Observed::Update(*notification)
            }
            Told::Ended {
                session,
                key,
                run,
                result,
            } => {
                remember(&session, &key);
                peers.heard.lock().end_approvals(&session);
                Observed::PromptEnded {
                    session: SessionId::new(session),
                    tag: run,
                    result,
                }
            }
            Told::PermissionResolved {
                session,
                key,
                tool_call_id,
                option,
            } => {
                remember(&session, &key);
                Observed::PermissionResolved {
                    session: SessionId::new(session),
                    tool_call_id,
                    option,
                }
            }
            Told::Closed { session, key } => {
                self.session_changed_as("close", &key, &session);
                peers.heard.lock().forget(&session);
                return;
            }
            Told::Asked {
                id,
                session,
                key,
                tool_call_id,
                decisions,
                event,
                listed,
                phase,
            } => {
                remember(&session, &key);
                {
                    let mut state = self.state();
                    // Asked by the gateway (there): its settling is told
                    // as such, not as an editor's answer.
                    state.asked.insert((session.clone(), tool_call_id));
                    let active = state.live.get(&session).and_then(|l| l.active.clone());
                    if let Some(run_id) = active
                        && let Some(run) = state.runs.get_mut(&run_id)
                    {
                        self.agent(&run_id, run, "approval", &phase);
                    }
                }
                {
                    let mut heard = peers.heard.lock();
                    while heard.approvals.len() >= MAX_REMOTE_APPROVALS {
                        let Some(oldest) = heard.approval_order.pop_front() else {
                            break;
                        };
                        heard.approvals.remove(&oldest);
                    }
                    heard.approval_order.push_back(id.clone());
                    heard.approvals.insert(
                        id,
                        RemoteApproval {
                            replica: from.clone(),
                            session: session.clone(),
                            decisions,
                            listed,
                        },
                    );
                }
                self.broadcast("exec.approval.requested", &event, Audience::Approvers);
                return;
            }
            Told::Settled { id, event } => {
                {
                    let mut heard = peers.heard.lock();
                    heard.approvals.remove(&id);
                    heard.approval_order.retain(|a| *a != id);
                }
                self.broadcast("exec.approval.resolved", &event, Audience::Approvers);
                return;
            }
        };
        self.observe(observed);
    }

    /// The session `key` names when it runs on another replica (and not
    /// here): as the store says, when there is one (a replica that is gone
    /// runs nothing), else as the bus told.
    pub async fn elsewhere(&self, key: &str) -> Option<Elsewhere> {
        let peers = self.peers.get()?;
        if self
            .lookup(key)
            .is_some_and(|id| self.registry.is_open(&id))
        {
            return None;
        }
        if let Some(stored) = self.stored.get() {
            match stored.sessions.locate(key).await {
                Ok(Some((session, replica, alive))) => {
                    return (alive && replica != stored.replica).then(|| Elsewhere {
                        session,
                        key: key.to_string(),
                        replica,
                    });
                }
                Ok(None) => return None,
                Err(e) => tracing::warn!("cluster: cannot ask the store where {key} runs: {e}"),
            }
        }
        let found = {
            let heard = peers.heard.lock();
            let session = heard.keys.get(key)?;
            heard.sessions.get(session).cloned()
        }?;
        (!self.registry.is_open(&found.session)).then_some(found)
    }

    /// The session `key` names and its transcript's text, from the
    /// cluster's store, when this replica has no session by that key
    /// (another replica has it, or had it): what `chat.history` reads of
    /// it. `None` alone, or when the store has none or cannot say.
    pub async fn transcript_elsewhere(&self, key: &str) -> Option<(String, String)> {
        let stored = self.stored.get()?;
        if self.lookup(key).is_some() {
            return None;
        }
        let (session, _, _) = match stored.sessions.locate(key).await {
            Ok(found) => found?,
            Err(e) => {
                tracing::warn!("cluster: cannot ask the store where {key} runs: {e}");
                return None;
            }
        };
        let lines = match stored.sessions.lines(&session).await {
            Ok(lines) => lines,
            Err(e) => {
                tracing::warn!("cluster: cannot read session {session} from the store: {e}");
                return None;
            }
        };
        match crate::session::stored::stored_transcript(&session, &lines) {
            Ok((_, text)) => Some((session, text)),
            Err(e) => {
                tracing::warn!("cluster: {e}");
                None
            }
        }
    }

    /// The rows of the other live replicas' sessions, as `asked`, for
    /// `sessions.list`: each replica's answer, and how many matched there.
    /// A replica that does not answer within a few seconds is left out
    /// (and logged): the list shows what it can.
    pub async fn rows_elsewhere(&self, asked: RowsAsked) -> Vec<RowsElsewhere> {
        let (Some(stored), Some(_)) = (self.stored.get(), self.peers.get()) else {
            return Vec::new();
        };
        let others = match stored.sessions.others().await {
            Ok(others) => others,
            Err(e) => {
                tracing::warn!("cluster: cannot ask the store for the other replicas: {e}");
                return Vec::new();
            }
        };
        let asked = Asked::Rows(asked);
        let answers =
            futures::future::join_all(others.iter().map(|replica| {
                tokio::time::timeout(ROWS_TIMEOUT, self.ask_replica(replica, &asked))
            }))
            .await;
        others
            .iter()
            .zip(answers)
            .filter_map(|(replica, answer)| match answer {
                Ok(Ok(value)) => match serde_json::from_value::<RowsElsewhere>(value) {
                    Ok(rows) => Some(rows),
                    Err(e) => {
                        tracing::warn!(
                            "cluster: replica `{replica}` listed rows that do not read: {e}"
                        );
                        None
                    }
                },
                Ok(Err(e)) => {
                    tracing::warn!(
                        "cluster: replica `{replica}` did not list its sessions: {}",
                        e.message
                    );
                    None
                }
                Err(_) => {
                    tracing::warn!(
                        "cluster: replica `{replica}` did not list its sessions in time"
                    );
                    None
                }
            })
            .collect()
    }

    /// The key of a session another replica runs, if this one heard of it.
    pub(super) fn key_elsewhere(&self, session: &str) -> Option<String> {
        let peers = self.peers.get()?;
        let heard = peers.heard.lock();
        heard.sessions.get(session).map(|e| e.key.clone())
    }

    /// The approvals waiting on other replicas, as `exec.approvals.list`
    /// lists them.
    pub fn approvals_elsewhere(&self) -> Vec<Box<RawValue>> {
        let Some(peers) = self.peers.get() else {
            return Vec::new();
        };
        let heard = peers.heard.lock();
        heard
            .approval_order
            .iter()
            .filter_map(|id| heard.approvals.get(id))
            .map(|a| a.listed.clone())
            .collect()
    }

    /// Whether approval `id` waits on another replica.
    pub fn is_asked_elsewhere(&self, id: &str) -> bool {
        self.peers
            .get()
            .is_some_and(|p| p.heard.lock().approvals.contains_key(id))
    }

    /// Approval `id`, waiting on another replica, as `exec.approval.get`
    /// gives it.
    pub fn approval_elsewhere(&self, id: &str) -> Option<Box<RawValue>> {
        let peers = self.peers.get()?;
        let heard = peers.heard.lock();
        heard.approvals.get(id).map(|a| a.listed.clone())
    }

    /// The key of the session whose run asked approval `id` on another
    /// replica.
    pub fn approval_key_elsewhere(&self, id: &str) -> Option<String> {
        let peers = self.peers.get()?;
        let heard = peers.heard.lock();
        let approval = heard.approvals.get(id)?;
        heard.sessions.get(&approval.session).map(|s| s.key.clone())
    }

    /// [`Hub::approval_key_elsewhere`], waiting up to `within` for the
    /// question to be heard (at once when this gateway is on no bus, or
    /// the question is this replica's own).
    pub async fn approval_key_elsewhere_within(
        &self,
        id: &str,
        within: std::time::Duration,
    ) -> Option<String> {
        self.peers.get()?;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(key) = self.approval_key_elsewhere(id) {
                return Some(key);
            }
            if self.approval(id).is_some() || tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }

    /// `exec.approval.resolve` of a question another replica asked: the
    /// decision is checked here, then answered there.
    pub async fn resolve_elsewhere(&self, id: &str, decision: &str) -> Result<(), Failure> {
        let (replica, decisions) = {
            let peers = self.peers.get().ok_or_else(|| super::not_found(id))?;
            let heard = peers.heard.lock();
            let approval = heard
                .approvals
                .get(id)
                .ok_or_else(|| super::not_found(id))?;
            (approval.replica.clone(), approval.decisions.clone())
        };
        if !decisions.iter().any(|d| d == decision) {
            return Err(Failure::invalid(format!(
                "`decision` must be one of: {}",
                decisions.join(", ")
            )));
        }
        let asked = Asked::Resolve {
            id: id.to_string(),
            decision: decision.to_string(),
        };
        self.ask_replica(&replica, &asked).await.map(drop)
    }

    /// `sessions.reset` of a session another replica runs: that replica
    /// resets it; the new session's id.
    pub(super) async fn reset_elsewhere(
        &self,
        elsewhere: &Elsewhere,
        expected: Option<&str>,
    ) -> Result<String, Failure> {
        let asked = Asked::Reset {
            key: elsewhere.key.clone(),
            expected: expected.map(str::to_string),
        };
        match self.ask_replica(&elsewhere.replica, &asked).await? {
            serde_json::Value::String(session) => Ok(session),
            other => Err(Failure::new(
                UNAVAILABLE,
                format!("a malformed answer from a replica: {other}"),
            )),
        }
    }

    /// `sessions.patch` of a session another replica runs: that replica
    /// changes it; the session's id and its row.
    pub async fn patch_elsewhere(
        &self,
        elsewhere: &Elsewhere,
        patch: PatchAsked,
    ) -> Result<(String, serde_json::Value), Failure> {
        let asked = Asked::Patch {
            key: elsewhere.key.clone(),
            patch,
        };
        let mut answered = self.ask_replica(&elsewhere.replica, &asked).await?;
        match answered["sessionId"].take() {
            serde_json::Value::String(session) => Ok((session, answered["entry"].take())),
            _ => Err(Failure::new(
                UNAVAILABLE,
                format!("a malformed answer from a replica: {answered}"),
            )),
        }
    }

    /// [`Hub::patch`] of a session of this replica's, as another replica
    /// asked: archived or not, and only while the key names `expected`.
    async fn patch_here(
        self: &Arc<Self>,
        key: &str,
        patch: &PatchAsked,
    ) -> Result<(String, Option<crate::gateway::protocol::sessions::Row>), Failure> {
        let session = self.lookup(key);
        if let Some(expected) = &patch.expected
            && session.as_deref() != Some(expected.as_str())
        {
            return Err(Failure::invalid(format!(
                "{key} no longer names session {expected}"
            )));
        }
        if let Some(archived) = patch.archived {
            let session = session
                .as_deref()
                .ok_or_else(|| Failure::invalid(format!("no session is named {key}")))?;
            self.set_archived(session, archived);
        }
        self.patch(
            key,
            super::Patch {
                label: patch.label.as_deref(),
                model: patch.model.as_deref(),
                thinking: patch.thinking.as_deref(),
                permission_mode: patch.permission_mode.as_deref(),
                queue_mode: patch.queue_mode.as_deref(),
                verbose: patch.verbose.as_deref(),
            },
        )
        .await
    }

    /// `sessions.delete` of a session another replica runs: that replica
    /// deletes it; whether it did.
    pub(super) async fn delete_elsewhere(
        &self,
        elsewhere: &Elsewhere,
        archived_only: bool,
        expected: Option<&str>,
    ) -> Result<bool, Failure> {
        let asked = Asked::Delete {
            key: elsewhere.key.clone(),
            archived_only,
            expected: expected.map(str::to_string),
        };
        match self.ask_replica(&elsewhere.replica, &asked).await? {
            serde_json::Value::Bool(deleted) => Ok(deleted),
            other => Err(Failure::new(
                UNAVAILABLE,
                format!("a malformed answer from a replica: {other}"),
            )),
        }
    }

    /// A reset's new session `session` for `key`, in the store: refused
    /// when a live replica has the key (the caller asks that one), or
    /// when the store cannot be reached (nothing is reset then).
    pub(super) async fn rebind_stored(&self, key: &str, session: &str) -> Result<(), Failure> {
        let Some(stored) = self.stored.get() else {
            return Ok(());
        };
        match stored.sessions.rebind(key, session).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(Failure::new(
                UNAVAILABLE,
                format!("the session of {key} runs on another replica; reset it there"),
            )),
            Err(e) => Err(Failure::new(UNAVAILABLE, e)),
        }
    }

    /// A deletion of the session `key` names, in the store first: its
    /// lines go, and no replica brings it back. The session the store
    /// forgot (`None`: it named none, or this is no cluster); an error
    /// when the store cannot be reached, so that nothing is deleted.
    pub(super) async fn forget_stored(&self, key: &str) -> Result<Option<String>, Failure> {
        let Some(stored) = self.stored.get() else {
            return Ok(None);
        };
        stored
            .sessions
            .forget(key)
            .await
            .map_err(|e| Failure::new(UNAVAILABLE, e))
    }

    /// `chat.abort` of a session another replica runs.
    pub async fn abort_elsewhere(
        &self,
        elsewhere: &Elsewhere,
        run: Option<&str>,
    ) -> Result<Option<Vec<String>>, Failure> {
        let asked = Asked::Abort {
            key: elsewhere.key.clone(),
            run: run.map(str::to_string),
        };
        let value = self.ask_replica(&elsewhere.replica, &asked).await?;
        serde_json::from_value(value).map_err(|e| {
            Failure::new(
                UNAVAILABLE,
                format!("a malformed answer from a replica: {e}"),
            )
        })
    }

    /// A message for a session another replica runs: `conn` follows the
    /// session here, and the replica that runs it sends it.
    pub async fn send_elsewhere(
        &self,
        conn: &Arc<crate::gateway::conn::Conn>,
        elsewhere: &Elsewhere,
        run: &str,
        content: Vec<ContentBlock>,
        mode: Option<QueueMode>,
        unattended: bool,
    ) -> Result<&'static str, Failure> {
        super::check_run_id(run)?;
        // A chat's replies are sent by the replica that runs its session
        // (its own channel follows it there), so that they are sent once.
        if !unattended {
            self.follow(conn, &elsewhere.session);
        }
        let mode = mode.map(|m| m.wire().to_string());
        // Queued in the store first: if the session's replica does not
        // take it (it died), the replica that takes the session over runs
        // it. Without the store at hand it is only sent.
        let queued = match self.stored.get() {
            Some(stored) => {
                let message = Queued {
                    content: content.clone(),
                    mode: mode.clone(),
                    unattended,
                };
                let message = serde_json::to_string(&message).unwrap_or_default();
                match stored.sessions.enqueue(run, &elsewhere.key, &message).await {
                    Ok(_) => true,
                    Err(e) => {
                        tracing::warn!("cluster: cannot queue a message in the store: {e}");
                        false
                    }
                }
            }
            None => false,
        };
        let asked = Asked::Send {
            key: elsewhere.key.clone(),
            run: run.to_string(),
            content,
            mode,
            unattended,
            queued,
        };
        let value = match self.ask_replica(&elsewhere.replica, &asked).await {
            Ok(value) => value,
            // It waits in the queue for the replica that takes the
            // session over (or the store, for the replica that has it).
            Err(e) if queued && e.code == UNAVAILABLE => {
                tracing::info!(
                    run,
                    "cluster: {}; the message waits in the store's queue",
                    e.message
                );
                return Ok("started");
            }
            Err(e) => return Err(e),
        };
        // The statuses `Hub::submit` answers with.
        Ok(
            match ["in_flight", "ok", "error", "timeout"]
                .into_iter()
                .find(|status| value.as_str() == Some(status))
            {
                Some(status) => status,
                None => "started",
            },
        )
    }

    async fn ask_replica(
        &self,
        replica: &str,
        asked: &Asked,
    ) -> Result<serde_json::Value, Failure> {
        let peers = self
            .peers
            .get()
            .ok_or_else(|| Failure::new(UNAVAILABLE, "this gateway is not on a cluster's bus"))?;
        let payload = serde_json::to_vec(asked).unwrap_or_default();
        let answered = peers
            .bus
            .ask(replica, payload)
            .await
            .map_err(|e| Failure::new(UNAVAILABLE, e))?;
        match serde_json::from_slice::<Answer>(&answered) {
            Ok(Answer::Ok(value)) => Ok(value),
            Ok(Answer::Error { code, message }) => Err(Failure::new(code_of(&code), message)),
            Err(e) => Err(Failure::new(
                UNAVAILABLE,
                format!("a malformed answer from replica `{replica}`: {e}"),
            )),
        }
    }

    /// Does what another replica asked of a session this one runs.
    async fn act(self: &Arc<Self>, asked: Asked) -> Answer {
        let result = match asked {
            Asked::Send {
                key,
                run,
                content,
                mode,
                unattended,
                queued,
            } => 'send: {
                // A queued message runs where it is claimed, once.
                if queued && let Some(stored) = self.stored.get() {
                    match stored.sessions.claim(&run).await {
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            break 'send Ok(serde_json::Value::from(
                                self.known_run(&run).unwrap_or("in_flight"),
                            ));
                        }
                        Err(e) => {
                            break 'send Err(Failure::new(
                                UNAVAILABLE,
                                format!("cannot claim the message in the cluster's store: {e}"),
                            ));
                        }
                    }
                }
                let mode = match mode.as_deref().map(QueueMode::from_wire) {
                    Some(None) => Err(Failure::invalid("an unknown queue mode")),
                    Some(Some(mode)) => Ok(Some(mode)),
                    None => Ok(None),
                };
                match mode {
                    Ok(mode) => self
                        .submit_for_peer(&key, &run, content, mode, unattended)
                        .await
                        .map(serde_json::Value::from),
                    Err(e) => Err(e),
                }
            }
            Asked::Abort { key, run } => self
                .abort_key(&key, run.as_deref())
                .map(|runs| serde_json::to_value(runs).unwrap_or_default()),
            Asked::Reset { key, expected } => match super::check_key("key", &key) {
                Ok(()) => self
                    .reset_here(&key, expected.as_deref())
                    .await
                    .map(serde_json::Value::from),
                Err(e) => Err(e),
            },
            Asked::Patch { key, patch } => match super::check_key("key", &key) {
                Ok(()) => self.patch_here(&key, &patch).await.map(
                    |(session, entry)| serde_json::json!({"sessionId": session, "entry": entry}),
                ),
                Err(e) => Err(e),
            },
            Asked::Delete {
                key,
                archived_only,
                expected,
            } => match super::check_key("key", &key) {
                Ok(()) => self
                    .delete_here(&key, archived_only, expected.as_deref())
                    .await
                    .map(serde_json::Value::from),
                Err(e) => Err(e),
            },
            Asked::Rows(asked) => {
                let hub = self.clone();
                crate::parallel::ANSWERS
                    .run(move || {
                        let archived = match asked.archived.as_str() {
                            "include" => super::Archived::Include,
                            "only" => super::Archived::Only,
                            _ => super::Archived::Exclude,
                        };
                        let (rows, count) = hub.session_rows_with(&super::RowQuery {
                            search: asked.search.as_deref(),
                            archived,
                            offset: 0,
                            limit: asked.limit.min(1000),
                            active_minutes: asked.active_minutes,
                            last_message: asked.last_message,
                            spawned_by: asked.spawned_by.as_deref(),
                            no_helpers: asked.no_helpers,
                            busy_only: asked.busy_only,
                        });
                        serde_json::json!({"rows": rows, "count": count})
                    })
                    .await
                    .map_err(|e| Failure::new(UNAVAILABLE, format!("listing failed: {e}")))
            }
            Asked::Resolve { id, decision } => self
                .resolve_approval(&id, &decision)
                .map(|()| serde_json::Value::Null),
        };
        match result {
            Ok(value) => Answer::Ok(value),
            Err(e) => Answer::Error {
                code: e.code.to_string(),
                message: e.message,
            },
        }
    }
}

/// The hub's part of the cluster's store: who runs which session.
pub(crate) struct Stored {
    sessions: Arc<dyn Sessions>,
    replica: String,
    /// The runs started and ended here, in order, for the store
    /// ([`Sessions::running`]).
    marks: tokio::sync::mpsc::Sender<(String, Option<String>)>,
}

impl Stored {
    pub(super) fn sessions(&self) -> Arc<dyn Sessions> {
        self.sessions.clone()
    }
}

/// The run marks waiting for the store, at most.
const MARKS_QUEUE: usize = 65_536;

impl Hub {
    /// Keeps this hub's sessions in the cluster's store: a session is
    /// opened where the store says it runs (or taken over from a replica
    /// that is gone), each run's start and end are marked there, and every
    /// `lease / 2` the sessions a gone replica was running are taken over
    /// here, their runs ended as interrupted.
    pub fn use_store(
        self: &Arc<Self>,
        sessions: Arc<dyn Sessions>,
        replica: &str,
        lease: Duration,
    ) {
        let (marks, mut marked) =
            tokio::sync::mpsc::channel::<(String, Option<String>)>(MARKS_QUEUE);
        let stored = Stored {
            sessions: sessions.clone(),
            replica: replica.to_string(),
            marks,
        };
        if self.stored.set(stored).is_err() {
            return;
        }
        let store = sessions.clone();
        tokio::spawn(async move {
            while let Some((session, run)) = marked.recv().await {
                if let Err(e) = store.running(&session, run.as_deref()).await {
                    tracing::warn!("cluster: cannot mark a run in the store: {e}");
                }
            }
        });
        let hub = self.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval((lease / 2).max(Duration::from_millis(500)));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                match sessions.orphans().await {
                    Ok(orphans) => {
                        for orphan in orphans {
                            hub.adopt(orphan).await;
                        }
                    }
                    Err(e) => tracing::warn!(
                        "cluster: cannot look for sessions left by a gone replica: {e}"
                    ),
                }
                match sessions.claim_waiting().await {
                    Ok(waiting) => {
                        for (run, key, message) in waiting {
                            hub.run_queued(&run, &key, &message).await;
                        }
                    }
                    Err(e) => tracing::warn!("cluster: cannot claim the queued messages: {e}"),
                }
            }
        });
    }

    /// Runs a message claimed from the store's queue (its replica died
    /// before it took it, or never heard of it).
    async fn run_queued(self: &Arc<Self>, run: &str, key: &str, message: &str) {
        let Ok(queued) = serde_json::from_str::<Queued>(message) else {
            tracing::warn!(run, "cluster: a queued message that is not one; dropped");
            return;
        };
        let mode = match queued.mode.as_deref().map(QueueMode::from_wire) {
            Some(None) => {
                tracing::warn!(
                    run,
                    "cluster: a queued message with an unknown mode; dropped"
                );
                return;
            }
            Some(Some(mode)) => Some(mode),
            None => None,
        };
        if let Err(e) = self
            .submit_for_peer(key, run, queued.content, mode, queued.unattended)
            .await
        {
            tracing::warn!(
                run,
                key,
                "cluster: a queued message could not run: {}",
                e.message
            );
        }
    }

    /// Marks a run of a session this replica runs as started or ended.
    pub(super) fn mark_run(&self, event: &Observed) {
        let Some(stored) = self.stored.get() else {
            return;
        };
        let mark = match event {
            Observed::PromptStarted {
                session,
                tag: Some(run),
                ..
            } => (session.0.to_string(), Some(run.clone())),
            Observed::PromptEnded { session, .. } => (session.0.to_string(), None),
            _ => return,
        };
        if stored.marks.try_send(mark).is_err() {
            tracing::warn!("cluster: the store is not keeping up with the runs' marks");
        }
    }

    /// A session whose replica went while it ran: its transcript comes
    /// from the store, says the run was interrupted, and the run ends as
    /// an error for every client of every replica.
    async fn adopt(self: &Arc<Self>, orphan: Orphan) {
        let Some(stored) = self.stored.get() else {
            return;
        };
        let why = format!(
            "interrupted: replica `{}` stopped while this run went on",
            orphan.from
        );
        if let Err(e) = self
            .restore_transcript(
                stored,
                &orphan.session,
                orphan.run.as_ref().map(|_| why.as_str()),
            )
            .await
        {
            tracing::warn!(
                session = orphan.session,
                "cluster: cannot take the session over: {e}"
            );
        }
        self.keys().insert(&orphan.key, &orphan.session);
        self.key_made();
        if let Some(peers) = self.peers.get() {
            peers.heard.lock().forget(&orphan.session);
        }
        if let Some(run) = orphan.run {
            let mut ended = Observed::PromptEnded {
                session: SessionId::new(orphan.session.clone()),
                tag: Some(run),
                result: Err(why),
            };
            self.tell_peers(&mut ended);
            self.observe(ended);
        }
    }

    /// Writes the store's transcript of `session` here, with a notice
    /// that its run was interrupted when `interrupted` says why; returns
    /// the session's working directory.
    async fn restore_transcript(
        &self,
        stored: &Stored,
        session: &str,
        interrupted: Option<&str>,
    ) -> Result<PathBuf, String> {
        // The id names a file here: one the store holds that could leave
        // the sessions directory is refused, whoever wrote it there.
        if !crate::session::is_file_id(session) {
            return Err(format!(
                "the store names a session {session:?} that cannot be a file here"
            ));
        }
        let lines = stored.sessions.lines(session).await?;
        let (header, text) = crate::session::stored::stored_transcript(session, &lines)?;
        let cwd = if header.cwd.is_dir() {
            header.cwd.clone()
        } else {
            self.cwd.clone()
        };
        let path = crate::session::find(&self.data_dir, session).unwrap_or_else(|| {
            crate::session::transcript_path(&self.data_dir, &header.cwd, session)
        });
        let interrupted = interrupted.map(str::to_string);
        crate::parallel::file_work(move || -> Result<(), String> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            }
            std::fs::write(&path, text).map_err(|e| e.to_string())?;
            if let Some(why) = interrupted {
                let loaded = crate::session::transcript::load(&path).map_err(|e| e.to_string())?;
                let mut writer = crate::session::transcript::Writer::append_to(&path, &loaded)
                    .map_err(|e| e.to_string())?;
                writer
                    .append(crate::session::transcript::Record::Notice { text: why })
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        })
        .await
        .map_err(|e| format!("{e:?}"))??;
        Ok(cwd)
    }

    /// [`Hub::open`] in a cluster: the session `key` names is opened here
    /// if the store gives it to this replica (a new one, one of its own,
    /// or one whose replica is gone, taken over with its transcript).
    pub(super) async fn open_stored(
        self: &Arc<Self>,
        key: &str,
    ) -> Result<Option<String>, Failure> {
        let Some(stored) = self.stored.get() else {
            return Ok(None);
        };
        if let Some(id) = self.lookup(key)
            && self.registry.is_open(&id)
        {
            return Ok(Some(id));
        }
        let unavailable = |e: String| Failure::new(UNAVAILABLE, e);
        let link = self.link()?;
        let (session, interrupted) = match stored.sessions.take(key).await.map_err(unavailable)? {
            Placed::Elsewhere { replica, .. } => {
                return Err(Failure::new(
                    UNAVAILABLE,
                    format!("the session of {key} runs on replica `{replica}`; send to it there"),
                ));
            }
            Placed::Vacant => {
                let id = link.new_session(self.cwd.clone()).await.map_err(|e| {
                    Failure::invalid(format!(
                        "cannot create a session for {key}: {}",
                        crate::gateway::link::error_text(&e)
                    ))
                })?;
                if !stored.sessions.bind(key, &id).await.map_err(unavailable)? {
                    // Never prompted: unloaded now, its file swept later.
                    self.registry.unload_idle(&id);
                    return Err(Failure::new(
                        UNAVAILABLE,
                        format!(
                            "another replica opened the session of {key} at the same moment; send again"
                        ),
                    ));
                }
                return Ok(Some(id));
            }
            Placed::Mine { session } => (session, None),
            Placed::TakenOver {
                session,
                from,
                running,
            } => {
                let why = running.map(|run| {
                    (
                        run,
                        format!("interrupted: replica `{from}` stopped while this run went on"),
                    )
                });
                (session, Some(why))
            }
        };
        // A session of this replica's is read from its own file when it
        // has one; one taken over from the store.
        let local = crate::session::find(&self.data_dir, &session)
            .and_then(|path| crate::session::read_header(&path));
        let cwd = match (&interrupted, local) {
            (None, Some(header)) => header.cwd,
            _ => {
                let why = interrupted
                    .as_ref()
                    .and_then(|i| i.as_ref())
                    .map(|(_, why)| why.as_str());
                self.restore_transcript(stored, &session, why)
                    .await
                    .map_err(unavailable)?
            }
        };
        link.load_session(&session, cwd).await.map_err(|e| {
            Failure::invalid(format!(
                "cannot open session {key}: {}",
                crate::gateway::link::error_text(&e)
            ))
        })?;
        self.keys().insert(key, &session);
        self.key_made();
        if let Some(peers) = self.peers.get() {
            peers.heard.lock().forget(&session);
        }
        if let Some(Some((run, why))) = interrupted {
            let mut ended = Observed::PromptEnded {
                session: SessionId::new(session.clone()),
                tag: Some(run),
                result: Err(why),
            };
            self.tell_peers(&mut ended);
            self.observe(ended);
        }
        Ok(Some(session))
    }
}

impl Peers {
    /// Tells the other replicas; a run's event is numbered, and stored
    /// too. Numbered and queued under one lock, so that the numbers go on
    /// the bus in order.
    fn publish(&self, told: Told) {
        let mut telling = self.telling.lock();
        let (at, ended) = match &told {
            Told::Started { session, run, .. } => (Some(telling.started(session, run)), None),
            Told::Update { notification, .. } => (telling.next(&notification.session_id.0), None),
            Told::PermissionResolved { session, .. } | Told::Asked { session, .. } => {
                (telling.next(session), None)
            }
            Told::Ended { session, run, .. } => {
                (telling.ended(session, run.as_deref()), run.clone())
            }
            Told::Closed { session, .. } => {
                telling.closed(session);
                (None, None)
            }
            Told::Settled { .. } => (None, None),
        };
        let envelope = Envelope {
            from: self.bus.replica().to_string(),
            told,
            at,
        };
        let payload = match serde_json::to_vec(&envelope) {
            Ok(payload) => payload,
            Err(e) => {
                tracing::warn!(error = %e, "cannot encode an event for the cluster");
                return;
            }
        };
        if let Some(sink) = &self.events {
            if let Some(at) = envelope.at {
                sink(RunEvent::Told {
                    run: at.run,
                    seq: at.seq,
                    event: String::from_utf8_lossy(&payload).into_owned(),
                });
            }
            if let Some(run) = ended {
                sink(RunEvent::Ended { run });
            }
        }
        self.bus.tell(EVENTS, payload);
    }
}

fn raw(value: &impl Serialize) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(value).ok()
}

/// A forwarded error's code, as one of the protocol's.
fn code_of(code: &str) -> &'static str {
    [INVALID_REQUEST, FORBIDDEN, UNAVAILABLE, APPROVAL_NOT_FOUND]
        .into_iter()
        .find(|c| *c == code)
        .unwrap_or(UNAVAILABLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elsewhere(session: &str, key: &str) -> Elsewhere {
        Elsewhere {
            session: session.to_string(),
            key: key.to_string(),
            replica: "r1".to_string(),
        }
    }

    #[test]
    fn a_session_heard_again_under_a_new_key_is_found_by_the_new_key_only() {
        let mut heard = Heard::default();
        heard.remember(elsewhere("s1", "k1"));
        heard.remember(elsewhere("s1", "k2"));
        assert_eq!(heard.keys.get("k2").map(String::as_str), Some("s1"));
        assert!(!heard.keys.contains_key("k1"));
        assert_eq!(heard.order.len(), 1);
        heard.forget("s1");
        assert!(heard.sessions.is_empty() && heard.keys.is_empty());
    }

    #[test]
    fn the_sessions_heard_of_are_bounded_the_oldest_forgotten() {
        let mut heard = Heard::default();
        for n in 0..MAX_REMOTE_SESSIONS + 10 {
            heard.remember(elsewhere(&format!("s{n}"), &format!("k{n}")));
        }
        assert_eq!(heard.sessions.len(), MAX_REMOTE_SESSIONS);
        assert_eq!(heard.keys.len(), MAX_REMOTE_SESSIONS);
        assert!(!heard.sessions.contains_key("s0"));
        assert!(
            heard
                .sessions
                .contains_key(&format!("s{}", MAX_REMOTE_SESSIONS + 9))
        );
    }

    #[test]
    fn a_forwarded_error_keeps_a_known_code_only() {
        assert_eq!(code_of(APPROVAL_NOT_FOUND), APPROVAL_NOT_FOUND);
        assert_eq!(code_of("SOMETHING_ELSE"), UNAVAILABLE);
    }
}
