//! The ACP server behind `pincer acp`: editors talk NDJSON JSON-RPC on
//! stdin/stdout, and this module maps their requests onto sessions and the
//! agent loop, and the loop's events onto `session/update`s.
//!
//! [`serve`] is the table of contents: one connection, each request type
//! routed to a named handler of [`Server`]. Request handlers answer at
//! once; a prompt turn runs as a task of its own, so `session/cancel` (and
//! everything else) is handled while a turn streams. A prompt for a busy
//! session is queued by the session's state machine (`session::turns`)
//! and taken in by the run (steering, follow-up). Idle sessions are
//! unloaded after `[acp] session_idle_secs` and opened again from their
//! transcript on their next use.

mod auth;
pub mod commands;
mod editor;
mod fork;
pub mod observer;
pub mod registry;
mod session;
mod system_prompt;
pub mod transport;
pub mod updates;

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    AgentAuthCapabilities, AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateRequest,
    AuthenticateResponse, CancelNotification, ClientCapabilities, CloseSessionRequest,
    CloseSessionResponse, ConfigOptionUpdate, CurrentModeUpdate, DeleteSessionRequest,
    DeleteSessionResponse, ForkSessionRequest, ForkSessionResponse, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, LogoutCapabilities, LogoutRequest, LogoutResponse,
    McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse, PromptCapabilities,
    PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionAdditionalDirectoriesCapabilities, SessionCapabilities, SessionCloseCapabilities,
    SessionDeleteCapabilities, SessionForkCapabilities, SessionId, SessionInfo,
    SessionListCapabilities, SessionNotification, SessionResumeCapabilities, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error};

use crate::config::Settings;
use crate::session::transcript;
use session::Session;
pub use session::{MODE_OPTION, MODEL_OPTION, QUEUE_OPTION, THOUGHT_OPTION};
pub use transport::Drain;

/// How the notice of a failed compaction starts (its reason follows).
pub const COMPACTION_FAILED: &str = "Compacting the conversation failed: ";

/// The `_meta` key of `initialize`'s answer on a gateway's `/acp`.
pub const GATEWAY_META: &str = "pincer/gateway";

/// Options of `pincer acp`.
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    /// `--model`: the model new sessions start with.
    pub model: Option<String>,
    /// The process's open sessions, when more than one connection serves
    /// them (`pincer acp --gateway`); else the connection has its own.
    pub registry: Option<Arc<registry::Registry>>,
    /// The client hears its sessions' updates through the registry's
    /// observer (the gateway's in-process connection): they are not also
    /// sent to it as `session/update`s.
    pub observed: bool,
    /// Served on a gateway's `/acp`: the directory its sessions work in,
    /// which `initialize` names (`_meta["pincer/gateway"].cwd`) for a
    /// client on another machine (`pincer acp --connect`).
    pub gateway_cwd: Option<PathBuf>,
    /// The most sessions this connection may have open at once (a
    /// gateway's `/acp` client: what a network peer makes pincer hold is
    /// bounded); none for an editor on stdio, or the gateway's own link.
    pub max_sessions: Option<usize>,
}

/// Serves ACP on stdin/stdout until stdin closes and every request received
/// has been answered, or until pincer is told to stop (SIGTERM, SIGINT,
/// SIGHUP: the editor quits): then every session's work, helpers
/// included, is cancelled and its commands ended before pincer exits, so
/// that nothing it started outlives it.
pub async fn serve_stdio(mut options: ServeOptions) -> Result<(), Error> {
    let registry = options
        .registry
        .get_or_insert_with(registry::Registry::new)
        .clone();
    let drain = Drain::new();
    let transport = transport::stdio(drain.clone());
    // The connection runs on a runtime worker rather than the thread that
    // waits for it, which saves a thread hand-off per message.
    let served = tokio::spawn(serve(transport, drain, options));
    tokio::select! {
        result = served => result.map_err(Error::into_internal_error)?,
        () = stop_signal() => {
            registry.stop_all().await;
            Ok(())
        }
    }
}

