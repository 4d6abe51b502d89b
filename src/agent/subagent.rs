//! Helpers: the `task` tool hands a self-contained job to a child session
//! with a context of its own, and returns the child's final answer.
//!
//! A child runs in this process, through the same loop as its parent
//! ([`super::run`]), and never has more than its parent: the parent's
//! permissions (its mode, remembered answers and sandbox: the same
//! object), its tool policy narrowed by the definition's `tools`, its
//! hooks, loop thresholds and MCP servers. Its questions go to the same
//! user, naming the helper. Its cancel token is a child of the parent's
//! call, so cancelling the parent ends every child and its commands; a
//! frontend may also cancel one child alone ([`ChildSession::cancel`]),
//! whose result then says so.
//!
//! The frontend decides where a child lives ([`Children`]): the editor's
//! sessions (`acp`), which store it as a session of its own and show it
//! as an ACP subagent session to clients that opted in, or `pincer run`.
//! [`Relay`] is the child's host: it hands the child's events to its
//! session and a running summary to the parent's `task` call.

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{AgentConfig, AgentEvent, AgentHost, AgentMessage, Answer, Place, RunStop};
use crate::context::agents::Definition;
use crate::llm::{Content, Message, Model, Secret, ThinkingLevel, ToolCall};
use crate::tools::{CallInfo, Display, Tool, ToolContext, ToolKind, ToolOutput};

/// The tool's name.
pub const TASK: &str = "task";

/// The name of the helper used when the model names none.
pub const GENERAL: &str = "general-purpose";

/// The model a helper's definition names, ready to call.
#[derive(Clone)]
pub struct Chosen {
    pub model: Model,
    pub key: Option<Secret>,
    pub auth_profile: Option<String>,
}

/// Resolves a definition's `model` (an alias or `provider/model`).
pub type Resolver = dyn Fn(&str) -> Result<Chosen, String> + Send + Sync;

/// What a session's runs need to start helpers.
pub struct Subagents {
    pub http: reqwest::Client,
    pub definitions: Arc<Vec<Definition>>,
    /// `task` calls of one message running at the same time.
    pub max_parallel: usize,
    /// How deep helpers nest; a session at this depth gets no `task` tool.
    pub max_depth: u32,
    /// This session's depth: 0 for the user's, 1 for its helpers, …
    pub depth: u32,
    pub children: Arc<dyn Children>,
    pub resolve: Arc<Resolver>,
    /// Where helpers started with `background: true` live after the
    /// turn; `None`: the session cannot keep work going (a headless run).
    pub background: Option<Arc<dyn Background>>,
}

/// A session's life beyond its turns, for background helpers.
pub trait Background: Send + Sync {
    fn jobs(&self) -> Arc<crate::tools::jobs::Jobs>;
    /// A host for work that goes on after the turn: questions still reach
    /// the user.
    fn host(&self) -> Arc<dyn AgentHost>;
}

impl std::fmt::Debug for Subagents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subagents")
            .field("definitions", &self.definitions.len())
            .field("max_parallel", &self.max_parallel)
            .field("max_depth", &self.max_depth)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

impl Subagents {
    /// Whether a session at this depth may start helpers.
    pub fn may_delegate(&self) -> bool {
        self.depth < self.max_depth
    }
}

/// A child about to be opened.
#[derive(Clone, Debug)]
pub struct ChildSpec {
    /// The definition's name, or [`GENERAL`].
    pub agent: String,
    /// The model's short description of the job (the child's title).
    pub description: String,
    pub prompt: String,
    /// The parent's `task` call that started it.
    pub parent_call: String,
    pub model: String,
    pub depth: u32,
    /// It runs in the background: its parent's turn does not wait for it.
    pub background: bool,
}

/// Where a frontend keeps its helpers.
pub trait Children: Send + Sync {
    /// Opens a child session for `spec`; its work stops when `cancel`
    /// (the parent's call) is cancelled.
    fn open(
        &self,
        spec: &ChildSpec,
        cancel: &CancellationToken,
    ) -> Result<Arc<dyn ChildSession>, String>;
}

