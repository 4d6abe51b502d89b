//! The agent loop: prompt → stream from the model → run the tools it asks
//! for → feed back the results → repeat until the model stops.
//!
//! The loop knows nothing of ACP or any other frontend. It reports every step
//! as an [`AgentEvent`] to an [`AgentHost`], which also answers permission
//! questions. The invariants of ARCHITECTURE.md hold here: every tool call gets a
//! start, an end and a result (even when it is refused, fails or is
//! cancelled); results pair with calls by id; the history passes
//! [`transform_context`] and [`convert_to_llm`] before each model call; a
//! cancelled run stops the stream and the tools and records what happened.

pub mod claude_code;
pub mod clock;
pub mod compaction;
mod escape;
pub mod failover;
pub mod guard;
pub mod hooks;
pub mod loops;
mod memory;
pub mod permission;
pub mod policy;
pub mod prune;
pub mod setup;
pub mod subagent;
pub mod title;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use crate::config::QueueMode;
use crate::context::SILENT_REPLY;
use crate::llm::{
    self, AssistantMessage, Content, LlmError, Message, MessageBuilder, Model, Request, Secret,
    StopReason, StreamConfig, StreamEvent, ThinkingLevel, ToolCall, ToolResultMessage, ToolSpec,
    Usage,
};
use crate::tools::{
    CallInfo, Display, LocalWorkspace, Terminals, Tool, ToolContext, ToolOutput, Workspace,
};
pub use permission::{Answer, Decision, Mode, Permissions, Sandboxing};

/// An entry of a session's history. Only `Llm` entries reach the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AgentMessage {
    Llm {
        message: Message,
    },
    /// Something pincer told the user (a retry, a failure). App-only.
    Notice {
        text: String,
    },
    /// What compaction left of the older history; the model sees it as a
    /// user message before the kept messages.
    Summary {
        summary: String,
        /// The context's size before it was compacted.
        tokens_before: u64,
    },
    /// When the user sent the message that follows, as the model reads it
    /// with that message. Kept in the history so that every later call
    /// sends the same bytes for it (the time of day stays out of the system
    /// prompt, which would otherwise change the cached prefix every
    /// minute); never shown to the user. The transcript stores it with its
    /// user message (`time`), so a session loaded by another process sends
    /// it again byte for byte.
    Time {
        text: String,
    },
}

/// Prepares the history for the next model call: pruning, compaction and
/// injections happen here. Nothing needs transforming yet.
pub fn transform_context(history: &[AgentMessage]) -> Vec<AgentMessage> {
    history.to_vec()
}

/// Keeps what the model may see: user, assistant and tool-result messages,
/// a compaction summary as a user message (joined with the user message
/// after it, so that turns still alternate) and the time a user message
/// was sent, as a line closing that message.
pub fn convert_to_llm(history: Vec<AgentMessage>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(history.len());
    let mut summary: Option<Content> = None;
    let mut time: Option<Content> = None;
    for entry in history {
        match entry {
            AgentMessage::Llm {
                message: Message::User { content },
            } if time.is_some() => {
                let content = content.into_iter().chain(time.take()).collect();
                out.extend(convert_to_llm_one(&mut summary, Message::User { content }));
            }
            AgentMessage::Llm { message } => {
                // A time line belongs to the user message right after it.
                time = None;
                out.extend(convert_to_llm_one(&mut summary, message));
            }
            AgentMessage::Time { text } => time = Some(Content::text(text)),
            AgentMessage::Summary { summary: text, .. } => {
                summary = Some(Content::text(format!(
                    "{}\n\n<summary>\n{text}\n</summary>",
                    compaction::SUMMARY_PREFIX
                )));
            }
            AgentMessage::Notice { .. } => {}
        }
    }
    if let Some(summary) = summary {
        out.push(Message::User {
            content: vec![summary],
        });
    }
    out
}

/// One model-visible message, joined with a pending compaction summary.
fn convert_to_llm_one(summary: &mut Option<Content>, message: Message) -> Vec<Message> {
    match (summary.take(), message) {
        (Some(summary), Message::User { content }) => vec![Message::User {
            content: std::iter::once(summary).chain(content).collect(),
        }],
        (Some(summary), message) => vec![
            Message::User {
                content: vec![summary],
            },
            message,
        ],
        (None, message) => vec![message],
    }
}

/// What the loop reports, in order: `AgentStart`, per turn `TurnStart`, the
/// streamed message, a start and end per tool call, `TurnEnd`; `AgentEnd`
/// closes the run.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentEvent {
    AgentStart,
    TurnStart,
    MessageStart,
    TextDelta(String),
    ThinkingDelta(String),
    MessageEnd(Box<AssistantMessage>),
    ToolExecutionStart {
        call: ToolCall,
        info: CallInfo,
    },
    /// What a running call has produced so far (replaces earlier updates;
    /// a command's [`Display::Live`] also carries what is new since the
    /// last one, so none may be dropped).
    ToolExecutionUpdate {
        call_id: String,
        display: Vec<Display>,
    },
    ToolExecutionEnd {
        call_id: String,
        tool_name: String,
        output: ToolOutput,
    },
    TurnEnd {
        /// Tokens the context held at the last model call.
        context_tokens: u64,
        context_window: u64,
        /// The turn's usage, with cost.
        usage: Usage,
    },
    /// The history is being compacted.
    CompactionStart {
        reason: compaction::Reason,
    },
    /// The compaction finished (the history now starts with the summary) or
    /// failed (the history is unchanged).
    CompactionEnd {
        reason: compaction::Reason,
        result: Result<compaction::Compacted, String>,
    },
    /// Another credential or model is tried after a failure.
    Failover {
        text: String,
    },
    /// A transient provider failure; the call is retried after `delay`.
    Retry {
        attempt: u32,
        delay: Duration,
        error: String,
    },
    /// A message the user sent while the run was busy has joined the
    /// history (steering, or a follow-up), with the time line the model
    /// reads with it (for the transcript, so that a loaded session sends
    /// the same bytes).
    UserMessage {
        content: Vec<Content>,
        time: String,
    },
    /// Which runtime ran the run, for the transcript: a Claude Code run
    /// names the Claude Code session it continues (`resume`), which a
    /// later run resumes; `native` after a Claude Code session was given
    /// up (its turns went to pincer's own loop).
    Runtime {
        runtime: String,
        resume: Option<String>,
    },
    /// Something the user should know that is not an error of the run
    /// (checkpoints turned off for the session).
    Notice {
        text: String,
    },
    /// What the run changed in the working directory, for the transcript
    /// (undo and rewind put it back); sent once, before `AgentEnd`. `None`:
    /// the session records no checkpoints (they are off), so an undo can
    /// take back only the conversation.
    Checkpoint(Option<crate::checkpoint::turn::TurnChanges>),
    AgentEnd {
        stop: RunStop,
    },
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RunStop {
    EndTurn,
    MaxTokens,
    Refusal,
    Cancelled,
    MaxTurns,
    /// The loop breaker stopped a run that was going round in circles; the
    /// text is for the user.
    LoopDetected(String),
    /// A `user_prompt_submit` hook refused the prompt; the text says why.
    Blocked(String),
    /// The provider failed and retries did not help.
    Failed(LlmError),
}

