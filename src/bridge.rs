//! `pincer acp --connect`: an ACP agent on stdin/stdout whose sessions run
//! on a gateway somewhere else (pincer's or OpenClaw's). The editor talks
//! ACP as it would to a local `pincer acp`; every session is a gateway
//! session key, every prompt a `chat.send`, and the gateway's `chat` and
//! `agent` events come back as `session/update`s.
//!
//! The remote side works in its own directory with its own files; the
//! bridge never uses the editor's files or terminals and says where the
//! remote works (the `pincer/remote` `_meta` of the session and its info).
//!
//! This file holds the ACP surface and the sessions; [`stream`] turns the
//! gateway's events into updates, [`wire`] maps values between the two
//! protocols.

mod pipe;
mod sent;
mod stream;
mod wire;

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, CloseSessionRequest, CloseSessionResponse, ContentBlock, ContentChunk,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, ResumeSessionRequest, ResumeSessionResponse, SessionNotification,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse, TextContent,
};
use agent_client_protocol::{Agent, Client, ConnectTo, Error};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::acp::transport::{self, Drain};
use crate::gateway::client::{self, ClientError, Hello, Incoming};
use crate::llm::Secret;

pub use crate::gateway::client::Credential;

/// How long a request waits for a connection that is down before it fails.
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// How long the bridge keeps trying to deliver a prompt over a connection
/// that keeps dropping (the idempotency key makes each try safe).
const SEND_WAIT: Duration = Duration::from_secs(60);
/// The page size of `session/list`.
const LIST_PAGE: u64 = 100;

/// What `pincer acp --connect` was given.
#[derive(Clone, Debug)]
pub struct BridgeOptions {
    /// The gateway, `ws://` or `wss://` (checked by [`check_url`]).
    pub url: String,
    pub credential: Credential,
    /// `--session KEY`: every `session/new` attaches to this key.
    pub session: Option<String>,
    /// `--session-label`: the key is the one this label resolves to.
    pub session_label: Option<String>,
    /// `--require-existing`: the key or label must already exist.
    pub require_existing: bool,
    /// `--reset-session`: the key starts over (its old transcript stays).
    pub reset_session: bool,
    /// `--protocol`: how the editor's ACP reaches the gateway.
    pub protocol: Protocol,
}

/// How `pincer acp --connect` talks to the gateway.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// ACP over the gateway's `/acp` when it is pincer's, else OpenClaw's
    /// gateway protocol.
    #[default]
    Auto,
    /// ACP over `/acp`, as the agent speaks it: nothing is translated,
    /// but the sessions end with the connection.
    Acp,
    /// OpenClaw's gateway protocol: sessions are gateway keys and runs
    /// go on across a dropped connection.
    Openclaw,
}

