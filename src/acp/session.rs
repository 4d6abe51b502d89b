//! One ACP session: its working directory, model and thinking level, its
//! history, and its prompts. The prompt queue, steering and cancel are one
//! state machine ([`turns`]) behind one lock; what the session works with
//! (settings, credentials, MCP servers) is one more ([`Parts`]), replaced
//! as a whole when the project becomes trusted.

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommandsUpdate, ClientCapabilities, ConfigOptionUpdate, ContentBlock, ContentChunk,
    CurrentModeUpdate, Notice, NoticeSeverity, PermissionOption, PermissionOptionKind,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOption, SessionId, SessionInfoUpdate,
    SessionMode, SessionModeState, SessionNotification, SessionUpdate, StopReason, TextContent,
    ToolCallUpdate, ToolCallUpdateFields, UsageUpdate,
};
use agent_client_protocol::{Client, Error};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::commands::{self, Command};
use super::editor::{EditorFiles, EditorTerminals};
use super::observer::{Bus, Observed};
use super::transport::Drain;
use super::{auth_required, invalid_params, updates};
use crate::agent::{self, AgentEvent, AgentHost, AgentMessage, Answer, Mode, Permissions, RunStop};
use crate::config::Settings;
use crate::llm::{LlmError, Model, ThinkingLevel, ToolCall};
use crate::session::transcript;
use crate::tools::sandbox::SandboxMode;
use crate::tools::{self, CallInfo, Display, Terminals, Tool, Workspace};

mod children;
mod host;
mod live_terminal;
mod rewind;
mod trust;
mod turns;
mod workflow;

pub use children::{AsyncTaskStopRequest, AsyncTaskStopResponse};
use host::AcpHost;
use turns::{CancelledOne, Submitted, Turns};

pub const MODEL_OPTION: &str = "model";
pub const THOUGHT_OPTION: &str = "thought_level";
pub const MODE_OPTION: &str = "mode";
/// The config option (and `/sandbox`) of the sandbox commands run in.
pub const SANDBOX_OPTION: &str = "sandbox";
pub const QUEUE_OPTION: &str = "queue";

pub struct Session {
    id: SessionId,
    cwd: PathBuf,
    /// Directories beyond `cwd` the session may touch without asking.
    additional: Vec<PathBuf>,
    /// Settings, credentials, MCP servers and Claude Code process:
    /// replaced as a whole when the user trusts the project mid-session.
    parts: Mutex<Parts>,
    tools: Vec<Arc<dyn Tool>>,
    permissions: Arc<Permissions>,
    state: Mutex<State>,
    /// Held by a turn for its whole run; later prompts wait here.
    history: tokio::sync::Mutex<Vec<AgentMessage>>,
    /// The session's transcript; every finished message is appended.
    transcript: Mutex<transcript::Writer>,
    /// What the editor was last told about commands and broken skills.
    announced: Mutex<Announced>,
    /// The session's recent tool calls, for loop detection across turns.
    loops: crate::agent::loops::SharedLoops,
    /// The prompt queue, steering and cancel: one state machine.
    turns: Mutex<SessionTurns>,
    /// The servers the editor gave this session.
    editor_mcp: Vec<crate::mcp::ServerSpec>,
    /// Set once the project's trust has been settled (asked or reported)
    /// in this session; prompts that arrive meanwhile wait for it.
    trust_settled: tokio::sync::OnceCell<()>,
    /// Set once the `session_start` hooks have run; the first prompt waits
    /// for them, so that they always come before `user_prompt_submit`.
    started: tokio::sync::OnceCell<()>,
    /// The process's event bus: its observer hears what this session does.
    bus: Arc<Bus>,
    /// The connection the session belongs to; shared with the task that
    /// reports MCP trouble, so that it follows a change of owner.
    owner: Arc<Mutex<Owner>>,
    /// What each run changes in the working directory (`None`: the user
    /// turned checkpoints off).
    checkpoints: Option<Arc<crate::checkpoint::recording::Recording>>,
    /// Set for a helper: whose `task` call started it.
    child: Option<children::ChildOf>,
    /// The helpers this session's runs started that are still running,
    /// by id (`session/cancel` on one of them reaches it here).
    children: Mutex<std::collections::HashMap<String, Arc<Session>>>,
    /// Work that goes on after its turn (background helpers); stopped
    /// when the session closes.
    jobs: Arc<tools::jobs::Jobs>,
}

/// What a session works with, each handed out whole (an `Arc` clone) so
/// that no lock is held while it is used.
struct Parts {
    settings: Arc<Settings>,
    /// Auth profiles and the one this session is pinned to.
    credentials: Arc<crate::auth::SessionCredentials>,
    /// The session's MCP servers (the editor's and the configured ones).
    mcp: Arc<crate::mcp::Manager>,
    /// The session's Claude Code process and session, for models whose
    /// turns run there.
    claude_code: Arc<crate::agent::claude_code::Session>,
}

/// The connection a session belongs to: the one that opened it last (new,
/// load, resume). Whichever connection prompts, the session's runs talk to
/// its owner: permission questions, `ask_user`, files and terminals, and
/// every `session/update`.
#[derive(Clone)]
pub struct Owner {
    /// The connection's number within the process.
    pub connection: u64,
    pub cx: ConnectionTo<Client>,
    /// What the owner said it can do in `initialize`.
    pub client: ClientCapabilities,
    pub drain: Arc<Drain>,
}

/// What a session unloaded while idle needs to be opened again as it was:
/// the rest comes from its transcript.
pub struct Reopen {
    pub cwd: PathBuf,
    pub additional: Vec<PathBuf>,
    pub editor_mcp: Vec<crate::mcp::ServerSpec>,
    pub owner: Owner,
}

/// A `session/prompt` as the session takes it.
pub struct Prompted {
    pub blocks: Vec<ContentBlock>,
    /// The gateway's tag for the prompt (`None`: an editor's prompt).
    pub tag: Option<String>,
    /// How the prompt waits if the session is busy (`None`: the session's
    /// queue mode).
    pub mode: Option<agent::QueueMode>,
    /// The connection the prompt came from.
    pub from: u64,
}

/// The answer to one prompt request. Sending it tells the observer that
/// the prompt ended; one dropped unanswered (its run's task ended with the
/// connection) tells it the prompt was cancelled, so every prompt request
/// gets exactly one [`Observed::PromptEnded`].
struct Reply {
    respond: Option<Respond>,
    tag: Option<String>,
    session: SessionId,
    bus: Arc<Bus>,
}

impl Reply {
    fn send(mut self, result: Result<PromptResponse, Error>) {
        self.tell(&result);
        if let Some(respond) = self.respond.take() {
            respond(result);
        }
    }

    fn tell(&mut self, result: &Result<PromptResponse, Error>) {
        self.bus.tell(Observed::PromptEnded {
            session: self.session.clone(),
            tag: self.tag.take(),
            result: ended(result),
        });
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(respond) = self.respond.take() {
            let cancelled = Ok(PromptResponse::new(StopReason::Cancelled));
            self.tell(&cancelled);
            respond(cancelled);
        }
    }
}

/// Answers one prompt request. It queues the response on the prompting
/// connection at once, so that on the owner's connection a request whose
/// part of a run is over answers before the next part streams.
pub(crate) type Respond = Box<dyn FnOnce(Result<PromptResponse, Error>) + Send>;