/// Where a command a question is about runs, which decides where an
/// "always" answer to it applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Place {
    /// Not in a sandbox (none, or the call runs no command): the usual
    /// answers.
    #[default]
    Anywhere,
    /// In the sandbox: "always allow" is remembered with the other
    /// answers and holds in the sandbox or out of it.
    Sandbox,
    /// Outside the sandbox, which stopped it: "always" remembers that the
    /// command may leave it (`outside`); there is no "always reject".
    Outside,
}

/// The frontend side of a run.
pub trait AgentHost: Send + Sync {
    fn emit(&self, event: AgentEvent);
    /// Asks the user whether `call` may run; `reason` says why it is asked
    /// and `preview` shows what it would do (the diff of an edit).
    fn request_permission<'a>(
        &'a self,
        call: &'a ToolCall,
        info: &'a CallInfo,
        reason: &'a str,
        preview: Vec<Display>,
    ) -> BoxFuture<'a, Answer>;
    /// [`AgentHost::request_permission`] about a command that runs at
    /// `place`: a host that shows the answers says where an "always"
    /// answer applies (the default asks as `request_permission` does).
    fn request_permission_at<'a>(
        &'a self,
        call: &'a ToolCall,
        info: &'a CallInfo,
        reason: &'a str,
        preview: Vec<Display>,
        place: Place,
    ) -> BoxFuture<'a, Answer> {
        let _ = place;
        self.request_permission(call, info, reason, preview)
    }
    /// Where tools read and write files.
    fn workspace(&self) -> Arc<dyn Workspace> {
        Arc::new(LocalWorkspace)
    }
    /// Terminals the frontend runs commands in, if it offers them.
    fn terminals(&self) -> Option<Arc<dyn Terminals>> {
        None
    }
    /// Who answers the model's questions (`ask_user`). The default is no
    /// one: a headless run (`pincer run`) has no user to ask.
    fn asker(&self) -> Option<Arc<dyn crate::tools::ask_user::AskUser>> {
        None
    }
    /// Whether the user sent a message that should steer the run: the rest
    /// of the running tool batch is then skipped. Checked after every tool.
    fn steering_waiting(&self) -> bool {
        false
    }
    /// The steering messages, delivered before the next model call.
    fn take_steering(&self) -> Vec<Vec<Content>> {
        Vec::new()
    }
    /// A message waiting for the run to end (a follow-up, or one that came
    /// too late to steer); it continues the run instead.
    fn take_follow_up(&self) -> Option<Vec<Content>> {
        None
    }
}

/// How to reach the model and how long to keep going.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub model: Model,
    pub key: Option<Secret>,
    /// Which credential `key` is (`env:ANTHROPIC_API_KEY`, later an auth
    /// profile id); recorded with every assistant message.
    pub auth_profile: Option<String>,
    pub thinking: ThinkingLevel,
    pub system_prompt: String,
    pub max_turns: u32,
    pub stream: StreamConfig,
    pub max_retries: u32,
    pub retry_base_delay: Duration,
    /// The session's mode and remembered answers.
    pub permissions: Arc<Permissions>,
    pub compaction: compaction::Settings,
    /// Where the model may keep durable notes (the agent's workspace); the
    /// memory flush before a compaction writes there. `None`: no flush.
    pub memory_dir: Option<std::path::PathBuf>,
    pub prune: prune::Settings,
    /// When the session last called the model (its prompt cache's age).
    pub last_call: Option<std::time::SystemTime>,
    /// Where other credentials come from when one fails; `None`: only
    /// `key` is tried.
    pub credentials: Option<Arc<dyn crate::auth::CredentialSource>>,
    /// Models to try, in order, when `model`'s provider cannot answer.
    pub fallbacks: Vec<Model>,
    /// Give up on a rate limit at once (another credential is waiting)
    /// instead of retrying.
    pub rotate_rate_limits: bool,
    /// The session's tool policy, loop history and hooks.
    pub guard: Arc<guard::ToolGuard>,
    /// Tools beside the built-in ones that may change between turns (MCP
    /// servers' tools); asked before every model call.
    pub extra_tools: Option<Arc<dyn crate::tools::ToolSource>>,
    /// The time the model is told with each user message, and the age of
    /// the prompt cache.
    pub clock: clock::Clock,
    /// The session's id: the providers' prompt-cache key (OpenAI's
    /// `prompt_cache_key`), so that one session's calls reach the same cache.
    pub session_id: Option<String>,
    /// Who runs the turns; `None`: pincer's own loop.
    pub runtime: Option<Arc<dyn Runtime>>,
    /// The session's checkpoints: what each call changes in the working
    /// directory is recorded, and the run's changes reported at its end
    /// ([`AgentEvent::Checkpoint`]). `None`: nothing is recorded.
    pub checkpoints: Option<Arc<crate::checkpoint::recording::Recording>>,
    /// How the session starts helpers (the `task` tool); `None`: it
    /// cannot.
    pub subagents: Option<Arc<subagent::Subagents>>,
}

/// The name the transcript records for pincer's own loop.
pub const NATIVE: &str = "native";

/// Who runs a prompt's turns. pincer's own loop is the default; the Claude
/// Code runtime ([`claude_code`]) hands them to the user's `claude` CLI.
/// Either way the host hears the same [`AgentEvent`]s, tool calls go
/// through the same policy, hooks and permission questions
/// ([`run_tool_call`]), and the history gets the same messages: a frontend
/// cannot tell which one ran a turn, except by the runtime the transcript
/// records.
pub trait Runtime: Send + Sync + std::fmt::Debug {
    /// Runs the turns after the prompt (already in `history`) until the
    /// run ends. `Err`: the runtime could not answer and nothing of the
    /// turn was shown yet; pincer's own loop answers it instead.
    fn run<'a>(
        &'a self,
        run: Run<'a>,
        history: &'a mut Vec<AgentMessage>,
    ) -> BoxFuture<'a, Result<RunStop, Fallback>>;

    /// A runtime of the same kind for a task outside the session's
    /// conversation (a workflow's llm step): it answers in a conversation
    /// of its own and leaves the session's untouched. `None`: pincer's own
    /// model call does such tasks.
    fn detached(&self) -> Option<Arc<dyn Runtime>> {
        None
    }
}

/// pincer's own loop as a [`Runtime`]: what runs a turn when the config
/// names no other runtime, and what answers for one that cannot.
#[derive(Clone, Copy, Debug, Default)]
pub struct Native;

impl Runtime for Native {
    fn run<'a>(
        &'a self,
        run: Run<'a>,
        history: &'a mut Vec<AgentMessage>,
    ) -> BoxFuture<'a, Result<RunStop, Fallback>> {
        Box::pin(async move {
            Ok(run_turns(
                run.client, run.config, run.tools, run.cwd, history, run.host, run.cancel,
            )
            .await)
        })
    }
}

/// What a runtime works with for one run.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    pub client: &'a reqwest::Client,
    pub config: &'a AgentConfig,
    pub tools: &'a [Arc<dyn Tool>],
    pub cwd: &'a std::path::Path,
    pub host: &'a dyn AgentHost,
    pub cancel: &'a CancellationToken,
}

/// A runtime that could not run a turn: pincer's own loop runs it with
/// this model and credential, after telling the user why.
#[derive(Clone, Debug)]
pub struct Fallback {
    /// The notice for the user: what failed and who answers instead.
    pub notice: String,
    pub model: Model,
    pub key: Option<Secret>,
    pub auth_profile: Option<String>,
}

