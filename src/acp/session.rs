//! One ACP session: its working directory, model and thinking level, its
//! history, and the token that cancels its current turn.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, ContentChunk, Notice, NoticeSeverity, PermissionOption,
    PermissionOptionKind, PromptResponse, RequestPermissionOutcome, RequestPermissionRequest,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionId,
    SessionNotification, SessionUpdate, TextContent, ToolCallUpdate, ToolCallUpdateFields,
};
use agent_client_protocol::{Client, Error};
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::transport::Drain;
use super::{auth_required, invalid_params, lock, updates};
use crate::agent::{self, AgentConfig, AgentEvent, AgentHost, AgentMessage, Permission, RunStop};
use crate::config::Settings;
use crate::llm::{LlmError, Model, StreamConfig, ThinkingLevel, ToolCall};
use crate::tools::{self, CallInfo, Tool};

pub const MODEL_OPTION: &str = "model";
pub const THOUGHT_OPTION: &str = "thought_level";

pub struct Session {
    id: SessionId,
    cwd: PathBuf,
    settings: Settings,
    tools: Vec<Arc<dyn Tool>>,
    state: Mutex<State>,
    /// Held by a turn for its whole run; later prompts wait here.
    history: tokio::sync::Mutex<Vec<AgentMessage>>,
}

struct State {
    model: Model,
    thinking: ThinkingLevel,
    /// The running turn's token; replaced at the start of every turn.
    cancel: CancellationToken,
    total_cost: f64,
    /// Tools the user allowed or rejected "always" in this session.
    always_allow: HashSet<String>,
    always_reject: HashSet<String>,
}

impl Session {
    pub fn new(id: String, cwd: PathBuf, settings: Settings, model: Model) -> Self {
        let thinking = clamp_thinking(&model, settings.thinking());
        Self {
            id: SessionId::new(id),
            cwd,
            settings,
            tools: tools::builtin(),
            state: Mutex::new(State {
                model,
                thinking,
                cancel: CancellationToken::new(),
                total_cost: 0.0,
                always_allow: HashSet::new(),
                always_reject: HashSet::new(),
            }),
            history: tokio::sync::Mutex::new(Vec::new()),
        }
    }

    pub fn cancel(&self) {
        lock(&self.state).cancel.cancel();
    }

    /// The session's config options, complete, as ACP wants them.
    pub fn config_options(&self) -> Vec<SessionConfigOption> {
        let state = lock(&self.state);
        let current = state.model.full_id();
        let mut models: Vec<SessionConfigSelectOption> = self
            .settings
            .catalog
            .listed_models()
            .filter(|m| self.settings.has_credentials(m))
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
        vec![
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
        ]
    }

    /// Changes an option; the error says what is accepted.
    pub fn set_config_option(&self, id: &str, value: &str) -> Result<(), String> {
        match id {
            MODEL_OPTION => {
                let model = self
                    .settings
                    .catalog
                    .resolve(value)
                    .map_err(|e| e.to_string())?;
                if !self.settings.has_credentials(&model) {
                    return Err(self.settings.credential_hint(&model));
                }
                let mut state = lock(&self.state);
                state.thinking = clamp_thinking(&model, state.thinking);
                state.model = model;
                Ok(())
            }
            THOUGHT_OPTION => {
                let mut state = lock(&self.state);
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
                Ok(())
            }
            other => Err(format!(
                "unknown config option `{other}`; options are `{MODEL_OPTION}` and `{THOUGHT_OPTION}`"
            )),
        }
    }

    /// Runs one prompt turn to its end.
    pub async fn prompt(
        self: &Arc<Self>,
        prompt: Vec<ContentBlock>,
        http: &reqwest::Client,
        cx: ConnectionTo<Client>,
        client: ClientCapabilities,
        drain: Arc<Drain>,
    ) -> Result<PromptResponse, Error> {
        let content = updates::prompt_content(prompt, &self.cwd)
            .await
            .map_err(|e| invalid_params(e.to_string()))?;
        let mut history = self.history.lock().await;
        let (config, cancel) = {
            let mut state = lock(&self.state);
            if !self.settings.has_credentials(&state.model) {
                return Err(auth_required(self.settings.credential_hint(&state.model)));
            }
            state.cancel = CancellationToken::new();
            let config = AgentConfig {
                key: self.settings.api_key(&state.model),
                model: state.model.clone(),
                thinking: state.thinking,
                system_prompt: crate::context::system_prompt(&self.cwd, &state.model, &self.tools),
                max_turns: self.settings.max_turns(),
                stream: StreamConfig {
                    idle_timeout: Duration::from_secs(
                        self.settings.config.stream_idle_timeout.unwrap_or(120),
                    ),
                },
                max_retries: self.settings.config.max_retries.unwrap_or(3),
                retry_base_delay: Duration::from_millis(
                    self.settings.config.retry_base_delay_ms.unwrap_or(2000),
                ),
            };
            (config, state.cancel.clone())
        };
        let host = AcpHost {
            session: self.clone(),
            cx,
            notices: client.session.as_ref().is_some_and(|s| s.notices.is_some()),
            drain,
        };
        let stop = agent::run(
            http,
            &config,
            &self.tools,
            &self.cwd,
            &mut history,
            content,
            &host,
            &cancel,
        )
        .await;
        match (updates::stop_reason(&stop), stop) {
            (Some(reason), _) => Ok(PromptResponse::new(reason)),
            (None, RunStop::Failed(error)) => {
                Err(provider_error(&error, &self.settings, &config.model))
            }
            (None, _) => Err(Error::internal_error()),
        }
    }
}

