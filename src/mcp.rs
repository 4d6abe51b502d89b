//! MCP servers as pincer tools.
//!
//! ACP editors pass the user's context servers in `session/new` and
//! `session/load` (Zed sends the enabled ones); users may also configure
//! servers for pincer itself under `[mcp.servers.<name>]` in `config.toml`
//! or a project's `.pincer/config.toml`. Each session owns a [`Manager`]
//! that connects to all of them at once with the official SDK (`rmcp`):
//! stdio servers run as child processes in their own process group, HTTP
//! servers speak streamable HTTP. Sessions of one project that use the
//! same server configuration share one connection (and one process); see
//! `shared.rs` for what stays per session.
//!
//! Their tools reach the model as `mcp__<server>__<tool>` with the server's
//! JSON schema and go through the same pipeline as the built-in tools
//! (policy, loop detection, hooks, permission). A tool annotated
//! `readOnlyHint` counts as not mutating, so `default` mode does not ask
//! before it and `plan` mode keeps it. The kind shown in the editor comes
//! from the annotations too, but never one of the file-edit kinds, which
//! `accept-edits` mode lets through without asking.
//!
//! Failure is contained: a server that does not start within the startup
//! timeout, crashes, or stops answering is reported through
//! [`Manager::take_events`] (the session turns them into notices) and its
//! tools disappear at the next turn; the session goes on. A call that
//! outlives its timeout returns an error result and the server is probed;
//! only a server that does not answer the probe is dropped.
//!
//! pincer declares the `roots` capability: a server's `roots/list` gets
//! the session's working directory as a `file://` URI (so a filesystem
//! server started without a directory may work there), and
//! [`Manager::set_roots`] sends `notifications/roots/list_changed` when the
//! set changes. Every `tools/call` carries a `progressToken` (rmcp adds
//! one to each request); the server's `notifications/progress` for it are
//! shown in the running call through the tool's progress callback.
//!
//! A stdio server runs in the session's sandbox, as commands do
//! ([`confine`]): it reads the machine but not the user's secrets, writes
//! only in the project and temp, and reaches no network beyond its own
//! loopback, unless the user's `[mcp.servers.<name>] sandbox` says
//! otherwise (`false`, or keys of its own such as `{ network = "on" }`).
//! A server that should be confined and cannot be is not started.
//!
//! A `notifications/tools/list_changed` marks the server's list stale; the
//! next turn waits for the new list. Servers end with the last session
//! using them ([`Manager::shutdown`], and killing the process group on drop
//! as a last resort), so pincer leaves no processes behind.

mod config;
mod content;
pub mod server;
mod shared;
mod tool;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

// Roots are deprecated by a protocol draft (SEP-2577) that no released
// server speaks; today's servers (the reference filesystem server among
// them) still ask `roots/list`.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, Implementation, ListRootsResult, ProgressNotificationParam,
    ProgressToken, RequestId, Root, ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, RoleClient, ServiceExt,
};
use tokio_util::sync::CancellationToken;

use crate::tools::{Display, Progress, Tool, ToolOutput};

pub use config::{McpConfig, ServerConfig, ServerSandbox, tool_prefix_name};
pub use shared::Manager;
pub use tool::McpTool;

/// How long a server may take to start and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server that let a call time out has to answer a probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a server came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The editor's `session/new` or `session/load`.
    Editor,
    /// `[mcp.servers]` in the user's config file.
    Config,
    /// `[mcp.servers]` in a trusted project's `.pincer/config.toml`.
    Project,
}

/// How to reach a server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    Stdio {
        command: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: PathBuf,
        /// How its process is confined ([`confine`]).
        confined: Confined,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// How a stdio server's process is confined.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Confined {
    /// It runs as the user's own process.
    #[default]
    No,
    /// It runs through the sandbox's launcher: this program and these
    /// arguments start its command confined.
    By { program: String, args: Vec<String> },
    /// It should be confined and cannot be here: why. It is not started.
    Unavailable(String),
}