/// Resolves when the process is asked to stop (never where signals are
/// not read).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut hangup), Ok(mut interrupt)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
            signal(SignalKind::interrupt()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = hangup.recv() => {}
            _ = interrupt.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Routes one request type to its handler, a method of [`Server`] that
/// gets its own handle on the server.
macro_rules! route {
    ($builder:expr, $server:expr, $request:ty => $handler:ident) => {{
        let server = $server.clone();
        $builder.on_receive_request(
            async move |req: $request, responder, cx: ConnectionTo<Client>| {
                Server::$handler(server.clone(), req, responder, cx).await
            },
            agent_client_protocol::on_receive_request!(),
        )
    }};
}

/// Serves ACP over any transport (tests use in-memory pipes): one
/// connection, its requests each routed to a handler, until the client
/// goes; then the sessions it owns end.
pub async fn serve(
    transport: impl ConnectTo<Agent> + 'static,
    drain: Arc<Drain>,
    options: ServeOptions,
) -> Result<(), Error> {
    let server = Server::new(options, drain)?;
    let _sweeper = server.unload_idle_sessions();
    let agent = Agent.v1().name("pincer");
    let agent = route!(agent, server, InitializeRequest => on_initialize);
    let agent = route!(agent, server, AuthenticateRequest => on_authenticate);
    let agent = route!(agent, server, LogoutRequest => on_logout);
    let agent = route!(agent, server, NewSessionRequest => on_new_session);
    let agent = route!(agent, server, LoadSessionRequest => on_load_session);
    let agent = route!(agent, server, ResumeSessionRequest => on_resume_session);
    let agent = route!(agent, server, ForkSessionRequest => on_fork_session);
    let agent = route!(agent, server, fork::SessionRewindRequest => on_session_rewind);
    let agent = route!(agent, server, session::AsyncTaskStopRequest => on_async_task_stop);
    let agent = route!(agent, server, ListSessionsRequest => on_list_sessions);
    let agent = route!(agent, server, CloseSessionRequest => on_close_session);
    let agent = route!(agent, server, DeleteSessionRequest => on_delete_session);
    let agent = route!(agent, server, PromptRequest => on_prompt);
    let agent = route!(agent, server, SetSessionConfigOptionRequest => on_set_config_option);
    let agent = route!(agent, server, SetSessionModeRequest => on_set_mode);
    let canceller = server.clone();
    let agent = agent.on_receive_notification(
        async move |notification: CancelNotification, _cx| {
            let tag = registry::prompt_tag(notification.meta.as_ref());
            canceller.cancel(&notification.session_id.0, tag.as_deref());
            Ok(())
        },
        agent_client_protocol::on_receive_notification!(),
    );
    let result = agent.connect_to(transport).await;
    server.end_owned_sessions().await;
    result
}

/// Answers a request with a handler's result.
fn answer<T: agent_client_protocol::JsonRpcResponse>(
    responder: Responder<T>,
    result: Result<T, Error>,
) -> Result<(), Error> {
    match result {
        Ok(response) => responder.respond(response),
        Err(e) => responder.respond_with_error(e),
    }
}

/// Runs a long request (a prompt turn, a browser login) in a task of the
/// connection, so that the connection goes on serving meanwhile
/// (`session/cancel` above all).
fn answer_later<T, F>(
    cx: &ConnectionTo<Client>,
    what: &'static str,
    responder: Responder<T>,
    work: F,
) -> Result<(), Error>
where
    T: agent_client_protocol::JsonRpcResponse + Send + 'static,
    F: std::future::Future<Output = Result<T, Error>> + Send + 'static,
{
    cx.spawn(async move {
        if let Err(e) = answer(responder, work.await) {
            tracing::warn!(error = %e, "could not answer {what}");
        }
        // An error here would tear down the whole connection.
        Ok(())
    })
}

/// The request handlers: each answers its request (and for the requests
/// that open a session, tells the session it opened after the answer).
impl Server {
    async fn on_initialize(
        self: Arc<Self>,
        req: InitializeRequest,
        responder: Responder<InitializeResponse>,
        _cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        responder.respond(self.initialize(req))
    }

    /// A browser login takes minutes: the connection keeps serving.
    async fn on_authenticate(
        self: Arc<Self>,
        req: AuthenticateRequest,
        responder: Responder<AuthenticateResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        answer_later(&cx, "authenticate", responder, async move {
            self.authenticate(&req.method_id.0)
                .await
                .map(|()| AuthenticateResponse::new())
        })
    }

    async fn on_logout(
        self: Arc<Self>,
        _req: LogoutRequest,
        responder: Responder<LogoutResponse>,
        _cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        answer(responder, self.logout().map(|()| LogoutResponse::new()))
    }

    async fn on_new_session(
        self: Arc<Self>,
        req: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        // The session's commands follow its answer: pincer does not end
        // at the end of stdin in between.
        let _hold = self.drain.hold_until_written(&cx);
        // Reading the settings and creating the transcript is file work:
        // on the blocking pool, so that the streams a runtime worker
        // serves (the gateway's other sessions) do not wait for it.
        let (me, conn) = (self.clone(), cx.clone());
        let made = tokio::task::spawn_blocking(move || me.new_session(req, &conn))
            .await
            .map_err(Error::into_internal_error)?;
        match made {
            Ok(response) => {
                let id = response.session_id.clone();
                let sent = responder.respond(response);
                self.opened(&id, &cx);
                sent
            }
            Err(e) => responder.respond_with_error(e),
        }
    }

    async fn on_load_session(
        self: Arc<Self>,
        req: LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        // The session's commands follow its answer: pincer does not end
        // at the end of stdin in between.
        let _hold = self.drain.hold_until_written(&cx);
        let id = req.session_id.clone();
        match self.load_session(req, &cx).await {
            Ok(response) => {
                let sent = responder.respond(response);
                self.opened(&id, &cx);
                sent
            }
            Err(e) => responder.respond_with_error(e),
        }
    }

    async fn on_resume_session(
        self: Arc<Self>,
        req: ResumeSessionRequest,
        responder: Responder<ResumeSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        // The session's commands follow its answer: pincer does not end
        // at the end of stdin in between.
        let _hold = self.drain.hold_until_written(&cx);
        let id = req.session_id.clone();
        match self.resume_session(req, &cx).await {
            Ok(response) => {
                let sent = responder.respond(response);
                self.opened(&id, &cx);
                sent
            }
            Err(e) => responder.respond_with_error(e),
        }
    }

    async fn on_fork_session(
        self: Arc<Self>,
        req: ForkSessionRequest,
        responder: Responder<ForkSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let _hold = self.drain.hold_until_written(&cx);
        match self.fork_session(req, &cx).await {
            Ok(response) => {
                let id = response.session_id.clone();
                let sent = responder.respond(response);
                self.opened(&id, &cx);
                sent
            }
            Err(e) => responder.respond_with_error(e),
        }
    }

    /// The question about the files runs while the connection serves on.
    async fn on_session_rewind(
        self: Arc<Self>,
        req: fork::SessionRewindRequest,
        responder: Responder<fork::SessionRewindResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        answer_later(&cx, "_session/rewind", responder, async move {
            self.session_rewind(req).await
        })
    }

    /// `_session/async_task/stop` (JetBrains AIR): stops a background
    /// task of the session.
    async fn on_async_task_stop(
        self: Arc<Self>,
        req: session::AsyncTaskStopRequest,
        responder: Responder<session::AsyncTaskStopResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        answer_later(&cx, "_session/async_task/stop", responder, async move {
            let session = self.session(&req.session_id).await?;
            Ok(session::AsyncTaskStopResponse {
                stopped: session.stop_job(&req.async_task_id),
            })
        })
    }

    async fn on_list_sessions(
        self: Arc<Self>,
        req: ListSessionsRequest,
        responder: Responder<ListSessionsResponse>,
        _cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        answer(responder, self.list_sessions(req).await)
    }

    async fn on_close_session(
        self: Arc<Self>,
        req: CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
        _cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let closed = self.close_session(&req.session_id.0);
        answer(responder, closed.map(|()| CloseSessionResponse::new()))
    }

    async fn on_delete_session(
        self: Arc<Self>,
        req: DeleteSessionRequest,
        responder: Responder<DeleteSessionResponse>,
        _cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let deleted = self.delete_session(&req.session_id.0);
        answer(responder, deleted.map(|()| DeleteSessionResponse::new()))
    }

    /// A turn runs as a task of its own, so `session/cancel` is processed
    /// while it streams.
    async fn on_prompt(
        self: Arc<Self>,
        req: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let respond: session::Respond = Box::new(move |result| {
            if let Err(e) = answer(responder, result) {
                tracing::warn!(error = %e, "could not answer session/prompt");
            }
        });
        cx.spawn(async move {
            self.prompt(req, respond).await;
            // An error here would tear down the whole connection.
            Ok(())
        })
    }

    async fn on_set_config_option(
        self: Arc<Self>,
        req: SetSessionConfigOptionRequest,
        responder: Responder<SetSessionConfigOptionResponse>,
        _cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        answer(responder, self.set_config_option(req).await)
    }

    async fn on_set_mode(
        self: Arc<Self>,
        req: SetSessionModeRequest,
        responder: Responder<SetSessionModeResponse>,
        _cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        answer(responder, self.set_mode(req).await)
    }
}

impl Server {
    fn new(options: ServeOptions, drain: Arc<Drain>) -> Result<Arc<Self>, Error> {
        let registry = options.registry.clone().unwrap_or_default();
        let connection = NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if options.observed {
            registry.observed_by(connection);
        }
        Ok(Arc::new(Server {
            options,
            registry,
            connection,
            drain,
            http: crate::llm::http_client().map_err(Error::into_internal_error)?,
            client: Mutex::new(ClientCapabilities::default()),
            session_opened: Arc::default(),
            opening: Mutex::new(0),
        }))
    }

    /// A place for one more session of this connection, or the refusal
    /// when it has [`ServeOptions::max_sessions`] open or being opened.
    fn place(&self) -> Result<Place<'_>, Error> {
        let Some(max) = self.options.max_sessions else {
            return Ok(Place(None));
        };
        let sessions = self.registry.sessions.lock();
        let mut opening = self.opening.lock();
        let open = sessions
            .values()
            .filter(|s| s.owned_by(self.connection))
            .count();
        if open + *opening >= max {
            let message = format!(
                "this connection has {max} sessions open, the most it may have; close one (`session/close`) before opening another"
            );
            return Err(Error::new(Error::invalid_request().code, message.clone())
                .data(serde_json::json!({ "message": message })));
        }
        *opening += 1;
        Ok(Place(Some(&self.opening)))
    }

    /// The client went away: the sessions it owns end here; those of the
    /// process's other connections stay open.
    async fn end_owned_sessions(&self) {
        let open: Vec<Arc<Session>> = {
            let mut sessions = self.registry.sessions.lock();
            let owned: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.owned_by(self.connection))
                .map(|(id, _)| id.clone())
                .collect();
            owned.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        for id in self.registry.forget_unloaded_of(self.connection) {
            self.registry.tell(registry::Observed::Closed {
                session: SessionId::new(id),
            });
        }
        for session in open {
            session.cancel();
            session.stop_background();
            self.registry.tell(registry::Observed::Closed {
                session: session.id().clone(),
            });
            session.shutdown_mcp().await;
            session
                .lifecycle_hooks(crate::agent::hooks::Event::SessionEnd)
                .await;
        }
    }
}

