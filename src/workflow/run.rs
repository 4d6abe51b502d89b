//! Running a workflow: the framework walks the graph ([`super::path`]);
//! tool steps go through the agent's one tool path
//! ([`crate::agent::run_tool_call`]: policy, loop detection, hooks, the
//! permission question), llm steps stream from the model with the agent's
//! retries, and every step reports to the host like the agent loop does,
//! so an editor sees tool calls and streamed text.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::path::{self, State};
use super::template::{render, render_value};
use super::{Step, StepKind, Workflow};
use crate::agent::{
    AgentConfig, AgentEvent, AgentHost, AgentMessage, Answer, Fallback, Run, RunStop, Runtime,
};
use crate::llm::{Content, LlmError, Message, Model, Request, Secret};
use crate::tools::{Tool, ToolOutput};

/// How deep workflows may run each other.
const MAX_DEPTH: usize = 8;

/// Why a run stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("step `{step}`: {message}")]
    Step { step: String, message: String },
    #[error("step `{step}`: the model call failed: {error}")]
    Model { step: String, error: LlmError },
    #[error("the run used up its budget of {budget} steps at step `{step}`")]
    Budget { budget: u32, step: String },
    #[error("step `{step}`: {message}")]
    Loop { step: String, message: String },
    #[error("the run was cancelled")]
    Cancelled,
}

/// Finds a model an llm step names, with its credential.
pub type ModelLookup<'a> = dyn Fn(&str) -> Option<(Model, Option<Secret>)> + Send + Sync + 'a;

/// A step at work: its output and whether it failed.
type Work<'a> = BoxFuture<'a, Result<(Value, bool), RunError>>;

/// Everything a run works with.
pub struct Runner<'a> {
    pub client: &'a reqwest::Client,
    /// The session's agent config: its model (for llm steps without a
    /// model of their own), credentials, tool policy and permissions.
    pub config: &'a AgentConfig,
    pub tools: &'a [Arc<dyn Tool>],
    pub cwd: &'a std::path::Path,
    pub host: &'a dyn AgentHost,
    pub cancel: &'a CancellationToken,
    /// Workflows a `workflow` step may run, by name.
    pub workflows: &'a BTreeMap<String, Workflow>,
    /// A model named by an llm step, with its credential.
    pub model: &'a ModelLookup<'a>,
    /// Told when each step starts and ends (the plan, the transcript).
    pub on_step: &'a (dyn Fn(StepEvent<'_>) + Send + Sync),
    /// The steps an earlier, interrupted run of the same workflow and
    /// inputs finished, in order: each is taken once, in its turn, instead
    /// of running the step again; the path they took is taken again, as it
    /// is decided by the outputs.
    pub recorded: &'a parking_lot::Mutex<Vec<Recorded>>,
}

/// A step an interrupted run finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub step: String,
    pub output: Value,
    pub error: bool,
}

/// What a run reports as it goes.
#[derive(Clone, Copy, Debug)]
pub enum StepEvent<'r> {
    Started { workflow: &'r str, step: &'r str },
    Finished(&'r StepRecord),
}

/// What one executed step did, for the transcript and the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct StepRecord {
    pub workflow: String,
    pub step: String,
    pub kind: &'static str,
    /// The rendered parameters, prompt or inputs.
    pub input: Value,
    pub output: Value,
    pub error: bool,
}

impl StepRecord {
    /// The transcript entry of this step in run `run`.
    pub fn entry(&self, run: &str) -> Value {
        serde_json::json!({"event": "step", "run": run, "workflow": self.workflow,
            "step": self.step, "kind": self.kind, "input": self.input,
            "output": self.output, "error": self.error})
    }
}

/// The transcript entry that starts run `run` of `workflow`.
pub fn start_entry(run: &str, workflow: &str, inputs: &Value) -> Value {
    serde_json::json!({"event": "start", "run": run, "workflow": workflow, "inputs": inputs})
}

/// The transcript entry that ends run `run`.
pub fn end_entry(run: &str, result: &Result<Finished, RunError>) -> Value {
    match result {
        Ok(finished) => serde_json::json!({"event": "end", "run": run, "ok": true,
            "steps": finished.steps, "output": finished.output}),
        Err(RunError::Cancelled) => {
            serde_json::json!({"event": "end", "run": run, "ok": false, "error": "cancelled"})
        }
        Err(e) => {
            serde_json::json!({"event": "end", "run": run, "ok": false, "error": e.to_string()})
        }
    }
}