/// `specs` with each stdio server confined by `sandbox` (a session's), as
/// the user's `config` says of it: its `sandbox` table over the session's
/// settings, `sandbox = false` for none. A project's own server runs in
/// the session's sandbox whatever its table says.
pub fn confine(
    specs: Vec<ServerSpec>,
    sandbox: Option<&crate::tools::sandbox::Sandbox>,
    config: &McpConfig,
) -> Vec<ServerSpec> {
    let Some(sandbox) = sandbox else {
        return specs;
    };
    specs
        .into_iter()
        .map(|mut spec| {
            let own = match spec.origin {
                Origin::Project => None,
                Origin::Config | Origin::Editor => config
                    .servers
                    .get(&spec.name)
                    .and_then(|s| s.sandbox.clone()),
            };
            if let Transport::Stdio {
                command,
                args,
                cwd,
                confined,
                ..
            } = &mut spec.transport
            {
                let over = match own {
                    Some(ServerSandbox::Confined(false)) => return spec,
                    Some(ServerSandbox::Confined(true)) | None => None,
                    Some(ServerSandbox::With(table)) => Some(table),
                };
                *confined = match sandbox.confinement_with(cwd, over.as_ref()) {
                    Ok(None) => Confined::No,
                    Ok(Some(confinement)) => {
                        let (program, args) = confinement.command(&command.to_string_lossy(), args);
                        Confined::By { program, args }
                    }
                    Err(why) => Confined::Unavailable(format!(
                        "cannot be confined by the sandbox here ({why}); set `sandbox = false` \
                         in its [mcp.servers.{}] table to run it unconfined",
                        spec.name
                    )),
                };
            }
            spec
        })
        .collect()
}

/// A server to start.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServerSpec {
    pub name: String,
    pub transport: Transport,
    pub call_timeout: Duration,
    pub origin: Origin,
}

/// Where a server is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Starting,
    Ready,
    /// It did not start, crashed, or stopped answering; the text says how.
    Failed(String),
    /// Shut down with its session.
    Stopped,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Starting => write!(f, "starting"),
            Status::Ready => write!(f, "ready"),
            Status::Failed(why) => write!(f, "failed: {why}"),
            Status::Stopped => write!(f, "stopped"),
        }
    }
}

/// Something the user should hear about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub server: String,
    /// One sentence for a notice's title.
    pub title: String,
    /// What happened and what follows.
    pub text: String,
}

/// A snapshot of one server, for `pincer mcp list` and tests.
#[derive(Clone, Debug)]
pub struct ServerReport {
    pub name: String,
    pub origin: Origin,
    pub transport: Transport,
    pub status: Status,
    /// The tools' model-facing names, and whether each is read-only.
    pub tools: Vec<(String, bool)>,
}

/// One server's connection.
struct Connection {
    peer: Peer<RoleClient>,
    /// Cancels the service loop (which closes the transport).
    stop: CancellationToken,
    /// The process group of a stdio server.
    group: Option<i32>,
}

struct ServerState {
    status: Status,
    connection: Option<Connection>,
    tools: Vec<Arc<dyn Tool>>,
    /// Bumped by every `tools/list_changed`; the list is current when
    /// `listed` has caught up.
    changes: u64,
    listed: u64,
    /// The sessions using it (see `shared.rs`); the last one stops it.
    users: usize,
}

/// One server of a session.
pub(crate) struct Server {
    spec: ServerSpec,
    state: Mutex<ServerState>,
    /// The roots of the project it was started for (see
    /// [`Manager::set_roots`]).
    roots: Mutex<Vec<PathBuf>>,
    /// Where the progress of each running call goes, by its token, and
    /// what wakes the call's timeout (a report is a sign of life).
    progress: Mutex<HashMap<ProgressToken, (Progress, Arc<tokio::sync::Notify>)>>,
    /// Wakes whoever waits for a new tool list.
    refreshed: tokio::sync::Notify,
    /// Where each session using the server hears about it.
    listeners: Mutex<Vec<tokio::sync::mpsc::UnboundedSender<Event>>>,
    /// True once the server has started or failed to.
    settled: tokio::sync::watch::Sender<bool>,
}