/// One child session as its frontend keeps it.
pub trait ChildSession: Send + Sync {
    /// The child's own host: its events go to its transcript (and its own
    /// view where the client shows helpers), its questions to the user
    /// under its id.
    fn host(&self) -> &dyn AgentHost;
    fn id(&self) -> String;
    /// Whether the client shows the child as a session of its own: its
    /// questions are then asked there.
    fn shown(&self) -> bool;
    /// The child's own token, a child of the parent call's: cancelling
    /// it (the user cancelled this helper) ends only the child.
    fn cancel_token(&self) -> CancellationToken;
    /// Where this child's own helpers live.
    fn children(&self) -> Arc<dyn Children>;
    /// The child's run ended.
    fn finish(&self, outcome: &Outcome);
}

/// How a child's run ended, for its frontend and its parent.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub stop: RunStop,
    /// Its last answer (empty when it gave none).
    pub answer: String,
    pub turns: u32,
    pub cost: f64,
    /// Cancelled on its own (not with its parent).
    pub cancelled_alone: bool,
}

/// The `task` tool as the model sees it; the loop runs its calls
/// ([`run`]), several of one message at the same time.
pub struct TaskTool {
    description: String,
    parameters: Arc<Value>,
}

impl TaskTool {
    /// The tool, listing the helpers `definitions` offer.
    pub fn new(definitions: &[Definition], background: bool) -> Self {
        let mut description = String::from(
            "Hand a self-contained job to a helper agent that works on it with its own context \
             and the same tools, and returns its final answer (its intermediate steps stay out of \
             your context). Use it for broad searches, independent investigations or changes that \
             can go on side by side: several task calls in one message run at the same time. Give \
             the helper everything it needs in `prompt`; it cannot see this conversation. Say \
             whether it should change files or only report.",
        );
        if definitions.is_empty() {
            description.push_str(" No specialised helpers are defined; omit `agent`.");
        } else {
            description.push_str(
                "\n\nHelpers (`agent`; omit it for a general-purpose one that has your tools):",
            );
            for definition in definitions {
                description.push_str(&format!(
                    "\n- {}: {}",
                    definition.name, definition.description
                ));
            }
        }
        let names: Vec<&str> = definitions.iter().map(|d| d.name.as_str()).collect();
        let mut agent = json!({
            "type": "string",
            "description": "Which helper runs the job (default: a general-purpose one)."
        });
        if !names.is_empty() {
            agent["enum"] = json!(names);
        }
        let parameters = json!({
            "type": "object",
            "properties": {
                "description": {
                    "type": "string",
                    "description": "A short title for the job (3-7 words)."
                },
                "prompt": {
                    "type": "string",
                    "description": "The job, complete: what to do, where, and what to answer with."
                },
                "agent": agent,
            },
            "required": ["description", "prompt"],
            "additionalProperties": false
        });
        let mut parameters = parameters;
        if background {
            parameters["properties"]["background"] = json!({
                "type": "boolean",
                "description": "Run it in the background: the call returns at once with a task id, and the helper's answer arrives in a later message when it finishes. For long jobs you need not wait for."
            });
            description.push_str(
                "\n\nWith `background: true` the helper works on after your turn; its answer comes to you in a later message.",
            );
        }
        Self {
            description,
            parameters: Arc::new(parameters),
        }
    }
}

impl Tool for TaskTool {
    fn name(&self) -> &str {
        TASK
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Arc<Value> {
        self.parameters.clone()
    }

    fn describe(&self, args: &Value, _cwd: &std::path::Path) -> CallInfo {
        let description = args
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("a job");
        let title = match args.get("agent").and_then(Value::as_str) {
            Some(agent) => format!("Helper `{agent}`: {description}"),
            None => format!("Helper: {description}"),
        };
        CallInfo {
            title,
            kind: ToolKind::Think,
            locations: Vec::new(),
        }
    }

    /// The helper asks for whatever it does that changes anything.
    fn mutating(&self) -> bool {
        false
    }

    /// Its helper's calls are recorded in the window of the whole batch of
    /// `task` calls (see the loop), not each on its own.
    fn may_change_files(&self) -> bool {
        false
    }

    fn execute<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async {
            ToolOutput::error(
                "Helpers cannot start here: this session has no way to run them.".to_string(),
            )
        })
    }
}