/// A prompt's result as the observer hears it.
pub(super) fn ended(result: &Result<PromptResponse, Error>) -> Result<StopReason, String> {
    match result {
        Ok(response) => Ok(response.stop_reason),
        Err(e) => Err(e
            .data
            .as_ref()
            .and_then(|d| d.get("message"))
            .and_then(serde_json::Value::as_str)
            .map_or_else(|| e.message.clone(), str::to_string)),
    }
}

/// A prompt request on its way into the session ([`Turns::arrive`]),
/// until dropped.
struct Arriving<'a>(&'a Session);

impl<'a> Arriving<'a> {
    fn new(session: &'a Session) -> Self {
        session.turns.lock().arrive();
        Self(session)
    }
}

impl Drop for Arriving<'_> {
    fn drop(&mut self) {
        self.0.turns.lock().leave();
    }
}

/// A prompt's text blocks, joined with newlines.
fn prompt_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the observer (and, for a prompt from another connection, the
/// owner) is told when the agent begins working on a prompt.
struct Start {
    tag: Option<String>,
    text: String,
    /// The prompt came from a connection other than the owner's, which
    /// has not seen it: it is shown to the owner as the user's message.
    echo: bool,
}

/// A prompt as the session's [`Turns`] holds it until a run takes it in.
struct Pending {
    content: Vec<crate::llm::Content>,
    start: Start,
}

/// A run's configuration, its cancel token and the tools it has.
type TurnSetup = (agent::AgentConfig, CancellationToken, Vec<Arc<dyn Tool>>);

/// The session's prompt queue and cancel token (see [`turns`]).
type SessionTurns = Turns<Reply, Pending>;

#[derive(Default)]
struct Announced {
    commands: Option<Vec<agent_client_protocol::v1::schema::AvailableCommand>>,
    problems: Vec<String>,
}

struct State {
    model: Model,
    thinking: ThinkingLevel,
    total_cost: f64,
    /// Compactions so far in this process (their ids for the editor).
    compactions: u64,
    /// When the model last answered in this session.
    last_call: Option<std::time::SystemTime>,
    /// The client's instructions for the session (ACP `systemPrompt`).
    client_prompt: Option<crate::context::ClientPrompt>,
    /// The user named the session: a model no longer does.
    labelled: bool,
    /// A workflow run the transcript shows started and never ended.
    unfinished_workflow: Option<crate::workflow::run::UnfinishedWorkflow>,
}

impl State {
    /// A session's state before its first turn.
    fn new(model: Model, thinking: ThinkingLevel) -> Self {
        Self {
            model,
            thinking,
            total_cost: 0.0,
            compactions: 0,
            last_call: None,
            client_prompt: None,
            labelled: false,
            unfinished_workflow: None,
        }
    }
}

impl Session {
    /// A session working in `cwd`; `additional` directories may also be
    /// touched without asking. The editor's MCP servers and the configured
    /// ones start in the background.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: String,
        cwd: PathBuf,
        additional: Vec<PathBuf>,
        settings: Settings,
        model: Model,
        transcript: transcript::Writer,
        mcp_servers: Vec<crate::mcp::ServerSpec>,
        owner: Owner,
        bus: Arc<Bus>,
    ) -> Self {
        let thinking = clamp_thinking(&model, settings.thinking());
        let credentials = Arc::new(settings.credentials());
        let settings_loops = agent::setup::loop_detector(&settings);
        let queue_mode = settings.config.queue_mode.unwrap_or_default();
        let roots = std::iter::once(cwd.clone())
            .chain(additional.iter().cloned())
            .collect();
        let shell_env = settings.config.shell_env();
        let jobs = tools::jobs::Jobs::new();
        let tools = tools::builtin_with_jobs(Arc::new(shell_env), jobs.clone());
        let permissions = Arc::new(agent::setup::permissions(
            &settings,
            settings.default_mode(),
            roots,
        ));
        if let Some(sandbox) = permissions.sandbox() {
            sandbox.set_model(&model.provider, &model.id);
        }
        let mcp = start_mcp(
            &settings,
            &cwd,
            mcp_servers.clone(),
            permissions.sandbox().map(|s| s.as_ref()),
        );
        let checkpoints = agent::setup::checkpoints(&settings, &cwd);
        Self {
            id: SessionId::new(id),
            cwd,
            additional,
            parts: Mutex::new(Parts {
                settings: Arc::new(settings),
                credentials,
                mcp,
                claude_code: Arc::default(),
            }),
            tools,
            permissions,
            state: Mutex::new(State::new(model, thinking)),
            history: tokio::sync::Mutex::new(Vec::new()),
            transcript: Mutex::new(transcript),
            announced: Mutex::new(Announced::default()),
            loops: settings_loops,
            turns: Mutex::new(Turns::new(queue_mode)),
            editor_mcp: mcp_servers,
            trust_settled: tokio::sync::OnceCell::new(),
            started: tokio::sync::OnceCell::new(),
            bus,
            owner: Arc::new(Mutex::new(owner)),
            checkpoints,
            child: None,
            children: Mutex::new(std::collections::HashMap::new()),
            jobs,
        }
    }

    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// The session runs `model` now: its sandbox takes the model's
    /// `[sandbox.by_provider]` tables.
    pub(crate) fn model_changed(&self, model: &Model) {
        if let Some(sandbox) = self.permissions.sandbox() {
            sandbox.set_model(&model.provider, &model.id);
        }
    }

    /// The connection the session belongs to now.
    pub fn owner(&self) -> Owner {
        self.owner.lock().clone()
    }

    /// Gives the session to another connection (it opened it again),
    /// which is then told the slash commands afresh.
    pub fn set_owner(&self, owner: Owner) {
        let mut current = self.owner.lock();
        if current.connection != owner.connection {
            self.announced.lock().commands = None;
        }
        *current = owner;
    }

    /// Makes the session's sandbox that of a session nobody watches (see
    /// [`crate::tools::sandbox::Sandbox::make_unattended`]).
    pub fn make_unattended(&self, config: &crate::tools::sandbox::SandboxConfig) {
        if let Some(sandbox) = self.permissions.sandbox() {
            sandbox.make_unattended(config);
        }
    }

    pub fn owned_by(&self, connection: u64) -> bool {
        self.owner.lock().connection == connection
    }

    /// Sends a live `session/update` to `cx` (the owner's connection) and
    /// tells the observer.
    fn send_update(&self, cx: &ConnectionTo<Client>, update: SessionUpdate) {
        let notification = SessionNotification::new(self.id.clone(), update);
        // A helper the client does not show as a session of its own: only
        // its parent's `task` call shows it.
        if self.child.as_ref().is_some_and(|c| !c.shown) {
            if self.bus.is_observed() {
                self.bus.tell(Observed::Update(notification));
            }
            return;
        }
        let owner = self.owner.lock().connection;
        if self.bus.hears_through_observer(owner) {
            self.bus.tell(Observed::Update(notification));
            return;
        }
        // Without an observer (plain `pincer acp`) nothing is copied.
        if self.bus.is_observed() {
            self.bus.tell(Observed::Update(notification.clone()));
        }
        if let Err(e) = cx.send_notification(notification) {
            tracing::debug!(error = %e, "could not send session/update");
        }
    }

    /// Sends a live `session/update` to the session's owner.
    pub fn notify_owner(&self, update: SessionUpdate) {
        let cx = self.owner.lock().cx.clone();
        self.send_update(&cx, update);
    }

    /// The agent begins working on a prompt: the observer hears it, and an
    /// owner that did not send the prompt sees it as the user's message.
    fn begin(&self, cx: &ConnectionTo<Client>, start: Start) {
        self.bus.tell(Observed::PromptStarted {
            session: self.id.clone(),
            tag: start.tag,
            text: start.text.clone(),
        });
        if start.echo {
            self.send_update(
                cx,
                SessionUpdate::UserMessageChunk(ContentChunk::new(ContentBlock::Text(
                    TextContent::new(start.text),
                ))),
            );
        }
    }

    /// A prompt request's answer, which tells the observer when it is sent.
    fn reply(&self, tag: Option<String>, respond: Respond) -> Reply {
        Reply {
            respond: Some(respond),
            tag,
            session: self.id.clone(),
            bus: self.bus.clone(),
        }
    }

    /// The session's settings as they are now.
    fn settings(&self) -> Arc<Settings> {
        self.parts.lock().settings.clone()
    }

    /// [`Session::settings`], for the server.
    pub(crate) fn settings_now(&self) -> Arc<Settings> {
        self.settings()
    }

    fn credentials(&self) -> Arc<crate::auth::SessionCredentials> {
        self.parts.lock().credentials.clone()
    }

    fn mcp(&self) -> Arc<crate::mcp::Manager> {
        self.parts.lock().mcp.clone()
    }

    /// Ends the session's MCP servers (and their processes).
    pub async fn shutdown_mcp(&self) {
        self.mcp().shutdown().await;
    }

    /// Tells the user, for as long as the session lives, when an MCP server
    /// fails to start, crashes or times out: a notice where the editor
    /// shows them, else a line of agent text.
    pub fn report_mcp(&self, cx: &ConnectionTo<Client>, client: &ClientCapabilities) {
        let Some(mut events) = self.mcp().take_events() else {
            return;
        };
        let notices = client.session.as_ref().is_some_and(|s| s.notices.is_some());
        let id = self.id.clone();
        let bus = self.bus.clone();
        let owner = self.owner.clone();
        let spawned = cx.spawn(async move {
            while let Some(event) = events.recv().await {
                tracing::warn!(server = %event.server, "{}", event.text);
                let update = if notices {
                    SessionUpdate::Notice(
                        Notice::new(NoticeSeverity::Warning, event.title).description(event.text),
                    )
                } else {
                    updates::agent_text(&format!("{}\n", event.text))
                };
                let notification = SessionNotification::new(id.clone(), update);
                bus.tell(Observed::Update(notification.clone()));
                let cx = owner.lock().cx.clone();
                if cx.send_notification(notification).is_err() {
                    break;
                }
            }
            Ok(())
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not watch the MCP servers");
        }
    }

    /// Puts a restored transcript's state back in place (`session/load`).
    pub fn restore(&self, restored: crate::session::Restored) -> Result<(), String> {
        if let Some(id) = &restored.model {
            // A model that no longer resolves or has no key leaves the
            // session on its default model; the history still loads.
            match self.settings().catalog.resolve(id) {
                Ok(model) if self.settings().can_offer(&model) => {
                    self.model_changed(&model);
                    self.state.lock().model = model;
                }
                _ => {
                    tracing::warn!(model = %id, "the session's model is not available; using the default")
                }
            }
        }
        if let Some(level) = restored.thinking {
            let mut state = self.state.lock();
            state.thinking = clamp_thinking(&state.model, level);
        }
        if let Some(mode) = restored.mode {
            self.permissions.set_mode(mode);
        }
        if let (Some(mode), Some(sandbox)) = (restored.sandbox, self.permissions.sandbox()) {
            sandbox.set_mode(mode);
        }
        if let Some(queue) = restored.queue {
            self.turns.lock().set_mode(queue);
        }
        {
            let mut state = self.state.lock();
            state.last_call = restored.last_call;
            state.client_prompt = restored.client_prompt.clone();
            state.labelled = restored.labelled;
            // The session's cost is its whole history's, not this process's.
            state.total_cost = restored
                .visible()
                .iter()
                .map(|m| match m {
                    AgentMessage::Llm {
                        message: crate::llm::Message::Assistant(a),
                    } => a.usage.cost.total,
                    _ => 0.0,
                })
                .sum();
            // Live compactions continue the ids the replay gave the earlier
            // ones: an id is unique within the session.
            state.compactions = restored
                .visible()
                .iter()
                .filter(|m| matches!(m, AgentMessage::Summary { .. }))
                .count() as u64;
        }
        let mut history = self
            .history
            .try_lock()
            .map_err(|_| "the session is busy".to_string())?;
        let (resume, synced) = restored.claude_code.clone().unzip();
        self.parts.lock().claude_code = crate::agent::claude_code::Session::new(resume, synced);
        self.state.lock().unfinished_workflow = restored.unfinished_workflow.clone();
        *history = restored.history;
        Ok(())
    }

    /// Gives the session the client's instructions; the transcript records
    /// them when they differ from the ones the session has, so that a later
    /// load without any keeps them and a reload with the same ones adds
    /// nothing.
    pub fn set_client_prompt(&self, prompt: crate::context::ClientPrompt) {
        let changed = {
            let mut state = self.state.lock();
            let changed = state.client_prompt.as_ref() != Some(&prompt);
            state.client_prompt = Some(prompt.clone());
            changed
        };
        if changed {
            self.record(transcript::Record::SystemPrompt { prompt });
        }
    }

    /// Whether the session's transcript is on disk (see
    /// [`transcript::Writer::is_written`]).
    pub fn is_written(&self) -> bool {
        self.transcript.lock().is_written()
    }

    /// Whether nothing of the session is going on: no run (a turn holds
    /// the history for its whole run), no prompt waiting, no background
    /// process. Such a session can be unloaded and loaded again later from
    /// its transcript without anyone noticing.
    pub fn is_idle(&self) -> bool {
        !self.jobs.running()
            && self.history.try_lock().is_ok()
            && self.turns.lock().idle_since().is_some()
            && !self.tools.iter().any(|tool| tool.holds_work())
    }

    /// Whether the session is idle ([`Session::is_idle`]), has been for its
    /// `[acp] session_idle_secs`, and has a transcript to come back from.
    pub fn unloadable(&self) -> bool {
        let limit = self.idle_limit();
        self.turns
            .lock()
            .idle_since()
            .is_some_and(|since| since.elapsed() >= limit)
            && self.is_idle()
            && self.is_written()
    }

    /// How long the session may stay idle in memory.
    pub fn idle_limit(&self) -> std::time::Duration {
        self.settings().config.acp.session_idle()
    }

    /// The session was used: its idle time starts again.
    pub fn touch(&self) {
        self.turns.lock().touch();
    }

    /// What opening the session again after an unload needs.
    pub fn reopen(&self) -> Reopen {
        Reopen {
            cwd: self.cwd.clone(),
            additional: self.additional.clone(),
            editor_mcp: self.editor_mcp.clone(),
            owner: self.owner(),
        }
    }

    /// Appends to the transcript. A failure is logged, not fatal: the turn
    /// goes on, and the next append tries again.
    fn record(&self, record: transcript::Record) {
        self.record_id(record);
    }

    /// [`Session::record`], returning the entry's id when it was written.
    fn record_id(&self, record: transcript::Record) -> Option<String> {
        match self.transcript.lock().append(record) {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::error!(error = %e, "cannot write the session transcript");
                None
            }
        }
    }

    /// The id a record written later with [`Session::record_as`] gets.
    fn reserve_entry(&self) -> String {
        self.transcript.lock().reserve()
    }

    fn record_as(&self, id: String, record: transcript::Record) {
        if let Err(e) = self.transcript.lock().append_as(id, record) {
            tracing::error!(error = %e, "cannot write the session transcript");
        }
    }

    /// Runs the `session_start` hooks, once; callers that come while they
    /// run wait for them.
    pub async fn session_started(&self) {
        self.started
            .get_or_init(|| self.lifecycle_hooks(agent::hooks::Event::SessionStart))
            .await;
    }

    /// Runs the hooks of a session event (`session_start`, `session_end`).
    pub async fn lifecycle_hooks(&self, event: agent::hooks::Event) {
        if self.settings().config.hooks.is_empty() {
            return;
        }
        let hooks = agent::hooks::Hooks::new(self.settings().config.hooks.clone())
            .with_sandbox(self.permissions.sandbox().cloned());
        let origin = agent::hooks::Origin {
            session_id: &self.id.0,
            cwd: &self.cwd,
        };
        hooks
            .notify(event, origin, Default::default(), &CancellationToken::new())
            .await;
    }

    pub fn cancel(&self) {
        // A helper's work has its own token.
        if let Some(child) = &self.child {
            child.cancel.cancel();
            return;
        }
        // Cancelling a session cancels what waits in it too. The waiting
        // prompts are answered first, so that the observer hears of them
        // before anything the cancelled run does as it stops.
        let waiting = self.turns.lock().cancel();
        for reply in waiting {
            reply.send(Ok(PromptResponse::new(StopReason::Cancelled)));
        }
    }

    /// `session/cancel` for the gateway's prompt `tag` alone (`chat.abort`
    /// of one run): the session's other prompts go on (see
    /// [`Turns::cancel_one`]).
    pub fn cancel_tagged(&self, tag: &str) {
        if let Some(child) = &self.child {
            child.cancel.cancel();
            return;
        }
        let cancelled = self
            .turns
            .lock()
            .cancel_one(tag, |reply| reply.tag.as_deref() == Some(tag));
        if let CancelledOne::Waiting(reply) = cancelled {
            reply.send(Ok(PromptResponse::new(StopReason::Cancelled)));
        }
    }

    /// How many prompts wait for the session's running run.
    pub fn waiting(&self) -> usize {
        self.turns.lock().waiting()
    }

    /// The session's config options, complete, as ACP wants them.
    pub fn config_options(&self) -> Vec<SessionConfigOption> {
        let state = self.state.lock();
        let current = state.model.full_id();
        let mut models: Vec<SessionConfigSelectOption> = self
            .settings()
            .catalog
            .listed_models()
            .filter(|m| self.settings().can_offer(m))
            .map(|m| {
                SessionConfigSelectOption::new(m.full_id(), m.name.clone()).description(m.full_id())
            })
            .collect();
        if !models.iter().any(|o| o.value.0.as_ref() == current) {
            models.insert(
                0,
                SessionConfigSelectOption::new(current.clone(), state.model.name.clone())
                    .description(current.clone()),
            );
        }
        let levels: Vec<SessionConfigSelectOption> = thinking_levels(&state.model)
            .into_iter()
            .map(|l| SessionConfigSelectOption::new(l.as_str(), level_name(l)))
            .collect();
        let mode = self.permissions.mode();
        let modes: Vec<SessionConfigSelectOption> = Mode::ALL
            .into_iter()
            .map(|m| SessionConfigSelectOption::new(m.id(), m.name()).description(m.description()))
            .collect();
        let mut options = vec![
            SessionConfigOption::select(MODE_OPTION, "Mode", mode.id(), modes)
                .category(SessionConfigOptionCategory::Mode)
                .description("What pincer may do without asking"),
            SessionConfigOption::select(MODEL_OPTION, "Model", current, models)
                .category(SessionConfigOptionCategory::Model)
                .description("The model that answers in this session"),
            SessionConfigOption::select(
                THOUGHT_OPTION,
                "Thinking",
                state.thinking.as_str(),
                levels,
            )
            .category(SessionConfigOptionCategory::ThoughtLevel)
            .description("How much the model reasons before it answers"),
            SessionConfigOption::select(
                QUEUE_OPTION,
                "Messages while busy",
                self.turns.lock().mode().id(),
                vec![
                    SessionConfigSelectOption::new(agent::QueueMode::Steer.id(), "Steer")
                        .description(
                            "Interrupt after the running tool; the agent reads the message next",
                        ),
                    SessionConfigSelectOption::new(agent::QueueMode::FollowUp.id(), "Follow up")
                        .description(
                            "Wait until the agent is done, then continue with the message",
                        ),
                ],
            )
            .description("What a message sent while the agent works does"),
        ];
        if let Some(sandbox) = self.permissions.sandbox() {
            let modes: Vec<SessionConfigSelectOption> = SandboxMode::ALL
                .into_iter()
                .map(|m| {
                    SessionConfigSelectOption::new(m.id(), m.name()).description(m.description())
                })
                .collect();
            options.push(
                SessionConfigOption::select(SANDBOX_OPTION, "Sandbox", sandbox.mode().id(), modes)
                    .description("Where commands may write and what they may reach"),
            );
        }
        options
    }

    /// The modes, in ACP's older `modes` form.
    pub fn mode_state(&self) -> SessionModeState {
        let modes = Mode::ALL
            .into_iter()
            .map(|m| SessionMode::new(m.id(), m.name()).description(m.description()))
            .collect();
        SessionModeState::new(self.permissions.mode().id(), modes)
    }

    /// Changes an option; the error says what is accepted.
    pub fn set_config_option(&self, id: &str, value: &str) -> Result<(), String> {
        match id {
            MODEL_OPTION => {
                let model = self
                    .settings()
                    .catalog
                    .resolve(value)
                    .map_err(|e| e.to_string())?;
                if !self.settings().can_offer(&model) {
                    return Err(self.settings().credential_hint_in_editor(&model));
                }
                let full_id = model.full_id();
                self.model_changed(&model);
                {
                    let mut state = self.state.lock();
                    state.thinking = clamp_thinking(&model, state.thinking);
                    state.model = model;
                }
                self.record(transcript::Record::ModelChange { model: full_id });
                Ok(())
            }
            THOUGHT_OPTION => {
                let mut state = self.state.lock();
                let level = ThinkingLevel::parse(value)
                    .filter(|l| thinking_levels(&state.model).contains(l))
                    .ok_or_else(|| {
                        let allowed: Vec<&str> = thinking_levels(&state.model)
                            .into_iter()
                            .map(ThinkingLevel::as_str)
                            .collect();
                        format!(
                            "thinking level `{value}` is not available for {}; choose one of: {}",
                            state.model.full_id(),
                            allowed.join(", ")
                        )
                    })?;
                state.thinking = level;
                drop(state);
                self.record(transcript::Record::ThinkingChange { level });
                Ok(())
            }
            MODE_OPTION => {
                let mode = Mode::parse(value).ok_or_else(|| unknown_mode(value))?;
                self.permissions.set_mode(mode);
                self.record(transcript::Record::ModeChange { mode });
                Ok(())
            }
            SANDBOX_OPTION => {
                let sandbox = self
                    .permissions
                    .sandbox()
                    .ok_or_else(|| "this session has no sandbox".to_string())?;
                let mode = SandboxMode::parse(value).ok_or_else(|| {
                    format!(
                        "`{value}` is not a sandbox mode; choose `workspace-write`, `read-only` or `off`"
                    )
                })?;
                let settings = sandbox.settings();
                if mode.leniency() > settings.mode.leniency() && !settings.escape {
                    return Err(format!(
                        "this session runs in the `{}` sandbox and may not leave it",
                        settings.mode.id()
                    ));
                }
                sandbox.set_mode(mode);
                self.record(transcript::Record::SandboxChange { sandbox: mode });
                Ok(())
            }
            QUEUE_OPTION => {
                let mode = agent::QueueMode::parse(value).ok_or_else(|| {
                    format!("`{value}` is not a queue mode; choose `steer` or `follow-up`")
                })?;
                self.turns.lock().set_mode(mode);
                self.record(transcript::Record::QueueChange { queue: mode });
                Ok(())
            }
            other => Err(format!(
                "unknown config option `{other}`; options are `{MODE_OPTION}`, `{SANDBOX_OPTION}`, `{MODEL_OPTION}`, `{THOUGHT_OPTION}` and `{QUEUE_OPTION}`"
            )),
        }
    }

    /// Takes one prompt (a model turn, or a command) and answers it with
    /// `respond` when it ends. Whichever connection sent it, the work
    /// talks to the session's owner; the answer goes back to the caller.
    pub async fn prompt(
        self: &Arc<Self>,
        request: Prompted,
        http: &reqwest::Client,
        respond: Respond,
    ) {
        // Not idle (nor unloaded) while the prompt is on its way in.
        let _arriving = Arriving::new(self);
        let owner = self.owner();
        let start = Start {
            tag: request.tag.clone(),
            text: prompt_text(&request.blocks),
            echo: request.from != owner.connection,
        };
        let tag = request.tag.clone();
        let here = self
            .run_prompt(request.blocks, start, request.mode, http, &owner, respond)
            .await;
        // A prompt a run took answers when its part ends.
        let Some((result, respond)) = here else {
            return;
        };
        self.refresh_commands(&owner).await;
        self.bus.tell(Observed::PromptEnded {
            session: self.id.clone(),
            tag,
            result: ended(&result),
        });
        respond(result);
    }

    /// Skills and prompt templates may have come or gone meanwhile (the
    /// turn wrote one, or the user did): the menu is checked after every
    /// prompt, commands included, before the prompt answers. The files are
    /// read off the runtime's workers.
    async fn refresh_commands(self: &Arc<Self>, owner: &Owner) {
        let me = self.clone();
        if let Ok((commands, problems)) =
            crate::parallel::file_work(move || me.discover_commands()).await
        {
            self.announce_found(&owner.cx, &owner.client, commands, problems);
        }
    }

    async fn run_prompt(
        self: &Arc<Self>,
        prompt: Vec<ContentBlock>,
        start: Start,
        mode: Option<agent::QueueMode>,
        http: &reqwest::Client,
        owner: &Owner,
        respond: Respond,
    ) -> Option<(Result<PromptResponse, Error>, Respond)> {
        let Owner {
            cx, client, drain, ..
        } = owner.clone();
        self.session_started().await;
        if self
            .settle_trust(&cx, &client, drain.clone())
            .await
            .is_err()
        {
            return Some((Ok(PromptResponse::new(StopReason::Cancelled)), respond));
        }
        let mut prompt = prompt;
        if let Some(ContentBlock::Text(first)) = prompt.first()
            && first.text.trim_start().starts_with('/')
        {
            // The skills and templates a command may name are read from
            // disk, off the runtime's workers.
            let sources = self.sources();
            let found = tokio::task::spawn_blocking(move || {
                (
                    crate::context::skills::discover(&sources).0,
                    crate::context::templates::discover(&sources).0,
                )
            })
            .await;
            let Ok((skills, templates)) = found else {
                let failed =
                    Error::internal_error().data("reading the skills and prompt templates failed");
                return Some((Err(failed), respond));
            };
            match commands::parse(&first.text, &skills, &templates) {
                Ok(None) => {}
                Ok(Some(Command::Prompt(text))) => {
                    prompt[0] = ContentBlock::Text(TextContent::new(text));
                }
                Ok(Some(command)) => {
                    self.begin(&cx, start);
                    let result = self.command(command, http, cx, client, drain).await;
                    return Some((result, respond));
                }
                Err(message) => {
                    self.say(&cx, &message);
                    return Some((Ok(PromptResponse::new(StopReason::EndTurn)), respond));
                }
            }
        }
        let content = match updates::prompt_content(prompt, &self.cwd).await {
            Ok(content) => content,
            Err(e) => return Some((Err(invalid_params(e.to_string())), respond)),
        };
        let reply = self.reply(start.tag.clone(), respond);
        // A prompt the gateway cancelled while it was on its way in is
        // answered here; the check and the submit are one step, so that a
        // cancel comes either before (and is found) or after (and finds it
        // in the queue).
        let submitted = {
            let mut turns = self.turns.lock();
            if start
                .tag
                .as_deref()
                .is_some_and(|tag| turns.cancelled_early(tag))
            {
                Err(reply)
            } else {
                Ok(turns.submit(reply, mode, Pending { content, start }))
            }
        };
        let submitted = match submitted {
            Ok(submitted) => submitted,
            Err(reply) => {
                reply.send(Ok(PromptResponse::new(StopReason::Cancelled)));
                return None;
            }
        };
        let Submitted::Run(Pending { content, start }) = submitted else {
            return None;
        };
        // The runs go on in a task of the owner's connection, so that this
        // request can answer as soon as a later prompt takes over.
        let me = self.clone();
        let http = http.clone();
        let driver = cx.clone();
        let spawned = cx.spawn(async move {
            me.drive(content, start, &http, driver, client, drain).await;
            Ok(())
        });
        if let Err(e) = spawned {
            let current = self.turns.lock().not_started();
            if let Some(reply) = current {
                reply.send(Err(e));
            }
        }
        None
    }

    /// Runs `content`, then whatever prompts queued up meanwhile that no
    /// run took in, answering each request as its part ends.
    async fn drive(
        self: Arc<Self>,
        mut content: Vec<crate::llm::Content>,
        mut start: Start,
        http: &reqwest::Client,
        cx: ConnectionTo<Client>,
        client: ClientCapabilities,
        drain: Arc<Drain>,
    ) {
        loop {
            self.begin(&cx, start);
            let result = self
                .run_content(content, http, cx.clone(), client.clone(), drain.clone())
                .await;
            self.refresh_commands(&self.owner()).await;
            let finished = self.turns.lock().finish();
            if let Some(reply) = finished.done {
                reply.send(result);
            }
            match finished.next {
                Some(next) => {
                    content = next.content;
                    start = next.start;
                }
                None => return,
            }
        }
    }

    /// One run of the agent for a prompt.
    async fn run_content(
        self: &Arc<Self>,
        content: Vec<crate::llm::Content>,
        http: &reqwest::Client,
        cx: ConnectionTo<Client>,
        client: ClientCapabilities,
        drain: Arc<Drain>,
    ) -> Result<PromptResponse, Error> {
        let mut history = self.history.lock().await;
        // The first prompt waits for MCP servers still starting (each has
        // its startup timeout), so their tools are there from the start.
        self.mcp().ready().await;
        let subagents = self.subagents(http, &cx, &client, &drain);
        // The settings, credentials and context files are read off the
        // runtime's workers (a hundred runs starting at once would hold
        // up the frames of those streaming). The run's cancel token comes
        // first: a `session/cancel` sent while they are read stops it.
        let cancel = self.turns.lock().start_work();
        let me = self.clone();
        let (config, cancel, tools) =
            crate::parallel::file_work(move || me.turn_config_with(subagents, Some(cancel)))
                .await
                .map_err(|_| Error::internal_error().data("preparing the turn failed"))??;
        // Background work that ended since the last turn: the model reads
        // it before the prompt.
        let finished = self.jobs.take_undelivered();
        let content = if finished.is_empty() {
            content
        } else {
            let mut with = vec![crate::llm::Content::text(
                finished
                    .iter()
                    .map(tools::jobs::Finished::for_model)
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            )];
            with.extend(content);
            with
        };
        let host = self.host(cx, &client, drain);
        let time = agent::time_line(&config);
        *host.prompt.lock() = self.record_id(transcript::Record::Message {
            message: crate::llm::Message::User {
                content: content.clone(),
            },
            time: Some(time.clone()),
        });
        let first_prompt = history.is_empty().then(|| {
            content
                .iter()
                .filter_map(|c| match c {
                    crate::llm::Content::Text { text } => Some(text.as_str()),
                    crate::llm::Content::Image { .. } => None,
                })
                .collect::<Vec<_>>()
                .join("\n")
        });
        // The first prompt names the session in the editor's history at
        // once; a model improves the name after the turn.
        if let Some(title) = first_prompt
            .as_deref()
            .and_then(crate::agent::title::title_from)
        {
            let update = SessionInfoUpdate::new().title(title).updated_at(
                humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            );
            host.send(SessionUpdate::SessionInfoUpdate(update));
        }
        let stop = agent::run_timed(
            http,
            &config,
            &tools,
            &self.cwd,
            &mut history,
            content,
            time,
            &host,
            &cancel,
        )
        .await;
        match &stop {
            RunStop::Failed(error) => {
                self.forget_unanswered(&mut history, &config.model, Some(error));
            }
            RunStop::Cancelled => self.forget_unanswered(&mut history, &config.model, None),
            _ => {}
        }
        if let Some(prompt) = first_prompt
            && !matches!(stop, RunStop::Failed(_) | RunStop::Cancelled)
        {
            let answer = history
                .iter()
                .rev()
                .find_map(|m| match m {
                    AgentMessage::Llm {
                        message: crate::llm::Message::Assistant(a),
                    } if !a.text().trim().is_empty() && !agent::is_silent(&a.text()) => {
                        Some(a.text())
                    }
                    _ => None,
                })
                .unwrap_or_default();
            self.name_later(http.clone(), host.cx.clone(), prompt, answer);
        }
        if let RunStop::LoopDetected(text) | RunStop::Blocked(text) = &stop {
            self.record(transcript::Record::Notice { text: text.clone() });
            self.say(&host.cx, text);
        }
        match (updates::stop_reason(&stop), stop) {
            (Some(reason), _) => Ok(PromptResponse::new(reason)),
            (None, RunStop::Failed(error)) => {
                Err(provider_error(&error, &self.settings(), &config.model))
            }
            (None, _) => Err(Error::internal_error()),
        }
    }
}