impl Server {
    fn new(
        spec: ServerSpec,
        roots: Vec<PathBuf>,
        listener: tokio::sync::mpsc::UnboundedSender<Event>,
    ) -> Self {
        Server {
            spec,
            state: Mutex::new(ServerState {
                status: Status::Starting,
                connection: None,
                tools: Vec::new(),
                changes: 0,
                listed: 0,
                users: 1,
            }),
            roots: Mutex::new(roots),
            progress: Mutex::new(HashMap::new()),
            refreshed: tokio::sync::Notify::new(),
            listeners: Mutex::new(vec![listener]),
            settled: tokio::sync::watch::Sender::new(false),
        }
    }

    /// Tells every session using the server.
    fn report(&self, title: &str, text: String) {
        let event = Event {
            server: self.spec.name.clone(),
            title: title.to_string(),
            text,
        };
        self.listeners
            .lock()
            .retain(|listener| listener.send(event.clone()).is_ok());
    }

    fn peer(&self) -> Option<Peer<RoleClient>> {
        self.state
            .lock()
            .connection
            .as_ref()
            .map(|c| c.peer.clone())
    }

    /// Marks the server failed, drops its tools and ends its process; says
    /// so to the user unless it had already ended.
    fn fail(&self, why: String) {
        let connection = {
            let mut state = self.state.lock();
            if matches!(state.status, Status::Failed(_) | Status::Stopped) {
                return;
            }
            state.status = Status::Failed(why.clone());
            state.tools.clear();
            state.connection.take()
        };
        if let Some(connection) = connection {
            end(connection, true);
        }
        self.report(
            &format!("MCP server `{}` stopped", self.spec.name),
            format!(
                "MCP server `{}` {why}. Its tools are unavailable for the rest of this session.",
                self.spec.name
            ),
        );
    }

    /// Fetches the tool list again.
    async fn list(self: &Arc<Self>, peer: &Peer<RoleClient>) -> Result<(), String> {
        let seen = self.state.lock().changes;
        let listed = peer
            .list_all_tools()
            .await
            .map_err(|e| format!("could not list its tools ({e})"))?;
        let me = Arc::downgrade(self);
        let tools: Vec<Arc<dyn Tool>> = listed
            .into_iter()
            .filter_map(|t| {
                let value = serde_json::to_value(&t).ok()?;
                Some(Arc::new(McpTool::new(&self.spec.name, &value, me.clone())) as Arc<dyn Tool>)
            })
            .collect();
        {
            let mut state = self.state.lock();
            if state.status == Status::Ready || state.status == Status::Starting {
                state.tools = tools;
            }
            state.listed = state.listed.max(seen);
        }
        self.refreshed.notify_waiters();
        Ok(())
    }

    /// The tools, after any announced change has been fetched (bounded by
    /// the probe timeout, so a silent server cannot hold up a turn).
    async fn current_tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        let deadline = tokio::time::Instant::now() + PROBE_TIMEOUT;
        loop {
            let notified = self.refreshed.notified();
            {
                let state = self.state.lock();
                if state.status != Status::Ready || state.listed >= state.changes {
                    return state.tools.clone();
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.state.lock().tools.clone();
            }
        }
    }