/// The JSON-RPC error a failed run answers with.
fn provider_error(error: &LlmError, settings: &Settings, model: &Model) -> Error {
    match error {
        LlmError::Auth { .. } => {
            auth_required(format!("{error}. {}", settings.credential_hint(model)))
        }
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

/// The agent's view of the editor during one turn.
struct AcpHost {
    session: Arc<Session>,
    cx: ConnectionTo<Client>,
    notices: bool,
    drain: Arc<Drain>,
}

impl AcpHost {
    fn send(&self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session.id.clone(), update);
        if let Err(e) = self.cx.send_notification(notification) {
            tracing::debug!(error = %e, "could not send session/update");
        }
    }
}

impl AgentHost for AcpHost {
    fn emit(&self, event: AgentEvent) {
        if let AgentEvent::MessageEnd(message) = &event {
            lock(&self.session.state).total_cost += message.usage.cost.total;
        }
        if let AgentEvent::Retry {
            attempt,
            delay,
            error,
        } = &event
        {
            let text = format!(
                "{error}. Retrying in {:.1} s (attempt {attempt}).",
                delay.as_secs_f64()
            );
            self.send(if self.notices {
                SessionUpdate::Notice(
                    Notice::new(NoticeSeverity::Warning, "Model call failed").description(text),
                )
            } else {
                SessionUpdate::AgentThoughtChunk(ContentChunk::new(ContentBlock::Text(
                    TextContent::new(format!("{text}\n")),
                )))
            });
            return;
        }
        // Only usage reports carry the cost; deltas skip the lock.
        let total_cost = match event {
            AgentEvent::TurnEnd { .. } => lock(&self.session.state).total_cost,
            _ => 0.0,
        };
        if let Some(update) = updates::session_update(&event, total_cost) {
            self.send(update);
        }
    }

    fn request_permission<'a>(
        &'a self,
        call: &'a ToolCall,
        info: &'a CallInfo,
        reason: &'a str,
    ) -> BoxFuture<'a, Permission> {
        Box::pin(async move {
            {
                let state = lock(&self.session.state);
                if state.always_reject.contains(&call.name) {
                    return Permission::Reject;
                }
                if state.always_allow.contains(&call.name) {
                    return Permission::Allow;
                }
            }
            if self.drain.is_closed() {
                return Permission::Reject;
            }
            let options = vec![
                PermissionOption::new("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
                PermissionOption::new(
                    "allow_always",
                    format!("Always allow {}", call.name),
                    PermissionOptionKind::AllowAlways,
                ),
                PermissionOption::new("reject_once", "Reject", PermissionOptionKind::RejectOnce),
                PermissionOption::new(
                    "reject_always",
                    format!("Always reject {}", call.name),
                    PermissionOptionKind::RejectAlways,
                ),
            ];
            let fields = ToolCallUpdateFields::new()
                .title(format!("{} — {reason}", info.title))
                .raw_input(call.arguments.clone());
            let request = RequestPermissionRequest::new(
                self.session.id.clone(),
                ToolCallUpdate::new(call.id.clone(), fields),
                options,
            );
            let answer = tokio::select! {
                answer = self.cx.send_request(request).block_task() => answer,
                // The editor is gone and can no longer answer.
                () = self.drain.closed() => return Permission::Reject,
            };
            let outcome = match answer {
                Ok(response) => response.outcome,
                Err(e) => {
                    tracing::warn!(error = %e, "permission request failed; treating it as rejected");
                    return Permission::Reject;
                }
            };
            match outcome {
                RequestPermissionOutcome::Selected(selected) => {
                    let mut state = lock(&self.session.state);
                    match selected.option_id.0.as_ref() {
                        "allow_once" => Permission::Allow,
                        "allow_always" => {
                            state.always_allow.insert(call.name.clone());
                            Permission::Allow
                        }
                        "reject_always" => {
                            state.always_reject.insert(call.name.clone());
                            Permission::Reject
                        }
                        _ => Permission::Reject,
                    }
                }
                RequestPermissionOutcome::Cancelled => Permission::Cancelled,
                _ => Permission::Reject,
            }
        })
    }
}