impl Session {
    /// After a run failed (`error`) or was cancelled: a prompt the model
    /// never answered leaves what the model sees, so that the next prompt
    /// is not sent glued to it. The transcript keeps it with the failed or
    /// cancelled call (which `restore` drops the same way), so a replay
    /// shows it, and the error that ended it.
    fn forget_unanswered(
        &self,
        history: &mut Vec<AgentMessage>,
        model: &Model,
        error: Option<&LlmError>,
    ) {
        if let Some(end) = crate::session::unanswered_end(history, model, error) {
            self.record(end);
        }
        if let Some(at) = crate::session::unanswered_prompt(history) {
            history.truncate(at);
        }
    }

    /// Asks a cheap model for a better title in the background; the title
    /// goes into the transcript, beside it for listings, and to the editor.
    fn name_later(
        self: &Arc<Self>,
        http: reqwest::Client,
        cx: ConnectionTo<Client>,
        prompt: String,
        answer: String,
    ) {
        let session_model = self.state.lock().model.clone();
        let model = crate::agent::title::model_for(&self.settings(), &session_model);
        let Some(model) = model else { return };
        let key = self.settings().own_call_key(&model, &session_model);
        if key.is_none() && self.settings().claude_code(&session_model).is_some() {
            // A session on Claude Code's login alone: pincer has no
            // credential of its own to ask for a title with.
            return;
        }
        let session = self.clone();
        tokio::spawn(async move {
            let title = match crate::agent::title::generate(
                &http,
                &model,
                key.as_ref(),
                &prompt,
                &answer,
            )
            .await
            {
                Ok(title) => title,
                Err(e) => {
                    tracing::info!(model = %model.full_id(), error = %e, "no title from the model; the session keeps its first prompt as title");
                    return;
                }
            };
            let path = session.transcript.lock().path().to_path_buf();
            if !path.exists() {
                return; // deleted meanwhile
            }
            if session.state.lock().labelled {
                tracing::info!(session = %session.id.0, "the user named the session meanwhile; the model's title is not used");
                return;
            }
            session.record(transcript::Record::Title {
                title: title.clone(),
                by_user: false,
            });
            if let Err(e) = crate::session::save_title(&path, &title) {
                tracing::warn!(error = %e, "cannot save the session title");
            }
            let update = SessionInfoUpdate::new().title(title).updated_at(
                humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            );
            session.send_update(&cx, SessionUpdate::SessionInfoUpdate(update));
        });
    }
}