/// Runs one prompt to completion. New messages are appended to `history` as
/// they complete, so a caller that persists it after every message loses
/// nothing if the run dies.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    client: &reqwest::Client,
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    cwd: &std::path::Path,
    history: &mut Vec<AgentMessage>,
    prompt: Vec<Content>,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
) -> RunStop {
    let time = time_line(config);
    run_timed(
        client, config, tools, cwd, history, prompt, time, host, cancel,
    )
    .await
}

/// The line that closes a user message sent now, as the model reads it.
pub fn time_line(config: &AgentConfig) -> String {
    crate::context::time_line(config.clock.now())
}

/// [`run`] for a prompt whose time line the caller already took (and
/// stored with the prompt in its transcript, so that a loaded session
/// sends the model the same bytes as before).
#[allow(clippy::too_many_arguments)]
pub async fn run_timed(
    client: &reqwest::Client,
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    cwd: &std::path::Path,
    history: &mut Vec<AgentMessage>,
    prompt: Vec<Content>,
    time: String,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
) -> RunStop {
    host.emit(AgentEvent::AgentStart);
    if let Some(recording) = config.checkpoints.clone() {
        let _ = tokio::task::spawn_blocking(move || recording.begin_turn()).await;
    }
    let submitted = recorded(
        config,
        tools,
        host,
        !config.guard.hooks.is_empty(),
        Vec::new(),
        config
            .guard
            .prompt_submitted(&crate::tools::text_of(&prompt), cancel),
    )
    .await;
    let stop = match submitted {
        Err(reason) => RunStop::Blocked(reason),
        Ok(()) => {
            push_user(history, prompt, time);
            let run = Run {
                client,
                config,
                tools,
                cwd,
                host,
                cancel,
            };
            let runtime: &dyn Runtime = config.runtime.as_deref().unwrap_or(&Native);
            match runtime.run(run, history).await {
                Ok(stop) => stop,
                Err(fallback) => {
                    host.emit(AgentEvent::Failover {
                        text: fallback.notice,
                    });
                    let native = AgentConfig {
                        model: fallback.model,
                        key: fallback.key,
                        auth_profile: fallback.auth_profile,
                        runtime: None,
                        ..config.clone()
                    };
                    run_turns(client, &native, tools, cwd, history, host, cancel).await
                }
            }
        }
    };
    recorded(
        config,
        tools,
        host,
        !config.guard.hooks.is_empty(),
        Vec::new(),
        config.guard.run_ended(&stop),
    )
    .await;
    let background = tools.iter().any(|t| t.holds_work());
    let changes = match config.checkpoints.clone() {
        Some(recording) => tokio::task::spawn_blocking(move || recording.end_turn(background))
            .await
            .ok()
            .flatten(),
        None => None,
    };
    host.emit(AgentEvent::Checkpoint(changes));
    host.emit(AgentEvent::AgentEnd { stop: stop.clone() });
    stop
}

/// Runs `work` between two snapshots of the session's checkpoints when
/// it `may_change` files (a command, an edit, an MCP tool, a hook), so
/// that what it changes joins the run's changes. While a background job
/// of the session runs (`tools` hold work), what changed between calls
/// counts too.
///
/// `own`: the paths the call writes itself (pincer's `write` and `edit`),
/// whose changes are its own even if another session ran a call meanwhile.
async fn recorded<T>(
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    host: &dyn AgentHost,
    may_change: bool,
    own: Vec<std::path::PathBuf>,
    work: impl std::future::Future<Output = T>,
) -> T {
    let Some(recording) = config.checkpoints.clone().filter(|_| may_change) else {
        return work.await;
    };
    let before = recording.clone();
    let background = tools.iter().any(|t| t.holds_work());
    if let Ok(Some(text)) =
        tokio::task::spawn_blocking(move || before.before_call(background)).await
    {
        host.emit(AgentEvent::Notice { text });
    }
    let output = work.await;
    // The call may have started a job that runs on.
    let background = tools.iter().any(|t| t.holds_work());
    let _ = tokio::task::spawn_blocking(move || recording.after_call(background, &own)).await;
    output
}

/// Whether a call may change files: anything but reading and searching,
/// and anything at all when hooks run around it.
fn may_change_files(config: &AgentConfig, info: &CallInfo) -> bool {
    use crate::tools::ToolKind;
    !config.guard.hooks.is_empty()
        || !matches!(
            info.kind,
            ToolKind::Read | ToolKind::Search | ToolKind::Think | ToolKind::Fetch
        )
}

/// Whether a reply is the silent token: kept in history, never shown.
pub fn is_silent(text: &str) -> bool {
    text.trim() == SILENT_REPLY
}

