//! One server process per (project, configuration), shared by the
//! sessions that use it.
//!
//! Every session holds a [`Manager`]; the manager does not start its own
//! copy of a server when another session of the same project (the same
//! roots) already runs the same configuration (name, transport with its
//! command, arguments, environment and directory, call timeout, origin):
//! it joins that one. A process-wide table finds running servers by that
//! key; it holds them weakly, so it never keeps one alive. Each server
//! counts its users: the last session to close (or drop) its manager stops
//! it, so nothing outlives the sessions and `pincer` leaves no processes
//! behind.
//!
//! What stays per session: the notices (each server tells every session
//! using it), a call's progress and cancellation (routed by the call's own
//! request id and progress token, see `PendingCall`), the tool policy
//! (applied by each session to the shared tool list), and the roots: they
//! are part of the key, and a session that changes its roots while it
//! shares a server moves to a server of its own ([`Manager::set_roots`]).
//! A server that failed is never joined; the next session starts a fresh
//! one.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::{
    Connection, DEFAULT_STARTUP_TIMEOUT, Event, Server, ServerReport, ServerSpec, Status, connect,
    end, group_alive, kill_group,
};
use crate::tools::{Tool, ToolSource};

/// What makes two sessions' servers the same process.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    spec: ServerSpec,
    roots: Vec<PathBuf>,
}

/// The servers running (or starting) now, by key.
static RUNNING: LazyLock<Mutex<HashMap<Key, Weak<Server>>>> = LazyLock::new(Default::default);

/// One more user of `spec` for a project with `roots`: the live server of
/// that key, or a new one starting in the background with
/// `startup_timeout` to connect and list its tools.
fn acquire(
    spec: ServerSpec,
    roots: Vec<PathBuf>,
    startup_timeout: Duration,
    listener: &UnboundedSender<Event>,
) -> Arc<Server> {
    let key = Key { spec, roots };
    let mut running = RUNNING.lock();
    if let Some(server) = running.get(&key).and_then(Weak::upgrade) {
        let joined = {
            let mut state = server.state.lock();
            let live = matches!(state.status, Status::Starting | Status::Ready);
            if live {
                state.users += 1;
            }
            live
        };
        if joined {
            server.listeners.lock().push(listener.clone());
            return server;
        }
    }
    running.retain(|_, server| server.strong_count() > 0);
    let server = Arc::new(Server::new(
        key.spec.clone(),
        key.roots.clone(),
        listener.clone(),
    ));
    running.insert(key, Arc::downgrade(&server));
    drop(running);
    start(&server, startup_timeout);
    server
}

/// Takes the server out of the table, so that nobody joins it any more.
fn forget(running: &mut HashMap<Key, Weak<Server>>, server: &Arc<Server>) {
    running.retain(|_, s| !std::ptr::eq(s.as_ptr(), Arc::as_ptr(server)));
}

/// One user fewer; true when it was the last, and stopping the server is
/// now the caller's job.
fn release(server: &Arc<Server>, listener: &UnboundedSender<Event>) -> bool {
    server
        .listeners
        .lock()
        .retain(|l| !l.same_channel(listener));
    let mut running = RUNNING.lock();
    {
        let mut state = server.state.lock();
        state.users = state.users.saturating_sub(1);
        if state.users > 0 {
            return false;
        }
    }
    forget(&mut running, server);
    true
}

/// Marks a server nobody uses any more stopped (a start still under way
/// ends what it started) and hands back its connection.
fn stopped(server: &Server) -> Option<Connection> {
    let mut state = server.state.lock();
    state.tools.clear();
    if !matches!(state.status, Status::Failed(_)) {
        state.status = Status::Stopped;
    }
    state.connection.take()
}

/// Connects in the background, within `startup_timeout`.
fn start(server: &Arc<Server>, startup_timeout: Duration) {
    let server = server.clone();
    tokio::spawn(async move {
        // Its own task, so that a panic in the client is one more way for
        // a server to fail, not a server stuck starting.
        let connecting = {
            let server = server.clone();
            tokio::spawn(async move { connect(&server).await })
        };
        let abort = connecting.abort_handle();
        let failure = match tokio::time::timeout(startup_timeout, connecting).await {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(why))) => Some(why),
            Ok(Err(e)) => Some(format!("failed to start ({e})")),
            Err(_) => {
                abort.abort();
                Some(format!(
                    "did not start within {} s",
                    startup_timeout.as_secs_f64()
                ))
            }
        };
        if let Some(why) = failure {
            server.fail(why);
        }
        server.settled.send_replace(true);
    });
}

/// A session's MCP servers.
pub struct Manager {
    servers: Mutex<Vec<Arc<Server>>>,
    /// The directories the servers may work in (`roots/list`).
    roots: Mutex<Vec<PathBuf>>,
    startup_timeout: Duration,
    /// The session's side of its servers' notices.
    listener: UnboundedSender<Event>,
    events: Mutex<Option<UnboundedReceiver<Event>>>,
    /// Set once the session has let go of its servers.
    released: AtomicBool,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .servers
            .lock()
            .iter()
            .map(|s| s.spec.name.clone())
            .collect();
        f.debug_struct("Manager")
            .field("servers", &names)
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// Starts every server at once, in the background (or joins the one
    /// another session of the same project runs); each has
    /// `startup_timeout` to connect and list its tools. `roots` (the
    /// session's working directory) is what a server's `roots/list` gets.
    pub fn start(
        specs: Vec<ServerSpec>,
        roots: Vec<PathBuf>,
        startup_timeout: Duration,
    ) -> Arc<Self> {
        let (listener, events) = tokio::sync::mpsc::unbounded_channel();
        let servers = specs
            .into_iter()
            .map(|spec| acquire(spec, roots.clone(), startup_timeout, &listener))
            .collect();
        Arc::new(Self {
            servers: Mutex::new(servers),
            roots: Mutex::new(roots),
            startup_timeout,
            listener,
            events: Mutex::new(Some(events)),
            released: AtomicBool::new(false),
        })
    }