impl Session {
    /// The user's own name for the session (a gateway client renamed it):
    /// recorded in the transcript, kept beside it for listings, sent to the
    /// owner as the session's title; a model no longer names the session.
    pub fn rename(&self, label: &str) -> std::io::Result<()> {
        self.state.lock().labelled = true;
        self.record(transcript::Record::Title {
            title: label.to_string(),
            by_user: true,
        });
        let path = self.transcript.lock().path().to_path_buf();
        crate::session::save_label(&path, label)?;
        let update = SessionInfoUpdate::new()
            .title(label.to_string())
            .updated_at(
                humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            );
        self.notify_owner(SessionUpdate::SessionInfoUpdate(update));
        Ok(())
    }
}

impl Session {
    fn sources(&self) -> crate::context::Sources {
        crate::context::Sources::from_settings(&self.settings(), &self.cwd)
    }

    /// The run's configuration (with a fresh system prompt) and its cancel
    /// token, which `session/cancel` reaches.
    fn turn_config(&self) -> Result<(agent::AgentConfig, CancellationToken), Error> {
        self.turn_config_with(None, None)
            .map(|(config, cancel, _)| (config, cancel))
    }

    /// [`Session::turn_config`] for a run that may start helpers
    /// (`subagents`), with the tools it has: the session's, and `task`.
    fn turn_config_with(
        &self,
        subagents: Option<Arc<agent::subagent::Subagents>>,
        cancel: Option<CancellationToken>,
    ) -> Result<TurnSetup, Error> {
        let (model, thinking, last_call, client_prompt) = {
            let state = self.state.lock();
            if !self.settings().has_credentials(&state.model) {
                return Err(auth_required(
                    self.settings().credential_hint_in_editor(&state.model),
                ));
            }
            (
                state.model.clone(),
                state.thinking,
                state.last_call,
                state.client_prompt.clone(),
            )
        };
        let cancel = cancel.unwrap_or_else(|| self.turns.lock().start_work());
        let guard = agent::setup::tool_guard(
            &self.settings(),
            &model,
            self.loops.clone(),
            &self.id.0,
            &self.cwd,
            self.permissions.sandbox().cloned(),
        )
        .map_err(|e| invalid_params(format!("the tool policy in config.toml is invalid: {e}")))?;
        let mut tools = self.tools.clone();
        if let Some(subagents) = subagents.as_ref().filter(|s| s.may_delegate()) {
            tools.push(Arc::new(agent::subagent::TaskTool::new(
                &subagents.definitions,
                subagents.background.is_some(),
            )));
        }
        // The prompt lists only the tools the policy lets the model use.
        let mode = self.permissions.mode();
        let offered: Vec<Arc<dyn Tool>> = tools
            .iter()
            .chain(self.mcp().tools_now().iter())
            .filter(|t| guard.offers(t.as_ref(), mode))
            .cloned()
            .collect();
        // Files are read outside the lock.
        let system_prompt = crate::context::system_prompt_with(
            &self.sources(),
            &model,
            &offered,
            client_prompt.as_ref(),
        );
        for problem in &system_prompt.problems {
            tracing::warn!("{problem}");
        }
        let mut config = agent::setup::agent_config(
            &self.settings(),
            model,
            thinking,
            system_prompt.text,
            self.permissions.clone(),
            Arc::new(guard),
        );
        config.last_call = last_call;
        config.credentials = Some(self.credentials().clone());
        config.extra_tools = Some(self.mcp().clone());
        config.session_id = Some(self.id.0.to_string());
        config.checkpoints = self.checkpoints.clone();
        let claude_code = self.parts.lock().claude_code.clone();
        agent::setup::use_claude_code(&self.settings(), &mut config, claude_code);
        // Claude Code has helpers of its own.
        if config.runtime.is_none() {
            config.subagents = subagents;
        } else {
            tools.retain(|t| t.name() != agent::subagent::TASK);
        }
        Ok((config, cancel, tools))
    }