async fn run_turns(
    client: &reqwest::Client,
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    cwd: &std::path::Path,
    history: &mut Vec<AgentMessage>,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
) -> RunStop {
    let mut turns = 0;
    let mut overflow_compacted = false;
    let mut last_call = config.last_call;
    loop {
        if cancel.is_cancelled() {
            return RunStop::Cancelled;
        }
        if turns >= config.max_turns {
            return RunStop::MaxTurns;
        }
        let tokens = compaction::context_tokens(history, &config.system_prompt);
        if config
            .compaction
            .needs_compaction(tokens, config.model.context_window)
        {
            // A failed compaction is reported; the call is still tried, and
            // an overflow then gets its own attempt below.
            let _ = compact_history(
                client,
                config,
                history,
                host,
                cancel,
                compaction::Reason::Threshold,
                None,
            )
            .await;
        }
        let now = config.clock.now();
        if config.prune.due(config.model.api, last_call, now) {
            let trimmed = prune::prune(history, &config.prune);
            tracing::debug!(
                trimmed,
                "the prompt cache expired; old tool results trimmed"
            );
        }
        last_call = Some(now);
        turns += 1;
        host.emit(AgentEvent::TurnStart);
        // MCP servers may have come, gone or changed their tools since the
        // last turn.
        let current = with_extra_tools(tools, config).await;
        let tools = current.as_slice();
        // The mode may change between turns (the user switches it).
        let mode = config.permissions.mode();
        let specs: Vec<ToolSpec> = tools
            .iter()
            .filter(|t| config.guard.offers(t.as_ref(), mode))
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect();
        let request = Request {
            system: config.system_prompt.clone(),
            messages: convert_to_llm(transform_context(history)),
            tools: specs,
            thinking: config.thinking,
            max_tokens: None,
            cache_key: config.session_id.clone(),
            cache_retention: llm::CacheRetention::for_ttl(config.prune.ttl),
        };
        let (message, failure) = failover::call(client, config, &request, host, cancel).await;
        if let Some(LlmError::ContextOverflow {
            provider,
            message: detail,
        }) = &failure
            && message.content.is_empty()
            && config.compaction.enabled
        {
            // Too large for the provider: compact once and try again.
            if !overflow_compacted {
                overflow_compacted = true;
                turns -= 1;
                match compact_history(
                    client,
                    config,
                    history,
                    host,
                    cancel,
                    compaction::Reason::Overflow,
                    None,
                )
                .await
                {
                    Ok(_) => continue,
                    Err(error) => {
                        return RunStop::Failed(LlmError::ContextOverflow {
                            provider: provider.clone(),
                            message: format!(
                                "the conversation no longer fits {}'s context window and compacting it failed ({error}). Start a new session, or run /compact with instructions on what to keep.",
                                config.model.full_id()
                            ),
                        });
                    }
                }
            }
            return RunStop::Failed(LlmError::ContextOverflow {
                provider: provider.clone(),
                message: format!(
                    "the conversation is still too long for {}'s context window after compacting it ({detail}). Start a new session, or choose a model with a larger window.",
                    config.model.full_id()
                ),
            });
        }
        let usage = message.usage;
        let stop_reason = message.stop_reason;
        let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        host.emit(AgentEvent::MessageEnd(Box::new(message.clone())));
        history.push(AgentMessage::Llm {
            message: Message::Assistant(message),
        });

        let mut cancelled = stop_reason == StopReason::Aborted;
        let mut steered = false;
        let mut broken: Option<String> = None;
        let mut index = 0;
        while index < calls.len() {
            let call = &calls[index];
            index += 1;
            let skipped = if cancelled || cancel.is_cancelled() {
                cancelled = true;
                Some(CANCELLED_BEFORE_RUN)
            } else if steered {
                Some(SKIPPED_FOR_STEERING)
            } else if broken.is_some() {
                Some(SKIPPED_FOR_LOOP)
            } else {
                None
            };
            if skipped.is_none() && is_task(config, &call.name) {
                // This `task` call and the ones right after it run at the
                // same time.
                let start = index - 1;
                let end = calls[start..]
                    .iter()
                    .position(|c| !is_task(config, &c.name))
                    .map_or(calls.len(), |n| start + n);
                let group = &calls[start..end];
                let (outputs, stop) = run_tasks(config, tools, cwd, group, host, cancel).await;
                for (call, output) in group.iter().zip(outputs) {
                    push_result(history, call, output);
                }
                cancelled = cancel.is_cancelled();
                broken = stop;
                steered = host.steering_waiting();
                index = end;
                continue;
            }
            let output = if let Some(why) = skipped {
                let info = describe(tools, call, cwd);
                host.emit(AgentEvent::ToolExecutionStart {
                    call: call.clone(),
                    info,
                });
                let output = ToolOutput::error(why);
                config.guard.record(call, &output);
                output
            } else {
                let (output, stop) = execute_call(config, tools, cwd, call, host, cancel).await;
                cancelled = cancel.is_cancelled();
                broken = stop;
                // A message the user sent meanwhile skips the rest of the
                // batch; the model sees it next.
                steered = host.steering_waiting();
                output
            };
            host.emit(AgentEvent::ToolExecutionEnd {
                call_id: call.id.clone(),
                tool_name: call.name.clone(),
                output: output.clone(),
            });
            push_result(history, call, output);
        }
        host.emit(AgentEvent::TurnEnd {
            // The response's usage plus the tool results that came after.
            context_tokens: compaction::context_tokens(history, &config.system_prompt),
            context_window: config.model.context_window,
            usage,
        });
        if cancelled || cancel.is_cancelled() {
            return RunStop::Cancelled;
        }
        if let Some(text) = broken {
            return RunStop::LoopDetected(text);
        }
        if deliver_steering(history, config, host) {
            continue;
        }
        let stop = match stop_reason {
            StopReason::Error => {
                return RunStop::Failed(failure.unwrap_or_else(|| LlmError::MalformedStream {
                    provider: config.model.provider.clone(),
                    message: "the model call failed without an error".to_string(),
                }));
            }
            StopReason::Aborted => return RunStop::Cancelled,
            _ if !calls.is_empty() => continue,
            StopReason::Length => RunStop::MaxTokens,
            StopReason::Refusal => RunStop::Refusal,
            StopReason::Stop | StopReason::ToolUse => RunStop::EndTurn,
        };
        // The run would end here; a queued message continues it.
        match host.take_follow_up() {
            Some(content) => {
                let time = time_line(config);
                host.emit(AgentEvent::UserMessage {
                    content: content.clone(),
                    time: time.clone(),
                });
                push_user(history, content, time);
            }
            None => return stop,
        }
    }
}

/// Adds `call`'s result to the history.
fn push_result(history: &mut Vec<AgentMessage>, call: &ToolCall, output: ToolOutput) {
    history.push(AgentMessage::Llm {
        message: Message::ToolResult(ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: output.content,
            is_error: output.is_error,
        }),
    });
}

/// Runs a batch's consecutive `task` calls at the same time (at most
/// `[subagents] max_parallel` at once), each reported as it ends; their
/// results come back in call order. What their helpers change is recorded
/// in one window around them all. The second value, when set, is the loop
/// breaker's message.
async fn run_tasks(
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    cwd: &std::path::Path,
    group: &[ToolCall],
    host: &dyn AgentHost,
    cancel: &CancellationToken,
) -> (Vec<ToolOutput>, Option<String>) {
    use futures::StreamExt;
    let limit = config
        .subagents
        .as_ref()
        .map_or(1, |s| s.max_parallel.max(1));
    let work = async {
        let mut outputs: Vec<Option<ToolOutput>> = vec![None; group.len()];
        let mut broken = None;
        let start = |i: usize| -> BoxFuture<'_, (usize, ToolOutput, Option<String>)> {
            let call = &group[i];
            Box::pin(async move {
                let (output, stop) = execute_call(config, tools, cwd, call, host, cancel).await;
                host.emit(AgentEvent::ToolExecutionEnd {
                    call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    output: output.clone(),
                });
                (i, output, stop)
            })
        };
        let mut running = futures::stream::FuturesUnordered::new();
        let mut next = 0;
        while next < group.len().min(limit) {
            running.push(start(next));
            next += 1;
        }
        while let Some((i, output, stop)) = running.next().await {
            outputs[i] = Some(output);
            broken = broken.or(stop);
            if next < group.len() {
                running.push(start(next));
                next += 1;
            }
        }
        let outputs = outputs
            .into_iter()
            .map(|o| o.unwrap_or_else(|| ToolOutput::error(CANCELLED_BEFORE_RUN)))
            .collect();
        (outputs, broken)
    };
    recorded(config, tools, host, true, Vec::new(), work).await
}

/// Moves the steering messages into the history; whether there were any.
fn deliver_steering(
    history: &mut Vec<AgentMessage>,
    config: &AgentConfig,
    host: &dyn AgentHost,
) -> bool {
    let messages = host.take_steering();
    let any = !messages.is_empty();
    for content in messages {
        let time = time_line(config);
        host.emit(AgentEvent::UserMessage {
            content: content.clone(),
            time: time.clone(),
        });
        push_user(history, content, time);
    }
    any
}

/// Adds a user message, after the time it was sent (its [`time_line`]):
/// the model learns the time from its newest message, which moves no
/// cached prefix.
pub(crate) fn push_user(history: &mut Vec<AgentMessage>, content: Vec<Content>, time: String) {
    history.push(AgentMessage::Time { text: time });
    history.push(AgentMessage::Llm {
        message: Message::User { content },
    });
}

const SKIPPED_FOR_STEERING: &str =
    "Skipped: the user sent a new message while this batch ran; read it and decide again.";
const SKIPPED_FOR_LOOP: &str =
    "Skipped: the run was stopped because it was going round in circles.";