/// Checks a `--connect` URL: a websocket URL, and no credential in it
/// (proxies and shell histories keep URLs; the credential goes in the
/// `connect` frame).
pub fn check_url(raw: &str) -> Result<String, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("`{raw}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "ws" | "wss") {
        return Err(format!(
            "`{raw}` is not a websocket URL: use ws://HOST:PORT or wss://HOST:PORT"
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{raw}` names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "the --connect URL carries a user or password; a credential never goes in a URL: \
             use --token-file, --password-file or $PINCER_GATEWAY_TOKEN"
                .to_string(),
        );
    }
    if let Some((name, _)) = url
        .query_pairs()
        .find(|(name, _)| crate::gateway::is_credential_param(name))
    {
        return Err(format!(
            "the --connect URL carries a credential (`{name}=`); a credential never goes in a \
             URL: use --token-file, --password-file or $PINCER_GATEWAY_TOKEN"
        ));
    }
    Ok(url.to_string())
}

/// The credential for the gateway: `--token`, `--token-file` or
/// `--password-file`, else `$PINCER_GATEWAY_TOKEN`, else
/// `$PINCER_GATEWAY_PASSWORD`. An empty or placeholder value is refused
/// here rather than sent.
pub fn credential(
    token: Option<String>,
    token_file: Option<&std::path::Path>,
    password_file: Option<&std::path::Path>,
) -> Result<Credential, String> {
    let read = |path: &std::path::Path, what: &str| -> Result<String, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read the gateway {what} from {}: {e}",
                path.display()
            )
        })?;
        Ok(text.trim().to_string())
    };
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let (credential, from) = if let Some(token) = token {
        (
            Credential::Token(Secret::new(token.trim())),
            "--token".to_string(),
        )
    } else if let Some(path) = token_file {
        let token = read(path, "token")?;
        (
            Credential::Token(Secret::new(token)),
            path.display().to_string(),
        )
    } else if let Some(path) = password_file {
        let password = read(path, "password")?;
        (
            Credential::Password(Secret::new(password)),
            path.display().to_string(),
        )
    } else if let Some(token) = env("PINCER_GATEWAY_TOKEN") {
        (
            Credential::Token(Secret::new(token.trim())),
            "$PINCER_GATEWAY_TOKEN".to_string(),
        )
    } else if let Some(password) = env("PINCER_GATEWAY_PASSWORD") {
        (
            Credential::Password(Secret::new(password.trim())),
            "$PINCER_GATEWAY_PASSWORD".to_string(),
        )
    } else {
        return Err(
            "--connect needs the gateway's credential: --token-file FILE (on the gateway's \
             machine `pincer gateway token --print` shows it), --password-file FILE, or \
             $PINCER_GATEWAY_TOKEN"
                .to_string(),
        );
    };
    let value = match &credential {
        Credential::Token(s) | Credential::Password(s) => s.expose(),
    };
    if crate::gateway::is_placeholder(value) {
        return Err(format!("the gateway credential in {from} is empty"));
    }
    Ok(credential)
}

/// Serves the bridge on stdin/stdout until stdin closes and every request
/// received has been answered.
pub async fn serve_stdio(options: BridgeOptions) -> Result<(), Error> {
    // A session key (`--session`, `--session-label`) is the gateway
    // protocol's notion; so are runs that outlive the connection.
    let keyed = options.session.is_some() || options.session_label.is_some();
    if options.protocol != Protocol::Openclaw && !keyed {
        match pipe::dial(&options.url, &options.credential).await {
            Ok(socket) => {
                tracing::debug!(url = %options.url, "the gateway serves ACP: the editor's messages go there as they are");
                return pipe::serve_stdio(socket, options.url)
                    .await
                    .map_err(|lost| Error::new(Error::internal_error().code, lost));
            }
            Err(no) if options.protocol == Protocol::Acp || no.refused => {
                return Err(Error::new(
                    Error::internal_error().code,
                    format!("cannot reach ACP at {}: {}", options.url, no.why),
                ));
            }
            Err(no) => {
                tracing::debug!(url = %options.url, why = %no.why, "no ACP on the gateway: using OpenClaw's protocol");
            }
        }
    }
    let drain = Drain::new();
    let transport = transport::stdio(drain.clone());
    tokio::spawn(serve(transport, drain, options))
        .await
        .map_err(Error::into_internal_error)?
}

/// Serves the bridge over any transport.
pub async fn serve(
    transport: impl ConnectTo<Agent> + 'static,
    drain: Arc<Drain>,
    options: BridgeOptions,
) -> Result<(), Error> {
    let (client, incoming) = client::Client::start(client::ClientOptions {
        url: options.url.clone(),
        credential: options.credential.clone(),
    });
    let bridge = Arc::new(Bridge {
        options,
        client,
        drain,
        cx: OnceLock::new(),
        state: Mutex::new(State::default()),
    });
    let pump = tokio::spawn(stream::pump(bridge.clone(), incoming));
    let _pump = AbortOnDrop(pump);

    // Every request but `initialize` runs in a task of its own: a turn or
    // a slow gateway must not hold back `session/cancel`.
    macro_rules! spawned {
        ($request:ty, $method:ident) => {{
            let bridge = bridge.clone();
            async move |req: $request, responder, cx: ConnectionTo<Client>| {
                let bridge = bridge.clone();
                cx.spawn(async move {
                    answer(responder.respond_with_result(bridge.$method(req).await));
                    Ok(())
                })
            }
        }};
    }
    let (first, last) = (bridge.clone(), bridge.clone());
    Agent
        .v1()
        .name("pincer")
        .on_receive_request(
            // Answered once the gateway is reached: an editor that shows
            // the agent as ready can use it.
            async move |req: InitializeRequest, responder, cx: ConnectionTo<Client>| {
                let _ = first.cx.set(cx);
                responder.respond_with_result(first.initialize(req).await)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            spawned!(NewSessionRequest, new_session),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            spawned!(LoadSessionRequest, load_session),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            spawned!(ResumeSessionRequest, resume_session),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            spawned!(ListSessionsRequest, list_sessions),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            spawned!(PromptRequest, prompt),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            spawned!(CloseSessionRequest, close_session),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            spawned!(SetSessionConfigOptionRequest, set_config_option),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            spawned!(SetSessionModeRequest, set_mode),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                last.cancel(&notification.session_id.0);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}

fn answer(sent: Result<(), Error>) {
    if let Err(e) = sent {
        tracing::warn!(error = %e, "could not answer the editor");
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Bridge {
    options: BridgeOptions,
    client: client::Client,
    drain: Arc<Drain>,
    /// The editor's connection, from `initialize` on.
    cx: OnceLock<ConnectionTo<Client>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Open sessions by key (the ACP session id is the key).
    sessions: HashMap<String, Remote>,
    /// Runs of open sessions, by run id: this bridge's prompts and what
    /// other clients run in the same sessions.
    runs: HashMap<String, stream::Run>,
    /// Approvals already relayed (each is asked once, whichever event
    /// announced it).
    approvals: Recent,
}

/// The latest [`Recent::CAPACITY`] ids seen: enough to ask each approval
/// once (its two announcements come together), bounded whatever number of
/// ids a gateway makes up.
#[derive(Default)]
struct Recent {
    order: std::collections::VecDeque<String>,
    seen: std::collections::HashSet<String>,
}

impl Recent {
    const CAPACITY: usize = 1024;

    /// Remembers `id`; false when it was already among the latest.
    fn insert(&mut self, id: String) -> bool {
        if self.seen.contains(&id) {
            return false;
        }
        if self.order.len() >= Self::CAPACITY
            && let Some(oldest) = self.order.pop_front()
        {
            self.seen.remove(&oldest);
        }
        self.seen.insert(id.clone());
        self.order.push_back(id);
        true
    }
}

/// What the bridge knows of an open session.
#[derive(Clone, Debug, Default)]
struct Remote {
    /// The gateway's row for it (`sessions.list`), once it has one.
    row: Option<Value>,
}

/// An ACP error for a gateway failure: a sentence naming the gateway.
fn gateway_error(error: ClientError) -> Error {
    internal(error.to_string())
}

fn internal(message: impl Into<String>) -> Error {
    let message = message.into();
    Error::new(Error::internal_error().code, message.clone()).data(json!({ "message": message }))
}

fn invalid_params(message: impl Into<String>) -> Error {
    let message = message.into();
    Error::new(Error::invalid_params().code, message.clone()).data(json!({ "message": message }))
}

/// Builds an ACP value from its JSON shape (the shapes this module writes
/// are the protocol's; a mismatch is a bug, reported as one).
fn acp<T: DeserializeOwned>(value: Value) -> Result<T, Error> {
    serde_json::from_value(value)
        .map_err(|e| internal(format!("pincer built a malformed ACP value: {e}")))
}

impl Bridge {
    fn remote_meta(&self, key: &str, row: Option<&Value>) -> Value {
        let hello = self.client.hello();
        let cwd = row.and_then(wire::row_cwd).or_else(|| {
            hello
                .as_ref()
                .and_then(|h| h.session_defaults["cwd"].as_str().map(String::from))
        });
        json!({"pincer/remote": {"gateway": self.client.url(), "sessionKey": key, "cwd": cwd}})
    }

    /// A request; one that met a connection already gone (the bridge had
    /// not heard yet) goes once more over a new one.
    async fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let limit = Some(Duration::from_secs(60));
        match self
            .client
            .request(method, params.clone(), CONNECT_WAIT, limit)
            .await
        {
            Err(ClientError::Disconnected { .. }) => {
                self.client
                    .request(method, params, CONNECT_WAIT, limit)
                    .await
            }
            other => other,
        }
    }

    async fn hello(&self) -> Result<Arc<Hello>, Error> {
        self.client
            .ensure(CONNECT_WAIT)
            .await
            .map_err(gateway_error)
    }

    async fn initialize(&self, _req: InitializeRequest) -> Result<InitializeResponse, Error> {
        self.hello().await?;
        acp(json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": false, "sse": false},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "agentInfo": {"name": "pincer", "title": "pincer (remote)", "version": env!("CARGO_PKG_VERSION")},
            "authMethods": [],
        }))
    }

    /// The gateway's row for a key, if it has one.
    async fn row(&self, key: &str) -> Result<Option<Value>, ClientError> {
        let listed = self
            .call(
                "sessions.list",
                json!({"limit": 200, "search": key, "includeDerivedTitles": true}),
            )
            .await?;
        Ok(listed["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|row| row["key"] == key)
            .cloned())
    }

    /// Opens a session by key: remembers it and learns its row.
    async fn open(&self, key: &str) -> Result<Option<Value>, Error> {
        let row = self.row(key).await.map_err(gateway_error)?;
        self.state
            .lock()
            .sessions
            .insert(key.to_string(), Remote { row: row.clone() });
        self.follow(key).await;
        Ok(row)
    }

    /// Asks the gateway for the events of the session `key` names (the
    /// bridge connects with `session-scoped-events`: it hears the sessions
    /// it uses, not every session's stream). On pincer's gateway
    /// `chat.history` follows a key without creating its session, as
    /// `chat.subscribe` would; another gateway is asked nothing more than
    /// before (its runs are followed from `chat.send`).
    async fn follow(&self, key: &str) {
        if !self.client.hello().is_some_and(|h| h.is_pincer()) {
            return;
        }
        let params = json!({"sessionKey": key, "limit": 1});
        if let Err(e) = self.call("chat.history", params).await {
            tracing::warn!(key, "cannot follow the session's events: {e}");
        }
    }

    /// Stops the events of a session the editor closed (pincer's gateway
    /// only, as [`Bridge::follow`]).
    async fn unfollow(&self, key: &str) {
        if !self.client.hello().is_some_and(|h| h.is_pincer()) {
            return;
        }
        if let Err(e) = self
            .call("chat.unsubscribe", json!({"sessionKey": key}))
            .await
        {
            tracing::debug!(key, "cannot stop following the session's events: {e}");
        }
    }

    /// The session's config options and modes, from its row and the
    /// gateway's models.
    async fn options_of(&self, row: Option<&Value>) -> (Value, Value) {
        let models = if self.client.hello().is_some() {
            self.call("models.list", json!({})).await.ok()
        } else {
            None
        };
        let hello = self.client.hello();
        let pincer = hello.as_ref().is_some_and(|h| h.is_pincer());
        let defaults = hello
            .map(|h| h.session_defaults.clone())
            .unwrap_or_default();
        wire::config_options(row, &defaults, models.as_ref(), pincer)
    }

    /// The session result's common fields, and the info update that tells
    /// the editor where the session works.
    async fn opened(&self, key: &str, row: Option<Value>) -> Result<Value, Error> {
        let meta = self.remote_meta(key, row.as_ref());
        let (config, modes) = self.options_of(row.as_ref()).await;
        let mut result = json!({"configOptions": config, "_meta": meta});
        if !modes.is_null() {
            result["modes"] = modes;
        }
        self.send_info(key, row.as_ref());
        Ok(result)
    }

    fn send_info(&self, key: &str, row: Option<&Value>) {
        let mut info =
            json!({"sessionUpdate": "session_info_update", "_meta": self.remote_meta(key, row)});
        if let Some(row) = row {
            if let Some(title) = wire::row_title(row) {
                info["title"] = json!(title);
            }
            if let Some(updated) = wire::row_updated(row) {
                info["updatedAt"] = json!(updated);
            }
        }
        self.notify(key, info);
    }

    /// Sends one `session/update` (an update shape as JSON).
    fn notify(&self, key: &str, update: Value) {
        let Some(cx) = self.cx.get() else { return };
        // Text chunks, nearly every update of a turn, are built directly.
        let chunk = match (
            update["sessionUpdate"].as_str(),
            update["content"]["text"].as_str(),
        ) {
            (Some(kind), Some(text)) if update["content"]["type"] == "text" => {
                let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
                match kind {
                    "agent_message_chunk" => Some(SessionUpdate::AgentMessageChunk(chunk)),
                    "agent_thought_chunk" => Some(SessionUpdate::AgentThoughtChunk(chunk)),
                    "user_message_chunk" => Some(SessionUpdate::UserMessageChunk(chunk)),
                    _ => None,
                }
            }
            _ => None,
        };
        let parsed = match chunk {
            Some(update) => Ok(update),
            None => serde_json::from_value::<SessionUpdate>(update),
        };
        match parsed {
            Ok(update) => {
                let notification = SessionNotification::new(key.to_string(), update);
                if let Err(e) = cx.send_notification(notification) {
                    tracing::debug!(error = %e, "could not send an update");
                }
            }
            Err(e) => tracing::warn!(error = %e, "pincer built a malformed update"),
        }
    }

    async fn new_session(&self, req: NewSessionRequest) -> Result<NewSessionResponse, Error> {
        if !req.mcp_servers.is_empty() {
            return Err(invalid_params(
                "the session runs on the gateway's machine, where the MCP servers this editor \
                 passes cannot run; configure them on the gateway instead",
            ));
        }
        self.hello().await?;
        let key = match (&self.options.session, &self.options.session_label) {
            (Some(key), _) => {
                if self.options.require_existing {
                    self.resolve(json!({"key": key}), key).await?;
                }
                key.clone()
            }
            (None, Some(label)) => self.resolve(json!({"label": label}), label).await?,
            (None, None) => format!("acp-bridge:{}", uuid::Uuid::new_v4()),
        };
        if self.options.reset_session {
            self.call("sessions.reset", json!({"key": key}))
                .await
                .map_err(gateway_error)?;
        }
        let row = self.open(&key).await?;
        let mut result = self.opened(&key, row).await?;
        result["sessionId"] = json!(key);
        acp(result)
    }

    /// `sessions.resolve`: the key a key or label stands for.
    async fn resolve(&self, params: Value, wanted: &str) -> Result<String, Error> {
        match self.call("sessions.resolve", params).await {
            Ok(found) => found["key"]
                .as_str()
                .filter(|k| !k.is_empty())
                .map(String::from)
                .ok_or_else(|| invalid_params(format!("no session {wanted} on the gateway"))),
            Err(ClientError::Rpc { message, .. }) => Err(invalid_params(format!(
                "no session {wanted} on the gateway ({message})"
            ))),
            Err(e) => Err(gateway_error(e)),
        }
    }

    /// Opens a session that must exist on the gateway.
    async fn open_existing(&self, key: &str) -> Result<Option<Value>, Error> {
        self.hello().await?;
        let row = self.open(key).await?;
        if row.is_none() {
            let known = self
                .call("sessions.resolve", json!({"key": key}))
                .await
                .is_ok_and(|found| found["key"] == key);
            if !known {
                self.state.lock().sessions.remove(key);
                return Err(invalid_params(format!("no session {key} on the gateway")));
            }
        }
        Ok(row)
    }

    async fn load_session(&self, req: LoadSessionRequest) -> Result<LoadSessionResponse, Error> {
        let key = req.session_id.0.to_string();
        let row = self.open_existing(&key).await?;
        let history = self
            .call("chat.history", json!({"sessionKey": key, "limit": 1000}))
            .await
            .map_err(gateway_error)?;
        for update in wire::replay(&history["messages"]) {
            self.notify(&key, update);
        }
        acp(self.opened(&key, row).await?)
    }

    async fn resume_session(
        &self,
        req: ResumeSessionRequest,
    ) -> Result<ResumeSessionResponse, Error> {
        let key = req.session_id.0.to_string();
        let row = self.open_existing(&key).await?;
        acp(self.opened(&key, row).await?)
    }

    async fn list_sessions(&self, req: ListSessionsRequest) -> Result<ListSessionsResponse, Error> {
        let offset = match &req.cursor {
            None => 0,
            Some(cursor) => cursor
                .parse::<u64>()
                .map_err(|_| invalid_params(format!("invalid cursor `{cursor}`")))?,
        };
        self.hello().await?;
        let listed = self
            .call(
                "sessions.list",
                json!({"limit": LIST_PAGE, "offset": offset, "includeDerivedTitles": true}),
            )
            .await
            .map_err(gateway_error)?;
        let rows = listed["sessions"].as_array().cloned().unwrap_or_default();
        let sessions: Vec<Value> = rows
            .iter()
            .filter_map(|row| {
                let key = row["key"].as_str()?;
                let mut info = json!({
                    "sessionId": key,
                    "cwd": wire::row_cwd(row).unwrap_or_else(|| "/".to_string()),
                    "_meta": self.remote_meta(key, Some(row)),
                });
                if let Some(title) = wire::row_title(row) {
                    info["title"] = json!(title);
                }
                if let Some(updated) = wire::row_updated(row) {
                    info["updatedAt"] = json!(updated);
                }
                Some(info)
            })
            .collect();
        let mut result = json!({"sessions": sessions});
        if listed["hasMore"] == true {
            result["nextCursor"] = json!((offset + rows.len() as u64).to_string());
        }
        acp(result)
    }

    async fn close_session(&self, req: CloseSessionRequest) -> Result<CloseSessionResponse, Error> {
        let key = req.session_id.0.to_string();
        if self.state.lock().sessions.remove(&key).is_none() {
            return Err(invalid_params(format!("no open session {key}")));
        }
        self.cancel(&key);
        self.state.lock().runs.retain(|_, run| run.key != key);
        self.unfollow(&key).await;
        Ok(CloseSessionResponse::new())
    }

    fn check_open(&self, key: &str) -> Result<(), Error> {
        if self.state.lock().sessions.contains_key(key) {
            Ok(())
        } else {
            Err(invalid_params(format!(
                "no open session {key}: create it with session/new or open it with session/load"
            )))
        }
    }

    /// `sessions.patch` with one field, then the session's new options.
    async fn patch(&self, key: &str, field: &str, value: &str) -> Result<Value, Error> {
        self.check_open(key)?;
        let patched = match self
            .call("sessions.patch", json!({"key": key, field: value}))
            .await
        {
            Ok(patched) => patched,
            Err(ClientError::Rpc { message, .. }) => return Err(invalid_params(message)),
            Err(e) => return Err(gateway_error(e)),
        };
        // The gateway's row as the patch left it; a session without a turn
        // has none yet (it is listed from its first prompt on), so what was
        // known of it, with the change, stands for it.
        let row = match patched.get("entry").filter(|e| e.is_object()) {
            Some(entry) => Some(entry.clone()),
            None => match self.row(key).await.map_err(gateway_error)? {
                Some(row) => Some(row),
                None => {
                    let known = self
                        .state
                        .lock()
                        .sessions
                        .get(key)
                        .and_then(|r| r.row.clone());
                    let mut row = known.unwrap_or_else(|| json!({}));
                    row[field] = json!(value);
                    if field == "model" {
                        row["modelProvider"] = Value::Null;
                    }
                    // A row names pincer's mode `mode` (`permissionMode`
                    // is OpenClaw's name for it).
                    if field == "permissionMode" {
                        row["mode"] = json!(value);
                    }
                    Some(row)
                }
            },
        };
        if let Some(remote) = self.state.lock().sessions.get_mut(key) {
            remote.row = row.clone();
        }
        let (config, _) = self.options_of(row.as_ref()).await;
        Ok(config)
    }

    async fn set_config_option(
        &self,
        req: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse, Error> {
        let key = req.session_id.0.to_string();
        let request = serde_json::to_value(&req).unwrap_or_default();
        let id = request["configId"].as_str().unwrap_or_default().to_string();
        let value = match &request["value"] {
            Value::String(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            other => other.to_string(),
        };
        let field = wire::patch_field(&id).ok_or_else(|| {
            invalid_params(format!(
                "unknown config option `{id}`; the options are those session/new listed"
            ))
        })?;
        let config = self.patch(&key, field, &value).await?;
        acp(json!({"configOptions": config}))
    }

    async fn set_mode(&self, req: SetSessionModeRequest) -> Result<SetSessionModeResponse, Error> {
        let key = req.session_id.0.to_string();
        if !self.client.hello().is_some_and(|h| h.is_pincer()) {
            return Err(invalid_params(
                "this gateway has no permission modes; its sessions' options are in session/new's configOptions",
            ));
        }
        let mode = req.mode_id.0.to_string();
        let config = self.patch(&key, "permissionMode", &mode).await?;
        self.notify(
            &key,
            json!({"sessionUpdate": "current_mode_update", "currentModeId": mode}),
        );
        self.notify(
            &key,
            json!({"sessionUpdate": "config_option_update", "configOptions": config}),
        );
        Ok(SetSessionModeResponse::new())
    }

    async fn prompt(&self, req: PromptRequest) -> Result<PromptResponse, Error> {
        let key = req.session_id.0.to_string();
        self.check_open(&key)?;
        let blocks = serde_json::to_value(&req.prompt).unwrap_or_default();
        let (message, attachments) = wire::prompt(&blocks).map_err(invalid_params)?;
        let run = uuid::Uuid::new_v4().to_string();
        let (done, ending) = tokio::sync::oneshot::channel();
        // Registered before the send: the run's first events may come
        // before the answer to `chat.send`.
        self.state
            .lock()
            .runs
            .insert(run.clone(), stream::Run::ours(&key, done));
        let mut params = json!({"sessionKey": key, "message": message, "idempotencyKey": run});
        if !attachments.is_empty() {
            params["attachments"] = json!(attachments);
        }
        match self.send(&params).await {
            // Cancelled before the gateway had the run: abort it now.
            Ok(_)
                if self
                    .state
                    .lock()
                    .runs
                    .get(&run)
                    .is_some_and(stream::Run::is_cancelled) =>
            {
                self.abort(&key, &run);
            }
            Ok(ack) => match ack["status"].as_str() {
                Some("ok") => self.settle(&run, stream::Ending::Stop("end_turn")),
                Some("timeout") => self.settle(&run, stream::Ending::Stop("cancelled")),
                Some("error") => self.settle(
                    &run,
                    stream::Ending::Error(
                        ack["error"]
                            .as_str()
                            .or(ack["summary"].as_str())
                            .unwrap_or("the gateway could not start the turn")
                            .to_string(),
                    ),
                ),
                _ => {}
            },
            Err(e) => {
                self.state.lock().runs.remove(&run);
                return Err(match e {
                    ClientError::Rpc { message, .. } => invalid_params(message),
                    other => gateway_error(other),
                });
            }
        }
        let ending = ending.await.unwrap_or(stream::Ending::Error(
            "the bridge lost track of this turn".to_string(),
        ));
        if let Ok(row) = self.row(&key).await {
            if let Some(remote) = self.state.lock().sessions.get_mut(&key) {
                remote.row = row.clone();
            }
            self.send_info(&key, row.as_ref());
        }
        match ending {
            stream::Ending::Stop(reason) => acp(json!({"stopReason": reason})),
            stream::Ending::Error(message) => Err(internal(message)),
        }
    }

    /// `chat.send`, again over a new connection when one drops before the
    /// answer (the same idempotency key: the gateway runs it once).
    async fn send(&self, params: &Value) -> Result<Value, ClientError> {
        let deadline = tokio::time::Instant::now() + SEND_WAIT;
        loop {
            match self
                .client
                .request(
                    "chat.send",
                    params.clone(),
                    CONNECT_WAIT,
                    Some(Duration::from_secs(60)),
                )
                .await
            {
                Err(ClientError::Disconnected { .. }) if tokio::time::Instant::now() < deadline => {
                }
                other => return other,
            }
        }
    }

    /// Ends this bridge's prompt for a run, once.
    fn settle(&self, run: &str, ending: stream::Ending) {
        if let Some(run) = self.state.lock().runs.get_mut(run) {
            run.settle(ending);
        }
    }

    /// `session/cancel`: the prompt ends now; the gateway is told after.
    fn cancel(&self, key: &str) {
        let cancelled: Vec<String> = {
            let mut state = self.state.lock();
            state
                .runs
                .iter_mut()
                .filter(|(_, run)| run.key == key && run.is_pending())
                .map(|(id, run)| {
                    run.cancel();
                    id.clone()
                })
                .collect()
        };
        for run in cancelled {
            self.abort(key, &run);
        }
    }

    /// Tells the gateway to stop a run (in the background).
    fn abort(&self, key: &str, run: &str) {
        let client = self.client.clone();
        let params = json!({"sessionKey": key, "runId": run});
        tokio::spawn(async move {
            if let Err(e) = client
                .request(
                    "chat.abort",
                    params,
                    CONNECT_WAIT,
                    Some(Duration::from_secs(30)),
                )
                .await
            {
                tracing::warn!(error = %e, "could not abort the run on the gateway");
            }
        });
    }

    /// Whether stdin closed (an editor that can no longer answer).
    fn editor_gone(&self) -> bool {
        self.drain.is_closed()
    }

    /// Handles one thing the connection heard.
    fn heard(self: &Arc<Self>, incoming: Incoming) {
        match incoming {
            Incoming::Event { name, payload, .. } => stream::event(self, &name, payload),
            Incoming::Connected {
                again: true,
                restarted,
                ..
            } => {
                let bridge = self.clone();
                tokio::spawn(async move {
                    // A new connection follows nothing yet.
                    let keys: Vec<String> = bridge.state.lock().sessions.keys().cloned().collect();
                    for key in keys {
                        bridge.follow(&key).await;
                    }
                    stream::reconcile(&bridge, restarted).await
                });
            }
            Incoming::Connected { .. } | Incoming::Disconnected { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_are_asked_once_and_their_memory_is_bounded() {
        let mut recent = Recent::default();
        assert!(recent.insert("a1".to_string()));
        assert!(!recent.insert("a1".to_string()));
        // A gateway that makes up ids without end costs a bounded set.
        for n in 0..10 * Recent::CAPACITY {
            assert!(recent.insert(format!("made-up-{n}")));
        }
        assert_eq!(recent.order.len(), Recent::CAPACITY);
        assert_eq!(recent.seen.len(), Recent::CAPACITY);
        let last = format!("made-up-{}", 10 * Recent::CAPACITY - 1);
        assert!(!recent.insert(last));
    }
}