/// Numbers the connections of the process: a session's owner is one.
static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

struct Server {
    options: ServeOptions,
    /// This connection's number (see [`session::Owner`]).
    connection: u64,
    drain: Arc<Drain>,
    http: reqwest::Client,
    client: Mutex<ClientCapabilities>,
    registry: Arc<registry::Registry>,
    /// Wakes the idle sweeper when a session opens.
    session_opened: Arc<tokio::sync::Notify>,
    /// Sessions being opened now, each holding a place under
    /// [`ServeOptions::max_sessions`] until it is in the table.
    opening: Mutex<usize>,
}

/// A place under [`ServeOptions::max_sessions`] for a session being
/// opened: given back when dropped (the session is in the table by then,
/// or was not made).
struct Place<'a>(Option<&'a Mutex<usize>>);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if let Some(opening) = self.0 {
            *opening.lock() -= 1;
        }
    }
}

/// A task that ends when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The auth-required error (-32000) with the sentence that fixes it.
fn auth_required(hint: String) -> Error {
    Error::new(Error::auth_required().code, hint.clone())
        .data(serde_json::json!({ "message": hint }))
}

fn invalid_params(message: impl Into<String>) -> Error {
    let message = message.into();
    Error::invalid_params().data(serde_json::json!({ "message": message }))
}

/// The request's `systemPrompt` as the session's instructions, or the
/// `-32602` that refuses the request before any session is touched.
fn checked_client_prompt(
    prompt: Option<&agent_client_protocol::v1::schema::SystemPrompt>,
) -> Result<Option<crate::context::ClientPrompt>, Error> {
    system_prompt::client_prompt(prompt).map_err(|e| invalid_params(e.to_string()))
}