    /// The agent's view of the editor for one turn.
    fn host(
        self: &Arc<Self>,
        cx: ConnectionTo<Client>,
        client: &ClientCapabilities,
        drain: Arc<Drain>,
    ) -> AcpHost {
        let files = Arc::new(EditorFiles {
            cx: cx.clone(),
            session: self.id.clone(),
            drain: drain.clone(),
            read: client.fs.read_text_file,
            write: client.fs.write_text_file,
        });
        let terminals: Option<Arc<dyn Terminals>> = client.terminal.then(|| {
            Arc::new(EditorTerminals {
                cx: cx.clone(),
                session: self.id.clone(),
                drain: drain.clone(),
            }) as Arc<dyn Terminals>
        });
        let asker = Arc::new(host::EditorAsker {
            session: self.clone(),
            cx: cx.clone(),
            drain: drain.clone(),
            form: client
                .elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some()),
        });
        AcpHost {
            session: self.clone(),
            cx,
            notices: client.session.as_ref().is_some_and(|s| s.notices.is_some()),
            compaction: client
                .session
                .as_ref()
                .is_some_and(|s| s.compaction.is_some()),
            plan_operations: client.plan.is_some(),
            drain,
            files,
            terminals,
            asker,
            calls: Mutex::new(std::collections::HashMap::new()),
            names: Mutex::new(std::collections::HashMap::new()),
            message: Mutex::new(None),
            prompt: Mutex::new(None),
            live_terminals: live_terminal::wanted(client)
                .then(|| live_terminal::LiveTerminals::new(self.cwd.clone())),
            conversation: true,
        }
    }

    /// Pins the session to auth profile `profile` of `model`'s provider.
    fn pin_profile(&self, model: &str, profile: &str) -> Result<(), String> {
        let model = self
            .settings()
            .catalog
            .resolve(model)
            .map_err(|e| e.to_string())?;
        let store = crate::auth::Store::new(crate::auth::profiles_path(
            &self.settings().paths.config_dir,
            crate::auth::DEFAULT_AGENT,
        ));
        let profiles = store.read().map_err(|e| e.to_string())?;
        match profiles.profiles.get(profile) {
            Some(credential) if credential.provider() == model.provider => {
                self.credentials().pin(Some(profile.to_string()));
                Ok(())
            }
            Some(credential) => Err(format!(
                "Profile {profile} is for {}, not {}.",
                credential.provider(),
                model.provider
            )),
            None => Err(format!(
                "There is no profile {profile}; `pincer auth list` shows them."
            )),
        }
    }

    /// Sends a short agent message (the answer to a command).
    fn say(&self, cx: &ConnectionTo<Client>, text: &str) {
        self.notify(cx, updates::agent_text(text));
    }

    fn notify(&self, cx: &ConnectionTo<Client>, update: SessionUpdate) {
        self.send_update(cx, update);
    }

    /// Announces the slash commands when they differ from the last
    /// announcement (skills and templates come and go), and reports broken
    /// skills and templates once.
    pub fn announce_commands(&self, cx: &ConnectionTo<Client>, client: &ClientCapabilities) {
        let (commands, problems) = self.discover_commands();
        self.announce_found(cx, client, commands, problems);
    }

    /// The slash commands the session's skills, templates and workflows
    /// make, and what was wrong with any of them (reads files).
    fn discover_commands(
        &self,
    ) -> (
        Vec<agent_client_protocol::v1::schema::AvailableCommand>,
        Vec<String>,
    ) {
        let sources = self.sources();
        let (skills, mut problems) = crate::context::skills::discover(&sources);
        let (templates, more) = crate::context::templates::discover(&sources);
        problems.extend(more);
        let (workflows, workflow_problems) = crate::workflow::discover(&self.settings());
        problems.extend(workflow_problems.iter().map(ToString::to_string));
        let workflows: Vec<(String, String)> = workflows
            .values()
            .map(|w| (w.name.clone(), w.description.clone()))
            .collect();
        (
            commands::available(&skills, &templates, &workflows),
            problems,
        )
    }

    /// [`Session::announce_commands`] for what was found.
    fn announce_found(
        &self,
        cx: &ConnectionTo<Client>,
        client: &ClientCapabilities,
        commands: Vec<agent_client_protocol::v1::schema::AvailableCommand>,
        mut problems: Vec<String>,
    ) {
        let mut announced = self.announced.lock();
        if announced.commands.as_ref() != Some(&commands) {
            announced.commands = Some(commands.clone());
            self.notify(
                cx,
                SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
            );
        }
        problems.retain(|p| !announced.problems.contains(p));
        for problem in problems {
            announced.problems.push(problem.clone());
            let notices = client.session.as_ref().is_some_and(|s| s.notices.is_some());
            self.notify(
                cx,
                if notices {
                    SessionUpdate::Notice(
                        Notice::new(NoticeSeverity::Warning, "Skipped a skill or prompt")
                            .description(problem),
                    )
                } else {
                    updates::agent_text(&format!("Warning: {problem}\n\n"))
                },
            );
        }
    }

    /// Runs a command that acts on the session instead of prompting.
    async fn command(
        self: &Arc<Self>,
        command: Command,
        http: &reqwest::Client,
        cx: ConnectionTo<Client>,
        client: ClientCapabilities,
        drain: Arc<Drain>,
    ) -> Result<PromptResponse, Error> {
        let option = |id: &str, value: &str, label: &str| {
            if value.is_empty() {
                let current = self
                    .config_options()
                    .into_iter()
                    .find(|o| o.id.0.as_ref() == id)
                    .map(|o| describe_option(&o))
                    .unwrap_or_default();
                self.say(&cx, &format!("{label}: {current}\n"));
                return;
            }
            match self.set_config_option(id, value) {
                Ok(()) => {
                    if id == MODE_OPTION {
                        self.notify(
                            &cx,
                            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                                self.mode_state().current_mode_id,
                            )),
                        );
                    }
                    self.notify(
                        &cx,
                        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                            self.config_options(),
                        )),
                    );
                    self.say(&cx, &format!("{label} set to {value}.\n"));
                }
                Err(message) => self.say(&cx, &format!("{message}\n")),
            }
        };
        match command {
            Command::Model(value) => match value.split_once('@') {
                // `/model provider/model@profile` also pins the profile.
                Some((model, profile)) => match self.pin_profile(model, profile) {
                    Ok(()) => {
                        option(MODEL_OPTION, model, "Model");
                        self.say(&cx, &format!("Using profile {profile}.\n"));
                    }
                    Err(message) => self.say(&cx, &format!("{message}\n")),
                },
                None => option(MODEL_OPTION, &value, "Model"),
            },
            Command::Think(value) => option(THOUGHT_OPTION, &value, "Thinking"),
            Command::Mode(value) => option(MODE_OPTION, &value, "Mode"),
            Command::Sandbox(value) => option(SANDBOX_OPTION, &value, "Sandbox"),
            Command::Tasks(args) => {
                let text = self.tasks_command(&args);
                self.say(&cx, &format!("{text}\n"));
            }
            Command::Compact(instructions) => {
                let mut history = self.history.lock().await;
                let (config, cancel) = self.turn_config()?;
                // Replayed as the user's message, so that the compaction
                // after it reads as its answer.
                self.record(transcript::Record::Command {
                    text: if instructions.is_empty() {
                        "/compact".to_string()
                    } else {
                        format!("/compact {instructions}")
                    },
                });
                let host = self.host(cx.clone(), &client, drain);
                let instructions = (!instructions.is_empty()).then_some(instructions.as_str());
                let result = agent::compact_history(
                    http,
                    &config,
                    &mut history,
                    &host,
                    &cancel,
                    agent::compaction::Reason::Manual,
                    instructions,
                )
                .await;
                // A `/compact` the editor cancelled answers like any
                // cancelled prompt; the history is left as it was.
                if cancel.is_cancelled() {
                    return Ok(PromptResponse::new(StopReason::Cancelled));
                }
                if let Ok(done) = result {
                    self.notify(
                        &cx,
                        SessionUpdate::UsageUpdate(UsageUpdate::new(
                            done.tokens_after,
                            config.model.context_window,
                        )),
                    );
                }
            }
            Command::Workflow(args) => {
                return self.workflow(&args, http, cx, client, drain).await;
            }
            Command::Travel(travel) => {
                let travel = match travel {
                    Some(travel) => rewind::Travel::Go(travel),
                    None => rewind::Travel::List,
                };
                return self.time_travel(travel, cx, &client, drain).await;
            }
            Command::Prompt(_) => {}
        }
        Ok(PromptResponse::new(StopReason::EndTurn))
    }
}