/// Compacts the history (after a silent memory flush when the threshold
/// was reached), reporting start and end to the host.
pub async fn compact_history(
    client: &reqwest::Client,
    config: &AgentConfig,
    history: &mut Vec<AgentMessage>,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
    reason: compaction::Reason,
    instructions: Option<&str>,
) -> Result<compaction::Compacted, compaction::CompactError> {
    host.emit(AgentEvent::CompactionStart { reason });
    let mut fields = serde_json::Map::new();
    fields.insert("reason".into(), serde_json::Value::from(reason.id()));
    fields.insert(
        "messages".into(),
        serde_json::Value::from(messages(history)),
    );
    config
        .guard
        .notify(hooks::Event::BeforeCompaction, fields.clone(), cancel)
        .await;
    if reason == compaction::Reason::Threshold {
        memory::flush(client, config, history, cancel).await;
    }
    let result = compaction::compact(
        client,
        &config.model,
        config.key.as_ref(),
        config.stream,
        &config.compaction,
        history,
        &config.system_prompt,
        instructions,
        cancel,
    )
    .await;
    fields.insert(
        "messages".into(),
        serde_json::Value::from(messages(history)),
    );
    fields.insert("ok".into(), serde_json::Value::from(result.is_ok()));
    config
        .guard
        .notify(hooks::Event::AfterCompaction, fields, cancel)
        .await;
    host.emit(AgentEvent::CompactionEnd {
        reason,
        result: result
            .as_ref()
            .map(Clone::clone)
            .map_err(ToString::to_string),
    });
    result
}

/// How many entries of `history` are messages (not the time lines that
/// come with user messages), as hooks count them.
fn messages(history: &[AgentMessage]) -> usize {
    history
        .iter()
        .filter(|entry| !matches!(entry, AgentMessage::Time { .. }))
        .count()
}

/// The built-in tools followed by whatever the config's tool source offers
/// now.
async fn with_extra_tools(tools: &[Arc<dyn Tool>], config: &AgentConfig) -> Vec<Arc<dyn Tool>> {
    let mut all = tools.to_vec();
    if let Some(source) = &config.extra_tools {
        all.extend(source.tools().await);
    }
    all
}

pub(crate) fn describe(
    tools: &[Arc<dyn Tool>],
    call: &ToolCall,
    cwd: &std::path::Path,
) -> CallInfo {
    match tools.iter().find(|t| t.name() == call.name) {
        Some(tool) => tool.describe(&call.arguments, cwd),
        None => CallInfo {
            title: call.name.clone(),
            kind: crate::tools::ToolKind::Other,
            locations: Vec::new(),
        },
    }
}

/// Runs a call as the native loop does, start and end events included:
/// the one path every tool call takes, whichever runtime's model asked
/// for it. The second value, when set, is the loop breaker's message.
pub(crate) async fn run_tool_call(
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    cwd: &std::path::Path,
    call: &ToolCall,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
) -> (ToolOutput, Option<String>) {
    let (output, stop) = execute_call(config, tools, cwd, call, host, cancel).await;
    host.emit(AgentEvent::ToolExecutionEnd {
        call_id: call.id.clone(),
        tool_name: call.name.clone(),
        output: output.clone(),
    });
    (output, stop)
}

/// The tools a model may call now: the built-in ones and whatever the
/// config's tool source offers, as the policy lets `mode` use them.
pub(crate) async fn offered_tools(
    tools: &[Arc<dyn Tool>],
    config: &AgentConfig,
) -> Vec<Arc<dyn Tool>> {
    let mode = config.permissions.mode();
    with_extra_tools(tools, config)
        .await
        .into_iter()
        .filter(|t| config.guard.offers(t.as_ref(), mode))
        .collect()
}

/// Runs one call through the pipeline — policy, loop detection, the
/// `before_tool_call` hooks, permission, execution, the `after_tool_call`
/// hooks, sanitising — always returning a result for the model. The second
/// value, when set, is the loop breaker's message: the run must end.
async fn execute_call(
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    cwd: &std::path::Path,
    call: &ToolCall,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
) -> (ToolOutput, Option<String>) {
    let info = describe(tools, call, cwd);
    host.emit(AgentEvent::ToolExecutionStart {
        call: call.clone(),
        info: info.clone(),
    });
    let may_change = call.arguments_error.is_none()
        && may_change_files(config, &info)
        && tools
            .iter()
            .find(|t| t.name() == call.name)
            .is_none_or(|t| t.may_change_files());
    let result = admit_and_run(config, tools, cwd, call, &info, host, cancel, may_change).await;
    if let Some(recording) = &config.checkpoints
        && !result.0.is_error
        && matches!(
            info.kind,
            crate::tools::ToolKind::Edit
                | crate::tools::ToolKind::Delete
                | crate::tools::ToolKind::Move
        )
    {
        for location in &info.locations {
            let path = crate::tools::resolve_path(cwd, &location.path.to_string_lossy());
            if !crate::tools::is_inside(recording.root(), &path) {
                recording.note_outside(&path);
            }
        }
    }
    result
}

/// [`execute_call`] after the call's start was told. When the call
/// `may_change` files, the checkpoint records its hooks and its run, each
/// between two snapshots, and not the wait for the user's answer in
/// between: what the user edits meanwhile is not the turn's.
#[allow(clippy::too_many_arguments)]
async fn admit_and_run(
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    cwd: &std::path::Path,
    call: &ToolCall,
    info: &CallInfo,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
    may_change: bool,
) -> (ToolOutput, Option<String>) {
    let hooks = may_change && !config.guard.hooks.is_empty();
    if let Some(error) = &call.arguments_error {
        let output = ToolOutput::error(format!(
            "The arguments for {} could not be parsed ({error}). Send them again as one JSON object.",
            call.name
        ));
        config.guard.record(call, &output);
        return (output, None);
    }
    let tool = tools.iter().find(|t| t.name() == call.name);
    let mode = config.permissions.mode();
    let admitted = recorded(
        config,
        tools,
        host,
        hooks,
        Vec::new(),
        config
            .guard
            .admit(tool.map(|t| t.as_ref()), call, mode, cancel),
    )
    .await;
    let (params, warning) = match admitted {
        guard::Admission::Break(text) => return (ToolOutput::error(text.clone()), Some(text)),
        guard::Admission::Refuse(mut output) => {
            if tool.is_none() {
                let names: Vec<&str> = tools
                    .iter()
                    .filter(|t| config.guard.offers(t.as_ref(), mode))
                    .map(|t| t.name())
                    .collect();
                output = ToolOutput::error(format!(
                    "{} Available tools: {}.",
                    output.text(),
                    names.join(", ")
                ));
            }
            config.guard.record(call, &output);
            return (output, None);
        }
        guard::Admission::Run { params, warning } => (params, warning),
    };
    let Some(tool) = tool else {
        // Admission refuses unknown tools.
        return (
            ToolOutput::error(format!("Tool {} not found.", call.name)),
            None,
        );
    };
    // Hooks may have rewritten the params: what is asked and run is what
    // they made of the call.
    let rewritten = ToolCall {
        arguments: params.clone(),
        ..call.clone()
    };
    let checkpoint = may_change.then_some(tools);
    let output = run_call(
        config,
        tools,
        tool.as_ref(),
        cwd,
        &rewritten,
        info,
        host,
        cancel,
        checkpoint,
    )
    .await;
    let output = recorded(
        config,
        tools,
        host,
        hooks,
        Vec::new(),
        config.guard.finish(call, &params, output, warning, cancel),
    )
    .await;
    (output, None)
}