/// A workflow run a killed process left behind, as its session's
/// transcript recorded it (`crate::session` reads it back).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UnfinishedWorkflow {
    pub run: String,
    pub workflow: String,
    pub inputs: serde_json::Value,
    /// Its finished steps, in order: (step id, output, error).
    pub steps: Vec<(String, serde_json::Value, bool)>,
}

impl Recorded {
    /// The finished steps of a run a killed process left behind.
    pub fn of(unfinished: &UnfinishedWorkflow) -> Vec<Recorded> {
        unfinished
            .steps
            .iter()
            .map(|(step, output, error)| Recorded {
                step: step.clone(),
                output: output.clone(),
                error: *error,
            })
            .collect()
    }
}

/// The result of a run: the last step's output and every step's.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub output: Value,
    pub state: State,
    pub steps: u32,
}

impl Runner<'_> {
    /// Runs `workflow` with `inputs` (already bound) to its end.
    pub async fn run(&self, workflow: &Workflow, inputs: Value) -> Result<Finished, RunError> {
        self.run_at(workflow, inputs, 0).await
    }

    fn run_at<'s>(
        &'s self,
        workflow: &'s Workflow,
        inputs: Value,
        depth: usize,
    ) -> BoxFuture<'s, Result<Finished, RunError>> {
        Box::pin(async move {
            let steps = workflow.all_steps();
            let mut state = State::new(inputs);
            let mut executed = 0u32;
            let mut last = Value::Null;
            let mut current = workflow.steps.first().map(|s| s.id.as_str());
            while let Some(id) = current {
                if self.cancel.is_cancelled() {
                    return Err(RunError::Cancelled);
                }
                let Some(step) = steps.get(id) else {
                    return Err(RunError::Step {
                        step: id.to_string(),
                        message: "no such step".to_string(),
                    });
                };
                let cost = match &step.kind {
                    StepKind::Parallel { steps } => 1 + steps.len() as u32,
                    _ => 1,
                };
                if executed + cost > workflow.budget {
                    return Err(RunError::Budget {
                        budget: workflow.budget,
                        step: id.to_string(),
                    });
                }
                executed += cost;
                match &step.kind {
                    StepKind::Condition { .. } => {
                        let held = path::condition_output(step, &state).map_err(|message| {
                            RunError::Step {
                                step: id.to_string(),
                                message,
                            }
                        })?;
                        (self.on_step)(StepEvent::Started {
                            workflow: &workflow.name,
                            step: id,
                        });
                        (self.on_step)(StepEvent::Finished(&StepRecord {
                            workflow: workflow.name.clone(),
                            step: id.to_string(),
                            kind: "condition",
                            input: Value::Null,
                            output: held.clone(),
                            error: false,
                        }));
                        state.record(id, held, false);
                    }
                    StepKind::Parallel { steps: inner } => {
                        (self.on_step)(StepEvent::Started {
                            workflow: &workflow.name,
                            step: id,
                        });
                        let context = state.context();
                        let runs = inner
                            .iter()
                            .map(|s| self.step(workflow, s, &context, depth));
                        let results = futures::future::join_all(runs).await;
                        for (inner, result) in inner.iter().zip(results) {
                            let (output, error) = result?;
                            state.record(&inner.id, output, error);
                        }
                        state.record(id, Value::Null, false);
                        (self.on_step)(StepEvent::Finished(&StepRecord {
                            workflow: workflow.name.clone(),
                            step: id.to_string(),
                            kind: "parallel",
                            input: Value::Null,
                            output: Value::Null,
                            error: false,
                        }));
                    }
                    _ => {
                        let (output, error) =
                            self.step(workflow, step, &state.context(), depth).await?;
                        last = output.clone();
                        state.record(id, output, error);
                    }
                }
                current = path::next(step, &state).map_err(|message| RunError::Step {
                    step: id.to_string(),
                    message,
                })?;
            }
            Ok(Finished {
                output: last,
                state,
                steps: executed,
            })
        })
    }

    /// Runs one tool, llm or workflow step within its timeout: its output
    /// and whether it failed.
    async fn step(
        &self,
        workflow: &Workflow,
        step: &Step,
        context: &Value,
        depth: usize,
    ) -> Result<(Value, bool), RunError> {
        let fail = |message: String| RunError::Step {
            step: step.id.clone(),
            message,
        };
        // A step an interrupted run finished: its output stands (only at
        // the top level: a sub-workflow runs again as a whole).
        if depth == 0 {
            let mut recorded = self.recorded.lock();
            if let Some(at) = recorded.iter().position(|r| r.step == step.id) {
                let done = recorded.remove(at);
                return Ok((done.output, done.error));
            }
        }
        (self.on_step)(StepEvent::Started {
            workflow: &workflow.name,
            step: &step.id,
        });
        let (input, work): (Value, Work<'_>) = match &step.kind {
            StepKind::Tool { tool, params } => {
                let params = render_value(params, context).map_err(fail)?;
                (params.clone(), Box::pin(self.tool(step, tool, params)))
            }
            StepKind::Llm {
                prompt,
                model,
                schema,
            } => {
                let prompt = match render(prompt, context).map_err(fail)? {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                (
                    Value::String(prompt.clone()),
                    Box::pin(self.llm(step, prompt, model.as_deref(), schema.as_ref())),
                )
            }
            StepKind::Workflow {
                workflow: name,
                inputs,
            } => {
                let Some(inner) = self.workflows.get(name) else {
                    return Err(fail(format!("unknown workflow `{name}`")));
                };
                if depth + 1 >= MAX_DEPTH {
                    return Err(fail(format!(
                        "workflows run each other more than {MAX_DEPTH} deep"
                    )));
                }
                let mut given = serde_json::Map::new();
                for (key, value) in inputs {
                    given.insert(key.clone(), render_value(value, context).map_err(fail)?);
                }
                // Defaults for what the step does not give.
                for (key, input) in &inner.inputs {
                    if !given.contains_key(key)
                        && let Some(default) = &input.default
                    {
                        given.insert(key.clone(), default.clone());
                    }
                }
                let given = Value::Object(given);
                (
                    given.clone(),
                    Box::pin(async move {
                        let finished = self.run_at(inner, given, depth + 1).await?;
                        Ok((finished.output, false))
                    }),
                )
            }
            StepKind::Condition { .. } | StepKind::Parallel { .. } => {
                return Err(fail("not a step that runs on its own".to_string()));
            }
        };
        // A timeout too long for a `Duration` is no limit at all (the
        // checks let any positive, finite number through).
        let limit = step.timeout.and_then(|seconds| {
            Duration::try_from_secs_f64(seconds)
                .ok()
                .map(|d| (seconds, d))
        });
        let result = match limit {
            Some((seconds, limit)) => match tokio::time::timeout(limit, work).await {
                Ok(result) => result,
                Err(_) => Ok((
                    Value::String(format!("The step timed out after {seconds} s.")),
                    true,
                )),
            },
            None => work.await,
        };
        let (output, error) = result?;
        (self.on_step)(StepEvent::Finished(&StepRecord {
            workflow: workflow.name.clone(),
            step: step.id.clone(),
            kind: step.kind.name(),
            input,
            output: output.clone(),
            error,
        }));
        Ok((output, error))
    }

    /// A fixed tool call, through the agent's tool path.
    async fn tool(
        &self,
        step: &Step,
        tool: &str,
        params: Value,
    ) -> Result<(Value, bool), RunError> {
        let call = crate::llm::ToolCall {
            id: format!("wf_{}_{}", step.id, uuid::Uuid::new_v4().simple()),
            name: tool.to_string(),
            arguments: params,
            arguments_error: None,
        };
        let mut all: Vec<Arc<dyn Tool>> = self.tools.to_vec();
        if let Some(source) = &self.config.extra_tools {
            all.extend(source.tools().await);
        }
        let (output, breaker) =
            crate::agent::run_tool_call(self.config, &all, self.cwd, &call, self.host, self.cancel)
                .await;
        if self.cancel.is_cancelled() {
            return Err(RunError::Cancelled);
        }
        // The loop detector's breaker stops the run as it stops a turn; a
        // call it only blocked is an error output the path may act on.
        if let Some(message) = breaker {
            return Err(RunError::Loop {
                step: step.id.clone(),
                message,
            });
        }
        Ok((Value::String(output_text(&output)), output.is_error))
    }

    /// A model call; with a schema the answer is JSON that satisfies it,
    /// asked for again once with the validation error.
    async fn llm(
        &self,
        step: &Step,
        prompt: String,
        model: Option<&str>,
        schema: Option<&Value>,
    ) -> Result<(Value, bool), RunError> {
        let config = match model {
            None => self.config.clone(),
            Some(name) => {
                let Some((model, key)) = (self.model)(name) else {
                    return Err(RunError::Step {
                        step: step.id.clone(),
                        message: format!("unknown model `{name}`"),
                    });
                };
                // The session's runtime runs the session's model only.
                AgentConfig {
                    model,
                    key,
                    credentials: None,
                    fallbacks: Vec::new(),
                    runtime: None,
                    ..self.config.clone()
                }
            }
        };
        let prompt = match schema {
            Some(schema) => format!(
                "{prompt}\n\nAnswer with one JSON value and nothing else. It must satisfy this JSON schema:\n{schema}"
            ),
            None => prompt,
        };
        let mut messages = vec![Message::User {
            content: vec![Content::text(prompt)],
        }];
        for attempt in 0..2 {
            let text = self.ask(&step.id, &config, &messages).await?;
            let Some(schema) = schema else {
                return Ok((Value::String(text), false));
            };
            match structured(&text, schema) {
                Ok(value) => return Ok((value, false)),
                Err(problem) if attempt == 0 => {
                    messages.push(Message::User {
                        content: vec![Content::text(format!(
                            "That answer is not valid: {problem}. Answer again with only the JSON value."
                        ))],
                    });
                    // The model sees its own answer before the correction.
                    let at = messages.len() - 1;
                    messages.insert(
                        at,
                        Message::Assistant(crate::llm::AssistantMessage {
                            content: vec![crate::llm::AssistantContent::Text { text }],
                            provider: config.model.provider.clone(),
                            api: config.model.api,
                            model: config.model.id.clone(),
                            auth_profile: None,
                            stop_reason: crate::llm::StopReason::Stop,
                            error_message: None,
                            usage: Default::default(),
                        }),
                    );
                }
                Err(problem) => {
                    return Err(RunError::Step {
                        step: step.id.clone(),
                        message: format!("the answer did not satisfy the schema twice: {problem}"),
                    });
                }
            }
        }
        unreachable!("the loop returns")
    }

    /// One streamed model call; its text. A session on another runtime
    /// (Claude Code) has it answered there, in a conversation of its own;
    /// when that runtime cannot answer, pincer's own call does, as it
    /// would the session's turn.
    async fn ask(
        &self,
        step: &str,
        config: &AgentConfig,
        messages: &[Message],
    ) -> Result<String, RunError> {
        let Some(runtime) = config.runtime.as_ref().and_then(|r| r.detached()) else {
            return self.ask_native(step, config, messages).await;
        };
        match self
            .ask_runtime(step, config, runtime.as_ref(), messages)
            .await
        {
            Ok(answer) => answer,
            Err(fallback) => {
                self.host.emit(AgentEvent::Failover {
                    text: fallback.notice,
                });
                let native = AgentConfig {
                    model: fallback.model,
                    key: fallback.key,
                    auth_profile: fallback.auth_profile,
                    runtime: None,
                    ..config.clone()
                };
                self.ask_native(step, &native, messages).await
            }
        }
    }

    /// The call through `runtime`, with no tools; `Err`: it could not
    /// answer and pincer's own call should.
    async fn ask_runtime(
        &self,
        step: &str,
        config: &AgentConfig,
        runtime: &dyn Runtime,
        messages: &[Message],
    ) -> Result<Result<String, RunError>, Fallback> {
        let config = AgentConfig {
            extra_tools: None,
            ..config.clone()
        };
        let mut history: Vec<AgentMessage> = messages
            .iter()
            .cloned()
            .map(|message| AgentMessage::Llm { message })
            .collect();
        let host = Detached(self.host);
        let run = Run {
            client: self.client,
            config: &config,
            tools: &[],
            cwd: self.cwd,
            host: &host,
            cancel: self.cancel,
        };
        let stop = runtime.run(run, &mut history).await?;
        let text = history
            .iter()
            .rev()
            .find_map(|entry| match entry {
                AgentMessage::Llm {
                    message: Message::Assistant(answer),
                } => Some(answer.text()),
                _ => None,
            })
            .unwrap_or_default();
        Ok(match stop {
            RunStop::EndTurn | RunStop::MaxTokens => Ok(text),
            RunStop::Cancelled => Err(RunError::Cancelled),
            RunStop::Failed(error) => Err(RunError::Model {
                step: step.to_string(),
                error,
            }),
            RunStop::Refusal => Err(RunError::Step {
                step: step.to_string(),
                message: "the model refused to answer".to_string(),
            }),
            other => Err(RunError::Step {
                step: step.to_string(),
                message: format!("the model's turn ended without an answer ({other:?})"),
            }),
        })
    }

    /// One streamed call of pincer's own; its text.
    async fn ask_native(
        &self,
        step: &str,
        config: &AgentConfig,
        messages: &[Message],
    ) -> Result<String, RunError> {
        let request = Request {
            system: config.system_prompt.clone(),
            messages: messages.to_vec(),
            tools: Vec::new(),
            thinking: config.thinking,
            max_tokens: None,
            cache_key: config.session_id.clone(),
            cache_retention: crate::llm::CacheRetention::for_ttl(config.prune.ttl),
        };
        self.host.emit(AgentEvent::TurnStart);
        let (message, error) = crate::agent::stream_with_retries(
            self.client,
            config,
            &request,
            self.host,
            self.cancel,
        )
        .await;
        let usage = message.usage;
        let text = message.text();
        self.host.emit(AgentEvent::MessageEnd(Box::new(message)));
        self.host.emit(AgentEvent::TurnEnd {
            context_tokens: usage.context_tokens(),
            context_window: config.model.context_window,
            usage,
        });
        if self.cancel.is_cancelled() {
            return Err(RunError::Cancelled);
        }
        match error {
            Some(error) => Err(RunError::Model {
                step: step.to_string(),
                error,
            }),
            None => Ok(text),
        }
    }
}