/// Starts the editor's MCP servers and the configured ones. An editor's
/// server replaces a configured one of the same name; the config may turn
/// either off (`enabled = false`). A trusted project's servers never take
/// a name that is already used. Stdio servers run in the session's
/// sandbox ([`crate::mcp::confine`]).
fn start_mcp(
    settings: &Settings,
    cwd: &std::path::Path,
    editor: Vec<crate::mcp::ServerSpec>,
    sandbox: Option<&crate::tools::sandbox::Sandbox>,
) -> Arc<crate::mcp::Manager> {
    let config = &settings.config.mcp;
    let names: Vec<String> = editor.iter().map(|e| e.name.clone()).collect();
    let mut specs = settings.mcp_specs(cwd, &names);
    specs.extend(editor.into_iter().filter(|s| !config.disabled(&s.name)));
    let specs = crate::mcp::confine(specs, sandbox, config);
    crate::mcp::Manager::start(specs, vec![cwd.to_path_buf()], config.startup_timeout())
}

/// An option's current value and its choices, for `/model` and friends.
fn describe_option(option: &SessionConfigOption) -> String {
    let value = serde_json::to_value(option).unwrap_or_default();
    let current = value["currentValue"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let choices: Vec<String> = value["options"]
        .as_array()
        .map(|options| {
            options
                .iter()
                .filter_map(|o| o["value"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    format!("{current} (choose from: {})", choices.join(", "))
}

/// The JSON-RPC error a failed run answers with.
fn provider_error(error: &LlmError, settings: &Settings, model: &Model) -> Error {
    match error {
        // The provider's words, then which credential it turned down and
        // how to replace it (never the key itself).
        LlmError::Auth { .. } => auth_required(format!(
            "{}. {}",
            error.to_string().trim_end_matches('.'),
            settings.credential_hint_in_editor(model)
        )),
        _ => Error::new(Error::internal_error().code, error.to_string())
            .data(serde_json::json!({ "message": error.to_string() })),
    }
}

fn thinking_levels(model: &Model) -> Vec<ThinkingLevel> {
    if model.reasoning {
        ThinkingLevel::ALL.to_vec()
    } else {
        vec![ThinkingLevel::Off]
    }
}

fn clamp_thinking(model: &Model, level: ThinkingLevel) -> ThinkingLevel {
    if model.reasoning {
        level
    } else {
        ThinkingLevel::Off
    }
}

fn level_name(level: ThinkingLevel) -> &'static str {
    match level {
        ThinkingLevel::Off => "Off",
        ThinkingLevel::Minimal => "Minimal",
        ThinkingLevel::Low => "Low",
        ThinkingLevel::Medium => "Medium",
        ThinkingLevel::High => "High",
    }
}

fn unknown_mode(value: &str) -> String {
    let ids: Vec<&str> = Mode::ALL.into_iter().map(Mode::id).collect();
    format!("unknown mode `{value}`; modes are: {}", ids.join(", "))
}