    /// Runs one call with the server's timeout; the user's cancel stops it.
    pub(crate) async fn call(
        self: &Arc<Self>,
        tool: &str,
        args: serde_json::Value,
        image_input: bool,
        cancel: &CancellationToken,
        progress: &Progress,
    ) -> ToolOutput {
        let Some(peer) = self.peer() else {
            return ToolOutput::error(format!(
                "MCP server `{}` is not running, so {tool} cannot be called.",
                self.spec.name
            ));
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        match args {
            serde_json::Value::Object(map) => params = params.with_arguments(map),
            serde_json::Value::Null => {}
            other => {
                return ToolOutput::error(format!(
                    "The arguments for {tool} must be a JSON object, got {other}."
                ));
            }
        }
        let timeout = self.spec.call_timeout;
        let alive = Arc::new(tokio::sync::Notify::new());
        let call = async {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let handle = peer
                .send_request_with_option(request, PeerRequestOptions::no_options())
                .await?;
            // rmcp put a progress token of its own into the request; what
            // the server reports under it goes to this call's view.
            let mut pending = PendingCall::new(
                self,
                &peer,
                handle.id.clone(),
                handle.progress_token.clone(),
                progress.clone(),
                alive.clone(),
            );
            let result = handle.await_response().await;
            pending.answered();
            result
        };
        // The timeout counts from the call or its latest progress report
        // (the MCP spec lets a client reset it on progress), up to
        // MAX_PROGRESS_EXTENSIONS times the timeout in all: a tool that
        // reports as it works may take longer than one that is silent,
        // but not forever.
        let result = tokio::select! {
            () = cancel.cancelled() => return ToolOutput::error("Operation aborted"),
            result = until_silent(call, timeout, &alive) => result,
        };
        match result {
            Ok(Ok(result)) => {
                let value = match result {
                    ServerResult::CallToolResult(result) => serde_json::to_value(&result),
                    // A reply without `content` decodes as one of these.
                    ServerResult::EmptyResult(_) => Ok(serde_json::json!({})),
                    ServerResult::CustomResult(custom) => Ok(custom.0),
                    _ => {
                        return ToolOutput::error(format!(
                            "MCP server `{}` answered {tool} with something other than a tool result (pincer does not support input requests or tasks).",
                            self.spec.name
                        ));
                    }
                };
                match value {
                    Ok(value) => content::to_output(&value, image_input),
                    Err(e) => ToolOutput::error(format!("unreadable result from {tool}: {e}")),
                }
            }
            Ok(Err(e)) => {
                let gone = matches!(
                    e,
                    rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)
                ) || peer.is_transport_closed()
                    || self.state.lock().connection.is_none();
                if !gone {
                    ToolOutput::error(format!(
                        "MCP server `{}` answered {tool} with an error: {e}",
                        self.spec.name
                    ))
                } else {
                    self.fail(format!("stopped while running {tool} ({e})"));
                    ToolOutput::error(format!(
                        "MCP server `{}` stopped while running {tool} ({e}); its tools are gone for this session.",
                        self.spec.name
                    ))
                }
            }
            Err(_) => {
                let secs = timeout.as_secs_f64();
                self.report(
                    &format!("MCP tool {tool} timed out"),
                    format!(
                        "MCP server `{}` did not answer {tool} within {secs} s; the call was abandoned.",
                        self.spec.name
                    ),
                );
                // A slow tool is not a dead server; one that no longer
                // answers at all is.
                let probe = tokio::time::timeout(PROBE_TIMEOUT, peer.list_tools(None)).await;
                if !matches!(probe, Ok(Ok(_))) {
                    self.fail("stopped answering".to_string());
                }
                ToolOutput::error(format!(
                    "MCP tool {tool} (server `{}`) timed out after {secs} s and was abandoned. Try something else or ask the user.",
                    self.spec.name
                ))
            }
        }
    }
}

/// How many timeouts in all a call that keeps reporting progress may take.
const MAX_PROGRESS_EXTENSIONS: u32 = 10;

/// Runs `call` until it ends, or until `timeout` passes without a sign of
/// life on `alive` (a progress report), or `MAX_PROGRESS_EXTENSIONS`
/// timeouts pass in all.
async fn until_silent<T>(
    call: impl std::future::Future<Output = T>,
    timeout: Duration,
    alive: &tokio::sync::Notify,
) -> Result<T, tokio::time::error::Elapsed> {
    let limit = tokio::time::Instant::now() + timeout.saturating_mul(MAX_PROGRESS_EXTENSIONS);
    tokio::time::timeout_at(limit, async {
        let mut call = std::pin::pin!(call);
        loop {
            tokio::select! {
                result = &mut call => return Ok(result),
                () = alive.notified() => continue,
                () = tokio::time::sleep(timeout) => {
                    return tokio::time::timeout(Duration::ZERO, std::future::pending::<T>()).await;
                }
            }
        }
    })
    .await
    .and_then(|inner| inner)
}

/// A `tools/call` on its way: routes the server's progress reports for
/// it to the call's view while it runs, and, when the caller gives up on
/// it (cancel, timeout), tells the server with `notifications/cancelled`
/// so it does not keep working on a result nobody reads.
struct PendingCall<'a> {
    server: &'a Server,
    peer: &'a Peer<RoleClient>,
    id: RequestId,
    token: ProgressToken,
    answered: bool,
}