impl Server {
    fn initialize(&self, req: InitializeRequest) -> InitializeResponse {
        *self.client.lock() = req.client_capabilities.clone();
        // Zed's older way of saying it can run terminal logins.
        let legacy_terminal = req
            .client_capabilities
            .meta
            .as_ref()
            .and_then(|meta| meta.get("terminal-auth"))
            .and_then(serde_json::Value::as_bool)
            == Some(true);
        // pincer speaks version 1; a client asking for more gets 1 and
        // decides, per the negotiation rules.
        InitializeResponse::new(agent_client_protocol::schema::ProtocolVersion::V1)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(true)
                    .prompt_capabilities(
                        PromptCapabilities::new()
                            .image(true)
                            .audio(false)
                            .embedded_context(true),
                    )
                    .mcp_capabilities(McpCapabilities::new().http(true).sse(false))
                    .session_capabilities(
                        SessionCapabilities::new()
                            .additional_directories(SessionAdditionalDirectoriesCapabilities::new())
                            .list(SessionListCapabilities::new())
                            .delete(SessionDeleteCapabilities::new())
                            .resume(SessionResumeCapabilities::new())
                            .close(SessionCloseCapabilities::new())
                            .fork(SessionForkCapabilities::new())
                            .system_prompt(system_prompt::capabilities()),
                    )
                    .auth(AgentAuthCapabilities::new().logout(LogoutCapabilities::new())),
            )
            .auth_methods({
                let mut methods =
                    auth_methods(req.client_capabilities.auth.terminal, legacy_terminal);
                // The browser logins go before the methods that only check
                // for a key: they are the ones that do something.
                let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
                let settings = Settings::load_from_process(&cwd).ok();
                let at = methods
                    .iter()
                    .position(|m| matches!(m, AuthMethod::Agent(_)))
                    .unwrap_or(methods.len());
                methods.splice(at..at, auth::oauth_methods(settings.as_ref()));
                methods
            })
            .agent_info(Implementation::new("pincer", env!("CARGO_PKG_VERSION")).title("pincer"))
            .meta({
                let mut meta =
                    fork::air_meta(&req.client_capabilities).and_then(|m| m.as_object().cloned());
                if let Some(cwd) = &self.options.gateway_cwd {
                    meta.get_or_insert_default()
                        .insert(GATEWAY_META.to_string(), serde_json::json!({"cwd": cwd}));
                }
                meta
            })
    }

    fn settings(&self, cwd: &std::path::Path) -> Result<Settings, Error> {
        Settings::load_from_process(cwd).map_err(|e| invalid_params(e.to_string()))
    }

    /// Whether a session without a usable model should open anyway: the
    /// project, once trusted, would give it one (the first prompt asks).
    fn trust_would_supply(&self, settings: &Settings, cwd: &std::path::Path) -> bool {
        settings.project.should_ask()
            && Settings::load_from_process_with(cwd, true).is_ok_and(|trusted| {
                trusted
                    .default_model(self.options.model.as_deref())
                    .is_ok_and(|m| trusted.has_credentials(&m))
            })
    }

    /// `authenticate`: whether the method's provider has a credential now
    /// (its environment variable, a stored profile, another tool's login).
    /// A `<provider>-oauth` method runs the browser login when there is
    /// none ([`auth::authenticate`]); the others leave logins to a terminal
    /// (`pincer login`) and check what they left.
    async fn authenticate(&self, method: &str) -> Result<(), Error> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let settings = self.settings(&cwd)?;
        if let Some(provider) = auth::oauth_method_provider(&settings, method) {
            return auth::authenticate(&settings, &self.http, &provider).await;
        }
        let model = match method_provider(method) {
            Some(provider) => settings
                .catalog
                .provider(provider)
                .and_then(|p| p.models.first().cloned())
                .ok_or_else(|| invalid_params(format!("pincer has no provider `{provider}`")))?,
            None if method == "local-model" => settings
                .default_model(self.options.model.as_deref())
                .map_err(|e| invalid_params(e.to_string()))?,
            None => {
                return Err(invalid_params(format!(
                    "unknown authentication method `{method}`"
                )));
            }
        };
        if settings.has_credentials(&model) {
            Ok(())
        } else {
            Err(auth_required(settings.credential_hint(&model)))
        }
    }

    /// `logout`: forgets the credentials pincer stored (its auth profiles).
    /// Keys from the environment are the editor's settings, not pincer's
    /// to remove.
    fn logout(&self) -> Result<(), Error> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let settings = self.settings(&cwd)?;
        let store = crate::auth::Store::new(crate::auth::profiles_path(
            &settings.paths.config_dir,
            crate::auth::DEFAULT_AGENT,
        ));
        store
            .modify(|profiles| {
                profiles.profiles.clear();
                profiles.usage_stats.clear();
            })
            .map_err(|e| Error::new(Error::internal_error().code, e.to_string()))
    }

    /// This connection as the owner of the sessions it opens.
    fn owner(&self, cx: &ConnectionTo<Client>) -> session::Owner {
        session::Owner {
            connection: self.connection,
            cx: cx.clone(),
            client: self.client.lock().clone(),
            drain: self.drain.clone(),
        }
    }

    fn new_session(
        &self,
        req: NewSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<NewSessionResponse, Error> {
        let client_prompt = checked_client_prompt(req.system_prompt.as_ref())?;
        let _place = self.place()?;
        crate::session::check_cwd(&req.cwd).map_err(|e| invalid_params(e.to_string()))?;
        let settings = self.settings(&req.cwd)?;
        let model = settings
            .default_model(self.options.model.as_deref())
            .map_err(|e| invalid_params(e.to_string()))?;
        if !settings.has_credentials(&model) && !self.trust_would_supply(&settings, &req.cwd) {
            return Err(auth_required(settings.credential_hint(&model)));
        }
        let id = format!("sess_{}", uuid::Uuid::new_v4().simple());
        if let Some(dir) = req.additional_directories.iter().find(|d| !d.is_absolute()) {
            return Err(invalid_params(format!(
                "additionalDirectories must be absolute paths, got {}",
                dir.display()
            )));
        }
        let path = crate::session::transcript_path(&settings.paths.data_dir, &req.cwd, &id);
        let header = transcript::Header::new(id.clone(), req.cwd.clone(), None);
        let writer = transcript::Writer::create(&path, &header)
            .map_err(|e| Error::new(Error::internal_error().code, e.to_string()))?;
        let mcp = mcp_specs(req.mcp_servers, &req.cwd, &settings);
        let session = Arc::new(Session::new(
            id.clone(),
            req.cwd,
            req.additional_directories,
            settings,
            model,
            writer,
            mcp,
            self.owner(cx),
            self.registry.bus.clone(),
        ));
        if let Some(prompt) = client_prompt {
            session.set_client_prompt(prompt);
        }
        let options = session.config_options();
        self.registry
            .sessions
            .lock()
            .insert(id.clone(), session.clone());
        let modes = session.mode_state();
        Ok(NewSessionResponse::new(id)
            .config_options(options)
            .modes(modes))
    }

    /// `session/load`: restores a session from its transcript and replays
    /// its history to the editor before answering.
    async fn load_session(
        &self,
        req: LoadSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse, Error> {
        let client_prompt = checked_client_prompt(req.system_prompt.as_ref())?;
        let session = self
            .restore_session(
                &req.session_id,
                req.cwd,
                req.additional_directories,
                req.mcp_servers,
                client_prompt,
                true,
                cx,
            )
            .await?;
        Ok(LoadSessionResponse::new()
            .config_options(session.config_options())
            .modes(session.mode_state()))
    }

    /// `session/resume`: the same restoration, without the replay.
    async fn resume_session(
        &self,
        req: ResumeSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<ResumeSessionResponse, Error> {
        let client_prompt = checked_client_prompt(req.system_prompt.as_ref())?;
        let session = self
            .restore_session(
                &req.session_id,
                req.cwd,
                req.additional_directories,
                req.mcp_servers,
                client_prompt,
                false,
                cx,
            )
            .await?;
        Ok(ResumeSessionResponse::new()
            .config_options(session.config_options())
            .modes(session.mode_state()))
    }

    /// Restores a stored session; with `replay`, its history is sent to the
    /// client first (see [`Server::send_replay`]), so the answer goes out
    /// after it. Reading and serialising happen on the blocking pool, off
    /// the connection's thread. A `client_prompt` (the request's
    /// `systemPrompt`) replaces the one stored with the session; without
    /// one, the stored one holds.
    ///
    /// A session has one object, the one that writes its transcript, for
    /// as long as it is open in the process:
    /// - open from this connection, it is restored anew from its
    ///   transcript (the open one is cancelled and replaced), as an editor
    ///   that reloads expects;
    /// - open from another connection of the process (`pincer acp
    ///   --gateway`), the open session answers: its transcript is replayed
    ///   to this connection as usual, the request's cwd, directories and
    ///   MCP servers are ignored (the session keeps its own), and the
    ///   session now belongs to this connection (the last to open a
    ///   session owns it: an editor opening a session a phone started is
    ///   asked from then on). A run already going keeps talking to the
    ///   previous owner until it ends.
    #[allow(clippy::too_many_arguments)]
    async fn restore_session(
        &self,
        session_id: &SessionId,
        cwd: PathBuf,
        additional: Vec<PathBuf>,
        mcp_servers: Vec<McpServer>,
        client_prompt: Option<crate::context::ClientPrompt>,
        replay: bool,
        cx: &ConnectionTo<Client>,
    ) -> Result<Arc<Session>, Error> {
        let id = session_id.0.to_string();
        // One this connection has open already takes no new place.
        let mine = self
            .registry
            .sessions
            .lock()
            .get(&id)
            .is_some_and(|s| s.owned_by(self.connection));
        let _place = if mine { Place(None) } else { self.place()? };
        // A helper still running writes its transcript: a second session
        // object on it would write there too. Its parent's client sees it
        // live; it opens once it has finished.
        if self.running_helper(&id).is_some() {
            return Err(invalid_params(format!(
                "session {id} is a helper that is still running; open it once it has finished, or follow it through the session that started it"
            )));
        }
        crate::session::check_cwd(&cwd).map_err(|e| invalid_params(e.to_string()))?;
        let settings = self.settings(&cwd)?;
        let open = self.registry.sessions.lock().get(&id).cloned();
        // Unloaded while idle: it is restored here like any stored one.
        self.registry.take_unloaded(&id);
        let internal =
            |e: &dyn std::fmt::Display| Error::new(Error::internal_error().code, e.to_string());
        let options = {
            let client = self.client.lock();
            updates::ReplayOptions {
                compaction: client
                    .session
                    .as_ref()
                    .is_some_and(|s| s.compaction.is_some()),
                plan_operations: client.plan.is_some(),
            }
        };
        let mut found = crate::session::find(&settings.paths.data_dir, &id);
        // Not here: a session of the cluster (`[cluster] store`, which
        // only the user's own config names) is copied here first.
        if found.is_none()
            && open.is_none()
            && let Some(url) = settings.config.cluster.store.as_deref()
        {
            found = crate::session::stored::copy_from_store(url, &settings.paths.data_dir, &id)
                .await
                .map_err(|e| {
                    Error::new(
                        Error::internal_error().code,
                        format!("session {id} is not here, and the cluster's store: {e}"),
                    )
                })?;
        }
        let Some(path) = found else {
            // A session this process opened whose transcript is not on
            // disk (a never-prompted one swept as abandoned; its next write
            // brings it back) is still the same, empty session, with
            // nothing to replay.
            if let Some(open) = open
                && !open.is_written()
            {
                if let Some(prompt) = client_prompt {
                    open.set_client_prompt(prompt);
                }
                open.set_owner(self.owner(cx));
                return Ok(open);
            }
            return Err(agent_client_protocol::v1::schema::Error::session_not_found(id).into());
        };
        if let Some(open) = open.filter(|s| !s.owned_by(self.connection)) {
            if let Some(prompt) = client_prompt {
                open.set_client_prompt(prompt);
            }
            if replay {
                let replay_id = session_id.clone();
                let blocks = tokio::task::spawn_blocking(move || {
                    let loaded = transcript::load(&path)?;
                    let restored = crate::session::restore(loaded.entries);
                    Ok::<_, transcript::TranscriptError>(updates::replay_lines_with(
                        &replay_id, &restored, options,
                    ))
                })
                .await
                .map_err(|e| internal(&e))?
                .map_err(|e| internal(&e))?;
                self.send_replay(blocks, cx).await;
                self.replay_helpers(session_id, &settings, options, cx)
                    .await;
            }
            open.set_owner(self.owner(cx));
            return Ok(open);
        }
        let model = settings
            .default_model(self.options.model.as_deref())
            .map_err(|e| invalid_params(e.to_string()))?;
        if !settings.has_credentials(&model) && !self.trust_would_supply(&settings, &cwd) {
            return Err(auth_required(settings.credential_hint(&model)));
        }
        let replay_id = replay.then(|| session_id.clone());
        // Straight to stdout as it is serialised, unless a session open
        // here is being replaced: its last updates go out before the
        // replay, which then waits for it to be cancelled below.
        let stream_to = self
            .drain
            .line_sender()
            .filter(|_| !self.registry.sessions.lock().contains_key(&id));
        let started = std::time::Instant::now();
        let (writer, restored, blocks) = tokio::task::spawn_blocking(move || {
            let loaded = transcript::load(&path)?;
            let read = started.elapsed();
            let writer = transcript::Writer::append_to(&path, &loaded)?;
            let restored = crate::session::restore(loaded.entries);
            let ready = started.elapsed();
            let blocks = match (replay_id, stream_to) {
                (Some(id), Some(stdout)) => {
                    updates::stream_replay(&id, &restored, options, &mut |mut block| {
                        if block.ends_with('\n') {
                            block.pop();
                        }
                        stdout.blocking_send(block).is_ok()
                    });
                    Vec::new()
                }
                (Some(id), None) => updates::replay_lines_with(&id, &restored, options),
                (None, _) => Vec::new(),
            };
            tracing::debug!(
                read_ms = read.as_secs_f64() * 1e3,
                restored_ms = ready.as_secs_f64() * 1e3,
                replayed_ms = started.elapsed().as_secs_f64() * 1e3,
                "session read, restored and replayed"
            );
            Ok::<_, transcript::TranscriptError>((writer, restored, blocks))
        })
        .await
        .map_err(|e| internal(&e))?
        .map_err(|e| internal(&e))?;
        if let Some(old) = self.registry.sessions.lock().remove(&id) {
            old.cancel();
            // The reopened session starts its own servers.
            tokio::spawn(async move { old.shutdown_mcp().await });
        }
        let mcp = mcp_specs(mcp_servers, &cwd, &settings);
        let session = Arc::new(Session::new(
            id.clone(),
            cwd,
            additional,
            settings,
            model,
            writer,
            mcp,
            self.owner(cx),
            self.registry.bus.clone(),
        ));
        let unfinished = restored.unfinished_restore.clone();
        session.restore(restored).map_err(invalid_params)?;
        if let Some(prompt) = client_prompt {
            session.set_client_prompt(prompt);
        }
        self.send_replay(blocks, cx).await;
        if replay {
            self.replay_helpers(session_id, session.settings_now().as_ref(), options, cx)
                .await;
        }
        session.finish_unfinished_restore(unfinished);
        self.registry.sessions.lock().insert(id, session.clone());
        tracing::debug!(
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "session restored"
        );
        Ok(session)
    }

    /// After a session's replay, to a client that shows helpers: each
    /// helper the session started, announced on it (`subagent_update`,
    /// idle, or with no state if pincer was killed while it ran), then
    /// its own history under its id.
    async fn replay_helpers(
        &self,
        parent: &SessionId,
        settings: &Settings,
        options: updates::ReplayOptions,
        cx: &ConnectionTo<Client>,
    ) {
        if self.client.lock().subagents.is_none() {
            return;
        }
        let data_dir = settings.paths.data_dir.clone();
        let parent = parent.clone();
        let blocks = tokio::task::spawn_blocking(move || {
            use agent_client_protocol::v1::schema::{IdleStateUpdate, StateUpdate, SubagentUpdate};
            let mut helpers: Vec<crate::session::Summary> = crate::session::list(&data_dir, None)
                .into_iter()
                .filter(|s| s.spawned_by.as_deref() == Some(parent.0.as_ref()))
                .collect();
            helpers.reverse();
            let mut blocks = Vec::new();
            for helper in helpers {
                let Ok(loaded) = transcript::load(&helper.path) else {
                    continue;
                };
                let id = SessionId::new(helper.id.clone());
                let mut announce = SubagentUpdate::new(id.clone()).description(format!(
                    "Helper `{}`",
                    helper.agent.as_deref().unwrap_or("general-purpose")
                ));
                if let Some(title) = &helper.title {
                    announce = announce.title(title.clone());
                }
                if !helper.interrupted {
                    announce = announce.state(StateUpdate::Idle(IdleStateUpdate::new()));
                }
                let line = serde_json::json!({
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": SessionNotification::new(
                        parent.clone(),
                        SessionUpdate::SubagentUpdate(announce),
                    ),
                });
                blocks.push(format!("{line}\n"));
                let restored = crate::session::restore(loaded.entries);
                blocks.extend(updates::replay_lines_with(&id, &restored, options));
            }
            blocks
        })
        .await
        .unwrap_or_default();
        self.send_replay(blocks, cx).await;
    }

    /// Sends a replay (blocks of `session/update` lines) to this
    /// connection: straight to stdout in blocks (see
    /// [`Drain::send_lines`]); a transport without a line writer (the
    /// gateway's in-process connection) gets them one by one through the
    /// connection.
    async fn send_replay(&self, blocks: Vec<String>, cx: &ConnectionTo<Client>) {
        if self.drain.writes_lines() {
            for block in blocks {
                if !self.drain.send_lines(block).await {
                    break;
                }
            }
            return;
        }
        #[derive(serde::Deserialize)]
        struct Line {
            params: SessionNotification,
        }
        for line in blocks.iter().flat_map(|block| block.lines()) {
            match serde_json::from_str::<Line>(line) {
                Ok(line) => {
                    if cx.send_notification(line.params).is_err() {
                        break;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "a replayed update does not read back"),
            }
        }
    }

    /// `session/list`: stored sessions, newest first, a page at a time;
    /// with a cluster's store in the user's config (`[cluster] store`),
    /// then the cluster's sessions that are not here (`session/load`
    /// copies one here).
    async fn list_sessions(&self, req: ListSessionsRequest) -> Result<ListSessionsResponse, Error> {
        let cwd = req
            .cwd
            .clone()
            .unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
        let settings = self.settings(&cwd)?;
        let start = match &req.cursor {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| invalid_params(format!("invalid cursor `{cursor}`")))?,
        };
        // Helpers are reached through the session that started them (its
        // replay announces them), not listed beside it.
        let mut here = crate::session::list(&settings.paths.data_dir, req.cwd.as_deref());
        here.retain(|s| s.spawned_by.is_none());
        let mut all: Vec<SessionInfo> = here
            .iter()
            .map(|s| {
                SessionInfo::new(s.id.clone(), s.cwd.clone())
                    .title(s.title.clone())
                    .updated_at(s.updated_at.clone())
            })
            .collect();
        if let Some(url) = settings.config.cluster.store.as_deref() {
            match cluster_sessions(url, &settings.paths.data_dir, req.cwd.as_deref()).await {
                Ok(elsewhere) => all.extend(elsewhere),
                // The sessions here are listed still.
                Err(e) => tracing::warn!("cannot list the cluster's sessions: {e}"),
            }
        }
        let page: Vec<SessionInfo> = all.iter().skip(start).take(LIST_PAGE).cloned().collect();
        let next = start + page.len();
        Ok(ListSessionsResponse::new(page)
            .next_cursor((next < all.len()).then(|| next.to_string())))
    }

    /// `session/close`: stops the session's work and frees it.
    fn close_session(&self, id: &str) -> Result<(), Error> {
        let session = self.registry.sessions.lock().remove(id);
        match session {
            Some(session) => {
                session.cancel();
                session.stop_background();
                self.closed(session);
                Ok(())
            }
            // Unloaded while idle: nothing runs, nothing to end.
            None if self.registry.take_unloaded(id).is_some() => {
                self.registry.tell(registry::Observed::Closed {
                    session: SessionId::new(id.to_string()),
                });
                Ok(())
            }
            None => Err(agent_client_protocol::v1::schema::Error::session_not_found(
                id.to_string(),
            )
            .into()),
        }
    }

    /// `session/delete`: closes the session if it is open and removes its
    /// transcript.
    fn delete_session(&self, id: &str) -> Result<(), Error> {
        if self.registry.take_unloaded(id).is_some() {
            self.registry.tell(registry::Observed::Closed {
                session: SessionId::new(id.to_string()),
            });
        }
        if let Some(session) = self.registry.sessions.lock().remove(id) {
            session.cancel();
            session.stop_background();
            let written = session.is_written();
            self.closed(session);
            // No transcript on disk: nothing to remove.
            if !written {
                return Ok(());
            }
        }
        let cwd = std::env::current_dir().unwrap_or_default();
        let settings = self.settings(&cwd)?;
        let path = crate::session::find(&settings.paths.data_dir, id).ok_or_else(|| {
            Error::from(agent_client_protocol::v1::schema::Error::session_not_found(
                id.to_string(),
            ))
        })?;
        crate::session::delete(&path).map_err(|e| {
            Error::new(
                Error::internal_error().code,
                format!("cannot delete {}: {e}", path.display()),
            )
        })
    }

    /// Open session `id`, opened again first if it was unloaded while
    /// idle; its idle time starts again.
    async fn session(&self, id: &str) -> Result<Arc<Session>, Error> {
        let open = self.registry.sessions.lock().get(id).cloned();
        let session = match open {
            Some(session) => session,
            None => self.reopen(id).await?,
        };
        session.touch();
        Ok(session)
    }

    /// Opens again a session unloaded while idle, as it was: same owner,
    /// directories and editor MCP servers, its history and settings from
    /// its transcript. Nothing is replayed: its client still shows it.
    async fn reopen(&self, id: &str) -> Result<Arc<Session>, Error> {
        let not_found = || {
            Error::from(agent_client_protocol::v1::schema::Error::session_not_found(
                id.to_string(),
            ))
        };
        let _one = self.registry.reopening.lock().await;
        // Another request may have opened it while this one waited.
        if let Some(open) = self.registry.sessions.lock().get(id).cloned() {
            return Ok(open);
        }
        // Unloaded, it gave back its place; opened again, it takes one.
        let _place = self.place()?;
        let reopen = self.registry.take_unloaded(id).ok_or_else(not_found)?;
        let settings = self.settings(&reopen.cwd)?;
        let path = crate::session::find(&settings.paths.data_dir, id).ok_or_else(not_found)?;
        let internal =
            |e: &dyn std::fmt::Display| Error::new(Error::internal_error().code, e.to_string());
        let (writer, restored) = tokio::task::spawn_blocking(move || {
            let loaded = transcript::load(&path)?;
            let writer = transcript::Writer::append_to(&path, &loaded)?;
            Ok::<_, transcript::TranscriptError>((writer, crate::session::restore(loaded.entries)))
        })
        .await
        .map_err(|e| internal(&e))?
        .map_err(|e| internal(&e))?;
        let model = settings
            .default_model(self.options.model.as_deref())
            .map_err(|e| invalid_params(e.to_string()))?;
        let owner = reopen.owner.clone();
        let session = Arc::new(Session::new(
            id.to_string(),
            reopen.cwd,
            reopen.additional,
            settings,
            model,
            writer,
            reopen.editor_mcp,
            reopen.owner,
            self.registry.bus.clone(),
        ));
        session.restore(restored).map_err(invalid_params)?;
        self.registry
            .sessions
            .lock()
            .insert(id.to_string(), session.clone());
        session.report_mcp(&owner.cx, &owner.client);
        tracing::debug!(session = id, "opened an unloaded session again");
        Ok(session)
    }

    /// Unloads, every little while, this connection's sessions idle for
    /// their `[acp] session_idle_secs`, for as long as the connection is
    /// served. The gateway's connection unloads its own sessions (see
    /// `gateway::hub`), so it has none of this.
    fn unload_idle_sessions(self: &Arc<Self>) -> Option<AbortOnDrop> {
        if self.options.observed {
            return None;
        }
        let server = Arc::downgrade(self);
        Some(AbortOnDrop(tokio::spawn(async move {
            loop {
                let Some(me) = server.upgrade() else { return };
                let limit = me
                    .registry
                    .sessions
                    .lock()
                    .values()
                    .filter(|s| s.owned_by(me.connection))
                    .map(|s| s.idle_limit())
                    .min();
                let Some(limit) = limit else {
                    // Nothing to unload until a session opens.
                    let opened = me.session_opened.clone();
                    drop(me);
                    opened.notified().await;
                    continue;
                };
                drop(me);
                let period = (limit / 4).clamp(
                    std::time::Duration::from_millis(250),
                    std::time::Duration::from_secs(60),
                );
                tokio::time::sleep(period).await;
                let Some(me) = server.upgrade() else { return };
                let unloaded = me.registry.unload_idle_of(me.connection);
                if unloaded > 0 {
                    tracing::debug!(unloaded, "unloaded idle sessions");
                }
            }
        })))
    }

    /// After the answer that opened a session: tells the editor which
    /// slash commands it has, and runs the `session_start` hooks.
    fn opened(&self, id: &SessionId, cx: &ConnectionTo<Client>) {
        self.registry.tell(registry::Observed::Opened {
            session: id.clone(),
        });
        self.session_opened.notify_one();
        let open = self.registry.sessions.lock().get(id.0.as_ref()).cloned();
        if let Some(session) = open {
            let client = self.client.lock().clone();
            session.announce_commands(cx, &client);
            session.report_mcp(cx, &client);
            let spawned = cx.spawn(async move {
                session.session_started().await;
                Ok(())
            });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "could not run the session_start hooks");
            }
        }
    }

    /// Tells the observer that a session closed, and ends it.
    fn closed(&self, session: Arc<Session>) {
        self.registry.tell(registry::Observed::Closed {
            session: session.id().clone(),
        });
        Self::ended(session);
    }

    /// Ends the MCP servers and runs the `session_end` hooks of a session
    /// that closed.
    fn ended(session: Arc<Session>) {
        tokio::spawn(async move {
            session.shutdown_mcp().await;
            session
                .lifecycle_hooks(crate::agent::hooks::Event::SessionEnd)
                .await;
        });
    }

    /// `session/prompt`, from this connection into any open session of
    /// the process: the session's owner does the asking and sees the
    /// updates, the answer comes back here.
    async fn prompt(&self, req: PromptRequest, respond: session::Respond) {
        let tag = registry::prompt_tag(req.meta.as_ref());
        let taken = match registry::prompt_queue_mode(req.meta.as_ref()) {
            Ok(mode) => self.session(&req.session_id.0).await.map(|s| (s, mode)),
            Err(e) => Err(invalid_params(e)),
        };
        let (session, mode) = match taken {
            Ok(taken) => taken,
            Err(error) => {
                self.registry.tell(registry::Observed::PromptEnded {
                    session: req.session_id.clone(),
                    tag,
                    result: session::ended(&Err(error.clone())),
                });
                respond(Err(error));
                return;
            }
        };
        let prompted = session::Prompted {
            blocks: req.prompt,
            tag,
            mode,
            from: self.connection,
        };
        session.prompt(prompted, &self.http, respond).await;
    }

    async fn set_config_option(
        &self,
        req: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, Error> {
        let session = self.session(&req.session_id.0).await?;
        let Some(value) = req.value.as_value_id() else {
            return Err(invalid_params(format!(
                "{} takes one of its listed values, not a boolean",
                req.config_id.0
            )));
        };
        session
            .set_config_option(&req.config_id.0, &value.0)
            .map_err(invalid_params)?;
        let options = session.config_options();
        // The owner shows the session's options, whoever changed them.
        if req.config_id.0.as_ref() == session::MODE_OPTION {
            session.notify_owner(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                session.mode_state().current_mode_id,
            )));
        }
        session.notify_owner(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
            options.clone(),
        )));
        Ok(SetSessionConfigOptionResponse::new(options))
    }

    /// `session/set_mode`, the older way to pick a mode; kept in step with
    /// the `mode` config option.
    async fn set_mode(&self, req: SetSessionModeRequest) -> Result<SetSessionModeResponse, Error> {
        let session = self.session(&req.session_id.0).await?;
        session
            .set_config_option(session::MODE_OPTION, &req.mode_id.0)
            .map_err(invalid_params)?;
        session.notify_owner(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
            req.mode_id.clone(),
        )));
        session.notify_owner(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
            session.config_options(),
        )));
        Ok(SetSessionModeResponse::new())
    }

    /// The running helper `id` of an open session.
    fn running_helper(&self, id: &str) -> Option<Arc<Session>> {
        self.registry.running_helper(id)
    }

    /// `session/cancel`: of an open session, or of a running helper (which
    /// ends only that helper).
    /// `session/cancel`: everything of the session, or with the gateway's
    /// `tag` (`_meta["pincer/gateway"]`), that one prompt.
    fn cancel(&self, id: &str, tag: Option<&str>) {
        let open = self.registry.sessions.lock().get(id).cloned();
        let session = open.or_else(|| self.running_helper(id));
        match (session, tag) {
            (Some(session), Some(tag)) => session.cancel_tagged(tag),
            (Some(session), None) => session.cancel(),
            (None, _) => tracing::debug!(session = id, "cancel for an unknown session"),
        }
    }
}