/// Asks permission for a call and runs it; with `checkpoint` (the
/// session's tools), its run is recorded.
#[allow(clippy::too_many_arguments)]
async fn run_call(
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    tool: &dyn Tool,
    cwd: &std::path::Path,
    call: &ToolCall,
    info: &CallInfo,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
    checkpoint: Option<&[Arc<dyn Tool>]>,
) -> ToolOutput {
    let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel();
    let ctx = ToolContext {
        cwd: cwd.to_path_buf(),
        cancel: cancel.child_token(),
        image_input: config.model.image_input,
        workspace: host.workspace(),
        terminals: host.terminals(),
        progress: Arc::new(move |display| {
            // The receiver lives until the call ends; later sends are moot.
            let _ = progress_tx.send(display);
        }),
        call_id: call.id.clone(),
        ask: host.asker(),
        confine: None,
    };
    let mut ctx = ctx;
    let sandboxing = config.permissions.sandboxing(tool, cwd);
    let mut unavailable = None;
    match sandboxing {
        Sandboxing::Confined(confinement) => ctx.confine = Some(confinement),
        Sandboxing::Unavailable(why) => {
            if config.permissions.tell_unavailable() {
                tracing::warn!(reason = %why, "commands cannot run in a sandbox here; they ask first");
                unavailable = Some(why);
            }
        }
        Sandboxing::None => {}
    }
    let decision = config
        .permissions
        .decide(tool, info, &call.arguments, ctx.confine.as_ref());
    match decision {
        Decision::Allow => {}
        Decision::Reject(reason) => {
            return ToolOutput::error(format!(
                "Not run: {reason}. Do not retry it; continue another way or ask the user."
            ));
        }
        Decision::Ask(reason) => {
            // The first question after the sandbox turned out to be
            // missing says so, once.
            let reason = match unavailable {
                Some(why) => format!(
                    "{reason} (commands are not sandboxed here: {why}; pincer asks before each one instead)"
                ),
                None => reason,
            };
            let preview = tool.preview(&call.arguments, &ctx).await;
            let place = match (&ctx.confine, tool.runs_commands()) {
                (Some(_), true) => Place::Sandbox,
                _ => Place::Anywhere,
            };
            let answer = tokio::select! {
                answer = host.request_permission_at(call, info, &reason, preview, place) => answer,
                () = cancel.cancelled() => Answer::Cancelled,
            };
            match answer {
                Answer::AllowOnce => {}
                Answer::AllowAlways => {
                    config.permissions.remember(true, tool, &call.arguments);
                }
                Answer::RejectOnce | Answer::RejectAlways => {
                    if answer == Answer::RejectAlways {
                        config.permissions.remember(false, tool, &call.arguments);
                    }
                    return ToolOutput::error(format!(
                        "The user declined this call ({reason}). Do not retry it; ask the user or continue another way."
                    ));
                }
                Answer::Cancelled => {
                    // Withdrawing the question ends the turn.
                    cancel.cancel();
                    return ToolOutput::error(CANCELLED_BEFORE_RUN);
                }
            }
        }
    }
    let running = async {
        let work: BoxFuture<'_, ToolOutput> = if is_task(config, &call.name) {
            subagent::run(config, tools, cwd, call, host, &ctx)
        } else {
            tool.execute(call.arguments.clone(), &ctx)
        };
        let output = forward_progress(work, &mut progress_rx, host, &call.id).await;
        let Some(confinement) = &ctx.confine else {
            return output;
        };
        if !output.is_error {
            return output;
        }
        let Some(why) = crate::tools::sandbox::looks_denied(&output.text()) else {
            return output;
        };
        match escape::escape(config, tool, call, info, host, cancel, confinement, why).await {
            escape::Escape::Outside => {
                let outside = ToolContext {
                    confine: None,
                    ..ctx.clone()
                };
                let output = forward_progress(
                    tool.execute(call.arguments.clone(), &outside),
                    &mut progress_rx,
                    host,
                    &call.id,
                )
                .await;
                output.with_note("[Run outside the sandbox, with the user's permission.]")
            }
            escape::Escape::Stay(note) => output.with_note(&note),
        }
    };
    let own = match &config.checkpoints {
        Some(recording) if tool.writes_only_its_locations() => info
            .locations
            .iter()
            .map(|l| crate::tools::resolve_path(cwd, &l.path.to_string_lossy()))
            .filter_map(|p| p.strip_prefix(recording.root()).ok().map(Into::into))
            .collect(),
        _ => Vec::new(),
    };
    let output = recorded(
        config,
        checkpoint.unwrap_or_default(),
        host,
        checkpoint.is_some(),
        own,
        running,
    )
    .await;
    // What the tool reported just before it returned (how a command ended,
    // its last lines) still goes out, before the call's end.
    while let Ok(display) = progress_rx.try_recv() {
        host.emit(AgentEvent::ToolExecutionUpdate {
            call_id: call.id.clone(),
            display,
        });
    }
    ctx.cancel.cancel();
    output
}

/// Whether a call named `name` starts a helper (run by [`subagent::run`],
/// several of a batch at the same time).
fn is_task(config: &AgentConfig, name: &str) -> bool {
    name == subagent::TASK && config.subagents.is_some()
}

const CANCELLED_BEFORE_RUN: &str = "Cancelled by the user before this tool ran.";

/// Runs a tool call's future, passing on the progress it reports.
async fn forward_progress(
    run: impl std::future::Future<Output = ToolOutput>,
    progress: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<crate::tools::Display>>,
    host: &dyn AgentHost,
    call_id: &str,
) -> ToolOutput {
    tokio::pin!(run);
    loop {
        tokio::select! {
            output = &mut run => break output,
            Some(display) = progress.recv() => host.emit(AgentEvent::ToolExecutionUpdate {
                call_id: call_id.to_string(),
                display,
            }),
        }
    }
}

/// One model call, retried on transient failures and broken streams
/// (reset, closed early, a malformed line, an `error` event) before
/// anything of the answer streamed; after that, the failure ends the call
/// as [`LlmError::CutOff`]. Returns the message (with `StopReason::Error`
/// on failure) and the typed error that ended it, if any.
pub(crate) async fn stream_with_retries(
    client: &reqwest::Client,
    config: &AgentConfig,
    request: &Request,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
) -> (AssistantMessage, Option<LlmError>) {
    let mut attempt = 0;
    let mut started = false;
    loop {
        let (builder, error) =
            match stream_once(client, config, request, host, cancel, &mut started).await {
                Attempt::Done(message) => return (message, None),
                Attempt::Failed { builder, error } => (builder, error),
            };
        // Once part of the answer (text, thinking, a tool call) has
        // streamed, a retry would show the answer starting over: the call
        // ends instead, saying the answer was cut off and by what.
        let error = if builder.has_content() {
            error.cut_off()
        } else {
            error
        };
        // A throttled credential with another one waiting is not worth
        // waiting for: failover moves on at once. Nor is one whose provider
        // asks for a longer wait than pincer sits through: the credential
        // cools down for that long and failover moves on, or the user is
        // told when to try again.
        let rotate = config.rotate_rate_limits && matches!(error, LlmError::RateLimit { .. });
        if rotate
            || waits_too_long(&error)
            || !(error.retry_before_output() && attempt < config.max_retries)
        {
            if !started {
                host.emit(AgentEvent::MessageStart);
            }
            let message = builder.finish(
                &config.model,
                config.auth_profile.clone(),
                Some((StopReason::Error, error.to_string())),
            );
            return (message, Some(error));
        }
        attempt += 1;
        let delay = retry_delay(config.retry_base_delay, attempt, &error, jitter_fraction());
        // The `Retry` event below is the report (an editor's notice, a
        // line of `pincer run`); a warning here would tell it a second time
        // on the same stderr.
        tracing::debug!(%error, attempt, ?delay, "model call failed; retrying");
        host.emit(AgentEvent::Retry {
            attempt,
            delay,
            error: error.to_string(),
        });
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = cancel.cancelled() => {
                if !started {
                    host.emit(AgentEvent::MessageStart);
                }
                let message = builder.finish(
                    &config.model,
                    config.auth_profile.clone(),
                    Some((StopReason::Aborted, CANCELLED.to_string())),
                );
                return (message, None);
            }
        }
    }
}

