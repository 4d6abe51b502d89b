//! The open sessions of one pincer process, shared by every ACP connection
//! it serves: the editor's on stdio and the gateway's in-process one
//! (`pincer acp --gateway`). A session belongs to the connection that
//! opened it (its owner: the one asked for permissions, files and
//! terminals); any connection may prompt or cancel it, and one observer
//! (the gateway) sees what every session does, in order (through
//! [`super::observer`]). Sessions unloaded while idle are kept here as
//! what opens them again.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use super::observer::Bus;
use super::session::{Reopen, Session};

pub use super::observer::{Observed, Observer, PROMPT_META_KEY};

/// The open sessions and the observer.
#[derive(Default)]
pub struct Registry {
    pub(super) sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// What the sessions tell the observer.
    pub(super) bus: Arc<Bus>,
    /// Editors' sessions unloaded while idle, which their next use opens
    /// again (see [`Registry::unload_idle_of`]).
    unloaded: Mutex<HashMap<String, Reopen>>,
    /// Held while an unloaded session is opened again, so that it is
    /// opened once however many requests come for it.
    pub(super) reopening: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("open", &self.sessions.lock().len())
            .finish_non_exhaustive()
    }
}

impl Registry {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Starts telling what every session does; there is one observer per
    /// process, so a second call gets `None`.
    pub fn observe(&self) -> Option<Observer> {
        self.bus.observe()
    }