/// The step's host for a runtime's call: the session's, except that the
/// runtime's own conversation is not the session's to record or resume.
struct Detached<'a>(&'a dyn AgentHost);

impl AgentHost for Detached<'_> {
    fn emit(&self, event: AgentEvent) {
        if !matches!(event, AgentEvent::Runtime { .. }) {
            self.0.emit(event);
        }
    }

    fn request_permission<'a>(
        &'a self,
        call: &'a crate::llm::ToolCall,
        info: &'a crate::tools::CallInfo,
        reason: &'a str,
        preview: Vec<crate::tools::Display>,
    ) -> BoxFuture<'a, Answer> {
        self.0.request_permission(call, info, reason, preview)
    }

    fn request_permission_at<'a>(
        &'a self,
        call: &'a crate::llm::ToolCall,
        info: &'a crate::tools::CallInfo,
        reason: &'a str,
        preview: Vec<crate::tools::Display>,
        place: crate::agent::Place,
    ) -> BoxFuture<'a, Answer> {
        self.0
            .request_permission_at(call, info, reason, preview, place)
    }

    fn workspace(&self) -> Arc<dyn crate::tools::Workspace> {
        self.0.workspace()
    }
}

/// The text of a tool's output.
fn output_text(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text.as_str()),
            Content::Image { .. } => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The JSON in a model's answer (a fenced block or the whole text),
/// checked against `schema`, a step's, which was checked when its
/// workflow loaded.
pub fn structured(text: &str, schema: &Value) -> Result<Value, String> {
    let trimmed = text.trim();
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(trimmed)
        .trim();
    let value: Value = serde_json::from_str(body).map_err(|e| format!("it is not JSON ({e})"))?;
    let validator = crate::json_schema::Schema::known_valid(schema)
        .map_err(|e| format!("the schema is invalid: {e}"))?;
    let problems = validator.problems(&value);
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(problems.join("; "))
    }
}

/// An output for display: text as it is, anything else as JSON.
pub fn shown(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