const CANCELLED: &str = "Cancelled by the user";

enum Attempt {
    Done(AssistantMessage),
    Failed {
        builder: MessageBuilder,
        error: LlmError,
    },
}

/// Streams one attempt. `MessageStart` is emitted with the first event
/// (`started` remembers it across attempts).
async fn stream_once(
    client: &reqwest::Client,
    config: &AgentConfig,
    request: &Request,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
    started: &mut bool,
) -> Attempt {
    let mut stream = llm::stream(
        client,
        &config.model,
        config.key.as_ref(),
        request,
        config.stream,
    );
    let mut builder = MessageBuilder::new();
    let mut deltas = DeltaThrottle::new(DELTA_INTERVAL);
    loop {
        let flush_at = deltas.deadline();
        let next = tokio::select! {
            next = stream.next() => next,
            () = sleep_until(flush_at), if flush_at.is_some() => {
                deltas.flush(host);
                continue;
            }
            () = cancel.cancelled() => None,
        };
        let next = match next {
            Some(next) => next,
            None => {
                deltas.flush(host);
                deltas.finish(host);
                if !*started {
                    *started = true;
                    host.emit(AgentEvent::MessageStart);
                }
                let aborted = cancel
                    .is_cancelled()
                    .then(|| (StopReason::Aborted, CANCELLED.to_string()));
                return Attempt::Done(builder.finish(
                    &config.model,
                    config.auth_profile.clone(),
                    aborted,
                ));
            }
        };
        let event = match next {
            Ok(event) => event,
            Err(error) => {
                deltas.flush(host);
                deltas.finish(host);
                return Attempt::Failed { builder, error };
            }
        };
        if !*started {
            *started = true;
            host.emit(AgentEvent::MessageStart);
        }
        match &event {
            StreamEvent::TextDelta(text) => deltas.push(false, text, host),
            StreamEvent::ThinkingDelta(text) => deltas.push(true, text, host),
            _ => {}
        }
        builder.apply(&event);
    }
}

/// How often, at most, streamed text reaches the frontend while tokens
/// arrive faster than that: about a display frame. The first delta after a
/// quiet spell goes out at once, so a slow stream is not delayed.
pub(crate) const DELTA_INTERVAL: Duration = Duration::from_millis(16);

pub(crate) async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Joins text (or thinking) deltas that arrive within one interval into one
/// event. A fast stream then costs the editor one update per frame instead of
/// one per token; what the model sent is unchanged.
pub(crate) struct DeltaThrottle {
    interval: Duration,
    thinking: bool,
    text: String,
    last_emit: Option<tokio::time::Instant>,
    /// Answer text held back while everything so far could still be the
    /// silent reply; `None` once the answer is known not to be silent.
    held: Option<String>,
}

impl DeltaThrottle {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            interval,
            thinking: false,
            text: String::new(),
            last_emit: None,
            held: Some(String::new()),
        }
    }

    pub(crate) fn push(&mut self, thinking: bool, text: &str, host: &dyn AgentHost) {
        if thinking != self.thinking {
            self.flush(host);
            self.thinking = thinking;
        }
        self.text.push_str(text);
        let due = self
            .last_emit
            .is_none_or(|last| last.elapsed() >= self.interval);
        if due {
            self.flush(host);
        }
    }

    /// When the buffered text must go out.
    pub(crate) fn deadline(&self) -> Option<tokio::time::Instant> {
        if self.text.is_empty() {
            return None;
        }
        Some(
            self.last_emit
                .map_or_else(tokio::time::Instant::now, |last| last + self.interval),
        )
    }

    pub(crate) fn flush(&mut self, host: &dyn AgentHost) {
        if self.text.is_empty() {
            return;
        }
        let mut text = std::mem::take(&mut self.text);
        if !self.thinking
            && let Some(held) = &mut self.held
        {
            held.push_str(&text);
            let start = held.trim_start();
            let could_be_silent = SILENT_REPLY.starts_with(start.trim_end())
                && (start.trim_end().len() == start.len() || start.trim_end() == SILENT_REPLY);
            if could_be_silent {
                return;
            }
            text = std::mem::take(held);
            self.held = None;
        }
        host.emit(if self.thinking {
            AgentEvent::ThinkingDelta(text)
        } else {
            AgentEvent::TextDelta(text)
        });
        self.last_emit = Some(tokio::time::Instant::now());
    }

    /// The answer is over: held text goes out unless it is the silent
    /// reply, which the user never sees.
    pub(crate) fn finish(&mut self, host: &dyn AgentHost) {
        if let Some(held) = self.held.take()
            && !held.is_empty()
            && !is_silent(&held)
        {
            host.emit(AgentEvent::TextDelta(held));
            self.last_emit = Some(tokio::time::Instant::now());
        }
    }
}

/// The longest wait before a retry. A provider asking for more is not
/// retried (see [`waits_too_long`]).
const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// The wait before retry number `attempt` (from 1): `base` doubling with
/// each attempt plus up to a quarter more (`jitter` in 0..=1 says how much
/// of that quarter), at most [`MAX_RETRY_WAIT`]; never shorter than the
/// provider's `retry-after`.
fn retry_delay(base: Duration, attempt: u32, error: &LlmError, jitter: f64) -> Duration {
    let exp = base
        .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
        .min(MAX_RETRY_WAIT);
    let jitter = exp.mul_f64(jitter.clamp(0.0, 1.0) * 0.25);
    let backoff = exp.saturating_add(jitter).min(MAX_RETRY_WAIT);
    match error {
        LlmError::RateLimit {
            retry_after: Some(after),
            ..
        } => backoff.max(*after),
        _ => backoff,
    }
}

/// Whether the provider asked for a longer wait than pincer retries after.
fn waits_too_long(error: &LlmError) -> bool {
    matches!(error, LlmError::RateLimit { retry_after: Some(after), .. } if *after > MAX_RETRY_WAIT)
}

fn jitter_fraction() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    f64::from(nanos % 1000) / 1000.0
}