/// The parsed arguments of a `task` call.
struct Job {
    description: String,
    prompt: String,
    agent: Option<String>,
    background: bool,
}

fn job(args: &Value) -> Result<Job, String> {
    let text = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    Ok(Job {
        description: text("description")
            .ok_or("`description` is required: a short title for the job")?,
        prompt: text("prompt").ok_or("`prompt` is required: the whole job for the helper")?,
        agent: text("agent").filter(|a| a != GENERAL),
        background: args.get("background").and_then(Value::as_bool) == Some(true),
    })
}

/// What every helper is told about its place, before its definition's
/// own instructions.
const HELPER_PROMPT: &str = "# You are a helper\n\nAnother agent (your parent) handed you the job \
in the next message. Work on it on your own with your tools: nobody reads your messages while \
you work, and your parent sees only your final answer. End with that answer, complete: what you \
found or did, with file paths, and anything left undone. Ask the user only if you cannot go on \
without an answer.";

/// Runs one `task` call: a child session for the job, to its end. The
/// parent's `tools` are the ones the child may have (narrowed here).
/// (A boxed future: the child's run contains its own calls' futures.)
pub(crate) fn run<'a>(
    config: &'a AgentConfig,
    tools: &'a [Arc<dyn Tool>],
    cwd: &'a std::path::Path,
    call: &'a ToolCall,
    host: &'a dyn AgentHost,
    ctx: &'a ToolContext,
) -> BoxFuture<'a, ToolOutput> {
    Box::pin(run_child(config, tools, cwd, call, host, ctx))
}