impl<'a> PendingCall<'a> {
    fn new(
        server: &'a Server,
        peer: &'a Peer<RoleClient>,
        id: RequestId,
        token: ProgressToken,
        progress: Progress,
        alive: Arc<tokio::sync::Notify>,
    ) -> Self {
        server
            .progress
            .lock()
            .insert(token.clone(), (progress, alive));
        Self {
            server,
            peer,
            id,
            token,
            answered: false,
        }
    }

    fn answered(&mut self) {
        self.answered = true;
    }
}

impl Drop for PendingCall<'_> {
    fn drop(&mut self) {
        self.server.progress.lock().remove(&self.token);
        if self.answered {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        let cancelled = CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("pincer stopped waiting for the call".to_string()),
        );
        runtime.spawn(async move {
            let _ = peer.notify_cancelled(cancelled).await;
        });
    }
}

/// What a progress report says, for the call's view: "Progress: 2 of 5
/// (40%): copying" (the total and message only when the server gives them).
fn progress_text(report: &ProgressNotificationParam) -> String {
    fn number(n: f64) -> String {
        if n.fract() == 0.0 && n.abs() < 1e15 {
            format!("{}", n as i64)
        } else {
            format!("{n}")
        }
    }
    let mut text = format!("Progress: {}", number(report.progress));
    if let Some(total) = report.total.filter(|t| *t > 0.0) {
        let percent = (report.progress / total * 100.0).clamp(0.0, 100.0).round();
        text.push_str(&format!(" of {} ({}%)", number(total), number(percent)));
    }
    if let Some(message) = report.message.as_deref().filter(|m| !m.trim().is_empty()) {
        text.push_str(": ");
        text.push_str(message.trim());
    }
    text
}

/// The roots a server sees: each directory as a `file://` URI, named by
/// its last component. A path that is not absolute has no URI and is left
/// out.
#[allow(deprecated)]
fn roots_of(paths: &[PathBuf]) -> Vec<Root> {
    paths
        .iter()
        .filter_map(|path| {
            let uri = url::Url::from_file_path(path).ok()?;
            let mut root = Root::new(uri.to_string());
            root.name = path
                .file_name()
                .map(|name| name.to_string_lossy().into_owned());
            Some(root)
        })
        .collect()
}

/// Ends a connection: closes the transport and kills a stdio server's
/// process group (the server and anything it started).
fn end(connection: Connection, kill: bool) {
    connection.stop.cancel();
    if let Some(group) = connection.group {
        use crate::process_group::{Pid, Signal, signal_group};
        let signal = if kill {
            Signal::SIGKILL
        } else {
            Signal::SIGTERM
        };
        signal_group(Pid::from_raw(group), signal);
    }
}

/// What a connection hands back to the manager: the server's
/// notifications.
struct Handler {
    server: std::sync::Weak<Server>,
}