/// Sessions per `session/list` page.
const LIST_PAGE: usize = 50;

/// The cluster's most recent sessions `session/list` adds, at most.
const CLUSTER_LIST: i64 = 500;

/// The sessions of the cluster's store at `url` that are not in
/// `data_dir` (of `cwd` when given), newest first, each titled with the
/// key its clients name it by, and its key, replica and run going in
/// `_meta["pincer/cluster"]`.
async fn cluster_sessions(
    url: &str,
    data_dir: &std::path::Path,
    cwd: Option<&std::path::Path>,
) -> Result<Vec<SessionInfo>, String> {
    let store = crate::cluster::postgres::Store::reader(url).await?;
    let listed = store.listed(CLUSTER_LIST).await?;
    Ok(listed
        .into_iter()
        .filter(|l| crate::session::is_file_id(&l.session_id))
        .filter(|l| crate::session::find(data_dir, &l.session_id).is_none())
        .map(|l| {
            let cwd = l
                .header
                .as_deref()
                .and_then(|line| serde_json::from_str::<transcript::Header>(line).ok())
                .map(|header| header.cwd);
            (l, cwd)
        })
        .filter(|(_, found)| cwd.is_none_or(|cwd| found.as_deref() == Some(cwd)))
        .map(|(l, cwd)| {
            let updated = jiff::Timestamp::from_millisecond(l.updated_at)
                .map(|t| t.to_string())
                .unwrap_or_default();
            let mut meta = serde_json::Map::new();
            meta.insert(
                "pincer/cluster".to_string(),
                serde_json::json!({"key": l.key, "replica": l.replica, "running": l.running}),
            );
            SessionInfo::new(l.session_id, cwd.unwrap_or_default())
                .title(l.key)
                .updated_at(updated)
                .meta(meta)
        })
        .collect())
}