async fn run_child(
    config: &AgentConfig,
    tools: &[Arc<dyn Tool>],
    cwd: &std::path::Path,
    call: &ToolCall,
    host: &dyn AgentHost,
    ctx: &ToolContext,
) -> ToolOutput {
    let Some(subagents) = config.subagents.clone() else {
        return ToolOutput::error("Helpers are not available in this session.");
    };
    if !subagents.may_delegate() {
        return ToolOutput::error(format!(
            "Helpers may not start helpers of their own beyond depth {}; do the job yourself.",
            subagents.max_depth
        ));
    }
    let job = match job(&call.arguments) {
        Ok(job) => job,
        Err(why) => return ToolOutput::error(why),
    };
    let definition = match &job.agent {
        None => None,
        Some(name) => match subagents.definitions.iter().find(|d| &d.name == name) {
            Some(definition) => Some(definition.clone()),
            None => {
                let known: Vec<&str> = subagents
                    .definitions
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect();
                return ToolOutput::error(format!(
                    "There is no helper `{name}`. Helpers: {}.",
                    if known.is_empty() {
                        "only the general-purpose one (omit `agent`)".to_string()
                    } else {
                        format!("{} (or omit `agent`)", known.join(", "))
                    }
                ));
            }
        },
    };
    let agent = definition
        .as_ref()
        .map_or(GENERAL.to_string(), |d| d.name.clone());
    let (child_config, child_tools) =
        match child_setup(config, &subagents, tools, definition.as_ref(), &agent) {
            Ok(setup) => setup,
            Err(why) => return ToolOutput::error(why),
        };
    let spec = ChildSpec {
        agent: agent.clone(),
        description: job.description.clone(),
        prompt: job.prompt.clone(),
        parent_call: call.id.clone(),
        model: child_config.model.full_id(),
        depth: subagents.depth + 1,
        background: job.background,
    };
    let background = match (&subagents.background, job.background) {
        (Some(background), true) => Some(background.clone()),
        (None, true) => {
            return ToolOutput::error(
                "Helpers cannot run in the background here (nothing is left to hear them after the run); run it without `background`.",
            );
        }
        (_, false) => None,
    };
    // Background helpers outlive their turn: a session keeps at most
    // `max_parallel` of them running, whatever its model asks for.
    if let Some(background) = &background {
        let running = background.jobs().running_of("subagent");
        if running >= subagents.max_parallel {
            return ToolOutput::error(format!(
                "{running} helpers already run in the background, the most this session allows; wait for one to finish, or run this one in the foreground."
            ));
        }
    }
    let title = format!("Helper `{agent}`: {}", job.description);
    let (job_id, cancel) = match &background {
        Some(background) => {
            let (id, cancel) = background.jobs().start("subagent", &title, None, &call.id);
            (Some(id), cancel)
        }
        None => (None, ctx.cancel.clone()),
    };
    let child = match subagents.children.open(&spec, &cancel) {
        Ok(child) => child,
        Err(why) => {
            if let (Some(background), Some(id)) = (&background, &job_id) {
                background
                    .jobs()
                    .finish(id, format!("The helper could not start: {why}"), true);
            }
            return ToolOutput::error(format!("The helper could not start: {why}"));
        }
    };
    let id = child.id();
    let mut child_config = child_config;
    child_config.session_id = Some(id.clone());
    child_config.subagents = Some(Arc::new(Subagents {
        depth: subagents.depth + 1,
        children: child.children(),
        http: subagents.http.clone(),
        definitions: subagents.definitions.clone(),
        max_parallel: subagents.max_parallel,
        max_depth: subagents.max_depth,
        resolve: subagents.resolve.clone(),
        background: subagents.background.clone(),
    }));
    let work = Work {
        http: subagents.http.clone(),
        config: child_config,
        tools: child_tools,
        cwd: cwd.to_path_buf(),
        child,
        agent: agent.clone(),
        description: job.description.clone(),
        prompt: job.prompt,
    };
    let (Some(background), Some(job_id)) = (background, job_id) else {
        let parent_cancel = ctx.cancel.clone();
        let outcome = work
            .drive(host, ctx.progress.clone(), move || {
                !parent_cancel.is_cancelled()
            })
            .await;
        return result(&agent, &id, &outcome);
    };
    // In the background: the call answers now; the helper's answer comes
    // through the session's jobs.
    let jobs = background.jobs();
    let host = background.host();
    let reported = jobs.clone();
    let reported_id = job_id.clone();
    let progress: crate::tools::Progress = Arc::new(move |display: Vec<Display>| {
        if let Some(Display::Text(text)) = display.first() {
            reported.progress(&reported_id, text);
        }
    });
    let finished_id = job_id.clone();
    let finished_agent = agent.clone();
    let finished_child = id.clone();
    tokio::spawn(async move {
        let outcome = work.drive(host.as_ref(), progress, || true).await;
        let output = result(&finished_agent, &finished_child, &outcome);
        if outcome.stop == RunStop::Cancelled {
            jobs.stopped(&finished_id, output.text());
        } else {
            jobs.finish(&finished_id, output.text(), output.is_error);
        }
    });
    let mut output = ToolOutput::ok(format!(
        "Started in the background as task {job_id} (helper `{agent}`, session {id}). Its answer will come in a later message when it finishes; go on with other work and do not wait or poll for it."
    ));
    output.details = json!({"sessionId": id, "agent": agent, "task": job_id, "background": true});
    output
}

/// A child's run, ready to go.
struct Work {
    http: reqwest::Client,
    config: AgentConfig,
    tools: Vec<Arc<dyn Tool>>,
    cwd: std::path::PathBuf,
    child: Arc<dyn ChildSession>,
    agent: String,
    description: String,
    prompt: String,
}