impl rmcp::ClientHandler for Handler {
    #[allow(deprecated)]
    fn get_info(&self) -> ClientConfig {
        // Field by field: rmcp's builder exists only with its `server` or
        // `macros` features, which the tests' rmcp has and the binary's
        // does not.
        let mut roots = rmcp::model::RootsCapabilities::default();
        roots.list_changed = Some(true);
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(roots);
        ClientConfig::new(
            capabilities,
            Implementation::new("pincer", env!("CARGO_PKG_VERSION")),
        )
    }

    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, rmcp::ErrorData> {
        let roots = match self.server.upgrade() {
            Some(server) => roots_of(&server.roots.lock()),
            None => Vec::new(),
        };
        Ok(ListRootsResult::new(roots))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        // A report for a call that already ended (or never was) is dropped.
        let route = server.progress.lock().get(&params.progress_token).cloned();
        if let Some((progress, alive)) = route {
            alive.notify_one();
            progress(vec![Display::Text(progress_text(&params))]);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let Some(server) = self.server.upgrade() else {
            return;
        };
        server.state.lock().changes += 1;
        if let Some(peer) = server.peer()
            && let Err(why) = server.list(&peer).await
        {
            tracing::warn!(server = %server.spec.name, "{why}");
            server.refreshed.notify_waiters();
        }
    }
}

/// Whether any process of a group is still there.
fn group_alive(group: i32) -> bool {
    crate::process_group::group_alive(crate::process_group::Pid::from_raw(group))
}

/// SIGKILL to a server's process group.
fn kill_group(group: i32) {
    crate::process_group::signal_group(
        crate::process_group::Pid::from_raw(group),
        crate::process_group::Signal::SIGKILL,
    );
}

/// Connects to one server and lists its tools.
async fn connect(server: &Arc<Server>) -> Result<(), String> {
    let handler = Handler {
        server: Arc::downgrade(server),
    };
    let (running, group) = match &server.spec.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
            confined,
        } => {
            crate::tools::shell::start_reaping();
            let mut cmd = match confined {
                Confined::No => {
                    let mut cmd = tokio::process::Command::new(command);
                    cmd.args(args);
                    cmd
                }
                Confined::By { program, args } => {
                    let mut cmd = tokio::process::Command::new(program);
                    cmd.args(args);
                    cmd
                }
                Confined::Unavailable(why) => return Err(why.clone()),
            };
            cmd.envs(env.iter().map(|(k, v)| (k, v)))
                .current_dir(cwd)
                .kill_on_drop(true);
            // Its own group, so that ending it ends what it started.
            crate::process_group::isolate(&mut cmd);
            let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("could not be started ({}: {e})", command.display()))?;
            let group = transport.id().and_then(|id| i32::try_from(id).ok());
            if let Some(stderr) = stderr {
                log_stderr(server.spec.name.clone(), stderr);
            }
            // A server that fails during the handshake must not be left
            // running.
            let guard = GroupGuard(group);
            let running = handler
                .serve(transport)
                .await
                .map_err(|e| format!("failed to start ({e})"))?;
            std::mem::forget(guard);
            (running, group)
        }
        Transport::Http { url, headers } => {
            // rmcp's reqwest needs a process-wide TLS provider; the first
            // HTTP server installs it (later calls find it there).
            let _ = rustls::crypto::ring::default_provider().install_default();
            let mut config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.as_str(),
                );
            let mut custom = std::collections::HashMap::new();
            for (name, value) in headers {
                if name.eq_ignore_ascii_case("authorization") {
                    let token = value.strip_prefix("Bearer ").unwrap_or(value);
                    config = config.auth_header(token.to_string());
                    continue;
                }
                let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| format!("has an invalid header name `{name}` ({e})"))?;
                let value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|e| format!("has an invalid value for header `{name}` ({e})"))?;
                custom.insert(name, value);
            }
            config = config.custom_headers(custom);
            let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
            let running = handler
                .serve(transport)
                .await
                .map_err(|e| format!("could not be reached at {url} ({e})"))?;
            (running, None)
        }
    };
    let peer = running.peer().clone();
    let stop = CancellationToken::new();
    let connection = Connection {
        peer: peer.clone(),
        stop: stop.clone(),
        group,
    };
    let shut_down = {
        let mut state = server.state.lock();
        if state.status == Status::Starting {
            state.connection = Some(connection);
            None
        } else {
            Some(connection)
        }
    };
    if let Some(connection) = shut_down {
        // The session ended while the server was starting.
        end(connection, true);
        let _ = running.cancel().await;
        return Ok(());
    }
    // The service runs until the server goes away or the session ends it.
    let watched = Arc::downgrade(server);
    let service_stop = running.cancellation_token();
    tokio::spawn(async move {
        let waiting = running.waiting();
        tokio::pin!(waiting);
        let ended = tokio::select! {
            () = stop.cancelled() => {
                service_stop.cancel();
                let _ = waiting.await;
                return;
            }
            reason = &mut waiting => reason,
        };
        if let Some(server) = watched.upgrade() {
            let why = match ended {
                Ok(reason) => format!("exited ({reason:?})"),
                Err(e) => format!("exited ({e})"),
            };
            server.fail(why);
        }
    });
    server.list(&peer).await?;
    {
        let mut state = server.state.lock();
        if state.status == Status::Starting {
            state.status = Status::Ready;
        }
    }
    listen_for_changes(server, peer);
    Ok(())
}