    /// Waits until the observer has heard every event told before this
    /// call: an answer to the agent that comes outside the bus (a
    /// permission question) is handled after what the agent told first.
    pub fn caught_up(&self) -> impl Future<Output = ()> + Send + 'static {
        self.bus.caught_up()
    }

    /// Connection `connection` belongs to the observer: updates of the
    /// sessions it owns reach it through [`Registry::observe`] only.
    pub fn observed_by(&self, connection: u64) {
        self.bus.observed_by(connection);
    }

    /// Whether updates for sessions owned by `connection` need not be sent.
    pub fn hears_through_observer(&self, connection: u64) -> bool {
        self.bus.hears_through_observer(connection)
    }

    /// Whether a session with this id is open in this process.
    pub fn is_open(&self, id: &str) -> bool {
        self.sessions.lock().contains_key(id)
    }

    /// The running helper `id` of an open session (or of one of its
    /// helpers). A helper is one from the moment its transcript is
    /// written until its run has ended.
    pub(super) fn running_helper(&self, id: &str) -> Option<Arc<Session>> {
        let sessions: Vec<Arc<Session>> = self.sessions.lock().values().cloned().collect();
        sessions.iter().find_map(|s| s.find_child(id))
    }

    /// Whether `id` is a helper that runs now in this process.
    pub fn is_running_helper(&self, id: &str) -> bool {
        self.running_helper(id).is_some()
    }

    /// How many prompts wait for the session's running run (0 for a
    /// session that is not open).
    pub fn waiting(&self, id: &str) -> usize {
        self.sessions
            .lock()
            .get(id)
            .map_or(0, |session| session.waiting())
    }

    /// Makes an open session's sandbox that of a session nobody watches
    /// (a chat channel's, cron's, the heartbeat's); false when no session
    /// with this id is open.
    pub fn make_unattended(&self, id: &str, config: &crate::tools::sandbox::SandboxConfig) -> bool {
        let Some(session) = self.sessions.lock().get(id).cloned() else {
            return false;
        };
        session.make_unattended(config);
        true
    }

    /// Gives an open session the user's own name (see
    /// [`Session::rename`]); `None` when no session with this id is open.
    pub fn rename(&self, id: &str, label: &str) -> Option<std::io::Result<()>> {
        let session = self.sessions.lock().get(id).cloned()?;
        Some(session.rename(label))
    }

    /// The open sessions the observer's own connection owns (the
    /// gateway's): those it may unload when they are idle. An editor's
    /// sessions are never among them.
    pub fn observer_sessions(&self) -> Vec<String> {
        let Some(owner) = self.bus.observer_connection() else {
            return Vec::new();
        };
        self.sessions
            .lock()
            .iter()
            .filter(|(_, session)| session.owned_by(owner))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Unloads session `id` if the observer's connection owns it and it is
    /// idle ([`Session::is_idle`]), in one step under the lock, so that no
    /// prompt gets in between. Its transcript stays: opening it again
    /// (`session/load`) restores it as it was. The session's MCP servers
    /// stop and its `session_end` hooks run, as when it closes; the
    /// observer is not told (nothing changed for its clients).
    pub fn unload_idle(&self, id: &str) -> bool {
        let Some(owner) = self.bus.observer_connection() else {
            return false;
        };
        let session = {
            let mut sessions = self.sessions.lock();
            let idle = sessions
                .get(id)
                .is_some_and(|s| s.owned_by(owner) && s.is_idle());
            if !idle {
                return false;
            }
            sessions.remove(id)
        };
        if let Some(session) = session {
            end_unloaded(session);
        }
        true
    }

    /// Unloads the sessions connection `connection` owns that are idle
    /// past their `[acp] session_idle_secs` ([`Session::unloadable`]),
    /// each in one step under the lock so that no prompt gets in between.
    /// What opens one again is kept ([`Registry::take_unloaded`]); its MCP
    /// servers stop and its `session_end` hooks run, as when it closes.
    /// The observer is not told: for its clients the session is still
    /// there. Returns how many.
    pub(super) fn unload_idle_of(&self, connection: u64) -> usize {
        let unloaded: Vec<Arc<Session>> = {
            let mut sessions = self.sessions.lock();
            let idle: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.owned_by(connection) && s.unloadable())
                .map(|(id, _)| id.clone())
                .collect();
            idle.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        for session in &unloaded {
            self.unloaded
                .lock()
                .insert(session.id().0.to_string(), session.reopen());
            end_unloaded(session.clone());
        }
        unloaded.len()
    }

    /// What opens unloaded session `id` again, taken: the caller opens
    /// it, or it is gone (closed, deleted, opened anew).
    pub(super) fn take_unloaded(&self, id: &str) -> Option<Reopen> {
        self.unloaded.lock().remove(id)
    }

    /// The unloaded sessions connection `connection` owns, forgotten (the
    /// connection is gone).
    pub(super) fn forget_unloaded_of(&self, connection: u64) -> Vec<String> {
        let mut unloaded = self.unloaded.lock();
        let owned: Vec<String> = unloaded
            .iter()
            .filter(|(_, r)| r.owner.connection == connection)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &owned {
            unloaded.remove(id);
        }
        owned
    }

    /// Tells the observer, if there is one.
    /// Cancels the work of every open session (their helpers' with it)
    /// and waits, up to 5 s, for their runs to end and their commands to
    /// be stopped: the process is about to exit.
    pub async fn stop_all(&self) {
        let open: Vec<Arc<Session>> = self.sessions.lock().values().cloned().collect();
        for session in &open {
            session.cancel();
            session.stop_background();
        }
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while tokio::time::Instant::now() < deadline && !open.iter().all(|s| s.is_idle()) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        for session in open {
            session.shutdown_mcp().await;
        }
    }

    pub(crate) fn tell(&self, event: Observed) {
        self.bus.tell(event);
    }
}

/// Ends an unloaded session's MCP servers and runs its `session_end`
/// hooks, as when it closes.
fn end_unloaded(session: Arc<Session>) {
    tokio::spawn(async move {
        session.shutdown_mcp().await;
        session
            .lifecycle_hooks(crate::agent::hooks::Event::SessionEnd)
            .await;
    });
}

/// The gateway's tag of a prompt (`_meta["pincer/gateway"]["tag"]`).
pub(super) fn prompt_tag(
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Option<String> {
    meta?
        .get(PROMPT_META_KEY)?
        .get("tag")?
        .as_str()
        .map(str::to_string)
}

/// The queue mode a prompt asks for if it has to wait
/// (`_meta["pincer/gateway"]["queue"]`: `steer` or `follow-up`).
pub(super) fn prompt_queue_mode(
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<Option<crate::agent::QueueMode>, String> {
    let Some(value) = meta
        .and_then(|m| m.get(PROMPT_META_KEY))
        .and_then(|g| g.get("queue"))
    else {
        return Ok(None);
    };
    value
        .as_str()
        .and_then(crate::agent::QueueMode::parse)
        .map(Some)
        .ok_or_else(|| {
            format!(
                "_meta[\"{PROMPT_META_KEY}\"].queue is {value}; it takes \"steer\" or \"follow-up\""
            )
        })
}