impl Work {
    /// Runs the child to its end; `alone` says, if it was cancelled,
    /// whether that was the child alone (not its parent with it).
    async fn drive(
        self,
        parent: &dyn AgentHost,
        progress: crate::tools::Progress,
        alone: impl Fn() -> bool,
    ) -> Outcome {
        let relay = Relay {
            child: self.child.clone(),
            parent,
            agent: self.agent.clone(),
            description: self.description.clone(),
            progress,
            summary: Mutex::new(Summary::default()),
        };
        relay.report();
        let cancel = self.child.cancel_token();
        let mut history: Vec<AgentMessage> = Vec::new();
        let run: BoxFuture<'_, RunStop> = Box::pin(super::run(
            &self.http,
            &self.config,
            &self.tools,
            &self.cwd,
            &mut history,
            vec![Content::text(self.prompt.clone())],
            &relay,
            &cancel,
        ));
        let stop = run.await;
        let answer = last_answer(&history);
        let (turns, cost) = {
            let summary = relay.summary.lock();
            (summary.turns, summary.cost)
        };
        let outcome = Outcome {
            cancelled_alone: stop == RunStop::Cancelled && alone(),
            stop,
            answer,
            turns,
            cost,
        };
        self.child.finish(&outcome);
        outcome
    }
}

/// The child's config and tools: the parent's, narrowed by the
/// definition.
fn child_setup(
    parent: &AgentConfig,
    subagents: &Subagents,
    tools: &[Arc<dyn Tool>],
    definition: Option<&Definition>,
    agent: &str,
) -> Result<(AgentConfig, Vec<Arc<dyn Tool>>), String> {
    let mut config = parent.clone();
    config.runtime = None;
    config.last_call = None;
    // Its calls are recorded in the parent's window around the task call.
    config.checkpoints = None;
    config.memory_dir = None;
    if let Some(definition) = definition {
        if let Some(model) = &definition.model {
            let chosen = (subagents.resolve)(model).map_err(|e| {
                format!("helper `{agent}` names model `{model}`, which cannot be used: {e}")
            })?;
            if chosen.model.provider != parent.model.provider {
                config.credentials = None;
            }
            config.model = chosen.model;
            config.key = chosen.key;
            config.auth_profile = chosen.auth_profile;
        }
        if let Some(level) = definition.thinking {
            config.thinking = level;
        }
    }
    if !config.model.reasoning {
        config.thinking = ThinkingLevel::Off;
    }
    let policy = match definition.and_then(|d| d.tools.as_ref()) {
        Some(list) => parent
            .guard
            .policy
            .for_helper(agent, list)
            .map_err(|e| format!("helper `{agent}` has a bad `tools` list: {e}"))?,
        None => parent.guard.policy.clone(),
    };
    config.guard = Arc::new(parent.guard.for_child(policy, ""));
    let mut prompt = parent.system_prompt.clone();
    prompt.push_str("\n\n");
    prompt.push_str(HELPER_PROMPT);
    if let Some(definition) = definition
        && !definition.prompt.is_empty()
    {
        prompt.push_str(&format!(
            "\n\n## Your role: {}\n\n{}",
            definition.name, definition.prompt
        ));
    }
    config.system_prompt = prompt;
    let deeper = subagents.depth + 1 < subagents.max_depth;
    // MCP tools come again from the config's tool source.
    let tools = tools
        .iter()
        .filter(|t| (t.name() != TASK || deeper) && !t.name().starts_with("mcp__"))
        .cloned()
        .collect();
    Ok((config, tools))
}