/// Subscribes to tool-list changes where the server announces them
/// (protocol 2026-07-28 delivers them on a `subscriptions/listen` stream;
/// older servers send them unasked, to [`Handler`]).
fn listen_for_changes(server: &Arc<Server>, peer: Peer<RoleClient>) {
    let announces = peer
        .peer_info()
        .and_then(|info| serde_json::to_value(&*info).ok())
        .is_some_and(|info| info["capabilities"]["tools"]["listChanged"] == true);
    let Some(stop) = server
        .state
        .lock()
        .connection
        .as_ref()
        .map(|c| c.stop.clone())
    else {
        return;
    };
    if !announces {
        return;
    }
    let watched = Arc::downgrade(server);
    tokio::spawn(async move {
        let filter = rmcp::model::SubscriptionFilter::builder()
            .tools_list_changed()
            .build();
        let mut subscription = tokio::select! {
            () = stop.cancelled() => return,
            listening = peer.listen(filter) => match listening {
                Ok(subscription) => subscription,
                Err(e) => {
                    tracing::debug!(error = %e, "no subscriptions/listen; relying on unsolicited list changes");
                    return;
                }
            },
        };
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                next = subscription.next() => next,
            };
            match next {
                Ok(Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))) => {
                    let Some(server) = watched.upgrade() else {
                        return;
                    };
                    server.state.lock().changes += 1;
                    if let Err(why) = server.list(&peer).await {
                        tracing::warn!(server = %server.spec.name, "{why}");
                        server.refreshed.notify_waiters();
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
    });
}

/// Kills a process group when dropped (an unfinished start).
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            kill_group(group);
        }
    }
}

/// A stdio server's stderr goes to pincer's log, never to stdout.
fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(server = %server, "{line}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn progress_extends_a_call_s_timeout_up_to_a_limit() {
        // Real time, with margins a loaded machine keeps: the reporter
        // below is a task of its own, so a pause of the whole test
        // process longer than the timeout would look like silence. (It
        // failed once in CI with a 40 ms timeout.)
        let timeout = Duration::from_millis(300);
        // Silent: the timeout ends it.
        let alive = Arc::new(tokio::sync::Notify::new());
        let silent = until_silent(std::future::pending::<()>(), timeout, &alive).await;
        assert!(silent.is_err());
        // Reporting every 20 ms: it may go on, but not past ten timeouts.
        let reporter = {
            let alive = alive.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    alive.notify_one();
                }
            })
        };
        let done = until_silent(tokio::time::sleep(timeout * 3), timeout, &alive).await;
        assert!(
            done.is_ok(),
            "a reporting call that ends in 3 timeouts was cut"
        );
        let started = std::time::Instant::now();
        let forever = until_silent(std::future::pending::<()>(), timeout, &alive).await;
        assert!(forever.is_err());
        let took = started.elapsed();
        assert!(
            took >= timeout * MAX_PROGRESS_EXTENSIONS
                && took < timeout * 2 * MAX_PROGRESS_EXTENSIONS,
            "a call that reports forever ends at ten timeouts, not after {took:?}"
        );
        reporter.abort();
    }
    use pretty_assertions::assert_eq;

    fn report(progress: f64, total: Option<f64>, message: Option<&str>) -> String {
        let mut param = ProgressNotificationParam::new(
            ProgressToken(rmcp::model::NumberOrString::Number(1)),
            progress,
        );
        param.total = total;
        param.message = message.map(String::from);
        progress_text(&param)
    }

    #[test]
    fn progress_reads_as_done_of_total_with_the_server_s_message() {
        assert_eq!(
            [
                report(2.0, Some(5.0), Some(" copying ")),
                report(1.0, Some(3.0), None),
                report(0.5, None, Some("")),
                report(7.0, Some(0.0), None),
            ],
            [
                "Progress: 2 of 5 (40%): copying",
                "Progress: 1 of 3 (33%)",
                "Progress: 0.5",
                "Progress: 7",
            ]
        );
    }

    #[test]
    #[allow(deprecated)]
    fn roots_are_file_uris_named_by_their_directory() {
        let roots = roots_of(&[PathBuf::from("/home/me/my project"), PathBuf::from("rel")]);
        let shown: Vec<(String, Option<String>)> =
            roots.into_iter().map(|r| (r.uri, r.name)).collect();
        assert_eq!(
            shown,
            vec![(
                "file:///home/me/my%20project".to_string(),
                Some("my project".to_string())
            )]
        );
    }
}