#[cfg(test)]
mod retry_tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn rate_limit(retry_after: Option<Duration>) -> LlmError {
        LlmError::RateLimit {
            provider: "anthropic".into(),
            message: "slow down".into(),
            retry_after,
        }
    }

    fn overloaded() -> LlmError {
        LlmError::Overloaded {
            provider: "anthropic".into(),
            message: "Overloaded".into(),
        }
    }

    #[test]
    fn backoff_doubles_with_up_to_a_quarter_of_jitter_and_is_capped() {
        let base = Duration::from_secs(1);
        let delays = |jitter: f64| -> Vec<Duration> {
            (1..=8)
                .map(|attempt| retry_delay(base, attempt, &overloaded(), jitter))
                .collect()
        };
        let secs = |s: &[f64]| -> Vec<Duration> {
            s.iter().map(|s| Duration::from_secs_f64(*s)).collect()
        };
        assert_eq!(
            delays(0.0),
            secs(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0])
        );
        assert_eq!(
            delays(1.0),
            secs(&[1.25, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 60.0])
        );
        // Anything in between stays within those bounds.
        for (attempt, (low, high)) in (1..).zip(delays(0.0).into_iter().zip(delays(1.0))) {
            let delay = retry_delay(base, attempt, &overloaded(), 0.37);
            assert!(
                low <= delay && delay <= high,
                "attempt {attempt}: {delay:?}"
            );
        }
        // Out-of-range jitter is clamped; huge attempt numbers do not overflow.
        assert_eq!(retry_delay(base, 1, &overloaded(), 7.0), delays(1.0)[0]);
        assert_eq!(
            retry_delay(base, u32::MAX, &overloaded(), 1.0),
            MAX_RETRY_WAIT
        );
    }

    #[test]
    fn retry_after_is_honoured_exactly_and_never_undercut() {
        let base = Duration::from_secs(1);
        let after = Duration::from_secs(7);
        for jitter in [0.0, 1.0] {
            assert_eq!(
                retry_delay(base, 1, &rate_limit(Some(after)), jitter),
                after
            );
        }
        // A shorter retry-after than the backoff: the backoff.
        assert_eq!(
            retry_delay(base, 4, &rate_limit(Some(Duration::from_millis(300))), 0.0),
            Duration::from_secs(8)
        );
        // At the cap it is still honoured; beyond it it is not shortened,
        // and the call is not retried at all.
        assert_eq!(
            retry_delay(base, 1, &rate_limit(Some(MAX_RETRY_WAIT)), 0.0),
            MAX_RETRY_WAIT
        );
        assert!(!waits_too_long(&rate_limit(Some(MAX_RETRY_WAIT))));
        let two_hours = Duration::from_secs(7200);
        assert_eq!(
            retry_delay(base, 1, &rate_limit(Some(two_hours)), 0.0),
            two_hours
        );
        assert!(waits_too_long(&rate_limit(Some(two_hours))));
        assert!(!waits_too_long(&rate_limit(None)));
        assert!(!waits_too_long(&overloaded()));
    }
}

#[cfg(test)]
mod silent_tests {
    use parking_lot::Mutex;

    use pretty_assertions::assert_eq;

    use super::*;

    /// Keeps the text deltas a frontend would show.
    #[derive(Default)]
    struct Shown(Mutex<Vec<String>>);

    impl AgentHost for Shown {
        fn emit(&self, event: AgentEvent) {
            if let AgentEvent::TextDelta(text) = event {
                self.0.lock().push(text);
            }
        }

        fn request_permission<'a>(
            &'a self,
            _: &'a ToolCall,
            _: &'a CallInfo,
            _: &'a str,
            _: Vec<Display>,
        ) -> BoxFuture<'a, Answer> {
            Box::pin(async { Answer::RejectOnce })
        }
    }

    /// What the user sees of an answer streamed as `deltas`, each flushed
    /// at once (as a slow stream would be).
    fn shown(deltas: &[&str]) -> String {
        let host = Shown::default();
        let mut throttle = DeltaThrottle::new(Duration::ZERO);
        for delta in deltas {
            throttle.push(false, delta, &host);
        }
        throttle.flush(&host);
        throttle.finish(&host);
        host.0.into_inner().concat()
    }

    #[test]
    fn the_silent_token_is_held_across_deltas_and_never_shown() {
        assert_eq!(shown(&["NO", "_RE", "PLY"]), "");
        assert_eq!(shown(&[" \n", "NO_REPLY", "\n"]), "");
        // Anything that turns out not to be the token is shown whole.
        assert_eq!(shown(&["NO", "_RE", "ST"]), "NO_REST");
        assert_eq!(shown(&["NO", " way"]), "NO way");
        assert_eq!(shown(&["NO_REPLY", " but more"]), "NO_REPLY but more");
        assert_eq!(shown(&["NO"]), "NO");
        assert_eq!(shown(&["Hello", " there"]), "Hello there");
    }
}

#[cfg(test)]
mod time_tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn user(text: &str) -> AgentMessage {
        AgentMessage::Llm {
            message: Message::User {
                content: vec![Content::text(text)],
            },
        }
    }

    fn time(text: &str) -> AgentMessage {
        AgentMessage::Time { text: text.into() }
    }

    #[test]
    fn a_time_line_closes_the_user_message_after_it_and_a_stray_one_is_dropped() {
        let result = AgentMessage::Llm {
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: "c".into(),
                tool_name: "read".into(),
                content: vec![Content::text("r")],
                is_error: false,
            }),
        };
        let history = vec![
            // A prompt that never made it into the history left its time.
            time("Current time: 08:59"),
            time("Current time: 09:00"),
            user("first"),
            time("Current time: 09:01"),
            result.clone(),
            time("Current time: 09:02"),
        ];
        let expected = vec![
            Message::User {
                content: vec![Content::text("first"), Content::text("Current time: 09:00")],
            },
            match result {
                AgentMessage::Llm { message } => message,
                _ => unreachable!(),
            },
        ];
        assert_eq!(convert_to_llm(history), expected);
    }

    #[test]
    fn every_prompt_gets_the_clock_s_time_and_the_history_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("now");
        std::fs::write(&file, "2026-11-24T09:00:00Z").unwrap();
        let clock = clock::Clock::from_file(file.clone());
        let catalog = crate::llm::catalog::Catalog::new(&Default::default(), &|_| None);
        let config = AgentConfig {
            model: catalog.resolve("anthropic/claude-sonnet-4-5").unwrap(),
            key: None,
            auth_profile: None,
            thinking: ThinkingLevel::Off,
            system_prompt: String::new(),
            max_turns: 1,
            stream: StreamConfig {
                idle_timeout: Duration::from_secs(1),
            },
            max_retries: 0,
            retry_base_delay: Duration::ZERO,
            permissions: Arc::new(Permissions::new(Mode::Default, Vec::new(), None)),
            compaction: Default::default(),
            memory_dir: None,
            prune: Default::default(),
            last_call: None,
            credentials: None,
            fallbacks: Vec::new(),
            rotate_rate_limits: false,
            guard: Default::default(),
            extra_tools: None,
            clock,
            session_id: None,
            runtime: None,
            checkpoints: None,
            subagents: None,
        };
        let mut history = Vec::new();
        push_user(&mut history, vec![Content::text("a")], time_line(&config));
        std::fs::write(&file, "2026-11-24T10:00:00Z").unwrap();
        push_user(&mut history, vec![Content::text("b")], time_line(&config));
        let texts: Vec<String> = convert_to_llm(history)
            .into_iter()
            .flat_map(|m| match m {
                Message::User { content } => content,
                _ => Vec::new(),
            })
            .filter_map(|c| match c {
                Content::Text { text } => Some(text),
                Content::Image { .. } => None,
            })
            .collect();
        assert_eq!(texts.len(), 4);
        assert!(texts[1].starts_with("Current time: 2026-11-2"), "{texts:?}");
        assert_ne!(texts[1], texts[3]);
    }
}