/// The text of the last assistant message that has some.
fn last_answer(history: &[AgentMessage]) -> String {
    history
        .iter()
        .rev()
        .find_map(|m| match m {
            AgentMessage::Llm {
                message: Message::Assistant(a),
            } if !a.text().trim().is_empty() => Some(a.text()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The `task` call's result for the parent's model.
fn result(agent: &str, id: &str, outcome: &Outcome) -> ToolOutput {
    let calls = if outcome.turns == 1 {
        "1 model call".to_string()
    } else {
        format!("{} model calls", outcome.turns)
    };
    let footer = format!(
        "helper `{agent}`, session {id}: {calls}, ${:.4}",
        outcome.cost
    );
    let details = json!({
        "sessionId": id,
        "agent": agent,
        "turns": outcome.turns,
        "cost": outcome.cost,
        "stop": stop_name(&outcome.stop),
    });
    let answer = outcome.answer.trim();
    let mut output = match &outcome.stop {
        RunStop::EndTurn | RunStop::MaxTokens => {
            let text = if answer.is_empty() {
                "(The helper finished without an answer.)"
            } else {
                answer
            };
            ToolOutput::ok(format!("{text}\n\n[{footer}]"))
        }
        RunStop::Cancelled if outcome.cancelled_alone => ToolOutput::error(format!(
            "The user stopped this helper before it finished.{}\n\n[{footer}]",
            partial(answer)
        )),
        RunStop::Cancelled => ToolOutput::error(format!(
            "Cancelled before the helper finished.{}\n\n[{footer}]",
            partial(answer)
        )),
        RunStop::Failed(error) => ToolOutput::error(format!(
            "The helper failed: {error}.{}\n\n[{footer}]",
            partial(answer)
        )),
        RunStop::MaxTurns => ToolOutput::error(format!(
            "The helper ran out of model calls before it finished.{}\n\n[{footer}]",
            partial(answer)
        )),
        RunStop::Refusal => ToolOutput::error(format!(
            "The model refused the helper's job.{}\n\n[{footer}]",
            partial(answer)
        )),
        RunStop::LoopDetected(why) | RunStop::Blocked(why) => ToolOutput::error(format!(
            "The helper was stopped: {why}{}\n\n[{footer}]",
            partial(answer)
        )),
    };
    output.details = details;
    output
}

fn partial(answer: &str) -> String {
    if answer.is_empty() {
        String::new()
    } else {
        format!(" What it said last:\n\n{answer}")
    }
}

/// The stop's name, as the transcript and ACP's `stopReason` spell it.
pub fn stop_name(stop: &RunStop) -> &'static str {
    match stop {
        RunStop::EndTurn | RunStop::LoopDetected(_) | RunStop::Blocked(_) => "end_turn",
        RunStop::MaxTokens => "max_tokens",
        RunStop::Refusal => "refusal",
        RunStop::Cancelled => "cancelled",
        RunStop::MaxTurns => "max_turn_requests",
        RunStop::Failed(_) => "error",
    }
}

/// What the parent's `task` call shows of a running child.
#[derive(Default)]
struct Summary {
    /// The child's recent steps, newest last.
    steps: Vec<String>,
    /// The start of what the model is saying now.
    saying: String,
    turns: u32,
    cost: f64,
    done: bool,
}

/// Steps kept in the summary.
const STEPS: usize = 5;
/// Characters of the child's text shown in the summary.
const SAYING: usize = 240;

/// The child's host: its session records and shows its events; the
/// parent's `task` call shows a running summary; questions go to the
/// same user, naming the helper.
pub struct Relay<'a> {
    child: Arc<dyn ChildSession>,
    parent: &'a dyn AgentHost,
    agent: String,
    description: String,
    progress: crate::tools::Progress,
    summary: Mutex<Summary>,
}

impl Relay<'_> {
    /// Sends the summary as the `task` call's content.
    fn report(&self) {
        let text = {
            let summary = self.summary.lock();
            let mut text = format!("Helper `{}`: {}", self.agent, self.description);
            for step in &summary.steps {
                text.push_str("\n- ");
                text.push_str(step);
            }
            if !summary.saying.is_empty() && !summary.done {
                text.push_str("\n\n");
                text.push_str(&summary.saying);
            }
            text
        };
        (self.progress)(vec![Display::Text(text)]);
    }

    fn note(&self, event: &AgentEvent) -> bool {
        let mut summary = self.summary.lock();
        match event {
            AgentEvent::ToolExecutionStart { info, .. } => {
                summary.steps.push(info.title.clone());
                if summary.steps.len() > STEPS {
                    summary.steps.remove(0);
                }
                summary.saying.clear();
                true
            }
            AgentEvent::TextDelta(text) if summary.saying.chars().count() < SAYING => {
                summary.saying.push_str(text);
                if summary.saying.chars().count() >= SAYING {
                    let cut: String = summary.saying.chars().take(SAYING).collect();
                    summary.saying = format!("{cut}…");
                    return true;
                }
                false
            }
            AgentEvent::MessageEnd(message) => {
                summary.turns += 1;
                summary.cost += message.usage.cost.total;
                true
            }
            AgentEvent::AgentEnd { .. } => {
                summary.done = true;
                true
            }
            _ => false,
        }
    }

    fn relabelled(&self, call: &ToolCall, info: &CallInfo) -> (ToolCall, CallInfo) {
        let verb = match info.kind {
            ToolKind::Execute => "run",
            ToolKind::Edit | ToolKind::Delete | ToolKind::Move => "change",
            _ => "use",
        };
        let info = CallInfo {
            title: format!("Helper `{}` wants to {verb}: {}", self.agent, info.title),
            ..info.clone()
        };
        let call = if self.child.shown() {
            call.clone()
        } else {
            // Asked under the parent's session: an id of its own, so that
            // it never updates a call of the parent's.
            ToolCall {
                id: format!("{}.{}", self.child.id(), call.id),
                ..call.clone()
            }
        };
        (call, info)
    }
}

impl AgentHost for Relay<'_> {
    fn emit(&self, event: AgentEvent) {
        if self.note(&event) {
            self.report();
        }
        self.child.host().emit(event);
    }

    fn request_permission<'a>(
        &'a self,
        call: &'a ToolCall,
        info: &'a CallInfo,
        reason: &'a str,
        preview: Vec<Display>,
    ) -> BoxFuture<'a, Answer> {
        self.request_permission_at(call, info, reason, preview, Place::Anywhere)
    }

    fn request_permission_at<'a>(
        &'a self,
        call: &'a ToolCall,
        info: &'a CallInfo,
        reason: &'a str,
        preview: Vec<Display>,
        place: Place,
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            let (call, info) = self.relabelled(call, info);
            let reason = if reason == info.title || reason.is_empty() {
                info.title.clone()
            } else {
                format!("helper `{}` asks: {reason}", self.agent)
            };
            let asked = if self.child.shown() {
                self.child
                    .host()
                    .request_permission_at(&call, &info, &reason, preview, place)
                    .await
            } else {
                self.parent
                    .request_permission_at(&call, &info, &reason, preview, place)
                    .await
            };
            // Withdrawing a helper's question stops the helper, not the
            // parent: its cancel token is its own.
            asked
        })
    }

    fn workspace(&self) -> Arc<dyn crate::tools::Workspace> {
        self.parent.workspace()
    }

    fn terminals(&self) -> Option<Arc<dyn crate::tools::Terminals>> {
        self.parent.terminals()
    }

    fn asker(&self) -> Option<Arc<dyn crate::tools::ask_user::AskUser>> {
        self.parent.asker()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_needs_a_description_and_a_prompt() {
        assert!(job(&json!({"prompt": "x"})).is_err());
        assert!(job(&json!({"description": "x", "prompt": "  "})).is_err());
        let parsed = job(&json!({"description": "d", "prompt": "p", "agent": GENERAL})).unwrap();
        assert_eq!(parsed.agent, None);
    }

    #[test]
    fn the_tool_lists_the_helpers_it_offers() {
        let definition = Definition {
            name: "reviewer".into(),
            description: "Reviews diffs".into(),
            model: None,
            tools: None,
            thinking: None,
            prompt: String::new(),
            path: "x.md".into(),
        };
        let tool = TaskTool::new(&[definition], false);
        assert!(tool.description().contains("- reviewer: Reviews diffs"));
        assert_eq!(
            tool.parameters()["properties"]["agent"]["enum"],
            json!(["reviewer"])
        );
        assert!(
            TaskTool::new(&[], false)
                .parameters()
                .pointer("/properties/agent/enum")
                .is_none()
        );
    }
}