/// The editor's MCP servers as pincer starts them, with the timeouts the
/// config gives them. SSE servers (deprecated, and not advertised) are
/// left out.
fn mcp_specs(
    servers: Vec<McpServer>,
    cwd: &std::path::Path,
    settings: &Settings,
) -> Vec<crate::mcp::ServerSpec> {
    servers
        .into_iter()
        .filter_map(|server| {
            let (name, transport) = match server {
                McpServer::Stdio(s) => (
                    s.name,
                    crate::mcp::Transport::Stdio {
                        command: s.command,
                        args: s.args,
                        env: s.env.into_iter().map(|e| (e.name, e.value)).collect(),
                        cwd: cwd.to_path_buf(),
                        confined: crate::mcp::Confined::No,
                    },
                ),
                McpServer::Http(s) => (
                    s.name,
                    crate::mcp::Transport::Http {
                        url: s.url,
                        headers: s.headers.into_iter().map(|h| (h.name, h.value)).collect(),
                    },
                ),
                other => {
                    tracing::warn!(server = ?other, "ignoring an MCP server with a transport pincer does not support");
                    return None;
                }
            };
            Some(crate::mcp::ServerSpec {
                call_timeout: settings.config.mcp.call_timeout(&name),
                name,
                transport,
                origin: crate::mcp::Origin::Editor,
            })
        })
        .collect()
}