    /// A manager with no servers.
    pub fn empty() -> Arc<Self> {
        Self::start(Vec::new(), Vec::new(), DEFAULT_STARTUP_TIMEOUT)
    }

    fn servers(&self) -> Vec<Arc<Server>> {
        if self.released.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.servers.lock().clone()
    }

    /// The directories the servers are told they may work in.
    pub fn roots(&self) -> Vec<PathBuf> {
        self.roots.lock().clone()
    }

    /// Replaces the roots and, when they changed, sends
    /// `notifications/roots/list_changed` to every connected server this
    /// session has to itself (which asks `roots/list` again). A server
    /// shared with other sessions keeps their roots: this session moves
    /// to a server of its own for the new ones. A session's working
    /// directory is fixed today, so pincer's sessions do not call this; it
    /// is the path for whatever makes the set change. A server still
    /// starting reads the new set when it first asks.
    pub async fn set_roots(&self, roots: Vec<PathBuf>) {
        {
            let mut current = self.roots.lock();
            if *current == roots {
                return;
            }
            *current = roots.clone();
        }
        for server in self.servers() {
            let alone = {
                let mut running = RUNNING.lock();
                let alone = server.state.lock().users == 1;
                if alone {
                    // Its key no longer says what it serves.
                    forget(&mut running, &server);
                    *server.roots.lock() = roots.clone();
                }
                alone
            };
            if !alone {
                let own = acquire(
                    server.spec.clone(),
                    roots.clone(),
                    self.startup_timeout,
                    &self.listener,
                );
                for held in self.servers.lock().iter_mut() {
                    if Arc::ptr_eq(held, &server) {
                        *held = own.clone();
                    }
                }
                // Others use it, so this is not the last use; should they
                // all have gone meanwhile, it stops here.
                if release(&server, &self.listener)
                    && let Some(connection) = stopped(&server)
                {
                    end(connection, true);
                }
                continue;
            }
            let Some(peer) = server.peer() else {
                continue;
            };
            if let Err(e) = peer.notify_roots_list_changed().await {
                tracing::debug!(server = %server.spec.name, error = %e, "could not announce new roots");
            }
        }
    }

    /// Waits until every server has started or failed.
    pub async fn ready(&self) {
        for server in self.servers() {
            let mut settled = server.settled.subscribe();
            let _ = settled.wait_for(|settled| *settled).await;
        }
    }

    /// What the user should hear about; taken once, by the frontend.
    pub fn take_events(&self) -> Option<UnboundedReceiver<Event>> {
        self.events.lock().take()
    }

    /// The tools of the running servers, as they are now.
    pub fn tools_now(&self) -> Vec<Arc<dyn Tool>> {
        self.servers()
            .iter()
            .flat_map(|s| s.state.lock().tools.clone())
            .collect()
    }

    pub fn reports(&self) -> Vec<ServerReport> {
        self.servers()
            .iter()
            .map(|s| {
                let state = s.state.lock();
                ServerReport {
                    name: s.spec.name.clone(),
                    origin: s.spec.origin,
                    transport: s.spec.transport.clone(),
                    status: state.status.clone(),
                    tools: state
                        .tools
                        .iter()
                        .map(|t| (t.name().to_string(), !t.mutating()))
                        .collect(),
                }
            })
            .collect()
    }

    /// Lets go of every server; one no other session uses ends: its
    /// transport closes, a stdio server's process group is asked to stop,
    /// and what is left is killed after a grace period.
    pub async fn shutdown(&self) {
        let Some(servers) = self.let_go() else {
            return;
        };
        let connections: Vec<Connection> = servers.iter().filter_map(|s| stopped(s)).collect();
        let groups: Vec<i32> = connections.iter().filter_map(|c| c.group).collect();
        for connection in connections {
            end(connection, false);
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while groups.iter().any(|g| group_alive(*g)) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for group in groups {
            kill_group(group);
        }
    }

    /// Ends this session's use of its servers, once; the servers it was the
    /// last user of.
    fn let_go(&self) -> Option<Vec<Arc<Server>>> {
        if self.released.swap(true, Ordering::AcqRel) {
            return None;
        }
        let servers = self.servers.lock().clone();
        Some(
            servers
                .into_iter()
                .filter(|s| release(s, &self.listener))
                .collect(),
        )
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        // The last resort when nobody called `shutdown`: nothing outlives
        // the sessions that used it.
        for server in self.let_go().unwrap_or_default() {
            if let Some(connection) = stopped(&server) {
                end(connection, true);
            }
        }
    }
}

impl ToolSource for Manager {
    fn tools(&self) -> BoxFuture<'_, Vec<Arc<dyn Tool>>> {
        Box::pin(async move {
            let mut all = Vec::new();
            for server in self.servers() {
                all.extend(server.current_tools().await);
            }
            all
        })
    }
}