/// The provider an authentication method is about.
fn method_provider(method: &str) -> Option<&'static str> {
    [
        ("anthropic", "anthropic"),
        ("openai", "openai"),
        ("gemini", "google"),
        ("google", "google"),
    ]
    .into_iter()
    .find(|(prefix, _)| method.starts_with(&format!("{prefix}-")))
    .map(|(_, provider)| provider)
}

/// `_meta["terminal-auth"]` for clients of the older terminal-login
/// extension: how to start the login themselves.
fn legacy_terminal_meta(label: &str, args: &[String]) -> agent_client_protocol::v1::schema::Meta {
    let command = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "pincer".to_string());
    let mut meta = agent_client_protocol::v1::schema::Meta::new();
    meta.insert(
        "terminal-auth".to_string(),
        serde_json::json!({"label": label, "command": command, "args": args, "env": {}}),
    );
    meta
}

/// How a person supplies credentials: environment variables, or, when the
/// client can run pincer in a terminal (`auth.terminal`, or Zed's older
/// `_meta["terminal-auth"]`), `pincer login` storing an auth profile (an
/// API key, or Anthropic's OAuth login). `authenticate` re-reads both. The
/// agent methods are always there, so every client (and the ACP Registry's
/// check from an empty home) gets at least one.
fn auth_methods(terminal: bool, legacy_terminal: bool) -> Vec<AuthMethod> {
    let mut methods: Vec<AuthMethod> = Vec::new();
    let terminal_method = |id: String, name: String, args: Vec<String>, description: String| {
        let mut method =
            agent_client_protocol::v1::schema::AuthMethodTerminal::new(id, name.clone())
                .args(args.clone())
                .description(description);
        if legacy_terminal {
            method = method.meta(legacy_terminal_meta(&name, &args));
        }
        AuthMethod::Terminal(method)
    };
    if terminal || legacy_terminal {
        for (provider, name) in [
            ("anthropic", "Anthropic"),
            ("openai", "OpenAI"),
            ("google", "Google Gemini"),
        ] {
            methods.push(terminal_method(
                format!("{provider}-login"),
                format!("Log in to {name}"),
                vec![
                    "login".to_string(),
                    "--provider".to_string(),
                    provider.to_string(),
                    "--api-key".to_string(),
                ],
                format!(
                    "Paste a {name} API key; pincer keeps it in its auth profiles (mode 0600), not in the editor's settings."
                ),
            ));
            // Anthropic also has an OAuth login (Claude Pro/Max accounts),
            // which pincer knows how to run and refresh.
            if provider == "anthropic" {
                methods.push(terminal_method(
                    "anthropic-oauth-login".to_string(),
                    "Log in with a Claude account".to_string(),
                    vec![
                        "login".to_string(),
                        "--provider".to_string(),
                        "anthropic".to_string(),
                        "--oauth".to_string(),
                    ],
                    "Log in to a Claude Pro or Max account in the browser; pincer keeps the token in its auth profiles and refreshes it.".to_string(),
                ));
            }
        }
    }
    methods.extend([
        (
            "anthropic-api-key",
            "Anthropic API key",
            "Set ANTHROPIC_API_KEY in the environment pincer starts with (for Zed: \"env\" in its agent_servers entry), then restart the agent.",
        ),
        (
            "openai-api-key",
            "OpenAI API key",
            "Set OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server) in the environment pincer starts with, then restart the agent.",
        ),
        (
            "gemini-api-key",
            "Gemini API key",
            "Set GEMINI_API_KEY in the environment pincer starts with, then restart the agent, and choose a google/ model.",
        ),
        (
            "local-model",
            "Local model (Ollama, llama.cpp, vLLM)",
            "Choose a local model with PINCER_MODEL=ollama/<model> or a [providers] entry in config.toml; no key is needed.",
        ),
    ]
    .into_iter()
    .map(|(id, name, description)| {
        AuthMethod::Agent(AuthMethodAgent::new(id, name).description(description))
    }));
    methods
}
